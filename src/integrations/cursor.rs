//! Cursor: hooks in `.cursor/hooks.json` (flat `{command, matcher}` entries, `version: 1`), and
//! the MCP server in `.cursor/mcp.json` (the same under ~ with `--user`).

use std::path::{Path, PathBuf};

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, Scope};
use crate::error::Result;
use crate::hooks::Agent;

/// Cursor's hooks.json entries.
pub const HOOKS: &str = include_str!("../../shell/cursor/hooks.json");

/// Where and how Cursor keeps its hooks.
pub const TARGET: Target = Target {
    agent: Agent::Cursor,
    dir: ".cursor",
    file: "hooks.json",
    flat: true,
    template: HOOKS,
    command_file: None,
};

/// The agent's directory: `.cursor` under the project or the user's home.
pub fn dir(scope: &Scope) -> PathBuf {
    scope.root.join(TARGET.dir)
}

/// Where the MCP server is registered: `.cursor/mcp.json`.
pub fn mcp_target(root: &Path, _user: bool) -> McpTarget {
    McpTarget::servers(Agent::Cursor, root.join(".cursor/mcp.json"), 0o644)
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
