//! `conductor claim --wait[=DURATION] FILE...`: claim what is free, join the first-come,
//! first-served queue of what is held, and return the moment every file is ours.
//!
//! The handover itself happens inside the releasing transaction (`ops::release` and `done`
//! give a freed file to the waiter with the lowest ticket), so it is atomic and fair; this
//! command only watches `status.json` (never holding the lock while it waits) until its instance
//! holds everything, or gives up at the deadline, leaving the queues with the usual conflict
//! result (exit 3).

use std::time::{Duration, Instant};

use super::claim::{ClaimArgs, Claimed};
use super::{Ctx, print};
use conductor::error::{Error, Result};
use conductor::protocol::local::ProcessTable;
use conductor::protocol::ops::{self, ClaimOutcome};
use conductor::store::watch::{self, Wake};
use conductor::time::Timestamp;

/// Re-read the state at least this often while waiting, in case a notification is lost.
const SAFETY_RESCAN: Duration = Duration::from_secs(30);

/// Run `claim --wait`.
pub fn run(ctx: &Ctx, args: ClaimArgs) -> Result<u8> {
    watch::block_stop_signals();
    let limit = args.wait.and_then(|l| l.0);
    let req = args.into_request();
    let state = conductor::protocol::read_unvalidated(&ctx.store, ctx.now)?;
    let (id, mut paths) = conductor::protocol::sessions::resolve_with_paths(
        &ctx.store,
        &ctx.caller(),
        &state,
        &req.instance_id,
        &[&req.files],
    )?;
    let files = paths.remove(0);
    let deadline = limit.map(|d| Instant::now() + d);
    let watcher = ctx.store.watcher(|name| name == "status.json")?;
    watcher.stop_on_signals_and_closed_stdout();
    let live = ProcessTable::new()
        .with_max_age(conductor::config::read(&ctx.store)?.default_max_age_minutes);
    let pid = std::process::id();
    let now = Timestamp::now();
    let first = conductor::protocol::transact(&ctx.store, now, |st, fx| {
        let out = ops::claim(st, &id, &files, None, now, &live, fx)?;
        let held: Vec<String> = out.conflicts.iter().map(|c| c.file.clone()).collect();
        ops::enqueue(st, &id, &held, Some(pid), now, fx)?;
        let positions: Vec<(String, String, usize)> = out
            .conflicts
            .iter()
            .map(|c| {
                (
                    c.file.clone(),
                    c.held_by.clone(),
                    ops::queue_position(st, &id, &c.file).unwrap_or(0),
                )
            })
            .collect();
        Ok((out, positions))
    })?;
    let (outcome, positions) = first;
    let cwd = ctx.cwd().ok();
    if outcome.conflicts.is_empty() {
        return print(ctx.out, &Claimed { outcome, cwd });
    }
    for (file, holder, pos) in &positions {
        ctx.out.status(&format!(
            "Waiting for {} (held by {holder}; #{pos} in queue){}",
            super::display_path(file, cwd.as_deref()),
            limit
                .map(|d| format!(" for up to {:.1}s", d.as_secs_f64()))
                .unwrap_or_default()
        ));
    }
    loop {
        let state = conductor::protocol::read(&ctx.store, Timestamp::now())?;
        let me = state
            .instance(&id)
            .ok_or_else(|| Error::UnknownInstance(id.clone()))?;
        if files.iter().all(|f| me.files_claimed.contains(f)) {
            let outcome = ClaimOutcome {
                claimed: files.clone(),
                ..ClaimOutcome::default()
            };
            return print(ctx.out, &Claimed { outcome, cwd });
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) || watcher.stopped() {
            break;
        }
        if watcher.wait(Some(left.unwrap_or(SAFETY_RESCAN).min(SAFETY_RESCAN))) == Wake::Stop {
            break;
        }
    }
    // Give up: leave the queues, then answer exactly as a plain claim would now.
    let now = Timestamp::now();
    let outcome = conductor::protocol::transact(&ctx.store, now, |st, fx| {
        ops::dequeue(st, &id, &files, now, fx)?;
        ops::claim(st, &id, &files, None, now, &live, fx)
    })?;
    print(ctx.out, &Claimed { outcome, cwd })
}
