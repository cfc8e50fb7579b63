//! The workflows' own health (`doctor`): their sessions document, and the agent commands their
//! live sessions run.

use std::collections::BTreeSet;

use crate::health::{self, Finding};
use crate::store::Store;
use crate::time::Timestamp;

/// The sessions document, when it exists: readable, or what is wrong with it.
pub fn checks(store: &Store, now: Timestamp) -> Vec<Finding> {
    health::document::<super::Sessions>(store, now, "workflows", None)
        .into_iter()
        .collect()
}

/// The agent commands the live sessions are set to run.
pub fn agent_commands(store: &Store, now: Timestamp) -> BTreeSet<String> {
    let mut commands = BTreeSet::new();
    if let Ok(sessions) = super::all_sessions(store, now) {
        for s in sessions.iter().filter(|s| !s.status.is_finished()) {
            if let Some(c) = &s.agent_cmd {
                commands.insert(c.clone());
            }
        }
    }
    commands
}
