//! Where a store's documents, ledgers and journal live: the home's files, or a shared etcd
//! cluster (`CONDUCTOR_STORE`, `--store`, config.json's `store`). [`Backend`] is the one
//! interface both implement; [`crate::Store`] calls it and never asks which one it has.
//!
//! Callers above the store (the domains, the commands) never branch on the backend either. What
//! differs between the two and matters to them is asked as a capability, named for what it
//! means: [`Backend::shared_by_hosts`] (several machines share the state, so a path is keyed by
//! its repository and no local lock can elect a leader), [`Backend::state_in_files`] (the
//! documents and ledgers are the home's own files: byte offsets index them and a copy can be
//! kept beside one), [`Backend::other_writers`] (programs other than conductor may rewrite the
//! documents).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::{etcd, journal, ledger, watch};

/// The two implementations of the store's storage.
pub enum Backend {
    /// The home's files (the home directory).
    Files(PathBuf),
    /// A shared etcd cluster; the home keeps only this machine's own files (config.json,
    /// sprint.json, workspaces).
    Etcd(Box<etcd::Etcd>),
}

impl Backend {
    /// A document's bytes as they are (`None`: it does not exist).
    pub fn get(&self, file: &str) -> Result<Option<Vec<u8>>> {
        match self {
            Backend::Files(dir) => crate::read_bytes(&dir.join(file)),
            Backend::Etcd(r) => Ok(r.get(&r.doc_key(file))?.map(|kv| kv.value)),
        }
    }

    /// A reader of the event journal positioned after `after` (`None`: at its end).
    pub fn tail(&self, after: Option<u64>) -> Result<journal::Tail> {
        match self {
            Backend::Files(dir) => journal::Tail::open(dir, after),
            Backend::Etcd(r) => journal::Tail::open_remote(r, after),
        }
    }

    /// The seq of the last event written (0: none yet).
    pub fn last_event_seq(&self) -> Result<u64> {
        match self {
            Backend::Files(dir) => journal::last_seq(dir),
            Backend::Etcd(r) => journal::remote_last_seq(r),
        }
    }

    /// The seq of the oldest event kept (`None`: the journal is empty).
    pub fn oldest_event(&self) -> Result<Option<u64>> {
        match self {
            Backend::Files(dir) => journal::Tail::oldest(dir),
            Backend::Etcd(r) => journal::remote_oldest(r),
        }
    }

    /// A cheap token that changes when the journal grows: the active file's inode and size, or
    /// the shared store's last seq (one request).
    pub fn journal_mark(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        match self {
            Backend::Files(dir) => std::fs::metadata(dir.join(journal::ACTIVE))
                .ok()
                .map(|m| (m.ino(), m.len())),
            Backend::Etcd(r) => journal::remote_last_seq(r).ok().map(|s| (0, s)),
        }
    }

    /// Wake up when a document or ledger whose file name satisfies `wanted` changes.
    pub fn watcher(&self, wanted: fn(&str) -> bool) -> Result<watch::HomeWatcher> {
        match self {
            Backend::Files(dir) => watch::HomeWatcher::new(dir, wanted),
            Backend::Etcd(r) => watch::HomeWatcher::remote(r, wanted),
        }
    }

    /// Where state lives, for messages: the home directory or the store URL.
    pub fn location(&self) -> String {
        match self {
            Backend::Files(dir) => dir.display().to_string(),
            Backend::Etcd(r) => r.url().to_string(),
        }
    }

    /// Stream the lines of the ledger `name`.
    pub fn ledger_lines<E: From<Error>>(
        &self,
        name: &str,
        f: impl FnMut(usize, ledger::Line) -> Result<bool, E>,
    ) -> Result<(), E> {
        match self {
            // Across its rotated files, oldest first (see `ledger_rotate`).
            Backend::Files(dir) => crate::ledger_rotate::for_each_line(dir, name, f),
            Backend::Etcd(r) => remote_lines(r, &r.ledger_prefix(name), f),
        }
    }

    /// Several machines share this state: a path is keyed by its repository (each machine has
    /// its own checkout), and no lock on this machine can make one process the only writer.
    pub fn shared_by_hosts(&self) -> bool {
        matches!(self, Backend::Etcd(_))
    }

    /// The documents and ledgers are the home's own files: a byte offset indexes a ledger, and
    /// a copy of a document can be kept beside it.
    pub fn state_in_files(&self) -> bool {
        matches!(self, Backend::Files(_))
    }

    /// Programs other than conductor may rewrite the documents (a file home's files can be
    /// edited by hand or through a symlink; only conductor writes a shared store's keys).
    pub fn other_writers(&self) -> bool {
        matches!(self, Backend::Files(_))
    }

    /// The etcd cluster that holds the state, when several hosts share it: what `doctor`
    /// reports on (its members' health and revision) instead of the home's files.
    pub fn cluster(&self) -> Option<&etcd::Etcd> {
        self.etcd()
    }

    /// The etcd cluster, for the store's own etcd paths (commit, import, export).
    pub(crate) fn etcd(&self) -> Option<&etcd::Etcd> {
        match self {
            Backend::Files(_) => None,
            Backend::Etcd(r) => Some(r),
        }
    }
}

/// Every line of a ledger kept in the shared store: its keys hold the lines of one transaction
/// each (so a transaction stays within etcd's operation limit however many lines it appends).
fn remote_lines<E: From<Error>>(
    r: &etcd::Etcd,
    prefix: &str,
    mut f: impl FnMut(usize, ledger::Line) -> Result<bool, E>,
) -> Result<(), E> {
    let mut n = 0;
    let mut more = true;
    r.scan(prefix, |kv| {
        for line in String::from_utf8_lossy(&kv.value).split('\n') {
            n += 1;
            if !f(n, ledger::Line::Complete(line.to_string()))? {
                more = false;
                return Ok(false);
            }
        }
        Ok(more)
    })
}
