//! `conductor overlaps`: the files changed in two or more live worktrees of one repository,
//! claimed or not, and which pairs of worktrees git predicts would conflict when merged
//! (docs/protocol.md, "Agents in worktrees").
//!
//! What a worktree changed is what differs between the merge base of its `HEAD` with the
//! integration branch and its working tree: its branch's commits, its staged and unstaged
//! changes, and its untracked files (not ignored). A textual conflict is predicted by git itself,
//! `git merge-tree --write-tree` (git 2.38 or newer), on a snapshot of each worktree: its
//! uncommitted changes to tracked files as `git stash create` records them, and the untracked
//! files it shares with another worktree (an object in the repository, no ref, nothing in the
//! worktree changed). Where git cannot make one, the worktree's pairs are reported as
//! unpredicted, with why: never as clean.
//!
//! Not a hot path: this runs git, a few times per worktree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::State;
pub(crate) use super::git::{git, names, text};
use super::worktree_index::{self, Cache, Private, git_indexed, is_object_id};
use crate::error::{Error, Reason, Result};
use crate::store::Store;

/// One live worktree, as the report names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tree {
    pub path: String,
    /// Its branch; a detached HEAD is its short commit.
    pub branch: String,
    /// The instances working in it.
    pub sessions: Vec<String>,
    /// How many files it changed against the merge base.
    pub changed: usize,
    /// Why its changes could not be found (no commit in common with the base, no commit at all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Why git could not snapshot it to predict its merges (they are listed as unpredicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpredictable: Option<String>,
}

/// One file changed in two or more worktrees.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overlap {
    /// The path relative to the worktrees' roots.
    pub file: String,
    /// The worktrees that changed it.
    pub worktrees: Vec<String>,
    /// The pairs of those worktrees whose merge git predicts to conflict in this file.
    pub conflicts: Vec<[String; 2]>,
    /// The pairs whose merge git could not predict (a worktree it could not snapshot): whether
    /// they conflict is unknown, never taken for "no conflict".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unpredicted: Vec<[String; 2]>,
}

/// What `overlaps` found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The repository's common git directory.
    pub repository: String,
    /// The integration branch changes are measured against.
    pub base: String,
    pub worktrees: Vec<Tree>,
    pub overlaps: Vec<Overlap>,
}

/// A worktree as `git worktree list --porcelain` lists it.
struct Listed {
    path: PathBuf,
    head: Option<String>,
    branch: Option<String>,
}

/// The repository's live worktrees: bare entries and worktrees whose directory is gone
/// (`prunable`) are left out.
fn list(dir: &Path) -> Result<Vec<Listed>> {
    let out = git(dir, &["worktree", "list", "--porcelain"])?.ok_or_else(|| {
        Error::invalid(
            Reason::GitFailed,
            format!("`git worktree list` failed in {}", dir.display()),
        )
    })?;
    let mut trees = Vec::new();
    for block in text(out).split("\n\n") {
        let mut t = Listed {
            path: PathBuf::new(),
            head: None,
            branch: None,
        };
        let mut skip = false;
        for line in block.lines() {
            let (k, v) = line.split_once(' ').unwrap_or((line, ""));
            match k {
                "worktree" => t.path = PathBuf::from(v),
                "HEAD" => t.head = Some(v.to_string()),
                "branch" => t.branch = Some(v.strip_prefix("refs/heads/").unwrap_or(v).into()),
                "bare" | "prunable" => skip = true,
                _ => {}
            }
        }
        if !skip && !t.path.as_os_str().is_empty() && t.path.is_dir() {
            trees.push(t);
        }
    }
    Ok(trees)
}

/// The integration branch: `base` when given, else the remote's HEAD (`origin/HEAD`), else
/// `main`, else `master`.
pub(crate) fn integration_branch(dir: &Path, base: Option<&str>) -> Result<String> {
    if let Some(b) = base {
        return match git(
            dir,
            &["rev-parse", "-q", "--verify", &format!("{b}^{{commit}}")],
        )? {
            Some(_) => Ok(b.to_string()),
            None => Err(Error::invalid(
                Reason::InvalidInput,
                format!(
                    "`{b}` names no commit in this repository; give --base a branch that exists"
                ),
            )),
        };
    }
    if let Some(r) = git(
        dir,
        &["symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"],
    )? {
        return Ok(text(r));
    }
    for b in ["main", "master"] {
        if git(
            dir,
            &["rev-parse", "-q", "--verify", &format!("refs/heads/{b}")],
        )?
        .is_some()
        {
            return Ok(b.to_string());
        }
    }
    Err(Error::invalid(
        Reason::InvalidInput,
        "this repository has no origin/HEAD, main or master to measure changes against; name the integration branch with --base",
    ))
}

/// The integration branch of a run of [`find`]: its name as shown, and the commit it names
/// when that is the same in every worktree and was found without a doubt (`None`: each
/// worktree's git resolves the name itself, as `git merge-base NAME HEAD`).
struct Base {
    name: String,
    commit: Option<String>,
}

/// The integration branch, as [`integration_branch`] finds it, with its commit read from the
/// ref files of the common git directory `common` where they say it without git.
fn resolve_base(dir: &Path, common: &Path, given: Option<&str>) -> Result<Base> {
    if let Some(b) = given {
        let commit = git(
            dir,
            &["rev-parse", "-q", "--verify", &format!("{b}^{{commit}}")],
        )?
        .map(text)
        .ok_or_else(|| {
            Error::invalid(
                Reason::InvalidInput,
                format!(
                    "`{b}` names no commit in this repository; give --base a branch that exists"
                ),
            )
        })?;
        // A name every worktree resolves alike: not HEAD, `@`, an upstream, nor a ref of one
        // worktree's own (refs/worktree/, refs/bisect/, a pseudo-ref like ORIG_HEAD).
        let own = b.contains('@')
            || b.to_ascii_uppercase().contains("HEAD")
            || [
                "refs/worktree/",
                "refs/bisect/",
                "refs/rewritten/",
                "worktrees/",
                "main-worktree/",
            ]
            .iter()
            .any(|p| b.starts_with(p))
            || b.bytes()
                .take_while(|c| !b"~^:".contains(c))
                .all(|c| c.is_ascii_uppercase() || c == b'_');
        return Ok(Base {
            name: b.to_string(),
            commit: (!own && is_object_id(&commit)).then_some(commit),
        });
    }
    let from_files = !common.join("reftable").exists();
    let read = |full: &str| {
        super::git::follow(common, common, &format!("ref: {full}"), 0).filter(|id| is_object_id(id))
    };
    // No symbolic origin/HEAD (git's `symbolic-ref` would find none): main, else master.
    let origin_head = std::fs::read_to_string(common.join("refs/remotes/origin/HEAD"))
        .ok()
        .filter(|v| v.starts_with("ref:"));
    if from_files && origin_head.is_none() {
        for b in ["main", "master"] {
            if let Some(id) = read(&format!("refs/heads/{b}")) {
                return Ok(Base {
                    name: b.to_string(),
                    commit: Some(id),
                });
            }
        }
    }
    let name = integration_branch(dir, None)?;
    let commit = match (from_files, origin_head) {
        (true, Some(v)) if name.starts_with("origin/") => read(v.trim_start_matches("ref:").trim()),
        _ => None,
    };
    Ok(Base { name, commit })
}

/// Find the overlaps of the repository that holds `dir`; `state` names the sessions in each
/// worktree. `store`'s home keeps what a later run can reuse (merge bases, private copies of
/// the worktrees' indexes: [`super::worktree_index`]); without one, everything is asked of git.
pub fn find(store: &Store, dir: &Path, base: Option<&str>, state: &State) -> Result<Report> {
    let cache = Cache::of(store);
    // The repository and its worktrees are asked of git at once: each answer is a git process
    // of its own, and neither needs the other.
    let (common, listed) = std::thread::scope(|s| {
        // Meanwhile, the files of worktrees that are gone are removed.
        s.spawn(|| cache.prune());
        let listed = s.spawn(|| list(dir));
        let common = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        );
        (common, listed.join().expect("git does not panic"))
    });
    let common = common?
        .map(text)
        .ok_or_else(|| {
            Error::invalid(
                Reason::InvalidDirectory,
                format!(
                    "{} is not in a git repository; run overlaps in a worktree of the repository (or pass --dir)",
                    dir.display()
                ),
            )
        })?;
    let base = resolve_base(dir, Path::new(&common), base)?;
    let listed = listed?;
    let mut trees = Vec::new();
    // Per worktree: its changed files, and its directory when they could be measured.
    let mut changed: Vec<(BTreeSet<String>, Option<PathBuf>)> = Vec::new();
    // The index git reads in each measured worktree (a private copy, or its own).
    let mut indexes: BTreeMap<usize, Option<Private>> = BTreeMap::new();
    // Each worktree is measured in a thread of its own: git spends most of it stat-ing files.
    type Measured = Option<(BTreeSet<String>, Option<Private>)>;
    let measured: Vec<Result<Measured>> = std::thread::scope(|s| {
        let base = &base;
        let cache = Some(&cache);
        let running: Vec<_> = listed
            .iter()
            .map(|t| {
                let path = std::fs::canonicalize(&t.path).unwrap_or(t.path.clone());
                let head = t
                    .head
                    .as_deref()
                    .filter(|h| is_object_id(h) && h.bytes().any(|b| b != b'0'));
                s.spawn(move || measure(cache, &path, base, head))
            })
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a measuring thread does not panic"))
            .collect()
    });
    let base = base.name;
    for (t, files) in listed.into_iter().zip(measured) {
        let path = std::fs::canonicalize(&t.path).unwrap_or(t.path.clone());
        let shown = path.to_string_lossy().into_owned();
        let branch = t.branch.clone().unwrap_or_else(|| {
            t.head
                .as_deref()
                .map(|h| h.chars().take(7).collect())
                .unwrap_or_default()
        });
        let sessions = state
            .instances
            .iter()
            .filter(|i| Path::new(&i.working_directory).starts_with(&path))
            .map(|i| i.id.clone())
            .collect();
        let mut tree = Tree {
            path: shown,
            branch,
            sessions,
            changed: 0,
            skipped: None,
            unpredictable: None,
        };
        let Some((files, index)) = files? else {
            tree.skipped = Some(format!(
                "no commit in common with {base} (or no commit yet): its changes cannot be measured"
            ));
            trees.push(tree);
            changed.push((BTreeSet::new(), None));
            continue;
        };
        tree.changed = files.len();
        indexes.insert(trees.len(), index);
        trees.push(tree);
        changed.push((files, Some(path)));
    }
    // Files changed in two or more worktrees.
    let mut by_file: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (files, _)) in changed.iter().enumerate() {
        for f in files {
            by_file.entry(f).or_default().push(i);
        }
    }
    by_file.retain(|_, v| v.len() > 1);
    // Which pairs git predicts to conflict, and in which files.
    let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    for v in by_file.values() {
        for (n, &a) in v.iter().enumerate() {
            for &b in &v[n + 1..] {
                pairs.insert((a, b));
            }
        }
    }
    // The commit that stands for each worktree's state, made only for worktrees in a pair (in
    // parallel threads), or why git could not make one.
    let wanted: BTreeSet<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    // The files each of them shares with another: a snapshot holds them even when untracked.
    let mut shared: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (file, v) in &by_file {
        for &i in v {
            shared.entry(i).or_default().push(file);
        }
    }
    let made: Vec<(usize, std::result::Result<String, String>)> = std::thread::scope(|s| {
        let running: Vec<_> = wanted
            .iter()
            .filter_map(|&i| Some((i, changed[i].1.as_deref()?)))
            .map(|(i, path)| {
                let index = indexes.get(&i).and_then(|p| p.as_ref()).map(Private::path);
                let cache = &cache;
                let also = shared.get(&i).map(Vec::as_slice).unwrap_or_default();
                s.spawn(move || (i, snapshot(cache, path, index, also)))
            })
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a snapshot thread does not panic"))
            .collect()
    });
    let mut snapshots: BTreeMap<usize, String> = BTreeMap::new();
    for (i, made) in made {
        match made {
            Ok(snap) => {
                snapshots.insert(i, snap);
            }
            Err(why) => trees[i].unpredictable = Some(why),
        }
    }
    // Each pair's merge is predicted in a thread of its own (git writes the merged trees into
    // the object store, which is safe to do at once).
    let conflicted: BTreeMap<(usize, usize), BTreeSet<String>> = std::thread::scope(|s| {
        let running: Vec<_> = pairs
            .iter()
            .filter_map(|&(a, b)| Some(((a, b), snapshots.get(&a)?, snapshots.get(&b)?)))
            .map(|(pair, sa, sb)| s.spawn(move || Ok((pair, merge_conflicts(dir, sa, sb)?))))
            .collect();
        running
            .into_iter()
            .map(|h| h.join().expect("a merging thread does not panic"))
            .collect::<Result<_>>()
    })?;
    let overlaps = by_file
        .into_iter()
        .map(|(file, v)| {
            let pairs_here = || {
                v.iter()
                    .enumerate()
                    .flat_map(|(n, &a)| v[n + 1..].iter().map(move |&b| (a, b)))
            };
            let named = |(a, b): (usize, usize)| [trees[a].path.clone(), trees[b].path.clone()];
            Overlap {
                file: file.to_string(),
                worktrees: v.iter().map(|&i| trees[i].path.clone()).collect(),
                conflicts: conflicted
                    .iter()
                    .filter(|(_, files)| files.contains(file))
                    .map(|(&pair, _)| named(pair))
                    .collect(),
                unpredicted: pairs_here()
                    .filter(|pair| !conflicted.contains_key(pair))
                    .map(named)
                    .collect(),
            }
        })
        .collect();
    Ok(Report {
        repository: common,
        base,
        worktrees: trees,
        overlaps,
    })
}

/// Measure the worktree at `path` against the integration branch `base`, whose `HEAD` is
/// `head` (when known): its changed files and the index git read (a private copy, else `None`:
/// its own); `None` when it has no commit in common with the base.
fn measure(
    cache: Option<&Cache>,
    path: &Path,
    base: &Base,
    head: Option<&str>,
) -> Result<Option<(BTreeSet<String>, Option<Private>)>> {
    let gitdir = match super::local::git_dirs(path) {
        Some((gitdir, _, None)) => Some(gitdir),
        _ => None,
    };
    let ids = head.zip(base.commit.as_deref());
    // The merge base and the private index at once: either may run git.
    let (mb, index) = std::thread::scope(|s| {
        let index = s.spawn(|| {
            cache
                .zip(gitdir.as_deref())
                .and_then(|(c, g)| c.private_index(path, g))
        });
        let mb = worktree_index::merge_base(cache, path, &base.name, ids);
        (mb, index.join().expect("copying an index does not panic"))
    });
    let Some(mb) = mb? else {
        return Ok(None);
    };
    if let Some(p) = index {
        let (files, listed) = changed_since_indexed(path, &mb, Some(p.path()))?;
        if listed {
            return Ok(Some((files, Some(p))));
        }
        // git could not read the copy: forget it, and ask through the worktree's own index.
        p.discard();
    }
    Ok(Some((changed_since(path, &mb)?, None)))
}

/// What the worktree at `path` changed against commit `mb`: its commits since, its staged and
/// unstaged changes, its untracked files (not ignored).
pub(crate) fn changed_since(path: &Path, mb: &str) -> Result<BTreeSet<String>> {
    Ok(changed_since_indexed(path, mb, None)?.0)
}

/// [`changed_since`], git reading the index `index` (`None`: the worktree's own); and whether
/// git listed the tracked files' changes (false: it failed to).
fn changed_since_indexed(
    path: &Path,
    mb: &str,
    index: Option<&Path>,
) -> Result<(BTreeSet<String>, bool)> {
    let mut files: BTreeSet<String> = BTreeSet::new();
    // Both at once: each walks the worktree.
    let (diff, untracked) = std::thread::scope(|s| {
        let untracked = s.spawn(|| {
            git_indexed(
                path,
                &["ls-files", "-z", "--others", "--exclude-standard"],
                index,
            )
        });
        let diff = git_indexed(
            path,
            &["diff", "--name-only", "-z", "--no-renames", mb],
            index,
        );
        (diff, untracked.join().expect("git does not panic"))
    });
    let listed = match diff? {
        Some(d) => {
            files.extend(names(&d));
            true
        }
        None => false,
    };
    if let Some(u) = untracked? {
        files.extend(names(&u));
    }
    Ok((files, listed))
}

/// The overlaps of every repository a live instance works in that has two or more live
/// worktrees, those with at least one overlap (what `status`, `top`, the dashboard and the MCP
/// `check` tool show). Runs git, as [`find`] does, only for such repositories; a repository git
/// cannot measure is left out.
pub fn of_sessions(store: &Store, state: &State) -> Vec<Report> {
    let mut finder = super::local::WorktreeFinder::default();
    for i in &state.instances {
        if i.working_directory.starts_with('/') {
            finder.note(Path::new(&i.working_directory));
        }
    }
    let mut repos: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in finder.found.all() {
        repos
            .entry(t.repo.as_str())
            .or_default()
            .push(t.root.as_str());
    }
    repos
        .values()
        .filter(|roots| roots.len() > 1)
        .filter_map(|roots| find(store, Path::new(roots[0]), None, state).ok())
        .filter(|r| !r.overlaps.is_empty())
        .collect()
}

/// The commit that stands for the worktree at `path` in a merge prediction: its tracked files
/// and the files of `also` (those it shares with another worktree, untracked ones included) as
/// they are, on top of its `HEAD` ([`Cache::snapshot`]); or why git could not make one.
///
/// Made from the private copy of its index `private` when there is one, else from a copy of
/// its own index: neither is ever written, and no lock is taken (`git stash create` takes the
/// worktree's index lock and rewrites the index, and fails while another git process holds it).
fn snapshot(
    cache: &Cache,
    path: &Path,
    private: Option<&Path>,
    also: &[&str],
) -> std::result::Result<String, String> {
    let own = super::local::git_dirs(path).map(|(gitdir, _, _)| gitdir.join("index"));
    let mut why = "it has no index".to_string();
    for index in private.into_iter().chain(own.as_deref()) {
        match cache.snapshot(path, index, also) {
            Ok(snap) => return Ok(snap),
            Err(e) => why = e,
        }
    }
    Err(why)
}

/// The files `git merge-tree --write-tree` finds conflicting when merging commits `a` and `b`.
fn merge_conflicts(dir: &Path, a: &str, b: &str) -> Result<BTreeSet<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "-z",
            a,
            b,
        ])
        .output()
        .map_err(|e| Error::invalid(Reason::GitFailed, format!("could not run git: {e}")))?;
    match out.status.code() {
        // Clean.
        Some(0) => Ok(BTreeSet::new()),
        // Conflicts: the tree's id, then the conflicted files.
        Some(1) => Ok(names(&out.stdout).skip(1).collect()),
        _ => Err(Error::invalid(
            Reason::GitFailed,
            format!(
                "`git merge-tree --write-tree` failed ({}); overlaps needs git 2.38 or newer",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        )),
    }
}
