//! OpenAI Codex CLI: hook payloads and output.
//!
//! Built from the Codex hooks documentation (developers.openai.com/codex/hooks, the version of
//! 2026-05-18) and the hook schemas in openai/codex (`codex-rs/hooks/schema/generated/`,
//! `pre-tool-use.command.{input,output}.schema.json`), read 2026-11-23. Codex reads Claude Code's
//! JSON shape: `systemMessage`, `hookSpecificOutput.additionalContext`, and for PreToolUse
//! `hookSpecificOutput.permissionDecision: "deny"` with `permissionDecisionReason` ("ask" is
//! not honoured, so conductor denies and says what a person can do). Events: SessionStart,
//! PreToolUse, PostToolUse, UserPromptSubmit, Stop, and SessionEnd (Codex 0.147 and later: a
//! timeout of at most 3 s, root sessions only). Shell commands arrive as the `Bash` tool with
//! `tool_input.command`. File edits arrive as
//! the `apply_patch` tool with the patch text in `tool_input.command` (openai/codex#18391); older
//! builds ran `apply_patch` through the shell tool, which is recognised by its `*** Begin Patch`.

use serde_json::Value;

use super::{Answer, Event, HookInput, Verdict, parse_object, str_field};

/// Read a Codex CLI hook payload.
pub fn parse(text: &str) -> Result<HookInput, String> {
    let v = parse_object(text)?;
    let event_name = str_field(&v, "hook_event_name").to_string();
    let event = match event_name.as_str() {
        "SessionStart" => Event::SessionStart,
        "PreToolUse" => match (patch_text(&v), shell_command(&v)) {
            (Some(p), _) => Event::BeforeEdit(patch_files(p)),
            (None, Some(c)) => Event::BeforeShell(c),
            (None, None) => Event::Activity,
        },
        "PostToolUse" | "UserPromptSubmit" | "Stop" => Event::Activity,
        "SessionEnd" => Event::SessionEnd(Some(str_field(&v, "reason").to_string())),
        _ => Event::Ignore,
    };
    Ok(HookInput::new(&v, event_name, event))
}

/// The shell tool's command (`Bash`, as Codex names it for hooks; older names too). An argv
/// array is taken as `sh -c SCRIPT` when it is one, else joined with shell quoting.
fn shell_command(v: &Value) -> Option<String> {
    if !matches!(
        str_field(v, "tool_name"),
        "Bash" | "shell" | "exec_command" | "local_shell" | "container.exec"
    ) {
        return None;
    }
    match v.get("tool_input")?.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => {
            let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [sh, flag, script]
                    if flag.starts_with('-') && flag.contains('c') && sh.ends_with("sh") =>
                {
                    Some(script.to_string())
                }
                _ => Some(
                    words
                        .iter()
                        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            }
        }
        _ => None,
    }
}

/// The patch an `apply_patch` call (or a shell call running apply_patch) carries.
fn patch_text(v: &Value) -> Option<&str> {
    let tool = str_field(v, "tool_name");
    let input = v.get("tool_input")?;
    let text = match input {
        Value::String(s) => s.as_str(),
        _ => ["command", "patch", "input"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))?,
    };
    let is_patch_tool = matches!(tool, "apply_patch" | "Edit" | "Write");
    (is_patch_tool || text.contains("*** Begin Patch")).then_some(text)
}

/// Every file a patch touches: the paths of its `*** Add File:`, `*** Update File:`,
/// `*** Delete File:` and `*** Move to:` headers, in order, without duplicates.
pub fn patch_files(patch: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut files: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(path) = HEADERS.iter().find_map(|h| line.strip_prefix(h)) {
            let path = path.trim();
            if !path.is_empty() && !files.iter().any(|f| f == path) {
                files.push(path.to_string());
            }
        }
    }
    files
}

/// Codex CLI's output for a verdict (Claude Code's shape; "ask" becomes "deny").
pub fn render(event: &str, v: &Verdict) -> Answer {
    super::claude::render_shape(event, v, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_of_a_patch() {
        let patch = "*** Begin Patch\n*** Add File: src/new.rs\n+fn a() {}\n*** Update File: src/auth.rs\n*** Move to: src/login.rs\n@@\n-x\n+y\n*** Delete File: old.txt\n*** Update File: src/auth.rs\n*** End Patch\n";
        assert_eq!(
            patch_files(patch),
            vec!["src/new.rs", "src/auth.rs", "src/login.rs", "old.txt"]
        );
    }

    #[test]
    fn shell_apply_patch_and_other_tools() {
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\nEOF"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeEdit(vec!["a.txt".into()]));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("ls".into()));
        let p = parse(r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":["bash","-lc","echo x > a"]}}"#).unwrap();
        assert_eq!(p.event, Event::BeforeShell("echo x > a".into()));
        let p =
            parse(r#"{"session_id":"s","hook_event_name":"SessionEnd","reason":"other"}"#).unwrap();
        assert_eq!(p.event, Event::SessionEnd(Some("other".into())));
    }
}
