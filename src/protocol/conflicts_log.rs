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
