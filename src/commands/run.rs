//! `conductor run --task T --priority P [--claim FILE...] [--heartbeat 5m] -- COMMAND ARGS...`:
//! register an instance, run a command as it, keep it alive with heartbeats while the command
//! runs, and record it as done when the command exits.

use super::claim;
use super::start::{self, StartArgs};
use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::request::{ClaimRequest, DoneRequest};
use conductor::protocol::sessions::{self, StartOutcome};
use conductor::protocol::supervise::{self, Ran};
use conductor::protocol::{Outcome, Priority, Source};
use conductor::store::Store;
use conductor::store::watch;
use conductor::time::{Limit, Timestamp};

/// Run a command as a registered instance.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The command gets CONDUCTOR_INSTANCE_ID in its environment, so conductor \
commands it runs (claim, release, ...) act on this instance. This process is recorded as the \
instance's pid: if it dies without finishing, `cleanup` reaps the instance.\n\nWhen the command exits, \
the instance is recorded as done: outcome `success` for exit status 0, `abandoned` otherwise (its \
claims are released). `run` exits with the command's status (128+N when killed by signal N). SIGINT \
and SIGTERM sent to `run` are forwarded to the command (a Ctrl-C from the terminal reaches it \
directly).\n\nExit 4 without running anything when the priority gate blocks the task; exit 3 when a \
--claim file is held by another instance (recorded as done with outcome `conflict`).\n\nExamples:\n  \
conductor run --task \"Fix auth bug\" --priority P1 --claim src/auth.rs -- claude -p \"fix the auth bug\"\n  \
conductor run --task nightly --priority P2 --heartbeat 1m -- make test"
)]
pub struct RunArgs {
    /// What the command is going to do.
    #[arg(long)]
    pub task: String,
    /// Project name [default: the current directory's name].
    #[arg(long)]
    pub project: Option<String>,
    /// Task priority (see `start`).
    #[arg(long, value_enum)]
    pub priority: Priority,
    /// Proceed even if the priority gate blocks, recording this justification.
    #[arg(long = "override", value_name = "WHY")]
    pub override_reason: Option<String>,
    /// Where the session runs [default: detected, as for `start`].
    #[arg(long, value_enum)]
    pub source: Option<Source>,
    /// Claim these files before starting the command.
    #[arg(long = "claim", num_args = 1.., value_name = "FILE")]
    pub claim: Vec<String>,
    /// How often to heartbeat while the command runs (30s, 5m, ...; `forever` for never).
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = conductor::time::parse_limit)]
    pub heartbeat: Limit,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Run `run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<u8> {
    // Before any thread exists, so that only our signal thread receives them.
    watch::block_stop_signals();
    let start_args = StartArgs {
        task: args.task.clone(),
        project: args.project.clone(),
        priority: args.priority,
        override_reason: args.override_reason.clone(),
        source: args.source,
        dir: None,
        owner_pid: Some(std::process::id()),
        worktree: None,
    };
    let id = match sessions::start(&ctx.store, ctx.now, start_args.into_request()?)? {
        StartOutcome::Started { instance_id, .. } => instance_id,
        StartOutcome::Blocked { message, options } => {
            return print(ctx.out, &start::Blocked { message, options });
        }
    };
    ctx.out.status(&format!("conductor: registered as {id}"));
    crate::face::watch_edits(&ctx.store, ctx.out);
    if !args.claim.is_empty() {
        let req = ClaimRequest {
            instance_id: Some(id.clone()),
            files: args.claim.clone(),
            force: None,
        };
        let claimed = claim::Claimed {
            outcome: sessions::claim(&ctx.store, ctx.now, &ctx.caller(), &req, &ctx.admission()?)?,
            cwd: ctx.cwd().ok(),
            instance: None,
            gave_up: None,
        };
        if claimed.exit_code() != 0 {
            let code = print(ctx.out, &claimed)?;
            finish(
                &ctx.store,
                &id,
                Outcome::Conflict,
                "a --claim file is held by another instance".into(),
                ctx,
            );
            return Ok(code);
        }
    }

    let out = ctx.out;
    let ran = supervise::run_as(
        &ctx.store,
        &id,
        &args.command,
        args.heartbeat.0,
        |w| eprintln!("warning: {w}"),
        out.quiet || out.json,
    )?;
    let (code, notes) = match ran {
        Ran::Exited { code, notes } => (code, notes),
        Ran::NotStarted { notes, error } => {
            finish(&ctx.store, &id, Outcome::Abandoned, notes, ctx);
            return Err(error);
        }
    };
    let outcome = if code == 0 {
        Outcome::Success
    } else {
        Outcome::Abandoned
    };
    finish(&ctx.store, &id, outcome, notes, ctx);
    Ok(u8::try_from(code).unwrap_or(1))
}

/// Record the instance as done; problems are warnings (the command's status matters more).
fn finish(store: &Store, id: &str, outcome: Outcome, notes: String, ctx: &Ctx) {
    let req = DoneRequest {
        instance_id: Some(id.to_string()),
        outcome: Some(outcome),
        files_modified: None,
        notes: Some(notes.clone()),
    };
    // A released file goes to the first waiter that is still there.
    match sessions::done(store, Timestamp::now(), &ctx.caller(), &req) {
        Ok(_) => ctx.out.status(&format!(
            "conductor: {id} done ({}): {notes}",
            outcome.as_str()
        )),
        Err(e) => ctx.out.warn(&format!("could not record {id} as done: {e}")),
    }
}
