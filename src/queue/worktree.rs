//! Jobs that run in a git worktree (`"repo"`, `"branch"`, optional `"base"` in the manifest;
//! docs/queue.md, "Jobs in a worktree of a repository").
//!
//! - At submit, [`check`] asks git about each repository (nothing is written when one is
//!   refused) and names it by its main checkout, so every worktree of one repository is the
//!   same repository to the queue.
//! - At launch, [`ensure`] makes the job's worktree with [`crate::protocol::session_tree`], in
//!   the place `start --worktree` uses (`<main checkout>.worktrees/<branch>`): a new branch
//!   started at the job's base (a dependency's branch, the manifest's `base`, else the
//!   integration branch or `HEAD`), or the branch as it is when it exists already (a re-run
//!   continues its work). A worktree that is there already on that branch is used as it is.
//! - When the job completes, [`commit_leftovers`] commits what it left uncommitted, so its
//!   dependents (which start from its branch) see all of its work. The worktree and branch are
//!   kept: the branch holds the work.
//!
//! Runs git, so never inside a store lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Job;
use super::manifest::Manifest;
use crate::error::{Error, Reason, Result};
use crate::protocol::overlaps::{git, text};
use crate::protocol::session_tree;

fn bad(reason: Reason, message: String, hint: &str) -> Error {
    Error::invalid(reason, message).with_hint(hint.to_string())
}

/// Check every repository job of `m` against git and return the manifest with each `repo`
/// named by its main checkout. Refused: `repo` without `branch` or the reverse, `base`
/// without them, a directory that is not in a non-bare repository with a commit, a branch name
/// git refuses, a `base` that names no commit, and two jobs on one branch of one repository
/// when neither depends on the other (they would share a worktree at the same time).
pub fn check(m: &Manifest) -> Result<Manifest> {
    let mut out = m.clone();
    for j in &mut out.jobs {
        let id = &j.id;
        let (repo, branch) = match (&j.repo, &j.branch) {
            (None, None) => {
                if j.base.is_some() {
                    return Err(bad(
                        Reason::InvalidManifest,
                        format!(
                            "job `{id}` names a `base` but no `repo` and `branch`; nothing was submitted"
                        ),
                        "`base` is where a repository job's new branch starts: add `\"repo\"` and `\"branch\"`, or drop `base`",
                    ));
                }
                continue;
            }
            (Some(_), None) => {
                return Err(bad(
                    Reason::InvalidManifest,
                    format!("job `{id}` names a `repo` but no `branch`; nothing was submitted"),
                    "a job in a worktree needs both, e.g. `\"repo\": \"/src/app\", \"branch\": \"feature/x\"`",
                ));
            }
            (None, Some(_)) => {
                return Err(bad(
                    Reason::InvalidManifest,
                    format!("job `{id}` names a `branch` but no `repo`; nothing was submitted"),
                    "a job in a worktree needs both, e.g. `\"repo\": \"/src/app\", \"branch\": \"feature/x\"`",
                ));
            }
            (Some(r), Some(b)) => (r.clone(), b.clone()),
        };
        let dir = Path::new(&repo);
        if !dir.is_absolute() {
            return Err(bad(
                Reason::InvalidManifest,
                format!(
                    "job `{id}`: `repo` must be an absolute path, not `{repo}`; nothing was submitted"
                ),
                "name the repository's directory in full (the dispatcher may run elsewhere)",
            ));
        }
        let in_repo = dir.is_dir()
            && git(dir, &["rev-parse", "--git-dir"])
                .ok()
                .flatten()
                .is_some();
        if !in_repo {
            return Err(bad(
                Reason::NotARepository,
                format!("job `{id}`: `{repo}` is not a git repository; nothing was submitted"),
                "point `repo` at a checkout of the repository (`git init` one first)",
            ));
        }
        let Some((main, _)) = session_tree::repository_of(dir) else {
            return Err(bad(
                Reason::BareRepository,
                format!(
                    "job `{id}`: `{repo}` is a bare repository, with no checkout to branch a worktree from; nothing was submitted"
                ),
                "point `repo` at a checkout of it (a clone, or one of its worktrees)",
            ));
        };
        if git(dir, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?.is_none() {
            return Err(bad(
                Reason::NoCommits,
                format!(
                    "job `{id}`: the repository `{repo}` has no commit yet, and a job's branch must start at one; nothing was submitted"
                ),
                "make the first commit (`git commit --allow-empty -m init`), then submit again",
            ));
        }
        if branch.is_empty()
            || branch.starts_with('-')
            || git(dir, &["check-ref-format", "--branch", &branch])?.is_none()
        {
            return Err(bad(
                Reason::InvalidManifest,
                format!(
                    "job `{id}`: `{branch}` is not a valid git branch name; nothing was submitted"
                ),
                "name the branch as git allows: letters, digits, `-`, `_`, `/` (`feature/x`)",
            ));
        }
        if let Some(base) = &j.base
            && (base.starts_with('-')
                || git(
                    dir,
                    &["rev-parse", "-q", "--verify", &format!("{base}^{{commit}}")],
                )?
                .is_none())
        {
            return Err(bad(
                Reason::InvalidManifest,
                format!(
                    "job `{id}`: `base` `{base}` names no commit of `{repo}`; nothing was submitted"
                ),
                "name an existing branch or commit as `base`, or leave it out (the integration branch, else HEAD)",
            ));
        }
        j.repo = Some(main.to_string_lossy().into_owned());
    }
    shared_branches(&out)?;
    Ok(out)
}

/// Two jobs on one branch of one repository must be ordered (one depends on the other, maybe
/// through others): a later one continues in the earlier one's worktree.
fn shared_branches(m: &Manifest) -> Result<()> {
    let deps: BTreeMap<&str, &Vec<String>> = m
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), &j.depends_on))
        .collect();
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for d in deps.get(n).into_iter().flat_map(|v| v.iter()) {
                if d == to {
                    return true;
                }
                if seen.insert(d.as_str()) {
                    todo.push(d);
                }
            }
        }
        false
    };
    let mut by_branch: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for j in &m.jobs {
        if let (Some(r), Some(b)) = (&j.repo, &j.branch) {
            by_branch.entry((r, b)).or_default().push(&j.id);
        }
    }
    for ((repo, branch), ids) in by_branch {
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                if !reaches(a, b) && !reaches(b, a) {
                    return Err(bad(
                        Reason::InvalidManifest,
                        format!(
                            "jobs `{a}` and `{b}` both work on branch `{branch}` of `{repo}` and neither depends on the other; nothing was submitted"
                        ),
                        "give each job its own branch, or make one depend on the other (it then continues in the same worktree)",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Where the job's worktree is (or will be): `<main checkout>.worktrees/<branch>`. `None` for a
/// job without a repository. Pure: `repo` is the main checkout.
pub fn path_of(job: &Job) -> Option<PathBuf> {
    let (repo, branch) = (job.repo.as_ref()?, job.branch.as_ref()?);
    Some(session_tree::place(&Path::new(repo).join(".git"), branch))
}

/// The first argument that makes `conductor` the wrapper of a repository job ([`job_main`]).
pub const WRAPPER_ARG: &str = "__queue-job-in-worktree";

/// The wrapper's exit status when the worktree cannot be made or the changes not committed.
pub const FAILED: i32 = 125;

/// The job's command `agent`, wrapped: `conductor __queue-job-in-worktree JOB -- PROGRAM
/// ARGS...` (JOB: the job's repository fields as JSON).
pub fn wrap(agent: &std::process::Command, job: &Job) -> std::io::Result<std::process::Command> {
    let exe = std::env::current_exe()?;
    let mut small = job.clone();
    small.prompt.clear();
    small.outcomes.clear();
    small.docs.clear();
    let mut c = std::process::Command::new(exe);
    c.arg(WRAPPER_ARG)
        .arg(serde_json::to_string(&small).map_err(std::io::Error::other)?)
        .arg("--")
        .arg(agent.get_program())
        .args(agent.get_args());
    Ok(c)
}

/// The wrapper: make (or find) the job's worktree, run the agent there (stdin, stdout, stderr
/// and environment as given), and when it exits 0 commit what it left uncommitted. It is the
/// job's process (group leader): the dispatcher's reaper never sees the git it runs. Exits with
/// the agent's status, or [`FAILED`] with the reason on stderr (the job's log).
pub fn job_main(args: &[std::ffi::OsString]) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let fail = |m: String| {
        eprintln!("error: {m}");
        FAILED
    };
    let [job, dashdash, program, rest @ ..] = args else {
        return fail(format!(
            "usage: conductor {WRAPPER_ARG} JOB -- PROGRAM [ARGS...]"
        ));
    };
    if dashdash != "--" {
        return fail(format!(
            "usage: conductor {WRAPPER_ARG} JOB -- PROGRAM [ARGS...]"
        ));
    }
    let job: Job = match serde_json::from_str(&job.to_string_lossy()) {
        Ok(j) => j,
        Err(e) => return fail(format!("not a job: {e}")),
    };
    let wt = match ensure(&job) {
        Ok(p) => p,
        Err(e) => return fail(format!("could not make the job's worktree: {e}")),
    };
    let status = match std::process::Command::new(program)
        .args(rest)
        .current_dir(&wt)
        .status()
    {
        Ok(s) => s,
        Err(e) => return fail(format!("could not run {}: {e}", program.to_string_lossy())),
    };
    if status.success() {
        return match commit_leftovers(&wt, &job.key()) {
            Ok(_) => 0,
            Err(e) => fail(e),
        };
    }
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Make (or find) the job's worktree and return it. The error is the reason the job could not
/// start.
pub fn ensure(job: &Job) -> std::result::Result<PathBuf, String> {
    let (Some(repo), Some(branch)) = (&job.repo, &job.branch) else {
        return Err("the job names no repository".into());
    };
    let main = Path::new(repo);
    let Some((main_dir, common)) = session_tree::repository_of(main) else {
        return Err(format!(
            "`{repo}` is no longer a git repository with a checkout"
        ));
    };
    // `git worktree add` run twice at once in one repository can fail (git reads the other's
    // half-made `.git/worktrees/<name>`): jobs starting together take turns, holding a lock on
    // the common git directory (an flock on the directory itself: nothing is written).
    let _turn = match std::fs::File::open(&common) {
        Ok(f) => {
            use std::os::fd::AsRawFd;
            while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
            Some(f)
        }
        Err(_) => None,
    };
    let path = session_tree::place(Path::new(&common), branch);
    if path.exists() {
        let here = git(&path, &["symbolic-ref", "-q", "--short", "HEAD"])
            .ok()
            .flatten()
            .map(text);
        let of = session_tree::repository_of(&path).map(|(_, c)| c);
        if here.as_deref() == Some(branch) && of.as_deref() == Some(common.as_str()) {
            return Ok(std::fs::canonicalize(&path).unwrap_or(path));
        }
        return Err(format!(
            "{} exists and is not a worktree of `{repo}` on branch `{branch}`: move it away, then `conductor queue retry {}`",
            path.display(),
            job.id
        ));
    }
    let existing = git(
        &main_dir,
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ],
    )
    .ok()
    .flatten()
    .is_some();
    let start = match &job.base {
        Some(b) => Some(b.clone()),
        None => crate::protocol::overlaps::integration_branch(&main_dir, None).ok(),
    };
    let plan = session_tree::plan_branch(&main_dir, &common, branch, start.as_deref(), existing);
    let made = session_tree::create(&plan).map_err(|e| e.to_string())?;
    if !existing {
        for other in &job.merge {
            let message = format!("Merge branch '{other}' (queue job {})", job.key());
            let mut args = identity(&made);
            args.extend(["merge", "-q", "--no-edit", "-m", &message, other]);
            let merged = git(&made, &args).ok().flatten().is_some();
            if !merged {
                let _ = git(&made, &["merge", "--abort"]);
                return Err(format!(
                    "could not merge the dependency branch `{other}` into `{branch}` (a conflict?): resolve it in {}, commit, then `conductor queue retry {}`",
                    made.display(),
                    job.id
                ));
            }
        }
    }
    Ok(made)
}

/// `-c` options giving git conductor's identity when the user has none configured (a commit
/// would fail); none otherwise.
fn identity(dir: &Path) -> Vec<&'static str> {
    match git(dir, &["config", "user.email"]) {
        Ok(Some(_)) => Vec::new(),
        _ => vec![
            "-c",
            "user.name=conductor",
            "-c",
            "user.email=conductor@localhost",
        ],
    }
}

/// Commit what a completed job left uncommitted in its worktree (`git add -A`), as
/// "conductor queue: job WS/ID". The user's git identity is used; without one, conductor's.
/// Returns why it could not, if it could not.
pub fn commit_leftovers(worktree: &Path, key: &str) -> std::result::Result<bool, String> {
    let run = |args: &[&str]| -> std::result::Result<std::process::Output, String> {
        std::process::Command::new("git")
            .arg("-C")
            .arg(worktree)
            .args(args)
            .output()
            .map_err(|e| format!("could not run git: {e}"))
    };
    let status = run(&["status", "--porcelain", "--untracked-files=all"])?;
    if !status.status.success() {
        return Err(format!(
            "`git status` failed in the job's worktree {}: {}",
            worktree.display(),
            String::from_utf8_lossy(&status.stderr).trim()
        ));
    }
    if status.stdout.is_empty() {
        return Ok(false);
    }
    let add = run(&["add", "-A"])?;
    if !add.status.success() {
        return Err(format!(
            "`git add -A` failed in the job's worktree {}: {}",
            worktree.display(),
            String::from_utf8_lossy(&add.stderr).trim()
        ));
    }
    let message = format!("conductor queue: job {key}");
    let mut args = identity(worktree);
    args.extend(["commit", "-q", "--no-verify", "-m", &message]);
    let c = run(&args)?;
    if !c.status.success() {
        return Err(format!(
            "could not commit the job's changes in its worktree {}: {}",
            worktree.display(),
            String::from_utf8_lossy(&c.stderr).trim()
        ));
    }
    Ok(true)
}
