//! A command run as a registered instance (`conductor run`): started with
//! CONDUCTOR_INSTANCE_ID in its environment, kept alive by heartbeats from a thread while it
//! runs, with SIGINT/SIGTERM sent to this process forwarded to it. The caller registers the
//! instance before and records it as done after.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use super::request::HeartbeatRequest;
use super::sessions::{self, Caller};
use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::store::watch;
use crate::time::Timestamp;

/// How the command ended.
pub enum Ran {
    /// It could not be started: the notes for its record, and the error to report.
    NotStarted { notes: String, error: Error },
    /// It exited: the status to exit with (128+N when killed by signal N), and what happened
    /// (for the instance's record).
    Exited { code: i32, notes: String },
}

/// Run `command` (program and arguments) as instance `id` of the home at `store` and wait for
/// it, heartbeating every `every` (never with `None`). Heartbeat problems are told to `warn`
/// (from the heartbeat thread). Call [`watch::block_stop_signals`] first, before any thread
/// exists, so that only the forwarding thread receives them.
pub fn run_as(
    store: &Store,
    id: &str,
    command: &[String],
    every: Option<Duration>,
    warn: impl Fn(String) + Send + 'static,
    quiet: bool,
) -> Result<Ran> {
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]).env("CONDUCTOR_INSTANCE_ID", id);
    // The child must not inherit our blocked SIGINT/SIGTERM.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            watch::unblock_stop_signals();
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Ok(Ran::NotStarted {
                notes: format!("could not start {}: {e}", command[0]),
                error: Error::invalid(
                    Reason::SpawnFailed,
                    format!(
                        "could not start `{}`: {e}",
                        crate::text::printable(&command[0])
                    ),
                ),
            });
        }
    };
    let child_pid = child.id() as i32;

    // Forward SIGINT/SIGTERM sent to us by another process; a terminal's Ctrl-C already
    // reached the child through the process group.
    let got_signal = Arc::new(AtomicI32::new(0));
    {
        let got_signal = Arc::clone(&got_signal);
        std::thread::spawn(move || {
            loop {
                let r = watch::wait_stop_signal();
                let _ =
                    got_signal.compare_exchange(0, r.signal, Ordering::SeqCst, Ordering::SeqCst);
                if r.from_process {
                    unsafe {
                        libc::kill(child_pid, r.signal);
                    }
                }
            }
        });
    }

    // Heartbeat from a background thread; each is one short transaction.
    let (stop_tx, stop_rx) = channel::<()>();
    let beats = every.map(|every| {
        let dir = store.home().dir().to_path_buf();
        let id = id.to_string();
        let lock_timeout = store.lock_timeout();
        std::thread::spawn(move || {
            let store = match Store::open(dir, lock_timeout) {
                Ok(s) => s,
                Err(e) => return warn(format!("heartbeats stopped: {e}")),
            };
            loop {
                match stop_rx.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let req = HeartbeatRequest {
                    instance_id: Some(id.clone()),
                    owner_pid: None,
                };
                match sessions::heartbeat(&store, Timestamp::now(), &Caller::default(), &req) {
                    Ok(_) => {}
                    Err(Error::UnknownInstance(_)) => {
                        return warn(format!("{id} is no longer registered; heartbeats stopped"));
                    }
                    Err(e) if !quiet => warn(format!("heartbeat failed: {e}")),
                    Err(_) => {}
                }
            }
        })
    });

    let status = child
        .wait()
        .map_err(|e| Error::io("wait for", std::path::Path::new(&command[0]), e))?;
    drop(stop_tx);
    if let Some(h) = beats {
        let _ = h.join();
    }
    use std::os::unix::process::ExitStatusExt;
    let (code, mut notes) = match (status.code(), status.signal()) {
        (Some(c), _) => (
            c,
            format!(
                "`{}` exited with status {c}",
                crate::text::printable(&command[0])
            ),
        ),
        (None, Some(s)) => (
            128 + s,
            format!(
                "`{}` was killed by signal {s}",
                crate::text::printable(&command[0])
            ),
        ),
        (None, None) => (1, "the command ended in an unknown way".to_string()),
    };
    let sig = got_signal.load(Ordering::SeqCst);
    if sig != 0 {
        notes.push_str(&format!(" (conductor run received signal {sig})"));
    }
    Ok(Ran::Exited { code, notes })
}
