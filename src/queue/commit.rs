//! The dispatcher's committer: the changes its main loop makes ([`Intent`]s, sent in
//! [`Batch`]es) made durable in order, one store transaction for whatever arrived within
//! [`GROUP_WINDOW`] of the previous commit. The same [`apply`] builds the main loop's view of
//! the queue, so the view and the commits cannot disagree on what a change means.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::launch::{ToLaunch, prepare};
use super::ops::{self, Finish};
use super::options::Options;
use super::{Job, Layout, QueueDoc, State, changes};
use crate::store::{Document, Lock, Store, Tx};
use crate::time::Timestamp;

/// A change this dispatcher makes to the queue. The main loop applies it to its own view at
/// once; the committer thread makes it durable, in order, several wake-ups' worth per
/// transaction.
#[derive(Clone, Debug)]
pub(super) enum Intent {
    /// The process id of a job started under us.
    Pid { key: String, pid: u32 },
    /// A job of ours ended (or could not start).
    Finish {
        key: String,
        how: Finish,
        at: Timestamp,
    },
    /// A job the main loop launched before its start was committed (it leads the home's
    /// queue). Refused (and its process killed) if the commit finds it no longer ready.
    Start { key: String, at: Timestamp },
}

/// A commit that follows another within this window waits for the rest of it, gathering what
/// arrives meanwhile (only when no start waits for it).
const GROUP_WINDOW: Duration = Duration::from_millis(5);

/// What one wake-up hands the committer.
pub(super) struct Batch {
    pub(super) seq: u64,
    pub(super) intents: Vec<Intent>,
    /// Commit at once: it may start jobs, or nothing else runs to group it with.
    pub(super) urgent: bool,
    /// Slots for jobs the commit may start itself: jobs ready in the committed queue, which
    /// other dispatchers can see too, are only launched once their start is committed.
    pub(super) free: usize,
}

/// What a commit did, for the main loop.
pub(super) struct Committed {
    /// The last batch it included.
    pub(super) upto: u64,
    /// The queue as committed, when it differs from what the main loop's view has on top of
    /// its last base (someone else changed it, the commit started or refused jobs itself, or
    /// it archived a workspace). `None`: the view already holds it.
    pub(super) doc: Option<QueueDoc>,
    /// Jobs it started, prepared on disk: launch them.
    pub(super) launches: Vec<(ToLaunch, std::io::Result<()>)>,
    /// Launched jobs it refused to record as started (no longer ready: cancelled meanwhile).
    pub(super) revoked: Vec<String>,
    /// Ready jobs left that we could start (or queued ones that a running job may unblock).
    pub(super) more: bool,
    /// Ready jobs left that we could start.
    pub(super) ready_left: bool,
    pub(super) remaining: BTreeMap<String, usize>,
    /// State changes to show: (key, state, detail).
    pub(super) shown: Vec<(String, State, String)>,
}

/// Live jobs per state.
pub(super) fn count_states(doc: &QueueDoc) -> BTreeMap<String, usize> {
    // Counted in an array (a map entry per job costs more than the rest of a commit).
    const ALL: [State; 8] = [
        State::Queued,
        State::Ready,
        State::Running,
        State::Completed,
        State::Failed,
        State::TimedOut,
        State::Blocked,
        State::Cancelled,
    ];
    let mut n = [0usize; 8];
    for j in &doc.jobs {
        n[ALL.iter().position(|s| *s == j.state.state).unwrap_or(0)] += 1;
    }
    ALL.iter()
        .zip(n)
        .filter(|(_, k)| *k > 0)
        .map(|(s, k)| (s.as_str().into(), k))
        .collect()
}

/// Resolve a job's secrets from the environment or the secrets file, or name the first missing.
fn resolve_secrets(
    job: &Job,
    file_secrets: &BTreeMap<String, String>,
) -> std::result::Result<Vec<(String, String)>, String> {
    job.secrets
        .iter()
        .filter(|name| !super::guard::reserved(name))
        .map(|name| {
            std::env::var(name)
                .ok()
                .or_else(|| file_secrets.get(name).cloned())
                .map(|v| (name.clone(), v))
                .ok_or_else(|| name.clone())
        })
        .collect()
}

/// Every secret name any job or the secrets file knows (removed from what jobs inherit).
fn scrub_names(doc: &QueueDoc, file_secrets: &BTreeMap<String, String>) -> BTreeSet<String> {
    doc.jobs
        .iter()
        .flat_map(|j| j.secrets.iter().cloned())
        .chain(file_secrets.keys().cloned())
        .filter(|name| !super::guard::reserved(name))
        .collect()
}

/// Apply intents to a queue, as the commit does and as the main loop's view does. Returns the
/// `Start`s it refused.
pub(super) fn apply(
    doc: &mut QueueDoc,
    intents: &[Intent],
    me: &str,
    runner: &super::ran_with::RanWith,
    events: &mut Vec<crate::store::event::NewEvent>,
) -> Vec<String> {
    let mut refused = Vec::new();
    for i in intents {
        match i {
            Intent::Pid { key, pid } => ops::set_pid(doc, key, me, *pid),
            // Blocking for a missing secret needs no run of ours: only a job still ready (not,
            // say, cancelled by someone else meanwhile).
            Intent::Finish {
                key,
                how: how @ Finish::MissingSecret { .. },
                at,
            } => {
                if doc
                    .position_of(key)
                    .is_some_and(|i| doc.jobs[i].state.state == State::Ready)
                {
                    ops::finish(doc, key, me, how.clone(), *at, events);
                }
            }
            Intent::Finish { key, how, at } => ops::finish(doc, key, me, how.clone(), *at, events),
            Intent::Start { key, at } => {
                match doc
                    .position_of(key)
                    .filter(|i| ops::startable(doc, &doc.jobs[*i]))
                {
                    Some(i) => events.push(ops::start(doc, i, me, runner, *at)),
                    None => refused.push(key.clone()),
                }
            }
        }
    }
    refused
}

/// Start up to `free` of the ready jobs `wanted` accepts, highest priority first, then in submission order, for dispatcher
/// `me`: each `Start` is applied to `doc` (its events in `events`) and returned with what its
/// launch needs. A job whose secret is missing is blocked instead, naming it. The main loop
/// decides its launches with this on its view, the committer on the committed queue.
#[allow(clippy::too_many_arguments)]
pub(super) fn start_ready(
    doc: &mut QueueDoc,
    free: usize,
    wanted: &dyn Fn(&Job) -> bool,
    file_secrets: &BTreeMap<String, String>,
    me: &str,
    runner: &super::ran_with::RanWith,
    now: Timestamp,
    events: &mut Vec<crate::store::event::NewEvent>,
) -> (Vec<Intent>, Vec<ToLaunch>) {
    let mut intents = Vec::new();
    let mut launches = Vec::new();
    let mut scrub = None;
    for i in ops::ready(doc) {
        if launches.len() == free {
            break;
        }
        if !wanted(&doc.jobs[i]) {
            continue;
        }
        let key = doc.jobs[i].key();
        let (intent, secrets) = match resolve_secrets(&doc.jobs[i], file_secrets) {
            Err(name) => (
                Intent::Finish {
                    key,
                    how: Finish::MissingSecret { name },
                    at: now,
                },
                None,
            ),
            Ok(secrets) => (Intent::Start { key, at: now }, Some(secrets)),
        };
        // The job is ready at index `i`: record it directly (what `apply` would find).
        match &intent {
            Intent::Start { at, .. } => events.push(ops::start(doc, i, me, runner, *at)),
            Intent::Finish { key, how, at } => ops::finish(doc, key, me, how.clone(), *at, events),
            Intent::Pid { .. } => {}
        }
        intents.push(intent);
        if let Some(secrets) = secrets {
            let scrub = scrub
                .get_or_insert_with(|| scrub_names(doc, file_secrets))
                .clone();
            let job = doc.jobs[i].clone();
            launches.push(ToLaunch {
                prior: job.depends_on.clone(),
                job,
                secrets,
                scrub,
            });
        }
    }
    (intents, launches)
}

/// The committer thread: one store transaction per round of batches, each told to `out`
/// (false: nobody listens any more).
#[allow(clippy::too_many_arguments)]
pub(super) fn committer(
    store: &Store,
    me: &str,
    opts: &Options,
    layout: &Layout,
    file_secrets: &BTreeMap<String, String>,
    wanted: &(dyn Fn(&Job) -> bool + Sync),
    batches: mpsc::Receiver<Batch>,
    out: &dyn Fn(crate::error::Result<Committed>) -> bool,
    mut base: Option<BaseFiles>,
    lease: Option<&crate::store::Lease>,
) {
    let runner_name = &super::ran_with::RanWith::new(&opts.runner, &opts.agent_cmd);
    // The queue as this dispatcher last committed it, while nobody else changed it since
    // (see [`Persisted`]): a commit then records its changes in the change log.
    let mut persisted: Option<Persisted> = None;
    let mut last_commit: Option<Instant> = None;
    let mut made_dirs = BTreeSet::new();
    let home = store.home().dir().to_path_buf();
    let local = store.state_in_files();
    // Records appended to the change log since our last compaction.
    let mut log_has_records = false;
    while let Ok(first) = batches.recv() {
        let mut upto = first.seq;
        let mut intents = first.intents;
        let mut free = first.free;
        let mut urgent = first.urgent;
        // Group commit: while jobs end in quick succession, what arrives within GROUP_WINDOW of
        // the last commit goes in the next one (nothing waits for it: these jobs were
        // launched already).
        let group_until = last_commit.map(|t| t + GROUP_WINDOW);
        loop {
            let b = match group_until {
                Some(until) if !urgent => {
                    match batches.recv_timeout(until.saturating_duration_since(Instant::now())) {
                        Ok(b) => b,
                        Err(_) => break,
                    }
                }
                _ => match batches.try_recv() {
                    Ok(b) => b,
                    Err(_) => break,
                },
            };
            upto = b.seq;
            intents.extend(b.intents);
            free += b.free;
            urgent |= b.urgent;
        }
        let now = Timestamp::now();
        let mut held: Option<(std::fs::File, std::fs::File)> = None;
        let result = store.transaction(now, &[Lock::Queue], |tx| {
            // On a shared store, only while our lease holds: once it has expired, another host
            // may have taken our jobs, and nothing of ours may land beside its records.
            if let Some(l) = lease {
                tx.fence(l);
            }
            // Ours, unchanged since our last commit: no need to read (or parse) the queue.
            let kept = persisted.take().filter(|p| local && p.still_current(&home));
            let (mut doc, log) = match kept {
                Some(p) => {
                    held = Some((p.queue_file, p.log_file));
                    (p.doc, Some((p.log_len, p.base_len)))
                }
                None => (tx.read::<QueueDoc>()?, None),
            };
            let fresh = log.is_none();
            // The first commit: when the queue is still what the main loop's view was read
            // from, the view already holds what this commit reads, and needs no copy of it.
            let view_current = base.take().is_some_and(|b| local && b.unchanged(&home));
            let mut events = Vec::new();
            let revoked = apply(&mut doc, &intents, me, runner_name, &mut events);
            let (_, launches) = start_ready(
                &mut doc,
                free,
                wanted,
                file_secrets,
                me,
                runner_name,
                now,
                &mut events,
            );
            // Archive only when a completion may have finished a workspace (a scan of the
            // queue per commit, not a rebuild of it).
            let completed_ws: BTreeSet<&str> = intents
                .iter()
                .filter_map(|i| match i {
                    Intent::Finish {
                        key,
                        how: Finish::Completed { .. },
                        ..
                    } => key.split_once('/').map(|(ws, _)| ws),
                    _ => None,
                })
                .collect();
            let archivable = fresh
                || completed_ws.iter().any(|ws| {
                    doc.jobs
                        .iter()
                        .filter(|j| j.workspace == *ws)
                        .all(|j| j.state.is_final())
                });
            let archived = if archivable {
                ops::archive(&mut doc)
            } else {
                Vec::new()
            };
            // The archived jobs are not kept once written (they are most of the queue when a
            // big workspace ends).
            let archived = !archived.is_empty() && {
                super::archive::append(tx, store, archived)?;
                true
            };
            let ready_left = doc
                .jobs
                .iter()
                .any(|j| ops::startable(&doc, j) && wanted(j));
            let more = ready_left
                || (doc
                    .jobs
                    .iter()
                    .any(|j| j.state.state == State::Queued && wanted(j))
                    && doc.jobs.iter().any(|j| j.state.state == State::Running));
            let remaining = count_states(&doc);
            let shown: Vec<(String, State, String)> = events
                .iter()
                .filter(|e| e.event_type != ops::SUBMITTED)
                .map(|e| {
                    (
                        e.target.clone().unwrap_or_default(),
                        state_of_event(e.event_type),
                        describe(&e.payload),
                    )
                })
                .collect();
            doc.updated_at = now;
            let compact = match log {
                None => true,
                Some(_) if archived => true,
                Some((log_len, base_len)) => log_len > base_len.max(changes::COMPACT_MIN),
            };
            let written = if compact || !local {
                write_whole(tx, &doc, local)?
            } else {
                let (log_len, base_len) = log.expect("not compacting: the log is ours");
                let record = changes::Record {
                    at: now,
                    set: touched(&mut doc, &intents, &events),
                    archived: Vec::new(),
                };
                let line = changes::line(&record);
                let log_len = log_len + line.len() as u64 + 1;
                tx.append(changes::CHANGES, line)?;
                Written::Appended { log_len, base_len }
            };
            for e in events {
                tx.event(e);
            }
            // The main loop's view already holds what it sent; it needs the queue only when the
            // commit did more than that.
            let report = (fresh && !view_current)
                || !local
                || !launches.is_empty()
                || !revoked.is_empty()
                || archived;
            Ok((
                revoked, more, ready_left, remaining, shown, written, doc, launches, report,
            ))
        });
        let msg = match result {
            Ok((revoked, more, ready_left, remaining, shown, written, doc, launches, report)) => {
                let shared = report.then(|| doc.clone());
                log_has_records = matches!(written, Written::Appended { .. });
                persisted = match written {
                    Written::Remote => None,
                    Written::Compacted {
                        fingerprint,
                        base_len,
                        log_len,
                    } => Persisted::after_compaction(&home, doc, &fingerprint, base_len, log_len),
                    Written::Appended { log_len, base_len } => {
                        // Appends move no file: the ones held since the compaction are ours
                        // (checked again under the lock at the next commit).
                        held.take().map(|(queue_file, log_file)| Persisted {
                            doc,
                            queue_file,
                            log_file,
                            log_len,
                            base_len,
                        })
                    }
                };
                // Their files are made here, beside the main loop.
                let launches = launches
                    .into_iter()
                    .map(|l| {
                        let r = prepare(layout, &l, &opts.runner, &mut made_dirs);
                        (l, r)
                    })
                    .collect();
                Ok(Committed {
                    upto,
                    doc: shared,
                    launches,
                    revoked,
                    more,
                    ready_left,
                    remaining,
                    shown,
                })
            }
            Err(e) => Err(e),
        };
        last_commit = Some(Instant::now());
        let failed = msg.is_err();
        if !out(msg) || failed {
            return;
        }
    }
    // The run is over: fold the change log into `queue.json`, so that the queue at rest is
    // one file (one rewrite per run). Skipped when someone else changed the queue meanwhile
    // (their write folded the log already).
    if let Some(p) = persisted.filter(|_| log_has_records) {
        let folded: crate::error::Result<()> =
            store.transaction(Timestamp::now(), &[Lock::Queue], |tx| {
                if p.still_current(&home) {
                    write_whole(tx, &p.doc, true)?;
                }
                Ok(())
            });
        // Not folded (say, the disk is full): the log stays, and every reader folds it.
        drop(folded);
    }
}

/// Write the queue whole; on a file home with a new change log holding only its header.
fn write_whole(tx: &mut Tx<'_>, doc: &QueueDoc, local: bool) -> crate::error::Result<Written> {
    tx.write(doc)?;
    if !local {
        return Ok(Written::Remote);
    }
    let base = tx.staged::<QueueDoc>().unwrap_or_default();
    let (fingerprint, base_len) = (changes::fingerprint(base), base.len() as u64);
    let path = crate::store::HomePath::new(Lock::Queue, &[changes::CHANGES.name])?;
    let head = changes::header(&fingerprint);
    let log_len = head.len() as u64;
    tx.write_at(&path, head)?;
    Ok(Written::Compacted {
        fingerprint,
        base_len,
        log_len,
    })
}

/// The queue's files as they were when the main loop read its first view of the queue (file
/// store), held open: while `queue.json` is the same file (a writer replaces it whole; we hold
/// it, so its inode number cannot be reused) and the change log the same file of the same
/// length (or still absent), the queue is what the view was read from. Captured before that
/// read, so a change in between counts as a change.
pub(super) struct BaseFiles {
    queue_file: std::fs::File,
    log: Option<(std::fs::File, u64)>,
}

impl BaseFiles {
    /// The files of `home`'s queue now; `None` when there is no `queue.json` (or it cannot be
    /// opened): the first commit then hands its queue to the main loop, as any fresh one.
    pub(super) fn capture(home: &Path) -> Option<BaseFiles> {
        let queue_file = std::fs::File::open(home.join(<QueueDoc as Document>::FILE)).ok()?;
        let log = match std::fs::File::open(home.join(changes::CHANGES.name)) {
            Ok(f) => {
                let len = f.metadata().ok()?.len();
                Some((f, len))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return None,
        };
        Some(BaseFiles { queue_file, log })
    }

    /// True when `home`'s queue files are still the ones captured (the log of the same length).
    fn unchanged(&self, home: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let same = |held: &std::fs::File, name: &str| -> Option<(bool, u64)> {
            let a = held.metadata().ok()?;
            let b = std::fs::metadata(home.join(name)).ok()?;
            Some((a.ino() == b.ino() && a.dev() == b.dev(), b.len()))
        };
        let queue = matches!(
            same(&self.queue_file, <QueueDoc as Document>::FILE),
            Some((true, _))
        );
        let log = match &self.log {
            Some((f, len)) => {
                matches!(same(f, changes::CHANGES.name), Some((true, now)) if now == *len)
            }
            None => matches!(
                std::fs::metadata(home.join(changes::CHANGES.name)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound
            ),
        };
        queue && log
    }
}

/// How a commit wrote the queue.
enum Written {
    /// A shared store: the whole document (no change log).
    Remote,
    /// `queue.json` whole (`base_len` bytes of this fingerprint) and a new change log of
    /// `log_len` bytes (its header).
    Compacted {
        fingerprint: String,
        base_len: u64,
        log_len: u64,
    },
    /// One record appended; the log is now `log_len` bytes, on a `queue.json` of `base_len`.
    Appended { log_len: u64, base_len: u64 },
}

/// The queue as this dispatcher committed it, with the files it wrote held open: while
/// `queue.json` is still the file we wrote (the same inode: we hold it, so its number cannot be
/// reused) and the log still has our length, nobody else changed the queue.
struct Persisted {
    doc: QueueDoc,
    queue_file: std::fs::File,
    log_file: std::fs::File,
    log_len: u64,
    base_len: u64,
}

impl Persisted {
    /// After a compaction: hold `queue.json` and the log open, provided they are still what we
    /// wrote (someone may have replaced `queue.json` since our commit released the lock).
    fn after_compaction(
        home: &Path,
        doc: QueueDoc,
        fingerprint: &str,
        base_len: u64,
        log_len: u64,
    ) -> Option<Persisted> {
        use std::io::Read;
        let mut queue_file = std::fs::File::open(home.join(<QueueDoc as Document>::FILE)).ok()?;
        let mut bytes = Vec::with_capacity(base_len as usize);
        queue_file.read_to_end(&mut bytes).ok()?;
        if changes::fingerprint(&bytes) != fingerprint {
            return None;
        }
        drop(bytes);
        let log_file = std::fs::File::open(home.join(changes::CHANGES.name)).ok()?;
        Some(Persisted {
            doc,
            queue_file,
            log_file,
            log_len,
            base_len,
        })
        .filter(|p| p.still_current(home))
    }

    /// True when `queue.json` and the log are still the files we wrote, the log of the length
    /// we left it.
    fn still_current(&self, home: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let same = |held: &std::fs::File, name: &str| -> Option<(bool, u64)> {
            let a = held.metadata().ok()?;
            let b = std::fs::metadata(home.join(name)).ok()?;
            Some((a.ino() == b.ino() && a.dev() == b.dev(), b.len()))
        };
        matches!(
            same(&self.queue_file, <QueueDoc as Document>::FILE),
            Some((true, _))
        ) && matches!(same(&self.log_file, changes::CHANGES.name), Some((true, len)) if len == self.log_len)
    }
}

/// The jobs whose state a commit may have changed, as log entries: the jobs its intents and
/// events name, and the dependents of the jobs that ended (made ready without an event).
fn touched(
    doc: &mut QueueDoc,
    intents: &[Intent],
    events: &[crate::store::event::NewEvent],
) -> Vec<changes::SetState> {
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    for i in intents {
        match i {
            Intent::Pid { key, .. } | Intent::Start { key, .. } => keys.insert(key.as_str()),
            Intent::Finish { key, .. } => keys.insert(key.as_str()),
        };
    }
    for e in events {
        if let Some(t) = &e.target {
            keys.insert(t.as_str());
        }
    }
    let mut ended: Vec<(&str, &str)> = Vec::new();
    for i in intents {
        if let Intent::Finish { key, .. } = i
            && let Some((ws, id)) = key.split_once('/')
        {
            ended.push((ws, id));
        }
    }
    let mut at: BTreeSet<usize> = keys.iter().filter_map(|k| doc.position_of(k)).collect();
    if !ended.is_empty() {
        for (i, j) in doc.jobs.iter().enumerate() {
            if !j.depends_on.is_empty()
                && ended
                    .iter()
                    .any(|(ws, id)| j.workspace == *ws && j.depends_on.iter().any(|d| d == id))
            {
                at.insert(i);
            }
        }
    }
    at.into_iter()
        .map(|i| {
            let j = &doc.jobs[i];
            changes::SetState {
                workspace: j.workspace.clone(),
                id: j.id.clone(),
                state: j.state.clone(),
                ran_with: j.ran_with.clone(),
            }
        })
        .collect()
}

fn state_of_event(ty: &str) -> State {
    match ty {
        ops::STARTED => State::Running,
        ops::COMPLETED => State::Completed,
        ops::FAILED => State::Failed,
        ops::TIMED_OUT => State::TimedOut,
        ops::BLOCKED => State::Blocked,
        ops::CANCELLED => State::Cancelled,
        _ => State::Queued,
    }
}

fn describe(payload: &Value) -> String {
    payload
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_default()
}
