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

/// What a session spent in one state: its runs, their time, tokens and cost.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StateTotals {
    pub state: String,
    pub runs: usize,
    pub elapsed_secs: u64,
    pub tokens: u64,
    pub cost_usd: f64,
}

/// What the session spent in each of its template's states, in the template's order (a run
/// still going counts until `now`).
pub fn per_state(s: &Session, now: crate::time::Timestamp) -> Vec<StateTotals> {
    let mut per_state = Vec::new();
    for name in s.template.states.keys() {
        let runs: Vec<_> = s.runs.iter().filter(|r| &r.state == name).collect();
        let secs: u64 = runs
            .iter()
            .map(|r| {
                r.elapsed_secs
                    .unwrap_or_else(|| r.started_at.seconds_until(now))
            })
            .sum();
        let tokens: u64 = runs.iter().map(|r| r.tokens).sum();
        // Plus 0.0: an empty f64 sum is -0.0, which prints as `$-0.0000`.
        let cost: f64 = runs.iter().map(|r| r.cost_usd).sum::<f64>() + 0.0;
        per_state.push(StateTotals {
            state: name.clone(),
            runs: runs.len(),
            elapsed_secs: secs,
            tokens,
            cost_usd: cost,
        });
    }
    per_state
}

/// The files (at most 200) modified since the session's current state began (none once it is
/// finished).
pub fn modified_in_current_state(s: &Session) -> Vec<String> {
    let current_run = s
        .runs
        .iter()
        .rev()
        .find(|r| Some(&r.state) == s.current_state.as_ref());
    match current_run {
        Some(r) if !s.status.is_finished() => {
            super::baseline::modified_since(&r.baseline, std::path::Path::new(&s.project_dir), 200)
        }
        _ => Vec::new(),
    }
}

/// Whether following the session's output is over, and with which exit code: the session
/// stopped (done, or halted for a person) with no worker still writing, or (with `state`) that
/// state has run and the session moved on.
pub fn follow_over(s: &Session, state: Option<&str>) -> Option<u8> {
    let writing = s.runs.iter().any(|r| r.outcome == RunOutcome::Running);
    if s.status != super::Status::Running && !writing {
        return Some(s.status.exit_code());
    }
    let state = state?;
    let mut runs = s.runs.iter().filter(|r| r.state == state);
    let last = runs.next_back()?;
    let moved_on = s.current_state.as_deref() != Some(state);
    (last.outcome != RunOutcome::Running && moved_on).then_some(0)
}

/// The `limit` newest sessions, live or finished, as the dashboard shows them: their states,
/// runs, totals and budget.
pub fn for_dashboard(
    store: &crate::store::Store,
    now: crate::time::Timestamp,
    limit: usize,
) -> crate::error::Result<Vec<serde_json::Value>> {
    use serde_json::json;
    Ok(super::all_sessions(store, now)?
        .into_iter()
        .rev()
        .take(limit)
        .map(|s| {
            json!({"id": s.id, "template": s.template.name, "task": s.task, "status": s.status,
                   "current_state": s.current_state, "halt": s.halt,
                   "states": s.template.states.keys().collect::<Vec<_>>(),
                   "runs": s.runs.iter().map(|r| json!({"state": r.state, "attempt": r.attempt,
                        "started_at": r.started_at, "completed_at": r.completed_at,
                        "tokens": r.tokens, "cost_usd": r.cost_usd, "outcome": r.outcome,
                        "summary": r.summary})).collect::<Vec<_>>(),
                   "totals": s.totals, "budget": s.template.budget,
                   "transition_counts": s.transition_counts, "updated_at": s.updated_at})
        })
        .collect())
}

/// Refuse a state that session `s`'s template does not have, naming the ones it has.
pub fn known_state(s: &Session, state: &str) -> crate::error::Result<()> {
    if s.template.state(state).is_some() {
        return Ok(());
    }
    Err(crate::error::Error::invalid(
        crate::error::Reason::InvalidInput,
        format!(
            "session {} has no state `{state}` (its states: {})",
            s.id,
            s.template
                .states
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}
