//! `conductor history`: finished tasks, streamed from history.jsonl.

use std::collections::VecDeque;
use std::io::Write;

use super::Ctx;
use conductor::error::{Error, Result};
use conductor::protocol::Ledger;
use conductor::protocol::types::{HistoryEntry, Outcome};
use conductor::schema::{self, Schema};
use conductor::store::ledger::Line;
use conductor::time::Timestamp;

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

/// A `--since` value, resolved against the clock when the command runs.
#[derive(Clone, Debug)]
pub enum Since {
    At(Timestamp),
    Ago(u64),
}

/// The longest `--since` age: 10,000 years.
const MAX_AGE_MINUTES: u64 = 10_000 * 366 * 1440;

fn parse_since(s: &str) -> std::result::Result<Since, String> {
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
    let since = args.since.map(|s| match s {
        Since::At(t) => t,
        Since::Ago(m) => ctx.now.minus_minutes(m),
    });
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
    let mut emit = |w: &mut std::io::BufWriter<_>, e: &HistoryEntry| -> Result<()> {
        if json {
            if !first {
                w.write_all(b",").map_err(io)?;
            }
            serde_json::to_writer(&mut *w, e).map_err(|e| io(e.into()))?;
        } else {
            table.row(human(e));
        }
        first = false;
        Ok(())
    };
    let mut tail: VecDeque<HistoryEntry> = VecDeque::new();
    let mut count = 0usize;
    conductor::protocol::read_ledger(&ctx.store, Ledger::History, |n, line| {
        let text = match line {
            Line::Complete(t) => t,
            Line::Torn(_) => {
                ctx.out.warn(&format!(
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
                ctx.out.warn(&format!(
                    "history.jsonl line {n} is not a valid entry ({why}); skipped"
                ));
                return Ok(true);
            }
        };
        let keep = args.project.as_ref().is_none_or(|p| &entry.project == p)
            && args.outcome.is_none_or(|o| entry.outcome == o)
            && since.is_none_or(|s| entry.completed_at >= s);
        if !keep {
            return Ok(true);
        }
        count += 1;
        match args.limit {
            Some(limit) => {
                if tail.len() == limit {
                    tail.pop_front();
                }
                if limit > 0 {
                    tail.push_back(entry);
                }
            }
            None => emit(&mut w, &entry)?,
        }
        Ok(true)
    })?;
    for e in &tail {
        emit(&mut w, e)?;
    }
    drop(emit);
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
