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
    let mut text = String::new();
    for s in &all {
        text.push_str(&format!(
            "{}  {:<18} {:<16} {}: {}\n",
            s.id,
            s.status.as_str(),
            s.current_state.as_deref().unwrap_or("-"),
            s.template.name,
            conductor::text::printable_max(&s.task, 60)
        ));
    }
    if all.is_empty() {
        text = "No workflow sessions. Start one with `conductor workflow start TEMPLATE \"TASK\"`."
            .into();
    }
    emit(ctx, json!({"status": "ok", "sessions": items}), text, 0)
}
