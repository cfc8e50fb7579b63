//! `conductor queue show JOB`: one job in full.

use clap::Args;
use serde_json::json;

use super::{Out, all_jobs};
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::Layout;

/// The long help of `queue show`.
pub const ABOUT: &str =
    "Show a job: its fields, its state object, and where its prompt, log and result are.";

/// The arguments of `queue show` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The job: `JOB`, or `WORKSPACE/JOB` when the id is used in several workspaces.
    #[arg(value_name = "JOB")]
    pub job: String,
}

pub use conductor::queue::lookup::find;

/// Run `queue show`.
pub fn run(ctx: &Ctx, args: ShowArgs) -> Result<u8> {
    let jobs = all_jobs(ctx, true)?;
    let j = find(&jobs, &args.job)?;
    let layout = Layout {
        home: ctx.store.home().dir().to_path_buf(),
    };
    let prompt = layout.prompt(&j.workspace, &j.id);
    let log = layout.log(&j.workspace, &j.id);
    let output = layout.output(&j.workspace, &j.id);
    let s = &j.state;
    let mut text = format!(
        "job        {}\nstate      {} since {} (attempts: {})\n",
        j.key(),
        s.state.as_str(),
        s.since,
        s.attempts
    );
    let opt = |label: &str, v: Option<String>| v.map(|v| format!("{label:<10} {v}\n"));
    text.extend(opt("reason", s.reason.clone()));
    text.extend(opt("exit code", s.exit_code.map(|c| c.to_string())));
    text.extend(opt("pid", s.pid.map(|c| c.to_string())));
    text.extend(opt("runner", s.runner.clone()));
    text.extend(opt(
        "usage",
        s.tokens
            .map(|t| format!("{t} tokens, ${:.4}", s.cost_usd.unwrap_or(0.0))),
    ));
    // How it last ran, which `queue retry` repeats.
    text.extend(opt(
        "ran with",
        j.ran_with.as_ref().map(|r| {
            format!(
                "--runner {} --agent-cmd {}",
                conductor::queue::exec::shell_quote(&r.runner),
                conductor::queue::exec::shell_quote(&r.agent_cmd)
            )
        }),
    ));
    let worktree = conductor::queue::worktree::path_of(&j);
    text.extend(opt("repository", j.repo.clone()));
    text.extend(opt(
        "branch",
        j.branch.as_ref().map(|b| match &j.base {
            Some(base) => format!("{b} (from {base})"),
            None => b.clone(),
        }),
    ));
    text.extend(opt(
        "worktree",
        worktree.as_ref().map(|w| {
            format!(
                "{} (kept after the job: the branch holds its work)",
                w.display()
            )
        }),
    ));
    text.extend(opt("started", s.started_at.map(|t| t.to_string())));
    text.extend(opt("finished", s.finished_at.map(|t| t.to_string())));
    text.push_str(&format!(
        "depends on {}\ndocs       {}\nsecrets    {}\ntimeout    {} min\nagent      {}{}\noutput     {}\nprompt     {}\nlog        {}\n",
        if j.depends_on.is_empty() { "-".into() } else { j.depends_on.join(", ") },
        if j.docs.is_empty() { "-".into() } else { j.docs.join(", ") },
        if j.secrets.is_empty() { "-".into() } else { j.secrets.join(", ") },
        j.timeout_minutes,
        j.agent,
        j.model.as_ref().map(|m| format!(" (model {m})")).unwrap_or_default(),
        output.display(),
        prompt.display(),
        log.display(),
    ));
    text.push_str("\n## Task\n");
    text.push_str(&j.prompt);
    if !j.outcomes.is_empty() {
        text.push_str("\n\n## Outcomes\n");
        for o in &j.outcomes {
            text.push_str(&format!("- {o}\n"));
        }
    }
    let mut json = json!({
                "status": "ok",
                "job": j,
                "paths": {
                    "output": output, "prompt": prompt, "log": log,
                    "result": output.join("RESULT.md"),
                },
    });
    if let Some(w) = &worktree {
        json["paths"]["worktree"] = json!(w);
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
