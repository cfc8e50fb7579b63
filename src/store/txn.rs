//! Transactions over any number of documents and ledgers in the home.
//!
//! Every domain keeps its live state in [`Document`]s (one JSON file each, with a typed model)
//! and its finished work in append-only [`LedgerFile`]s; all of them append to the one event
//! journal. A transaction names the [`Lock`]s it needs; they are taken in one fixed order (the
//! order of [`Lock`]'s variants, the journal's lock always last), so two transactions can never
//! deadlock, and transactions of different domains run side by side until their short commit.
//!
//! The commit (see [`super::redo`]): new documents are written to fsynced temp files under the
//! domain locks; then, under the journal lock, the events are numbered, one redo record naming
//! every rename and append is made durable (the commit point), the renames and appends are
//! done (the journal last), and the record is cleared.
//!
//! The interface is the same for a remote backend (issue 12, etcd): a document is a key, a
//! ledger line and an event are keys under a prefix numbered in one sequence, and a commit is one
//! etcd transaction that compares the revisions of the documents read and puts everything
//! staged. There the locks become that comparison, and a transaction whose comparison fails is
//! run again from its reads, which is why operations stay pure functions of what they read.

use std::path::Path;

use super::{Store, journal, ledger, redo};
use crate::error::{Error, Result};
use crate::protocol::events::NewEvent;
use crate::time::Timestamp;

/// The locks of the home, in the order they are always taken. Each guards the documents and
/// ledgers of one domain; the file names are fixed (`status.lock` is the protocol's own, which
/// the original plugin's jq recipes take too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lock {
    /// `status.lock`: status.json, history.jsonl, conflicts.log.
    Status,
    /// `runtime.lock`: the agent runtime's documents and ledgers.
    Runtime,
    /// `workflows.lock`: workflow sessions.
    Workflows,
    /// `queue.lock`: the job queue.
    Queue,
    /// `journal.lock`: the event journal and the commit record; always taken last, and only for
    /// the commit itself.
    Journal,
}

impl Lock {
    /// Every lock, in the order they are taken.
    pub const ALL: [Lock; 5] = [
        Lock::Status,
        Lock::Runtime,
        Lock::Workflows,
        Lock::Queue,
        Lock::Journal,
    ];

    /// What the lock guards, in messages.
    pub fn purpose(self) -> &'static str {
        match self {
            Lock::Status => "state",
            Lock::Runtime => "runtime",
            Lock::Workflows => "workflows",
            Lock::Queue => "queue",
            Lock::Journal => "journal",
        }
    }

    /// The lock file's name in the home.
    pub fn file(self) -> &'static str {
        match self {
            Lock::Status => "status.lock",
            Lock::Runtime => "runtime.lock",
            Lock::Workflows => "workflows.lock",
            Lock::Queue => "queue.lock",
            Lock::Journal => "journal.lock",
        }
    }

    /// True for a temp file name written under this lock. The status lock also owns the
    /// unprefixed temp files of whole-file rewrites (doctor) and of earlier versions.
    pub fn owns_temp(self, name: &str) -> bool {
        name.starts_with(&self.temp_prefix())
            || (self == Lock::Status
                && !Lock::ALL.iter().any(|l| name.starts_with(&l.temp_prefix())))
    }

    /// The prefix of temp files written under this lock (so a transaction only ever removes
    /// debris that no live transaction can own: its own lock's).
    pub fn temp_prefix(self) -> String {
        format!(
            "{}{}-",
            super::atomic::TEMP_PREFIX,
            self.file().trim_end_matches(".lock")
        )
    }
}

/// A JSON document in the home with a typed model.
pub trait Document: Sized {
    /// The file name in the home.
    const FILE: &'static str;
    /// The lock that guards it.
    const LOCK: Lock;
    /// Keep a hard link to the last version conductor committed (`.<FILE>.last`), so a change
    /// made by another program since can be told apart (by inode) and described.
    const TRACK_FOREIGN_WRITES: bool = false;
    /// The document when its file does not exist.
    fn empty(now: Timestamp) -> Self;
    /// Parse and check the bytes; an error is `corrupt_state` naming `path`.
    fn decode(path: &Path, bytes: &[u8]) -> Result<Self>;
    /// The bytes written.
    fn encode(&self) -> Vec<u8>;
}

/// An append-only ledger file in the home and the lock that guards it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerFile {
    pub name: &'static str,
    pub lock: Lock,
}

/// `history.jsonl`: finished tasks (the protocol's).
pub const HISTORY: LedgerFile = LedgerFile {
    name: "history.jsonl",
    lock: Lock::Status,
};
/// `conflicts.log`: conflicts, resolutions, forced takeovers, releases (the protocol's).
pub const CONFLICTS: LedgerFile = LedgerFile {
    name: "conflicts.log",
    lock: Lock::Status,
};

/// The name of the link to the last committed version of a tracked document.
pub fn last_committed_name(file: &str) -> String {
    format!(".{file}.last")
}

/// Who wrote a tracked document's file last (see [`Tx::read_tracked`]).
pub enum LastWriter<D> {
    /// conductor (or nobody: there is no file).
    Conductor,
    /// Another program; with the version conductor committed before it, when readable.
    Other(Option<D>),
}

/// One transaction in progress: its locks are held.
pub struct Tx<'s> {
    store: &'s Store,
    now: Timestamp,
    locks: Vec<Lock>,
    writes: Vec<Write>,
    appends: Vec<(LedgerFile, Vec<String>)>,
    events: Vec<NewEvent>,
    /// The bytes each document had when this transaction read it (`None`: no file).
    seen: Vec<(&'static str, Option<Vec<u8>>)>,
}

struct Write {
    file: &'static str,
    lock: Lock,
    bytes: Vec<u8>,
    track: bool,
}

impl<'s> Tx<'s> {
    /// The transaction's clock.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    fn check_held(&self, lock: Lock, what: &str) -> Result<()> {
        if self.locks.contains(&lock) {
            Ok(())
        } else {
            // A programming error, but never a reason to write without the lock.
            Err(Error::invalid(
                "internal",
                format!(
                    "{what} needs {} and the transaction did not take it",
                    lock.file()
                ),
            ))
        }
    }

    /// Read a document (its lock must be held). A missing file is [`Document::empty`].
    pub fn read<D: Document>(&mut self) -> Result<D> {
        self.check_held(D::LOCK, D::FILE)?;
        let path = self.store.home().dir().join(D::FILE);
        let bytes = super::read_bytes(&path)?;
        let doc = match &bytes {
            None => D::empty(self.now),
            Some(b) => D::decode(&path, b)?,
        };
        self.seen.retain(|(f, _)| *f != D::FILE);
        self.seen.push((D::FILE, bytes));
        Ok(doc)
    }

    /// Read a document like [`Tx::read`], except that when its file holds exactly the bytes
    /// of `cached` (what this process wrote last, see [`Tx::staged`]) that document is returned
    /// without decoding it again. Any change by anyone else changes the bytes, so the result is
    /// always what the file holds; a long-running writer (the queue's dispatcher) saves the
    /// parse of a big document on every step.
    pub fn read_cached<D: Document>(&mut self, cached: Option<(Vec<u8>, D)>) -> Result<D> {
        self.check_held(D::LOCK, D::FILE)?;
        let path = self.store.home().dir().join(D::FILE);
        let bytes = super::read_bytes(&path)?;
        let doc = match (&bytes, cached) {
            (None, _) => D::empty(self.now),
            (Some(b), Some((c, doc))) if *b == c => doc,
            (Some(b), _) => D::decode(&path, b)?,
        };
        self.seen.retain(|(f, _)| *f != D::FILE);
        self.seen.push((D::FILE, bytes));
        Ok(doc)
    }

    /// The bytes a document staged by [`Tx::write`] will be committed as.
    pub fn staged<D: Document>(&self) -> Option<&[u8]> {
        self.writes
            .iter()
            .find(|w| w.file == D::FILE)
            .map(|w| w.bytes.as_slice())
    }

    /// Read a tracked document and who wrote its file last: conductor (its file is the one
    /// conductor committed, or there is none), or another program, with the version conductor
    /// committed before that when it can still be read.
    pub fn read_tracked<D: Document>(&mut self) -> Result<(D, LastWriter<D>)> {
        use std::os::unix::fs::MetadataExt;
        let current = self.read::<D>()?;
        let dir = self.store.home().dir();
        let last = dir.join(last_committed_name(D::FILE));
        let Ok(a) = std::fs::metadata(dir.join(D::FILE)) else {
            return Ok((current, LastWriter::Conductor));
        };
        let previous = match std::fs::metadata(&last) {
            Ok(b) if a.ino() == b.ino() && a.dev() == b.dev() => {
                return Ok((current, LastWriter::Conductor));
            }
            // What conductor wrote last is only a reference: if it cannot be read, there is
            // simply nothing to compare with.
            Ok(_) => super::read_bytes(&last)?.and_then(|bytes| D::decode(&last, &bytes).ok()),
            // No record of conductor's last write (a home from before it was kept).
            Err(_) => None,
        };
        Ok((current, LastWriter::Other(previous)))
    }

    /// Replace a document when the transaction commits.
    pub fn write<D: Document>(&mut self, doc: &D) -> Result<()> {
        self.stage(doc, false).map(|_| ())
    }

    /// Replace a document when the transaction commits, unless its bytes are exactly those
    /// this transaction read (so an operation that changed nothing writes nothing, without
    /// keeping a copy of the document to compare). Returns true if it will be written.
    pub fn write_if_changed<D: Document>(&mut self, doc: &D) -> Result<bool> {
        self.stage(doc, true)
    }

    fn stage<D: Document>(&mut self, doc: &D, unless_unchanged: bool) -> Result<bool> {
        self.check_held(D::LOCK, D::FILE)?;
        let bytes = doc.encode();
        self.writes.retain(|w| w.file != D::FILE);
        let unchanged = unless_unchanged
            && self
                .seen
                .iter()
                .any(|(f, b)| *f == D::FILE && b.as_deref() == Some(bytes.as_slice()));
        if !unchanged {
            self.writes.push(Write {
                file: D::FILE,
                lock: D::LOCK,
                bytes,
                track: D::TRACK_FOREIGN_WRITES,
            });
        }
        Ok(!unchanged)
    }

    /// Append a line (without its newline) to a ledger when the transaction commits.
    pub fn append(&mut self, ledger: LedgerFile, line: String) -> Result<()> {
        self.check_held(ledger.lock, ledger.name)?;
        debug_assert!(!line.contains('\n'), "a ledger line is one line");
        match self.appends.iter_mut().find(|(l, _)| *l == ledger) {
            Some((_, lines)) => lines.push(line),
            None => self.appends.push((ledger, vec![line])),
        }
        Ok(())
    }

    /// Append an event to the journal when the transaction commits (the store numbers it).
    pub fn event(&mut self, event: NewEvent) {
        self.events.push(event);
    }
}

impl Store {
    /// Run `f` holding `locks` (taken in the fixed order) and commit what it staged, atomically.
    /// If `f` fails, nothing is written.
    pub fn transaction<T>(
        &self,
        now: Timestamp,
        locks: &[Lock],
        f: impl FnOnce(&mut Tx) -> Result<T>,
    ) -> Result<T> {
        let mut order: Vec<Lock> = locks
            .iter()
            .copied()
            .filter(|l| *l != Lock::Journal)
            .collect();
        order.sort();
        order.dedup();
        let _held: Vec<super::lock::StoreLock> =
            order.iter().map(|l| self.take(*l)).collect::<Result<_>>()?;
        // A transaction that committed and then died must be finished before anyone reads.
        if redo::pending(self.home().dir()) {
            let _journal = self.take(Lock::Journal)?;
            redo::replay(self.home().dir())?;
        }
        super::atomic::remove_stale_temps(self.home().dir(), |name| {
            order.iter().any(|l| l.owns_temp(name))
        });
        let mut tx = Tx {
            store: self,
            now,
            locks: order,
            writes: Vec::new(),
            appends: Vec::new(),
            events: Vec::new(),
            seen: Vec::new(),
        };
        let value = f(&mut tx)?;
        self.commit(tx)?;
        Ok(value)
    }

    /// Take one lock of the home.
    pub(super) fn take(&self, lock: Lock) -> Result<super::lock::StoreLock> {
        let path = self.home().dir().join(lock.file());
        let quiet = self.quiet;
        super::lock::acquire(&path, self.lock_timeout(), &|| {
            if !quiet {
                eprintln!(
                    "Blocking: waiting for the {} lock ({})",
                    lock.purpose(),
                    path.display()
                );
            }
        })
    }

    fn commit(&self, tx: Tx) -> Result<()> {
        let Tx {
            now,
            writes,
            appends,
            events,
            ..
        } = tx;
        if writes.is_empty() && appends.is_empty() && events.is_empty() {
            return Ok(());
        }
        let dir = self.home().dir();
        // Everything that can fail for lack of space happens before the commit point.
        let mut prepared = Vec::new();
        for w in &writes {
            let prefix = w.lock.temp_prefix();
            let tmp = super::atomic::prepare_named(dir, &prefix, &w.bytes)?;
            let shadow = if w.track {
                Some(super::atomic::link_temp(dir, &prefix, &tmp)?)
            } else {
                None
            };
            prepared.push((tmp, shadow, w.file));
        }
        let retention = if events.is_empty() {
            None
        } else {
            Some(journal::Retention::from_config(&self.config()?))
        };
        let _journal = self.take(Lock::Journal)?;
        redo::replay(dir)?;
        let mut record = redo::Record::default();
        for (tmp, shadow, file) in &prepared {
            record.renames.push((tmp.clone(), file.to_string()));
            if let Some(shadow) = shadow {
                record
                    .renames
                    .push((shadow.clone(), last_committed_name(file)));
            }
        }
        for (ledger, lines) in &appends {
            let path = dir.join(ledger.name);
            ledger::repair(&path)?;
            record.appends.push(redo::Append {
                file: ledger.name.to_string(),
                at: file_len(&path)?,
                data: join_lines(lines),
            });
        }
        if let Some(retention) = retention {
            let lines = journal::number(dir, retention, now, &events)?;
            let path = dir.join(journal::ACTIVE);
            ledger::repair(&path)?;
            record.appends.push(redo::Append {
                file: journal::ACTIVE.to_string(),
                at: file_len(&path)?,
                data: join_lines(&lines),
            });
        }
        let remove_temps = || {
            for (tmp, shadow, _) in &prepared {
                let _ = std::fs::remove_file(dir.join(tmp));
                if let Some(s) = shadow {
                    let _ = std::fs::remove_file(dir.join(s));
                }
            }
        };
        let f = match redo::write(dir, &record) {
            Ok(f) => f,
            Err(e) => {
                // Not committed (a torn record is no record): nothing else was touched.
                redo::clear_file(dir);
                remove_temps();
                return Err(e);
            }
        };
        match redo::apply(dir, &record) {
            Ok(()) => {
                redo::clear(&f);
                Ok(())
            }
            // Out of space while appending, before any rename: abandon the transaction whole.
            Err(redo::ApplyError::Appending(e)) => {
                redo::undo_appends(dir, &record);
                redo::clear(&f);
                remove_temps();
                Err(e)
            }
            // Committed but not finished: the record stays, and the next transaction (or
            // reader) finishes it before it reads anything.
            Err(redo::ApplyError::Finishing(e)) => Err(e),
        }
    }
}

fn file_len(path: &Path) -> Result<u64> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io("inspect", path, e)),
    }
}

fn join_lines(lines: &[String]) -> String {
    let mut s = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}
