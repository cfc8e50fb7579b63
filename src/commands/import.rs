//! `conductor import FILE|-`: load a bundle written by `conductor export` into an empty home or
//! store prefix. Nothing is ever replaced: a target that holds state is refused.

use std::io::Read;
use std::path::PathBuf;

use serde_json::json;

use super::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::store::Bundle;

/// Load an export bundle into this (empty) home or store.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The target must be empty (exit 2, target_not_empty, otherwise): \
import never replaces state. The bundle is checked first (every document must decode, every \
ledger and event must be one conductor knows); a bad bundle changes nothing. Events keep their \
seq, so `events --after N` cursors stay valid across the move."
)]
pub struct ImportArgs {
    /// The bundle (`-`: standard input).
    pub file: PathBuf,
}

/// Run `import`.
pub fn run(ctx: &Ctx, args: ImportArgs) -> Result<u8> {
    let mut text = String::new();
    if args.file.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Error::io("read", std::path::Path::new("<stdin>"), e))?;
    } else {
        text = std::fs::read_to_string(&args.file).map_err(|e| Error::io("read", &args.file, e))?;
    }
    let bundle: Bundle = serde_json::from_str(&text).map_err(|e| {
        Error::invalid(
            Reason::InvalidInput,
            format!(
                "`{}` is not a conductor export bundle: {e}",
                args.file.display()
            ),
        )
    })?;
    conductor::app::bundle::import(&ctx.store, &bundle)?;
    let lines: usize = bundle.ledgers.values().map(Vec::len).sum();
    if ctx.out.json {
        ctx.out.json_line(&json!({
            "status": "ok", "target": ctx.store.location(), "documents": bundle.documents.len(),
            "ledger_lines": lines, "events": bundle.events.len(),
        }))?;
    } else {
        ctx.out.text(&format!(
            "imported {} document(s), {lines} ledger line(s), {} event(s) from {} into {}",
            bundle.documents.len(),
            bundle.events.len(),
            bundle.source,
            ctx.store.location()
        ))?;
    }
    Ok(0)
}
