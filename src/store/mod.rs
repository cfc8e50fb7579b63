//! The one layer that touches files in the conductor home. Nothing else opens them.
//!
//! Invariants:
//! - Every read-modify-write happens in [`Store::transact`]: take the exclusive lock on
//!   `status.lock`, read and validate `status.json`, run a pure operation, append its ledger
//!   lines, then atomically replace `status.json` (only if it changed).
//! - The new state is written and fsynced to a temp file first, then ledger lines are
//!   appended (the event journal last), then the temp file is renamed over status.json. A
//!   failure before the rename changes nothing (appended lines are cut back off). A crash in
//!   the instant between the journal append and the rename can leave a
//!   ledger line for an operation whose state change was lost (the operation was never
//!   acknowledged); it can never leave state without its ledger line.
//! - Readers ([`Store::read`]) never lock: writers only ever rename whole files into place.
//! - A file that fails to parse or validate is never overwritten: the command fails with
//!   `corrupt_state` and the file stays byte-identical.
//! - The home is created 0700 and files 0600; a home owned by another user is refused.
//!
//! The interface (read, transact, ledgers) is deliberately narrow so another backend could
//! implement it.

pub mod atomic;
pub mod doctor;
pub mod home;
pub mod journal;
pub mod ledger;
pub mod lock;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use home::Home;

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

/// Access to one conductor home.
pub struct Store {
    home: Home,
    lock_timeout: Duration,
    quiet: bool,
    /// `config.json`, read (and validated) at most once per process.
    config: std::sync::OnceLock<Config>,
}

impl Store {
    /// Open (creating if needed) the home at `dir`.
    pub fn open(dir: PathBuf, lock_timeout: Duration, quiet: bool) -> Result<Store> {
        let home = Home::ensure(dir)?;
        Ok(Store {
            home,
            lock_timeout,
            quiet,
            config: std::sync::OnceLock::new(),
        })
    }

    /// How long transactions wait for the lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The home's paths.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The current state, without locking. A missing file is an empty state.
    pub fn read(&self, now: Timestamp) -> Result<State> {
        let path = self.home.status();
        match read_bytes(&path)? {
            None => Ok(State::empty(now)),
            Some(bytes) => codec::decode(&path, &bytes),
        }
    }

    /// The current state for a quick read-only decision (agent hooks): parsed, version- and
    /// consistency-checked, but not validated against the JSON Schema, which costs most of the
    /// time at a thousand claims. Anything that writes goes through [`Store::transact`], which
    /// validates. No lock.
    pub fn read_unvalidated(&self, now: Timestamp) -> Result<State> {
        let path = self.home.status();
        match read_bytes(&path)? {
            None => Ok(State::empty(now)),
            Some(bytes) => codec::decode_quick(&path, &bytes),
        }
    }

    /// Run `op` on the state under the exclusive lock and persist what it did.
    pub fn transact<T>(
        &self,
        now: Timestamp,
        op: impl FnOnce(&mut State, &mut Vec<Effect>) -> Result<T>,
    ) -> Result<T> {
        let _lock = self.lock()?;
        atomic::remove_stale_temps(self.home.dir());
        let mut state = self.read(now)?;
        let before = state.clone();
        let mut effects = Vec::new();
        crate::protocol::foreign::reconcile(&mut state, None, now, &mut effects)?;
        let value = op(&mut state, &mut effects)?;
        let changed = state != before || !self.home.status().exists();
        self.commit(now, changed.then_some(&state), &effects)?;
        Ok(value)
    }

    /// Take the state lock (for operations that replace files wholesale, like `reset`).
    pub fn lock(&self) -> Result<lock::StoreLock> {
        let path = self.home.lock();
        let quiet = self.quiet;
        lock::acquire(&path, self.lock_timeout, &|| {
            if !quiet {
                eprintln!("Blocking: waiting for the state lock ({})", path.display());
            }
        })
    }

    /// Persist one operation (the lock is held): the new state, if any, is written and fsynced
    /// first (a full disk fails here, with nothing appended), then the ledger lines are appended
    /// (history, conflicts.log, and the event journal last, so journal readers only see events
    /// whose other lines are durable), and the rename of status.json comes last. If the rename
    /// fails the lines are taken back. Only a crash in the instant between the journal append and
    /// the rename can leave the ledgers one operation ahead of the state.
    fn commit(&self, now: Timestamp, state: Option<&State>, effects: &[Effect]) -> Result<()> {
        let prepared = match state {
            Some(st) => Some(atomic::prepare(&self.home.status(), &codec::encode(st))?),
            None => None,
        };
        let appended = self.apply_effects(now, effects)?;
        if let Some(prepared) = prepared
            && let Err(e) = prepared.commit()
        {
            appended.iter().rev().for_each(ledger::Appended::undo);
            return Err(e);
        }
        Ok(())
    }

    /// Append the effects' ledger lines; if one append fails, the earlier ones are taken back.
    fn apply_effects(&self, now: Timestamp, effects: &[Effect]) -> Result<Vec<ledger::Appended>> {
        let mut history = Vec::new();
        let mut log = Vec::new();
        let mut events = Vec::new();
        for e in effects {
            match e {
                Effect::History(h) => {
                    history.push(serde_json::to_string(h).expect("history entries serialize"))
                }
                Effect::Log { kind, text } => log.push(ledger::LogEntry::format(now, *kind, text)),
                Effect::Event(ev) => events.push(ev.clone()),
            }
        }
        // Read the settings first so a bad config.json fails before anything is appended.
        let retention = if events.is_empty() {
            None
        } else {
            Some(journal::Retention::from_config(&self.config()?))
        };
        let mut done: Vec<ledger::Appended> = Vec::new();
        let steps: [&dyn Fn() -> Result<Option<ledger::Appended>>; 3] = [
            &|| ledger::append(&self.home.history(), &history),
            &|| ledger::append(&self.home.conflicts_log(), &log),
            &|| match retention {
                Some(r) => journal::append(self.home.dir(), r, now, &events),
                None => Ok(None),
            },
        ];
        for step in steps {
            match step() {
                Ok(a) => done.extend(a),
                Err(e) => {
                    done.iter().rev().for_each(ledger::Appended::undo);
                    return Err(e);
                }
            }
        }
        Ok(done)
    }

    /// Append events that come with no state change (like `gate.blocked`), under the lock.
    pub fn append_events(
        &self,
        now: Timestamp,
        events: Vec<crate::protocol::events::NewEvent>,
    ) -> Result<()> {
        let _lock = self.lock()?;
        let effects: Vec<Effect> = events.into_iter().map(Effect::Event).collect();
        self.commit(now, None, &effects)
    }

    /// Keep `status.json` as `status.json.<stamp>.bak` (if it exists, parseable or not)
    /// and write an empty state, under the lock. Returns the backup's path.
    pub fn reset(&self, now: Timestamp) -> Result<Option<PathBuf>> {
        let _lock = self.lock()?;
        let status = self.home.status();
        let backup = if status.exists() {
            Some(atomic::keep_beside(
                &status,
                &format!("{}.bak", now.compact()),
            )?)
        } else {
            None
        };
        // Record what the reset removes, as cleanup would: a history line (outcome `orphaned`)
        // and the events of each instance that can still be read.
        let mut effects = Vec::new();
        if let Ok(mut st) = self.read(now) {
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
        self.commit(now, Some(&State::empty(now)), &effects)?;
        Ok(backup)
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
        ledger::for_each_line(&path, f)
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

pub(crate) fn corrupt(path: &Path, detail: impl Into<String>) -> Error {
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
