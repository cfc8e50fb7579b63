//! `conductor align "TASK" --priority P`: run the priority gate without registering.

use std::path::PathBuf;

use serde_json::json;

use super::{Ctx, Report};
use conductor::error::Result;
use conductor::protocol::Priority;
use conductor::protocol::gate::{self, Verdict};
use conductor::protocol::request::AlignRequest;

/// Check a task against the gate.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Exit status 0 if `start` would accept the task, 4 if the gate would block it."
)]
pub struct AlignArgs {
    /// The task to check.
    pub task: String,
    /// Its priority.
    #[arg(long, value_enum)]
    pub priority: Priority,
    /// Project name (informational).
    #[arg(long)]
    pub project: Option<String>,
    /// Project directory whose .conductor/config.json priority source counts [default: current directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

impl AlignArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> Result<AlignRequest> {
        let dir = super::start::working_directory(self.dir.as_deref())?;
        Ok(AlignRequest {
            task: self.task,
            priority: self.priority,
            project: self.project,
            working_directory: Some(dir),
        })
    }
}

/// The gate would let the task through.
pub struct Aligned;

impl Report for Aligned {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "aligned": true, "message": "Task passes the priority gate."})
    }
    fn to_text(&self) -> String {
        "Aligned: the task passes the priority gate.".into()
    }
}

/// Run `align`.
pub fn execute(ctx: &Ctx, req: AlignRequest) -> Result<Box<dyn Report>> {
    let dir = match &req.working_directory {
        Some(d) => Some(super::start::working_directory(Some(
            std::path::Path::new(d),
        ))?),
        None => None,
    };
    let inputs = super::start::gate_inputs(&ctx.store, dir.as_deref())?;
    Ok(match gate::evaluate(&req.task, req.priority, &inputs) {
        Verdict::Pass => Box::new(Aligned),
        Verdict::Blocked {
            message, options, ..
        } => Box::new(super::start::Blocked { message, options }),
    })
}
