//! Claude Code's `WorktreeCreate` and `WorktreeRemove` hooks (`claude --worktree NAME`, a
//! subagent's `isolation: worktree`): conductor creates the session's worktree with git itself,
//! and removes it only when nothing would be lost (docs/protocol.md, "Agents in worktrees").
//!
//! The contract, read from the Claude Code CLI itself (2.1.197, pinned, and 2.1.332, newest):
//! - `WorktreeCreate`: the payload has the common fields (`session_id`, `transcript_path`, `cwd`:
//!   where Claude was started) and `name` (the `--worktree` name, or one Claude made up). A hook
//!   replaces git's own creation: Claude takes the last non-empty line of a successful hook's
//!   stdout as the worktree's path (2.1.332 resolves a relative one; conductor prints it
//!   absolute), starts the session there, and fails the creation on a non-zero exit (showing the
//!   hook's output).
//! - `WorktreeRemove`: the common fields and `worktree_path`. A hook replaces git's removal
//!   (without one, Claude runs `git worktree remove --force`); a non-zero exit leaves the worktree
//!   in place and Claude says so (2.1.332 shows the first line of the hook's output).
//!
//! Here as Claude Code does it: the worktree goes to `.claude/worktrees/NAME` under the
//! repository's main worktree, on a new branch `worktree-NAME` from the current `HEAD` (a `/` in
//! the name becomes `+`). Git runs with its output captured: only the path reaches stdout.
//! Claude Code reads the session's settings from the new worktree, so conductor's integration
//! files there (`.claude/settings.json` and its manifest, the `/conductor` command, `.mcp.json`)
//! are copied from the main worktree when git did not bring them (not committed); so are the
//! git-ignored files `.worktreeinclude` names, which Claude Code copies itself only when no hook
//! replaces its creation.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Reason, Result};

/// Where the worktrees go, under the repository's main worktree (Claude Code's own place).
pub const DIR: &str = ".claude/worktrees";
/// The branch of worktree `NAME` is `worktree-NAME` (Claude Code's own naming).
pub const BRANCH_PREFIX: &str = "worktree-";
/// Claude Code's limit on a worktree name.
const NAME_MAX: usize = 64;
/// conductor's integration files, relative to a worktree's root, copied into a new worktree
/// when git did not bring them.
const INTEGRATION_FILES: &[&str] = &[
    ".claude/settings.json",
    ".claude/conductor-integration.json",
    ".claude/commands/conductor.md",
    ".mcp.json",
];

/// What a WorktreeCreate payload asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The worktree's name: `name`, which Claude Code 2.1.197 and 2.1.332 send (its hooks
    /// reference spells it `worktree_name`, read when `name` is missing).
    pub name: String,
    /// The directory to create it in (relative to `cwd`), were a payload to name one (the
    /// reference's `base_path`; neither version sends it): else `.claude/worktrees`.
    pub base_path: Option<String>,
    /// The commit to start from, were a payload to name one (the reference's `source_ref`;
    /// neither version sends it): else `HEAD`.
    pub source_ref: Option<String>,
}

impl Request {
    /// The request in a WorktreeCreate payload.
    pub fn from_payload(v: &serde_json::Value) -> Request {
        let field = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Request {
            name: field("name")
                .or_else(|| field("worktree_name"))
                .unwrap_or_default(),
            base_path: field("base_path"),
            source_ref: field("source_ref"),
        }
    }
}

/// A worktree `create` made (or found from an earlier run of the same name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    /// Its root: absolute, symlinks resolved.
    pub path: PathBuf,
    pub branch: String,
    /// It existed already (a resumed `claude --worktree NAME`): nothing was created.
    pub resumed: bool,
    /// The files copied into it (relative paths).
    pub copied: Vec<String>,
}

/// What `remove` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removed {
    /// The worktree is gone, and its branch when it had one.
    Removed { branch: Option<String> },
    /// Nothing was there any more.
    Gone,
}

/// Run git in `dir`: its stdout (trimmed) on success, else its stderr's last line.
fn git(dir: &Path, args: &[&str]) -> Result<std::result::Result<String, String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .map_err(|e| {
            Error::invalid(Reason::GitFailed, format!("could not run git: {e}"))
                .with_hint("install git (2.5 or newer has `git worktree`) and put it on PATH")
        })?;
    Ok(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_string())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output")
            .trim()
            .to_string())
    })
}

/// A git command that must succeed.
fn git_ok(dir: &Path, args: &[&str]) -> Result<String> {
    git(dir, args)?.map_err(|e| {
        Error::invalid(
            Reason::GitFailed,
            format!("`git {}` failed in {}: {e}", args.join(" "), dir.display()),
        )
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Check a worktree name as Claude Code does: at most 64 characters, `/`-separated segments of
/// letters, digits, `.`, `_` and `-`, none of them `.`, `..` or `.git`.
pub fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::invalid(
            Reason::InvalidInput,
            format!("the worktree name `{name}` {why}; nothing was created"),
        )
        .with_hint("name the worktree with letters, digits, `.`, `_`, `-` and `/` (claude --worktree NAME)"))
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name.chars().count() > NAME_MAX {
        return bad("is longer than 64 characters");
    }
    for seg in name.split('/') {
        if seg == "." || seg == ".." || seg.trim_end_matches('.').eq_ignore_ascii_case(".git") {
            return bad(&format!("has the segment `{seg}`"));
        }
        if seg.is_empty()
            || !seg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return bad("has a character other than letters, digits, `.`, `_`, `-` and `/`");
        }
    }
    Ok(())
}

/// The repository of `dir`: its main worktree's root and its common git directory.
fn repository(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let not_repo = || {
        Error::invalid(
            Reason::InvalidDirectory,
            format!(
                "{} is not inside a git repository; no worktree was created",
                dir.display()
            ),
        )
        .with_hint("start `claude --worktree` inside a git repository, or without --worktree")
    };
    if !dir.is_dir() {
        return Err(not_repo());
    }
    let common = match git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )? {
        Ok(c) => canonical(Path::new(&c)),
        Err(_) => return Err(not_repo()),
    };
    if git_ok(dir, &["rev-parse", "--is-bare-repository"])? == "true" {
        return Err(Error::invalid(
            Reason::InvalidDirectory,
            format!(
                "{} is a bare repository, which has no files to work on; no worktree was created",
                dir.display()
            ),
        )
        .with_hint("start `claude --worktree` in a checkout of the repository"));
    }
    // A main worktree's git directory is its `.git`; otherwise (the worktrees of a bare
    // repository) the worktree `dir` is in.
    let root = if common.file_name().is_some_and(|n| n == ".git") {
        common.parent().expect("a .git has a parent").to_path_buf()
    } else {
        canonical(Path::new(&git_ok(dir, &["rev-parse", "--show-toplevel"])?))
    };
    Ok((root, common))
}

/// The roots of the repository's worktrees, as `git worktree list` names them.
fn worktrees(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(git_ok(dir, &["worktree", "list", "--porcelain"])?
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(|p| canonical(Path::new(p)))
        .collect())
}

/// `WorktreeCreate`: create the worktree `name` for a session started in `cwd`, or find the one
/// an earlier session of that name left. Nothing is written when it fails.
pub fn create(cwd: &Path, req: &Request) -> Result<Created> {
    let name = req.name.as_str();
    check_name(name)?;
    let (root, _) = repository(cwd)?;
    let start = req.source_ref.as_deref().unwrap_or("HEAD");
    if let Some(r) = &req.source_ref
        && git(
            cwd,
            &["rev-parse", "-q", "--verify", &format!("{r}^{{commit}}")],
        )?
        .is_err()
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!("`{r}` names no commit in this repository; no worktree was created"),
        )
        .with_hint("start from a branch or commit that exists"));
    }
    if git(cwd, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?.is_err() {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!(
                "the repository {} has no commits yet, so a worktree has nothing to check out; none was created",
                root.display()
            ),
        )
        .with_hint("make a first commit (git commit), then start `claude --worktree` again"));
    }
    let flat = name.replace('/', "+");
    let path = match &req.base_path {
        Some(b) => cwd.join(b).join(&flat),
        None => root.join(DIR).join(&flat),
    };
    let branch = format!("{BRANCH_PREFIX}{flat}");
    if path.exists() {
        let path = canonical(&path);
        if worktrees(cwd)?.contains(&path) {
            return Ok(Created {
                path,
                branch,
                resumed: true,
                copied: Vec::new(),
            });
        }
        return Err(Error::invalid(
            Reason::FileExists,
            format!(
                "{} exists and is not a worktree of this repository; no worktree was created",
                path.display()
            ),
        )
        .with_hint("move it away, or start `claude --worktree` with another name"));
    }
    if git(
        cwd,
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ],
    )?
    .is_ok()
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!("the branch `{branch}` exists already; no worktree was created"),
        )
        .with_hint(format!(
            "start `claude --worktree` with another name, or delete the branch once its work is merged (git branch -d {branch})"
        )));
    }
    let target = path.to_str().ok_or_else(|| {
        Error::invalid(
            Reason::InvalidDirectory,
            format!("{} is not UTF-8", path.display()),
        )
    })?;
    git_ok(
        cwd,
        &["worktree", "add", "-q", "-b", &branch, target, start],
    )?;
    let path = canonical(&path);
    let copied = copy_untracked(&root, &path)?;
    Ok(Created {
        path,
        branch,
        resumed: false,
        copied,
    })
}

/// Copy into the new worktree `to` what git did not bring from the main worktree `from`:
/// conductor's integration files, and the git-ignored files `.worktreeinclude` names.
fn copy_untracked(from: &Path, to: &Path) -> Result<Vec<String>> {
    let mut files: Vec<String> = INTEGRATION_FILES
        .iter()
        .filter(|f| from.join(f).is_file())
        .map(|f| f.to_string())
        .collect();
    if from.join(".worktreeinclude").is_file() {
        let split = |s: String| -> Vec<String> {
            s.split('\0')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect()
        };
        let ignored = split(git_ok(
            from,
            &[
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
            ],
        )?);
        let listed = split(git_ok(
            from,
            &[
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-from=.worktreeinclude",
            ],
        )?);
        files.extend(ignored.into_iter().filter(|f| listed.contains(f)));
    }
    let mut copied = Vec::new();
    for f in files {
        let (src, dst) = (from.join(&f), to.join(&f));
        if dst.exists() || !src.is_file() {
            continue;
        }
        if let Some(dir) = dst.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
        std::fs::copy(&src, &dst).map_err(|e| Error::io("copy", &src, e))?;
        copied.push(f);
    }
    Ok(copied)
}

/// `WorktreeRemove`: remove the linked worktree at `path` and its branch, only when nothing
/// would be lost: no uncommitted change (untracked files included) and no commit that another
/// branch, remote-tracking branch or tag does not have. Otherwise nothing is deleted and the
/// error says what is there. `busy`: the other sessions working in it
/// ([`super::service::others_in`]), which keep it too.
pub fn remove(path: &Path, busy: &[String]) -> Result<Removed> {
    if !path.exists() {
        return Ok(Removed::Gone);
    }
    let path = canonical(path);
    let not_linked = || {
        Error::invalid(
            Reason::InvalidDirectory,
            format!(
                "{} is not a linked git worktree; nothing was deleted",
                path.display()
            ),
        )
        .with_hint("conductor removes only the worktrees `claude --worktree` made; remove other directories yourself")
    };
    let top = match git(&path, &["rev-parse", "--show-toplevel"])? {
        Ok(t) => canonical(Path::new(&t)),
        Err(_) => return Err(not_linked()),
    };
    let (root, _) = repository(&path)?;
    if top != path || root == path || !worktrees(&path)?.contains(&path) {
        return Err(not_linked());
    }
    let changed: Vec<String> = git_ok(
        &path,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
        ],
    )?
    .split('\0')
    .filter(|e| e.len() > 3)
    .map(|e| e[3..].to_string())
    .collect();
    let branch = git(&path, &["symbolic-ref", "-q", "--short", "HEAD"])?.ok();
    let mut args = vec!["rev-list".to_string(), "--count".into(), "HEAD".into()];
    args.push("--not".into());
    if let Some(b) = &branch {
        // Matched against the name below refs/heads/ (a glob: a wider match only keeps more).
        args.push(format!("--exclude={b}"));
    }
    args.extend(["--branches".into(), "--remotes".into(), "--tags".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let commits: usize = git_ok(&path, &args)?.trim().parse().unwrap_or(usize::MAX);
    if !changed.is_empty() || commits > 0 || !busy.is_empty() {
        let mut what = Vec::new();
        if !busy.is_empty() {
            what.push(format!(
                "{} other live session{} working in it ({})",
                busy.len(),
                if busy.len() == 1 { "" } else { "s" },
                busy.join(", ")
            ));
        }
        if !changed.is_empty() {
            let shown: Vec<&str> = changed.iter().take(3).map(String::as_str).collect();
            let more = if changed.len() > 3 { ", ..." } else { "" };
            what.push(format!(
                "{} uncommitted change{} ({}{more})",
                changed.len(),
                if changed.len() == 1 { "" } else { "s" },
                shown.join(", ")
            ));
        }
        if commits > 0 {
            what.push(format!(
                "{commits} commit{} on {} that no other branch has",
                if commits == 1 { "" } else { "s" },
                branch
                    .as_deref()
                    .map(|b| format!("branch {b}"))
                    .unwrap_or_else(|| "its detached HEAD".into())
            ));
        }
        return Err(Error::invalid(
            Reason::InvalidInput,
            format!(
                "kept the worktree {}: it has {}; nothing was deleted",
                path.display(),
                what.join(" and ")
            ),
        )
        .with_hint(format!(
            "finish the sessions working in it (conductor done), commit and merge (or push) the work, then `git worktree remove {}`; to throw it away, `git worktree remove --force {}`",
            path.display(),
            path.display()
        )));
    }
    let target = path.to_str().unwrap_or_default();
    git_ok(&root, &["worktree", "remove", target])?;
    if let Some(b) = &branch {
        // Its commits are on another branch (checked above): deleting the name loses nothing.
        git_ok(&root, &["branch", "-q", "-D", b])?;
    }
    Ok(Removed::Removed { branch })
}

/// What a session that starts in `dir` is told when `dir` is one of several worktrees of a
/// repository (`trees`: what was found for it): its worktree and branch, the others, and that
/// claims cover them all.
pub fn context(trees: &crate::protocol::worktrees::Worktrees, dir: &Path) -> Option<String> {
    let key = format!("{}/", dir.display().to_string().trim_end_matches('/'));
    let (me, _) = trees.of(&key)?;
    let others = trees.siblings(&key);
    if others.is_empty() {
        return None;
    }
    let name = |t: &crate::protocol::worktrees::Worktree| {
        format!(
            "{} (branch {})",
            t.root.trim_end_matches('/'),
            t.branch.as_deref().unwrap_or("unknown")
        )
    };
    let shown: Vec<String> = others.iter().take(8).map(|t| name(t)).collect();
    Some(format!(
        "This session works in the git worktree {}; the repository's other worktrees: {}{}. A claim \
         covers the same path in every worktree of the repository: a file another session holds in \
         any of them is refused here too.",
        name(me),
        shown.join(", "),
        if others.len() > 8 { ", ..." } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_claude_codes_rules() {
        for ok in ["foo", "feature/x", "a.b_c-d", "bright-running-fox"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "../x",
            "x/./y",
            "a//b",
            ".git",
            "x/.GIT..",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
