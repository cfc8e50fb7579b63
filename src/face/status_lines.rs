//! The lines `status`, `top` and the dashboard show about sessions beside the spec's object:
//! edits nobody claimed, landing branches, each session's enforcement, the claims by repository,
//! and the files changed in several worktrees.

use serde_json::json;

use super::display_path;
use conductor::integrations::verdicts::Enforcement;
use conductor::protocol::repositories;
use conductor::time::Timestamp;

/// The unclaimed edits as lines: the file, how long ago, how often, the sessions there.
pub fn unclaimed_lines(
    edits: &[conductor::protocol::unclaimed::UnclaimedEdit],
    now: Timestamp,
    cwd: Option<&std::path::Path>,
) -> Vec<String> {
    edits
        .iter()
        .map(|e| {
            let times = if e.count > 1 {
                format!(" ({} times)", e.count)
            } else {
                String::new()
            };
            format!(
                "{} · {}m ago{times} · claimed by no session; live there: {}",
                display_path(&e.path, cwd),
                e.at.minutes_until(now),
                e.sessions.join(", ")
            )
        })
        .collect()
}

/// The landing branches as status and the dashboard show them.
pub fn landing_json(landing: &[conductor::protocol::landing::Landing]) -> serde_json::Value {
    landing
        .iter()
        .map(|l| {
            json!({"branch": l.branch, "base": l.base, "worktree": l.worktree.trim_end_matches('/'),
                   "instance_id": l.instance_id, "task": l.task, "since": l.since, "files": l.files})
        })
        .collect()
}

/// One line naming a session's agent, its version and whether its hooks are proven to bite.
pub fn enforcement_line(i: &conductor::protocol::Instance, e: &Enforcement) -> String {
    let agent = i.agent.as_deref().unwrap_or("agent");
    let who = match &i.agent_version {
        Some(v) => format!("{agent} {v}"),
        None => agent.to_string(),
    };
    match e {
        Enforcement::Enforced => format!("{who} · enforced"),
        // (No live check saw this version here yet.)
        Enforcement::Unverified => {
            format!("{who} · unverified: `conductor integrate {agent}` checks it")
        }
        Enforcement::Unenforced(why) => format!("{who} · UNENFORCED: {why}"),
    }
}

/// The claims of each repository with several worktrees, under the worktree they were made in
/// (its branch, the sessions working there), relative to its root.
pub fn repository_lines(groups: &[repositories::RepositoryClaims]) -> Vec<String> {
    let mut out = vec!["By repository:".to_string()];
    for r in groups.iter().filter(|r| r.worktree_count > 1) {
        out.push(fit(
            &format!("  {} ({} worktrees)", r.repository, r.worktree_count),
            WIDTH,
        ));
        for w in &r.worktrees {
            let mut head = format!(
                "    {} · branch {}",
                w.worktree,
                w.branch.as_deref().unwrap_or("unknown")
            );
            if !w.instances.is_empty() {
                head.push_str(&format!(" · {}", w.instances.join(", ")));
            }
            out.push(fit(&head, WIDTH));
            for c in &w.claims {
                // The holder is named unless it is the one session working there.
                let own = w.instances.len() == 1 && w.instances[0] == c.held_by;
                let line = if own {
                    format!("      {}", c.path)
                } else {
                    format!("      {}  held by {}", c.path, c.held_by)
                };
                out.push(fit(&line, WIDTH));
            }
        }
    }
    out
}

/// The text report's width.
pub const WIDTH: usize = 80;

/// Cut a line to `width` characters, marking the cut with `…`; control characters escaped.
pub fn fit(s: &str, width: usize) -> String {
    // Control characters (a newline or an escape sequence in a task) must not break the
    // dashboard's lines or reach the terminal raw.
    let escaped: String;
    let s = if s.chars().any(char::is_control) {
        escaped = s
            .chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        escaped.as_str()
    } else {
        s
    };
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// One line per file changed in several worktrees: the file, each worktree with its branch
/// and sessions, and the pairs git predicts to conflict.
pub fn overlap_lines(reports: &[conductor::protocol::overlaps::Report]) -> Vec<String> {
    let mut out = Vec::new();
    for r in reports {
        let name = |path: &str| match r.worktrees.iter().find(|t| t.path == path) {
            Some(t) if t.sessions.is_empty() => format!("{path} ({})", t.branch),
            Some(t) => format!("{path} ({}; {})", t.branch, t.sessions.join(", ")),
            None => path.to_string(),
        };
        for o in &r.overlaps {
            let pairs = |label: &str, pairs: &[[String; 2]]| {
                if pairs.is_empty() {
                    return String::new();
                }
                format!(
                    " · {label}: {}",
                    pairs
                        .iter()
                        .map(|[a, b]| format!("{a} + {b}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let conflict = pairs("CONFLICT predicted", &o.conflicts)
                + &pairs("conflict unknown", &o.unpredicted);
            out.push(format!(
                "{} in {}{conflict}",
                o.file,
                o.worktrees
                    .iter()
                    .map(|w| name(w))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    out
}

/// The files worktree `path` changed that other worktrees changed too, one line each, naming
/// the others with their branches and the pairs with `path` git predicts to conflict.
pub fn overlaps_of_worktree(r: &conductor::protocol::overlaps::Report, path: &str) -> Vec<String> {
    let branch = |p: &str| {
        r.worktrees
            .iter()
            .find(|t| t.path == p)
            .map(|t| format!("{p} ({})", t.branch))
            .unwrap_or_else(|| p.to_string())
    };
    r.overlaps
        .iter()
        .filter(|o| o.worktrees.iter().any(|w| w == path))
        .map(|o| {
            let others: Vec<String> = o
                .worktrees
                .iter()
                .filter(|w| *w != path)
                .map(|w| branch(w))
                .collect();
            let with_path =
                |pairs: &[[String; 2]]| pairs.iter().any(|[a, b]| a == path || b == path);
            format!(
                "{} also changed in {}{}",
                o.file,
                others.join(", "),
                if with_path(&o.conflicts) {
                    " · CONFLICT predicted"
                } else if with_path(&o.unpredicted) {
                    " · conflict unknown"
                } else {
                    ""
                }
            )
        })
        .collect()
}
