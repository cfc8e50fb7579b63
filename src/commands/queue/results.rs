//! `conductor queue results WORKSPACE`: the compiled summary of a workspace's RESULT.md files.

use clap::Args;
use serde_json::{Value, json};

use super::{Out, all_jobs};
use crate::commands::{Ctx, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::queue::Layout;

/// The long help of `queue results`.
pub const ABOUT: &str = "Compile every job's RESULT.md in a workspace, with each outcome marked as the job reported\n\
it: met when RESULT.md has a line with `[x]` and the outcome's text, not met with `[ ]`,\n\
otherwise not reported.";

/// The arguments of `queue results` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// The workspace id.
    #[arg(value_name = "WORKSPACE")]
    pub workspace: String,
}

/// Whether RESULT.md reports an outcome as met: `Some(true)` for a `[x]` line naming it,
/// `Some(false)` for `[ ]`, `None` when not reported.
pub fn reported(result: &str, outcome: &str) -> Option<bool> {
    let want = outcome.trim().to_lowercase();
    for line in result.lines() {
        let l = line.to_lowercase();
        if !l.contains(&want) {
            continue;
        }
        if l.contains("[x]") {
            return Some(true);
        }
        if l.contains("[ ]") {
            return Some(false);
        }
    }
    None
}

/// Run `queue results`.
pub fn run(ctx: &Ctx, args: ResultsArgs) -> Result<u8> {
    let mut jobs = all_jobs(ctx, true)?;
    jobs.retain(|j| j.workspace == args.workspace);
    let mut seen = std::collections::BTreeSet::new();
    jobs.retain(|j| seen.insert(j.id.clone()));
    if jobs.is_empty() {
        return Err(Error::invalid(
            Reason::UnknownWorkspace,
            format!("no jobs in workspace `{}`", args.workspace),
        ));
    }
    let layout = Layout {
        home: ctx.store.home().dir().to_path_buf(),
    };
    let mut text = format!("# Results for workspace {}\n", args.workspace);
    let mut out: Vec<Value> = Vec::new();
    let (mut met_n, mut total) = (0, 0);
    for j in &jobs {
        let path = layout.output(&j.workspace, &j.id).join("RESULT.md");
        // Never through a link a job left in its workspace.
        let result = layout.read_in_workspace(&j.workspace, &format!("output/{}/RESULT.md", j.id));
        text.push_str(&format!("\n## {} ({})\n", j.id, j.state.state.as_str()));
        let mut outcomes = Vec::new();
        for o in &j.outcomes {
            let r = result.as_deref().and_then(|t| reported(t, o));
            total += 1;
            if r == Some(true) {
                met_n += 1;
            }
            let mark = match r {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not reported",
            };
            text.push_str(&format!("- [{mark}] {o}\n"));
            outcomes.push(json!({"outcome": o, "met": r}));
        }
        match &result {
            Some(r) => text.push_str(&format!("\n{}\n", r.trim_end())),
            None => text.push_str("\n(no RESULT.md)\n"),
        }
        out.push(json!({
            "id": j.id,
            "state": j.state.state.as_str(),
            "result_path": path,
            "result": result,
            "outcomes": outcomes,
        }));
    }
    text.push_str(&format!(
        "\n{met_n} of {total} outcomes reported met across {} jobs.",
        jobs.len()
    ));
    print(
        ctx.out,
        &Out {
            json: json!({"status": "ok", "workspace": args.workspace, "jobs": out}),
            text,
            code: 0,
        },
    )
}
