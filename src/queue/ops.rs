//! Pure operations on the queue document: no I/O, `now` passed in. Each returns (or pushes) the
//! journal events that describe what it did; the caller stages them in the same transaction.
//!
//! The dependency rules live in [`settle`]: a queued job becomes `ready` when every dependency
//! completed, and `blocked` (naming the dependency) when one failed, timed out, is blocked or was
//! cancelled, which is how a failure blocks exactly its transitive dependents.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::manifest::{self, Manifest};
use super::{Job, JobStatus, QueueDoc, State, Workspace};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::store::event::NewEvent;
use crate::time::Timestamp;

/// Event types written by the queue.
pub const SUBMITTED: &str = "queue.job.submitted";
pub const STARTED: &str = "queue.job.started";
pub const COMPLETED: &str = "queue.job.completed";
pub const FAILED: &str = "queue.job.failed";
pub const TIMED_OUT: &str = "queue.job.timed_out";
pub const BLOCKED: &str = "queue.job.blocked";
pub const CANCELLED: &str = "queue.job.cancelled";
pub const RETRIED: &str = "queue.job.retried";
pub const INTERRUPTED: &str = "queue.job.interrupted";

fn event(ty: &'static str, actor: Option<&str>, job: &Job, payload: serde_json::Value) -> NewEvent {
    let mut payload = payload;
    payload["workspace"] = json!(job.workspace);
    payload["job"] = json!(job.id);
    NewEvent {
        event_type: ty,
        actor: actor.map(str::to_string),
        target: Some(job.key()),
        project: Some(job.workspace.clone()),
        payload,
    }
}

/// Add a manifest's jobs. `workspace` is the record to create when the workspace is new (its
/// docs are merged into an existing one); `archived_completed` are ids of jobs of this workspace
/// that completed and were archived (they satisfy dependencies).
pub fn submit(
    doc: &mut QueueDoc,
    m: &Manifest,
    workspace: Workspace,
    archived_completed: &BTreeSet<String>,
    now: Timestamp,
) -> Result<Vec<NewEvent>> {
    let live: BTreeMap<&str, State> = doc
        .jobs
        .iter()
        .filter(|j| j.workspace == m.workspace)
        .map(|j| (j.id.as_str(), j.state.state))
        .collect();
    for j in &m.jobs {
        if let Some(s) = live.get(j.id.as_str()) {
            return Err(Error::invalid(
                Reason::DuplicateJob,
                format!(
                    "job `{}` is already in workspace `{}` ({}); pick another id or cancel it first",
                    j.id,
                    m.workspace,
                    s.as_str()
                ),
            ));
        }
    }
    manifest::check_graph(m, &|id| {
        live.contains_key(id) || archived_completed.contains(id)
    })?;
    let ws = doc
        .workspaces
        .entry(m.workspace.clone())
        .or_insert(workspace.clone());
    for d in &workspace.docs_loaded {
        if !ws.docs_loaded.contains(d) {
            ws.docs_loaded.push(d.clone());
        }
    }
    ws.docs_loaded.sort();
    let mut events = Vec::new();
    for s in &m.jobs {
        let job = Job {
            id: s.id.clone(),
            workspace: m.workspace.clone(),
            prompt: s.prompt.clone(),
            docs: s.docs.clone(),
            secrets: s.secrets.clone(),
            workdir: s.workdir.clone(),
            depends_on: s.depends_on.clone(),
            outcomes: s.outcomes.clone(),
            timeout_minutes: s.timeout_minutes,
            agent: s.agent.clone(),
            model: s.model.clone(),
            submitted_at: now,
            state: JobStatus::new(State::Queued, now),
            ran_with: None,
            priority: s.priority,
            paused: false,
            repo: s.repo.clone(),
            branch: s.branch.clone(),
            base: s.base.clone(),
            merge: Vec::new(),
        };
        let job = start_from(job, m, doc);
        events.push(event(
            SUBMITTED,
            None,
            &job,
            json!({"depends_on": job.depends_on}),
        ));
        doc.jobs.push(job);
    }
    settle(doc, now, None, &mut events);
    doc.updated_at = now;
    Ok(events)
}

/// A repository job starts from its dependencies' branches in the same repository (the first
/// one's, the others merged in), looked up in the manifest, then among the workspace's live
/// jobs; with none, from the manifest's `base`. A dependency on the job's own branch is not a
/// start: the job continues in that worktree.
fn start_from(mut job: Job, m: &Manifest, doc: &QueueDoc) -> Job {
    let (Some(repo), Some(branch)) = (job.repo.clone(), job.branch.clone()) else {
        return job;
    };
    let mut from: Vec<String> = Vec::new();
    for d in &job.depends_on {
        let theirs = m
            .jobs
            .iter()
            .find(|j| &j.id == d)
            .map(|j| (j.repo.clone(), j.branch.clone()))
            .or_else(|| {
                doc.jobs
                    .iter()
                    .find(|j| j.workspace == m.workspace && &j.id == d)
                    .map(|j| (j.repo.clone(), j.branch.clone()))
            });
        if let Some((Some(r), Some(b))) = theirs
            && r == repo
            && b != branch
            && !from.contains(&b)
        {
            from.push(b);
        }
    }
    if !from.is_empty() {
        job.base = Some(from.remove(0));
        job.merge = from;
    }
    job
}

/// Apply the dependency rules until nothing changes: queued jobs whose dependencies all
/// completed become ready; queued or ready jobs with a failed, timed-out, blocked or cancelled
/// dependency become blocked. A dependency that is not live was archived, hence completed.
pub fn settle(doc: &mut QueueDoc, now: Timestamp, actor: Option<&str>, events: &mut Vec<NewEvent>) {
    // Each waiting job's dependencies as indices of live jobs (`None`: not live, so archived),
    // found once; each pass decides on the states as they were when it began (so which
    // dependency a job is blocked by does not depend on the order of the jobs), copied into a
    // plain vector rather than a map of cloned keys.
    let deps: Vec<(usize, Vec<Option<usize>>)> = {
        let at: std::collections::HashMap<(&str, &str), usize> = doc
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| ((j.workspace.as_str(), j.id.as_str()), i))
            .collect();
        doc.jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| matches!(j.state.state, State::Queued | State::Ready))
            .map(|(i, j)| {
                let ds = j
                    .depends_on
                    .iter()
                    .map(|d| at.get(&(j.workspace.as_str(), d.as_str())).copied())
                    .collect();
                (i, ds)
            })
            .collect()
    };
    loop {
        let states: Vec<State> = doc.jobs.iter().map(|j| j.state.state).collect();
        let mut changed = false;
        for (i, ds) in &deps {
            if !matches!(doc.jobs[*i].state.state, State::Queued | State::Ready) {
                continue;
            }
            let deps = doc.jobs[*i]
                .depends_on
                .iter()
                .zip(ds)
                .map(|(d, at)| (d, at.map(|k| states[k])));
            let verdict = waiting_on(deps);
            match apply_waiting(&mut doc.jobs[*i], verdict, now, actor, events) {
                Settled::Blocked | Settled::Readied => changed = true,
                Settled::Unchanged => {}
            }
        }
        if !changed {
            return;
        }
    }
}

/// Indices of the ready jobs a dispatcher may start, highest priority first, then in
/// submission order. None while the queue is paused; a paused job is skipped.
pub fn ready(doc: &QueueDoc) -> Vec<usize> {
    if doc.paused {
        return Vec::new();
    }
    // One pass into a list per priority (no sort: the dispatcher asks once per batch).
    let mut by_priority: [Vec<usize>; 4] = Default::default();
    for (i, job) in doc.jobs.iter().enumerate() {
        if startable(doc, job) {
            by_priority[job.priority as usize].push(i);
        }
    }
    by_priority.concat()
}

/// Whether a dispatcher may start `job` now: it is ready, and neither it nor the queue is paused.
pub fn startable(doc: &QueueDoc, job: &Job) -> bool {
    job.state.state == State::Ready && !doc.paused && !job.paused
}

/// Event types of `queue pause` and `queue resume`.
pub const PAUSED: &str = "queue.paused";
pub const RESUMED: &str = "queue.resumed";

/// `queue pause` (`pause` true) or `queue resume`: the whole queue when `names` is empty, else
/// the named live jobs. Returns the keys of the jobs changed (empty for the whole queue).
pub fn set_paused(
    doc: &mut QueueDoc,
    names: &[String],
    pause: bool,
    events: &mut Vec<NewEvent>,
) -> Result<Vec<String>> {
    let ty = if pause { PAUSED } else { RESUMED };
    if names.is_empty() {
        doc.paused = pause;
        events.push(NewEvent {
            event_type: ty,
            actor: None,
            target: None,
            project: None,
            payload: json!({"queue": true}),
        });
        return Ok(Vec::new());
    }
    let mut idx = Vec::new();
    for n in names {
        idx.push(find(doc, n)?);
    }
    let mut keys = Vec::new();
    for i in idx {
        let job = &mut doc.jobs[i];
        job.paused = pause;
        keys.push(job.key());
        let e = event(ty, None, job, json!({}));
        events.push(e);
    }
    Ok(keys)
}

/// Find a live job by `JOB` or `WORKSPACE/JOB`. An id used in several workspaces is ambiguous.
pub fn find(doc: &QueueDoc, name: &str) -> Result<usize> {
    let hits: Vec<usize> = (0..doc.jobs.len())
        .filter(|i| {
            let j = &doc.jobs[*i];
            j.key() == name || j.id == name
        })
        .collect();
    match hits.as_slice() {
        [i] => Ok(*i),
        [] => Err(Error::invalid(
            Reason::UnknownJob,
            format!("no live job `{name}` in the queue"),
        )),
        many => {
            // An exact `ws/job` match wins over bare ids.
            if let Some(i) = many.iter().find(|i| doc.jobs[**i].key() == name) {
                return Ok(*i);
            }
            let names: Vec<String> = many.iter().map(|i| doc.jobs[*i].key()).collect();
            Err(Error::invalid(
                Reason::AmbiguousJob,
                format!(
                    "job id `{name}` is in several workspaces: {}; name it as WORKSPACE/JOB",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Mark a ready job running for `dispatcher`.
pub fn start(
    doc: &mut QueueDoc,
    i: usize,
    dispatcher: &str,
    how: &super::ran_with::RanWith,
    now: Timestamp,
) -> NewEvent {
    let runner = how.name();
    let job = &mut doc.jobs[i];
    job.ran_with = Some(how.clone());
    let mut st = JobStatus::new(State::Running, now);
    st.attempts = job.state.attempts + 1;
    st.started_at = Some(now);
    st.dispatcher = Some(dispatcher.to_string());
    st.runner = Some(runner.to_string());
    job.state = st;
    event(
        STARTED,
        Some(dispatcher),
        job,
        json!({"attempt": job.state.attempts, "runner": runner}),
    )
}

/// True when the job is running under this dispatcher.
pub fn runs_under(job: &Job, dispatcher: &str) -> bool {
    job.state.state == State::Running && job.state.dispatcher.as_deref() == Some(dispatcher)
}

/// Record the process id of a job this dispatcher started.
pub fn set_pid(doc: &mut QueueDoc, key: &str, dispatcher: &str, pid: u32) {
    if let Some(i) = doc.position_of(key)
        && runs_under(&doc.jobs[i], dispatcher)
    {
        doc.jobs[i].state.pid = Some(pid);
    }
}

/// True when `key` is the job's `WORKSPACE/JOB` (without building the key).
pub fn has_key(job: &Job, key: &str) -> bool {
    key.strip_prefix(job.workspace.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|id| id == job.id)
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// Exit status 0. `result` is the RESULT.md path if it exists; `usage`, what the agent
    /// printed that it used (tokens, cost) in this attempt.
    Completed {
        result: Option<String>,
        usage: Option<crate::usage::Usage>,
    },
    /// Non-zero exit (`exit_code`), a signal, or a start failure (`reason`).
    Failed {
        exit_code: Option<i32>,
        reason: String,
        result: Option<String>,
        usage: Option<crate::usage::Usage>,
    },
    /// Killed at its deadline.
    TimedOut { minutes: f64 },
    /// Refused before starting: a secret is missing.
    MissingSecret { name: String },
}

/// The usage of the attempt that ended (none printed: none recorded).
fn set_usage(st: &mut JobStatus, usage: Option<crate::usage::Usage>) {
    st.tokens = usage.map(|u| u.tokens);
    st.cost_usd = usage.map(|u| u.cost_usd);
}

/// Record the end of a job this dispatcher ran (ignored if it is no longer running under it:
/// cancelled meanwhile). Settles the dependents.
pub fn finish(
    doc: &mut QueueDoc,
    key: &str,
    dispatcher: &str,
    how: Finish,
    now: Timestamp,
    events: &mut Vec<NewEvent>,
) {
    let Some(i) = doc.position_of(key) else {
        return;
    };
    let job = &mut doc.jobs[i];
    let missing = matches!(how, Finish::MissingSecret { .. });
    if !missing && !runs_under(job, dispatcher) {
        return;
    }
    let st = &mut job.state;
    st.since = now;
    st.finished_at = Some(now);
    let (ty, payload) = match how {
        Finish::Completed { result, usage } => {
            st.state = State::Completed;
            st.exit_code = Some(0);
            st.result = result.clone();
            set_usage(st, usage);
            (COMPLETED, json!({"exit_code": 0, "result": result}))
        }
        Finish::Failed {
            exit_code,
            reason,
            result,
            usage,
        } => {
            set_usage(st, usage);
            st.state = State::Failed;
            st.exit_code = exit_code;
            st.reason = Some(reason.clone());
            st.result = result;
            (FAILED, json!({"exit_code": exit_code, "reason": reason}))
        }
        Finish::TimedOut { minutes } => {
            st.state = State::TimedOut;
            let reason = format!("timed out after {minutes} min; its process group was killed");
            st.reason = Some(reason.clone());
            (TIMED_OUT, json!({"reason": reason}))
        }
        Finish::MissingSecret { name } => {
            let mut fresh = JobStatus::new(State::Blocked, now);
            fresh.attempts = st.attempts;
            let reason = format!("missing secret {name}");
            fresh.reason = Some(reason.clone());
            *st = fresh;
            (BLOCKED, json!({"reason": reason, "missing_secret": name}))
        }
    };
    events.push(event(ty, Some(dispatcher), job, payload));
    let (ws, id) = (job.workspace.clone(), job.id.clone());
    settle_dependents(doc, &ws, &id, now, Some(dispatcher), events);
    doc.updated_at = now;
}

/// [`settle`] after job `ws/id` changed state, on a queue that was settled before: only its
/// dependents (and, through blocks, theirs) can change. A scan of the jobs per changed job
/// instead of a map of every job, so a dispatcher's cost per job does not grow with the queue.
pub fn settle_dependents(
    doc: &mut QueueDoc,
    ws: &str,
    id: &str,
    now: Timestamp,
    actor: Option<&str>,
    events: &mut Vec<NewEvent>,
) {
    let mut changed = vec![id.to_string()];
    while let Some(id) = changed.pop() {
        let waiting: Vec<usize> = (0..doc.jobs.len())
            .filter(|i| {
                let j = &doc.jobs[*i];
                !j.depends_on.is_empty()
                    && j.depends_on.contains(&id)
                    && j.workspace == ws
                    && matches!(j.state.state, State::Queued | State::Ready)
            })
            .collect();
        for i in waiting {
            let state_of = |d: &str| {
                doc.jobs
                    .iter()
                    .find(|j| j.workspace == ws && j.id == d)
                    .map(|j| j.state.state)
            };
            let verdict = waiting_on(doc.jobs[i].depends_on.iter().map(|d| (d, state_of(d))));
            if let Settled::Blocked = apply_waiting(&mut doc.jobs[i], verdict, now, actor, events) {
                changed.push(doc.jobs[i].id.clone());
            }
        }
    }
}

/// What a queued or ready job waits on, from its dependencies' states (`None`: not live, so
/// archived as completed or unknown).
enum Waiting {
    /// Every dependency completed.
    Nothing,
    /// Some dependency has not finished yet.
    Others,
    /// This dependency failed, timed out, was cancelled or is blocked: the job never runs.
    Stuck(String, State),
}

fn waiting_on<'a>(deps: impl Iterator<Item = (&'a String, Option<State>)>) -> Waiting {
    let mut verdict = Waiting::Nothing;
    for (d, state) in deps {
        match state {
            None | Some(State::Completed) => {}
            Some(s) if s.is_stuck() || s == State::Cancelled => {
                return Waiting::Stuck(d.clone(), s);
            }
            Some(_) => verdict = Waiting::Others,
        }
    }
    verdict
}

/// What [`apply_waiting`] did to a job.
enum Settled {
    Blocked,
    Readied,
    Unchanged,
}

/// Block `job` on its stuck dependency (with its event), or make it ready when it waits on
/// nothing.
fn apply_waiting(
    job: &mut Job,
    verdict: Waiting,
    now: Timestamp,
    actor: Option<&str>,
    events: &mut Vec<NewEvent>,
) -> Settled {
    match verdict {
        Waiting::Stuck(dep, s) => {
            let why = match s {
                State::Failed => "failed",
                State::TimedOut => "timed out",
                State::Cancelled => "was cancelled",
                _ => "is blocked",
            };
            let reason = format!("dependency `{dep}` {why}");
            let mut st = JobStatus::new(State::Blocked, now);
            st.attempts = job.state.attempts;
            st.reason = Some(reason.clone());
            st.blocked_by = Some(dep.clone());
            job.state = st;
            events.push(event(
                BLOCKED,
                actor,
                job,
                json!({"reason": reason, "blocked_by": dep}),
            ));
            Settled::Blocked
        }
        Waiting::Nothing if job.state.state == State::Queued => {
            job.state.state = State::Ready;
            job.state.since = now;
            Settled::Readied
        }
        _ => Settled::Unchanged,
    }
}

/// Put a job that was running under a dispatcher that is gone back in line (it never recorded
/// an end, so it never completed: it runs again). Settles.
pub fn interrupt(
    doc: &mut QueueDoc,
    i: usize,
    reason: &str,
    actor: &str,
    now: Timestamp,
    events: &mut Vec<NewEvent>,
) {
    let job = &mut doc.jobs[i];
    let mut st = JobStatus::new(State::Queued, now);
    st.attempts = job.state.attempts;
    st.reason = Some(reason.to_string());
    job.state = st;
    events.push(event(
        INTERRUPTED,
        Some(actor),
        job,
        json!({"reason": reason}),
    ));
    settle(doc, now, Some(actor), events);
    doc.updated_at = now;
}

/// Run a failed, timed-out, blocked or cancelled job again, and put back in line every job that
/// was blocked (transitively) because of it. Returns the keys put back, the job first.
pub fn retry(
    doc: &mut QueueDoc,
    i: usize,
    now: Timestamp,
    events: &mut Vec<NewEvent>,
) -> Result<Vec<String>> {
    let job = &doc.jobs[i];
    let s = job.state.state;
    if !(s.is_stuck() || s == State::Cancelled) {
        return Err(Error::invalid(
            Reason::NotRetryable,
            format!(
                "job `{}` is {}; only failed, timed-out, blocked or cancelled jobs can be retried",
                job.key(),
                s.as_str()
            ),
        ));
    }
    if let (State::Blocked, Some(dep)) = (s, &job.state.blocked_by) {
        return Err(Error::invalid(
            Reason::NotRetryable,
            format!(
                "job `{}` is blocked because dependency `{dep}` did not complete; retry `{}/{dep}` instead",
                job.key(),
                job.workspace
            ),
        ));
    }
    let ws = job.workspace.clone();
    let mut freed: BTreeSet<String> = BTreeSet::new();
    freed.insert(job.id.clone());
    let mut order = vec![i];
    loop {
        let mut grew = false;
        for (k, j) in doc.jobs.iter().enumerate() {
            if j.workspace == ws
                && j.state.state == State::Blocked
                && j.state
                    .blocked_by
                    .as_ref()
                    .is_some_and(|b| freed.contains(b))
                && !freed.contains(&j.id)
            {
                freed.insert(j.id.clone());
                order.push(k);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let mut keys = Vec::new();
    for k in order {
        let job = &mut doc.jobs[k];
        let mut st = JobStatus::new(State::Queued, now);
        st.attempts = job.state.attempts;
        job.state = st;
        keys.push(job.key());
        events.push(event(RETRIED, None, job, json!({})));
    }
    settle(doc, now, None, events);
    doc.updated_at = now;
    Ok(keys)
}

/// A running job that a cancel has to stop.
#[derive(Clone, Debug, PartialEq)]
pub struct ToStop {
    pub key: String,
    pub pid: Option<u32>,
    pub dispatcher: Option<String>,
    pub attempt: u32,
}

/// Cancel jobs that are not completed (a job, or every job of a workspace). Returns the running
/// ones, whose processes the caller stops. Their dependents become blocked.
pub fn cancel(
    doc: &mut QueueDoc,
    targets: &[usize],
    now: Timestamp,
    events: &mut Vec<NewEvent>,
) -> Vec<ToStop> {
    let mut stop = Vec::new();
    for &i in targets {
        let job = &mut doc.jobs[i];
        if job.state.is_final() {
            continue;
        }
        if job.state.state == State::Running {
            stop.push(ToStop {
                key: job.key(),
                pid: job.state.pid,
                dispatcher: job.state.dispatcher.clone(),
                attempt: job.state.attempts,
            });
        }
        let was = job.state.state;
        let mut st = JobStatus::new(State::Cancelled, now);
        st.attempts = job.state.attempts;
        st.finished_at = Some(now);
        st.reason = Some(format!("cancelled while {}", was.as_str()));
        job.state = st;
        events.push(event(CANCELLED, None, job, json!({"was": was.as_str()})));
    }
    settle(doc, now, None, events);
    doc.updated_at = now;
    stop
}

impl JobStatus {
    /// True for completed and cancelled.
    pub fn is_final(&self) -> bool {
        self.state.is_final()
    }
}

/// Move out every job of each workspace whose jobs are all completed or cancelled (they go to
/// the finished ledger), so the live document only holds work that can still change.
pub fn archive(doc: &mut QueueDoc) -> Vec<Job> {
    let mut open: BTreeSet<String> = BTreeSet::new();
    for j in &doc.jobs {
        if !j.state.is_final() {
            open.insert(j.workspace.clone());
        }
    }
    // Moved out in place: no second list of the jobs kept, and the archived ones in a list of
    // their exact size (a big workspace that ends is most of the queue).
    let n = doc
        .jobs
        .iter()
        .filter(|j| !open.contains(&j.workspace))
        .count();
    if n == 0 {
        return Vec::new();
    }
    let mut done = Vec::with_capacity(n);
    done.extend(doc.jobs.extract_if(.., |j| !open.contains(&j.workspace)));
    doc.jobs.shrink_to_fit();
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> super::super::ran_with::RanWith {
        super::super::ran_with::RanWith::new(&super::super::exec::Runner::Local, "agent")
    }

    fn now() -> Timestamp {
        Timestamp::parse("2026-02-05T10:00:00Z").unwrap()
    }

    fn doc_with(jobs: &str) -> QueueDoc {
        let m = manifest::parse(&format!(r#"{{"workspace":"w","jobs":{jobs}}}"#), "t").unwrap();
        let mut d = <QueueDoc as crate::store::Document>::empty(now());
        let ws = Workspace {
            id: "w".into(),
            dir: "/x".into(),
            docs_loaded: vec![],
            created_at: now(),
        };
        submit(&mut d, &m, ws, &BTreeSet::new(), now()).unwrap();
        d
    }

    fn state(d: &QueueDoc, id: &str) -> State {
        d.jobs.iter().find(|j| j.id == id).unwrap().state.state
    }

    #[test]
    fn failure_blocks_exactly_the_transitive_dependents_and_retry_frees_them() {
        let mut d = doc_with(
            r#"[{"id":"a","prompt":"p"},{"id":"b","prompt":"p","depends_on":["a"]},
                {"id":"c","prompt":"p","depends_on":["b"]},{"id":"x","prompt":"p"}]"#,
        );
        assert_eq!(ready(&d), vec![0, 3]);
        let mut ev = Vec::new();
        start(&mut d, 0, "D", &local(), now());
        let fail = Finish::Failed {
            exit_code: Some(3),
            reason: "exit 3".into(),
            result: None,
            usage: None,
        };
        finish(&mut d, "w/a", "D", fail, now(), &mut ev);
        assert_eq!(
            (
                state(&d, "a"),
                state(&d, "b"),
                state(&d, "c"),
                state(&d, "x")
            ),
            (State::Failed, State::Blocked, State::Blocked, State::Ready)
        );
        let keys = retry(&mut d, 0, now(), &mut ev).unwrap();
        assert_eq!(keys, ["w/a", "w/b", "w/c"]);
        assert_eq!(
            (state(&d, "a"), state(&d, "b"), state(&d, "c")),
            (State::Ready, State::Queued, State::Queued)
        );
        assert!(retry(&mut d, 3, now(), &mut ev).is_err());
    }

    #[test]
    fn a_finish_from_another_dispatcher_is_ignored() {
        let mut d = doc_with(r#"[{"id":"a","prompt":"p"}]"#);
        start(&mut d, 0, "D1", &local(), now());
        let mut ev = Vec::new();
        let done = Finish::Completed {
            result: None,
            usage: None,
        };
        finish(&mut d, "w/a", "D2", done, now(), &mut ev);
        assert_eq!(state(&d, "a"), State::Running);
        assert!(ev.is_empty());
    }

    #[test]
    fn completed_workspaces_are_archived() {
        let mut d = doc_with(r#"[{"id":"a","prompt":"p"}]"#);
        start(&mut d, 0, "D", &local(), now());
        let done = Finish::Completed {
            result: None,
            usage: None,
        };
        finish(&mut d, "w/a", "D", done, now(), &mut Vec::new());
        let gone = archive(&mut d);
        assert_eq!(gone.len(), 1);
        assert!(d.jobs.is_empty());
    }
}
