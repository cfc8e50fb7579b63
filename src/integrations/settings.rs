//! The hooks document that Claude Code (`.claude/settings.json`), Cursor (`.cursor/hooks.json`),
//! Codex CLI (`.codex/hooks.json`), Gemini CLI (`.gemini/settings.json`) and Qwen Code
//! (`.qwen/settings.json`) share: `hooks.EVENT`
//! lists of entries naming a command. conductor's entries are merged next to whatever is there; a
//! settings file that does not parse is never touched. Hook commands name the absolute path of
//! this binary, so they do not depend on the PATH the agent runs hooks with (re-running
//! `integrate` updates them after a move). Uninstall removes exactly the entries it added, and
//! when nothing else changed in between, restores the settings file byte for byte: the original
//! bytes are kept in the manifest beside it (mode 0600: settings files can hold API keys) when
//! re-serializing would not give them back.
//!
//! What differs between the five agents is data ([`Target`], in each agent's module).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{MANIFEST, encode, mcp, write_atomic};
use crate::error::Reason;
use crate::error::{Error, IoContext, Result};
use crate::health::Finding;
use crate::hooks::Agent;

/// Where and how one agent keeps its hooks.
pub struct Target {
    pub agent: Agent,
    /// The agent's directory under the project or home (`.claude`).
    pub dir: &'static str,
    /// The settings file in it.
    pub file: &'static str,
    /// Cursor: entries are `{command, matcher}` directly; others nest `{matcher, hooks: [...]}`.
    pub flat: bool,
    /// The agent's hooks document as shipped (`shell/AGENT/...`), `conductor` as the command.
    pub template: &'static str,
    /// Claude Code: the `/conductor` command file installed beside the settings
    /// (`commands/conductor.md`), with its contents.
    pub command_file: Option<&'static str>,
}

/// The command file's path under the agent's directory.
const COMMAND_FILE: &str = "commands/conductor.md";

/// Install `t`'s hooks in its directory under the scope, then register the MCP server at
/// `mcp` (what every hooks-document agent's `install` is).
pub fn install_in(
    t: &Target,
    scope: &super::Scope,
    mcp: &mcp::McpTarget,
) -> Result<super::Changes> {
    let dir = scope.root.join(t.dir);
    let changes = install_with_mcp(t, &dir, mcp)?;
    Ok(super::Changes { dir, changes })
}

/// Remove the MCP server at `mcp`, then `t`'s hooks (every hooks-document agent's `uninstall`).
pub fn uninstall_in(
    t: &Target,
    scope: &super::Scope,
    mcp: &mcp::McpTarget,
) -> Result<super::Changes> {
    let dir = scope.root.join(t.dir);
    let changes = uninstall_with_mcp(t, &dir, mcp)?;
    Ok(super::Changes { dir, changes })
}

/// The hooks, then the MCP server (registered after the hooks and removed before them: a shared
/// settings file then gets its original bytes back from the hooks' manifest).
pub fn install_with_mcp(t: &Target, dir: &Path, mcp: &mcp::McpTarget) -> Result<Vec<String>> {
    mcp::check(mcp)?;
    let mut c = install(t, dir, &super::hook_command(t.agent)?)?;
    c.extend(mcp::install(mcp, &super::program()?, &dir.join(MANIFEST))?);
    Ok(c)
}

/// The MCP server, then the hooks.
pub fn uninstall_with_mcp(t: &Target, dir: &Path, mcp: &mcp::McpTarget) -> Result<Vec<String>> {
    let mut c = mcp::uninstall(mcp, &dir.join(MANIFEST))?;
    c.extend(uninstall(t, dir)?);
    Ok(c)
}
/// The program of a hook command (first word, shell quotes removed) and the rest.
fn split_program(cmd: &str) -> (String, &str) {
    let cmd = cmd.trim_start();
    if let Some(rest) = cmd.strip_prefix('\'') {
        let mut prog = String::new();
        let mut s = rest;
        loop {
            match s.find('\'') {
                None => return (prog + s, ""),
                Some(i) => {
                    prog.push_str(&s[..i]);
                    s = &s[i + 1..];
                    if let Some(r) = s.strip_prefix("\\''") {
                        prog.push('\'');
                        s = r;
                    } else {
                        return (prog, s);
                    }
                }
            }
        }
    }
    match cmd.split_once(char::is_whitespace) {
        Some((p, rest)) => (p.to_string(), rest),
        None => (cmd.to_string(), ""),
    }
}

/// True for a hook command conductor installed for `agent`: a program named `conductor`
/// running `hook AGENT`. Returns the program path.
pub fn our_program(cmd: &str, agent: Agent) -> Option<String> {
    let (prog, rest) = split_program(cmd);
    let mut words = rest.split_whitespace();
    let named = Path::new(&prog)
        .file_name()
        .is_some_and(|n| n == "conductor");
    (named && words.next() == Some("hook") && words.next() == Some(agent.name())).then_some(prog)
}

/// The commands of one event's entries (groups with nested hooks, or flat Cursor entries).
fn commands_mut(entry: &mut Value, flat: bool) -> Vec<&mut Value> {
    if flat {
        return entry.get_mut("command").into_iter().collect();
    }
    entry
        .get_mut("hooks")
        .and_then(Value::as_array_mut)
        .map(|hs| hs.iter_mut().filter_map(|h| h.get_mut("command")).collect())
        .unwrap_or_default()
}

/// Every hook command in an agent's settings document, with its event.
pub fn installed_commands(t: &Target, settings: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(hooks) = settings.get("hooks").and_then(Value::as_object) {
        for (event, list) in hooks {
            for entry in list.as_array().into_iter().flatten() {
                let mut e = entry.clone();
                for c in commands_mut(&mut e, t.flat) {
                    if let Some(s) = c.as_str() {
                        out.push((event.clone(), s.to_string()));
                    }
                }
            }
        }
    }
    out
}

/// Our entries for each event, with `command` set to the given command.
fn our_hooks(t: &Target, command: &str) -> Map<String, Value> {
    let mut v: Value =
        serde_json::from_str(t.template).expect("hook templates are valid JSON (tested)");
    let mut hooks = v["hooks"]
        .take()
        .as_object()
        .cloned()
        .expect("templates have a hooks object");
    for list in hooks.values_mut() {
        for entry in list.as_array_mut().into_iter().flatten() {
            for c in commands_mut(entry, t.flat) {
                *c = json!(command);
            }
        }
    }
    hooks
}

/// A settings file's original bytes and its parsed top-level object.
type Settings = (Vec<u8>, Map<String, Value>);

pub fn read_settings(path: &Path) -> Result<Option<Settings>> {
    let Some(bytes) = crate::store::read_bytes(path)? else {
        return Ok(None);
    };
    let parse_err = |detail: String| {
        Error::invalid(
            Reason::UnparseableSettings,
            format!(
                "{} is not a JSON object ({detail}); fix it by hand, nothing was changed",
                path.display()
            ),
        )
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(Some((bytes, m))),
        Ok(_) => Err(parse_err("the top level is not an object".into())),
        Err(e) => Err(parse_err(e.to_string())),
    }
}

pub fn install(t: &Target, dir: &Path, command: &str) -> Result<Vec<String>> {
    let settings_path = dir.join(t.file);
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join(COMMAND_FILE);
    let existing = read_settings(&settings_path)?;
    let with_command_file = t.command_file.is_some();
    let command_md = t.command_file.unwrap_or_default();
    // Refuse before changing anything: a different conductor.md is someone else's.
    let command_state = if with_command_file {
        crate::store::read_bytes(&command_path)?
    } else {
        None
    };
    if let Some(b) = &command_state
        && b != command_md.as_bytes()
        && !manifest_path.exists()
    {
        return Err(Error::invalid(
            Reason::FileExists,
            format!(
                "{} exists and was not installed by conductor; move it away and retry",
                command_path.display()
            ),
        ));
    }
    let mut changes = Vec::new();
    tighten_manifest(&manifest_path, &mut changes)?;
    let (original, mut settings) = match existing {
        Some((b, m)) => (Some(b), m),
        None => (None, Map::new()),
    };
    if t.flat && original.is_none() {
        settings.insert("version".into(), json!(1));
    }
    let not_valid = |what: String| {
        Error::invalid(
            Reason::UnparseableSettings,
            format!(
                "{what} in {} is not what {} expects; nothing was changed",
                settings_path.display(),
                t.agent.product()
            ),
        )
    };
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(not_valid("`hooks`".into()));
    };
    let (mut added, mut updated) = (Vec::new(), Vec::new());
    for (event, entries) in our_hooks(t, command) {
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err(not_valid(format!("`hooks.{event}`")));
        };
        let mut ours = false;
        for entry in list.iter_mut() {
            for c in commands_mut(entry, t.flat) {
                if c.as_str().and_then(|s| our_program(s, t.agent)).is_some() {
                    ours = true;
                    if c.as_str() != Some(command) {
                        *c = json!(command);
                        updated.push(event.clone());
                    }
                }
            }
        }
        if !ours {
            list.extend(entries.as_array().cloned().unwrap_or_default());
            added.push(event);
        }
    }
    if !added.is_empty() || !updated.is_empty() {
        std::fs::create_dir_all(dir).ctx("create", dir)?;
        if !manifest_path.exists() {
            // Keep the original bytes only when re-serializing would not reproduce them.
            let keep = match &original {
                Some(b) => {
                    let v: Value = serde_json::from_slice(b).expect("parsed above");
                    if encode(&v) == *b {
                        json!({"existed": true})
                    } else {
                        json!({"existed": true, "original": String::from_utf8_lossy(b)})
                    }
                }
                None => json!({"existed": false}),
            };
            let mut manifest = json!({"installed_by": format!("conductor {}", env!("CARGO_PKG_VERSION")),
                                      "agent": t.agent.name(), "settings_file": t.file, "settings": keep,
                                      "hook_command": command});
            if with_command_file {
                manifest["command_file"] = json!(COMMAND_FILE);
            }
            write_atomic(&manifest_path, &encode(&manifest), 0o600, None)?;
        }
        write_atomic(
            &settings_path,
            &encode(&Value::Object(settings)),
            0o644,
            Some(&settings_path),
        )?;
        if !added.is_empty() {
            changes.push(format!(
                "{}: added {} hooks running `{command}`",
                settings_path.display(),
                added.join(", ")
            ));
        }
        if !updated.is_empty() {
            changes.push(format!(
                "{}: pointed the {} hooks at `{command}`",
                settings_path.display(),
                updated.join(", ")
            ));
        }
    }
    if with_command_file && command_state.as_deref() != Some(command_md.as_bytes()) {
        write_atomic(
            &command_path,
            command_md.as_bytes(),
            0o644,
            Some(&command_path),
        )?;
        changes.push(format!(
            "{}: installed the /conductor command",
            command_path.display()
        ));
    }
    Ok(changes)
}

pub fn uninstall(t: &Target, dir: &Path) -> Result<Vec<String>> {
    let settings_path = dir.join(t.file);
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join(COMMAND_FILE);
    let manifest: Option<Value> =
        crate::store::read_bytes(&manifest_path)?.and_then(|b| serde_json::from_slice(&b).ok());
    let mut changes = Vec::new();
    if let Some((_, mut settings)) = read_settings(&settings_path)? {
        let mut removed = Vec::new();
        if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
            for (event, list) in hooks.iter_mut() {
                let Some(list) = list.as_array_mut() else {
                    continue;
                };
                let before = list.len();
                let mut touched = false;
                let mine = |c: &Value| c.as_str().and_then(|s| our_program(s, t.agent)).is_some();
                if t.flat {
                    list.retain(|e| !e.get("command").is_some_and(mine));
                } else {
                    for g in list.iter_mut() {
                        if let Some(hs) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                            let n = hs.len();
                            hs.retain(|h| !h.get("command").is_some_and(mine));
                            touched |= hs.len() != n;
                        }
                    }
                    list.retain(|g| {
                        g.get("hooks")
                            .and_then(Value::as_array)
                            .is_none_or(|hs| !hs.is_empty())
                    });
                }
                if touched || list.len() != before {
                    removed.push(event.clone());
                }
            }
            hooks.retain(|_, list| list.as_array().is_none_or(|l| !l.is_empty()));
        }
        if !removed.is_empty() {
            if settings
                .get("hooks")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                settings.remove("hooks");
            }
            let kept = manifest
                .as_ref()
                .map(|m| m["settings"].clone())
                .unwrap_or(Value::Null);
            let created = kept["existed"] == false;
            if created
                && t.flat
                && settings.get("version") == Some(&json!(1))
                && settings.len() == 1
            {
                settings.remove("version");
            }
            let now = Value::Object(settings);
            let original_text = kept["original"].as_str();
            let original_value = original_text.and_then(|t| serde_json::from_str::<Value>(t).ok());
            if created && now.as_object().is_some_and(Map::is_empty) {
                std::fs::remove_file(&settings_path).ctx("remove", &settings_path)?;
                changes.push(format!(
                    "{}: removed (conductor had created it)",
                    settings_path.display()
                ));
            } else {
                let bytes = match (original_text, original_value) {
                    (Some(t), Some(v)) if v == now => t.as_bytes().to_vec(),
                    _ => encode(&now),
                };
                write_atomic(&settings_path, &bytes, 0o644, Some(&settings_path))?;
                changes.push(format!(
                    "{}: removed {} hooks running `conductor hook {}`",
                    settings_path.display(),
                    removed.join(", "),
                    t.agent.name()
                ));
            }
        }
    }
    if let Some(command_md) = t.command_file {
        match crate::store::read_bytes(&command_path)? {
            Some(b) if b == command_md.as_bytes() => {
                std::fs::remove_file(&command_path).ctx("remove", &command_path)?;
                let _ = std::fs::remove_dir(dir.join("commands")); // only if empty
                changes.push(format!(
                    "{}: removed the /conductor command",
                    command_path.display()
                ));
            }
            Some(_) => changes.push(format!(
                "{}: left in place (it was changed after install)",
                command_path.display()
            )),
            None => {}
        }
    }
    if manifest_path.exists() {
        std::fs::remove_file(&manifest_path).ctx("remove", &manifest_path)?;
    }
    let _ = std::fs::remove_dir(dir); // only if conductor left it empty
    Ok(changes)
}

/// Earlier versions wrote the manifest (which can hold a settings file's secrets) 0644: make an
/// existing one private.
fn tighten_manifest(path: &Path, changes: &mut Vec<String>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .ctx("set permissions of", path)?;
        changes.push(format!("{}: made private (0600)", path.display()));
    }
    Ok(())
}

/// The conductor programs the hooks in `path` run (sorted, each once), with the parsed
/// document; `None` when the file is missing or not JSON.
pub fn programs(t: &Target, path: &Path) -> Option<(Value, Vec<String>)> {
    let v = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())?;
    let mut programs: Vec<String> = installed_commands(t, &v)
        .iter()
        .filter_map(|(_, c)| our_program(c, t.agent))
        .collect();
    programs.sort();
    programs.dedup();
    Some((v, programs))
}

/// A hooks agent's check (`doctor`): is its MCP server registered and answering, and does the
/// binary each hook runs still exist? `extra` comes first (Codex: its trust).
pub fn check(
    t: &Target,
    path: &Path,
    mcp: &mcp::McpTarget,
    user: bool,
    extra: impl FnOnce(&Value) -> Vec<Finding>,
) -> super::Check {
    let Some((v, programs)) = programs(t, path) else {
        return super::Check::default();
    };
    let mut findings = Vec::new();
    if !programs.is_empty() {
        findings.extend(extra(&v));
        findings.push(mcp::finding(mcp, user));
    }
    let agent = t.agent;
    for prog in &programs {
        let file = path.display().to_string();
        let p = Path::new(prog);
        findings.push(if p.is_absolute() && !p.is_file() {
            Finding::bad(
                file,
                format!(
                    "the {} hooks run {prog}, which does not exist: coordination is off for {}",
                    agent.product(),
                    agent.product()
                ),
                format!(
                    "run `conductor integrate {}{}` with the conductor you use now",
                    agent.name(),
                    if user { " --user" } else { "" }
                ),
            )
        } else if !p.is_absolute() {
            Finding::good(
                file,
                format!(
                    "the {} hooks run `{prog}` from the PATH the agent runs hooks with \
                     (portable: the file works on every machine with conductor on PATH)",
                    agent.product()
                ),
            )
        } else {
            Finding::good(
                file,
                format!(
                    "{} hooks run {prog} (this machine's absolute path{})",
                    agent.product(),
                    if user {
                        ""
                    } else {
                        "; with conductor on PATH, `conductor integrate` again writes `conductor`, which teammates can use"
                    }
                ),
            )
        });
    }
    super::Check {
        hooks: !programs.is_empty(),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_commands_are_recognised_by_program_name_and_agent() {
        assert_eq!(
            our_program("conductor hook claude", Agent::Claude).as_deref(),
            Some("conductor")
        );
        assert_eq!(
            our_program("'/opt/my tools/conductor' hook codex", Agent::Codex).as_deref(),
            Some("/opt/my tools/conductor")
        );
        assert!(our_program("/usr/bin/conductor hook codex", Agent::Claude).is_none());
        assert!(our_program("lint.sh hook claude", Agent::Claude).is_none());
        assert!(our_program("conductor-x hook claude", Agent::Claude).is_none());
    }

    #[test]
    fn templates_parse_and_name_their_agent() {
        for t in [
            &super::super::claude::TARGET,
            &super::super::cursor::TARGET,
            &super::super::codex::TARGET,
            &super::super::gemini::TARGET,
            &super::super::qwen::TARGET,
            &super::super::copilot::TARGET,
        ] {
            let a = t.agent;
            let hooks = our_hooks(&t, "/x/conductor hook test");
            assert!(!hooks.is_empty());
            let v: Value = serde_json::from_str(t.template).unwrap();
            for (_, c) in installed_commands(&t, &v) {
                assert!(our_program(&c, a).is_some(), "{c}");
            }
        }
    }
}
