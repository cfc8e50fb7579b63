//! `conductor queue retry JOB`: run a job again, and what it unblocks.

use std::collections::{BTreeMap, BTreeSet};

use clap::Args;
use serde_json::json;

use super::run::{DispatchArgs, counts, dispatch_with_progress};
use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::dispatch;

/// The long help of `queue retry`.
pub const ABOUT: &str = "Put a failed, timed-out, blocked or cancelled job back in line, with every job that was\n\
blocked because of it, and run them.\n\
\n\
If a dispatcher is running on this home (`queue run`, `queue run --follow`, another retry),\n\
it starts them at once (it wakes on the event journal) and retry returns. Otherwise retry\n\
runs the dispatcher itself, with the same options as `queue run`, for these jobs only, until\n\
they can make no more progress. --no-run only puts them back in line.\n\
\n\
A job blocked by a dependency is retried through that dependency.\n\
\n\
The jobs run exactly as the job last ran: the same --runner (with its --sandbox-ro and\n\
--pass-env) and --agent-cmd, unless given here.";

/// Exit codes of `queue retry`, shown at the end of its `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  the jobs are back in line and completed (or a running dispatcher took them, or --no-run)
  1  operational error (lock_timeout, io, corrupt_state)
  2  invalid input: unknown or ambiguous job, a job that cannot be retried, bad --runner
  5  retry ran them and some failed, timed out or are blocked again";

/// The arguments of `queue retry` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The job: `JOB` or `WORKSPACE/JOB`.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// Only put the jobs back in line; start nothing (a later `queue run` starts them).
    #[arg(long)]
    pub no_run: bool,
    #[command(flatten)]
    pub dispatch: DispatchArgs,
}

/// Run `queue retry`.
pub fn run(ctx: &Ctx, args: RetryArgs) -> Result<u8> {
    // Runs as it ran, unless told otherwise; bad options are refused before anything changes.
    let mut dispatch_args = args.dispatch;
    let before = conductor::queue::lookup::last_ran_with(&ctx.store, ctx.now, &args.job)?;
    if let Some(how) = &before {
        if dispatch_args.runner.is_none() {
            dispatch_args.runner = Some(how.runner.clone());
            if dispatch_args.sandbox_ro.is_empty() {
                dispatch_args.sandbox_ro = how.sandbox_ro_paths();
            }
            if dispatch_args.pass_env.is_empty() {
                dispatch_args.pass_env = how.pass_env.clone();
            }
        }
        if dispatch_args.agent_cmd.is_none() {
            dispatch_args.agent_cmd = Some(how.agent_cmd.clone());
        }
    }
    let shown = format!(
        "--runner {} --agent-cmd {}",
        conductor::queue::exec::shell_quote(dispatch_args.runner.as_deref().unwrap_or("local")),
        conductor::queue::exec::shell_quote(
            dispatch_args
                .agent_cmd
                .as_deref()
                .unwrap_or(conductor::queue::exec::DEFAULT_AGENT_CMD)
        )
    );
    let opts = dispatch_args.options(ctx, false, None)?;
    let keys = conductor::queue::service::retry(&ctx.store, ctx.now, &args.job)?;
    let queued = format!(
        "Queued {} again{}.",
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
    let plain = |how: &str, message: String| Out {
        json: json!({"status": "ok", "requeued": keys, "run": how, "message": message}),
        text: message,
        code: 0,
    };
    if args.no_run {
        let message = format!("{queued} Start it with `conductor queue run`.");
        return print(ctx.out, &plain("no", message));
    }
    // Asked after the commit: a dispatcher that is running now either sees the retry in the
    // journal, or looks at the queue once more after it withdraws (see `dispatch::run`).
    if dispatch::dispatcher_running(ctx.store.home().dir())? {
        let message = format!(
            "{queued} The running dispatcher starts it now, with its own runner and agent command."
        );
        return print(ctx.out, &plain("dispatcher", message));
    }
    if !ctx.out.quiet {
        eprintln!(
            "conductor: running {} with {shown}{}",
            keys[0],
            if before.is_some() {
                " (as it last ran, but for the options given here)"
            } else {
                ""
            }
        );
    }
    let only: BTreeSet<String> = keys.iter().cloned().collect();
    let opts = dispatch::Options {
        only: Some(only.clone()),
        ..opts
    };
    let (summary, took) = dispatch_with_progress(ctx, &opts)?;
    // How the retried jobs ended (live, or archived with their finished workspace).
    let states = conductor::queue::lookup::states_of(&ctx.store, ctx.now, &only)?;
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for s in states.values() {
        *tally.entry(s.clone()).or_default() += 1;
    }
    let ok = !summary.stopped && states.values().all(|s| s == "completed");
    let message = format!(
        "{queued} {}Ran them in {took:.2}s: {}.",
        if summary.stopped { "Stopped. " } else { "" },
        counts(&tally)
    );
    print(
        ctx.out,
        &Out {
            json: json!({
                "status": if ok { "ok" } else { "incomplete" },
                "requeued": keys,
                "run": "here",
                "states": states,
                "started": summary.started,
                "stopped": summary.stopped,
                "seconds": took,
                "message": message,
            }),
            text: message.clone(),
            code: if ok { 0 } else { 5 },
        },
    )
}
