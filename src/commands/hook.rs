//! `conductor hook claude`: the Claude Code hook. Reads the hook's JSON from stdin and answers
//! the way Claude Code expects: exit 0 to allow (stdout of SessionStart becomes context for the
//! agent), exit 2 with a one-line reason on stderr to block an edit. Any failure of conductor
//! itself allows the edit and prints a warning: the hook never blocks because of its own bug.
//!
//! Speed: PreToolUse reads `config.json` and `status.json` without the lock (and without schema
//! validation, see [`Store::read_unvalidated`]) and decides; only an
//! auto-claim of a free file (or a heartbeat older than five minutes) takes the lock.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::GlobalArgs;
use crate::error::{Error, Result};
use crate::hooks::{self, DEFAULT_TASK, Decision, Payload};
use crate::output::Output;
use crate::protocol::ops::{self, NewInstance};
use crate::protocol::types::Outcome;
use crate::protocol::{Enforce, Priority, ProjectConfig};
use crate::runtime::{self, PathNormalizer, ProcessTable};
use crate::schema::Schema;
use crate::store::{self, Home, Store};
use crate::time::Timestamp;

/// The agents conductor has hooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code (SessionStart, PreToolUse, SessionEnd)
    Claude,
}

/// Run as an agent hook.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Claude Code runs this from hooks (see `conductor integrate claude`). It reads one hook \
payload from stdin:\n  SessionStart  registers an instance for the session (or reuses it on resume)\n  PreToolUse    for Edit, Write, \
MultiEdit, NotebookEdit: exit 2 if another live instance holds the file, else follow `enforce` in config.json \
(auto-claim, block-foreign, require-claim, off)\n  SessionEnd    releases the session's claims and records it as done \
(abandoned)\nOn an internal error the edit is allowed and a warning is printed."
)]
pub struct HookArgs {
    /// Which agent's hook format stdin is in.
    #[arg(value_enum)]
    pub agent: Agent,
}

/// What the hook prints and its exit code.
#[derive(Debug, Default)]
struct Answer {
    code: u8,
    stdout: String,
    stderr: String,
}

impl Answer {
    fn allow() -> Answer {
        Answer::default()
    }
    fn block(reason: String) -> Answer {
        Answer {
            code: 2,
            stdout: String::new(),
            stderr: reason,
        }
    }
    fn warn(msg: String) -> Answer {
        Answer {
            code: 0,
            stdout: String::new(),
            stderr: format!("warning: conductor: {msg}"),
        }
    }
}

/// Run the hook; errors are turned into "allow with a warning" here, never returned.
pub fn run(global: &GlobalArgs, _args: HookArgs, _out: &Output) -> Result<u8> {
    let mut input = String::new();
    let answer = match std::io::stdin().read_to_string(&mut input) {
        Err(e) => Answer::warn(format!("could not read the hook input ({e}); allowing")),
        Ok(_) => match serde_json::from_str::<Payload>(&input) {
            Err(e) => Answer::warn(format!(
                "the hook input is not a JSON hook payload ({e}); allowing"
            )),
            Ok(p) => handle(global, &p).unwrap_or_else(|e| {
                let what = if p.hook_event_name == "PreToolUse" {
                    "allowing the edit unchecked"
                } else {
                    "nothing was recorded"
                };
                Answer::warn(format!("{} hook failed: {e}; {what}", p.hook_event_name))
            }),
        },
    };
    if !answer.stdout.is_empty() {
        let _ = writeln!(std::io::stdout().lock(), "{}", answer.stdout);
    }
    if !answer.stderr.is_empty() {
        let _ = writeln!(std::io::stderr().lock(), "{}", answer.stderr);
    }
    Ok(answer.code)
}

fn open_store(global: &GlobalArgs) -> Result<Store> {
    let dir = match global.home.clone() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Home::default_dir()?,
    };
    // An agent waits on the hook: never wait long for the lock (failure allows the edit).
    let timeout = Duration::from_secs_f64(global.lock_timeout.min(3.0));
    Store::open(dir, timeout, true)
}

fn handle(global: &GlobalArgs, p: &Payload) -> Result<Answer> {
    match p.hook_event_name.as_str() {
        "PreToolUse" if p.is_edit() => pre_tool_use(global, p),
        "SessionStart" => session_start(global, p),
        "SessionEnd" => session_end(global, p),
        _ => Ok(Answer::allow()),
    }
}

/// The session's directory: the payload's `cwd`, else ours; symlinks resolved.
fn session_dir(p: &Payload) -> Result<PathBuf> {
    let dir = match p.cwd.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => PathBuf::from(c),
        None => runtime::current_dir()?,
    };
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

/// What a hook registers for a session: task from `.conductor/config.json`, project from the
/// directory name, source from the environment.
fn new_instance(p: &Payload, dir: &Path) -> Result<NewInstance> {
    let cfg: Option<ProjectConfig> =
        store::read_doc(&dir.join(".conductor/config.json"), Schema::ProjectConfig)?;
    let task = cfg
        .and_then(|c| c.task)
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_TASK.to_string());
    let project = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let working_directory = dir
        .to_str()
        .ok_or_else(|| Error::invalid("invalid_directory", "the session's directory is not UTF-8"))?
        .to_string();
    Ok(NewInstance {
        source: runtime::detect_source(|k| std::env::var(k).ok()),
        project,
        task,
        priority: Priority::P1,
        working_directory,
        override_reason: None,
        pid: None,
        host: runtime::hostname(),
        session_id: Some(p.session_id.clone()),
    })
}

fn require_session(p: &Payload) -> Result<()> {
    if p.session_id.is_empty() {
        return Err(Error::invalid(
            "invalid_input",
            "the hook payload has no session_id",
        ));
    }
    Ok(())
}

fn session_start(global: &GlobalArgs, p: &Payload) -> Result<Answer> {
    require_session(p)?;
    let store = open_store(global)?;
    let now = Timestamp::now();
    let dir = session_dir(p)?;
    let new = new_instance(p, &dir)?;
    let task = new.task.clone();
    let (id, resumed) = store.transact(now, |st, fx| {
        if let Some(id) = hooks::session_instance(st, &p.session_id).map(|i| i.id.clone()) {
            ops::heartbeat(st, &id, None, now, fx)?;
            return Ok((id, true));
        }
        Ok((
            ops::start(st, new, None, runtime::random_hex6, now, fx),
            false,
        ))
    })?;
    let enforce = store
        .config()
        .map(|c| c.enforce.unwrap_or_default())
        .unwrap_or_default();
    export_instance_id(&id)?;
    let verb = if resumed {
        "resumed as"
    } else {
        "registered as"
    };
    let stdout = format!(
        "conductor: this session is {verb} {id} (task: \"{task}\"; enforce: {}). CONDUCTOR_INSTANCE_ID={id}. \
         Edits of files another session holds are blocked; use /conductor status to see who holds what, \
         /conductor claim FILE to claim ahead, /conductor done when finished.",
        enforce.as_str()
    );
    Ok(Answer {
        code: 0,
        stdout,
        stderr: String::new(),
    })
}

/// Make `CONDUCTOR_INSTANCE_ID` visible to the session's Bash tool through `CLAUDE_ENV_FILE`.
fn export_instance_id(id: &str) -> Result<()> {
    let Some(path) = std::env::var_os("CLAUDE_ENV_FILE").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let path = PathBuf::from(path);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    f.write_all(format!("export CONDUCTOR_INSTANCE_ID={id}\n").as_bytes())
        .map_err(|e| Error::io("append to", &path, e))
}

fn pre_tool_use(global: &GlobalArgs, p: &Payload) -> Result<Answer> {
    let Some(raw) = p.target_file() else {
        return Ok(Answer::allow());
    };
    let store = open_store(global)?;
    let config = store.config()?;
    let enforce = config.enforce.unwrap_or_default();
    if enforce == Enforce::Off {
        return Ok(Answer::allow());
    }
    let now = Timestamp::now();
    let dir = session_dir(p)?;
    let file = PathNormalizer::new(dir.clone()).normalize(raw)?;
    let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
    // Lock-free first: most edits are of files the session already holds, or are blocked.
    let state = store.read_unvalidated(now)?;
    let me = hooks::session_instance(&state, &p.session_id);
    match hooks::decide(&state, me, &file, enforce, now, &live) {
        Decision::Allow => {
            if let Some(id) = me
                .filter(|m| hooks::heartbeat_due(m, now))
                .map(|m| m.id.clone())
            {
                // Best effort: a busy lock must not turn an allowed edit into a warning.
                let _ = store.transact(now, |st, fx| ops::heartbeat(st, &id, None, now, fx));
            }
            Ok(Answer::allow())
        }
        Decision::Warn(m) => Ok(Answer::warn(m)),
        Decision::Block(m) => Ok(Answer::block(m)),
        Decision::Claim => {
            let new = if me.is_none() && !p.session_id.is_empty() {
                Some(new_instance(p, &dir)?)
            } else {
                None
            };
            store.transact(now, |st, fx| {
                // Decide again under the lock: another session may have claimed the file meanwhile.
                let me = hooks::session_instance(st, &p.session_id).cloned();
                match hooks::decide(st, me.as_ref(), &file, enforce, now, &live) {
                    Decision::Claim => {}
                    Decision::Block(m) => return Ok(Answer::block(m)),
                    Decision::Warn(m) => return Ok(Answer::warn(m)),
                    Decision::Allow => return Ok(Answer::allow()),
                }
                let id = match (me, new) {
                    (Some(m), _) => m.id,
                    (None, Some(new)) => ops::start(st, new, None, runtime::random_hex6, now, fx),
                    (None, None) => {
                        return Ok(Answer::warn(format!(
                            "no session_id in the hook input; {file} was not claimed"
                        )));
                    }
                };
                let out = ops::claim(st, &id, std::slice::from_ref(&file), None, now, &live, fx)?;
                Ok(match out.conflicts.first() {
                    Some(c) => Answer::block(format!(
                        "BLOCKED: {} is claimed by {} ({})",
                        c.file, c.held_by, c.holder_task
                    )),
                    None => Answer::allow(),
                })
            })
        }
    }
}

fn session_end(global: &GlobalArgs, p: &Payload) -> Result<Answer> {
    require_session(p)?;
    let store = open_store(global)?;
    let now = Timestamp::now();
    if hooks::session_instance(&store.read_unvalidated(now)?, &p.session_id).is_none() {
        return Ok(Answer::allow()); // already done, or never registered
    }
    let why = p
        .reason
        .as_deref()
        .filter(|r| !r.is_empty())
        .unwrap_or("other");
    let ended = store.transact(now, |st, fx| {
        let Some(id) = hooks::session_instance(st, &p.session_id).map(|i| i.id.clone()) else {
            return Ok(None);
        };
        // A released file goes to the first waiter that is still there.
        ops::drop_dead_waiters(st, &crate::runtime::pid_is_dead, now, fx);
        let released = ops::done(
            st,
            &id,
            Outcome::Abandoned,
            None,
            Some(format!("Claude Code session ended ({why})")),
            now,
            fx,
        )?;
        Ok(Some((id, released.len())))
    })?;
    Ok(match ended {
        Some((id, n)) => Answer {
            code: 0,
            stdout: String::new(),
            stderr: format!(
                "conductor: {id} ended (abandoned); released {n} file{}",
                if n == 1 { "" } else { "s" }
            ),
        },
        None => Answer::allow(),
    })
}
