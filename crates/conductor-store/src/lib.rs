//! The one layer that touches files in the conductor home. Nothing else opens them.
//!
//! Invariants:
//! - Every read-modify-write is a transaction ([`Store::transaction`], see [`txn`]): take the
//!   locks it names in the fixed order, read and check the documents, run a pure operation,
//!   then commit its documents, ledger lines and events atomically through one record of the
//!   commit log ([`redo`]), its one durable sync: after a crash or a power cut at any instant
//!   either all of it is there or none of it.
//! - Readers never lock: writers only ever rename whole files into place and append whole
//!   lines. A reader that finds a commit record left by a crashed writer finishes it first.
//! - A file that fails to parse or check is never overwritten: the command fails with
//!   `corrupt_state` and the file stays byte-identical.
//! - The home is created 0700 and files 0600; a home owned by another user is refused.
//! - Files named at run time (the agent runtime's `runtime/agents/NAME/...`) go through
//!   [`HomePath`]: checked components only, so no name can leave the home; their directories
//!   are created 0700 by the commit, and they are written like any other document or ledger.
//!
//! The protocol's files keep the protocol's names and lock (`status.json`, `status.lock`,
//! `history.jsonl`, `conflicts.log`), so the original plugin's jq recipes still interoperate.

pub mod atomic;
pub mod backend;
pub mod bundle;
pub mod delta;
pub mod error;
pub mod etcd;
pub mod event;
pub mod failpoint;
pub mod home;
pub mod host;
pub mod journal;
pub mod journal_mark;
pub mod journal_seek;
pub mod lease;
pub mod ledger;
pub mod ledger_rotate;
pub mod lock;
pub mod migrate;
pub mod redo;
pub mod split;
pub mod stream;
pub mod text;
pub mod time;
pub mod txn;
pub mod watch;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A wait for a lock that has lasted [`lock::ANNOUNCE_AFTER`]: what a face may show the person
/// waiting.
#[derive(Clone, Debug)]
pub struct LockWait {
    /// What the lock protects ("state", "queue", ...).
    pub purpose: &'static str,
    /// The lock file.
    pub path: PathBuf,
    /// How long the wait may last before it fails with `lock_timeout`.
    pub timeout: Duration,
}

/// The callback [`Store::on_wait`] takes.
pub type WaitNotes = std::sync::Arc<dyn Fn(&LockWait) + Send + Sync>;

pub use backend::Backend;
pub use bundle::Bundle;
pub use error::{Error, Result};
pub use home::Home;
pub use lease::Lease;
pub use txn::{Document, HomePath, LedgerFile, Lock, Tx};

use crate::time::Timestamp;

/// Access to one conductor home.
pub struct Store {
    home: Home,
    lock_timeout: Duration,
    /// Told when a transaction has waited about a second for a lock (the store never prints).
    on_wait: Option<WaitNotes>,
    /// The journal's retention settings from `config.json`, read at most once per process.
    retention: std::sync::OnceLock<journal::Retention>,
    /// The ledgers' retention settings from `config.json`, read at most once per process.
    ledger_retention: std::sync::OnceLock<ledger_rotate::LedgerRetention>,
    /// Set by a command that runs one transaction and exits (see [`Store::short_lived`]).
    short_lived: std::sync::atomic::AtomicBool,
    /// Set once this process has seen that the commit log needs no recovery (it was written in
    /// this boot, or is empty): from then on only a killed writer's record can need finishing.
    log_checked: std::sync::atomic::AtomicBool,
    /// Where documents, ledgers and the journal live: the home's files, or the shared store
    /// when one is configured (`CONDUCTOR_STORE`, `--store` or config.json's `store`).
    backend: Backend,
}

impl Store {
    /// Open (creating if needed) the home at `dir`.
    pub fn open(dir: PathBuf, lock_timeout: Duration) -> Result<Store> {
        let home = Home::ensure(dir)?;
        let backend = Backend::Files(home.dir().to_path_buf());
        let mut store = Store {
            home,
            lock_timeout,
            on_wait: None,
            retention: std::sync::OnceLock::new(),
            ledger_retention: std::sync::OnceLock::new(),
            short_lived: std::sync::atomic::AtomicBool::new(false),
            log_checked: std::sync::atomic::AtomicBool::new(false),
            backend,
        };
        // Set, even empty (the files of this home), it wins over config.json's `store`. Only
        // that field is read here: the whole file is checked when a command needs the config
        // (a read-only command never pays for its schema).
        let configured = configured_store(&store.home.config())?;
        let url = match std::env::var("CONDUCTOR_STORE") {
            Ok(u) => Some(u).filter(|u| !u.is_empty()),
            Err(_) => configured.as_ref().and_then(|c| c.store.clone()),
        };
        if let Some(url) = url {
            let security = security(configured.unwrap_or_default(), store.home.dir());
            store.backend = Backend::Etcd(Box::new(etcd::Etcd::open(&url, &security)?));
        }
        Ok(store)
    }

    /// Where the state lives (see [`Backend`]): ask it for a capability, never which it is.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// A reader of the event journal positioned after `after` (`None`: at its end).
    pub fn tail(&self, after: Option<u64>) -> Result<journal::Tail> {
        // A commit a crashed writer left is finished first: a transaction that spans segments
        // is only whole once its segments are renamed into place (a `stat` when there is none).
        self.settle()?;
        self.backend.tail(after)
    }

    /// The seq of the last event written (0: none yet).
    pub fn last_event_seq(&self) -> Result<u64> {
        self.backend.last_event_seq()
    }

    /// The seq of the oldest event kept (`None`: the journal is empty).
    pub fn oldest_event(&self) -> Result<Option<u64>> {
        self.backend.oldest_event()
    }

    /// Wake up when a document or ledger whose file name satisfies `wanted` changes: a watch on
    /// the home directory, or on the shared store's keys.
    pub fn watcher(&self, wanted: fn(&str) -> bool) -> Result<crate::watch::HomeWatcher> {
        self.backend.watcher(wanted)
    }

    /// Where state lives, for messages: the home directory or the store URL.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// Several machines share this state (see [`Backend::shared_by_hosts`]).
    pub fn shared_by_hosts(&self) -> bool {
        self.backend.shared_by_hosts()
    }

    /// The documents and ledgers are the home's files (see [`Backend::state_in_files`]).
    pub fn state_in_files(&self) -> bool {
        self.backend.state_in_files()
    }

    /// Programs other than conductor may rewrite the documents (see [`Backend::other_writers`]).
    pub fn other_writers(&self) -> bool {
        self.backend.other_writers()
    }

    /// True when `file` is still the document conductor committed last (its file is the same
    /// inode as the committed copy's link, [`txn::last_committed_name`]), or when only conductor
    /// writes the store; false when another program replaced it, or when that cannot be told.
    /// Two `stat` calls; read without the lock, so only a hint for views (`status` skips looking
    /// for another program's inconsistencies when conductor wrote the file last).
    pub fn last_written_by_conductor(&self, file: &str) -> bool {
        use std::os::unix::fs::MetadataExt;
        if !self.other_writers() {
            return true;
        }
        let dir = self.home().dir();
        match (
            std::fs::metadata(dir.join(file)),
            std::fs::metadata(dir.join(txn::last_committed_name(file))),
        ) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }

    /// A cheap token that changes when the journal grows (see [`Backend::journal_mark`]).
    pub fn journal_mark(&self) -> Option<(u64, u64)> {
        self.backend.journal_mark()
    }

    /// Declare that this process exits right after its command: the protocol state a
    /// transaction read is then not freed piece by piece (at 10,000 claims that is about a sixth
    /// of a claim's instructions); the OS takes the memory back at exit. Never set by commands
    /// that loop (`watch`, `run`, `claim --wait`, the runtime and queue loops).
    pub fn short_lived(&self) {
        self.short_lived
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Call `notes` whenever a transaction has waited [`lock::ANNOUNCE_AFTER`] for a lock
    /// (once per wait; the face decides what to show, and how often).
    pub fn on_wait(mut self, notes: WaitNotes) -> Store {
        self.on_wait = Some(notes);
        self
    }

    /// How long transactions wait for the lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The home's paths.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Finish a transaction that committed and then died, or the commit log a power cut left,
    /// if there is one (a `stat` when not, and the log's first line once per process).
    fn settle(&self) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.backend.state_in_files() {
            return Ok(());
        }
        let dir = self.home.dir();
        let checked = self.log_checked.load(Relaxed);
        if redo::in_flight(dir) || (!checked && redo::needs_recovery(dir)) {
            let _journal = self.take(Lock::Journal)?;
            redo::replay(dir)?;
        }
        if !checked {
            self.log_checked.store(true, Relaxed);
        }
        Ok(())
    }

    /// Read a document's file as it is (the caller holds its lock or accepts a snapshot).
    fn read_doc_file<D: Document>(&self, now: Timestamp) -> Result<D> {
        if D::PAGED
            && let Some(r) = self.backend.etcd()
        {
            return match txn::read_paged::<D>(r, r.read_paged(D::FILE)?, now)? {
                txn::Paged::Paged(doc, _) => Ok(doc),
                txn::Paged::Whole(kv) => D::decode(Path::new(&kv.key), &kv.value),
            };
        }
        let path = self.home.dir().join(D::FILE);
        match self.read_doc_bytes(D::FILE)? {
            None => Ok(D::empty(now)),
            Some(bytes) => D::decode(&path, &bytes),
        }
    }

    /// A document, without locking (a consistent snapshot: files are only ever replaced whole).
    pub fn read_doc<D: Document>(&self, now: Timestamp) -> Result<D> {
        self.settle()?;
        self.read_doc_file(now)
    }

    /// A document's bytes as a file home would hold them, without locking (`None`: it does not
    /// exist). A paged document of the shared store ([`split`]) is joined and encoded.
    pub fn read_doc_text<D: Document>(&self, now: Timestamp) -> Result<Option<Vec<u8>>> {
        if D::PAGED
            && let Some(r) = self.backend.etcd()
        {
            return Ok(
                match txn::read_paged::<D>(r, r.read_paged(D::FILE)?, now)? {
                    txn::Paged::Paged(_, seen) if seen.head.is_none() => None,
                    txn::Paged::Paged(doc, _) => Some(doc.encode()),
                    txn::Paged::Whole(kv) => Some(kv.value),
                },
            );
        }
        self.read_file(D::FILE)
    }

    /// A file named at run time, as it is (`None`: no file), without locking (files are only
    /// ever replaced whole or appended to).
    pub fn read_at(&self, file: &HomePath) -> Result<Option<Vec<u8>>> {
        self.settle()?;
        self.read_doc_bytes(file.rel())
    }

    /// A document's bytes, without locking, after finishing any commit a crashed writer left
    /// (`None`: it does not exist).
    pub fn read_file(&self, file: &str) -> Result<Option<Vec<u8>>> {
        self.settle()?;
        self.read_doc_bytes(file)
    }

    /// True when this process exits right after its command (see [`Store::short_lived`]).
    pub fn is_short_lived(&self) -> bool {
        self.short_lived.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A document's bytes as they are (`None`: it does not exist).
    pub fn read_doc_bytes(&self, file: &str) -> Result<Option<Vec<u8>>> {
        self.backend.get(file)
    }

    /// Take `status.lock` (doctor's repairs replace files wholesale under it).
    pub fn lock(&self) -> Result<lock::StoreLock> {
        self.take(Lock::Status)
    }

    /// Take every lock of the home, in order, finish any pending commit and checkpoint the
    /// commit log (doctor's repairs and imports replace files wholesale: no record may be
    /// applied over them later).
    pub fn lock_all(&self) -> Result<Vec<lock::StoreLock>> {
        let locks = Lock::ALL
            .iter()
            .map(|l| self.take(*l))
            .collect::<Result<Vec<_>>>()?;
        redo::replay(self.home.dir())?;
        redo::checkpoint(self.home.dir())?;
        Ok(locks)
    }

    /// Append events that come with no state change (like `gate.blocked`).
    pub fn append_events(&self, now: Timestamp, events: Vec<crate::event::NewEvent>) -> Result<()> {
        self.transaction(now, &[], |tx| {
            events.iter().for_each(|e| tx.event(e.clone()));
            Ok(())
        })
    }

    /// Stream the lines of any domain's ledger, from the home's file or the shared store.
    pub fn read_ledger_file<E: From<Error>>(
        &self,
        ledger: LedgerFile,
        f: impl FnMut(usize, ledger::Line) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.backend.ledger_lines(ledger.name, f)
    }

    /// The journal's retention settings: config.json's `events_*` keys (only those are read
    /// here; the whole file is checked by the commands that use it). Read once per process.
    pub(crate) fn retention(&self) -> Result<journal::Retention> {
        if let Some(r) = self.retention.get() {
            return Ok(*r);
        }
        let r = journal::Retention::read(&self.home.config())?;
        Ok(*self.retention.get_or_init(|| r))
    }
}

impl Store {
    /// The ledgers' retention settings: config.json's `ledger_*` keys. Read once per process.
    pub(crate) fn ledger_retention(&self) -> Result<ledger_rotate::LedgerRetention> {
        if let Some(r) = self.ledger_retention.get() {
            return Ok(*r);
        }
        let r = ledger_rotate::LedgerRetention::read(&self.home.config())?;
        Ok(*self.ledger_retention.get_or_init(|| r))
    }
}

/// Read a whole file; `None` if it does not exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

pub fn corrupt(path: &Path, detail: impl Into<String>) -> Error {
    Error::CorruptState {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// config.json's keys for the shared store (the rest of the file is left to the commands that
/// use it).
#[derive(Default, serde::Deserialize)]
struct StoreConfig {
    #[serde(default)]
    store: Option<String>,
    #[serde(default)]
    store_cacert: Option<PathBuf>,
    #[serde(default)]
    store_cert: Option<PathBuf>,
    #[serde(default)]
    store_key: Option<PathBuf>,
    #[serde(default)]
    store_user: Option<String>,
    #[serde(default)]
    store_password_file: Option<PathBuf>,
    #[serde(default)]
    store_insecure: Option<bool>,
}

/// config.json's store keys, when the file exists (`corrupt_state` if it is not JSON or a key
/// has the wrong type).
fn configured_store(path: &Path) -> Result<Option<StoreConfig>> {
    let Some(bytes) = read_bytes(path)? else {
        return Ok(None);
    };
    let mut c: StoreConfig = serde_json::from_slice(&bytes).map_err(|e| {
        corrupt(
            path,
            format!(
                "not valid JSON with string `store*` keys and a boolean `store_insecure` ({e})"
            ),
        )
    })?;
    c.store = c.store.filter(|s| !s.is_empty());
    Ok(Some(c))
}

/// The store's TLS files and credentials: each `CONDUCTOR_ETCD_*` variable (non-empty) wins over
/// its config.json key; relative paths in config.json are relative to the home.
/// `CONDUCTOR_STORE_INSECURE=1` (what `--insecure-store` sets) or `"store_insecure": true`
/// allows clear text to another machine.
fn security(c: StoreConfig, home: &Path) -> etcd::Security {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let path = |name: &str, configured: Option<PathBuf>| {
        var(name)
            .map(PathBuf::from)
            .or_else(|| configured.map(|p| home.join(p)))
    };
    etcd::Security {
        cacert: path("CONDUCTOR_ETCD_CACERT", c.store_cacert),
        cert: path("CONDUCTOR_ETCD_CERT", c.store_cert),
        key: path("CONDUCTOR_ETCD_KEY", c.store_key),
        user: var("CONDUCTOR_ETCD_USER")
            .map(|u| u.to_string_lossy().into_owned())
            .or(c.store_user),
        password: std::env::var("CONDUCTOR_ETCD_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty())
            .map(etcd::Secret::new),
        password_file: path("CONDUCTOR_ETCD_PASSWORD_FILE", c.store_password_file),
        insecure: var("CONDUCTOR_STORE_INSECURE").is_some_and(|v| v != "0")
            || c.store_insecure.unwrap_or(false),
    }
}
