//! `conductor workflow ...`: workflow templates, sessions, the worker's tools, the person's
//! controls and the supervisor. The domain is in [`conductor::workflows`].

pub mod control;
pub mod guard;
pub mod list;
pub mod log;
pub mod run;
pub mod show;
pub mod snapshot;
pub mod start;
pub mod status;
pub mod templates;
pub mod transition;
pub mod usage;
pub mod validate;

use clap::Subcommand;
use serde_json::Value;

use super::{Ctx, print};
use conductor::error::Reason;
use conductor::error::Result;
pub use conductor::workflows::timeline::title;

/// The Claude Code worker command of the help's examples, split with `\` continuations inside
/// the quoted template (`sh -c` joins them) so that no line is wrapped inside an argument at 80
/// columns and a pasted example runs as shown. `conductor integrate claude` first: its hooks
/// approve the worker's edits of files it may claim, which `-p` mode would leave unapproved.
macro_rules! claude_worker_example {
    () => {
        "conductor workflow run wf-1a2b3c --agent-cmd 'claude -p \\
      --allowedTools \"Bash(conductor workflow:*)\" \\
      --append-system-prompt-file {system_file}'"
    };
}
pub(crate) use claude_worker_example;

/// The group's `--help` epilogue: a session from start to end.
pub const HELP: &str = concat!(
    "\
A session:
  conductor workflow validate .conductor/workflows/feature.json
  conductor workflow start feature \"Add rate limiting\"          # prints wf-1a2b3c
  conductor integrate claude
  ",
    claude_worker_example!(),
    "
  conductor workflow show wf-1a2b3c       # Planning [✓] -> Implementation [●] -> Verification [ ]
  conductor workflow approve wf-1a2b3c    # when a state requires approval; then run again

Workers (started by `workflow run`) call `workflow transition`, `snapshot`, `usage` and `status`;
they find their session in CONDUCTOR_WORKFLOW_SESSION. docs/workflows.md has a
template to copy.",
);

/// Workflows: a supervised state machine, each state run by a fresh agent process.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// List the templates in .conductor/workflows/ (project) and <home>/workflows/.
    Templates(templates::TemplatesArgs),
    /// Check a template file: schema, unknown `next` targets, unreachable states, no way to finish.
    Validate(validate::ValidateArgs),
    /// Start a session of a template for a task (then drive it with `workflow run`).
    Start(start::StartArgs),
    /// List sessions, live and finished.
    List(list::ListArgs),
    /// Show a session: the timeline, time and tokens per state, totals, files modified.
    Show(show::ShowArgs),
    /// Print the workers' output, one section per state run; --follow streams it as written.
    #[command(long_about = log::ABOUT, after_long_help = log::EXIT_CODES)]
    Log(log::LogArgs),
    /// Drive a session: one fresh agent process per state, until no automated progress is possible.
    Run(run::RunArgs),
    /// (worker) Finish the current state and ask to move to TARGET (`done` finishes the workflow).
    Transition(transition::TransitionArgs),
    /// (worker) Record findings, modified files, pending tasks or KEY=VALUE for later states.
    Snapshot(snapshot::SnapshotArgs),
    /// (worker) Report tokens and cost used; budgets are checked.
    Usage(usage::UsageArgs),
    /// (worker) Show the session and state this process works for, and the allowed targets.
    Status(status::StatusArgs),
    /// (worker, agent hooks) Check a tool call against the session's safety rules; logs interceptions.
    Guard(guard::GuardArgs),
    /// Approve the transition a session is holding (awaiting_approval).
    Approve(control::SessionArg),
    /// Move a stopped session (human_intervention, failed, budget_exceeded) to STATE and continue.
    Resolve(control::ResolveArgs),
    /// Hold a session after its current worker ends.
    Pause(control::SessionArg),
    /// Continue a paused session.
    Resume(control::SessionArg),
    /// End a session; its supervisor stops the running worker.
    Abort(control::SessionArg),
}

/// Run a workflow command.
pub fn run(ctx: &Ctx, cmd: WorkflowCommand) -> Result<u8> {
    match cmd {
        WorkflowCommand::Templates(a) => templates::run(ctx, a),
        WorkflowCommand::Validate(a) => validate::run(ctx, a),
        WorkflowCommand::Start(a) => start::run(ctx, a),
        WorkflowCommand::List(a) => list::run(ctx, a),
        WorkflowCommand::Show(a) => show::run(ctx, a),
        WorkflowCommand::Log(a) => log::run(ctx, a),
        WorkflowCommand::Run(a) => run::run(ctx, a),
        WorkflowCommand::Transition(a) => transition::run(ctx, a),
        WorkflowCommand::Snapshot(a) => snapshot::run(ctx, a),
        WorkflowCommand::Usage(a) => usage::run(ctx, a),
        WorkflowCommand::Status(a) => status::run(ctx, a),
        WorkflowCommand::Guard(a) => guard::run(ctx, a),
        WorkflowCommand::Approve(a) => control::approve(ctx, a),
        WorkflowCommand::Resolve(a) => control::resolve(ctx, a),
        WorkflowCommand::Pause(a) => control::pause(ctx, a),
        WorkflowCommand::Resume(a) => control::resume(ctx, a),
        WorkflowCommand::Abort(a) => control::abort(ctx, a),
    }
}

pub use crate::commands::Out;

/// Print a report.
pub fn emit(ctx: &Ctx, json: Value, text: String, code: u8) -> Result<u8> {
    print(ctx.out, &Out { json, text, code })
}

/// The worker's session and state: `--session`/`CONDUCTOR_WORKFLOW_SESSION` and
/// `CONDUCTOR_WORKFLOW_STATE`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The session [default: $CONDUCTOR_WORKFLOW_SESSION, set by the supervisor].
    #[arg(long, env = "CONDUCTOR_WORKFLOW_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// The state this worker runs [default: $CONDUCTOR_WORKFLOW_STATE]; a worker whose state has
    /// ended is refused.
    #[arg(long, env = "CONDUCTOR_WORKFLOW_STATE", value_name = "STATE")]
    pub state: Option<String>,
}

impl WorkerArgs {
    /// The full session id.
    pub fn session_id(&self, ctx: &Ctx) -> Result<String> {
        match self.session.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => Ok(conductor::workflows::find_session(&ctx.store, ctx.now, s)?.id),
            None => Err(conductor::error::Error::invalid(
                Reason::UnknownSession,
                "no workflow session: pass --session ID or run under `conductor workflow run` \
                 (it sets CONDUCTOR_WORKFLOW_SESSION)",
            )),
        }
    }

    /// The state named in the environment, if any.
    pub fn state(&self) -> Option<&str> {
        self.state.as_deref().filter(|s| !s.is_empty())
    }
}
