//! Following files as they are written (`queue log --follow`, `workflow log --follow`) and
//! waking on the home's changes (`top`, `status --watch`): one channel fed by the store's file
//! system watchers (`conductor::store::watch`) and by the stop signals, so a loop sleeps until
//! something it shows may have changed, never on a timer.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::watch::{self, HomeWatcher, Wake};

/// What woke a [`Wakes`] loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woke {
    /// Something watched changed.
    Changed,
    /// The timeout passed.
    Timeout,
    /// SIGINT/SIGTERM, or stdout was closed by its reader.
    Stop,
}

/// Several watchers (and the stop signals) merged into one channel. The watchers are moved to
/// threads of their own, each forwarding its wakeups.
pub struct Wakes {
    tx: Sender<Woke>,
    rx: Receiver<Woke>,
}

impl Wakes {
    /// A channel woken by SIGINT/SIGTERM and a closed stdout. Blocks those signals first: call
    /// before any thread is started.
    #[allow(clippy::new_without_default)] // it blocks the stop signals: never implicit
    pub fn new() -> Wakes {
        watch::block_stop_signals();
        let (tx, rx) = channel();
        let stop = tx.clone();
        watch::on_stop(move || {
            let _ = stop.send(Woke::Stop);
        });
        Wakes { tx, rx }
    }

    /// Also wake when the journal grows (a transaction of any domain committed).
    pub fn journal(&self, store: &Store) -> Result<()> {
        let w = store.watcher(crate::store::journal::is_journal_file)?;
        self.forward(w);
        Ok(())
    }

    /// Also wake when a file in `dir` changes (written, created, renamed or removed).
    pub fn dir(&self, dir: &Path) -> Result<()> {
        let w = HomeWatcher::new(dir, |_| true)?;
        self.forward(w);
        Ok(())
    }

    fn forward(&self, w: HomeWatcher) {
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            loop {
                match w.wait(None) {
                    Wake::Changed => {
                        if tx.send(Woke::Changed).is_err() {
                            return;
                        }
                    }
                    Wake::Timeout => {}
                    Wake::Stop => return,
                }
            }
        });
    }

    /// Wait for the next wakeup (at most `timeout`), then swallow the ones queued behind it: a
    /// burst of writes is read once.
    pub fn wait(&self, timeout: Duration) -> Woke {
        let first = match self.rx.recv_timeout(timeout) {
            Ok(w) => w,
            Err(RecvTimeoutError::Timeout) => return Woke::Timeout,
            Err(RecvTimeoutError::Disconnected) => return Woke::Stop,
        };
        let mut woke = first;
        while let Ok(w) = self.rx.try_recv() {
            if w == Woke::Stop {
                woke = Woke::Stop;
            }
        }
        woke
    }
}

/// The part of a file not printed yet.
pub struct FileTail {
    pub path: PathBuf,
    offset: u64,
}

impl FileTail {
    pub fn new(path: PathBuf) -> FileTail {
        FileTail { path, offset: 0 }
    }

    /// Copy what was appended since the last call to `out`. A missing file is empty. A file
    /// that shrank was rewritten with what was already printed (a job's log is stored without
    /// its ANSI escapes when an attempt ends): it goes on from its new end.
    pub fn pump(&mut self, out: &mut impl Write) -> Result<bool> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("open", &self.path, e)),
        };
        let len = f
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?
            .len();
        if len < self.offset {
            self.offset = len;
        }
        if len == self.offset {
            return Ok(false);
        }
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| Error::io("read", &self.path, e))?;
        let mut buf = Vec::with_capacity((len - self.offset) as usize);
        f.take(len - self.offset)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", &self.path, e))?;
        self.offset += buf.len() as u64;
        write_out(out, &buf)?;
        Ok(!buf.is_empty())
    }

    /// How many bytes were printed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file's first bytes (at most `n`; none when it is missing or empty).
    pub fn head(&self, n: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        if let Ok(f) = std::fs::File::open(&self.path) {
            let _ = f.take(n as u64).read_to_end(&mut buf);
        }
        buf
    }

    /// True when the last byte printed ended a line (or nothing was printed).
    pub fn at_line_start(&self) -> bool {
        if self.offset == 0 {
            return true;
        }
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return true;
        };
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(self.offset - 1)).is_err()
            || f.read_exact(&mut b).is_err()
            || b[0] == b'\n'
    }
}

/// Write to stdout and flush; a closed stdout surfaces as the store's broken-pipe error (which
/// `main` turns into exit 0).
pub fn write_out(out: &mut impl Write, bytes: &[u8]) -> Result<()> {
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("write to", Path::new("stdout"), e))
}

/// A safety net for lost notifications: look again this often even when nothing woke us.
pub const SAFETY_RESCAN: Duration = Duration::from_secs(60);

/// How often to look while a directory the watcher should watch does not exist yet (a job's
/// log directory is made by the dispatcher just before it starts the job): inotify cannot
/// watch what is not there.
pub const NOT_THERE_YET: Duration = Duration::from_millis(200);
