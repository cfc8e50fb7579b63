//! Qwen Code: hooks and the MCP server, both in `.qwen/settings.json` (the same under ~ with
//! `--user`). The hooks document is Claude Code's shape (`hooks.EVENT` groups of commands, timeouts
//! in seconds) in Gemini CLI's place, and the MCP server goes under `mcpServers` as in Gemini CLI.
//! Qwen Code runs a project's hooks only in a trusted folder; folder trust is off unless
//! `security.folderTrust.enabled` is set, and `doctor` says when it is on and the project is not
//! trusted.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, Scope};
use crate::error::Result;
use crate::health::Finding;
use crate::hooks::Agent;

/// Qwen Code's settings.json hooks.
pub const HOOKS: &str = include_str!("../../shell/qwen/settings.json");

/// Where and how Qwen Code keeps its hooks.
pub const TARGET: Target = Target {
    agent: Agent::Qwen,
    dir: ".qwen",
    file: "settings.json",
    flat: false,
    template: HOOKS,
    command_file: None,
};

/// The agent's directory: `.qwen` under the project or the user's home.
pub fn dir(scope: &Scope) -> PathBuf {
    scope.root.join(TARGET.dir)
}

/// Where the MCP server is registered: `.qwen/settings.json`, beside the hooks.
pub fn mcp_target(root: &Path, _user: bool) -> McpTarget {
    McpTarget::servers(Agent::Qwen, root.join(".qwen/settings.json"), 0o644)
}

/// Install the hooks, then register the MCP server.
pub fn install(scope: &Scope) -> Result<Changes> {
    settings::install_in(&TARGET, scope, &mcp_target(&scope.root, scope.user))
}

/// Remove the MCP server, then the hooks.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    settings::uninstall_in(&TARGET, scope, &mcp_target(&scope.root, scope.user))
}

/// `doctor`: the hooks under `root`, the binary they run, the MCP server, and (for a project)
/// whether Qwen Code trusts the folder.
pub fn check(root: &Path, user: bool) -> Check {
    let path = root.join(TARGET.dir).join(TARGET.file);
    settings::check(&TARGET, &path, &mcp_target(root, user), user, |_| {
        if user {
            return Vec::new();
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        untrusted(root, home.as_deref())
            .map(|why| {
                Finding::bad(
                    path.display().to_string(),
                    format!("Qwen Code skips this project's hooks: {why}"),
                    "trust the folder when Qwen Code asks (or in ~/.qwen/trustedFolders.json), \
                     or run `conductor integrate qwen --user`",
                )
            })
            .into_iter()
            .collect()
    })
}

/// Why Qwen Code would not run the hooks of `project` (folder trust on and the project not
/// trusted), if it would not. Read from `~/.qwen/settings.json` and `~/.qwen/trustedFolders.json`
/// as Qwen Code 0.24 keeps them.
pub fn untrusted(project: &Path, home: Option<&Path>) -> Option<String> {
    let home = home?;
    let read = |f: &str| -> Option<Value> {
        serde_json::from_slice(&std::fs::read(home.join(".qwen").join(f)).ok()?).ok()
    };
    let on = read("settings.json")
        .and_then(|s| s["security"]["folderTrust"]["enabled"].as_bool())
        .unwrap_or(false);
    if !on {
        return None;
    }
    let rules = read("trustedFolders.json").unwrap_or(Value::Null);
    let rules = rules.as_object().cloned().unwrap_or_default();
    // The deepest rule covering the project decides, "untrusted" on a tie (TRUST_PARENT trusts
    // the listed folder's parent and everything below it).
    let mut best: Option<(usize, bool)> = None;
    for (dir, rule) in &rules {
        let (root, trusted) = match rule.as_str() {
            Some("TRUST_FOLDER") => (Path::new(dir), true),
            Some("TRUST_PARENT") => (Path::new(dir).parent().unwrap_or(Path::new(dir)), true),
            Some("DO_NOT_TRUST") => (Path::new(dir), false),
            _ => continue,
        };
        if !project.starts_with(root) {
            continue;
        }
        let depth = root.components().count();
        if best.is_none_or(|(d, t)| depth > d || (depth == d && t && !trusted)) {
            best = Some((depth, trusted));
        }
    }
    match best {
        Some((_, true)) => None,
        Some((_, false)) => Some(format!(
            "~/.qwen/trustedFolders.json marks {} untrusted",
            project.display()
        )),
        None => Some(format!(
            "folder trust is on (~/.qwen/settings.json) and {} is not a trusted folder",
            project.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_trust() {
        let h = tempfile::tempdir().unwrap();
        let q = h.path().join(".qwen");
        std::fs::create_dir_all(&q).unwrap();
        let p = Path::new("/w/proj");
        assert_eq!(
            untrusted(p, Some(h.path())),
            None,
            "no settings: trust is off"
        );
        std::fs::write(
            q.join("settings.json"),
            r#"{"security":{"folderTrust":{"enabled":true}}}"#,
        )
        .unwrap();
        assert!(
            untrusted(p, Some(h.path()))
                .unwrap()
                .contains("not a trusted folder")
        );
        std::fs::write(
            q.join("trustedFolders.json"),
            r#"{"/w/proj":"TRUST_FOLDER"}"#,
        )
        .unwrap();
        assert_eq!(untrusted(p, Some(h.path())), None);
        std::fs::write(
            q.join("trustedFolders.json"),
            r#"{"/w/x":"TRUST_PARENT","/w/proj":"DO_NOT_TRUST"}"#,
        )
        .unwrap();
        assert!(untrusted(p, Some(h.path())).unwrap().contains("untrusted"));
    }
}
