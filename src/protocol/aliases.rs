//! Claim keys another program wrote through a symlink, kept as it wrote them.
//!
//! The original plugin claims `/w/proj-link/src/s.ts` and later releases exactly that key with
//! its own jq recipe. conductor compares claims by where a path physically leads
//! (`/w/proj/src/s.ts`), so two spellings of one file are one claim; but if it rewrote the key,
//! the plugin's `release` would no longer find its claim and the file would stay held. So:
//! symlinks are resolved when keys are COMPARED, never in the key another program wrote.
//!
//! How: [`super::foreign::reconcile`] resolves every key of a foreign write and reports the
//! keys that differ from their resolved form only by symlinks (absolute, lexically normal). The
//! operation then runs on resolved keys ([`to_resolved`]), and before the state is written each
//! such key that is still held by the same instance gets its written spelling back
//! ([`restore`]). Which spellings lead where is kept in `status-aliases.json` ([`KeyAliases`],
//! committed with `status.json` under `status.lock`), so later transactions, and lock-free
//! readers (hooks), resolve those keys without asking the filesystem about every key. The map
//! only records how a path resolved; a spelling no longer in `global_claims` is forgotten.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::State;

/// `status-aliases.json`: claim key as another program wrote it → the key it resolves to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyAliases {
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// The file was there but did not read as a map (a damaged cache): the next transaction
    /// resolves every key again, as after another program's write.
    #[serde(skip)]
    pub damaged: bool,
}

impl crate::store::Document for KeyAliases {
    const FILE: &'static str = "status-aliases.json";
    const LOCK: crate::store::Lock = crate::store::Lock::Status;

    fn empty(_now: crate::time::Timestamp) -> KeyAliases {
        KeyAliases::default()
    }
    fn decode(_path: &Path, bytes: &[u8]) -> crate::store::Result<KeyAliases> {
        Ok(serde_json::from_slice(bytes).unwrap_or(KeyAliases {
            aliases: BTreeMap::new(),
            damaged: true,
        }))
    }
    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("aliases serialize");
        v.push(b'\n');
        v
    }
}

/// One written spelling replaced by its resolved key for the length of an operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub written: String,
    pub resolved: String,
    pub holder: String,
}

/// Replace each written spelling in `aliases` that `st` holds by its resolved key (in
/// `global_claims` and in its holder's `files_claimed`). Returns what was replaced.
pub fn to_resolved(st: &mut State, aliases: &BTreeMap<String, String>) -> Vec<Applied> {
    let mut applied = Vec::new();
    for (written, resolved) in aliases {
        if written == resolved || st.global_claims.contains_key(resolved) {
            continue;
        }
        let Some(holder) = st.global_claims.remove(written) else {
            continue;
        };
        st.global_claims.insert(resolved.clone(), holder.clone());
        rename_listed(st, &holder, written, resolved);
        applied.push(Applied {
            written: written.clone(),
            resolved: resolved.clone(),
            holder,
        });
    }
    applied
}

/// Give back the written spelling of every key in `applied` still held by the same instance.
/// Returns the aliases still in use (what `status-aliases.json` keeps).
pub fn restore(st: &mut State, applied: &[Applied]) -> BTreeMap<String, String> {
    let mut kept = BTreeMap::new();
    for a in applied {
        let same_holder = st.global_claims.get(&a.resolved) == Some(&a.holder);
        if !same_holder || st.global_claims.contains_key(&a.written) {
            continue;
        }
        st.global_claims.remove(&a.resolved);
        st.global_claims.insert(a.written.clone(), a.holder.clone());
        rename_listed(st, &a.holder, &a.resolved, &a.written);
        kept.insert(a.written.clone(), a.resolved.clone());
    }
    kept
}

fn rename_listed(st: &mut State, holder: &str, from: &str, to: &str) {
    if let Some(inst) = st.instances.iter_mut().find(|i| i.id == holder) {
        for f in inst.files_claimed.iter_mut().filter(|f| *f == from) {
            *f = to.to_string();
        }
    }
}

/// The resolved keys of `aliases` as [`Applied`] entries for the holders `st` gives them
/// (after [`super::foreign::reconcile`] resolved a foreign write).
pub fn applied_in(st: &State, aliases: &BTreeMap<String, String>) -> Vec<Applied> {
    aliases
        .iter()
        .filter_map(|(written, resolved)| {
            Some(Applied {
                written: written.clone(),
                resolved: resolved.clone(),
                holder: st.global_claims.get(resolved)?.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn state() -> State {
        let now = Timestamp::parse("2026-01-17T10:00:00Z").unwrap();
        let mut st = State::empty(now);
        let mut fx = Vec::new();
        let mut hex = || "0a0b0c".to_string();
        let id = crate::protocol::ops::start(
            &mut st,
            crate::protocol::ops::NewInstance {
                source: crate::protocol::Source::Web,
                project: "p".into(),
                task: "t".into(),
                priority: crate::protocol::Priority::P1,
                working_directory: "/w".into(),
                override_reason: None,
                pid: None,
                host: None,
                session_id: None,
            },
            None,
            &mut hex,
            now,
            &mut fx,
        );
        st.global_claims.insert("/link/s.ts".into(), id.clone());
        st.instance_mut(&id).unwrap().files_claimed = vec!["/link/s.ts".to_string()].into();
        st
    }

    #[test]
    fn a_written_spelling_is_resolved_for_the_operation_and_given_back() {
        let mut st = state();
        let before = st.clone();
        let map = BTreeMap::from([("/link/s.ts".to_string(), "/real/s.ts".to_string())]);
        let applied = to_resolved(&mut st, &map);
        assert_eq!(applied.len(), 1);
        assert!(st.global_claims.contains_key("/real/s.ts"));
        assert_eq!(st.instances[0].files_claimed, ["/real/s.ts"]);
        assert_eq!(restore(&mut st, &applied), map);
        assert_eq!(st, before);
    }

    #[test]
    fn a_released_or_handed_over_file_is_not_given_back() {
        let map = BTreeMap::from([("/link/s.ts".to_string(), "/real/s.ts".to_string())]);
        let mut st = state();
        let applied = to_resolved(&mut st, &map);
        st.global_claims.clear();
        st.instances[0].files_claimed.clear();
        assert!(restore(&mut st, &applied).is_empty());
        assert!(st.global_claims.is_empty());
        let mut st = state();
        let applied = to_resolved(&mut st, &map);
        st.global_claims
            .insert("/real/s.ts".into(), "cli-000001".into());
        assert!(restore(&mut st, &applied).is_empty());
        assert_eq!(st.global_claims["/real/s.ts"], "cli-000001");
    }
}
