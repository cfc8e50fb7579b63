//! `conflicts.log`: one line per conflict, forced takeover or cleanup, in the plugin's format
//! (`<RFC3339> | <KIND> | <text>`), appended through the store's ledgers.

use serde::Serialize;

use super::ops::LogKind;
use crate::time::Timestamp;

/// One line of `conflicts.log`: `<RFC3339> | <KIND> | <text>`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogEntry {
    pub at: Timestamp,
    pub kind: LogKind,
    pub text: String,
}

impl LogEntry {
    /// The line as written (text with control characters escaped, so it stays one line).
    pub fn format(at: Timestamp, kind: LogKind, text: &str) -> String {
        let text: String = if text.chars().any(char::is_control) {
            text.chars()
                .flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })
                .collect()
        } else {
            text.to_string()
        };
        format!("{at} | {} | {text}", kind.as_str())
    }

    /// Parse a line written by [`LogEntry::format`].
    pub fn parse(line: &str) -> Option<LogEntry> {
        let mut parts = line.splitn(3, " | ");
        let at = Timestamp::parse(parts.next()?)?;
        let kind = LogKind::parse(parts.next()?)?;
        Some(LogEntry {
            at,
            kind,
            text: parts.next()?.to_string(),
        })
    }
}

/// The last `limit` entries of `conflicts.log`, oldest first; a line that cannot be read is
/// skipped, told to `skipped`.
pub fn recent(
    store: &crate::store::Store,
    limit: usize,
    skipped: &mut dyn FnMut(String),
) -> crate::error::Result<Vec<LogEntry>> {
    use crate::store::ledger::Line;
    let mut recent = std::collections::VecDeque::with_capacity(limit.min(10_000));
    super::read_ledger(store, super::Ledger::Conflicts, |n, line| {
        match line {
            Line::Complete(text) => match LogEntry::parse(&text) {
                Some(e) => {
                    if recent.len() == limit {
                        recent.pop_front();
                    }
                    if limit > 0 {
                        recent.push_back(e);
                    }
                }
                None => skipped(format!(
                    "conflicts.log line {n} is not `<time> | <KIND> | <text>`; skipped"
                )),
            },
            Line::Torn(_) => skipped(format!(
                "conflicts.log line {n} is incomplete (an interrupted write); skipped"
            )),
        }
        Ok(true)
    })?;
    Ok(recent.into())
}

/// The conflicts still open: requests waiting on a live holder (a killed `claim --wait` no
/// longer conflicts, as `status` shows them).
pub fn unresolved(
    store: &crate::store::Store,
    now: Timestamp,
) -> crate::error::Result<Vec<super::ops::LiveConflict>> {
    let mut state = super::read(store, now)?;
    super::ops::drop_dead_waiters(
        &mut state,
        &super::local::waiter_is_dead,
        now,
        &mut Vec::new(),
    );
    Ok(super::ops::live_conflicts(&state))
}
