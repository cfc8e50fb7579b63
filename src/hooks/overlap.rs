//! Edits of files another live worktree of the repository changed, claimed or not
//! (docs/protocol.md, "Agents in worktrees"): the edit hook names the worktree, its branch and
//! the sessions working there, and refuses the edit under `enforce = "block-overlap"`. Each
//! worktree's changes come from [`crate::protocol::changes`]' cache, so a hook call runs no git
//! unless a worktree changed since it was last measured.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::Result;
use crate::protocol::State;
use crate::protocol::claims::{Kind, kind};
use crate::protocol::worktrees::{Worktree, Worktrees};
use crate::store::Store;

/// A file another worktree of its repository changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Elsewhere {
    /// The file as the edit names it (absolute).
    pub file: String,
    /// Its path relative to the worktrees' roots.
    pub relative: String,
    /// The other worktree's root.
    pub worktree: String,
    /// Its branch (a detached HEAD: its short commit).
    pub branch: Option<String>,
    /// The instances working in it.
    pub sessions: Vec<String>,
    /// Whether the editing worktree changed the file too (then merging the two may conflict).
    pub changed_here: bool,
    /// Whether git predicts a textual conflict: always `None` from the hook, which does not run
    /// `git merge-tree` (`conductor overlaps` does).
    pub conflict: Option<bool>,
}

/// A file to ask another worktree about: as edited, relative, and the editing worktree.
type Ask<'a> = (&'a str, &'a str, &'a Worktree);

/// The files among `files` (absolute keys) that another live worktree of their repository
/// changed, one row per file and worktree. `repos` are the files' worktrees; `st` names the
/// sessions.
pub fn find(
    store: &Store,
    repos: &Worktrees,
    files: &[String],
    st: &State,
) -> Result<Vec<Elsewhere>> {
    // Per other worktree: the files to ask it about (relative), with the editing worktree.
    let mut asks: BTreeMap<&str, (&Worktree, Vec<Ask>)> = BTreeMap::new();
    for f in files {
        if !f.starts_with('/') || f.starts_with("/@") || kind(f) != Kind::File {
            continue;
        }
        let Some((here, rel)) = repos.of(f) else {
            continue;
        };
        for t in repos.siblings(f) {
            asks.entry(t.root.as_str())
                .or_insert_with(|| (t, Vec::new()))
                .1
                .push((f.as_str(), rel, here));
        }
    }
    // Each worktree in a thread of its own: one that changed since it was last measured runs
    // git, the others answer from their caches.
    let answers: Vec<Result<Vec<bool>>> = std::thread::scope(|s| {
        let running: Vec<_> = asks
            .values()
            .map(|(t, wanted)| {
                let rels: Vec<&str> = wanted.iter().map(|(_, r, _)| *r).collect();
                s.spawn(move || crate::protocol::changes::changed(store, t, &rels))
            })
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a measuring thread does not panic"))
            .collect()
    });
    let mut out = Vec::new();
    for ((t, wanted), changed) in asks.values().zip(answers) {
        let changed = changed?;
        let root = t.root.trim_end_matches('/');
        for ((file, rel, here), yes) in wanted.iter().zip(changed) {
            if !yes {
                continue;
            }
            let changed_here = crate::protocol::changes::changed(store, here, &[rel])?[0];
            out.push(Elsewhere {
                file: file.to_string(),
                relative: rel.to_string(),
                worktree: root.to_string(),
                branch: t.branch.clone(),
                sessions: st
                    .instances
                    .iter()
                    .filter(|i| Path::new(&i.working_directory).starts_with(root))
                    .map(|i| i.id.clone())
                    .collect(),
                changed_here,
                conflict: None,
            });
        }
    }
    Ok(out)
}

/// One line about one row: which worktree, branch and session, and what is known of a conflict.
pub fn describe(e: &Elsewhere) -> String {
    let branch = e
        .branch
        .as_deref()
        .map(|b| format!("branch {b}"))
        .unwrap_or_else(|| "unknown branch".into());
    let who = match e.sessions.as_slice() {
        [] => "no conductor session works there".to_string(),
        [one] => format!("session {one}"),
        many => format!("sessions {}", many.join(", ")),
    };
    let conflict = if e.changed_here {
        "this worktree changed it too; textual conflict: unknown (the hook does not run git merge-tree; \
         `conductor overlaps` predicts it)"
    } else {
        "this worktree has not changed it yet; textual conflict: none predicted until it does"
    };
    format!(
        "{} is changed in another worktree of this repository, {} ({branch}, {who}): {conflict}",
        e.file, e.worktree
    )
}

/// What the model is told before the edit.
pub fn notice(found: &[Elsewhere]) -> String {
    format!(
        "conductor: {}. Coordinate before editing (the two changes meet when both branches are merged): \
         `conductor overlaps` lists every file changed in several worktrees.",
        found.iter().map(describe).collect::<Vec<_>>().join("; ")
    )
}

/// The reason an edit is refused under `enforce = "block-overlap"`.
pub fn refusal(found: &[Elsewhere]) -> String {
    format!(
        "BLOCKED: enforce is block-overlap and {}. Do not edit it here: work on other files, or coordinate \
         with that worktree (`conductor overlaps`); a person can change `enforce` in config.json.",
        found.iter().map(describe).collect::<Vec<_>>().join("; ")
    )
}
