//! Pi (badlogic/pi-mono, the coding agent): the payloads conductor's Pi extension sends
//! (`shell/pi/conductor.ts`, installed by `conductor integrate pi`), and the answer it reads.
//!
//! Pi's extensions are TypeScript modules in Pi's process (`packages/coding-agent/docs/
//! extensions.md`): `pi.on("tool_call", (event, ctx) => ...)` may return `{block: true, reason}`
//! (the reason reaches the model), `tool_result` may change a result's content, and
//! `session_start`/`session_shutdown` bracket a session (`ctx.sessionManager.getSessionId()`,
//! `ctx.cwd`). The extension sends `{hook_event_name, session_id, cwd, tool_name, tool_input}` to
//! `conductor hook pi` with the event names `session_start`, `tool_call`, `tool_result` and
//! `session_shutdown`. Built-in tools: `edit` and `write` (`path`), `bash` (`command`). The
//! answer is OpenCode's ([`super::opencode::render`]).

use super::{Answer, Event, HookInput, Verdict, parse_object, str_field};

/// Read a payload of conductor's Pi extension.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "session_start" => Event::SessionStart,
        "tool_call" => super::opencode::tool_event(&v),
        "tool_result" | "agent_end" => Event::Activity,
        "session_shutdown" => {
            Event::SessionEnd(Some(str_field(&v, "reason").to_string()).filter(|r| !r.is_empty()))
        }
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// The extension's answer (the same shape as OpenCode's plugin reads).
pub fn render(event: &str, v: &Verdict) -> Answer {
    super::opencode::render(event, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_and_events() {
        let p = parse(r#"{"hook_event_name":"tool_call","session_id":"s","tool_name":"write","tool_input":{"path":"a.rs","content":"x"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["a.rs".into()]));
        let p = parse(r#"{"hook_event_name":"session_shutdown","session_id":"s","reason":"quit"}"#)
            .unwrap();
        assert_eq!(p.event, Event::SessionEnd(Some("quit".into())));
    }
}
