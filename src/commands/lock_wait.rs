//! How the CLI shows a long wait for a lock of the home: one line on stderr, the first time a
//! wait of this process lasts about a second (the store calls back, it never prints). Later
//! waits of the same command say nothing more: one line is enough to explain a slow command.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use conductor::store::{LockWait, WaitNotes};

static SAID: AtomicBool = AtomicBool::new(false);

/// The callback for [`conductor::store::Store::on_wait`].
pub fn notes() -> WaitNotes {
    Arc::new(|w: &LockWait| {
        if !SAID.swap(true, Ordering::Relaxed) {
            eprintln!("{}", line(w));
        }
    })
}

/// The line shown.
pub fn line(w: &LockWait) -> String {
    format!(
        "Blocking: waiting for the {} lock ({}), at most {}s (--lock-timeout)",
        w.purpose,
        w.path.display(),
        w.timeout.as_secs_f64()
    )
}
