//! Channels and their messages, posts, and mention claims.

use super::*;

pub(super) fn channel_id(raw: &str) -> std::result::Result<String, Reply> {
    conductor::agents::views::channel_id(raw)
        .map_err(|e| Reply::error(404, "unknown_channel", e.to_string()))
}

/// A message in Canopy's shape.
pub(super) fn canopy_message(m: &agents::Message) -> Value {
    json!({"id": m.message_id, "message_id": m.message_id, "channel_id": m.channel_id,
           "user_id": m.user_id, "author": m.author, "content": m.content,
           "created_at": m.created_at, "edited_at": m.edited_at, "reply_to": m.reply_to,
           "addressed": m.addressed})
}

pub(super) fn messages(store: &Store, now: Timestamp, req: &Req, raw: &str) -> Answer {
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

pub(super) fn message(store: &Store, now: Timestamp, raw: &str, mid: &str) -> Answer {
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

pub(super) fn post(store: &Store, now: Timestamp, req: &Req, me: &str, raw: &str) -> Answer {
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
pub(super) fn claim_target(
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
    lib(agents::views::by_source(store, now, me, &st, &sid))?.ok_or_else(|| {
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

pub(super) fn mention_claim(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
    let body = req.json()?;
    let id = claim_target(store, now, req, &body, me)?;
    let now_ms = agents::now_ms();
    match req.method {
        Method::Get => {
            let claim = lib(agents::views::claim_on(store, now, &id))?;
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
