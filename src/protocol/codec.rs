//! `status.json` as bytes: decoding and encoding. Pure: the store reads and writes the file, this
//! module says what its bytes mean.
//!
//! Decoding is one typed parse: every field of [`State`] is deserialized by a function that
//! refuses exactly what `schemas/status.schema.json` refuses (parse, don't validate), so no
//! generic JSON value is built and no schema is walked on the hot path. The schema stays the
//! published contract, `doctor` still runs the full validator ([`decode_validated`]), and a
//! property test (`tests/it/agree.rs`) checks that both accept and refuse the same documents.
//!
//! One difference is outside the schema's data model: a document that repeats a key conductor
//! knows (two `"id"` in one instance) is refused here, where a generic JSON value keeps the last.
//!
//! What the schema cannot express (every claim listed by its holder, no file under two
//! instances, relative or unresolved claim keys) is not a reason to refuse a state: such a state
//! is served as it is (`global_claims` is the truth) and repaired by the next transaction, see
//! [`super::foreign`].

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
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<State> {
        decode(path, bytes)
    }
    // A transaction changes the claim lists of the instances it is about: every other
    // instance's are kept as their text (see `lazy_list`).
    fn decode_for_update(path: &Path, bytes: &[u8]) -> crate::store::Result<State> {
        super::lazy_list::lazily(|| decode(path, bytes))
    }
    fn encode(&self) -> Vec<u8> {
        encode(self)
    }
    // On a shared store `global_claims` is kept in pages (issue 36 §2), each claim with its
    // holder's fencing token; the head is the rest (see `split_state`, `join_state`).
    const PAGED: bool = true;
    fn split(&self) -> crate::store::split::Split {
        split_state(self)
    }
    fn join(
        path: &Path,
        head: &[u8],
        entries: std::collections::BTreeMap<String, Value>,
    ) -> crate::store::Result<State> {
        join_state(path, head, entries)
    }
}

/// `status.json` cut for a shared store's paged layout: each claim of a file or a directory is an
/// entry `key -> [holder]` or `[holder, token]`; the head is the rest of the state, with the glob
/// claims (a short list every claim decision reads whole) and without the other claims (in
/// `global_claims` and in each instance's `files_claimed` and `claim_tokens`).
fn split_state(st: &State) -> crate::store::split::Split {
    use super::claims::is_glob;
    let mut entries = std::collections::BTreeMap::new();
    let mut globs = std::collections::BTreeMap::new();
    for (key, holder) in &st.global_claims {
        if is_glob(key) {
            globs.insert(key.clone(), holder.clone());
            continue;
        }
        let token = st
            .instance(holder)
            .and_then(|i| i.claim_tokens.get(key).copied());
        let v = match token {
            Some(t) => serde_json::json!([holder, t]),
            None => serde_json::json!([holder]),
        };
        entries.insert(key.clone(), v);
    }
    let head = State {
        version: st.version.clone(),
        updated_at: st.updated_at,
        instances: st
            .instances
            .iter()
            .map(|inst| {
                let mut i = inst.clone();
                i.files_claimed.retain(|k| is_glob(k));
                i.claim_tokens.retain(|k, _| is_glob(k));
                i
            })
            .collect(),
        global_claims: globs,
        last_token: st.last_token,
        drift_warnings: st.drift_warnings.clone(),
        extra: st.extra.clone(),
        repos: Default::default(),
    };
    crate::store::split::Split {
        head: encode(&head),
        entries,
    }
}

/// The state from a paged layout's head and claims.
fn join_state(
    path: &Path,
    head: &[u8],
    entries: std::collections::BTreeMap<String, Value>,
) -> crate::store::Result<State> {
    let mut st = decode(path, head)?;
    absorb(&mut st, path, entries)?;
    Ok(st)
}

/// Add claims read from a paged layout's pages to `st`: each instance then lists the claims it
/// holds in the order they were granted (by fencing token; claims without one first, by key).
pub fn absorb(
    st: &mut State,
    path: &Path,
    entries: std::collections::BTreeMap<String, Value>,
) -> crate::store::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut touched = std::collections::HashSet::new();
    for (key, v) in entries {
        let (holder, token) = match v.as_array().map(Vec::as_slice) {
            Some([Value::String(h)]) => (h.clone(), None),
            Some([Value::String(h), t]) if t.as_u64().is_some() => (h.clone(), t.as_u64()),
            _ => {
                return Err(corrupt(
                    path,
                    format!("the claim {key} is {v}, not [holder] or [holder, token]"),
                ));
            }
        };
        if let Some(inst) = st.instance_mut(&holder) {
            if let Some(t) = token {
                inst.claim_tokens.insert(key.clone(), t);
            }
            inst.files_claimed.push(key.clone());
            touched.insert(holder.clone());
        }
        st.global_claims.insert(key, holder);
    }
    for inst in st.instances.iter_mut().filter(|i| touched.contains(&i.id)) {
        let tokens = &inst.claim_tokens;
        inst.files_claimed
            .sort_by_cached_key(|k| (tokens.get(k).copied(), k.clone()));
        inst.files_claimed.dedup();
    }
    Ok(())
}

/// The state for a quick read-only decision (agent hooks, prompt): the same full decode as
/// [`decode`], which costs no more than parsing, then claim keys another program wrote relative
/// (or with `.`/`..`) are read as the paths they mean ([`super::foreign::interpret`]), so a
/// decision made before conductor's next transaction rewrites them sees the right holder.
pub fn decode_quick(path: &Path, bytes: &[u8]) -> Result<State> {
    let mut st = decode(path, bytes)?;
    super::foreign::interpret(&mut st);
    Ok(st)
}

/// Parse `status.json`: any document valid under `schemas/status.schema.json` is read, anything
/// else is `corrupt_state` naming what is wrong and where.
pub fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<State> {
    // UTF-8 is checked once for the whole file (fast for ASCII), not string by string.
    let text = std::str::from_utf8(bytes).map_err(|e| {
        corrupt(
            path,
            format!("not valid JSON (invalid UTF-8 at byte {})", e.valid_up_to()),
        )
    })?;
    serde_json::from_str(text).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "not valid JSON"
        } else {
            "not valid conductor state"
        };
        corrupt(path, format!("{what} ({e})"))
    })
}

/// [`decode`], after checking the document with the full JSON Schema validator (for `doctor`):
/// a schema violation is reported in the schema's words.
pub fn decode_validated(path: &Path, bytes: &[u8]) -> Result<State> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, format!("not valid JSON ({e})")))?;
    if let Some(v) = value.get("version").and_then(Value::as_str)
        && v != STATE_VERSION
    {
        return Err(corrupt(path, super::types::de::version_message(v)).into());
    }
    schema::validate(Schema::Status, &value)
        .map_err(|e| corrupt(path, format!("schema violation {e}")))?;
    decode(path, bytes).map_err(Into::into)
}

/// The invariants of the form conductor writes, which JSON Schema cannot express: unique ids, no
/// file held twice, and `global_claims` equal to the union of every instance's `files_claimed`.
/// A state read from disk need not obey them (another program may have written it); conductor
/// repairs it at its next transaction ([`super::foreign::reconcile`]) and every state it commits
/// obeys them.
pub fn check_consistency(st: &State) -> std::result::Result<(), String> {
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

/// The bytes written for a state: pretty JSON (two-space indent, one key per line, so people
/// and `diff` can read it) and a final newline.
pub fn encode(state: &State) -> Vec<u8> {
    // About 130 bytes per claim and 400 per instance: one allocation in the common case.
    let guess = 256 + state.global_claims.len() * 160 + state.instances.len() * 512;
    let mut bytes = Vec::with_capacity(guess);
    // Unchanged claim lists are written as the text they were read from (`lazy_list`).
    super::lazy_list::writing_state(|| serde_json::to_writer_pretty(&mut bytes, state))
        .expect("state serializes");
    bytes.push(b'\n');
    bytes
}
