//! Which version of an agent is at work: the `version` of its npm package, found from the
//! program's path. A hook finds the agent among its ancestor processes (the agent runs the hook's
//! command); `integrate` and `doctor` find the one on PATH. An upgrade is then seen, so a session
//! of a version the live check never saw shows as unverified.

use std::path::{Path, PathBuf};

use super::Agent;

/// The npm packages an agent is installed from (Pi moved to a new package with 1.6).
pub fn packages(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::Claude => &["@anthropic-ai/claude-code"],
        Agent::Codex => &["@openai/codex"],
        Agent::Gemini => &["@google/gemini-cli"],
        Agent::Opencode => &["opencode-ai"],
        Agent::Pi => &[
            "@earendil-works/pi-coding-agent",
            "@mariozechner/pi-coding-agent",
        ],
        Agent::Qwen => &["@qwen-code/qwen-code"],
        Agent::Copilot => &["@github/copilot"],
        Agent::Cursor => &[],
    }
}

/// The version of `agent`'s package holding `path` (a program or script inside it).
pub fn of_path(agent: Agent, path: &Path) -> Option<String> {
    let names = packages(agent);
    if names.is_empty() {
        return None;
    }
    let path = std::fs::canonicalize(path).ok()?;
    // The outermost match: a platform package nested inside the agent's may share its name
    // (Codex's binary is in `@openai/codex` at version `0.169.0-linux-x64`).
    let mut found = None;
    for dir in path.ancestors().skip(1).take(8) {
        let Ok(bytes) = std::fs::read(dir.join("package.json")) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        if v["name"].as_str().is_some_and(|n| names.contains(&n)) {
            found = v["version"].as_str().map(str::to_string).or(found);
        }
    }
    found
}

/// The version of `agent` running this process: the first ancestor whose executable or script
/// lies in one of the agent's packages (read from `/proc`; `None` where it is missing).
pub fn running(agent: Agent) -> Option<String> {
    if packages(agent).is_empty() {
        return None;
    }
    // An extension running inside the agent knows better (Pi renames its process).
    if let Some(v) = std::env::var("CONDUCTOR_AGENT_VERSION")
        .ok()
        .filter(|v| !v.is_empty() && v.len() <= 64 && !v.contains(char::is_control))
    {
        return Some(v);
    }
    // Copilot CLI runs its hooks with its version in the environment.
    if agent == Agent::Copilot
        && let Some(v) = std::env::var("COPILOT_CLI_BINARY_VERSION")
            .ok()
            .filter(|v| !v.is_empty() && v.len() <= 64 && !v.contains(char::is_control))
    {
        return Some(v);
    }
    crate::host::ancestors()
        .into_iter()
        .take(8)
        .find_map(|pid| of_process(agent, pid))
}

/// The version of `agent` that process `pid` runs, when its executable or script lies in one of
/// the agent's packages.
pub fn of_process(agent: Agent, pid: u32) -> Option<String> {
    program_paths(pid)
        .into_iter()
        .find_map(|p| of_path(agent, &p))
}

/// The version of `agent` that `program` on PATH runs (what `integrate` checks).
pub fn installed(agent: Agent, program: &str) -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .and_then(|p| of_path(agent, &p))
}

/// A process's executable and the absolute paths among its first arguments (a script run by
/// `node`, say).
fn program_paths(pid: u32) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_link(format!("/proc/{pid}/exe"))
        .into_iter()
        .collect();
    if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
        out.extend(
            cmdline
                .split(|b| *b == 0)
                .skip(1)
                .take(3)
                .map(|a| PathBuf::from(String::from_utf8_lossy(a).into_owned()))
                .filter(|p| p.is_absolute()),
        );
    }
    out
}
