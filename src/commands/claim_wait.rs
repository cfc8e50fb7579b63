//! `conductor claim --wait[=DURATION] FILE...`: claim what is free, join the first-come,
//! first-served queue of what is held, and return the moment every file is ours.
//!
//! The handover itself happens inside the releasing transaction (`ops::release` and `done`
//! give a freed file to the waiter with the lowest ticket), so it is atomic and fair; the wait
//! is `protocol::sessions::wait_for_claim` (the MCP server's waiting claim is the same call):
//! watch `status.json` (never holding the lock) until the instance holds everything, or give up
//! at the deadline, leaving the queues with the usual conflict result (exit 3). This command
//! only says where it waits and prints the result.

use std::time::Instant;

use super::claim::{ClaimArgs, Claimed, GaveUp};
use super::{Ctx, print};
use conductor::error::Result;
use conductor::protocol::local::ProcessTable;
use conductor::protocol::ops;
use conductor::protocol::sessions::{self, Acting, Step, Stepped, Waited};
use conductor::store::watch;
use conductor::time::Timestamp;

/// Run `claim --wait`.
pub fn run(ctx: &Ctx, args: ClaimArgs) -> Result<u8> {
    watch::block_stop_signals();
    let limit = args.wait.and_then(|l| l.0);
    let arg = args.instance.clone();
    let req = args.into_request()?;
    let deadline = limit.map(|d| Instant::now() + d);
    let watcher = ctx.store.watcher(|name| name == "status.json")?;
    watcher.stop_on_signals_and_closed_stdout();
    let live = ProcessTable::new()
        .with_max_age(conductor::config::read(&ctx.store)?.default_max_age_minutes);
    let admit = ctx.admission()?;
    // What became of a grant taken away before this process saw it is told from here on.
    let since = ctx.store.last_event_seq()?;
    let step = Step::Enqueue {
        pid: std::process::id(),
    };
    let Stepped {
        instance_id: id,
        files,
        outcome,
        state,
    } = sessions::claim_step(
        &ctx.store,
        Timestamp::now(),
        &ctx.caller(),
        &req,
        step,
        &live,
        Acting::Request,
        &admit,
    )?;
    let cwd = ctx.cwd().ok();
    if outcome.conflicts.is_empty() {
        return print(ctx.out, &Claimed::new(outcome, ctx, &arg, &id));
    }
    let positions = outcome.conflicts.iter().map(|c| {
        (
            &c.file,
            &c.held_by,
            ops::queue_position(&state, &id, &c.file).unwrap_or(0),
        )
    });
    for (file, holder, pos) in positions {
        ctx.out.status(&format!(
            "Waiting for {} (held by {holder}; #{pos} in queue){}",
            super::display_path(file, cwd.as_deref()),
            limit
                .map(|d| format!(" for up to {:.1}s", d.as_secs_f64()))
                .unwrap_or_else(|| {
                    " with no time limit (--wait=5m gives up after 5 minutes; Ctrl-C stops waiting)"
                        .into()
                })
        ));
    }
    let waited =
        match sessions::wait_for_claim(&ctx.store, &id, &files, &live, &watcher, deadline, since) {
            Ok(w) => w,
            Err(e) => {
                // Files handed over while it waited stay granted: a failure must not hide them.
                let held = sessions::held_of(&ctx.store, &id, &files);
                if !held.is_empty() {
                    let shown: Vec<String> = held
                        .iter()
                        .map(|f| super::display_path(f, cwd.as_deref()))
                        .collect();
                    ctx.out.warn(&format!(
                        "{id} still holds {} (granted while it waited) although this claim failed; \
                         release what you no longer need: conductor release --instance {id} {}",
                        shown.join(", "),
                        shown
                            .iter()
                            .map(|f| conductor::template::shell_quote(f))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ));
                }
                return Err(e);
            }
        };
    let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
    let (outcome, gave_up) = match waited {
        Waited::Claimed(outcome) => (outcome, None),
        Waited::GaveUp { outcome, .. } => match limit {
            Some(d) if timed_out => (outcome, Some(GaveUp::TimedOut(d))),
            _ => (outcome, Some(GaveUp::Stopped)),
        },
    };
    let mut claimed = Claimed::new(outcome, ctx, &arg, &id);
    if !claimed.outcome.conflicts.is_empty() {
        claimed.gave_up = gave_up;
    }
    print(ctx.out, &claimed)
}
