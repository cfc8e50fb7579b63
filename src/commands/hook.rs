//! `conductor hook AGENT`: the hook every supported coding agent runs. Reads one hook payload
//! from stdin, asks [`hooks::respond`] (payload in, response out), and prints the answer in the
//! agent's own output format. Any failure of conductor itself lets the agent go on and says so to
//! the person and the model: the hook never blocks because of its own bug, and never fails
//! silently.
//!
//! Speed: a tool call reads `config.json` and `status.json` without the lock (and without schema
//! validation) and decides; only claiming a free file, registering, a heartbeat older than five
//! minutes, or the end of a session takes the lock.

use std::io::{Read, Write};

use crate::cli::GlobalArgs;
use crate::output::Output;
use conductor::config::Config;
use conductor::error::Result;
use conductor::hooks::respond::{self, Response, Setting};
use conductor::hooks::{self, Agent, worktree::Removed};
use conductor::protocol::ops::Admission;
use conductor::store::Store;
use conductor::time::Timestamp;

/// Run as an agent hook.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The agent runs this from its hooks (set them up with `conductor integrate AGENT`); \
it reads one hook payload from stdin and answers in that agent's hook output format.\n\
  session start        registers an instance for the session (agent recorded in `agent`), or reuses it on resume, \
and tells the model who else holds which files in this project\n\
  before an edit       Claude Code Edit/Write/MultiEdit/NotebookEdit, Cursor preToolUse, Codex apply_patch (every \
file of the patch), Gemini write_file/replace, Qwen Code edit/write_file, Copilot CLI Edit/Write: refused when another live instance holds a file; otherwise `enforce` \
in config.json decides (auto-claim, block-foreign, require-claim, block-overlap, off; require-verified is auto-claim, but a \
session whose agent failed its live check here may not claim). Files outside the session's \
directory are never claimed. A holder that looks gone, or require-claim, is left to a person (ask; agents without ask \
refuse). A file another live git worktree of the repository changed (its branch's commits or uncommitted changes) is \
named to the model with that worktree, its branch and its sessions; block-overlap refuses it\n\
  after an edit        Cursor afterFileEdit: claims the file after the fact (Cursor cannot refuse there)\n\
  prompt, stop, tool   heartbeat (at most every 5 minutes), so an idle session keeps its claims until \
default_max_age_minutes (60) pass without any hook event\n\
  shell command        Claude Code/Codex/Copilot CLI Bash, Gemini/Qwen Code run_shell_command, Cursor beforeShellExecution: the files \
the command writes (parsed as bash: redirections, sed -i, tee, cp, mv, rm, git checkout -- PATH, patch, git apply) \
are decided as for an edit\n\
  session end          releases the session's claims, recorded as done (abandoned); an instance adopted from \
CONDUCTOR_INSTANCE_ID is left to whoever registered it\n\
  worktree create      Claude Code WorktreeCreate (`claude --worktree NAME`): creates the worktree with git at \
.claude/worktrees/NAME on the branch worktree-NAME, registers the session there and prints the path alone; an \
error (not a repository, the branch exists, ...) is `error:` and `hint:` lines and a non-zero exit\n\
  worktree remove      Claude Code WorktreeRemove: removes the worktree and its branch only when no uncommitted \
change, no commit missing from every other branch and no other live session's work would be lost; otherwise keeps it, says why, and exits 2\n\
On an internal error the agent goes on, and the person and the model are told that coordination is off."
)]
pub struct HookArgs {
    /// Which agent's hook format stdin is in.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Set by the Claude Code plugin's hooks: step aside when `integrate claude` installed the
    /// same hooks in settings, so each event is handled once.
    #[arg(long, hide = true)]
    pub from_plugin: bool,
}

/// Run the hook; errors become a verdict that lets the agent go on, never an exit status.
pub fn run(global: &GlobalArgs, args: HookArgs, out: &Output) -> Result<u8> {
    let agent = args.agent;
    let mut text = String::new();
    let response = match std::io::stdin().read_to_string(&mut text) {
        Err(e) => Response::failed(&format!("could not read the hook input ({e})")),
        Ok(_) => {
            let setting = Setting {
                home: global.home.clone(),
                lock_timeout: global.lock_timeout,
                from_plugin: args.from_plugin,
                env: respond::Env::of_process(),
                admit: &admission,
            };
            respond::respond(&setting, agent, &text, Timestamp::now())
        }
    };
    let answer = match response {
        Response::Verdict { event, verdict } => agent.render(&event, &verdict),
        Response::StepAside => hooks::Answer::default(),
        Response::WorktreeCreated {
            created,
            registered,
        } => {
            match registered {
                Ok(id) => out.status(&format!(
                    "conductor: {} the worktree {} (branch {}) for {id}",
                    if created.resumed {
                        "reusing"
                    } else {
                        "created"
                    },
                    created.path.display(),
                    created.branch,
                )),
                Err(e) => out.warn(&format!(
                    "the worktree {} was created but the session was not registered yet: {e}",
                    created.path.display()
                )),
            }
            // Claude Code reads the worktree's path alone on stdout.
            hooks::Answer {
                stdout: created.path.display().to_string(),
                ..hooks::Answer::default()
            }
        }
        Response::WorktreeRemoved { path, removed } => {
            let shown = path.display();
            out.status(&match removed {
                Removed::Removed { branch } => format!(
                    "conductor: removed the worktree {shown}{}",
                    branch
                        .map(|b| format!(" and its branch {b}"))
                        .unwrap_or_default()
                ),
                Removed::Gone => format!("conductor: {shown} is gone already"),
            });
            hooks::Answer::default()
        }
        // Claude Code then creates nothing, or keeps the worktree.
        Response::WorktreeFailed(e) => {
            out.error(&e);
            return Ok(e.exit_code());
        }
    };
    if !answer.stdout.is_empty() {
        let _ = writeln!(std::io::stdout().lock(), "{}", answer.stdout);
    }
    if !answer.stderr.is_empty() {
        let _ = writeln!(std::io::stderr().lock(), "{}", answer.stderr);
    }
    Ok(answer.code)
}

/// `enforce = "require-verified"`: the live checks' verdicts, which the hooks domain may not read.
fn admission<'s>(store: &'s Store, now: Timestamp, config: &Config) -> Box<dyn Admission + 's> {
    Box::new(conductor::app::admission::admission(store, now, config))
}
