//! Waking up when the home changes, without polling and without ever taking the lock.
//!
//! [`HomeWatcher`] watches the conductor home directory itself (not `status.json`: writers
//! replace it by renaming a temp file over it, which swaps the inode a file watch would follow)
//! with the platform watcher (`notify`, inotify on Linux). Events for files the caller does not
//! care about are dropped in the callback; the rest `try_send` on a channel of capacity one, so a
//! burst of appends becomes a single wakeup and the consumer reads everything new at once.
//!
//! If the platform watcher cannot be used (no inotify instances left, a network file system) or
//! `CONDUCTOR_WATCH_POLL=1` is set, it falls back to notify's poll watcher and says so once on
//! stderr. `CONDUCTOR_WATCH_POLL=never` forbids the fallback (making a watcher fails instead):
//! the tests set it where they bound how fast a change wakes a waiter, so that only a
//! notification can pass.
//!
//! [`StopSignals`] turns SIGINT/SIGTERM and a closed stdout into a wakeup plus a flag, so a
//! long-running command can finish cleanly with exit 0.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use notify::Watcher;

use crate::error::{Error, Result};

/// How often the fallback poll watcher looks at the home.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Why [`HomeWatcher::wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Something we watch changed (or may have: the watcher lost track and asks for a rescan).
    Changed,
    /// The timeout passed with no change.
    Timeout,
    /// A stop signal arrived or stdout closed (see [`StopSignals`]).
    Stop,
}

/// A watch on the home directory. Dropping it stops watching.
pub struct HomeWatcher {
    rx: Receiver<()>,
    tx: SyncSender<()>,
    stop: Arc<AtomicBool>,
    _watcher: Option<Box<dyn Watcher + Send>>,
    /// True when the poll watcher is in use.
    pub polling: bool,
}

fn nudge(tx: &SyncSender<()>) {
    match tx.try_send(()) {
        Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
    }
}

impl HomeWatcher {
    /// Watch `dir` for changes to files whose names satisfy `wanted`.
    pub fn new(dir: &Path, wanted: fn(&str) -> bool) -> Result<HomeWatcher> {
        let (tx, rx) = sync_channel::<()>(1);
        let theirs = tx.clone();
        let handler = move |res: notify::Result<notify::Event>| match res {
            // Opening or reading a file is not a change: without this, every reader of the
            // journal would wake every other watcher, and two watchers would wake each other.
            Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
            Ok(ev) => {
                let ours = ev.need_rescan()
                    || ev.paths.is_empty()
                    || ev
                        .paths
                        .iter()
                        .any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(wanted));
                if ours {
                    nudge(&theirs);
                }
            }
            Err(_) => nudge(&theirs),
        };
        let poll = std::env::var("CONDUCTOR_WATCH_POLL").unwrap_or_default();
        let never_poll = poll == "never";
        let force_poll = !poll.is_empty() && poll != "0" && !never_poll;
        let native: std::result::Result<Box<dyn Watcher + Send>, String> = if force_poll {
            Err("CONDUCTOR_WATCH_POLL is set".into())
        } else {
            let handler = handler.clone();
            notify::RecommendedWatcher::new(handler, notify::Config::default())
                .and_then(|mut w| {
                    w.watch(dir, notify::RecursiveMode::NonRecursive)
                        .map(|()| w)
                })
                .map(|w| Box::new(w) as Box<dyn Watcher + Send>)
                .map_err(|e| e.to_string())
        };
        let (watcher, polling) = match native {
            Ok(w) => (w, false),
            Err(why) if never_poll => {
                return Err(Error::io(
                    "watch",
                    dir,
                    std::io::Error::other(format!(
                        "the file system watcher is unavailable ({why}) and CONDUCTOR_WATCH_POLL=never forbids polling"
                    )),
                ));
            }
            Err(why) => {
                eprintln!(
                    "conductor: the file system watcher is unavailable ({why}); polling {} every {} ms instead",
                    dir.display(),
                    POLL_INTERVAL.as_millis()
                );
                let cfg = notify::Config::default().with_poll_interval(POLL_INTERVAL);
                let mut w =
                    notify::PollWatcher::new(handler, cfg).map_err(|e| watch_error(dir, e))?;
                w.watch(dir, notify::RecursiveMode::NonRecursive)
                    .map_err(|e| watch_error(dir, e))?;
                (Box::new(w) as Box<dyn Watcher + Send>, true)
            }
        };
        Ok(HomeWatcher {
            rx,
            tx,
            stop: Arc::new(AtomicBool::new(false)),
            _watcher: Some(watcher),
            polling,
        })
    }

    /// Watch the shared store's keys: a change to a key wakes the watcher when `wanted` accepts
    /// the file name it stands for (a document's file, a ledger's file, `events.jsonl` for the
    /// journal). Returns once etcd confirmed the watch, so nothing committed after is missed.
    pub fn remote(r: &crate::etcd::Etcd, wanted: fn(&str) -> bool) -> Result<HomeWatcher> {
        let (tx, rx) = sync_channel::<()>(1);
        let theirs = tx.clone();
        let root = r.root();
        r.watch(move |keys: &[String]| {
            let ours = keys.is_empty()
                || keys.iter().any(|k| {
                    let rest = k.strip_prefix(&root).unwrap_or(k);
                    let name = match rest.split_once('/') {
                        Some(("journal", _)) => crate::journal::ACTIVE,
                        Some(("doc", file)) => file,
                        // A paged document's head and pages (see `split`).
                        Some(("split", paged)) => paged.split('/').next().unwrap_or(paged),
                        Some(("ledger", l)) => l.split('/').next().unwrap_or(l),
                        _ => rest,
                    };
                    wanted(name)
                });
            if ours {
                nudge(&theirs);
            }
        })?;
        Ok(HomeWatcher {
            rx,
            tx,
            stop: Arc::new(AtomicBool::new(false)),
            _watcher: None,
            polling: false,
        })
    }

    /// Wait for a change, at most `timeout` (forever with `None`).
    pub fn wait(&self, timeout: Option<Duration>) -> Wake {
        if self.stop.load(Ordering::SeqCst) {
            return Wake::Stop;
        }
        let got = match timeout {
            Some(t) => self.rx.recv_timeout(t),
            None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        if self.stop.load(Ordering::SeqCst) {
            return Wake::Stop;
        }
        match got {
            Ok(()) => Wake::Changed,
            Err(RecvTimeoutError::Timeout) => Wake::Timeout,
            Err(RecvTimeoutError::Disconnected) => Wake::Stop,
        }
    }

    /// A handle that makes [`wait`](Self::wait) return [`Wake::Stop`] from any thread (a
    /// waiting request its client cancelled).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let (stop, tx) = (Arc::clone(&self.stop), self.tx.clone());
        move || {
            stop.store(true, Ordering::SeqCst);
            nudge(&tx);
        }
    }

    /// True once a stop signal arrived.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Make [`wait`](Self::wait) return [`Wake::Stop`] on SIGINT/SIGTERM and when stdout
    /// (a pipe or socket) is closed by its reader. The signals must already be blocked with
    /// [`block_stop_signals`] (before any thread was started).
    pub fn stop_on_signals_and_closed_stdout(&self) {
        let (stop, tx) = (Arc::clone(&self.stop), self.tx.clone());
        on_stop(move || {
            stop.store(true, Ordering::SeqCst);
            nudge(&tx);
        });
    }
}

/// Call `stop` (from a thread of its own) on SIGINT/SIGTERM, and when stdout (a pipe or socket)
/// is closed by its reader: for loops that wait on a channel of their own rather than on a
/// [`HomeWatcher`]. The signals must already be blocked with [`block_stop_signals`].
pub fn on_stop(stop: impl Fn() + Send + Clone + 'static) {
    let on_signal = stop.clone();
    std::thread::spawn(move || {
        let _ = wait_stop_signal();
        on_signal();
    });
    if stdout_is_pipe() {
        std::thread::spawn(move || {
            wait_stdout_closed();
            stop();
        });
    }
}

fn watch_error(dir: &Path, e: notify::Error) -> Error {
    Error::io("watch", dir, std::io::Error::other(e.to_string()))
}

fn stop_set() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Block SIGINT and SIGTERM in this thread and every thread it starts afterwards, so that they
/// are only received by [`wait_stop_signal`]. Call before starting any thread.
pub fn block_stop_signals() {
    let set = stop_set();
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Undo [`block_stop_signals`] (async-signal-safe: used between fork and exec).
pub fn unblock_stop_signals() {
    let set = stop_set();
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// A stop signal as received: its number and whether another process sent it (`kill`), as
/// opposed to the terminal (Ctrl-C, which also reaches our children).
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub signal: i32,
    pub from_process: bool,
}

/// Wait for SIGINT or SIGTERM (blocked beforehand with [`block_stop_signals`]).
pub fn wait_stop_signal() -> Received {
    let set = stop_set();
    loop {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig > 0 {
            let code = info.si_code;
            return Received {
                signal: sig,
                from_process: code == libc::SI_USER || code == libc::SI_QUEUE,
            };
        }
    }
}

fn stdout_is_pipe() -> bool {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(1, &mut st) } != 0 {
        return false;
    }
    let kind = st.st_mode & libc::S_IFMT;
    kind == libc::S_IFIFO || kind == libc::S_IFSOCK
}

/// Block until stdout reports an error or hang-up (its reader went away). No timer involved.
fn wait_stdout_closed() {
    loop {
        let mut fds = libc::pollfd {
            fd: 1,
            events: 0,
            revents: 0,
        };
        let rc = unsafe { libc::poll(&mut fds, 1, -1) };
        if rc > 0 && fds.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}
