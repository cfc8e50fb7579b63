//! The store's errors: what can go wrong with the files of the home, the shared store, and the
//! machine. The library converts them into its own error at the boundary (`From`), keeping each
//! reason and exit code.

use std::path::{Path, PathBuf};

/// Why the store refused a request before changing anything (exit 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A journal cursor older than the oldest event kept.
    CursorExpired,
    /// A path or name that cannot be a file of the home.
    InvalidInput,
    /// A shared store URL that cannot be parsed.
    InvalidStore,
    /// etcd refused the request (too large for its limits).
    StoreRefused,
    /// No home directory can be found.
    NoHome,
    /// The current directory cannot be used.
    NoWorkingDirectory,
    /// An import into a home or prefix that already holds state.
    TargetNotEmpty,
    /// Plain `http://` to a member that is not on this machine, without `--insecure-store`.
    InsecureStore,
    /// The store's password file may be read by other users.
    UnsafeCredentials,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: &[Refusal] = &[
        Refusal::CursorExpired,
        Refusal::InvalidInput,
        Refusal::InvalidStore,
        Refusal::StoreRefused,
        Refusal::NoHome,
        Refusal::NoWorkingDirectory,
        Refusal::TargetNotEmpty,
        Refusal::InsecureStore,
        Refusal::UnsafeCredentials,
    ];

    /// The stable machine-readable reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::CursorExpired => "cursor_expired",
            Refusal::InvalidInput => "invalid_input",
            Refusal::InvalidStore => "invalid_store",
            Refusal::StoreRefused => "store_refused",
            Refusal::NoHome => "no_home",
            Refusal::NoWorkingDirectory => "no_working_directory",
            Refusal::TargetNotEmpty => "target_not_empty",
            Refusal::InsecureStore => "insecure_store",
            Refusal::UnsafeCredentials => "unsafe_credentials",
        }
    }
}

/// Everything that can make a store operation fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another process held a lock of the home for longer than the timeout.
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

    /// The request was refused before anything was changed.
    #[error("{message}")]
    Refused { reason: Refusal, message: String },

    /// The shared store (an etcd cluster) cannot serve requests: no member reachable, or no
    /// quorum. Nothing was changed.
    #[error("the store `{store}` is unavailable: {detail}")]
    StoreUnavailable {
        store: String,
        detail: String,
        /// A write went out and no answer said what became of it.
        maybe_applied: bool,
    },

    /// The shared store would not let us in: the server's certificate could not be verified,
    /// or etcd refused our credentials or our role's permissions. Nothing was read or changed.
    #[error("the store `{store}` {}: {detail}", access.says())]
    StoreAccess {
        store: String,
        access: Access,
        detail: String,
    },

    /// A lease this process held (or meant to take) is not its own any more: it expired
    /// while the holder was cut off or stalled, or someone else holds that name. Nothing was
    /// written under it.
    #[error("the lease `{name}` in the store `{store}` is lost: {detail}")]
    LeaseLost {
        store: String,
        name: String,
        detail: String,
    },

    /// conductor broke one of its own rules: a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why the shared store would not let us in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The server's certificate could not be verified (unknown CA, self-signed, expired, wrong
    /// name), or the TLS handshake failed.
    Untrusted,
    /// etcd refused who we are: no credentials, a wrong password, or a role that may not touch
    /// the prefix.
    Unauthorized,
}

impl Access {
    fn says(self) -> &'static str {
        match self {
            Access::Untrusted => "could not be verified",
            Access::Unauthorized => "refused access",
        }
    }
}

fn holder_suffix(holder: &Option<String>) -> String {
    match holder {
        Some(h) => format!(" (held by {h})"),
        None => String::new(),
    }
}

impl Error {
    /// A refusal (exit 2) with a stable reason.
    pub fn refused(reason: Refusal, message: impl Into<String>) -> Self {
        Error::Refused {
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
            Error::Refused { reason, .. } => reason.as_str(),
            Error::StoreUnavailable { .. } => "store_unavailable",
            Error::StoreAccess {
                access: Access::Untrusted,
                ..
            } => "store_untrusted",
            Error::StoreAccess {
                access: Access::Unauthorized,
                ..
            } => "store_unauthorized",
            Error::LeaseLost { .. } => "lease_lost",
            Error::Internal(_) => "internal",
        }
    }

    /// What to do next, when there is something useful to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            // On a shared store nothing is held: other writers kept committing first.
            Error::LockTimeout { path, .. } if path.to_string_lossy().contains("://") => Some(
                "other writers kept committing first and nothing was changed; retry, or raise --lock-timeout / CONDUCTOR_LOCK_TIMEOUT".into(),
            ),
            Error::LockTimeout { .. } => Some(
                "another conductor process may be stuck; retry, or raise --lock-timeout / CONDUCTOR_LOCK_TIMEOUT".into(),
            ),
            Error::CorruptState { .. } => {
                Some("nothing was changed; run `conductor doctor` to see what is wrong".into())
            }
            Error::StoreUnavailable { maybe_applied: true, .. } => Some(
                "check with `conductor status` or `conductor events` whether it took effect before repeating it; `conductor doctor` shows each member".into(),
            ),
            Error::StoreUnavailable { .. } => Some(
                "nothing was changed; etcd needs a majority of its members up: `conductor doctor` shows each member".into(),
            ),
            Error::StoreAccess { access: Access::Untrusted, .. } => Some(
                "nothing was read or changed; give the cluster's CA with CONDUCTOR_ETCD_CACERT or config.json's `store_cacert` (docs/internals.md, Securing the store)".into(),
            ),
            Error::StoreAccess { access: Access::Unauthorized, .. } => Some(
                "nothing was read or changed; check CONDUCTOR_ETCD_USER and its password (CONDUCTOR_ETCD_PASSWORD_FILE), and that the user's role may read and write the prefix (docs/internals.md, Securing the store)".into(),
            ),
            Error::Refused { reason: Refusal::InvalidStore, .. } => Some(
                "nothing was changed; the store and its TLS files come from --store / CONDUCTOR_STORE, CONDUCTOR_ETCD_* or config.json's `store*` keys".into(),
            ),
            Error::Refused { reason: Refusal::InsecureStore, .. } => Some(
                "use https:// with the cluster's CA, or pass --insecure-store (config.json: \"store_insecure\": true) to send claims in clear text anyway".into(),
            ),
            Error::Refused { reason: Refusal::UnsafeCredentials, .. } => Some(
                "make it readable by its owner only: chmod 600 FILE".into(),
            ),
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => Some(
                "nothing was changed; free some space on the file system that holds the home (`df -h`)".into(),
            ),
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Some("the conductor home must be writable; set CONDUCTOR_HOME or --home".into())
            }
            Error::LeaseLost { .. } => Some(
                "nothing was written under the lost lease; start the command again (a lease expires when its holder cannot reach a majority of the cluster for its time to live)".into(),
            ),
            Error::Internal(_) => Some(INTERNAL_HINT.into()),
            _ => None,
        }
    }

    /// The process exit code: 1 operational failure, 2 refused input, 11 the shared store is
    /// unavailable, 70 a bug.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::StoreUnavailable { .. }
            | Error::StoreAccess { .. }
            | Error::LeaseLost { .. } => 11,
            Error::LockTimeout { .. }
            | Error::Io { .. }
            | Error::CorruptState { .. }
            | Error::UnsafeHome { .. } => 1,
            Error::Refused { .. } => 2,
            Error::Internal(_) => INTERNAL_EXIT,
        }
    }

    /// True when stdout was closed under us (`conductor history | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// The exit code of an internal error (a bug): 70, `EX_SOFTWARE` of sysexits.h.
pub const INTERNAL_EXIT: u8 = 70;

/// What a user should do about an internal error.
pub const INTERNAL_HINT: &str =
    "this is a bug in conductor, please report it with the command you ran; nothing was changed";

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

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    /// A lock timeout on a shared store blames no stuck process: nothing holds a lock there.
    #[test]
    fn a_lock_timeout_on_a_shared_store_names_the_other_writers_not_a_stuck_process() {
        let timeout = |path: &str| Error::LockTimeout {
            secs: 5.0,
            path: path.into(),
            holder: Some("12 concurrent writers won first".into()),
        };
        let shared = timeout("etcd://127.0.0.1:2379/team").hint().unwrap();
        assert!(
            shared.starts_with("other writers kept committing first"),
            "{shared}"
        );
        let files = timeout("/home/a/.conductor/status.lock").hint().unwrap();
        assert!(
            files.starts_with("another conductor process may be stuck"),
            "{files}"
        );
    }
}
