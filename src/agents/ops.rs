//! Pure operations on the runtime's documents. Each takes the clock (`now`, `now_ms`) and
//! pushes what it wants written besides the documents (events, ledger lines) into [`Fx`].

use serde_json::{Value, json};

use super::*;
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::store::event::NewEvent;
use crate::text::printable;

/// Events and ledger lines an operation produced.
#[derive(Debug, Default)]
pub struct Fx {
    pub events: Vec<NewEvent>,
    pub lines: Vec<(LedgerFile, String)>,
}

impl Fx {
    fn event(&mut self, t: &'static str, actor: &str, target: Option<&str>, payload: Value) {
        self.events.push(NewEvent {
            event_type: t,
            actor: Some(actor.to_string()),
            target: target.map(str::to_string),
            project: None,
            payload,
        });
    }
    fn line(&mut self, l: LedgerFile, v: &impl serde::Serialize) {
        self.lines
            .push((l, serde_json::to_string(v).expect("records serialize")));
    }
    fn log(&mut self, now: Timestamp, kind: &str, text: &str) {
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.lines
            .push((CONFLICTS, format!("{now} | {kind} | {text}")));
    }
}

/// `unknown_agent` (exit 2).
pub fn unknown_agent(name: &str) -> Error {
    Error::invalid(
        Reason::UnknownAgent,
        format!(
            "no agent `{}` is registered (see `conductor agent list`)",
            printable(name)
        ),
    )
}

/// The agent `name` (case-insensitive), or `unknown_agent`.
pub fn agent<'a>(agents: &'a Agents, name: &str) -> Result<&'a Agent> {
    agents
        .agents
        .get(&name.to_ascii_lowercase())
        .ok_or_else(|| unknown_agent(name))
}

/// The agent `name`, mutable.
pub fn agent_mut<'a>(agents: &'a mut Agents, name: &str) -> Result<&'a mut Agent> {
    agents
        .agents
        .get_mut(&name.to_ascii_lowercase())
        .ok_or_else(|| unknown_agent(name))
}

fn next_id(inbox: &mut Inbox, prefix: &str) -> String {
    inbox.last_id += 1;
    format!("{prefix}-{:06}", inbox.last_id)
}

/// One line of an action log, secrets redacted.
pub fn action(now: Timestamp, kind: &str, detail: Value) -> Action {
    Action {
        at: now,
        kind: kind.to_string(),
        detail: super::health::redact(&detail),
    }
}

// ---------------------------------------------------------------------------------------------
// Agents

/// What `agent register` asks for.
pub struct NewAgent {
    pub name: String,
    pub handle: Option<String>,
    pub user_id: Option<String>,
    pub watch: Vec<String>,
}

/// Register an agent, or update its handle, user id and watched channels (its cursor, queue
/// and metrics stay). Returns true when it is new.
pub fn register(
    agents: &mut Agents,
    new: NewAgent,
    cursor: u64,
    now: Timestamp,
    fx: &mut Fx,
) -> Result<bool> {
    text::check_name("agent name", &new.name)?;
    let name = new.name.to_ascii_lowercase();
    let handle = match &new.handle {
        Some(h) => {
            let bare = h.strip_prefix('@').unwrap_or(h);
            text::check_name("handle", bare)?;
            bare.to_ascii_lowercase()
        }
        None => name.clone(),
    };
    if let Some(other) = agents
        .agents
        .values()
        .find(|a| a.name != name && (a.handle == format!("@{handle}") || a.name == handle))
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!(
                "the handle `@{handle}` already belongs to agent `{}`",
                other.name
            ),
        ));
    }
    let mut watch = Vec::new();
    for c in &new.watch {
        let c = text::channel_name(c)?;
        if !watch.contains(&c) {
            watch.push(c);
        }
    }
    let user_id = new.user_id.clone().unwrap_or_else(|| name.clone());
    if user_id.is_empty() || user_id.len() > 128 || user_id.chars().any(char::is_control) {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "a user id is 1 to 128 printable characters",
        ));
    }
    let fresh = !agents.agents.contains_key(&name);
    let a = agents.agents.entry(name.clone()).or_insert_with(|| Agent {
        name: name.clone(),
        handle: String::new(),
        user_id: String::new(),
        watch: Vec::new(),
        registered_at: now,
        cursor,
        queue: Vec::new(),
        metrics: Metrics::default(),
        legacy_run: None,
        legacy_actions: None,
    });
    a.handle = format!("@{handle}");
    a.user_id = user_id;
    a.watch = watch;
    fx.event(
        ev::AGENT_REGISTERED,
        &name,
        None,
        json!({"agent": name, "handle": a.handle, "user_id": a.user_id, "watch": a.watch, "new": fresh}),
    );
    Ok(fresh)
}

// ---------------------------------------------------------------------------------------------
// Posts

/// What `post`, `dm` and a run loop's artifact post ask for.
#[derive(Clone)]
pub struct NewPost {
    /// A channel name, or for a DM the recipient agent.
    pub channel: String,
    pub author: String,
    pub content: String,
    pub reply_to: Option<String>,
    pub priority: Priority,
    pub dm: bool,
}

/// The id of the DM conversation between two names.
pub fn dm_channel(a: &str, b: &str) -> String {
    let (x, y) = if a <= b { (a, b) } else { (b, a) };
    format!("dm:{x}+{y}")
}

fn check_content(content: &str) -> Result<()> {
    if content.trim().is_empty() {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "a post needs some text",
        ));
    }
    if content.len() > MAX_POST_BYTES {
        return Err(Error::invalid(
            Reason::PostTooLarge,
            format!(
                "the post is {} bytes; the limit is {MAX_POST_BYTES}",
                content.len()
            ),
        ));
    }
    Ok(())
}

/// Check an author name given with `--as`.
pub fn check_author(author: &str) -> Result<String> {
    text::check_name("author name", author)?;
    Ok(author.to_ascii_lowercase())
}

/// The agents a text addresses: by handle, then by assignment line (not the author).
pub fn addressed(agents: &Agents, content: &str, author: &str) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for h in text::mentions(content) {
        let handle = format!("@{h}");
        if let Some(a) = agents.agents.values().find(|a| a.handle == handle)
            && a.name != author
            && !out.iter().any(|(n, _)| *n == a.name)
        {
            out.push((a.name.clone(), "handle"));
        }
    }
    for n in text::assigned(content) {
        let handle = format!("@{n}");
        if let Some(a) = agents
            .agents
            .values()
            .find(|a| a.name == n || a.handle == handle)
            && a.name != author
            && !out.iter().any(|(x, _)| *x == a.name)
        {
            out.push((a.name.clone(), "assignment"));
        }
    }
    out
}

/// Find a message in the recent window.
pub fn recent<'a>(channels: &'a Channels, id: &str) -> Option<&'a Message> {
    channels
        .channels
        .values()
        .flat_map(|c| c.recent.iter())
        .find(|m| m.message_id == id)
}

/// Post a message; in the same change, a mention and an inbox item for every agent it
/// addresses (and an item for the author of the message it replies to, and for a DM's
/// recipient). An agent named on a `members:` line that does not watch the channel yet is
/// added to it: the channel joins its watch list and its item's trigger is `channel_added`.
/// `replied` is the message replied to, looked up by the caller.
#[allow(clippy::too_many_arguments)]
pub fn post(
    agents: &mut Agents,
    inbox: &mut Inbox,
    channels: &mut Channels,
    p: NewPost,
    replied: Option<&Message>,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<Message> {
    check_content(&p.content)?;
    let author = check_author(&p.author)?;
    let user_id = agents
        .agents
        .get(&author)
        .map(|a| a.user_id.clone())
        .unwrap_or_else(|| author.clone());
    // A DM goes to an agent, or from an agent back to anyone (a person has no inbox).
    let (channel_id, recipient, to_agent) = if p.dm {
        let (to, to_agent) = match agent(agents, &p.channel) {
            Ok(a) => (a.name.clone(), true),
            Err(_) if agents.agents.contains_key(&author) => (check_author(&p.channel)?, false),
            Err(e) => return Err(e),
        };
        if to == author {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "a DM to yourself goes nowhere",
            ));
        }
        (dm_channel(&author, &to), Some(to), to_agent)
    } else {
        (text::channel_name(&p.channel)?, None, false)
    };
    if let Some(r) = &p.reply_to
        && replied.is_none_or(|m| m.channel_id != channel_id)
    {
        return Err(Error::invalid(
            Reason::MessageNotFound,
            format!(
                "no message `{}` in `{channel_id}` to reply to",
                printable(r)
            ),
        ));
    }
    let mut targets: Vec<(String, &'static str, &'static str)> = Vec::new(); // (agent, trigger, via)
    if let Some(to) = &recipient {
        if to_agent {
            targets.push((to.clone(), "dm", "dm"));
        }
    } else {
        let members = text::members(&p.content);
        for (n, via) in addressed(agents, &p.content, &author) {
            let joins = members.contains(&n)
                && agents
                    .agents
                    .get(&n)
                    .is_some_and(|a| !a.watch.contains(&channel_id));
            if joins && let Some(a) = agents.agents.get_mut(&n) {
                a.watch.push(channel_id.clone());
                targets.push((n, "channel_added", via));
            } else {
                targets.push((n, "mention", via));
            }
        }
    }
    if let Some(m) = replied
        && agents.agents.contains_key(&m.author)
        && m.author != author
        && !targets.iter().any(|(n, _, _)| *n == m.author)
    {
        targets.push((m.author.clone(), "reply", "reply"));
    }
    let message_id = next_id(inbox, "msg");
    let msg = Message {
        message_id: message_id.clone(),
        channel_id: channel_id.clone(),
        kind: if p.dm { "dm" } else { "channel" }.into(),
        author: author.clone(),
        user_id,
        content: p.content.clone(),
        reply_to: p.reply_to.clone(),
        addressed: targets.iter().map(|(n, _, _)| n.clone()).collect(),
        created_at: now,
        created_ms: now_ms,
        edited_at: None,
    };
    let ch = channels
        .channels
        .entry(channel_id.clone())
        .or_insert_with(|| Channel {
            created_at: now,
            message_count: 0,
            recent: Vec::new(),
        });
    ch.message_count += 1;
    ch.recent.push(msg.clone());
    if ch.recent.len() > RECENT {
        let excess = ch.recent.len() - RECENT;
        ch.recent.drain(..excess);
    }
    fx.line(MESSAGES, &json!({"op": "created", "message": msg}));
    let (etype, scope) = if p.dm {
        (ev::DM_MESSAGE_CREATED, "dm")
    } else {
        (ev::CHANNEL_MESSAGE_CREATED, "channel")
    };
    fx.event(
        etype,
        &author,
        recipient.as_deref(),
        json!({"channel_id": channel_id, "message_id": message_id, "post_id": message_id,
               "visibility_scope": scope, "addressed": msg.addressed, "reply_to": p.reply_to,
               "preview": text::preview(&p.content)}),
    );
    for (name, trigger, via) in targets {
        add_item(
            inbox, &msg, &name, trigger, via, p.priority, now, now_ms, fx,
        );
    }
    Ok(msg)
}

/// Create the mention (for `mention` triggers) and the inbox item for one agent.
#[allow(clippy::too_many_arguments)]
pub fn add_item(
    inbox: &mut Inbox,
    msg: &Message,
    agent: &str,
    trigger: &str,
    via: &str,
    priority: Priority,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> String {
    let source_type = if msg.kind == "dm" {
        "dm"
    } else {
        "channel_message"
    };
    // A mention for an address in the text (a `members:` line that adds the agent too).
    let mention_id = if trigger == "mention" || trigger == "channel_added" {
        let id = next_id(inbox, "men");
        inbox.mentions.insert(
            id.clone(),
            Mention {
                id: id.clone(),
                agent: agent.to_string(),
                source_type: source_type.into(),
                source_id: msg.message_id.clone(),
                channel_id: msg.channel_id.clone(),
                author: msg.author.clone(),
                via: via.to_string(),
                created_at: now,
                acknowledged_at: None,
                claim: None,
            },
        );
        fx.event(
            ev::MENTION_CREATED,
            &msg.author,
            Some(agent),
            json!({"mention_id": id, "channel_id": msg.channel_id, "message_id": msg.message_id,
                   "post_id": msg.message_id, "via": via}),
        );
        Some(id)
    } else {
        None
    };
    let id = next_id(inbox, "inb");
    let item = Item {
        id: id.clone(),
        agent: agent.to_string(),
        source_type: source_type.into(),
        source_id: msg.message_id.clone(),
        channel_id: msg.channel_id.clone(),
        trigger_type: trigger.to_string(),
        status: Status::Pending,
        priority,
        created_at: now,
        created_ms: now_ms,
        seen_at: None,
        completed_at: None,
        completion_ref: None,
        preview: text::preview(&msg.content),
        author: msg.author.clone(),
        mention_id,
        claim: None,
        attempts: 0,
    };
    fx.event(
        ev::INBOX_ITEM_CREATED,
        &msg.author,
        Some(agent),
        json!({"item_id": id, "channel_id": msg.channel_id, "message_id": msg.message_id,
               "post_id": msg.message_id, "trigger_type": trigger, "priority": priority,
               "status": "pending"}),
    );
    inbox.items.insert(id.clone(), item);
    id
}

/// Create the `channel_added` inbox item telling `agent` it now watches `channel` (added by
/// `agent register --watch` to a channel that already has messages), unless an item for
/// agent + source (the channel) + trigger exists, live or finished (`finished`).
#[allow(clippy::too_many_arguments)]
pub fn channel_added(
    inbox: &mut Inbox,
    agent: &str,
    channel: &str,
    finished: &dyn Fn(&str, &str, &str) -> bool,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Option<String> {
    if has_item(inbox, agent, channel, "channel_added") || finished(agent, channel, "channel_added")
    {
        return None;
    }
    let id = next_id(inbox, "inb");
    let item = Item {
        id: id.clone(),
        agent: agent.to_string(),
        source_type: "channel".into(),
        source_id: channel.to_string(),
        channel_id: channel.to_string(),
        trigger_type: "channel_added".into(),
        status: Status::Pending,
        priority: Priority::Low,
        created_at: now,
        created_ms: now_ms,
        seen_at: None,
        completed_at: None,
        completion_ref: None,
        preview: format!("added to channel {channel}"),
        author: "conductor".into(),
        mention_id: None,
        claim: None,
        attempts: 0,
    };
    fx.event(
        ev::INBOX_ITEM_CREATED,
        "conductor",
        Some(agent),
        json!({"item_id": id, "channel_id": channel, "message_id": null, "post_id": null,
               "trigger_type": "channel_added", "priority": Priority::Low, "status": "pending"}),
    );
    inbox.items.insert(id.clone(), item);
    Some(id)
}

/// True when an actionable item for `agent` from `source` with `trigger` exists.
pub fn has_item(inbox: &Inbox, agent: &str, source: &str, trigger: &str) -> bool {
    inbox
        .items
        .values()
        .any(|i| i.agent == agent && i.source_id == source && i.trigger_type == trigger)
}

/// Edit a message (only its author may). Agents newly addressed get a mention and an item,
/// deduplicated by agent + source + trigger (`finished` holds the keys of finished items).
#[allow(clippy::too_many_arguments)]
pub fn edit(
    agents: &Agents,
    inbox: &mut Inbox,
    channels: &mut Channels,
    original: Message,
    author: &str,
    content: String,
    finished: &dyn Fn(&str, &str, &str) -> bool,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<Message> {
    check_content(&content)?;
    let author = check_author(author)?;
    if original.author != author {
        return Err(Error::invalid(
            Reason::NotAuthor,
            format!(
                "message `{}` was posted by `{}`; only its author can edit it",
                original.message_id, original.author
            ),
        ));
    }
    let mut msg = original;
    msg.content = content;
    msg.edited_at = Some(now);
    let mut new_targets = Vec::new();
    if msg.kind != "dm" {
        for (n, via) in addressed(agents, &msg.content, &author) {
            if !msg.addressed.contains(&n) {
                msg.addressed.push(n.clone());
            }
            // (an agent a `members:` line added has its `channel_added` item for this post)
            let known = |t: &str| {
                has_item(inbox, &n, &msg.message_id, t) || finished(&n, &msg.message_id, t)
            };
            if !known("mention") && !known("channel_added") {
                new_targets.push((n, via));
            }
        }
    }
    if let Some(ch) = channels.channels.get_mut(&msg.channel_id)
        && let Some(m) = ch
            .recent
            .iter_mut()
            .find(|m| m.message_id == msg.message_id)
    {
        *m = msg.clone();
    }
    fx.line(MESSAGES, &json!({"op": "edited", "message": msg}));
    let (etype, target) = if msg.kind == "dm" {
        (ev::DM_MESSAGE_EDITED, msg.addressed.first().cloned())
    } else {
        (ev::CHANNEL_MESSAGE_EDITED, None)
    };
    fx.event(
        etype,
        &author,
        target.as_deref(),
        json!({"channel_id": msg.channel_id, "message_id": msg.message_id, "post_id": msg.message_id,
               "addressed": msg.addressed, "preview": text::preview(&msg.content)}),
    );
    for (n, via) in new_targets {
        add_item(
            inbox,
            &msg,
            &n,
            "mention",
            via,
            Priority::Normal,
            now,
            now_ms,
            fx,
        );
    }
    Ok(msg)
}

// ---------------------------------------------------------------------------------------------
// Inbox statuses

/// `unknown_item` (exit 2).
pub fn unknown_item(id: &str) -> Error {
    Error::invalid(
        Reason::UnknownItem,
        format!(
            "no actionable inbox item or unacknowledged mention `{}` (see `conductor inbox`)",
            printable(id)
        ),
    )
}

fn live_claim_by_other<'a>(
    claim: &'a Option<Claim>,
    agent: Option<&str>,
    now_ms: i64,
) -> Option<&'a Claim> {
    claim
        .as_ref()
        .filter(|c| c.expires_ms > now_ms && agent != Some(c.agent.as_str()))
}

fn claim_held_error(id: &str, c: &Claim, now_ms: i64) -> Error {
    Error::invalid(
        Reason::ClaimHeld,
        format!(
            "`{id}` is claimed by `{}` ({}) for {} more seconds; pass --agent {} or wait",
            c.agent,
            c.worker,
            retry_after(c, now_ms),
            c.agent
        ),
    )
}

/// Seconds until a claim expires, rounded up.
pub fn retry_after(c: &Claim, now_ms: i64) -> u64 {
    ((c.expires_ms - now_ms).max(0) as u64).div_ceil(1000)
}

/// Mark an item seen (pending → seen; seen stays seen). Records event_to_seen.
pub fn mark_seen(
    agents: &mut Agents,
    inbox: &mut Inbox,
    id: &str,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<Item> {
    let item = inbox.items.get_mut(id).ok_or_else(|| unknown_item(id))?;
    if item.status == Status::Pending {
        item.status = Status::Seen;
        item.seen_at = Some(now);
        if let Some(a) = agents.agents.get_mut(&item.agent) {
            a.metrics
                .event_to_seen
                .observe((now_ms - item.created_ms).max(0) as u64);
        }
        fx.event(
            ev::INBOX_ITEM_UPDATED,
            &item.agent,
            Some(&item.agent),
            json!({"item_id": id, "status": "seen", "channel_id": item.channel_id,
                   "message_id": item.source_id}),
        );
    }
    Ok(item.clone())
}

/// A JSON object's entries as KEY=VALUE strings for [`parse_refs`] (a value that is not a
/// string as its JSON text).
pub fn refs_of(map: &serde_json::Map<String, Value>) -> Vec<String> {
    map.iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            )
        })
        .collect()
}

/// The completion reference of an item finished with `status`, from KEY=VALUE strings
/// ([`parse_refs`]): none for a skip that gives none.
pub fn completion_ref(
    status: Status,
    refs: &[String],
) -> Result<Option<serde_json::Map<String, Value>>> {
    let refs = parse_refs(refs)?;
    Ok(if status == Status::Skipped && refs.is_empty() {
        None
    } else {
        Some(refs)
    })
}

/// Parse `k=v` references into a completion_ref object.
pub fn parse_refs(refs: &[String]) -> Result<serde_json::Map<String, Value>> {
    let mut m = serde_json::Map::new();
    for r in refs {
        let Some((k, v)) = r.split_once('=') else {
            return Err(Error::invalid(
                Reason::InvalidRef,
                format!(
                    "`{}` is not a reference: use KEY=VALUE, like post_id=msg-000012",
                    printable(r)
                ),
            ));
        };
        let k = k.trim();
        if k.is_empty()
            || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || v.trim().is_empty()
        {
            return Err(Error::invalid(
                Reason::InvalidRef,
                format!(
                    "`{}` is not a reference: KEY is letters, digits and `_`, VALUE is not empty",
                    printable(r)
                ),
            ));
        }
        m.insert(k.to_string(), Value::String(v.trim().to_string()));
    }
    Ok(m)
}

/// Finish an item: completed (with a non-empty completion_ref object, always) or skipped. It
/// leaves the live document for `runtime-inbox.jsonl`; its mention is acknowledged.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    agents: &mut Agents,
    inbox: &mut Inbox,
    id: &str,
    status: Status,
    completion_ref: Option<serde_json::Map<String, Value>>,
    by: Option<&str>,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<Item> {
    match status {
        Status::Completed if completion_ref.as_ref().is_none_or(|r| r.is_empty()) => {
            return Err(Error::invalid(
                Reason::CompletionRefRequired,
                "completing an item needs a non-empty completion_ref (for example --ref post_id=msg-000012)",
            ));
        }
        Status::Completed | Status::Skipped => {}
        Status::Expired => {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "`expired` is set by the system only",
            ));
        }
        Status::Pending | Status::Seen => unreachable!("finish is for terminal statuses"),
    }
    let item = inbox.items.get(id).ok_or_else(|| unknown_item(id))?;
    if let Some(c) = live_claim_by_other(&item.claim, by, now_ms) {
        return Err(claim_held_error(id, c, now_ms));
    }
    let mut item = inbox.items.remove(id).expect("just found");
    if let Some(a) = agents.agents.get_mut(&item.agent) {
        a.queue.retain(|q| q != id);
    }
    if let (Status::Completed, Some(c)) = (status, &item.claim)
        && let Some(a) = agents.agents.get_mut(&c.agent)
    {
        a.metrics
            .claim_to_complete
            .observe((now_ms - c.claimed_ms).max(0) as u64);
        a.metrics.completed += 1;
        a.metrics.last_success_at = Some(now);
    }
    item.status = status;
    item.completed_at = Some(now);
    item.completion_ref = completion_ref;
    let holder = item.claim.take();
    fx.line(
        INBOX_DONE,
        &json!({"item": item, "finished_by": by, "last_claim": holder}),
    );
    fx.event(
        ev::INBOX_ITEM_UPDATED,
        by.unwrap_or(&item.agent),
        Some(&item.agent),
        json!({"item_id": id, "status": status.as_str(), "completion_ref": item.completion_ref,
               "channel_id": item.channel_id, "message_id": item.source_id}),
    );
    if let Some(mid) = &item.mention_id
        && inbox.mentions.contains_key(mid)
    {
        ack_one(inbox, mid, by.unwrap_or(&item.agent), now, fx);
    }
    Ok(item)
}

/// True when an actionable item has outlived [`ITEM_EXPIRY_SECONDS`] with no live claim.
pub fn due_to_expire(item: &Item, now_ms: i64) -> bool {
    now_ms - item.created_ms >= ITEM_EXPIRY_SECONDS * 1000
        && item.claim.as_ref().is_none_or(|c| c.expires_ms <= now_ms)
}

/// Expire every item [`due_to_expire`]: it leaves the live document for `runtime-inbox.jsonl`
/// with status `expired` (and `expired_at`), leaves its agent's queue, and an
/// `inbox.item.updated` event says so (actor `conductor`: the system). Its mention, if still
/// unacknowledged, stays. Called by every transaction that reads and writes the inbox, so the
/// outcome depends only on the documents and the clock passed in. Returns the expired ids.
pub fn expire(
    agents: &mut Agents,
    inbox: &mut Inbox,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Vec<String> {
    let due: Vec<String> = inbox
        .items
        .values()
        .filter(|i| due_to_expire(i, now_ms))
        .map(|i| i.id.clone())
        .collect();
    for id in &due {
        let mut item = inbox.items.remove(id).expect("just listed");
        if let Some(a) = agents.agents.get_mut(&item.agent) {
            a.queue.retain(|q| q != id);
        }
        item.status = Status::Expired;
        let holder = item.claim.take();
        fx.line(
            INBOX_DONE,
            &json!({"item": item, "finished_by": null, "last_claim": holder, "expired_at": now,
                    "reason": format!("still {} {} s after it was created", item_status_word(&item), ITEM_EXPIRY_SECONDS)}),
        );
        fx.event(
            ev::INBOX_ITEM_UPDATED,
            "conductor",
            Some(&item.agent),
            json!({"item_id": id, "status": "expired", "channel_id": item.channel_id,
                   "message_id": item.source_id, "created_at": item.created_at}),
        );
    }
    due
}

fn item_status_word(item: &Item) -> &'static str {
    if item.seen_at.is_some() {
        "seen"
    } else {
        "pending"
    }
}

fn ack_one(inbox: &mut Inbox, id: &str, by: &str, now: Timestamp, fx: &mut Fx) {
    if let Some(mut m) = inbox.mentions.remove(id) {
        m.acknowledged_at = Some(now);
        m.claim = None;
        fx.line(MENTIONS_DONE, &m);
        fx.event(
            ev::MENTION_ACKNOWLEDGED,
            by,
            Some(&m.agent),
            json!({"mention_id": id, "channel_id": m.channel_id, "message_id": m.source_id}),
        );
    }
}

/// Acknowledge mentions (all ids must exist: nothing changes otherwise).
pub fn ack(inbox: &mut Inbox, ids: &[String], now: Timestamp, fx: &mut Fx) -> Result<Vec<Mention>> {
    let mut out = Vec::new();
    for id in ids {
        let m = inbox.mentions.get(id).ok_or_else(|| {
            Error::invalid(
                Reason::UnknownMention,
                format!(
                    "no unacknowledged mention `{}` (see `conductor mentions`)",
                    printable(id)
                ),
            )
        })?;
        out.push(m.clone());
    }
    for m in &out {
        ack_one(inbox, &m.id, &m.agent.clone(), now, fx);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Claims

/// What a claim request got.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ClaimOutcome {
    /// Granted (`takeover` when an expired claim of someone else was taken over).
    Ok {
        id: String,
        claim: Claim,
        takeover: bool,
        previous: Option<Claim>,
    },
    /// Someone else holds it.
    Conflict {
        id: String,
        holder: String,
        worker: String,
        expires_at: Timestamp,
        expired: bool,
        retry_after_seconds: u64,
        message: String,
    },
}

/// Check a TTL.
pub fn check_ttl(ttl: u64) -> Result<u64> {
    if (TTL_MIN..=TTL_MAX).contains(&ttl) {
        Ok(ttl)
    } else {
        Err(Error::invalid(
            Reason::InvalidTtl,
            format!("a claim TTL is {TTL_MIN} to {TTL_MAX} seconds, not {ttl}"),
        ))
    }
}

fn claim_slot<'a>(inbox: &'a mut Inbox, id: &str) -> Result<(&'a mut Option<Claim>, String)> {
    if let Some(i) = inbox.items.get_mut(id) {
        let owner = i.agent.clone();
        return Ok((&mut i.claim, owner));
    }
    if let Some(m) = inbox.mentions.get_mut(id) {
        let owner = m.agent.clone();
        return Ok((&mut m.claim, owner));
    }
    Err(unknown_item(id))
}

/// Claim an item or mention for `agent`/`worker` for `ttl` seconds. The same holder renews.
/// Another holder's live claim is a conflict (with `retry_after_seconds`); an expired one is
/// taken over only with `takeover`, counted in the agent's `timeout_recoveries` and logged.
#[allow(clippy::too_many_arguments)]
pub fn claim(
    agents: &mut Agents,
    inbox: &mut Inbox,
    id: &str,
    agent_name: &str,
    worker: &str,
    ttl: u64,
    takeover: bool,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<ClaimOutcome> {
    let ttl = check_ttl(ttl)?;
    let who = agent(agents, agent_name)?.name.clone();
    let (slot, owner) = claim_slot(inbox, id)?;
    let mut previous = None;
    let mut took_over = false;
    if let Some(c) = slot.as_ref()
        && !(c.agent == who && c.worker == worker)
    {
        let expired = c.expires_ms <= now_ms;
        if !expired || !takeover {
            let retry = retry_after(c, now_ms);
            let message = if expired {
                format!(
                    "the claim of `{}` ({}) expired; pass --takeover to take it over",
                    c.agent, c.worker
                )
            } else {
                format!("held by `{}` ({}); retry in {retry} s", c.agent, c.worker)
            };
            let out = ClaimOutcome::Conflict {
                id: id.to_string(),
                holder: c.agent.clone(),
                worker: c.worker.clone(),
                expires_at: c.expires_at,
                expired,
                retry_after_seconds: retry,
                message,
            };
            fx.log(
                now,
                "CONFLICT",
                &format!(
                    "{who} ({worker}) asked for {id}, held by {} ({}) until {}",
                    c.agent, c.worker, c.expires_at
                ),
            );
            return Ok(out);
        }
        previous = Some(c.clone());
        took_over = true;
    }
    let c = Claim {
        agent: who.clone(),
        worker: worker.to_string(),
        ttl_seconds: ttl,
        claimed_at: now,
        claimed_ms: now_ms,
        expires_ms: now_ms + (ttl as i64) * 1000,
        expires_at: ts(now_ms + (ttl as i64) * 1000),
    };
    let renewal = slot
        .as_ref()
        .is_some_and(|p| p.agent == who && p.worker == worker);
    *slot = Some(c.clone());
    if let Some(item) = inbox.items.get_mut(id)
        && !renewal
    {
        item.attempts += 1;
        if let Some(a) = agents.agents.get_mut(&who) {
            a.metrics
                .event_to_claim
                .observe((now_ms - item.created_ms).max(0) as u64);
        }
    }
    if took_over {
        let p = previous.as_ref().expect("set with took_over");
        if let Some(a) = agents.agents.get_mut(&who) {
            a.metrics.timeout_recoveries += 1;
        }
        fx.log(
            now,
            "TAKEOVER",
            &format!(
                "{who} ({worker}) took over {id} from {} ({}), expired at {}",
                p.agent, p.worker, p.expires_at
            ),
        );
    }
    let etype = if took_over {
        ev::CLAIM_TAKEN_OVER
    } else if renewal {
        ev::CLAIM_RENEWED
    } else {
        ev::CLAIM_ACQUIRED
    };
    fx.event(
        etype,
        &who,
        Some(&owner),
        json!({"item_id": id, "worker": worker, "ttl_seconds": ttl, "expires_at": c.expires_at,
               "previous_holder": previous.as_ref().map(|p| &p.agent)}),
    );
    Ok(ClaimOutcome::Ok {
        id: id.to_string(),
        claim: c,
        takeover: took_over,
        previous,
    })
}

/// Renew a claim (only its holder agent; the TTL restarts, default the claim's own).
pub fn renew(
    inbox: &mut Inbox,
    id: &str,
    agent_name: &str,
    ttl: Option<u64>,
    now: Timestamp,
    now_ms: i64,
    fx: &mut Fx,
) -> Result<Claim> {
    let (slot, owner) = claim_slot(inbox, id)?;
    let Some(c) = slot
        .as_mut()
        .filter(|c| c.agent == agent_name.to_ascii_lowercase())
    else {
        return Err(not_holder(id, slot.as_ref()));
    };
    let ttl = check_ttl(ttl.unwrap_or(c.ttl_seconds))?;
    c.ttl_seconds = ttl;
    c.expires_ms = now_ms + ttl as i64 * 1000;
    c.expires_at = ts(c.expires_ms);
    let c = c.clone();
    fx.event(
        ev::CLAIM_RENEWED,
        &c.agent,
        Some(&owner),
        json!({"item_id": id, "worker": c.worker, "ttl_seconds": ttl, "expires_at": c.expires_at}),
    );
    let _ = now;
    Ok(c)
}

fn not_holder(id: &str, c: Option<&Claim>) -> Error {
    match c {
        Some(c) => Error::invalid(
            Reason::NotHolder,
            format!("`{id}` is claimed by `{}`, not by this agent", c.agent),
        ),
        None => Error::invalid(Reason::NotHolder, format!("`{id}` is not claimed")),
    }
}

/// Release a claim (only its holder agent).
pub fn release(
    inbox: &mut Inbox,
    id: &str,
    agent_name: &str,
    reason: &str,
    fx: &mut Fx,
) -> Result<Claim> {
    let (slot, owner) = claim_slot(inbox, id)?;
    if slot
        .as_ref()
        .is_none_or(|c| c.agent != agent_name.to_ascii_lowercase())
    {
        return Err(not_holder(id, slot.as_ref()));
    }
    let c = slot.take().expect("checked");
    fx.event(
        ev::CLAIM_RELEASED,
        &c.agent,
        Some(&owner),
        json!({"item_id": id, "worker": c.worker, "reason": reason}),
    );
    Ok(c)
}

// ---------------------------------------------------------------------------------------------
// The agent-scoped feed and routing

/// True when an event belongs in `agent`'s feed: addressed to it, or a message in a channel it
/// watches or that addresses it.
pub fn concerns(agent: &Agent, e: &crate::store::event::Event) -> bool {
    if e.target.as_deref() == Some(agent.name.as_str()) {
        return true;
    }
    if !e.event_type.starts_with("channel.message.") {
        return false;
    }
    let channel = e.payload.get("channel_id").and_then(Value::as_str);
    channel.is_some_and(|c| agent.watch.iter().any(|w| w == c))
        || e.payload
            .get("addressed")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|n| n.as_str() == Some(agent.name.as_str())))
}

/// A routing decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Route {
    /// An inbox item to queue.
    Queue { item_id: String },
    /// A channel post addressed to the agent (its inbox item carries the work).
    Addressed { message_id: String },
    /// A post accepted because the loop runs in broadcast mode (an item is created for it).
    Broadcast { message_id: String },
    /// Not actionable, with the reason.
    Ignored { reason: &'static str },
}

/// The reasons a routed event is not actionable.
pub const REASONS: [&str; 6] = [
    "not_addressed",
    "self_authored",
    "channel_not_watched",
    "event_type_not_supported",
    "missing_identifiers",
    "message_not_found",
];

/// Route one event of the agent's feed. `lookup` resolves a message by id.
pub fn route(
    agent: &Agent,
    e: &crate::store::event::Event,
    broadcast: bool,
    lookup: &dyn Fn(&str) -> Option<Message>,
) -> Route {
    let s = |k: &str| e.payload.get(k).and_then(Value::as_str).map(str::to_string);
    match e.event_type.as_str() {
        ev::INBOX_ITEM_CREATED => match s("item_id") {
            Some(item_id) => Route::Queue { item_id },
            None => Route::Ignored {
                reason: "missing_identifiers",
            },
        },
        ev::CHANNEL_MESSAGE_CREATED | ev::CHANNEL_MESSAGE_EDITED => {
            let (Some(channel), Some(message_id)) = (s("channel_id"), s("message_id")) else {
                return Route::Ignored {
                    reason: "missing_identifiers",
                };
            };
            if e.actor.as_deref() == Some(agent.name.as_str()) {
                return Route::Ignored {
                    reason: "self_authored",
                };
            }
            if !agent.watch.contains(&channel) {
                return Route::Ignored {
                    reason: "channel_not_watched",
                };
            }
            let Some(m) = lookup(&message_id) else {
                return Route::Ignored {
                    reason: "message_not_found",
                };
            };
            if m.addressed.contains(&agent.name) {
                Route::Addressed { message_id }
            } else if broadcast {
                Route::Broadcast { message_id }
            } else {
                Route::Ignored {
                    reason: "not_addressed",
                }
            }
        }
        _ => Route::Ignored {
            reason: "event_type_not_supported",
        },
    }
}

/// The order work is picked in: priority, then age, then id.
pub fn pick_order(a: &Item, b: &Item) -> std::cmp::Ordering {
    (a.priority, a.created_ms, &a.id).cmp(&(b.priority, b.created_ms, &b.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    fn setup() -> (Agents, Inbox, Channels) {
        let mut agents = Agents::empty(t());
        let mut fx = Fx::default();
        for n in ["scout", "lint"] {
            register(
                &mut agents,
                NewAgent {
                    name: n.into(),
                    handle: None,
                    user_id: None,
                    watch: vec!["ops".into()],
                },
                0,
                t(),
                &mut fx,
            )
            .unwrap();
        }
        (agents, Inbox::empty(t()), Channels::empty(t()))
    }

    fn say(a: &Agents, i: &mut Inbox, c: &mut Channels, text: &str) -> (Message, Fx) {
        let mut fx = Fx::default();
        let p = NewPost {
            channel: "ops".into(),
            author: "ana".into(),
            content: text.into(),
            reply_to: None,
            priority: Priority::Normal,
            dm: false,
        };
        let mut a = a.clone();
        (post(&mut a, i, c, p, None, t(), 1000, &mut fx).unwrap(), fx)
    }

    #[test]
    fn a_post_creates_mention_and_item_together() {
        let (a, mut i, mut c) = setup();
        let (m, fx) = say(&a, &mut i, &mut c, "thanks @scout.\nnext: lint");
        assert_eq!(m.addressed, ["scout", "lint"]);
        assert_eq!(i.items.len(), 2);
        assert_eq!(i.mentions.len(), 2);
        let types: Vec<&str> = fx.events.iter().map(|e| e.event_type).collect();
        assert_eq!(
            types,
            [
                "channel.message.created",
                "mention.created",
                "inbox.item.created",
                "mention.created",
                "inbox.item.created"
            ]
        );
    }

    #[test]
    fn completion_needs_a_reference_and_claims_expire_before_takeover() {
        let (mut a, mut i, mut c) = setup();
        say(&a, &mut i, &mut c, "@scout go");
        let id = i.items.keys().next().unwrap().clone();
        let mut fx = Fx::default();
        let e = finish(
            &mut a,
            &mut i,
            &id,
            Status::Completed,
            Some(Default::default()),
            None,
            t(),
            0,
            &mut fx,
        );
        assert_eq!(e.unwrap_err().reason(), "completion_ref_required");
        let ok = claim(
            &mut a,
            &mut i,
            &id,
            "scout",
            "w1",
            15,
            false,
            t(),
            0,
            &mut fx,
        )
        .unwrap();
        assert!(matches!(
            ok,
            ClaimOutcome::Ok {
                takeover: false,
                ..
            }
        ));
        // Live: even --takeover is a conflict.
        let c2 = claim(
            &mut a,
            &mut i,
            &id,
            "lint",
            "w2",
            15,
            true,
            t(),
            14_999,
            &mut fx,
        )
        .unwrap();
        assert!(matches!(
            c2,
            ClaimOutcome::Conflict {
                retry_after_seconds: 1,
                expired: false,
                ..
            }
        ));
        // Expired without --takeover: still a conflict.
        let c3 = claim(
            &mut a,
            &mut i,
            &id,
            "lint",
            "w2",
            15,
            false,
            t(),
            15_000,
            &mut fx,
        )
        .unwrap();
        assert!(matches!(c3, ClaimOutcome::Conflict { expired: true, .. }));
        let c4 = claim(
            &mut a,
            &mut i,
            &id,
            "lint",
            "w2",
            15,
            true,
            t(),
            15_000,
            &mut fx,
        )
        .unwrap();
        assert!(matches!(c4, ClaimOutcome::Ok { takeover: true, .. }));
        assert_eq!(a.agents["lint"].metrics.timeout_recoveries, 1);
        assert!(
            claim(
                &mut a,
                &mut i,
                &id,
                "lint",
                "w2",
                14,
                false,
                t(),
                0,
                &mut fx
            )
            .is_err()
        );
    }

    #[test]
    fn routing_reasons() {
        let (a, mut i, mut c) = setup();
        let (m, fx) = say(&a, &mut i, &mut c, "just chatting");
        let ev_of = |n: &NewEvent, actor: &str| crate::store::event::Event {
            seq: 1,
            event_id: "e".into(),
            event_type: n.event_type.into(),
            actor: Some(actor.into()),
            target: n.target.clone(),
            project: None,
            payload: n.payload.clone(),
            created_at: t(),
            txn_end: None,
        };
        let scout = &a.agents["scout"];
        let found = |_: &str| Some(m.clone());
        let none = |_: &str| None;
        let e = ev_of(&fx.events[0], "ana");
        assert_eq!(
            route(scout, &e, false, &found),
            Route::Ignored {
                reason: "not_addressed"
            }
        );
        assert!(matches!(
            route(scout, &e, true, &found),
            Route::Broadcast { .. }
        ));
        assert_eq!(
            route(scout, &e, false, &none),
            Route::Ignored {
                reason: "message_not_found"
            }
        );
        let own = ev_of(&fx.events[0], "scout");
        assert_eq!(
            route(scout, &own, false, &found),
            Route::Ignored {
                reason: "self_authored"
            }
        );
        let mut other = e.clone();
        other.payload["channel_id"] = "elsewhere".into();
        assert_eq!(
            route(scout, &other, false, &found),
            Route::Ignored {
                reason: "channel_not_watched"
            }
        );
        other.payload = json!({});
        assert_eq!(
            route(scout, &other, false, &found),
            Route::Ignored {
                reason: "missing_identifiers"
            }
        );
        other.event_type = "mention.acknowledged".into();
        assert_eq!(
            route(scout, &other, false, &found),
            Route::Ignored {
                reason: "event_type_not_supported"
            }
        );
    }
}
