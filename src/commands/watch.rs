//! `conductor watch [--after SEQ] [--types a,b] [--instance ID] [--json]`: print events as they
//! are appended, woken by the file system watcher (see `conductor::store::watch`), never taking the lock.

use std::io::Write;
use std::time::Duration;

use super::Ctx;
use super::events::Filter;
use conductor::error::{Error, Result};
use conductor::store::journal::{self};
use conductor::store::watch::{self, Wake};

/// Watch events.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Prints each event as it is appended: one readable line each, or the event \
object as one JSON line with --json. Without --after it starts at the end (only new events); with \
--after SEQ it first replays everything after SEQ, so a consumer that remembers the last seq it saw \
never misses or repeats an event. A cursor older than the oldest kept event fails with \
`cursor_expired` (exit 2).\n\nWakes up on file system notifications (inotify); where they are \
unavailable it polls every 250 ms and says so once on stderr (CONDUCTOR_WATCH_POLL=1 forces that). \
Exits 0 on SIGINT, SIGTERM, when stdout is closed, or after --count events.\n\nExamples:\n  \
conductor watch\n  conductor watch --json --after 120 --types claim.released,instance.done | jq ."
)]
pub struct WatchArgs {
    /// Replay events after this seq first [default: start at the end].
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Only these event types (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub types: Vec<String>,
    /// Only events whose actor or target is this instance.
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
    /// Exit 0 after printing this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// A safety net for lost notifications: re-read this often even when nothing woke us.
const SAFETY_RESCAN: Duration = Duration::from_secs(60);

/// Run `watch`.
pub fn run(ctx: &Ctx, args: WatchArgs) -> Result<u8> {
    watch::block_stop_signals();
    let filter = Filter::new(args.types, args.instance)?;
    // Watch first, then position the cursor: nothing appended in between is missed.
    let watcher = ctx.store.watcher(journal::is_journal_file)?;
    watcher.stop_on_signals_and_closed_stdout();
    let mut tail = ctx.store.tail(args.after)?;
    if !ctx.out.json {
        ctx.out.status(&format!(
            "Watching {} from seq {} (Ctrl-C to stop)",
            ctx.store.location(),
            tail.after
        ));
    }
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    loop {
        let mut failure: Option<std::io::Error> = None;
        let mut out = stdout.lock();
        tail.read(|e| {
            if !filter.matches(&e) {
                return true;
            }
            let line = if ctx.out.json {
                serde_json::to_string(&e).expect("events serialize")
            } else {
                e.one_line()
            };
            if let Err(err) = writeln!(out, "{line}") {
                failure = Some(err);
                return false;
            }
            printed += 1;
            args.count.is_none_or(|c| printed < c)
        })?;
        if failure.is_none()
            && let Err(err) = out.flush()
        {
            failure = Some(err);
        }
        drop(out);
        match failure {
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
            Some(e) => return Err(Error::io("write to", std::path::Path::new("stdout"), e)),
            None => {}
        }
        if args.count.is_some_and(|c| printed >= c) {
            return Ok(0);
        }
        if watcher.wait(Some(SAFETY_RESCAN)) == Wake::Stop {
            return Ok(0);
        }
    }
}
