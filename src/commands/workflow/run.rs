//! `conductor workflow run SESSION --agent-cmd TEMPLATE [--follow]`: arguments →
//! [`conductor::workflows::supervisor`] → the session's report. The supervisor itself (one
//! worker per state, transitions, cleanup, resuming after a crash) lives in the workflows
//! domain.

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::{Error, Reason, Result};
use conductor::progress::Note;
use conductor::workflows::supervisor::{self, Ending, Options};
use conductor::workflows::{Session, Status};

/// Drive a session.
#[derive(Debug, clap::Args)]
#[command(after_long_help = const_format_help())]
pub struct RunArgs {
    /// The session id (a unique prefix is enough).
    pub session: String,
    /// The agent command, run with `sh -c` in the project directory for each state. Placeholders:
    /// {prompt_file}, {system_file} (paths) and {prompt} (the text), shell-quoted; the prompt is
    /// also on its stdin. Remembered for later runs of the session; keep secrets in the
    /// environment, not here. Default: Pi (`pi -p --mode json --append-system-prompt
    /// {system_file}`, the prompt on stdin), with conductor's Pi extension installed.
    #[arg(long, value_name = "TEMPLATE")]
    pub agent_cmd: Option<String>,
    /// Keep waiting through approvals and pauses instead of returning.
    #[arg(long)]
    pub follow: bool,
    /// How long a worker may keep running after it recorded its transition before it is stopped.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = conductor::time::parse_limit)]
    pub exit_grace: conductor::time::Limit,
}

const fn const_format_help() -> &'static str {
    concat!(
        "Each worker runs with CONDUCTOR_WORKFLOW_SESSION, CONDUCTOR_WORKFLOW_STATE, \
CONDUCTOR_INSTANCE_ID (a conductor instance registered for it, so its claims are coordinated) and \
CONDUCTOR_HOME in its environment, and its starting prompt holds the task, its persona, the state's \
instructions, the snapshot handed over by earlier states, and how to finish: \
`conductor workflow transition TARGET --summary TEXT`. Its output goes to a file in \
<home>/workflow-sessions/SESSION/.\n\n\
A worker that exits without a transition is run once more with the failure in its prompt; the \
second time the session goes to human_intervention. The fourth traversal of the same edge does too. \
Kill the supervisor at any time: `conductor workflow run SESSION` resumes where the ledger says.\n\n\
The default worker is Pi: `pi -p --mode json --append-system-prompt {system_file}` with the \
prompt on its stdin (sent once) and the persona as its system prompt. It needs conductor's Pi \
extension, which gives the worker the tools workflow_transition and workflow_update_snapshot and \
enforces the damage-control rules: run `conductor integrate pi` in the project (or with --user) \
first. Pi's provider and model are Pi's own settings. The usage each worker prints (Pi's and \
OpenCode's JSON events, Claude Code's json/stream-json result) counts against the budgets.\n\n\
Examples:\n  conductor integrate pi && conductor workflow run wf-1a2b3c --follow\n  \
conductor integrate claude\n  ",
        super::claude_worker_example!(),
        "\n  conductor workflow run wf-1a2b3c --agent-cmd 'pi -p --mode json \\\n      \
--model sonnet --append-system-prompt {system_file}'\n\n\
Exit codes of `workflow run` (it returns when no automated progress is possible):\n  \
0   done\n  1   operational error (lock_timeout, io, corrupt_state)\n  \
2   invalid input (unknown session, the default Pi worker without conductor's extension, \
another supervisor is running it)\n  5   awaiting_approval (conductor workflow approve SESSION; or --follow)\n  \
6   paused (conductor workflow resume SESSION)\n  7   human_intervention (conductor workflow resolve SESSION --to STATE)\n  \
8   budget_exceeded (the figures are in `workflow show`)\n  9   failed (the agent command could not be run)\n  \
10  aborted\n  130 the supervisor was interrupted (SIGINT/SIGTERM); run it again to resume"
    )
}

/// Run `workflow run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<u8> {
    // The protocol's `start` gives an exported instance a new task instead of registering one;
    // the workers must get instances of their own. No thread exists yet.
    unsafe { std::env::remove_var("CONDUCTOR_INSTANCE_ID") };
    check_default_worker(ctx, &args)?;
    let opts = Options {
        session: args.session,
        agent_cmd: args.agent_cmd,
        follow: args.follow,
        exit_grace: args.exit_grace.0,
    };
    let ending = supervisor::run(&ctx.store, opts, &mut |note| match note {
        Note::Status(s) => ctx.out.status(&s),
        Note::Warning(w) => ctx.out.warn(&w),
    })?;
    match ending {
        Ending::Stopped(s) => report(ctx, &s),
        Ending::Interrupted => Ok(130),
    }
}

/// The session as the supervisor left it, and what to do next.
fn report(ctx: &Ctx, s: &Session) -> Result<u8> {
    let code = s.status.exit_code();
    let mut text = format!(
        "{}: {}\n{}",
        s.id,
        s.status.as_str(),
        super::show::breadcrumbs(s)
    );
    if let Some(h) = &s.halt
        && s.status != Status::Done
    {
        text.push_str(&format!("\nWhy: {h}"));
    }
    text.push_str(&format!(
        "\nTotals: {} runs, {} tokens, ${:.4}",
        s.totals.runs, s.totals.tokens, s.totals.cost_usd
    ));
    let next = match s.status {
        Status::AwaitingApproval => Some(format!("conductor workflow approve {}", s.id)),
        Status::Paused => Some(format!("conductor workflow resume {}", s.id)),
        Status::HumanIntervention | Status::Failed | Status::BudgetExceeded => {
            Some(format!("conductor workflow resolve {} --to STATE", s.id))
        }
        _ => None,
    };
    if let Some(n) = &next {
        text.push_str(&format!(
            "\nNext: {n}, then conductor workflow run {}",
            s.id
        ));
    }
    emit(
        ctx,
        json!({"status": "ok", "session": s.id, "workflow_status": s.status,
               "state": s.current_state, "reason": s.halt, "exit_code": code,
               "tokens": s.totals.tokens, "cost_usd": s.totals.cost_usd}),
        text,
        code,
    )
}

/// The default worker (Pi) finishes a state with the tools of conductor's Pi extension: refuse to
/// start it where Pi would not load that extension (in the project or the user's directory).
fn check_default_worker(ctx: &Ctx, args: &RunArgs) -> Result<()> {
    if args.agent_cmd.is_some() {
        return Ok(());
    }
    let s = conductor::workflows::find_session(&ctx.store, ctx.now, &args.session)?;
    if s.agent_cmd.is_some() || s.status.is_finished() {
        return Ok(());
    }
    if conductor::integrations::pi::installed_for(std::path::Path::new(&s.project_dir)) {
        return Ok(());
    }
    Err(Error::invalid(
        Reason::InvalidInput,
        format!(
            "the default worker is Pi with conductor's extension, which is not installed for {}: \
             run `conductor integrate pi --project {}` (or `conductor integrate pi --user`), or pass --agent-cmd",
            s.project_dir, s.project_dir
        ),
    ))
}
