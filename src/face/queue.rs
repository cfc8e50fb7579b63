//! The queue's renderings more than one face prints.

use serde_json::json;

use super::{Ctx, Out};
use conductor::error::Result;
use conductor::queue::manifest::Manifest;
use conductor::queue::service;

/// Submit a parsed manifest (also used by `queue plan --yes` and the MCP server's
/// `queue_submit`): `queue::service::submit`, rendered.
pub fn submit(ctx: &Ctx, m: &Manifest, docs_dir: Option<&std::path::Path>) -> Result<Out> {
    let done = service::submit(&ctx.store, ctx.now, m, docs_dir)?;
    let n = done.jobs.len();
    let message = format!(
        "Submitted {n} job{} to workspace {}. Start them with `conductor queue run`.",
        if n == 1 { "" } else { "s" },
        done.workspace
    );
    let mut text = String::new();
    for (id, s) in &done.jobs {
        text.push_str(&format!("{:<10} {}/{id}\n", s.as_str(), done.workspace));
    }
    text.push_str(&message);
    Ok(Out {
        json: json!({
            "status": "ok",
            "workspace": done.workspace,
            "workspace_dir": done.workspace_dir,
            "jobs": done.jobs.iter().map(|(id, s)| json!({"id": id, "state": s.as_str()})).collect::<Vec<_>>(),
            "message": message,
        }),
        text,
        code: 0,
    })
}

/// Every job of the queue: the live ones, then (when `finished`) the archived ones
/// (`queue::lookup::all`).
pub fn all_jobs(ctx: &Ctx, finished: bool) -> Result<Vec<conductor::queue::Job>> {
    conductor::queue::lookup::all(&ctx.store, ctx.now, finished)
}
