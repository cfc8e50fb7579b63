//! `conductor conflicts`: recent conflicts.log entries and the conflicts still open.

use std::collections::VecDeque;

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::Ledger;
use conductor::protocol::conflicts_log::LogEntry;
use conductor::protocol::ops::{self, LiveConflict};
use conductor::store::ledger::Line;

/// Show conflicts.
#[derive(Debug, clap::Args)]
pub struct ConflictsArgs {
    /// How many recent log entries to show.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,
}

struct ConflictsReport {
    recent: Vec<LogEntry>,
    unresolved: Vec<LiveConflict>,
}

impl Report for ConflictsReport {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "recent": self.recent, "unresolved": self.unresolved})
    }
    fn to_text(&self) -> String {
        let mut out = Vec::new();
        if self.recent.is_empty() {
            out.push("No conflicts logged.".to_string());
        } else {
            out.push("Recent (conflicts.log):".to_string());
            out.extend(
                self.recent
                    .iter()
                    .map(|e| format!("  {} | {} | {}", e.at, e.kind.as_str(), e.text)),
            );
        }
        if self.unresolved.is_empty() {
            out.push("Unresolved: none".into());
        } else {
            out.push("Unresolved:".into());
            out.extend(self.unresolved.iter().map(|c| {
                format!(
                    "  {} wants {} (held by {}: {}) since {}",
                    c.requested_by, c.file, c.held_by, c.holder_task, c.since
                )
            }));
        }
        out.join("\n")
    }
}

/// Run `conflicts`.
pub fn run(ctx: &Ctx, args: ConflictsArgs) -> Result<u8> {
    let mut recent = VecDeque::with_capacity(args.limit.min(10_000));
    conductor::protocol::read_ledger(&ctx.store, Ledger::Conflicts, |n, line| {
        match line {
            Line::Complete(text) => match LogEntry::parse(&text) {
                Some(e) => {
                    if recent.len() == args.limit {
                        recent.pop_front();
                    }
                    if args.limit > 0 {
                        recent.push_back(e);
                    }
                }
                None => ctx.out.warn(&format!(
                    "conflicts.log line {n} is not `<time> | <KIND> | <text>`; skipped"
                )),
            },
            Line::Torn(_) => ctx.out.warn(&format!(
                "conflicts.log line {n} is incomplete (an interrupted write); skipped"
            )),
        }
        Ok(true)
    })?;
    let mut state = conductor::protocol::read(&ctx.store, ctx.now)?;
    // A killed `claim --wait` no longer conflicts (see `status`).
    ops::drop_dead_waiters(
        &mut state,
        &conductor::protocol::local::waiter_is_dead,
        ctx.now,
        &mut Vec::new(),
    );
    print(
        ctx.out,
        &ConflictsReport {
            recent: recent.into(),
            unresolved: ops::live_conflicts(&state),
        },
    )
}
