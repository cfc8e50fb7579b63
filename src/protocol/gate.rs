//! The priority gate, exactly in the protocol's order, as a pure function of what was loaded:
//!
//! 1. A P1 task always passes.
//! 2. If `sprint.json` has focus P1, any other priority is blocked.
//! 3. If the task matches an item of the sprint's `explicitly_deferred`, it is blocked. A task
//!    matches a deferred item when it contains every significant word of that item.
//! 4. If north-star priorities or project priorities exist, the task must align with one of
//!    them: it aligns when it shares at least one significant word with a priority item.
//!    With neither source, the task passes.
//!
//! Significant words: split on anything that is not a letter or digit, lowercased, words shorter
//! than three characters and common filler words dropped, and a light suffix strip (`-ing`, `-ed`,
//! a plural `-s`) so `refactoring` matches `refactor` and `features` matches `feature`.

use super::types::{Priority, Sprint};

/// The gate's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Blocked {
        /// The spec's `message`.
        message: String,
        /// A short reason recorded as a drift warning when the gate is overridden.
        drift: String,
        /// The spec's `options`.
        options: Vec<String>,
    },
}

/// Everything the gate looks at besides the task itself.
#[derive(Clone, Debug, Default)]
pub struct GateInputs {
    pub sprint: Option<Sprint>,
    /// List items from the north-stars file, when it exists.
    pub north_stars: Option<Vec<String>>,
    /// Where the north stars came from, for messages.
    pub north_stars_path: Option<String>,
    /// Task texts from the project's priority source, when configured.
    pub project_priorities: Option<Vec<String>>,
}

/// Run the gate for a task.
pub fn evaluate(task: &str, priority: Priority, inputs: &GateInputs) -> Verdict {
    if priority == Priority::P1 {
        return Verdict::Pass;
    }
    let override_opt = "Use --override 'justification' to proceed anyway".to_string();
    if let Some(sprint) = &inputs.sprint {
        if sprint.focus == Priority::P1 {
            return Verdict::Blocked {
                message: format!(
                    "Task priority {priority} doesn't align with current P1 sprint focus."
                ),
                drift: format!("{priority} task during P1 sprint focus"),
                options: vec![override_opt, "Change to a P1 task instead".into()],
            };
        }
        let task_words = words(task);
        for item in sprint.explicitly_deferred.iter().flatten() {
            let item_words = words(item);
            if !item_words.is_empty() && item_words.iter().all(|w| task_words.contains(w)) {
                return Verdict::Blocked {
                    message: format!(
                        "Task matches \"{item}\", which sprint {} explicitly defers.",
                        sprint.sprint_name
                    ),
                    drift: format!("{priority} task on deferred work \"{item}\""),
                    options: vec![override_opt, "Pick a task the sprint does not defer".into()],
                };
            }
        }
    }
    let sources: Vec<&String> = inputs
        .north_stars
        .iter()
        .flatten()
        .chain(inputs.project_priorities.iter().flatten())
        .collect();
    if inputs.north_stars.is_none() && inputs.project_priorities.is_none() {
        return Verdict::Pass;
    }
    if sources.iter().any(|p| aligns(task, p)) {
        return Verdict::Pass;
    }
    let shown: Vec<&str> = sources.iter().take(3).map(|s| s.as_str()).collect();
    let current = if shown.is_empty() {
        "none listed".to_string()
    } else {
        shown.join("; ")
    };
    Verdict::Blocked {
        message: format!(
            "Task doesn't align with north-stars priorities (current priorities: {current})."
        ),
        drift: format!("{priority} task outside the north-stars priorities"),
        options: vec![
            override_opt,
            "Name the priority this task serves in its description".into(),
            "Change to a P1 task instead".into(),
        ],
    }
}

/// True when `task` shares a significant word with `priority_item`.
pub fn aligns(task: &str, priority_item: &str) -> bool {
    let t = words(task);
    words(priority_item).iter().any(|w| t.contains(w))
}

const FILLER: &[&str] = &[
    "the", "and", "for", "with", "into", "from", "that", "this", "our", "are", "was", "but", "not",
    "all", "any", "can", "its", "add", "fix", "make", "update", "improve", "work", "task", "new",
    "use", "via",
];

/// The significant words of a text, as the gate compares them.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !FILLER.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

fn stem(w: &str) -> String {
    let n = w.chars().count();
    if n > 5 && w.ends_with("ing") {
        w[..w.len() - 3].to_string()
    } else if n > 4 && w.ends_with("ed") {
        w[..w.len() - 2].to_string()
    } else if n > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

/// The priority list items of a north-stars markdown file: the bullet or numbered items under
/// the first heading that mentions "priorit", or every list item if no heading does.
pub fn north_star_items(markdown: &str) -> Vec<String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let heading_level = |l: &str| {
        let t = l.trim_start();
        let n = t.chars().take_while(|c| *c == '#').count();
        (n > 0 && t[n..].starts_with(' ')).then_some(n)
    };
    let section = lines
        .iter()
        .position(|l| heading_level(l).is_some() && l.to_lowercase().contains("priorit"));
    let range: &[&str] = match section {
        Some(start) => {
            let level = heading_level(lines[start]).unwrap_or(1);
            let end = lines[start + 1..]
                .iter()
                .position(|l| heading_level(l).is_some_and(|n| n <= level))
                .map_or(lines.len(), |p| start + 1 + p);
            &lines[start + 1..end]
        }
        None => &lines,
    };
    range.iter().filter_map(|l| list_item(l)).collect()
}

fn list_item(line: &str) -> Option<String> {
    let t = line.trim_start();
    let rest = if let Some(r) = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("+ "))
    {
        r
    } else {
        let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
        let r = &t[digits..];
        if digits == 0 || !(r.starts_with(". ") || r.starts_with(") ")) {
            return None;
        }
        &r[2..]
    };
    let rest = rest.trim_start_matches("[ ] ").trim_start_matches("[x] ");
    let clean: String = rest
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`'))
        .collect();
    let clean = clean.trim();
    (!clean.is_empty()).then(|| clean.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sprint(focus: Priority, deferred: &[&str]) -> Sprint {
        Sprint {
            sprint_name: "2026-W03".into(),
            focus,
            start_date: None,
            end_date: None,
            priorities: None,
            explicitly_deferred: Some(deferred.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn p1_always_passes() {
        let inputs = GateInputs {
            sprint: Some(sprint(Priority::P1, &["Fix auth"])),
            ..Default::default()
        };
        assert_eq!(evaluate("Fix auth", Priority::P1, &inputs), Verdict::Pass);
    }

    #[test]
    fn p1_focus_blocks_everything_else_with_the_spec_message() {
        let inputs = GateInputs {
            sprint: Some(sprint(Priority::P1, &[])),
            ..Default::default()
        };
        let Verdict::Blocked {
            message,
            options,
            drift,
        } = evaluate("x", Priority::P3, &inputs)
        else {
            panic!()
        };
        assert_eq!(
            message,
            "Task priority P3 doesn't align with current P1 sprint focus."
        );
        assert_eq!(
            options,
            [
                "Use --override 'justification' to proceed anyway",
                "Change to a P1 task instead"
            ]
        );
        assert_eq!(drift, "P3 task during P1 sprint focus");
        assert!(matches!(
            evaluate("x", Priority::P2, &inputs),
            Verdict::Blocked { .. }
        ));
    }

    #[test]
    fn deferred_items_need_all_their_words() {
        let inputs = GateInputs {
            sprint: Some(sprint(
                Priority::P2,
                &["Documentation improvements", "Refactoring"],
            )),
            ..Default::default()
        };
        assert!(matches!(
            evaluate("Refactor the auth module", Priority::P2, &inputs),
            Verdict::Blocked { .. }
        ));
        assert!(matches!(
            evaluate("Documentation improvements for API", Priority::P3, &inputs),
            Verdict::Blocked { .. }
        ));
        assert_eq!(
            evaluate(
                "Write documentation for lead scoring",
                Priority::P2,
                &inputs
            ),
            Verdict::Pass
        );
    }

    #[test]
    fn north_stars_alignment() {
        let md = "# Me\n- unrelated bullet\n## Priority hierarchy\n1. **Pitchello revenue** features\n2. Mission Control lead scoring\n## Later\n- Knitting\n";
        let items = north_star_items(md);
        assert_eq!(
            items,
            ["Pitchello revenue features", "Mission Control lead scoring"]
        );
        let inputs = GateInputs {
            north_stars: Some(items),
            ..Default::default()
        };
        assert_eq!(
            evaluate("Add revenue dashboard", Priority::P2, &inputs),
            Verdict::Pass
        );
        assert_eq!(
            evaluate("Tune lead-scoring weights", Priority::P3, &inputs),
            Verdict::Pass
        );
        assert!(matches!(
            evaluate("Knitting patterns", Priority::P2, &inputs),
            Verdict::Blocked { .. }
        ));
        assert!(matches!(
            evaluate("Fix the thing", Priority::P2, &inputs),
            Verdict::Blocked { .. }
        ));
    }

    #[test]
    fn no_sources_pass() {
        assert_eq!(
            evaluate("anything", Priority::P3, &GateInputs::default()),
            Verdict::Pass
        );
    }
}
