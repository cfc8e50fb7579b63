//! `conductor metrics [--textfile DIR]`: the runtime's metrics in Prometheus text format.

use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use conductor::error::Reason;
use conductor::error::{Error, IoContext, Result};

/// `metrics`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Prints the Prometheus text exposition format: per agent, the latency \
histograms conductor_event_to_seen_seconds, conductor_event_to_claim_seconds and \
conductor_claim_to_complete_seconds, the gauges conductor_pending_inbox and conductor_unacked_mentions, \
and the counters conductor_timeout_recoveries_total, conductor_items_completed_total and \
conductor_run_errors_total. With --textfile DIR it replaces DIR/conductor.prom atomically (a temp file \
renamed into place) for node_exporter's textfile collector, e.g. from cron.\n\nExamples:\n  conductor \
metrics | promtool check metrics\n  conductor metrics --textfile /var/lib/node_exporter/textfile_collector"
)]
pub struct MetricsArgs {
    /// Write DIR/conductor.prom (atomically) instead of printing.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
}

/// Run `metrics`.
pub fn run(ctx: &Ctx, a: MetricsArgs) -> Result<u8> {
    let text = conductor::agents::views::prometheus(&ctx.store, ctx.now)?;
    match a.textfile {
        None => {
            use std::io::Write;
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .map_err(|e| Error::io("write to", std::path::Path::new("stdout"), e))?;
        }
        Some(dir) => {
            if !dir.is_dir() {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!("`{}` is not a directory", dir.display()),
                ));
            }
            // Outside the home: node_exporter reads *.prom, so the temp name must not end so.
            let mut tmp = tempfile::Builder::new()
                .prefix(".conductor.prom.")
                .suffix(".tmp")
                .tempfile_in(&dir)
                .ctx("create a temp file in", &dir)?;
            use std::io::Write;
            tmp.write_all(text.as_bytes()).ctx("write", tmp.path())?;
            tmp.as_file().sync_all().ctx("sync", tmp.path())?;
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = tmp
                    .as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644));
            }
            let target = dir.join("conductor.prom");
            tmp.persist(&target)
                .map_err(|e| Error::io("replace", &target, e.error))?;
            ctx.out.status(&format!("Wrote {}", target.display()));
        }
    }
    Ok(0)
}
