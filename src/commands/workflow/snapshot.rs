//! `conductor workflow snapshot --finding TEXT | --file PATH | --pending TEXT | --set K=V`.

use serde_json::json;

use super::{Ctx, WorkerArgs, emit};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::workflows::service::{self, SnapshotUpdate};

/// Record what later states must know.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Each option may be repeated. The snapshot persists through the whole \
workflow and is handed to every later worker in its starting prompt.\n\nExample:\n  \
conductor workflow snapshot --finding \"the API port is 8081, not 8080\" --file src/api.rs --set branch=feat-x"
)]
pub struct SnapshotArgs {
    /// A key finding.
    #[arg(long = "finding", value_name = "TEXT")]
    pub findings: Vec<String>,
    /// A file this state modified.
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// A task left for later states.
    #[arg(long = "pending", value_name = "TEXT")]
    pub pending: Vec<String>,
    /// A custom value.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = key_value)]
    pub set: Vec<(String, String)>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

fn key_value(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// Run `workflow snapshot`.
pub fn run(ctx: &Ctx, args: SnapshotArgs) -> Result<u8> {
    if args.findings.is_empty()
        && args.files.is_empty()
        && args.pending.is_empty()
        && args.set.is_empty()
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "nothing to record: give --finding, --file, --pending or --set",
        ));
    }
    let id = args.worker.session_id(ctx)?;
    let now = ctx.now;
    let state = args.worker.state().map(str::to_string);
    let add = SnapshotUpdate {
        findings: args.findings,
        files: args.files,
        pending: args.pending,
        set: args.set,
    };
    let snap = service::update_snapshot(&ctx.store, now, &id, state.as_deref(), &add)?;
    emit(
        ctx,
        json!({"status": "ok", "session": id, "snapshot": snap}),
        format!(
            "Snapshot of {id}: {} findings, {} files, {} pending tasks, {} values",
            snap.key_findings.len(),
            snap.modified_files.len(),
            snap.pending_tasks.len(),
            snap.custom.len()
        ),
        0,
    )
}
