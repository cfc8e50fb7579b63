//! The agent job queue (`conductor queue ...`): planned jobs with dependencies, per-job docs and
//! secrets, shared workspaces, dispatched the moment their last dependency completes.
//!
//! Where things live (all under the conductor home, private modes):
//! - `queue.json` ([`QueueDoc`], guarded by `queue.lock`): the live jobs and the workspaces.
//!   Every change is a store transaction, so each state change is durable and appears in the one
//!   event journal as a `queue.*` event (`queue.job.submitted|started|completed|failed|timed_out|
//!   blocked|cancelled|retried|interrupted`).
//! - `queue-changes.jsonl` ([`changes`]): the dispatcher records its state changes there, one
//!   appended line per commit, and folds them into `queue.json` now and then; every reader of
//!   `queue.json` reads both.
//! - `queue-finished.jsonl` ([`JOBS_DONE`]): when every job of a workspace is completed or
//!   cancelled, the transaction that finishes the last one moves them all here, one JSON job per
//!   line, so `queue.json` only ever holds work that can still change. `jobs`, `show` and
//!   `results` read both.
//! - `workspaces/<id>/` with `docs/<collection>/` (read-only copies made at submit time),
//!   `output/<job>/` (RESULT.md and artifacts) and `shared/`.
//! - `queue-prompts/<workspace>/<job>.md`: the augmented prompt the job was started with,
//!   outside the workspace so that no job can change it or turn it into a link.
//! - `queue-logs/<workspace>/<job>.log`: the agent's stdout and stderr, outside the workspace so
//!   sandboxed jobs cannot read each other's logs.
//! - `queue-homes/<workspace>/<job>/`: a sandboxed job's private HOME (see [`sandbox`]).
//!
//! Secrets are environment-variable *names* in the job; values are read at launch from the
//! dispatcher's environment or a 0600 secrets file and handed only to that job's process. No
//! value is ever written to a document, ledger, event, prompt, log line of ours or error.
//!
//! Layering: [`manifest`] (parsing and checking what is submitted), [`ops`] (pure state changes
//! with `now` passed in), [`docs`] (docpull collections), [`prompt`] (the augmented prompt),
//! [`exec`] (processes: spawning, process groups, environments, the runners), [`dispatch`]
//! (the dispatcher loop), `commit` (its committer thread) and `launch` (one job's files and
//! process, and the reaper).

pub mod agent_check;
pub mod agent_path;
pub mod archive;
pub mod changes;
pub mod checks;
mod commit;
pub mod dispatch;
pub mod docs;
pub mod exec;
pub mod guard;
pub mod index;
mod launch;
pub mod lookup;
pub mod manifest;
pub mod ops;
pub mod options;
pub mod plain;
pub mod plan;
pub mod prompt;
pub mod ran_with;
mod redact;
pub mod results;
pub mod sandbox;
pub mod service;
pub mod ship;
pub mod worktree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::store::{Document, LedgerFile, Lock};
use crate::time::Timestamp;

#[jsonschema::validator(path = "schemas/queue.schema.json")]
struct QueueSchema;

/// Check a `queue.json` value against `schemas/queue.schema.json` (the published contract; the
/// typed decoder is what reads it, this is for tests and tools). The error names where.
pub fn validate_doc(value: &serde_json::Value) -> std::result::Result<(), String> {
    match QueueSchema::iter_errors(value).next() {
        None => Ok(()),
        Some(e) => Err(format!("at {}: {e}", e.instance_path())),
    }
}

/// Check one `queue-finished.jsonl` line (a job) against the schema's `job` definition.
pub fn validate_job(value: &serde_json::Value) -> std::result::Result<(), String> {
    let doc = serde_json::json!({
        "version": "1.0", "updated_at": "2026-01-01T00:00:00Z", "workspaces": {}, "jobs": [value]
    });
    validate_doc(&doc)
}

/// Finished workspaces' jobs, one JSON [`Job`] per line.
pub const JOBS_DONE: LedgerFile = LedgerFile {
    name: "queue-finished.jsonl",
    lock: Lock::Queue,
};

/// The live queue document, `queue.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueDoc {
    /// Always "1.0".
    pub version: String,
    pub updated_at: Timestamp,
    /// Workspaces by id (kept after their jobs are archived: they are small).
    pub workspaces: BTreeMap<String, Workspace>,
    /// Live jobs, in submission order.
    pub jobs: Vec<Job>,
    /// `queue pause`: no dispatcher starts a job until `queue resume` (running ones finish).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The jobs by key (not part of the document; checked on every use, see [`index`]).
    #[serde(skip)]
    pub index: index::JobIndex,
}

/// A named directory that jobs share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    pub id: String,
    /// The directory in the home (`<home>/workspaces/<id>`).
    pub dir: String,
    /// The doc collections copied into `docs/`.
    pub docs_loaded: Vec<String>,
    pub created_at: Timestamp,
}

/// One job: what an agent should do, what it needs, and where it stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub id: String,
    pub workspace: String,
    pub prompt: String,
    pub docs: Vec<String>,
    /// Environment-variable names; never values.
    pub secrets: Vec<String>,
    /// Where the workspace appears to a sandboxed agent ("/workspace").
    pub workdir: String,
    pub depends_on: Vec<String>,
    pub outcomes: Vec<String>,
    pub timeout_minutes: f64,
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub submitted_at: Timestamp,
    pub state: JobStatus,
    /// How it was last started (`queue retry` starts it the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_with: Option<ran_with::RanWith>,
    /// Among ready jobs, a higher one starts first (P0 highest; omitted: P2).
    #[serde(default, skip_serializing_if = "JobPriority::is_default")]
    pub priority: JobPriority,
    /// `queue pause JOB`: not started until `queue resume JOB`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The main checkout of the repository the job runs in a worktree of (see [`worktree`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The job's branch (its worktree's), with `repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Where a new branch starts: the first dependency of the same repository's branch, else
    /// the manifest's `base`; omitted: the integration branch, else `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The branches of its other dependencies of the same repository, merged into a new branch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge: Vec<String>,
}

/// A job's priority among the ready ones (`P0` first, `P2` by default).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum JobPriority {
    P0,
    P1,
    #[default]
    P2,
    P3,
}

impl JobPriority {
    /// The default (omitted from the files).
    pub fn is_default(&self) -> bool {
        *self == JobPriority::P2
    }
}

impl std::str::FromStr for JobPriority {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "P0" => Ok(JobPriority::P0),
            "P1" => Ok(JobPriority::P1),
            "P2" => Ok(JobPriority::P2),
            "P3" => Ok(JobPriority::P3),
            _ => Err(format!("`{s}` is not a priority (P0, P1, P2 or P3)")),
        }
    }
}

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting for dependencies.
    Queued,
    /// Its dependencies completed; waiting for a free slot.
    Ready,
    Running,
    Completed,
    /// The agent exited non-zero (or could not be started).
    Failed,
    TimedOut,
    /// Cannot run: a dependency failed, or a secret is missing (see `reason`).
    Blocked,
    Cancelled,
}

impl State {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Ready => "ready",
            State::Running => "running",
            State::Completed => "completed",
            State::Failed => "failed",
            State::TimedOut => "timed_out",
            State::Blocked => "blocked",
            State::Cancelled => "cancelled",
        }
    }

    /// Failed, timed out or blocked: needs a `retry` (or a fix) to go on.
    pub fn is_stuck(self) -> bool {
        matches!(self, State::Failed | State::TimedOut | State::Blocked)
    }

    /// Completed or cancelled: nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Cancelled)
    }
}

/// A job's state object, as `queue.json` and `--json` show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobStatus {
    pub state: State,
    /// When it entered this state.
    pub since: Timestamp,
    /// How many times it was started.
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The agent's (or sandbox's) process id, also its process group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The dispatcher running it (`<pid>:<start time>`), which is also put in the job's
    /// environment as `CONDUCTOR_QUEUE_RUN` so a restarted dispatcher can find leftovers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatcher: Option<String>,
    /// The runner it was started with (`local`, `sandbox`, `template`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// Why it failed, was blocked, cancelled or interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The dependency whose failure blocks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    /// The RESULT.md path, when the job wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Tokens its last attempt used, as the agent printed them (see [`crate::usage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// What its last attempt cost in US dollars, as the agent printed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl JobStatus {
    /// A fresh state.
    pub fn new(state: State, now: Timestamp) -> JobStatus {
        JobStatus {
            state,
            since: now,
            attempts: 0,
            started_at: None,
            finished_at: None,
            exit_code: None,
            pid: None,
            dispatcher: None,
            runner: None,
            reason: None,
            blocked_by: None,
            result: None,
            tokens: None,
            cost_usd: None,
        }
    }
}

impl Job {
    /// `workspace/id`, unique among live jobs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.workspace, self.id)
    }
}

impl Document for QueueDoc {
    const FILE: &'static str = "queue.json";
    const LOCK: Lock = Lock::Queue;

    fn empty(now: Timestamp) -> Self {
        QueueDoc {
            version: "1.0".into(),
            updated_at: now,
            workspaces: BTreeMap::new(),
            jobs: Vec::new(),
            paused: false,
            index: index::JobIndex::default(),
        }
    }

    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        // `queue.json` plus the dispatcher's change log beside it (see [`changes`]).
        changes::decode_folded(path, bytes, |bytes| decode_base(path, bytes))
    }

    fn encode(&self) -> Vec<u8> {
        // Compact: a big queue is read often.
        let mut v = serde_json::to_vec(self).expect("queue serializes");
        v.push(b'\n');
        v
    }
}

/// `queue.json`'s bytes alone, without the change log.
fn decode_base(path: &Path, bytes: &[u8]) -> crate::store::Result<QueueDoc> {
    let mut doc: QueueDoc = serde_json::from_slice(bytes)
        .map_err(|e| crate::store::corrupt(path, format!("not a queue document ({e})")))?;
    // The parser grows the list by doubling: up to 1.6x the jobs' room (6 MB at 10,000 jobs),
    // held as long as the queue is (a dispatcher holds it for its whole run).
    doc.jobs.shrink_to_fit();
    if doc.version != "1.0" {
        return Err(crate::store::corrupt(
            path,
            format!("unsupported queue version {:?}", doc.version),
        ));
    }
    Ok(doc)
}

/// Where a sandboxed job finds its prompt file (bound read-only from [`Layout::prompt`]).
pub const SANDBOX_PROMPT: &str = "/run/conductor/prompt.md";

/// Paths of the queue's directories in the home.
#[derive(Clone, Debug)]
pub struct Layout {
    pub home: PathBuf,
}

impl Layout {
    /// `<home>/workspaces/<ws>`, or `$CONDUCTOR_QUEUE_WORKSPACES/<ws>` when that names an
    /// absolute directory: with a shared store, a directory every host mounts at the same path,
    /// so that a dependent job on one host reads what its dependency wrote on another, and
    /// `queue results` reads them from any host (`queue submit` refuses a relative one).
    pub fn workspace(&self, ws: &str) -> PathBuf {
        match workspaces_root() {
            Ok(Some(root)) => root.join(ws),
            _ => self.home.join("workspaces").join(ws),
        }
    }
    /// `<home>/workspaces/<ws>/output/<job>`.
    pub fn output(&self, ws: &str, job: &str) -> PathBuf {
        self.workspace(ws).join("output").join(job)
    }
    /// `<home>/queue-prompts/<ws>/<job>.md`: outside the workspace, which jobs can change
    /// (a sandboxed job sees its own prompt read-only at [`SANDBOX_PROMPT`]).
    pub fn prompt(&self, ws: &str, job: &str) -> PathBuf {
        self.home
            .join("queue-prompts")
            .join(ws)
            .join(format!("{job}.md"))
    }

    /// The last `bytes` bytes of a job's log (lossy UTF-8), `None` when it cannot be read.
    pub fn log_tail(&self, ws: &str, job: &str, bytes: u64) -> Option<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(self.log(ws, job)).ok()?;
        let len = f.metadata().ok()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(bytes))).ok()?;
        let mut b = Vec::new();
        f.take(bytes).read_to_end(&mut b).ok()?;
        Some(String::from_utf8_lossy(&b).into_owned())
    }

    /// Read `rel` (say `output/a/RESULT.md`) in workspace `ws` as the job left it, never
    /// through a symbolic link and never outside the workspace: jobs write there, and a
    /// sandboxed one could otherwise point the dispatcher (which runs outside the sandbox) at
    /// any file of the user's. `None` when it is missing, not a regular file, or reached
    /// through a link.
    pub fn read_in_workspace(&self, ws: &str, rel: &str) -> Option<String> {
        use std::io::Read;
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::ffi::OsStrExt;
        let dir = std::fs::File::open(self.workspace(ws)).ok()?;
        let rel = std::ffi::CString::new(std::ffi::OsStr::new(rel).as_bytes()).ok()?;
        // SAFETY: open_how is plain data; all zero is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                rel.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            return None;
        }
        let mut f = unsafe { std::fs::File::from_raw_fd(fd as i32) };
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        f.read_to_string(&mut text).ok()?;
        Some(text)
    }
    /// `<home>/queue-homes/<ws>/<job>`: a sandboxed job's private HOME (0700), outside the
    /// shared workspace (an agent keeps its database and credentials there), kept like its log.
    pub fn job_home(&self, ws: &str, job: &str) -> PathBuf {
        self.home.join("queue-homes").join(ws).join(job)
    }
    /// `<home>/queue-logs/<ws>/<job>.log`.
    pub fn log(&self, ws: &str, job: &str) -> PathBuf {
        self.home
            .join("queue-logs")
            .join(ws)
            .join(format!("{job}.log"))
    }
}

/// `CONDUCTOR_QUEUE_WORKSPACES`, the directory that holds every workspace when set (absent or
/// empty: the home's `workspaces/`); refused unless absolute.
pub fn workspaces_root() -> Result<Option<PathBuf>> {
    match std::env::var_os("CONDUCTOR_QUEUE_WORKSPACES") {
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(&v);
            if p.is_absolute() {
                Ok(Some(p))
            } else {
                Err(crate::Error::invalid(
                    crate::error::Reason::InvalidInput,
                    format!(
                        "CONDUCTOR_QUEUE_WORKSPACES=`{}` is not an absolute path: every host must find a workspace at the same path",
                        p.display()
                    ),
                )
                .with_hint(
                    "set it to an absolute directory on a file system every host mounts at the same path (docs/queue.md, Several hosts)",
                ))
            }
        }
        _ => Ok(None),
    }
}

/// Create a directory (and parents) with mode 0700.
pub fn private_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| crate::Error::io("create directory", path, e))
}

/// Every job ever archived (`queue-finished.jsonl`), oldest first. Unparseable lines are skipped
/// (a torn last line after a crash is cut by the next append anyway).
pub fn archived(store: &crate::store::Store) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    store.read_ledger_file(JOBS_DONE, |_, line| {
        if let crate::store::ledger::Line::Complete(t) = line
            && let Ok(j) = serde_json::from_str::<Job>(&t)
        {
            jobs.push(j);
        }
        Ok::<_, crate::Error>(true)
    })?;
    Ok(jobs)
}
