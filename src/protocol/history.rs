//! Finished tasks, read from `history.jsonl` (`conductor history`): the filter a reader gives
//! (project, outcome, a time or an age, the last N), and the entries that pass it, streamed.

use std::collections::VecDeque;

use super::Ledger;
use super::types::{HistoryEntry, Outcome};
use crate::error::Result;
use crate::schema::{self, Schema};
use crate::store::Store;
use crate::store::ledger::Line;
use crate::time::Timestamp;

/// A `--since` value, resolved against the clock when the filter is applied.
#[derive(Clone, Debug)]
pub enum Since {
    At(Timestamp),
    Ago(u64),
}

/// The longest `--since` age: 10,000 years.
const MAX_AGE_MINUTES: u64 = 10_000 * 366 * 1440;

/// Read a time (RFC 3339), a date (midnight UTC) or an age (30m, 12h, 7d).
pub fn parse_since(s: &str) -> std::result::Result<Since, String> {
    if let Some(t) = Timestamp::parse(s) {
        return Ok(Since::At(t));
    }
    if let Some(t) = Timestamp::parse(&format!("{s}T00:00:00Z")) {
        return Ok(Since::At(t));
    }
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a time, a date or an age like 30m, 12h, 7d"))?;
    let per = match unit {
        "m" => 1,
        "h" => 60,
        "d" => 1440,
        _ => {
            return Err(format!(
                "`{s}` is not a time, a date or an age like 30m, 12h, 7d"
            ));
        }
    };
    let minutes = n
        .checked_mul(per)
        .filter(|m| *m <= MAX_AGE_MINUTES)
        .ok_or_else(|| format!("`{s}` is too long ago (at most 10000 years)"))?;
    Ok(Since::Ago(minutes))
}

/// Which entries to read.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub project: Option<String>,
    pub outcome: Option<Outcome>,
    pub since: Option<Since>,
    /// Only the last N matching entries.
    pub limit: Option<usize>,
}

/// Call `each` on every entry of `history.jsonl` that passes `filter`, oldest first (with a
/// limit, only the last ones, once the ledger is read). A line that cannot be read is skipped,
/// told to `skipped`. Returns how many entries matched.
pub fn read(
    store: &Store,
    now: Timestamp,
    filter: &Filter,
    skipped: &mut dyn FnMut(String),
    each: &mut dyn FnMut(&HistoryEntry) -> Result<()>,
) -> Result<usize> {
    let since = filter.since.as_ref().map(|s| match s {
        Since::At(t) => *t,
        Since::Ago(m) => now.minus_minutes(*m),
    });
    let mut tail: VecDeque<HistoryEntry> = VecDeque::new();
    let mut count = 0usize;
    super::read_ledger(store, Ledger::History, |n, line| {
        let text = match line {
            Line::Complete(t) => t,
            Line::Torn(_) => {
                skipped(format!(
                    "history.jsonl line {n} is incomplete (an interrupted write); skipped"
                ));
                return Ok(true);
            }
        };
        let entry = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| e.to_string())
            .and_then(|v| schema::validate(Schema::HistoryEntry, &v).map(|_| v))
            .and_then(|v| serde_json::from_value::<HistoryEntry>(v).map_err(|e| e.to_string()));
        let entry = match entry {
            Ok(e) => e,
            Err(why) => {
                skipped(format!(
                    "history.jsonl line {n} is not a valid entry ({why}); skipped"
                ));
                return Ok(true);
            }
        };
        let keep = filter.project.as_ref().is_none_or(|p| &entry.project == p)
            && filter.outcome.is_none_or(|o| entry.outcome == o)
            && since.is_none_or(|s| entry.completed_at >= s);
        if !keep {
            return Ok(true);
        }
        count += 1;
        match filter.limit {
            Some(limit) => {
                if tail.len() == limit {
                    tail.pop_front();
                }
                if limit > 0 {
                    tail.push_back(entry);
                }
            }
            None => each(&entry)?,
        }
        Ok(true)
    })?;
    for e in &tail {
        each(e)?;
    }
    Ok(count)
}
