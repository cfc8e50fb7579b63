//! `conductor queue plan "PROMPT" --docs A,B [--planner CMD] [--yes]`: ask a planner for a
//! manifest, show it, submit it on request.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::queue::{docs, manifest};

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

/// The planner's instructions.
pub fn planning_prompt(
    task: &str,
    docs: &[String],
    available: &[String],
    secrets: &[String],
) -> String {
    format!(
        "You are the planner of an agent job queue. Split the task below into jobs for coding \
agents and print ONLY a JSON manifest of this shape (no other text):\n\
{{\"workspace\": \"<short-id>\", \"jobs\": [{{\"id\": \"<job-id>\", \"prompt\": \"...\", \
\"docs\": [\"<collection>\"], \"secrets\": [\"<ENV_VAR_NAME>\"], \"depends_on\": [\"<job-id>\"], \
\"outcomes\": [\"<observable success criterion>\"]}}]}}\n\
Ids use letters, digits, '.', '_' and '-'. Jobs that need another job's files depend on it; \
independent jobs do not. Jobs share files through /workspace/shared/.\n\n\
## Task\n{task}\n\n\
## Docs requested\n{}\n\n\
## Docs available\n{}\n\n\
## Secrets available (names only)\n{}\n",
        list(docs),
        list(available),
        list(secrets)
    )
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

/// The first `{` to the last `}` of the planner's output.
fn extract_json(out: &str) -> Option<&str> {
    let a = out.find('{')?;
    let b = out.rfind('}')?;
    (b > a).then(|| &out[a..=b])
}

/// Run `queue plan`.
pub fn run(ctx: &Ctx, args: PlanArgs) -> Result<u8> {
    let source = docs::locate(args.docs_dir.as_deref())?;
    for d in &args.docs {
        source.check("(plan)", d)?;
    }
    let text = planning_prompt(&args.prompt, &args.docs, &source.available, &args.secrets);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&args.planner)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            Error::invalid(
                Reason::PlannerFailed,
                format!("could not start the planner `{}`: {e}", args.planner),
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| {
        Error::invalid(
            Reason::PlannerFailed,
            format!("planner `{}`: {e}", args.planner),
        )
    })?;
    if !out.status.success() {
        return Err(Error::invalid(
            Reason::PlannerFailed,
            format!("the planner `{}` exited with {}", args.planner, out.status),
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_text = extract_json(&stdout).ok_or_else(|| {
        Error::invalid(
            Reason::InvalidManifest,
            format!("the planner `{}` printed no JSON manifest", args.planner),
        )
    })?;
    let m = manifest::parse(json_text, "the planner's manifest")?;
    let pretty: serde_json::Value = serde_json::from_str(json_text).expect("parsed above");
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
