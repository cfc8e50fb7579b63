//! The dispatcher's committer: the changes its main loop makes ([`Intent`]s, sent in
//! [`Batch`]es) made durable in order, one store transaction for whatever arrived within
//! [`GROUP_WINDOW`] of the previous commit. The same [`apply`] builds the main loop's view of
//! the queue, so the view and the commits cannot disagree on what a change means.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::dispatch::{Msg, Options};
use super::launch::{ToLaunch, prepare};
use super::ops::{self, Finish};
use super::{Job, Layout, QueueDoc, State};
use crate::store::{Lock, Store};
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
    /// The queue as committed.
    pub(super) doc: QueueDoc,
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
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for j in &doc.jobs {
        *n.entry(j.state.state.as_str().into()).or_default() += 1;
    }
    n
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
                    .jobs
                    .iter()
                    .any(|j| j.state.state == State::Ready && &j.key() == key)
                {
                    ops::finish(doc, key, me, how.clone(), *at, events);
                }
            }
            Intent::Finish { key, how, at } => ops::finish(doc, key, me, how.clone(), *at, events),
            Intent::Start { key, at } => {
                match doc
                    .jobs
                    .iter()
                    .position(|j| ops::startable(doc, j) && &j.key() == key)
                {
                    Some(i) => events.push(ops::start(doc, i, me, runner, *at)),
                    None => refused.push(key.clone()),
                }
            }
        }
    }
    refused
}

/// Start up to `free` of the ready jobs `wanted` accepts, in submission order, for dispatcher
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

/// The committer thread: one store transaction per round of batches.
#[allow(clippy::too_many_arguments)]
pub(super) fn committer(
    store: &Store,
    me: &str,
    opts: &Options,
    layout: &Layout,
    file_secrets: &BTreeMap<String, String>,
    wanted: &(dyn Fn(&Job) -> bool + Sync),
    batches: mpsc::Receiver<Batch>,
    out: mpsc::Sender<Msg>,
) {
    let runner_name = &super::ran_with::RanWith::new(&opts.runner, &opts.agent_cmd);
    // The queue as this dispatcher last committed it, and its bytes: a commit decodes the file
    // again only if someone else changed it since.
    let mut cached: Option<(Vec<u8>, QueueDoc)> = None;
    let mut last_commit: Option<Instant> = None;
    let mut made_dirs = BTreeSet::new();
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
        let result = store.transaction(now, &[Lock::Queue], |tx| {
            let mut doc: QueueDoc = tx.read_cached(cached.take())?;
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
            let archived = ops::archive(&mut doc);
            super::archive::append(tx, store, &archived)?;
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
            tx.write(&doc)?;
            let bytes = tx.staged::<QueueDoc>().map(<[u8]>::to_vec);
            for e in events {
                tx.event(e);
            }
            Ok((
                revoked, more, ready_left, remaining, shown, bytes, doc, launches,
            ))
        });
        let msg = match result {
            Ok((revoked, more, ready_left, remaining, shown, bytes, doc, launches)) => {
                cached = bytes.map(|b| (b, doc.clone()));
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
                    doc,
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
        if out.send(Msg::Committed(Box::new(msg))).is_err() || failed {
            return;
        }
    }
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
