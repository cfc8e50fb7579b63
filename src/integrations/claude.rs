//! Claude Code: hooks in `.claude/settings.json` (the plugin's `hooks.json`, merged), the
//! `/conductor` command in `.claude/commands/conductor.md`, and the MCP server in `.mcp.json`
//! (`--user`: `~/.claude.json`).

use std::path::{Path, PathBuf};

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, Scope};
use crate::error::Result;
use crate::hooks::Agent;

/// The `/conductor` command file, as shipped in the Claude Code plugin.
pub const COMMAND_MD: &str = include_str!("../../shell/claude/commands/conductor.md");
/// The Claude Code plugin's hooks, merged into settings.json.
pub const HOOKS: &str = include_str!("../../shell/claude/hooks/hooks.json");

/// Where and how Claude Code keeps its hooks.
pub const TARGET: Target = Target {
    agent: Agent::Claude,
    dir: ".claude",
    file: "settings.json",
    flat: false,
    template: HOOKS,
    command_file: Some(COMMAND_MD),
};

/// The agent's directory: `.claude` under the project or the user's home.
pub fn dir(scope: &Scope) -> PathBuf {
    scope.root.join(TARGET.dir)
}

/// Where the MCP server is registered: `.mcp.json`, or `~/.claude.json` (0600: it holds the user's secrets).
pub fn mcp_target(root: &Path, user: bool) -> McpTarget {
    let rel = if user { ".claude.json" } else { ".mcp.json" };
    McpTarget::servers(Agent::Claude, root.join(rel), 0o600)
}

/// Install the hooks and the `/conductor` command, then register the MCP server.
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
