//! What a manifest may not ask for (issue 21): secrets named like a variable that conductor or
//! the runner sets or depends on, and an agent or model that an agent's command line would read
//! as an option. Checked at submit time (and by `plan`), so nothing is written; the launch
//! skips a reserved name all the same (a job could have been written by an older version).

use crate::error::Reason;
use crate::error::{Error, Result};

/// Exact names a secret may not have: set by conductor or the sandbox for every job, or read by
/// the shell and the dynamic loader before the agent runs.
const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "PWD",
    "OLDPWD",
    "LANG",
    "LANGUAGE",
    "TERM",
    "IFS",
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "CDPATH",
    "NO_COLOR",
];

/// Prefixes a secret's name may not start with: conductor's own (`CONDUCTOR_QUEUE_RUN` is how a
/// restarted dispatcher finds a job's processes), the dynamic loader's, bubblewrap's, the locale.
const RESERVED_PREFIXES: &[&str] = &["CONDUCTOR_", "LD_", "DYLD_", "BWRAP", "LC_"];

/// True for a name no secret may have.
pub fn reserved(name: &str) -> bool {
    RESERVED.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The reserved names, as an error message lists them.
fn listed() -> String {
    let mut v: Vec<String> = RESERVED.iter().map(|s| s.to_string()).collect();
    v.extend(RESERVED_PREFIXES.iter().map(|p| format!("{p}*")));
    v.join(", ")
}

/// What the guard looks at in one job of a manifest.
pub struct JobAsks<'a> {
    pub id: &'a str,
    pub secrets: &'a [String],
    pub agent: &'a String,
    pub model: Option<&'a String>,
    pub workdir: &'a str,
}

/// Refuse a manifest's jobs with a reserved secret name (`reserved_secret_name`), or an agent or
/// model that starts with `-` (`invalid_manifest`).
pub fn check<'a>(jobs: impl IntoIterator<Item = JobAsks<'a>>) -> Result<()> {
    for j in jobs {
        if let Some(name) = j.secrets.iter().find(|n| reserved(n)) {
            return Err(Error::invalid(
                Reason::ReservedSecretName,
                format!(
                    "job `{}` asks for secret `{name}`, a variable that conductor or the runner sets or depends on; store it under another name (reserved: {})",
                    j.id,
                    listed()
                ),
            ));
        }
        for (what, v) in [("agent", Some(j.agent)), ("model", j.model)] {
            if let Some(v) = v
                && v.starts_with('-')
            {
                return Err(Error::invalid(
                    Reason::InvalidManifest,
                    format!(
                        "job `{}`: {what} `{}` starts with `-`, which the agent's command line would read as an option",
                        j.id,
                        crate::text::printable_max(v, 60)
                    ),
                ));
            }
        }
        if let Some(why) = bad_workdir(j.workdir) {
            return Err(Error::invalid(
                Reason::InvalidManifest,
                format!(
                    "job `{}`: workdir `{}` {why}",
                    j.id,
                    crate::text::printable_max(j.workdir, 60)
                ),
            ));
        }
    }
    Ok(())
}

/// Where a sandboxed job's workspace may not be mounted: a path that is not normalized (`..`,
/// `.`, `//`, a trailing `/`), the root, or over what the sandbox itself provides.
fn bad_workdir(w: &str) -> Option<&'static str> {
    let normal = w.starts_with('/')
        && w.len() > 1
        && !w.ends_with('/')
        && w[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if !normal {
        return Some("must be a normalized absolute path other than `/` (no `.`, `..` or `//`)");
    }
    const SYSTEM: &[&str] = &[
        "/usr",
        "/etc",
        "/proc",
        "/dev",
        "/tmp",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/run/conductor",
    ];
    let under =
        |p: &str| w == p || w.starts_with(&format!("{p}/")) || p.starts_with(&format!("{w}/"));
    SYSTEM
        .iter()
        .any(|p| under(p))
        .then_some("would cover a path the sandbox provides (/usr, /etc, /proc, /dev, /tmp, /bin, /lib*, /run/conductor)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names() {
        for n in [
            "PATH",
            "HOME",
            "CONDUCTOR_QUEUE_RUN",
            "LD_PRELOAD",
            "BWRAP_X",
            "LC_ALL",
        ] {
            assert!(reserved(n), "{n}");
        }
        for n in ["DD_API_KEY", "PATHS", "MY_HOME", "SLACK_TOKEN"] {
            assert!(!reserved(n), "{n}");
        }
    }

    #[test]
    fn workdirs() {
        for w in ["/workspace", "/home/agent/src", "/srv/w"] {
            assert_eq!(bad_workdir(w), None, "{w}");
        }
        for w in [
            "/",
            "/usr",
            "/usr/local/x",
            "/workspace/../etc",
            "/a//b",
            "/a/",
            "/run",
            "/run/conductor/home",
            "/proc",
        ] {
            assert!(bad_workdir(w).is_some(), "{w}");
        }
    }
}
