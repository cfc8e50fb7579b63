//! The queue's change log (`queue-changes.jsonl`): the dispatcher records job state changes by
//! appending one line per commit instead of rewriting all of `queue.json`.
//!
//! The live queue is `queue.json` plus the records of the change log that extends it:
//! - the log's first line is a header naming the exact `queue.json` it extends (its length and
//!   a 64-bit FNV-1a hash of its bytes): `{"queue_changes": 1, "base": "LEN:HASH"}`;
//! - every further line is one dispatcher commit: `{"at": TIME, "set": [{"workspace", "id",
//!   "state", "ran_with"}], "archived": [WORKSPACE, ...]}` (the new state object of each job it
//!   changed, and the workspaces whose jobs it moved to `queue-finished.jsonl`).
//!
//! Every reader of `queue.json` folds the log in ([`super::QueueDoc`]'s decoder does it), so
//! `queue jobs`, `show`, `export`, `doctor`, `serve` and a transaction that rewrites the queue
//! all see the current state. A log whose header does not name the `queue.json` beside it is
//! stale (someone rewrote the queue whole, with the log already folded in) and is ignored.
//!
//! The dispatcher compacts (writes `queue.json` whole, with a new log holding just the header,
//! in one transaction) when it archives a workspace, when the queue changed under it, and when
//! the log outgrows `queue.json` (at least [`COMPACT_MIN`]), so the bytes written per job stay
//! constant: a rewrite of N bytes follows at least N bytes of records.
//!
//! Crash safety is the store's: an append or a compaction is part of a store transaction
//! (redo-logged), so after a SIGKILL it happened whole or not at all. A reader ignores a last
//! line without its newline (an append in progress). A reader that takes no lock and finds a
//! log that does not match the `queue.json` it read (a compaction in between) reads
//! `queue.json` again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ran_with::RanWith;
use super::{JobStatus, QueueDoc};
use crate::store::{LedgerFile, Lock};
use crate::time::Timestamp;

/// The change log, beside `queue.json`.
pub const CHANGES: LedgerFile = LedgerFile {
    name: "queue-changes.jsonl",
    lock: Lock::Queue,
};

/// The log is folded into `queue.json` once it is larger than both `queue.json` and this.
pub const COMPACT_MIN: u64 = 256 * 1024;

/// The log's first line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    queue_changes: u32,
    base: String,
}

/// One job's new state.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetState {
    pub workspace: String,
    pub id: String,
    pub state: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_with: Option<RanWith>,
}

/// One commit's changes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<SetState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archived: Vec<String>,
}

/// `LEN:HASH` of a `queue.json`'s bytes (FNV-1a, 64 bits: stable across builds).
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}:{h:016x}", bytes.len())
}

/// The header line (with its newline) of a log extending the `queue.json` of this
/// [`fingerprint`].
pub fn header(fingerprint: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&Header {
        queue_changes: 1,
        base: fingerprint.to_string(),
    })
    .expect("the header serializes");
    v.push(b'\n');
    v
}

/// A record as a log line (without its newline).
pub fn line(r: &Record) -> String {
    serde_json::to_string(r).expect("records serialize")
}

/// What the log beside a `queue.json` says about it.
enum Log {
    /// No log, or an empty one: `queue.json` is the whole state.
    None,
    /// The log extends these very bytes: its records, in order.
    Extends(Vec<Record>),
    /// The log extends some other `queue.json`.
    Other,
}

fn read_log(queue_json: &Path, base: &[u8]) -> Log {
    let path = queue_json.with_file_name(CHANGES.name);
    let Ok(bytes) = std::fs::read(&path) else {
        return Log::None;
    };
    // Only whole lines: a last line without its newline is an append in progress (or torn by
    // a crash, which the next transaction's redo replay cuts).
    let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
        return Log::None;
    };
    let mut lines = bytes[..end].split(|b| *b == b'\n');
    let Some(first) = lines.next() else {
        return Log::None;
    };
    match serde_json::from_slice::<Header>(first) {
        Ok(h) if h.queue_changes == 1 && h.base == fingerprint(base) => {}
        _ => return Log::Other,
    }
    // A line that does not parse is skipped (never written by conductor; a hand edit).
    Log::Extends(
        lines
            .filter_map(|l| serde_json::from_slice::<Record>(l).ok())
            .collect(),
    )
}

/// Apply records to a queue.
pub fn apply(doc: &mut QueueDoc, records: Vec<Record>) {
    for r in records {
        for s in r.set {
            if let Some(i) = doc.position(&s.workspace, &s.id) {
                let job = &mut doc.jobs[i];
                job.state = s.state;
                if s.ran_with.is_some() {
                    job.ran_with = s.ran_with;
                }
            }
        }
        if !r.archived.is_empty() {
            doc.jobs.retain(|j| !r.archived.contains(&j.workspace));
        }
        doc.updated_at = r.at;
    }
}

/// Decode `queue.json` (`parse` its bytes) and fold in its change log. `bytes` were read from
/// `path` without a lock: when the log extends another version, `path` is read again.
pub fn decode_folded(
    path: &Path,
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> crate::store::Result<QueueDoc>,
) -> crate::store::Result<QueueDoc> {
    let mut current: std::borrow::Cow<[u8]> = std::borrow::Cow::Borrowed(bytes);
    for _ in 0..16 {
        match read_log(path, &current) {
            Log::None => return parse(&current),
            Log::Extends(records) => {
                let mut doc = parse(&current)?;
                apply(&mut doc, records);
                return Ok(doc);
            }
            Log::Other => match std::fs::read(path) {
                Ok(again) if again != *current => current = std::borrow::Cow::Owned(again),
                // Unchanged (or gone): the log is stale, `queue.json` is the whole state.
                _ => return parse(&current),
            },
        }
    }
    parse(&current)
}
