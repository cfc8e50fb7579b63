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

    /// conductor broke one of its own rules: a bug.
    #[error("internal error: {0}")]
    Internal(String),
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
            Error::Invalid { reason, .. } => reason,
            Error::UnknownInstance(_) => "unknown_instance",
            Error::AmbiguousInstance { .. } => "ambiguous_instance",
            Error::Internal(_) => "internal",
        }
    }

    /// What to do next, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Store(e) => e.hint(),
            Error::UnknownInstance(_) => {
                Some("run `conductor status` to list live instances".into())
            }
            Error::Internal(_) => Some(INTERNAL_HINT.into()),
            _ => None,
        }
    }

    /// The process exit code: 1 operational failure, 2 invalid input or usage, 11 the shared
    /// store is unavailable, 70 a bug.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Store(e) => e.exit_code(),
            Error::Invalid { .. } | Error::UnknownInstance(_) | Error::AmbiguousInstance { .. } => {
                2
            }
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
