//! The live check that ends `conductor integrate AGENT` and that `conductor doctor` runs for every
//! integrated agent: proof that the hooks bite. In a throwaway conductor home (a temp directory,
//! never the user's state), a throwaway session holds a canary file of the project; then the
//! agent's own hook path is driven with the payload the agent sends when its model edits that
//! file:
//! - Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI, Cursor: exactly the command the settings file names for the
//!   pre-tool event, run by `sh -c` as the agents do, with the agent's payload shape (the
//!   fixtures in `fixtures/hooks/`);
//! - Pi: the installed extension itself, loaded by the `node` Pi runs with, its `tool_call`
//!   handler called as Pi calls it (with the project list it reads, so an extension that does not
//!   act in this project is seen).
//!
//! The edit must be refused with the reason naming the holder (what reaches the model). The
//! result is "enforced", or exactly why not: untrusted project, extension not loaded, wrong Node,
//! binary moved, hook timed out, or what the hook answered.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::settings::Target;
use crate::health::Finding;
use crate::hooks::Agent;

/// How long one hook run may take.
const LIMIT: Duration = Duration::from_secs(20);
/// The canary file, relative to the project (never created).
const CANARY: &str = ".conductor-live-check-canary";

/// The outcome of one live check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub agent: &'static str,
    pub enforced: bool,
    /// What was run, and what came back (or why it could not run).
    pub detail: String,
}

impl Check {
    /// One line for `integrate`'s output.
    pub fn line(&self) -> String {
        if self.enforced {
            format!("live check: enforced ({})", self.detail)
        } else {
            format!("live check: NOT enforced: {}", self.detail)
        }
    }
    fn no(agent: Agent, detail: impl Into<String>) -> Check {
        Check {
            agent: agent.name(),
            enforced: false,
            detail: detail.into(),
        }
    }
}

/// The hook's pre-tool event for each agent, and its payload (fixture shape) editing `canary`.
fn payload(
    agent: Agent,
    project: &Path,
    canary: &Path,
    session: &str,
) -> Option<(&'static str, Value)> {
    let fixture = |text: &str| -> Value { serde_json::from_str(text).expect("fixtures are JSON") };
    let p = project.display().to_string();
    let c = canary.display().to_string();
    Some(match agent {
        Agent::Claude => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/claude/pre-tool-use-edit-a.json"
            ));
            v["session_id"] = json!(session);
            v["cwd"] = json!(p);
            v["tool_input"]["file_path"] = json!(c);
            ("PreToolUse", v)
        }
        Agent::Codex => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/codex/pre-tool-use-apply-patch.json"
            ));
            v["session_id"] = json!(session);
            v["cwd"] = json!(p);
            v["tool_input"]["command"] = json!(format!(
                "*** Begin Patch\n*** Update File: {CANARY}\n@@\n-a\n+b\n*** End Patch\n"
            ));
            ("PreToolUse", v)
        }
        Agent::Gemini => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/gemini/before-tool-replace.json"
            ));
            v["session_id"] = json!(session);
            v["cwd"] = json!(p);
            v["tool_input"]["file_path"] = json!(c);
            ("BeforeTool", v)
        }
        Agent::Qwen => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/qwen/pre-tool-use-edit.json"
            ));
            v["session_id"] = json!(session);
            v["cwd"] = json!(p);
            v["tool_input"]["file_path"] = json!(c);
            ("PreToolUse", v)
        }
        Agent::Copilot => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/copilot/pre-tool-use-edit.json"
            ));
            v["session_id"] = json!(session);
            v["cwd"] = json!(p);
            v["tool_input"]["path"] = json!(c);
            ("PreToolUse", v)
        }
        Agent::Cursor => {
            let mut v = fixture(include_str!(
                "../../fixtures/hooks/cursor/pre-tool-use-write.json"
            ));
            v["conversation_id"] = json!(session);
            v["workspace_roots"] = json!([p]);
            v["tool_input"]["file_path"] = json!(c);
            ("preToolUse", v)
        }
        Agent::Opencode | Agent::Pi => return None,
    })
}

/// A throwaway conductor home where a throwaway session holds the canary.
struct World {
    dir: tempfile::TempDir,
    holder: String,
    canary: PathBuf,
}

impl World {
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
}

fn world(project: &Path) -> Result<World, String> {
    let dir = tempfile::Builder::new()
        .prefix("conductor-live-check-")
        .tempdir()
        .map_err(|e| format!("cannot create a temp directory: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let home = dir.path().join("home");
    let run = |args: &[&str]| -> Result<Value, String> {
        let o = Command::new(&exe)
            .args(["--json", "--home"])
            .arg(&home)
            .args(args)
            .current_dir(project)
            .env_remove("CONDUCTOR_INSTANCE")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!(
                "`conductor {}` failed in the throwaway home: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(serde_json::from_slice(&o.stdout).unwrap_or(Value::Null))
    };
    let started = run(&[
        "start",
        "live check: holds the canary",
        "--priority",
        "P2",
        "--dir",
        &project.display().to_string(),
    ])?;
    let holder = started["instance_id"]
        .as_str()
        .ok_or("`conductor start` did not name the session")?
        .to_string();
    run(&["claim", "--instance", &holder, CANARY])?;
    Ok(World {
        canary: project.join(CANARY),
        dir,
        holder,
    })
}

/// Run `program args` with `stdin`, in `cwd`, with the throwaway home; at most LIMIT.
fn run_limited(mut cmd: Command, stdin: &str) -> Result<(Option<i32>, String, String), String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run it: {e}"))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "hook timed out: no answer in {} s",
                    LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok((
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

fn missing_binary(agent: Agent, program: &str) -> Option<Check> {
    let p = Path::new(program);
    (p.is_absolute() && !p.is_file()).then(|| {
        Check::no(
            agent,
            format!(
                "binary moved: the {} hook runs {program}, which does not exist (run `conductor integrate {}` again)",
                agent.product(),
                agent.name()
            ),
        )
    })
}

/// The settings file of a hook-command agent for `root` (or ~ with `user`).
fn settings_file(agent: Agent, root: &Path, user: bool) -> PathBuf {
    let t = target(agent);
    if agent == Agent::Copilot {
        return super::copilot::hooks_file(root, user);
    }
    if agent == Agent::Codex && user {
        if let Ok(h) = super::codex::trust::codex_home() {
            return h.join(t.file);
        }
    }
    root.join(t.dir).join(t.file)
}

/// The live check for `agent`, integrated in `project` (or for the user, `user`).
pub fn run(agent: Agent, project: &Path, user: bool) -> Check {
    match agent {
        Agent::Pi => pi(project),
        Agent::Opencode => Check::no(
            agent,
            "not checked: the live check drives hook commands and Pi's extension; OpenCode's plugin is checked by the e2e suite only",
        ),
        _ => command_agent(agent, project, user),
    }
}

fn command_agent(agent: Agent, project: &Path, user: bool) -> Check {
    let root = if user {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
    } else {
        project.to_path_buf()
    };
    let path = settings_file(agent, &root, user);
    let t = target(agent);
    let Some(settings) = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Check::no(
            agent,
            format!(
                "hooks not installed: {} is missing or not JSON",
                path.display()
            ),
        );
    };
    let session = format!("conductor-live-check-{}", std::process::id());
    let (event, _) =
        payload(agent, project, &project.join(CANARY), &session).expect("a command agent");
    let Some(command) = super::settings::installed_commands(&t, &settings)
        .into_iter()
        .find(|(e, c)| e == event && super::settings::our_program(c, agent).is_some())
        .map(|(_, c)| c)
    else {
        return Check::no(
            agent,
            format!(
                "hooks not installed: {} has no {event} hook running `conductor hook {}`",
                path.display(),
                agent.name()
            ),
        );
    };
    if let Some(c) =
        super::settings::our_program(&command, agent).and_then(|p| missing_binary(agent, &p))
    {
        return c;
    }
    if agent == Agent::Codex {
        let proj = (!user).then_some(project);
        if let Some((problem, fix)) = super::codex::trust::problems(&path, &settings, proj)
            .into_iter()
            .next()
        {
            return Check::no(
                agent,
                format!("untrusted project: {problem}, so Codex skips the hooks (run `{fix}`)"),
            );
        }
    }
    if !user {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let untrusted = match agent {
            Agent::Qwen => super::qwen::untrusted(project, home.as_deref()),
            Agent::Copilot => super::copilot::untrusted(project, home.as_deref()),
            _ => None,
        };
        if let Some(why) = untrusted {
            return Check::no(
                agent,
                format!(
                    "untrusted project: {why}, so {} skips the project's hooks",
                    agent.product()
                ),
            );
        }
    }
    let w = match world(project) {
        Ok(w) => w,
        Err(e) => return Check::no(agent, e),
    };
    let (_, body) = payload(agent, project, &w.canary, &session).expect("a command agent");
    // The agents run hook commands with the system shell, whatever their PATH.
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", &command])
        .current_dir(project)
        .env("CONDUCTOR_HOME", w.home())
        .env_remove("CONDUCTOR_INSTANCE");
    let (code, out, err) = match run_limited(cmd, &body.to_string()) {
        Ok(r) => r,
        Err(e) => return Check::no(agent, format!("`{command}`: {e}")),
    };
    let refused =
        (out.contains("deny") || code == Some(2)) && format!("{out}{err}").contains(&w.holder);
    if refused {
        Check {
            agent: agent.name(),
            enforced: true,
            detail: format!(
                "`{command}` refused a {event} edit of a file a throwaway session holds, with the reason the model reads"
            ),
        }
    } else {
        Check::no(
            agent,
            format!(
                "`{command}` did not refuse a {event} edit of a held file (exit {}): {}",
                code.map_or("by signal".into(), |c| c.to_string()),
                format!("{}{}", out.trim(), err.trim())
                    .chars()
                    .take(300)
                    .collect::<String>()
            ),
        )
    }
}

/// Loads Pi's extension as Pi does and calls its `tool_call` handler for an edit of the canary.
const PI_HARNESS: &str = r#"
const [ext, dir, canary] = process.argv.slice(2);
const mod = await import(ext);
const handlers = {};
mod.default({ on: (name, fn) => (handlers[name] ||= []).push(fn), registerTool: () => {} });
const ctx = { cwd: dir, hasUI: false, sessionManager: { getSessionId: () => "conductor-live-check" } };
const emit = async (name, event) => {
  let last;
  for (const fn of handlers[name] || []) last = await fn(event, ctx);
  return last ?? null;
};
await emit("session_start", { type: "session_start", reason: "startup" });
const out = await emit("tool_call", { type: "tool_call", toolCallId: "c1", toolName: "edit", input: { path: canary, oldText: "a", newText: "b" } });
await emit("session_shutdown", { type: "session_shutdown", reason: "quit" });
console.log(JSON.stringify({ answer: out }));
"#;

fn pi(project: &Path) -> Check {
    let agent = Agent::Pi;
    let Ok(home) = super::pi::home() else {
        return Check::no(agent, "HOME is not set");
    };
    let cli = super::pi::pi_cli();
    let l = super::pi::loads_in(project, &home, cli.as_ref());
    if !l.loads {
        return Check::no(agent, l.detail);
    }
    let user_ext = super::pi::extension_path(&home);
    let ext = if super::plugin::is_installed(&user_ext) {
        user_ext
    } else {
        super::pi::project_extension_path(project)
    };
    let Ok(text) = std::fs::read_to_string(&ext) else {
        return Check::no(
            agent,
            format!("extension not loaded: cannot read {}", ext.display()),
        );
    };
    if let Some(c) = super::plugin::installed_program(&text).and_then(|p| missing_binary(agent, &p))
    {
        return c;
    }
    let Some(node) = crate::health::which("node") else {
        return Check::no(agent, "wrong Node: there is no `node` on PATH to run Pi");
    };
    let w = match world(project) {
        Ok(w) => w,
        Err(e) => return Check::no(agent, e),
    };
    // node loads the extension as an ES module; it is plain JavaScript in a .ts file.
    let copy = w.dir.path().join("conductor-extension.mjs");
    let harness = w.dir.path().join("harness.mjs");
    if let Err(e) = std::fs::write(&copy, &text).and_then(|()| std::fs::write(&harness, PI_HARNESS))
    {
        return Check::no(agent, format!("cannot write the harness: {e}"));
    }
    let mut cmd = Command::new(&node);
    cmd.arg(&harness)
        .arg(&copy)
        .arg(project)
        .arg(&w.canary)
        .current_dir(project)
        .env("CONDUCTOR_HOME", w.home())
        .env_remove("CONDUCTOR_WORKFLOW_SESSION")
        .env_remove("CONDUCTOR_INSTANCE");
    let (code, out, err) = match run_limited(cmd, "") {
        Ok(r) => r,
        Err(e) => return Check::no(agent, format!("{}: {e}", ext.display())),
    };
    let answer: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["answer"].clone())
        .unwrap_or(Value::Null);
    let reason = answer["reason"].as_str().unwrap_or("");
    if answer["block"] == json!(true) && reason.contains(&w.holder) {
        return Check {
            agent: agent.name(),
            enforced: true,
            detail: format!(
                "{} under {} blocked an edit of a file a throwaway session holds, with the reason the model reads",
                ext.display(),
                node.display()
            ),
        };
    }
    let why = if code != Some(0) {
        format!(
            "extension not loaded: {} under {} failed: {}",
            ext.display(),
            node.display(),
            err.trim()
        )
    } else if answer.is_null() {
        format!(
            "extension not active here: {} let an edit of a held file through",
            ext.display()
        )
    } else {
        format!(
            "{} did not block an edit of a held file: {answer} {}",
            ext.display(),
            err.trim()
        )
    };
    Check::no(agent, why.chars().take(400).collect::<String>())
}

/// The hooks document of a hook-command agent.
fn target(agent: Agent) -> Target {
    match agent {
        Agent::Claude => super::claude::TARGET,
        Agent::Cursor => super::cursor::TARGET,
        Agent::Codex => super::codex::TARGET,
        Agent::Qwen => super::qwen::TARGET,
        Agent::Copilot => super::copilot::TARGET,
        _ => super::gemini::TARGET,
    }
}

/// A live check as `doctor`'s finding about `file`.
pub fn finding(file: &Path, c: Check) -> Finding {
    Finding {
        file: file.display().to_string(),
        ok: c.enforced,
        detail: c.line(),
        repair: (!c.enforced).then(|| {
            format!(
                "fix what the live check names, then run `conductor integrate {}` again",
                c.agent
            )
        }),
    }
}

/// `doctor`: the live check of a hook-command agent integrated under `root` (`user`: ~), run
/// from the current directory.
pub fn doctor(agent: Agent, root: &Path, user: bool) -> Finding {
    let here = crate::host::current_dir().unwrap_or_else(|_| root.to_path_buf());
    finding(&settings_file(agent, root, user), run(agent, &here, user))
}
