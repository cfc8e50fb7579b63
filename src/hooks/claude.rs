//! Claude Code: the payload of a command hook and the JSON it reads back.
//!
//! Built from the Claude Code hooks reference (code.claude.com/docs/en/hooks, read 2026-11-23):
//! every payload has `session_id`, `cwd` and `hook_event_name`; PreToolUse adds `tool_name` and
//! `tool_input`. On exit 0 Claude Code parses stdout as JSON: `systemMessage` is shown to the
//! person, `hookSpecificOutput.additionalContext` is given to the model (PreToolUse, PostToolUse,
//! UserPromptSubmit, SessionStart), and PreToolUse's `hookSpecificOutput.permissionDecision`
//! (`allow`, `deny`, `ask`) with `permissionDecisionReason` decides the tool call. Stderr on exit 0
//! only reaches the debug log, so conductor never relies on it. `WorktreeCreate` and
//! `WorktreeRemove` answer differently (a path on stdout, a failure by exit status): see
//! [`super::worktree`].

use serde_json::{Map, Value, json};

use super::{Answer, Event, HookInput, Permission, Verdict, parse_object, str_field};

/// Tools that write the file named in their input.
pub const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// Read a Claude Code hook payload.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "SessionStart" => Event::SessionStart,
        "PreToolUse" if EDIT_TOOLS.contains(&str_field(&v, "tool_name")) => {
            Event::BeforeEdit(target_file(&v).into_iter().collect())
        }
        "PreToolUse" if str_field(&v, "tool_name") == "Bash" => match v
            .get("tool_input")
            .and_then(|i| i.get("command"))
            .and_then(Value::as_str)
        {
            Some(c) => Event::BeforeShell(c.to_string()),
            None => Event::Activity,
        },
        "PostToolUse" | "UserPromptSubmit" | "Stop" => Event::Activity,
        "SessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        "WorktreeCreate" => Event::WorktreeCreate(super::worktree::Request::from_payload(&v)),
        "WorktreeRemove" => Event::WorktreeRemove(str_field(&v, "worktree_path").to_string()),
        _ => Event::Ignore,
    };
    Ok(HookInput {
        run_by_cursor: v.get("cursor_version").is_some(),
        ..HookInput::new(&v, event_name, event)
    })
}

/// The file an edit tool writes: `file_path`, or `notebook_path` for NotebookEdit.
fn target_file(v: &Value) -> Option<String> {
    let input = v.get("tool_input")?;
    input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Claude Code's output for a verdict.
pub fn render(event: &str, v: &Verdict) -> Answer {
    render_shape(event, v, true)
}

/// The Claude Code output shape, shared with Codex CLI (which reads the same JSON). With
/// `can_ask` false, "ask" becomes "deny" (the reason says what a person can do).
pub(crate) fn render_shape(event: &str, v: &Verdict, can_ask: bool) -> Answer {
    let mut out = Map::new();
    if let Some(n) = &v.notice {
        out.insert("systemMessage".into(), json!(n));
    }
    let mut specific = Map::new();
    if event == "PreToolUse" && v.permission != Permission::Allow {
        let decision = match v.permission {
            Permission::Ask if can_ask => "ask",
            _ => "deny",
        };
        specific.insert("permissionDecision".into(), json!(decision));
        specific.insert(
            "permissionDecisionReason".into(),
            json!(v.reason.as_deref().unwrap_or("conductor refused the edit")),
        );
    }
    let takes_context = matches!(
        event,
        "PreToolUse" | "PostToolUse" | "UserPromptSubmit" | "SessionStart"
    );
    if let Some(c) = v.context.as_ref().filter(|_| takes_context) {
        specific.insert("additionalContext".into(), json!(c));
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), json!(event));
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    if out.is_empty() {
        return Answer::default();
    }
    Answer::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notebook_path_and_activity_events() {
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"NotebookEdit","tool_input":{"notebook_path":"/w/n.ipynb"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/n.ipynb".into()]));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("ls".into()));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/w/a"}}"#).unwrap();
        assert_eq!(p.event, Event::Ignore);
        let p = parse(r#"{"session_id":"s","hook_event_name":"UserPromptSubmit","prompt":"hi"}"#)
            .unwrap();
        assert_eq!(p.event, Event::Activity);
        assert!(parse("[1]").is_err());
        let p = parse(
            r#"{"session_id":"s","cwd":"/w","hook_event_name":"WorktreeCreate","name":"a/b"}"#,
        )
        .unwrap();
        assert_eq!(
            p.event,
            Event::WorktreeCreate(crate::hooks::worktree::Request {
                name: "a/b".into(),
                base_path: None,
                source_ref: None
            })
        );
        let p = parse(
            r#"{"session_id":"s","hook_event_name":"WorktreeRemove","worktree_path":"/w/x"}"#,
        )
        .unwrap();
        assert_eq!(p.event, Event::WorktreeRemove("/w/x".into()));
    }

    #[test]
    fn deny_and_silence() {
        let a = render("PreToolUse", &Verdict::deny("held".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert!(v["systemMessage"].as_str().unwrap().contains("held"));
        assert_eq!(render("PreToolUse", &Verdict::default()), Answer::default());
        let a = render("SessionEnd", &Verdict::failed("x"));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert!(
            v.get("hookSpecificOutput").is_none(),
            "SessionEnd takes no context"
        );
    }
}
