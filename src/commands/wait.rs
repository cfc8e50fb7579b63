//! `conductor wait --released FILE... | --done ID... [--timeout D]`: block until files are free
//! or instances have finished, woken by the file system watcher. For scripts.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::local::PathNormalizer;
use conductor::protocol::waits;
use conductor::protocol::worktrees::Worktrees;
use conductor::store::watch::{self, Wake};
use conductor::time::Timestamp;

/// Wait for releases or finished instances.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["released", "done"])))]
#[command(
    after_long_help = "Exit 0 once no claim overlaps any path named (--released: a file, a directory \
(`src/`) or a glob (`'src/**/*.rs'`), overlapping as `claim` decides) or every \
instance named is no longer registered (--done: finished, or cleaned up). Exit 3 if --timeout passes \
first (the JSON result lists what is still pending); an interrupted wait (SIGINT/SIGTERM) exits 3 \
too.\n\nExamples:\n  conductor wait --released src/auth.rs --timeout 10m && conductor claim src/auth.rs\n  \
conductor wait --done itm-a1b2c3 cur-0f0f0f"
)]
pub struct WaitArgs {
    /// Files, directories or globs to wait for until no claim overlaps them (paths resolve
    /// against the current directory).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub released: Vec<String>,
    /// Instances to wait for until they are no longer registered.
    #[arg(long, num_args = 1.., value_name = "ID")]
    pub done: Vec<String>,
    /// Give up after this long (500ms, 30s, 5m, 2h) [default: wait forever].
    #[arg(long, value_name = "DURATION", value_parser = conductor::time::parse_limit)]
    pub timeout: Option<conductor::time::Limit>,
}

/// What a wait ended with: everything free (exit 0), or what is still pending (exit 3).
struct Waited {
    files: Vec<String>,
    ids: Vec<String>,
    held: Vec<String>,
    alive: Vec<String>,
}

impl Waited {
    fn finished(&self) -> bool {
        self.held.is_empty() && self.alive.is_empty()
    }
}

impl Report for Waited {
    fn to_json(&self) -> serde_json::Value {
        if self.finished() {
            json!({"status": "ok", "released": self.files, "done": self.ids, "message": "Nothing left to wait for."})
        } else {
            json!({"status": "timeout", "still_held": self.held, "still_running": self.alive, "message": "Gave up waiting."})
        }
    }
    fn to_text(&self) -> String {
        if self.finished() {
            format!(
                "Done waiting: {} file(s) free, {} instance(s) finished.",
                self.files.len(),
                self.ids.len()
            )
        } else {
            format!(
                "Gave up waiting: {} file(s) still held, {} instance(s) still running.",
                self.held.len(),
                self.alive.len()
            )
        }
    }
    fn exit_code(&self) -> u8 {
        if self.finished() { 0 } else { 3 }
    }
}

/// Read the state (lock-free) and see what is still pending.
fn check(ctx: &Ctx, files: &[String], ids: &[String], repos: &Worktrees) -> Result<Waited> {
    let p = waits::pending(&ctx.store, Timestamp::now(), files, ids, repos)?;
    Ok(Waited {
        held: p.held,
        alive: p.alive,
        files: files.to_vec(),
        ids: ids.to_vec(),
    })
}

/// Run `wait`.
pub fn run(ctx: &Ctx, args: WaitArgs) -> Result<u8> {
    watch::block_stop_signals();
    let mut norm = PathNormalizer::new(ctx.cwd()?).with_repo_keys(ctx.store.shared_by_hosts());
    let files = args
        .released
        .iter()
        .map(|f| norm.normalize(f))
        .collect::<Result<Vec<_>>>()?;
    let repos = norm.worktrees().clone();
    let ids = args.done;
    waits::known(&ctx.store, Timestamp::now(), &ids)?;
    let deadline = args.timeout.and_then(|l| l.0).map(|d| Instant::now() + d);
    let watcher = ctx.store.watcher(|name| name == "status.json")?;
    watcher.stop_on_signals_and_closed_stdout();
    loop {
        let now = check(ctx, &files, &ids, &repos)?;
        if now.finished() {
            return print(ctx.out, &now);
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let give_up = left.is_some_and(|l| l.is_zero()) || watcher.stopped();
        let slice = left
            .unwrap_or(Duration::from_secs(30))
            .min(Duration::from_secs(30));
        if give_up || watcher.wait(Some(slice)) == Wake::Stop {
            // One last look: the change that woke us may be the one we waited for.
            return print(ctx.out, &check(ctx, &files, &ids, &repos)?);
        }
    }
}
