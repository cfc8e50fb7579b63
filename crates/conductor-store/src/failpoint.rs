//! Named points inside the commit where a test kills the process, as `kill -9` would at that
//! instant (issue 34's history checker, `tests/it/history`). Debug builds only: in a release
//! build [`hit`] is an empty inline function, so the commit path pays nothing.
//!
//! `CONDUCTOR_FAILPOINT=NAME[,NAME...]` makes the process SIGKILL itself when it reaches a named
//! point. The points, in the order a commit passes them ([`POINTS`]):
//!
//! | name | where |
//! |---|---|
//! | `commit.staged` | the documents' temp files are written; nothing is committed |
//! | `commit.locked` | every lock is held, the previous writer's record is finished |
//! | `commit.marked` | the in-flight mark is written, the commit record not yet |
//! | `commit.logged` | the record is in the commit log and synced: the commit point is passed |
//! | `apply.appended` | ledger and journal lines are appended, no file renamed yet |
//! | `apply.renamed` | the first file is renamed into place (a document, before its shadow copy and the other documents) |
//! | `commit.applied` | everything is in place; the in-flight mark is not cleared yet |
//! | `etcd.committed` | the shared store committed the transaction; the answer is lost |

/// Every point, in the order a commit reaches them.
pub const POINTS: &[&str] = &[
    "commit.staged",
    "commit.locked",
    "commit.marked",
    "commit.logged",
    "apply.appended",
    "apply.renamed",
    "commit.applied",
    "etcd.committed",
];

/// Kill this process (SIGKILL) if `CONDUCTOR_FAILPOINT` names `name`.
#[cfg(debug_assertions)]
pub fn hit(name: &str) {
    static ARMED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let armed = ARMED.get_or_init(|| {
        std::env::var("CONDUCTOR_FAILPOINT")
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default()
    });
    if armed.iter().any(|a| a == name) {
        // SAFETY: sending a signal to our own pid has no memory-safety requirement.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Release builds: nothing.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn hit(_: &str) {}
