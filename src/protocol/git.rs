//! Running git, and reading what git keeps in plain files (loose refs, `packed-refs`), for
//! the parts of the protocol that look at repositories ([`super::overlaps`],
//! [`super::changes`], [`super::worktree_index`]).

use std::path::Path;
use std::process::Command;

use crate::error::{Error, Reason, Result};

/// Run git in `dir`; its stdout, or `None` when it exits non-zero.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<Option<Vec<u8>>> {
    git_env(dir, args, &[])
}

/// Run git in `dir` with the variables `env` set; its stdout, or `None` when it exits non-zero.
pub(crate) fn git_env(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<Option<Vec<u8>>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .envs(env.iter().copied())
        .output()
        .map_err(|e| {
            Error::invalid(
                Reason::GitFailed,
                format!("could not run git: {e}; overlaps needs git 2.38 or newer on PATH"),
            )
        })?;
    Ok(out.status.success().then_some(out.stdout))
}

/// Run git in `dir` with the variables `env` set and `input` on its standard input; its
/// stdout, or `None` when it exits non-zero (or could not be started).
pub(crate) fn git_input(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    input: &[u8],
) -> Option<Vec<u8>> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    // Written from a thread of its own, so that a full stdout pipe cannot stall both ends.
    let out = std::thread::scope(|s| {
        s.spawn(move || {
            let _ = stdin.write_all(input);
        });
        child.wait_with_output().ok()
    })?;
    out.status.success().then_some(out.stdout)
}

pub(crate) fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b)
        .trim_end_matches('\n')
        .to_string()
}

/// NUL-separated names.
pub(crate) fn names(b: &[u8]) -> impl Iterator<Item = String> + '_ {
    b.split(|c| *c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// What `value` (a commit id, or `ref: NAME`) resolves to: a loose ref in the worktree's git
/// directory or the common one, else `packed-refs`.
pub(crate) fn follow(gitdir: &Path, common: &Path, value: &str, depth: u8) -> Option<String> {
    let Some(name) = value.strip_prefix("ref:").map(str::trim) else {
        return (!value.is_empty()).then(|| value.to_string());
    };
    if depth > 4 {
        return None;
    }
    for dir in [gitdir, common] {
        if let Ok(v) = std::fs::read_to_string(dir.join(name)) {
            return follow(gitdir, common, v.trim(), depth + 1);
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (id, r) = l.split_once(' ')?;
        (r == name).then(|| id.to_string())
    })
}
