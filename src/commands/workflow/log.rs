//! `conductor workflow log SESSION [--state S] [--follow]`: the workers' output, one section
//! per state run under a header line; with `--follow`, streamed as the workers write it.

use std::io::Write;
use std::path::PathBuf;

use super::Ctx;
use crate::commands::follow::{self, FileTail, Wakes, Woke};
use conductor::error::Result;
use conductor::time::Timestamp;
use conductor::workflows::{self, Run, SESSION_FILES_DIR, Session};

/// The long help of `workflow log`.
pub const ABOUT: &str = "Print what a session's workers wrote (stdout and stderr), one section per \
state run, each under a header line `===== conductor: run N (state S, attempt A) at TIME =====`. \
The files are in <home>/workflow-sessions/SESSION/.\n\n\
With --state, only that state's runs. With --follow, keep printing as the workers write (woken by \
the file system watcher on the session's directory and on the journal, not by a timer), a new \
section as each run starts, until the session stops (done, or halted: awaiting approval, paused, \
human intervention, over budget, failed, aborted) with no worker still writing, or with --state, \
until that state has run and the session has moved on.";

/// Exit codes of `workflow log`, shown at the end of its `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  printed; with --follow: the session is done (with --state: the state ran and the session
     moved on), or SIGINT/SIGTERM, or stdout was closed
  2  no such session or state
  5..10  with --follow: the session stopped as `workflow run` reports it: 5 awaiting approval,
     6 paused, 7 human intervention, 8 budget exceeded, 9 failed, 10 aborted";

/// The arguments of `workflow log` (see [`ABOUT`]).
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The session id (a unique prefix is enough).
    pub session: String,
    /// Only the runs of this state.
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Keep printing as the workers write, until the session (or --state) is over.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// The header that opens a run's section.
pub fn header(index: usize, r: &Run) -> String {
    format!(
        "===== conductor: run {} (state {}, attempt {}) at {} =====\n",
        index + 1,
        r.state,
        r.attempt,
        r.started_at
    )
}

/// Run `workflow log`.
pub fn run(ctx: &Ctx, args: LogArgs) -> Result<u8> {
    let first = workflows::find_session(&ctx.store, ctx.now, &args.session)?;
    let id = first.id.clone();
    if let Some(st) = &args.state {
        workflows::timeline::known_state(&first, st)?;
    }
    let wanted = |r: &Run| args.state.as_ref().is_none_or(|s| &r.state == s);
    let stdout = std::io::stdout();
    // Sections printed so far: (index in the session's runs, its file).
    let mut tails: Vec<(usize, FileTail)> = Vec::new();
    let print_new = |s: &Session, tails: &mut Vec<(usize, FileTail)>| -> Result<()> {
        let mut out = stdout.lock();
        // The last section first: its run may have written more before the next one began.
        if let Some((_, t)) = tails.last_mut() {
            t.pump(&mut out)?;
        }
        let next = tails.last().map_or(0, |(i, _)| i + 1);
        for (i, r) in s.runs.iter().enumerate().skip(next) {
            if !wanted(r) {
                continue;
            }
            if let Some((_, t)) = tails.last()
                && !t.at_line_start()
            {
                follow::write_out(&mut out, b"\n")?;
            }
            follow::write_out(&mut out, header(i, r).as_bytes())?;
            let mut t = FileTail::new(PathBuf::from(&r.files.output));
            t.pump(&mut out)?;
            tails.push((i, t));
        }
        out.flush().ok();
        Ok(())
    };
    if !args.follow {
        print_new(&first, &mut tails)?;
        return Ok(0);
    }
    let wakes = Wakes::new();
    wakes.journal(&ctx.store)?;
    let dir = ctx.store.home().dir().join(SESSION_FILES_DIR).join(&id);
    let mut watching_dir = dir.is_dir() && wakes.dir(&dir).is_ok();
    loop {
        let s = workflows::find_session(&ctx.store, Timestamp::now(), &id)?;
        print_new(&s, &mut tails)?;
        if let Some(code) = workflows::timeline::follow_over(&s, args.state.as_deref()) {
            return Ok(code);
        }
        if !watching_dir && dir.is_dir() {
            watching_dir = wakes.dir(&dir).is_ok();
            continue;
        }
        // The session's directory appears with its first run, which the journal tells.
        if wakes.wait(follow::SAFETY_RESCAN) == Woke::Stop {
            return Ok(0);
        }
    }
}
