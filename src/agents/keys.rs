//! API keys for Canopy's HTTP API (`conductor serve`): `runtime-api-keys.json` in the home
//! (0600, like every file the store writes). A key identifies one registered agent ("me" in
//! Canopy's API). Only the SHA-256 of a key is stored; the key itself is handed out once, by
//! [`create`]. Keys look like `cdk_<8 hex: the key id>_<32 hex: the secret>`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Agents, ops};
use crate::error::{Error, Reason, Result};
use crate::store::{Document, Lock, Store, corrupt};
use crate::time::Timestamp;

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
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let d: Keys = serde_json::from_slice(bytes).map_err(|e| corrupt(path, e.to_string()))?;
        if d.version != "1.0" {
            return Err(corrupt(path, format!("version `{}` is not 1.0", d.version)));
        }
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        super::to_bytes(self)
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

/// A new key: its entry (as stored, without the key) and the key, shown once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Created {
    pub entry: Key,
    pub key: String,
}

/// Create a key for registered agent `agent`, with an optional note.
pub fn create(
    store: &Store,
    now: Timestamp,
    agent: &str,
    label: Option<String>,
) -> Result<Created> {
    let id = random_hex(4);
    let key = format!("cdk_{id}_{}", random_hex(16));
    let entry = store.transaction(now, &[Lock::Agents], |tx| {
        let agents: Agents = tx.read()?;
        let agent = ops::agent(&agents, agent)?.name.clone();
        let mut keys: Keys = tx.read()?;
        let entry = Key {
            id: format!("key-{id}"),
            agent,
            sha256: digest(&key),
            created_at: now,
            label: label.clone(),
        };
        keys.keys.push(entry.clone());
        tx.write(&keys)?;
        Ok::<_, Error>(entry)
    })?;
    Ok(Created { entry, key })
}

/// Revoke a key by its id (`key-xxxxxxxx`) or the key itself; returns its entry.
pub fn revoke(store: &Store, now: Timestamp, wanted: &str) -> Result<Key> {
    store.transaction(now, &[Lock::Agents], |tx| {
        let mut keys: Keys = tx.read()?;
        let d = digest(wanted);
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
                        crate::text::printable(wanted)
                    } else {
                        "given".into()
                    }
                ),
            ));
        };
        let k = keys.keys.remove(i);
        tx.write(&keys)?;
        Ok(k)
    })
}
