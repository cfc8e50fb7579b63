//! `conductor agent selftest NAME [--min-level compatibility_pass|full_pass]`: check an agent's
//! runtime on live data, the way CanopyKit's shadow self-test does.

use clap::Args;
use serde_json::json;

use super::agent::Out;
use super::{Ctx, print};
pub use conductor::agents::selftest::Level;
use conductor::error::Result;

/// `agent selftest`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Checks: the agent-scoped feed opens at the agent's cursor; the cursor is \
within the journal and keeps up; every unacknowledged mention has its inbox item and every item's \
mention is there; the mode classification; and channel routing of the recent posts in watched channels \
(each gets a decision and, when not actionable, a reason). Reports failed, compatibility_pass or \
full_pass with blocking gaps and warnings.\n\nExit 0 at or above --min-level, 1 below it."
)]
pub struct SelftestArgs {
    /// The agent.
    pub name: String,
    /// The lowest level that exits 0.
    #[arg(long, value_enum, default_value_t = Level::CompatibilityPass)]
    pub min_level: Level,
}

/// Run `agent selftest`.
pub fn run(ctx: &Ctx, a: SelftestArgs) -> Result<u8> {
    let conductor::agents::selftest::Selftest {
        agent,
        level,
        gaps,
        warnings,
        checks,
    } = conductor::agents::selftest::run(&ctx.store, ctx.now, &a.name)?;
    let code = if level >= a.min_level { 0 } else { 1 };
    let mut text = format!("selftest {}: {}", agent, level.as_str());
    for g in &gaps {
        text.push_str(&format!("\n  blocking: {g}"));
    }
    for w in &warnings {
        text.push_str(&format!("\n  warning: {w}"));
    }
    print(
        ctx.out,
        &Out {
            json: json!({"status": if code == 0 { "ok" } else { "failed" }, "agent": agent, "level": level.as_str(),
                "min_level": a.min_level.as_str(), "blocking_gaps": gaps, "warnings": warnings, "checks": checks}),
            text,
            code,
        },
    )
}
