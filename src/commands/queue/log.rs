//! `conductor queue log JOB [--follow]`: a job's output, each attempt under its header line;
//! with `--follow`, streamed as it is written until the job ends.

use std::path::{Path, PathBuf};

use clap::Args;

use super::all_jobs;
use crate::commands::Ctx;
use crate::commands::follow::{self, FileTail, Wakes, Woke};
use conductor::error::Result;
use conductor::queue::{Job, Layout, State, ship};

/// The long help of `queue log`.
pub const ABOUT: &str = "Print a job's log (its agent's stdout and stderr, in queue-logs/<ws>/<job>.log, \
stored without ANSI escapes once an attempt ends; on a shared store, a job whose log is not on \
this host is read from the copy its dispatcher keeps in the store, up to 4 MiB per attempt). Each attempt opens with a header line \
`===== conductor: attempt N (RUNNER runner) at TIME =====`, so the runs of a retried job stay \
apart (the first attempt's header is printed by this command; the file has the later ones).\n\n\
With --follow, keep printing what the job writes as it writes it (woken by the file system watcher \
on the log's directory and on the journal, not by a timer) until the job has ended, then exit. A job \
that is queued or waiting for a retry is followed too: its next attempt's output appears when it \
starts.";

/// Exit codes of `queue log`, shown at the end of its `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  printed; with --follow: the job completed (or SIGINT/SIGTERM, or stdout was closed)
  2  no such job, or an ambiguous id (name it as WORKSPACE/JOB)
  5  with --follow: the job ended without completing (failed, timed out, blocked, cancelled)";

/// The arguments of `queue log` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct LogArgs {
    /// The job: `JOB`, or `WORKSPACE/JOB` when the id is used in several workspaces.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// Keep printing as the job writes, until it ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

use conductor::queue::lookup::ended;

/// The job's current record: live first, then archived.
fn current(ctx: &Ctx, key: &str) -> Result<Option<Job>> {
    conductor::queue::lookup::current(&ctx.store, conductor::time::Timestamp::now(), key)
}

/// What every attempt header starts with (see `conductor::queue::plain::attempt_header`).
const HEADER: &[u8] = b"===== conductor: attempt ";

/// The log file has headers for the attempts after the first: print one for the first when
/// its output begins.
fn first_header(tail: &FileTail, job: &Job, out: &mut impl std::io::Write) -> Result<()> {
    if tail.offset() != 0 {
        return Ok(());
    }
    let head = tail.head(HEADER.len() + 1);
    let head = head.strip_prefix(b"\n").unwrap_or(&head);
    if head.is_empty() || head.starts_with(HEADER) {
        return Ok(());
    }
    let s = &job.state;
    let line = match (s.attempts, &s.runner, s.started_at) {
        (1, Some(runner), Some(at)) => {
            format!("===== conductor: attempt 1 ({runner} runner) at {at} =====\n")
        }
        _ => "===== conductor: attempt 1 =====\n".to_string(),
    };
    follow::write_out(out, line.as_bytes())
}

/// Run `queue log`.
pub fn run(ctx: &Ctx, args: LogArgs) -> Result<u8> {
    let jobs = all_jobs(ctx, true)?;
    let job = super::show::find(&jobs, &args.job)?;
    let layout = Layout {
        home: ctx.store.home().dir().to_path_buf(),
    };
    let path = layout.log(&job.workspace, &job.id);
    // On a shared store, a job that ran (or runs) on another host: its log is in the store.
    if ctx.store.shared_by_hosts() && !path.exists() {
        return from_store(ctx, &job, args.follow);
    }
    let mut tail = FileTail::new(path.clone());
    let stdout = std::io::stdout();
    if !args.follow {
        first_header(&tail, &job, &mut stdout.lock())?;
        tail.pump(&mut stdout.lock())?;
        return Ok(0);
    }
    let wakes = Wakes::new();
    // Watch first, then read: nothing written in between is missed.
    wakes.journal(&ctx.store)?;
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut watching_dir = dir.is_dir() && wakes.dir(&dir).is_ok();
    let key = job.key();
    loop {
        // Read the state before the log: a job seen ended has written everything (the
        // dispatcher records its end after its output is copied).
        let now = current(ctx, &key)?;
        // The output of a start not committed yet waits for its commit (which wakes us): its
        // header then names the attempt's runner and time.
        match &now {
            Some(j) if j.state.attempts == 0 && !ended(j.state.state) => {}
            Some(j) => {
                first_header(&tail, j, &mut stdout.lock())?;
                tail.pump(&mut stdout.lock())?;
            }
            None => {
                tail.pump(&mut stdout.lock())?;
            }
        }
        match &now {
            Some(j) if !ended(j.state.state) => {}
            Some(j) => {
                return Ok(if j.state.state == State::Completed {
                    0
                } else {
                    5
                });
            }
            // Gone from both lists (the home was reset): nothing more will come.
            None => return Ok(0),
        }
        if !watching_dir && dir.is_dir() {
            watching_dir = wakes.dir(&dir).is_ok();
            continue; // read again: it may have been written before the watch began
        }
        // A queued job's log directory appears when it starts, which the journal tells; only a
        // running job whose directory is not there yet is looked at on a short timer.
        let running = now
            .as_ref()
            .is_some_and(|j| j.state.state == State::Running);
        let timeout = if watching_dir || !running {
            follow::SAFETY_RESCAN
        } else {
            follow::NOT_THERE_YET
        };
        if wakes.wait(timeout) == Woke::Stop {
            return Ok(0);
        }
    }
}

/// `queue log` of a job whose log is not on this host: the copy its dispatcher keeps in the
/// shared store (see `conductor::queue::ship`), followed on the journal and every half second
/// (the copy is refreshed that often) until the job ends.
fn from_store(ctx: &Ctx, job: &Job, follow_it: bool) -> Result<u8> {
    let key = job.key();
    let stdout = std::io::stdout();
    let wakes = Wakes::new();
    if follow_it {
        wakes.journal(&ctx.store)?;
    }
    let mut printed = 0usize;
    loop {
        // The state before the log: a job seen ended has all of its log in the store.
        let now = current(ctx, &key)?;
        let bytes = ship::read(&ctx.store, &job.workspace, &job.id)?.unwrap_or_default();
        if bytes.len() > printed {
            follow::write_out(&mut stdout.lock(), &bytes[printed..])?;
            printed = bytes.len();
        }
        if !follow_it {
            return Ok(0);
        }
        match &now {
            Some(j) if !ended(j.state.state) => {}
            Some(j) => {
                return Ok(if j.state.state == State::Completed {
                    0
                } else {
                    5
                });
            }
            None => return Ok(0),
        }
        if wakes.wait(ship::EVERY) == Woke::Stop {
            return Ok(0);
        }
    }
}
