//! `conductor queue retry JOB`: run a job again.

use clap::Args;
use serde_json::json;

use super::Plain;
use crate::commands::{Ctx, print};
use crate::error::Result;
use crate::queue::{QueueDoc, ops};
use crate::store::Lock;

/// The long help of `queue retry`.
pub const ABOUT: &str = "Put a failed, timed-out, blocked or cancelled job back in line, with every job that was\n\
blocked because of it. A running `queue run --follow` starts it at once; otherwise run\n\
`conductor queue run`. A job blocked by a dependency is retried through that dependency.";

/// The arguments of `queue retry` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The job: `JOB` or `WORKSPACE/JOB`.
    #[arg(value_name = "JOB")]
    pub job: String,
}

/// Run `queue retry`.
pub fn run(ctx: &Ctx, args: RetryArgs) -> Result<u8> {
    let keys = ctx.store.transaction(ctx.now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let i = ops::find(&doc, &args.job)?;
        let mut events = Vec::new();
        let keys = ops::retry(&mut doc, i, ctx.now, &mut events)?;
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok(keys)
    })?;
    let message = format!(
        "Queued {} again{}. Start it with `conductor queue run` (a `queue run --follow` picks it up now).",
        keys[0],
        if keys.len() > 1 {
            format!(
                " with {} dependent job(s): {}",
                keys.len() - 1,
                keys[1..].join(", ")
            )
        } else {
            String::new()
        }
    );
    print(
        ctx.out,
        &Plain {
            json: json!({"status": "ok", "requeued": keys, "message": message}),
            text: message.clone(),
            code: 0,
        },
    )
}
