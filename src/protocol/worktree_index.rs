//! What `conductor overlaps` keeps between runs for each worktree it measures, so that a run
//! asks git only what changed (docs/internals.md, "Worktree change cache"):
//!
//! - the merge base of the worktree's `HEAD` with the integration branch, keyed by the two
//!   commit ids it was computed from (commits never change, so neither does their merge base);
//! - a private copy of the worktree's index, which git refreshes and `git diff`, `git ls-files`
//!   and the merge snapshot read through `GIT_INDEX_FILE`.
//!
//! Why the copy: git tells a changed file from an unchanged one by the stat data the index
//! holds. conductor never writes a worktree's own index (git runs with `GIT_OPTIONAL_LOCKS=0`),
//! so where that index is stale (files touched since it was written, or written in the same
//! second as it, "racily clean") every `git diff` reads and hashes those files again. The copy
//! holds the same entries (same object ids, flags and extensions) with fresh stat data, which is
//! only ever set by git itself (`git update-index --refresh`), after it has checked the file's
//! content; so git's answers through it are the answers through the worktree's own index. It is
//! named by the checksum git writes at the end of the index: when the worktree's index changes
//! (`git add`, `commit`, `checkout`, a refresh by another program), the next run copies it
//! again. The copy keeps the index's mtime, so git's racy-clean checks judge it as they judge
//! the original, until git refreshes it.
//!
//! Files live in `HOME/worktree-index/`: `<stem>.json` (the worktree's root and its last merge
//! base) and `<stem>-<checksum>.index`, `<stem>` being the first 16 bytes of the SHA-256 of the
//! root, hex. Anything that cannot be read or written is done without: git then reads the
//! worktree's own index and finds the merge base again. Deleting the directory is always safe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::git::{git, git_env, git_input, text};
use crate::store::Store;
use crate::store::atomic::TEMP_PREFIX;

/// The cache's directory in the home.
pub const DIR: &str = "worktree-index";
/// The edit hooks' cache of each worktree's changed files ([`super::changes`]), pruned with
/// this one.
pub const CHANGES_DIR: &str = "worktree-changes";
const VERSION: u32 = 1;
/// A copy last refreshed longer ago than this is refreshed before use: stat data goes stale as
/// files are touched without being changed (a build, a checkout of the same content), and git
/// reads every such file again until a refresh.
const REFRESH_AFTER: Duration = Duration::from_secs(10);

/// Prefix of the links a run reads a copy through (removed when it is done).
const USE_PREFIX: &str = ".use-";
/// How many times a run tries to link the copy (see [`Cache::private_index`]).
const LINK_TRIES: usize = 8;

/// A link left by a run that died is removed after this long.
const USE_STALE: Duration = Duration::from_secs(600);

/// A private index, as one run reads it: a hard link of its own to the shared copy, removed
/// when dropped.
#[derive(Debug)]
pub struct Private {
    link: tempfile::TempPath,
    copy: PathBuf,
}

impl Private {
    /// The path to hand git (`GIT_INDEX_FILE`).
    pub fn path(&self) -> &Path {
        &self.link
    }

    /// Forget the shared copy (git could not read it); this run's link goes when dropped.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.copy);
    }
}

/// The per-worktree files in the home of one store.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

/// One worktree's `<stem>.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Memo {
    version: u32,
    root: String,
    /// The commit `HEAD` resolved to.
    head: String,
    /// The integration branch's commit.
    base: String,
    /// Their merge base.
    merge_base: String,
}

impl Cache {
    pub fn of(store: &Store) -> Cache {
        Cache {
            dir: store.home().dir().join(DIR),
        }
    }

    /// `<first 16 bytes of the SHA-256 of root>`, hex.
    fn stem(root: &Path) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
        digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    fn memo_path(&self, root: &Path) -> PathBuf {
        self.dir.join(format!("{}.json", Self::stem(root)))
    }

    /// The merge base of commits `base` and `head`, as found last time for the worktree at
    /// `root`.
    pub fn merge_base(&self, root: &Path, head: &str, base: &str) -> Option<String> {
        let bytes = std::fs::read(self.memo_path(root)).ok()?;
        let m: Memo = serde_json::from_slice(&bytes).ok()?;
        (m.version == VERSION
            && Path::new(&m.root) == root
            && m.head == head
            && m.base == base
            && !m.merge_base.is_empty())
        .then_some(m.merge_base)
    }

    /// Remember the merge base `mb` of `head` and `base` for the worktree at `root` (best
    /// effort).
    pub fn keep_merge_base(&self, root: &Path, head: &str, base: &str, mb: &str) {
        let m = Memo {
            version: VERSION,
            root: root.to_string_lossy().into_owned(),
            head: head.into(),
            base: base.into(),
            merge_base: mb.into(),
        };
        if let Ok(bytes) = serde_json::to_vec(&m)
            && crate::store::atomic::create_private_dirs(&self.dir).is_ok()
        {
            let _ = crate::store::atomic::write_atomic(&self.memo_path(root), &bytes);
        }
    }

    /// The private copy of the index of the worktree at `root` (its git directory `gitdir`),
    /// copied when the worktree's index changed and refreshed by git when new or stale, as a
    /// link of this run's own ([`Private`]); `None` where git must read the worktree's own
    /// index: none yet, one git writes without a checksum (`index.skipHash`), a split index,
    /// or a home that cannot be written.
    ///
    /// Another run may replace the copy (a refresh) or remove it (the worktree's index
    /// changed) at any moment: the copy is only ever replaced whole (made or refreshed under a
    /// temporary name, then renamed), and this run reads it through a hard link of its own, so
    /// git never finds it missing (which it would take for an empty index).
    pub fn private_index(&self, root: &Path, gitdir: &Path) -> Option<Private> {
        // The copy goes when the worktree's index changed meanwhile: then the index as it now
        // is is copied.
        for _ in 0..3 {
            let copy = self.shared_copy(root, gitdir)?;
            // Linux refuses a link to a file a rename has just replaced (ENOENT while the name
            // still exists): tried again, then read whole instead.
            for _ in 0..LINK_TRIES {
                let link = tempfile::Builder::new()
                    .prefix(USE_PREFIX)
                    .suffix(".index")
                    .make_in(&self.dir, |p| std::fs::hard_link(&copy, p));
                match link {
                    Ok(link) => {
                        let link = link.into_temp_path();
                        return Some(Private { link, copy });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::thread::yield_now(),
                    // No hard links here (a file system without them): a copy of its own.
                    Err(_) => break,
                }
            }
            match self.own_copy(&copy) {
                Ok(p) => return Some(p),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// A file of this run's own holding one version of `copy` (its bytes and its mtime), for
    /// when another run keeps replacing it under every link.
    fn own_copy(&self, copy: &Path) -> std::io::Result<Private> {
        let (bytes, mtime) = read_version(copy)?;
        Ok(Private {
            link: temp_copy(&self.dir, USE_PREFIX, &bytes, Some(mtime))?.into_temp_path(),
            copy: copy.to_path_buf(),
        })
    }

    /// The shared copy of the worktree's index, made or refreshed if need be; `None` where
    /// there is none to read.
    fn shared_copy(&self, root: &Path, gitdir: &Path) -> Option<PathBuf> {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::File::open(gitdir.join("index")).ok()?;
        let meta = f.metadata().ok()?;
        // The checksum git writes last (20 bytes for SHA-1, 32 for SHA-256: the last 20 name
        // it either way).
        if meta.len() < 12 + 32 {
            return None;
        }
        let mut sum = [0u8; 20];
        f.seek(SeekFrom::End(-20)).ok()?;
        f.read_exact(&mut sum).ok()?;
        if sum.iter().all(|b| *b == 0) || split_index(gitdir) {
            return None;
        }
        let stem = Self::stem(root);
        let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
        let copy = self.dir.join(format!("{stem}-{hex}.index"));
        let age = std::fs::metadata(&copy)
            .ok()
            .and_then(|m| m.modified().ok())
            .map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
        match age {
            Some(age) if age <= REFRESH_AFTER => {}
            // Refreshed from the copy itself (its stat data already fresh), or made from the
            // worktree's index (read through the same open file: one version of it).
            Some(_) => {
                // Refreshed from the copy itself; if that fails, the copy serves as it is (and
                // one gone meanwhile is made again by the caller's next round).
                if let Ok((bytes, mtime)) = read_version(&copy)
                    && let Ok(tmp) = temp_copy(&self.dir, TEMP_PREFIX, &bytes, Some(mtime))
                {
                    let _ = self.refresh(root, tmp, &copy, true);
                }
            }
            None => {
                let mut bytes = Vec::with_capacity(meta.len() as usize);
                f.seek(SeekFrom::Start(0)).ok()?;
                f.read_to_end(&mut bytes).ok()?;
                if !bytes.starts_with(b"DIRC") || bytes[bytes.len() - 20..] != sum {
                    return None;
                }
                crate::store::atomic::create_private_dirs(&self.dir).ok()?;
                let tmp = temp_copy(&self.dir, TEMP_PREFIX, &bytes, meta.modified().ok()).ok()?;
                self.refresh(root, tmp, &copy, false)?;
                self.forget_other_copies(&stem, &copy);
                // The root is written down, for the pruning of worktrees that are gone.
                if !self.memo_path(root).exists() {
                    self.keep_merge_base(root, "", "", "");
                }
            }
        }
        Some(copy)
    }

    /// Have git refresh the index in the temp file `tmp` (git writes it anew, through its
    /// `.lock`), then rename it over `copy`: readers of `copy` see the old file or the new one,
    /// never a part of either.
    ///
    /// Written even when no stat data changed (`--force-write-index`): the copy's mtime
    /// becomes now, so entries racily clean as of the old one are checked and, if changed,
    /// smudged by git as it writes, and no longer read again at every run (what `git status`
    /// does for an index with racy entries).
    ///
    /// A new copy (`replace` false) is not put over one another run made meanwhile from the
    /// same index: theirs serves, and runs linking it are not raced.
    fn refresh(
        &self,
        root: &Path,
        tmp: tempfile::NamedTempFile,
        copy: &Path,
        replace: bool,
    ) -> Option<()> {
        let tmp = tmp.into_temp_path();
        git_indexed(
            root,
            &["update-index", "-q", "--refresh", "--force-write-index"],
            Some(&tmp),
        )
        .ok()?;
        if replace {
            tmp.persist(copy).ok()?;
        } else if let Err(e) = tmp.persist_noclobber(copy)
            && e.error.kind() != std::io::ErrorKind::AlreadyExists
        {
            return None;
        }
        Some(())
    }

    /// A commit with the tree `git stash create` records for the worktree at `root`, plus the
    /// untracked files among `also`, made without its lock: its index (`index`: the private copy,
    /// or the worktree's own, read and never written) with every tracked file that differs from
    /// `HEAD`, and every file of `also` (paths relative to the root: the files it shares with
    /// another worktree, untracked ones included), as it is in the worktree; its parent `HEAD`.
    /// The same steps as `git stash create` (which lists what differs from `HEAD`, hands the
    /// list to `git update-index --add --remove` on a temporary index and writes its tree),
    /// with one pass over the worktree instead of four, and no commit of the index itself: `git
    /// merge-tree` finds the same merge base (`HEAD`'s with the other side) and merges the same
    /// trees. The temporary index is a copy of `index` in the cache directory (the system's
    /// temporary directory when that cannot be written), removed after. Else which step failed.
    pub fn snapshot(&self, root: &Path, index: &Path, also: &[&str]) -> Result<String, String> {
        let failed = |what: &str| format!("{what} failed on a copy of its index");
        let (bytes, mtime) =
            read_version(index).map_err(|e| format!("could not read {}: {e}", index.display()))?;
        let tmp = temp_copy(&self.dir, TEMP_PREFIX, &bytes, Some(mtime))
            .or_else(|_| temp_copy(&std::env::temp_dir(), TEMP_PREFIX, &bytes, Some(mtime)))
            .map_err(|e| format!("could not make a temporary copy of its index: {e}"))?;
        let env = [("GIT_INDEX_FILE", tmp.path().as_os_str())];
        let mut differ = git_env(root, &["diff-index", "-z", "--name-only", "HEAD"], &env)
            .ok()
            .flatten()
            .ok_or_else(|| failed("git diff-index"))?;
        // A file listed twice is updated twice, to the same content.
        for path in also {
            differ.extend_from_slice(path.as_bytes());
            differ.push(0);
        }
        if !differ.is_empty() {
            git_input(
                root,
                &[
                    "update-index",
                    "--ignore-skip-worktree-entries",
                    "-z",
                    "--add",
                    "--remove",
                    "--stdin",
                ],
                &env,
                &differ,
            )
            .ok_or_else(|| failed("git update-index"))?;
        }
        let tree = git_env(root, &["write-tree"], &env)
            .ok()
            .flatten()
            .map(text)
            .ok_or_else(|| failed("git write-tree"))?;
        // The identity `git stash create` falls back on: none need be configured.
        let ident: [(&str, &std::ffi::OsStr); 4] = [
            ("GIT_AUTHOR_NAME", "conductor".as_ref()),
            ("GIT_AUTHOR_EMAIL", "conductor@localhost".as_ref()),
            ("GIT_COMMITTER_NAME", "conductor".as_ref()),
            ("GIT_COMMITTER_EMAIL", "conductor@localhost".as_ref()),
        ];
        let commit = git_env(
            root,
            &[
                "commit-tree",
                &tree,
                "-p",
                "HEAD",
                "-m",
                "conductor overlaps: the worktree's tracked files",
            ],
            &ident,
        )
        .ok()
        .flatten()
        .map(text)
        .filter(|c| is_object_id(c))
        .ok_or_else(|| "git commit-tree failed".to_string())?;
        Ok(commit)
    }

    /// Remove the copies of the worktree's earlier indexes.
    fn forget_other_copies(&self, stem: &str, keep: &Path) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&format!("{stem}-")) && name.ends_with(".index") && e.path() != keep
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Remove the files of worktrees whose root is gone, here and in the edit hooks' change
    /// cache (`HOME/worktree-changes`, [`super::changes`]): a few small reads per worktree
    /// ever measured.
    pub fn prune(&self) {
        let Some(home) = self.dir.parent() else {
            return;
        };
        for dir in [self.dir.clone(), home.join(CHANGES_DIR)] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // A link left by a run that died (a link's ctime is when it was made).
                if name.starts_with(USE_PREFIX) {
                    use std::os::unix::fs::MetadataExt;
                    let made = e.metadata().map(|m| m.ctime()).unwrap_or(i64::MAX);
                    let now = SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map(|d| d.as_secs() as i64)
                        .unwrap_or(0);
                    if now.saturating_sub(made) > USE_STALE.as_secs() as i64 {
                        let _ = std::fs::remove_file(e.path());
                    }
                    continue;
                }
                let Some(stem) = name.strip_suffix(".json") else {
                    continue;
                };
                #[derive(Deserialize)]
                struct Root {
                    root: String,
                }
                let Some(r) = std::fs::read(e.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Root>(&b).ok())
                else {
                    continue;
                };
                if Path::new(r.root.trim_end_matches('/')).is_dir() {
                    continue;
                }
                let _ = std::fs::remove_file(e.path());
                if dir == self.dir {
                    self.forget_other_copies(stem, Path::new(""));
                }
            }
        }
    }
}

/// Whether `id` looks like an object id (SHA-1 or SHA-256, hex).
pub(crate) fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether the index of `gitdir` is split (`core.splitIndex`): its shared part lives beside it,
/// where a copy elsewhere would have git write new shared parts.
fn split_index(gitdir: &Path) -> bool {
    std::fs::read_dir(gitdir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
    })
}

/// Run git in `dir` reading the index `index` instead of the worktree's own (`None`: its own);
/// its stdout, or `None` when it exits non-zero.
pub(crate) fn git_indexed(
    dir: &Path,
    args: &[&str],
    index: Option<&Path>,
) -> crate::error::Result<Option<Vec<u8>>> {
    match index {
        None => git(dir, args),
        Some(i) => git_env(dir, args, &[("GIT_INDEX_FILE", i.as_os_str())]),
    }
}

/// The merge base of `head` and `base` in the worktree at `root`, from the cache when it was
/// found before for the same two commits; `None` when they have none.
pub(crate) fn merge_base(
    cache: Option<&Cache>,
    root: &Path,
    base: &str,
    ids: Option<(&str, &str)>,
) -> crate::error::Result<Option<String>> {
    let Some((head, base_commit)) = ids else {
        return Ok(git(root, &["merge-base", base, "HEAD"])?.map(text));
    };
    if let Some(mb) = cache.and_then(|c| c.merge_base(root, head, base_commit)) {
        return Ok(Some(mb));
    }
    let mb = git(root, &["merge-base", base_commit, head])?.map(text);
    if let (Some(c), Some(mb)) = (cache, &mb) {
        c.keep_merge_base(root, head, base_commit, mb);
    }
    Ok(mb)
}

/// One version of the file at `path` (git and conductor replace these files whole, never in
/// place): its bytes and its mtime, read through one open file.
fn read_version(path: &Path) -> std::io::Result<(Vec<u8>, SystemTime)> {
    let mut f = std::fs::File::open(path)?;
    let mtime = f.metadata()?.modified()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok((bytes, mtime))
}

/// `bytes` in a new temp file `<prefix>*.index` of `dir`, with the mtime `mtime` (so that git's
/// racy-clean checks judge it as they judge the index it was copied from). Not synced: every
/// file of the cache can be lost, and git rewrites a copy it refreshes.
fn temp_copy(
    dir: &Path,
    prefix: &str,
    bytes: &[u8],
    mtime: Option<SystemTime>,
) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let mut tmp = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".index")
        .tempfile_in(dir)?;
    tmp.as_file_mut().write_all(bytes)?;
    if let Some(t) = mtime {
        tmp.as_file().set_modified(t)?;
    }
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn git_in(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .expect("git runs")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// Runs at once: while one keeps replacing the shared copy (as a refresh does, by rename),
    /// every other run still gets its private index, whole. Linux refuses a link to a file a
    /// rename has just replaced: without the retries and the read-whole fallback, some of these
    /// came back `None` (dozens to hundreds of 2,000 with one try, a few with eight), and
    /// `overlaps` fell back to `git stash create`, which fails while another run holds the
    /// index's lock.
    #[test]
    fn a_copy_replaced_under_a_run_is_linked_all_the_same() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/x.rs"), "fn x() {}\n").unwrap();
        git_in(&root, &["init", "-q", "-b", "main"]);
        git_in(&root, &["add", "."]);
        git_in(&root, &["commit", "-q", "-m", "init"]);
        let cache = Cache {
            dir: tmp.path().join("home").join(DIR),
        };
        let gitdir = root.join(".git");
        let first = cache.private_index(&root, &gitdir).expect("a first copy");
        let copy = first.copy.clone();
        drop(first);
        let bytes = std::fs::read(&copy).unwrap();
        let done = AtomicBool::new(false);
        let (linked, refused) = std::thread::scope(|s| {
            s.spawn(|| {
                // Another run refreshing the copy, again and again: a new file renamed over it.
                let mut n = 0;
                while !done.load(Ordering::Relaxed) {
                    let next = cache.dir.join(format!(".tmp-replace-{n}"));
                    std::fs::write(&next, &bytes).unwrap();
                    std::fs::rename(&next, &copy).unwrap();
                    n += 1;
                }
            });
            let mut linked = 0;
            let mut refused = 0;
            for _ in 0..2000 {
                match cache.private_index(&root, &gitdir) {
                    // A link or a copy of its own: one whole version either way.
                    Some(p) if std::fs::read(p.path()).unwrap() == bytes => linked += 1,
                    _ => refused += 1,
                }
            }
            done.store(true, Ordering::Relaxed);
            (linked, refused)
        });
        assert_eq!((linked, refused), (2000, 0));
        // Every run's link is gone with it.
        let left: Vec<_> = std::fs::read_dir(&cache.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(USE_PREFIX))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
