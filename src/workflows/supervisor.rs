//! The workflow supervisor (`conductor workflow run SESSION`). It does no
//! work itself: it starts one fresh agent process per state, waits (woken by the home watcher,
//! never polling) for the worker's explicit transition and exit, runs cleanup, applies the
//! transition, and starts the next state, until no automated progress is possible.
//!
//! Every step is a transaction on the session's ledger, and each decision is made from what the
//! ledger says, so the supervisor can be killed at any instant: run again, it finds a run whose
//! worker it does not own (its supervisor died), stops that worker if it is still alive, and
//! either applies the transition that worker recorded or runs the interrupted state again with
//! the snapshot. A state whose transition was recorded is never run again.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::session::{Run, RunFiles};
use super::timeline::title;
use super::{
    self as workflows, RunOutcome, SESSION_FILES_DIR, Session, Sessions, Status, baseline, event,
    persona,
};
use crate::error::Reason;
use crate::error::{Error, IoContext, Result};
use crate::progress::Note;
use crate::protocol::request::{DoneRequest, StartRequest};
use crate::protocol::sessions::{self, Caller, StartOutcome};
use crate::protocol::{Outcome, Priority};
use crate::store::Store;
use crate::store::watch::{self, Wake};
use crate::time::Timestamp;

/// Re-read the ledger at least this often, in case a notification is lost.
const SAFETY_RESCAN: Duration = Duration::from_secs(10);
/// How long a stopped worker gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The worker of a session run without `--agent-cmd` (Chronicle's design: Pi sub-agents). The
/// persona is Pi's appended system prompt (the file's contents), the starting prompt goes once, on
/// stdin, and `--mode json` prints Pi's events, whose usage the supervisor counts against the
/// budgets. The workflow tools come from conductor's Pi extension (`conductor integrate pi`).
pub const DEFAULT_AGENT_CMD: &str = "pi -p --mode json --append-system-prompt {system_file}";

/// How to drive a session (the command line of `conductor workflow run`).
#[derive(Clone, Debug)]
pub struct Options {
    /// The session id (a unique prefix is enough).
    pub session: String,
    /// The agent command template (remembered for later runs of the session).
    pub agent_cmd: Option<String>,
    /// Keep waiting through approvals and pauses instead of returning.
    pub follow: bool,
    /// How long a worker may keep running after it recorded its transition before it is stopped.
    pub exit_grace: Option<Duration>,
}

/// How a supervisor run ended.
#[derive(Debug)]
pub enum Ending {
    /// No automated progress is possible: the session as it stands (done, awaiting approval,
    /// paused, needing a person, over budget, failed or aborted).
    Stopped(Box<Session>),
    /// Stopped by SIGINT/SIGTERM; run it again to resume.
    Interrupted,
}

/// What the supervisor works with: the store (quiet: a short wait for a commit in flight is not
/// worth a message) and where its notes go.
struct Sup<'a> {
    store: Store,
    progress: &'a mut dyn FnMut(Note),
}

impl Sup<'_> {
    fn status(&mut self, s: String) {
        (self.progress)(Note::Status(s));
    }
    fn warn(&mut self, s: String) {
        (self.progress)(Note::Warning(s));
    }
}

/// How often the usage a running worker printed is read and counted against the budgets.
const USAGE_EVERY: Duration = Duration::from_secs(5);

/// The usage of a worker's output counted so far (shared with its waiter, which counts the rest).
type Counted = std::sync::Arc<std::sync::Mutex<crate::usage::Usage>>;

/// Count what `output` says the worker used beyond `counted` (the caller holds the lock).
fn count_usage(
    store: &Store,
    id: &str,
    index: usize,
    output: &Path,
    counted: &mut crate::usage::Usage,
) -> Result<()> {
    let used = std::fs::read(output)
        .map(|b| crate::usage::parse(&String::from_utf8_lossy(&b)))
        .unwrap_or_default();
    if used.reports <= counted.reports {
        return Ok(());
    }
    let tokens = used.tokens.saturating_sub(counted.tokens);
    let cost = (used.cost_usd - counted.cost_usd).max(0.0);
    workflows::update(store, Timestamp::now(), id, |s, _| {
        let state = s.runs.get(index).map(|r| r.state.clone());
        // A state that already ended (resolved by a person) takes no usage.
        let _ = s.add_usage(state.as_deref(), tokens, cost, Timestamp::now());
        Ok(())
    })?;
    *counted = used;
    Ok(())
}

/// A worker this supervisor started.
struct Worker {
    /// Its output file, and the usage found there and counted so far.
    output: PathBuf,
    counted: Counted,
    usage_read: Instant,
    index: usize,
    /// What the waiter thread has to say (it has no way to the supervisor's notes).
    notes: std::sync::mpsc::Receiver<String>,
    pid: i32,
    waiter: std::thread::JoinHandle<()>,
    transitioned_at: Option<Instant>,
    killed_at: Option<Instant>,
}

/// Drive the session until no automated progress is possible; notes go to `progress`.
pub fn run(store: &Store, args: Options, progress: &mut dyn FnMut(Note)) -> Result<Ending> {
    watch::block_stop_signals();
    let id = workflows::find_session(store, Timestamp::now(), &args.session)?.id;
    let watcher = store.watcher(|name| name == "workflows.json")?;
    watcher.stop_on_signals_and_closed_stdout();
    let me = std::process::id();
    let agent_cmd = args.agent_cmd.clone();
    if agent_cmd.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::invalid(Reason::InvalidInput, "--agent-cmd is empty"));
    }
    let live: Sessions = store.read_doc(Timestamp::now())?;
    if live.sessions.iter().any(|s| s.id == id) {
        workflows::update(store, Timestamp::now(), &id, |s, _| {
            if let Some(p) = s.supervisor_pid
                && p != me
                && !crate::host::pid_is_dead(p)
            {
                return Err(Error::invalid(
                    Reason::AlreadySupervised,
                    format!(
                        "session {} is already being run by process {p} (stop it first with \
                         `kill {p}`; run this again to resume)",
                        s.id
                    ),
                ));
            }
            s.supervisor_pid = Some(me);
            if let Some(c) = &agent_cmd {
                s.agent_cmd = Some(c.clone());
            }
            if s.agent_cmd.is_none() {
                s.agent_cmd = Some(DEFAULT_AGENT_CMD.to_string());
            }
            Ok(())
        })?;
    }
    let grace = args.exit_grace;
    let mut worker: Option<Worker> = None;
    // Reads finish a commit in flight first; that short wait is not worth a message.
    let mut sv = Sup {
        store: Store::open(store.home().dir().to_path_buf(), store.lock_timeout())?,
        progress,
    };
    let sv = &mut sv;
    loop {
        let now = Timestamp::now();
        let doc: Sessions = sv.store.read_doc(now)?;
        let Some(s) = doc.sessions.into_iter().find(|s| s.id == id) else {
            // Finished (done or aborted): it moved to the finished ledger.
            if let Some(w) = worker.take() {
                stop_worker(w);
            }
            let s = workflows::find_session(&sv.store, now, &id)?;
            if let Some(inst) = s.runs.last().and_then(|r| r.instance_id.as_deref()) {
                finish_instance(sv, inst, Outcome::Abandoned, "workflow session ended");
            }
            return Ok(stopped(sv, s));
        };
        if let Some(w) = &mut worker {
            for n in w.notes.try_iter() {
                (sv.progress)(Note::Warning(n));
            }
            let r = &s.runs[w.index];
            if r.exit_code.is_some() {
                let w = worker.take().expect("checked");
                let _ = w.waiter.join();
                continue;
            }
            if matches!(s.status, Status::BudgetExceeded | Status::Aborted) && w.killed_at.is_none()
            {
                sv.status(format!(
                    "conductor: stopping the `{}` worker ({})",
                    r.state,
                    s.halt.as_deref().unwrap_or(s.status.as_str())
                ));
                kill_group(w.pid, libc::SIGTERM);
                w.killed_at = Some(Instant::now());
            }
            if s.pending.as_ref().is_some_and(|p| p.from == r.state) && w.transitioned_at.is_none()
            {
                w.transitioned_at = Some(Instant::now());
            }
            let mut timeout = SAFETY_RESCAN;
            // The usage it printed so far: a budget passed stops it (below, at the next pass).
            if w.killed_at.is_none() {
                if w.usage_read.elapsed() >= USAGE_EVERY {
                    w.usage_read = Instant::now();
                    let mut counted = w.counted.lock().unwrap_or_else(|e| e.into_inner());
                    if let Err(e) = count_usage(&sv.store, &id, w.index, &w.output, &mut counted) {
                        drop(counted);
                        sv.warn(format!("could not record the worker's usage: {e}"));
                    }
                    continue;
                }
                timeout = timeout.min(USAGE_EVERY - w.usage_read.elapsed());
            }
            if let Some(k) = w.killed_at {
                if k.elapsed() >= KILL_GRACE {
                    kill_group(w.pid, libc::SIGKILL);
                } else {
                    timeout = timeout.min(KILL_GRACE - k.elapsed());
                }
            } else if let (Some(t), Some(g)) = (w.transitioned_at, grace) {
                if t.elapsed() >= g {
                    sv.status(format!(
                        "conductor: the `{}` worker recorded its transition {}s ago and is still running; stopping it",
                        r.state,
                        g.as_secs()
                    ));
                    kill_group(w.pid, libc::SIGTERM);
                    w.killed_at = Some(Instant::now());
                } else {
                    timeout = timeout.min(g - t.elapsed());
                }
            }
            if watcher.wait(Some(timeout)) == Wake::Stop {
                return interrupted(sv, &id, worker.take());
            }
            continue;
        }
        // A run whose worker this supervisor does not own: its supervisor died.
        if let Some(r) = s.active_run() {
            let state = r.state.clone();
            if let Some(pid) = r.worker_pid {
                stop_orphan(pid as i32);
            }
            if let Some(inst) = &r.instance_id {
                finish_instance(sv, inst, Outcome::Abandoned, "workflow worker interrupted");
            }
            let now = Timestamp::now();
            workflows::update(&sv.store, now, &id, |s, _| {
                s.interrupt_active("its supervisor was not running", now);
                Ok(())
            })?;
            sv.status(format!(
                "conductor: resuming {id}: the `{state}` worker of a previous supervisor was interrupted"
            ));
            continue;
        }
        // The last run ended: release its instance, run its cleanup, decide.
        if let Some(r) = s.runs.last()
            && !r.cleaned_up
        {
            let transitioned = s.pending.as_ref().is_some_and(|p| p.from == r.state);
            if let Some(inst) = &r.instance_id {
                let (outcome, note) = if transitioned {
                    (Outcome::Success, "workflow state finished")
                } else {
                    (
                        Outcome::Abandoned,
                        "workflow worker ended without a transition",
                    )
                };
                finish_instance(sv, inst, outcome, note);
            }
            let cleanup = s
                .template
                .state(&r.state)
                .map(|d| d.cleanup.clone())
                .unwrap_or_default();
            let results = run_cleanup(sv, &cleanup, Path::new(&s.project_dir));
            let now = Timestamp::now();
            workflows::update(&sv.store, now, &id, |s, _| {
                s.finish_run(results.clone(), now);
                Ok(())
            })?;
            continue;
        }
        match s.status {
            Status::Running if s.pending.is_some() => {
                let now = Timestamp::now();
                let entered = workflows::update(&sv.store, now, &id, |s, ev| {
                    let p = s.pending.clone();
                    let entered = s.apply_pending(now);
                    if let Some(p) = p
                        && s.pending.is_none()
                        && (entered.is_some() || s.status == Status::Done)
                    {
                        ev.push(workflows::event(
                            event::TRANSITION,
                            s,
                            json!({"from": p.from, "to": p.to, "summary": p.summary}),
                        ));
                    }
                    Ok(entered)
                })?;
                if let Some(st) = entered {
                    sv.status(format!("conductor: {id} -> {}", title(&st)));
                }
            }
            Status::Running => {
                let cmd = s.agent_cmd.clone().unwrap_or_default();
                worker = start_worker(sv, &s, &cmd)?;
            }
            Status::AwaitingApproval | Status::Paused if args.follow => {
                sv.status(format!("conductor: {id} is {}; waiting", s.status.as_str()));
                loop {
                    match watcher.wait(Some(SAFETY_RESCAN)) {
                        Wake::Stop => return interrupted(sv, &id, None),
                        Wake::Changed => break,
                        Wake::Timeout => {}
                    }
                }
            }
            _ => return Ok(stopped(sv, s)),
        }
    }
}

/// The session as it stands when no automated progress is possible; this supervisor lets go of
/// it (a finished session already left the live document).
fn stopped(sv: &mut Sup, s: Session) -> Ending {
    if !s.status.is_finished() {
        let me = std::process::id();
        let _ = workflows::update(&sv.store, Timestamp::now(), &s.id, |s, _| {
            if s.supervisor_pid == Some(me) {
                s.supervisor_pid = None;
            }
            Ok(())
        });
    }
    Ending::Stopped(Box::new(s))
}

/// SIGINT/SIGTERM: stop our worker, mark its run interrupted, exit 130.
fn interrupted(sv: &mut Sup, id: &str, worker: Option<Worker>) -> Result<Ending> {
    let now = Timestamp::now();
    let _ = workflows::update(&sv.store, now, id, |s, _| {
        s.interrupt_active("the supervisor was stopped by a signal", now);
        Ok(())
    });
    if let Some(w) = worker {
        stop_worker(w);
    }
    sv.warn(format!(
        "the supervisor of {id} was stopped; run `conductor workflow run {id}` to resume"
    ));
    Ok(Ending::Interrupted)
}

fn kill_group(pid: i32, sig: i32) {
    if pid > 0 {
        unsafe {
            libc::kill(-pid, sig);
        }
    }
}

/// Stop our worker and wait for its waiter thread to record the exit.
fn stop_worker(w: Worker) {
    kill_group(w.pid, libc::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while !w.waiter.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !w.waiter.is_finished() {
        kill_group(w.pid, libc::SIGKILL);
    }
    let _ = w.waiter.join();
}

/// Stop a worker left by a dead supervisor (its process group), if it is still alive.
fn stop_orphan(pid: i32) {
    if crate::host::pid_is_dead(pid as u32) {
        return;
    }
    kill_group(pid, libc::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while !crate::host::pid_is_dead(pid as u32) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_group(pid, libc::SIGKILL);
}

/// Record a worker's conductor instance as done (releasing its claims); already gone is fine.
fn finish_instance(sv: &mut Sup, id: &str, outcome: Outcome, note: &str) {
    let req = DoneRequest {
        instance_id: Some(id.to_string()),
        outcome: Some(outcome),
        files_modified: None,
        notes: Some(note.to_string()),
    };
    match sessions::done(&sv.store, Timestamp::now(), &Caller::default(), &req) {
        Ok(_) | Err(Error::UnknownInstance(_)) => {}
        Err(e) => sv.warn(format!("could not record {id} as done: {e}")),
    }
}

/// Run a state's cleanup commands; each result is a checkpoint.
fn run_cleanup(sv: &mut Sup, commands: &[String], dir: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for c in commands {
        let r = Command::new("sh")
            .arg("-c")
            .arg(c)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        let v = match r {
            Ok(o) if o.status.success() => json!({"command": c, "exit_code": 0}),
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                let first = crate::text::printable_max(err.lines().next().unwrap_or(""), 200);
                sv.warn(format!("cleanup command `{c}` failed: {first}"));
                json!({"command": c, "exit_code": o.status.code(), "signal": o.status.signal(), "error": first})
            }
            Err(e) => json!({"command": c, "exit_code": null, "error": e.to_string()}),
        };
        out.push(v);
    }
    out
}

/// The agent command with its placeholders filled in.
pub fn fill(template: &str, prompt_file: &Path, system_file: &Path, prompt: &str) -> String {
    let (p, s) = (prompt_file.to_string_lossy(), system_file.to_string_lossy());
    let values = [
        ("prompt_file", Some(&*p)),
        ("system_file", Some(&*s)),
        ("prompt", Some(prompt)),
    ];
    crate::template::fill(template, &values, false)
}

/// The starting prompt of a state's worker: task, persona, state, handover, how to finish.
pub fn build_prompt(s: &Session, state: &str, p: &persona::Persona, attempt: u32) -> String {
    let def = s.template.state(state).expect("state in template");
    let mut t = format!(
        "# Workflow \"{}\" · session {} · state `{state}` (attempt {attempt})\n\n## Task\n{}\n\n## Your role\nYou are {}",
        s.template.name, s.id, s.task, p.name
    );
    if let Some(d) = &p.description {
        t.push_str(&format!(": {d}"));
    }
    t.push_str(". You work on this state only; other agents handle the other states.\n");
    if !p.tools.is_empty() {
        t.push_str(&format!("Tools for this role: {}\n", p.tools.join(", ")));
    }
    if let Some(pr) = &def.prompt {
        t.push_str(&format!("\n## This state: {}\n{pr}\n", title(state)));
    }
    t.push_str(&format!(
        "\n## Timeline\n{}\n",
        super::timeline::breadcrumbs(s)
    ));
    let summaries = s.summaries();
    let sn = &s.snapshot;
    if !summaries.is_empty()
        || !sn.key_findings.is_empty()
        || !sn.modified_files.is_empty()
        || !sn.pending_tasks.is_empty()
        || !sn.custom.is_empty()
    {
        t.push_str("\n## Handover from earlier states\n");
        for (st, sum) in &summaries {
            t.push_str(&format!("- {} finished: {sum}\n", title(st)));
        }
        if !sn.key_findings.is_empty() {
            t.push_str("Key findings:\n");
            for f in &sn.key_findings {
                t.push_str(&format!("- {f}\n"));
            }
        }
        if !sn.modified_files.is_empty() {
            t.push_str(&format!(
                "Modified files: {}\n",
                sn.modified_files.join(", ")
            ));
        }
        if !sn.pending_tasks.is_empty() {
            t.push_str("Pending tasks:\n");
            for f in &sn.pending_tasks {
                t.push_str(&format!("- {f}\n"));
            }
        }
        for (k, v) in &sn.custom {
            t.push_str(&format!("{k} = {v}\n"));
        }
    }
    if let Some(note) = &s.retry_note {
        t.push_str(&format!("\n## Note from the supervisor\n{note}\n"));
    }
    let allowed = def.allowed();
    t.push_str(&format!(
        "\n## How to finish\nWhen this state's work is complete, run exactly one of:\n{}\
         then exit. Allowed targets: {} (`done` finishes the whole workflow).\n\
         That command is how this state's outcome is recorded: its summary is what the next\n\
         states read. Exiting without it counts as a failed attempt (the state is retried once,\n\
         then the session waits for a human).\n\
         Along the way:\n- conductor workflow snapshot --finding TEXT | --file PATH | --pending TEXT | --set KEY=VALUE\n\
         - conductor workflow usage --tokens N --cost USD (what you used)\n\
         - conductor claim FILE before editing a file (you are a registered conductor instance)\n",
        allowed
            .iter()
            .map(|a| format!("  conductor workflow transition {a} --summary \"what you did\"\n"))
            .collect::<String>(),
        allowed.join(", ")
    ));
    t
}

fn private_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ctx("create", path)?;
    f.write_all(bytes).ctx("write", path)
}

/// Start the worker of the current state.
fn start_worker(sv: &mut Sup, s: &Session, agent_cmd: &str) -> Result<Option<Worker>> {
    let state = s
        .current_state
        .clone()
        .expect("running sessions have a state");
    let def = s.template.state(&state).expect("state in template").clone();
    let project = PathBuf::from(&s.project_dir);
    let id = s.id.clone();
    let p = match persona::resolve(&def.persona, &project) {
        Ok(p) => p,
        Err(e) => {
            fail(
                sv,
                &id,
                format!("the persona of state `{state}` cannot be loaded: {e}"),
            )?;
            return Ok(None);
        }
    };
    let attempt = s.next_attempt();
    let dir = sv.store.home().dir().join(SESSION_FILES_DIR).join(&id);
    // A failure to write the run's files (a full disk) leaves neither them nor a new directory.
    let mut new_dirs = crate::store::atomic::NewDirs::new();
    new_dirs.create(&dir)?;
    let base = format!("{:02}-{state}-{attempt}", s.runs.len() + 1);
    let files = RunFiles {
        prompt: dir.join(format!("{base}.prompt.md")).display().to_string(),
        system: dir.join(format!("{base}.system.md")).display().to_string(),
        output: dir.join(format!("{base}.output.log")).display().to_string(),
    };
    let prompt = build_prompt(s, &state, &p, attempt);
    let written = private_file(Path::new(&files.prompt), prompt.as_bytes())
        .and_then(|_| private_file(Path::new(&files.system), p.system_prompt.as_bytes()))
        .and_then(|_| private_file(Path::new(&files.output), b""));
    if let Err(e) = written {
        for f in [&files.prompt, &files.system, &files.output] {
            let _ = std::fs::remove_file(f);
        }
        return Err(e);
    }
    new_dirs.keep();

    // The worker's conductor instance.
    let now = Timestamp::now();
    let req = StartRequest {
        task: format!("workflow {id} · {} ({})", title(&state), p.name),
        project: project
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into()),
        priority: Priority::P1,
        working_directory: Some(s.project_dir.clone()),
        override_reason: None,
        source: None,
        owner_pid: Some(std::process::id()),
        session_id: None,
    };
    let instance_id = match sessions::start(&sv.store, now, req)? {
        StartOutcome::Started { instance_id, .. } => Some(instance_id),
        StartOutcome::Blocked { .. } => None,
    };

    let now = Timestamp::now();
    let run = Run {
        state: state.clone(),
        attempt,
        persona: p.clone(),
        instance_id: instance_id.clone(),
        worker_pid: None,
        started_at: now,
        completed_at: None,
        summary: None,
        tokens: 0,
        cost_usd: 0.0,
        elapsed_secs: None,
        exit_code: None,
        outcome: RunOutcome::Running,
        baseline: baseline::take(&project),
        files: files.clone(),
        cleaned_up: false,
    };
    let index = workflows::update(&sv.store, now, &id, |s, ev| {
        s.begin_run(run.clone(), now)?;
        ev.push(workflows::event(
            event::STATE_STARTED,
            s,
            json!({"state": state, "attempt": attempt, "persona": p.name}),
        ));
        Ok(s.runs.len() - 1)
    })?;
    sv.status(format!(
        "conductor: {id} · {} (attempt {attempt}, {}) as {}",
        title(&state),
        p.name,
        instance_id.as_deref().unwrap_or("-")
    ));

    let output = std::fs::OpenOptions::new()
        .append(true)
        .open(&files.output)
        .ctx("open", Path::new(&files.output))?;
    let output2 = output.try_clone().ctx("open", Path::new(&files.output))?;
    let line = fill(
        agent_cmd,
        Path::new(&files.prompt),
        Path::new(&files.system),
        &prompt,
    );
    // The gate: the worker's shell waits on fd 3 until its pid is in the ledger, so a supervisor
    // killed in between never leaves a worker that a resumed supervisor cannot find and stop
    // (it reads end-of-file and exits 125 without running the agent).
    let (gate_r, gate_w) = gate_pipe()?;
    let gate_fd = gate_r.as_raw_fd();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(GATE)
        .arg("conductor-worker")
        .arg(&line)
        .current_dir(&project)
        .stdin(Stdio::piped())
        .stdout(output)
        .stderr(output2)
        .env("CONDUCTOR_WORKFLOW_SESSION", &id)
        .env("CONDUCTOR_WORKFLOW_STATE", &state)
        .env("CONDUCTOR_HOME", sv.store.home().dir())
        .env("CONDUCTOR_WORKFLOW_PROMPT_FILE", &files.prompt)
        .env_remove("CONDUCTOR_NOW")
        .process_group(0);
    if let Some(i) = &instance_id {
        cmd.env("CONDUCTOR_INSTANCE_ID", i);
    }
    unsafe {
        cmd.pre_exec(move || {
            watch::unblock_stop_signals();
            // dup2 onto another number clears close-on-exec; onto itself it does not.
            let ok = if gate_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(gate_fd, 3) == 3
            };
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = match cmd.spawn().map_err(|e| crate::spawn::named(&cmd, e)) {
        Ok(c) => c,
        Err(e) => {
            if let Some(i) = &instance_id {
                finish_instance(
                    sv,
                    i,
                    Outcome::Abandoned,
                    "the workflow worker could not start",
                );
            }
            let now = Timestamp::now();
            workflows::update(&sv.store, now, &id, |s, _| {
                s.record_exit(index, None, now);
                if let Some(r) = s.runs.get_mut(index) {
                    r.cleaned_up = true;
                }
                s.status = Status::Failed;
                s.halt = Some(format!("could not start the agent command: {e}"));
                Ok(())
            })?;
            return Ok(None);
        }
    };
    drop(gate_r);
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        let prompt = prompt.clone();
        std::thread::spawn(move || {
            let _ = stdin.write_all(prompt.as_bytes());
        });
    }
    let now = Timestamp::now();
    workflows::update(&sv.store, now, &id, |s, _| {
        if let Some(r) = s.runs.get_mut(index) {
            r.worker_pid = Some(pid as u32);
        }
        Ok(())
    })?;
    {
        let mut gate_w = gate_w;
        // A worker that already died is the waiter's to record.
        let _ = gate_w.write_all(b"go\n");
    }
    // The waiter records the exit in the ledger; that write is what wakes the supervisor.
    let home = sv.store.home().dir().to_path_buf();
    let timeout = sv.store.lock_timeout();
    let sid = id.clone();
    let (note, notes) = std::sync::mpsc::channel();
    let output_path = PathBuf::from(&files.output);
    let counted: Counted = Default::default();
    let counted2 = counted.clone();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let code = match &status {
            Ok(st) => st.code().or_else(|| st.signal().map(|n| 128 + n)),
            Err(_) => None,
        };
        // The usage the worker printed (Pi's, OpenCode's or Claude Code's JSON output) counts
        // against the budgets, what the supervisor did not count yet; a worker that prints none
        // reports with `workflow usage`.
        let mut counted = counted2.lock().unwrap_or_else(|e| e.into_inner());
        let total = std::fs::read(&output_path)
            .map(|b| crate::usage::parse(&String::from_utf8_lossy(&b)))
            .unwrap_or_default();
        let used = crate::usage::Usage {
            tokens: total.tokens.saturating_sub(counted.tokens),
            cost_usd: (total.cost_usd - counted.cost_usd).max(0.0),
            reports: total.reports.saturating_sub(counted.reports),
        };
        // Retried: a lost exit would leave the supervisor waiting for a worker that is gone.
        for attempt in 0..100 {
            let now = Timestamp::now();
            let r = Store::open(home.clone(), timeout)
                .map_err(Into::into)
                .and_then(|store| {
                    workflows::update(&store, now, &sid, |s, ev| {
                        if used.reports > 0 {
                            let state = s.runs.get(index).map(|r| r.state.clone());
                            // A state that already ended (resolved by a person) takes no usage.
                            let _ = s.add_usage(state.as_deref(), used.tokens, used.cost_usd, now);
                        }
                        s.record_exit(index, code, now);
                        let state = s.runs.get(index).map(|r| r.state.clone());
                        ev.push(workflows::event(
                            event::WORKER_EXITED,
                            s,
                            json!({"state": state, "exit_code": code}),
                        ));
                        Ok(())
                    })
                });
            match r {
                Ok(()) => {
                    *counted = total;
                    return;
                }
                Err(e) if e.reason() == "unknown_session" => return,
                Err(e) => {
                    if attempt == 0 {
                        let _ = note.send(format!("could not record the worker's exit yet: {e}"));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    });
    Ok(Some(Worker {
        output: PathBuf::from(&files.output),
        counted,
        usage_read: Instant::now(),
        index,
        notes,
        pid,
        waiter,
        transitioned_at: None,
        killed_at: None,
    }))
}

/// The worker's shell: wait for the supervisor's go on fd 3, then run the agent command ($1).
const GATE: &str = "IFS= read -r go <&3 || exit 125; exec 3<&-; eval \"$1\"";

/// A close-on-exec pipe: (read end, write end).
fn gate_pipe() -> Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io(
            "create a pipe for",
            Path::new("the worker"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

fn fail(sv: &mut Sup, id: &str, why: String) -> Result<()> {
    let now = Timestamp::now();
    workflows::update(&sv.store, now, id, |s, _| {
        s.status = Status::Failed;
        s.halt = Some(why.clone());
        s.log(now, "failed", json!({"reason": why}));
        Ok(())
    })
}
