//! Closed-world validation of the structured blocks in an artifact (a post's text). Pure.
//!
//! Canopy's grammar: a block is `[name]`, its content, and `[/name]`. Tags are
//! case-insensitive (`[COMPLETION]`); a block may sit on one line (`[completion] done [/completion]`),
//! its opening tag may carry the first line of content, and its closing tag may end the last
//! one. `input`, `input_card`, `telemetry` and `telemetry_card` are aliases of `input-card` and
//! `telemetry-card`. A bracketed word that is not a known block and is never closed (`[WIP]`)
//! is text; an unknown name that is closed (`[foo] ... [/foo]`) is an unknown block.
//! `[handoff]` names its recipient as `to:` (Canopy's grammar) or `next:` (CanopyKit's composer,
//! `next: @agent`): either is accepted. Text inside code fences is not read; markdown links (`[text](url)`), reference definitions
//! (`[x]: url`) and list checkboxes (`- [ ]`, `- [x]`) are not blocks.

use serde::Serialize;

/// Canopy's own blocks and the field each requires (conductor's reading of Canopy's formats).
pub const CANOPY_BLOCKS: [(&str, Option<&str>); 11] = [
    ("task", Some("title")),
    ("request", Some("title")),
    ("objective", Some("title")),
    ("handoff", Some("to")),
    // `title:` or `name:` (see `check_block`); its type defaults to `signal`.
    ("signal", None),
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

/// Canopy's aliases, and the block each names.
pub const ALIASES: [(&str, &str); 4] = [
    ("input", "input-card"),
    ("input_card", "input-card"),
    ("telemetry", "telemetry-card"),
    ("telemetry_card", "telemetry-card"),
];

/// The canonical name of a (lowercased) tag name.
fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, b)| b)
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

/// The tag at the start of `s`: (closing, lowercased name, its length in bytes).
fn tag_at(s: &str) -> Option<(bool, String, usize)> {
    let end = s.find(']')?;
    let inner = s.strip_prefix('[')?.get(..end - 1)?;
    let (closing, name) = match inner.strip_prefix('/') {
        Some(n) => (true, n),
        None => (false, inner),
    };
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    // `[x]` alone is a checkbox; `[text](url)` a link; `[x]: url` a reference definition.
    let next = s[end + 1..].chars().next();
    let name = name.to_ascii_lowercase();
    (ok && name != "x" && !matches!(next, Some('(') | Some(':'))).then_some((
        closing,
        name,
        end + 1,
    ))
}

/// The closing tag that ends `s`, if any: (lowercased name, where it starts).
fn closing_at_end(s: &str) -> Option<(String, usize)> {
    let at = s.rfind("[/")?;
    match tag_at(&s[at..]) {
        Some((true, name, len)) if at + len == s.len() => Some((name, at)),
        _ => None,
    }
}

/// Names closed somewhere outside code fences (an unknown name is a block only when closed).
fn closed_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("[/") {
            if let Some((true, name, _)) = tag_at(&rest[i..]) {
                out.push(name);
            }
            rest = &rest[i + 2..];
        }
    }
    out
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
    fn close(stack: &mut Vec<Open>, name: &str, n: usize, v: &mut Verdict, evidence: &mut bool) {
        match stack.pop() {
            Some(open) if open.name == name => {
                check_block(&open, v);
                if ["completion", "summary", "result", "evidence"].contains(&name)
                    && open.content.iter().any(|l| has_substance(l))
                {
                    *evidence = true;
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
        }
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut fenced = false;
    let mut evidence = false;
    let mut completion_at: Option<usize> = None;
    let closed = closed_names(text);
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
        let closed = &closed;
        let is_block = |name: &str| known(canonical(name)) || closed.iter().any(|c| c == name);
        let t = line.trim();
        match tag_at(t).filter(|(_, name, _)| is_block(name)) {
            Some((_, name, _)) if !known(canonical(&name)) => {
                if !unknown_seen.contains(&name) {
                    v.errors.push(format!(
                        "line {n}: unknown block `[{name}]` (valid blocks: {})",
                        valid_names()
                    ));
                    unknown_seen.push(name);
                }
            }
            Some((false, name, len)) => {
                let name = canonical(&name).to_string();
                if name == NESTED_TASKS && stack.last().is_none_or(|o| o.name != "objective") {
                    v.errors.push(format!(
                        "line {n}: `[tasks]` is only valid inside `[objective]`"
                    ));
                }
                v.blocks.push(name.clone());
                if name == "completion" {
                    completion_at = Some(n);
                }
                stack.push(Open {
                    name: name.clone(),
                    line: n,
                    content: Vec::new(),
                });
                // Inline: content on the tag's line, maybe the closing tag too.
                let rest = t[len..].trim();
                match closing_at_end(rest) {
                    Some((c, at)) if canonical(&c) == name => {
                        let inner = rest[..at].trim();
                        if !inner.is_empty() {
                            stack
                                .last_mut()
                                .expect("pushed")
                                .content
                                .push(inner.to_string());
                        }
                        close(&mut stack, &name, n, &mut v, &mut evidence);
                    }
                    _ if !rest.is_empty() => {
                        stack
                            .last_mut()
                            .expect("pushed")
                            .content
                            .push(rest.to_string());
                    }
                    _ => {}
                }
            }
            Some((true, name, _)) => close(&mut stack, canonical(&name), n, &mut v, &mut evidence),
            None => match closing_at_end(t) {
                // Content that ends with the closing tag of the open block.
                Some((c, at)) if stack.last().is_some_and(|o| o.name == canonical(&c)) => {
                    let inner = t[..at].trim();
                    if !inner.is_empty()
                        && let Some(top) = stack.last_mut()
                    {
                        top.content.push(inner.to_string());
                    }
                    close(&mut stack, canonical(&c), n, &mut v, &mut evidence);
                }
                _ => {
                    if let Some(top) = stack.last_mut() {
                        top.content.push(line.to_string());
                    }
                }
            },
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
    // `[handoff]` names its recipient as `to:` (Canopy) or `next:` (CanopyKit's composer).
    let handoff_next =
        open.name == "handoff" && field(&open.content, "next").is_some_and(|n| !n.is_empty());
    if let Some((_, Some(req))) = CANOPY_BLOCKS.iter().find(|(b, _)| *b == open.name)
        && field(&open.content, req).is_none_or(str::is_empty)
        && !handoff_next
    {
        v.errors.push(format!(
            "line {}: `[{}]` needs a non-empty `{req}:` field{}",
            open.line,
            open.name,
            if open.name == "handoff" {
                " (or `next:`)"
            } else {
                ""
            }
        ));
    }
    if open.name == "signal"
        && ["title", "name"]
            .iter()
            .all(|k| field(&open.content, k).is_none_or(str::is_empty))
    {
        v.errors.push(format!(
            "line {}: `[signal]` needs a non-empty `title:` or `name:` field (its `type:` defaults to signal)",
            open.line
        ));
    }
    if open.name == NESTED_TASKS {
        for l in &open.content {
            let t = l.trim();
            if t.is_empty() {
                continue;
            }
            if let Err(why) = task_line(t) {
                v.errors.push(format!(
                    "line {}: `[tasks]` line `{}`: {why}",
                    open.line,
                    crate::text::printable(t)
                ));
                break;
            }
        }
    }
}

/// A task line: `- ` or `* `, a checkbox (`[ ]`, `[x]`) and/or an assignee in brackets
/// (`[LeadAgent]`), then the task's text.
fn task_line(t: &str) -> Result<(), &'static str> {
    let Some(mut rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) else {
        return Err("a task is `- [ ] task`, `- [x] task` or `- [Assignee] task`");
    };
    let mut marks = 0;
    while let Some(inner) = rest.strip_prefix('[') {
        let Some(end) = inner.find(']') else { break };
        let m = &inner[..end];
        let checkbox = matches!(m, " " | "x" | "X");
        let assignee = !m.is_empty()
            && m.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '@'));
        if !checkbox && !assignee {
            return Err("the assignee in brackets is a name (letters, digits, `_ . - @`)");
        }
        marks += 1;
        rest = inner[end + 1..].trim_start();
    }
    if marks == 0 {
        return Err("a task is `- [ ] task`, `- [x] task` or `- [Assignee] task`");
    }
    if rest.trim().is_empty() {
        return Err("the task text after the checkbox or assignee is empty");
    }
    Ok(())
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

    fn errors(t: &str) -> Vec<String> {
        let v = validate(t);
        assert!(!v.valid, "{t:?} should be rejected");
        v.errors
    }

    #[test]
    fn canopy_rule_1_tags_are_case_insensitive_and_blocks_may_be_inline() {
        for t in [
            "[COMPLETION]\ntests pass\n[/COMPLETION]",
            "[completion] all 42 tests pass [/completion]",
            "[Completion] all 42 tests pass\n[/completion]",
            "[completion]\nall 42 tests pass [/Completion]",
            "[Task] title: ship it [/TASK]\n[summary] done [/summary]",
        ] {
            let v = validate(t);
            assert!(v.valid, "{t:?}: {v:?}");
        }
        assert_eq!(validate("[TASK] title: x [/TASK]").blocks, ["task"]);
        // The rules still hold for the inline and uppercase forms, naming the field.
        assert!(
            errors("[TASK] owner: x [/TASK]")
                .iter()
                .any(|e| e.contains("`[task]` needs a non-empty `title:`"))
        );
        assert!(
            errors("[COMPLETION] [/COMPLETION]")
                .iter()
                .any(|e| e.contains("`[completion]` needs evidence"))
        );
        assert!(
            errors("[COMPLETION] done")
                .iter()
                .any(|e| e.contains("never closed"))
        );
        // Prose that names a block mid-line is text.
        assert!(validate("use the [completion] block when done").valid);
    }

    #[test]
    fn canopy_rule_2_a_signal_needs_a_title_or_a_name_and_its_type_defaults() {
        assert!(validate("[signal]\ntitle: Deploy window\n[/signal]").valid);
        assert!(validate("[signal]\nname: freeze\n[/signal]").valid);
        assert!(validate("[signal]\ntitle: x\ntype: alert\n[/signal]").valid);
        let e = errors("[signal]\ntype: alert\n[/signal]");
        assert!(
            e.iter()
                .any(|e| e.contains("`[signal]` needs a non-empty `title:` or `name:`")),
            "{e:?}"
        );
        assert!(!validate("[signal]\ntitle:\n[/signal]").valid);
    }

    #[test]
    fn canopy_rule_3_input_and_telemetry_aliases_are_accepted() {
        for (alias, canon) in [
            ("input", "input-card"),
            ("input_card", "input-card"),
            ("telemetry", "telemetry-card"),
            ("TELEMETRY_CARD", "telemetry-card"),
        ] {
            let v = validate(&format!("[{alias}]\ntitle: CPU\n[/{alias}]"));
            assert!(v.valid, "{alias}: {v:?}");
            assert_eq!(v.blocks, [canon]);
            let e = errors(&format!("[{alias}]\n[/{alias}]"));
            assert!(
                e.iter()
                    .any(|e| e.contains(&format!("`[{canon}]` needs a non-empty `title:`"))),
                "{e:?}"
            );
        }
        // Opened with an alias, closed with the canonical name: one block.
        assert!(validate("[input]\ntitle: x\n[/input-card]").valid);
    }

    #[test]
    fn canopy_rule_4_task_lines_may_name_an_assignee() {
        let t = "[objective]\ntitle: Ship\n[tasks]\n- [LeadAgent] do X\n- [ ] [scout] check Y\n- [x] done Z\n* [ana.b] review\n[/tasks]\n[/objective]";
        let v = validate(t);
        assert!(v.valid, "{v:?}");
        let e = errors("[objective]\ntitle: Ship\n[tasks]\n- [LeadAgent]\n[/tasks]\n[/objective]");
        assert!(
            e.iter()
                .any(|e| e.contains("task text") && e.contains("empty")),
            "{e:?}"
        );
        let e =
            errors("[objective]\ntitle: Ship\n[tasks]\n- [two words] x\n[/tasks]\n[/objective]");
        assert!(e.iter().any(|e| e.contains("assignee")), "{e:?}");
        let e = errors("[objective]\ntitle: Ship\n[tasks]\njust prose\n[/tasks]\n[/objective]");
        assert!(e.iter().any(|e| e.contains("`- [Assignee] task`")), "{e:?}");
    }

    #[test]
    fn canopy_rule_5_an_unknown_tag_is_text_unless_closed() {
        let v = validate("[WIP] still on it\n[completion]\nhalf of the tests pass\n[/completion]");
        assert!(v.valid, "{v:?}");
        assert_eq!(v.blocks, ["completion"]);
        assert!(validate("[WIP]\nnotes to self").valid);
        let e = errors("[WIP]\nnotes\n[/WIP]");
        assert!(
            e.iter().any(|e| e.contains("unknown block `[wip]`")),
            "{e:?}"
        );
    }
}
