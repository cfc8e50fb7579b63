//! `conductor queue cancel JOB|WORKSPACE`.

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::service::Cancelled;

/// The long help of `queue cancel`.
pub const ABOUT: &str = "Cancel a job, or every unfinished job of a workspace. Running jobs' process groups are\n\
killed (by this command, and by their dispatcher when it sees the cancel); their dependents\n\
become blocked. Completed jobs are left as they are.";

/// The arguments of `queue cancel` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// A workspace id, a `JOB` or a `WORKSPACE/JOB`.
    #[arg(value_name = "JOB|WORKSPACE")]
    pub target: String,
}

/// Run `queue cancel`.
pub fn run(ctx: &Ctx, args: CancelArgs) -> Result<u8> {
    let Cancelled {
        cancelled: keys,
        stopped,
    } = conductor::queue::service::cancel(&ctx.store, ctx.now, &args.target)?;
    let message = if keys.is_empty() {
        format!(
            "Nothing to cancel in {}: every job there already finished.",
            args.target
        )
    } else {
        format!(
            "Cancelled {} job(s): {}{}.",
            keys.len(),
            keys.join(", "),
            if stopped.is_empty() {
                String::new()
            } else {
                format!(" (stopped {} running)", stopped.len())
            }
        )
    };
    print(
        ctx.out,
        &Out {
            json: json!({"status": "ok", "cancelled": keys, "stopped": stopped, "message": message}),
            text: message.clone(),
            code: 0,
        },
    )
}
