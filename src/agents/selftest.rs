//! `agent selftest`: an agent's runtime checked on live data, the way CanopyKit's shadow
//! self-test does: its feed opens at its cursor, the cursor keeps up, mentions and inbox items
//! match, its mode, and the routing of the recent posts in its watched channels.

use serde_json::{Value, json};

use super::{Agents, Channels, Inbox, health, ops};
use crate::error::Result;
use crate::store::Store;
use crate::time::Timestamp;

/// Self-test levels, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Level {
    /// A blocking gap was found.
    Failed,
    /// Works, with warnings (no run loop, a poll fallback, nothing to route...).
    CompatibilityPass,
    /// Every check passed without warnings.
    FullPass,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Failed => "failed",
            Level::CompatibilityPass => "compatibility_pass",
            Level::FullPass => "full_pass",
        }
    }
}

/// What the self-test found.
pub struct Selftest {
    /// The agent's registered name.
    pub agent: String,
    pub level: Level,
    pub gaps: Vec<String>,
    pub warnings: Vec<String>,
    pub checks: Vec<Value>,
}

/// Run the self-test of agent `name`.
pub fn run(store: &Store, now: Timestamp, name: &str) -> Result<Selftest> {
    let agents: Agents = store.read_doc(now)?;
    let inbox: Inbox = super::inbox_files::snapshot(store, now, &super::inbox_files::Scope::All)?;
    let channels: Channels = store.read_doc(now)?;
    let me = ops::agent(&agents, name)?.clone();
    let mut checks: Vec<Value> = Vec::new();
    let mut gaps: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

    // Feed and cursor.
    let last = store.last_event_seq()?;
    let mut lag = 0u64;
    match store.tail(Some(me.cursor)) {
        Ok(mut t) => {
            t.read(|e| {
                if ops::concerns(&me, &e) {
                    lag += 1;
                }
                true
            })?;
            checks.push(json!({"check": "feed", "ok": true, "active_feed_source": "agent_scoped", "fallback_reason": null}));
        }
        Err(e) => {
            gaps.push(format!("feed: {e}"));
            checks.push(json!({"check": "feed", "ok": false, "error": e.to_string()}));
        }
    }
    let cursor_ok = me.cursor <= last;
    if !cursor_ok {
        gaps.push(format!(
            "cursor {} is ahead of the journal's last seq {last}",
            me.cursor
        ));
    }
    let run = super::read_run_status(store, &me.name)?;
    let running = super::views::alive(run.as_ref());
    if lag > 0 && !running {
        warnings.push(format!(
            "{lag} feed events after the cursor and no run loop is running"
        ));
    }
    checks.push(json!({"check": "cursor", "ok": cursor_ok, "cursor": me.cursor, "journal_seq": last, "unread_feed_events": lag}));

    // Inbox and mention correlation.
    let mut orphans = Vec::new();
    for m in inbox.mentions.values().filter(|m| m.agent == me.name) {
        if !inbox
            .items
            .values()
            .any(|i| i.mention_id.as_deref() == Some(m.id.as_str()))
        {
            orphans.push(m.id.clone());
        }
    }
    let mut dangling = Vec::new();
    for i in inbox.items.values().filter(|i| i.agent == me.name) {
        if let Some(mid) = &i.mention_id
            && !inbox.mentions.contains_key(mid)
        {
            dangling.push(i.id.clone());
        }
    }
    if !orphans.is_empty() {
        warnings.push(format!(
            "mentions without an open inbox item (acknowledge them): {}",
            orphans.join(", ")
        ));
    }
    if !dangling.is_empty() {
        warnings.push(format!(
            "open items whose mention was acknowledged: {}",
            dangling.join(", ")
        ));
    }
    checks.push(json!({"check": "inbox_mention_correlation", "ok": orphans.is_empty() && dangling.is_empty(),
        "mentions_without_item": orphans, "items_without_mention": dangling}));

    // Mode.
    let s = health::snapshot(&me, run.as_ref(), &inbox, running);
    let (mode, reasons) = health::mode(&s);
    let (h, issues) = health::health(&s);
    if !running {
        warnings.push("no run loop is running (start one with `conductor agent run`)".into());
    } else if s.wake_source != "watcher" {
        warnings.push(format!(
            "the run loop wakes by {} (blind window {} s), not the watcher",
            s.wake_source, s.poll_interval_seconds
        ));
    }
    checks.push(json!({"check": "mode", "ok": true, "mode": mode, "reasons": reasons, "health": h, "issues": issues}));

    // Routing on live data.
    let mut decisions = Vec::new();
    if me.watch.is_empty() {
        warnings.push("the agent watches no channels: channel routing was not checked".into());
    }
    for ch in &me.watch {
        let Some(c) = channels.channels.get(ch) else {
            warnings.push(format!("watched channel `{ch}` has no messages yet"));
            continue;
        };
        for m in c.recent.iter().rev().take(20) {
            let e = crate::store::event::Event {
                seq: 0,
                event_id: String::new(),
                event_type: super::ev::CHANNEL_MESSAGE_CREATED.into(),
                actor: Some(m.author.clone()),
                target: None,
                project: None,
                payload: json!({"channel_id": m.channel_id, "message_id": m.message_id}),
                created_at: m.created_at,
                txn_end: None,
            };
            let found = Some(m.clone());
            let r = ops::route(&me, &e, false, &|_| found.clone());
            let ok = match &r {
                ops::Route::Ignored { reason } => ops::REASONS.contains(reason),
                _ => true,
            };
            if !ok {
                gaps.push(format!(
                    "message {} routed without a known reason",
                    m.message_id
                ));
            }
            decisions.push(json!({"message_id": m.message_id, "route": r}));
        }
    }
    checks.push(json!({"check": "channel_routing", "ok": true, "decisions": decisions}));

    let level = if !gaps.is_empty() {
        Level::Failed
    } else if !warnings.is_empty() {
        Level::CompatibilityPass
    } else {
        Level::FullPass
    };
    Ok(Selftest {
        agent: me.name,
        level,
        gaps,
        warnings,
        checks,
    })
}
