//! OpenCode: conductor's plugin (`.opencode/plugins/conductor.js`, or
//! `$XDG_CONFIG_HOME/opencode/plugins/` (default `~/.config/opencode/plugins/`) with `--user`),
//! and the MCP server in `opencode.json` (`--user`: `~/.config/opencode/opencode.json`). The
//! manifest that gives opencode.json back byte for byte sits beside the plugin directory and goes
//! on uninstall.

use std::path::{Path, PathBuf};

use super::mcp::{self, McpTarget};
use super::{Changes, Check, MANIFEST, Scope, plugin};
use crate::error::{IoContext, Result};
use crate::hooks::Agent;

/// OpenCode's plugin, as installed (with `conductor` replaced by this binary's path).
pub const PLUGIN: &str = include_str!("../../shell/opencode/conductor.js");

/// `$XDG_CONFIG_HOME`, else `~/.config` (`root` is the user's home).
fn config_dir(root: &Path) -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".config"))
}

/// Where the plugin file goes: under the project `root`, or the user's directories.
pub fn location(root: &Path, user: bool) -> PathBuf {
    if user {
        config_dir(root).join("opencode/plugins/conductor.js")
    } else {
        root.join(".opencode/plugins/conductor.js")
    }
}

/// Where the MCP server is registered.
pub fn mcp_target(root: &Path, user: bool) -> McpTarget {
    McpTarget::opencode(if user {
        config_dir(root).join("opencode/opencode.json")
    } else {
        root.join("opencode.json")
    })
}

/// The plugin's directory (`.opencode/plugins`) and the manifest beside `plugins/`.
fn paths(scope: &Scope) -> (PathBuf, PathBuf, PathBuf) {
    let plugin = location(&scope.root, scope.user);
    let dir = plugin
        .parent()
        .and_then(Path::parent)
        .expect("the plugin is in DIR/plugins/");
    let manifest = dir.join(MANIFEST);
    let shown = plugin.parent().map(Path::to_path_buf).unwrap_or_default();
    (plugin, manifest, shown)
}

/// Install the plugin, then register the MCP server.
pub fn install(scope: &Scope) -> Result<Changes> {
    let (plugin, manifest, dir) = paths(scope);
    let t = mcp_target(&scope.root, scope.user);
    mcp::check(&t)?;
    let mut changes = plugin::install(
        Agent::Opencode,
        "plugin",
        PLUGIN,
        &plugin,
        &super::program()?,
    )?;
    changes.extend(mcp::install(&t, &super::program()?, &manifest)?);
    Ok(Changes { dir, changes })
}

/// Remove the MCP server (and the manifest), then the plugin.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    let (plugin, manifest, dir) = paths(scope);
    let t = mcp_target(&scope.root, scope.user);
    let mut changes = mcp::uninstall(&t, &manifest)?;
    if crate::store::read_bytes(&manifest)?.is_some() {
        std::fs::remove_file(&manifest).ctx("remove", &manifest)?;
    }
    changes.extend(plugin::uninstall(&plugin, &scope.root)?);
    Ok(Changes { dir, changes })
}

/// `doctor`: the plugin is conductor's, so its MCP server should be registered and start.
pub fn check(root: &Path, user: bool) -> Check {
    let mut c = Check::default();
    if plugin::is_installed(&location(root, user)) {
        c.findings.push(mcp::finding(&mcp_target(root, user), user));
    }
    c
}
