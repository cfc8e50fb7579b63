//! Gemini CLI: hooks and the MCP server, both in `.gemini/settings.json` (the same under ~ with
//! `--user`).

use std::path::{Path, PathBuf};

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, Scope};
use crate::error::Result;
use crate::hooks::Agent;

/// Gemini CLI's settings.json hooks.
pub const HOOKS: &str = include_str!("../../shell/gemini/settings.json");

/// Where and how Gemini CLI keeps its hooks.
pub const TARGET: Target = Target {
    agent: Agent::Gemini,
    dir: ".gemini",
    file: "settings.json",
    flat: false,
    template: HOOKS,
    command_file: None,
};

/// The agent's directory: `.gemini` under the project or the user's home.
pub fn dir(scope: &Scope) -> PathBuf {
    scope.root.join(TARGET.dir)
}

/// Where the MCP server is registered: `.gemini/settings.json`, beside the hooks.
pub fn mcp_target(root: &Path, _user: bool) -> McpTarget {
    McpTarget::servers(Agent::Gemini, root.join(".gemini/settings.json"), 0o644)
}

/// Install the hooks, then register the MCP server.
pub fn install(scope: &Scope) -> Result<Changes> {
    settings::install_in(&TARGET, scope, &mcp_target(&scope.root, scope.user))
}

/// Remove the MCP server, then the hooks.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    settings::uninstall_in(&TARGET, scope, &mcp_target(&scope.root, scope.user))
}

/// `doctor`: the hooks under `root`, the binary they run and the MCP server.
pub fn check(root: &Path, user: bool) -> Check {
    let path = root.join(TARGET.dir).join(TARGET.file);
    settings::check(&TARGET, &path, &mcp_target(root, user), user, |_| {
        Vec::new()
    })
}
