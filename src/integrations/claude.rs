//! Claude Code: hooks in `.claude/settings.json` (the plugin's `hooks.json`, merged), the
//! `/conductor` command in `.claude/commands/conductor.md`, and the MCP server in `.mcp.json`
//! (`--user`: `~/.claude.json`).

use std::path::{Path, PathBuf};

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, Scope};
use crate::error::Result;
use crate::health::Finding;
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
    settings::check(&TARGET, &path, &mcp_target(root, user), user, |v| {
        vec![worktree_hooks(&path, v, user)]
    })
}

/// The events Claude Code fires when it creates or removes a session's own worktree.
pub const WORKTREE_EVENTS: [&str; 2] = ["WorktreeCreate", "WorktreeRemove"];

/// `doctor`: are the WorktreeCreate and WorktreeRemove hooks installed beside the others? An
/// integration made before conductor had them leaves `claude --worktree` to git alone: the
/// worktree gets no copy of uncommitted settings (so no hooks run there), and Claude Code
/// removes it with `git worktree remove --force`, uncommitted work and all.
fn worktree_hooks(path: &Path, settings: &serde_json::Value, user: bool) -> Finding {
    let installed = settings::installed_commands(&TARGET, settings);
    let missing: Vec<&str> = WORKTREE_EVENTS
        .iter()
        .copied()
        .filter(|e| {
            !installed
                .iter()
                .any(|(ev, c)| ev == e && settings::our_program(c, Agent::Claude).is_some())
        })
        .collect();
    let file = path.display().to_string();
    if missing.is_empty() {
        Finding::good(
            file,
            "the WorktreeCreate and WorktreeRemove hooks are installed: `claude --worktree` \
             sessions get a worktree made by conductor and are registered with it, and their \
             worktree is removed only when no work would be lost (Claude Code 2.1.197 and \
             2.1.332 were checked)",
        )
    } else {
        Finding::bad(
            file,
            format!(
                "no conductor {} hook: `claude --worktree` sessions are not registered with their \
                 worktree, which git creates without conductor's settings and Claude Code removes \
                 with `git worktree remove --force`",
                missing.join(" or ")
            ),
            format!(
                "run `conductor integrate claude{}` again",
                if user { " --user" } else { "" }
            ),
        )
    }
}
