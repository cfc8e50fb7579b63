//! The library's error type. Agents branch on [`Error::reason`], a stable snake_case string;
//! people read the message and the hint. Every variant maps to a documented exit code. The
//! store's errors ([`crate::store::Error`]) convert into [`Error::Store`] and keep their reason.

use std::path::Path;

pub use crate::store::error::{INTERNAL_EXIT, INTERNAL_HINT};

/// Everything that can make a conductor command fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed or refused: a lock, a file, the shared store.
    #[error(transparent)]
    Store(#[from] crate::store::Error),

    /// Refused before anything was changed (exit 2), or an operation that could not run
    /// (exit 1): the [`Reason`] says which.
    #[error("{message}")]
    Invalid {
        reason: Reason,
        message: String,
        /// What to do about it, when the message alone does not say.
        hint: Option<String>,
    },

    /// No live instance has this id.
    #[error("no instance `{0}` (it may have finished or been cleaned up after missing heartbeats)")]
    UnknownInstance(String),

    /// The command needs an instance and could not tell which one was meant.
    #[error("{message}")]
    AmbiguousInstance { message: String },

    /// conductor broke one of its own rules: a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// An error with a stable reason (its exit code is the reason's).
    pub fn invalid(reason: Reason, message: impl Into<String>) -> Self {
        Error::Invalid {
            reason,
            message: message.into(),
            hint: None,
        }
    }

    /// The same error with a hint (shown as `hint: ...` under the message).
    pub fn with_hint(self, h: impl Into<String>) -> Self {
        match self {
            Error::Invalid {
                reason, message, ..
            } => Error::Invalid {
                reason,
                message,
                hint: Some(h.into()),
            },
            other => other,
        }
    }

    /// An I/O error attached to the path it happened on.
    pub fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Error::Store(crate::store::Error::io(action, path, source))
    }

    /// A file that exists but cannot be trusted (`corrupt_state`); it is never overwritten.
    pub fn corrupt(path: &Path, detail: impl Into<String>) -> Self {
        Error::Store(crate::store::corrupt(path, detail))
    }

    /// The stable machine-readable reason for `--json` output.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Store(e) => e.reason(),
            Error::Invalid { reason, .. } => reason.as_str(),
            Error::UnknownInstance(_) => "unknown_instance",
            Error::AmbiguousInstance { .. } => "ambiguous_instance",
            Error::Internal(_) => "internal",
        }
    }

    /// What to do next, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Store(e) => e
                .hint()
                .or_else(|| crate::error_hints::store_hint(e.reason()).map(str::to_string)),
            Error::UnknownInstance(_) => {
                Some("run `conductor status` to list live instances".into())
            }
            Error::Internal(_) => Some(INTERNAL_HINT.into()),
            Error::Invalid { hint, reason, .. } => hint
                .clone()
                .or_else(|| Some(crate::error_hints::default_hint(*reason).into())),
            Error::AmbiguousInstance { .. } => Some(
                "pass --instance ID (or export CONDUCTOR_INSTANCE_ID); `conductor status` lists them"
                    .into(),
            ),
        }
    }

    /// The process exit code: 1 operational failure, 2 invalid input or usage, 11 the shared
    /// store is unavailable, 70 a bug.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Store(e) => e.exit_code(),
            Error::Invalid { reason, .. } => reason.exit_code(),
            Error::UnknownInstance(_) | Error::AmbiguousInstance { .. } => 2,
            Error::Internal(_) => INTERNAL_EXIT,
        }
    }

    /// True when stdout was closed under us (`conductor history | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_broken_pipe())
    }
}

/// Attach a path and an action to an `io::Result` at the call site.
pub trait IoContext<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, Error> {
        self.map_err(|e| Error::io(action, path, e))
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request was refused or an operation could not run: the stable `reason` of the JSON
/// error envelope, which agents branch on. The one closed list; `tests/it/reasons.rs` keeps the
/// exit-code table of docs/exit-codes.md in agreement with it.
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, exit $code:literal;)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            /// Every reason.
            pub const ALL: &[Reason] = &[$(Reason::$variant),*];

            /// The reason as printed (`snake_case`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $name,)*
                }
            }

            /// The exit code: 2 for input refused before anything changed, 1 for an operation
            /// that could not run.
            pub fn exit_code(self) -> u8 {
                match self {
                    $(Reason::$variant => $code,)*
                }
            }
        }
    };
}

reasons! {
    /// The input breaks a rule (schema violations name the field and the rule).
    InvalidInput = "invalid_input", exit 2;
    /// `op`: an operation this build does not know.
    UnknownOperation = "unknown_operation", exit 2;
    /// Not an instance id (`{source}-{6 hex}`).
    InvalidInstanceId = "invalid_instance_id", exit 2;
    /// A path that cannot be claimed (empty, too long, not UTF-8).
    InvalidPath = "invalid_path", exit 2;
    /// A relative path that leaves the instance's project.
    PathOutsideProject = "path_outside_project", exit 2;
    /// A working directory that does not exist or is not a directory.
    InvalidDirectory = "invalid_directory", exit 2;
    /// Releasing a file the instance does not hold (without `--force`).
    NotHeld = "not_held", exit 2;
    /// `done` of an instance that already finished (nothing was changed).
    AlreadyFinished = "already_finished", exit 2;
    /// `done` (the MCP tool) with an outcome other than success, abandoned or conflict
    /// (`orphaned` is recorded by cleanup only).
    InvalidOutcome = "invalid_outcome", exit 2;
    /// A claim on `/`, which would hold everything.
    ClaimTooWide = "claim_too_wide", exit 2;
    /// A glob conductor cannot honour.
    InvalidGlob = "invalid_glob", exit 2;
    /// No home directory can be found (`HOME` unset and no `--home`).
    NoHome = "no_home", exit 2;
    /// `integrate`: the agent's settings file is not JSON conductor can edit.
    UnparseableSettings = "unparseable_settings", exit 2;
    /// A file conductor would create already exists (never overwritten).
    FileExists = "file_exists", exit 2;
    /// Agents: no agent of that name.
    UnknownAgent = "unknown_agent", exit 2;
    /// Agents: no channel of that id.
    UnknownChannel = "unknown_channel", exit 2;
    /// Agents: no inbox item of that id.
    UnknownItem = "unknown_item", exit 2;
    /// Agents: no mention of that id.
    UnknownMention = "unknown_mention", exit 2;
    /// Agents: no message of that id.
    MessageNotFound = "message_not_found", exit 2;
    /// Agents: editing a message somebody else wrote.
    NotAuthor = "not_author", exit 2;
    /// Agents: an inbox item that is already finished.
    NotActionable = "not_actionable", exit 2;
    /// Agents: a live claim on the item is held by someone else.
    ClaimHeld = "claim_held", exit 2;
    /// Agents: acting on a claim one does not hold.
    NotHolder = "not_holder", exit 2;
    /// Agents: completing an item needs a completion reference.
    CompletionRefRequired = "completion_ref_required", exit 2;
    /// Agents: a claim TTL outside 15 to 1800 seconds.
    InvalidTtl = "invalid_ttl", exit 2;
    /// Agents: a post larger than the limit.
    PostTooLarge = "post_too_large", exit 2;
    /// Agents: an artifact that breaks Canopy's grammar.
    InvalidArtifact = "invalid_artifact", exit 2;
    /// Agents: an API key that does not exist.
    UnknownKey = "unknown_key", exit 2;
    /// `serve`: a non-loopback address without `--allow-remote` and a key.
    RemoteRefused = "remote_refused", exit 2;
    /// `serve`: the address cannot be listened on.
    ListenFailed = "listen_failed", exit 1;
    /// Workflows: no session of that id.
    UnknownSession = "unknown_session", exit 2;
    /// Workflows: a prefix that matches several sessions.
    AmbiguousSession = "ambiguous_session", exit 2;
    /// Workflows: no template of that name.
    UnknownTemplate = "unknown_template", exit 2;
    /// Workflows: a template that breaks the rules of templates.
    InvalidTemplate = "invalid_template", exit 2;
    /// Workflows: a transition the current state does not allow.
    InvalidTransition = "invalid_transition", exit 2;
    /// Workflows: an operation the session's status does not allow.
    InvalidWorkflowOperation = "invalid_workflow_operation", exit 2;
    /// Workflows: a persona file that cannot be used.
    InvalidPersona = "invalid_persona", exit 2;
    /// Workflows: a damage-control rules file with a bad pattern (the rule is named).
    InvalidRules = "invalid_rules", exit 2;
    /// Agents: a completion reference (`inbox complete --ref`) that is not `KEY=VALUE`.
    InvalidRef = "invalid_ref", exit 2;
    /// Workflows: another supervisor runs the session.
    AlreadySupervised = "already_supervised", exit 2;
    /// Queue: a manifest that breaks the rules of manifests.
    InvalidManifest = "invalid_manifest", exit 2;
    /// Queue: a job id used twice.
    DuplicateJob = "duplicate_job", exit 2;
    /// Queue: a doc collection that does not exist.
    UnknownDocs = "unknown_docs", exit 2;
    /// Queue: no job of that id.
    UnknownJob = "unknown_job", exit 2;
    /// Queue: a prefix that matches several jobs.
    AmbiguousJob = "ambiguous_job", exit 2;
    /// Queue: no workspace of that id.
    UnknownWorkspace = "unknown_workspace", exit 2;
    /// Queue: retrying a job that did not fail.
    NotRetryable = "not_retryable", exit 2;
    /// Queue: a runner template conductor cannot use.
    InvalidRunner = "invalid_runner", exit 2;
    /// Queue: a secrets file others can read or that is not a regular file.
    UnsafeSecretsFile = "unsafe_secrets_file", exit 2;
    /// Queue: a secrets file that is not `NAME=value` lines.
    InvalidSecretsFile = "invalid_secrets_file", exit 2;
    /// Queue: a secret named like a variable conductor or the runner sets or depends on.
    ReservedSecretName = "reserved_secret_name", exit 2;
    /// Queue: the planner did not produce a manifest.
    PlannerFailed = "planner_failed", exit 1;
    /// `mcp`: a tool that acts for the session, which has no instance yet.
    NoInstance = "no_instance", exit 2;
    /// `mcp`: the MCP connection failed.
    McpFailed = "mcp_failed", exit 1;
    /// A program could not be started (the message names it and why).
    SpawnFailed = "spawn_failed", exit 1;
    /// `overlaps`: git could not be run, or failed.
    GitFailed = "git_failed", exit 1;
}
