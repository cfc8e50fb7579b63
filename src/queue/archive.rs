//! The archive (`queue-finished.jsonl`) and its index, so that a submit never reads the archive.
//!
//! A submit needs one thing from the archive: which of the dependencies it names (that are
//! neither in the manifest nor live in the workspace) are jobs of that workspace that completed
//! and were archived. The index answers that by reading one small file per workspace:
//! - `queue-archive/<workspace>.jsonl`: one line per archived job of the workspace,
//!   `{"id": JOB, "state": STATE, "at": OFFSET}` (the byte offset of its line in the archive),
//!   appended in the transaction that archives the job.
//! - `queue-archive/index.json`: `{"version": "1.0", "archive_bytes": N, "archive_tail": B64}`,
//!   the archive's length and its last bytes when the index was last brought up to date, written
//!   in the same transactions.
//!
//! The index is trusted only while the archive still has exactly that length and those last
//! bytes. Anything else (a home from before the index, an import, a hand edit, a crash that
//! left a torn line for the next append to cut) makes the next transaction that needs it
//! rebuild it from the archive, under the queue lock, in that same transaction; until then
//! readers scan the archive as before. So the index can be stale but never wrong, and every
//! change to it is part of the store transaction that archives (redo-logged: it survives a
//! SIGKILL whole or not at all). A shared (etcd) store keeps no index: it scans, only when a
//! dependency is unresolved.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{JOBS_DONE, Job, State};
use crate::error::Result;
use crate::store::{HomePath, Lock, Store, Tx};

/// The index's directory in the home.
pub const DIR: &str = "queue-archive";
/// The index's marker file in [`DIR`].
pub const MARKER: &str = "index.json";
/// How many of the archive's last bytes the marker keeps.
const TAIL: u64 = 48;

/// `queue-archive/index.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Marker {
    version: String,
    archive_bytes: u64,
    /// The archive's last (up to 48) bytes, base64.
    archive_tail: String,
}

/// One line of `queue-archive/<workspace>.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    id: String,
    state: State,
    at: u64,
}

fn marker_path() -> Result<HomePath> {
    HomePath::new(Lock::Queue, &[DIR, MARKER]).map_err(Into::into)
}

fn workspace_path(ws: &str) -> Result<HomePath> {
    HomePath::new(Lock::Queue, &[DIR, &format!("{ws}.jsonl")]).map_err(Into::into)
}

/// The archive's length and its last [`TAIL`] bytes (0 and none when it does not exist).
fn archive_end(store: &Store) -> Result<(u64, Vec<u8>)> {
    let path = store.home().dir().join(JOBS_DONE.name);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, Vec::new())),
        Err(e) => return Err(crate::Error::io("read", &path, e)),
    };
    let len = f
        .metadata()
        .map_err(|e| crate::Error::io("read", &path, e))?
        .len();
    let from = len.saturating_sub(TAIL);
    let mut tail = Vec::new();
    f.seek(SeekFrom::Start(from))
        .and_then(|_| f.take(len - from).read_to_end(&mut tail))
        .map_err(|e| crate::Error::io("read", &path, e))?;
    Ok((len, tail))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// True when the index describes the archive as it is now.
fn in_sync(store: &Store) -> Result<bool> {
    let Some(bytes) = store.read_at(&marker_path()?)? else {
        return Ok(false);
    };
    let Ok(m) = serde_json::from_slice::<Marker>(&bytes) else {
        return Ok(false);
    };
    let (len, tail) = archive_end(store)?;
    Ok(m.version == "1.0" && m.archive_bytes == len && m.archive_tail == b64(&tail))
}

/// The archived jobs of `ws` in the index, as `(id, state)`.
fn indexed(store: &Store, ws: &str) -> Result<Vec<(String, State)>> {
    let Some(bytes) = store.read_at(&workspace_path(ws)?)? else {
        return Ok(Vec::new());
    };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
        .map(|e| (e.id, e.state))
        .collect())
}

/// Of `wanted` (job ids of workspace `ws`), those that completed and were archived. Reads the
/// index when it is up to date (one small file), else the archive. Reads nothing when `wanted`
/// is empty.
pub fn completed(store: &Store, ws: &str, wanted: &BTreeSet<String>) -> Result<BTreeSet<String>> {
    if wanted.is_empty() {
        return Ok(BTreeSet::new());
    }
    let found: Vec<(String, State)> = if store.state_in_files() && in_sync(store)? {
        indexed(store, ws)?
    } else {
        scan(store)?.remove(ws).unwrap_or_default()
    };
    Ok(found
        .into_iter()
        .filter(|(id, s)| *s == State::Completed && wanted.contains(id))
        .map(|(id, _)| id)
        .collect())
}

/// [`completed`] inside a transaction that holds the queue lock: an index that is not up to
/// date is rebuilt in this transaction first.
pub fn completed_tx(
    tx: &mut Tx,
    store: &Store,
    ws: &str,
    wanted: &BTreeSet<String>,
) -> Result<BTreeSet<String>> {
    if wanted.is_empty() {
        return Ok(BTreeSet::new());
    }
    if store.state_in_files()
        && let Some(mut by_ws) = ensure(tx, store)?
    {
        // Just rebuilt: the new index is staged in `tx`, not on disk yet.
        return Ok(by_ws
            .remove(ws)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.state == State::Completed && wanted.contains(&e.id))
            .map(|e| e.id)
            .collect());
    }
    completed(store, ws, wanted)
}

/// Every archived job by workspace, as `(id, state, offset of its line)`, from the archive.
fn scan_at(store: &Store) -> Result<BTreeMap<String, Vec<Entry>>> {
    let mut by_ws: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    let mut at = 0u64;
    store.read_ledger_file(JOBS_DONE, |_, line| {
        if let crate::store::ledger::Line::Complete(t) = line {
            if let Ok(j) = serde_json::from_str::<Job>(&t) {
                by_ws.entry(j.workspace).or_default().push(Entry {
                    id: j.id,
                    state: j.state.state,
                    at,
                });
            }
            at += t.len() as u64 + 1;
        }
        Ok::<_, crate::Error>(true)
    })?;
    Ok(by_ws)
}

fn scan(store: &Store) -> Result<BTreeMap<String, Vec<(String, State)>>> {
    Ok(scan_at(store)?
        .into_iter()
        .map(|(ws, es)| (ws, es.into_iter().map(|e| (e.id, e.state)).collect()))
        .collect())
}

fn lines(entries: &[Entry]) -> String {
    let mut s = String::new();
    for e in entries {
        s.push_str(&serde_json::to_string(e).expect("entries serialize"));
        s.push('\n');
    }
    s
}

/// Bring the index up to date in `tx` (which holds the queue lock) when it is not: rewrite
/// every workspace's file from the archive (emptying files of workspaces it no longer has) and
/// the marker. Returns what it read from the archive when it had to.
fn ensure(tx: &mut Tx, store: &Store) -> Result<Option<BTreeMap<String, Vec<Entry>>>> {
    if in_sync(store)? {
        return Ok(None);
    }
    let by_ws = scan_at(store)?;
    let dir = store.home().dir().join(DIR);
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(ws) = name.strip_suffix(".jsonl")
                && !by_ws.contains_key(ws)
                && let Ok(p) = workspace_path(ws)
            {
                tx.write_at(&p, Vec::new())?;
            }
        }
    }
    for (ws, entries) in &by_ws {
        tx.write_at(&workspace_path(ws)?, lines(entries).into_bytes())?;
    }
    let (len, tail) = archive_end(store)?;
    write_marker(tx, len, &tail)?;
    Ok(Some(by_ws))
}

fn write_marker(tx: &mut Tx, len: u64, tail: &[u8]) -> Result<()> {
    let m = Marker {
        version: "1.0".into(),
        archive_bytes: len,
        archive_tail: b64(tail),
    };
    let mut bytes = serde_json::to_vec(&m).expect("the marker serializes");
    bytes.push(b'\n');
    tx.write_at(&marker_path()?, bytes).map_err(Into::into)
}

/// Archive `jobs` in `tx` (which holds the queue lock): append them to `queue-finished.jsonl`
/// and, on a local home, to the index, in the same transaction.
pub fn append(tx: &mut Tx, store: &Store, jobs: Vec<Job>) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    // Each job is dropped once serialized (a big workspace's jobs and their lines are
    // megabytes each: not both whole at once), keeping what the index needs.
    let mut new: Vec<String> = Vec::with_capacity(jobs.len());
    let mut keys: Vec<(String, String, State)> = Vec::with_capacity(jobs.len());
    for j in jobs {
        new.push(serde_json::to_string(&j).expect("jobs serialize"));
        keys.push((j.workspace, j.id, j.state.state));
    }
    // What the index needs of the lines (their lengths, the last bytes they end with), so the
    // lines themselves move into the transaction (not copied: a big workspace's are megabytes).
    let lens: Vec<u64> = new.iter().map(|l| l.len() as u64 + 1).collect();
    let mut ending: Vec<u8> = Vec::new();
    for l in new.iter().rev() {
        let mut line = Vec::with_capacity(l.len() + 1 + ending.len());
        line.extend_from_slice(l.as_bytes());
        line.push(b'\n');
        line.extend_from_slice(&ending);
        ending = line;
        if ending.len() >= TAIL as usize {
            break;
        }
    }
    for l in new {
        tx.append(JOBS_DONE, l)?;
    }
    if !store.state_in_files() {
        return Ok(());
    }
    ensure(tx, store)?;
    let (len, mut tail) = archive_end(store)?;
    let mut at = len;
    let mut by_ws: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for ((ws, id, state), n) in keys.into_iter().zip(&lens) {
        by_ws.entry(ws).or_default().push(Entry { id, state, at });
        at += n;
    }
    tail.extend_from_slice(&ending);
    let cut = tail.len().saturating_sub(TAIL as usize);
    tail.drain(..cut);
    for (ws, entries) in by_ws {
        let ls: Vec<String> = entries
            .iter()
            .map(|e| serde_json::to_string(e).expect("entries serialize"))
            .collect();
        tx.append_capped(&workspace_path(&ws)?, &ls, u64::MAX / 2)?;
    }
    write_marker(tx, at, &tail)
}
