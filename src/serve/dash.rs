//! The dashboard: `/` (one embedded page, plain HTML and JS, no build step, no CDN),
//! `/dashboard/state` (a JSON snapshot of the home) and `/dashboard/events` (Server-Sent Events:
//! the journal, each event's `id` its seq).
//!
//! Access: `/?token=T` (the token `serve` printed) answers with a cookie and a redirect to `/`;
//! every dashboard path then needs that cookie (HttpOnly, SameSite=Strict).

use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use serde_json::{Value, json};
use tiny_http::{Method, Request};

use super::{Reply, Req, Shared};
use conductor::agents::{self, Agents, Inbox};
use conductor::error::Result;
use conductor::store::Store;
use conductor::time::Timestamp;

const PAGE: &str = include_str!("dashboard.html");
const COOKIE: &str = "conductor_dashboard";
/// A page further behind than this many events reloads instead of replaying them.
pub const BEHIND_MAX: u64 = 1000;
/// A comment line on an idle stream this often (finds closed connections).
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Bytes of a queue job's log shown.
const LOG_TAIL: u64 = 2048;

fn has_cookie(shared: &Shared, cookie: Option<&str>) -> bool {
    cookie.is_some_and(|c| {
        c.split(';').any(|kv| {
            kv.trim()
                .split_once('=')
                .is_some_and(|(k, v)| k == COOKIE && v == shared.cookie)
        })
    })
}

fn unauthorized() -> Reply {
    Reply::error(
        401,
        "unauthorized",
        "open the dashboard with the address `conductor serve` printed (it carries the token)",
    )
}

/// Answer a dashboard request.
pub fn handle(shared: &Shared, req: &Req, cookie: Option<&str>) -> Reply {
    let segs: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let known = matches!(segs.as_slice(), [] | ["dashboard", "state"]);
    if !known {
        return Reply::error(
            404,
            "not_found",
            format!("no such page: /{}", segs.join("/")),
        );
    }
    if req.method != Method::Get {
        return Reply::error(405, "method_not_allowed", "only GET is allowed here");
    }
    if segs.is_empty()
        && let Some(t) = req.param("token")
    {
        if t != shared.token {
            return unauthorized();
        }
        let mut r = Reply::json(303, json!({"success": true}));
        r.headers.push(("Location".into(), "/".into()));
        r.headers.push((
            "Set-Cookie".into(),
            format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                shared.cookie
            ),
        ));
        return r;
    }
    if !has_cookie(shared, cookie) {
        return unauthorized();
    }
    if segs.is_empty() {
        return Reply {
            status: 200,
            body: PAGE.as_bytes().to_vec(),
            content_type: "text/html; charset=utf-8",
            headers: vec![(
                "Content-Security-Policy".into(),
                "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline' 'self'; connect-src 'self'; img-src 'self' data:".into(),
            )],
        };
    }
    match state(&shared.store) {
        Ok(v) => Reply::json(200, v),
        Err(e) => Reply::from_error(&e),
    }
}

fn tail_of(path: &std::path::Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL))).ok()?;
    let mut b = Vec::new();
    f.take(LOG_TAIL).read_to_end(&mut b).ok()?;
    Some(String::from_utf8_lossy(&b).into_owned())
}

/// Everything the page shows, at one journal seq.
pub fn state(store: &Store) -> Result<Value> {
    let now = Timestamp::now();
    let seq = store.last_event_seq()?;
    let st = conductor::protocol::read(store, now)?;
    let agents_doc: Agents = store.read_doc(now)?;
    let inbox: Inbox = conductor::agents::inbox_files::snapshot(
        store,
        now,
        &conductor::agents::inbox_files::Scope::All,
    )?;
    let now_ms = agents::now_ms();
    let mut agent_rows = Vec::new();
    for a in agents_doc.agents.values() {
        let hb = agents::agent_file(&a.name, super::api::HEARTBEAT_FILE)
            .ok()
            .and_then(|f| store.read_at(&f).ok().flatten())
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| v["at"].clone());
        let run = agents::read_run_status(store, &a.name).ok().flatten();
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
    let sessions: Vec<Value> = conductor::workflows::all_sessions(store, now)?
        .into_iter()
        .rev()
        .take(50)
        .map(|s| {
            json!({"id": s.id, "template": s.template.name, "task": s.task, "status": s.status,
                   "current_state": s.current_state, "halt": s.halt,
                   "states": s.template.states.keys().collect::<Vec<_>>(),
                   "runs": s.runs.iter().map(|r| json!({"state": r.state, "attempt": r.attempt,
                        "started_at": r.started_at, "completed_at": r.completed_at,
                        "tokens": r.tokens, "cost_usd": r.cost_usd, "outcome": r.outcome,
                        "summary": r.summary})).collect::<Vec<_>>(),
                   "totals": s.totals, "budget": s.template.budget,
                   "transition_counts": s.transition_counts, "updated_at": s.updated_at})
        })
        .collect();
    let queue: conductor::queue::QueueDoc = store.read_doc(now)?;
    let layout = conductor::queue::Layout {
        home: store.home().dir().to_path_buf(),
    };
    let jobs: Vec<Value> = queue
        .jobs
        .iter()
        .map(|j| {
            json!({"id": j.id, "workspace": j.workspace, "state": j.state.state,
                   "since": j.state.since, "attempts": j.state.attempts,
                   "exit_code": j.state.exit_code, "depends_on": j.depends_on,
                   "agent": j.agent, "submitted_at": j.submitted_at,
                   "log_tail": tail_of(&layout.log(&j.workspace, &j.id))})
        })
        .collect();
    // Conflicts as `status` reports them: only those whose holder still holds the file.
    let conflicts = conductor::protocol::ops::live_conflicts(&st);
    let enforcement = conductor::app::admission::enforcement_of(store, now, &st);
    // Sessions in worktrees of one repository: each names its worktree and branch, and they
    // are listed together.
    let mut st = st;
    let repositories = conductor::protocol::repositories::find(&mut st);
    let mut place = std::collections::HashMap::new();
    for r in repositories.iter().filter(|r| r.worktree_count > 1) {
        for w in &r.worktrees {
            for id in &w.instances {
                place.insert(id.as_str(), (&r.repository, w));
            }
        }
    }
    // Files changed in several worktrees, as `status` shows them; per instance, the lines of the
    // worktree it works in.
    let overlaps = conductor::protocol::overlaps::of_sessions(store, &st);
    let overlaps_of = |id: &str| -> Vec<String> {
        overlaps
            .iter()
            .flat_map(|r| {
                r.worktrees
                    .iter()
                    .filter(|t| t.sessions.iter().any(|s| s == id))
                    .flat_map(|t| crate::face::status::overlaps_of_worktree(r, &t.path))
            })
            .collect()
    };
    // Edits nobody claimed, under each session live where they happened.
    let unclaimed_doc = conductor::protocol::unclaimed::read(store, now)?;
    let unclaimed = conductor::protocol::unclaimed::current(&unclaimed_doc, &st);
    let mut listed: Vec<&conductor::protocol::Instance> = st.instances.iter().collect();
    listed.sort_by_key(|i| {
        place
            .get(i.id.as_str())
            .map_or((1, None), |(r, w)| (0, Some((*r, &w.worktree))))
    });
    let instances: Vec<Value> = listed
        .into_iter()
        .map(|i| {
            // Paths as the instance's repository (or directory) names them, never shortened.
            let base = crate::face::instance_base(&i.working_directory);
            let shown = |p: &str| crate::face::display_path(p, Some(&base));
            let claims: Vec<Value> = st
                .global_claims
                .iter()
                .filter(|(_, h)| **h == i.id)
                .map(|(f, _)| json!({"path": f, "shown": shown(f)}))
                .collect();
            let waiting: Vec<Value> = i
                .waiting_for
                .iter()
                .map(|w| json!({"file": w.file, "shown": shown(&w.file), "ticket": w.ticket}))
                .collect();
            let open: Vec<Value> = conflicts
                .iter()
                .filter(|c| c.requested_by == i.id)
                .map(|c| {
                    json!({"file": c.file, "shown": shown(&c.file), "held_by": c.held_by,
                                "holder_task": c.holder_task, "since": c.since})
                })
                .collect();
            let enforced = enforcement.get(&i.id).map(|e| {
                json!({"state": e.as_str(), "line": crate::face::status::enforcement_line(i, e)})
            });
            let edits: Vec<Value> = unclaimed
                .iter()
                .filter(|e| e.sessions.contains(&i.id))
                .map(|e| json!({"path": e.path, "shown": shown(&e.path), "at": e.at, "count": e.count}))
                .collect();
            json!({"id": i.id, "project": i.project, "task": i.task, "priority": i.priority,
                   "last_heartbeat": i.last_heartbeat, "claims": claims, "unclaimed_edits": edits,
                   "waiting_for": waiting, "conflicts": open, "enforcement": enforced,
                   "worktree": place.get(i.id.as_str()).map(|(r, w)| json!({
                       "repository": r, "worktree": w.worktree, "branch": w.branch})),
                   "overlaps": overlaps_of(&i.id)})
        })
        .collect();
    let landing: conductor::protocol::landing::LandingDoc = store.read_doc(now)?;
    Ok(json!({
        "seq": seq, "now": now, "home": store.location(),
        "instances": instances, "repositories": repositories, "agents": agent_rows, "workflows": sessions, "jobs": jobs,
        "landing": crate::face::status::landing_json(&landing.landing),
        "overlaps": overlaps,
        "edit_watch": if st.instances.is_empty() { Value::Null } else {
            let w = crate::face::status::EditWatch::of(store);
            json!({"watching": w.running.is_some(), "line": w.line()})
        },
    }))
}

/// Stream the journal as Server-Sent Events, from `Last-Event-ID` (a reconnect) or `?after=`.
pub fn events(shared: &Shared, rq: Request, query: &[(String, String)]) {
    let cookie = super::header(&rq, "Cookie").map(str::to_string);
    if !has_cookie(shared, cookie.as_deref()) {
        let _ = rq.respond(
            tiny_http::Response::from_data(unauthorized().body)
                .with_status_code(401)
                .with_header(
                    tiny_http::Header::from_bytes("Content-Type", "application/json")
                        .expect("a valid header"),
                ),
        );
        return;
    }
    let resume = super::header(&rq, "Last-Event-ID")
        .map(str::to_string)
        .or_else(|| {
            query
                .iter()
                .find(|(k, _)| k == "after")
                .map(|(_, v)| v.clone())
        });
    let store = &shared.store;
    let last = store.last_event_seq().unwrap_or(0);
    let mut w = rq.into_writer();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\nX-Accel-Buffering: no\r\n\r\n";
    if w.write_all(head.as_bytes()).is_err() {
        return;
    }
    let start = match resume.as_deref().map(str::parse::<u64>) {
        None => last,
        Some(Ok(s)) if s <= last && last - s <= BEHIND_MAX => s,
        // Too far behind, ahead of the journal (it was reset) or garbled: start afresh.
        Some(_) => {
            let _ = write!(w, "event: reload\ndata: {{\"last\": {last}}}\n\n");
            let _ = w.flush();
            return;
        }
    };
    let Ok(mut tail) = store.tail(Some(start)) else {
        // Events the page missed were trimmed from the journal.
        let _ = write!(w, "event: reload\ndata: {{\"last\": {last}}}\n\n");
        let _ = w.flush();
        return;
    };
    let _ = write!(w, "retry: 1000\n: resuming after {start}\n\n");
    loop {
        let announced = shared.journal.lock().map(|g| g.0).unwrap_or(0);
        let mut failed = false;
        let read = tail.read(|e| {
            let data = json!({"seq": e.seq, "event_type": e.event_type, "actor": e.actor,
                              "target": e.target, "created_at": e.created_at});
            failed = write!(w, "id: {}\nevent: journal\ndata: {data}\n\n", e.seq).is_err();
            !failed
        });
        if failed || read.is_err() || w.flush().is_err() {
            return;
        }
        // Wait past what was read and past what the watcher had announced before the read (a
        // seq given out but never written, after damage, must not make this loop spin).
        let seen = tail.after.max(announced);
        if !shared.wait_past(seen, KEEPALIVE) {
            return;
        }
        if shared.journal.lock().map(|g| g.0).unwrap_or(0) <= seen
            && (w.write_all(b": keepalive\n\n").is_err() || w.flush().is_err())
        {
            return;
        }
    }
}
