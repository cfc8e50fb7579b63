//! Edits nobody claimed (issue 33 §2): the safety net behind the hooks. A file changed in the
//! working directory of a live session, which no live session holds a claim covering, under an
//! `enforce` mode whose hooks would have claimed it (or refused the edit), means some agent
//! edits without its hooks: they stopped, were never trusted, or never ran.
//!
//! [`super::edit_watch`] sees the changes; here they are judged and recorded: an
//! `edit.unclaimed` event in the journal (payload `path`, `at`, `sessions`) and the latest ones in
//! `unclaimed.json` ([`UnclaimedDoc`], under `status.lock`), which `status`, `top` and the
//! dashboard show while a session they name is still listed. Pure but for [`record`], which
//! runs [`note`] in one transaction.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::claims;
use super::ops::{Liveness, is_alive};
use super::{Instance, State};
use crate::error::Result;
use crate::store::event::NewEvent;
use crate::store::{Lock, Store};
use crate::time::Timestamp;

pub use super::events::EDIT_UNCLAIMED;

/// The most entries `unclaimed.json` keeps (the newest).
pub const KEPT: usize = 50;

/// One unclaimed edit, as `status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnclaimedEdit {
    /// The file (absolute).
    pub path: String,
    /// When the change was seen (the last time, for a file changed again).
    pub at: Timestamp,
    /// The live sessions working in a directory holding the file, when it changed.
    pub sessions: Vec<String>,
    /// How many changes of the file were seen unclaimed (one per quiet period).
    #[serde(default = "one")]
    pub count: u64,
}

fn one() -> u64 {
    1
}

/// `unclaimed.json`: the newest unclaimed edits, at most [`KEPT`], one entry per file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnclaimedDoc {
    #[serde(default)]
    pub edits: Vec<UnclaimedEdit>,
}

impl crate::store::Document for UnclaimedDoc {
    const FILE: &'static str = "unclaimed.json";
    const LOCK: Lock = Lock::Status;

    fn empty(_now: Timestamp) -> UnclaimedDoc {
        UnclaimedDoc::default()
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<UnclaimedDoc> {
        serde_json::from_slice(bytes).map_err(|e| crate::store::corrupt(path, e.to_string()))
    }
    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("unclaimed edits serialize");
        v.push(b'\n');
        v
    }
}

/// True when `path` lies inside directory `dir` (absolute, with or without a final `/`).
pub fn inside(dir: &str, path: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The live instances working in a directory that holds `path`.
pub fn sessions_in<'s>(
    st: &'s State,
    path: &str,
    now: Timestamp,
    live: &dyn Liveness,
) -> Vec<&'s Instance> {
    st.instances
        .iter()
        .filter(|i| inside(&i.working_directory, path) && is_alive(i, now, live))
        .collect()
}

/// True when a live instance holds a claim covering `path` (a file, a directory above it, or a
/// glob matching it: the protocol's own coverage rule, [`claims::overlapping`]).
pub fn claimed(st: &State, path: &str, now: Timestamp, live: &dyn Liveness) -> bool {
    let globs: Vec<String> = claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    claims::overlapping(&st.global_claims, &globs, path)
        .iter()
        .any(|(_, holder, _)| st.instance(holder).is_some_and(|h| is_alive(h, now, live)))
}

/// The unclaimed edit `path` is, if it is one: some live session works in a directory holding
/// it and no live session holds a claim covering it.
pub fn judge(st: &State, path: &str, now: Timestamp, live: &dyn Liveness) -> Option<UnclaimedEdit> {
    let sessions = sessions_in(st, path, now, live);
    if sessions.is_empty() || claimed(st, path, now, live) {
        return None;
    }
    Some(UnclaimedEdit {
        path: path.to_string(),
        at: now,
        sessions: sessions.iter().map(|i| i.id.clone()).collect(),
        count: 1,
    })
}

/// Record the changes `paths` seen at `now` that are unclaimed edits in `st`: one event each,
/// and the entry of each file in `doc` (entries naming no instance `st` still lists are
/// dropped; the newest [`KEPT`] are kept). Returns the edits recorded.
pub fn note(
    st: &State,
    doc: &mut UnclaimedDoc,
    paths: &[String],
    now: Timestamp,
    live: &dyn Liveness,
    events: &mut Vec<NewEvent>,
) -> Vec<UnclaimedEdit> {
    let mut out = Vec::new();
    for p in paths {
        let Some(mut e) = judge(st, p, now, live) else {
            continue;
        };
        if let Some(old) = doc.edits.iter().position(|o| o.path == e.path) {
            e.count = doc.edits.remove(old).count.saturating_add(1);
        }
        let project = st
            .instance(&e.sessions[0])
            .map(|i| i.project.clone())
            .filter(|p| !p.is_empty());
        events.push(NewEvent {
            event_type: EDIT_UNCLAIMED,
            actor: None,
            target: (e.sessions.len() == 1).then(|| e.sessions[0].clone()),
            project,
            payload: serde_json::json!({"path": e.path, "at": e.at, "sessions": e.sessions, "count": e.count}),
        });
        doc.edits.push(e.clone());
        out.push(e);
    }
    prune(doc, st);
    out
}

/// Drop the entries that name no instance `st` still lists, and all but the newest [`KEPT`].
pub fn prune(doc: &mut UnclaimedDoc, st: &State) {
    doc.edits
        .retain(|e| e.sessions.iter().any(|s| st.instance(s).is_some()));
    let excess = doc.edits.len().saturating_sub(KEPT);
    doc.edits.drain(..excess);
}

/// The entries of `doc` that concern an instance `st` still lists, newest first.
pub fn current<'d>(doc: &'d UnclaimedDoc, st: &State) -> Vec<&'d UnclaimedEdit> {
    let mut v: Vec<&UnclaimedEdit> = doc
        .edits
        .iter()
        .filter(|e| e.sessions.iter().any(|s| st.instance(s).is_some()))
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.at));
    v
}

/// Judge and record `paths` in one transaction on the latest state ([`note`]). Nothing is
/// written when none of them is an unclaimed edit.
pub fn record(
    store: &Store,
    now: Timestamp,
    paths: &[String],
    live: &dyn Liveness,
) -> Result<Vec<UnclaimedEdit>> {
    super::transact_tx(store, now, |st, fx, tx| {
        let mut doc: UnclaimedDoc = tx.read()?;
        let mut events = Vec::new();
        let found = note(st, &mut doc, paths, now, live, &mut events);
        if !found.is_empty() {
            tx.write(&doc)?;
            fx.extend(events.into_iter().map(super::ops::Effect::Event));
        }
        Ok(found)
    })
}

/// `unclaimed.json` as it is (empty when absent).
pub fn read(store: &Store, now: Timestamp) -> Result<UnclaimedDoc> {
    Ok(store.read_doc::<UnclaimedDoc>(now)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::{self, AssumeAlive, NewInstance};
    use crate::protocol::{Priority, Source};

    fn at() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    fn state_with(dir: &str, claims: &[&str]) -> (State, String) {
        let now = at();
        let mut st = State::empty(now);
        let mut fx = Vec::new();
        let id = ops::start(
            &mut st,
            NewInstance {
                source: Source::Web,
                project: "p".into(),
                task: "t".into(),
                priority: Priority::P1,
                working_directory: dir.into(),
                override_reason: None,
                pid: None,
                host: None,
                session_id: None,
            },
            None,
            || "a1b2c3".into(),
            now,
            &mut fx,
        );
        let keys: Vec<String> = claims.iter().map(|s| s.to_string()).collect();
        if !keys.is_empty() {
            ops::claim(&mut st, &id, &keys, None, now, &AssumeAlive, &mut fx).unwrap();
        }
        (st, id)
    }

    #[test]
    fn a_file_claimed_by_file_directory_or_glob_is_not_an_unclaimed_edit() {
        for key in ["/w/app/src/a.rs", "/w/app/src/", "/w/app/**/*.rs"] {
            let (st, _) = state_with("/w/app", &[key]);
            assert_eq!(
                judge(&st, "/w/app/src/a.rs", at(), &AssumeAlive),
                None,
                "{key}"
            );
        }
        let (st, id) = state_with("/w/app", &["/w/app/src/*.txt"]);
        let e = judge(&st, "/w/app/src/a.rs", at(), &AssumeAlive).unwrap();
        assert_eq!(e.sessions, [id]);
    }

    #[test]
    fn outside_every_session_directory_is_nobody_s_business() {
        let (st, _) = state_with("/w/app", &[]);
        assert_eq!(judge(&st, "/w/app2/a.rs", at(), &AssumeAlive), None);
        assert_eq!(judge(&st, "/w/other/a.rs", at(), &AssumeAlive), None);
        assert!(judge(&st, "/w/app/a.rs", at(), &AssumeAlive).is_some());
    }

    #[test]
    fn a_file_changed_again_keeps_one_entry_with_its_count() {
        let (st, id) = state_with("/w/app", &[]);
        let mut doc = UnclaimedDoc::default();
        let mut ev = Vec::new();
        let p = vec!["/w/app/a.rs".to_string()];
        note(&st, &mut doc, &p, at(), &AssumeAlive, &mut ev);
        note(&st, &mut doc, &p, at(), &AssumeAlive, &mut ev);
        assert_eq!(doc.edits.len(), 1);
        assert_eq!(doc.edits[0].count, 2);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[1].event_type, EDIT_UNCLAIMED);
        assert_eq!(ev[1].target.as_deref(), Some(id.as_str()));
        // Once its session is gone from the state, the entry goes at the next note.
        let empty = State::empty(at());
        prune(&mut doc, &empty);
        assert!(doc.edits.is_empty());
    }
}
