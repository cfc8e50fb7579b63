//! `doctor`'s check of the external programs conductor's features run: each one found on PATH
//! or not, and what its absence turns off. Informational, like the sandbox lines: a missing
//! tool is not a problem of the home and does not change doctor's exit status.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Ctx;
use conductor::hooks::Agent;

/// One external program.
#[derive(Debug, Serialize)]
pub struct Tool {
    /// The program's name, as looked up on PATH.
    pub tool: String,
    /// Where it was found (`None`: missing).
    pub path: Option<PathBuf>,
    /// What needs it.
    pub needed_for: String,
    /// What stops working without it.
    pub missing_disables: String,
}

/// The program `name` on `PATH` (or `name` itself when it holds a slash), if executable.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| exec(p))
}

/// The program an agent command template runs: its first word (after `VAR=value` words and
/// `env`), when that is a plain word.
pub fn program_of(cmd: &str) -> Option<String> {
    cmd.split_whitespace()
        .find(|w| !(w.contains('=') && !w.starts_with('=')) && *w != "env" && *w != "exec")
        .filter(|w| !w.contains(['{', '$', '`', '(', '\'', '"']))
        .map(str::to_string)
}

fn tool(name: &str, needed_for: String, missing_disables: String) -> Tool {
    Tool {
        tool: name.to_string(),
        path: which(name),
        needed_for,
        missing_disables,
    }
}

/// Every tool a feature in use (or always available) needs. `integrated`: the agents whose
/// hooks `integrate` installed here or in ~.
pub fn check(ctx: &Ctx, integrated: &[Agent]) -> Vec<Tool> {
    let mut out = vec![
        tool(
            "bwrap",
            "the sandbox runner, queue run --runner sandbox".into(),
            "the sandbox runner: `queue run --runner sandbox` refuses to start jobs; \
             install bubblewrap (apt-get install bubblewrap)"
                .into(),
        ),
        tool(
            "jq",
            "the protocol's jq recipes, which the original plugin's hooks run".into(),
            "the jq recipes of conductor-protocol.md, so the original plugin's hooks cannot \
             claim or read status.json; conductor itself does not need jq"
                .into(),
        ),
    ];
    for agent in integrated {
        let cli = conductor::integrations::cli(*agent);
        if out.iter().any(|t| t.tool == cli) {
            continue;
        }
        out.push(tool(
            cli,
            format!("{} (its conductor hooks are installed)", agent.product()),
            format!(
                "{} itself: its hooks are installed but the agent cannot be run from this PATH",
                agent.product()
            ),
        ));
    }
    // The agent commands the queue and the workflows are set to run.
    let mut commands: BTreeSet<(String, String)> = BTreeSet::new();
    if let Ok(doc) = ctx.store.read_doc::<conductor::queue::QueueDoc>(ctx.now) {
        for j in doc.jobs.iter().filter(|j| !j.state.state.is_final()) {
            let cmd = j
                .ran_with
                .as_ref()
                .map(|r| r.agent_cmd.clone())
                .unwrap_or_else(|| conductor::queue::exec::DEFAULT_AGENT_CMD.to_string());
            commands.insert(("queue jobs".into(), cmd));
        }
    }
    if let Ok(sessions) = conductor::workflows::all_sessions(&ctx.store, ctx.now) {
        for s in sessions.iter().filter(|s| !s.status.is_finished()) {
            if let Some(c) = &s.agent_cmd {
                commands.insert(("workflow sessions".into(), c.clone()));
            }
        }
    }
    for (who, cmd) in commands {
        let Some(prog) = program_of(&cmd) else {
            continue;
        };
        if let Some(t) = out.iter_mut().find(|t| t.tool == prog) {
            if !t.needed_for.contains(&who) {
                t.needed_for
                    .push_str(&format!("; the agent command of the {who}"));
            }
            continue;
        }
        out.push(tool(
            &prog,
            format!("the agent command of the {who} (`{cmd}`)"),
            format!("the {who} that run it: each fails with spawn_failed naming `{prog}`"),
        ));
    }
    out
}

/// The text lines: `ok` or `MISSING`, the tool, and what it is for or what its absence disables.
pub fn lines(tools: &[Tool]) -> Vec<String> {
    tools
        .iter()
        .map(|t| match &t.path {
            Some(p) => format!("ok    tool {}: {} ({})", t.tool, p.display(), t.needed_for),
            None => format!(
                "MISSING tool {}: not on PATH; disables {}",
                t.tool, t.missing_disables
            ),
        })
        .collect()
}
