//! Claims grouped by git repository, each under the worktree it was made in with that
//! worktree's branch, paths relative to the worktree's root (a directory's final `/` and a
//! glob's pattern kept): what `status`, `top` and the dashboard show when agents work in
//! several worktrees of one repository (docs/protocol.md, "Agents in worktrees").
//!
//! Pure over a state whose [`State::repos`] knows the worktrees of its instances and claims
//! ([`super::local::note_repositories`] finds them by reading `.git` entries).

use serde::Serialize;

use super::State;
use super::worktrees::Worktrees;

/// One repository and the worktrees in it where sessions work or hold claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RepositoryClaims {
    /// The repository: its common git directory.
    pub repository: String,
    /// How many worktrees the repository has (not only those listed).
    pub worktree_count: usize,
    pub worktrees: Vec<WorktreeClaims>,
}

/// One worktree: its root, its branch, who works there and what is claimed in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorktreeClaims {
    /// Its root directory (no final `/`).
    pub worktree: String,
    pub branch: Option<String>,
    /// The sessions whose working directory is in it.
    pub instances: Vec<String>,
    pub claims: Vec<RepositoryClaim>,
}

/// One claim, relative to its worktree's root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RepositoryClaim {
    pub path: String,
    pub held_by: String,
}

/// Find the worktrees of the repositories `state`'s sessions work in on this machine (reading
/// `.git` entries, never running git), then [`group`] the sessions and claims in them.
pub fn find(state: &mut State) -> Vec<RepositoryClaims> {
    super::local::note_repositories(state);
    group(state)
}

/// Every repository of `state.repos` with a session or a claim in it, in the order of their
/// common directory; worktrees in the order of their root. Paths in no known repository are
/// left out.
pub fn group(state: &State) -> Vec<RepositoryClaims> {
    let trees = &state.repos;
    let mut out: Vec<RepositoryClaims> = Vec::new();
    for inst in &state.instances {
        let wd = format!("{}/", inst.working_directory.trim_end_matches('/'));
        if let Some((w, _)) = trees.of(&wd) {
            let root = w.root.clone();
            if let Some(s) = slot(&mut out, trees, &root) {
                s.instances.push(inst.id.clone());
            }
        }
    }
    for (key, holder) in &state.global_claims {
        if let Some((w, rel)) = trees.of(key) {
            let root = w.root.clone();
            if let Some(s) = slot(&mut out, trees, &root) {
                s.claims.push(RepositoryClaim {
                    path: rel.to_string(),
                    held_by: holder.clone(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.repository.cmp(&b.repository));
    for r in &mut out {
        r.worktrees.sort_by(|a, b| a.worktree.cmp(&b.worktree));
    }
    out
}

/// Where each session works in a repository with several worktrees (instance id → its
/// repository and worktree): such sessions are listed together, each naming its worktree.
pub fn places(
    groups: &[RepositoryClaims],
) -> std::collections::HashMap<&str, (&str, &WorktreeClaims)> {
    let mut place = std::collections::HashMap::new();
    for r in groups.iter().filter(|r| r.worktree_count > 1) {
        for w in &r.worktrees {
            for id in &w.instances {
                place.insert(id.as_str(), (r.repository.as_str(), w));
            }
        }
    }
    place
}

/// The key a listing of sessions is sorted by (stably): those of [`places`] first, by
/// repository and worktree; the others after, in their order.
pub fn listing_key<'a>(
    places: &std::collections::HashMap<&str, (&'a str, &'a WorktreeClaims)>,
    id: &str,
) -> (u8, Option<(&'a str, &'a str)>) {
    places
        .get(id)
        .map_or((1, None), |(r, w)| (0, Some((*r, w.worktree.as_str()))))
}

/// The entry of the worktree whose root is `root`, made on first use.
fn slot<'a>(
    out: &'a mut Vec<RepositoryClaims>,
    trees: &Worktrees,
    root: &str,
) -> Option<&'a mut WorktreeClaims> {
    let w = trees.all().iter().find(|t| t.root == root)?;
    let r = match out.iter().position(|r| r.repository == w.repo) {
        Some(r) => r,
        None => {
            out.push(RepositoryClaims {
                repository: w.repo.clone(),
                worktree_count: trees.all().iter().filter(|t| t.repo == w.repo).count(),
                worktrees: Vec::new(),
            });
            out.len() - 1
        }
    };
    let repo = &mut out[r];
    let shown = w.root.trim_end_matches('/');
    let i = match repo.worktrees.iter().position(|t| t.worktree == shown) {
        Some(i) => i,
        None => {
            repo.worktrees.push(WorktreeClaims {
                worktree: shown.to_string(),
                branch: w.branch.clone(),
                instances: Vec::new(),
                claims: Vec::new(),
            });
            repo.worktrees.len() - 1
        }
    };
    Some(&mut repo.worktrees[i])
}

/// True when some repository has more than one worktree: then grouping says something that
/// the list of instances does not.
pub fn worth_showing(groups: &[RepositoryClaims]) -> bool {
    groups.iter().any(|r| r.worktree_count > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::worktrees::Worktree;

    #[test]
    fn claims_are_grouped_by_repository_then_worktree_relative_to_its_root() {
        let mut st = State::empty(crate::time::Timestamp::now());
        for (root, repo, branch) in [
            ("/w/app/", "/w/app/.git", "main"),
            ("/w/app-b/", "/w/app/.git", "feature/b"),
            ("/w/lib/", "/w/lib/.git", "main"),
        ] {
            st.repos.add(Worktree {
                root: root.into(),
                repo: repo.into(),
                branch: Some(branch.into()),
            });
        }
        for (k, h) in [
            ("/w/app/src/x.rs", "a"),
            ("/w/app-b/src/", "b"),
            ("/w/app-b/docs/*.md", "b"),
            ("/w/lib/y.rs", "c"),
            ("/elsewhere/z.rs", "c"),
        ] {
            st.global_claims.insert(k.into(), h.into());
        }
        let g = group(&st);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].repository, "/w/app/.git");
        assert_eq!(g[0].worktree_count, 2);
        let b = &g[0].worktrees[1];
        assert_eq!(
            (b.worktree.as_str(), b.branch.as_deref()),
            ("/w/app-b", Some("feature/b"))
        );
        let paths: Vec<&str> = b.claims.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["docs/*.md", "src/"]);
        assert_eq!(g[1].worktrees[0].claims[0].path, "y.rs");
        assert!(worth_showing(&g));
        assert!(!worth_showing(&g[1..]));
    }
}
