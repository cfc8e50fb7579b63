//! `conductor queue ...`: the agent job queue (see `conductor::queue`). One file per verb.

pub mod add;
pub mod cancel;
pub mod jobs;
pub mod log;
pub mod pause;
pub mod plan;
pub mod results;
pub mod retry;
pub mod run;
pub mod show;
pub mod submit;

use clap::Subcommand;

use super::{Ctx, Out};
use conductor::error::Result;

/// Exit codes of `queue run`, shown at the end of its `--help`.
pub const RUN_EXIT_CODES: &str = "\
Exit codes:
  0  every job completed (nothing failed, timed out or is blocked)
  1  operational error (lock_timeout, io, corrupt_state)
  2  invalid input or usage (bad --runner, unsafe secrets file)
  5  the queue cannot go further: some job failed, timed out or is blocked (or the
     dispatcher was stopped by SIGINT/SIGTERM; its running jobs were put back in line)";

/// The queue's verbs.
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Submit a job manifest ({workspace, jobs[]}) from a file or `-` (stdin).
    #[command(long_about = submit::ABOUT)]
    Submit(submit::SubmitArgs),
    /// Submit one job without a manifest: `queue add [--after JOB] [--priority P] -- PROMPT...`.
    #[command(long_about = add::ABOUT)]
    Add(add::AddArgs),
    /// Pause the whole queue, or given jobs: nothing held is started; running jobs finish.
    #[command(long_about = pause::PAUSE_ABOUT)]
    Pause(pause::PauseArgs),
    /// Resume the queue, or given jobs, after `queue pause`.
    #[command(long_about = pause::RESUME_ABOUT)]
    Resume(pause::PauseArgs),
    /// Ask a planner command to turn a prompt into a manifest; show it, submit it with --yes.
    #[command(long_about = plan::ABOUT)]
    Plan(plan::PlanArgs),
    /// Run the dispatcher: start ready jobs, and each dependent the moment its dependencies complete.
    #[command(after_long_help = RUN_EXIT_CODES)]
    #[command(long_about = run::ABOUT)]
    Run(run::RunArgs),
    /// List jobs and their states (live ones; with WORKSPACE or --all, finished ones too).
    #[command(long_about = jobs::ABOUT)]
    Jobs(jobs::JobsArgs),
    /// Show one job: its state object, prompt file, log and result.
    #[command(long_about = show::ABOUT)]
    Show(show::ShowArgs),
    /// Print a job's log, each attempt under a header; --follow streams it until the job ends.
    #[command(long_about = log::ABOUT, after_long_help = log::EXIT_CODES)]
    Log(log::LogArgs),
    /// Run a failed, timed-out, blocked or cancelled job again, and the dependents it blocked.
    #[command(long_about = retry::ABOUT, after_long_help = retry::EXIT_CODES)]
    Retry(retry::RetryArgs),
    /// Cancel a job, or every unfinished job of a workspace; running processes are killed.
    #[command(long_about = cancel::ABOUT)]
    Cancel(cancel::CancelArgs),
    /// Compile a workspace's RESULT.md files and whether each job's outcomes were met, as reported.
    #[command(long_about = results::ABOUT)]
    Results(results::ResultsArgs),
}

/// Run a queue verb.
pub fn run(ctx: &Ctx, cmd: QueueCommand) -> Result<u8> {
    match cmd {
        QueueCommand::Submit(a) => submit::run(ctx, a),
        QueueCommand::Add(a) => add::run(ctx, a),
        QueueCommand::Pause(a) => pause::run(ctx, a, true),
        QueueCommand::Resume(a) => pause::run(ctx, a, false),
        QueueCommand::Plan(a) => plan::run(ctx, a),
        QueueCommand::Run(a) => run::run(ctx, a),
        QueueCommand::Jobs(a) => jobs::run(ctx, a),
        QueueCommand::Show(a) => show::run(ctx, a),
        QueueCommand::Log(a) => log::run(ctx, a),
        QueueCommand::Retry(a) => retry::run(ctx, a),
        QueueCommand::Cancel(a) => cancel::run(ctx, a),
        QueueCommand::Results(a) => results::run(ctx, a),
    }
}

pub use crate::face::queue::all_jobs;
