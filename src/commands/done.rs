//! `conductor done [--outcome O] [--files-modified FILE...] [--notes TEXT]`.

use serde_json::json;

use super::{Ctx, Report};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::request::DoneRequest;
use conductor::protocol::sessions;
use conductor::protocol::types::Outcome;

/// Finish the task.
#[derive(Debug, clap::Args)]
pub struct DoneArgs {
    /// How the task ended.
    #[arg(long, value_enum, default_value = "success", value_parser = done_outcome)]
    pub outcome: Outcome,
    /// Files the task changed [default: the files the instance held].
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub files_modified: Option<Vec<String>>,
    /// A note kept in history.jsonl.
    #[arg(long)]
    pub notes: Option<String>,
    #[command(flatten)]
    pub instance: InstanceArg,
}

fn done_outcome(s: &str) -> Result<Outcome, String> {
    match s {
        "success" => Ok(Outcome::Success),
        "abandoned" => Ok(Outcome::Abandoned),
        "conflict" => Ok(Outcome::Conflict),
        _ => Err(format!("`{s}` is not one of success, abandoned, conflict")),
    }
}

impl DoneArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> DoneRequest {
        DoneRequest {
            instance_id: self.instance.id(),
            outcome: Some(self.outcome),
            files_modified: self.files_modified,
            notes: self.notes,
        }
    }
}

/// The task is recorded and its claims released.
pub struct Done {
    pub instance_id: String,
    pub outcome: Outcome,
    pub released: Vec<String>,
}

impl Report for Done {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "instance_id": self.instance_id, "outcome": self.outcome,
               "released": self.released, "message": "Task complete. All claims released."})
    }
    fn to_text(&self) -> String {
        format!(
            "Task complete ({}). All claims released ({} file{}). {} is no longer registered.",
            self.outcome.as_str(),
            self.released.len(),
            if self.released.len() == 1 { "" } else { "s" },
            self.instance_id
        )
    }
}

/// Run `done`.
pub fn execute(ctx: &Ctx, req: DoneRequest) -> Result<Box<dyn Report>> {
    let d = sessions::done(&ctx.store, ctx.now, &ctx.caller(), &req)?;
    Ok(Box::new(Done {
        instance_id: d.instance_id,
        outcome: d.outcome,
        released: d.released,
    }))
}
