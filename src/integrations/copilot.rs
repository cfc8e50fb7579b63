//! GitHub Copilot CLI: hooks in `.github/hooks/conductor.json`, a file of conductor's own in the
//! directory Copilot CLI loads repository hooks from (`--user`: `~/.copilot/hooks/`, or
//! `$COPILOT_HOME/hooks/`). The file spells its events as Claude Code does, so Copilot CLI reads it
//! in Claude Code's format and sends Claude Code's payloads ([`crate::hooks::copilot`]).
//!
//! Copilot CLI runs a repository's hooks only in a trusted folder: one the person trusted "for this
//! and future sessions" (kept in `trustedFolders` of `~/.copilot/config.json`), or one trusted for
//! a single run (`--trust-folder`, `COPILOT_ALLOW_ALL=true`). `doctor` and the live check say when
//! the project is not trusted for good. No MCP server is registered for Copilot CLI.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::settings::{self, Target};
use super::{Changes, Check, Scope, encode, write_atomic};
use crate::error::{Error, IoContext, Reason, Result};
use crate::health::Finding;
use crate::hooks::Agent;

/// Copilot CLI's hooks file, in Claude Code's format.
pub const HOOKS: &str = include_str!("../../shell/copilot/hooks.json");

/// The hooks file (its `dir` is the project's; with `--user` see [`dir`]).
pub const TARGET: Target = Target {
    agent: Agent::Copilot,
    dir: ".github/hooks",
    file: "conductor.json",
    flat: false,
    template: HOOKS,
    command_file: None,
};

/// Copilot CLI's own directory for the user whose home is `home`: `$COPILOT_HOME`, else
/// `~/.copilot`.
pub fn copilot_home(home: &Path) -> PathBuf {
    std::env::var_os("COPILOT_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".copilot"))
}

/// Where the hooks file goes: the project's `.github/hooks/`, or `~/.copilot/hooks/`.
pub fn dir(scope: &Scope) -> PathBuf {
    hooks_dir(&scope.root, scope.user)
}

fn hooks_dir(root: &Path, user: bool) -> PathBuf {
    if user {
        copilot_home(root).join("hooks")
    } else {
        root.join(TARGET.dir)
    }
}

/// The hooks file under `root` (the home with `user`).
pub fn hooks_file(root: &Path, user: bool) -> PathBuf {
    hooks_dir(root, user).join(TARGET.file)
}

/// True when `bytes` is a hooks file whose commands are conductor's.
fn ours(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Value>(bytes).is_ok_and(|v| {
        settings::installed_commands(&TARGET, &v)
            .iter()
            .any(|(_, c)| settings::our_program(c, Agent::Copilot).is_some())
    })
}

/// Write the hooks file (replacing an earlier conductor's; refusing anyone else's).
pub fn install(scope: &Scope) -> Result<Changes> {
    let dir = dir(scope);
    let path = dir.join(TARGET.file);
    let command = super::hook_command(Agent::Copilot)?;
    let text = HOOKS.replace(
        "\"conductor hook copilot\"",
        &serde_json::to_string(&command).expect("strings serialize"),
    );
    let v: Value = serde_json::from_str(&text).expect("the template is JSON (tested)");
    let bytes = encode(&v);
    let mut changes = Vec::new();
    match crate::store::read_bytes(&path)? {
        Some(b) if b == bytes => {}
        Some(b) if !ours(&b) => {
            return Err(Error::invalid(
                Reason::FileExists,
                format!(
                    "{} exists and was not installed by conductor; move it away and retry",
                    path.display()
                ),
            ));
        }
        old => {
            write_atomic(&path, &bytes, 0o644, None)?;
            changes.push(format!(
                "{}: {} hooks running `{command}`",
                path.display(),
                if old.is_some() {
                    "pointed the"
                } else {
                    "added"
                }
            ));
        }
    }
    Ok(Changes { dir, changes })
}

/// Remove the hooks file when it is conductor's.
pub fn uninstall(scope: &Scope) -> Result<Changes> {
    let dir = dir(scope);
    let path = dir.join(TARGET.file);
    let mut changes = Vec::new();
    match crate::store::read_bytes(&path)? {
        Some(b) if ours(&b) => {
            std::fs::remove_file(&path).ctx("remove", &path)?;
            changes.push(format!("{}: removed", path.display()));
            let _ = std::fs::remove_dir(&dir); // only if conductor left it empty
            if !scope.user {
                let _ = std::fs::remove_dir(scope.root.join(".github"));
            }
        }
        Some(_) => changes.push(format!(
            "{}: left in place (not conductor's)",
            path.display()
        )),
        None => {}
    }
    Ok(Changes { dir, changes })
}

/// `doctor`: the hooks under `root`, the binary they run, and (for a project) whether Copilot
/// CLI trusts the folder for good.
pub fn check(root: &Path, user: bool) -> Check {
    let path = hooks_file(root, user);
    let Some((_, programs)) = settings::programs(&TARGET, &path) else {
        return Check::default();
    };
    if programs.is_empty() {
        return Check::default();
    }
    let file = path.display().to_string();
    let mut findings = Vec::new();
    if !user {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if let Some(why) = untrusted(root, home.as_deref()) {
            findings.push(Finding::bad(
                file.clone(),
                format!("Copilot CLI skips this repository's hooks: {why}"),
                "trust the folder when Copilot CLI asks (\"this and future sessions\"), or add it \
                 to trustedFolders in ~/.copilot/config.json, or run `conductor integrate copilot --user`",
            ));
        }
    }
    for prog in &programs {
        let p = Path::new(prog);
        findings.push(if p.is_absolute() && !p.is_file() {
            Finding::bad(
                file.clone(),
                format!(
                    "the Copilot CLI hooks run {prog}, which does not exist: coordination is off for Copilot CLI"
                ),
                format!(
                    "run `conductor integrate copilot{}` with the conductor you use now",
                    if user { " --user" } else { "" }
                ),
            )
        } else {
            Finding::good(file.clone(), format!("Copilot CLI hooks run {prog}"))
        });
    }
    Check {
        hooks: true,
        findings,
    }
}

/// Why Copilot CLI would not run the hooks of `project` in a new session, if it would not: the
/// project is in no folder of `trustedFolders` in Copilot CLI's `config.json` (JSON with `//`
/// comment lines, as Copilot CLI 1.0 writes it). A run can still trust it once
/// (`--trust-folder`, `COPILOT_ALLOW_ALL=true`).
pub fn untrusted(project: &Path, home: Option<&Path>) -> Option<String> {
    let config = copilot_home(home?).join("config.json");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    let json: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
    let trusted = ["trustedFolders", "trusted_folders"]
        .iter()
        .filter_map(|k| v[*k].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .any(|d| project.starts_with(d));
    (!trusted).then(|| {
        format!(
            "{} is not a trusted folder (trustedFolders in {})",
            project.display(),
            config.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_folders_with_comments() {
        let h = tempfile::tempdir().unwrap();
        let p = Path::new("/w/proj/sub");
        assert!(
            untrusted(p, Some(h.path())).is_some(),
            "no config: not trusted"
        );
        std::fs::create_dir_all(h.path().join(".copilot")).unwrap();
        std::fs::write(
            h.path().join(".copilot/config.json"),
            "// managed\n{\n  \"trustedFolders\": [\"/w/proj\"]\n}\n",
        )
        .unwrap();
        if std::env::var_os("COPILOT_HOME").is_none() {
            assert_eq!(untrusted(p, Some(h.path())), None);
            assert!(untrusted(Path::new("/w/other"), Some(h.path())).is_some());
        }
    }
}
