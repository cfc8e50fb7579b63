//! API keys for `conductor serve`: `runtime-api-keys.json` in the home (0600, like every file
//! the store writes), managed with `conductor agent key create|list|revoke`.
//!
//! A key identifies one registered agent ("me" in Canopy's API). Only the SHA-256 of a key is
//! stored; the key itself is printed once, by `create`. Keys look like
//! `cdk_<8 hex: the key id>_<32 hex: the secret>`.

use std::path::Path;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::commands::{Ctx, Out, print};
use conductor::agents::{Agents, ops};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::store::{Document, Lock, Store, corrupt};
use conductor::time::Timestamp;

/// `runtime-api-keys.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keys {
    pub version: String,
    pub keys: Vec<Key>,
}

/// One key (its hash, never the key).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    /// `key-` plus 8 hex digits (also inside the key, so `revoke` can name it).
    pub id: String,
    pub agent: String,
    /// Hex SHA-256 of the whole key.
    pub sha256: String,
    pub created_at: Timestamp,
    pub label: Option<String>,
}

impl Document for Keys {
    const FILE: &'static str = "runtime-api-keys.json";
    const LOCK: Lock = Lock::Agents;
    fn empty(_now: Timestamp) -> Self {
        Keys {
            version: "1.0".into(),
            keys: Vec::new(),
        }
    }
    fn decode(path: &Path, bytes: &[u8]) -> conductor::store::Result<Self> {
        let d: Keys = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e.to_string()))?;
        if d.version != "1.0" {
            return Err(corrupt(path, format!("version `{}` is not 1.0", d.version)));
        }
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        conductor::agents::to_bytes(self)
    }
}

/// The hex SHA-256 of a key.
pub fn digest(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Random hex digits.
pub fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// The agent a presented key belongs to (`None`: no such key, or its agent is gone).
pub fn agent_for(store: &Store, now: Timestamp, presented: &str) -> Result<Option<String>> {
    let keys: Keys = store.read_doc(now)?;
    let d = digest(presented);
    // Compare every stored hash without stopping early (the time says nothing about which).
    let mut found = None;
    for k in &keys.keys {
        let same = k
            .sha256
            .bytes()
            .zip(d.bytes())
            .fold(k.sha256.len() ^ d.len(), |acc, (a, b)| {
                acc | (a ^ b) as usize
            })
            == 0;
        if same {
            found = Some(k.agent.clone());
        }
    }
    let Some(agent) = found else { return Ok(None) };
    let agents: Agents = store.read_doc(now)?;
    Ok(agents.agents.contains_key(&agent).then_some(agent))
}

/// True when at least one key exists.
pub fn any(store: &Store, now: Timestamp) -> Result<bool> {
    let keys: Keys = store.read_doc(now)?;
    Ok(!keys.keys.is_empty())
}

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
            let id = random_hex(4);
            let key = format!("cdk_{id}_{}", random_hex(16));
            let entry = ctx.store.transaction(ctx.now, &[Lock::Agents], |tx| {
                let agents: Agents = tx.read()?;
                let agent = ops::agent(&agents, &a.agent)?.name.clone();
                let mut keys: Keys = tx.read()?;
                let entry = Key {
                    id: format!("key-{id}"),
                    agent,
                    sha256: digest(&key),
                    created_at: ctx.now,
                    label: a.label.clone(),
                };
                keys.keys.push(entry.clone());
                tx.write(&keys)?;
                Ok::<_, Error>(entry)
            })?;
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
            let wanted = a.key.clone();
            let gone = ctx.store.transaction(ctx.now, &[Lock::Agents], |tx| {
                let mut keys: Keys = tx.read()?;
                let d = digest(&wanted);
                let Some(i) = keys
                    .keys
                    .iter()
                    .position(|k| k.id == wanted || k.sha256 == d)
                else {
                    return Err(Error::invalid(
                        Reason::UnknownKey,
                        format!(
                            "no API key `{}` (conductor agent key list)",
                            if wanted.starts_with("key-") {
                                conductor::text::printable(&wanted)
                            } else {
                                "given".into()
                            }
                        ),
                    ));
                };
                let k = keys.keys.remove(i);
                tx.write(&keys)?;
                Ok(k)
            })?;
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
