//! `conductor queue pause [JOB...]` and `conductor queue resume [JOB...]`: hold the whole queue,
//! or given jobs. A dispatcher starts nothing held; running jobs finish. Recorded in queue.json
//! (`paused`), so every dispatcher, now or later, honours it; `queue jobs` shows it.

use clap::Args;
use serde_json::json;

use crate::commands::{Ctx, Out, print};
use conductor::error::Result;

/// The long help of `queue pause`.
pub const PAUSE_ABOUT: &str = "Without JOB, pause the whole queue: no dispatcher starts a job until `queue resume`;\n\
running jobs finish. With JOB (JOB or WORKSPACE/JOB), hold those jobs only. `queue jobs` shows\n\
what is paused. A dispatcher without --follow ends when nothing it may start is left.";

/// The long help of `queue resume`.
pub const RESUME_ABOUT: &str = "Without JOB, resume the whole queue (jobs paused one by one stay paused); with JOB,\n\
release those jobs. A running dispatcher starts what is ready at once.";

/// The arguments of `queue pause` and `queue resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// Jobs (JOB or WORKSPACE/JOB); none: the whole queue.
    #[arg(value_name = "JOB")]
    pub jobs: Vec<String>,
}

/// Run `queue pause` (`pause` true) or `queue resume`.
pub fn run(ctx: &Ctx, a: PauseArgs, pause: bool) -> Result<u8> {
    let keys = conductor::queue::service::set_paused(&ctx.store, ctx.now, &a.jobs, pause)?;
    let verb = if pause { "Paused" } else { "Resumed" };
    let text = if keys.is_empty() {
        if pause {
            "Paused the queue: no job starts until `conductor queue resume`; running jobs finish."
                .to_string()
        } else {
            "Resumed the queue.".to_string()
        }
    } else {
        format!("{verb} {}.", keys.join(", "))
    };
    let json = if keys.is_empty() {
        json!({"status": "ok", "queue_paused": pause})
    } else {
        json!({"status": "ok", "jobs": keys, "paused": pause})
    };
    print(
        ctx.out,
        &Out {
            json,
            text,
            code: 0,
        },
    )
}
