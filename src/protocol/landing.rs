//! Claims last until the change lands (docs/protocol.md, "Agents in worktrees"): when a session
//! working in a git worktree on a branch other than the integration branch finishes, the files
//! its branch changed stay reserved, `landing`, until the branch is merged into the integration
//! branch, the branch is deleted, or a person releases them (`release --force --reason WHY`).
//!
//! They are kept in `landing.json` ([`LandingDoc`], committed with `status.json` under
//! `status.lock`), never in `status.json`, whose shape the original plugin reads. The same file
//! records the worktrees `start --worktree` made ([`Created`]), so `done` knows which worktree is
//! its own to remove.
//!
//! Pure: which claimed paths a landing branch holds ([`hits`]). Whether a branch landed needs git
//! ([`super::session_tree::landed`]); it is asked only for the entries a path actually matches,
//! and never under the lock.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::worktrees::Worktrees;
use crate::time::Timestamp;

/// A worktree `start --worktree` made for a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub instance_id: String,
    /// The worktree's directory (absolute, no final `/`).
    pub worktree: String,
    pub branch: String,
    /// The repository's common git directory.
    pub repo: String,
    pub created_at: Timestamp,
}

/// A branch whose changed files stay reserved until it lands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Landing {
    /// The repository's common git directory.
    pub repo: String,
    /// The worktree the branch was worked on in (absolute, with a final `/`).
    pub worktree: String,
    pub branch: String,
    /// The integration branch it must land in.
    pub base: String,
    /// The merge base of the branch with `base` when the session finished: a branch still there
    /// lands when its tip is another commit that `base` contains.
    pub merge_base: String,
    /// The session that finished, and its task.
    pub instance_id: String,
    pub project: String,
    pub task: String,
    pub priority: super::Priority,
    /// When it finished.
    pub since: Timestamp,
    /// The files its branch changed, relative to the worktree's root.
    pub files: Vec<String>,
}

impl Landing {
    /// A file of the entry as an absolute path in its own worktree.
    pub fn path(&self, rel: &str) -> String {
        format!("{}{rel}", self.worktree)
    }
}

/// `landing.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LandingDoc {
    #[serde(default)]
    pub created: Vec<Created>,
    #[serde(default)]
    pub landing: Vec<Landing>,
}

impl crate::store::Document for LandingDoc {
    const FILE: &'static str = "landing.json";
    const LOCK: crate::store::Lock = crate::store::Lock::Status;

    fn empty(_now: Timestamp) -> LandingDoc {
        LandingDoc::default()
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<LandingDoc> {
        let v: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| crate::store::corrupt(path, format!("not JSON ({e})")))?;
        crate::schema::validate(crate::schema::Schema::Landing, &v)
            .map_err(|e| crate::store::corrupt(path, e))?;
        serde_json::from_value(v).map_err(|e| crate::store::corrupt(path, e.to_string()))
    }
    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("landing serializes");
        v.push(b'\n');
        v
    }
}

/// A claimed path that a landing branch of another worktree changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// The path claimed.
    pub file: String,
    /// The branch that must land first, its worktree, and where it must land.
    pub branch: String,
    pub worktree: String,
    pub base: String,
    /// The session that finished it, and its task.
    pub instance_id: String,
    pub task: String,
    /// True when the claim was refused for it (`enforce = "block-foreign"`).
    pub refused: bool,
}

impl Hit {
    /// One line for the person and the model.
    pub fn notice(&self) -> String {
        let how = if self.refused {
            "not claimed (enforce is block-foreign)"
        } else {
            "claimed anyway"
        };
        format!(
            "{} is landing: branch {} (worktree {}, finished by {} \"{}\") changed it and must land in {} first; {how}",
            self.file, self.branch, self.worktree, self.instance_id, self.task, self.base
        )
    }
}

/// The landing entries (by index) that hold some of `files` (absolute claim keys; their
/// worktrees known in `repos`), from a worktree other than the entry's own.
pub fn hits(doc: &LandingDoc, repos: &Worktrees, files: &[String]) -> Vec<(usize, Hit)> {
    let mut out = Vec::new();
    if doc.landing.is_empty() {
        return out;
    }
    for file in files {
        let Some((w, _)) = repos.of(file) else {
            continue;
        };
        for (i, l) in doc.landing.iter().enumerate() {
            if l.repo != w.repo || l.worktree == w.root {
                continue;
            }
            if l.files
                .iter()
                .any(|f| covers(file, &format!("{}{f}", w.root)))
            {
                out.push((
                    i,
                    Hit {
                        file: file.clone(),
                        branch: l.branch.clone(),
                        worktree: l.worktree.trim_end_matches('/').to_string(),
                        base: l.base.clone(),
                        instance_id: l.instance_id.clone(),
                        task: l.task.clone(),
                        refused: false,
                    },
                ));
                break;
            }
        }
    }
    out
}

/// True when claim key `key` overlaps `path` (a plain file), undecided globs included.
fn covers(key: &str, path: &str) -> bool {
    use super::claims::{Overlap, overlap};
    overlap(key, path) != Overlap::No
}

/// Take the files `keys` (absolute, in any worktree of the repository; their worktrees known in
/// `repos`) out of the landing entries; entries left with no file are removed. Returns each
/// entry touched as it was, with the files released.
pub fn release(
    doc: &mut LandingDoc,
    repos: &Worktrees,
    keys: &[String],
) -> Vec<(Landing, Vec<String>)> {
    let mut out = Vec::new();
    for l in &mut doc.landing {
        let mut gone = Vec::new();
        for key in keys {
            let Some((w, _)) = repos.of(key) else {
                continue;
            };
            if w.repo != l.repo {
                continue;
            }
            l.files.retain(|f| {
                let hit = covers(key, &format!("{}{f}", w.root));
                if hit {
                    gone.push(f.clone());
                }
                !hit
            });
        }
        if !gone.is_empty() {
            out.push((l.clone(), gone));
        }
    }
    doc.landing.retain(|l| !l.files.is_empty());
    out
}

/// The history line of a branch that landed (or was released by hand): `how` in its notes.
pub fn history(l: &Landing, files: &[String], how: &str, now: Timestamp) -> super::HistoryEntry {
    super::HistoryEntry {
        id: l.instance_id.clone(),
        project: l.project.clone(),
        task: l.task.clone(),
        priority: l.priority,
        started_at: l.since,
        completed_at: now,
        outcome: super::Outcome::Landed,
        duration_minutes: Some(l.since.minutes_until(now)),
        files_modified: Some(files.iter().map(|f| l.path(f)).collect()),
        notes: Some(format!("branch {} {how}", l.branch)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::worktrees::Worktree;

    fn repos() -> Worktrees {
        let mut w = Worktrees::default();
        for root in ["/w/app/", "/w/app-b/"] {
            w.add(Worktree {
                root: root.into(),
                repo: "/w/app/.git".into(),
                branch: Some("main".into()),
            });
        }
        w
    }

    fn doc() -> LandingDoc {
        LandingDoc {
            created: vec![],
            landing: vec![Landing {
                repo: "/w/app/.git".into(),
                worktree: "/w/app-b/".into(),
                branch: "feature/b".into(),
                base: "main".into(),
                merge_base: "abc".into(),
                instance_id: "web-000001".into(),
                project: "app".into(),
                task: "B".into(),
                priority: crate::protocol::Priority::P1,
                since: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
                files: vec!["src/x.rs".into(), "lib/z.rs".into()],
            }],
        }
    }

    #[test]
    fn a_landing_file_is_hit_from_another_worktree_only() {
        let d = doc();
        let r = repos();
        let h = hits(
            &d,
            &r,
            &["/w/app/src/x.rs".into(), "/w/app/src/y.rs".into()],
        );
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].1.branch, "feature/b");
        assert_eq!(hits(&d, &r, &["/w/app/src/".into()]).len(), 1);
        assert!(hits(&d, &r, &["/w/app-b/src/x.rs".into()]).is_empty());
        assert!(hits(&d, &r, &["/elsewhere/src/x.rs".into()]).is_empty());
    }

    #[test]
    fn release_takes_files_out_and_drops_empty_entries() {
        let mut d = doc();
        let r = repos();
        let out = release(&mut d, &r, &["/w/app/src/x.rs".into()]);
        assert_eq!(out[0].1, ["src/x.rs"]);
        assert_eq!(d.landing[0].files, ["lib/z.rs"]);
        release(&mut d, &r, &["/w/app-b/lib/".into()]);
        assert!(d.landing.is_empty());
    }
}
