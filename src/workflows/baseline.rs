//! What a state started from, to tell which files changed since: in a git repository the
//! commit and the files that were already dirty (with their modification times); elsewhere the
//! time the state began, compared with file modification times.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The baseline of one state run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Baseline {
    Git {
        commit: Option<String>,
        /// Files dirty at the start → their modification time (ns since the epoch).
        dirty: BTreeMap<String, u64>,
    },
    Mtime {
        /// When the state began (ns since the epoch).
        since_ns: u64,
    },
}

fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn mtime_ns(p: &Path) -> Option<u64> {
    let m = std::fs::symlink_metadata(p).ok()?.modified().ok()?;
    u64::try_from(m.duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok()
}

/// Dirty and untracked files (relative to the repository root), from `git status -z`.
fn git_dirty(dir: &Path) -> Option<Vec<String>> {
    let out = git(
        dir,
        &["status", "--porcelain", "-z", "--untracked-files=all"],
    )?;
    let mut files = Vec::new();
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    while let Some(p) = parts.next() {
        if p.len() < 4 {
            continue;
        }
        let status = &p[..2];
        files.push(String::from_utf8_lossy(&p[3..]).into_owned());
        if status.contains(&b'R') || status.contains(&b'C') {
            parts.next(); // the rename's source
        }
    }
    Some(files)
}

fn git_root(dir: &Path) -> Option<std::path::PathBuf> {
    let out = git(dir, &["rev-parse", "--show-toplevel"])?;
    Some(String::from_utf8_lossy(&out).trim().into())
}

/// Take a baseline of `dir` now.
pub fn take(dir: &Path) -> Baseline {
    if let Some(root) = git_root(dir) {
        let commit = git(dir, &["rev-parse", "--verify", "-q", "HEAD"])
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
            .filter(|s| !s.is_empty());
        let dirty = git_dirty(dir)
            .unwrap_or_default()
            .into_iter()
            .map(|f| {
                let t = mtime_ns(&root.join(&f)).unwrap_or(0);
                (f, t)
            })
            .collect();
        return Baseline::Git { commit, dirty };
    }
    // File times come from a coarser clock than SystemTime::now (a few ms): a margin keeps a
    // file written right after the state began from looking older than it.
    Baseline::Mtime {
        since_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0)
            .saturating_sub(20_000_000),
    }
}

/// The files modified since the baseline (relative to the repository root or to `dir`),
/// at most `limit` of them.
pub fn modified_since(b: &Baseline, dir: &Path, limit: usize) -> Vec<String> {
    match b {
        Baseline::Git { commit, dirty } => {
            let Some(root) = git_root(dir) else {
                return Vec::new();
            };
            let mut files: Vec<String> = Vec::new();
            if let Some(c) = commit
                && let Some(out) = git(dir, &["diff", "--name-only", "-z", c, "--"])
            {
                files.extend(
                    out.split(|b| *b == 0)
                        .filter(|p| !p.is_empty())
                        .map(|p| String::from_utf8_lossy(p).into_owned()),
                );
            }
            files.extend(git_dirty(dir).unwrap_or_default());
            files.sort();
            files.dedup();
            files.retain(|f| match dirty.get(f) {
                // Dirty before the state began: modified since only if touched again.
                Some(t) => mtime_ns(&root.join(f)).is_none_or(|now| now != *t),
                None => true,
            });
            files.truncate(limit);
            files
        }
        Baseline::Mtime { since_ns } => {
            let mut files = Vec::new();
            walk(dir, dir, *since_ns, &mut files, limit, 0);
            files.sort();
            files
        }
    }
}

fn walk(root: &Path, dir: &Path, since: u64, out: &mut Vec<String>, limit: usize, depth: u32) {
    if depth > 12 || out.len() >= limit {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            if !matches!(
                name.to_str(),
                Some(".git" | "target" | "node_modules" | ".conductor")
            ) {
                walk(root, &p, since, out, limit, depth + 1);
            }
        } else if mtime_ns(&p).is_some_and(|m| m > since) && out.len() < limit {
            out.push(
                p.strip_prefix(root)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, cmd: &str) -> bool {
        Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    #[test]
    fn git_baseline_sees_new_changes_not_old_dirt() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        let ok = sh(
            d,
            "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init \
             && echo a > committed && git add committed \
             && git -c user.email=a@b -c user.name=a commit -q -m a && echo dirt > old-dirt",
        );
        if !ok {
            eprintln!("git is not usable here; skipped");
            return;
        }
        let b = take(d);
        assert!(
            matches!(&b, Baseline::Git { commit: Some(_), dirty } if dirty.contains_key("old-dirt"))
        );
        assert!(modified_since(&b, d, 10).is_empty());
        std::fs::write(d.join("committed"), "changed").unwrap();
        std::fs::write(d.join("new"), "n").unwrap();
        assert_eq!(modified_since(&b, d, 10), ["committed", "new"]);
    }

    #[test]
    fn mtime_baseline_outside_git() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        let b = Baseline::Mtime {
            since_ns: u64::try_from(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos(),
            )
            .unwrap()
                - 5_000_000_000,
        };
        std::fs::write(d.join("src/a.rs"), "x").unwrap();
        let old = Baseline::Mtime { since_ns: u64::MAX };
        assert_eq!(modified_since(&b, d, 10), ["src/a.rs"]);
        assert!(modified_since(&old, d, 10).is_empty());
    }
}
