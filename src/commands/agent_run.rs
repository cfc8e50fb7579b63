//! `conductor agent run NAME [--exec CMD] ...`: arguments → [`conductor::agents::run_loop`] →
//! status lines. The loop itself (wake, fetch, claim, execute, complete) lives in the agents
//! domain.

use clap::Args;

use super::Ctx;
use conductor::agents;
use conductor::agents::run_loop::{self, Note, Options};
use conductor::error::Result;

#[derive(Debug, Args)]
#[command(
    after_long_help = "The child gets the item and its message as JSON on stdin and \
CONDUCTOR_AGENT, CONDUCTOR_ITEM_ID, CONDUCTOR_CHANNEL_ID, CONDUCTOR_MESSAGE_ID in its environment. \
Its stdout is the artifact: it must pass `conductor artifact validate`. Exit 0 with a valid artifact \
posts it (as a reply in the item's channel, or a DM back) and completes the item with \
completion_ref {post_id, channel_id}; exit 3 skips the item; anything else (or a timeout) releases \
the claim and backs off (--backoff-ms doubling up to --backoff-max-ms).\n\nThe loop stops on \
SIGINT/SIGTERM, after --max-cycles cycles or --duration-seconds seconds. It keeps \
runtime/agents/NAME/run-status.json (what it is doing now) and runtime/agents/NAME/actions.jsonl \
(every action, capped at 256 KiB) in the home, secrets redacted: `conductor agent status NAME` and \
`conductor agent log NAME` show them.\n\nExamples:\n  conductor agent run scout \
--exec ./answer.sh\n  conductor agent run scout --mark-seen              # shadow mode: queue and report only\n  \
conductor agent run lint --exec ./answer.sh --takeover-for scout   # finish what a dead scout loop claimed"
)]
pub struct RunArgs {
    /// The agent.
    pub name: String,
    /// Shell command that does the work (run with sh -c).
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// Stop after this many cycles (a cycle: wake, fetch, maybe claim and execute).
    #[arg(long, value_name = "N")]
    pub max_cycles: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "S")]
    pub duration_seconds: Option<f64>,
    /// Mark queued items seen.
    #[arg(long)]
    pub mark_seen: bool,
    /// Also act on posts in watched channels that do not address the agent.
    #[arg(long)]
    pub broadcast: bool,
    /// Claim TTL in seconds (15 to 1800); the claim is renewed while the child runs.
    #[arg(long, default_value_t = agents::TTL_DEFAULT)]
    pub ttl: u64,
    /// Seconds the child may run before it is killed.
    #[arg(long, default_value_t = 600.0, value_name = "S")]
    pub timeout: f64,
    /// First back-off after an error, in milliseconds (doubles per consecutive error).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub backoff_ms: u64,
    /// Longest back-off, in milliseconds.
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub backoff_max_ms: u64,
    /// Seconds between looks at the journal when no file system watcher is available.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub heartbeat: f64,
    /// Stand in for AGENT (repeatable): take over expired claims on AGENT's items in channels
    /// this agent watches, once their TTL has run out (say AGENT's loop was killed mid-item).
    /// Never a live claim, never an item nobody claimed, never a DM.
    #[arg(long = "takeover-for", value_name = "AGENT")]
    pub takeover_for: Vec<String>,
}

impl From<RunArgs> for Options {
    fn from(a: RunArgs) -> Options {
        Options {
            name: a.name,
            exec: a.exec,
            max_cycles: a.max_cycles,
            duration_seconds: a.duration_seconds,
            mark_seen: a.mark_seen,
            broadcast: a.broadcast,
            ttl: a.ttl,
            timeout: a.timeout,
            backoff_ms: a.backoff_ms,
            backoff_max_ms: a.backoff_max_ms,
            heartbeat: a.heartbeat,
            takeover_for: a.takeover_for,
        }
    }
}

/// Run the loop, printing its notes.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<u8> {
    run_loop::run(&ctx.store, args.into(), &mut |note| match note {
        Note::Status(s) => ctx.out.status(&s),
        Note::Warning(w) => ctx.out.warn(&w),
    })
}
