//! The agents domain as every face calls it (the CLI, the MCP server, Canopy's HTTP API): the
//! transactions over the three documents (agents, inbox, channels), and the shapes Canopy's
//! clients read.

use serde_json::{Map, Value, json};

use super::inbox_files::Scope;
use super::{Agent, Agents, Channels, Claim, Inbox, Item, Mention, Message, Status, ops};
use crate::error::{Error, Reason, Result};
use crate::store::event::Event;
use crate::store::{Lock, Store};
use crate::time::Timestamp;

/// Run `f` on the agents and the inbox under the agents' lock, after expiring what is due, and
/// commit what changed with its ledger lines and events.
/// `scope` names the agents whose inboxes it loads (an operation by item id needs all).
pub fn transact_inbox<T>(
    store: &Store,
    now: Timestamp,
    scope: &Scope,
    mut f: impl FnMut(&mut Agents, &mut Inbox, i64, &mut ops::Fx) -> Result<T>,
) -> Result<T> {
    let now_ms = super::now_ms();
    super::inbox_files::transact(store, now, scope, |tx, agents, inbox| {
        let mut fx = ops::Fx::default();
        ops::expire(agents, inbox, now, now_ms, &mut fx);
        let v = f(agents, inbox, now_ms, &mut fx)?;
        super::stage(tx, fx)?;
        Ok(v)
    })
}

/// One change to an inbox item: `seen`, or finished (`completed` with its reference, `skipped`).
#[derive(Clone, Debug)]
pub struct ItemUpdate {
    pub id: String,
    pub status: Status,
    pub completion_ref: Option<Map<String, Value>>,
}

/// Apply `updates` all or nothing, in one transaction, as `by` (the acting agent, when known).
/// With `own_only`, another agent's item is not found (what an agent's API key may see).
pub fn update_items(
    store: &Store,
    now: Timestamp,
    updates: &[ItemUpdate],
    by: Option<&str>,
    own_only: bool,
) -> Result<Vec<Item>> {
    transact_inbox(store, now, &Scope::All, |agents, inbox, now_ms, fx| {
        updates
            .iter()
            .map(|u| {
                if own_only
                    && inbox
                        .items
                        .get(&u.id)
                        .is_none_or(|i| Some(i.agent.as_str()) != by)
                {
                    return Err(ops::unknown_item(&u.id));
                }
                match u.status {
                    Status::Seen => ops::mark_seen(agents, inbox, &u.id, now, now_ms, fx),
                    s => ops::finish(
                        agents,
                        inbox,
                        &u.id,
                        s,
                        u.completion_ref.clone(),
                        by,
                        now,
                        now_ms,
                        fx,
                    ),
                }
            })
            .collect()
    })
}

/// Apply one update ([`update_items`], not restricted to `by`'s own items); returns the item.
pub fn update_item(
    store: &Store,
    now: Timestamp,
    id: &str,
    status: Status,
    completion_ref: Option<Map<String, Value>>,
    by: Option<&str>,
) -> Result<Item> {
    let u = ItemUpdate {
        id: id.to_string(),
        status,
        completion_ref,
    };
    Ok(update_items(store, now, &[u], by, false)?.remove(0))
}

/// A work claim on an inbox item or mention ([`claim_item`]).
#[derive(Clone, Debug)]
pub struct ClaimItem {
    /// The item or mention.
    pub id: String,
    /// The agent claiming it.
    pub agent: String,
    /// Who asks (`cli`, `api`, a run loop's worker name), recorded on the claim.
    pub worker: String,
    /// Seconds the claim lasts unless renewed.
    pub ttl: u64,
    /// Take over a claim whose TTL has run out.
    pub takeover: bool,
}

/// Claim an item or mention for an agent (a live claim of another agent is a conflict, an
/// outcome, not an error).
pub fn claim_item(store: &Store, now: Timestamp, req: &ClaimItem) -> Result<ops::ClaimOutcome> {
    transact_inbox(store, now, &Scope::All, |agents, inbox, now_ms, fx| {
        ops::claim(
            agents,
            inbox,
            &req.id,
            &req.agent,
            &req.worker,
            req.ttl,
            req.takeover,
            now,
            now_ms,
            fx,
        )
    })
}

/// Extend `agent`'s claim on item `id` by `ttl` seconds (`None`: the claim's own TTL).
pub fn renew_item(
    store: &Store,
    now: Timestamp,
    id: &str,
    agent: &str,
    ttl: Option<u64>,
) -> Result<Claim> {
    transact_inbox(store, now, &Scope::All, |_, inbox, now_ms, fx| {
        ops::renew(inbox, id, agent, ttl, now, now_ms, fx)
    })
}

/// Give up `agent`'s claim on item `id`; returns the claim released.
pub fn release_item(store: &Store, now: Timestamp, id: &str, agent: &str) -> Result<Claim> {
    transact_inbox(store, now, &Scope::All, |_, inbox, _, fx| {
        ops::release(inbox, id, agent, "released", fx)
    })
}

/// Acknowledge mentions, all or nothing; returns them.
pub fn ack_mentions(store: &Store, now: Timestamp, ids: &[String]) -> Result<Vec<Mention>> {
    transact_inbox(store, now, &Scope::All, |_, inbox, _, fx| {
        ops::ack(inbox, ids, now, fx)
    })
}

/// [`transact_inbox`] with the channels too: posting and editing messages.
fn transact_messages<T>(
    store: &Store,
    now: Timestamp,
    scope: &Scope,
    mut f: impl FnMut(&mut Agents, &mut Inbox, &mut Channels, i64, &mut ops::Fx) -> Result<T>,
) -> Result<T> {
    let now_ms = super::now_ms();
    super::inbox_files::transact(store, now, scope, |tx, agents, inbox| {
        let mut channels: Channels = tx.read()?;
        let mut fx = ops::Fx::default();
        ops::expire(agents, inbox, now, now_ms, &mut fx);
        let v = f(agents, inbox, &mut channels, now_ms, &mut fx)?;
        tx.write(&channels)?;
        super::stage(tx, fx)?;
        Ok(v)
    })
}

/// Post (or DM) in one transaction.
pub fn post(store: &Store, now: Timestamp, p: ops::NewPost) -> Result<Message> {
    // A post only adds items: no one's inbox is loaded (see `inbox_files`).
    transact_messages(
        store,
        now,
        &Scope::Nobody,
        |agents, inbox, channels, now_ms, fx| {
            let replied = match &p.reply_to {
                Some(id) => super::find_message(store, channels, id)?,
                None => None,
            };
            ops::post(
                agents,
                inbox,
                channels,
                p.clone(),
                replied.as_ref(),
                now,
                now_ms,
                fx,
            )
        },
    )
}

/// Edit message `message_id` as `author`: newly addressed agents get their mentions and inbox
/// items in the same transaction. Returns the edited message.
pub fn edit(
    store: &Store,
    now: Timestamp,
    message_id: &str,
    author: &str,
    content: String,
) -> Result<Message> {
    // Newly addressed agents are deduplicated against their live items: every inbox.
    transact_messages(
        store,
        now,
        &Scope::All,
        |agents, inbox, channels, now_ms, fx| {
            let original = super::find_message(store, channels, message_id)?.ok_or_else(|| {
                Error::invalid(
                    Reason::MessageNotFound,
                    format!("no message `{}`", crate::text::printable(message_id)),
                )
            })?;
            let finished = |agent: &str, source: &str, trigger: &str| {
                super::finished_item(store, agent, source, trigger).unwrap_or(false)
            };
            ops::edit(
                agents,
                inbox,
                channels,
                original,
                author,
                content.clone(),
                &finished,
                now,
                now_ms,
                fx,
            )
        },
    )
}

/// What `register` did.
#[derive(Clone, Debug)]
pub struct Registered {
    /// A new agent (else an update).
    pub fresh: bool,
    pub agent: Agent,
    /// The `channel_added` inbox items for channels it now watches that existed already.
    pub channel_added: Vec<String>,
}

/// Register an agent, or update what is given of an existing one (the rest, its watch list
/// too, is kept). A new agent's cursor starts at the journal's end.
pub fn register(store: &Store, now: Timestamp, new: &ops::NewAgent) -> Result<Registered> {
    let cursor = store.last_event_seq()?;
    let now_ms = super::now_ms();
    store.transaction(now, &[Lock::Agents], |tx| {
        let mut agents: Agents = tx.read()?;
        let name = new.name.to_ascii_lowercase();
        let scope = Scope::one(&name);
        let (mut inbox, loaded) = super::inbox_files::read(tx, store, &scope)?;
        let channels: Channels = tx.read()?;
        let mut fx = ops::Fx::default();
        ops::expire(&mut agents, &mut inbox, now, now_ms, &mut fx);
        let existing = agents.agents.get(&name);
        let watched_before: Vec<String> = existing.map(|x| x.watch.clone()).unwrap_or_default();
        let watch = if new.watch.is_empty() {
            watched_before.clone()
        } else {
            new.watch.clone()
        };
        let handle = new.handle.clone().or(existing.map(|x| x.handle.clone()));
        let user_id = new.user_id.clone().or(existing.map(|x| x.user_id.clone()));
        let fresh = ops::register(
            &mut agents,
            ops::NewAgent {
                name: new.name.clone(),
                handle,
                user_id,
                watch,
            },
            cursor,
            now,
            &mut fx,
        )?;
        let agent = agents.agents[&name].clone();
        // Added to a channel that already exists: a `channel_added` item (once per channel).
        let finished = |agent: &str, source: &str, trigger: &str| {
            super::finished_item(store, agent, source, trigger).unwrap_or(false)
        };
        let mut added = Vec::new();
        for c in agent.watch.iter().filter(|c| !watched_before.contains(c)) {
            if channels.channels.contains_key(c)
                && let Some(id) =
                    ops::channel_added(&mut inbox, &name, c, &finished, now, now_ms, &mut fx)
            {
                added.push(id);
            }
        }
        tx.write(&agents)?;
        super::inbox_files::write(tx, store, &inbox, &loaded)?;
        super::stage(tx, fx)?;
        Ok::<_, Error>(Registered {
            fresh,
            agent,
            channel_added: added,
        })
    })
}

/// Move agent `name`'s durable feed cursor forward to `seq` (never back).
pub fn advance_cursor(store: &Store, now: Timestamp, name: &str, seq: u64) -> Result<()> {
    store.transaction(now, &[Lock::Agents], |tx| {
        let mut agents: Agents = tx.read()?;
        let ag = ops::agent_mut(&mut agents, name)?;
        ag.cursor = ag.cursor.max(seq);
        Ok::<_, Error>(tx.write(&agents)?)
    })
}

/// The file in an agent's directory where Canopy's API records its last heartbeat.
pub const HEARTBEAT_FILE: &str = "heartbeat.json";

/// Record that agent `agent` checked in through `via` (Canopy's API: `api`).
pub fn heartbeat(store: &Store, now: Timestamp, agent: &str, via: &str) -> Result<()> {
    let file = super::agent_file(agent, HEARTBEAT_FILE)?;
    let body = super::to_bytes(&json!({"version": "1.0", "agent": agent, "at": now, "via": via}));
    store.transaction(now, &[Lock::Agents], |tx| {
        tx.write_at(&file, body.clone())?;
        Ok::<_, Error>(())
    })
}

/// An event in Canopy's feed-item shape.
pub fn canopy_item(e: &Event, users: &Agents) -> Value {
    let uid = |n: &Option<String>| {
        n.as_ref().map(|n| {
            users
                .agents
                .get(n)
                .map(|a| a.user_id.clone())
                .unwrap_or_else(|| n.clone())
        })
    };
    let p = &e.payload;
    json!({
        "seq": e.seq, "event_id": e.event_id, "event_type": e.event_type,
        "actor_user_id": uid(&e.actor), "target_user_id": uid(&e.target),
        "channel_id": p.get("channel_id"), "post_id": p.get("post_id"),
        "message_id": p.get("message_id"),
        "visibility_scope": p.get("visibility_scope").cloned().unwrap_or_else(|| json!(if e.target.is_some() { "direct" } else { "channel" })),
        "created_at": e.created_at, "payload": p,
    })
}

/// A better message for an id that is no longer actionable.
/// A better error than `unknown_item` for an id that is no longer actionable: already
/// completed or skipped (from the done ledger), or expired.
pub fn explain_missing(store: &Store, now: Timestamp, e: Error, id: &str) -> Error {
    if e.reason() != "unknown_item" {
        return e;
    }
    let mut status = None;
    let _ = store.read_ledger_file(super::INBOX_DONE, |_, line| {
        if let crate::store::ledger::Line::Complete(t) = line
            && t.contains(id)
            && let Ok(v) = serde_json::from_str::<Value>(&t)
            && v["item"]["id"] == id
        {
            status = v["item"]["status"].as_str().map(str::to_string);
        }
        Ok::<_, Error>(true)
    });
    match status {
        Some(s) => Error::invalid(
            Reason::NotActionable,
            format!("inbox item `{id}` is already {s}"),
        ),
        // Expired by this very transaction (which failed, so nothing was written).
        None if super::inbox_files::snapshot(store, now, &Scope::All)
            .ok()
            .and_then(|i| i.items.get(id).cloned())
            .is_some_and(|i| ops::due_to_expire(&i, super::now_ms())) =>
        {
            Error::invalid(
                Reason::NotActionable,
                format!(
                    "inbox item `{id}` has expired (items expire {} days after they were created unless claimed)",
                    super::ITEM_EXPIRY_SECONDS / 86_400
                ),
            )
        }
        None => e,
    }
}
