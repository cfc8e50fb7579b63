//! `conductor workflow usage --tokens N [--cost USD]`: the worker reports what it used.

use serde_json::json;

use super::{Ctx, WorkerArgs, emit};
use conductor::error::Result;
use conductor::workflows;

/// Report usage.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Adds to the current state's run and the session's totals. When a \
budget of the state or of the session is passed, the session stops in budget_exceeded (its \
supervisor stops this worker) and this command exits 8 with the figures."
)]
pub struct UsageArgs {
    /// Tokens used since the last report.
    #[arg(long, value_name = "N")]
    pub tokens: u64,
    /// Cost in US dollars since the last report.
    #[arg(long, value_name = "USD", default_value_t = 0.0, value_parser = cost)]
    pub cost: f64,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

fn cost(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a non-negative amount of dollars")),
    }
}

/// Run `workflow usage`.
pub fn run(ctx: &Ctx, args: UsageArgs) -> Result<u8> {
    let id = args.worker.session_id(ctx)?;
    let workflows::service::UsageRecorded { exceeded, totals } = workflows::service::report_usage(
        &ctx.store,
        ctx.now,
        &id,
        args.worker.state(),
        args.tokens,
        args.cost,
    )?;
    let (status, code, text) = match &exceeded {
        Some(why) => (
            "budget_exceeded",
            8,
            format!("BUDGET EXCEEDED: {why}; the session stops"),
        ),
        None => (
            "ok",
            0,
            format!(
                "Recorded. Session total: {} tokens, ${:.4}",
                totals.tokens, totals.cost_usd
            ),
        ),
    };
    emit(
        ctx,
        json!({"status": status, "session": id, "tokens": totals.tokens, "cost_usd": totals.cost_usd,
               "budget_exceeded": exceeded}),
        text,
        code,
    )
}
