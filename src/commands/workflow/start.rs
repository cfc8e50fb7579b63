//! `conductor workflow start TEMPLATE "TASK"`: a new session in the template's initial state.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::store::Lock;
use conductor::workflows::session::SessionRules;
use conductor::workflows::{self, Session, Sessions, event, persona, rules, template};

/// Damage-control's rules file, used when the template names none.
pub const DEFAULT_RULES: &str = ".pi/damage-control-rules.yaml";

/// Start a workflow session.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "TEMPLATE is a name (NAME.json in the project's .conductor/workflows/, \
then in the home's workflows/) or a path to a .json file. The template is checked (see `workflow \
validate`), every state's persona is resolved (agent files in .claude/agents/ or .pi/agents/ must \
parse), and the safety rules are parsed: the template's `rules` file, else \
.pi/damage-control-rules.yaml when it exists. Any problem is an error (exit 2) and nothing is written.\n\n\
Example:\n  conductor workflow start feature \"Add rate limiting to the API\"\n  \
conductor workflow run wf-1a2b3c --agent-cmd 'claude -p --allowedTools \"Bash(conductor workflow:*)\" --append-system-prompt-file {system_file}'"
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

fn expand(p: &str, base: &Path) -> PathBuf {
    let p = match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => PathBuf::from(p),
    };
    base.join(p)
}

/// Parse the session's rules file; a file that does not parse is an error, not an empty set.
pub fn load_rules(t: &template::Template, project: &Path) -> Result<Option<SessionRules>> {
    let (path, named) = match &t.rules {
        Some(r) => (expand(r, project), true),
        None => (project.join(DEFAULT_RULES), false),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(e) => {
            return Err(Error::invalid(
                Reason::InvalidRules,
                format!("cannot read the rules file `{}`: {e}", path.display()),
            ));
        }
    };
    let parsed = rules::parse(&text).map_err(|e| {
        Error::invalid(
            Reason::InvalidRules,
            format!("the rules file `{}` does not parse: {e}", path.display()),
        )
    })?;
    Ok(Some(SessionRules {
        file: path.display().to_string(),
        rules: parsed,
    }))
}

/// Run `workflow start`.
pub fn run(ctx: &Ctx, args: StartArgs) -> Result<u8> {
    let project = crate::commands::start::working_directory(args.dir.as_deref())?;
    let pdir = Path::new(&project);
    if args.task.trim().is_empty() {
        return Err(Error::invalid(Reason::InvalidInput, "the task is empty"));
    }
    let path = template::find(&args.template, pdir, ctx.store.home().dir())?;
    let t = template::load(&path)?;
    for def in t.states.values() {
        persona::resolve(&def.persona, pdir)?;
    }
    let rules = load_rules(&t, pdir)?;
    let id = format!("wf-{}", conductor::host::random_hex6());
    let now = ctx.now;
    let s = Session::new(
        id.clone(),
        t,
        path.display().to_string(),
        args.task.clone(),
        project.clone(),
        rules,
        now,
    );
    let initial = s.template.initial.clone();
    let name = s.template.name.clone();
    let rules_file = s.rules.as_ref().map(|r| r.file.clone());
    ctx.store.transaction(now, &[Lock::Workflows], |tx| {
        let mut doc: Sessions = tx.read()?;
        tx.event(workflows::event(
            event::STARTED,
            &s,
            json!({"template": name, "task": s.task, "initial": initial}),
        ));
        doc.sessions.push(s.clone());
        doc.updated_at = now;
        tx.write(&doc)
    })?;
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
