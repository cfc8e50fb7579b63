//! The exclusive lock on `status.lock`, a sentinel file that is never the data file and is never
//! renamed or deleted, so every process locks the same inode.
//!
//! Waiting: first a `try_lock`; if that would block, a helper thread blocks in `lock()` on a
//! clone of the handle (same open file description, so the lock is ours when it returns) while
//! this thread waits on a condition variable until the deadline. Blocking in the kernel is fair
//! in practice; a sleep loop over `try_lock` is not (the style guide measured 190-344 ms worst
//! waits with 8-32 processes against 44-101 ms this way). If the deadline passes first, the
//! helper is told to drop the lock as soon as it gets it.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};

/// Held for the lifetime of a transaction; dropping it clears the holder note and closes the
/// file, which releases the lock.
pub struct StoreLock {
    file: File,
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // A holder note left behind would name a process that no longer holds the lock.
        let _ = self.file.set_len(0);
    }
}

#[derive(PartialEq)]
enum Wait {
    Waiting,
    Acquired,
    Failed(std::io::ErrorKind),
    Abandoned,
}

/// How long a wait lasts before it is announced: a shorter one is not worth a line.
pub const ANNOUNCE_AFTER: Duration = Duration::from_secs(1);

/// Take the lock, waiting at most `timeout`. `announce` is called once if the wait lasts
/// [`ANNOUNCE_AFTER`] (and the lock is still not ours).
pub fn acquire(path: &Path, timeout: Duration, announce: &dyn Fn()) -> Result<StoreLock> {
    // Never through a planted symlink: the holder note truncates the file.
    let file = super::atomic::open_private(path).ctx("open lock file", path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::Error(e)) => return Err(Error::io("lock", path, e)),
        Err(TryLockError::WouldBlock) => {
            wait_for_lock(&file, path, timeout, announce)?;
        }
    }
    // Say who holds it, for the next process's timeout message.
    write_note(
        &file,
        &format!("pid {} ({})", std::process::id(), holder_command()),
    );
    Ok(StoreLock { file })
}

/// Replace what a lock file says about its holder (best effort).
pub fn write_note(mut file: &File, note: &str) {
    let _ = file
        .set_len(0)
        .and_then(|_| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(note.as_bytes()));
}

fn holder_command() -> String {
    let args: Vec<String> = std::env::args().skip(1).take(2).collect();
    format!("conductor {}", args.join(" "))
        .trim_end()
        .to_string()
}

fn wait_for_lock(file: &File, path: &Path, timeout: Duration, announce: &dyn Fn()) -> Result<()> {
    let clone = file.try_clone().ctx("clone lock file handle", path)?;
    let shared = Arc::new((Mutex::new(Wait::Waiting), Condvar::new()));
    let theirs = Arc::clone(&shared);
    std::thread::spawn(move || {
        let result = clone.lock();
        let (m, cv) = &*theirs;
        let mut st = m.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) if *st == Wait::Abandoned => {
                let _ = clone.unlock();
            }
            Ok(()) => *st = Wait::Acquired,
            Err(e) => *st = Wait::Failed(e.kind()),
        }
        cv.notify_all();
    });
    let started = Instant::now();
    let deadline = started + timeout;
    let mut announce_at = Some(started + ANNOUNCE_AFTER);
    let (m, cv) = &*shared;
    let mut st = m.lock().unwrap_or_else(|p| p.into_inner());
    while *st == Wait::Waiting {
        let now = Instant::now();
        if announce_at.is_some_and(|a| a <= now && now < deadline) {
            announce_at = None;
            // Not under the mutex: the helper thread may get the lock meanwhile.
            drop(st);
            announce();
            st = m.lock().unwrap_or_else(|p| p.into_inner());
            continue;
        }
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            *st = Wait::Abandoned;
            return Err(Error::LockTimeout {
                secs: timeout.as_secs_f64(),
                path: path.to_path_buf(),
                holder: read_holder(path),
            });
        }
        let nap = match announce_at {
            Some(a) => left.min(a.saturating_duration_since(now)),
            None => left,
        };
        st = cv
            .wait_timeout(st, nap)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    match &*st {
        Wait::Acquired => Ok(()),
        Wait::Failed(kind) => Err(Error::io("lock", path, std::io::Error::from(*kind))),
        _ => unreachable!("only this thread abandons"),
    }
}

/// The note the current holder wrote, if that process still exists. A crashed holder's note is
/// ignored (the kernel released its lock anyway); a holder that is not conductor (say `flock(1)`)
/// wrote none.
fn read_holder(path: &Path) -> Option<String> {
    let mut s = String::new();
    File::open(path)
        .ok()?
        .take(200)
        .read_to_string(&mut s)
        .ok()?;
    let s = s.trim();
    let pid: u32 = s.strip_prefix("pid ")?.split(' ').next()?.parse().ok()?;
    (!crate::host::pid_is_dead(pid)).then(|| s.to_string())
}

/// A long-running worker's presence (a dispatcher's `queue-run.lock`): a *shared* lock held for
/// as long as it runs, so that several can run at once and another process can tell whether any
/// does ([`anyone_present`]). Released when dropped, or by the kernel when the process dies.
pub struct Presence {
    file: File,
}

/// Announce presence on `path` (a sentinel file, never renamed or deleted). Waits only for a
/// concurrent [`anyone_present`] probe, which holds the lock for a moment.
pub fn announce_presence(path: &Path) -> Result<Presence> {
    let file = super::atomic::open_private(path).ctx("open lock file", path)?;
    file.lock_shared().ctx("lock", path)?;
    Ok(Presence { file })
}

impl Presence {
    /// Withdraw for a moment (see [`anyone_present`]), then announce again.
    pub fn withdraw(&self) {
        let _ = self.file.unlock();
    }

    /// Announce again after [`Presence::withdraw`].
    pub fn renew(&self, path: &Path) -> Result<()> {
        self.file.lock_shared().ctx("lock", path)
    }
}

/// True while some process holds a [`Presence`] on `path`.
pub fn anyone_present(path: &Path) -> Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("open lock file", path, e)),
    };
    match file.try_lock() {
        Ok(()) => Ok(false), // released when `file` closes
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
    }
}

/// A helper that runs once per home while it runs (the edit watcher): an *exclusive* lock on a
/// sentinel file, held for as long as it runs, with a note saying what it does. Released when
/// dropped, or by the kernel when the process dies.
pub struct Sole {
    file: File,
}

/// Become the one holder of `path`, trying for up to `patience` (a [`sole_holder`] probe holds
/// the lock shared for a moment). `None` when another process holds it.
pub fn try_sole(path: &Path, patience: Duration) -> Result<Option<Sole>> {
    let file = super::atomic::open_private(path).ctx("open lock file", path)?;
    let deadline = Instant::now() + patience;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(Sole { file })),
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", path, e)),
            Err(TryLockError::WouldBlock) if Instant::now() >= deadline => return Ok(None),
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl Sole {
    /// Replace the note readers see (best effort).
    pub fn note(&self, text: &str) {
        write_note(&self.file, text);
    }
}

impl Drop for Sole {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// The note of the process holding `path` as a [`Sole`], while one does.
pub fn sole_holder(path: &Path) -> Result<Option<String>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open lock file", path, e)),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(None), // released when `file` closes
        Err(TryLockError::WouldBlock) => {
            let mut s = String::new();
            let _ = (&mut file).take(64 * 1024).read_to_string(&mut s);
            Ok(Some(s))
        }
        Err(TryLockError::Error(e)) => Err(Error::io("lock", path, e)),
    }
}
