//! `conductor queue jobs [WORKSPACE] [--all]`: the jobs and their states.

use clap::Args;
use serde_json::json;

use super::{Out, all_jobs};
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::Job;

/// The long help of `queue jobs`.
pub const ABOUT: &str = "List jobs: `STATE  WORKSPACE/JOB  ATTEMPTS  DETAIL`, in submission order.\n\
\n\
Without arguments, the live jobs (finished workspaces are archived to queue-finished.jsonl);\n\
with WORKSPACE, that workspace's jobs including archived ones; with --all, everything.";

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

/// One line for a job.
pub fn line(j: &Job) -> String {
    let detail = j.state.reason.clone().unwrap_or_default();
    format!(
        "{:<10} {:<30} {:>2}  {}",
        j.state.state.as_str(),
        j.key(),
        j.state.attempts,
        detail
    )
    .trim_end()
    .to_string()
}

/// Run `queue jobs`.
pub fn run(ctx: &Ctx, args: JobsArgs) -> Result<u8> {
    let mut jobs = all_jobs(ctx, args.all || args.workspace.is_some())?;
    if let Some(ws) = &args.workspace {
        jobs.retain(|j| &j.workspace == ws);
    }
    // Archived runs of an id that is live again are older: keep the first (live) one.
    let mut seen = std::collections::BTreeSet::new();
    jobs.retain(|j| seen.insert(j.key()));
    let text = if jobs.is_empty() {
        match &args.workspace {
            Some(ws) => format!("No jobs in workspace {ws}."),
            None => "No jobs in the queue.".to_string(),
        }
    } else {
        jobs.iter().map(line).collect::<Vec<_>>().join("\n")
    };
    print(
        ctx.out,
        &Out {
            json: json!({"status": "ok", "jobs": jobs}),
            text,
            code: 0,
        },
    )
}
