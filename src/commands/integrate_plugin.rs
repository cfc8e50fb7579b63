//! `conductor integrate opencode|pi`: these agents take no hook commands but load JS/TS modules
//! from a directory, so conductor installs one file of its own there: OpenCode's plugin
//! (`.opencode/plugins/conductor.js`, or `~/.config/opencode/plugins/` with --user) and Pi's
//! extension (`.pi/extensions/conductor.ts`, or `~/.pi/agent/extensions/` with --user). The file
//! names this binary by its absolute path (one line, `const CONDUCTOR = "...";`) and starts with a
//! marker line; `--uninstall` removes only a file with that marker, and the directories conductor
//! created if they are left empty.

use std::path::{Path, PathBuf};

use super::integrate::write_atomic;
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::hooks::Agent;

/// OpenCode's plugin, as installed (with `conductor` replaced by this binary's path).
pub const OPENCODE_PLUGIN: &str = include_str!("../../shell/opencode/conductor.js");
/// Pi's extension, as installed.
pub const PI_EXTENSION: &str = include_str!("../../shell/pi/conductor.ts");
/// The first line of every file conductor installs this way.
const MARKER: &str = "// conductor-integration:";
const PROGRAM_LINE: &str = "const CONDUCTOR = ";

/// True for the agents that get a plugin file.
pub fn is_plugin_agent(agent: Agent) -> bool {
    matches!(agent, Agent::Opencode | Agent::Pi)
}

/// Where the plugin file goes: under the project `root`, or the user's directories.
pub fn location(agent: Agent, root: &Path, user: bool) -> PathBuf {
    let env_dir = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    match (agent, user) {
        (Agent::Opencode, false) => root.join(".opencode/plugins/conductor.js"),
        (Agent::Opencode, true) => env_dir("XDG_CONFIG_HOME")
            .unwrap_or_else(|| root.join(".config"))
            .join("opencode/plugins/conductor.js"),
        (_, false) => root.join(".pi/extensions/conductor.ts"),
        (_, true) => env_dir("PI_CODING_AGENT_DIR")
            .unwrap_or_else(|| root.join(".pi/agent"))
            .join("extensions/conductor.ts"),
    }
}

/// The file's text with `program` as the conductor it runs.
pub fn render(agent: Agent, program: &str) -> String {
    let template = if agent == Agent::Opencode {
        OPENCODE_PLUGIN
    } else {
        PI_EXTENSION
    };
    let quoted = serde_json::to_string(program).expect("strings serialize");
    template.replacen(
        &format!("{PROGRAM_LINE}\"conductor\";"),
        &format!("{PROGRAM_LINE}{quoted};"),
        1,
    )
}

/// The conductor an installed file runs, when it is conductor's file.
pub fn installed_program(text: &str) -> Option<String> {
    if !text.starts_with(MARKER) {
        return None;
    }
    let line = text.lines().find(|l| l.starts_with(PROGRAM_LINE))?;
    let v = line[PROGRAM_LINE.len()..].trim().trim_end_matches(';');
    serde_json::from_str(v).ok()
}

/// True when `path` is conductor's file (installed by `integrate`).
pub fn is_installed(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| installed_program(&t).is_some())
}

/// Install (or update) the file.
pub fn install(agent: Agent, path: &Path, program: &str) -> Result<Vec<String>> {
    let want = render(agent, program);
    match conductor::store::read_bytes(path)? {
        Some(b) if b == want.as_bytes() => return Ok(Vec::new()),
        Some(b) if installed_program(&String::from_utf8_lossy(&b)).is_none() => {
            return Err(Error::invalid(
                Reason::FileExists,
                format!(
                    "{} exists and was not installed by conductor; move it away and retry",
                    path.display()
                ),
            ));
        }
        _ => {}
    }
    write_atomic(path, want.as_bytes(), 0o644, Some(path))?;
    Ok(vec![format!(
        "{}: installed the {} {} running `{program} hook {}`",
        path.display(),
        agent.product(),
        if agent == Agent::Opencode {
            "plugin"
        } else {
            "extension"
        },
        agent.name()
    )])
}

/// Remove conductor's file, and the directories up to `stop` that it leaves empty.
pub fn uninstall(path: &Path, stop: &Path) -> Result<Vec<String>> {
    let Some(b) = conductor::store::read_bytes(path)? else {
        return Ok(Vec::new());
    };
    if installed_program(&String::from_utf8_lossy(&b)).is_none() {
        return Ok(vec![format!(
            "{}: left in place (not conductor's file)",
            path.display()
        )]);
    }
    std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))?;
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == stop || !d.starts_with(stop) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(vec![format!("{}: removed", path.display())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_line_round_trips() {
        for a in [Agent::Opencode, Agent::Pi] {
            let t = render(a, "/opt/my \"tools\"/conductor");
            assert_eq!(
                installed_program(&t).as_deref(),
                Some("/opt/my \"tools\"/conductor")
            );
            assert_eq!(
                installed_program(&render(a, "conductor")).as_deref(),
                Some("conductor")
            );
        }
        assert!(installed_program("const CONDUCTOR = \"x\";").is_none());
    }
}
