//! `conductor start "TASK" --project NAME --priority P1|P2|P3`: register an instance.

use std::path::PathBuf;

use serde_json::json;

use super::{Ctx, Report};
use conductor::error::Result;
use conductor::protocol::request::StartRequest;
use conductor::protocol::sessions::{self, StartOutcome};
use conductor::protocol::{Priority, Source};

/// Register a task.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Example:\n  conductor start \"Fix auth bug\" --project pitchello --priority P1\n  export CONDUCTOR_INSTANCE_ID=itm-a1b2c3   # the id it printed"
)]
pub struct StartArgs {
    /// What this session is going to do.
    pub task: String,
    /// Project name [default: the name of the git repository holding the working directory,
    /// else the working directory's name].
    #[arg(long)]
    pub project: Option<String>,
    /// Task priority; non-P1 work may be blocked by the sprint focus or north stars.
    #[arg(long, value_enum, default_value = "P2")]
    pub priority: Priority,
    /// Proceed even if the priority gate blocks, recording this justification and a drift warning.
    #[arg(long = "override", value_name = "WHY")]
    pub override_reason: Option<String>,
    /// Where the session runs [default: detected from CURSOR_SESSION, VSCODE_GIT_IPC_HANDLE,
    /// TERM_PROGRAM=iTerm.app, CLAUDE_COWORK_SESSION, else web].
    #[arg(long, value_enum)]
    pub source: Option<Source>,
    /// The project directory; relative claims resolve against it [default: current directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// The long-lived process this session belongs to (a shell's $$); when it exits on this host,
    /// `cleanup` reaps the instance without waiting for the heartbeat to expire.
    #[arg(long, env = "CONDUCTOR_OWNER_PID", value_name = "PID")]
    pub owner_pid: Option<u32>,
    /// Work in a new git worktree on a new branch NAME [default NAME: session-<6 hex>], made
    /// beside the repository in `<main checkout>.worktrees/NAME`; `done` removes it once its
    /// branch is merged or has no changes.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub worktree: Option<String>,
}

impl StartArgs {
    /// The request these arguments make, and `--worktree` (`Some(None)`: a generated name).
    pub fn into_parts(mut self) -> Result<(StartRequest, Option<Option<String>>)> {
        let worktree = self.worktree.take().map(|n| (!n.is_empty()).then_some(n));
        Ok((self.into_request()?, worktree))
    }

    /// The request these arguments make.
    pub fn into_request(self) -> Result<StartRequest> {
        let dir = working_directory(self.dir.as_deref())?;
        let project = self.project.unwrap_or_else(|| sessions::project_of(&dir));
        Ok(StartRequest {
            task: self.task,
            project,
            priority: self.priority,
            working_directory: Some(dir),
            override_reason: self.override_reason,
            source: self.source,
            owner_pid: self.owner_pid,
            session_id: None,
        })
    }
}

pub use conductor::protocol::sessions::{gate_inputs, working_directory};

/// The spec's success output.
pub struct Started {
    pub instance_id: String,
    pub drift: Option<String>,
    /// The worktree `--worktree` made, the session's working directory.
    pub worktree: Option<sessions::MadeWorktree>,
    /// Run by the shell integration (`conductor shell-init`), which sets CONDUCTOR_OWNER_PID and
    /// exports CONDUCTOR_INSTANCE_ID itself.
    pub in_shell: bool,
}

impl Report for Started {
    fn to_json(&self) -> serde_json::Value {
        let mut v = json!({"status": "ok", "instance_id": self.instance_id,
               "message": "Registered. Use /conductor claim to lock files before editing."});
        if let Some(w) = &self.worktree {
            v["worktree"] = json!(w.path);
            v["branch"] = json!(w.branch);
        }
        v
    }
    fn to_text(&self) -> String {
        let mut s = format!("Registered as {}\n", self.instance_id);
        if let Some(w) = &self.worktree {
            s.push_str(&format!(
                "Working in the new worktree {} (branch {}): cd {}\n",
                w.path,
                w.branch,
                conductor::template::shell_quote(&w.path)
            ));
        }
        if let Some(d) = &self.drift {
            s.push_str(&format!("Drift warning recorded: {d}\n"));
        }
        let id = &self.instance_id;
        if self.in_shell {
            s.push_str(&format!(
                "CONDUCTOR_INSTANCE_ID={id} is set in this shell.\n\
                 Next: `conductor claim FILE...` before editing a file, `conductor done` when finished"
            ));
        } else {
            s.push_str(&format!(
                "Next: `conductor claim --instance {id} FILE...` before editing a file,\n\
                 `conductor done --instance {id}` when finished (or `export CONDUCTOR_INSTANCE_ID={id}`\n\
                 and leave out --instance; the shell integration, `conductor shell-init`, does that)"
            ));
        }
        s
    }
}

/// The spec's `blocked` output (exit 4).
pub struct Blocked {
    pub message: String,
    pub options: Vec<String>,
}

impl Report for Blocked {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "blocked", "reason": "priority_gate", "message": self.message, "options": self.options})
    }
    fn to_text(&self) -> String {
        let mut s = format!("BLOCKED by the priority gate: {}\nOptions:", self.message);
        for o in &self.options {
            s.push_str(&format!("\n  - {o}"));
        }
        s
    }
    fn exit_code(&self) -> u8 {
        4
    }
}

/// Run `start`.
pub fn execute(ctx: &Ctx, req: StartRequest) -> Result<Box<dyn Report>> {
    execute_in(ctx, req, None)
}

/// Run `start`, in a new worktree when `worktree` is given.
pub fn execute_in(
    ctx: &Ctx,
    req: StartRequest,
    worktree: Option<Option<String>>,
) -> Result<Box<dyn Report>> {
    let (outcome, made) = sessions::start_in(
        &ctx.store,
        ctx.now,
        req,
        worktree.as_ref().map(|n| n.as_deref()),
    )?;
    if matches!(outcome, StartOutcome::Started { .. }) {
        crate::face::watch_edits(&ctx.store, ctx.out);
    }
    Ok(match outcome {
        StartOutcome::Started { instance_id, drift } => Box::new(Started {
            instance_id,
            drift,
            worktree: made,
            in_shell: std::env::var_os("CONDUCTOR_OWNER_PID").is_some_and(|p| !p.is_empty()),
        }),
        StartOutcome::Blocked { message, options } => Box::new(Blocked { message, options }),
    })
}
