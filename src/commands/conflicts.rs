//! `conductor conflicts`: recent conflicts.log entries and the conflicts still open.

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::conflicts_log::{self, LogEntry};
use conductor::protocol::ops::LiveConflict;

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
    let recent = conflicts_log::recent(&ctx.store, args.limit, &mut |why| ctx.out.warn(&why))?;
    print(
        ctx.out,
        &ConflictsReport {
            recent,
            unresolved: conflicts_log::unresolved(&ctx.store, ctx.now)?,
        },
    )
}
