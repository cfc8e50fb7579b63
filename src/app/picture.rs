//! The live picture of a home's sessions beside the protocol's state, as `status`, the
//! dashboard and `top` show it: each agent session's enforcement, what is landing, the files
//! changed in several worktrees and the edits nobody claimed. Read without a lock.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::integrations::verdicts::Enforcement;
use crate::protocol::State;
use crate::protocol::landing::{Landing, LandingDoc};
use crate::protocol::overlaps::{self, Report};
use crate::protocol::unclaimed::{self, UnclaimedEdit};
use crate::store::Store;
use crate::time::Timestamp;

/// What the faces show around the sessions of a state.
pub struct Picture {
    /// Each hook-registered session's enforcement (instance id → it), from the live checks.
    pub enforcement: BTreeMap<String, Enforcement>,
    /// Finished branches whose files are landing (`landing.json`).
    pub landing: Vec<Landing>,
    /// Files changed in several live worktrees of a repository sessions work in (runs git only
    /// for repositories with several such worktrees).
    pub overlaps: Vec<Report>,
    /// Edits nobody claimed that concern a session of the state, newest first.
    pub unclaimed: Vec<UnclaimedEdit>,
    /// The side files that could not be read (`landing.json`, `unclaimed.json`), one sentence
    /// each: what they would add is left out, and the rest of the picture is still shown (one bad
    /// file must not hide every session; `doctor` explains, `doctor --repair` mends).
    pub unreadable: Vec<String>,
}

/// The picture around `state` (its worktrees noted: `protocol::repositories::find`).
pub fn read(store: &Store, now: Timestamp, state: &State) -> Result<Picture> {
    let enforcement = super::admission::enforcement_of(store, now, state);
    let mut unreadable = Vec::new();
    let mut left_out = |e: crate::error::Error, what: &str| {
        unreadable.push(format!(
            "{e}; {what} not shown (`conductor doctor` says more)"
        ));
    };
    let landing = match store.read_doc::<LandingDoc>(now) {
        Ok(doc) => doc.landing,
        Err(e) => {
            left_out(e.into(), "what is landing is");
            Vec::new()
        }
    };
    let overlaps = overlaps::of_sessions(store, state);
    let unclaimed = match unclaimed::read(store, now) {
        Ok(doc) => unclaimed::current(&doc, state)
            .into_iter()
            .cloned()
            .collect(),
        Err(e) => {
            left_out(e, "edits nobody claimed are");
            Vec::new()
        }
    };
    Ok(Picture {
        enforcement,
        landing,
        overlaps,
        unclaimed,
        unreadable,
    })
}
