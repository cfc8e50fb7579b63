//! `conductor agent register|list|status|events|log|selftest|run`: the agents of the runtime
//! (see `conductor::agents`). `run` lives in `agent_run.rs`, `selftest` in `agent_selftest.rs`.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Ctx, print};
use conductor::agents::{self, ops, views};
use conductor::error::Result;

pub use super::Out;

/// The agent commands.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Register an agent (or update its handle, user id and watched channels).
    Register(RegisterArgs),
    /// List registered agents with their backlog and mode.
    List,
    /// Show an agent's runtime facts: wake source, blind window, backlog, cursor, mode, health, metrics.
    Status(NameArg),
    /// Print a page of the agent's own event feed (resumable with its durable cursor).
    Events(EventsArgs),
    /// Print the agent's run-loop action log (newest last), one JSON object per line.
    ///
    /// The log is the file runtime/agents/NAME/actions.jsonl in the home, capped at 256 KiB
    /// (an append that would pass the cap keeps the newest 128 KiB of lines).
    Log(LogArgs),
    /// Check feed, cursor, inbox/mention correlation, mode and routing on live data.
    Selftest(super::agent_selftest::SelftestArgs),
    /// Run the agent's loop: wake on the journal, route, claim, execute, validate, post, complete.
    Run(super::agent_run::RunArgs),
    /// Manage API keys for `conductor serve` (an agent's X-API-Key).
    #[command(subcommand)]
    Key(crate::serve::keys::KeyCommand),
}

/// `agent register`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Examples:\n  conductor agent register scout --handle @scout --watch ops\n  \
conductor agent register lint --watch ops --watch review\n\nA post that mentions the handle (`@scout`) \
or names the agent on an assignment line (`owner: scout`, also to:, next:, assignee:, reviewer:, \
members:) lands in its inbox. Names and handles: letters, digits, `_ . -`, starting and ending with a \
letter or digit. The agent's cursor starts at the end of the journal."
)]
pub struct RegisterArgs {
    /// The agent's name (lowercased).
    pub name: String,
    /// The handle posts mention it by [default: @NAME].
    #[arg(long)]
    pub handle: Option<String>,
    /// A channel whose posts its run loop routes (repeatable; replaces the list) [default: an
    /// existing agent keeps its list].
    #[arg(long = "watch", value_name = "CHANNEL")]
    pub watch: Vec<String>,
    /// Canopy's user id for the agent [default: NAME].
    #[arg(long, value_name = "ID")]
    pub user_id: Option<String>,
}

/// An agent name.
#[derive(Debug, Args)]
pub struct NameArg {
    /// The agent.
    pub name: String,
}

/// `agent events`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Prints {\"items\":[...],\"next_after_seq\":N,\"has_more\":bool} with Canopy's \
item fields (seq, event_id, event_type, actor_user_id, target_user_id, channel_id, post_id, message_id, \
visibility_scope, created_at, payload). Without --after it reads from the agent's durable cursor; \
--advance moves the cursor to next_after_seq."
)]
pub struct EventsArgs {
    /// The agent.
    pub name: String,
    /// Read after this seq [default: the agent's cursor].
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// At most this many items.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub limit: u64,
    /// Move the agent's cursor to the page's next_after_seq.
    #[arg(long)]
    pub advance: bool,
}

/// `agent log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// The agent.
    pub name: String,
    /// Only the newest N actions.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// Run an agent command.
pub fn run(ctx: &Ctx, cmd: AgentCommand) -> Result<u8> {
    match cmd {
        AgentCommand::Register(a) => register(ctx, a),
        AgentCommand::List => list(ctx),
        AgentCommand::Status(a) => status(ctx, a),
        AgentCommand::Events(a) => events(ctx, a),
        AgentCommand::Log(a) => log(ctx, a),
        AgentCommand::Selftest(a) => super::agent_selftest::run(ctx, a),
        AgentCommand::Run(a) => super::agent_run::run(ctx, a),
        AgentCommand::Key(c) => crate::serve::keys::run(ctx, c),
    }
}

fn register(ctx: &Ctx, a: RegisterArgs) -> Result<u8> {
    let new = ops::NewAgent {
        name: a.name,
        handle: a.handle,
        user_id: a.user_id,
        watch: a.watch,
    };
    let agents::service::Registered {
        fresh,
        agent,
        channel_added: added,
    } = agents::service::register(&ctx.store, ctx.now, &new)?;
    let verb = if fresh { "Registered" } else { "Updated" };
    let mut text = format!(
        "{verb} agent {} ({}), watching {}; cursor at seq {}",
        agent.name,
        agent.handle,
        if agent.watch.is_empty() {
            "no channels".to_string()
        } else {
            agent.watch.join(", ")
        },
        agent.cursor
    );
    if !added.is_empty() {
        text.push_str(&format!(
            "\nAdded to existing channels: inbox item(s) {} (channel_added)",
            added.join(", ")
        ));
    }
    print(
        ctx.out,
        &Out::ok(
            json!({"status": "ok", "new": fresh, "agent": views::public(&agent), "channel_added": added}),
            text,
        ),
    )
}

fn list(ctx: &Ctx) -> Result<u8> {
    let listed = views::list(&ctx.store, ctx.now)?;
    let mut text = String::new();
    for l in &listed {
        let s = &l.snapshot;
        text.push_str(&format!(
            "{:<16} {:<18} pending {:<3} unacked {:<3} {:<11} {}\n",
            l.agent.name,
            l.agent.handle,
            s.pending_inbox,
            s.unacked_mentions,
            l.mode,
            if s.running { "running" } else { "not running" }
        ));
    }
    if listed.is_empty() {
        text = "No agents registered (conductor agent register NAME --watch CHANNEL)".into();
    }
    let rows: Vec<Value> = listed.iter().map(views::Listed::to_json).collect();
    print(
        ctx.out,
        &Out::ok(json!({"status": "ok", "agents": rows}), text),
    )
}

fn status(ctx: &Ctx, a: NameArg) -> Result<u8> {
    let v = views::facts(&ctx.store, ctx.now, &a.name)?;
    let ms = |k: &str, p: &str| match &v["metrics"][k][p] {
        Value::Null => "-".to_string(),
        x => format!("{x} ms"),
    };
    let text = format!(
        "agent {} ({})\n  mode {} ({})\n  health {}{}\n  wake source {}, blind window {}\n  pending inbox {}, unacked mentions {}, cursor {} of {}\n  event_to_claim p50 {} p95 {}; claim_to_complete p50 {}; timeout recoveries {}",
        v["agent"].as_str().unwrap_or_default(),
        v["handle"].as_str().unwrap_or_default(),
        v["mode"].as_str().unwrap_or_default(),
        v["mode_reasons"]
            .as_array()
            .map(|r| r
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; "))
            .unwrap_or_default(),
        v["health"].as_str().unwrap_or_default(),
        v["health_issues"]
            .as_array()
            .filter(|i| !i.is_empty())
            .map(|r| format!(
                ": {}",
                r.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
            .unwrap_or_default(),
        v["wake_source"].as_str().unwrap_or_default(),
        match v["blind_window_seconds"].as_f64() {
            Some(b) => format!("{b} s"),
            None => "unbounded".into(),
        },
        v["pending_inbox"],
        v["unacked_mentions"],
        v["last_event_cursor_seen"],
        v["journal_seq"],
        ms("event_to_claim_ms", "p50"),
        ms("event_to_claim_ms", "p95"),
        ms("claim_to_complete_ms", "p50"),
        v["metrics"]["timeout_recoveries"],
    );
    let mut text = text;
    if let Some(r) = v["run"].as_object() {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
        text.push_str(&format!(
            "\n  loop pid {} {} ({}), state {}, {} cycles, updated {}",
            r.get("pid").and_then(Value::as_u64).unwrap_or_default(),
            s("status"),
            s("worker"),
            s("state"),
            r.get("cycles").and_then(Value::as_u64).unwrap_or_default(),
            s("updated_at"),
        ));
        if let Some(c) = r.get("current").and_then(Value::as_object) {
            text.push_str(&format!(
                "\n  working on {} (claim until {})",
                c.get("item_id").and_then(Value::as_str).unwrap_or("-"),
                c.get("claim_expires_at")
                    .and_then(Value::as_str)
                    .unwrap_or("-")
            ));
        }
        if let Some(b) = r.get("backoff").and_then(Value::as_object) {
            text.push_str(&format!(
                "\n  backing off {} ms until {}",
                b.get("delay_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or_default(),
                b.get("until").and_then(Value::as_str).unwrap_or("-")
            ));
        }
        if let Some(e) = r.get("last_error").and_then(Value::as_str) {
            text.push_str(&format!("\n  last error {} at {}", e, s("last_error_at")));
        }
    }
    print(ctx.out, &Out::ok(v, text))
}

fn events(ctx: &Ctx, a: EventsArgs) -> Result<u8> {
    let page = views::feed(&ctx.store, ctx.now, &a.name, a.after, a.limit, a.advance)?;
    ctx.out
        .json_line(&serde_json::to_value(page).expect("serializes"))?;
    Ok(0)
}

fn log(ctx: &Ctx, a: LogArgs) -> Result<u8> {
    let mut s = String::new();
    for line in views::actions(&ctx.store, ctx.now, &a.name, a.limit)? {
        s.push_str(&line);
        s.push('\n');
    }
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_all(s.as_bytes())
        .map_err(|e| conductor::error::Error::io("write to", std::path::Path::new("stdout"), e))?;
    Ok(0)
}
