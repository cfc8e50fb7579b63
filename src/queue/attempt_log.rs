//! The header line that opens each attempt in a job's log (`queue-logs/<ws>/<job>.log`), so a
//! log of a retried job reads as one section per run, and `queue log` can say which is which.

use crate::time::Timestamp;

use super::Job;

/// What every attempt header starts with.
pub const PREFIX: &str = "=== conductor: attempt ";

/// The header of the job's current attempt (the dispatcher writes it just before the start).
pub fn header(job: &Job, runner: &str, now: Timestamp) -> String {
    let started = job.state.started_at.unwrap_or(now);
    format!(
        "{PREFIX}{} of {} · runner {runner} · started {started} ===\n",
        job.state.attempts,
        job.key()
    )
}

/// True for a log line that opens an attempt.
pub fn is_header(line: &str) -> bool {
    line.starts_with(PREFIX) && line.trim_end().ends_with("===")
}
