//! `conductor queue jobs [WORKSPACE] [--all]`: the jobs and their states.

use clap::Args;
use serde_json::json;

use super::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::Job;

/// The long help of `queue jobs`.
pub const ABOUT: &str = "List jobs: a table of STATE, JOB (WORKSPACE/JOB), ATTEMPTS and DETAIL, in submission order.\n\
\n\
Without arguments, the live jobs (finished workspaces are archived to queue-finished.jsonl);\n\
with WORKSPACE, that workspace's jobs including archived ones; with --all, everything.\n\
A job held by `queue pause JOB` says so in DETAIL; a paused queue is announced on the first\n\
line (with --json, `\"queue_paused\": true`).";

/// The arguments of `queue jobs` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Only this workspace's jobs (archived ones included).
    #[arg(value_name = "WORKSPACE")]
    pub workspace: Option<String>,
    /// Include jobs of finished (archived) workspaces.
    #[arg(long)]
    pub all: bool,
}

/// The jobs as a table: a header, then one row per job.
pub fn table(jobs: &[Job]) -> String {
    let mut t = crate::commands::table::Table::new(&["STATE", "JOB", "ATTEMPTS", "DETAIL"]);
    for j in jobs {
        t.row(vec![
            j.state.state.as_str().to_string(),
            j.key(),
            j.state.attempts.to_string(),
            with_worktree(
                j,
                match (j.paused, j.state.reason.clone().unwrap_or_default()) {
                    (true, r) if r.is_empty() => "paused (conductor queue resume JOB)".to_string(),
                    (true, r) => format!("paused (conductor queue resume JOB); {r}"),
                    (false, r) => r,
                },
            ),
        ]);
    }
    t.render()
}

/// A repository job's DETAIL names its branch and worktree (kept after the job: the branch
/// holds its work).
fn with_worktree(j: &Job, detail: String) -> String {
    let (Some(branch), Some(wt)) = (&j.branch, conductor::queue::worktree::path_of(j)) else {
        return detail;
    };
    let at = format!("branch {branch} in {}", wt.display());
    if detail.is_empty() {
        at
    } else {
        format!("{detail}; {at}")
    }
}

/// Run `queue jobs`.
pub fn run(ctx: &Ctx, args: JobsArgs) -> Result<u8> {
    let jobs =
        conductor::queue::lookup::listed(&ctx.store, ctx.now, args.workspace.as_deref(), args.all)?;
    let paused = ctx
        .store
        .read_doc::<conductor::queue::QueueDoc>(ctx.now)?
        .paused;
    let mut text = if jobs.is_empty() {
        match &args.workspace {
            Some(ws) => format!("No jobs in workspace {ws}."),
            None => "No jobs in the queue.".to_string(),
        }
    } else {
        table(&jobs)
    };
    let mut json = json!({"status": "ok", "jobs": jobs});
    if paused {
        text =
            format!("The queue is paused: no job starts until `conductor queue resume`.\n{text}");
        json["queue_paused"] = json!(true);
    }
    print(
        ctx.out,
        &Out {
            json,
            text,
            code: 0,
        },
    )
}
