//! `conductor queue results WORKSPACE`: the compiled summary of a workspace's RESULT.md files.

use clap::Args;
use serde_json::{Value, json};

use super::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;

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

/// Run `queue results`.
pub fn run(ctx: &Ctx, args: ResultsArgs) -> Result<u8> {
    let results = conductor::queue::results::of_workspace(&ctx.store, ctx.now, &args.workspace)?;
    let mut text = format!("# Results for workspace {}\n", args.workspace);
    let mut out: Vec<Value> = Vec::new();
    let (mut met_n, mut total) = (0, 0);
    for r in &results {
        let j = &r.job;
        text.push_str(&format!("\n## {} ({})\n", j.id, j.state.state.as_str()));
        for o in &r.outcomes {
            total += 1;
            if o.met == Some(true) {
                met_n += 1;
            }
            let mark = match o.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not reported",
            };
            text.push_str(&format!("- [{mark}] {}\n", o.outcome));
        }
        match &r.result {
            Some(r) => text.push_str(&format!("\n{}\n", r.trim_end())),
            None => text.push_str("\n(no RESULT.md)\n"),
        }
        out.push(json!({
            "id": j.id,
            "state": j.state.state.as_str(),
            "result_path": r.result_path,
            "result": r.result,
            "outcomes": r.outcomes,
        }));
    }
    text.push_str(&format!(
        "\n{met_n} of {total} outcomes reported met across {} jobs.",
        results.len()
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
