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

    /// For a shared store that did not answer (`store_unavailable`): whether the change may
    /// have been applied (`true`: look before repeating it) or certainly was not (`false`).
    /// `None` for every other error.
    pub fn maybe_applied(&self) -> Option<bool> {
        match self {
            Error::Store(crate::store::Error::StoreUnavailable { maybe_applied, .. }) => {
                Some(*maybe_applied)
            }
            _ => None,
        }
    }

    /// What to do next, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Store(e) => e
                .hint()
                .or_else(|| store_hint(e.reason()).map(str::to_string)),
            Error::UnknownInstance(_) => {
                Some("run `conductor status` to list live instances".into())
            }
            Error::Internal(_) => Some(INTERNAL_HINT.into()),
            Error::Invalid { hint, reason, .. } => hint
                .clone()
                .or_else(|| Some(default_hint(*reason).into())),
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
    /// `overlaps`, `start --worktree`: git could not be run, or failed.
    GitFailed = "git_failed", exit 1;
    /// `start --worktree` outside a git repository.
    NotARepository = "not_a_repository", exit 2;
    /// `start --worktree` in a bare repository (no checkout to branch from).
    BareRepository = "bare_repository", exit 2;
    /// `start --worktree` in a repository with no commit yet.
    NoCommits = "no_commits", exit 2;
    /// `start --worktree NAME`: the branch NAME exists already.
    BranchExists = "branch_exists", exit 2;
    /// `enforce = "require-verified"`: the session's agent failed its live check for this
    /// version here (its hooks are proven not to bite), so it may not claim.
    UnenforcedSession = "unenforced_session", exit 4;
    /// Queue: a dispatcher on a shared store lost its lease (it could not keep it alive for
    /// its time to live): its jobs were stopped, and their records say why.
    LeaseLost = "lease_lost", exit 11;
}

// ---- The next step for each reason, shown as `hint: …` under an error whose call site gave
// none: every error a person sees says what to do about it.

/// What to do after an error with this reason, when the call site said nothing more precise.
pub fn default_hint(r: Reason) -> &'static str {
    match r {
        Reason::InvalidInput => {
            "fix the value the message names (the field and the rule it breaks), then repeat"
        }
        Reason::UnknownOperation => "`conductor op --help` lists the operations this build knows",
        Reason::InvalidInstanceId => "`conductor status` lists the live instances and their ids",
        Reason::InvalidPath => {
            "name a file (src/a.rs), a directory (src/) or a quoted glob ('src/**/*.rs')"
        }
        Reason::PathOutsideProject => {
            "give the path inside the instance's project, or an absolute path"
        }
        Reason::InvalidDirectory => {
            "pass an existing directory (--dir), or run the command from inside one"
        }
        Reason::NotHeld => {
            "`conductor status` shows who holds what; `release --force` releases it anyway"
        }
        Reason::AlreadyFinished => {
            "nothing to do: the session already ended; `conductor history` shows it"
        }
        Reason::InvalidOutcome => {
            "`conductor done --help` lists the outcomes a session can end with"
        }
        Reason::ClaimTooWide => {
            "claim the directories you will edit (src/, docs/) rather than everything"
        }
        Reason::InvalidGlob => "quote the glob so the shell leaves it alone: 'src/**/*.rs'",
        Reason::NoHome => "set HOME, or pass --home DIR (or CONDUCTOR_HOME)",
        Reason::UnparseableSettings => {
            "fix or move the settings file, then run `conductor integrate` again; it is never overwritten"
        }
        Reason::FileExists => {
            "move the existing file away (conductor never overwrites it), then run the command again"
        }
        Reason::UnknownAgent => {
            "`conductor agent list` shows the registered agents; `conductor agent register NAME` adds one"
        }
        Reason::UnknownChannel => {
            "`conductor messages CHANNEL` reads a channel once someone posted to it"
        }
        Reason::UnknownItem => "`conductor inbox` lists the actionable items and their ids",
        Reason::UnknownMention => {
            "`conductor mentions` lists the unacknowledged mentions and their ids"
        }
        Reason::MessageNotFound => "`conductor messages CHANNEL` lists the messages and their ids",
        Reason::NotAuthor => "post a new message instead, or edit with --as the author",
        Reason::NotActionable => "`conductor inbox` lists the items still pending or seen",
        Reason::ClaimHeld => "wait for the holder's claim to expire, or work on another item",
        Reason::NotHolder => "`conductor inbox --agent NAME` shows who holds each item",
        Reason::CompletionRefRequired => "pass --ref KEY=VALUE, like --ref post_id=msg-000012",
        Reason::InvalidTtl => "pick a --ttl between 15 and 1800 seconds",
        Reason::PostTooLarge => {
            "shorten the post, or put the long text in a file and post its path"
        }
        Reason::InvalidArtifact => {
            "`conductor artifact validate FILE` lists every problem of the blocks"
        }
        Reason::UnknownKey => "`conductor agent key list` shows the API keys",
        Reason::RemoteRefused => "serve on 127.0.0.1, or pass --allow-remote with an API key",
        Reason::ListenFailed => "pick another --listen address (port 0 picks a free one)",
        Reason::UnknownSession => "`conductor workflow list` shows the sessions and their ids",
        Reason::AmbiguousSession => "give more of the session id",
        Reason::UnknownTemplate => "`conductor workflow templates` lists the templates it can find",
        Reason::InvalidTemplate => {
            "`conductor workflow validate TEMPLATE` lists every problem with its JSON path"
        }
        Reason::InvalidTransition => {
            "`conductor workflow show SESSION` shows the current state and where it may go next"
        }
        Reason::InvalidWorkflowOperation => {
            "`conductor workflow show SESSION` shows the session's status"
        }
        Reason::InvalidPersona => {
            "fix the persona file named in the message, or name another persona"
        }
        Reason::InvalidRules => "fix the rule named in the message; the rules file is YAML",
        Reason::InvalidRef => "a reference is KEY=VALUE, like --ref post_id=msg-000012",
        Reason::AlreadySupervised => "let the running supervisor finish, or stop it first",
        Reason::InvalidManifest => "`conductor queue submit --help` shows the manifest's rules",
        Reason::DuplicateJob => "give each job its own id",
        Reason::UnknownDocs => "`ls ~/.docpull` shows the doc collections that exist",
        Reason::UnknownJob => "`conductor queue jobs` lists the jobs and their ids",
        Reason::AmbiguousJob => "give WORKSPACE/JOB, or more of the job id",
        Reason::UnknownWorkspace => "`conductor queue jobs --all` lists the workspaces",
        Reason::NotRetryable => {
            "only failed, timed-out or cancelled jobs are retried; `conductor queue show JOB` shows its state"
        }
        Reason::InvalidRunner => "use --runner local, sandbox, or a template containing {cmd}",
        Reason::UnsafeSecretsFile => "chmod 600 the secrets file (a regular file, not a link)",
        Reason::InvalidSecretsFile => "write one NAME=value per line (# comments allowed)",
        Reason::ReservedSecretName => {
            "rename the secret: conductor and the runner set that variable"
        }
        Reason::PlannerFailed => {
            "the planner's output is in the message; run it again or write the manifest yourself"
        }
        Reason::NoInstance => "call the `start` tool first: it registers this session's instance",
        Reason::McpFailed => {
            "check that the MCP client speaks to conductor over stdio (`conductor mcp --help`)"
        }
        Reason::SpawnFailed => {
            "check that the program exists and is executable (`command -v NAME`)"
        }
        Reason::GitFailed => "run the command from inside a git repository, with git 2.38 or newer",
        Reason::NotARepository => {
            "run the command inside a checkout of the repository, or leave out --worktree"
        }
        Reason::BareRepository => "run the command in one of the repository's worktrees",
        Reason::NoCommits => "make the first commit (`git commit --allow-empty -m init`)",
        Reason::BranchExists => "choose another name: --worktree NAME",
        Reason::UnenforcedSession => {
            "`conductor integrate AGENT` checks the agent's hooks again; or set `enforce` in config.json to auto-claim"
        }
        Reason::LeaseLost => {
            "start `conductor queue run` again; its stopped jobs run again (`conductor doctor` shows the cluster's members)"
        }
    }
}

/// The next step after a store error whose own hint said nothing, by its reason.
pub fn store_hint(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "io" => "the message names the file and what failed; `conductor doctor` checks the home",
        "unsafe_home" => "`conductor doctor` explains; the home must be yours and private (0700)",
        "cursor_expired" => {
            "the events before it were rotated away: read from the oldest kept (`conductor events --oldest`)"
        }
        "invalid_input" => "`conductor COMMAND --help` shows what is accepted",
        "invalid_store" => "a store URL is etcd://HOST:PORT[,HOST:PORT...][/PREFIX]",
        "store_refused" => {
            "nothing was changed: split the command into smaller ones (etcd bounds one request)"
        }
        "no_home" => "set HOME, or pass --home DIR (or CONDUCTOR_HOME)",
        "no_working_directory" => "cd into a directory that exists",
        "target_not_empty" => "import into an empty home (--home DIR) or an unused store prefix",
        _ => return None,
    })
}
