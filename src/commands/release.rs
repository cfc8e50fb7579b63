//! `conductor release (FILE...|--all) [--reason WHY] [--force]`.

use serde_json::json;

use super::{Ctx, Report, display_path};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::request::ReleaseRequest;
use conductor::protocol::sessions;

/// Release files.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["files", "all"])))]
pub struct ReleaseArgs {
    /// Files to release.
    #[arg(value_name = "FILE")]
    pub files: Vec<String>,
    /// Release every file the instance holds.
    #[arg(long)]
    pub all: bool,
    /// Why (recorded in conflicts.log).
    #[arg(long, value_name = "WHY")]
    pub reason: Option<String>,
    /// Release files even if another instance holds them (a human override; logged).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub instance: InstanceArg,
}

impl ReleaseArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> ReleaseRequest {
        ReleaseRequest {
            instance_id: self.instance.id(),
            files: (!self.all).then_some(self.files),
            all: self.all.then_some(true),
            reason: self.reason,
            force: self.force.then_some(true),
        }
    }
}

/// Files released.
pub struct Released {
    pub released: Vec<String>,
    pub cwd: Option<std::path::PathBuf>,
}

impl Report for Released {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "released": self.released, "message": message(&self.released, None)})
    }
    fn to_text(&self) -> String {
        message(&self.released, self.cwd.as_deref())
    }
}

fn message(files: &[String], cwd: Option<&std::path::Path>) -> String {
    if files.is_empty() {
        "Nothing to release.".into()
    } else {
        format!(
            "Released: {}",
            files
                .iter()
                .map(|f| display_path(f, cwd))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Run `release`.
pub fn execute(ctx: &Ctx, req: ReleaseRequest) -> Result<Box<dyn Report>> {
    let released = sessions::release(&ctx.store, ctx.now, &ctx.caller(), &req)?;
    Ok(Box::new(Released {
        released,
        cwd: ctx.cwd().ok(),
    }))
}
