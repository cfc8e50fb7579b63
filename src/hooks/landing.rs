//! Edits of files that are landing (docs/protocol.md, "Agents in worktrees"): another session's
//! finished branch changed them and has not landed yet. The edit hook names the branch that must
//! land first, its worktree, the session that finished it and the base it must land in, and
//! refuses the edit under `enforce = "block-foreign"`.
//!
//! Cheap, like a claim's check ([`crate::protocol::sessions`]): `landing.json` is read lock-free
//! (an unused home has none: nothing to parse), and git is asked whether a branch landed only
//! for the entries an edited path hits, never under the lock. A branch that landed is dropped
//! from `landing.json` (with its history line) and no longer reported.

use crate::error::Result;
use crate::protocol::landing::{Hit, LandingDoc, hits};
use crate::protocol::worktrees::Worktrees;
use crate::store::Store;
use crate::time::Timestamp;

/// The files among `files` (absolute paths; their worktrees known in `repos`) that a branch of
/// another worktree holds until it lands, one hit per file. A shared store keeps no landing.
pub fn find(
    store: &Store,
    now: Timestamp,
    repos: &Worktrees,
    files: &[String],
) -> Result<Vec<Hit>> {
    if store.shared_by_hosts() {
        return Ok(Vec::new());
    }
    let doc: LandingDoc = store.read_doc(now)?;
    let found = hits(&doc, repos, files);
    if found.is_empty() {
        return Ok(Vec::new());
    }
    // Outside any lock: ask git about the entries hit, and only those.
    let mut used: Vec<usize> = found.iter().map(|(i, _)| *i).collect();
    used.sort_unstable();
    used.dedup();
    let landed: Vec<(usize, crate::protocol::session_tree::Landed)> = used
        .into_iter()
        .filter_map(|i| crate::protocol::session_tree::landed(&doc.landing[i]).map(|l| (i, l)))
        .collect();
    if !landed.is_empty() {
        let entries: Vec<_> = landed
            .iter()
            .map(|(i, l)| (doc.landing[*i].clone(), *l))
            .collect();
        crate::protocol::sessions::drop_landed(store, now, &entries)?;
    }
    Ok(found
        .into_iter()
        .filter(|(i, _)| !landed.iter().any(|(j, _)| j == i))
        .map(|(_, h)| h)
        .collect())
}

/// One hit: the file, and the branch that must land first (worktree, session, base).
fn describe(h: &Hit) -> String {
    format!(
        "{} is landing: branch {} (worktree {}, finished by session {} \"{}\") changed it and must land in {} first",
        h.file, h.branch, h.worktree, h.instance_id, h.task, h.base
    )
}

/// What the model is told before the edit.
pub fn notice(found: &[Hit]) -> String {
    format!(
        "conductor: {}. Editing it here now means a conflict when both branches merge: prefer waiting until \
         that branch lands (merged or deleted), or coordinate with whoever lands it.",
        found.iter().map(describe).collect::<Vec<_>>().join("; ")
    )
}

/// The reason an edit is refused under `enforce = "block-foreign"`.
pub fn refusal(found: &[Hit]) -> String {
    format!(
        "BLOCKED: enforce is block-foreign and {}. Do not edit it until that branch lands (merged or deleted); \
         work on other files meanwhile. A person can release it with `conductor release --force --reason WHY FILE`.",
        found.iter().map(describe).collect::<Vec<_>>().join("; ")
    )
}
