//! `conductor hook AGENT`: the hook every supported coding agent runs. Reads one hook payload
//! from stdin, turns it into a [`HookInput`] (the agent's module in `hooks/`), decides with the
//! shared core, and prints the answer in the agent's own output format. Any failure of conductor
//! itself lets the agent go on and says so to the person and the model: the hook never blocks
//! because of its own bug, and never fails silently.
//!
//! Speed: a tool call reads `config.json` and `status.json` without the lock (and without schema
//! validation, see [`Store::read_unvalidated`]) and decides; only claiming a free file,
//! registering, a heartbeat older than five minutes, or the end of a session takes the lock.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::GlobalArgs;
use crate::output::Output;
use conductor::config::Enforce;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::hooks::service::{Session, SessionEnded, SessionStarted};
use conductor::hooks::{self, Agent, Event, HookInput, Verdict};
use conductor::protocol::local::{PathNormalizer, ProcessTable};
use conductor::store::{Home, Store};
use conductor::time::Timestamp;

/// Seconds a hook waits for the state lock at most (the agent waits on the hook).
const LOCK_WAIT_SECS: f64 = 3.0;
/// SessionEnd waits less: Claude Code gives plugin SessionEnd hooks about 1.5 s, Gemini CLI does
/// not wait at all. Claims left behind by a busy lock are freed by the heartbeat rule.
const SESSION_END_LOCK_WAIT_SECS: f64 = 0.8;

/// Run as an agent hook.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The agent runs this from its hooks (set them up with `conductor integrate AGENT`); \
it reads one hook payload from stdin and answers in that agent's hook output format.\n\
  session start        registers an instance for the session (agent recorded in `agent`), or reuses it on resume, \
and tells the model who else holds which files in this project\n\
  before an edit       Claude Code Edit/Write/MultiEdit/NotebookEdit, Cursor preToolUse, Codex apply_patch (every \
file of the patch), Gemini write_file/replace, Qwen Code edit/write_file, Copilot CLI Edit/Write: refused when another live instance holds a file; otherwise `enforce` \
in config.json decides (auto-claim, block-foreign, require-claim, block-overlap, off; require-verified is auto-claim, but a \
session whose agent failed its live check here may not claim). Files outside the session's \
directory are never claimed. A holder that looks gone, or require-claim, is left to a person (ask; agents without ask \
refuse). A file another live git worktree of the repository changed (its branch's commits or uncommitted changes) is \
named to the model with that worktree, its branch and its sessions; block-overlap refuses it\n\
  after an edit        Cursor afterFileEdit: claims the file after the fact (Cursor cannot refuse there)\n\
  prompt, stop, tool   heartbeat (at most every 5 minutes), so an idle session keeps its claims until \
default_max_age_minutes (60) pass without any hook event\n\
  shell command        Claude Code/Codex/Copilot CLI Bash, Gemini/Qwen Code run_shell_command, Cursor beforeShellExecution: the files \
the command writes (parsed as bash: redirections, sed -i, tee, cp, mv, rm, git checkout -- PATH, patch, git apply) \
are decided as for an edit\n\
  session end          releases the session's claims, recorded as done (abandoned); an instance adopted from \
CONDUCTOR_INSTANCE_ID is left to whoever registered it\n\
  worktree create      Claude Code WorktreeCreate (`claude --worktree NAME`): creates the worktree with git at \
.claude/worktrees/NAME on the branch worktree-NAME, registers the session there and prints the path alone; an \
error (not a repository, the branch exists, ...) is `error:` and `hint:` lines and a non-zero exit\n\
  worktree remove      Claude Code WorktreeRemove: removes the worktree and its branch only when no uncommitted \
change, no commit missing from every other branch and no other live session's work would be lost; otherwise keeps it, says why, and exits 2\n\
On an internal error the agent goes on, and the person and the model are told that coordination is off."
)]
pub struct HookArgs {
    /// Which agent's hook format stdin is in.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Set by the Claude Code plugin's hooks: step aside when `integrate claude` installed the
    /// same hooks in settings, so each event is handled once.
    #[arg(long, hide = true)]
    pub from_plugin: bool,
}

/// Run the hook; errors become a verdict that lets the agent go on, never an exit status.
pub fn run(global: &GlobalArgs, args: HookArgs, _out: &Output) -> Result<u8> {
    let agent = args.agent;
    let mut text = String::new();
    let answer = match std::io::stdin().read_to_string(&mut text) {
        Err(e) => agent.render(
            "",
            &Verdict::failed(&format!("could not read the hook input ({e})")),
        ),
        Ok(_) => match agent.parse(&text) {
            Err(e) => agent.render(
                "",
                &Verdict::failed(&format!(
                    "the hook input is not a {} hook payload ({e})",
                    agent.product()
                )),
            ),
            Ok(input) if steps_aside(agent, &args, &input) => hooks::Answer::default(),
            Ok(input)
                if matches!(
                    input.event,
                    Event::WorktreeCreate(_) | Event::WorktreeRemove(_)
                ) =>
            {
                return Ok(worktree(global, agent, &input, _out));
            }
            Ok(input) if let Some(v) = workflow_rules(global, &text, &input) => {
                agent.render(&input.event_name, &v)
            }
            Ok(input) => {
                let verdict = handle(global, agent, &input).unwrap_or_else(|e| {
                    let what = match input.event {
                        Event::BeforeEdit(_) | Event::BeforeShell(_) => {
                            "the edit was allowed unchecked"
                        }
                        _ => "nothing was recorded",
                    };
                    Verdict::failed(&format!("{} hook failed: {e}; {what}", input.event_name))
                });
                let verdict = defer_notice(global, agent, &input, verdict);
                agent.render(&input.event_name, &verdict)
            }
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

/// Claude Code's WorktreeCreate and WorktreeRemove, which answer unlike every other hook: the
/// created worktree's path alone on stdout, a failure as `error:` and `hint:` lines on stderr
/// and a non-zero exit (Claude Code then creates nothing, or keeps the worktree).
fn worktree(global: &GlobalArgs, agent: Agent, input: &HookInput, out: &Output) -> u8 {
    let failed = |e: &Error| {
        out.error(e);
        e.exit_code()
    };
    match &input.event {
        Event::WorktreeCreate(req) => {
            let created = session_dir(input).and_then(|cwd| hooks::worktree::create(&cwd, req));
            let created = match created {
                Ok(c) => c,
                Err(e) => return failed(&e),
            };
            // The session Claude Code starts there is registered with the worktree now (its
            // SessionStart finds it); a session that has an instance already (a subagent's
            // worktree) keeps it as it is.
            let registered = require_session(input).and_then(|()| {
                let store = open_store(global, LOCK_WAIT_SECS)?;
                let adopt = adopted_id();
                hooks::service::start_session(
                    &store,
                    Timestamp::now(),
                    &session(agent, input, &adopt),
                    &created.path,
                )
            });
            match registered {
                Ok(s) => out.status(&format!(
                    "conductor: {} the worktree {} (branch {}) for {}",
                    if created.resumed {
                        "reusing"
                    } else {
                        "created"
                    },
                    created.path.display(),
                    created.branch,
                    s.instance_id
                )),
                Err(e) => out.warn(&format!(
                    "the worktree {} was created but the session was not registered yet: {e}",
                    created.path.display()
                )),
            }
            let _ = writeln!(std::io::stdout().lock(), "{}", created.path.display());
            0
        }
        Event::WorktreeRemove(path) => {
            let path = std::path::Path::new(path);
            // The sessions working there keep it too; without the store, git's checks alone.
            let dir = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let adopt = adopted_id();
            let busy = open_store(global, LOCK_WAIT_SECS)
                .and_then(|store| {
                    hooks::service::others_in(
                        &store,
                        Timestamp::now(),
                        &session(agent, input, &adopt),
                        &dir,
                    )
                })
                .unwrap_or_default();
            let shown = path.display();
            match hooks::worktree::remove(path, &busy) {
                Ok(hooks::worktree::Removed::Removed { branch }) => out.status(&format!(
                    "conductor: removed the worktree {shown}{}",
                    branch
                        .map(|b| format!(" and its branch {b}"))
                        .unwrap_or_default()
                )),
                Ok(hooks::worktree::Removed::Gone) => {
                    out.status(&format!("conductor: {shown} is gone already"))
                }
                Err(e) => return failed(&e),
            }
            0
        }
        _ => 0,
    }
}

/// A workflow worker's tool call against its session's safety rules (issue 11): the supervisor
/// gives the worker `CONDUCTOR_WORKFLOW_SESSION`, the agent passes its environment to its hooks,
/// and a call that a rule denies or asks about is answered here (and logged in the session's
/// ledger) before any claim check. `None`: not a worker, not a tool call the rules cover, or
/// allowed.
fn workflow_rules(global: &GlobalArgs, text: &str, input: &HookInput) -> Option<Verdict> {
    use conductor::workflows::{self, rules};
    let sid = std::env::var("CONDUCTOR_WORKFLOW_SESSION")
        .ok()
        .filter(|s| !s.is_empty())?;
    if !matches!(
        input.event_name.as_str(),
        "PreToolUse"
            | "BeforeTool"
            | "preToolUse"
            | "beforeShellExecution"
            | "tool.execute.before"
            | "tool_call"
    ) {
        return None;
    }
    let cwd = session_dir(input).ok()?;
    // Every agent's shell tool and edit tools, in conductor's terms; other tools (reads) by the
    // payload's tool name.
    let calls: Vec<rules::ToolCall> = match &input.event {
        Event::BeforeShell(command) => {
            let mut v = vec![rules::ToolCall::Bash {
                command: command.clone(),
            }];
            if let Ok(w) = hooks::shell::written_paths(command, &cwd) {
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
            let payload: serde_json::Value = serde_json::from_str(text).ok()?;
            let tool = payload.get("tool_name")?.as_str()?;
            let input = payload.get("tool_input")?;
            let tool = match tool {
                "read_file" | "read_many_files" | "glob" | "search_file_content" | "read" => "Read",
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
    let store = open_store(global, LOCK_WAIT_SECS).ok()?;
    let mut ask = None;
    for call in &calls {
        match workflows::guard(&store, Timestamp::now(), &sid, call, &cwd, false) {
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

/// `CONDUCTOR_INSTANCE_ID` from the agent's environment: the instance whoever started this
/// session registered for it (a workflow supervisor, `conductor run`), which the session adopts.
fn adopted_id() -> Option<String> {
    std::env::var("CONDUCTOR_INSTANCE_ID")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// The session an event comes from.
fn session<'a>(agent: Agent, input: &'a HookInput, adopted: &'a Option<String>) -> Session<'a> {
    Session {
        agent,
        id: &input.session_id,
        adopted: adopted.as_deref(),
    }
}

/// A shell command: the files it writes are decided as for an edit. A command that writes
/// nothing conductor can name (or that does not parse) is a sign of life.
fn shell(global: &GlobalArgs, agent: Agent, input: &HookInput, command: &str) -> Result<Verdict> {
    let dir = session_dir(input)?;
    match hooks::shell::written_paths(command, &dir) {
        Ok(w) if !w.paths.is_empty() => edit(global, agent, input, &w.paths, false),
        _ => activity(global, agent, input),
    }
}

/// Where a notice waits for the session's next AfterTool: Gemini CLI hands BeforeTool's output
/// to no one but the person, so "claimed for you" is said after the tool ran.
fn notice_path(global: &GlobalArgs, agent: Agent, session_id: &str) -> Result<PathBuf> {
    use sha2::Digest;
    let store = open_store(global, LOCK_WAIT_SECS)?;
    let digest = sha2::Sha256::digest(session_id.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    Ok(store
        .home()
        .dir()
        .join("hook-notices")
        .join(format!("{}-{hex}", agent.name())))
}

/// Gemini CLI: keep a BeforeTool notice for the model until AfterTool (the person still sees it
/// at once). Other agents read BeforeTool-time context directly.
fn defer_notice(global: &GlobalArgs, agent: Agent, input: &HookInput, v: Verdict) -> Verdict {
    if !agent.context_waits_for_after_tool(&input.event_name) || input.session_id.is_empty() {
        return v;
    }
    let Some(context) = v.context.clone() else {
        return v;
    };
    let stored = notice_path(global, agent, &input.session_id).and_then(|path| {
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
fn after_tool(global: &GlobalArgs, agent: Agent, input: &HookInput) -> Result<Verdict> {
    let mut v = activity(global, agent, input)?;
    if input.session_id.is_empty() {
        return Ok(v);
    }
    let path = notice_path(global, agent, &input.session_id)?;
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

/// One decision per event: the plugin's hook steps aside for hooks `integrate claude` installed,
/// and a Claude Code hook run by Cursor steps aside for `integrate cursor`'s hooks.
fn steps_aside(agent: Agent, args: &HookArgs, input: &HookInput) -> bool {
    if agent != Agent::Claude {
        return false;
    }
    let dirs = candidate_roots(input);
    if args.from_plugin
        && dirs
            .iter()
            .any(|d| d.join(".claude/conductor-integration.json").exists())
    {
        return true;
    }
    let by_cursor = input.run_by_cursor || std::env::var_os("CURSOR_VERSION").is_some();
    by_cursor
        && dirs.iter().any(|d| {
            std::fs::read_to_string(d.join(".cursor/hooks.json"))
                .is_ok_and(|t| t.contains(" hook cursor"))
        })
}

/// The session's directory and the user's home: where integrations are installed.
fn candidate_roots(input: &HookInput) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = input.cwd.iter().map(PathBuf::from).collect();
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        v.push(PathBuf::from(h));
    }
    v
}

pub(crate) fn open_store(global: &GlobalArgs, max_wait: f64) -> Result<Store> {
    let dir = match global.home.clone() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Home::default_dir()?,
    };
    let timeout = Duration::from_secs_f64(global.lock_timeout.min(max_wait));
    Ok(Store::open(dir, timeout)?)
}

fn handle(global: &GlobalArgs, agent: Agent, input: &HookInput) -> Result<Verdict> {
    match &input.event {
        Event::Ignore => Ok(Verdict::default()),
        Event::SessionStart => session_start(global, agent, input),
        Event::BeforeEdit(files) => edit(global, agent, input, files, false),
        Event::BeforeShell(command) => shell(global, agent, input, command),
        Event::AfterTool => after_tool(global, agent, input),
        Event::AfterEdit(files) => edit(global, agent, input, files, true),
        Event::Activity => activity(global, agent, input),
        Event::SessionEnd(reason) => session_end(global, agent, input, reason.as_deref()),
        // Answered before any verdict (`worktree`).
        Event::WorktreeCreate(_) | Event::WorktreeRemove(_) => Ok(Verdict::default()),
    }
}

/// The session's directory: the payload's, else ours; symlinks resolved.
fn session_dir(input: &HookInput) -> Result<PathBuf> {
    let dir = match input.cwd.as_deref() {
        Some(c) => PathBuf::from(c),
        None => conductor::host::current_dir()?,
    };
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn require_session(input: &HookInput) -> Result<()> {
    if input.session_id.is_empty() {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "the hook payload names no session",
        ));
    }
    Ok(())
}

fn session_start(global: &GlobalArgs, agent: Agent, input: &HookInput) -> Result<Verdict> {
    require_session(input)?;
    let store = open_store(global, LOCK_WAIT_SECS)?;
    let config = conductor::config::read(&store)?;
    let now = Timestamp::now();
    let dir = session_dir(input)?;
    let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
    let adopt = adopted_id();
    let SessionStarted {
        instance_id: id,
        resumed,
        adopted,
        state,
    } = hooks::service::start_session(&store, now, &session(agent, input, &adopt), &dir)?;
    // The safety net behind this very hook: edits nobody claimed are recorded (`status` says
    // when nothing watches, so a failure to launch it is not the agent's business).
    let _ = conductor::protocol::edit_watch::ensure_running(&store);
    // A headless Qwen Code run fires no SessionEnd: a watcher ends the session with its process.
    if agent == Agent::Qwen {
        hooks::qwen::end_with_agent(input);
    }
    if agent == Agent::Claude {
        export_instance_id(&id)?;
    }
    let me = state.instance(&id).expect("registered above");
    let enforce = config.enforce.unwrap_or_default();
    let mut context = hooks::session_context(&state, me, enforce, resumed, now, &live);
    // A session in one of several worktrees of a repository is told so.
    let mut norm = PathNormalizer::new(dir.clone());
    if norm.normalize(&format!("{}/", dir.display())).is_ok()
        && let Some(w) = hooks::worktree::context(norm.worktrees(), &dir)
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

/// Before an edit (`after` false): decide for every file and claim the free ones. After an edit
/// (`after` true, the agent cannot be stopped): claim what can be claimed, and tell the person
/// about a file another session holds.
fn edit(
    global: &GlobalArgs,
    agent: Agent,
    input: &HookInput,
    raw_files: &[String],
    after: bool,
) -> Result<Verdict> {
    if raw_files.is_empty() {
        return Ok(Verdict::default());
    }
    let store = open_store(global, LOCK_WAIT_SECS)?;
    let config = conductor::config::read(&store)?;
    let enforce = config.enforce.unwrap_or_default();
    if enforce == Enforce::Off {
        return Ok(Verdict::default());
    }
    let now = Timestamp::now();
    let dir = session_dir(input)?;
    let mut norm = PathNormalizer::new(dir.clone()).with_repo_keys(store.shared_by_hosts());
    let files = raw_files
        .iter()
        .map(|f| norm.normalize(f))
        .collect::<Result<Vec<_>>>()?;
    // With a shared store the keys name repositories; other worktrees' changes are looked up
    // by the absolute paths.
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
    let adopt = adopted_id();
    let req = hooks::service::Edit {
        session: session(agent, input, &adopt),
        dir: &dir,
        files,
        enforce,
        after,
        repos: norm.worktrees().clone(),
        paths,
    };
    let admit = conductor::app::admission::admission(&store, now, &config);
    hooks::service::edit(&store, now, &live, &admit, &req)
}

/// Any sign of life: refresh the heartbeat when it is five minutes old (lock-free check first).
fn activity(global: &GlobalArgs, agent: Agent, input: &HookInput) -> Result<Verdict> {
    if input.session_id.is_empty() {
        return Ok(Verdict::default());
    }
    let store = open_store(global, LOCK_WAIT_SECS)?;
    let adopt = adopted_id();
    hooks::service::activity(&store, Timestamp::now(), &session(agent, input, &adopt))?;
    Ok(Verdict::default())
}

fn session_end(
    global: &GlobalArgs,
    agent: Agent,
    input: &HookInput,
    reason: Option<&str>,
) -> Result<Verdict> {
    require_session(input)?;
    let store = open_store(global, SESSION_END_LOCK_WAIT_SECS)?;
    let now = Timestamp::now();
    let why = reason.filter(|r| !r.is_empty()).unwrap_or("other");
    let adopt = adopted_id();
    let ended = hooks::service::end_session(&store, now, &session(agent, input, &adopt), why);
    Ok(match ended {
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
        Err(e @ Error::Store(conductor::store::Error::LockTimeout { .. })) => Verdict {
            notice: Some(format!(
                "conductor: {e}; this session's claims stay until the heartbeat rule frees them \
                 (`conductor cleanup`, after 60 minutes without a heartbeat)"
            )),
            ..Verdict::default()
        },
        Err(e) => return Err(e),
    })
}
