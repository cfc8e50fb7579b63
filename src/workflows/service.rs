//! The workflow operations a worker calls, as every face calls them (the CLI's `workflow
//! transition` and `workflow snapshot`, the MCP server's `workflow_transition` and
//! `workflow_update_snapshot`): a typed request in, a typed outcome out, one transaction each
//! ([`super::update`]). Nothing here prints.

use serde_json::json;

use super::session::Snapshot;
use super::{event, update};
use crate::error::Result;
use crate::store::Store;
use crate::time::Timestamp;

/// Record that the worker of `state` (`None`: whichever is current) finished it, moving to
/// `target` with `summary`; the supervisor applies it when the worker exits. Returns the state
/// it leaves.
pub fn transition(
    store: &Store,
    now: Timestamp,
    session: &str,
    state: Option<&str>,
    target: &str,
    summary: &str,
) -> Result<String> {
    update(store, now, session, |s, ev| {
        s.request_transition(state, target, summary, now)?;
        let from = s.current_state.clone().unwrap_or_default();
        ev.push(super::event(
            event::TRANSITION_REQUESTED,
            s,
            json!({"from": from, "to": target, "summary": summary}),
        ));
        Ok(from)
    })
}

/// What a worker adds to the session's snapshot (each list appended to, each value set).
#[derive(Clone, Debug, Default)]
pub struct SnapshotUpdate {
    pub findings: Vec<String>,
    pub files: Vec<String>,
    pub pending: Vec<String>,
    pub set: Vec<(String, String)>,
}

/// Add to the snapshot of `session` as the worker of `state`; returns the whole snapshot.
pub fn update_snapshot(
    store: &Store,
    now: Timestamp,
    session: &str,
    state: Option<&str>,
    add: &SnapshotUpdate,
) -> Result<Snapshot> {
    update(store, now, session, |s, ev| {
        s.update_snapshot(
            state,
            &add.findings,
            &add.files,
            &add.pending,
            &add.set,
            now,
        )?;
        // Written so that a reader of the journal (an MCP resource subscriber) sees the change.
        ev.push(super::event(
            super::event::SNAPSHOT_UPDATED,
            s,
            serde_json::json!({"state": state}),
        ));
        Ok(s.snapshot.clone())
    })
}
