//! `conductor workflow list`: sessions, live and finished.

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Result;
use conductor::workflows;

/// List workflow sessions.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only sessions that are not finished (done or aborted).
    #[arg(long)]
    pub live: bool,
}

/// Run `workflow list`.
pub fn run(ctx: &Ctx, args: ListArgs) -> Result<u8> {
    let mut all = workflows::all_sessions(&ctx.store, ctx.now)?;
    if args.live {
        all.retain(|s| !s.status.is_finished());
    }
    let items: Vec<_> = all
        .iter()
        .map(|s| {
            json!({"id": s.id, "status": s.status, "current_state": s.current_state,
                   "template": s.template.name, "task": s.task, "project_dir": s.project_dir,
                   "created_at": s.created_at, "updated_at": s.updated_at,
                   "tokens": s.totals.tokens, "cost_usd": s.totals.cost_usd})
        })
        .collect();
    let mut t =
        crate::commands::table::Table::new(&["SESSION", "STATUS", "STATE", "TEMPLATE", "TASK"]);
    for s in &all {
        t.row(vec![
            s.id.to_string(),
            s.status.as_str().to_string(),
            s.current_state.as_deref().unwrap_or("-").to_string(),
            s.template.name.clone(),
            conductor::text::printable_max(&s.task, 60),
        ]);
    }
    let mut text = t.render();
    if all.is_empty() {
        text = "No workflow sessions. Start one with `conductor workflow start TEMPLATE \"TASK\"`."
            .into();
    }
    emit(ctx, json!({"status": "ok", "sessions": items}), text, 0)
}
