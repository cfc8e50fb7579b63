//! The redo record (`commit.redo`): what makes a transaction atomic across a crash, whatever
//! number of files it touches.
//!
//! A transaction first writes every new document to a fsynced temp file beside its target.
//! Then, holding the journal lock (the last lock in the order, so one commit at a time), it
//! writes one record naming every rename and every ledger append (with the byte offset it goes
//! at and the exact bytes), and fdatasyncs it: **that write is the commit point**. Only then
//! are the renames done and the lines appended (the event journal last); the files are
//! fsynced, and the record is cleared.
//!
//! After a SIGKILL at any instant the record is either incomplete (its checksum line is
//! missing or wrong: the transaction never committed, nothing of it was applied, and its temp
//! files are debris) or complete, and then [`replay`] finishes it. Replay is idempotent: a
//! rename whose temp file is gone was done; an append whose bytes are already at their offset
//! was done; anything else is cut back to the offset and written again. Whoever takes the
//! journal lock replays a pending record before doing anything else, and every transaction
//! checks for one after taking its own locks and before reading, so nobody ever reads a
//! document that a committed transaction has not finished writing.
//!
//! The record file is created once and then rewritten in place (`pwrite` + `fdatasync`, no
//! directory sync), and cleared by truncation.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::atomic;
use crate::error::{Error, IoContext, Result};

/// The record's file name in the home.
pub const FILE: &str = "commit.redo";

/// One committed transaction's changes, by file name relative to the home.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// `(temp file, target)`: renamed in this order.
    pub renames: Vec<(String, String)>,
    /// Appends, in this order (the event journal last).
    pub appends: Vec<Append>,
}

/// Bytes that go at `at` in `file`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Append {
    pub file: String,
    pub at: u64,
    pub data: String,
}

impl Record {
    pub fn is_empty(&self) -> bool {
        self.renames.is_empty() && self.appends.is_empty()
    }
}

/// FNV-1a, 64 bits: enough to tell a whole record from a torn one.
const CHECKSUM_START: u64 = 0xcbf2_9ce4_8422_2325;

fn checksum(bytes: &[u8]) -> u64 {
    checksum_from(CHECKSUM_START, bytes)
}

/// [`checksum`] continued over more bytes.
fn checksum_from(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

fn open(dir: &Path) -> Result<File> {
    let path = dir.join(FILE);
    let existed = path.exists();
    let f = atomic::open_private(&path).ctx("open", &path)?;
    if !existed {
        // Once, so that later records need no directory sync to be found after a power cut.
        atomic::sync_dir(dir)?;
    }
    Ok(f)
}

/// True when a record may be waiting (a cheap `stat`, for lock-free readers and for
/// transactions right after they take their locks).
pub fn pending(dir: &Path) -> bool {
    std::fs::metadata(dir.join(FILE)).is_ok_and(|m| m.len() > 0)
}

/// Write `record` and make it durable: the commit point. The journal lock is held.
pub fn write(dir: &Path, record: &Record) -> Result<File> {
    let f = open(dir)?;
    let path = dir.join(FILE);
    // Streamed to the file, checksummed on the way (a record may carry megabytes of appended
    // lines: no second copy of them in memory).
    let written = f.set_len(0).and_then(|_| {
        let mut out = Summed {
            file: &f,
            at: 0,
            hash: CHECKSUM_START,
            buf: Vec::with_capacity(64 * 1024),
        };
        serde_json::to_writer(&mut out, record).map_err(std::io::Error::other)?;
        std::io::Write::write_all(&mut out, b"\n")?;
        out.flush_buf()?;
        let trailer = format!("end {:016x} {}\n", out.hash, out.at);
        f.write_all_at(trailer.as_bytes(), out.at)?;
        f.sync_data()
    });
    written.ctx("write the commit record", &path)?;
    Ok(f)
}

/// A writer to the record file that keeps the checksum and length of what passed through it.
struct Summed<'a> {
    file: &'a File,
    at: u64,
    hash: u64,
    buf: Vec<u8>,
}

impl Summed<'_> {
    fn flush_buf(&mut self) -> std::io::Result<()> {
        self.file.write_all_at(&self.buf, self.at)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl std::io::Write for Summed<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.hash = checksum_from(self.hash, bytes);
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= 64 * 1024 {
            self.flush_buf()?;
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.flush_buf()
    }
}

/// Clear the record once everything it names is durable. Not synced: replaying a record whose
/// changes are all in place changes nothing.
pub fn clear(f: &File) {
    let _ = f.set_len(0);
}

/// Empty the record file after a failed write of a record.
pub fn clear_file(dir: &Path) {
    if let Ok(f) = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(FILE))
    {
        let _ = f.set_len(0);
    }
}

/// Parse a record; `None` for an empty, torn or foreign one (a transaction that never
/// committed).
fn parse(bytes: &[u8]) -> Option<Record> {
    if bytes.last() != Some(&b'\n') {
        return None;
    }
    let body_end = bytes[..bytes.len().checked_sub(1)?]
        .iter()
        .rposition(|b| *b == b'\n')?
        + 1;
    let trailer = std::str::from_utf8(&bytes[body_end..]).ok()?.trim_end();
    let mut parts = trailer.split(' ');
    let (Some("end"), Some(sum), Some(len)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let body = &bytes[..body_end];
    (len.parse::<usize>().ok()? == body.len()
        && u64::from_str_radix(sum, 16).ok()? == checksum(body))
    .then(|| serde_json::from_slice(body).ok())?
}

/// Finish the committed transaction in the record, if any, and clear it. The journal lock is
/// held. Returns true if there was one.
pub fn replay(dir: &Path) -> Result<bool> {
    if !pending(dir) {
        return Ok(false);
    }
    let f = open(dir)?;
    let mut bytes = Vec::new();
    {
        use std::io::Read;
        (&f).read_to_end(&mut bytes).ctx("read", &dir.join(FILE))?;
    }
    let found = match parse(&bytes) {
        Some(record) => {
            apply(dir, &record)?;
            true
        }
        None => false,
    };
    clear(&f);
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

/// Do what the record says (idempotently) and make it durable: the appends first (the event
/// journal last; growing a file is what can fail for lack of space), then the renames.
pub fn apply(dir: &Path, record: &Record) -> std::result::Result<(), ApplyError> {
    let mut touched: Vec<(File, &str)> = Vec::new();
    for a in &record.appends {
        touched.push((append_at(dir, a).map_err(ApplyError::Appending)?, &a.file));
    }
    for (f, name) in &touched {
        f.sync_data()
            .ctx("sync", &dir.join(name))
            .map_err(ApplyError::Appending)?;
    }
    for (tmp, target) in &record.renames {
        let from = dir.join(tmp);
        match std::fs::rename(&from, dir.join(target)) {
            Ok(()) => {}
            // Renamed before (the record is being replayed).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ApplyError::Finishing(Error::io(
                    "replace",
                    &dir.join(target),
                    e,
                )));
            }
        }
    }
    if !record.renames.is_empty() || !touched.is_empty() {
        atomic::sync_dir(dir).map_err(ApplyError::Finishing)?;
    }
    // Files renamed into subdirectories of the home (the runtime's per-agent files).
    let mut subdirs: Vec<&Path> = record
        .renames
        .iter()
        .filter_map(|(_, target)| Path::new(target).parent())
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    subdirs.sort();
    subdirs.dedup();
    for d in subdirs {
        atomic::sync_dir(&dir.join(d)).map_err(ApplyError::Finishing)?;
    }
    Ok(())
}

/// Put an append's bytes at its offset unless they are already there.
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
    let len = meta.len();
    let already = len >= a.at + data.len() as u64 && {
        let mut have = vec![0u8; data.len()];
        f.read_exact_at(&mut have, a.at).is_ok() && have == data
    };
    if !already {
        if len != a.at {
            f.set_len(a.at).ctx("cut back", &path)?;
        }
        if let Err(e) = f.write_all_at(data, a.at) {
            let _ = f.set_len(a.at);
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
            let _ = f.set_len(a.at).and_then(|_| f.sync_data());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_record_is_not_a_commit() {
        let rec = Record {
            renames: vec![(".tmp-a.tmp".into(), "a.json".into())],
            appends: vec![Append {
                file: "x.jsonl".into(),
                at: 3,
                data: "{}\n".into(),
            }],
        };
        let mut bytes = serde_json::to_vec(&rec).unwrap();
        bytes.push(b'\n');
        let trailer = format!("end {:016x} {}\n", checksum(&bytes), bytes.len());
        bytes.extend_from_slice(trailer.as_bytes());
        assert_eq!(parse(&bytes), Some(rec));
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[5] ^= 1;
        assert_eq!(parse(&flipped), None);
    }

    /// A home with an old document and two ledgers, a temp file with the new document, and the
    /// record that commits it.
    fn setup(dir: &Path) -> Record {
        std::fs::write(dir.join("a.json"), "old\n").unwrap();
        std::fs::write(dir.join(".tmp-status-x.tmp"), "new\n").unwrap();
        std::fs::write(dir.join("l.jsonl"), "{\"n\":1}\n").unwrap();
        std::fs::write(dir.join("events.jsonl"), "").unwrap();
        Record {
            renames: vec![(".tmp-status-x.tmp".into(), "a.json".into())],
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
            .filter(|(n, _)| n != FILE)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replay_finishes_a_commit_interrupted_at_any_step() {
        let done = tempfile::tempdir().unwrap();
        let rec = setup(done.path());
        apply(done.path(), &rec).ok().unwrap();
        let expected = files(done.path());
        assert_eq!(
            expected,
            vec![
                ("a.json".to_string(), "new\n".to_string()),
                ("events.jsonl".to_string(), "{\"seq\":1}\n".to_string()),
                (
                    "l.jsonl".to_string(),
                    "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n".to_string()
                ),
            ]
        );
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
            crash(tmp.path(), &rec);
            let f = write(tmp.path(), &rec).unwrap();
            drop(f);
            assert!(pending(tmp.path()), "{name}");
            assert!(replay(tmp.path()).unwrap(), "{name}: the record is found");
            assert!(!pending(tmp.path()), "{name}: the record is cleared");
            assert_eq!(files(tmp.path()), expected, "{name}");
            // Replaying the same record again changes nothing.
            write(tmp.path(), &rec).unwrap();
            replay(tmp.path()).unwrap();
            assert_eq!(files(tmp.path()), expected, "{name}, replayed twice");
        }
    }
}
