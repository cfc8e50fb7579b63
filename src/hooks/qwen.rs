//! Qwen Code: hook payloads and output, and the end of a session that fires no SessionEnd.
//!
//! Built from Qwen Code 0.24.4 itself (`@qwen-code/qwen-code` on npm; its bundle's
//! `packages/core/src/hooks/types.ts`, `hookEventHandler.ts`, `hookRunner.ts`), read 2026-11-28,
//! and from its payloads captured in a real run (`fixtures/hooks/qwen/`). Qwen Code is a Gemini
//! CLI fork, but its hooks speak Claude Code's vocabulary: events `SessionStart`, `PreToolUse`,
//! `PostToolUse`, `UserPromptSubmit`, `Stop`, `SessionEnd`; payloads carry `session_id`, `cwd`,
//! `hook_event_name`, and PreToolUse `tool_name` and `tool_input` (`edit` and `write_file` take
//! `file_path`, `notebook_edit` `notebook_path`, `run_shell_command` `command`). On exit 0 stdout
//! is read as Claude Code's JSON: `hookSpecificOutput.permissionDecision` (`deny`, `ask`) with
//! `permissionDecisionReason` (the tool result the model reads), `additionalContext`,
//! `systemMessage`. Qwen Code 0.24 drops a PreToolUse's `additionalContext` and appends a
//! PostToolUse's to the tool result, so what the model must hear about a tool call ("claimed for
//! this session") is said at its PostToolUse.
//!
//! Qwen Code fires SessionEnd only from its interactive UI: a headless run (`qwen -p`, or a
//! prompt given on the command line) ends with a Stop and then exits. So at a session's start
//! conductor leaves a small watcher behind ([`end_with_agent`]): when the Qwen Code process is
//! gone, it sends conductor the SessionEnd Qwen Code did not, and the session's claims are
//! released (a session that ended already is not ended twice).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{Agent, Answer, Event, HookInput, Verdict, parse_object, str_field};

/// Built-in tools that write the file named in their input.
pub const EDIT_TOOLS: &[&str] = &["edit", "write_file", "notebook_edit"];

/// The built-in shell tool (`tool_input.command`).
pub const SHELL_TOOL: &str = "run_shell_command";

/// Read a Qwen Code hook payload.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let tool = str_field(&v, "tool_name");
    let input = v.get("tool_input");
    let event = match event_name.as_str() {
        "SessionStart" => Event::SessionStart,
        "PreToolUse" if EDIT_TOOLS.contains(&tool) => {
            let file = ["file_path", "notebook_path", "absolute_path", "path"]
                .iter()
                .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str))
                .filter(|s| !s.is_empty());
            Event::BeforeEdit(file.map(str::to_string).into_iter().collect())
        }
        "PreToolUse" if tool == SHELL_TOOL => {
            match input.and_then(|i| i.get("command")).and_then(Value::as_str) {
                Some(c) => Event::BeforeShell(c.to_string()),
                None => Event::Activity,
            }
        }
        // Qwen Code drops PreToolUse's additionalContext, and appends PostToolUse's to the tool
        // result: a notice for the model waits for the tool's PostToolUse (as for Gemini CLI).
        "PostToolUse" => Event::AfterTool,
        "PreToolUse" | "UserPromptSubmit" | "Stop" => Event::Activity,
        "SessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// Qwen Code's output for a verdict: Claude Code's shape, "ask" included (Qwen Code asks the
/// person in its interactive UI and refuses where it cannot ask).
pub fn render(event: &str, v: &Verdict) -> Answer {
    super::claude::render_shape(event, v, true)
}

/// The Qwen Code process running this hook: the nearest ancestor whose program or script lies
/// in Qwen Code's npm package.
fn agent_pid() -> Option<u32> {
    crate::host::ancestors()
        .into_iter()
        .take(8)
        .find(|pid| super::version::of_process(Agent::Qwen, *pid).is_some())
}

/// At a session's start: leave behind a watcher that, once the Qwen Code process running this
/// hook is gone, runs `conductor hook qwen` with the SessionEnd payload Qwen Code itself sends
/// only from its interactive UI. The watcher is `sh` in a session of its own, polling
/// `/proc/PID` twice a second; the payload waits in its stdin. False when no Qwen Code process
/// was found (the hook was not run by Qwen Code) or the watcher could not start.
pub fn end_with_agent(input: &HookInput) -> bool {
    if input.session_id.is_empty() {
        return false;
    }
    let Some(pid) = agent_pid() else {
        return false;
    };
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let mut payload = json!({
        "session_id": input.session_id,
        "hook_event_name": "SessionEnd",
        "reason": "exited",
    });
    if let Some(cwd) = &input.cwd {
        payload["cwd"] = json!(cwd);
    }
    spawn_watcher(pid, &exe, &payload.to_string()).is_ok()
}

fn spawn_watcher(pid: u32, exe: &Path, payload: &str) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let script = "while [ -d \"/proc/$1\" ]; do sleep 0.5; done; exec \"$2\" hook qwen";
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script, "conductor-qwen-end"])
        .arg(pid.to_string())
        .arg(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own session: the agent's terminal going away (or a Ctrl-C there) does not end it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    // The payload waits in the pipe until `conductor hook qwen` reads it.
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(payload.as_bytes())?;
    }
    // Reaped by init once this hook exits.
    std::thread::spawn(move || child.wait());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Permission;

    #[test]
    fn tools_and_events() {
        let p = parse(r#"{"session_id":"s","cwd":"/w","hook_event_name":"PreToolUse","tool_name":"edit","tool_input":{"file_path":"/w/a","old_string":"x","new_string":"y"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/a".into()]));
        assert_eq!(p.cwd.as_deref(), Some("/w"));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"notebook_edit","tool_input":{"notebook_path":"/w/n.ipynb"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/n.ipynb".into()]));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"run_shell_command","tool_input":{"command":"ls"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("ls".into()));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"read_file","tool_input":{"file_path":"/w/a"}}"#).unwrap();
        assert_eq!(p.event, Event::Activity);
        let p = parse(r#"{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"edit"}"#)
            .unwrap();
        assert_eq!(p.event, Event::AfterTool);
        let p = parse(r#"{"session_id":"s","hook_event_name":"Stop"}"#).unwrap();
        assert_eq!(p.event, Event::Activity);
        let p = parse(r#"{"session_id":"s","hook_event_name":"SessionEnd","reason":"exited"}"#)
            .unwrap();
        assert_eq!(p.event, Event::SessionEnd(Some("exited".into())));
        assert!(parse("[]").is_err());
    }

    #[test]
    fn a_refusal_is_claude_codes_shape() {
        let a = render("PreToolUse", &Verdict::deny("held".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(v["hookSpecificOutput"]["permissionDecisionReason"], "held");
        let a = render("PreToolUse", &Verdict::ask("dead holder".into()));
        assert_eq!(Verdict::ask("x".into()).permission, Permission::Ask);
        assert!(a.stdout.contains("\"ask\""));
        assert_eq!(render("PreToolUse", &Verdict::default()), Answer::default());
    }

    #[test]
    fn no_watcher_without_qwen_code() {
        let p = parse(r#"{"session_id":"s","hook_event_name":"SessionStart"}"#).unwrap();
        assert!(!end_with_agent(&p), "the test runner is not Qwen Code");
    }
}
