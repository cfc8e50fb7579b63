//! API keys for `conductor serve`: `runtime-api-keys.json` in the home (0600, like every file
//! the store writes), managed with `conductor agent key create|list|revoke`. The document and
//! its transactions live in `conductor::agents::keys`; this is the CLI face.
//!
//! A key identifies one registered agent ("me" in Canopy's API). Only the SHA-256 of a key is
//! stored; the key itself is printed once, by `create`. Keys look like
//! `cdk_<8 hex: the key id>_<32 hex: the secret>`.

use clap::{Args, Subcommand};
use serde_json::json;

use crate::face::{Ctx, Out, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};

pub use conductor::agents::keys::{Keys, agent_for, any, random_hex};

/// `agent key`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key for an agent (printed once; only its hash is kept).
    Create(CreateArgs),
    /// List keys (ids, agents, creation times; never the keys).
    List,
    /// Revoke a key by its id (`key-xxxxxxxx`) or the key itself.
    Revoke(RevokeArgs),
}

/// `agent key create`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "The key goes in the X-API-Key header of requests to `conductor serve`. \
It is printed once: store it where the agent reads its configuration. Keys live hashed in \
runtime-api-keys.json in the home (mode 0600).\n\nExample:\n  conductor agent key create scout --label laptop"
)]
pub struct CreateArgs {
    /// The registered agent the key acts as.
    pub agent: String,
    /// A note shown by `list`.
    #[arg(long)]
    pub label: Option<String>,
}

/// `agent key revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The key's id (`key-xxxxxxxx`) or the key.
    pub key: String,
}

/// Run an `agent key` command.
pub fn run(ctx: &Ctx, cmd: KeyCommand) -> Result<u8> {
    match cmd {
        KeyCommand::Create(a) => {
            if let Some(l) = &a.label
                && (l.len() > 200 || l.chars().any(char::is_control))
            {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    "a label is at most 200 characters, without control characters",
                ));
            }
            let conductor::agents::keys::Created { entry, key } =
                conductor::agents::keys::create(&ctx.store, ctx.now, &a.agent, a.label)?;
            print(
                ctx.out,
                &Out::ok(
                    json!({"status": "ok", "id": entry.id, "agent": entry.agent, "key": key}),
                    format!(
                        "{key}\nCreated {} for agent {} (shown once; send it as X-API-Key)",
                        entry.id, entry.agent
                    ),
                ),
            )
        }
        KeyCommand::List => {
            let keys: Keys = ctx.store.read_doc(ctx.now)?;
            let rows: Vec<_> = keys
                .keys
                .iter()
                .map(|k| json!({"id": k.id, "agent": k.agent, "created_at": k.created_at, "label": k.label}))
                .collect();
            let text = if rows.is_empty() {
                "No API keys (conductor agent key create AGENT)".to_string()
            } else {
                keys.keys
                    .iter()
                    .map(|k| {
                        format!(
                            "{} {:<16} {} {}",
                            k.id,
                            k.agent,
                            k.created_at,
                            k.label.as_deref().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            print(
                ctx.out,
                &Out::ok(json!({"status": "ok", "keys": rows}), text),
            )
        }
        KeyCommand::Revoke(a) => {
            let gone = conductor::agents::keys::revoke(&ctx.store, ctx.now, &a.key)?;
            print(
                ctx.out,
                &Out::ok(
                    json!({"status": "ok", "revoked": gone.id, "agent": gone.agent}),
                    format!("Revoked {} (agent {})", gone.id, gone.agent),
                ),
            )
        }
    }
}
