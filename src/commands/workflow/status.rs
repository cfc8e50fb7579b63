//! `conductor workflow status`: what the worker is working for.

use serde_json::json;

use super::{Ctx, WorkerArgs, emit};
use conductor::error::Result;
use conductor::workflows;

/// Show this worker's session and state.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// Run `workflow status`.
pub fn run(ctx: &Ctx, args: StatusArgs) -> Result<u8> {
    let id = args.worker.session_id(ctx)?;
    let s = workflows::find_session(&ctx.store, ctx.now, &id)?;
    let def = s.current_state.as_deref().and_then(|c| s.template.state(c));
    let allowed = def.map(|d| d.allowed()).unwrap_or_default();
    let mut text = format!(
        "Session {} ({}) · {}\nState: {}\nAllowed targets: {}\nTimeline: {}",
        s.id,
        s.template.name,
        s.status.as_str(),
        s.current_state.as_deref().unwrap_or("-"),
        if allowed.is_empty() {
            "-".into()
        } else {
            allowed.join(", ")
        },
        super::show::breadcrumbs(&s)
    );
    if let Some(st) = args.worker.state()
        && s.current_state.as_deref() != Some(st)
    {
        text.push_str(&format!("\nThis worker's state `{st}` has ended."));
    }
    emit(
        ctx,
        json!({"status": "ok", "session": s.id, "workflow_status": s.status,
               "state": s.current_state, "worker_state": args.worker.state(),
               "allowed": allowed, "task": s.task, "snapshot": s.snapshot, "pending": s.pending}),
        text,
        0,
    )
}
