//! Pi: conductor's extension (`.pi/extensions/conductor.ts`, or
//! `$PI_CODING_AGENT_DIR/extensions/` (default `~/.pi/agent/extensions/`) with `--user`). Pi speaks
//! no MCP: the extension is its whole integration.

use std::path::{Path, PathBuf};

use super::{Changes, Check, Scope, plugin};
use crate::error::Result;
use crate::hooks::Agent;

/// Pi's extension, as installed (with `conductor` replaced by this binary's path).
pub const EXTENSION: &str = include_str!("../../shell/pi/conductor.ts");

/// Where the extension goes: under the project `root`, or the user's Pi directory.
pub fn location(root: &Path, user: bool) -> PathBuf {
    if user {
        std::env::var_os("PI_CODING_AGENT_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".pi/agent"))
            .join("extensions/conductor.ts")
    } else {
        root.join(".pi/extensions/conductor.ts")
    }
}

/// True when Pi loads conductor's extension in `project`: installed there or for the user.
pub fn installed_for(project: &Path) -> bool {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    std::iter::once(location(project, false))
        .chain(home.map(|h| location(&h, true)))
        .any(|p| plugin::is_installed(&p))
}

fn dir(path: &Path, scope: &Scope) -> PathBuf {
    path.parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| scope.root.clone())
}

/// Install (or update) the extension.
pub fn install(scope: &Scope) -> Result<Changes> {
    let path = location(&scope.root, scope.user);
    let changes = plugin::install(Agent::Pi, "extension", EXTENSION, &path, &super::program()?)?;
    Ok(Changes {
        dir: dir(&path, scope),
        changes,
    })
}

/// Remove the extension, and the directories it leaves empty.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    let path = location(&scope.root, scope.user);
    let changes = plugin::uninstall(&path, &scope.root)?;
    Ok(Changes {
        dir: dir(&path, scope),
        changes,
    })
}

/// `doctor`: nothing is checked of Pi's extension yet.
pub fn check(_root: &Path, _user: bool) -> Check {
    Check::default()
}
