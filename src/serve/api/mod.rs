//! Canopy's agent API (`/api/v1/...`), the shapes CanopyKit 0.1.0 expects, over the agents
//! domain's documents and ledgers. Every write is one store transaction through the domain's
//! pure operations (`conductor::agents::ops`); every answer is JSON. Routing and the shared
//! helpers are here; the heartbeat and the inbox in `inbox`, channels, messages and mention
//! claims in `channels`.

mod channels;
mod inbox;

use channels::*;
use inbox::*;

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
