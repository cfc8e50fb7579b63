//! The git side of sessions in worktrees (docs/protocol.md, "Agents in worktrees"): make a
//! worktree and a branch for `start --worktree`, find what a finishing session leaves in its
//! worktree, remove a worktree that holds nothing unlanded, and tell whether a landing branch
//! landed.
//!
//! Runs git, so never inside a store lock: the callers ask git first and hand the answers to
//! the transaction.
//!
//! Where: a worktree for session NAME of the repository whose main checkout is `/w/app` is
//! `/w/app.worktrees/NAME` (a `/` in NAME becomes `-`), on a new branch NAME started at the
//! current `HEAD`. Beside the repository, not inside it: the main checkout's `git status`, its
//! builds and its file watchers never see the other worktrees; one directory per repository
//! keeps them together and easy to find.

use std::path::{Path, PathBuf};

use super::overlaps::{git, names, text};
use crate::error::{Error, Reason, Result};

/// A worktree to make: checked, nothing written yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Where git runs (the directory `start` was run in).
    pub dir: PathBuf,
    /// The new worktree's directory.
    pub path: PathBuf,
    pub branch: String,
    /// The repository's common git directory.
    pub repo: String,
    /// Where a new branch starts (`None`: `HEAD`).
    pub start: Option<String>,
    /// The branch exists: check it out rather than make it.
    pub existing: bool,
}

/// Check that a worktree and branch NAME can be made for a session started in `dir`: `dir` is
/// in a non-bare repository with a commit, the branch does not exist, the directory does not.
/// Nothing is written.
pub fn plan(dir: &Path, name: Option<&str>) -> Result<Plan> {
    let shown = dir.display();
    let Some(bare) = git(dir, &["rev-parse", "--is-bare-repository"])?.map(text) else {
        return Err(Error::invalid(
            Reason::NotARepository,
            format!("--worktree needs a git repository, and {shown} is not in one; nothing was created"),
        )
        .with_hint(
            "run `conductor start --worktree` inside a checkout of the repository, or leave out --worktree",
        ));
    };
    if bare == "true" {
        return Err(Error::invalid(
            Reason::BareRepository,
            format!("{shown} is a bare repository: it has no checkout to branch a session's worktree from; nothing was created"),
        )
        .with_hint(
            "run `conductor start --worktree` in one of its worktrees (`git worktree add ../main main`), or in a clone",
        ));
    }
    let repo = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?
    .map(text)
    .map(canonical)
    .ok_or_else(|| git_failed("rev-parse --git-common-dir", dir))?;
    if git(dir, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?.is_none() {
        return Err(Error::invalid(
            Reason::NoCommits,
            format!("the repository of {shown} has no commit yet, and a session's branch must start at one; nothing was created"),
        )
        .with_hint("make the first commit (`git commit --allow-empty -m init`), then start again"));
    }
    let branch = match name {
        Some(n) => n.to_string(),
        None => format!("session-{}", crate::host::random_hex6()),
    };
    if branch.is_empty()
        || git(dir, &["check-ref-format", "--branch", &branch])?.is_none()
        || branch.starts_with('-')
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!("`{branch}` is not a valid git branch name; nothing was created"),
        )
        .with_hint("name the worktree like a branch: letters, digits, `-`, `_`, `/` (`--worktree fix-login`)"));
    }
    if git(
        dir,
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ],
    )?
    .is_some()
    {
        return Err(Error::invalid(
            Reason::BranchExists,
            format!("the branch `{branch}` exists already; nothing was created"),
        )
        .with_hint(format!(
            "choose another name (`--worktree {branch}-2`), or work where `{branch}` is checked out: `git worktree list` shows it"
        )));
    }
    let path = place(Path::new(&repo), &branch);
    if path.exists() {
        return Err(Error::invalid(
            Reason::FileExists,
            format!("{} exists already; nothing was created", path.display()),
        )
        .with_hint("choose another name with --worktree NAME, or remove that directory"));
    }
    Ok(Plan {
        dir: dir.to_path_buf(),
        path,
        branch,
        repo,
        start: None,
        existing: false,
    })
}

/// Where the worktree for branch `branch` of the repository whose common git directory is
/// `repo` goes: `<main checkout>.worktrees/<branch, `/` as `-`>`.
pub fn place(repo: &Path, branch: &str) -> PathBuf {
    let main = main_checkout(repo);
    let holder = match main.file_name() {
        Some(n) => format!("{}.worktrees", n.to_string_lossy()),
        None => "worktrees".to_string(),
    };
    let parent = main.parent().unwrap_or(Path::new("/")).join(holder);
    parent.join(branch.replace('/', "-"))
}

/// The main checkout of the repository that `dir` is in (any of its worktrees), and its
/// common git directory. `None` when `dir` is in no non-bare repository.
pub fn repository_of(dir: &Path) -> Option<(PathBuf, String)> {
    let bare = git(dir, &["rev-parse", "--is-bare-repository"]).ok()??;
    if text(bare) == "true" {
        return None;
    }
    let repo = canonical(text(
        git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .ok()??,
    ));
    Some((main_checkout(Path::new(&repo)), repo))
}

/// A worktree for branch `branch` of the repository `main` (its main checkout; `repo` its
/// common git directory) in the documented place: a new branch started at `start` (`None`:
/// `HEAD`), or, when `existing`, the branch as it is. Nothing is checked or written here.
pub fn plan_branch(
    main: &Path,
    repo: &str,
    branch: &str,
    start: Option<&str>,
    existing: bool,
) -> Plan {
    Plan {
        dir: main.to_path_buf(),
        path: place(Path::new(repo), branch),
        branch: branch.to_string(),
        repo: repo.to_string(),
        start: start.map(str::to_string),
        existing,
    }
}

/// The main checkout of the repository whose common git directory is `repo`: the directory
/// holding `.git`, or for a bare repository the repository itself (`app.git` is `app`).
fn main_checkout(repo: &Path) -> PathBuf {
    if repo.file_name().is_some_and(|n| n == ".git") {
        return repo.parent().unwrap_or(repo).to_path_buf();
    }
    let name = repo
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_string())
        .unwrap_or_default();
    repo.parent().unwrap_or(repo).join(name)
}

/// `p` with symlinks resolved, as the worktree finder names repositories.
fn canonical(p: String) -> String {
    std::fs::canonicalize(&p)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or(p)
}

fn git_failed(what: &str, dir: &Path) -> Error {
    Error::invalid(
        Reason::GitFailed,
        format!("`git {what}` failed in {}", dir.display()),
    )
}

/// Make the planned worktree and branch (`git worktree add -b`). On failure nothing is left:
/// the holder directory is removed again if this made it and it is empty.
pub fn create(p: &Plan) -> Result<PathBuf> {
    let parent = p.path.parent().unwrap_or(Path::new("/"));
    let made_parent = !parent.exists();
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C").arg(&p.dir).args(["worktree", "add", "-q"]);
    if p.existing {
        cmd.arg(&p.path).arg(&p.branch);
    } else {
        cmd.args(["-b", &p.branch]).arg(&p.path);
        cmd.args(p.start.as_deref());
    }
    let out = cmd.output().map_err(|e| {
        Error::invalid(
            Reason::GitFailed,
            format!("could not run git: {e}; --worktree needs git on PATH"),
        )
    })?;
    if !out.status.success() {
        if made_parent {
            let _ = std::fs::remove_dir(parent);
        }
        return Err(Error::invalid(
            Reason::GitFailed,
            format!(
                "`git worktree add {}{} {}` failed: {}",
                if p.existing { "" } else { "-b " },
                p.branch,
                p.path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(std::fs::canonicalize(&p.path).unwrap_or(p.path.clone()))
}

/// Take back a worktree [`create`] just made (the session could not be registered): nothing of
/// anyone's is in it yet.
pub fn undo(p: &Plan, path: &Path) {
    let _ = git(
        &p.dir,
        &["worktree", "remove", "--force", &path.to_string_lossy()],
    );
    let _ = git(&p.dir, &["branch", "-D", &p.branch]);
    if let Some(parent) = p.path.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// What a finishing session leaves in its worktree.
#[derive(Clone, Debug, PartialEq)]
pub struct Finish {
    /// The worktree's root, with a final `/`.
    pub root: String,
    /// The repository's common git directory.
    pub repo: String,
    /// Its branch (`None`: a detached HEAD).
    pub branch: Option<String>,
    /// The integration branch, and the merge base of `HEAD` with it (`None`: none found).
    pub base: Option<String>,
    pub merge_base: Option<String>,
    /// Commits on `HEAD` that the integration branch does not have.
    pub ahead: usize,
    /// Uncommitted files: staged, unstaged and untracked (not ignored).
    pub dirty: usize,
    /// The files changed against the merge base (commits and uncommitted), relative to `root`.
    pub files: Vec<String>,
}

impl Finish {
    /// True when the branch has something the integration branch lacks.
    pub fn unlanded(&self) -> bool {
        self.ahead > 0 || self.dirty > 0
    }

    /// True when the worktree is on a branch other than the integration branch (or its
    /// remote's counterpart: `main` for `origin/main`).
    pub fn on_side_branch(&self) -> bool {
        match (&self.branch, &self.base) {
            (Some(b), Some(base)) => {
                b != base && base.rsplit_once('/').is_none_or(|(_, short)| short != b)
            }
            _ => false,
        }
    }
}

/// Ask git what the worktree holding `dir` leaves (`base`: the configured integration branch).
/// `None` when `dir` is in no worktree or git cannot tell: `done` then goes on as always.
pub fn inspect(dir: &Path, base: Option<&str>) -> Option<Finish> {
    let root = git(dir, &["rev-parse", "--show-toplevel"]).ok()??;
    let root = PathBuf::from(text(root));
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let repo = canonical(text(
        git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .ok()??,
    ));
    let branch = git(dir, &["symbolic-ref", "-q", "--short", "HEAD"])
        .ok()
        .flatten()
        .map(text);
    let base = super::overlaps::integration_branch(dir, base).ok();
    let merge_base = base
        .as_deref()
        .and_then(|b| git(dir, &["merge-base", b, "HEAD"]).ok().flatten())
        .map(text);
    let ahead = base
        .as_deref()
        .and_then(|b| {
            git(dir, &["rev-list", "--count", &format!("{b}..HEAD")])
                .ok()
                .flatten()
        })
        .and_then(|n| text(n).parse().ok())
        .unwrap_or(0);
    let status = git(
        dir,
        &["status", "--porcelain", "-z", "--untracked-files=all"],
    )
    .ok()??;
    let dirty = names(&status).filter(|l| l.len() > 3).count();
    let mut files = std::collections::BTreeSet::new();
    if let Some(mb) = &merge_base {
        if let Ok(Some(d)) = git(dir, &["diff", "--name-only", "-z", "--no-renames", mb]) {
            files.extend(names(&d));
        }
        if let Ok(Some(u)) = git(dir, &["ls-files", "-z", "--others", "--exclude-standard"]) {
            files.extend(names(&u));
        }
    }
    let mut root = root.to_string_lossy().into_owned();
    root.push('/');
    Some(Finish {
        root,
        repo,
        branch,
        base,
        merge_base,
        ahead,
        dirty,
        files: files.into_iter().collect(),
    })
}

/// Remove a session's worktree at `path` and its branch, which holds nothing unlanded (checked
/// by the caller). `git worktree remove` without `--force` refuses a worktree with changes, so
/// even a change made since the check is never deleted. Returns why it could not, if it could not.
pub fn remove(repo: &str, path: &str, branch: &str) -> std::result::Result<(), String> {
    let run = |args: &[&str]| -> std::result::Result<(), String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .map_err(|e| format!("could not run git: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`git {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(&["worktree", "remove", path])?;
    run(&["branch", "-D", branch])?;
    // The per-repository holder directory goes when its last worktree does.
    if let Some(parent) = Path::new(path).parent()
        && parent.to_string_lossy().ends_with(".worktrees")
    {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

/// How a landing branch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landed {
    /// The integration branch contains its new commits.
    Merged,
    /// The branch (or its repository) is gone.
    Deleted,
}

impl Landed {
    /// The words in history's notes.
    pub fn how(self, base: &str) -> String {
        match self {
            Landed::Merged => format!("landed: merged into {base}"),
            Landed::Deleted => "landed: the branch was deleted".to_string(),
        }
    }
}

/// Whether the branch of landing entry `l` landed: deleted, or its tip is a commit past the
/// recorded merge base that the integration branch contains. `None`: still landing (or git
/// could not tell, which keeps the files reserved).
pub fn landed(l: &super::landing::Landing) -> Option<Landed> {
    let repo = Path::new(&l.repo);
    if !repo.is_dir() {
        return Some(Landed::Deleted);
    }
    let tip = match git(
        repo,
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{}^{{commit}}", l.branch),
        ],
    ) {
        Ok(Some(t)) => text(t),
        Ok(None) => return Some(Landed::Deleted),
        Err(_) => return None,
    };
    if tip == l.merge_base {
        return None;
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["merge-base", "--is-ancestor", &tip, &l.base])
        .output()
        .ok()?;
    (out.status.code() == Some(0)).then_some(Landed::Merged)
}
