//! The dispatcher (`conductor queue run`): starts every ready job, and a dependent the moment
//! its last dependency completes.
//!
//! It never polls and never re-queues. It sleeps on one channel fed by (a) a thread per child
//! blocked in `wait()`, so a job's exit wakes it at once, (b) the home watcher on the event
//! journal, so submissions, retries and cancels from other processes wake it, and (c) stop
//! signals. The only timer is the nearest job deadline (and, on a terminal, the once-a-second
//! redraw of the progress display).
//!
//! Each wakeup becomes at most one store transaction, which records every exit seen since the
//! last one, the pids of the jobs started last time, and marks the next ready jobs `running`
//! (several jobs' changes per transaction: every change is durable, without a transaction per
//! job). A job is marked `running` before its process exists; its pid is recorded by the next
//! transaction. A dispatcher that dies leaves jobs `running` under its token: the next
//! dispatcher sees the token's process is gone, kills whatever still carries the job's
//! `CONDUCTOR_QUEUE_RUN` and puts the job back in line (`queue.job.interrupted`). Completed jobs
//! are never started again: only `ready` jobs are ever started, in a transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::exec::{self, Launch, Runner};
use super::ops::{self, Finish};
use super::{JOBS_DONE, Job, Layout, QueueDoc, State, prompt};
use crate::error::{Error, IoContext, Result};
use crate::store::journal::Tail;
use crate::store::{Lock, Store};
use crate::time::Timestamp;
use crate::watch::{self, Wake};

/// How to dispatch.
#[derive(Clone, Debug)]
pub struct Options {
    pub parallel: usize,
    pub runner: Runner,
    pub agent_cmd: String,
    pub follow: bool,
    pub secrets_file: Option<PathBuf>,
    /// Redraw once a second (a terminal is watching).
    pub tick: bool,
    /// Start only these jobs (`WORKSPACE/JOB` keys; `queue retry`): the rest are left for
    /// another dispatcher.
    pub only: Option<BTreeSet<String>>,
}

/// The lock every dispatcher holds shared while it runs, so `queue retry` can tell whether one
/// will pick its job up (see [`crate::store::lock::Presence`]).
pub const RUN_LOCK: &str = "queue-run.lock";

/// True while a dispatcher runs on this home.
pub fn dispatcher_running(home: &Path) -> Result<bool> {
    crate::store::lock::anyone_present(&home.join(RUN_LOCK))
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

enum Msg {
    Exited {
        key: String,
        status: std::io::Result<std::process::ExitStatus>,
    },
    Journal,
    Stop,
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
    id: String,
}

/// A job the transaction marked running, to launch after the commit.
struct ToLaunch {
    job: Job,
    secrets: Vec<(String, String)>,
    scrub: BTreeSet<String>,
    prior: Vec<String>,
}

/// Read a secrets file: `NAME=value` lines (`#` comments, optional `export `, optional quotes).
/// It must be a regular file of ours that nobody else can read.
pub fn read_secrets_file(path: &Path) -> Result<BTreeMap<String, String>> {
    let meta = std::fs::metadata(path).ctx("read the secrets file", path)?;
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(Error::invalid(
            "unsafe_secrets_file",
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
                "invalid_secrets_file",
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

/// Run the dispatcher until no job can make progress (or forever with `follow`).
pub fn run(store: &Store, opts: &Options, progress: &mut dyn FnMut(Update)) -> Result<Summary> {
    watch::block_stop_signals();
    let home = store.home().dir().to_path_buf();
    let layout = Layout { home: home.clone() };
    let me = exec::self_token();
    let file_secrets = match &opts.secrets_file {
        Some(p) => read_secrets_file(p)?,
        None => BTreeMap::new(),
    };
    let parallel = opts.parallel.max(1);
    let run_lock = home.join(RUN_LOCK);
    let presence = crate::store::lock::announce_presence(&run_lock)?;
    let wanted = |j: &Job| opts.only.as_ref().is_none_or(|o| o.contains(&j.key()));
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut tail = store.tail(None)?;
    let watcher = store.watcher(crate::store::journal::is_journal_file)?;
    watcher.stop_on_signals_and_closed_stdout();
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            loop {
                match watcher.wait(None) {
                    Wake::Changed => {
                        if tx.send(Msg::Journal).is_err() {
                            return;
                        }
                    }
                    Wake::Stop => {
                        let _ = tx.send(Msg::Stop);
                        return;
                    }
                    Wake::Timeout => {}
                }
            }
        });
    }

    recover(store, &me, progress)?;

    let mut summary = Summary::default();
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut exited: Vec<(String, Finish, Option<Duration>)> = Vec::new();
    let mut new_pids: Vec<(String, u32)> = Vec::new();
    let mut dirty = true;
    let mut more = false;
    // The queue as this dispatcher last committed it, and its bytes: the next step decodes the
    // file again only if someone else changed it since.
    let mut cached: Option<(Vec<u8>, QueueDoc)> = None;
    loop {
        if dirty || !exited.is_empty() {
            let free = parallel.saturating_sub(running.len());
            let now = Timestamp::now();
            let ended: Vec<(String, Finish, Option<Duration>)> = std::mem::take(&mut exited);
            let pids = std::mem::take(&mut new_pids);
            let runner_name = opts.runner.name();
            // Jobs marked running are prepared on disk (see `prepare`) while the commit runs.
            let (step, prepared) = std::thread::scope(|scope| {
                let (prep_tx, prep_rx) = mpsc::channel::<ToLaunch>();
                let runner = &opts.runner;
                let layout = &layout;
                let worker = scope.spawn(move || {
                    prep_rx
                        .into_iter()
                        .map(|l| {
                            let r = prepare(layout, &l, runner);
                            (l, r)
                        })
                        .collect::<Vec<_>>()
                });
                // With a shared store the transaction may run again: only the launches of the
                // run that committed count.
                let mut launches: Vec<String> = Vec::new();
                let step = store.transaction(now, &[Lock::Queue], |tx| {
                    launches.clear();
                    let mut doc: QueueDoc = tx.read_cached(cached.take())?;
                    let mut events = Vec::new();
                    for (key, pid) in &pids {
                        ops::set_pid(&mut doc, key, &me, *pid);
                    }
                    for (key, how, _) in &ended {
                        ops::finish(&mut doc, key, &me, how.clone(), now, &mut events);
                    }
                    // Jobs we run that someone cancelled meanwhile.
                    let dropped: Vec<String> = running
                        .keys()
                        .filter(|k| {
                            !doc.jobs
                                .iter()
                                .any(|j| &j.key() == *k && ops::runs_under(j, &me))
                        })
                        .cloned()
                        .collect();
                    let scrub: BTreeSet<String> = doc
                        .jobs
                        .iter()
                        .flat_map(|j| j.secrets.iter().cloned())
                        .chain(file_secrets.keys().cloned())
                        .collect();
                    let mut free = free;
                    // Starting one may block another (missing secret): go round until stable.
                    loop {
                        let ready: Vec<usize> = ops::ready(&doc)
                            .into_iter()
                            .filter(|i| wanted(&doc.jobs[*i]))
                            .collect();
                        let mut progressed = false;
                        for i in ready {
                            if free == 0 {
                                break;
                            }
                            let job = &doc.jobs[i];
                            let mut secrets = Vec::new();
                            let mut missing = None;
                            for name in &job.secrets {
                                match std::env::var(name)
                                    .ok()
                                    .or_else(|| file_secrets.get(name).cloned())
                                {
                                    Some(v) => secrets.push((name.clone(), v)),
                                    None => {
                                        missing = Some(name.clone());
                                        break;
                                    }
                                }
                            }
                            let key = job.key();
                            if let Some(name) = missing {
                                ops::finish(
                                    &mut doc,
                                    &key,
                                    &me,
                                    Finish::MissingSecret { name },
                                    now,
                                    &mut events,
                                );
                                progressed = true;
                                break;
                            }
                            events.push(ops::start(&mut doc, i, &me, runner_name, now));
                            let job = doc.jobs[i].clone();
                            let prior = job.depends_on.clone();
                            launches.push(job.key());
                            let _ = prep_tx.send(ToLaunch {
                                job,
                                secrets,
                                scrub: scrub.clone(),
                                prior,
                            });
                            free -= 1;
                        }
                        if !progressed {
                            break;
                        }
                    }
                    let archived = ops::archive(&mut doc);
                    for j in &archived {
                        tx.append(JOBS_DONE, serde_json::to_string(j).expect("jobs serialize"))?;
                    }
                    let more = doc
                        .jobs
                        .iter()
                        .any(|j| j.state.state == State::Ready && wanted(j))
                        || (doc
                            .jobs
                            .iter()
                            .any(|j| j.state.state == State::Queued && wanted(j))
                            && doc.jobs.iter().any(|j| j.state.state == State::Running));
                    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
                    for j in &doc.jobs {
                        *remaining.entry(j.state.state.as_str().into()).or_default() += 1;
                    }
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
                    Ok((dropped, more, remaining, shown, bytes.map(|b| (b, doc))))
                });
                drop(prep_tx);
                let mut prepared = worker.join().expect("the prepare thread does not panic");
                if prepared.len() > launches.len() {
                    // Keep the last preparation of each launch of the committed run.
                    let mut seen = BTreeSet::new();
                    prepared.reverse();
                    prepared.retain(|(l, _)| {
                        let k = l.job.key();
                        launches.contains(&k) && seen.insert(k)
                    });
                    prepared.reverse();
                }
                (step, prepared)
            });
            let (dropped, more_now, remaining, shown, committed) = match step {
                Ok(v) => v,
                Err(e) => {
                    for r in running.values() {
                        exec::kill_group(r.pid);
                    }
                    return Err(e);
                }
            };
            cached = committed;
            dirty = false;
            more = more_now;
            summary.remaining = remaining;
            let elapsed: HashMap<&str, Option<Duration>> =
                ended.iter().map(|(k, _, d)| (k.as_str(), *d)).collect();
            for (key, state, detail) in shown {
                if state == State::Running {
                    continue; // reported at spawn, with the pid
                }
                if matches!(
                    state,
                    State::Completed | State::Failed | State::TimedOut | State::Blocked
                ) {
                    *summary.ended.entry(state.as_str().into()).or_default() += 1;
                }
                progress(Update::Job {
                    elapsed: elapsed.get(key.as_str()).copied().flatten(),
                    key,
                    state,
                    detail,
                });
            }
            for key in dropped {
                if let Some(r) = running.get_mut(&key) {
                    exec::kill_group(r.pid);
                    r.dropped = true;
                }
            }
            for (l, prep) in prepared {
                let key = l.job.key();
                match prep.and_then(|()| launch(&layout, &l, &opts.runner, &opts.agent_cmd)) {
                    Ok((child, copier, ws_dir)) => {
                        let pid = child.id();
                        summary.started += 1;
                        let limit = Duration::from_secs_f64(l.job.timeout_minutes * 60.0);
                        running.insert(
                            key.clone(),
                            Running {
                                pid,
                                started: Instant::now(),
                                deadline: Instant::now() + limit,
                                minutes: l.job.timeout_minutes,
                                timed_out: false,
                                dropped: false,
                                workspace_dir: ws_dir,
                                id: l.job.id.clone(),
                            },
                        );
                        new_pids.push((key.clone(), pid));
                        progress(Update::Job {
                            key: key.clone(),
                            state: State::Running,
                            detail: format!("attempt {}, pid {pid}", l.job.state.attempts),
                            elapsed: None,
                        });
                        let tx = tx.clone();
                        let mut child = child;
                        std::thread::spawn(move || {
                            let status = child.wait();
                            // The tree ends with its leader; then the log copy has all of it.
                            exec::kill_group(pid);
                            if let Some(c) = copier {
                                let _ = c.join();
                            }
                            let _ = tx.send(Msg::Exited { key, status });
                        });
                    }
                    Err(e) => {
                        exited.push((
                            key,
                            Finish::Failed {
                                exit_code: None,
                                reason: format!("could not start the job: {e}"),
                                result: None,
                            },
                            None,
                        ));
                    }
                }
            }
            if !exited.is_empty() {
                continue;
            }
        }
        if running.is_empty() && !more && !opts.follow {
            // Nothing is left for us. Withdraw first, then look once more: a `queue retry`
            // that committed before it saw us withdraw counts on us to start its job.
            presence.withdraw();
            let doc: QueueDoc = store.read_doc(Timestamp::now())?;
            if !doc
                .jobs
                .iter()
                .any(|j| j.state.state == State::Ready && wanted(j))
            {
                return Ok(summary);
            }
            presence.renew(&run_lock)?;
            dirty = true;
            continue;
        }
        // Sleep until a child exits, the journal changes, a stop signal, or a deadline.
        let next_deadline = running
            .values()
            .filter(|r| !r.timed_out && !r.dropped)
            .map(|r| r.deadline)
            .min();
        let mut wait = next_deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if opts.tick && !running.is_empty() {
            wait = Some(wait.map_or(Duration::from_secs(1), |w| w.min(Duration::from_secs(1))));
        }
        let first = match wait {
            Some(w) => match rx.recv_timeout(w) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Msg::Stop),
            },
            None => Some(rx.recv().unwrap_or(Msg::Stop)),
        };
        let mut msgs: Vec<Msg> = first.into_iter().collect();
        while let Ok(m) = rx.try_recv() {
            msgs.push(m);
        }
        let mut stop = false;
        for m in msgs {
            handle(
                m,
                &mut running,
                &mut exited,
                &mut tail,
                &me,
                &mut dirty,
                &mut stop,
            )?;
        }
        // Siblings started together (no-op or very short jobs) tend to end together: give them
        // a moment so one transaction records them all. Jobs that have run for a while (real
        // agents) never wait here, nor does a lone job (a chain).
        while !exited.is_empty()
            && !stop
            && running
                .values()
                .any(|r| !r.dropped && r.started.elapsed() < COALESCE_YOUNGER_THAN)
        {
            match rx.recv_timeout(COALESCE_WINDOW) {
                Ok(m) => handle(
                    m,
                    &mut running,
                    &mut exited,
                    &mut tail,
                    &me,
                    &mut dirty,
                    &mut stop,
                )?,
                Err(_) => break,
            }
        }
        let now_i = Instant::now();
        for r in running.values_mut() {
            if !r.timed_out && !r.dropped && r.deadline <= now_i {
                exec::kill_group(r.pid);
                r.timed_out = true;
            }
        }
        if opts.tick {
            progress(Update::Tick);
        }
        if stop {
            return stop_all(store, &me, running, exited, summary, progress);
        }
    }
}

/// Siblings younger than this are waited for (at most [`COALESCE_WINDOW`] each) before the
/// exits seen so far are recorded.
const COALESCE_YOUNGER_THAN: Duration = Duration::from_millis(50);
/// How long to wait for one more sibling's exit.
const COALESCE_WINDOW: Duration = Duration::from_millis(2);

/// Take in one message: a child's exit (recorded in `exited`), a journal change (`dirty` when
/// another process changed the queue), a stop signal.
fn handle(
    m: Msg,
    running: &mut HashMap<String, Running>,
    exited: &mut Vec<(String, Finish, Option<Duration>)>,
    tail: &mut Tail,
    me: &str,
    dirty: &mut bool,
    stop: &mut bool,
) -> Result<()> {
    match m {
        Msg::Exited { key, status } => {
            let Some(r) = running.remove(&key) else {
                return Ok(());
            };
            // The job's tree ends with it: nothing it started outlives it.
            exec::kill_group(r.pid);
            let took = r.started.elapsed();
            if r.dropped {
                return Ok(());
            }
            let result = result_path(&r.workspace_dir, &r.id);
            let how = if r.timed_out {
                Finish::TimedOut { minutes: r.minutes }
            } else {
                match status {
                    Ok(s) if s.success() => Finish::Completed { result },
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(c), _) => Finish::Failed {
                            exit_code: Some(c),
                            reason: format!("the agent exited with status {c}"),
                            result,
                        },
                        (None, sig) => Finish::Failed {
                            exit_code: None,
                            reason: format!("the agent was killed by signal {}", sig.unwrap_or(0)),
                            result,
                        },
                    },
                    Err(e) => Finish::Failed {
                        exit_code: None,
                        reason: format!("could not wait for the agent: {e}"),
                        result,
                    },
                }
            };
            exited.push((key, how, Some(took)));
        }
        Msg::Journal => {
            let mut foreign = false;
            let me2 = me.to_string();
            tail.read(|ev| {
                if ev.event_type.starts_with("queue.") && ev.actor.as_deref() != Some(me2.as_str())
                {
                    foreign = true;
                }
                true
            })?;
            if foreign {
                *dirty = true;
            }
        }
        Msg::Stop => *stop = true,
    }
    Ok(())
}

/// SIGINT/SIGTERM: kill every running job's tree and put those jobs back in line; record what
/// already ended.
fn stop_all(
    store: &Store,
    me: &str,
    running: HashMap<String, Running>,
    exited: Vec<(String, Finish, Option<Duration>)>,
    mut summary: Summary,
    progress: &mut dyn FnMut(Update),
) -> Result<Summary> {
    for r in running.values() {
        exec::kill_group(r.pid);
    }
    let now = Timestamp::now();
    store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        for (key, how, _) in &exited {
            ops::finish(&mut doc, key, me, how.clone(), now, &mut events);
        }
        for key in running.keys() {
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
        Ok(())
    })?;
    for key in running.keys() {
        progress(Update::Job {
            key: key.clone(),
            state: State::Queued,
            detail: "stopped; it will run again".into(),
            elapsed: None,
        });
    }
    summary.stopped = true;
    let doc: QueueDoc = store.read_doc(now)?;
    summary.remaining.clear();
    for j in &doc.jobs {
        *summary
            .remaining
            .entry(j.state.state.as_str().into())
            .or_default() += 1;
    }
    Ok(summary)
}

/// Jobs recorded `running` under a dispatcher that is gone: kill what is left of them and put
/// them back in line. Jobs of a live dispatcher are left alone.
fn recover(store: &Store, me: &str, progress: &mut dyn FnMut(Update)) -> Result<()> {
    let now = Timestamp::now();
    let doc: QueueDoc = store.read_doc(now)?;
    let orphans: Vec<(String, String, Option<u32>, u32)> = doc
        .jobs
        .iter()
        .filter(|j| j.state.state == State::Running)
        .filter_map(|j| {
            let d = j.state.dispatcher.clone()?;
            (d != me && !exec::dispatcher_alive(&d))
                .then(|| (j.key(), d, j.state.pid, j.state.attempts))
        })
        .collect();
    if orphans.is_empty() {
        return Ok(());
    }
    for (key, d, pid, attempt) in &orphans {
        let (ws, id) = key.split_once('/').unwrap_or(("", key));
        let token = format!("{d}/{ws}/{id}/{attempt}");
        exec::kill_run(&token, *pid);
    }
    let keys: Vec<String> = store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        let mut done = Vec::new();
        for (key, d, _, _) in &orphans {
            if let Some(i) = doc.jobs.iter().position(|j| {
                &j.key() == key && j.state.state == State::Running && j.state.dispatcher.as_deref() == Some(d)
            }) {
                ops::interrupt(
                    &mut doc,
                    i,
                    "its dispatcher exited while it ran (no exit status was recorded); it runs again",
                    me,
                    now,
                    &mut events,
                );
                done.push(key.clone());
            }
        }
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok(done)
    })?;
    for key in keys {
        progress(Update::Job {
            key,
            state: State::Queued,
            detail: "interrupted: its dispatcher died; it runs again".into(),
            elapsed: None,
        });
    }
    Ok(())
}

fn result_path(ws_dir: &Path, id: &str) -> Option<String> {
    let p = ws_dir.join("output").join(id).join("RESULT.md");
    p.is_file().then(|| p.to_string_lossy().into_owned())
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

/// Make a job's directories, write its prompt file and create its log: everything a launch
/// needs on disk that does not depend on the job being recorded `running`. It runs on a helper
/// thread while the transaction that marks the job running commits (whose time is mostly spent
/// waiting for the disk), so the start itself is only the spawn. Done for a job whose
/// transaction then fails, it leaves a prompt file that the job's real start writes again.
fn prepare(layout: &Layout, l: &ToLaunch, runner: &Runner) -> std::io::Result<()> {
    let job = &l.job;
    let ws_dir = layout.workspace(&job.workspace);
    let out = layout.output(&job.workspace, &job.id);
    let log = layout.log(&job.workspace, &job.id);
    let prompt_file = layout.prompt(&job.workspace, &job.id);
    for d in [
        out.as_path(),
        log.parent().expect("log has a parent"),
        prompt_file.parent().expect("prompt has a parent"),
    ] {
        super::private_dir(d).map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    let root = match runner {
        Runner::Sandbox { .. } => job.workdir.clone(),
        _ => ws_dir.to_string_lossy().into_owned(),
    };
    let prior: Vec<prompt::Prior> = l
        .prior
        .iter()
        .map(|d| prompt::Prior {
            id: d.clone(),
            result: std::fs::read_to_string(layout.output(&job.workspace, d).join("RESULT.md"))
                .ok(),
        })
        .collect();
    let text = prompt::augmented(job, &root, &prior);
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&prompt_file)?
        .write_all(text.as_bytes())?;
    exec::create_log(&log)
}

/// Start a prepared job's process. Returns the child, the log copier and the workspace dir.
fn launch(
    layout: &Layout,
    l: &ToLaunch,
    runner: &Runner,
    agent_cmd: &str,
) -> std::io::Result<(
    std::process::Child,
    Option<std::thread::JoinHandle<()>>,
    PathBuf,
)> {
    let job = &l.job;
    let ws_dir = layout.workspace(&job.workspace);
    let log = layout.log(&job.workspace, &job.id);
    let prompt_file = layout.prompt(&job.workspace, &job.id);
    let launch = Launch {
        job,
        workspace_dir: &ws_dir,
        prompt_file: &prompt_file,
        log: &log,
        secrets: l.secrets.clone(),
        scrub: &l.scrub,
        run_token: exec::run_token(
            job.state.dispatcher.as_deref().unwrap_or(""),
            job,
            job.state.attempts,
        ),
        agent_cmd,
    };
    let (child, copier) = exec::spawn(&launch, runner)?;
    Ok((child, copier, ws_dir))
}
