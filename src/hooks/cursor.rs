//! Cursor: hook payloads and output (`hooks.json`, version 1).
//!
//! Built from the Cursor hooks documentation (cursor.com/docs/agent/hooks) as summarised by the
//! adapters that track it (agent-hooks-bridge's Cursor adapter, cupcake's Cursor reference), read
//! 2026-11-23. Payloads carry `conversation_id` (the session), `workspace_roots` (the first is the
//! project) and `hook_event_name`. `preToolUse` carries `tool_name` and `tool_input` and can be
//! refused with `{"permission": "deny", "user_message", "agent_message"}`; `afterFileEdit`
//! carries `file_path` and cannot refuse anything (its output is ignored), so conductor records
//! the edit after the fact; `sessionStart` takes `additional_context`; `beforeSubmitPrompt` wants
//! `{"continue": true}`. Cursor expects JSON on stdout for every event. `permission: "ask"` has
//! been unreliable since Cursor 2.4, so conductor denies instead and says what a person can do.

use serde_json::{Value, json};

use super::{Answer, Event, HookInput, Permission, Verdict, parse_object, str_field};

/// Agent tools that write the file named in their input.
pub const EDIT_TOOLS: &[&str] = &[
    "Write",
    "Edit",
    "StrReplace",
    "MultiEdit",
    "Delete",
    "EditNotebook",
];

/// Read a Cursor hook payload.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "sessionStart" => Event::SessionStart,
        "preToolUse" if EDIT_TOOLS.contains(&str_field(&v, "tool_name")) => {
            Event::BeforeEdit(tool_file(&v).into_iter().collect())
        }
        "afterFileEdit" => Event::AfterEdit(
            Some(str_field(&v, "file_path").to_string())
                .filter(|f| !f.is_empty())
                .into_iter()
                .collect(),
        ),
        "beforeShellExecution" => match str_field(&v, "command") {
            "" => Event::Activity,
            c => Event::BeforeShell(c.to_string()),
        },
        "preToolUse" | "postToolUse" | "beforeSubmitPrompt" | "stop" => Event::Activity,
        "sessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        _ => Event::Ignore,
    };
    let cwd = v
        .get("workspace_roots")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str)
        .or_else(|| v.get("cwd").and_then(Value::as_str))
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let session = match str_field(&v, "conversation_id") {
        "" => str_field(&v, "session_id"),
        s => s,
    };
    Ok(HookInput {
        session_id: session.to_string(),
        cwd,
        event_name,
        event,
        run_by_cursor: true,
    })
}

/// The file a `preToolUse` edit writes; `tool_input` may be an object or a JSON string.
fn tool_file(v: &Value) -> Option<String> {
    let input = match v.get("tool_input")? {
        Value::String(s) => serde_json::from_str(s).ok()?,
        other => other.clone(),
    };
    ["file_path", "path", "target_file"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Cursor's output for a verdict: one JSON object on stdout for every event.
pub fn render(event: &str, v: &Verdict) -> Answer {
    let out = match event {
        "preToolUse" | "beforeShellExecution" if v.permission != Permission::Allow => {
            let reason = v.reason.as_deref().unwrap_or("conductor refused the edit");
            json!({"permission": "deny", "user_message": v.notice.as_deref().unwrap_or(reason), "agent_message": reason})
        }
        "sessionStart" => match &v.context {
            Some(c) => json!({"additional_context": c}),
            None => json!({}),
        },
        "beforeSubmitPrompt" => json!({"continue": true}),
        "beforeShellExecution" => json!({"permission": "allow"}),
        _ => json!({}),
    };
    Answer {
        code: 0,
        stdout: out.to_string(),
        // Cursor shows a hook's stderr in its Hooks output channel.
        stderr: v.notice.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_root_and_conversation() {
        let p = parse(r#"{"conversation_id":"c1","workspace_roots":["/w"],"hook_event_name":"preToolUse","tool_name":"Write","tool_input":{"file_path":"/w/a.rs"}}"#).unwrap();
        assert_eq!(p.session_id, "c1");
        assert_eq!(p.cwd.as_deref(), Some("/w"));
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/a.rs".into()]));
        let a = render("preToolUse", &Verdict::ask("x".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(v["permission"], "deny");
    }
}
