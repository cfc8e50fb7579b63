//! The dispatcher (`conductor queue run`): starts every ready job, and a dependent the moment
//! its last dependency completes.
//!
//! It never polls and never re-queues. Its main loop sleeps on one channel fed by (a) the
//! reaper thread, which waits for every child, so a job's exit wakes it at once, (b) the home
//! watcher on the event journal, so submissions, retries and cancels from other processes wake
//! it, (c) the committer thread, and (d) stop signals. The only timer is the nearest job
//! deadline (and, on a terminal, the once-a-second redraw of the progress display).
//!
//! Durability runs beside the loop rather than in it. Every change (an exit, a start, a pid) is
//! applied at once to the loop's own view of the queue and handed to the committer, which makes
//! them durable in order, one store transaction for whatever arrived within a few milliseconds
//! of its previous commit. On the file store one dispatcher leads a home's queue at a time
//! (`queue-lead.lock`), so its view is the truth unless someone else changes the queue (the
//! journal says so): it launches a ready job at once and the commit that records the start
//! follows. A start the commit finds no longer valid (cancelled meanwhile) is refused and its
//! process killed. With a shared store, or a view made stale by someone else, the commit
//! decides which jobs start and the loop launches them after it.
//!
//! A dispatcher that dies leaves jobs `running` under its token, or launched and not recorded:
//! the next dispatcher sees the token's process is gone, kills every process that carries the
//! token in its `CONDUCTOR_QUEUE_RUN` and puts the recorded jobs back in line
//! (`queue.job.interrupted`). A job whose completion was committed is never started again.
//!
//! The committer is in `queue/commit.rs`; one launch's files and process, and the reaper, in
//! `queue/launch.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::commit::{
    BaseFiles, Batch, Committed, Intent, apply, committer, count_states, start_ready,
};
use super::exec;
use super::launch::{ToLaunch, ahead_maker, launch, prepare, reaper, result_path};
use super::ops::{self, Finish};
use super::{Job, Layout, QueueDoc, State};
use crate::error::Reason;
use crate::error::{Error, IoContext, Result};
use crate::store::journal::Tail;
use crate::store::watch::{self, Wake};
use crate::store::{Lock, Store};
use crate::time::Timestamp;

pub use super::options::{DEFAULT_LEASE, Options};

/// The lock every dispatcher holds shared while it runs, so `queue retry` can tell whether one
/// will pick its job up (see [`crate::store::lock::Presence`]).
pub const RUN_LOCK: &str = "queue-run.lock";

/// True while a dispatcher runs on this home.
pub fn dispatcher_running(home: &Path) -> Result<bool> {
    crate::store::lock::anyone_present(&home.join(RUN_LOCK)).map_err(Into::into)
}

/// Something the progress display may show.
#[derive(Clone, Debug)]
pub enum Update {
    /// A job changed state (`state`), with a detail and how long it ran.
    Job {
        key: String,
        state: State,
        detail: String,
        elapsed: Option<Duration>,
    },
    /// Time passed (redraw elapsed times).
    Tick,
    /// Another dispatcher leads this home's queue (its pid, when known); this one waits.
    WaitingForLead { pid: Option<String> },
}

/// What a dispatcher run did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Jobs this run started.
    pub started: usize,
    /// Live jobs per state when it returned (archived workspaces are not counted).
    pub remaining: BTreeMap<String, usize>,
    /// Jobs that ended in each state during this run.
    pub ended: BTreeMap<String, usize>,
    /// Stopped by a signal before the queue was done.
    pub stopped: bool,
}

impl Summary {
    /// True when no live job is failed, timed out or blocked and the run was not stopped.
    pub fn all_completed(&self) -> bool {
        !self.stopped
            && ["failed", "timed_out", "blocked"]
                .iter()
                .all(|s| self.remaining.get(*s).copied().unwrap_or(0) == 0)
    }
}

struct Running {
    pid: u32,
    started: Instant,
    deadline: Instant,
    minutes: f64,
    timed_out: bool,
    /// Cancelled by someone else: its end is not ours to record.
    dropped: bool,
    workspace_dir: PathBuf,
    /// A repository job's worktree: what it leaves uncommitted is committed when it completes.
    worktree: Option<PathBuf>,
    id: String,
    /// Its log (stored plain once it ends: see [`super::plain`]).
    log: PathBuf,
    /// The thread copying a job with secrets' output to its log (joined once its tree is gone).
    copier: Option<std::thread::JoinHandle<()>>,
    /// Reaped, with this status, while the copy of its output finishes (see [`handle`]): it
    /// has ended, and nothing is sent to its pid any more.
    exit: Option<std::process::ExitStatus>,
    /// Its private HOME (sandbox), removed when it ends unless `--keep-home`.
    home: Option<PathBuf>,
}

impl Running {
    /// The job's tree is gone: remove its private HOME (what the agent kept there, secrets
    /// included, must not outlive the job).
    fn dispose_home(&mut self) {
        if let Some(h) = self.home.take() {
            super::launch::dispose_job_home(&h);
        }
    }
}

/// Read a secrets file: `NAME=value` lines (`#` comments, optional `export `, optional quotes).
/// It must be a regular file of ours that nobody else can read.
pub fn read_secrets_file(path: &Path) -> Result<BTreeMap<String, String>> {
    let meta = std::fs::metadata(path).ctx("read the secrets file", path)?;
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(Error::invalid(
            Reason::UnsafeSecretsFile,
            format!(
                "secrets file `{}` must be a regular file of yours with mode 0600 (it is {:o}); run chmod 600 on it",
                path.display(),
                meta.mode() & 0o7777
            ),
        ));
    }
    let text = std::fs::read_to_string(path).ctx("read the secrets file", path)?;
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            // Never echo the line: it may hold a value.
            return Err(Error::invalid(
                Reason::InvalidSecretsFile,
                format!(
                    "secrets file `{}` line {}: expected NAME=value",
                    path.display(),
                    n + 1
                ),
            ));
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(v);
        map.insert(k.trim().to_string(), v.to_string());
    }
    Ok(map)
}

/// How long the pids of jobs launched after a commit wait for another change to be committed
/// with (a job that runs for long gets its pid recorded after this).
const PID_DELAY: Duration = Duration::from_millis(100);

/// How long a job's end waits for the copy of its output to the log (see [`handle`]).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The dispatcher watches the journal (for submissions, retries and cancels by others) from its
/// first wait longer than this; what others committed before is read when the watch starts.
/// Closing a watch costs several milliseconds at exit (the kernel waits for a grace period),
/// which a run of short jobs is spared. Changes by others are seen at every commit anyway.
const WATCH_AFTER: Duration = Duration::from_millis(20);

pub(super) enum Msg {
    /// A child was reaped.
    Exited {
        pid: u32,
        status: std::process::ExitStatus,
    },
    /// A reaped child's log copy is done (or given up on): now its end can be recorded.
    Drained {
        pid: u32,
    },
    Journal,
    Committed(Box<Result<Committed>>),
    /// The lead lock is ours.
    Lead,
    Stop,
    /// Our lease was kept alive (shared store): look whether another dispatcher's has expired.
    Leases,
    /// Our lease is lost (why): stop every job and record why.
    LeaseLost(String),
}

/// The prefix of the dispatchers' lease names on a shared store (`queue/dispatcher/<token>`).
const LEASES: &str = "queue/dispatcher/";

/// The lease name of the dispatcher with this token.
fn lease_name(token: &str) -> String {
    format!("{LEASES}{token}")
}

/// Keep `lease` alive every third of its time to live until `stop` closes, and tell the main
/// loop after each round (it looks for dispatchers whose leases expired). The lease is lost
/// when etcd says it expired, or when no keep-alive got through for a whole time to live
/// (it has expired by then, or is about to: the jobs must stop before another host takes
/// them).
fn keep_alive(
    store: &Store,
    lease: &crate::store::Lease,
    tx: &mpsc::Sender<Msg>,
    stop: &mpsc::Receiver<()>,
) {
    let every = lease.ttl() / 3;
    let mut last_ok = Instant::now();
    loop {
        match stop.recv_timeout(every) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let sent = Instant::now();
        let lost = match store.keep_lease(lease) {
            Ok(true) => {
                last_ok = sent;
                None
            }
            Ok(false) => Some(format!(
                "the store says its lease `{}` ({}s) has expired",
                lease.name(),
                lease.ttl().as_secs()
            )),
            Err(e) if last_ok.elapsed() >= lease.ttl() => Some(format!(
                "its lease `{}` could not be kept alive for {}s ({e})",
                lease.name(),
                lease.ttl().as_secs()
            )),
            Err(_) => None,
        };
        let msg = match lost {
            Some(why) => Msg::LeaseLost(why),
            None => Msg::Leases,
        };
        let last = matches!(msg, Msg::LeaseLost(_));
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

/// The lock the dispatcher leading a home's queue holds (file store).
pub const LEAD_LOCK: &str = "queue-lead.lock";

/// Take the lead of this home's queue, waiting (and saying so) while another dispatcher has
/// it. The lock file holds the leader's token: a leader that died may have launched jobs it
/// never recorded (not even as running), and the next leader kills whatever still carries
/// that token before anything else. `None`: stopped by a signal while waiting.
fn take_lead(
    home: &Path,
    me: &str,
    tx: &mpsc::Sender<Msg>,
    rx: &mpsc::Receiver<Msg>,
    progress: &mut dyn FnMut(Update),
) -> Result<Option<std::fs::File>> {
    use std::io::{Read, Seek};
    let path = home.join(LEAD_LOCK);
    let mut file = crate::store::atomic::open_private(&path).ctx("open lock file", &path)?;
    let holder = |file: &mut std::fs::File| {
        let mut text = String::new();
        let _ = file
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        text.trim().to_string()
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
        Err(std::fs::TryLockError::WouldBlock) => {
            let other = holder(&mut file);
            let pid = other.split(':').next().unwrap_or("");
            progress(Update::WaitingForLead {
                pid: (!pid.is_empty()).then(|| pid.to_string()),
            });
            let waiter = file.try_clone().ctx("clone lock file handle", &path)?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                // A failure to wait is a failure to lead: stop.
                let _ = tx.send(match waiter.lock() {
                    Ok(()) => Msg::Lead,
                    Err(_) => Msg::Stop,
                });
            });
            loop {
                match rx.recv() {
                    Ok(Msg::Lead) => break,
                    Ok(Msg::Stop) | Err(_) => return Ok(None),
                    Ok(_) => continue,
                }
            }
        }
    }
    let before = holder(&mut file);
    if !before.is_empty() && before != me && !exec::dispatcher_alive(&before) {
        exec::kill_run(&format!("{before}/"), None);
    }
    crate::store::lock::write_note(&file, me);
    Ok(Some(file))
}

/// Run the dispatcher until no job can make progress (or forever with `follow`).
///
/// Two threads (see the module documentation): this one waits for exits, commits, journal
/// changes and deadlines, and launches; the committer makes every change durable. Leading the
/// home's queue (file store), it launches a ready job at once and its start is committed
/// after; a crash in between leaves the job running unrecorded, with our token in its
/// environment, and the next dispatcher kills it (see `take_lead` and `recover`) and runs the
/// job again. With a shared store, a job is launched only once its start is committed.
pub fn run(store: &Store, opts: &Options, progress: &mut dyn FnMut(Update)) -> Result<Summary> {
    watch::block_stop_signals();
    // What the jobs create (their output, an agent's files in its HOME) is private too.
    unsafe { libc::umask(0o077) };
    let home = store.home().dir().to_path_buf();
    let layout = Layout { home: home.clone() };
    let me = exec::self_token(store.shared_by_hosts());
    let file_secrets = match &opts.secrets_file {
        Some(p) => read_secrets_file(p)?,
        None => BTreeMap::new(),
    };
    let parallel = opts.parallel.max(1);
    let run_lock = home.join(RUN_LOCK);
    let presence = crate::store::lock::announce_presence(&run_lock)?;
    let wanted = |j: &Job| opts.only.as_ref().is_none_or(|o| o.contains(&j.key()));
    let (tx, rx) = mpsc::channel::<Msg>();
    {
        let tx = tx.clone();
        watch::on_stop(move || {
            let _ = tx.send(Msg::Stop);
        });
    }
    // On the file store one dispatcher leads a home's queue at a time, and may launch a job
    // before the commit that records its start. With a shared store, dispatchers on several
    // hosts share the queue through optimistic transactions and launch only what committed.
    let lead = if store.shared_by_hosts() {
        None
    } else {
        match take_lead(&home, &me, &tx, &rx, progress)? {
            Some(f) => Some(f),
            None => {
                return Ok(Summary {
                    stopped: true,
                    ..Summary::default()
                });
            }
        }
    };
    // On a shared store, a lease: alive while we are, and what fences every commit of ours
    // (after it expired, another host may have taken our jobs; nothing of ours may land).
    let lease = store.take_lease(&lease_name(&me), me.as_bytes(), opts.lease)?;
    let lease = lease.as_ref();
    let mut tail = store.tail(None)?;
    // Captured before the view is read (see `BaseFiles`).
    let base_files = lead
        .as_ref()
        .filter(|_| store.state_in_files())
        .and_then(|_| BaseFiles::capture(&home));
    let base0 = match recover(store, &me, lease, progress) {
        Ok(doc) => doc,
        Err(e) => {
            if let Some(l) = lease {
                let _ = store.drop_lease(l);
            }
            return Err(e);
        }
    };

    let (stop_keeping, keeping) = mpsc::channel::<()>();
    let (stop_shipping, shipping) = mpsc::channel::<()>();
    let shipper = super::ship::Shipper::new(store);
    let result = std::thread::scope(|scope| {
        if let Some(l) = lease {
            let tx = tx.clone();
            scope.spawn(move || keep_alive(store, l, &tx, &keeping));
        }
        if let Some(s) = shipper.clone() {
            scope.spawn(move || s.run(&shipping));
        }
        let (batch_tx, batch_rx) = mpsc::channel::<Batch>();
        {
            let tx = tx.clone();
            let me = me.clone();
            let layout = &layout;
            let file_secrets = &file_secrets;
            let wanted = &wanted;
            scope.spawn(move || {
                let report = tx.clone();
                let run = std::panic::AssertUnwindSafe(|| {
                    committer(
                        store,
                        &me,
                        opts,
                        layout,
                        file_secrets,
                        wanted,
                        batch_rx,
                        &|c| tx.send(Msg::Committed(Box::new(c))).is_ok(),
                        base_files,
                        lease,
                    )
                });
                // A panic is reported like a failed commit: the loop kills its jobs and returns.
                if std::panic::catch_unwind(run).is_err() {
                    let _ = report.send(Msg::Committed(Box::new(Err(Error::io(
                        "commit the queue in",
                        store.home().dir(),
                        std::io::Error::other("the committer thread panicked"),
                    )))));
                }
            });
        }
        let mut d = Dispatcher {
            opts,
            lease,
            shipper: shipper.clone(),
            layout: &layout,
            me: &me,
            file_secrets: &file_secrets,
            parallel,
            summary: Summary::default(),
            running: HashMap::new(),
            inflight: std::collections::VecDeque::new(),
            next_seq: 0,
            promised: 0,
            exited: Vec::new(),
            pending: Vec::new(),
            pending_since: None,
            took: HashMap::new(),
            dirty: true,
            more: false,
            ready_left: false,
            batch_tx,
            tx: tx.clone(),
            watching: false,
            stale_until: None,
            reaper: reaper(tx.clone(), |pid, status| Msg::Exited { pid, status }),
            view: base0,
            made_dirs: BTreeSet::new(),
            ahead: BTreeSet::new(),
            ahead_tx: ahead_maker(layout.clone()),
        };
        if lead.is_some() {
            // Read after taking the lead and recovering: it is the truth, start from it.
            d.dirty = false;
            d.ready_left = d
                .view
                .jobs
                .iter()
                .any(|j| ops::startable(&d.view, j) && wanted(j));
            d.more = d.ready_left;
        }
        let result = d.main_loop(
            store,
            &wanted,
            lead.is_some(),
            &rx,
            &mut tail,
            progress,
            &presence,
            &run_lock,
        );
        if result.is_err() {
            for r in d.running.values().filter(|r| r.exit.is_none()) {
                exec::kill_group(r.pid);
            }
        }
        // Our lease is lost: our jobs are stopped (above); their records say why (written
        // unfenced, and only for the jobs still recorded as ours: a host that took one over
        // already has it as its own).
        let result = match result {
            Err(e) if e.reason() == "lease_lost" => {
                let why = e.to_string();
                for r in d.running.values_mut() {
                    r.dispose_home();
                }
                let _ = stop_lost(store, &me, &why);
                Err(e)
            }
            other => other,
        };
        drop(stop_keeping);
        drop(stop_shipping);
        // Closing the batch channel ends the committer.
        drop(d);
        if result.is_ok()
            && let Some(f) = &lead
        {
            // Nothing of ours is left running: the next leader has nothing to clean up.
            let _ = f.set_len(0);
        }
        result
    });
    // Done (or failed): the lease goes at once, so nobody waits out its time to live.
    if let Some(l) = lease {
        let _ = store.drop_lease(l);
    }
    result
}

/// Our lease is lost: record every job still running under us as interrupted, saying why (it
/// runs again, here or on another host).
fn stop_lost(store: &Store, me: &str, why: &str) -> Result<()> {
    let now = Timestamp::now();
    let reason = format!(
        "stopped: its dispatcher lost its lease on the shared store ({why}); it runs again"
    );
    store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        let mine: Vec<usize> = (0..doc.jobs.len())
            .filter(|i| ops::runs_under(&doc.jobs[*i], me))
            .collect();
        for i in mine {
            ops::interrupt(&mut doc, i, &reason, me, now, &mut events);
        }
        if !events.is_empty() {
            tx.write(&doc)?;
        }
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(())
    })
}

/// The main loop's state.
struct Dispatcher<'a> {
    opts: &'a Options,
    /// Our lease on a shared store: every commit of ours is fenced by it.
    lease: Option<&'a crate::store::Lease>,
    /// On a shared store, what copies the running jobs' logs into it.
    shipper: Option<super::ship::Shipper<'a>>,
    layout: &'a Layout,
    me: &'a str,
    file_secrets: &'a BTreeMap<String, String>,
    parallel: usize,
    summary: Summary,
    running: HashMap<String, Running>,
    /// Batches sent and not committed yet (their intents, to rebuild our view on top of a
    /// committed queue).
    inflight: std::collections::VecDeque<(u64, Vec<Intent>, usize)>,
    next_seq: u64,
    /// Start slots handed to batches in flight.
    promised: usize,
    /// Exits not yet put in a batch, with how long each ran.
    exited: Vec<(String, Finish, Option<Duration>)>,
    /// Intents not yet put in a batch (pids of launches), and since when.
    pending: Vec<Intent>,
    pending_since: Option<Instant>,
    /// How long each ended job ran, until its end is shown.
    took: HashMap<String, Duration>,
    /// Someone else changed the queue: the next batch asks the commit to look for work.
    dirty: bool,
    more: bool,
    ready_left: bool,
    batch_tx: mpsc::Sender<Batch>,
    tx: mpsc::Sender<Msg>,
    /// The journal watcher runs (see [`WATCH_AFTER`]).
    watching: bool,
    /// A batch sent after someone else changed the queue: until its commit lands, our view
    /// may lack that change, and jobs are only started by commits.
    stale_until: Option<u64>,
    /// Told after each spawn (see [`reaper`]).
    reaper: mpsc::Sender<()>,
    /// Our view of the queue: the queue as last committed plus the batches in flight.
    view: QueueDoc,
    /// Directories made for launches so far (not made again).
    made_dirs: BTreeSet<PathBuf>,
    /// Jobs whose files were asked for ahead of their launch and not launched since (see
    /// [`Dispatcher::look_ahead`] and `launch::ahead_maker`).
    ahead: BTreeSet<String>,
    ahead_tx: mpsc::Sender<(String, String)>,
}

impl Dispatcher<'_> {
    /// Our view rebuilt: the committed queue plus what is in flight.
    fn rebuild_view(&self, committed: QueueDoc) -> QueueDoc {
        let mut doc = committed;
        let mut scratch = Vec::new();
        for (_, intents, _) in &self.inflight {
            apply(
                &mut doc,
                intents,
                self.me,
                &super::ran_with::RanWith::new(&self.opts.runner, &self.opts.agent_cmd),
                &mut scratch,
            );
        }
        doc
    }

    #[allow(clippy::too_many_arguments)]
    fn main_loop(
        &mut self,
        store: &Store,
        wanted: &dyn Fn(&Job) -> bool,
        lead: bool,
        rx: &mpsc::Receiver<Msg>,
        tail: &mut Tail,
        progress: &mut dyn FnMut(Update),
        presence: &crate::store::lock::Presence,
        run_lock: &Path,
    ) -> Result<Summary> {
        // A stop signal that came during start-up: stop before launching anything.
        while let Ok(m) = rx.try_recv() {
            if matches!(m, Msg::Stop) {
                return self.stop(store, rx, progress);
            }
        }
        loop {
            // Pids ride along with the next batch; alone, they wait a moment for company.
            let pids_due = self
                .pending_since
                .is_some_and(|t| self.inflight.is_empty() && t.elapsed() >= PID_DELAY);
            // Free slots and work for them that nothing in flight will start.
            let idle =
                self.ready_left && self.inflight.is_empty() && self.running.len() < self.parallel;
            if self.dirty || !self.exited.is_empty() || pids_due || idle {
                self.send_batch(wanted, lead, progress);
            }
            if self.running.is_empty()
                && self.inflight.is_empty()
                && !self.more
                && !self.opts.follow
            {
                // Nothing is left for us. Withdraw first, then look once more: a `queue retry`
                // that committed before it saw us withdraw counts on us to start its job.
                presence.withdraw();
                // Read in place of our view (one copy of the queue, not two): with nothing in
                // flight, the queue as read now is the view to go on with.
                let now = Timestamp::now();
                self.view = <QueueDoc as crate::store::Document>::empty(now);
                let doc: QueueDoc = store.read_doc(now)?;
                if !doc
                    .jobs
                    .iter()
                    .any(|j| ops::startable(&doc, j) && wanted(j))
                {
                    // What is left, as it is now (a run that started nothing committed nothing).
                    self.summary.remaining = count_states(&doc);
                    return Ok(std::mem::take(&mut self.summary));
                }
                self.view = doc;
                presence.renew(run_lock)?;
                self.dirty = true;
                continue;
            }
            // Sleep until a child exits, a commit lands, the journal changes, a stop signal, or
            // a deadline.
            let next_deadline = self
                .running
                .values()
                .filter(|r| !r.timed_out && !r.dropped && r.exit.is_none())
                .map(|r| r.deadline)
                .min();
            let mut wait = next_deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if self.opts.tick && !self.running.is_empty() {
                wait = Some(wait.map_or(Duration::from_secs(1), |w| w.min(Duration::from_secs(1))));
            }
            if let Some(t) = self.pending_since.filter(|_| self.inflight.is_empty()) {
                let due = PID_DELAY.saturating_sub(t.elapsed());
                wait = Some(wait.map_or(due, |w| w.min(due)));
            }
            let mut early: Option<Msg> = None;
            let mut timed_out = false;
            if !self.watching {
                // Not watching the journal yet: a short wait first (a run whose waits are all
                // shorter never pays for a watcher), then watch and catch up on the journal.
                let short = wait.is_some_and(|w| w <= WATCH_AFTER);
                match rx.recv_timeout(wait.map_or(WATCH_AFTER, |w| w.min(WATCH_AFTER))) {
                    Ok(m) => early = Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) if short => timed_out = true,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        self.start_watching(store, tail)?;
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => early = Some(Msg::Stop),
                }
            }
            let first = if early.is_some() {
                early
            } else if timed_out {
                None
            } else {
                match wait {
                    Some(w) => match rx.recv_timeout(w) {
                        Ok(m) => Some(m),
                        Err(mpsc::RecvTimeoutError::Timeout) => None,
                        Err(mpsc::RecvTimeoutError::Disconnected) => Some(Msg::Stop),
                    },
                    None => Some(rx.recv().unwrap_or(Msg::Stop)),
                }
            };
            let mut msgs: Vec<Msg> = first.into_iter().collect();
            while let Ok(m) = rx.try_recv() {
                msgs.push(m);
            }
            let mut stop = false;
            let mut look = false;
            for m in msgs {
                match m {
                    Msg::Committed(c) => self.committed((*c)?, progress),
                    Msg::Stop => stop = true,
                    Msg::Journal => self.read_journal(tail)?,
                    m @ (Msg::Exited { .. } | Msg::Drained { .. }) => self.take_exit(m),
                    Msg::Lead => {}
                    Msg::Leases => look = true,
                    Msg::LeaseLost(why) => {
                        return Err(Error::invalid(
                            Reason::LeaseLost,
                            format!("the dispatcher stopped its jobs: {why}"),
                        ));
                    }
                }
            }
            // Jobs of other dispatchers whose leases expired: ours to put back in line.
            if look
                && self.view.jobs.iter().any(|j| {
                    j.state.state == State::Running
                        && j.state.dispatcher.as_deref() != Some(self.me)
                })
            {
                if take_over(store, self.me, self.lease, &self.view, progress)? {
                    self.dirty = true;
                }
            }
            let now_i = Instant::now();
            for r in self.running.values_mut() {
                if !r.timed_out && !r.dropped && r.exit.is_none() && r.deadline <= now_i {
                    exec::kill_group(r.pid);
                    r.timed_out = true;
                }
            }
            if self.opts.tick {
                progress(Update::Tick);
            }
            if stop {
                return self.stop(store, rx, progress);
            }
        }
    }

    /// Take in a child's exit (or the end of its log copy): its end goes in `exited`.
    fn take_exit(&mut self, m: Msg) {
        let (running, exited, tx) = (&mut self.running, &mut self.exited, &self.tx);
        let ship = self.shipper.as_ref();
        match m {
            Msg::Exited { pid, status } => {
                let Some((key, r)) = running
                    .iter_mut()
                    .find(|(_, r)| r.pid == pid && r.exit.is_none())
                else {
                    return;
                };
                match r.copier.take() {
                    // A job with secrets writes through a copier that blanks them: its end is
                    // recorded once the copy has all (its tree is killed now, so the pipe closes),
                    // or after DRAIN_LIMIT if something that left the process group still holds
                    // the pipe (the copy goes on without us).
                    Some(copier) => {
                        exec::kill_group(pid);
                        r.exit = Some(status);
                        let tx = tx.clone();
                        std::thread::spawn(move || {
                            let (done, drained) = mpsc::channel::<()>();
                            std::thread::spawn(move || {
                                let _ = copier.join();
                                let _ = done.send(());
                            });
                            let _ = drained.recv_timeout(DRAIN_LIMIT);
                            let _ = tx.send(Msg::Drained { pid });
                        });
                    }
                    None => {
                        let key = key.clone();
                        record_exit(running, exited, &key, status, ship);
                    }
                }
            }
            Msg::Drained { pid } => {
                let found = running
                    .iter()
                    .find_map(|(k, r)| (r.pid == pid).then_some((k.clone(), r.exit?)));
                if let Some((key, status)) = found {
                    record_exit(running, exited, &key, status, ship);
                }
            }
            _ => {}
        }
    }

    /// Start watching the journal, then read what others committed since we started (changes
    /// that came before the watch).
    fn start_watching(&mut self, store: &Store, tail: &mut Tail) -> Result<()> {
        let watcher = store.watcher(crate::store::journal::is_journal_file)?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            loop {
                match watcher.wait(None) {
                    Wake::Changed => {
                        if tx.send(Msg::Journal).is_err() {
                            return;
                        }
                    }
                    Wake::Stop => return,
                    Wake::Timeout => {}
                }
            }
        });
        self.watching = true;
        self.read_journal(tail)
    }

    /// Read the journal's new events: someone else changing the queue makes us `dirty`.
    fn read_journal(&mut self, tail: &mut Tail) -> Result<()> {
        let me = self.me;
        let mut foreign = false;
        tail.read(|ev| {
            foreign |= ev.event_type.starts_with("queue.") && ev.actor.as_deref() != Some(me);
            true
        })?;
        self.dirty |= foreign;
        Ok(())
    }

    /// Put what this wake-up saw in a batch for the committer, launching first the jobs that
    /// the recorded exits make ready (when that is safe, see [`run`]).
    fn send_batch(
        &mut self,
        wanted: &dyn Fn(&Job) -> bool,
        lead: bool,
        progress: &mut dyn FnMut(Update),
    ) {
        let now = Timestamp::now();
        let mut intents = std::mem::take(&mut self.pending);
        let ended = std::mem::take(&mut self.exited);
        for (key, how, took) in &ended {
            if let Some(t) = took {
                self.took.insert(key.clone(), *t);
            }
            intents.push(Intent::Finish {
                key: key.clone(),
                how: how.clone(),
                at: now,
            });
        }
        let free = self
            .parallel
            .saturating_sub(self.running.len() + self.promised);
        // Our view is the truth only when nobody else changed the queue since our last commit
        // and no commit in flight may start jobs itself.
        let lead = lead && !self.dirty && self.promised == 0 && self.stale_until.is_none();
        let runner = &super::ran_with::RanWith::new(&self.opts.runner, &self.opts.agent_cmd);
        let mut scratch = Vec::new();
        apply(&mut self.view, &intents, self.me, runner, &mut scratch);
        if lead && free > 0 {
            let (picked, launches) = start_ready(
                &mut self.view,
                free,
                wanted,
                self.file_secrets,
                self.me,
                runner,
                now,
                &mut scratch,
            );
            intents.extend(picked);
            for l in launches {
                let key = l.job.key();
                let prep = prepare(self.layout, &l, &self.opts.runner, &mut self.made_dirs);
                if let Some(pid) = self.launch(l, prep, progress) {
                    ops::set_pid(&mut self.view, &key, self.me, pid);
                    intents.push(Intent::Pid { key, pid });
                }
            }
        }
        self.look_ahead();
        // The commit starts jobs itself only when we do not (a shared store, or a view that
        // someone else's change made stale).
        let free = if lead {
            0
        } else {
            self.parallel
                .saturating_sub(self.running.len() + self.promised)
        };
        if intents.is_empty() && !self.dirty && free == 0 {
            return;
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        if self.dirty {
            // Our view lacks what someone else changed until this batch's commit lands.
            self.stale_until = Some(seq);
        }
        self.dirty = false;
        self.promised += free;
        self.inflight.push_back((seq, intents.clone(), free));
        self.pending_since = None;
        let urgent = free > 0 || self.running.is_empty() || !lead;
        let _ = self.batch_tx.send(Batch {
            seq,
            intents,
            urgent,
            free,
        });
    }

    /// Start a prepared job; on failure its end is recorded by the next batch. Returns its pid.
    fn launch(
        &mut self,
        l: ToLaunch,
        prep: std::io::Result<()>,
        progress: &mut dyn FnMut(Update),
    ) -> Option<u32> {
        let key = l.job.key();
        match prep.and_then(|()| launch(self.layout, &l, &self.opts.runner, &self.opts.agent_cmd)) {
            Ok((child, copier, ws_dir, worktree)) => {
                self.ahead.remove(&key);
                let pid = child.id();
                if let Some(s) = &self.shipper {
                    s.add(
                        &key,
                        self.layout.log(&l.job.workspace, &l.job.id),
                        super::ship::attempt_stream(
                            &l.job.workspace,
                            &l.job.id,
                            l.job.state.attempts,
                        ),
                    );
                }
                self.summary.started += 1;
                let limit = Duration::from_secs_f64(l.job.timeout_minutes * 60.0);
                self.running.insert(
                    key.clone(),
                    Running {
                        pid,
                        started: Instant::now(),
                        deadline: Instant::now() + limit,
                        minutes: l.job.timeout_minutes,
                        timed_out: false,
                        dropped: false,
                        workspace_dir: ws_dir,
                        worktree,
                        id: l.job.id.clone(),
                        log: self.layout.log(&l.job.workspace, &l.job.id),
                        copier,
                        exit: None,
                        home: (matches!(self.opts.runner, exec::Runner::Sandbox { .. })
                            && !self.opts.keep_home)
                            .then(|| self.layout.job_home(&l.job.workspace, &l.job.id)),
                    },
                );
                progress(Update::Job {
                    key: key.clone(),
                    state: State::Running,
                    detail: format!("attempt {}, pid {pid}", l.job.state.attempts),
                    elapsed: None,
                });
                // The reaper waits for it (std's handle is dropped without waiting).
                drop(child);
                let _ = self.reaper.send(());
                Some(pid)
            }
            Err(e) => {
                // Refused before it ran: the HOME prepared for it goes too.
                if matches!(self.opts.runner, exec::Runner::Sandbox { .. }) && !self.opts.keep_home
                {
                    super::launch::dispose_job_home(
                        &self.layout.job_home(&l.job.workspace, &l.job.id),
                    );
                }
                self.exited.push((
                    key,
                    Finish::Failed {
                        exit_code: None,
                        reason: format!("could not start the job: {e}"),
                        result: None,
                        usage: None,
                    },
                    None,
                ));
                None
            }
        }
    }

    /// Take in a commit: it is the new base; kill what it refused or someone cancelled; launch
    /// what it started.
    fn committed(&mut self, c: Committed, progress: &mut dyn FnMut(Update)) {
        while let Some((seq, _, free)) = self.inflight.front() {
            if *seq > c.upto {
                break;
            }
            self.promised = self.promised.saturating_sub(*free);
            self.inflight.pop_front();
        }
        if self.stale_until.is_some_and(|s| c.upto >= s) {
            self.stale_until = None;
        }
        self.more = c.more;
        self.ready_left = c.ready_left;
        self.summary.remaining = c.remaining;
        // Without a queue, the commit recorded exactly what our view already holds on top of
        // our last base: the view stands (rebuilding it would cost a copy of the queue per
        // commit).
        let reported = c.doc.is_some();
        if let Some(doc) = c.doc {
            self.view = self.rebuild_view(doc);
        }
        // Jobs we run that are not ours in the committed queue (plus what is still in
        // flight): refused starts, or cancelled by someone else. Their end is not ours to
        // record.
        let view = &self.view;
        for (key, r) in self.running.iter_mut() {
            if reported
                && !r.dropped
                && !view
                    .jobs
                    .iter()
                    .any(|j| ops::has_key(j, key) && ops::runs_under(j, self.me))
            {
                if r.exit.is_none() {
                    exec::kill_group(r.pid);
                }
                r.dropped = true;
            }
        }
        self.summary.started = self.summary.started.saturating_sub(c.revoked.len());
        for key in c.revoked {
            let state = self
                .view
                .jobs
                .iter()
                .find(|j| j.key() == key)
                .map_or(State::Cancelled, |j| j.state.state);
            progress(Update::Job {
                key,
                state,
                detail: "not started after all: it changed meanwhile".into(),
                elapsed: None,
            });
        }
        for (key, state, detail) in c.shown {
            if state == State::Running {
                continue; // reported at launch, with the pid
            }
            if matches!(
                state,
                State::Completed | State::Failed | State::TimedOut | State::Blocked
            ) {
                *self.summary.ended.entry(state.as_str().into()).or_default() += 1;
            }
            progress(Update::Job {
                elapsed: self.took.remove(&key),
                key,
                state,
                detail,
            });
        }
        for (l, prep) in c.launches {
            let key = l.job.key();
            if let Some(pid) = self.launch(l, prep, progress) {
                ops::set_pid(&mut self.view, &key, self.me, pid);
                self.pending.push(Intent::Pid { key, pid });
                self.pending_since.get_or_insert_with(Instant::now);
            }
        }
        self.look_ahead();
    }

    /// Ask for the files of the jobs that may start next: the ready ones not running yet and
    /// the queued ones whose dependencies are all completed or running.
    fn look_ahead(&mut self) {
        let mut budget = self.parallel * 2;
        // Built only when a queued job with dependencies is met.
        let mut states: Option<HashMap<(&str, &str), State>> = None;
        for j in &self.view.jobs {
            if budget == 0 {
                break;
            }
            let soon = match j.state.state {
                State::Ready => true,
                State::Queued if j.depends_on.is_empty() => true,
                State::Queued => {
                    let states = states.get_or_insert_with(|| {
                        self.view
                            .jobs
                            .iter()
                            .map(|j| ((j.workspace.as_str(), j.id.as_str()), j.state.state))
                            .collect()
                    });
                    j.depends_on.iter().all(|d| {
                        matches!(
                            states.get(&(j.workspace.as_str(), d.as_str())),
                            Some(State::Completed | State::Running)
                        )
                    })
                }
                _ => false,
            };
            if !soon {
                continue;
            }
            let key = j.key();
            let wanted = self.opts.only.as_ref().is_none_or(|o| o.contains(&key));
            if !wanted {
                continue;
            }
            // The next `parallel * 2` jobs, asked for or not: a queue of thousands of ready
            // jobs is not walked to its end on every wake-up.
            budget -= 1;
            if !self.ahead.contains(&key) {
                let _ = self.ahead_tx.send((j.workspace.clone(), j.id.clone()));
                self.ahead.insert(key);
            }
        }
    }

    /// SIGINT/SIGTERM: wait for the commits in flight (launching nothing more), then kill every
    /// running job's tree and put those jobs back in line.
    fn stop(
        &mut self,
        store: &Store,
        rx: &mpsc::Receiver<Msg>,
        progress: &mut dyn FnMut(Update),
    ) -> Result<Summary> {
        let mut unlaunched: Vec<String> = Vec::new();
        while !self.inflight.is_empty() {
            match rx.recv() {
                Ok(Msg::Committed(c)) => {
                    let mut c = (*c)?;
                    unlaunched.extend(c.launches.drain(..).map(|(l, _)| l.job.key()));
                    self.committed(c, progress);
                }
                Ok(m @ (Msg::Exited { .. } | Msg::Drained { .. })) => {
                    self.take_exit(m);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // Jobs that ended and whose log copy is still finishing ended: record them so.
        let ended: Vec<(String, std::process::ExitStatus)> = self
            .running
            .iter()
            .filter_map(|(k, r)| Some((k.clone(), r.exit?)))
            .collect();
        for (key, status) in ended {
            record_exit(
                &mut self.running,
                &mut self.exited,
                &key,
                status,
                self.shipper.as_ref(),
            );
        }
        let mut interrupt: Vec<String> = self.running.keys().cloned().collect();
        interrupt.extend(unlaunched);
        stop_all(
            store,
            self.me,
            self.lease,
            &self.running,
            &interrupt,
            std::mem::take(&mut self.exited),
            std::mem::take(&mut self.summary),
            progress,
        )
    }
}

/// A child's exit, as the job's end.
fn record_exit(
    running: &mut HashMap<String, Running>,
    exited: &mut Vec<(String, Finish, Option<Duration>)>,
    key: &str,
    status: std::process::ExitStatus,
    ship: Option<&super::ship::Shipper>,
) {
    let Some(mut r) = running.remove(key) else {
        return;
    };
    // Its whole log is in the store before its end is recorded (read before it is rewritten
    // plain, below).
    if let Some(s) = ship {
        s.finish(key);
    }
    // The job's tree ends with it: nothing it started outlives it (a drained job's was killed
    // when it was reaped).
    if r.exit.is_none() {
        exec::kill_group(r.pid);
    }
    r.dispose_home();
    let key = key.to_string();
    let took = r.started.elapsed();
    let used = super::plain::finish_log(&r.log);
    let usage = (used.reports > 0).then_some(used);
    if r.dropped {
        return;
    }
    let result = result_path(&r.workspace_dir, &r.id);
    let how = if r.timed_out {
        Finish::TimedOut { minutes: r.minutes }
    } else {
        match (status.success(), status.code(), status.signal()) {
            (true, _, _) => Finish::Completed { result, usage },
            (false, Some(super::worktree::FAILED), _) if r.worktree.is_some() => Finish::Failed {
                exit_code: Some(super::worktree::FAILED),
                reason: "its worktree could not be made, or its changes not committed (the log says why)".to_string(),
                result,
                usage,
            },
            (false, Some(c), _) => Finish::Failed {
                exit_code: Some(c),
                reason: match c {
                    127 => "the agent exited with status 127 (the shell found no such program; its log names it)".to_string(),
                    126 => "the agent exited with status 126 (the shell could not execute the program; its log names it)".to_string(),
                    _ => format!("the agent exited with status {c}"),
                },
                result,
                usage,
            },
            (false, None, sig) => Finish::Failed {
                exit_code: None,
                reason: format!("the agent was killed by signal {}", sig.unwrap_or(0)),
                result,
                usage,
            },
        }
    };
    exited.push((key, how, Some(took)));
}

/// SIGINT/SIGTERM: kill every running job's tree and put those jobs (and `interrupt`, started
/// but not launched) back in line; record what already ended.
#[allow(clippy::too_many_arguments)]
fn stop_all(
    store: &Store,
    me: &str,
    lease: Option<&crate::store::Lease>,
    running: &HashMap<String, Running>,
    interrupt: &[String],
    exited: Vec<(String, Finish, Option<Duration>)>,
    mut summary: Summary,
    progress: &mut dyn FnMut(Update),
) -> Result<Summary> {
    for r in running.values().filter(|r| r.exit.is_none()) {
        exec::kill_group(r.pid);
    }
    for r in running.values() {
        if let Some(h) = &r.home {
            super::launch::dispose_job_home(h);
        }
    }
    let now = Timestamp::now();
    store.transaction(now, &[Lock::Queue], |tx| {
        if let Some(l) = lease {
            tx.fence(l);
        }
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        for (key, how, _) in &exited {
            ops::finish(&mut doc, key, me, how.clone(), now, &mut events);
        }
        for key in interrupt {
            if let Some(i) = doc
                .jobs
                .iter()
                .position(|j| &j.key() == key && ops::runs_under(j, me))
            {
                ops::interrupt(
                    &mut doc,
                    i,
                    "the dispatcher was stopped while it ran",
                    me,
                    now,
                    &mut events,
                );
            }
        }
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(())
    })?;
    for key in interrupt {
        progress(Update::Job {
            key: key.clone(),
            state: State::Queued,
            detail: "stopped; it will run again".into(),
            elapsed: None,
        });
    }
    summary.stopped = true;
    let doc: QueueDoc = store.read_doc(now)?;
    summary.remaining = count_states(&doc);
    Ok(summary)
}

/// Jobs recorded `running` under a dispatcher that is gone: kill what is left of them and put
/// them back in line. Jobs of a live dispatcher are left alone. Returns the queue as it is then.
fn recover(
    store: &Store,
    me: &str,
    lease: Option<&crate::store::Lease>,
    progress: &mut dyn FnMut(Update),
) -> Result<QueueDoc> {
    let doc: QueueDoc = store.read_doc(Timestamp::now())?;
    if !take_over(store, me, lease, &doc, progress)? {
        return Ok(doc);
    }
    Ok(store.read_doc(Timestamp::now())?)
}

/// Put back in line the jobs `doc` shows running under a dispatcher that is gone: on a shared
/// store, one whose lease has expired (its record is gone: never before, whatever its host);
/// on a file home, one whose process is gone. Kills what is left of them on this machine.
/// True when it put some back.
fn take_over(
    store: &Store,
    me: &str,
    lease: Option<&crate::store::Lease>,
    doc: &QueueDoc,
    progress: &mut dyn FnMut(Update),
) -> Result<bool> {
    let now = Timestamp::now();
    let others = doc
        .jobs
        .iter()
        .any(|j| j.state.state == State::Running && j.state.dispatcher.as_deref() != Some(me));
    if !others {
        return Ok(false);
    }
    let held = store.leases_held(LEASES)?;
    let alive = |d: &str| match &held {
        Some(names) => names.contains(&lease_name(d)),
        None => exec::dispatcher_alive(d),
    };
    let orphans: Vec<(String, String, Option<u32>, u32)> = doc
        .jobs
        .iter()
        .filter(|j| j.state.state == State::Running)
        .filter_map(|j| {
            let d = j.state.dispatcher.clone()?;
            (d != me && !alive(&d)).then(|| (j.key(), d, j.state.pid, j.state.attempts))
        })
        .collect();
    if orphans.is_empty() {
        return Ok(false);
    }
    for (key, d, pid, attempt) in &orphans {
        let (ws, id) = key.split_once('/').unwrap_or(("", key));
        let token = format!("{d}/{ws}/{id}/{attempt}");
        exec::kill_run(&token, *pid);
    }
    // A dispatcher launches a job made ready by a completion before committing both: what it
    // launched after its last commit is recorded nowhere, but carries its token.
    let dead: BTreeSet<&str> = orphans.iter().map(|(_, d, _, _)| d.as_str()).collect();
    for d in &dead {
        exec::kill_run(&format!("{d}/"), None);
    }
    let why = if held.is_some() {
        "its dispatcher's lease on the shared store expired while it ran (the dispatcher or its host died, or lost the cluster); it runs again"
    } else {
        "its dispatcher exited while it ran (no exit status was recorded); it runs again"
    };
    let keys: Vec<String> = store.transaction(now, &[Lock::Queue], |tx| {
        // Only while we hold our lease, and only once theirs is gone for good (a token is never
        // used twice, so a lease record that is gone never comes back).
        if let Some(l) = lease {
            tx.fence(l);
        }
        for d in &dead {
            tx.unless_held(&lease_name(d));
        }
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        let mut done = Vec::new();
        for (key, d, _, _) in &orphans {
            if let Some(i) = doc.jobs.iter().position(|j| {
                &j.key() == key
                    && j.state.state == State::Running
                    && j.state.dispatcher.as_deref() == Some(d)
            }) {
                ops::interrupt(&mut doc, i, why, me, now, &mut events);
                done.push(key.clone());
            }
        }
        if !done.is_empty() {
            tx.write(&doc)?;
        }
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(done)
    })?;
    let any = !keys.is_empty();
    for key in keys {
        progress(Update::Job {
            key,
            state: State::Queued,
            detail: "interrupted: its dispatcher died; it runs again".into(),
            elapsed: None,
        });
    }
    Ok(any)
}
