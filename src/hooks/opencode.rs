//! OpenCode: the payloads conductor's OpenCode plugin sends (`shell/opencode/conductor.js`,
//! installed by `conductor integrate opencode`), and the answer it reads.
//!
//! OpenCode has no command hooks; its plugins are JS modules run in its own process (plugin API
//! of sst/opencode, `@opencode-ai/plugin`: `tool.execute.before(input: {tool, sessionID,
//! callID}, output: {args})`, where a thrown error refuses the call and its message reaches the
//! model; `tool.execute.after(input, output: {title, output, metadata})`; session events through
//! the generic `event` hook). The plugin turns each into one JSON object on the stdin of
//! `conductor hook opencode`: `{hook_event_name, session_id, cwd, tool_name, tool_input}`, with
//! the event names `session.created`, `tool.execute.before`, `tool.execute.after`, `session.idle`,
//! `session.deleted`, and `exit` (the OpenCode process ends). Built-in tools: `edit`, `write`,
//! `multiedit` (`filePath`), `patch`/`apply_patch` (`patchText`, the `*** Begin Patch` format),
//! `bash` (`command`).

use serde_json::{Map, Value, json};

use super::{Answer, Event, HookInput, Permission, Verdict, parse_object, str_field};

/// Read a payload of conductor's OpenCode plugin.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "session.created" => Event::SessionStart,
        "tool.execute.before" => tool_event(&v),
        "tool.execute.after" | "session.idle" => Event::Activity,
        "session.deleted" | "exit" => Event::SessionEnd(Some(event_name.clone())),
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// What a tool call of OpenCode's (or Pi's: `path`) built-in tools writes.
pub(crate) fn tool_event(v: &Value) -> Event {
    let input = v.get("tool_input").cloned().unwrap_or(Value::Null);
    let s = |k: &str| {
        input
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match str_field(v, "tool_name") {
        "edit" | "write" | "multiedit" => Event::BeforeEdit(
            s("filePath")
                .or_else(|| s("path"))
                .or_else(|| s("file_path"))
                .map(str::to_string)
                .into_iter()
                .collect(),
        ),
        "patch" | "apply_patch" => match s("patchText").or_else(|| s("patch")) {
            Some(p) => Event::BeforeEdit(super::codex::patch_files(p)),
            None => Event::Activity,
        },
        "bash" => match s("command") {
            Some(c) => Event::BeforeShell(c.to_string()),
            None => Event::Activity,
        },
        _ => Event::Activity,
    }
}

/// The plugin's answer: `{decision: "allow"|"deny"|"ask", reason?, context?, notice?}`.
/// `context` is for the model (the plugin appends it to the tool's output), `notice` for the
/// person.
pub fn render(_event: &str, v: &Verdict) -> Answer {
    let mut out = Map::new();
    let decision = match v.permission {
        Permission::Allow => "allow",
        Permission::Deny => "deny",
        Permission::Ask => "ask",
    };
    out.insert("decision".into(), json!(decision));
    if let Some(r) = &v.reason {
        out.insert("reason".into(), json!(r));
    }
    if let Some(c) = &v.context {
        out.insert("context".into(), json!(c));
    }
    if let Some(n) = &v.notice {
        out.insert("notice".into(), json!(n));
    }
    Answer::json(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_and_events() {
        let p = parse(r#"{"hook_event_name":"tool.execute.before","session_id":"s","tool_name":"edit","tool_input":{"filePath":"/w/a.rs"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["/w/a.rs".into()]));
        let p = parse(r#"{"hook_event_name":"tool.execute.before","session_id":"s","tool_name":"bash","tool_input":{"command":"rm x"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("rm x".into()));
        let p = parse(r#"{"hook_event_name":"session.deleted","session_id":"s"}"#).unwrap();
        assert!(matches!(p.event, Event::SessionEnd(_)));
        let a = render("tool.execute.before", &Verdict::deny("held".into()));
        let v: Value = serde_json::from_str(&a.stdout).unwrap();
        assert_eq!(
            (v["decision"].as_str(), v["reason"].as_str()),
            (Some("deny"), Some("held"))
        );
    }
}
