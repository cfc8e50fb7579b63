//! `conductor workflow transition TARGET --summary TEXT`: the worker finishes its state.

use serde_json::json;

use super::{Ctx, WorkerArgs, emit};
use conductor::error::Result;
use conductor::workflows::service;

/// Finish the current state.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "TARGET must be one of the state's `next` targets (`done` finishes the \
workflow; it is allowed from a state that lists it or whose `next` is empty). The transition is \
recorded at once; the supervisor applies it when this worker exits (holding it for approval where \
the template says so), runs the state's cleanup commands, and starts the next state's worker. \
Exit it after calling this.\n\nExit 2 for a target the state does not allow, or when this worker's \
state has already ended."
)]
pub struct TransitionArgs {
    /// The state to move to, or `done`.
    pub target: String,
    /// What this state achieved; handed to the next workers.
    #[arg(long)]
    pub summary: String,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// Run `workflow transition`.
pub fn run(ctx: &Ctx, args: TransitionArgs) -> Result<u8> {
    let id = args.worker.session_id(ctx)?;
    let now = ctx.now;
    let from = service::transition(
        &ctx.store,
        now,
        &id,
        args.worker.state(),
        &args.target,
        &args.summary,
    )?;
    emit(
        ctx,
        json!({"status": "ok", "session": id, "from": from, "to": args.target,
               "message": "Recorded. Exit now; the supervisor moves the workflow on."}),
        format!(
            "Recorded {from} -> {} for {id}. Exit now; the supervisor moves the workflow on.",
            args.target
        ),
        0,
    )
}
