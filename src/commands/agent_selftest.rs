//! `conductor agent selftest NAME [--min-level compatibility_pass|full_pass]`: check an agent's
//! runtime on live data, the way CanopyKit's shadow self-test does.

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::agent::Out;
use super::{Ctx, print};
use conductor::agents::{self, Agents, Channels, Inbox, health, ops};
use conductor::error::Result;

/// Self-test levels, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
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
    fn as_str(self) -> &'static str {
        match self {
            Level::Failed => "failed",
            Level::CompatibilityPass => "compatibility_pass",
            Level::FullPass => "full_pass",
        }
    }
}

/// `agent selftest`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Checks: the agent-scoped feed opens at the agent's cursor; the cursor is \
within the journal and keeps up; every unacknowledged mention has its inbox item and every item's \
mention is there; the mode classification; and channel routing of the recent posts in watched channels \
(each gets a decision and, when not actionable, a reason). Reports failed, compatibility_pass or \
full_pass with blocking gaps and warnings.\n\nExit 0 at or above --min-level, 1 below it."
)]
pub struct SelftestArgs {
    /// The agent.
    pub name: String,
    /// The lowest level that exits 0.
    #[arg(long, value_enum, default_value_t = Level::CompatibilityPass)]
    pub min_level: Level,
}

/// Run `agent selftest`.
pub fn run(ctx: &Ctx, a: SelftestArgs) -> Result<u8> {
    let agents: Agents = ctx.store.read_doc(ctx.now)?;
    let inbox: Inbox = conductor::agents::inbox_files::snapshot(
        &ctx.store,
        ctx.now,
        &conductor::agents::inbox_files::Scope::All,
    )?;
    let channels: Channels = ctx.store.read_doc(ctx.now)?;
    let me = ops::agent(&agents, &a.name)?.clone();
    let mut checks: Vec<Value> = Vec::new();
    let mut gaps: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

    // Feed and cursor.
    let last = ctx.store.last_event_seq()?;
    let mut lag = 0u64;
    match ctx.store.tail(Some(me.cursor)) {
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
    let run = conductor::agents::read_run_status(&ctx.store, &me.name)?;
    let running = super::agent::alive(run.as_ref());
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
            let e = conductor::store::event::Event {
                seq: 0,
                event_id: String::new(),
                event_type: agents::ev::CHANNEL_MESSAGE_CREATED.into(),
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
    let code = if level >= a.min_level { 0 } else { 1 };
    let mut text = format!("selftest {}: {}", me.name, level.as_str());
    for g in &gaps {
        text.push_str(&format!("\n  blocking: {g}"));
    }
    for w in &warnings {
        text.push_str(&format!("\n  warning: {w}"));
    }
    print(
        ctx.out,
        &Out {
            json: json!({"status": if code == 0 { "ok" } else { "failed" }, "agent": me.name, "level": level.as_str(),
                "min_level": a.min_level.as_str(), "blocking_gaps": gaps, "warnings": warnings, "checks": checks}),
            text,
            code,
        },
    )
}
