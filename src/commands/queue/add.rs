//! `conductor queue add [OPTIONS] [PROMPT...]`: submit one job without writing a manifest
//! (as `pueue add` and `tsp` do). The job goes through the same checks as a manifest's.

use std::io::{IsTerminal, Read};

use clap::Args;
use serde_json::json;

use crate::commands::{Ctx, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::queue::{JobPriority, manifest};

/// The long help of `queue add`.
pub const ABOUT: &str = "Submit one job: its prompt is the words after the options (quoted, or after `--` when\n\
they start with a dash), or stdin when there are none.\n\
Prints the job as WORKSPACE/JOB (with --json, the submit object). The job goes to workspace\n\
`default` unless --workspace (or --after WORKSPACE/JOB) names another, and is called job-N\n\
(the next free number among the workspace's live jobs) unless --id names it.\n\
\n\
Examples:\n\
  conductor queue add 'Write a haiku'\n\
  conductor queue add -- Write the release notes for 1.2\n\
  conductor queue add --after job-1 --priority P1 -- Translate the release notes\n\
  conductor queue add --id fix-lint < prompt.md";

/// The arguments of `queue add` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The workspace [default: `default`, or the one --after names].
    #[arg(long, value_name = "ID")]
    pub workspace: Option<String>,
    /// The job's id [default: job-N].
    #[arg(long, value_name = "JOB")]
    pub id: Option<String>,
    /// Start only after this job completed (JOB or WORKSPACE/JOB). Repeatable.
    #[arg(long, value_name = "JOB")]
    pub after: Vec<String>,
    /// The agent ({agent} in the agent command).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// The model ({model} in the agent command).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Among ready jobs, P0 starts first.
    #[arg(long, value_name = "P0..P3", default_value = "P2")]
    pub priority: JobPriority,
    /// Minutes before the job is killed and marked timed_out.
    #[arg(long, value_name = "MINUTES")]
    pub timeout: Option<f64>,
    /// A success criterion (the prompt asks the agent to mark it in RESULT.md). Repeatable.
    #[arg(long, value_name = "TEXT")]
    pub outcome: Vec<String>,
    /// The prompt: the words after the options (or after `--`); read from stdin when absent.
    #[arg(value_name = "PROMPT", trailing_var_arg = true)]
    pub prompt: Vec<String>,
}

/// Run `queue add`.
pub fn run(ctx: &Ctx, a: AddArgs) -> Result<u8> {
    let bad = |m: String| Error::invalid(Reason::InvalidManifest, m);
    let prompt = if a.prompt.is_empty() {
        if std::io::stdin().is_terminal() {
            return Err(bad(
                "no prompt: give it as an argument (conductor queue add 'TEXT') or on stdin".into(),
            ));
        }
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| bad(format!("cannot read stdin: {e}")))?;
        s
    } else {
        a.prompt.join(" ")
    };
    if prompt.trim().is_empty() {
        return Err(bad("the prompt is empty".into()));
    }
    // --after WORKSPACE/JOB names the workspace too; every dependency is in the job's own.
    let (workspace, after) = conductor::queue::lookup::workspace_and_deps(a.workspace, &a.after)?;
    let id = match a.id {
        Some(id) => id,
        None => conductor::queue::lookup::free_id(&ctx.store, ctx.now, &workspace)?,
    };
    let mut job = json!({"id": id, "prompt": prompt, "depends_on": after, "outcomes": a.outcome,
                         "priority": a.priority});
    if let Some(x) = a.agent {
        job["agent"] = json!(x);
    }
    if let Some(x) = a.model {
        job["model"] = json!(x);
    }
    if let Some(x) = a.timeout {
        job["timeout_minutes"] = json!(x);
    }
    let text = json!({"workspace": workspace, "jobs": [job]}).to_string();
    let m = manifest::parse_with(&text, "queue add", &|_| true)?;
    let mut out = super::submit::submit(ctx, &m, None)?;
    out.text = format!("{workspace}/{id}");
    if !ctx.out.json {
        ctx.out.status(&format!(
            "Added {workspace}/{id}. Start it with `conductor queue run` (a running dispatcher with --follow picks it up)."
        ));
    }
    print(ctx.out, &out)
}
