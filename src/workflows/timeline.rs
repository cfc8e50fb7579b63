//! How a session's states read to people: a state's title, the timeline (which states are done,
//! which is current), and its one-line breadcrumbs. Used in workers' prompts and by every face.

use super::{RunOutcome, Session};

/// A state's name as the timeline shows it: `planning` → `Planning`.
pub fn title(state: &str) -> String {
    let s = state.replace(['_', '-'], " ");
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// The timeline marks: done, current, not yet.
pub fn timeline(s: &Session) -> Vec<(String, &'static str)> {
    s.template
        .states
        .keys()
        .map(|name| {
            let current = s.current_state.as_deref() == Some(name.as_str());
            let done = s
                .runs
                .iter()
                .any(|r| &r.state == name && r.outcome == RunOutcome::Transitioned);
            let mark = if current && !s.status.is_finished() {
                "current"
            } else if done {
                "done"
            } else {
                "pending"
            };
            (name.clone(), mark)
        })
        .collect()
}

/// The timeline as the spec draws it.
pub fn breadcrumbs(s: &Session) -> String {
    timeline(s)
        .iter()
        .map(|(n, m)| {
            let sym = match *m {
                "done" => "✓",
                "current" => "●",
                _ => " ",
            };
            format!("{} [{sym}]", title(n))
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}
