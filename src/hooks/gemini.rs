//! Google Gemini CLI: hook payloads and output.
//!
//! Built from the Gemini CLI hooks reference (geminicli.com/docs/hooks/reference, the file
//! `docs/hooks/reference.md` of google-gemini/gemini-cli at commit 06c0d81), read 2026-11-23.
//! Payloads carry `session_id`, `cwd`, `hook_event_name`; BeforeTool adds `tool_name` and
//! `tool_input` (`write_file` and `replace` take `file_path`). On exit 0 stdout must be one JSON
//! object and nothing else: `decision: "deny"` with `reason` refuses a tool (the reason goes to the
//! model), `systemMessage` is shown to the person, SessionStart and AfterTool take
//! `hookSpecificOutput.additionalContext`. There is no "ask": conductor denies instead. SessionEnd
//! is best effort (the CLI does not wait for it).

use serde_json::{Map, Value, json};

use super::{Answer, Event, HookInput, Permission, Verdict, parse_object, str_field};

/// Built-in tools that write the file named in `file_path`.
pub const EDIT_TOOLS: &[&str] = &["write_file", "replace"];

/// The built-in shell tool (`tool_input.command`).
pub const SHELL_TOOL: &str = "run_shell_command";

/// Read a Gemini CLI hook payload.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "SessionStart" => Event::SessionStart,
        "BeforeTool" if EDIT_TOOLS.contains(&str_field(&v, "tool_name")) => {
            let input = v.get("tool_input").cloned().unwrap_or(Value::Null);
            let file = ["file_path", "absolute_path", "path"]
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str))
                .filter(|s| !s.is_empty());
            Event::BeforeEdit(file.map(str::to_string).into_iter().collect())
        }
        "BeforeTool" if str_field(&v, "tool_name") == SHELL_TOOL => match v
            .get("tool_input")
            .and_then(|i| i.get("command"))
            .and_then(Value::as_str)
        {
            Some(c) => Event::BeforeShell(c.to_string()),
            None => Event::Activity,
        },
        "AfterTool" => Event::AfterTool,
        "BeforeTool" | "BeforeAgent" | "AfterAgent" => Event::Activity,
        "SessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// Gemini CLI's output for a verdict: always exactly one JSON object on stdout.
pub fn render(event: &str, v: &Verdict) -> Answer {
    let mut out = Map::new();
    if event == "BeforeTool" && v.permission != Permission::Allow {
        out.insert("decision".into(), json!("deny"));
        out.insert(
            "reason".into(),
            json!(v.reason.as_deref().unwrap_or("conductor refused the edit")),
        );
    }
    if let Some(n) = &v.notice {
        out.insert("systemMessage".into(), json!(n));
    }
    if let Some(c) = v
        .context
        .as_ref()
        .filter(|_| matches!(event, "SessionStart" | "AfterTool" | "BeforeAgent"))
    {
        out.insert(
            "hookSpecificOutput".into(),
            json!({"hookEventName": event, "additionalContext": c}),
        );
    }
    Answer::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_is_always_json() {
        assert_eq!(render("BeforeTool", &Verdict::default()).stdout, "{}");
        let a = render("BeforeTool", &Verdict::ask("dead holder".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(v["decision"], "deny");
    }
}
