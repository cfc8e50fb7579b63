//! One page of the event journal, every domain's events (the CLI's `events`, the MCP server's
//! `events` tool): which types exist, a filter over them, and a page with its cursor. It lives
//! here because the journal is shared and [`known_types`] names every domain's events.

use serde::Serialize;

use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::store::event::Event;

/// Every event type any domain writes to the journal (one journal, one list).
pub fn known_types() -> Vec<&'static str> {
    use crate::agents::ev as rt;
    use crate::queue::ops as q;
    use crate::workflows::event as wf;
    let mut all = crate::protocol::events::ALL_TYPES.to_vec();
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
        wf::SNAPSHOT_UPDATED,
    ]);
    all
}

/// Which events a reader wants.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub types: Vec<String>,
    pub instance: Option<String>,
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
                        crate::text::printable(t),
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

/// One page: the events (or what the reader made of each), the seq to pass back as the next
/// `after` (no event is skipped or repeated), and whether more matching events follow.
#[derive(Clone, Debug, Serialize)]
pub struct Page<T = Event> {
    pub items: Vec<T>,
    pub next_after_seq: u64,
    pub has_more: bool,
}

/// At most `limit` events that pass `filter`, after `after` (`None`: from the oldest kept).
/// Fails with `cursor_expired` when events after `after` were pruned.
pub fn page(store: &Store, after: Option<u64>, limit: u64, filter: &Filter) -> Result<Page> {
    page_with(store, after, limit, |e| filter.matches(e), |e| e)
}

/// [`page`] for a face with its own filter and item shape (the HTTP server's Canopy feed):
/// at most `limit` events that `keep` accepts after `after`, each turned into an item by `map`.
pub fn page_with<T>(
    store: &Store,
    after: Option<u64>,
    limit: u64,
    keep: impl Fn(&Event) -> bool,
    mut map: impl FnMut(Event) -> T,
) -> Result<Page<T>> {
    let start = match after {
        Some(a) => a,
        None => store.oldest_event()?.map(|o| o - 1).unwrap_or(0),
    };
    let mut tail = store.tail(Some(start))?;
    let mut items: Vec<T> = Vec::new();
    let mut has_more = false;
    let mut last_returned = start;
    tail.read(|e| {
        if !keep(&e) {
            return true;
        }
        if items.len() as u64 >= limit {
            has_more = true;
            return false;
        }
        last_returned = e.seq;
        items.push(map(e));
        true
    })?;
    // Without more matches, everything up to the end was scanned: skip it next time.
    let next_after_seq = if has_more {
        last_returned
    } else {
        tail.after.max(last_returned)
    };
    Ok(Page {
        items,
        next_after_seq,
        has_more,
    })
}

/// The newest `limit` events that pass `filter`, oldest first (what a person looking at the
/// journal wants): windows back from the last seq, doubled until they hold `limit` matches or
/// reach the oldest kept event.
pub fn newest(store: &Store, limit: u64, filter: &Filter) -> Result<Vec<Event>> {
    let Some(oldest) = store.oldest_event()? else {
        return Ok(Vec::new());
    };
    let floor = oldest.saturating_sub(1);
    let last = store.last_event_seq()?;
    let mut window = limit.max(1);
    loop {
        let start = last.saturating_sub(window).max(floor);
        let mut found: std::collections::VecDeque<Event> = std::collections::VecDeque::new();
        store.tail(Some(start))?.read(|e| {
            if filter.matches(&e) {
                if found.len() as u64 == limit {
                    found.pop_front();
                }
                found.push_back(e);
            }
            true
        })?;
        if found.len() as u64 >= limit || start == floor {
            return Ok(found.into());
        }
        window = window.saturating_mul(2);
    }
}

/// A view of the home a reader follows (the MCP server's resources): the sessions' status, an
/// agent's inbox, a workflow session's snapshot.
#[derive(Clone, Debug, PartialEq)]
pub enum View {
    Status,
    /// The agent's name.
    Inbox(String),
    /// The session's id (or a prefix of it).
    Snapshot(String),
}

impl View {
    /// True when event `e` may change what the view shows.
    pub fn touched_by(&self, e: &Event) -> bool {
        let t = e.event_type.as_str();
        match self {
            View::Status => ["instance.", "claim.", "drift.", "gate."]
                .iter()
                .any(|p| t.starts_with(p)),
            View::Inbox(_) => ["inbox.", "mention.", "dm.", "channel.", "agent."]
                .iter()
                .any(|p| t.starts_with(p)),
            View::Snapshot(id) => {
                t.starts_with("workflow.")
                    && e.payload["session"]
                        .as_str()
                        .is_none_or(|s| s == id || s.starts_with(id.as_str()))
            }
        }
    }
}
