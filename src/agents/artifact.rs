//! Closed-world validation of the structured blocks in an artifact (a post's text). Pure.
//!
//! A block is a line holding only `[name]`, its content, and a line holding only `[/name]`.
//! Text inside code fences is not read; markdown links (`[text](url)`), reference definitions
//! (`[x]: url`) and list checkboxes (`- [ ]`, `- [x]`) are not blocks.

use serde::Serialize;

/// Canopy's own blocks and the field each requires (conductor's reading of Canopy's formats).
pub const CANOPY_BLOCKS: [(&str, Option<&str>); 11] = [
    ("task", Some("title")),
    ("request", Some("title")),
    ("objective", Some("title")),
    ("handoff", Some("to")),
    ("signal", Some("type")),
    ("circle", Some("topic")),
    ("contract", Some("title")),
    ("skill", Some("name")),
    ("poll", Some("question")),
    ("input-card", Some("title")),
    ("telemetry-card", Some("title")),
];

/// The runtime's evidence blocks (no required field).
pub const EVIDENCE_BLOCKS: [&str; 8] = [
    "completion",
    "error",
    "evidence",
    "files_changed",
    "notes",
    "plan",
    "result",
    "summary",
];

/// `[tasks]`, valid only nested in `[objective]`.
pub const NESTED_TASKS: &str = "tasks";

/// What validation found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdict {
    pub valid: bool,
    /// The blocks found, in order.
    pub blocks: Vec<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

fn known(name: &str) -> bool {
    CANOPY_BLOCKS.iter().any(|(b, _)| *b == name)
        || EVIDENCE_BLOCKS.contains(&name)
        || name == NESTED_TASKS
}

/// Every valid block name, for messages.
pub fn valid_names() -> String {
    let mut v: Vec<&str> = CANOPY_BLOCKS.iter().map(|(b, _)| *b).collect();
    v.extend(EVIDENCE_BLOCKS);
    v.push("tasks (inside objective)");
    v.join(", ")
}

fn tag(line: &str) -> Option<(bool, &str)> {
    let t = line.trim();
    let inner = t.strip_prefix('[')?.strip_suffix(']')?;
    let (closing, name) = match inner.strip_prefix('/') {
        Some(n) => (true, n),
        None => (false, inner),
    };
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    // `[x]` alone is a checkbox, not a block.
    (ok && name != "x").then_some((closing, name))
}

struct Open {
    name: String,
    line: usize,
    content: Vec<String>,
}

/// Validate an artifact.
pub fn validate(text: &str) -> Verdict {
    let mut v = Verdict::default();
    if text.trim().is_empty() {
        v.errors.push("the artifact is empty".into());
        return v;
    }
    let mut unknown_seen: Vec<String> = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut fenced = false;
    let mut evidence = false;
    let mut completion_at: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            if let Some(top) = stack.last_mut() {
                top.content.push(line.to_string());
            }
            continue;
        }
        if fenced {
            if let Some(top) = stack.last_mut() {
                top.content.push(line.to_string());
            }
            continue;
        }
        match tag(line) {
            Some((_, name)) if !known(name) => {
                if !unknown_seen.iter().any(|u| u == name) {
                    unknown_seen.push(name.to_string());
                    v.errors.push(format!(
                        "line {n}: unknown block `[{name}]` (valid blocks: {})",
                        valid_names()
                    ));
                }
            }
            Some((false, name)) => {
                if name == NESTED_TASKS && stack.last().is_none_or(|o| o.name != "objective") {
                    v.errors.push(format!(
                        "line {n}: `[tasks]` is only valid inside `[objective]`"
                    ));
                }
                v.blocks.push(name.to_string());
                if name == "completion" {
                    completion_at = Some(n);
                }
                stack.push(Open {
                    name: name.to_string(),
                    line: n,
                    content: Vec::new(),
                });
            }
            Some((true, name)) => match stack.pop() {
                Some(open) if open.name == name => {
                    check_block(&open, &mut v);
                    if ["completion", "summary", "result", "evidence"].contains(&name)
                        && open.content.iter().any(|l| has_substance(l))
                    {
                        evidence = true;
                    }
                    if let Some(parent) = stack.last_mut() {
                        parent.content.push(String::new());
                    }
                }
                Some(open) => {
                    v.errors.push(format!(
                        "line {n}: `[/{name}]` closes `[{}]` opened on line {}",
                        open.name, open.line
                    ));
                    stack.push(open);
                }
                None => v
                    .errors
                    .push(format!("line {n}: `[/{name}]` closes no open block")),
            },
            None => {
                if let Some(top) = stack.last_mut() {
                    top.content.push(line.to_string());
                }
            }
        }
    }
    for open in stack.iter().rev() {
        v.errors.push(format!(
            "line {}: `[{}]` is never closed (add `[/{}]`)",
            open.line, open.name, open.name
        ));
    }
    if fenced {
        v.warnings.push("a code fence is never closed".into());
    }
    if let Some(at) = completion_at
        && !evidence
    {
        v.errors.push(format!(
            "line {at}: `[completion]` needs evidence: non-empty text in [completion], [summary], [result] or [evidence]"
        ));
    }
    if v.blocks.is_empty() {
        v.warnings.push("no structured blocks (plain text)".into());
    }
    v.valid = v.errors.is_empty();
    v
}

fn has_substance(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() {
        return false;
    }
    // `key:` with nothing after it is not evidence.
    match t.split_once(':') {
        Some((_, rest)) if !t.contains(' ') || rest.trim().is_empty() => !rest.trim().is_empty(),
        _ => true,
    }
}

fn field<'a>(content: &'a [String], key: &str) -> Option<&'a str> {
    content.iter().find_map(|l| {
        let (k, v) = l
            .trim()
            .trim_start_matches(['-', '*'])
            .trim()
            .split_once(':')?;
        (k.trim().eq_ignore_ascii_case(key)).then_some(v.trim())
    })
}

fn check_block(open: &Open, v: &mut Verdict) {
    if let Some((_, Some(req))) = CANOPY_BLOCKS.iter().find(|(b, _)| *b == open.name)
        && field(&open.content, req).is_none_or(str::is_empty)
    {
        v.errors.push(format!(
            "line {}: `[{}]` needs a non-empty `{req}:` field",
            open.line, open.name
        ));
    }
    if open.name == NESTED_TASKS {
        for l in &open.content {
            let t = l.trim();
            if t.is_empty() {
                continue;
            }
            let ok = ["- [ ] ", "- [x] ", "- [X] ", "* [ ] ", "* [x] "]
                .iter()
                .any(|p| t.starts_with(p) && t.len() > p.len());
            if !ok {
                v.errors.push(format!(
                    "line {}: `[tasks]` holds only `- [ ] task` or `- [x] task` lines, not `{}`",
                    open.line,
                    crate::text::printable(t)
                ));
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_canopys_own_blocks() {
        let t = "Intro with a [link](http://x) and\n- [ ] a checkbox\n[objective]\ntitle: Ship\n[tasks]\n- [ ] one\n- [x] two\n[/tasks]\n[/objective]\n[poll]\nquestion: Lunch?\n[/poll]\n[input-card]\ntitle: Name\n[/input-card]\n[telemetry-card]\ntitle: CPU\n[/telemetry-card]\n```\n[bogus]\n```\n[completion]\nDone: tests pass\n[/completion]";
        let v = validate(t);
        assert!(v.valid, "{v:?}");
        assert_eq!(
            v.blocks,
            [
                "objective",
                "tasks",
                "poll",
                "input-card",
                "telemetry-card",
                "completion"
            ]
        );
    }

    #[test]
    fn rejects_unknown_once_and_missing_evidence() {
        let v = validate(
            "[foo]\n[/foo]\n[foo]\n[/foo]\n[completion]\n[/completion]\n[task]\nowner: x\n[/task]",
        );
        assert!(!v.valid);
        assert_eq!(
            v.errors
                .iter()
                .filter(|e| e.contains("unknown block `[foo]`"))
                .count(),
            1
        );
        assert!(v.errors.iter().any(|e| e.contains("needs evidence")));
        assert!(
            v.errors
                .iter()
                .any(|e| e.contains("`[task]` needs a non-empty `title:`"))
        );
        assert!(!validate("[tasks]\n- [ ] a\n[/tasks]").valid);
        assert!(!validate("[result]\nok").valid);
        assert!(!validate("  \n").valid);
    }
}
