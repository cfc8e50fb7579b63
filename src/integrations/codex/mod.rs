//! Codex CLI: hooks in `.codex/hooks.json` (`--user`: `$CODEX_HOME/hooks.json`, default
//! `~/.codex`), their trust in Codex's own config.toml ([`trust`]: Codex runs no hook it has not
//! trusted), and the MCP server as a marked table in `.codex/config.toml`.

pub mod trust;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::mcp::McpTarget;
use super::settings::{self, Target};
use super::{Changes, Check, MANIFEST, Scope, encode, mcp, write_atomic};
use crate::error::Result;
use crate::health::Finding;
use crate::hooks::Agent;

pub use trust::codex_home;

/// Codex CLI's hooks.json entries.
pub const HOOKS: &str = include_str!("../../../shell/codex/hooks.json");

/// Where and how Codex CLI keeps its hooks.
pub const TARGET: Target = Target {
    agent: Agent::Codex,
    dir: ".codex",
    file: "hooks.json",
    flat: false,
    template: HOOKS,
    command_file: None,
};

/// The hooks' directory: `.codex` under the project; Codex reads its user hooks from
/// `$CODEX_HOME` (default `~/.codex`).
pub fn dir(scope: &Scope) -> Result<PathBuf> {
    if scope.user {
        codex_home()
    } else {
        Ok(scope.root.join(TARGET.dir))
    }
}

/// Where the MCP server is registered: `.codex/config.toml` under the project or ~.
pub fn mcp_target(root: &Path, _user: bool) -> McpTarget {
    McpTarget::codex_toml(root.join(".codex/config.toml"))
}

/// The hooks and their trust, then the MCP server.
pub fn install(scope: &Scope) -> Result<Changes> {
    let dir = dir(scope)?;
    let mcp = mcp_target(&scope.root, scope.user);
    mcp::check(&mcp)?;
    let mut changes = hooks(&dir, scope, false)?;
    changes.extend(mcp::install(&mcp, &super::program()?, &dir.join(MANIFEST))?);
    Ok(Changes { dir, changes })
}

/// The MCP server, then the hooks and their trust.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    let dir = dir(scope)?;
    let mcp = mcp_target(&scope.root, scope.user);
    let mut changes = mcp::uninstall(&mcp, &dir.join(MANIFEST))?;
    changes.extend(hooks(&dir, scope, true)?);
    Ok(Changes { dir, changes })
}

/// The hooks, then their trust in Codex's config.toml (recorded in the manifest, so that
/// uninstall puts config.toml back as it was).
fn hooks(dir: &Path, scope: &Scope, uninstall: bool) -> Result<Vec<String>> {
    let t = &TARGET;
    let manifest_path = dir.join(MANIFEST);
    let read_manifest = || -> Result<Option<Value>> {
        Ok(crate::store::read_bytes(&manifest_path)?
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok()))
    };
    if uninstall {
        let record = read_manifest()?.map(|m| m["codex_trust"].clone());
        let mut changes = settings::uninstall(t, dir)?;
        if let Some(r) = record.filter(|r| !r.is_null()) {
            changes.extend(trust::uninstall(&r)?);
        }
        let _ = std::fs::remove_dir(dir); // only if conductor left it empty
        return Ok(changes);
    }
    let mut changes = settings::install(t, dir, &super::hook_command(Agent::Codex)?)?;
    let hooks_path = dir.join(t.file);
    let Some((_, doc)) = settings::read_settings(&hooks_path)? else {
        return Ok(changes);
    };
    let mut manifest = read_manifest()?.unwrap_or_else(|| {
        json!({"installed_by": format!("conductor {}", env!("CARGO_PKG_VERSION")), "agent": "codex"})
    });
    let (record, more) = trust::install(
        &hooks_path,
        &Value::Object(doc),
        scope.project(),
        scope.trust_project,
        manifest.get("codex_trust"),
    )?;
    if manifest.get("codex_trust") != Some(&record) {
        manifest["codex_trust"] = record;
        write_atomic(&manifest_path, &encode(&manifest), 0o600, None)?;
    }
    changes.extend(more);
    Ok(changes)
}

/// `doctor`: the hooks under `root` (or in `$CODEX_HOME` for the user's home), whether Codex
/// trusts them, the binary they run and the MCP server.
pub fn check(root: &Path, user: bool) -> Check {
    let home_root = user || std::env::var_os("HOME").is_some_and(|h| *root == *h);
    let path = if home_root {
        match codex_home() {
            Ok(h) => h.join(TARGET.file),
            Err(_) => return Check::default(),
        }
    } else {
        root.join(TARGET.dir).join(TARGET.file)
    };
    let project = (!home_root).then_some(root);
    settings::check(&TARGET, &path, &mcp_target(root, user), user, |v| {
        trust::problems(&path, v, project)
            .into_iter()
            .map(|(problem, fix)| {
                Finding::bad(
                    path.display().to_string(),
                    format!("{problem}: coordination is off for Codex CLI"),
                    format!("run `{fix}`"),
                )
            })
            .collect()
    })
}
