//! Canopy's agent API (`/api/v1/...`), the shapes CanopyKit 0.1.0 expects, over the agents
//! domain's documents and ledgers. Every write is one store transaction through the domain's
//! pure operations (`conductor::agents::ops`); every answer is JSON.

use serde_json::{Map, Value, json};
use tiny_http::Method;

use super::{Reply, Req, Shared};
use conductor::agents::{self, Agents, Channels, Inbox, Priority, Status, ops};
use conductor::error::Error;
use conductor::store::Store;
use conductor::store::event::Event;
use conductor::time::Timestamp;

/// Default and largest page sizes.
const LIMIT_DEFAULT: u64 = 50;
const LIMIT_MAX: u64 = 500;
/// The hint a heartbeat gives for the next look, in seconds (sooner with work waiting).
const POLL_HINT: u64 = 30;
const POLL_HINT_BUSY: u64 = 5;
/// The run files' heartbeat (not a journal event: a heartbeat never wakes the run loops).
pub use conductor::agents::service::HEARTBEAT_FILE;

#[derive(Clone, Copy, PartialEq)]
enum Route {
    MyEvents,
    Heartbeat,
    Inbox,
    InboxItem,
    Messages,
    Message,
    MentionClaim,
    Events,
}

fn route(segs: &[&str]) -> Option<(Route, &'static [Method])> {
    use Method::*;
    Some(match segs {
        ["api", "v1", "agents", "me", "events"] => (Route::MyEvents, &[Get]),
        ["api", "v1", "agents", "me", "heartbeat"] => (Route::Heartbeat, &[Get, Post]),
        ["api", "v1", "agents", "me", "inbox"] => (Route::Inbox, &[Get, Patch]),
        ["api", "v1", "agents", "me", "inbox", _] => (Route::InboxItem, &[Patch]),
        ["api", "v1", "channels", _, "messages"] => (Route::Messages, &[Get, Post]),
        ["api", "v1", "channels", _, "messages", _] => (Route::Message, &[Get]),
        ["api", "v1", "mentions", "claim"] => (Route::MentionClaim, &[Get, Post, Delete]),
        ["api", "v1", "events"] => (Route::Events, &[Get]),
        _ => return None,
    })
}

/// Answer an API request.
pub fn handle(shared: &Shared, req: &Req, key: Option<&str>) -> Reply {
    let segs: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let Some((r, methods)) = route(&segs) else {
        return Reply::error(
            404,
            "not_found",
            format!("no such endpoint: /{}", segs.join("/")),
        );
    };
    if !methods.contains(&req.method) {
        let allow = methods
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let mut rep = Reply::error(
            405,
            "method_not_allowed",
            format!("{} is not allowed here (allowed: {allow})", req.method),
        );
        rep.headers.push(("Allow".into(), allow));
        return rep;
    }
    let store = &shared.store;
    let now = Timestamp::now();
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return Reply::error(401, "unauthorized", "missing X-API-Key header");
    };
    let me = match super::keys::agent_for(store, now, key) {
        Ok(Some(me)) => me,
        Ok(None) => return Reply::error(401, "unauthorized", "invalid API key"),
        Err(e) => return Reply::from_error(&e),
    };
    let out = match r {
        Route::MyEvents => my_events(store, now, req, &me),
        Route::Events => global_events(store, now, req),
        Route::Heartbeat => heartbeat(store, now, &me),
        Route::Inbox if req.method == Method::Get => inbox(store, now, req, &me),
        Route::Inbox => inbox_batch(store, now, req, &me),
        Route::InboxItem => inbox_patch(store, now, req, &me, segs[5]),
        Route::Messages if req.method == Method::Get => messages(store, now, req, segs[3]),
        Route::Messages => post(store, now, req, &me, segs[3]),
        Route::Message => message(store, now, segs[3], segs[5]),
        Route::MentionClaim => mention_claim(store, now, req, &me),
    };
    out.unwrap_or_else(|e| e)
}

type Answer = std::result::Result<Reply, Reply>;

fn lib<T, E: Into<Error>>(r: std::result::Result<T, E>) -> std::result::Result<T, Reply> {
    r.map_err(|e| Reply::from_error(&e.into()))
}

fn bad(field: &str, message: impl Into<String>) -> Reply {
    let mut r = Reply::error(400, "invalid_input", message);
    if let Ok(mut v) = serde_json::from_slice::<Value>(&r.body) {
        v["field"] = json!(field);
        r.body = serde_json::to_vec(&v).expect("serializes");
    }
    r
}

fn number(req: &Req, k: &str, default: u64, max: u64) -> std::result::Result<u64, Reply> {
    match req.param(k) {
        None => Ok(default),
        Some(s) => match s.parse::<u64>() {
            Ok(n) if n <= max && (k != "limit" || n >= 1) => Ok(n),
            _ => Err(bad(
                k,
                format!(
                    "`{k}` must be a whole number{}, not `{}`",
                    if k == "limit" {
                        format!(" from 1 to {max}")
                    } else {
                        String::new()
                    },
                    conductor::text::printable(s)
                ),
            )),
        },
    }
}

/// `types` given comma-joined, repeated, or both.
fn types(req: &Req) -> Vec<String> {
    req.params("types")
        .into_iter()
        .chain(req.params("types[]"))
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

pub use conductor::agents::service::canopy_item;

/// A page of the journal: the events `keep` accepts after `after` (`app::events::page_with`).
fn page(
    store: &Store,
    agents: &Agents,
    after: u64,
    limit: u64,
    types: &[String],
    keep: &dyn Fn(&Event) -> bool,
) -> Answer {
    let page = lib(conductor::app::events::page_with(
        store,
        Some(after),
        limit,
        |e| keep(e) && (types.is_empty() || types.contains(&e.event_type)),
        |e| canopy_item(&e, agents),
    ))?;
    Ok(Reply::json(
        200,
        json!({"items": page.items, "next_after_seq": page.next_after_seq, "has_more": page.has_more}),
    ))
}

fn my_events(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
    let agents: Agents = lib(store.read_doc(now))?;
    let agent = lib(ops::agent(&agents, me))?.clone();
    let after = number(req, "after_seq", agent.cursor, u64::MAX)?;
    let limit = number(req, "limit", LIMIT_DEFAULT, LIMIT_MAX)?;
    page(store, &agents, after, limit, &types(req), &|e| {
        ops::concerns(&agent, e)
    })
}

fn global_events(store: &Store, now: Timestamp, req: &Req) -> Answer {
    let agents: Agents = lib(store.read_doc(now))?;
    let after = number(req, "after_seq", 0, u64::MAX)?;
    let limit = number(req, "limit", LIMIT_DEFAULT, LIMIT_MAX)?;
    page(store, &agents, after, limit, &types(req), &|_| true)
}

fn heartbeat(store: &Store, now: Timestamp, me: &str) -> Answer {
    lib(agents::service::heartbeat(store, now, me, "api"))?;
    let inbox: Inbox = lib(agents::inbox_files::snapshot(
        store,
        now,
        &agents::inbox_files::Scope::one(me),
    ))?;
    let pending = inbox.items.values().filter(|i| i.agent == me).count();
    let unacked = inbox.mentions.values().filter(|m| m.agent == me).count();
    let seq = lib(store.last_event_seq())?;
    Ok(Reply::json(
        200,
        json!({"success": true, "agent": me, "pending_inbox": pending, "unacked_mentions": unacked,
               "poll_hint_seconds": if pending + unacked > 0 { POLL_HINT_BUSY } else { POLL_HINT },
               "workspace_event_seq": seq, "server_time": now}),
    ))
}

fn inbox(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
    let limit = number(req, "limit", LIMIT_DEFAULT, LIMIT_MAX)?;
    let status = match req.param("status") {
        None => None,
        Some(s) => Some(parse_status(s, &["pending", "seen"])?),
    };
    let inbox: Inbox = lib(agents::inbox_files::snapshot(
        store,
        now,
        &agents::inbox_files::Scope::one(me),
    ))?;
    let mut v: Vec<&agents::Item> = inbox
        .items
        .values()
        .filter(|i| i.agent == me && status.is_none_or(|s| i.status == s))
        .collect();
    v.sort_by(|a, b| ops::pick_order(a, b));
    let total = v.len();
    let items: Vec<Value> = v
        .into_iter()
        .take(limit as usize)
        .map(|i| serde_json::to_value(i).expect("serializes"))
        .collect();
    Ok(Reply::json(200, json!({"items": items, "total": total})))
}

fn parse_status(s: &str, allowed: &[&str]) -> std::result::Result<Status, Reply> {
    let st = match s {
        "pending" => Status::Pending,
        "seen" => Status::Seen,
        "completed" | "handled" => Status::Completed,
        "skipped" => Status::Skipped,
        _ => Status::Expired,
    };
    if allowed.contains(&st.as_str()) && (s != "handled" || allowed.contains(&"completed")) {
        Ok(st)
    } else {
        Err(bad(
            "status",
            format!(
                "`status` must be one of {}, not `{}`",
                allowed.join(", "),
                conductor::text::printable(s)
            ),
        ))
    }
}

/// One update of an inbox item, checked before any transaction.
type Update = agents::service::ItemUpdate;

fn update(id: String, body: &Map<String, Value>) -> std::result::Result<Update, Reply> {
    let status = match body.get("status") {
        Some(Value::String(s)) => parse_status(s, &["seen", "completed", "skipped"])?,
        Some(_) => return Err(bad("status", "`status` must be a string")),
        None => {
            return Err(bad(
                "status",
                "`status` is required (seen, completed or skipped)",
            ));
        }
    };
    let completion_ref = match body.get("completion_ref") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(_) => {
            return Err(bad(
                "completion_ref",
                "`completion_ref` must be a JSON object",
            ));
        }
    };
    if status == Status::Completed && completion_ref.as_ref().is_none_or(Map::is_empty) {
        return Err(bad(
            "completion_ref",
            "`completion_ref` must be a non-empty object to complete an item (like {\"post_id\": \"msg-000007\"})",
        ));
    }
    Ok(Update {
        id,
        status,
        completion_ref,
    })
}

fn inbox_patch(store: &Store, now: Timestamp, req: &Req, me: &str, id: &str) -> Answer {
    let u = update(id.to_string(), &req.json()?)?;
    let mut items = lib(agents::service::update_items(
        store,
        now,
        &[u],
        Some(me),
        true,
    ))?;
    let item = items.remove(0);
    Ok(Reply::json(200, json!({"success": true, "item": item})))
}

fn inbox_batch(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
    let body = req.json()?;
    let mut updates = Vec::new();
    match (body.get("items"), body.get("ids")) {
        (Some(Value::Array(items)), None) => {
            for it in items {
                let Value::Object(m) = it else {
                    return Err(bad("items", "each of `items` must be an object"));
                };
                let Some(Value::String(id)) = m.get("id") else {
                    return Err(bad("items", "each of `items` needs a string `id`"));
                };
                updates.push(update(id.clone(), m)?);
            }
        }
        (None, Some(Value::Array(ids))) => {
            for id in ids {
                let Value::String(id) = id else {
                    return Err(bad("ids", "`ids` must be a list of strings"));
                };
                updates.push(update(id.clone(), &body)?);
            }
        }
        _ => {
            return Err(bad(
                "ids",
                "the body needs `ids` (a list, with `status`) or `items` (a list of {id, status, completion_ref})",
            ));
        }
    }
    if updates.is_empty() || updates.len() > LIMIT_MAX as usize {
        return Err(bad(
            "ids",
            format!("between 1 and {LIMIT_MAX} items per batch"),
        ));
    }
    // All or nothing: one transaction.
    let items = lib(agents::service::update_items(
        store,
        now,
        &updates,
        Some(me),
        true,
    ))?;
    Ok(Reply::json(
        200,
        json!({"success": true, "updated": items.len(), "items": items}),
    ))
}

fn channel_id(raw: &str) -> std::result::Result<String, Reply> {
    if raw.starts_with("dm:") {
        return Ok(raw.to_string());
    }
    conductor::agents::text::channel_name(raw)
        .map_err(|e| Reply::error(404, "unknown_channel", e.to_string()))
}

/// A message in Canopy's shape.
fn canopy_message(m: &agents::Message) -> Value {
    json!({"id": m.message_id, "message_id": m.message_id, "channel_id": m.channel_id,
           "user_id": m.user_id, "author": m.author, "content": m.content,
           "created_at": m.created_at, "edited_at": m.edited_at, "reply_to": m.reply_to,
           "addressed": m.addressed})
}

fn messages(store: &Store, now: Timestamp, req: &Req, raw: &str) -> Answer {
    let id = channel_id(raw)?;
    let limit = number(req, "limit", LIMIT_DEFAULT, agents::RECENT as u64)?;
    let channels: Channels = lib(store.read_doc(now))?;
    let Some(ch) = channels.channels.get(&id) else {
        return Err(Reply::error(
            404,
            "unknown_channel",
            format!(
                "no channel `{}` (nothing was posted there)",
                conductor::text::printable(&id)
            ),
        ));
    };
    let skip = ch.recent.len().saturating_sub(limit as usize);
    let msgs: Vec<Value> = ch.recent.iter().skip(skip).map(canopy_message).collect();
    Ok(Reply::json(
        200,
        json!({"channel_id": id, "messages": msgs, "message_count": ch.message_count}),
    ))
}

fn message(store: &Store, now: Timestamp, raw: &str, mid: &str) -> Answer {
    let id = channel_id(raw)?;
    let channels: Channels = lib(store.read_doc(now))?;
    match lib(agents::find_message(store, &channels, mid))? {
        Some(m) if m.channel_id == id => {
            Ok(Reply::json(200, json!({"message": canopy_message(&m)})))
        }
        _ => Err(Reply::error(
            404,
            "message_not_found",
            format!(
                "no message `{}` in channel `{}`",
                conductor::text::printable(mid),
                conductor::text::printable(&id)
            ),
        )),
    }
}

fn post(store: &Store, now: Timestamp, req: &Req, me: &str, raw: &str) -> Answer {
    let channel = channel_id(raw).map_err(|r| Reply { status: 400, ..r })?;
    if channel.starts_with("dm:") {
        return Err(bad(
            "channel_id",
            "post to a channel, not a DM conversation",
        ));
    }
    let body = req.json()?;
    let content = match body.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(bad("content", "`content` is empty")),
        Some(_) => return Err(bad("content", "`content` must be a string")),
        None => return Err(bad("content", "`content` is required")),
    };
    let reply_to = match body.get("reply_to") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("reply_to", "`reply_to` must be a message id")),
    };
    let priority = match body.get("priority") {
        None | Some(Value::Null) => Priority::Normal,
        Some(v) => serde_json::from_value::<Priority>(v.clone())
            .map_err(|_| bad("priority", "`priority` must be urgent, high, normal or low"))?,
    };
    let p = ops::NewPost {
        channel,
        author: me.to_string(),
        content,
        reply_to,
        priority,
        dm: false,
    };
    // An unknown `reply_to` is refused by the post itself (`invalid_input`).
    let m = lib(agents::service::post(store, now, p))?;
    Ok(Reply::json(
        201,
        json!({"success": true, "message": canopy_message(&m)}),
    ))
}

/// What a mention claim names, as Canopy's server takes it: exactly one of `mention_id`,
/// `inbox_id` (`inbox_item_id`, `item_id` and `id` are older spellings of it), or
/// `source_type` + `source_id` (the message: the caller's mention of it, else its inbox item).
/// In the query string (GET, DELETE) or the JSON body.
fn claim_target(
    store: &Store,
    now: Timestamp,
    req: &Req,
    body: &Map<String, Value>,
    me: &str,
) -> std::result::Result<String, Reply> {
    let get = |k: &str| -> std::result::Result<Option<String>, Reply> {
        if let Some(v) = req.param(k) {
            return Ok(Some(v.to_string()));
        }
        match body.get(k) {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(bad(k, format!("`{k}` must be a string"))),
        }
    };
    let mention = get("mention_id")?;
    let mut inbox = None;
    for k in ["inbox_id", "inbox_item_id", "item_id", "id"] {
        if let Some(v) = get(k)? {
            inbox = Some(v);
            break;
        }
    }
    let source = (get("source_type")?, get("source_id")?);
    let by_source = source.0.is_some() || source.1.is_some();
    let given =
        usize::from(mention.is_some()) + usize::from(inbox.is_some()) + usize::from(by_source);
    if given != 1 {
        return Err(bad(
            "mention_id",
            "give exactly one of `mention_id`, `inbox_id`, or `source_type` + `source_id`",
        ));
    }
    if let Some(id) = mention.or(inbox) {
        return Ok(id);
    }
    let (Some(st), Some(sid)) = source else {
        return Err(bad(
            "source_id",
            "`source_type` and `source_id` go together",
        ));
    };
    let snapshot: Inbox = lib(agents::inbox_files::snapshot(
        store,
        now,
        &agents::inbox_files::Scope::All,
    ))?;
    let mine = |agent: &str| agent == me;
    snapshot
        .mentions
        .values()
        .find(|m| mine(&m.agent) && m.source_type == st && m.source_id == sid)
        .map(|m| m.id.clone())
        .or_else(|| {
            snapshot
                .items
                .values()
                .find(|i| mine(&i.agent) && i.source_type == st && i.source_id == sid)
                .map(|i| i.id.clone())
        })
        .ok_or_else(|| {
            Reply::error(
                404,
                "unknown_item",
                format!(
                    "no mention or inbox item of yours for {} `{}`",
                    conductor::text::printable(&st),
                    conductor::text::printable(&sid)
                ),
            )
        })
}

fn mention_claim(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
    let body = req.json()?;
    let id = claim_target(store, now, req, &body, me)?;
    let now_ms = agents::now_ms();
    match req.method {
        Method::Get => {
            let inbox: Inbox = lib(agents::inbox_files::snapshot(
                store,
                now,
                &agents::inbox_files::Scope::All,
            ))?;
            let claim = match (inbox.mentions.get(&id), inbox.items.get(&id)) {
                (Some(m), _) => m.claim.clone(),
                (None, Some(i)) => i.claim.clone(),
                (None, None) => return Err(Reply::from_error(&ops::unknown_item(&id))),
            };
            let live = claim.as_ref().is_some_and(|c| c.expires_ms > now_ms);
            Ok(Reply::json(
                200,
                json!({"id": id, "mention_id": id, "claimed": live,
                       "holder": claim.as_ref().filter(|_| live).map(|c| &c.agent),
                       "mine": claim.as_ref().is_some_and(|c| live && c.agent == me),
                       "retry_after_seconds": claim.as_ref().filter(|_| live).map(|c| ops::retry_after(c, now_ms)),
                       "claim": claim}),
            ))
        }
        Method::Post => {
            let ttl = match body.get("ttl_seconds").or(body.get("ttl")) {
                None | Some(Value::Null) => agents::TTL_DEFAULT,
                Some(v) => v.as_u64().ok_or_else(|| {
                    bad(
                        "ttl_seconds",
                        "`ttl_seconds` must be a whole number of seconds",
                    )
                })?,
            };
            // Clamped into range, as Canopy's server does (the CLI refuses instead).
            let ttl = ttl.clamp(agents::TTL_MIN, agents::TTL_MAX);
            let takeover = body
                .get("takeover")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let req = agents::service::ClaimItem {
                id: id.to_string(),
                agent: me.to_string(),
                worker: "api".into(),
                ttl,
                takeover,
            };
            let out = lib(agents::service::claim_item(store, now, &req))?;
            Ok(match out {
                ops::ClaimOutcome::Ok {
                    id,
                    claim,
                    takeover,
                    previous,
                } => Reply::json(
                    200,
                    json!({"success": true, "claimed": true, "id": id, "mention_id": id,
                           "claim": claim, "takeover": takeover,
                           "previous_holder": previous.map(|p| p.agent)}),
                ),
                ops::ClaimOutcome::Conflict {
                    id,
                    holder,
                    expires_at,
                    expired,
                    retry_after_seconds,
                    message,
                    ..
                } => {
                    let mut r = Reply::json(
                        409,
                        json!({"success": false, "claimed": false, "reason": "claim_conflict",
                               "error": message, "id": id, "mention_id": id, "holder": holder,
                               "expires_at": expires_at, "expired": expired,
                               "retry_after_seconds": retry_after_seconds, "status": 409}),
                    );
                    r.headers
                        .push(("Retry-After".into(), retry_after_seconds.max(1).to_string()));
                    r
                }
            })
        }
        _ => {
            let c = lib(agents::service::release_item(store, now, &id, me))?;
            Ok(Reply::json(
                200,
                json!({"success": true, "id": id, "mention_id": id, "released": c}),
            ))
        }
    }
}
