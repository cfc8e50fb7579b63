//! `conductor history`: finished tasks, streamed from history.jsonl.

use std::io::Write;

use super::Ctx;
use conductor::error::{Error, Result};
use conductor::protocol::history::{self, Since, parse_since};
use conductor::protocol::types::{HistoryEntry, Outcome};

/// Show history.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "--since takes an RFC 3339 time (2026-01-17T09:00:00Z), a date (2026-01-17) \
or an age (30m, 12h, 7d). Lines that cannot be read are skipped with a warning on stderr."
)]
pub struct HistoryArgs {
    /// Only this project.
    #[arg(long)]
    pub project: Option<String>,
    /// Only this outcome.
    #[arg(long, value_enum)]
    pub outcome: Option<Outcome>,
    /// Only tasks completed at or after this time.
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    pub since: Option<Since>,
    /// Only the last N matching entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// The text form's row for an entry (the `--json` form streams; the text form is a table,
/// aligned once every row is known).
fn human(e: &HistoryEntry) -> Vec<String> {
    vec![
        e.completed_at.to_string(),
        e.outcome.as_str().to_string(),
        e.id.clone(),
        e.priority.to_string(),
        e.project.clone(),
        e.duration_minutes
            .unwrap_or_else(|| e.started_at.minutes_until(e.completed_at))
            .to_string(),
        e.task.clone(),
    ]
}

/// Run `history`.
pub fn run(ctx: &Ctx, args: HistoryArgs) -> Result<u8> {
    let filter = history::Filter {
        project: args.project,
        outcome: args.outcome,
        since: args.since,
        limit: args.limit,
    };
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let io = |e: std::io::Error| Error::io("write to", std::path::Path::new("stdout"), e);
    let json = ctx.out.json;
    if json {
        w.write_all(b"{\"status\":\"ok\",\"entries\":[")
            .map_err(io)?;
    }
    let mut first = true;
    let mut table = super::table::Table::new(&[
        "COMPLETED",
        "OUTCOME",
        "ID",
        "PRIORITY",
        "PROJECT",
        "MINUTES",
        "TASK",
    ]);
    let count = history::read(
        &ctx.store,
        ctx.now,
        &filter,
        &mut |why| ctx.out.warn(&why),
        &mut |e| {
            if json {
                if !first {
                    w.write_all(b",").map_err(io)?;
                }
                serde_json::to_writer(&mut w, e).map_err(|e| io(e.into()))?;
            } else {
                table.row(human(e));
            }
            first = false;
            Ok(())
        },
    )?;
    if json {
        w.write_all(b"]}\n").map_err(io)?;
    } else if !first {
        writeln!(w, "{}", table.render()).map_err(io)?;
    } else if count == 0 {
        writeln!(w, "No matching history.").map_err(io)?;
    }
    w.flush().map_err(io)?;
    Ok(0)
}
