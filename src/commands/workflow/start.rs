//! `conductor workflow start TEMPLATE "TASK"`: a new session in the template's initial state.

use std::path::PathBuf;

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Result;
use conductor::workflows;

/// Start a workflow session.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = concat!("TEMPLATE is a name (NAME.json in the project's .conductor/workflows/, \
then in the home's workflows/) or a path to a .json file. The template is checked (see `workflow \
validate`), every state's persona is resolved (agent files in .claude/agents/ or .pi/agents/ must \
parse), and the safety rules are parsed: the template's `rules` file, else \
.pi/damage-control-rules.yaml when it exists. Any problem is an error (exit 2) and nothing is written.\n\n\
Example:\n  conductor workflow start feature \"Add rate limiting to the API\"\n  \
conductor integrate claude\n  ",
        super::claude_worker_example!()
    )
)]
pub struct StartArgs {
    /// The template: a name or a path.
    pub template: String,
    /// What the workflow is for; every worker sees it.
    pub task: String,
    /// The project directory the workers run in [default: the current directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

/// Run `workflow start`.
pub fn run(ctx: &Ctx, args: StartArgs) -> Result<u8> {
    let project = crate::commands::start::working_directory(args.dir.as_deref())?;
    let req = workflows::service::StartRequest {
        template: args.template,
        task: args.task,
        project,
    };
    let workflows::service::Started {
        session: id,
        template: name,
        state: initial,
        rules_file,
    } = workflows::service::start(&ctx.store, ctx.now, &req)?;
    let mut text = format!("Started workflow session {id} ({name}) in state `{initial}`.");
    if let Some(f) = &rules_file {
        text.push_str(&format!("\nSafety rules: {f}"));
    }
    text.push_str(&format!(
        "\nNext: conductor workflow run {id} --agent-cmd 'claude -p --allowedTools \"Bash(conductor workflow:*)\" --append-system-prompt-file {{system_file}}'"
    ));
    emit(
        ctx,
        json!({"status": "ok", "session": id, "template": name, "state": initial,
               "rules_file": rules_file,
               "message": format!("Started. Drive it with `conductor workflow run {id} --agent-cmd CMD`.")}),
        text,
        0,
    )
}
