//! The heartbeat and the inbox: list, update one item, update a batch.

use super::*;

pub(super) fn heartbeat(store: &Store, now: Timestamp, me: &str) -> Answer {
    lib(agents::service::heartbeat(store, now, me, "api"))?;
    let inbox: Inbox = lib(agents::inbox_files::snapshot(
        store,
        now,
        &agents::inbox_files::Scope::one(me),
    ))?;
    let (pending, unacked) = agents::health::backlog(&inbox, me);
    let seq = lib(store.last_event_seq())?;
    Ok(Reply::json(
        200,
        json!({"success": true, "agent": me, "pending_inbox": pending, "unacked_mentions": unacked,
               "poll_hint_seconds": if pending + unacked > 0 { POLL_HINT_BUSY } else { POLL_HINT },
               "workspace_event_seq": seq, "server_time": now}),
    ))
}

pub(super) fn inbox(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
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
    let v = agents::views::open_items(&inbox, me, status);
    let total = v.len();
    let items: Vec<Value> = v
        .into_iter()
        .take(limit as usize)
        .map(|i| serde_json::to_value(i).expect("serializes"))
        .collect();
    Ok(Reply::json(200, json!({"items": items, "total": total})))
}

pub(super) fn parse_status(s: &str, allowed: &[&str]) -> std::result::Result<Status, Reply> {
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

pub(super) fn update(id: String, body: &Map<String, Value>) -> std::result::Result<Update, Reply> {
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

pub(super) fn inbox_patch(store: &Store, now: Timestamp, req: &Req, me: &str, id: &str) -> Answer {
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

pub(super) fn inbox_batch(store: &Store, now: Timestamp, req: &Req, me: &str) -> Answer {
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
