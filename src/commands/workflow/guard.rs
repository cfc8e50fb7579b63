//! `conductor workflow guard --bash CMD | --read PATH | --edit PATH`: check one tool call
//! against the session's safety rules, as an agent hook would.

use serde_json::json;

use super::{Ctx, WorkerArgs, emit};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::workflows::{self, rules::Decision, rules::ToolCall};

/// Check a tool call against the session's rules.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The rules are the session's damage-control rules, parsed at `workflow \
start`. Every call is checkpointed in the session's ledger; an interception (deny or ask) also \
makes a workflow.intercepted event. A session without rules allows everything.\n\nExit 0 allow, 3 ask the person, 4 deny (the reason is printed)."
)]
pub struct GuardArgs {
    /// A shell command.
    #[arg(long, value_name = "CMD", group = "call")]
    pub bash: Option<String>,
    /// A path to be read.
    #[arg(long, value_name = "PATH", group = "call")]
    pub read: Option<String>,
    /// A path to be written or edited.
    #[arg(long, value_name = "PATH", group = "call")]
    pub edit: Option<String>,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// Run `workflow guard`.
pub fn run(ctx: &Ctx, args: GuardArgs) -> Result<u8> {
    let call = match (args.bash, args.read, args.edit) {
        (Some(command), _, _) => ToolCall::Bash { command },
        (_, Some(path), _) => ToolCall::Read { path },
        (_, _, Some(path)) => ToolCall::Edit { path },
        _ => {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "give one of --bash, --read or --edit",
            ));
        }
    };
    let id = args.worker.session_id(ctx)?;
    let d = workflows::guard(&ctx.store, ctx.now, &id, &call, &ctx.cwd()?, true)?;
    let (word, code, reason) = match &d {
        Decision::Allow => ("allow", 0, None),
        Decision::Ask(r) => ("ask", 3, Some(r.clone())),
        Decision::Deny(r) => ("deny", 4, Some(r.clone())),
    };
    let text = match &reason {
        Some(r) => format!("{}: {r}", word.to_uppercase()),
        None => "allow".into(),
    };
    emit(
        ctx,
        json!({"status": "ok", "decision": word, "reason": reason, "session": id}),
        text,
        code,
    )
}
