//! What the faces show of the agents, read from the store: an agent's runtime facts, the list
//! of agents with their backlog and mode, an agent's feed and action log, inbox and mention
//! listings, a channel's messages. The CLI, the MCP server and Canopy's HTTP API call these
//! and only render what they answer.

use serde::Serialize;
use serde_json::{Value, json};

use super::inbox_files::Scope;
use super::{Agent, Agents, Claim, Histogram, Inbox, Item, Mention, Message, RunStatus, Status};
use super::{health, ops};
use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::time::Timestamp;

/// An agent as shown to people and scripts (without its action log).
pub fn public(a: &Agent) -> Value {
    json!({"name": a.name, "handle": a.handle, "user_id": a.user_id, "watch": a.watch,
           "registered_at": a.registered_at, "cursor": a.cursor, "queue": a.queue})
}

/// True when the run status says running and its process still exists.
pub fn alive(run: Option<&RunStatus>) -> bool {
    run.is_some_and(|r| r.status == "running" && !crate::host::pid_is_dead(r.pid))
}

/// One registered agent with its backlog, mode and whether its run loop runs (`agent list`).
pub struct Listed {
    pub agent: Agent,
    pub snapshot: health::Snapshot,
    pub mode: &'static str,
}

impl Listed {
    /// The row `agent list --json` prints.
    pub fn to_json(&self) -> Value {
        let s = &self.snapshot;
        let mut row = public(&self.agent);
        row["pending_inbox"] = json!(s.pending_inbox);
        row["unacked_mentions"] = json!(s.unacked_mentions);
        row["mode"] = json!(self.mode);
        row["running"] = json!(s.running);
        row
    }
}

/// Every registered agent, by name, with its backlog and mode.
pub fn list(store: &Store, now: Timestamp) -> Result<Vec<Listed>> {
    let agents: Agents = store.read_doc(now)?;
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::All)?;
    let mut rows = Vec::new();
    for a in agents.agents.values() {
        let run = super::read_run_status(store, &a.name)?;
        let snapshot = health::snapshot(a, run.as_ref(), &inbox, alive(run.as_ref()));
        let (mode, _) = health::mode(&snapshot);
        rows.push(Listed {
            agent: a.clone(),
            snapshot,
            mode,
        });
    }
    Ok(rows)
}

fn latency(h: &Histogram) -> Value {
    json!({"count": h.count, "p50": h.percentile(50.0), "p95": h.percentile(95.0),
           "last": h.recent_ms.back(),
           "mean": h.sum_ms.checked_div(h.count)})
}

/// The runtime facts of an agent (`agent status --json`): wake source, blind window, backlog,
/// cursor, mode, health, metrics and its run loop's status (secrets redacted).
pub fn facts(store: &Store, now: Timestamp, name: &str) -> Result<Value> {
    let agents: Agents = store.read_doc(now)?;
    let a = ops::agent(&agents, name)?;
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::one(&a.name))?;
    let run = super::read_run_status(store, &a.name)?;
    let s = health::snapshot(a, run.as_ref(), &inbox, alive(run.as_ref()));
    let (mode, mode_reasons) = health::mode(&s);
    let (health, issues) = health::health(&s);
    let m = &a.metrics;
    let run = run
        .as_ref()
        .map(|r| health::redact(&serde_json::to_value(r).unwrap_or_default()));
    Ok(json!({
        "status": "ok",
        "agent": a.name,
        "handle": a.handle,
        "wake_source": s.wake_source,
        "canopy_poll_interval_seconds": s.poll_interval_seconds,
        "blind_window_seconds": s.blind_window_seconds,
        "pending_inbox": s.pending_inbox,
        "unacked_mentions": s.unacked_mentions,
        "last_event_cursor_seen": a.cursor,
        "journal_seq": store.last_event_seq()?,
        "feed": s.feed,
        "mode": mode,
        "mode_reasons": mode_reasons,
        "health": health,
        "health_issues": issues,
        "running": s.running,
        "queue": a.queue,
        "metrics": {
            "event_to_seen_ms": latency(&m.event_to_seen),
            "event_to_claim_ms": latency(&m.event_to_claim),
            "claim_to_complete_ms": latency(&m.claim_to_complete),
            "pending_inbox": s.pending_inbox,
            "unacked_mentions": s.unacked_mentions,
            "timeout_recoveries": m.timeout_recoveries,
            "completed": m.completed,
            "errors": m.errors,
            "last_success_at": m.last_success_at,
        },
        "run": run,
    }))
}

/// A page of an agent's own event feed, in Canopy's feed-item shape.
#[derive(Clone, Debug, Serialize)]
pub struct FeedPage {
    pub items: Vec<Value>,
    pub next_after_seq: u64,
    pub has_more: bool,
}

/// At most `limit` events that concern agent `name`, after `after` (default: its durable
/// cursor); with `advance`, its cursor moves to the page's end.
pub fn feed(
    store: &Store,
    now: Timestamp,
    name: &str,
    after: Option<u64>,
    limit: u64,
    advance: bool,
) -> Result<FeedPage> {
    let agents: Agents = store.read_doc(now)?;
    let agent = ops::agent(&agents, name)?.clone();
    let start = after.unwrap_or(agent.cursor);
    let mut tail = store.tail(Some(start))?;
    let mut items = Vec::new();
    let mut has_more = false;
    let mut last = start;
    tail.read(|e| {
        if !ops::concerns(&agent, &e) {
            return true;
        }
        if items.len() as u64 >= limit {
            has_more = true;
            return false;
        }
        last = e.seq;
        items.push(super::service::canopy_item(&e, &agents));
        true
    })?;
    let next = if has_more { last } else { tail.after.max(last) };
    if advance && next > agent.cursor {
        super::service::advance_cursor(store, now, name, next)?;
    }
    Ok(FeedPage {
        items,
        next_after_seq: next,
        has_more,
    })
}

/// The newest `limit` lines (all without one) of agent `name`'s action log, each one JSON
/// object, oldest first. Only whole lines that parse: a torn last line of a crashed append is
/// not an action yet.
pub fn actions(
    store: &Store,
    now: Timestamp,
    name: &str,
    limit: Option<usize>,
) -> Result<Vec<String>> {
    let agents: Agents = store.read_doc(now)?;
    let agent = ops::agent(&agents, name)?;
    let file = super::agent_file(&agent.name, super::ACTIONS_FILE)?;
    let bytes = store.read_at(&file)?.unwrap_or_default();
    let lines: Vec<&str> = std::str::from_utf8(&bytes)
        .unwrap_or_default()
        .split_terminator('\n')
        .filter(|l| serde_json::from_str::<super::Action>(l).is_ok())
        .collect();
    let skip = limit.map_or(0, |l| lines.len().saturating_sub(l));
    Ok(lines.into_iter().skip(skip).map(str::to_string).collect())
}

/// The registered name of agent `name` (names are lowercased), or `unknown_agent`.
pub fn agent_name(store: &Store, now: Timestamp, name: &str) -> Result<String> {
    let agents: Agents = store.read_doc(now)?;
    Ok(ops::agent(&agents, name)?.name.clone())
}

/// The inbox items of agent `agent` (every agent's without one) with status `status` (the
/// actionable ones without one), as JSON objects. Actionable items come in the order a run
/// loop picks them; what the next transaction will expire is shown as expired already (same
/// rule, same clock); finished ones are read from the done ledger. `agent` is a registered
/// name ([`agent_name`]).
pub fn items(
    store: &Store,
    now: Timestamp,
    agent: Option<&str>,
    status: Option<Status>,
) -> Result<Vec<Value>> {
    let mut items: Vec<Value> = Vec::new();
    let scope = agent.map_or(Scope::All, Scope::one);
    let mut inbox: Inbox = super::inbox_files::snapshot(store, now, &scope)?;
    let mut fx = ops::Fx::default();
    let mut agents_copy: Agents = store.read_doc(now)?;
    ops::expire(&mut agents_copy, &mut inbox, now, super::now_ms(), &mut fx);
    if status == Some(Status::Expired) {
        for (_, line) in &fx.lines {
            if let Ok(v) = serde_json::from_str::<Value>(line)
                && agent.is_none_or(|a| v["item"]["agent"] == a)
            {
                items.push(v["item"].clone());
            }
        }
    }
    if status.is_none_or(Status::actionable) {
        let mut v: Vec<&Item> = inbox
            .items
            .values()
            .filter(|i| agent.is_none_or(|a| i.agent == a))
            .filter(|i| status.is_none_or(|s| i.status == s))
            .collect();
        v.sort_by(|a, b| ops::pick_order(a, b));
        return Ok(v
            .into_iter()
            .map(|i| serde_json::to_value(i).expect("serializes"))
            .collect());
    }
    let want = status.expect("checked").as_str();
    let mut done = Vec::new();
    store.read_ledger_file(super::INBOX_DONE, |_, line| {
        if let crate::store::ledger::Line::Complete(t) = line
            && let Ok(v) = serde_json::from_str::<Value>(&t)
            && v["item"]["status"] == want
            && agent.is_none_or(|a| v["item"]["agent"] == a)
        {
            done.push(v["item"].clone());
        }
        Ok::<_, Error>(true)
    })?;
    done.append(&mut items);
    Ok(done)
}

/// The actionable items of agent `agent` with status `status` (both when `None`), in the
/// order a run loop picks them, as the inbox file holds them now.
pub fn open_items(inbox: &Inbox, agent: &str, status: Option<Status>) -> Vec<Item> {
    let mut v: Vec<&Item> = inbox
        .items
        .values()
        .filter(|i| i.agent == agent && status.is_none_or(|s| i.status == s))
        .collect();
    v.sort_by(|a, b| ops::pick_order(a, b));
    v.into_iter().cloned().collect()
}

/// The unacknowledged mentions of agent `agent` (every agent's without one; a registered name).
pub fn mentions(store: &Store, now: Timestamp, agent: Option<&str>) -> Result<Vec<Mention>> {
    let scope = agent.map_or(Scope::All, Scope::one);
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &scope)?;
    Ok(inbox
        .mentions
        .into_values()
        .filter(|m| agent.is_none_or(|n| m.agent == n))
        .collect())
}

/// The id of a mention of agent `me`, else of its inbox item, whose source is `source_type`
/// `source_id` (the message that made it).
pub fn by_source(
    store: &Store,
    now: Timestamp,
    me: &str,
    source_type: &str,
    source_id: &str,
) -> Result<Option<String>> {
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::All)?;
    let found = |agent: &str, t: &str, id: &str| agent == me && t == source_type && id == source_id;
    Ok(inbox
        .mentions
        .values()
        .find(|m| found(&m.agent, &m.source_type, &m.source_id))
        .map(|m| m.id.clone())
        .or_else(|| {
            inbox
                .items
                .values()
                .find(|i| found(&i.agent, &i.source_type, &i.source_id))
                .map(|i| i.id.clone())
        }))
}

/// The work claim recorded on mention or inbox item `id` (live or run out), or `unknown_item`.
pub fn claim_on(store: &Store, now: Timestamp, id: &str) -> Result<Option<Claim>> {
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::All)?;
    match (inbox.mentions.get(id), inbox.items.get(id)) {
        (Some(m), _) => Ok(m.claim.clone()),
        (None, Some(i)) => Ok(i.claim.clone()),
        (None, None) => Err(ops::unknown_item(id)),
    }
}

/// A channel's id as given: a DM conversation (`dm:ana+scout`) as it is, a channel's name
/// checked (a leading `#` dropped).
pub fn channel_id(raw: &str) -> Result<String> {
    if raw.starts_with("dm:") {
        return Ok(raw.to_string());
    }
    super::text::channel_name(raw)
}

/// The newest `limit` messages of channel `channel` (as [`channel_id`] reads it), oldest
/// first, and the channel's id. Past the channel's recent window, every version is read from
/// the messages ledger (the last one wins).
pub fn messages(
    store: &Store,
    now: Timestamp,
    channel: &str,
    limit: usize,
) -> Result<(String, Vec<Message>)> {
    let channels: super::Channels = store.read_doc(now)?;
    let id = channel_id(channel)?;
    let Some(ch) = channels.channels.get(&id) else {
        return Err(Error::invalid(
            Reason::UnknownChannel,
            format!(
                "no channel `{}` (nothing was posted there)",
                crate::text::printable(&id)
            ),
        ));
    };
    let mut msgs: Vec<Message> = ch.recent.clone();
    if limit > msgs.len() && ch.message_count as usize > msgs.len() {
        let mut all: Vec<Message> = Vec::new();
        store.read_ledger_file(super::MESSAGES, |_, line| {
            if let crate::store::ledger::Line::Complete(t) = line
                && let Ok(v) = serde_json::from_str::<Value>(&t)
                && v["message"]["channel_id"] == id.as_str()
                && let Ok(m) = serde_json::from_value::<Message>(v["message"].clone())
            {
                match all.iter_mut().find(|x| x.message_id == m.message_id) {
                    Some(x) => *x = m,
                    None => all.push(m),
                }
            }
            Ok::<_, Error>(true)
        })?;
        msgs = all;
    }
    let skip = msgs.len().saturating_sub(limit);
    Ok((id, msgs.into_iter().skip(skip).collect()))
}

/// Every registered agent as the dashboard shows it: its last heartbeat through Canopy's API,
/// its run loop, its inbox items and mentions (with their live claims).
pub fn for_dashboard(store: &Store, now: Timestamp) -> Result<Vec<Value>> {
    let agents_doc: Agents = store.read_doc(now)?;
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::All)?;
    let now_ms = super::now_ms();
    let mut agent_rows = Vec::new();
    for a in agents_doc.agents.values() {
        let hb = super::agent_file(&a.name, super::service::HEARTBEAT_FILE)
            .ok()
            .and_then(|f| store.read_at(&f).ok().flatten())
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| v["at"].clone());
        let run = super::read_run_status(store, &a.name).ok().flatten();
        let items: Vec<Value> = inbox
            .items
            .values()
            .filter(|i| i.agent == a.name)
            .map(|i| {
                json!({"id": i.id, "status": i.status, "trigger_type": i.trigger_type,
                       "channel_id": i.channel_id, "author": i.author, "preview": i.preview,
                       "priority": i.priority,
                       "claim": i.claim.as_ref().filter(|c| c.expires_ms > now_ms)
                           .map(|c| json!({"agent": c.agent, "worker": c.worker, "expires_at": c.expires_at}))})
            })
            .collect();
        let mentions: Vec<Value> = inbox
            .mentions
            .values()
            .filter(|m| m.agent == a.name)
            .map(|m| json!({"id": m.id, "channel_id": m.channel_id, "author": m.author,
                            "claim": m.claim.as_ref().filter(|c| c.expires_ms > now_ms).map(|c| &c.agent)}))
            .collect();
        agent_rows.push(json!({
            "name": a.name, "handle": a.handle, "watch": a.watch, "cursor": a.cursor,
            "heartbeat_at": hb, "completed": a.metrics.completed,
            "run": run.map(|r| json!({"state": r.state, "status": r.status, "cycles": r.cycles,
                                       "pid": r.pid, "updated_at": r.updated_at})),
            "inbox": items, "mentions": mentions,
        }));
    }
    Ok(agent_rows)
}

/// The runtime's metrics of every agent in Prometheus' text exposition format.
pub fn prometheus(store: &Store, now: Timestamp) -> Result<String> {
    let agents: Agents = store.read_doc(now)?;
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &Scope::All)?;
    let list: Vec<&Agent> = agents.agents.values().collect();
    Ok(health::prometheus(&list, &inbox))
}

/// An agent's inbox at a glance (`top`): its actionable items (newest first), how many of them
/// a worker claimed, and its unacknowledged mentions.
pub struct Glance<'a> {
    pub open: Vec<&'a Item>,
    pub claimed: usize,
    pub mentions: usize,
}

/// Agent `agent`'s inbox at a glance.
pub fn glance<'a>(inbox: &'a Inbox, agent: &str) -> Glance<'a> {
    let mut open: Vec<&Item> = inbox
        .items
        .values()
        .filter(|it| it.agent == agent && matches!(it.status, Status::Pending | Status::Seen))
        .collect();
    open.sort_by_key(|it| std::cmp::Reverse(it.created_ms));
    Glance {
        claimed: open.iter().filter(|it| it.claim.is_some()).count(),
        mentions: inbox.mentions.values().filter(|m| m.agent == agent).count(),
        open,
    }
}
