//! What a script waits for (`conductor wait`): paths no claim overlaps any more, instances no
//! longer registered. Read lock-free.

use super::worktrees::Worktrees;
use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::time::Timestamp;

/// What is still pending of a wait.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    /// The paths some claim still overlaps.
    pub held: Vec<String>,
    /// The instances still registered.
    pub alive: Vec<String>,
}

/// Which of `files` (normalized, in the worktrees `repos`) a claim still overlaps, and which
/// of the instances `ids` are still registered. A file, directory or glob is free once no claim
/// overlaps it: a file inside a claimed directory, a directory holding a claimed file, two
/// overlapping globs (as `claim` decides).
pub fn pending(
    store: &Store,
    now: Timestamp,
    files: &[String],
    ids: &[String],
    repos: &Worktrees,
) -> Result<Pending> {
    let mut state = super::read(store, now)?;
    state.repos.merge(repos);
    let globs: Vec<String> = super::claims::glob_keys(&state.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    Ok(Pending {
        held: files
            .iter()
            .filter(|f| !super::ops::overlapping_claims(&state, &globs, f).is_empty())
            .cloned()
            .collect(),
        alive: ids
            .iter()
            .filter(|i| state.instance(i).is_some())
            .cloned()
            .collect(),
    })
}

/// Refuse ids that no instance ever had: not live, and not in history.jsonl (an instance that
/// finished, or was cleaned up, is in it, and waiting for it is done at once). A typo would
/// otherwise "finish" at once and let a script go on as if the instance were done.
pub fn known(store: &Store, now: Timestamp, ids: &[String]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let state = super::read(store, now)?;
    let mut unknown: Vec<&String> = ids.iter().filter(|i| state.instance(i).is_none()).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    super::read_ledger(store, super::Ledger::History, |_, line| {
        if let crate::store::ledger::Line::Complete(text) = line {
            unknown.retain(|i| !text.contains(&format!("\"{i}\"")));
        }
        Ok(!unknown.is_empty())
    })?;
    match unknown.first() {
        None => Ok(()),
        Some(id) => Err(Error::invalid(
            Reason::InvalidInput,
            format!("no instance `{id}` is running or has finished: there is nothing to wait for"),
        )
        .with_hint(
            "`conductor status` lists the live instances, `conductor history` the finished ones",
        )),
    }
}
