//! How a dispatcher runs ([`Options`]): what `queue run` and `queue retry` ask of it, read by the
//! main loop, the committer and the launcher alike.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::exec::Runner;

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
