//! `conductor events [--after SEQ] [--limit N] [--types a,b] [--instance ID]`: one page of the
//! event journal, as `{"items":[...],"next_after_seq":N,"has_more":bool}` (always JSON).

use serde_json::json;

use super::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::protocol::events::ALL_TYPES;
use conductor::store::event::Event;

/// Read events.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Prints one JSON object: {\"items\":[...],\"next_after_seq\":N,\"has_more\":bool}. \
Pass next_after_seq back as --after to read the next page; no event is skipped or repeated, across \
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
}

/// Which events a reader wants.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub types: Vec<String>,
    pub instance: Option<String>,
}

/// Every event type any domain writes to the journal (one journal, one list).
pub fn known_types() -> Vec<&'static str> {
    use conductor::agents::ev as rt;
    use conductor::queue::ops as q;
    use conductor::workflows::event as wf;
    let mut all = ALL_TYPES.to_vec();
    all.extend([
        rt::AGENT_REGISTERED,
        rt::CHANNEL_MESSAGE_CREATED,
        rt::CHANNEL_MESSAGE_EDITED,
        rt::DM_MESSAGE_CREATED,
        rt::DM_MESSAGE_EDITED,
        rt::MENTION_CREATED,
        rt::MENTION_ACKNOWLEDGED,
        rt::INBOX_ITEM_CREATED,
        rt::INBOX_ITEM_UPDATED,
        rt::CLAIM_ACQUIRED,
        rt::CLAIM_RENEWED,
        rt::CLAIM_RELEASED,
        rt::CLAIM_TAKEN_OVER,
        q::SUBMITTED,
        q::STARTED,
        q::COMPLETED,
        q::FAILED,
        q::TIMED_OUT,
        q::BLOCKED,
        q::CANCELLED,
        q::RETRIED,
        q::INTERRUPTED,
        q::PAUSED,
        q::RESUMED,
        wf::STARTED,
        wf::STATE_STARTED,
        wf::TRANSITION_REQUESTED,
        wf::TRANSITION,
        wf::WORKER_EXITED,
        wf::STATUS,
        wf::INTERCEPTED,
    ]);
    all
}

impl Filter {
    /// Check the type names (so a typo is an error, not an empty feed).
    pub fn new(types: Vec<String>, instance: Option<String>) -> Result<Filter> {
        let types: Vec<String> = types
            .into_iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        for t in &types {
            if !known_types().contains(&t.as_str()) {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "unknown event type `{}` (known: {})",
                        conductor::text::printable(t),
                        known_types().join(", ")
                    ),
                ));
            }
        }
        Ok(Filter { types, instance })
    }

    /// True when the event passes the filter.
    pub fn matches(&self, e: &Event) -> bool {
        (self.types.is_empty() || self.types.contains(&e.event_type))
            && self.instance.as_deref().is_none_or(|id| e.involves(id))
    }
}

/// One page of events.
pub fn page(
    ctx: &Ctx,
    after: Option<u64>,
    limit: u64,
    filter: &Filter,
) -> Result<serde_json::Value> {
    let start = match after {
        Some(a) => a,
        None => ctx.store.oldest_event()?.map(|o| o - 1).unwrap_or(0),
    };
    let mut tail = ctx.store.tail(Some(start))?;
    let mut items: Vec<Event> = Vec::new();
    let mut has_more = false;
    let mut last_returned = start;
    tail.read(|e| {
        if !filter.matches(&e) {
            return true;
        }
        if items.len() as u64 >= limit {
            has_more = true;
            return false;
        }
        last_returned = e.seq;
        items.push(e);
        true
    })?;
    // Without more matches, everything up to the end was scanned: skip it next time.
    let next = if has_more {
        last_returned
    } else {
        tail.after.max(last_returned)
    };
    Ok(json!({"items": items, "next_after_seq": next, "has_more": has_more}))
}

/// Run `events`.
pub fn run(ctx: &Ctx, args: EventsArgs) -> Result<u8> {
    let filter = Filter::new(args.types, args.instance)?;
    let value = page(ctx, args.after, args.limit, &filter)?;
    ctx.out.json_line(&value)?;
    Ok(0)
}
