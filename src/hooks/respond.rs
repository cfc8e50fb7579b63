//! One hook call, payload in and response out: what `conductor hook AGENT` asks after reading
//! stdin, and renders after. Everything between is here: which home, how long to wait for the
//! lock, the workflow's damage-control rules, the session's start, edits and end, the notices a
//! Gemini session gets after its tool ran, and Claude Code's worktree events. Nothing here prints.
//!
//! The process's own facts (the home asked for, the agent's environment) come in a [`Setting`];
//! the claim admission (the integrations' live-check verdicts, which this domain may not read)
//! comes in as a function.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::service::{self, Session, SessionEnded, SessionStarted};
use super::{Agent, Event, HookInput, Verdict, worktree};
use crate::config::{Config, Enforce};
use crate::error::{Error, Reason, Result};
use crate::protocol::local::{PathNormalizer, ProcessTable};
use crate::protocol::ops::Admission;
use crate::store::{Home, Store};
use crate::time::Timestamp;

/// Seconds a hook waits for the state lock at most (the agent waits on the hook).
const LOCK_WAIT_SECS: f64 = 3.0;
/// SessionEnd waits less: Claude Code gives plugin SessionEnd hooks about 1.5 s, Gemini CLI does
/// not wait at all. Claims left behind by a busy lock are freed by the heartbeat rule.
const SESSION_END_LOCK_WAIT_SECS: f64 = 0.8;

/// Who may claim (`enforce = "require-verified"`), given by the face: the verdicts live in a
/// domain above this one.
pub type Admit = dyn for<'s> Fn(&'s Store, Timestamp, &Config) -> Box<dyn Admission + 's>;

/// What the hook's process knows besides the payload.
pub struct Setting<'a> {
    /// `--home` (or `CONDUCTOR_HOME`); the default home when `None`.
    pub home: Option<PathBuf>,
    /// `--lock-timeout`, in seconds (a hook waits [`LOCK_WAIT_SECS`] at most).
    pub lock_timeout: f64,
    /// Run by the Claude Code plugin's hooks (`--from-plugin`).
    pub from_plugin: bool,
    pub env: Env,
    pub admit: &'a Admit,
}

/// The agent's environment, as the hook inherits it.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// `CONDUCTOR_INSTANCE_ID`: the instance whoever started this session registered for it (a
    /// workflow supervisor, `conductor run`), which the session adopts.
    pub adopted: Option<String>,
    /// `CONDUCTOR_WORKFLOW_SESSION`: the workflow session of a worker.
    pub workflow_session: Option<String>,
    /// `CLAUDE_ENV_FILE`: where Claude Code takes variables for the session's Bash tool.
    pub claude_env_file: Option<PathBuf>,
    /// `CURSOR_VERSION` is set: Cursor runs this hook.
    pub cursor: bool,
    /// `HOME`: where user-level integrations are installed.
    pub user_home: Option<PathBuf>,
}

impl Env {
    /// This process's environment.
    pub fn of_process() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.trim().is_empty());
        Env {
            adopted: var("CONDUCTOR_INSTANCE_ID"),
            workflow_session: var("CONDUCTOR_WORKFLOW_SESSION"),
            claude_env_file: std::env::var_os("CLAUDE_ENV_FILE")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            cursor: std::env::var_os("CURSOR_VERSION").is_some(),
            user_home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// What the hook answers.
pub enum Response {
    /// A verdict, rendered in the agent's format for the event (`event`: its own name for it).
    Verdict { event: String, verdict: Verdict },
    /// Another hook handles this event (the plugin's hooks beside `integrate claude`'s, a Claude
    /// Code hook run by Cursor beside `integrate cursor`'s): answer nothing.
    StepAside,
    /// Claude Code's WorktreeCreate: the worktree, and the session's instance there (or why it
    /// was not registered yet).
    WorktreeCreated {
        created: worktree::Created,
        registered: Result<String>,
    },
    /// Claude Code's WorktreeRemove.
    WorktreeRemoved {
        path: PathBuf,
        removed: worktree::Removed,
    },
    /// A worktree event that failed: nothing was created or removed.
    WorktreeFailed(Error),
}

impl Response {
    /// Conductor itself failed: the agent goes on, and the person and the model are told.
    pub fn failed(what: &str) -> Response {
        Response::Verdict {
            event: String::new(),
            verdict: Verdict::failed(what),
        }
    }
}

/// Answer one hook payload of `agent`. Errors become a verdict that lets the agent go on (the
/// hook never blocks because of its own failure), except for a worktree event's, which the agent
/// must see.
pub fn respond(set: &Setting, agent: Agent, payload: &str, now: Timestamp) -> Response {
    let input = match agent.parse(payload) {
        Ok(i) => i,
        Err(e) => {
            return Response::failed(&format!(
                "the hook input is not a {} hook payload ({e})",
                agent.product()
            ));
        }
    };
    let hook = Hook {
        set,
        agent,
        input: &input,
        now,
    };
    if hook.steps_aside() {
        return Response::StepAside;
    }
    match &input.event {
        Event::WorktreeCreate(req) => return hook.worktree_create(req),
        Event::WorktreeRemove(path) => return hook.worktree_remove(Path::new(path)),
        _ => {}
    }
    let verdict = match hook.workflow_rules(payload) {
        Some(v) => v,
        None => {
            let v = hook.handle().unwrap_or_else(|e| {
                let what = match input.event {
                    Event::BeforeEdit(_) | Event::BeforeShell(_) => {
                        "the edit was allowed unchecked"
                    }
                    _ => "nothing was recorded",
                };
                Verdict::failed(&format!("{} hook failed: {e}; {what}", input.event_name))
            });
            hook.defer_notice(v)
        }
    };
    Response::Verdict {
        event: input.event_name.clone(),
        verdict,
    }
}

/// The store `home` names (the default home when `None`), waiting `timeout` at most for a lock.
pub fn open_store(home: Option<&Path>, timeout: Duration) -> Result<Store> {
    let dir = match home {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => Home::default_dir()?,
    };
    Ok(Store::open(dir, timeout)?)
}

/// One hook call in progress.
struct Hook<'a> {
    set: &'a Setting<'a>,
    agent: Agent,
    input: &'a HookInput,
    now: Timestamp,
}

impl Hook<'_> {
    fn store(&self, max_wait: f64) -> Result<Store> {
        let timeout = Duration::from_secs_f64(self.set.lock_timeout.min(max_wait));
        open_store(self.set.home.as_deref(), timeout)
    }

    /// The session the event comes from.
    fn session(&self) -> Session<'_> {
        Session {
            agent: self.agent,
            id: &self.input.session_id,
            adopted: self.set.env.adopted.as_deref(),
        }
    }

    /// The session's directory: the payload's, else ours; symlinks resolved.
    fn dir(&self) -> Result<PathBuf> {
        let dir = match self.input.cwd.as_deref() {
            Some(c) => PathBuf::from(c),
            None => crate::host::current_dir()?,
        };
        Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
    }

    fn require_session(&self) -> Result<()> {
        if self.input.session_id.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "the hook payload names no session",
            ));
        }
        Ok(())
    }

    /// One decision per event: the plugin's hook steps aside for hooks `integrate claude`
    /// installed, and a Claude Code hook run by Cursor steps aside for `integrate cursor`'s hooks.
    fn steps_aside(&self) -> bool {
        if self.agent != Agent::Claude {
            return false;
        }
        // The session's directory and the user's home: where integrations are installed.
        let mut dirs: Vec<PathBuf> = self.input.cwd.iter().map(PathBuf::from).collect();
        dirs.extend(self.set.env.user_home.clone());
        if self.set.from_plugin
            && dirs
                .iter()
                .any(|d| d.join(".claude/conductor-integration.json").exists())
        {
            return true;
        }
        let by_cursor = self.input.run_by_cursor || self.set.env.cursor;
        by_cursor
            && dirs.iter().any(|d| {
                std::fs::read_to_string(d.join(".cursor/hooks.json"))
                    .is_ok_and(|t| t.contains(" hook cursor"))
            })
    }

    /// WorktreeCreate: the worktree with git, then the session Claude Code starts there is
    /// registered with it (its SessionStart finds it); a session that has an instance already (a
    /// subagent's worktree) keeps it as it is.
    fn worktree_create(&self, req: &worktree::Request) -> Response {
        let created = match self.dir().and_then(|cwd| worktree::create(&cwd, req)) {
            Ok(c) => c,
            Err(e) => return Response::WorktreeFailed(e),
        };
        let registered = self.require_session().and_then(|()| {
            let store = self.store(LOCK_WAIT_SECS)?;
            let s = service::start_session(&store, self.now, &self.session(), &created.path)?;
            Ok(s.instance_id)
        });
        Response::WorktreeCreated {
            created,
            registered,
        }
    }

    /// WorktreeRemove: only when nothing would be lost, the sessions working there included
    /// (without the store, git's checks alone).
    fn worktree_remove(&self, path: &Path) -> Response {
        let dir = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let busy = self
            .store(LOCK_WAIT_SECS)
            .and_then(|store| service::others_in(&store, self.now, &self.session(), &dir))
            .unwrap_or_default();
        match worktree::remove(path, &busy) {
            Ok(removed) => Response::WorktreeRemoved {
                path: path.to_path_buf(),
                removed,
            },
            Err(e) => Response::WorktreeFailed(e),
        }
    }

    /// A workflow worker's tool call against its session's safety rules (issue 11): the
    /// supervisor gives the worker `CONDUCTOR_WORKFLOW_SESSION`, the agent passes its environment
    /// to its hooks, and a call that a rule denies or asks about is answered here (and logged in
    /// the session's ledger) before any claim check. `None`: not a worker, not a tool call the
    /// rules cover, or allowed.
    fn workflow_rules(&self, payload: &str) -> Option<Verdict> {
        use crate::workflows::{self, rules};
        let sid = self.set.env.workflow_session.as_deref()?;
        if !matches!(
            self.input.event_name.as_str(),
            "PreToolUse"
                | "BeforeTool"
                | "preToolUse"
                | "beforeShellExecution"
                | "tool.execute.before"
                | "tool_call"
        ) {
            return None;
        }
        let cwd = self.dir().ok()?;
        // Every agent's shell tool and edit tools, in conductor's terms; other tools (reads) by
        // the payload's tool name.
        let calls: Vec<rules::ToolCall> = match &self.input.event {
            Event::BeforeShell(command) => {
                let mut v = vec![rules::ToolCall::Bash {
                    command: command.clone(),
                }];
                if let Ok(w) = super::shell::written_paths(command, &cwd) {
                    v.extend(
                        w.paths
                            .into_iter()
                            .map(|path| rules::ToolCall::Edit { path }),
                    );
                }
                v
            }
            Event::BeforeEdit(files) => files
                .iter()
                .map(|f| rules::ToolCall::Edit { path: f.clone() })
                .collect(),
            _ => {
                let payload: serde_json::Value = serde_json::from_str(payload).ok()?;
                let tool = payload.get("tool_name")?.as_str()?;
                let input = payload.get("tool_input")?;
                let tool = match tool {
                    "read_file" | "read_many_files" | "glob" | "search_file_content" | "read" => {
                        "Read"
                    }
                    t => t,
                };
                let mut input = input.clone();
                if let Some(p) = ["absolute_path", "filePath", "path"]
                    .iter()
                    .find_map(|k| input.get(*k).cloned())
                    && let Some(o) = input.as_object_mut()
                {
                    o.entry("file_path").or_insert(p);
                }
                rules::ToolCall::from_hook(tool, &input)
                    .into_iter()
                    .collect()
            }
        };
        if calls.is_empty() {
            return None;
        }
        let store = self.store(LOCK_WAIT_SECS).ok()?;
        let mut ask = None;
        for call in &calls {
            match workflows::guard(&store, self.now, sid, call, &cwd, false) {
                Ok(rules::Decision::Deny(reason)) => return Some(Verdict::deny(reason)),
                Ok(rules::Decision::Ask(reason)) => {
                    ask.get_or_insert(reason);
                }
                // An unknown or unreadable session falls through to the claim checks like any call.
                Ok(rules::Decision::Allow) | Err(_) => {}
            }
        }
        ask.map(Verdict::ask)
    }

    fn handle(&self) -> Result<Verdict> {
        match &self.input.event {
            Event::Ignore => Ok(Verdict::default()),
            Event::SessionStart => self.session_start(),
            Event::BeforeEdit(files) => self.edit(files, false),
            Event::BeforeShell(command) => self.shell(command),
            Event::AfterTool => self.after_tool(),
            Event::AfterEdit(files) => self.edit(files, true),
            Event::Activity => self.activity(),
            Event::SessionEnd(reason) => self.session_end(reason.as_deref()),
            // Answered before any verdict (`respond`).
            Event::WorktreeCreate(_) | Event::WorktreeRemove(_) => Ok(Verdict::default()),
        }
    }

    fn session_start(&self) -> Result<Verdict> {
        self.require_session()?;
        let store = self.store(LOCK_WAIT_SECS)?;
        let config = crate::config::read(&store)?;
        let dir = self.dir()?;
        let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
        let SessionStarted {
            instance_id: id,
            resumed,
            adopted,
            state,
        } = service::start_session(&store, self.now, &self.session(), &dir)?;
        // The safety net behind this very hook: edits nobody claimed are recorded (`status`
        // says when nothing watches, so a failure to launch it is not the agent's business).
        let _ = crate::protocol::edit_watch::ensure_running(&store);
        // A headless Qwen Code run fires no SessionEnd: a watcher ends the session with its process.
        if self.agent == Agent::Qwen {
            super::qwen::end_with_agent(self.input);
        }
        if self.agent == Agent::Claude {
            self.export_instance_id(&id)?;
        }
        let me = state.instance(&id).expect("registered above");
        let enforce = config.enforce.unwrap_or_default();
        let mut context = super::session_context(&state, me, enforce, resumed, self.now, &live);
        // A session in one of several worktrees of a repository is told so.
        let mut norm = PathNormalizer::new(dir.clone());
        if norm.normalize(&format!("{}/", dir.display())).is_ok()
            && let Some(w) = worktree::context(norm.worktrees(), &dir)
        {
            context.push(' ');
            context.push_str(&w);
        }
        if adopted {
            context = context.replacen(
                "registered as",
                "adopted (CONDUCTOR_INSTANCE_ID, registered by whoever started it) as",
                1,
            );
        }
        Ok(Verdict {
            context: Some(context),
            ..Verdict::default()
        })
    }

    /// Make `CONDUCTOR_INSTANCE_ID` visible to the session's Bash tool through `CLAUDE_ENV_FILE`.
    fn export_instance_id(&self, id: &str) -> Result<()> {
        let Some(path) = &self.set.env.claude_env_file else {
            return Ok(());
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        f.write_all(format!("export CONDUCTOR_INSTANCE_ID={id}\n").as_bytes())
            .map_err(|e| Error::io("append to", path, e))
    }

    /// A shell command: the files it writes are decided as for an edit. A command that writes
    /// nothing conductor can name (or that does not parse) is a sign of life.
    fn shell(&self, command: &str) -> Result<Verdict> {
        let dir = self.dir()?;
        match super::shell::written_paths(command, &dir) {
            Ok(w) if !w.paths.is_empty() => self.edit(&w.paths, false),
            _ => self.activity(),
        }
    }

    /// Before an edit (`after` false): decide for every file and claim the free ones. After an
    /// edit (`after` true, the agent cannot be stopped): claim what can be claimed, and tell the
    /// person about a file another session holds.
    fn edit(&self, raw_files: &[String], after: bool) -> Result<Verdict> {
        if raw_files.is_empty() {
            return Ok(Verdict::default());
        }
        let store = self.store(LOCK_WAIT_SECS)?;
        let config = crate::config::read(&store)?;
        let enforce = config.enforce.unwrap_or_default();
        if enforce == Enforce::Off {
            return Ok(Verdict::default());
        }
        let dir = self.dir()?;
        let mut norm = PathNormalizer::new(dir.clone()).with_repo_keys(store.shared_by_hosts());
        let files = raw_files
            .iter()
            .map(|f| norm.normalize(f))
            .collect::<Result<Vec<_>>>()?;
        // With a shared store the keys name repositories; other worktrees' changes are looked
        // up by the absolute paths.
        let paths = if store.shared_by_hosts() {
            let mut plain = PathNormalizer::new(dir.clone());
            Some(
                raw_files
                    .iter()
                    .map(|f| plain.normalize(f))
                    .collect::<Result<Vec<_>>>()?,
            )
        } else {
            None
        };
        let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
        let req = service::Edit {
            session: self.session(),
            dir: &dir,
            files,
            enforce,
            after,
            repos: norm.worktrees().clone(),
            paths,
        };
        let admit = (self.set.admit)(&store, self.now, &config);
        service::edit(&store, self.now, &live, admit.as_ref(), &req)
    }

    /// Any sign of life: refresh the heartbeat when it is five minutes old (lock-free check
    /// first).
    fn activity(&self) -> Result<Verdict> {
        if self.input.session_id.is_empty() {
            return Ok(Verdict::default());
        }
        let store = self.store(LOCK_WAIT_SECS)?;
        service::activity(&store, self.now, &self.session())?;
        Ok(Verdict::default())
    }

    /// Where a notice waits for the session's next AfterTool: Gemini CLI hands BeforeTool's
    /// output to no one but the person, so "claimed for you" is said after the tool ran.
    fn notice_path(&self) -> Result<PathBuf> {
        use sha2::Digest;
        let store = self.store(LOCK_WAIT_SECS)?;
        let digest = sha2::Sha256::digest(self.input.session_id.as_bytes());
        let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        Ok(store
            .home()
            .dir()
            .join("hook-notices")
            .join(format!("{}-{hex}", self.agent.name())))
    }

    /// Gemini CLI and Qwen Code: keep a before-tool notice for the model until AfterTool (the person still sees
    /// it at once). Other agents read BeforeTool-time context directly.
    fn defer_notice(&self, v: Verdict) -> Verdict {
        if !self
            .agent
            .context_waits_for_after_tool(&self.input.event_name)
            || self.input.session_id.is_empty()
        {
            return v;
        }
        let Some(context) = v.context.clone() else {
            return v;
        };
        let stored = self.notice_path().and_then(|path| {
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            let dir = path.parent().expect("a file in hook-notices");
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::io("create", dir, e))?;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| Error::io("open", &path, e))?;
            f.write_all(format!("{context}\n").as_bytes())
                .map_err(|e| Error::io("append to", &path, e))
        });
        match stored {
            Ok(()) => Verdict {
                context: None,
                notice: v.notice.or(Some(context)),
                ..v
            },
            Err(_) => v,
        }
    }

    /// After a tool call: the notices kept for this session go to the model, then a heartbeat.
    fn after_tool(&self) -> Result<Verdict> {
        let mut v = self.activity()?;
        if self.input.session_id.is_empty() {
            return Ok(v);
        }
        let path = self.notice_path()?;
        // Take the file first, so a notice is delivered once even when two AfterTool hooks race.
        let taken = path.with_extension(format!("taken-{}", std::process::id()));
        if std::fs::rename(&path, &taken).is_ok() {
            let text = std::fs::read_to_string(&taken).unwrap_or_default();
            let _ = std::fs::remove_file(&taken);
            let text = text.trim();
            if !text.is_empty() {
                v.context = Some(text.replace('\n', " "));
            }
        }
        Ok(v)
    }

    fn session_end(&self, reason: Option<&str>) -> Result<Verdict> {
        self.require_session()?;
        let store = self.store(SESSION_END_LOCK_WAIT_SECS)?;
        let why = reason.filter(|r| !r.is_empty()).unwrap_or("other");
        Ok(
            match service::end_session(&store, self.now, &self.session(), why) {
                Ok(Some(SessionEnded {
                    instance_id: id,
                    released: n,
                })) => Verdict {
                    notice: Some(format!(
                        "conductor: {id} ended (abandoned); released {n} file{}",
                        if n == 1 { "" } else { "s" }
                    )),
                    ..Verdict::default()
                },
                Ok(None) => Verdict::default(),
                Err(e @ Error::Store(crate::store::Error::LockTimeout { .. })) => Verdict {
                    notice: Some(format!(
                        "conductor: {e}; this session's claims stay until the heartbeat rule \
                         frees them (`conductor cleanup`, after 60 minutes without a heartbeat)"
                    )),
                    ..Verdict::default()
                },
                Err(e) => return Err(e),
            },
        )
    }
}
