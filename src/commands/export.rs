//! `conductor export [FILE]`: everything the home (or the shared store) holds, as one JSON
//! bundle that `conductor import` reads: how a home moves into etcd and back.

use std::io::Write;
use std::path::PathBuf;

use super::Ctx;
use conductor::error::{Error, Result};

/// Write every document, ledger line and event to one JSON bundle.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The bundle holds the documents (status.json, the runtime's, the \
workflows' and the queue's) as their exact bytes, every ledger line and every kept event with its \
seq. It reads whichever store is in use, so a home moves into etcd with\n\n  \
CONDUCTOR_STORE= conductor export home.json\n  \
conductor --store https://10.0.0.5:2379/team import home.json\n\nand back the other way round. \
Files are written 0600."
)]
pub struct ExportArgs {
    /// Where to write the bundle (`-` or nothing: standard output).
    pub file: Option<PathBuf>,
}

/// Run `export`.
pub fn run(ctx: &Ctx, args: ExportArgs) -> Result<u8> {
    let bundle = conductor::app::bundle::export(&ctx.store)?;
    let mut text = serde_json::to_string(&bundle).expect("bundles serialize");
    text.push('\n');
    match args.file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            // A bare name (`home.json`) has an empty parent, which cannot be synced.
            let at = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
            conductor::store::atomic::write_atomic(&at, text.as_bytes())?;
            if !ctx.out.json {
                eprintln!(
                    "exported {} document(s), {} ledger line(s), {} event(s) from {} to {}",
                    bundle.documents.len(),
                    bundle.ledgers.values().map(Vec::len).sum::<usize>(),
                    bundle.events.len(),
                    bundle.source,
                    path.display()
                );
            }
        }
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| Error::io("write", std::path::Path::new("<stdout>"), e))?,
    }
    Ok(0)
}
