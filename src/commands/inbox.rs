//! `conductor inbox [--agent] [--status]` and `inbox seen|complete|skip|claim|renew|release`;
//! `conductor mentions [--agent]` and `mentions ack ID...`.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::agent::Out;
use super::{Ctx, print};
use conductor::agents::{self, Status, ops, views};
use conductor::error::Reason;
use conductor::error::{Error, Result};

const INBOX_HELP: &str = "Statuses: pending and seen are actionable; completed and skipped are terminal; \
expired is set by the system only: an item still pending or seen 7 days after it was created, with no \
live claim, expires with the next write to the inbox (`handled` is read as completed). Completing always needs a non-empty \
completion_ref (--ref KEY=VALUE, repeatable).\n\nWork claims have a TTL of 15 to 1800 s (default 120). A \
claim held by someone else is a conflict (exit 3) with the holder and retry_after_seconds; an expired claim \
can be taken over with --takeover (counted in timeout_recoveries, logged in runtime-conflicts.log); a live \
claim never is.\n\nExamples:\n  conductor inbox --agent scout\n  conductor inbox claim inb-000003 --agent \
scout --ttl 300\n  conductor inbox complete inb-000003 --agent scout --ref post_id=msg-000007\n  conductor \
inbox --status completed";

/// `inbox`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = INBOX_HELP)]
pub struct InboxArgs {
    #[command(subcommand)]
    pub command: Option<InboxCommand>,
    /// Only this agent's items.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only items with this status (terminal statuses are read from runtime-inbox.jsonl).
    #[arg(long, value_enum)]
    pub status: Option<Status>,
}

/// The inbox verbs.
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Mark items seen (still actionable).
    Seen(IdsArgs),
    /// Complete an item with a completion reference (required, non-empty).
    Complete(FinishArgs),
    /// Skip an item (terminal).
    Skip(FinishArgs),
    /// Claim an item or mention for a while (TTL), so nobody else works on it.
    Claim(ClaimArgs),
    /// Renew a claim you hold (the TTL starts again).
    Renew(HolderArgs),
    /// Release a claim you hold.
    Release(HolderArgs),
}

/// Item ids.
#[derive(Debug, Args)]
pub struct IdsArgs {
    /// Inbox item ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// `complete` / `skip`.
#[derive(Debug, Args)]
pub struct FinishArgs {
    /// The inbox item.
    pub id: String,
    /// A completion reference KEY=VALUE (repeatable), like post_id=msg-000007.
    #[arg(long = "ref", value_name = "KEY=VALUE")]
    pub refs: Vec<String>,
    /// Act as this agent (needed when the item is claimed).
    #[arg(long)]
    pub agent: Option<String>,
}

/// `claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The inbox item or mention.
    pub id: String,
    /// The agent claiming it.
    #[arg(long)]
    pub agent: String,
    /// Seconds the claim lasts unless renewed (15 to 1800).
    #[arg(long, default_value_t = agents::TTL_DEFAULT)]
    pub ttl: u64,
    /// Take over a claim whose TTL has run out.
    #[arg(long)]
    pub takeover: bool,
}

/// `renew` / `release`.
#[derive(Debug, Args)]
pub struct HolderArgs {
    /// The inbox item or mention.
    pub id: String,
    /// The agent holding the claim.
    #[arg(long)]
    pub agent: String,
    /// A new TTL in seconds (renew only) [default: the claim's].
    #[arg(long)]
    pub ttl: Option<u64>,
}

/// `mentions`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MentionsArgs {
    #[command(subcommand)]
    pub command: Option<MentionsCommand>,
    /// Only this agent's mentions.
    #[arg(long)]
    pub agent: Option<String>,
}

/// The mention verbs.
#[derive(Debug, Subcommand)]
pub enum MentionsCommand {
    /// Acknowledge mentions (all or nothing).
    Ack(IdsArgs),
}

fn items_table(items: &[Value]) -> String {
    let mut t = super::table::Table::new(&[
        "ID", "STATUS", "PRIORITY", "TRIGGER", "AGENT", "CHANNEL", "FROM", "PREVIEW",
    ]);
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for i in items {
        let claim = match &i["claim"] {
            Value::Object(c) => format!(
                " [claimed by {} until {}]",
                c["agent"].as_str().unwrap_or_default(),
                c["expires_at"].as_str().unwrap_or_default()
            ),
            _ => String::new(),
        };
        t.row(vec![
            s(&i["id"]),
            s(&i["status"]),
            s(&i["priority"]),
            s(&i["trigger_type"]),
            s(&i["agent"]),
            s(&i["channel_id"]),
            s(&i["author"]),
            format!("{}{claim}", s(&i["preview"])),
        ]);
    }
    t.render()
}

/// Run `inbox`.
pub fn run(ctx: &Ctx, a: InboxArgs) -> Result<u8> {
    let Some(cmd) = a.command else {
        return list(ctx, a.agent, a.status);
    };
    match cmd {
        InboxCommand::Seen(x) => {
            let ids = x.ids.clone();
            let updates: Vec<agents::service::ItemUpdate> = ids
                .iter()
                .map(|id| agents::service::ItemUpdate {
                    id: id.clone(),
                    status: Status::Seen,
                    completion_ref: None,
                })
                .collect();
            let items = agents::service::update_items(&ctx.store, ctx.now, &updates, None, false)
                .map_err(|e| {
                agents::service::explain_missing(&ctx.store, ctx.now, e, &x.ids[0])
            })?;
            let text = format!("Seen: {}", x.ids.join(", "));
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "items": items}), text),
            )
        }
        InboxCommand::Complete(f) => finish(ctx, f, Status::Completed),
        InboxCommand::Skip(f) => finish(ctx, f, Status::Skipped),
        InboxCommand::Claim(c) => {
            let req = agents::service::ClaimItem {
                id: c.id.clone(),
                agent: c.agent,
                worker: "cli".into(),
                ttl: c.ttl,
                takeover: c.takeover,
            };
            let out = agents::service::claim_item(&ctx.store, ctx.now, &req)
                .map_err(|e| agents::service::explain_missing(&ctx.store, ctx.now, e, &c.id))?;
            let (text, code) = match &out {
                ops::ClaimOutcome::Ok {
                    id,
                    claim,
                    takeover,
                    previous,
                } => (
                    format!(
                        "Claimed {id} for {} until {}{}",
                        claim.agent,
                        claim.expires_at,
                        if *takeover {
                            format!(
                                " (took over the expired claim of {})",
                                previous.as_ref().map(|p| p.agent.as_str()).unwrap_or("?")
                            )
                        } else {
                            String::new()
                        }
                    ),
                    0,
                ),
                ops::ClaimOutcome::Conflict { id, message, .. } => {
                    (format!("CONFLICT on {id}: {message}"), 3)
                }
            };
            print(
                ctx.out,
                &Out {
                    json: serde_json::to_value(&out).expect("serializes"),
                    text,
                    code,
                },
            )
        }
        InboxCommand::Renew(h) => {
            let c = agents::service::renew_item(&ctx.store, ctx.now, &h.id, &h.agent, h.ttl)
                .map_err(|e| agents::service::explain_missing(&ctx.store, ctx.now, e, &h.id))?;
            let text = format!("Renewed {} until {}", h.id, c.expires_at);
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "id": h.id, "claim": c}), text),
            )
        }
        InboxCommand::Release(h) => {
            if h.ttl.is_some() {
                return Err(Error::invalid(Reason::InvalidInput, "--ttl is for renew"));
            }
            let c = agents::service::release_item(&ctx.store, ctx.now, &h.id, &h.agent)
                .map_err(|e| agents::service::explain_missing(&ctx.store, ctx.now, e, &h.id))?;
            let text = format!("Released {} (held by {})", h.id, c.agent);
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "id": h.id, "released": c}), text),
            )
        }
    }
}

fn finish(ctx: &Ctx, f: FinishArgs, status: Status) -> Result<u8> {
    let refs = ops::completion_ref(status, &f.refs)?;
    if let Some(a) = &f.agent {
        views::agent_name(&ctx.store, ctx.now, a)?;
    }
    let by = f.agent.as_ref().map(|a| a.to_ascii_lowercase());
    let item =
        agents::service::update_item(&ctx.store, ctx.now, &f.id, status, refs, by.as_deref())
            .map_err(|e| agents::service::explain_missing(&ctx.store, ctx.now, e, &f.id))?;
    let text = format!(
        "{} {}",
        if status == Status::Completed {
            "Completed"
        } else {
            "Skipped"
        },
        item.id
    );
    print(
        ctx.out,
        &Out::ok(json!({"status": "ok", "item": item}), text),
    )
}

fn list(ctx: &Ctx, agent: Option<String>, status: Option<Status>) -> Result<u8> {
    let agent = match agent {
        Some(a) => Some(views::agent_name(&ctx.store, ctx.now, &a)?),
        None => None,
    };
    let items = views::items(&ctx.store, ctx.now, agent.as_deref(), status)?;
    let text = if items.is_empty() {
        "Inbox empty".to_string()
    } else {
        items_table(&items)
    };
    print(
        ctx.out,
        &Out::ok(json!({"status": "ok", "items": items}), text),
    )
}

/// Run `mentions`.
pub fn run_mentions(ctx: &Ctx, a: MentionsArgs) -> Result<u8> {
    match a.command {
        Some(MentionsCommand::Ack(ids)) => {
            let acked = agents::service::ack_mentions(&ctx.store, ctx.now, &ids.ids)?;
            let text = format!("Acknowledged {}", ids.ids.join(", "));
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "mentions": acked}), text),
            )
        }
        None => {
            let agent = match &a.agent {
                Some(n) => Some(views::agent_name(&ctx.store, ctx.now, n)?),
                None => None,
            };
            let v = views::mentions(&ctx.store, ctx.now, agent.as_deref())?;
            let text = if v.is_empty() {
                "No unacknowledged mentions".to_string()
            } else {
                v.iter()
                    .map(|m| {
                        format!(
                            "{} @{} by {} in {} ({}, via {})",
                            m.id, m.agent, m.author, m.channel_id, m.source_id, m.via
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "mentions": v}), text),
            )
        }
    }
}
