//! Transactions over any number of documents and ledgers in the home.
//!
//! Every domain keeps its live state in [`Document`]s (one JSON file each, with a typed model)
//! and its finished work in append-only [`LedgerFile`]s; all of them append to the one event
//! journal. A transaction names the [`Lock`]s it needs; they are taken in one fixed order (the
//! order of [`Lock`]'s variants, the journal's lock always last), so two transactions can never
//! deadlock, and transactions of different domains run side by side until their short commit.
//!
//! The commit (see [`super::redo`]): new documents are written to temp files under the domain
//! locks; then, under the journal lock, the events are numbered, one record carrying every
//! replacement (with its bytes) and every append is added to the commit log and synced (the
//! commit point, the commit's one durable sync), and the appends and renames are done (the
//! journal last), unsynced: the log can redo them after a crash or a power cut.
//!
//! The interface is the same for a remote backend (issue 12, etcd): a document is a key, a
//! ledger line and an event are keys under a prefix numbered in one sequence, and a commit is one
//! etcd transaction that compares the revisions of the documents read and puts everything
//! staged. There the locks become that comparison, and a transaction whose comparison fails is
//! run again from its reads, which is why operations stay pure functions of what they read.

use std::path::Path;

use super::{Store, journal, ledger, redo};
use crate::error::{Error, Result};
use crate::event::NewEvent;
use crate::time::Timestamp;

/// The locks of the home, in the order they are always taken. Each guards the documents and
/// ledgers of one domain; the file names are fixed (`status.lock` is the protocol's own, which
/// the original plugin's jq recipes take too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lock {
    /// `status.lock`: status.json, history.jsonl, conflicts.log.
    Status,
    /// `runtime.lock`: the agent runtime's documents and ledgers (the file keeps its name).
    Agents,
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
        Lock::Agents,
        Lock::Workflows,
        Lock::Queue,
        Lock::Journal,
    ];

    /// What the lock guards, in messages.
    pub fn purpose(self) -> &'static str {
        match self {
            Lock::Status => "state",
            Lock::Agents => "runtime",
            Lock::Workflows => "workflows",
            Lock::Queue => "queue",
            Lock::Journal => "journal",
        }
    }

    /// The lock file's name in the home.
    pub fn file(self) -> &'static str {
        match self {
            Lock::Status => "status.lock",
            Lock::Agents => "runtime.lock",
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
    /// Decode for a transaction, which usually changes a small part of what it reads: a
    /// document may keep what is likely left unchanged as its text (by default, [`decode`]).
    ///
    /// [`decode`]: Document::decode
    fn decode_for_update(path: &Path, bytes: &[u8]) -> Result<Self> {
        Self::decode(path, bytes)
    }
    /// The bytes written.
    fn encode(&self) -> Vec<u8>;
    /// Kept on the shared store in the paged layout ([`crate::split`]): a head and the entries
    /// of one big map, each transaction writing only the pages whose entries changed.
    const PAGED: bool = false;
    /// The head and the entries, for the paged layout.
    fn split(&self) -> crate::split::Split {
        unreachable!("{} is not paged", Self::FILE)
    }
    /// The document from its head and entries (the paged layout); an error is `corrupt_state`
    /// naming `path`.
    fn join(
        path: &Path,
        _head: &[u8],
        _entries: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<Self> {
        Err(Error::Internal(format!("{} is not paged", path.display())))
    }
}

/// An append-only ledger file in the home and the lock that guards it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerFile {
    pub name: &'static str,
    pub lock: Lock,
}

/// A file of the home whose name is only known at run time (the runtime's per-agent files),
/// under a lock. Its path is relative to the home and made of checked components (letters,
/// digits, `_ . -`, not starting with `.`), so it can never leave the home or name a hidden
/// file; missing directories are created 0700 when a transaction first writes there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomePath {
    rel: String,
    lock: Lock,
}

impl HomePath {
    /// The path `parts[0]/parts[1]/...` under `lock`; an unsafe component is `invalid_input`.
    pub fn new(lock: Lock, parts: &[&str]) -> Result<HomePath> {
        for p in parts {
            let ok = !p.is_empty()
                && p.len() <= 128
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !ok {
                return Err(Error::refused(
                    crate::error::Refusal::InvalidInput,
                    format!(
                        "`{}` cannot name a file in the home",
                        crate::text::printable(p)
                    ),
                ));
            }
        }
        if parts.is_empty() {
            return Err(Error::refused(
                crate::error::Refusal::InvalidInput,
                "an empty path",
            ));
        }
        Ok(HomePath {
            rel: parts.join("/"),
            lock,
        })
    }

    /// The path relative to the home.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The lock that guards it.
    pub fn lock(&self) -> Lock {
        self.lock
    }
}

/// The name of the link to the last committed version of a tracked document.
pub fn last_committed_name(file: &str) -> String {
    redo::shadow_name(file)
}

/// Who wrote a tracked document's file last (see [`Tx::read_tracked`]).
pub enum LastWriter<D> {
    /// conductor (or nobody: there is no file).
    Conductor,
    /// Another program; with the version conductor committed before it, when readable.
    Other(Option<D>),
}

/// The operations one etcd transaction may hold (etcd's `--max-txn-ops` default).
const MAX_TXN_OPS: usize = 128;

/// One transaction in progress: its locks are held.
pub struct Tx<'s> {
    store: &'s Store,
    now: Timestamp,
    locks: Vec<Lock>,
    writes: Vec<Write>,
    /// `(file relative to the home, lines)`.
    appends: Vec<(String, Vec<String>)>,
    /// The ledgers among `appends` (rotated when due, see `ledger_rotate`).
    ledgers: Vec<&'static str>,
    events: Vec<NewEvent>,
    /// The bytes each document had when this transaction read it (`None`: no file).
    seen: Vec<(&'static str, Option<Vec<u8>>)>,
    /// With a shared store: the revision of each document read (0: absent), compared at commit.
    revs: Vec<(String, i64)>,
    /// With a shared store: the numbering record, read with the first document (one request).
    meta: Option<Option<super::etcd::Kv>>,
    /// With a shared store: lease records compared at commit, `(key, revision)` (0: absent).
    fences: Vec<(String, i64)>,
    /// With a shared store: the paged documents read, as the store held them.
    paged: Vec<PagedSeen>,
    /// With a shared store: what committing each paged document written changes.
    paged_writes: Vec<PagedWrite>,
}

/// A paged document as a transaction read it (see [`crate::split`]).
pub(crate) struct PagedSeen {
    file: &'static str,
    /// The revisions compared at commit: the head's and the `doc/` key's (0: absent).
    head_rev: i64,
    doc_rev: i64,
    /// The `doc/` key holds the tombstone already.
    tombstoned: bool,
    /// Only some pages were read ([`Tx::read_head`]): pages are never merged then (a page not
    /// read may lie between two that were).
    partial: bool,
    /// The revision the head was read at: pages loaded later are read there.
    revision: i64,
    pub(crate) head: Option<Vec<u8>>,
    pages: std::collections::BTreeMap<String, crate::split::Page>,
}

/// A paged document as the shared store holds it (see [`read_paged`]).
pub(crate) enum Paged<D> {
    Paged(D, PagedSeen),
    /// Not paged yet: the whole document in its `doc/` key, as an older conductor wrote it.
    Whole(super::etcd::Kv),
}

/// Interpret what [`super::etcd::Etcd::read_paged`] read of `D`.
pub(crate) fn read_paged<D: Document>(
    r: &super::etcd::Etcd,
    read: super::etcd::PagedRead,
    now: Timestamp,
) -> Result<Paged<D>> {
    let super::etcd::PagedRead {
        doc,
        head,
        pages,
        revision,
        ..
    } = read;
    let tombstoned = doc
        .as_ref()
        .is_some_and(|kv| crate::split::is_tombstone(&kv.value));
    let doc_rev = doc.as_ref().map_or(0, |kv| kv.mod_revision);
    match (&head, doc) {
        (None, Some(kv)) if !tombstoned => return Ok(Paged::Whole(kv)),
        (None, Some(kv)) => {
            return Err(super::corrupt(
                Path::new(&kv.key),
                format!(
                    "says the document moved to the paged layout, but its head `{}` is missing: restore it from a backup (`conductor import`)",
                    r.split_head_key(D::FILE)
                ),
            ));
        }
        (Some(_), Some(kv)) if !tombstoned => {
            return Err(super::corrupt(
                Path::new(&kv.key),
                "was rewritten by an older conductor after this prefix moved to the paged layout (`conductor migrate-store`): that change is not in the pages, so nothing was read or changed; stop and upgrade the older conductor, then delete this key (`etcdctl del KEY`: the pages are the state)",
            ));
        }
        _ => {}
    }
    let mut entries = std::collections::BTreeMap::new();
    let mut by_name = std::collections::BTreeMap::new();
    for (name, page) in decode_pages(r, D::FILE, pages)? {
        entries.extend(page.iter().map(|(k, v)| (k.clone(), v.clone())));
        by_name.insert(name, page);
    }
    let doc = match &head {
        // Pages without a head are what an interrupted `migrate-store` left: not the state
        // (the next write replaces them).
        None => D::empty(now),
        Some(h) => D::join(Path::new(&h.key), &h.value, entries)?,
    };
    Ok(Paged::Paged(
        doc,
        PagedSeen {
            file: D::FILE,
            head_rev: head.as_ref().map_or(0, |kv| kv.mod_revision),
            doc_rev,
            tombstoned,
            partial: false,
            revision,
            head: head.map(|kv| kv.value),
            pages: by_name,
        },
    ))
}

/// Pages as the store holds them, each by its name (its key without the pages' prefix).
fn decode_pages(
    r: &super::etcd::Etcd,
    file: &str,
    pages: Vec<super::etcd::Kv>,
) -> Result<Vec<(String, crate::split::Page)>> {
    let prefix = r.split_page_prefix(file);
    pages
        .into_iter()
        .map(|kv| {
            let page = crate::split::decode_page(&kv.value)
                .map_err(|e| super::corrupt(Path::new(&kv.key), e))?;
            let name = kv.key.strip_prefix(&prefix).unwrap_or(&kv.key).to_string();
            Ok((name, page))
        })
        .collect()
}

/// What committing a paged document puts and deletes.
struct PagedWrite {
    file: &'static str,
    head: Vec<u8>,
    changes: Vec<crate::split::PageChange>,
}

struct Write {
    file: String,
    lock: Lock,
    bytes: Vec<u8>,
    track: bool,
}

impl<'s> Tx<'s> {
    fn new(store: &'s Store, now: Timestamp, locks: Vec<Lock>) -> Tx<'s> {
        Tx {
            store,
            now,
            locks,
            writes: Vec::new(),
            appends: Vec::new(),
            ledgers: Vec::new(),
            events: Vec::new(),
            seen: Vec::new(),
            revs: Vec::new(),
            meta: None,
            fences: Vec::new(),
            paged: Vec::new(),
            paged_writes: Vec::new(),
        }
    }

    /// Commit only while `lease` is held: its record still the one written when it was taken
    /// (see [`crate::lease`]). When it is not, the transaction fails with `lease_lost` and
    /// writes nothing.
    pub fn fence(&mut self, lease: &crate::Lease) {
        self.fences.push((lease.key.clone(), lease.revision));
    }

    /// Commit only while nobody holds the lease `name` (it expired, was given up, or was never
    /// taken). On a file home there are no leases: nothing is compared.
    pub fn unless_held(&mut self, name: &str) {
        if let Some(r) = self.store.backend.etcd() {
            self.fences.push((r.lease_key(name), 0));
        }
    }

    /// The transaction's clock.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    fn check_held(&self, lock: Lock, what: &str) -> Result<()> {
        if self.locks.contains(&lock) {
            Ok(())
        } else {
            // A programming error, but never a reason to write without the lock.
            Err(Error::Internal(format!(
                "{what} needs {} and the transaction did not take it",
                lock.file()
            )))
        }
    }

    /// Read a document (its lock must be held). A missing file is [`Document::empty`].
    pub fn read<D: Document>(&mut self) -> Result<D> {
        self.check_held(D::LOCK, D::FILE)?;
        let path = self.store.home().dir().join(D::FILE);
        let bytes = match self.store.backend.etcd() {
            Some(r) if D::PAGED => {
                // The document this transaction will write is the partial one: a whole copy
                // would be planned against the pages of the partial read.
                if self.paged.iter().any(|p| p.file == D::FILE && p.partial) {
                    return Err(Error::Internal(format!(
                        "{} was read in part (read_head); read it whole in another transaction",
                        D::FILE
                    )));
                }
                let read = r.read_paged(D::FILE)?;
                if self.meta.is_none() {
                    self.meta = Some(read.meta.clone());
                }
                match read_paged::<D>(r, read, self.now)? {
                    Paged::Paged(doc, seen) => {
                        self.paged.retain(|p| p.file != D::FILE);
                        self.paged.push(seen);
                        return Ok(doc);
                    }
                    // Not paged yet (written by an older conductor): the one key, as before.
                    Paged::Whole(kv) => {
                        if !self.revs.iter().any(|(f, _)| f == D::FILE) {
                            self.revs.push((D::FILE.to_string(), kv.mod_revision));
                        }
                        Some(kv.value)
                    }
                }
            }
            Some(r) => {
                let kv = if self.meta.is_none() {
                    let mut both = r.get_many(&[r.doc_key(D::FILE), r.meta_key()])?;
                    self.meta = Some(both.pop().flatten());
                    both.pop().flatten()
                } else {
                    r.get(&r.doc_key(D::FILE))?
                };
                // The first read's revision is the one compared: what was decided on it.
                if !self.revs.iter().any(|(f, _)| f == D::FILE) {
                    self.revs.push((
                        D::FILE.to_string(),
                        kv.as_ref().map_or(0, |kv| kv.mod_revision),
                    ));
                }
                kv.map(|kv| kv.value)
            }
            None => super::read_bytes(&path)?,
        };
        let doc = match &bytes {
            None => D::empty(self.now),
            Some(b) => D::decode_for_update(&path, b)?,
        };
        self.seen.retain(|(f, _)| *f != D::FILE);
        self.seen.push((D::FILE, bytes));
        Ok(doc)
    }

    /// Read a document like [`Tx::read`], except that a paged document of a shared store
    /// ([`crate::split`]) comes with none of its entries: the caller loads those it needs with
    /// [`Tx::load_entries`] before deciding anything on them. (Everywhere else this is
    /// [`Tx::read`]: the document is whole.) Only the entries loaded can be changed; a commit
    /// still compares the head, so what was decided on stays true.
    pub fn read_head<D: Document>(&mut self) -> Result<D> {
        if !D::PAGED {
            return self.read();
        }
        let Some(r) = self.store.backend.etcd() else {
            return self.read();
        };
        self.check_held(D::LOCK, D::FILE)?;
        let read = r.read_paged_with(D::FILE, false)?;
        if self.meta.is_none() {
            self.meta = Some(read.meta.clone());
        }
        match read_paged::<D>(r, read, self.now)? {
            // No state yet, but maybe pages an interrupted migration left: a whole read, whose
            // plan deletes them.
            Paged::Paged(_, seen) if seen.head.is_none() => self.read(),
            Paged::Paged(doc, mut seen) => {
                seen.partial = true;
                self.paged.retain(|p| p.file != D::FILE);
                self.paged.push(seen);
                Ok(doc)
            }
            // Not paged yet: read whole, as before.
            Paged::Whole(_) => self.read(),
        }
    }

    /// The entries of a paged document read by [`Tx::read_head`] that lie in the pages holding
    /// `keys` or anything below `under` (prefixes), at the revision the head was read; the
    /// entries of pages loaded before are not returned again. Empty when the document was read
    /// whole.
    pub fn load_entries<D: Document>(
        &mut self,
        keys: &[String],
        under: &[String],
    ) -> Result<std::collections::BTreeMap<String, serde_json::Value>> {
        let mut out = std::collections::BTreeMap::new();
        let Some(r) = self.store.backend.etcd() else {
            return Ok(out);
        };
        let Some(seen) = self
            .paged
            .iter_mut()
            .find(|p| p.file == D::FILE && p.partial)
        else {
            return Ok(out);
        };
        if seen.head.is_none() {
            return Ok(out);
        }
        // Lookups often land on one page (a key and the directories above it): each page
        // is decoded once.
        let prefix = r.split_page_prefix(D::FILE);
        let mut found = r.pages_around(D::FILE, keys, under, seen.revision)?;
        found.sort_by(|a, b| a.key.cmp(&b.key));
        found.dedup_by(|a, b| a.key == b.key);
        found.retain(|kv| {
            !seen
                .pages
                .contains_key(kv.key.strip_prefix(&prefix).unwrap_or(&kv.key))
        });
        for (name, page) in decode_pages(r, D::FILE, found)? {
            out.extend(page.iter().map(|(k, v)| (k.clone(), v.clone())));
            seen.pages.insert(name, page);
        }
        Ok(out)
    }

    /// Read a document like [`Tx::read`], except that when its file holds exactly the bytes
    /// of `cached` (what this process wrote last, see [`Tx::staged`]) that document is returned
    /// without decoding it again. Any change by anyone else changes the bytes, so the result is
    /// always what the file holds; a long-running writer (the queue's dispatcher) saves the
    /// parse of a big document on every step.
    pub fn read_cached<D: Document>(&mut self, cached: Option<(Vec<u8>, D)>) -> Result<D> {
        if !self.store.state_in_files() {
            return self.read();
        }
        self.check_held(D::LOCK, D::FILE)?;
        let path = self.store.home().dir().join(D::FILE);
        let bytes = super::read_bytes(&path)?;
        let doc = match (&bytes, cached) {
            (None, _) => D::empty(self.now),
            (Some(b), Some((c, doc))) if *b == c => doc,
            (Some(b), _) => D::decode_for_update(&path, b)?,
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
        if !self.store.other_writers() {
            // Only conductor writes the shared store's keys.
            return Ok((current, LastWriter::Conductor));
        }
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
        if D::PAGED
            && self.store.backend.etcd().is_some()
            && !self.revs.iter().any(|(f, _)| f == D::FILE)
        {
            return self.stage_paged(doc, unless_unchanged);
        }
        let bytes = doc.encode();
        self.writes.retain(|w| w.file != D::FILE);
        let unchanged = unless_unchanged
            && self
                .seen
                .iter()
                .any(|(f, b)| *f == D::FILE && b.as_deref() == Some(bytes.as_slice()));
        if !unchanged {
            self.writes.push(Write {
                file: D::FILE.to_string(),
                lock: D::LOCK,
                bytes,
                track: D::TRACK_FOREIGN_WRITES,
            });
        }
        Ok(!unchanged)
    }

    /// Stage a paged document: its head and the pages whose entries changed since it was read
    /// (a document written without being read is read first: its pages are needed).
    fn stage_paged<D: Document>(&mut self, doc: &D, unless_unchanged: bool) -> Result<bool> {
        if !self.paged.iter().any(|p| p.file == D::FILE) {
            let _ = self.read::<D>()?;
            if self.revs.iter().any(|(f, _)| f == D::FILE) {
                return self.stage(doc, unless_unchanged);
            }
        }
        let seen = self
            .paged
            .iter()
            .find(|p| p.file == D::FILE)
            .expect("read above");
        let split = doc.split();
        let changes = crate::split::plan(&seen.pages, &split.entries, !seen.partial);
        self.paged_writes.retain(|w| w.file != D::FILE);
        let unchanged = unless_unchanged
            && changes.is_empty()
            && seen.head.as_deref() == Some(split.head.as_slice());
        if !unchanged {
            self.paged_writes.push(PagedWrite {
                file: D::FILE,
                head: split.head,
                changes,
            });
        }
        Ok(!unchanged)
    }

    /// Append a line (without its newline) to a ledger when the transaction commits.
    pub fn append(&mut self, ledger: LedgerFile, line: String) -> Result<()> {
        self.check_held(ledger.lock, ledger.name)?;
        if !self.ledgers.contains(&ledger.name) {
            self.ledgers.push(ledger.name);
        }
        self.push_line(ledger.name, line);
        Ok(())
    }

    fn push_line(&mut self, file: &str, line: String) {
        debug_assert!(!line.contains('\n'), "a ledger line is one line");
        match self.appends.iter_mut().find(|(l, _)| l == file) {
            Some((_, lines)) => lines.push(line),
            None => self.appends.push((file.to_string(), vec![line])),
        }
    }

    /// Replace a file named at run time with `bytes` when the transaction commits (atomically:
    /// a temp file renamed into place).
    pub fn write_at(&mut self, file: &HomePath, bytes: Vec<u8>) -> Result<()> {
        self.check_held(file.lock, file.rel())?;
        self.writes.retain(|w| w.file != file.rel);
        self.writes.push(Write {
            file: file.rel.clone(),
            lock: file.lock,
            bytes,
            track: false,
        });
        Ok(())
    }

    /// True when a file named at run time exists or is staged (its lock must be held): a `stat`,
    /// not a read. With a shared store its key is read (and its revision compared at commit).
    pub fn exists_at(&mut self, file: &HomePath) -> Result<bool> {
        self.check_held(file.lock, file.rel())?;
        if self.writes.iter().any(|w| w.file == file.rel) {
            return Ok(true);
        }
        if self.store.backend.etcd().is_some() {
            return Ok(self.read_at(file)?.is_some());
        }
        Ok(std::fs::symlink_metadata(self.store.home().dir().join(&file.rel)).is_ok())
    }

    /// Read a file named at run time (its lock must be held; `None`: no file). With a shared
    /// store, its revision is compared at commit like a document's.
    pub fn read_at(&mut self, file: &HomePath) -> Result<Option<Vec<u8>>> {
        self.check_held(file.lock, file.rel())?;
        match self.store.backend.etcd() {
            Some(r) => {
                let kv = r.get(&r.doc_key(&file.rel))?;
                if !self.revs.iter().any(|(f, _)| *f == file.rel) {
                    self.revs.push((
                        file.rel.clone(),
                        kv.as_ref().map_or(0, |kv| kv.mod_revision),
                    ));
                }
                Ok(kv.map(|kv| kv.value))
            }
            None => super::read_bytes(&self.store.home().dir().join(&file.rel)),
        }
    }

    /// Append lines (without their newlines) to a JSON Lines file named at run time, keeping it
    /// under `cap` bytes: when the lines would take it past `cap`, the file is instead replaced
    /// (atomically) by its newest whole lines that fit in half of `cap`, followed by the new
    /// ones. A torn last line (a crash mid-append elsewhere) is dropped then.
    pub fn append_capped(&mut self, file: &HomePath, lines: &[String], cap: u64) -> Result<()> {
        self.check_held(file.lock, file.rel())?;
        if lines.is_empty() {
            return Ok(());
        }
        let path = self.store.home().dir().join(&file.rel);
        // Already rewritten in this transaction: that staged version is the base.
        let rewritten = self.writes.iter().position(|w| w.file == file.rel);
        // A shared store keeps such a file as one key, always rewritten whole.
        let remote = self.store.backend.etcd().cloned();
        if rewritten.is_none() && remote.is_none() {
            let staged: u64 = self
                .appends
                .iter()
                .filter(|(f, _)| *f == file.rel)
                .flat_map(|(_, l)| l.iter())
                .chain(lines)
                .map(|l| l.len() as u64 + 1)
                .sum();
            if file_len(&path)? + staged <= cap {
                for l in lines {
                    self.push_line(&file.rel, l.clone());
                }
                return Ok(());
            }
        }
        let old = match (rewritten, &remote) {
            (Some(i), _) => self.writes.remove(i).bytes,
            (None, Some(r)) => {
                let kv = r.get(&r.doc_key(&file.rel))?;
                // Two loops of one agent on two hosts must not drop each other's lines.
                if !self.revs.iter().any(|(f, _)| *f == file.rel) {
                    self.revs.push((
                        file.rel.clone(),
                        kv.as_ref().map_or(0, |kv| kv.mod_revision),
                    ));
                }
                kv.map(|kv| kv.value).unwrap_or_default()
            }
            (None, None) => super::read_bytes(&path)?.unwrap_or_default(),
        };
        let mut keep: Vec<String> = String::from_utf8_lossy(&old)
            .split_terminator('\n')
            .map(str::to_string)
            .collect();
        if !old.is_empty() && !old.ends_with(b"\n") {
            keep.pop();
        }
        // Lines staged for this file earlier in the transaction go with the rewrite.
        if let Some(i) = self.appends.iter().position(|(f, _)| *f == file.rel) {
            keep.extend(self.appends.remove(i).1);
        }
        keep.extend(lines.iter().cloned());
        let total: u64 = keep.iter().map(|l| l.len() as u64 + 1).sum();
        let mut start = 0;
        if total > cap {
            let mut budget = cap / 2;
            start = keep.len();
            while start > 0 && (keep[start - 1].len() as u64) < budget {
                budget -= keep[start - 1].len() as u64 + 1;
                start -= 1;
            }
        }
        self.write_at(file, join_lines(&keep[start..]).into_bytes())
    }

    /// Append an event to the journal when the transaction commits (the store numbers it).
    pub fn event(&mut self, event: NewEvent) {
        self.events.push(event);
    }
}

impl Store {
    /// Run `f` holding `locks` (taken in the fixed order) and commit what it staged, atomically.
    /// If `f` fails, nothing is written.
    pub fn transaction<T, E: From<Error>>(
        &self,
        now: Timestamp,
        locks: &[Lock],
        mut f: impl FnMut(&mut Tx) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(r) = self.backend.etcd() {
            return self.transaction_remote(r, now, locks, f);
        }
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
        self.settle()?;
        super::atomic::remove_stale_temps(self.home().dir(), |name| {
            order.iter().any(|l| l.owns_temp(name))
        });
        let mut tx = Tx::new(self, now, order);
        let value = f(&mut tx)?;
        self.commit(tx)?;
        Ok(value)
    }

    /// [`Store::transaction`] against the shared store: optimistic. The closure runs on what
    /// it reads; the commit is one etcd transaction that writes everything staged only if every
    /// document read (and the numbering record, when something is appended) is still at the
    /// revision read. Otherwise nothing was written and the closure runs again on fresh reads,
    /// which is why operations are pure functions of what they read. Gives up with
    /// `lock_timeout` after the lock timeout of contention.
    fn transaction_remote<T, E: From<Error>>(
        &self,
        r: &super::etcd::Etcd,
        now: Timestamp,
        locks: &[Lock],
        mut f: impl FnMut(&mut Tx) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut started = std::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            let tried = std::time::Instant::now();
            let mut tx = Tx::new(self, now, locks.to_vec());
            let value = f(&mut tx)?;
            match self.commit_remote(r, tx)? {
                Outcome::Committed => return Ok(value),
                Outcome::Conflict => {}
                // An unanswered commit that can no longer land: that was an outage, not
                // contention; the clock for giving up starts again.
                Outcome::NeverLanded => started = std::time::Instant::now(),
            }
            attempt += 1;
            if started.elapsed() > self.lock_timeout() {
                return Err(Error::LockTimeout {
                    secs: self.lock_timeout().as_secs_f64(),
                    path: std::path::PathBuf::from(self.location()),
                    holder: Some(format!("{attempt} concurrent writers won first")),
                }
                .into());
            }
            // Back off, randomly, so racing writers do not collide again in step: up to as
            // long as one attempt took, doubled with each conflict (capped at 2 s). A fixed few
            // milliseconds, shorter than an attempt, had every writer of a busy team retry into
            // the same collision (the 1,000-agent simulation: 27.7 attempts per commit).
            let one = tried.elapsed().as_micros().max(1_000) as u64;
            let most = (one << attempt.min(6)).min(2_000_000);
            let us = rand::random_range(0..most);
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }

    /// Commit a transaction's staged changes to the shared store.
    fn commit_remote(&self, r: &super::etcd::Etcd, tx: Tx) -> Result<Outcome> {
        let Tx {
            now,
            writes,
            appends,
            events,
            revs,
            meta,
            fences,
            paged,
            paged_writes,
            ..
        } = tx;
        if writes.is_empty() && appends.is_empty() && events.is_empty() && paged_writes.is_empty() {
            return Ok(Outcome::Committed);
        }
        let mut compares: Vec<(String, i64)> =
            revs.iter().map(|(f, rev)| (r.doc_key(f), *rev)).collect();
        compares.extend(fences.iter().cloned());
        // A paged document is compared by its head, which every commit of it rewrites (and its
        // `doc/` key, which an older conductor would write).
        for p in &paged {
            compares.push((r.split_head_key(p.file), p.head_rev));
            compares.push((r.doc_key(p.file), p.doc_rev));
        }
        // What tells, after an unanswered commit, whether it landed: the first document
        // written (and the revision it was compared at), or the key of this transaction's
        // events, whose bytes (random event ids) no other transaction writes.
        let mut probe: Option<Probe> = writes.first().map(|w| Probe {
            key: r.doc_key(&w.file),
            bytes: w.bytes.clone(),
            compared: compares
                .iter()
                .find(|(k, _)| *k == r.doc_key(&w.file))
                .map(|c| c.1),
        });
        let mut deletes: Vec<(String, String)> = Vec::new();
        let mut puts: Vec<(String, Vec<u8>)> = writes
            .into_iter()
            .map(|w| (r.doc_key(&w.file), w.bytes))
            .collect();
        for w in paged_writes {
            let seen = paged.iter().find(|p| p.file == w.file);
            // What tells whether an unanswered commit landed: a random mark it writes (two
            // commits may leave the same head, say within one second).
            if probe.is_none() {
                let mark = format!("{:016x}", rand::random::<u64>()).into_bytes();
                let key = format!("{}commit", r.split_root(w.file));
                puts.push((key.clone(), mark.clone()));
                probe = Some(Probe {
                    key,
                    bytes: mark,
                    compared: None,
                });
            }
            if !seen.is_some_and(|p| p.tombstoned) {
                puts.push((
                    r.doc_key(w.file),
                    crate::split::tombstone(&r.split_root(w.file)),
                ));
            }
            puts.push((r.split_head_key(w.file), w.head));
            let prefix = r.split_page_prefix(w.file);
            for c in w.changes {
                match c {
                    crate::split::PageChange::Put(name, bytes) => {
                        puts.push((format!("{prefix}{name}"), bytes))
                    }
                    crate::split::PageChange::Delete(name) => {
                        let key = format!("{prefix}{name}");
                        deletes.push((key.clone(), format!("{key}\0")));
                    }
                    crate::split::PageChange::DeleteRange(first, last) => {
                        deletes.push((format!("{prefix}{first}"), format!("{prefix}{last}\0")));
                    }
                }
            }
        }
        if !appends.is_empty() || !events.is_empty() {
            let meta = match meta {
                Some(m) => m,
                None => r.get(&r.meta_key())?,
            };
            let (mut event, mut line) = match &meta {
                Some(kv) => journal::parse_meta(r, &kv.value)?,
                None => (0, 0),
            };
            compares.push((r.meta_key(), meta.map_or(0, |kv| kv.mod_revision)));
            // One key per ledger and one for the events, each holding this transaction's
            // lines: a transaction is a handful of operations (etcd allows 128), however many
            // files a claim or a release names.
            for (ledger, lines) in appends {
                puts.push((
                    r.ledger_key(&ledger, line + 1),
                    lines.join("\n").into_bytes(),
                ));
                line += lines.len() as u64;
            }
            let first = event;
            let encoded = journal::encode(event, now, &events);
            if !encoded.is_empty() {
                let bytes = encoded.join("\n").into_bytes();
                probe = Some(Probe {
                    key: r.journal_key(event + 1),
                    bytes: bytes.clone(),
                    compared: Some(0),
                });
                puts.push((r.journal_key(event + 1), bytes));
                event += encoded.len() as u64;
            }
            // Retention: now and then (every `keep / 4` events, at most 256), drop the events
            // older than the newest `keep`.
            let keep = journal::remote_keep_events();
            let step = (keep / 4).clamp(1, 256);
            if event > keep && first / step != event / step {
                deletes.push((r.journal_key(0), r.journal_key(event - keep + 1)));
            }
            puts.push((
                r.meta_key(),
                serde_json::json!({ "event": event, "line": line })
                    .to_string()
                    .into_bytes(),
            ));
        }
        // etcd's --max-txn-ops (128 by default): refused before anything is sent.
        if puts.len() + deletes.len() > MAX_TXN_OPS {
            return Err(Error::Refused {
                reason: crate::error::Refusal::StoreRefused,
                message: format!(
                    "this change would write {} keys of the shared store in one transaction, more than the {MAX_TXN_OPS} etcd allows (--max-txn-ops); nothing was changed: claim or release fewer files at once",
                    puts.len() + deletes.len()
                ),
            });
        }
        match r.txn(&compares, &puts, &deletes) {
            Ok(true) => {
                super::failpoint::hit("etcd.committed");
                Ok(Outcome::Committed)
            }
            Ok(false) => {
                // A fence that no longer holds fails the transaction: running it again would
                // fail the same way.
                if !fences.is_empty() {
                    let keys: Vec<String> = fences.iter().map(|(k, _)| k.clone()).collect();
                    let now = r.get_many(&keys)?;
                    for ((key, rev), kv) in fences.iter().zip(now) {
                        let found = kv.map_or(0, |kv| kv.mod_revision);
                        if found != *rev {
                            return Err(Error::LeaseLost {
                                store: r.url().to_string(),
                                name: self.lease_name_of(key),
                                detail: if *rev == 0 {
                                    "it is held (its holder is alive): nothing was written".into()
                                } else {
                                    "it expired, or was revoked: nothing was written under it"
                                        .into()
                                },
                            });
                        }
                    }
                }
                Ok(Outcome::Conflict)
            }
            Err(
                e @ Error::StoreUnavailable {
                    maybe_applied: true,
                    ..
                },
            ) => match probe {
                Some(p) => match p.settle(r, e)? {
                    true => Ok(Outcome::Committed),
                    false => Ok(Outcome::NeverLanded),
                },
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Take one lock of the home.
    pub(super) fn take(&self, lock: Lock) -> Result<super::lock::StoreLock> {
        let path = self.home().dir().join(lock.file());
        let timeout = self.lock_timeout();
        super::lock::acquire(&path, timeout, &|| {
            if let Some(notes) = &self.on_wait {
                notes(&super::LockWait {
                    purpose: lock.purpose(),
                    path: path.clone(),
                    timeout,
                });
            }
        })
    }

    fn commit(&self, tx: Tx) -> Result<()> {
        let Tx {
            now,
            writes,
            appends,
            ledgers,
            events,
            seen,
            ..
        } = tx;
        if writes.is_empty() && appends.is_empty() && events.is_empty() {
            return Ok(());
        }
        let dir = self.home().dir();
        // Everything that can fail for lack of space happens before the commit point, and a
        // failure there leaves nothing behind: the guards remove the directories made and the
        // temp files written unless the commit point is passed.
        let mut record = redo::Record::default();
        let mut new_dirs = super::atomic::NewDirs::new();
        let mut temps = super::atomic::Temps::new(dir);
        // Per-agent files live in subdirectories, created (private) before anything is staged.
        for target in writes
            .iter()
            .map(|w| &w.file)
            .chain(appends.iter().map(|(f, _)| f))
        {
            if let Some(parent) = Path::new(target)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
            {
                new_dirs.create(&dir.join(parent))?;
            }
        }
        // Not synced: the commit log carries the same bytes (see `redo`), a big document's as
        // changes to the version this transaction read when the log holds that version.
        for w in writes {
            let base = seen
                .iter()
                .find(|(f, _)| *f == w.file)
                .and_then(|(_, b)| b.as_deref());
            let prefix = w.lock.temp_prefix();
            let tmp = super::atomic::prepare_named(dir, &prefix, &w.bytes, false)?;
            temps.names.push(tmp.clone());
            let shadow = if w.track {
                let s = super::atomic::link_temp(dir, &prefix, &tmp)?;
                temps.names.push(s.clone());
                Some(s)
            } else {
                None
            };
            record
                .writes
                .push(redo::Replace::new(tmp, w.file, shadow, w.bytes, base));
        }
        super::failpoint::hit("commit.staged");
        let retention = if events.is_empty() {
            None
        } else {
            Some(self.retention()?)
        };
        let ledger_retention = if ledgers.is_empty() {
            None
        } else {
            Some(self.ledger_retention()?)
        };
        let _journal = self.take(Lock::Journal)?;
        redo::replay(dir)?;
        super::failpoint::hit("commit.locked");
        // Files an abandoned commit would otherwise leave behind empty.
        let mut new_files: Vec<std::path::PathBuf> = Vec::new();
        // Each ledger's lines are dropped once joined (a big archive is megabytes of them).
        for (file, lines) in appends {
            if let Some(r) = ledger_retention
                && ledgers.contains(&file.as_str())
            {
                super::ledger_rotate::rotate_if_due(dir, &file, r)?;
            }
            let path = dir.join(&file);
            if std::fs::symlink_metadata(&path).is_err() {
                new_files.push(path.clone());
            }
            ledger::repair(&path)?;
            let at = file_len(&path)?;
            let data = join_lines(&lines);
            drop(lines);
            record.appends.push(redo::Append { file, at, data });
        }
        let mut high_water = None;
        if let Some(retention) = retention {
            let (lines, last) = journal::number(dir, retention, now, &events)?;
            high_water = Some(last);
            // A transaction bigger than a segment: whole segments renamed into place, the rest
            // appended (see `journal::split`).
            let (segments, lines) = journal::split(dir, retention, lines, last)?;
            if !segments.is_empty() {
                let prefix = Lock::Journal.temp_prefix();
                // Temp segments a killed commit left (the journal lock is held, the record
                // replayed: nothing can still need them).
                super::atomic::remove_stale_temps(dir, |n| n.starts_with(&prefix));
                for (name, bytes) in segments {
                    let tmp = super::atomic::prepare_named(dir, &prefix, &bytes, false)?;
                    temps.names.push(tmp.clone());
                    record.writes.push(redo::Replace {
                        tmp,
                        target: name,
                        shadow: None,
                        data: bytes,
                        sum: 0,
                        delta: None,
                    });
                }
            }
            let path = dir.join(journal::ACTIVE);
            if std::fs::symlink_metadata(&path).is_err() {
                new_files.push(path.clone());
            }
            ledger::repair(&path)?;
            record.appends.push(redo::Append {
                file: journal::ACTIVE.to_string(),
                at: file_len(&path)?,
                data: join_lines(&lines),
            });
        }
        // The commit point: the record is in the log, synced. Not committed on failure (a torn
        // record is no record): nothing else was touched, and the guards remove the temp files
        // and new directories.
        let committed = redo::commit(dir, &mut record)?;
        super::failpoint::hit("commit.logged");
        match redo::apply(dir, &record) {
            Ok(()) => {
                super::failpoint::hit("commit.applied");
                temps.keep();
                new_dirs.keep();
                committed.finish(dir);
                if let Some(seq) = high_water {
                    // Best effort: the journal holds the same number (see `journal_mark`).
                    let _ = super::journal_mark::raise(dir, seq);
                }
                Ok(())
            }
            // Out of space while appending, before any rename: abandon the transaction whole.
            Err(redo::ApplyError::Appending(e)) => {
                redo::undo_appends(dir, &record);
                committed.abandon();
                for p in &new_files {
                    let _ = std::fs::remove_file(p);
                }
                Err(e)
            }
            // Committed but not finished: the in-flight mark stays, and the next transaction (or
            // reader) finishes it before it reads anything (it needs the temp files).
            Err(redo::ApplyError::Finishing(e)) => {
                temps.keep();
                new_dirs.keep();
                drop(committed);
                Err(e)
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path().join("home"), std::time::Duration::from_secs(5)).unwrap();
        (d, s)
    }

    fn now() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    #[test]
    fn an_unanswered_commit_is_judged_by_its_probe() {
        let events = Probe {
            key: "k".into(),
            bytes: b"ours".to_vec(),
            compared: Some(0),
        };
        assert_eq!(events.judge(Some((b"ours", 7))), Landed::Yes);
        assert_eq!(events.judge(Some((b"theirs", 7))), Landed::No);
        assert_eq!(events.judge(None), Landed::Unknown);
        let doc = Probe {
            key: "d".into(),
            bytes: b"new".to_vec(),
            compared: Some(5),
        };
        assert_eq!(doc.judge(Some((b"new", 9))), Landed::Yes);
        assert_eq!(doc.judge(Some((b"old", 5))), Landed::Unknown);
        assert_eq!(doc.judge(Some((b"other", 9))), Landed::No);
        assert_eq!(doc.judge(None), Landed::No);
        let blind = Probe {
            key: "b".into(),
            bytes: b"x".to_vec(),
            compared: None,
        };
        assert_eq!(blind.judge(Some((b"x", 3))), Landed::Yes);
        assert_eq!(blind.judge(Some((b"y", 3))), Landed::Unknown);
    }

    #[test]
    fn home_paths_are_checked_and_created_private() {
        use std::os::unix::fs::PermissionsExt;
        for bad in [&["..", "x"][..], &["a/b"], &[".x"], &[""], &[]] {
            assert!(HomePath::new(Lock::Agents, bad).is_err(), "{bad:?}");
        }
        let (_d, s) = store();
        let f = HomePath::new(Lock::Agents, &["runtime", "agents", "a", "s.json"]).unwrap();
        // Without its lock, nothing is staged.
        let e = s.transaction(now(), &[Lock::Status], |tx| {
            tx.write_at(&f, b"{}\n".to_vec())
        });
        assert!(e.is_err());
        assert!(s.read_at(&f).unwrap().is_none());
        s.transaction(now(), &[Lock::Agents], |tx| {
            tx.write_at(&f, b"{}\n".to_vec())
        })
        .unwrap();
        assert_eq!(s.read_at(&f).unwrap().unwrap(), b"{}\n");
        let p = s.home().dir().join(f.rel());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(p.parent().unwrap()), 0o700);
        assert_eq!(mode(&s.home().dir().join("runtime")), 0o700);
    }

    #[test]
    fn capped_appends_keep_the_newest_whole_lines() {
        let (_d, s) = store();
        let f = HomePath::new(Lock::Agents, &["log.jsonl"]).unwrap();
        let line = |i: usize| format!("{{\"n\":{i:04}}}"); // 10 bytes + newline
        for i in 0..9 {
            s.transaction(now(), &[Lock::Agents], |tx| {
                tx.append_capped(&f, &[line(i)], 100)
            })
            .unwrap();
        }
        let text = |s: &Store| String::from_utf8(s.read_at(&f).unwrap().unwrap()).unwrap();
        assert_eq!(text(&s).lines().count(), 9);
        // The tenth line would pass 100 bytes: the file is rewritten with its newest lines that
        // fit in 50, then the lines staged after that in the same transaction, newest last.
        s.transaction(now(), &[Lock::Agents], |tx| {
            tx.append_capped(&f, &[line(9)], 100)?;
            tx.append_capped(&f, &[line(10)], 100)
        })
        .unwrap();
        let t = text(&s);
        assert!(t.len() <= 100, "{t}");
        assert_eq!(t.lines().next().unwrap(), line(6), "{t}");
        assert_eq!(t.lines().last().unwrap(), line(10));
        assert_eq!(t.lines().nth_back(1).unwrap(), line(9));
        assert!(t.ends_with('\n') && t.lines().all(|l| l.len() == 10));
    }
}

/// How a commit to the shared store ended.
enum Outcome {
    Committed,
    /// A document it read changed since: nothing was written.
    Conflict,
    /// It got no answer, and then another change showed it can never land.
    NeverLanded,
}

/// How to tell whether a commit that got no answer landed (see [`Store::commit_remote`]).
struct Probe {
    key: String,
    bytes: Vec<u8>,
    /// The revision the commit compared this key at (0: absent), when it compared it.
    compared: Option<i64>,
}

/// What a probe found.
#[derive(Debug, PartialEq, Eq)]
enum Landed {
    /// The commit is there.
    Yes,
    /// Something else changed the key: the commit's comparison can never hold, it did not and
    /// will not land.
    No,
    /// The key is as the commit found it: it may still be on its way.
    Unknown,
}

impl Probe {
    fn judge(&self, now: Option<(&[u8], i64)>) -> Landed {
        match (now, self.compared) {
            (Some((bytes, rev)), compared) if bytes == self.bytes.as_slice() => {
                if compared.is_none_or(|c| rev != c) {
                    Landed::Yes
                } else {
                    Landed::Unknown
                }
            }
            (Some((_, rev)), Some(c)) if rev != c => Landed::No,
            (None, Some(c)) if c != 0 => Landed::No,
            _ => Landed::Unknown,
        }
    }

    /// Look a few times; `Ok(true)` committed, `Ok(false)` run the transaction again, else the
    /// original error (the outcome stays unknown).
    fn settle(self, r: &super::etcd::Etcd, unknown: Error) -> Result<bool> {
        for wait in [100, 300, 600] {
            std::thread::sleep(std::time::Duration::from_millis(wait));
            let Ok(kv) = r.get(&self.key) else {
                continue;
            };
            match self.judge(kv.as_ref().map(|kv| (kv.value.as_slice(), kv.mod_revision))) {
                Landed::Yes => return Ok(true),
                Landed::No => return Ok(false),
                Landed::Unknown => {}
            }
        }
        Err(unknown)
    }
}
