//! The one error type of the library. Agents branch on [`Error::reason`], a stable snake_case
//! string; people read the message and the hint. Every variant maps to a documented exit code.

use std::path::{Path, PathBuf};

/// Everything that can make a conductor command fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another process held `status.lock` for longer than the timeout.
    #[error("timed out after {secs}s waiting for the lock `{}`{}", path.display(), holder_suffix(.holder))]
    LockTimeout {
        secs: f64,
        path: PathBuf,
        holder: Option<String>,
    },

    /// A file system call failed.
    #[error("could not {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A state file exists but cannot be trusted; it is never overwritten.
    #[error("`{}` is not valid conductor state: {detail}", path.display())]
    CorruptState { path: PathBuf, detail: String },

    /// The home directory is not safe to use (owned by someone else, not a directory, ...).
    #[error("refusing to use conductor home `{}`: {detail}", path.display())]
    UnsafeHome { path: PathBuf, detail: String },

    /// The input was rejected before anything was changed.
    #[error("{message}")]
    Invalid {
        reason: &'static str,
        message: String,
    },

    /// No live instance has this id.
    #[error("no instance `{0}` (it may have finished or been cleaned up after missing heartbeats)")]
    UnknownInstance(String),

    /// The command needs an instance and could not tell which one was meant.
    #[error("{message}")]
    AmbiguousInstance { message: String },

    /// The shared store (an etcd cluster) cannot serve requests: no member reachable, or no
    /// quorum. Nothing was changed.
    #[error("the store `{store}` is unavailable: {detail}")]
    StoreUnavailable {
        store: String,
        detail: String,
        /// A write went out and no answer said what became of it.
        maybe_applied: bool,
    },
}

fn holder_suffix(holder: &Option<String>) -> String {
    match holder {
        Some(h) => format!(" (held by {h})"),
        None => String::new(),
    }
}

impl Error {
    /// An invalid-input error (exit 2) with a stable reason.
    pub fn invalid(reason: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            reason,
            message: message.into(),
        }
    }

    /// An I/O error attached to the path it happened on.
    pub fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.to_path_buf(),
            source: without_path(source),
        }
    }

    /// The stable machine-readable reason for `--json` output.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::LockTimeout { .. } => "lock_timeout",
            Error::Io { .. } => "io",
            Error::CorruptState { .. } => "corrupt_state",
            Error::UnsafeHome { .. } => "unsafe_home",
            Error::Invalid { reason, .. } => reason,
            Error::UnknownInstance(_) => "unknown_instance",
            Error::AmbiguousInstance { .. } => "ambiguous_instance",
            Error::StoreUnavailable { .. } => "store_unavailable",
        }
    }

    /// What to do next, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::LockTimeout { .. } => Some(
                "another conductor process may be stuck; retry, or raise --lock-timeout / CONDUCTOR_LOCK_TIMEOUT".into(),
            ),
            Error::CorruptState { .. } => {
                Some("nothing was changed; run `conductor doctor` to see what is wrong".into())
            }
            Error::UnknownInstance(_) => {
                Some("run `conductor status` to list live instances".into())
            }
            Error::StoreUnavailable { maybe_applied: true, .. } => Some(
                "check with `conductor status` or `conductor events` whether it took effect before repeating it; `conductor doctor` shows each member".into(),
            ),
            Error::StoreUnavailable { .. } => Some(
                "nothing was changed; etcd needs a majority of its members up: `conductor doctor` shows each member".into(),
            ),
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Some("the conductor home must be writable; set CONDUCTOR_HOME or --home".into())
            }
            _ => None,
        }
    }

    /// The process exit code: 1 operational failure, 2 invalid input or usage, 11 the shared
    /// store is unavailable.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::StoreUnavailable { .. } => 11,
            Error::LockTimeout { .. }
            | Error::Io { .. }
            | Error::CorruptState { .. }
            | Error::UnsafeHome { .. } => 1,
            Error::Invalid { .. } | Error::UnknownInstance(_) | Error::AmbiguousInstance { .. } => {
                2
            }
        }
    }

    /// True when stdout was closed under us (`conductor history | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// The `tempfile` crate appends ` at path "..."` to its errors; the message names the path
/// already, once.
fn without_path(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error().is_some() || e.get_ref().is_none() {
        return e;
    }
    let text = e.to_string();
    match text.rfind(" at path \"") {
        Some(i) => std::io::Error::new(e.kind(), text[..i].to_string()),
        None => e,
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
