//! The commit log (`commit.log`) and the in-flight mark (`commit.redo`): what makes a
//! transaction atomic and durable across a crash, whatever number of files it touches, with one
//! durable sync per commit.
//!
//! A transaction first writes every new document to a temp file beside its target (not synced:
//! writing is what fails for lack of space, and that must happen before the commit point).
//! Then, holding the journal lock (the last lock in the order, so one commit at a time), it
//! appends one record to the log naming every replacement (temp file, target, **and the new
//! bytes**) and every ledger append (the byte offset it goes at and the exact bytes), and
//! fdatasyncs the log: **that sync is the commit point, and the only one**. Then the lines are
//! appended (the event journal last) and the temp files renamed into place, none of it synced:
//! everything they change can be rebuilt from the log.
//!
//! Two kinds of failure, two recoveries:
//!
//! - **A killed writer** (SIGKILL, a panic): the page cache survives, so whatever the writer did
//!   is visible to everyone; only its last commit may be half done. Before it appends its record
//!   the writer writes the record's offset in the log to `commit.redo` (not synced), and empties
//!   that file once the record is applied. Whoever finds `commit.redo` non-empty takes the
//!   journal lock and [`replay`]s that one record: if it is complete (its checksum holds) it is
//!   made durable and applied, idempotently (a temp file already renamed was renamed; bytes
//!   already at their offset were appended); if it is torn the transaction never committed, the
//!   log is cut back to where the record starts, and the temp files are debris.
//! - **A power cut** (or a kernel crash): what was not synced may be lost, in any order. The log
//!   starts with the boot id of the machine's boot that wrote it
//!   (`/proc/sys/kernel/random/boot_id`). A log from another boot means the machine went down
//!   with records whose effects may not be on disk: before anyone reads, [`recover`] applies
//!   every complete record again in order (appends at their offsets; each document's last
//!   version, unless that version is already on disk) and then checkpoints.
//!
//! A **checkpoint** makes everything the log's records changed durable (fdatasync of each file
//! they touched, fsync of their directories), then empties the log and syncs that. It runs when
//! the log passes [`CHECKPOINT_BYTES`], before anything renames a file the log has offsets into
//! (the journal rolling, a ledger rotating), and when a command takes every lock (doctor,
//! bundle import) to replace files wholesale. Where the boot id cannot be read (not Linux)
//! every commit checkpoints: durable, just not at the floor.
//!
//! Readers that never lock (the original plugin, `status`) always see whole files: documents are
//! only ever renamed into place, complete. Readers through the store check `commit.redo` (a
//! `stat`) and, once per process, the log's boot id, and finish what they find first.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic;
use crate::error::{Error, IoContext, Result};

/// The in-flight mark's file name in the home: the offset of the record being committed.
pub const FILE: &str = "commit.redo";
/// The commit log's file name in the home.
pub const LOG: &str = "commit.log";
/// Past this size the log is checkpointed after a commit.
pub const CHECKPOINT_BYTES: u64 = 8 * 1024 * 1024;

/// The first bytes of a log's header line; the boot id follows.
const HEADER: &str = "conductor-commit-log 1 ";

/// One committed transaction's changes, by file name relative to the home.
#[derive(Debug, Default, PartialEq)]
pub struct Record {
    /// Documents replaced, in this order.
    pub writes: Vec<Replace>,
    /// Appends, in this order (the event journal last).
    pub appends: Vec<Append>,
}

/// A file replaced whole: `tmp` (written before the commit point) renamed over `target`.
#[derive(Debug, PartialEq)]
pub struct Replace {
    pub tmp: String,
    pub target: String,
    /// For a tracked document: a second name of `tmp`, renamed over `.<target>.last`.
    pub shadow: Option<String>,
    /// The new bytes (what a recovery after a power cut writes again).
    pub data: Vec<u8>,
}

/// Bytes that go at `at` in `file`.
#[derive(Debug, PartialEq)]
pub struct Append {
    pub file: String,
    pub at: u64,
    pub data: String,
}

impl Record {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.appends.is_empty()
    }
}

/// The name of the link to the last committed version of a tracked document.
pub fn shadow_name(target: &str) -> String {
    match target.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/.{file}.last"),
        None => format!(".{target}.last"),
    }
}

/// What a record's frame says before its data: names, offsets and lengths.
#[derive(Serialize, Deserialize)]
struct Index {
    /// `(tmp, target, shadow, data length)`.
    w: Vec<(String, String, Option<String>, u64)>,
    /// `(file, at, data length)`.
    a: Vec<(String, u64, u64)>,
}

/// A checksum over a record's pieces, eight bytes at a time: enough to tell a whole record from
/// a torn one (a power cut can leave any of its pages unwritten).
fn checksum(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |w: u64| h = (h.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for p in parts {
        mix(p.len() as u64);
        let mut chunks = p.chunks_exact(8);
        for c in &mut chunks {
            mix(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            mix(u64::from_le_bytes(last));
        }
    }
    h
}

/// A record's frame: `rec <index length> <data length> <checksum>\n`, the index (JSON), the data.
fn frame(record: &Record) -> (Vec<u8>, Vec<&[u8]>) {
    let index = Index {
        w: record
            .writes
            .iter()
            .map(|w| {
                (
                    w.tmp.clone(),
                    w.target.clone(),
                    w.shadow.clone(),
                    w.data.len() as u64,
                )
            })
            .collect(),
        a: record
            .appends
            .iter()
            .map(|a| (a.file.clone(), a.at, a.data.len() as u64))
            .collect(),
    };
    let index = serde_json::to_vec(&index).expect("an index serializes");
    let data: Vec<&[u8]> = record
        .writes
        .iter()
        .map(|w| w.data.as_slice())
        .chain(record.appends.iter().map(|a| a.data.as_bytes()))
        .collect();
    let mut parts = vec![index.as_slice()];
    parts.extend(data.iter().copied());
    let sum = checksum(&parts);
    let len: usize = data.iter().map(|d| d.len()).sum();
    let mut head = format!("rec {} {len} {sum:016x}\n", index.len()).into_bytes();
    head.extend_from_slice(&index);
    (head, data)
}

/// Parse the record at `at` in `log` (`len` bytes long). `None` for a torn or foreign one (a
/// transaction that never committed). With `verify` false, only the frame and index are read
/// (what a checkpoint needs: the names), and the record's data is left empty.
fn read_record(log: &File, at: u64, len: u64, verify: bool) -> Option<(Record, u64)> {
    let mut head = vec![0u8; 80.min(len.saturating_sub(at)) as usize];
    log.read_exact_at(&mut head, at).ok()?;
    let nl = head.iter().position(|b| *b == b'\n')?;
    let line = std::str::from_utf8(&head[..nl]).ok()?;
    let mut parts = line.split(' ');
    let (Some("rec"), Some(ilen), Some(dlen), Some(sum), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let (ilen, dlen) = (ilen.parse::<u64>().ok()?, dlen.parse::<u64>().ok()?);
    let sum = u64::from_str_radix(sum, 16).ok()?;
    let start = at + nl as u64 + 1;
    let end = start.checked_add(ilen)?.checked_add(dlen)?;
    if end > len {
        return None;
    }
    let mut index = vec![0u8; ilen as usize];
    log.read_exact_at(&mut index, start).ok()?;
    let idx: Index = serde_json::from_slice(&index).ok()?;
    let total: u64 = idx
        .w
        .iter()
        .map(|w| w.3)
        .chain(idx.a.iter().map(|a| a.2))
        .sum();
    if total != dlen {
        return None;
    }
    let mut data = Vec::new();
    if verify {
        data = vec![0u8; dlen as usize];
        log.read_exact_at(&mut data, start + ilen).ok()?;
        let mut pieces = vec![index.as_slice()];
        let mut off = 0usize;
        for n in idx.w.iter().map(|w| w.3).chain(idx.a.iter().map(|a| a.2)) {
            pieces.push(&data[off..off + n as usize]);
            off += n as usize;
        }
        if checksum(&pieces) != sum {
            return None;
        }
    }
    let mut off = 0usize;
    let mut take = |n: u64| {
        if !verify {
            return Vec::new();
        }
        let piece = data[off..off + n as usize].to_vec();
        off += n as usize;
        piece
    };
    let mut record = Record::default();
    for (tmp, target, shadow, n) in idx.w {
        record.writes.push(Replace {
            tmp,
            target,
            shadow,
            data: take(n),
        });
    }
    for (file, at, n) in idx.a {
        let bytes = take(n);
        record.appends.push(Append {
            file,
            at,
            data: String::from_utf8(bytes).ok()?,
        });
    }
    Some((record, end))
}

/// This boot's id; `None` where the system does not say (then every commit checkpoints).
fn boot_id() -> Option<&'static str> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let id = id.trim();
        (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
            .then(|| id.to_string())
    })
    .as_deref()
}

fn header() -> String {
    format!("{HEADER}{}\n", boot_id().unwrap_or("unknown"))
}

/// Open a file of the home, creating it once (then the directory is synced, so it is found
/// after a power cut).
fn open(dir: &Path, name: &str) -> Result<File> {
    let path = dir.join(name);
    let existed = path.exists();
    let f = atomic::open_private(&path).ctx("open", &path)?;
    if !existed {
        atomic::sync_dir(dir)?;
    }
    Ok(f)
}

/// True when a commit is in flight or was left half done by a killed writer (a `stat`).
pub fn in_flight(dir: &Path) -> bool {
    std::fs::metadata(dir.join(FILE)).is_ok_and(|m| m.len() > 0)
}

/// True when the log holds records from another boot (or from a system whose boot cannot be
/// told): the machine went down since, and they must be applied again before anyone reads.
pub fn needs_recovery(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join(LOG)) else {
        return false;
    };
    let mut head = [0u8; 80];
    let Ok(n) = f.read_at(&mut head, 0) else {
        return true;
    };
    if n == 0 {
        return false;
    }
    match boot_id() {
        Some(id) => !head[..n].starts_with(format!("{HEADER}{id}\n").as_bytes()),
        None => true,
    }
}

/// True when something must be finished before anyone reads ([`replay`] does it).
pub fn pending(dir: &Path) -> bool {
    in_flight(dir) || needs_recovery(dir)
}

/// A record made durable; its changes are being applied.
pub struct Committed {
    log: File,
    mark: File,
    start: u64,
}

/// Append `record` to the log and make it durable: the commit point (the journal lock is held).
/// On failure nothing is committed: the log and the in-flight mark are as they were.
pub fn commit(dir: &Path, record: &Record) -> Result<Committed> {
    let log = open(dir, LOG)?;
    let mark = open(dir, FILE)?;
    let path = dir.join(LOG);
    let start = log.metadata().ctx("inspect", &path)?.len();
    // An empty log starts with its header; the record follows it.
    let header = if start == 0 { header() } else { String::new() };
    // The mark first: from here on a killed writer leaves a record to finish or to cut off.
    let text = format!("{}\n", start + header.len() as u64);
    mark.write_all_at(text.as_bytes(), 0)
        .and_then(|_| mark.set_len(text.len() as u64))
        .ctx("write the commit record", &dir.join(FILE))
        .inspect_err(|_| {
            let _ = mark.set_len(0);
        })?;
    super::failpoint::hit("commit.marked");
    let (mut head, data) = frame(record);
    head.splice(0..0, header.into_bytes());
    let written = (|| {
        log.write_all_at(&head, start)?;
        let mut at = start + head.len() as u64;
        for d in &data {
            log.write_all_at(d, at)?;
            at += d.len() as u64;
        }
        log.sync_data()
    })();
    if let Err(e) = written {
        // A torn record is no record.
        let _ = log.set_len(start);
        let _ = mark.set_len(0);
        return Err(Error::io("write the commit record", &path, e));
    }
    Ok(Committed { log, mark, start })
}

impl Committed {
    /// The record is applied: clear the in-flight mark (not synced: replaying an applied record
    /// changes nothing), and checkpoint when the log is due.
    pub fn finish(self, dir: &Path) {
        let _ = self.mark.set_len(0);
        let due = boot_id().is_none()
            || self
                .log
                .metadata()
                .is_ok_and(|m| m.len() >= CHECKPOINT_BYTES);
        if due {
            // Best effort: a failed checkpoint leaves the log, and the next one tries again.
            let _ = checkpoint(dir);
        }
    }

    /// Take the record back (its appends failed and were undone): cut the log back, durably,
    /// so no recovery ever applies it, and clear the mark.
    pub fn abandon(self) {
        let _ = self
            .log
            .set_len(self.start)
            .and_then(|_| self.log.sync_data());
        let _ = self.mark.set_len(0);
    }
}

/// Finish whatever a crashed writer or a power cut left (the journal lock is held): the record
/// in flight, or every record of a log from another boot. Returns true if there was anything.
pub fn replay(dir: &Path) -> Result<bool> {
    if needs_recovery(dir) {
        recover(dir)?;
        return Ok(true);
    }
    if !in_flight(dir) {
        return Ok(false);
    }
    let mark_path = dir.join(FILE);
    let mark = open(dir, FILE)?;
    let text = std::fs::read_to_string(&mark_path).unwrap_or_default();
    let Ok(start) = text.trim().parse::<u64>() else {
        // A record the previous version left (it kept the whole record in this file): finish
        // it the way that version would have, so an upgrade over a killed writer loses nothing.
        let legacy = std::fs::read(&mark_path)
            .ok()
            .and_then(|b| legacy::parse(&b));
        if let Some(record) = &legacy {
            legacy::apply(dir, record)?;
        } else {
            // Not a mark this version writes: apply the whole log again, which is always safe.
            recover(dir)?;
        }
        let _ = mark.set_len(0);
        return Ok(true);
    };
    let log = open(dir, LOG)?;
    let len = log.metadata().ctx("inspect", &dir.join(LOG))?.len();
    let found = match read_record(&log, start, len, true) {
        Some((record, _)) => {
            // Complete, but its writer may have died before the sync.
            log.sync_data().ctx("sync", &dir.join(LOG))?;
            apply(dir, &record)?;
            true
        }
        None => {
            if len > start {
                log.set_len(start).ctx("cut back", &dir.join(LOG))?;
            }
            false
        }
    };
    let _ = mark.set_len(0);
    Ok(found)
}

/// How applying a record failed.
pub enum ApplyError {
    /// An append failed (a full disk): no rename was done yet, and the appends made so far can
    /// be cut back, so the transaction can still be abandoned as if it never committed.
    Appending(Error),
    /// A later step failed: the transaction stays committed and the record stays for the next
    /// writer to finish.
    Finishing(Error),
}

impl From<ApplyError> for Error {
    fn from(e: ApplyError) -> Error {
        match e {
            ApplyError::Appending(e) | ApplyError::Finishing(e) => e,
        }
    }
}

/// Do what the record says, idempotently, without syncing (the log holds it): the appends first
/// (the event journal last; growing a file is what can fail for lack of space), then the
/// renames.
pub fn apply(dir: &Path, record: &Record) -> std::result::Result<(), ApplyError> {
    for a in &record.appends {
        append_at(dir, a).map_err(ApplyError::Appending)?;
    }
    super::failpoint::hit("apply.appended");
    let mut renamed = 0;
    for w in &record.writes {
        let mut pairs = vec![(&w.tmp, w.target.clone())];
        if let Some(s) = &w.shadow {
            pairs.push((s, shadow_name(&w.target)));
        }
        for (tmp, target) in pairs {
            match std::fs::rename(dir.join(tmp), dir.join(&target)) {
                Ok(()) => {
                    renamed += 1;
                    if renamed == 1 {
                        super::failpoint::hit("apply.renamed");
                    }
                }
                // Renamed before (the record is being replayed).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ApplyError::Finishing(Error::io(
                        "replace",
                        &dir.join(&target),
                        e,
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Put an append's bytes at its offset unless they are already there. Never past the end: a
/// file found shorter than the offset (cut back since, or a newline that a repair added lost in
/// a power cut) gets its torn tail repaired and the bytes at its end.
fn append_at(dir: &Path, a: &Append) -> Result<File> {
    let path = dir.join(&a.file);
    let f = atomic::open_private(&path).ctx("open", &path)?;
    let data = a.data.as_bytes();
    let meta = f.metadata().ctx("inspect", &path)?;
    // A ledger created by someone else (say the original plugin) may be world-readable.
    if meta.permissions().mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .ctx("make private", &path)?;
    }
    let mut len = meta.len();
    let mut at = a.at;
    if len < at {
        super::ledger::repair(&path)?;
        len = f.metadata().ctx("inspect", &path)?.len();
        at = at.min(len);
    }
    let already = len >= at + data.len() as u64 && {
        let mut have = vec![0u8; data.len()];
        f.read_exact_at(&mut have, at).is_ok() && have == data
    };
    if !already {
        if len != at {
            f.set_len(at).ctx("cut back", &path)?;
        }
        if let Err(e) = f.write_all_at(data, at) {
            let _ = f.set_len(at);
            return Err(Error::io("append to", &path, e));
        }
    }
    Ok(f)
}

/// Take back the appends of a record that could not be applied (the journal lock is held, so
/// nobody appended since).
pub fn undo_appends(dir: &Path, record: &Record) {
    for a in &record.appends {
        if let Ok(f) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(&a.file))
            && f.metadata().is_ok_and(|m| m.len() > a.at)
        {
            let _ = f.set_len(a.at);
        }
    }
}

/// The complete records of the log, in order (with their data when `verify`), and the log.
fn records(dir: &Path, verify: bool) -> Result<(Option<File>, Vec<Record>)> {
    let path = dir.join(LOG);
    let log = match atomic::open_private(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    let len = log.metadata().ctx("inspect", &path)?.len();
    let mut head = vec![0u8; 80.min(len) as usize];
    log.read_exact_at(&mut head, 0).ctx("read", &path)?;
    let mut out = Vec::new();
    if let Some(nl) = head.iter().position(|b| *b == b'\n')
        && head.starts_with(HEADER.as_bytes())
    {
        let mut at = nl as u64 + 1;
        while let Some((record, end)) = read_record(&log, at, len, verify) {
            out.push(record);
            at = end;
        }
    }
    Ok((Some(log), out))
}

/// Apply every complete record of the log again, in order, then checkpoint (the journal lock is
/// held; the machine went down since the log was written). Appends go at their offsets; each
/// document gets the last version the log has of it, unless that version is already there. For
/// a tracked document the link to the last version conductor committed tells: when it holds
/// that version, the rename happened and the document may since have been replaced by another
/// program, whose version stays.
pub fn recover(dir: &Path) -> Result<()> {
    let (_, records) = records(dir, true)?;
    // Temp files of a recovery killed midway.
    let prefix = format!("{}journal-", atomic::TEMP_PREFIX);
    atomic::remove_stale_temps(dir, |n| n.starts_with(&prefix));
    let mut last: Vec<&Replace> = Vec::new();
    for r in &records {
        for a in &r.appends {
            append_at(dir, a)?;
        }
        for w in &r.writes {
            last.retain(|l| l.target != w.target);
            last.push(w);
        }
    }
    for w in last {
        let target = dir.join(&w.target);
        let shadow = w.shadow.as_ref().map(|_| dir.join(shadow_name(&w.target)));
        let on_disk = super::read_bytes(shadow.as_deref().unwrap_or(&target))?;
        if on_disk.as_deref() == Some(w.data.as_slice()) {
            continue;
        }
        if let Some(parent) = target.parent() {
            atomic::create_private_dirs(parent)?;
        }
        let tmp = atomic::prepare_named(dir, &prefix, &w.data, false)?;
        if let Some(shadow) = &shadow {
            let link = atomic::link_temp(dir, &prefix, &tmp)?;
            std::fs::rename(dir.join(&link), shadow)
                .map_err(|e| Error::io("replace", shadow, e))?;
        }
        std::fs::rename(dir.join(&tmp), &target).map_err(|e| Error::io("replace", &target, e))?;
    }
    checkpoint(dir)?;
    if let Ok(f) = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(FILE))
    {
        let _ = f.set_len(0);
    }
    Ok(())
}

/// Make everything the log's records changed durable, then empty the log, durably (the journal
/// lock is held and no record is in flight).
pub fn checkpoint(dir: &Path) -> Result<()> {
    let (log, records) = records(dir, false)?;
    let Some(log) = log else {
        return Ok(());
    };
    let mut files: Vec<String> = Vec::new();
    for r in &records {
        for w in &r.writes {
            files.push(w.target.clone());
            if w.shadow.is_some() {
                files.push(shadow_name(&w.target));
            }
        }
        files.extend(r.appends.iter().map(|a| a.file.clone()));
    }
    files.sort();
    files.dedup();
    let mut dirs: Vec<PathBuf> = vec![PathBuf::new()];
    for f in &files {
        let path = dir.join(f);
        match File::open(&path) {
            Ok(file) => file.sync_data().ctx("sync", &path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("open", &path, e)),
        }
        let mut p = Path::new(f).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(d.to_path_buf());
            p = d.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        match atomic::sync_dir(&dir.join(&d)) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    log.set_len(0)
        .and_then(|_| log.sync_data())
        .ctx("empty", &dir.join(LOG))
}

/// The record of the version before the commit log (`commit.redo` held the whole record: JSON
/// with `renames` and `appends`, then `end <FNV-1a 64, hex> <length>`), read so that a record a
/// killed writer of that version left is finished after an upgrade.
mod legacy {
    use std::path::Path;

    use serde::Deserialize;

    use super::Append;
    use crate::error::{Error, Result};

    #[derive(Deserialize)]
    pub struct Record {
        renames: Vec<(String, String)>,
        appends: Vec<OldAppend>,
    }

    #[derive(Deserialize)]
    struct OldAppend {
        file: String,
        at: u64,
        data: String,
    }

    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// A whole record; `None` for an empty, torn or foreign one (it never committed).
    pub fn parse(bytes: &[u8]) -> Option<Record> {
        if bytes.last() != Some(&b'\n') {
            return None;
        }
        let body_end = bytes[..bytes.len() - 1].iter().rposition(|b| *b == b'\n')? + 1;
        let trailer = std::str::from_utf8(&bytes[body_end..]).ok()?.trim_end();
        let mut parts = trailer.split(' ');
        let (Some("end"), Some(sum), Some(len)) = (parts.next(), parts.next(), parts.next()) else {
            return None;
        };
        let body = &bytes[..body_end];
        (len.parse::<usize>().ok()? == body.len()
            && u64::from_str_radix(sum, 16).ok()? == fnv(body))
        .then(|| serde_json::from_slice(body).ok())?
    }

    /// Its appends, then its renames, each at most once, made durable (the old record is about
    /// to be cleared and no log holds these changes).
    pub fn apply(dir: &Path, r: &Record) -> Result<()> {
        for a in &r.appends {
            let f = super::append_at(
                dir,
                &Append {
                    file: a.file.clone(),
                    at: a.at,
                    data: a.data.clone(),
                },
            )?;
            f.sync_data()
                .map_err(|e| Error::io("sync", &dir.join(&a.file), e))?;
        }
        for (tmp, target) in &r.renames {
            match std::fs::rename(dir.join(tmp), dir.join(target)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("replace", &dir.join(target), e)),
            }
        }
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync", dir, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            writes: vec![Replace {
                tmp: ".tmp-status-x.tmp".into(),
                target: "a.json".into(),
                shadow: None,
                data: b"new\n".to_vec(),
            }],
            appends: vec![
                Append {
                    file: "l.jsonl".into(),
                    at: 8,
                    data: "{\"n\":2}\n{\"n\":3}\n".into(),
                },
                Append {
                    file: "events.jsonl".into(),
                    at: 0,
                    data: "{\"seq\":1}\n".into(),
                },
            ],
        }
    }

    fn framed(rec: &Record) -> Vec<u8> {
        let (mut head, data) = frame(rec);
        for d in data {
            head.extend_from_slice(d);
        }
        head
    }

    #[test]
    fn a_torn_record_is_not_a_commit() {
        let rec = sample();
        let bytes = framed(&rec);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let at = |bytes: &[u8]| {
            std::fs::write(&p, bytes).unwrap();
            let f = File::open(&p).unwrap();
            read_record(&f, 0, bytes.len() as u64, true).map(|(r, _)| r)
        };
        assert_eq!(at(&bytes), Some(sample()));
        for cut in 0..bytes.len() {
            assert_eq!(at(&bytes[..cut]), None, "cut at {cut}");
        }
        for i in [5, bytes.len() / 2, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1;
            assert_eq!(at(&flipped), None, "flipped byte {i}");
            let mut zeroed = bytes.clone();
            zeroed[i] = 0;
            if zeroed != bytes {
                assert_eq!(at(&zeroed), None, "zeroed byte {i}");
            }
        }
    }

    /// A home with an old document and two ledgers, a temp file with the new document.
    fn setup(dir: &Path) -> Record {
        std::fs::write(dir.join("a.json"), "old\n").unwrap();
        std::fs::write(dir.join(".tmp-status-x.tmp"), "new\n").unwrap();
        std::fs::write(dir.join("l.jsonl"), "{\"n\":1}\n").unwrap();
        std::fs::write(dir.join("events.jsonl"), "").unwrap();
        sample()
    }

    fn files(dir: &Path) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .filter(|(n, _)| n != FILE && n != LOG)
            .collect();
        v.sort();
        v
    }

    fn expected() -> Vec<(String, String)> {
        vec![
            ("a.json".to_string(), "new\n".to_string()),
            ("events.jsonl".to_string(), "{\"seq\":1}\n".to_string()),
            (
                "l.jsonl".to_string(),
                "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n".to_string(),
            ),
        ]
    }

    #[test]
    fn replay_finishes_a_commit_interrupted_at_any_step() {
        let done = tempfile::tempdir().unwrap();
        let rec = setup(done.path());
        commit(done.path(), &rec).unwrap().finish(done.path());
        apply(done.path(), &rec).ok().unwrap();
        assert_eq!(files(done.path()), expected());
        // Crash points: after k bytes of the first append, after the first append, after both,
        // after the rename (not cleared).
        type Crash = fn(&Path, &Record);
        let crashes: Vec<(&str, Crash)> = vec![
            ("before anything", |_, _| {}),
            ("inside the first append", |d, r| {
                let a = &r.appends[0];
                let f = OpenOptions::new()
                    .write(true)
                    .open(d.join(&a.file))
                    .unwrap();
                f.write_all_at(&a.data.as_bytes()[..5], a.at).unwrap();
            }),
            ("after the first append", |d, r| {
                append_at(d, &r.appends[0]).unwrap();
            }),
            ("after both appends", |d, r| {
                append_at(d, &r.appends[0]).unwrap();
                append_at(d, &r.appends[1]).unwrap();
            }),
            ("after the rename", |d, r| {
                apply(d, r).ok().unwrap();
            }),
        ];
        for (name, crash) in crashes {
            let tmp = tempfile::tempdir().unwrap();
            let rec = setup(tmp.path());
            let c = commit(tmp.path(), &rec).unwrap();
            crash(tmp.path(), &rec);
            drop(c);
            assert!(pending(tmp.path()), "{name}");
            assert!(replay(tmp.path()).unwrap(), "{name}: the record is found");
            assert!(!pending(tmp.path()), "{name}: the record is cleared");
            assert_eq!(files(tmp.path()), expected(), "{name}");
            // Replaying the same record again changes nothing.
            let c = commit(tmp.path(), &rec).unwrap();
            drop(c);
            replay(tmp.path()).unwrap();
            assert_eq!(files(tmp.path()), expected(), "{name}, replayed twice");
        }
    }

    #[test]
    fn a_torn_record_in_flight_is_cut_off() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let rec = setup(d);
        commit(d, &rec).unwrap().finish(d);
        let len = std::fs::metadata(d.join(LOG)).unwrap().len();
        // A second commit killed halfway through its record.
        std::fs::write(d.join(FILE), format!("{len}\n")).unwrap();
        let bytes = framed(&rec);
        let f = OpenOptions::new().write(true).open(d.join(LOG)).unwrap();
        f.write_all_at(&bytes[..bytes.len() / 2], len).unwrap();
        assert!(pending(d));
        assert!(!replay(d).unwrap());
        assert!(!pending(d));
        assert_eq!(std::fs::metadata(d.join(LOG)).unwrap().len(), len);
    }

    /// A power cut: the log (from another boot) holds records whose changes never reached the
    /// disk; recovery applies them again, in order, keeps each document's last version, and
    /// empties the log.
    #[test]
    fn a_log_from_another_boot_is_applied_again() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let rec = setup(d);
        commit(d, &rec).unwrap().finish(d);
        let second = Record {
            writes: vec![Replace {
                tmp: ".tmp-status-y.tmp".into(),
                target: "a.json".into(),
                shadow: None,
                data: b"newer\n".to_vec(),
            }],
            appends: vec![Append {
                file: "events.jsonl".into(),
                at: 10,
                data: "{\"seq\":2}\n".into(),
            }],
        };
        commit(d, &second).unwrap().finish(d);
        // Nothing but the log reached the disk, and it says another boot wrote it.
        let log = std::fs::read(d.join(LOG)).unwrap();
        let nl = log.iter().position(|b| *b == b'\n').unwrap();
        let mut other = format!("{HEADER}00000000-0000-0000-0000-000000000000").into_bytes();
        other.extend_from_slice(&log[nl..]);
        std::fs::write(d.join(LOG), other).unwrap();
        std::fs::write(d.join("a.json"), "old\n").unwrap();
        std::fs::write(d.join("l.jsonl"), "{\"n\":1}\n{\"n").unwrap();
        std::fs::write(d.join("events.jsonl"), "").unwrap();
        std::fs::remove_file(d.join(".tmp-status-x.tmp")).ok();
        if boot_id().is_none() {
            return;
        }
        assert!(pending(d));
        assert!(replay(d).unwrap());
        assert!(!pending(d));
        let mut want = expected();
        want[0].1 = "newer\n".into();
        want[1].1 = "{\"seq\":1}\n{\"seq\":2}\n".into();
        assert_eq!(files(d), want);
        assert_eq!(std::fs::metadata(d.join(LOG)).unwrap().len(), 0);
    }

    #[test]
    fn a_record_left_by_the_previous_version_is_finished_after_an_upgrade() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a.json"), "old\n").unwrap();
        std::fs::write(d.join(".tmp-a.tmp"), "new\n").unwrap();
        std::fs::write(d.join("events.jsonl"), "{\"seq\":1}\n").unwrap();
        // What the previous version wrote into commit.redo before it was killed.
        let body = "{\"renames\":[[\".tmp-a.tmp\",\"a.json\"]],\"appends\":[{\"file\":\"events.jsonl\",\"at\":10,\"data\":\"{\\\"seq\\\":2}\\n\"}]}\n";
        let sum = body.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let rec = format!("{body}end {sum:016x} {}\n", body.len());
        std::fs::write(d.join(FILE), &rec).unwrap();
        assert!(pending(d));
        assert!(replay(d).unwrap());
        assert!(!pending(d), "the record is cleared");
        assert_eq!(std::fs::read_to_string(d.join("a.json")).unwrap(), "new\n");
        assert_eq!(
            std::fs::read_to_string(d.join("events.jsonl")).unwrap(),
            "{\"seq\":1}\n{\"seq\":2}\n"
        );
        // A torn one (its trailer does not match) never committed: nothing is applied.
        std::fs::write(d.join(".tmp-b.tmp"), "b\n").unwrap();
        let torn = rec.replace(".tmp-a.tmp", ".tmp-b.tmp");
        std::fs::write(d.join(FILE), torn).unwrap();
        replay(d).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.json")).unwrap(), "new\n");
        assert!(d.join(".tmp-b.tmp").exists());
    }
}
