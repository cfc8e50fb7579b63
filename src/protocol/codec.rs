//! `status.json` as bytes: decoding (parse, version check, schema, consistency) and encoding.
//! Pure: the store reads and writes the file, this module says what its bytes mean.

use std::path::Path;

use serde_json::Value;

use super::{STATE_VERSION, State};
use crate::error::Result;
use crate::schema::{self, Schema};
use crate::store::corrupt;

impl crate::store::Document for State {
    const FILE: &'static str = "status.json";
    const LOCK: crate::store::Lock = crate::store::Lock::Status;
    const TRACK_FOREIGN_WRITES: bool = true;

    fn empty(now: crate::time::Timestamp) -> State {
        State::empty(now)
    }
    fn decode(path: &Path, bytes: &[u8]) -> Result<State> {
        decode(path, bytes)
    }
    fn encode(&self) -> Vec<u8> {
        encode(self)
    }
}

/// The current state for a quick read-only decision (agent hooks): parsed, version- and
/// consistency-checked, but not validated against the JSON Schema.
pub fn decode_quick(path: &Path, bytes: &[u8]) -> Result<State> {
    let state: State = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, format!("not valid conductor state ({e})")))?;
    if state.version != STATE_VERSION {
        return Err(corrupt(
            path,
            format!(
                "it has version \"{}\" and this conductor reads \"{STATE_VERSION}\" only",
                crate::protocol::ops::printable(&state.version)
            ),
        ));
    }
    check_consistency(&state).map_err(|e| corrupt(path, e))?;
    Ok(state)
}

/// Parse, version-check, validate and consistency-check `status.json`.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<State> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, format!("not valid JSON ({e})")))?;
    if let Some(v) = value.get("version").and_then(Value::as_str)
        && v != STATE_VERSION
    {
        return Err(corrupt(
            path,
            format!(
                "it has version \"{}\" and this conductor reads \"{STATE_VERSION}\" only; upgrade conductor",
                crate::protocol::ops::printable(v)
            ),
        ));
    }
    schema::validate(Schema::Status, &value)
        .map_err(|e| corrupt(path, format!("schema violation {e}")))?;
    let state: State = serde_json::from_value(value).map_err(|e| corrupt(path, e.to_string()))?;
    check_consistency(&state).map_err(|e| corrupt(path, e))?;
    Ok(state)
}

/// The invariants JSON Schema cannot express: unique ids, no file held twice, and
/// `global_claims` equal to the union of every instance's `files_claimed`.
pub fn check_consistency(st: &State) -> Result<(), String> {
    let mut seen_ids = std::collections::BTreeSet::new();
    let mut union = std::collections::BTreeMap::new();
    for i in &st.instances {
        if !seen_ids.insert(i.id.as_str()) {
            return Err(format!("instance {} appears twice", i.id));
        }
        for f in &i.files_claimed {
            if let Some(other) = union.insert(f.as_str(), i.id.as_str()) {
                return Err(format!("{f} is claimed by both {other} and {}", i.id));
            }
        }
    }
    let claims: std::collections::BTreeMap<&str, &str> = st
        .global_claims
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if claims != union {
        let diff = claims
            .iter()
            .find(|(k, v)| union.get(*k) != Some(v))
            .map(|(k, v)| format!("global_claims says {k} is held by {v}"))
            .or_else(|| {
                union
                    .iter()
                    .find(|(k, _)| !claims.contains_key(*k))
                    .map(|(k, v)| format!("{v} claims {k} but global_claims does not list it"))
            })
            .unwrap_or_default();
        return Err(format!(
            "global_claims does not match the instances' files_claimed: {diff}"
        ));
    }
    Ok(())
}

/// The bytes written for a state: pretty JSON and a final newline.
pub fn encode(state: &State) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(state).expect("state serializes");
    bytes.push(b'\n');
    bytes
}
