//! Codex CLI runs a hook from `hooks.json` only when its trust is recorded in the user's
//! `config.toml` (`$CODEX_HOME/config.toml`, default `~/.codex/config.toml`), and a project's
//! hooks only when the project itself is trusted. An untrusted hook is skipped silently.
//!
//! Each handler's trust is a table `[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]`
//! with `trusted_hash = "sha256:<hex>"`. The hash is SHA-256 of compact JSON with keys sorted
//! recursively over `{event_name, matcher?, hooks: [{type: "command", command, timeout, async,
//! statusMessage?}]}`, the event in snake_case, `timeout` defaulting to 600 (at least 1; SessionEnd
//! at most 3), and no matcher for UserPromptSubmit and Stop. Read from openai/codex
//! (`codex-rs/hooks/src/engine/discovery.rs`, `codex-rs/config/src/fingerprint.rs`) and checked
//! against Codex CLI 0.169.0's own `hooks/list` (app-server), which reports each hook's key,
//! `currentHash` and trust status (tests/it/integrations.rs does this when Codex is installed).
//! A project is trusted by `[projects."<dir>"] trust_level = "trusted"`.
//!
//! `integrate codex` writes these entries with `toml_edit` (the rest of the file keeps its bytes),
//! records in its manifest what each one replaced, and `--uninstall` puts back exactly that.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::Digest;
use toml_edit::{DocumentMut, Item, Table};

use crate::error::Reason;
use crate::error::{Error, Result};
use crate::hooks::Agent;
use crate::integrations::settings::our_program;
use crate::integrations::write_atomic;

/// Codex's home: `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        let p = PathBuf::from(h);
        return Ok(std::fs::canonicalize(&p).unwrap_or(p));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".codex")),
        None => Err(Error::invalid(
            Reason::NoHome,
            "neither CODEX_HOME nor HOME is set, so Codex's config.toml cannot be found",
        )),
    }
}

/// `PreToolUse` -> `pre_tool_use`.
pub fn event_label(event: &str) -> String {
    let mut s = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

/// Objects with their keys sorted, recursively (serde_json keeps insertion order here).
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        v => v.clone(),
    }
}

/// The trust hash Codex computes for one command handler of a matcher group.
pub fn hook_hash(event: &str, group: &Value, handler: &Value) -> String {
    let label = event_label(event);
    let timeout = handler
        .get("timeout")
        .or_else(|| handler.get("timeoutSec"))
        .and_then(Value::as_u64)
        .unwrap_or(600)
        .max(1);
    let timeout = if label == "session_end" {
        timeout.min(3)
    } else {
        timeout
    };
    let mut h = json!({
        "type": "command",
        "command": handler.get("command").and_then(Value::as_str).unwrap_or(""),
        "timeout": timeout,
        "async": handler.get("async").and_then(Value::as_bool).unwrap_or(false),
    });
    if let Some(m) = handler.get("statusMessage").and_then(Value::as_str) {
        h["statusMessage"] = json!(m);
    }
    let mut identity = json!({"event_name": label, "hooks": [h]});
    if !matches!(label.as_str(), "user_prompt_submit" | "stop")
        && let Some(m) = group.get("matcher").and_then(Value::as_str)
    {
        identity["matcher"] = json!(m);
    }
    let bytes = serde_json::to_vec(&canonical(&identity)).expect("JSON values serialize");
    let digest = sha2::Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// One of conductor's handlers in a hooks.json: its trust key and the hash Codex expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub hash: String,
}

/// Conductor's handlers in the hooks.json at `hooks_path` (whose parsed contents are `settings`).
pub fn our_entries(hooks_path: &Path, settings: &Value) -> Vec<Entry> {
    let mut out = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in hooks {
        for (gi, group) in groups.as_array().into_iter().flatten().enumerate() {
            let handlers = group.get("hooks").and_then(Value::as_array);
            for (hi, handler) in handlers.into_iter().flatten().enumerate() {
                let ours = handler
                    .get("command")
                    .and_then(Value::as_str)
                    .and_then(|c| our_program(c, Agent::Codex))
                    .is_some();
                if ours {
                    out.push(Entry {
                        key: format!("{}:{}:{gi}:{hi}", hooks_path.display(), event_label(event)),
                        hash: hook_hash(event, group, handler),
                    });
                }
            }
        }
    }
    out
}

fn read_config(path: &Path) -> Result<(Option<Vec<u8>>, DocumentMut)> {
    let bytes = crate::store::read_bytes(path)?;
    let text = match &bytes {
        None => String::new(),
        Some(b) => String::from_utf8(b.clone()).map_err(|_| {
            Error::invalid(
                Reason::UnparseableSettings,
                format!("{} is not UTF-8; nothing was changed", path.display()),
            )
        })?,
    };
    let doc = text.parse::<DocumentMut>().map_err(|e| {
        let first = e.to_string();
        let first = first.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        Error::invalid(
            Reason::UnparseableSettings,
            format!(
                "{} is not valid TOML ({}); fix it by hand, nothing was changed",
                path.display(),
                first.trim()
            ),
        )
    })?;
    Ok((bytes, doc))
}

/// `table[key]` as a table, created implicit (no header of its own) when missing.
fn sub_table<'a>(table: &'a mut Table, key: &str, path: &Path) -> Result<&'a mut Table> {
    if !table.contains_key(key) {
        let mut t = Table::new();
        t.set_implicit(true);
        table.insert(key, Item::Table(t));
    }
    table[key].as_table_mut().ok_or_else(|| {
        Error::invalid(
            Reason::UnparseableSettings,
            format!(
                "`{key}` in {} is not a table as Codex expects; nothing was changed",
                path.display()
            ),
        )
    })
}

/// The `[hooks.state."KEY"]` table, if any.
fn hook_state<'a>(doc: &'a DocumentMut, key: &str) -> Option<&'a Item> {
    doc.get("hooks")?.get("state")?.get(key)
}

/// The trust level `config.toml` gives `dir`, looking at it and then its ancestors (Codex looks
/// at the directory, its project root and its repository root).
fn project_trust(doc: &DocumentMut, dir: &Path) -> Option<String> {
    let projects = doc.get("projects")?;
    dir.ancestors().find_map(|d| {
        projects
            .get(d.to_str()?)?
            .get("trust_level")?
            .as_str()
            .map(str::to_string)
    })
}

/// What the codex integration changed in config.toml, for `--uninstall` (kept in the manifest).
/// Holds trust hashes and a path, never anything else of the file.
pub fn install(
    hooks_path: &Path,
    settings: &Value,
    project: Option<&Path>,
    trust_project: bool,
    previous: Option<&Value>,
) -> Result<(Value, Vec<String>)> {
    let home = codex_home()?;
    let config_path = home.join("config.toml");
    let (bytes, mut doc) = read_config(&config_path)?;
    let entries = our_entries(hooks_path, settings);
    let mut record = previous
        .filter(|p| p["config"] == json!(config_path.display().to_string()))
        .cloned()
        .unwrap_or_else(|| {
            json!({"config": config_path.display().to_string(), "created_config": bytes.is_none(),
                   "created_dir": !home.exists(), "keys": {}, "project": null})
        });
    let mut changes = Vec::new();
    let mut trusted = 0;
    {
        let root = doc.as_table_mut();
        let state = sub_table(
            sub_table(root, "hooks", &config_path)?,
            "state",
            &config_path,
        )?;
        // Keys an earlier install trusted that no longer name one of our handlers go back first.
        let keys = record["keys"].as_object().cloned().unwrap_or_default();
        for (key, before) in &keys {
            if !entries.iter().any(|e| &e.key == key) {
                restore(state, key, before);
                record["keys"]
                    .as_object_mut()
                    .expect("an object")
                    .remove(key);
            }
        }
        for e in &entries {
            let current = state
                .get(&e.key)
                .and_then(|t| t.get("trusted_hash"))
                .and_then(Item::as_str)
                .map(str::to_string);
            if current.as_deref() == Some(e.hash.as_str()) {
                continue;
            }
            if record["keys"].get(&e.key).is_none() {
                let before = match state.get(&e.key) {
                    None => json!({"existed": false}),
                    Some(_) => json!({"existed": true, "trusted_hash": current}),
                };
                record["keys"][&e.key] = before;
            }
            if !state.contains_key(&e.key) {
                state.insert(&e.key, Item::Table(Table::new()));
            }
            let t = state[&e.key].as_table_mut().ok_or_else(|| {
                Error::invalid(
                    Reason::UnparseableSettings,
                    format!(
                        "`hooks.state.\"{}\"` in {} is not a table",
                        e.key,
                        config_path.display()
                    ),
                )
            })?;
            t.insert("trusted_hash", toml_edit::value(e.hash.clone()));
            trusted += 1;
        }
        if state.is_empty() {
            root["hooks"].as_table_mut().map(|h| h.remove("state"));
        }
        if root["hooks"].as_table().is_some_and(Table::is_empty) {
            root.remove("hooks");
        }
    }
    if trusted > 0 {
        changes.push(format!(
            "{}: trusted {trusted} conductor hook{} for Codex (hooks.state)",
            config_path.display(),
            if trusted == 1 { "" } else { "s" }
        ));
    }
    if let Some(dir) = project {
        let level = project_trust(&doc, dir);
        if level.as_deref() != Some("trusted") {
            let own_config = dir.join(".codex").join("config.toml");
            if level.is_none() && !own_config.exists() || trust_project {
                let key = dir.to_str().ok_or_else(|| {
                    Error::invalid(Reason::InvalidDirectory, "the project's path is not UTF-8")
                })?;
                let projects = sub_table(doc.as_table_mut(), "projects", &config_path)?;
                let before = projects
                    .get(key)
                    .and_then(|t| t.get("trust_level"))
                    .and_then(Item::as_str)
                    .map(str::to_string);
                if record["project"].is_null() {
                    record["project"] = json!({"dir": key, "existed": projects.contains_key(key),
                                               "trust_level": before});
                }
                if !projects.contains_key(key) {
                    projects.insert(key, Item::Table(Table::new()));
                }
                if let Some(t) = projects[key].as_table_mut() {
                    t.insert("trust_level", toml_edit::value("trusted"));
                }
                changes.push(format!(
                    "{}: marked {key} a trusted project for Codex (it runs project hooks only then)",
                    config_path.display()
                ));
            } else {
                changes.push(format!(
                    "Codex will not run these hooks until it trusts {}: {}; review it, then run \
                     `conductor integrate codex --trust-project`",
                    dir.display(),
                    if level.is_some() {
                        format!("config.toml marks it {}", level.unwrap_or_default())
                    } else {
                        format!(
                            "trusting it also loads {}, which conductor did not write",
                            own_config.display()
                        )
                    }
                ));
            }
        }
    }
    let text = doc.to_string();
    if bytes.as_deref() != Some(text.as_bytes()) {
        std::fs::create_dir_all(&home).map_err(|e| Error::io("create", &home, e))?;
        write_atomic(&config_path, text.as_bytes(), 0o600, Some(&config_path))?;
    }
    Ok((record, changes))
}

/// Put `key` back as it was before conductor trusted it.
fn restore(state: &mut Table, key: &str, before: &Value) {
    if before["existed"] == false {
        state.remove(key);
    } else if let Some(t) = state.get_mut(key).and_then(Item::as_table_mut) {
        match before["trusted_hash"].as_str() {
            Some(h) => {
                t.insert("trusted_hash", toml_edit::value(h));
            }
            None => {
                t.remove("trusted_hash");
            }
        }
    }
}

/// Undo what [`install`] recorded.
pub fn uninstall(record: &Value) -> Result<Vec<String>> {
    let Some(config) = record["config"].as_str() else {
        return Ok(Vec::new());
    };
    let config_path = PathBuf::from(config);
    let (bytes, mut doc) = match read_config(&config_path) {
        Ok((Some(b), d)) => (b, d),
        Ok((None, _)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let root = doc.as_table_mut();
    if let Some(state) = root
        .get_mut("hooks")
        .and_then(|h| h.get_mut("state"))
        .and_then(Item::as_table_mut)
    {
        for (key, before) in record["keys"].as_object().into_iter().flatten() {
            restore(state, key, before);
        }
        if state.is_empty() {
            root["hooks"].as_table_mut().map(|h| h.remove("state"));
        }
    }
    if root
        .get("hooks")
        .and_then(Item::as_table)
        .is_some_and(Table::is_empty)
    {
        root.remove("hooks");
    }
    let p = &record["project"];
    if let Some(dir) = p["dir"].as_str()
        && let Some(projects) = root.get_mut("projects").and_then(Item::as_table_mut)
    {
        if p["existed"] == false {
            projects.remove(dir);
        } else if let Some(t) = projects.get_mut(dir).and_then(Item::as_table_mut) {
            match p["trust_level"].as_str() {
                Some(l) => t.insert("trust_level", toml_edit::value(l)),
                None => t.remove("trust_level"),
            };
        }
        if projects.is_empty() {
            root.remove("projects");
        }
    }
    let text = doc.to_string();
    let mut changes = Vec::new();
    if text.as_bytes() != bytes.as_slice() {
        if record["created_config"] == true && text.trim().is_empty() {
            std::fs::remove_file(&config_path).map_err(|e| Error::io("remove", &config_path, e))?;
            changes.push(format!(
                "{}: removed (conductor had created it)",
                config_path.display()
            ));
            if record["created_dir"] == true
                && let Some(dir) = config_path.parent()
            {
                let _ = std::fs::remove_dir(dir); // only if nothing else is in it
            }
        } else {
            write_atomic(&config_path, text.as_bytes(), 0o600, Some(&config_path))?;
            changes.push(format!(
                "{}: removed the trust conductor had recorded",
                config_path.display()
            ));
        }
    }
    Ok(changes)
}

/// Why Codex will not run conductor's hooks in this hooks.json, one line per reason, each with
/// the command that fixes it (empty when Codex runs them).
pub fn problems(
    hooks_path: &Path,
    settings: &Value,
    project: Option<&Path>,
) -> Vec<(String, String)> {
    let again = if project.is_some() {
        "conductor integrate codex"
    } else {
        "conductor integrate codex --user"
    };
    let Ok(home) = codex_home() else {
        return vec![("neither CODEX_HOME nor HOME is set".into(), again.into())];
    };
    let config_path = home.join("config.toml");
    let doc = match read_config(&config_path) {
        Ok((_, d)) => d,
        Err(e) => {
            return vec![(
                e.to_string(),
                format!("fix {} by hand", config_path.display()),
            )];
        }
    };
    let mut out = Vec::new();
    let entries = our_entries(hooks_path, settings);
    let untrusted: Vec<&Entry> = entries
        .iter()
        .filter(|e| {
            let st = hook_state(&doc, &e.key);
            let hash = st
                .and_then(|t| t.get("trusted_hash"))
                .and_then(Item::as_str);
            let off = st.and_then(|t| t.get("enabled")).and_then(Item::as_bool) == Some(false);
            hash != Some(e.hash.as_str()) || off
        })
        .collect();
    if !untrusted.is_empty() {
        out.push((format!(
            "Codex skips {} of conductor's {} hooks in {}: {} has no matching trusted_hash for {}",
            untrusted.len(),
            entries.len(),
            hooks_path.display(),
            config_path.display(),
            untrusted
                .iter()
                .map(|e| e.key.rsplit_once(".json:").map_or(e.key.as_str(), |(_, k)| k))
                .collect::<Vec<_>>()
                .join(", ")
        ), again.to_string()));
    }
    if let Some(dir) = project
        && !entries.is_empty()
        && project_trust(&doc, dir).as_deref() != Some("trusted")
    {
        out.push((format!(
            "Codex runs no hooks of {} until the project is trusted ({} has no \
             [projects.\"{}\"] trust_level = \"trusted\")",
            dir.display(),
            config_path.display(),
            dir.display()
        ), "conductor integrate codex --trust-project (after reviewing the project's own .codex/config.toml, if any)".to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_hashes_match_codex() {
        assert_eq!(event_label("PreToolUse"), "pre_tool_use");
        assert_eq!(event_label("Stop"), "stop");
        // Hashes reported by Codex CLI 0.169.0's hooks/list for these handlers.
        let h = json!({"type": "command", "command": "conductor hook codex", "timeout": 10});
        let g = json!({"matcher": "apply_patch|Edit|Write|Bash", "hooks": [h.clone()]});
        assert_eq!(
            hook_hash("PreToolUse", &g, &h),
            "sha256:c1e7118688454ee9801aebe7b9ecead19cc30d0599be91124ee3af81bfdec072"
        );
        assert_eq!(
            hook_hash("Stop", &json!({"hooks": [h.clone()]}), &h),
            "sha256:29ab1038013b571a264c47e64a4240f0113742e1a911048ebcf39b5ded350f2b"
        );
        let e = json!({"type": "command", "command": "conductor hook codex", "timeout": 3});
        assert_eq!(
            hook_hash("SessionEnd", &json!({"hooks": [e.clone()]}), &e),
            "sha256:3887af5d1e8819f052bcd0b12d5c4fe74a488b3d23856ea2063cf737dffeaec9"
        );
    }
}
