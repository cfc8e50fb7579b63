//! GitHub Copilot CLI: hook payloads and output.
//!
//! Built from Copilot CLI 1.0.102 (`@github/copilot` on npm: its changelog and its payloads
//! captured in a real run, `fixtures/hooks/copilot/`), read 2026-11-28, and the Copilot CLI hooks
//! reference (docs.github.com, "Copilot CLI hooks reference"). Copilot CLI reads a hooks file whose
//! events are spelled as Claude Code's in Claude Code's format, and then speaks Claude Code's
//! vocabulary: payloads carry `hook_event_name`, `session_id`, `cwd`; PreToolUse carries
//! `tool_name` as Claude Code names the tool (`Edit`, `Write`, `Bash`) with `tool_input` as
//! Copilot's own tool takes it (`path`, `file_text`; `command`); the answer is Claude Code's JSON
//! (`hookSpecificOutput.permissionDecision` with `permissionDecisionReason`, which the model reads
//! as "Denied by preToolUse hook: REASON"; `additionalContext`), except at SessionStart, whose
//! context reaches the model only as a top-level `additionalContext`. In prompt mode (`-p`)
//! SessionEnd fires once the run's turn completes.

use serde_json::{Map, Value, json};

use super::{Answer, Event, HookInput, Verdict, parse_object, str_field};

/// Tools that write the file named in their input (Claude Code's names, which Copilot CLI uses in
/// Claude-format hooks, and its own).
pub const EDIT_TOOLS: &[&str] = &[
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "edit",
    "create",
];

/// The shell tool, as Claude-format hooks name it and as Copilot CLI does.
pub const SHELL_TOOLS: &[&str] = &["Bash", "bash"];

/// Read a Copilot CLI hook payload (Claude Code's format).
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let tool = str_field(&v, "tool_name");
    let input = v.get("tool_input");
    let event = match event_name.as_str() {
        "SessionStart" => Event::SessionStart,
        "PreToolUse" if EDIT_TOOLS.contains(&tool) => {
            let file = ["path", "file_path", "notebook_path"]
                .iter()
                .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str))
                .filter(|s| !s.is_empty());
            Event::BeforeEdit(file.map(str::to_string).into_iter().collect())
        }
        "PreToolUse" if SHELL_TOOLS.contains(&tool) => {
            match input.and_then(|i| i.get("command")).and_then(Value::as_str) {
                Some(c) => Event::BeforeShell(c.to_string()),
                None => Event::Activity,
            }
        }
        "PreToolUse" | "PostToolUse" | "UserPromptSubmit" | "Stop" => Event::Activity,
        "SessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// Copilot CLI's output for a verdict: Claude Code's shape ("ask" asks the person
/// interactively; prompt mode denies it). At SessionStart Copilot CLI 1.0.102 gives the model
/// only a top-level `additionalContext` (its own hooks' shape), so the context goes there too.
pub fn render(event: &str, v: &Verdict) -> Answer {
    let a = super::claude::render_shape(event, v, true);
    match &v.context {
        Some(c) if event == "SessionStart" => {
            let mut out: Map<String, Value> = serde_json::from_str(&a.stdout).unwrap_or_default();
            out.insert("additionalContext".into(), json!(c));
            Answer::json(out)
        }
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_format_payloads_with_copilots_inputs() {
        let p = parse(r#"{"hook_event_name":"PreToolUse","session_id":"s","cwd":"/w","tool_name":"Write","tool_input":{"path":"/w/a","file_text":"x"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/a".into()]));
        assert_eq!(p.session_id, "s");
        let p = parse(r#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("ls".into()));
        let p = parse(r#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Read","tool_input":{"path":"/w/a"}}"#).unwrap();
        assert_eq!(p.event, Event::Activity);
        let p = parse(r#"{"hook_event_name":"SessionEnd","session_id":"s","reason":"complete"}"#)
            .unwrap();
        assert_eq!(p.event, Event::SessionEnd(Some("complete".into())));
        let a = render("PreToolUse", &Verdict::deny("held".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        let context = Verdict {
            context: Some("who holds what".into()),
            ..Verdict::default()
        };
        let v: Value = serde_json::from_str(&render("SessionStart", &context).stdout).unwrap();
        assert_eq!(v["additionalContext"], "who holds what");
    }
}
