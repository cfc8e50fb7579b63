//! `conductor events [--after SEQ] [--limit N] [--types a,b] [--instance ID]`: one page of the
//! event journal, as `{"items":[...],"next_after_seq":N,"has_more":bool}` (always JSON). The
//! page and its filter are `app::events` (the MCP server's `events` tool reads the same).

use super::Ctx;
use conductor::error::Result;

/// Read events.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "On a terminal (without --json): the newest --limit events, one readable line \
each, oldest first; --oldest shows the oldest instead, --after SEQ those after SEQ.\n\n\
With --json, or when stdout is not a terminal (a script, a pipe): one JSON object \
{\"items\":[...],\"next_after_seq\":N,\"has_more\":bool}, from the oldest kept event (or after \
--after). Pass next_after_seq back as --after to read the next page; no event is skipped or repeated, across \
segment rolls too.\n\nA cursor older than the oldest kept event (the journal rolls into segments and \
old segments are pruned, see config.json events_*) fails with reason `cursor_expired` (exit 2).\n\n\
Examples:\n  conductor events --limit 10\n  conductor events --after 42 --types claim.granted,claim.released\n  \
conductor events --instance itm-a1b2c3"
)]
pub struct EventsArgs {
    /// Only events after this seq [default: from the oldest kept event].
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// At most this many items.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub limit: u64,
    /// Only these event types (comma-separated), like claim.granted,claim.released.
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub types: Vec<String>,
    /// Only events whose actor or target is this instance.
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
    /// On a terminal: the oldest kept events instead of the newest (JSON pages always start
    /// there).
    #[arg(long, conflicts_with = "after")]
    pub oldest: bool,
}

pub use conductor::app::events::Filter;

pub use crate::face::events_page as page;

/// Run `events`.
pub fn run(ctx: &Ctx, args: EventsArgs) -> Result<u8> {
    let filter = Filter::new(args.types, args.instance)?;
    if ctx.out.json {
        let value = page(ctx, args.after, args.limit, &filter)?;
        ctx.out.json_line(&value)?;
        return Ok(0);
    }
    let events = if args.after.is_some() || args.oldest {
        conductor::app::events::page(&ctx.store, args.after, args.limit, &filter)?.items
    } else {
        conductor::app::events::newest(&ctx.store, args.limit, &filter)?
    };
    if events.is_empty() {
        ctx.out.text("No events.")?;
    } else {
        let lines: Vec<String> = events.iter().map(|e| e.one_line()).collect();
        ctx.out.text(&lines.join("\n"))?;
    }
    Ok(0)
}
