//! Retention of the append-only ledgers (`history.jsonl`, `conflicts.log`,
//! `queue-finished.jsonl`, `runtime-messages.jsonl`, ... every [`super::LedgerFile`]), like the
//! event journal's segments.
//!
//! Rule: when a transaction appends to a ledger whose file has reached `ledger_rotate_bytes`
//! (config.json, default 16 MiB), the file is first renamed to `<name>.<N>` (`N` six digits,
//! one more than the newest rotated file; so `grep PATTERN <home>/history.jsonl*` reads every
//! line kept) and the lines go to a fresh file. Then the oldest rotated files past
//! `ledger_keep_files` (default 32) are removed, and so are rotated files last written more than
//! `ledger_keep_days` days ago (default: no age limit), oldest first and never the newest one.
//! This happens inside the commit, holding the ledger's lock and the journal's: a reader never
//! sees a line twice or not at all, and a crash leaves either the old file or the rotated one
//! plus a fresh one (the rename is atomic, and the append follows through the commit record).
//!
//! Readers that need old entries read across the rotated files, oldest first
//! ([`for_each_line`]). A shared store keeps ledgers as keys and does not rotate them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::ledger::{self, Line};
use crate::error::{Error, Result};

/// Default size past which a ledger rotates.
pub const DEFAULT_ROTATE_BYTES: u64 = 16 * 1024 * 1024;
/// Default number of rotated files kept per ledger.
pub const DEFAULT_KEEP_FILES: u64 = 32;

/// The ledgers' retention settings (from `config.json`).
#[derive(Clone, Copy, Debug)]
pub struct LedgerRetention {
    pub rotate_bytes: u64,
    pub keep_files: u64,
    /// `None`: no age limit.
    pub keep_days: Option<u64>,
}

impl LedgerRetention {
    /// The settings in `config.json` at `path` (`ledger_rotate_bytes`, `ledger_keep_files`,
    /// `ledger_keep_days`), with defaults; `corrupt_state` when one is not a count.
    pub fn read(path: &Path) -> Result<LedgerRetention> {
        #[derive(serde::Deserialize)]
        struct Keys {
            ledger_rotate_bytes: Option<u64>,
            ledger_keep_files: Option<u64>,
            ledger_keep_days: Option<u64>,
        }
        let c: Keys = match super::read_bytes(path)? {
            None => Keys {
                ledger_rotate_bytes: None,
                ledger_keep_files: None,
                ledger_keep_days: None,
            },
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| super::corrupt(path, format!("schema violation ({e})")))?,
        };
        Ok(LedgerRetention {
            rotate_bytes: c.ledger_rotate_bytes.unwrap_or(DEFAULT_ROTATE_BYTES).max(1),
            keep_files: c.ledger_keep_files.unwrap_or(DEFAULT_KEEP_FILES).max(1),
            keep_days: c.ledger_keep_days.map(|d| d.max(1)),
        })
    }
}

fn parse_rotated(name: &str, ledger: &str) -> Option<u64> {
    let digits = name.strip_prefix(ledger)?.strip_prefix('.')?;
    (digits.len() >= 6 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// The rotated files of ledger `name` in `dir`, oldest first.
pub fn rotated(dir: &Path, name: &str) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|f| parse_rotated(f, name))
        {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Rotate ledger `name` if its file has reached the limit, then prune (the ledger's lock and
/// the journal's are held). Returns true when it rotated.
pub fn rotate_if_due(dir: &Path, name: &str, r: LedgerRetention) -> Result<bool> {
    let path = dir.join(name);
    let len = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("inspect", &path, e)),
    };
    if len < r.rotate_bytes {
        return Ok(false);
    }
    // A torn last line (a crash mid-append long ago) is settled before the file is closed off.
    ledger::repair(&path)?;
    let old = rotated(dir, name)?;
    let next = old.last().map_or(1, |(n, _)| n + 1);
    let target = dir.join(format!("{name}.{next:06}"));
    // The commit log has offsets into this file: none may be applied to its successor.
    crate::redo::checkpoint(dir)?;
    std::fs::rename(&path, &target).map_err(|e| Error::io("rotate", &path, e))?;
    crate::atomic::sync_dir(dir)?;
    prune(dir, name, r)?;
    Ok(true)
}

fn prune(dir: &Path, name: &str, r: LedgerRetention) -> Result<()> {
    let files = rotated(dir, name)?;
    let excess = files.len().saturating_sub(r.keep_files as usize);
    let max_age = r
        .keep_days
        .map(|d| Duration::from_secs(d.saturating_mul(86_400)));
    let mut removed_all_before = true;
    for (i, (_, path)) in files.iter().enumerate() {
        let newest = i + 1 == files.len();
        let old = max_age.is_some_and(|max| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > max)
        });
        // Oldest first and contiguous: what is kept is always the newest lines.
        if !newest && (i < excess || (old && removed_all_before)) {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("prune", path, e)),
            }
        } else {
            removed_all_before = false;
        }
    }
    Ok(())
}

/// Stream the lines of ledger `name` across its rotated files (oldest first) and the live file,
/// numbered from 1 across all of them. Only the live file can end in a torn line.
pub fn for_each_line<E: From<Error>>(
    dir: &Path,
    name: &str,
    mut f: impl FnMut(usize, Line) -> Result<bool, E>,
) -> Result<(), E> {
    let mut base = 0;
    let mut more = true;
    let files: Vec<PathBuf> = rotated(dir, name)?
        .into_iter()
        .map(|(_, p)| p)
        .chain(std::iter::once(dir.join(name)))
        .collect();
    for path in files {
        let mut last = 0;
        ledger::for_each_line(&path, |n, line| {
            last = n;
            more = f(base + n, line)?;
            Ok::<_, E>(more)
        })?;
        base += last;
        if !more {
            break;
        }
    }
    Ok(())
}
