//! The agent integrations (`conductor integrate AGENT`): conductor's hooks, plugin files and MCP
//! server registration in eight coding agents' own settings, and the checks `doctor` runs on them.
//!
//! One module per agent holds everything conductor knows about that agent's files: where its
//! settings live, what goes into them, and what makes them work (Codex's trust store, in
//! `codex/trust.rs`). Each offers the same four things, and this module only dispatches:
//!
//! - `install(&Scope)` and `uninstall(&Scope)` -> [`Changes`];
//! - `check(root, user)` -> [`Check`] (`doctor`'s findings for one directory);
//! - `dir(&Scope)`: where its files go.
//!
//! Beside them, the shared machinery: the hooks document five agents share ([`settings`]), the
//! plugin files OpenCode and Pi load ([`plugin`]) and the MCP registration ([`mcp`]).

pub mod claude;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod live_check;
pub mod mcp;
pub mod opencode;
pub mod pi;
pub mod plugin;
pub mod qwen;
pub mod settings;
pub mod verdicts;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, IoContext, Reason, Result};
use crate::health::Finding;
use crate::hooks::Agent;

/// The manifest kept beside an agent's settings: what conductor added and what it replaced.
pub const MANIFEST: &str = "conductor-integration.json";

/// Where an integration goes: a project directory, or every project of the user.
#[derive(Clone, Debug)]
pub struct Scope {
    /// The project directory, or the user's home with `user`.
    pub root: PathBuf,
    pub user: bool,
    /// Codex: trust the project even when it has a config of its own or is marked untrusted.
    pub trust_project: bool,
}

impl Scope {
    /// The user's home (`--user`), or the project (`--project DIR`, relative to `cwd`; none:
    /// `cwd` itself), which must be a directory.
    pub fn new(project: Option<PathBuf>, user: bool, trust_project: bool) -> Result<Scope> {
        let root = if user {
            match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                Some(h) => PathBuf::from(h),
                None => {
                    return Err(Error::invalid(
                        Reason::NoHome,
                        "HOME is not set; use --project DIR instead of --user",
                    ));
                }
            }
        } else {
            match project {
                Some(p) if p.is_absolute() => p,
                Some(p) if p.as_os_str() == "." => crate::host::current_dir()?,
                Some(p) => crate::host::current_dir()?.join(p),
                // The repository's root, from any directory inside it (teams commit the
                // settings there; `src/.claude/` would be found by nobody).
                None => {
                    let cwd = crate::host::current_dir()?;
                    crate::host::repository_root(&cwd).unwrap_or(cwd)
                }
            }
        };
        if !root.is_dir() {
            return Err(Error::invalid(
                Reason::InvalidDirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(Scope {
            root,
            user,
            trust_project,
        })
    }

    /// The project, when this is not a user-wide integration.
    pub fn project(&self) -> Option<&Path> {
        (!self.user).then_some(self.root.as_path())
    }
}

/// What an install or uninstall changed, and in which directory.
#[derive(Debug)]
pub struct Changes {
    pub dir: PathBuf,
    pub changes: Vec<String>,
}

/// What `doctor` found about one agent's integration in one directory.
#[derive(Debug, Default)]
pub struct Check {
    /// Hook commands of this agent are installed (its CLI is then a tool doctor looks for).
    pub hooks: bool,
    pub findings: Vec<Finding>,
}

/// Install (or update) `agent`'s integration.
pub fn install(agent: Agent, scope: &Scope) -> Result<Changes> {
    match agent {
        Agent::Claude => claude::install(scope),
        Agent::Cursor => cursor::install(scope),
        Agent::Codex => codex::install(scope),
        Agent::Gemini => gemini::install(scope),
        Agent::Opencode => opencode::install(scope),
        Agent::Pi => pi::install(scope),
        Agent::Qwen => qwen::install(scope),
        Agent::Copilot => copilot::install(scope),
    }
}

/// Remove what an earlier install of `agent`'s integration added.
pub fn uninstall(agent: Agent, scope: &Scope) -> Result<Changes> {
    match agent {
        Agent::Claude => claude::uninstall(scope),
        Agent::Cursor => cursor::uninstall(scope),
        Agent::Codex => codex::uninstall(scope),
        Agent::Gemini => gemini::uninstall(scope),
        Agent::Opencode => opencode::uninstall(scope),
        Agent::Pi => pi::uninstall(scope),
        Agent::Qwen => qwen::uninstall(scope),
        Agent::Copilot => copilot::uninstall(scope),
    }
}

/// `agent`'s integration under `root` (`user`: the user's home, seen as `--user`).
pub fn check(agent: Agent, root: &Path, user: bool) -> Check {
    match agent {
        Agent::Claude => claude::check(root, user),
        Agent::Cursor => cursor::check(root, user),
        Agent::Codex => codex::check(root, user),
        Agent::Gemini => gemini::check(root, user),
        Agent::Opencode => opencode::check(root, user),
        Agent::Pi => pi::check(root, user),
        Agent::Qwen => qwen::check(root, user),
        Agent::Copilot => copilot::check(root, user),
    }
}

/// After an install of `agent`'s integration: what the agent says about loading it here (Pi),
/// and the live check (`live_check`; none for OpenCode), run in the project (the current
/// directory with `--user`).
pub fn verify(agent: Agent, scope: &Scope) -> Result<(Vec<String>, Option<live_check::Check>)> {
    if agent == Agent::Opencode {
        return Ok((Vec::new(), None));
    }
    let here = match scope.project() {
        Some(p) => p.to_path_buf(),
        None => crate::host::current_dir()?,
    };
    let notes = if agent == Agent::Pi {
        vec![pi::note(&here)?]
    } else {
        Vec::new()
    };
    Ok((notes, Some(live_check::run(agent, &here, scope.user))))
}

/// Every integration installed in the current directory and in ~ (`doctor`): the findings, and
/// the agents whose hooks are installed.
pub fn checks() -> (Vec<Finding>, Vec<Agent>) {
    let mut roots = Vec::new();
    if let Ok(d) = crate::host::current_dir() {
        // Where `integrate` installs from here: the repository's root.
        roots.push(crate::host::repository_root(&d).unwrap_or(d));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        roots.push(PathBuf::from(h));
    }
    roots.dedup();
    let (mut findings, mut hooked) = (Vec::new(), Vec::new());
    for root in &roots {
        let user = Some(root) == roots.last() && roots.len() > 1;
        for agent in [
            Agent::Opencode,
            Agent::Claude,
            Agent::Cursor,
            Agent::Codex,
            Agent::Gemini,
            Agent::Qwen,
            Agent::Copilot,
            Agent::Pi,
        ] {
            let (c, pi_loads) = match agent {
                Agent::Pi => pi::loads_check(root, user),
                _ => (check(agent, root, user), None),
            };
            if c.hooks && !hooked.contains(&agent) {
                hooked.push(agent);
            }
            findings.extend(c.findings);
            // The live check: the hook command (Pi: the extension, where Pi loads it), driven
            // with the agent's payload; OpenCode's plugin is checked by the e2e suite only.
            if let Some(file) = pi_loads {
                findings.push(live_check::finding(
                    &file,
                    live_check::run(Agent::Pi, root, false),
                ));
            } else if c.hooks && !matches!(agent, Agent::Opencode | Agent::Pi) {
                findings.push(live_check::doctor(agent, root, user));
            }
        }
    }
    (findings, hooked)
}

/// The program each agent's hooks serve: the agent's own CLI, as looked up on PATH.
pub fn cli(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "claude",
        Agent::Cursor => "cursor-agent",
        Agent::Codex => "codex",
        Agent::Gemini => "gemini",
        Agent::Opencode => "opencode",
        Agent::Pi => "pi",
        Agent::Qwen => "qwen",
        Agent::Copilot => "copilot",
    }
}

/// The CLI of each agent whose hooks are installed (`hooked`, from [`checks`]): a tool `doctor`
/// looks for on PATH.
pub fn tools(hooked: &[Agent], t: &mut crate::health::Tools) {
    for agent in hooked {
        t.need(
            cli(*agent),
            format!("{} (its conductor hooks are installed)", agent.product()),
            format!(
                "{} itself: its hooks are installed but the agent cannot be run from this PATH",
                agent.product()
            ),
        );
    }
}

/// Whether hooks and configurations name conductor as `conductor` (found on PATH) rather than
/// by this machine's absolute path: for project files, which teams commit ([`set_portable`]).
static PORTABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Name conductor as `conductor` in what is installed next, when a `conductor` is on PATH
/// (a project install); else, and for user installs, by its absolute path.
pub fn set_portable(on: bool) {
    PORTABLE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A `conductor` executable on PATH, if there is one.
pub fn on_path() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("conductor"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// What hooks and configurations run: `conductor` (see [`set_portable`]), else the absolute
/// path of this binary, symlinks resolved.
pub fn program() -> Result<String> {
    if PORTABLE.load(std::sync::atomic::Ordering::Relaxed) && on_path().is_some() {
        return Ok("conductor".into());
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("find", Path::new("conductor"), e))?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.into_os_string().into_string().map_err(|_| {
        Error::invalid(
            Reason::InvalidDirectory,
            "the path of the conductor binary is not UTF-8",
        )
    })
}

/// `'/abs/path/to/conductor' hook AGENT`, quoted for the shell only when it must be.
pub fn hook_command(agent: Agent) -> Result<String> {
    let path = program()?;
    let path = path.as_str();
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,@%".contains(c));
    let quoted = if plain {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    };
    Ok(format!("{quoted} hook {}", agent.name()))
}

/// Pretty JSON with a final newline: how conductor writes settings files.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON values serialize");
    b.push(b'\n');
    b
}

/// Replace `path` atomically (temp file in the same directory, fsync, rename), keeping the
/// permissions of `mode_from` when it exists, else `mode`.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32, mode_from: Option<&Path>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().expect("files live in the agent's directory");
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".conductor-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .ctx("create a temp file in", dir)?;
    tmp.write_all(bytes).ctx("write", tmp.path())?;
    let mode = mode_from
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(mode);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .ctx("set permissions of", tmp.path())?;
    tmp.as_file().sync_all().ctx("sync", tmp.path())?;
    tmp.persist(path)
        .map_err(|e| Error::io("replace", path, e.error))?;
    Ok(crate::store::atomic::sync_dir(dir)?)
}
