//! `conductor queue plan "PROMPT" --docs A,B [--planner CMD] [--yes]`: ask a planner for a
//! manifest, show it, submit it on request.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;

/// The long help of `queue plan`.
pub const ABOUT: &str = "Run a planner command (default `opencode run`) with the task, the available doc collections\n\
and secret names on stdin; it must print a manifest ({workspace, jobs[]}, JSON, possibly\n\
inside other text). The manifest is checked exactly as `queue submit` checks it and shown for\n\
review; --yes submits it.";

/// The arguments of `queue plan` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The high-level task.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// Doc collections the jobs may use (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub docs: Vec<String>,
    /// Secret names the jobs may use (comma-separated; names only).
    #[arg(long, value_delimiter = ',', value_name = "NAME,NAME")]
    pub secrets: Vec<String>,
    /// The planner command, run by sh -c with the planning prompt on stdin.
    #[arg(long, default_value = "opencode run", value_name = "CMD")]
    pub planner: String,
    /// Submit the manifest after showing it.
    #[arg(long)]
    pub yes: bool,
    /// Take doc collections from DIR/<collection>/ instead of ~/.docpull.
    #[arg(long, value_name = "DIR")]
    pub docs_dir: Option<PathBuf>,
}

/// Run `queue plan`.
pub fn run(ctx: &Ctx, args: PlanArgs) -> Result<u8> {
    let planned = conductor::queue::plan::plan(
        &args.planner,
        &args.prompt,
        &args.docs,
        &args.secrets,
        args.docs_dir.as_deref(),
    )?;
    let (m, pretty) = (planned.manifest, planned.json);
    if !args.yes {
        let message = format!(
            "Planned {} job(s) in workspace {}. Review it, then submit with --yes (or save it and run `conductor queue submit FILE`).",
            m.jobs.len(),
            m.workspace
        );
        return print(
            ctx.out,
            &Out {
                json: json!({"status": "ok", "submitted": false, "manifest": pretty, "message": message}),
                text: format!(
                    "{}\n{message}",
                    serde_json::to_string_pretty(&pretty).expect("json")
                ),
                code: 0,
            },
        );
    }
    let mut report = super::submit::submit(ctx, &m, args.docs_dir.as_deref())?;
    report.json["manifest"] = pretty.clone();
    report.json["submitted"] = json!(true);
    report.text = format!(
        "{}\n{}",
        serde_json::to_string_pretty(&pretty).expect("json"),
        report.text
    );
    print(ctx.out, &report)
}
