//! `conductor status` (and bare `conductor`): the live picture, read without locking.

use super::{Ctx, Report};
use crate::face::status::from;
use conductor::error::Result;
use conductor::protocol::sessions;

/// Show the status.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Keep printing the home's overview (instances, agents, workflows, queue), again after
    /// each change, until Ctrl-C; with --json, one JSON document per change, one per line.
    #[arg(long)]
    pub watch: bool,
}

/// Run `status`.
pub fn execute(ctx: &Ctx) -> Result<Box<dyn Report>> {
    let st = sessions::status(&ctx.store, ctx.now)?;
    let mut report = from(st, ctx.now, ctx.cwd().ok());
    report.enforcement =
        conductor::app::admission::enforcement_of(&ctx.store, ctx.now, &report.state);
    report.landing = ctx
        .store
        .read_doc::<conductor::protocol::landing::LandingDoc>(ctx.now)?
        .landing;
    report.overlaps = conductor::protocol::overlaps::of_sessions(&ctx.store, &report.state);
    let unclaimed = conductor::protocol::unclaimed::read(&ctx.store, ctx.now)?;
    report.unclaimed = conductor::protocol::unclaimed::current(&unclaimed, &report.state)
        .into_iter()
        .cloned()
        .collect();
    // Whether anything watches is said only beside live sessions: not asked otherwise.
    if !report.state.instances.is_empty() {
        report.edit_watch = Some(crate::face::status::EditWatch::of(&ctx.store));
    }
    Ok(Box::new(report))
}
