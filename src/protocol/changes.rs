//! What each live worktree of a repository changed, cached per worktree, so that an edit hook
//! can ask "did another worktree change this file?" without running git on every worktree
//! (docs/internals.md, "Worktree change cache").
//!
//! A worktree's changes are measured as `conductor overlaps` measures them
//! ([`super::overlaps::changed_since`]): against the merge base of its `HEAD` with the
//! integration branch, its branch's commits, staged and unstaged changes and untracked files.
//! The set is kept in `HOME/worktree-changes/<hash of the root>.json` (written atomically
//! through the store) with what it was computed from:
//! - the commit `HEAD` resolves to and the integration branch's commit, read from the ref
//!   files (no git);
//! - the index's size and the checksum git writes at its end (its mtime and inode when it has
//!   none): staging, committing, checking out all change it, while a refresh that rewrites the
//!   same content (`git status`, `git stash create`) does not;
//! - the moment the computation started: a file asked about whose ctime or mtime is later (less
//!   50 ms for the file system's coarse clock, two seconds where it keeps whole seconds only)
//!   was written since, so the set is computed again.
//!   A file that is gone is judged by its directory's ctime, as removing it changes it.
//!
//! A question about a file whose stat data and the worktree's refs and index are unchanged is
//! answered from the cache: a few `stat` and small reads, no process. Anything else runs git
//! in that one worktree (merge-base, diff, ls-files) and rewrites its cache file.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::git::follow;
use super::overlaps::{changed_since, git, integration_branch, text};
use super::worktrees::Worktree;
use crate::error::Result;
use crate::store::Store;

/// The cache's directory in the home.
pub const DIR: &str = super::worktree_index::CHANGES_DIR;
const VERSION: u32 = 1;
/// A file written up to this long before a computation started may be missing from it: file
/// systems stamp files with a coarse clock (a few milliseconds behind).
const MARGIN_NS: i64 = 50_000_000;
/// The same, on a file system that keeps whole seconds only (FAT keeps two).
const MARGIN_COARSE_NS: i64 = 2_000_000_000;

/// What a worktree's changed-file set was computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Key {
    /// The commit `HEAD` resolves to (`None`: unborn).
    head: Option<String>,
    /// The integration branch's commit.
    base_commit: Option<String>,
    /// The index's size and its trailing checksum (git's hash of its whole content), or its
    /// mtime and inode when it has none (`index.skipHash`).
    index: Option<(u64, String)>,
}

/// One worktree's cache file.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    version: u32,
    root: String,
    /// The integration branch, as a full ref (`refs/heads/main`), empty when none was found.
    base_ref: String,
    key: Key,
    /// When the computation started (nanoseconds since the epoch).
    since_ns: i64,
    /// The changed files, relative to the root, sorted.
    files: Vec<String>,
    /// Those of them absent from the worktree (deleted), sorted.
    missing: Vec<String>,
}

/// Whether the worktree `tree` changed each of `rels` (paths relative to its root), from its
/// cache when that is still good, else computed again (and cached). A worktree whose changes
/// cannot be measured (no commit in common with the integration branch, none at all) changed
/// nothing as far as this is concerned.
pub fn changed(store: &Store, tree: &Worktree, rels: &[&str]) -> Result<Vec<bool>> {
    let root = Path::new(tree.root.trim_end_matches('/'));
    let Some((gitdir, common, None)) = super::local::git_dirs(root) else {
        return Ok(vec![false; rels.len()]);
    };
    let path = cache_path(store, &tree.root);
    let cached: Option<Entry> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|e: &Entry| e.version == VERSION && e.root == tree.root);
    let known_base = cached.as_ref().map(|e| e.base_ref.clone());
    let fresh = cached.filter(|e| {
        !common.join("reftable").exists()
            && key_now(&gitdir, &common, &e.base_ref) == e.key
            && rels.iter().all(|r| unchanged_since(root, e, r))
    });
    let entry = match fresh {
        Some(e) => e,
        None => {
            let e = compute(root, &tree.root, &gitdir, &common, known_base)?;
            if let Ok(bytes) = serde_json::to_vec(&e) {
                // Best effort: a cache that cannot be written is computed again next time.
                let _ = crate::store::atomic::create_private_dirs(&store.home().dir().join(DIR))
                    .and_then(|_| crate::store::atomic::write_atomic(&path, &bytes));
            }
            e
        }
    };
    Ok(rels
        .iter()
        .map(|r| entry.files.binary_search_by(|f| f.as_str().cmp(r)).is_ok())
        .collect())
}

/// `HOME/worktree-changes/<first 16 bytes of the root's SHA-256>.json`.
fn cache_path(store: &Store, root: &str) -> PathBuf {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(root.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    store.home().dir().join(DIR).join(format!("{hex}.json"))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn ctime_ns(m: &std::fs::Metadata) -> i64 {
    m.ctime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.ctime_nsec())
}

fn mtime_ns(m: &std::fs::Metadata) -> i64 {
    m.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec())
}

/// True when `rel` was not written since `e` was computed.
fn unchanged_since(root: &Path, e: &Entry, rel: &str) -> bool {
    let old = |m: &std::fs::Metadata| {
        // Whole seconds (no nanoseconds at all): the file system's clock is that coarse.
        let coarse = m.ctime_nsec() == 0 && m.mtime_nsec() == 0;
        let limit = e
            .since_ns
            .saturating_sub(if coarse { MARGIN_COARSE_NS } else { MARGIN_NS });
        ctime_ns(m) < limit && mtime_ns(m) < limit
    };
    let p = root.join(rel);
    let gone = e.missing.binary_search_by(|f| f.as_str().cmp(rel)).is_ok();
    match std::fs::symlink_metadata(&p) {
        Ok(m) => !gone && old(&m),
        Err(_) => {
            let listed = e.files.binary_search_by(|f| f.as_str().cmp(rel)).is_ok();
            if listed && !gone {
                return false;
            }
            // Removing a file changes its directory.
            p.ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root))
                .find_map(|d| std::fs::symlink_metadata(d).ok())
                .is_some_and(|m| old(&m))
        }
    }
}

/// The key as the worktree's files say now: refs read from the git directories, the index's
/// stat data.
fn key_now(gitdir: &Path, common: &Path, base_ref: &str) -> Key {
    let head = std::fs::read_to_string(gitdir.join("HEAD"))
        .ok()
        .and_then(|h| follow(gitdir, common, h.trim(), 0));
    let base_commit = (!base_ref.is_empty())
        .then(|| follow(gitdir, common, &format!("ref: {base_ref}"), 0))
        .flatten();
    let index = index_key(&gitdir.join("index"));
    Key {
        head,
        base_commit,
        index,
    }
}

/// The index's size and the checksum git writes at its end, so that a rewrite of the same
/// content (`git status` or `git stash create` refreshing it) keeps the cache; the mtime and
/// inode instead when the checksum is zeros (`index.skipHash`).
fn index_key(path: &Path) -> Option<(u64, String)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let m = f.metadata().ok()?;
    // SHA-1 repositories end with 20 bytes, SHA-256 ones with 32: the last 32 cover both.
    let tail = m.len().min(32);
    f.seek(SeekFrom::End(-(tail as i64))).ok()?;
    let mut b = Vec::with_capacity(32);
    f.read_to_end(&mut b).ok()?;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if b[b.len().saturating_sub(20)..].iter().all(|x| *x == 0) {
        return Some((
            m.len(),
            format!("{}.{}.{}", m.mtime(), m.mtime_nsec(), m.ino()),
        ));
    }
    Some((m.len(), hex))
}

/// Measure the worktree at `root` with git. A worktree
/// measured before under the integration branch `known_base` (a full ref) measures against it
/// again while it resolves, without asking git which branch that is.
fn compute(
    root: &Path,
    key: &str,
    gitdir: &Path,
    common: &Path,
    known_base: Option<String>,
) -> Result<Entry> {
    let since_ns = now_ns();
    let known = known_base
        .filter(|b| !b.is_empty() && follow(gitdir, common, &format!("ref: {b}"), 0).is_some());
    let (base, base_ref) = match known {
        Some(b) => (Some(b.clone()), b),
        None => {
            let base = integration_branch(root, None).ok();
            let base_ref = match &base {
                Some(b) => git(root, &["rev-parse", "--symbolic-full-name", b])?
                    .map(text)
                    .unwrap_or_default(),
                None => String::new(),
            };
            (base, base_ref)
        }
    };
    // Read before git looks: anything that changes meanwhile makes the next call look again.
    let k = key_now(gitdir, common, &base_ref);
    let mb = match &base {
        Some(b) => git(root, &["merge-base", b, "HEAD"])?.map(text),
        None => None,
    };
    let files: Vec<String> = match &mb {
        Some(mb) => changed_since(root, mb)?.into_iter().collect(),
        None => Vec::new(),
    };
    let missing: Vec<String> = files
        .iter()
        .filter(|f| std::fs::symlink_metadata(root.join(f)).is_err())
        .cloned()
        .collect();
    Ok(Entry {
        version: VERSION,
        root: key.to_string(),
        base_ref,
        key: k,
        since_ns,
        files,
        missing,
    })
}
