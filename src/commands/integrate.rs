//! `conductor integrate AGENT [--project DIR | --user] [--uninstall]`: install conductor's hooks,
//! plugin files and MCP server into an agent's settings. What goes where is the integrations
//! domain's (`conductor::integrations`, one module per agent); this face parses and renders.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::Report;
use crate::output::Output;
use conductor::error::Result;
use conductor::hooks::Agent;
use conductor::integrations;

/// Install (or remove) an agent integration.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Where each agent's hooks go:\n  \
claude   .claude/settings.json (+ .claude/commands/conductor.md)\n  \
cursor   .cursor/hooks.json\n  \
codex    .codex/hooks.json (+ trust in $CODEX_HOME/config.toml)\n  \
gemini   .gemini/settings.json\n  \
qwen     .qwen/settings.json\n  \
copilot  .github/hooks/conductor.json (--user: ~/.copilot/hooks/; Copilot CLI runs them only in \
a trusted folder)\n  \
opencode .opencode/plugins/conductor.js (--user: ~/.config/opencode/plugins/)\n  \
pi       ~/.pi/agent/extensions/conductor.ts, acting in the projects of \
~/.pi/agent/conductor-projects.json (--user: in every project; Pi 1.x loads a project's \
.pi/extensions/ only once the project is trusted)\n\
under the project directory, or under ~ with --user. The MCP server (`conductor mcp`) is \
registered beside them: claude .mcp.json (--user: ~/.claude.json), cursor .cursor/mcp.json, codex \
.codex/config.toml, gemini .gemini/settings.json, qwen .qwen/settings.json, opencode opencode.json (--user: \
~/.config/opencode/opencode.json); none for copilot.\n\nExamples:\n  \
conductor integrate claude                 # this project: ./.claude/\n  \
conductor integrate codex --user           # every project: ~/.codex/hooks.json\n  \
conductor integrate cursor --uninstall     # remove exactly what was added\n\n\
In a project, hook commands run `conductor` from PATH when there is one there (the files are \
committed and must work on every teammate's machine), else this binary by its absolute path; \
with --user always by its absolute path. Run `integrate` again after moving it (`conductor \
doctor` reports which form is used, and an integration whose binary is gone).\n\n\
Last, a live check: in a throwaway conductor home (never yours), a throwaway session holds a \
canary file of the project, and the agent's own hook (the command its settings file names, or \
Pi's extension under the node Pi runs with) is driven with the agent's payload for an edit of \
it. It prints `live check: enforced`, or exactly why not (untrusted project, extension not \
loaded, wrong Node, binary moved, hook timed out). `conductor doctor` runs it for every \
integrated agent.")]
pub struct IntegrateArgs {
    /// Which agent to integrate with.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Install into DIR/.AGENT/ [default: the root of the git repository holding the current
    /// directory, else the current directory; `--project` alone: the current directory].
    #[arg(long, value_name = "DIR", conflicts_with = "user", num_args = 0..=1, default_missing_value = ".")]
    pub project: Option<PathBuf>,
    /// Install into ~/.AGENT/ (every project of this user).
    #[arg(long)]
    pub user: bool,
    /// Remove what an earlier install added.
    #[arg(long)]
    pub uninstall: bool,
    /// Codex: mark the project trusted in Codex's config.toml even when it has a
    /// `.codex/config.toml` of its own or is marked untrusted (Codex runs project hooks only in
    /// trusted projects).
    #[arg(long)]
    pub trust_project: bool,
}

/// What changed.
pub struct Integrated {
    pub agent: Agent,
    pub dir: PathBuf,
    pub changes: Vec<String>,
    /// Whether the agent will load the integration here (Pi), said after the changes.
    pub notes: Vec<String>,
    /// The live check (`integrations::live_check`), after an install.
    pub check: Option<integrations::live_check::Check>,
}

impl Report for Integrated {
    fn to_json(&self) -> Value {
        let message = if self.changes.is_empty() {
            "Nothing to change.".to_string()
        } else {
            format!("{} integration updated.", self.agent.product())
        };
        let mut v = json!({"status": "ok", "agent": self.agent.name(), "directory": self.dir.display().to_string(),
               "changes": self.changes, "message": message});
        if !self.notes.is_empty() {
            v["notes"] = json!(self.notes);
        }
        if let Some(c) = &self.check {
            v["live_check"] = json!(c);
        }
        v
    }
    fn to_text(&self) -> String {
        let mut lines = if self.changes.is_empty() {
            vec![format!("Nothing to change in {}.", self.dir.display())]
        } else {
            self.changes.clone()
        };
        lines.extend(self.notes.iter().cloned());
        lines.extend(self.check.as_ref().map(|c| c.line()));
        lines.join("\n")
    }
}

/// Run `integrate`.
pub fn run(global: &crate::cli::GlobalArgs, args: IntegrateArgs, out: &Output) -> Result<u8> {
    let from = conductor::host::current_dir().ok();
    let scope = integrations::Scope::new(args.project, args.user, args.trust_project)?;
    // Project files are committed: they name `conductor` (on PATH), not this machine's path.
    integrations::set_portable(!args.user);
    let done = if args.uninstall {
        integrations::uninstall(args.agent, &scope)?
    } else {
        integrations::install(args.agent, &scope)?
    };
    let mut changes = done.changes;
    if let Some(cwd) = from.filter(|c| !args.user && *c != scope.root && !changes.is_empty()) {
        changes.insert(
            0,
            format!(
                "Installed at the repository root {} (run from {}; --project . installs here instead)",
                scope.root.display(),
                cwd.display()
            ),
        );
    }
    if !args.uninstall && !changes.is_empty() {
        changes.push(match integrations::program()? {
            p if p == "conductor" => "The hooks run `conductor` from PATH: the files can be committed for the whole team.".to_string(),
            p => format!("The hooks run {p}{}", if args.user { "" } else { " (no `conductor` on PATH: this machine's path; install conductor on PATH and run integrate again before committing these files)" }),
        });
    }
    let (notes, check) = if args.uninstall {
        (Vec::new(), None)
    } else {
        integrations::verify(args.agent, &scope)?
    };
    if let Some(c) = &check {
        // Kept in the home, so status, top and the dashboard can say whether each session of
        // this agent version is enforced.
        if let Err(e) = record_verdict(global, args.agent, &scope, c) {
            out.warn(&format!(
                "the live check's verdict could not be kept in the home ({e}); sessions show as unverified"
            ));
        }
    }
    super::print(
        out,
        &Integrated {
            agent: args.agent,
            dir: done.dir,
            changes,
            notes,
            check,
        },
    )
}

/// Keep the live check's verdict for `agent` at the version on PATH.
fn record_verdict(
    global: &crate::cli::GlobalArgs,
    agent: Agent,
    scope: &integrations::Scope,
    c: &integrations::live_check::Check,
) -> Result<()> {
    let timeout = std::time::Duration::from_secs_f64(global.lock_timeout);
    let store = conductor::hooks::respond::open_store(global.home.as_deref(), timeout)?;
    integrations::verdicts::record_check(&store, conductor::time::Timestamp::now(), agent, scope, c)
}
