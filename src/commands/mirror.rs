//! `conductor mirror DIR`: keep grep-able copies of `history.jsonl` and `conflicts.log` in a
//! directory, up to date through a watch: with a shared store the ledgers live in etcd, and
//! people still want `grep` and `tail -f`.

use std::path::PathBuf;

use super::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, IoContext, Result};
use conductor::protocol::mirror::{self, MIRRORED};
use conductor::store::watch::{self, Wake};

/// Keep local copies of the history and conflict logs up to date.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Writes DIR/history.jsonl and DIR/conflicts.log (0600), each \
replaced atomically whenever its ledger grows, so a reader never sees half a file. Runs until \
SIGINT/SIGTERM; --once copies and exits.\n\nExample:\n  conductor --store https://10.0.0.5:2379 \
mirror ~/conductor-logs &\n  tail -f ~/conductor-logs/conflicts.log"
)]
pub struct MirrorArgs {
    /// The directory to keep the copies in (created 0700 if missing).
    pub dir: PathBuf,
    /// Copy once and exit.
    #[arg(long)]
    pub once: bool,
}

/// Run `mirror`.
pub fn run(ctx: &Ctx, args: MirrorArgs) -> Result<u8> {
    use std::os::unix::fs::DirBuilderExt;
    watch::block_stop_signals();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.dir)
        .ctx("create", &args.dir)?;
    if !args.dir.is_dir() {
        return Err(Error::invalid(
            Reason::InvalidDirectory,
            format!("`{}` is not a directory", args.dir.display()),
        ));
    }
    let watcher = if args.once {
        None
    } else {
        let w = ctx
            .store
            .watcher(|name| MIRRORED.iter().any(|l| l.name == name))?;
        w.stop_on_signals_and_closed_stdout();
        Some(w)
    };
    let mut copied = [usize::MAX; 2];
    loop {
        mirror::copy(&ctx.store, &args.dir, &mut copied)?;
        let Some(w) = &watcher else {
            return Ok(0);
        };
        if w.wait(None) == Wake::Stop {
            return Ok(0);
        }
    }
}
