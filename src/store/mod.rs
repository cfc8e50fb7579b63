//! The one layer that touches files in the conductor home. Nothing else opens them.
//!
//! Invariants:
//! - Every read-modify-write is a transaction ([`Store::transaction`], see [`txn`]): take the
//!   locks it names in the fixed order, read and check the documents, run a pure operation,
//!   then commit its documents, ledger lines and events atomically through the redo record
//!   ([`redo`]): after a crash at any instant either all of it is there or none of it.
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
pub mod bundle;
pub mod doctor;
pub mod etcd;
pub mod home;
pub mod journal;
pub mod journal_check;
pub mod journal_mark;
pub mod ledger;
pub mod lock;
pub mod redo;
pub mod txn;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use bundle::Bundle;
pub use home::Home;
pub use txn::{CONFLICTS, Document, HISTORY, HomePath, LedgerFile, Lock, Tx};

use crate::error::{Error, Result};
use crate::protocol::codec;
use crate::protocol::ops::Effect;
use crate::protocol::{Config, Sprint, State};
use crate::schema::{self, Schema};
use crate::time::Timestamp;

/// The append-only files in the home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ledger {
    /// `history.jsonl`
    History,
    /// `conflicts.log`
    Conflicts,
}

/// How many copies of status.json as other programs left it are kept.
pub const FOREIGN_COPIES_KEPT: usize = 20;

/// Access to one conductor home.
pub struct Store {
    home: Home,
    lock_timeout: Duration,
    quiet: bool,
    /// `config.json`, read (and validated) at most once per process.
    config: std::sync::OnceLock<Config>,
    /// Set by a command that runs one transaction and exits (see [`Store::short_lived`]).
    short_lived: std::sync::atomic::AtomicBool,
    /// The shared store when one is configured (`CONDUCTOR_STORE`, `--store` or config.json's
    /// `store`): documents, ledgers and the journal then live in etcd, and the home keeps only
    /// this machine's own files (config.json, sprint.json, workspaces).
    remote: Option<etcd::Etcd>,
}

impl Store {
    /// Open (creating if needed) the home at `dir`.
    pub fn open(dir: PathBuf, lock_timeout: Duration, quiet: bool) -> Result<Store> {
        let home = Home::ensure(dir)?;
        let mut store = Store {
            home,
            lock_timeout,
            quiet,
            config: std::sync::OnceLock::new(),
            short_lived: std::sync::atomic::AtomicBool::new(false),
            remote: None,
        };
        // Set, even empty (the files of this home), it wins over config.json's `store`. Only
        // that field is read here: the whole file is checked when a command needs the config
        // (a read-only command never pays for its schema).
        let url = match std::env::var("CONDUCTOR_STORE") {
            Ok(u) => Some(u).filter(|u| !u.is_empty()),
            Err(_) => configured_store(&store.home.config())?,
        };
        if let Some(url) = url {
            store.remote = Some(etcd::Etcd::parse(&url)?);
        }
        Ok(store)
    }

    /// The shared store, when documents live in etcd rather than in the home's files.
    pub fn remote(&self) -> Option<&etcd::Etcd> {
        self.remote.as_ref()
    }

    /// A reader of the event journal positioned after `after` (`None`: at its end).
    pub fn tail(&self, after: Option<u64>) -> Result<journal::Tail> {
        match &self.remote {
            Some(r) => journal::Tail::open_remote(r, after),
            None => journal::Tail::open(self.home.dir(), after),
        }
    }

    /// The seq of the last event written (0: none yet).
    pub fn last_event_seq(&self) -> Result<u64> {
        match &self.remote {
            Some(r) => journal::remote_last_seq(r),
            None => journal::last_seq(self.home.dir()),
        }
    }

    /// The seq of the oldest event kept (`None`: the journal is empty).
    pub fn oldest_event(&self) -> Result<Option<u64>> {
        match &self.remote {
            Some(r) => journal::remote_oldest(r),
            None => journal::Tail::oldest(self.home.dir()),
        }
    }

    /// Wake up when a document or ledger whose file name satisfies `wanted` changes: a watch on
    /// the home directory, or on the shared store's keys.
    pub fn watcher(&self, wanted: fn(&str) -> bool) -> Result<crate::watch::HomeWatcher> {
        match &self.remote {
            Some(r) => crate::watch::HomeWatcher::remote(r, wanted),
            None => crate::watch::HomeWatcher::new(self.home.dir(), wanted),
        }
    }

    /// Where state lives, for messages: the home directory or the store URL.
    pub fn location(&self) -> String {
        match &self.remote {
            Some(r) => r.url().to_string(),
            None => self.home.dir().display().to_string(),
        }
    }

    /// Declare that this process exits right after its command: the protocol state a
    /// transaction read is then not freed piece by piece (at 10,000 claims that is about a sixth
    /// of a claim's instructions); the OS takes the memory back at exit. Never set by commands
    /// that loop (`watch`, `run`, `claim --wait`, the runtime and queue loops).
    pub fn short_lived(&self) {
        self.short_lived
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long transactions wait for the lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The home's paths.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// Finish a transaction that committed and then died, if there is one (a `stat` when not).
    fn settle(&self) -> Result<()> {
        if self.remote.is_some() {
            return Ok(());
        }
        if redo::pending(self.home.dir()) {
            let _journal = self.take(Lock::Journal)?;
            redo::replay(self.home.dir())?;
        }
        Ok(())
    }

    /// Read a document's file as it is (the caller holds its lock or accepts a snapshot).
    fn read_doc_file<D: Document>(&self, now: Timestamp) -> Result<D> {
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

    /// A file named at run time, as it is (`None`: no file), without locking (files are only
    /// ever replaced whole or appended to).
    pub fn read_at(&self, file: &HomePath) -> Result<Option<Vec<u8>>> {
        self.settle()?;
        self.read_doc_bytes(file.rel())
    }

    /// The protocol state, without locking. A missing file is an empty state.
    pub fn read(&self, now: Timestamp) -> Result<State> {
        self.read_doc(now)
    }

    /// A document's bytes as they are (`None`: it does not exist).
    pub fn read_doc_bytes(&self, file: &str) -> Result<Option<Vec<u8>>> {
        match &self.remote {
            Some(r) => Ok(r.get(&r.doc_key(file))?.map(|kv| kv.value)),
            None => read_bytes(&self.home.dir().join(file)),
        }
    }

    /// The protocol state for a quick read-only decision (agent hooks, prompt). No lock.
    pub fn read_unvalidated(&self, now: Timestamp) -> Result<State> {
        self.settle()?;
        let path = self.home.status();
        let mut st = match self.read_doc_bytes(<State as Document>::FILE)? {
            None => return Ok(State::empty(now)),
            Some(bytes) => codec::decode_quick(&path, &bytes)?,
        };
        // Keys another program wrote through a symlink are decided on where they lead. The
        // map only says how a spelling resolves, so a snapshot of it is never wrong to apply.
        if self.remote.is_none()
            && let Ok(known) = self.read_doc_file::<crate::protocol::aliases::KeyAliases>(now)
        {
            crate::protocol::aliases::to_resolved(&mut st, &known.aliases);
        }
        Ok(st)
    }

    /// Run a protocol operation on the state under `status.lock` and persist what it did: the
    /// state if it changed, its ledger lines and its events, in one atomic commit.
    pub fn transact<T>(
        &self,
        now: Timestamp,
        mut op: impl FnMut(&mut State, &mut Vec<Effect>) -> Result<T>,
    ) -> Result<T> {
        self.transaction(now, &[Lock::Status], |tx| {
            use crate::protocol::aliases::{self, KeyAliases};
            use crate::protocol::foreign::{self, Seen};
            let (mut state, last_writer) = tx.read_tracked::<State>()?;
            // Keys another program wrote through a symlink: resolved for the operation, written
            // back as they were (see `protocol::aliases`).
            // Only conductor writes a shared store's keys: no other program's spellings there.
            let known: KeyAliases = if self.remote.is_some() {
                KeyAliases::default()
            } else {
                tx.read()?
            };
            let mut applied = Vec::new();
            let last_writer = match last_writer {
                txn::LastWriter::Conductor if known.damaged => txn::LastWriter::Other(None),
                txn::LastWriter::Conductor => {
                    applied = aliases::to_resolved(&mut state, &known.aliases);
                    txn::LastWriter::Conductor
                }
                txn::LastWriter::Other(mut previous) => {
                    if let Some(p) = previous.as_mut() {
                        aliases::to_resolved(p, &known.aliases);
                    }
                    txn::LastWriter::Other(previous)
                }
            };
            let seen = match &last_writer {
                txn::LastWriter::Conductor => Seen::Own,
                txn::LastWriter::Other(previous) => Seen::Changed(previous.as_ref()),
            };
            let mut effects = Vec::new();
            let mut resolver = crate::runtime::PathNormalizer::new(PathBuf::from("/"));
            let rec = foreign::reconcile(&mut state, seen, now, &mut resolver, &mut effects)?;
            if matches!(seen, Seen::Changed(_)) {
                applied = aliases::applied_in(&state, &rec.aliases);
            }
            let value = op(&mut state, &mut effects)?;
            let kept = aliases::restore(&mut state, &applied);
            if kept != known.aliases || known.damaged {
                tx.write(&KeyAliases {
                    aliases: kept,
                    damaged: false,
                })?;
            }
            if let Some(suffix) = &rec.keep_copy {
                atomic::keep_beside(&self.home.status(), suffix)?;
                self.prune_foreign_copies();
            }
            // After another program's write, conductor commits even an unchanged state, so the
            // next transaction compares with this one and does not report the same changes again.
            if matches!(seen, Seen::Changed(_)) {
                tx.write(&state)?;
            } else {
                tx.write_if_changed(&state)?;
            }
            stage_effects(tx, now, effects)?;
            if self.short_lived.load(std::sync::atomic::Ordering::Relaxed) {
                std::mem::forget(state);
            }
            Ok(value)
        })
    }

    /// Keep the newest [`FOREIGN_COPIES_KEPT`] copies of status.json as another program left it
    /// (`status.json.foreign-<time>`): a writer that always claims relative paths would
    /// otherwise leave one per claim.
    fn prune_foreign_copies(&self) {
        let Ok(entries) = std::fs::read_dir(self.home.dir()) else {
            return;
        };
        let mut copies: Vec<(Option<std::time::SystemTime>, PathBuf)> = entries
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("status.json.foreign-")
            })
            .map(|e| (e.metadata().and_then(|m| m.modified()).ok(), e.path()))
            .collect();
        // Oldest first: by when the other program wrote it (a copy is a hard link), then name.
        copies.sort();
        let excess = copies.len().saturating_sub(FOREIGN_COPIES_KEPT);
        for (_, old) in &copies[..excess] {
            let _ = std::fs::remove_file(old);
        }
    }

    /// Take `status.lock` (doctor's repairs replace files wholesale under it).
    pub fn lock(&self) -> Result<lock::StoreLock> {
        self.take(Lock::Status)
    }

    /// Take every lock of the home, in order, and finish any pending commit (doctor's repairs).
    pub fn lock_all(&self) -> Result<Vec<lock::StoreLock>> {
        let locks = Lock::ALL
            .iter()
            .map(|l| self.take(*l))
            .collect::<Result<Vec<_>>>()?;
        redo::replay(self.home.dir())?;
        Ok(locks)
    }

    /// Append events that come with no state change (like `gate.blocked`).
    pub fn append_events(
        &self,
        now: Timestamp,
        events: Vec<crate::protocol::events::NewEvent>,
    ) -> Result<()> {
        self.transaction(now, &[], |tx| {
            events.iter().for_each(|e| tx.event(e.clone()));
            Ok(())
        })
    }

    /// Keep `status.json` as `status.json.<stamp>.bak` (if it exists, parseable or not)
    /// and write an empty state, under the lock. Returns the backup's path.
    pub fn reset(&self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.transaction(now, &[Lock::Status], |tx| {
            let status = self.home.status();
            let backup = if self.remote.is_none() && status.exists() {
                Some(atomic::keep_beside(
                    &status,
                    &format!("{}.bak", now.compact()),
                )?)
            } else {
                None
            };
            // Record what the reset removes, as cleanup would: a history line (outcome
            // `orphaned`) and the events of each instance that can still be read.
            let mut effects = Vec::new();
            if let Ok(mut st) = tx.read::<State>() {
                let ids: Vec<String> = st.instances.iter().map(|i| i.id.clone()).collect();
                for id in ids {
                    let live = crate::protocol::ops::AssumeAlive;
                    crate::protocol::ops::cleanup(&mut st, 0, Some(&id), now, &live, &mut effects)?;
                }
                for e in &mut effects {
                    if let Effect::History(h) = e {
                        h.notes = Some("removed by conductor reset".into());
                    }
                }
            }
            tx.write(&State::empty(now))?;
            stage_effects(tx, now, effects)?;
            Ok(backup)
        })
    }

    /// Stream the lines of a ledger in the home (see [`ledger::for_each_line`]).
    pub fn read_ledger(
        &self,
        which: Ledger,
        f: impl FnMut(usize, ledger::Line) -> Result<bool>,
    ) -> Result<()> {
        let path = match which {
            Ledger::History => self.home.history(),
            Ledger::Conflicts => self.home.conflicts_log(),
        };
        match &self.remote {
            Some(r) => {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                remote_lines(r, &r.ledger_prefix(name), f)
            }
            None => ledger::for_each_line(&path, f),
        }
    }

    /// Stream the lines of any domain's ledger, from the home's file or the shared store.
    pub fn read_ledger_file(
        &self,
        ledger: LedgerFile,
        f: impl FnMut(usize, ledger::Line) -> Result<bool>,
    ) -> Result<()> {
        match &self.remote {
            Some(r) => remote_lines(r, &r.ledger_prefix(ledger.name), f),
            None => ledger::for_each_line(&self.home.dir().join(ledger.name), f),
        }
    }

    /// `sprint.json`, if present (validated).
    pub fn sprint(&self) -> Result<Option<Sprint>> {
        read_doc(&self.home.sprint(), Schema::Sprint)
    }

    /// `config.json`, or the defaults when absent (validated).
    pub fn config(&self) -> Result<Config> {
        if let Some(c) = self.config.get() {
            return Ok(c.clone());
        }
        let c: Config = read_doc(&self.home.config(), Schema::Config)?.unwrap_or_default();
        Ok(self.config.get_or_init(|| c).clone())
    }
}

/// Stage a protocol operation's effects in a transaction.
fn stage_effects(tx: &mut Tx, now: Timestamp, effects: Vec<Effect>) -> Result<()> {
    for e in effects {
        match e {
            Effect::History(h) => tx.append(
                HISTORY,
                serde_json::to_string(&h).expect("history entries serialize"),
            )?,
            Effect::Log { kind, text } => {
                tx.append(CONFLICTS, ledger::LogEntry::format(now, kind, &text))?
            }
            Effect::Event(ev) => tx.event(ev),
        }
    }
    Ok(())
}

/// Read a whole file; `None` if it does not exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Read and validate a JSON document against its schema; `None` if the file does not exist.
pub fn read_doc<T: DeserializeOwned>(path: &Path, schema: Schema) -> Result<Option<T>> {
    let Some(bytes) = read_bytes(path)? else {
        return Ok(None);
    };
    decode(path, &bytes, schema).map(Some)
}

pub fn corrupt(path: &Path, detail: impl Into<String>) -> Error {
    Error::CorruptState {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

fn decode<T: DeserializeOwned>(path: &Path, bytes: &[u8], schema: Schema) -> Result<T> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, format!("not valid JSON ({e})")))?;
    schema::validate(schema, &value).map_err(|e| corrupt(path, format!("schema violation {e}")))?;
    serde_json::from_value(value).map_err(|e| corrupt(path, e.to_string()))
}

/// Every line of a ledger kept in the shared store: its keys hold the lines of one transaction
/// each (so a transaction stays within etcd's operation limit however many lines it appends).
fn remote_lines(
    r: &etcd::Etcd,
    prefix: &str,
    mut f: impl FnMut(usize, ledger::Line) -> Result<bool>,
) -> Result<()> {
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

/// config.json's `store`, when the file names one (`corrupt_state` if it is not JSON or the
/// field is not a string; the rest of the file is left to [`Store::config`]).
fn configured_store(path: &Path) -> Result<Option<String>> {
    #[derive(serde::Deserialize)]
    struct StoreOnly {
        #[serde(default)]
        store: Option<String>,
    }
    let Some(bytes) = read_bytes(path)? else {
        return Ok(None);
    };
    let c: StoreOnly = serde_json::from_slice(&bytes)
        .map_err(|e| corrupt(path, format!("not valid JSON with a string `store` ({e})")))?;
    Ok(c.store.filter(|s| !s.is_empty()))
}
