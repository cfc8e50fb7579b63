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
/// What the log holds of each big document (see [`Tips`]), beside the log.
pub const TIPS: &str = "commit.tips";
/// Documents from this size on are logged as a delta against their previous version when the
/// log holds that version; smaller ones are always logged whole.
pub const DELTA_MIN: usize = 16 * 1024;
/// After this many deltas in a row a document is logged whole again, so a recovery after a power
/// cut rebuilds any version from at most this many.
pub const MAX_CHAIN: u32 = 256;

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
    /// The new bytes (what a recovery after a power cut writes again). Empty in a record read
    /// back from the log when the log holds them as a [`Delta`].
    pub data: Vec<u8>,
    /// [`checksum_of`] the new bytes, for a document of [`DELTA_MIN`] bytes or more (0 when not
    /// computed).
    pub sum: u64,
    /// In the log, the new bytes as changes to the document's previous version in the same log
    /// instead of whole (a few hundred bytes where the document is megabytes).
    pub delta: Option<Delta>,
}

impl Replace {
    /// The replacement of `target` by `data` (in the temp file `tmp`): with its checksum when it
    /// is big, and as a delta against `base` (the version the transaction read) when that is
    /// big too and the changes are small. [`commit`] logs it whole unless the log holds `base`.
    pub fn new(
        tmp: String,
        target: String,
        shadow: Option<String>,
        data: Vec<u8>,
        base: Option<&[u8]>,
    ) -> Replace {
        let (sum, delta) = if data.len() >= DELTA_MIN {
            let sum = checksum_of(&data);
            let delta = base.filter(|b| b.len() >= DELTA_MIN).and_then(|b| {
                let hunks = crate::delta::diff(b, &data)?;
                // Only a delta that rebuilds exactly these bytes is logged (a recovery finds out
                // too late otherwise).
                crate::delta::rebuilds(b, &hunks, &data)
                    .then(|| Delta::new(checksum_of(b), sum, hunks))
            });
            (sum, delta)
        } else {
            (0, None)
        };
        Replace {
            tmp,
            target,
            shadow,
            data,
            sum,
            delta,
        }
    }
}

/// A document's new version as changes to its previous version in the log.
#[derive(Debug, PartialEq)]
pub struct Delta {
    /// [`checksum_of`] the version the changes apply to.
    pub base: u64,
    /// [`checksum_of`] the new version.
    pub sum: u64,
    pub hunks: Vec<crate::delta::Hunk>,
    /// The hunks' bytes one after another: the write's one piece of data in the log.
    pub joined: Vec<u8>,
}

impl Delta {
    fn new(base: u64, sum: u64, hunks: Vec<crate::delta::Hunk>) -> Delta {
        let joined = hunks.iter().flat_map(|h| h.with.iter().copied()).collect();
        Delta {
            base,
            sum,
            hunks,
            joined,
        }
    }
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
    /// The writes logged as deltas: `(write, base checksum, new checksum, [(start, end, length
    /// of the bytes put there)])`; the write's data is the hunks' bytes in order. A version that
    /// does not know deltas reads such a record as one replacing the document by those bytes:
    /// it renames and syncs the right files after a kill or at a checkpoint, and only a
    /// recovery after a power cut that it runs first would write them as the document (which
    /// every command then reports as not valid conductor state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    d: Vec<(usize, u64, u64, Vec<(u64, u64, u64)>)>,
}

/// A checksum of a whole document, four lanes at a time (a megabyte in a tenth of a
/// millisecond): tells whether a version is the one the log holds.
pub fn checksum_of(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: [u64; 4] = [K, K ^ 1, K ^ 2, K ^ 3];
    let mut blocks = bytes.chunks_exact(32);
    let lane = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
    for b in &mut blocks {
        for (i, h) in h.iter_mut().enumerate() {
            *h = (*h ^ lane(b, i)).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut tail = [0u8; 32];
    tail[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
    for (i, h) in h.iter_mut().enumerate() {
        *h = (*h ^ lane(&tail, i)).wrapping_mul(K).rotate_left(29);
    }
    h.iter().fold(bytes.len() as u64, |acc, x| {
        (acc ^ x).wrapping_mul(K).rotate_left(31)
    })
}

/// What the log holds of each big document: the checksum of its last version in the log and
/// how many deltas were logged since its last whole copy. Kept in [`TIPS`] (not synced: a
/// writer that cannot trust it logs documents whole), and true only for the log length it
/// names: a log appended to by a writer killed before updating it, cut back, or emptied by a
/// checkpoint (which removes it first) does not match.
#[derive(Debug, Default, PartialEq)]
struct Tips {
    log_len: u64,
    /// The log's [`generation`]: a log emptied and grown back to the same length is another.
    generation: u64,
    docs: Vec<(String, u64, u32)>,
}

impl Tips {
    fn read(dir: &Path) -> Option<Tips> {
        let text = std::fs::read_to_string(dir.join(TIPS)).ok()?;
        let body = text.strip_suffix("end\n")?;
        let mut lines = body.lines();
        let (log_len, generation) = lines.next()?.strip_prefix("tips ")?.split_once(' ')?;
        let (log_len, generation) = (
            log_len.parse().ok()?,
            u64::from_str_radix(generation, 16).ok()?,
        );
        let mut docs = Vec::new();
        for l in lines {
            let mut p = l.splitn(3, ' ');
            let sum = u64::from_str_radix(p.next()?, 16).ok()?;
            let chain = p.next()?.parse().ok()?;
            docs.push((p.next()?.to_string(), sum, chain));
        }
        Some(Tips {
            log_len,
            generation,
            docs,
        })
    }

    fn get(&self, target: &str) -> Option<(u64, u32)> {
        self.docs.iter().find(|d| d.0 == target).map(|d| (d.1, d.2))
    }

    /// Best effort: a tips file that is not written is not trusted.
    fn write(&self, dir: &Path) {
        let mut text = format!("tips {} {:016x}\n", self.log_len, self.generation);
        for (target, sum, chain) in &self.docs {
            text.push_str(&format!("{sum:016x} {chain} {target}\n"));
        }
        text.push_str("end\n");
        let path = dir.join(TIPS);
        let written = atomic::open_private(&path).and_then(|f| {
            f.write_all_at(text.as_bytes(), 0)?;
            f.set_len(text.len() as u64)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&path);
        }
    }
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

/// What tells one log from the next: the checksum in the frame of its first record (the log
/// is emptied by a checkpoint, whoever runs it, and then starts with another record).
fn generation(log: &File) -> Option<u64> {
    let mut head = [0u8; 256];
    let n = log.read_at(&mut head, 0).ok()?;
    let mut lines = head[..n].split(|b| *b == b'\n');
    lines.next()?.starts_with(HEADER.as_bytes()).then_some(())?;
    let frame = std::str::from_utf8(lines.next()?).ok()?;
    let mut parts = frame.split(' ');
    (parts.next()? == "rec").then_some(())?;
    u64::from_str_radix(parts.nth(2)?, 16).ok()
}

/// A record's frame: `rec <index length> <data length> <checksum>\n`, the index (JSON), the data.
fn frame(record: &Record) -> (Vec<u8>, Vec<&[u8]>) {
    fn logged(w: &Replace) -> &[u8] {
        match &w.delta {
            Some(d) => &d.joined,
            None => &w.data,
        }
    }
    let index = Index {
        w: record
            .writes
            .iter()
            .map(|w| {
                let n = logged(w).len() as u64;
                (w.tmp.clone(), w.target.clone(), w.shadow.clone(), n)
            })
            .collect(),
        a: record
            .appends
            .iter()
            .map(|a| (a.file.clone(), a.at, a.data.len() as u64))
            .collect(),
        d: record
            .writes
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let d = w.delta.as_ref()?;
                let hunks = d.hunks.iter();
                Some((
                    i,
                    d.base,
                    d.sum,
                    hunks
                        .map(|h| (h.start, h.end, h.with.len() as u64))
                        .collect(),
                ))
            })
            .collect(),
    };
    let index_bytes = serde_json::to_vec(&index).expect("an index serializes");
    let mut data: Vec<&[u8]> = record.writes.iter().map(logged).collect();
    data.extend(record.appends.iter().map(|a| a.data.as_bytes()));
    let mut parts = vec![index_bytes.as_slice()];
    parts.extend(data.iter().copied());
    let sum = checksum(&parts);
    let len: usize = data.iter().map(|d| d.len()).sum();
    let index = index_bytes;
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
    // Each write's data is one piece: for a delta, its hunks' bytes one after another.
    let mut deltas: Vec<Option<&(usize, u64, u64, Vec<(u64, u64, u64)>)>> = vec![None; idx.w.len()];
    for d in &idx.d {
        let slot = deltas.get_mut(d.0)?;
        if slot.is_some() || d.3.iter().map(|h| h.2).sum::<u64>() != idx.w[d.0].3 {
            return None;
        }
        *slot = Some(d);
    }
    let pieces: Vec<u64> = idx
        .w
        .iter()
        .map(|w| w.3)
        .chain(idx.a.iter().map(|a| a.2))
        .collect();
    if pieces.iter().sum::<u64>() != dlen {
        return None;
    }
    let mut data = Vec::new();
    if verify {
        data = vec![0u8; dlen as usize];
        log.read_exact_at(&mut data, start + ilen).ok()?;
        let mut parts = vec![index.as_slice()];
        let mut off = 0usize;
        for n in &pieces {
            parts.push(&data[off..off + *n as usize]);
            off += *n as usize;
        }
        if checksum(&parts) != sum {
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
    for ((tmp, target, shadow, n), d) in idx.w.iter().cloned().zip(&deltas) {
        let (data, sum, delta) = match d {
            Some((_, base, sum, hunks)) => {
                let joined = take(n);
                let mut at = 0usize;
                let mut parts = Vec::with_capacity(hunks.len());
                for &(start, end, len) in hunks {
                    let with = if verify {
                        joined[at..at + len as usize].to_vec()
                    } else {
                        Vec::new()
                    };
                    at += len as usize;
                    parts.push(crate::delta::Hunk { start, end, with });
                }
                let delta = Delta {
                    base: *base,
                    sum: *sum,
                    hunks: parts,
                    joined,
                };
                (Vec::new(), *sum, Some(delta))
            }
            None => (take(n), 0, None),
        };
        record.writes.push(Replace {
            tmp,
            target,
            shadow,
            data,
            sum,
            delta,
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
pub fn commit(dir: &Path, record: &mut Record) -> Result<Committed> {
    let log = open(dir, LOG)?;
    let mark = open(dir, FILE)?;
    let path = dir.join(LOG);
    let start = log.metadata().ctx("inspect", &path)?.len();
    // A delta only where the log holds the version it applies to (and the chain is short):
    // anything else is logged whole.
    let tips = if record.writes.iter().any(|w| w.sum != 0) {
        Tips::read(dir).filter(|t| t.log_len == start && generation(&log) == Some(t.generation))
    } else {
        None
    };
    for w in &mut record.writes {
        let known = tips.as_ref().and_then(|t| t.get(&w.target));
        if let Some(d) = &w.delta
            && !known.is_some_and(|(sum, chain)| sum == d.base && chain < MAX_CHAIN)
        {
            w.delta = None;
        }
    }
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
        // A small record (a delta and its events) in one write; a big one without copying.
        let total: usize = data.iter().map(|d| d.len()).sum();
        if total <= 64 * 1024 {
            let mut one = head.clone();
            one.reserve(total);
            for d in &data {
                one.extend_from_slice(d);
            }
            log.write_all_at(&one, start)?;
        } else {
            log.write_all_at(&head, start)?;
            let mut at = start + head.len() as u64;
            for d in &data {
                log.write_all_at(d, at)?;
                at += d.len() as u64;
            }
        }
        log.sync_data()
    })();
    if let Err(e) = written {
        // A torn record is no record.
        let _ = log.set_len(start);
        let _ = mark.set_len(0);
        return Err(Error::io("write the commit record", &path, e));
    }
    if tips.is_some() || record.writes.iter().any(|w| w.sum != 0) {
        // The log's first record: the one the tips were checked against, or (no tips) read.
        let generation = match &tips {
            Some(t) => Some(t.generation),
            None => generation(&log),
        };
        let mut next = tips.unwrap_or_default();
        next.log_len = start + head.len() as u64 + data.iter().map(|d| d.len() as u64).sum::<u64>();
        let Some(g) = generation else {
            let _ = std::fs::remove_file(dir.join(TIPS));
            return Ok(Committed { log, mark, start });
        };
        next.generation = g;
        for w in &record.writes {
            let chain = match (&w.delta, next.get(&w.target)) {
                (Some(_), Some((_, chain))) => chain + 1,
                _ => 0,
            };
            next.docs.retain(|d| d.0 != w.target);
            if w.sum != 0 {
                next.docs.push((w.target.clone(), w.sum, chain));
            }
        }
        next.write(dir);
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
    // Each document's last version, rebuilt from its last whole copy and the deltas after it.
    let mut last: Vec<(&Replace, Vec<u8>, u64)> = Vec::new();
    let mut lost: Vec<&str> = Vec::new();
    for r in &records {
        for a in &r.appends {
            append_at(dir, a)?;
        }
        for w in &r.writes {
            let previous = last.iter().position(|l| l.0.target == w.target);
            let rebuilt = match &w.delta {
                None => Some((w.data.clone(), checksum_of(&w.data))),
                Some(d) => previous
                    .map(|i| &last[i])
                    .filter(|l| l.2 == d.base)
                    .and_then(|l| crate::delta::apply(&l.1, &d.hunks))
                    .filter(|b| checksum_of(b) == d.sum)
                    .map(|b| (b, d.sum)),
            };
            if let Some(i) = previous {
                last.remove(i);
            }
            match rebuilt {
                Some((bytes, sum)) => {
                    lost.retain(|t| *t != w.target);
                    last.push((w, bytes, sum));
                }
                // Never written so (a delta follows the version it applies to in one log), but
                // a log that says otherwise keeps the version on disk, and says so.
                None => lost.push(&w.target),
            }
        }
    }
    for target in lost {
        eprintln!(
            "warning: the commit log could not rebuild {}; the version on disk is kept",
            dir.join(target).display()
        );
    }
    for (w, data, _) in last {
        let target = dir.join(&w.target);
        let shadow = w.shadow.as_ref().map(|_| dir.join(shadow_name(&w.target)));
        let on_disk = super::read_bytes(shadow.as_deref().unwrap_or(&target))?;
        if on_disk.as_deref() == Some(data.as_slice()) {
            continue;
        }
        if let Some(parent) = target.parent() {
            atomic::create_private_dirs(parent)?;
        }
        let tmp = atomic::prepare_named(dir, &prefix, &data, false)?;
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
    // First: once the log is emptied, no delta may refer to a version it held.
    match std::fs::remove_file(dir.join(TIPS)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io("remove", &dir.join(TIPS), e));
        }
        _ => {}
    }
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
                sum: 0,
                delta: None,
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
        let mut rec = setup(done.path());
        commit(done.path(), &mut rec).unwrap().finish(done.path());
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
            let mut rec = setup(tmp.path());
            let c = commit(tmp.path(), &mut rec).unwrap();
            crash(tmp.path(), &rec);
            drop(c);
            assert!(pending(tmp.path()), "{name}");
            assert!(replay(tmp.path()).unwrap(), "{name}: the record is found");
            assert!(!pending(tmp.path()), "{name}: the record is cleared");
            assert_eq!(files(tmp.path()), expected(), "{name}");
            // Replaying the same record again changes nothing.
            let c = commit(tmp.path(), &mut rec).unwrap();
            drop(c);
            replay(tmp.path()).unwrap();
            assert_eq!(files(tmp.path()), expected(), "{name}, replayed twice");
        }
    }

    #[test]
    fn a_torn_record_in_flight_is_cut_off() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let mut rec = setup(d);
        commit(d, &mut rec).unwrap().finish(d);
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
        let mut rec = setup(d);
        commit(d, &mut rec).unwrap().finish(d);
        let mut second = Record {
            writes: vec![Replace {
                tmp: ".tmp-status-y.tmp".into(),
                target: "a.json".into(),
                shadow: None,
                data: b"newer\n".to_vec(),
                sum: 0,
                delta: None,
            }],
            appends: vec![Append {
                file: "events.jsonl".into(),
                at: 10,
                data: "{\"seq\":2}\n".into(),
            }],
        };
        commit(d, &mut second).unwrap().finish(d);
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

    /// A big document (lines of paths) and a version of it with `n` lines changed here and there.
    fn big(n: usize) -> Vec<u8> {
        let mut text = String::new();
        for i in 0..2000 {
            if i % 400 == 7 && i / 400 < n {
                text.push_str(&format!("    \"/p/src/changed-{n}-{i}.rs\": {n},\n"));
            } else {
                text.push_str(&format!("    \"/p/src/file-{i}.rs\": \"web-3f9a1c\",\n"));
            }
        }
        text.into_bytes()
    }

    /// Commit `new` over `a.json` (whose current bytes are `base`) and apply it, as a transaction does.
    fn replace(d: &Path, n: usize, base: &[u8], new: &[u8]) -> u64 {
        let tmp = format!(".tmp-status-{n}.tmp");
        std::fs::write(d.join(&tmp), new).unwrap();
        let mut rec = Record {
            writes: vec![Replace::new(
                tmp,
                "a.json".into(),
                None,
                new.to_vec(),
                Some(base),
            )],
            appends: vec![],
        };
        let before = std::fs::metadata(d.join(LOG)).map_or(0, |m| m.len());
        let c = commit(d, &mut rec).unwrap();
        assert!(apply(d, &rec).is_ok());
        c.finish(d);
        std::fs::metadata(d.join(LOG)).unwrap().len() - before
    }

    fn from_another_boot(d: &Path) {
        let log = std::fs::read(d.join(LOG)).unwrap();
        let nl = log.iter().position(|b| *b == b'\n').unwrap();
        let mut other = format!("{HEADER}00000000-0000-0000-0000-000000000000").into_bytes();
        other.extend_from_slice(&log[nl..]);
        std::fs::write(d.join(LOG), other).unwrap();
    }

    #[test]
    fn a_power_cut_rebuilds_a_big_document_from_its_whole_copy_and_the_deltas_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let versions: Vec<Vec<u8>> = (0..6).map(big).collect();
        std::fs::write(d.join("a.json"), &versions[0]).unwrap();
        let mut logged = Vec::new();
        for n in 1..versions.len() {
            logged.push(replace(d, n, &versions[n - 1], &versions[n]));
        }
        let size = versions[5].len() as u64;
        // The first is logged whole (the log held no version of it), the others as changes.
        assert!(logged[0] > size, "{logged:?}");
        assert!(
            logged[1..].iter().all(|l| *l < size / 20),
            "{logged:?} of {size}"
        );
        let log = std::fs::read_to_string(d.join(LOG)).unwrap();
        assert_eq!(log.matches("\"d\":[[").count(), 4);
        // The machine went down: the renames and the data never reached the disk.
        from_another_boot(d);
        std::fs::write(d.join("a.json"), &versions[0]).unwrap();
        if boot_id().is_none() {
            return;
        }
        assert!(replay(d).unwrap());
        assert_eq!(std::fs::read(d.join("a.json")).unwrap(), versions[5]);
        assert_eq!(std::fs::metadata(d.join(LOG)).unwrap().len(), 0);
        assert!(!d.join(TIPS).exists());
    }

    /// A home with four versions of a big document, the second committed (logged whole: the
    /// log held no version of it), and their size.
    fn logged_whole() -> (tempfile::TempDir, [Vec<u8>; 4], u64) {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let v = [big(0), big(1), big(2), big(3)];
        std::fs::write(d.join("a.json"), &v[0]).unwrap();
        let size = v[1].len() as u64;
        assert!(replace(d, 1, &v[0], &v[1]) > size);
        (tmp, v, size)
    }

    #[test]
    fn a_delta_is_logged_only_against_the_version_the_log_holds() {
        let (tmp, [v0, v1, v2, v3], size) = logged_whole();
        let d = tmp.path();
        // Another program replaced the document since: the log does not hold what was read.
        let theirs = big(4);
        std::fs::write(d.join("a.json"), &theirs).unwrap();
        assert!(replace(d, 2, &theirs, &v2) > size);
        assert!(replace(d, 3, &v2, &v3) < size / 20);
        // A tips file that does not describe the log (a writer killed before updating it).
        let tips = std::fs::read_to_string(d.join(TIPS)).unwrap();
        let stale = tips.replacen("tips ", "tips 1", 1);
        std::fs::write(d.join(TIPS), stale).unwrap();
        assert!(replace(d, 4, &v3, &v0) > size);
        // A torn one.
        std::fs::write(d.join(TIPS), &tips[..tips.len() - 2]).unwrap();
        assert!(replace(d, 5, &v0, &v1) > size);
        // After a checkpoint the log holds nothing to apply changes to.
        assert!(replace(d, 6, &v1, &v2) < size / 20);
        checkpoint(d).unwrap();
        assert!(!d.join(TIPS).exists());
        assert!(replace(d, 7, &v2, &v3) > size);
        // And what a power cut recovers is the last version.
        assert!(replace(d, 8, &v3, &v1) < size / 20);
        from_another_boot(d);
        std::fs::write(d.join("a.json"), &v0).unwrap();
        if boot_id().is_none() {
            return;
        }
        assert!(replay(d).unwrap());
        assert_eq!(std::fs::read(d.join("a.json")).unwrap(), v1);
    }

    #[test]
    fn a_log_emptied_and_grown_back_to_the_same_length_is_another_log() {
        let (tmp, [_, v1, v2, v3], size) = logged_whole();
        let d = tmp.path();
        assert!(replace(d, 2, &v1, &v2) < size / 20);
        // A checkpoint by a version that leaves `commit.tips` in place, then a log of exactly the
        // old length whose first record is another one.
        let tips = std::fs::read(d.join(TIPS)).unwrap();
        let mut log = std::fs::read(d.join(LOG)).unwrap();
        checkpoint(d).unwrap();
        std::fs::write(d.join(TIPS), &tips).unwrap();
        let header = log.iter().position(|b| *b == b'\n').unwrap() + 1;
        let frame = header + log[header..].iter().position(|b| *b == b'\n').unwrap();
        log[frame - 1] = if log[frame - 1] == b'0' { b'1' } else { b'0' };
        std::fs::write(d.join(LOG), &log).unwrap();
        assert!(replace(d, 3, &v2, &v3) > size);
    }

    #[test]
    fn a_long_chain_of_deltas_is_cut_by_a_whole_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let (a, b) = (big(1), big(2));
        std::fs::write(d.join("a.json"), &a).unwrap();
        let size = a.len() as u64;
        let mut whole = 0;
        for n in 0..(MAX_CHAIN as usize * 2 + 3) {
            let (from, to) = if n % 2 == 0 { (&a, &b) } else { (&b, &a) };
            if replace(d, n, from, to) > size {
                whole += 1;
            }
            // Keep the log small enough not to checkpoint.
            if std::fs::metadata(d.join(LOG)).unwrap().len() > CHECKPOINT_BYTES / 2 {
                panic!(
                    "the log grew to {}",
                    std::fs::metadata(d.join(LOG)).unwrap().len()
                );
            }
        }
        assert_eq!(whole, 3);
    }
}
