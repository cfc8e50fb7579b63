//! The person's controls: `approve`, `resolve --to`, `pause`, `resume`, `abort`.

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Result;
use conductor::workflows;
use conductor::workflows::service::{self, Control};

/// A session, by id or unique prefix.
#[derive(Debug, clap::Args)]
pub struct SessionArg {
    /// The session id (a unique prefix is enough).
    pub session: String,
}

/// `resolve SESSION --to STATE`.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Leaves human_intervention (or failed, budget_exceeded): the session \
continues in STATE with a fresh retry count and cleared transition counts. Run `workflow run` \
again (or let a --follow supervisor pick it up)."
)]
pub struct ResolveArgs {
    /// The session id (a unique prefix is enough).
    pub session: String,
    /// The state to continue in.
    #[arg(long, value_name = "STATE")]
    pub to: String,
}

fn act(ctx: &Ctx, session: &str, verb: &str, c: Control) -> Result<u8> {
    let s = service::control(&ctx.store, ctx.now, session, &c)?;
    let id = s.id.clone();
    // "Running" is only true while a supervisor (`workflow run`) is there to run it.
    let supervised = s
        .supervisor_pid
        .is_some_and(|p| !conductor::host::pid_is_dead(p));
    let at = s
        .current_state
        .as_deref()
        .map(|c| format!(" in `{c}`"))
        .unwrap_or_default();
    let text = if s.status == workflows::Status::Running && !supervised {
        format!(
            "{verb} {id}: ready to go on{at}, but no supervisor is running it; start one with \
             `conductor workflow run {id}`"
        )
    } else {
        format!("{verb} {id}: now {}{at}", s.status.as_str())
    };
    emit(
        ctx,
        json!({"status": "ok", "session": id, "workflow_status": s.status, "state": s.current_state, "supervised": supervised}),
        text,
        0,
    )
}

/// Run `workflow approve`.
pub fn approve(ctx: &Ctx, a: SessionArg) -> Result<u8> {
    act(ctx, &a.session, "Approved", Control::Approve)
}

/// Run `workflow resolve`.
pub fn resolve(ctx: &Ctx, a: ResolveArgs) -> Result<u8> {
    act(ctx, &a.session, "Resolved", Control::Resolve { to: a.to })
}

/// Run `workflow pause`.
pub fn pause(ctx: &Ctx, a: SessionArg) -> Result<u8> {
    act(ctx, &a.session, "Paused", Control::Pause)
}

/// Run `workflow resume`.
pub fn resume(ctx: &Ctx, a: SessionArg) -> Result<u8> {
    act(ctx, &a.session, "Resumed", Control::Resume)
}

/// Run `workflow abort`.
pub fn abort(ctx: &Ctx, a: SessionArg) -> Result<u8> {
    act(ctx, &a.session, "Aborted", Control::Abort)
}
