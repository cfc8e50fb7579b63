//! How a dispatcher runs ([`Options`]): what `queue run` and `queue retry` ask of it, read by the
//! main loop, the committer and the launcher alike.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::exec::Runner;
use crate::error::{Error, Reason, Result};

/// How to dispatch.
#[derive(Clone, Debug)]
pub struct Options {
    pub parallel: usize,
    pub runner: Runner,
    pub agent_cmd: String,
    pub follow: bool,
    pub secrets_file: Option<PathBuf>,
    /// Redraw once a second (a terminal is watching).
    pub tick: bool,
    /// Start only these jobs (`WORKSPACE/JOB` keys; `queue retry`): the rest are left for
    /// another dispatcher.
    pub only: Option<BTreeSet<String>>,
    /// Sandbox: keep each job's private HOME after it ends (`--keep-home`, for debugging).
    /// Without it the HOME is removed when the job ends: agents record what they saw there,
    /// secrets included.
    pub keep_home: bool,
    /// On a shared store, the time to live of the dispatcher's lease (`queue_lease_seconds`,
    /// `CONDUCTOR_QUEUE_LEASE`; default [`DEFAULT_LEASE`]): how long after its death (or its
    /// loss of the cluster) another host may take over its jobs.
    pub lease: Duration,
}

/// The dispatcher's lease time to live when nothing sets one.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Parse `--runner`.
pub fn parse_runner(s: &str, ro: Vec<PathBuf>, pass_env: Vec<String>) -> Result<Runner> {
    match s {
        "local" => Ok(Runner::Local),
        "sandbox" => Ok(Runner::Sandbox {
            read_only: ro,
            pass_env,
        }),
        t if t.contains("{cmd}") => Ok(Runner::Template(t.to_string())),
        other => Err(Error::invalid(
            Reason::InvalidRunner,
            format!(
                "--runner `{other}` is not `local`, `sandbox`, or a template containing {{cmd}} (like 'ssh host -- {{cmd}}')"
            ),
        )),
    }
}

/// The dispatcher's lease time to live on a shared store: `CONDUCTOR_QUEUE_LEASE` (whole
/// seconds), else config.json's `queue_lease_seconds`, else 30 s.
pub fn lease_ttl(store: &crate::store::Store) -> Result<Duration> {
    if let Ok(v) = std::env::var("CONDUCTOR_QUEUE_LEASE")
        && !v.is_empty()
    {
        return match v.parse::<u64>() {
            Ok(s @ 1..=3600) => Ok(Duration::from_secs(s)),
            _ => Err(Error::invalid(
                Reason::InvalidInput,
                format!(
                    "CONDUCTOR_QUEUE_LEASE=`{v}` is not a whole number of seconds from 1 to 3600"
                ),
            )),
        };
    }
    Ok(crate::config::read(store)?
        .queue_lease_seconds
        .map_or(DEFAULT_LEASE, Duration::from_secs))
}
