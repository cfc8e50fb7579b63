//! Processes: the runners that start a job's agent, process groups (a timeout or a cancel kills
//! the job's whole tree), environments (a job gets its own secrets and nobody else's), and
//! finding the processes of a job whose dispatcher is gone.
//!
//! Every job runs in its own process group (`setpgid(0, 0)`), with its stdin reading the prompt
//! file and stdout/stderr appended to its log. Its environment carries `CONDUCTOR_QUEUE_RUN`
//! (the dispatcher, job and attempt), which is how a restarted dispatcher or `cancel` recognises
//! a leftover process before killing it.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::Job;

/// The default agent command: OpenCode's batch form, reading the prompt on stdin.
pub const DEFAULT_AGENT_CMD: &str = "opencode run --agent {agent} [--model {model}]";

/// How jobs are run.
#[derive(Clone, Debug, PartialEq)]
pub enum Runner {
    /// The agent command in the workspace directory, as a child of the dispatcher.
    Local,
    /// The agent command under bubblewrap: the workspace read-write at `workdir`, its docs
    /// read-only, a private /tmp and HOME, no capabilities, only its own secrets in the environment.
    Sandbox {
        /// More host paths to show read-only (where the agent is installed).
        read_only: Vec<PathBuf>,
        /// Variables passed through from the dispatcher's environment (besides PATH, LANG, TERM).
        pass_env: Vec<String>,
    },
    /// A command template with `{cmd}` (the agent command, shell-quoted) run by `sh -c`: an
    /// existing remote engine (`ssh build1 -- {cmd}`, `docker run ... sh -c {cmd}`).
    Template(String),
}

impl Runner {
    /// `local`, `sandbox` or `template` (as recorded in the job's state).
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Local => "local",
            Runner::Sandbox { .. } => "sandbox",
            Runner::Template(_) => "template",
        }
    }
}

pub use crate::template::shell_quote;

/// Fill the agent command template (see [`crate::template::fill`]): one pass, every value
/// shell-quoted, a `[...]` group dropped when a placeholder in it is empty.
pub fn fill(template: &str, values: &[(&str, Option<&str>)]) -> String {
    crate::template::fill(template, values, true)
}

/// What one launch needs.
pub struct Launch<'a> {
    pub job: &'a Job,
    pub workspace_dir: &'a Path,
    pub prompt_file: &'a Path,
    /// The job's private HOME (`queue-homes/<ws>/<job>`), for the sandbox.
    pub job_home: &'a Path,
    pub log: &'a Path,
    /// This job's secrets, name and value.
    pub secrets: Vec<(String, String)>,
    /// Every secret name any job or the secrets file knows: removed from what is inherited.
    pub scrub: &'a BTreeSet<String>,
    /// `CONDUCTOR_QUEUE_RUN`.
    pub run_token: String,
    pub agent_cmd: &'a str,
}

fn agent_command(l: &Launch, root: &str, prompt_file: &str) -> String {
    fill(
        l.agent_cmd,
        &[
            ("agent", Some(&l.job.agent)),
            ("model", l.job.model.as_deref()),
            ("job", Some(&l.job.id)),
            ("workspace", Some(root)),
            ("prompt_file", Some(prompt_file)),
        ],
    )
}

/// Start a job's process (its own process group). The handle, when there is one, is the thread
/// copying its output to the log (join it after the job's tree is gone).
pub fn spawn(
    l: &Launch,
    runner: &Runner,
) -> std::io::Result<(Child, Option<std::thread::JoinHandle<()>>)> {
    let ws = l.workspace_dir.to_string_lossy().into_owned();
    let prompt = std::fs::File::open(l.prompt_file)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode_private()
        .open(l.log)?;
    let log2 = log.try_clone()?;
    let mut c = match runner {
        Runner::Local | Runner::Template(_) => {
            let agent = agent_command(l, &ws, &l.prompt_file.to_string_lossy());
            let script = match runner {
                Runner::Template(t) => fill_cmd(t, &agent),
                _ => agent,
            };
            if let Some(p) = missing_program(&script) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("`{p}` is not on PATH"),
                ));
            }
            if matches!(runner, Runner::Local) && super::agent_check::is_opencode(l.agent_cmd) {
                let key = (l.workspace_dir.to_path_buf(), runner.name());
                let known = super::agent_check::known(key, || {
                    let mut c = Command::new(crate::spawn::resolve("opencode"));
                    c.args(["agent", "list"]).current_dir(l.workspace_dir);
                    for name in l.scrub {
                        c.env_remove(name);
                    }
                    c
                });
                check_agent(&l.job.agent, known)?;
            }
            let mut c = shell_or_direct(&script);
            if l.job.repo.is_some() {
                c = super::worktree::wrap(&c, l.job)?;
            }
            c.current_dir(l.workspace_dir);
            for name in l.scrub {
                c.env_remove(name);
            }
            c
        }
        Runner::Sandbox {
            read_only,
            pass_env,
        } => {
            let root = l.job.workdir.clone();
            let agent = agent_command(l, &root, super::SANDBOX_PROMPT);
            // The agent's program as the dispatcher's PATH finds it, shown read-only.
            let exposed = super::agent_path::program_of(&agent)
                .map(|p| {
                    let path = std::env::var_os("PATH").unwrap_or_default();
                    let home = std::env::var_os("HOME").map(PathBuf::from);
                    super::agent_path::expose(p, &path, home.as_deref())
                })
                .unwrap_or_default();
            let mut ro = read_only.clone();
            ro.extend(exposed.trees.iter().cloned());
            let sandbox = |script: &str| {
                let mut c = super::sandbox::sandbox_command(
                    l.workspace_dir,
                    &root,
                    &ro,
                    l.prompt_file,
                    l.job_home,
                    &exposed.links,
                    script,
                );
                for name in ["LANG", "LC_ALL", "TERM"]
                    .into_iter()
                    .map(str::to_string)
                    .chain(pass_env.iter().cloned())
                {
                    if let Some(v) = std::env::var_os(&name)
                        && !l.scrub.contains(&name)
                    {
                        c.env(name, v);
                    }
                }
                c
            };
            if super::agent_check::is_opencode(l.agent_cmd) {
                let key = (l.workspace_dir.to_path_buf(), runner.name());
                let known = super::agent_check::known(key, || sandbox("opencode agent list"));
                check_agent(&l.job.agent, known)?;
            }
            sandbox(&agent)
        }
    };
    let root = match runner {
        Runner::Sandbox { .. } => l.job.workdir.clone(),
        _ => ws.clone(),
    };
    // Its secrets first, then ours: no secret can replace a variable conductor sets.
    for (k, v) in &l.secrets {
        if !super::guard::reserved(k) {
            c.env(k, v);
        }
    }
    c.env("CONDUCTOR_QUEUE_JOB", &l.job.id)
        .env("CONDUCTOR_QUEUE_WORKSPACE", &root)
        .env(
            "CONDUCTOR_QUEUE_OUTPUT",
            format!("{root}/output/{}", l.job.id),
        )
        .env("CONDUCTOR_QUEUE_RUN", &l.run_token);
    if let Some(wt) = super::worktree::path_of(l.job) {
        c.env("CONDUCTOR_QUEUE_WORKTREE", wt);
    }
    c.stdin(Stdio::from(prompt))
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0);
    // No `pre_exec`: std then uses posix_spawn (vfork-like, much cheaper than fork under load),
    // which also starts the child with an empty signal mask, undoing the dispatcher's blocked
    // SIGINT/SIGTERM (tested: the agent sees SigBlk 0).
    if l.secrets.iter().all(|(_, v)| v.is_empty()) {
        return Ok((c.spawn().map_err(|e| crate::spawn::named(&c, e))?, None));
    }
    // A job with secrets writes through a pipe that blanks their values before the log.
    let (reader, writer) = std::io::pipe()?;
    let writer2 = writer.try_clone()?;
    c.stdout(Stdio::from(writer)).stderr(Stdio::from(writer2));
    let child = c.spawn().map_err(|e| crate::spawn::named(&c, e));
    drop(c); // our copies of the write end: the pipe closes when the job's tree is gone
    let child = child?;
    let log = std::fs::OpenOptions::new().append(true).open(l.log)?;
    let needles = super::redact::Needles::new(&l.secrets);
    let copier = std::thread::spawn(move || super::redact::copy(reader, log, &needles));
    Ok((child, Some(copier)))
}

/// Refuse a job whose agent is not among the `known` ones (when they could be found out).
fn check_agent(agent: &str, known: Option<Vec<String>>) -> std::io::Result<()> {
    match known {
        Some(k) if !k.iter().any(|a| a == agent) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            super::agent_check::unknown(agent, &k),
        )),
        _ => Ok(()),
    }
}

/// Create a job's log file (private) if it does not exist yet.
pub fn create_log(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode_private()
        .open(path)
        .map(drop)
}

/// `sh -c SCRIPT`, or the program itself when the script is plain words (no quoting, no
/// expansions, no operators): one exec instead of two for every job.
fn shell_or_direct(script: &str) -> Command {
    let plain = !script.is_empty()
        && script
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " -_./:,+@".contains(c));
    let words: Vec<&str> = script.split_whitespace().collect();
    const BUILTINS: &[&str] = &[
        "exit", "cd", "exec", "export", "set", "eval", "source", "ulimit", "umask", "wait", "read",
        "trap", "unset", "shift", "return", "alias", "command", "type", "hash",
    ];
    if plain && !words.is_empty() && !BUILTINS.contains(&words[0]) {
        let mut c = Command::new(crate::spawn::resolve(words[0]));
        c.args(&words[1..]);
        return c;
    }
    let mut c = Command::new(crate::spawn::resolve("sh"));
    c.arg("-c").arg(script);
    c
}

/// The program a script starts with, when it is a plain name that `PATH` does not have (the
/// shell would start and then say `not found`): the job could not start, naming it.
fn missing_program(script: &str) -> Option<String> {
    const SHELL: &[&str] = &[
        "if", "for", "while", "until", "case", "exit", "cd", "exec", "export", "set", "eval",
        "source", "ulimit", "umask", "wait", "read", "trap", "unset", "shift", "return", "alias",
        "command", "type", "hash", "local", "readonly", "break", "continue", "times", "getopts",
    ];
    let first = script.split_whitespace().next()?;
    let plain = first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !plain || SHELL.contains(&first) || crate::spawn::resolve(first).is_absolute() {
        return None;
    }
    Some(first.to_string())
}

fn fill_cmd(template: &str, agent: &str) -> String {
    crate::template::fill(template, &[("cmd", Some(agent))], false)
}

trait PrivateOpen {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateOpen for std::fs::OpenOptions {
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

pub use crate::spawn::kill_group;

/// This process's identity as a dispatcher: `<pid>:<start time in clock ticks since boot>`,
/// which no later process can share even if it reuses the pid.
pub fn self_token(shared: bool) -> String {
    let pid = std::process::id();
    let token = format!("{pid}:{}", start_time(pid).unwrap_or(0));
    // With a shared store, dispatchers on several hosts share one queue: say whose pid it is.
    match crate::host::hostname() {
        Some(h) if shared => format!("{token}@{h}"),
        _ => token,
    }
}

fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: fields after the last ')' are fixed.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// True while the dispatcher with this token is alive.
pub fn dispatcher_alive(token: &str) -> bool {
    let token = match token.split_once('@') {
        // Another host's dispatcher cannot be judged from here: its own host recovers its jobs.
        Some((_, host)) if crate::host::hostname().as_deref() != Some(host) => return true,
        Some((t, _)) => t,
        None => token,
    };
    let Some((pid, start)) = token.split_once(':') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start_time(pid) == Some(start)
}

/// Processes whose environment holds `CONDUCTOR_QUEUE_RUN=<token>`, or any value starting with
/// `token` when it ends with `/` (every run of one dispatcher). Ours only: other users'
/// environments are unreadable.
pub fn find_by_run(token: &str) -> Vec<u32> {
    let needle = format!("CONDUCTOR_QUEUE_RUN={token}");
    let mut pids = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(env) = std::fs::read(e.path().join("environ"))
            && env.split(|b| *b == 0).any(|v| {
                if token.ends_with('/') {
                    v.starts_with(needle.as_bytes())
                } else {
                    v == needle.as_bytes()
                }
            })
        {
            pids.push(pid);
        }
    }
    pids
}

/// Kill every process of a run that is still there (their groups, then any stragglers).
pub fn kill_run(token: &str, pid: Option<u32>) {
    let found = find_by_run(token);
    if let Some(p) = pid
        && found.contains(&p)
    {
        kill_group(p);
    }
    let own = unsafe { libc::getpgrp() };
    for p in find_by_run(token) {
        unsafe {
            let pg = libc::getpgid(p as i32);
            if pg > 1 && pg != own {
                libc::kill(-pg, libc::SIGKILL);
            }
            libc::kill(p as i32, libc::SIGKILL);
        }
    }
}

/// The `CONDUCTOR_QUEUE_RUN` value for one attempt of a job.
pub fn run_token(dispatcher: &str, job: &Job, attempt: u32) -> String {
    format!("{dispatcher}/{}/{}/{attempt}", job.workspace, job.id)
}
