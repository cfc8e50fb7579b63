//! A running job's log, shipped to the shared store so that `queue log JOB [--follow]` works
//! from any host (issue 36 §3). The dispatcher writes each log to its own host's file as always;
//! on a shared store a thread copies what is new every [`EVERY`] into the stream
//! `queue-log/<ws>/<job>/<attempt>` (chunks of at most [`CHUNK`] bytes, at most [`CAP`] bytes
//! per attempt, then one line saying where the rest is), and the end of a job flushes the rest
//! before its end is recorded: a reader that sees the job ended has all of it. The streams of
//! a workspace go when the workspace is archived.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::store::Store;

/// How often new output is copied to the store.
pub const EVERY: Duration = Duration::from_millis(500);

/// The largest chunk (etcd's default request limit is 1.5 MiB).
pub const CHUNK: usize = 64 * 1024;

/// The most of one attempt's log kept in the store.
pub const CAP: u64 = 4 * 1024 * 1024;

/// The stream name of a job's logs (every attempt's under it).
pub fn job_stream(ws: &str, job: &str) -> String {
    format!("queue-log/{ws}/{job}")
}

/// The stream name of one attempt's log.
pub fn attempt_stream(ws: &str, job: &str, attempt: u32) -> String {
    format!("{}/{attempt:06}", job_stream(ws, job))
}

struct Shipped {
    path: PathBuf,
    stream: String,
    /// Where this attempt begins in the log.
    start: u64,
    offset: u64,
    next: u64,
    capped: bool,
}

/// The logs being shipped to `store`, by job key.
#[derive(Clone)]
pub struct Shipper<'s> {
    store: &'s Store,
    jobs: Arc<Mutex<BTreeMap<String, Shipped>>>,
}

impl<'s> Shipper<'s> {
    /// Shipping to `store`: `None` unless several hosts share it.
    pub fn new(store: &'s Store) -> Option<Shipper<'s>> {
        store.shared_by_hosts().then(|| Shipper {
            store,
            jobs: Arc::default(),
        })
    }

    /// Start shipping a launched job's log, from the header of this attempt (a job run again
    /// on this host appends to its log).
    pub fn add(&self, key: &str, path: PathBuf, stream: String) {
        const HEADER: &[u8] = b"\n===== conductor: attempt ";
        let offset = std::fs::read(&path)
            .ok()
            .and_then(|b| b.windows(HEADER.len()).rposition(|w| w == HEADER))
            .map_or(0, |i| i as u64);
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.insert(
            key.to_string(),
            Shipped {
                path,
                stream,
                start: offset,
                offset,
                next: 0,
                capped: false,
            },
        );
    }

    /// Ship what is new of every log.
    pub fn round(&self) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        for s in jobs.values_mut() {
            ship(self.store, s);
        }
    }

    /// The job ended: ship the rest of its log and stop.
    pub fn finish(&self, key: &str) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut s) = jobs.remove(key) {
            ship(self.store, &mut s);
        }
    }

    /// Ship every log every [`EVERY`] until `stop` closes.
    pub fn run(&self, stop: &std::sync::mpsc::Receiver<()>) {
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(EVERY) {
            self.round();
        }
    }
}

/// Copy what is new in one log (best effort: the log stays on this host whatever happens).
fn ship(store: &Store, s: &mut Shipped) {
    if s.capped {
        return;
    }
    let Ok(mut f) = std::fs::File::open(&s.path) else {
        return;
    };
    if f.seek(SeekFrom::Start(s.offset)).is_err() {
        return;
    }
    let mut buf = vec![0u8; CHUNK];
    loop {
        let room = CAP.saturating_sub(s.offset - s.start) as usize;
        if room == 0 {
            let host = crate::host::hostname().unwrap_or_default();
            let note = format!(
                "\n===== conductor: the rest of this attempt's log is only on host {host}, in {} =====\n",
                s.path.display()
            );
            if store.stream_put(&s.stream, s.next, note.as_bytes()).is_ok() {
                s.next += 1;
                s.capped = true;
            }
            return;
        }
        let want = room.min(CHUNK);
        let n = match f.read(&mut buf[..want]) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if store.stream_put(&s.stream, s.next, &buf[..n]).is_err() {
            return;
        }
        s.next += 1;
        s.offset += n as u64;
    }
}

/// Every attempt's log of a job as the store has it, each attempt under its header line
/// (`None`: a file home, or nothing there yet).
pub fn read(store: &Store, ws: &str, job: &str) -> crate::error::Result<Option<Vec<u8>>> {
    let Some(chunks) = store.stream_read(&job_stream(ws, job))? else {
        return Ok(None);
    };
    if chunks.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<u8> = Vec::new();
    let mut current: Option<String> = None;
    for (stream, bytes) in chunks {
        if current.as_deref() != Some(stream.as_str()) {
            // An attempt that ran on a host with no earlier log has no header of its own.
            let n: u32 = stream
                .rsplit('/')
                .next()
                .and_then(|a| a.parse().ok())
                .unwrap_or(0);
            let own = bytes.starts_with(b"\n===== conductor: attempt ");
            if !own {
                let lead = if out.is_empty() { "" } else { "\n" };
                out.extend_from_slice(
                    format!("{lead}===== conductor: attempt {n} =====\n").as_bytes(),
                );
            } else if out.is_empty() {
                out.extend_from_slice(&bytes[1..]);
                current = Some(stream);
                continue;
            }
            current = Some(stream);
        }
        out.extend_from_slice(&bytes);
    }
    Ok(Some(out))
}
