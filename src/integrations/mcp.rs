//! The MCP half of `conductor integrate AGENT`: register `conductor mcp` as an MCP server in the
//! agent's configuration, next to whatever servers are there, and remove exactly that on
//! `--uninstall`.
//!
//! | agent  | project                     | --user                 |
//! |--------|-----------------------------|------------------------|
//! | claude | `.mcp.json`                 | `~/.claude.json`       |
//! | cursor | `.cursor/mcp.json`          | `~/.cursor/mcp.json`   |
//! | codex  | `.codex/config.toml`        | `~/.codex/config.toml` |
//! | gemini | `.gemini/settings.json`     | `~/.gemini/settings.json` |
//! | opencode | `opencode.json`           | `~/.config/opencode/opencode.json` |
//!
//! JSON files get `mcpServers.conductor = {"command": ABS_PATH, "args": ["mcp"]}` (OpenCode:
//! `mcp.conductor = {"type": "local", "command": [ABS_PATH, "mcp"], "enabled": true}`); when the
//! entry is removed and nothing else changed, the file's original bytes come back (kept, when
//! re-serializing would not reproduce them, under `mcp` in the agent directory's
//! `conductor-integration.json`). Codex's TOML gets one marked `[mcp_servers.conductor]` table
//! appended at the end, and uninstall cuts exactly that text out again.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::encode;
use crate::error::Reason;
use crate::error::{Error, IoContext, Result};
use crate::health::Finding;
use crate::hooks::Agent;

/// The server's name in every agent's configuration.
pub const NAME: &str = "conductor";
/// The first line of the table appended to Codex's config.toml.
const TOML_MARK: &str =
    "# conductor mcp (added by `conductor integrate codex`; `--uninstall` removes it)";

/// How a configuration holds its servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// JSON, `mcpServers.conductor = {"command": ABS_PATH, "args": ["mcp"]}`.
    Servers,
    /// OpenCode's JSON, `mcp.conductor = {"type": "local", "command": [ABS_PATH, "mcp"], ...}`.
    OpenCode,
    /// Codex's TOML, one marked `[mcp_servers.conductor]` table.
    CodexToml,
}

/// Where an agent keeps its MCP servers (each agent's module says which file).
pub struct McpTarget {
    pub agent: Agent,
    pub path: PathBuf,
    format: Format,
    /// The mode of a file conductor creates.
    mode: u32,
}

impl McpTarget {
    /// A JSON file with `mcpServers`, created with `mode`.
    pub fn servers(agent: Agent, path: PathBuf, mode: u32) -> McpTarget {
        McpTarget {
            agent,
            path,
            format: Format::Servers,
            mode,
        }
    }

    /// OpenCode's opencode.json (`mcp`).
    pub fn opencode(path: PathBuf) -> McpTarget {
        McpTarget {
            agent: Agent::Opencode,
            path,
            format: Format::OpenCode,
            mode: 0o644,
        }
    }

    /// Codex's config.toml.
    pub fn codex_toml(path: PathBuf) -> McpTarget {
        McpTarget {
            agent: Agent::Codex,
            path,
            format: Format::CodexToml,
            mode: 0o600,
        }
    }

    fn toml(&self) -> bool {
        self.format == Format::CodexToml
    }

    /// The JSON object holding the servers.
    fn key(&self) -> &'static str {
        if self.format == Format::OpenCode {
            "mcp"
        } else {
            "mcpServers"
        }
    }
}

fn unparseable(path: &Path, detail: impl std::fmt::Display) -> Error {
    Error::invalid(
        Reason::UnparseableSettings,
        format!(
            "{} is not a JSON object ({detail}); fix it by hand, nothing was changed",
            path.display()
        ),
    )
}

fn read_json(path: &Path) -> Result<Option<(Vec<u8>, Map<String, Value>)>> {
    let Some(bytes) = crate::store::read_bytes(path)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(Some((bytes, m))),
        Ok(_) => Err(unparseable(path, "the top level is not an object")),
        Err(e) => Err(unparseable(path, e)),
    }
}

/// The program and first argument of a server entry (`command` + `args`, or OpenCode's
/// `command` array).
fn program(entry: &Value) -> (Option<&str>, Option<&str>) {
    match &entry["command"] {
        Value::Array(c) => (
            c.first().and_then(Value::as_str),
            c.get(1).and_then(Value::as_str),
        ),
        c => (c.as_str(), entry["args"].get(0).and_then(Value::as_str)),
    }
}

/// True for a server entry conductor wrote: a program named `conductor` run with `mcp`.
fn ours(entry: &Value) -> bool {
    let (cmd, arg) = program(entry);
    let named = cmd.is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "conductor"));
    named && arg == Some("mcp")
}

/// The entry that registers `exe mcp` in `t`.
fn entry(t: &McpTarget, exe: &str) -> Value {
    if t.format == Format::OpenCode {
        json!({"type": "local", "command": [exe, "mcp"], "enabled": true})
    } else {
        json!({"command": exe, "args": ["mcp"]})
    }
}

fn toml_block(exe: &str) -> String {
    let quoted = serde_json::to_string(exe).expect("strings serialize"); // a TOML basic string
    format!("{TOML_MARK}\n[mcp_servers.{NAME}]\ncommand = {quoted}\nargs = [\"mcp\"]\n")
}

/// The range of our table in a config.toml, and the command it names.
fn find_toml_block(text: &str) -> Option<(usize, usize, String)> {
    let start = text.find(TOML_MARK)?;
    let rest = &text[start..];
    let mut end = start;
    let mut command = String::new();
    for (i, line) in rest.split_inclusive('\n').enumerate() {
        end += line.len();
        if let Some(c) = line.strip_prefix("command = ") {
            command = serde_json::from_str(c.trim()).unwrap_or_default();
        }
        if i == 3 {
            break;
        }
    }
    Some((start, end, command))
}

/// Refuse, before anything is changed, what install could not do cleanly: a file that does not
/// parse, or a `conductor` server someone else registered.
pub fn check(t: &McpTarget) -> Result<()> {
    if t.toml() {
        let Some(bytes) = crate::store::read_bytes(&t.path)? else {
            return Ok(());
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            Error::invalid(
                Reason::UnparseableSettings,
                format!("{} is not UTF-8; nothing was changed", t.path.display()),
            )
        })?;
        if find_toml_block(&text).is_none()
            && text
                .lines()
                .any(|l| l.trim() == format!("[mcp_servers.{NAME}]"))
        {
            return Err(Error::invalid(
                Reason::FileExists,
                format!(
                    "{} already has an [mcp_servers.{NAME}] table conductor did not add; remove it and retry",
                    t.path.display()
                ),
            ));
        }
        return Ok(());
    }
    if let Some((_, m)) = read_json(&t.path)? {
        match m.get(t.key()) {
            None => {}
            Some(Value::Object(s)) => {
                if let Some(e) = s.get(NAME)
                    && !ours(e)
                {
                    return Err(Error::invalid(
                        Reason::FileExists,
                        format!(
                            "{} already registers an MCP server named `{NAME}` that is not conductor's; remove it and retry",
                            t.path.display()
                        ),
                    ));
                }
            }
            Some(_) => {
                return Err(unparseable(
                    &t.path,
                    format!("`{}` is not an object", t.key()),
                ));
            }
        }
    }
    Ok(())
}

/// Register `exe mcp` (after [`check`]). `manifest` is the agent directory's manifest, where
/// original bytes are kept.
pub fn install(t: &McpTarget, exe: &str, manifest: &Path) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    if t.toml() {
        let text = crate::store::read_bytes(&t.path)?
            .map(|b| String::from_utf8(b).expect("checked"))
            .unwrap_or_default();
        let block = toml_block(exe);
        let new = match find_toml_block(&text) {
            Some((_, _, c)) if c == exe => return Ok(changes),
            Some((s, e, _)) => format!("{}{block}{}", &text[..s], &text[e..]),
            None => {
                // A blank line before our table; what was added to get it is kept for uninstall.
                let sep = if text.is_empty() || text.ends_with("\n\n") {
                    ""
                } else if text.ends_with('\n') {
                    "\n"
                } else {
                    "\n\n"
                };
                remember(manifest, t, None, sep)?;
                format!("{text}{sep}{block}")
            }
        };
        write_file(&t.path, new.as_bytes(), 0o600)?;
        changes.push(format!(
            "{}: registered the MCP server `{exe} mcp`",
            t.path.display()
        ));
        return Ok(changes);
    }
    let existing = read_json(&t.path)?;
    let (original, mut doc) = match existing {
        Some((b, m)) => (Some(b), m),
        None => (None, Map::new()),
    };
    let servers = doc
        .entry(t.key())
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("checked");
    if servers.get(NAME).is_some_and(|e| program(e).0 == Some(exe)) {
        return Ok(changes);
    }
    let fresh = !servers.contains_key(NAME);
    servers.insert(NAME.into(), entry(t, exe));
    if fresh {
        remember(manifest, t, original.as_deref(), "")?;
    }
    write_file(&t.path, &encode(&Value::Object(doc)), t.mode)?;
    changes.push(format!(
        "{}: registered the MCP server `{exe} mcp`",
        t.path.display()
    ));
    Ok(changes)
}

/// Keep what uninstall needs to give the file back byte for byte.
fn remember(
    manifest: &Path,
    t: &McpTarget,
    original: Option<&[u8]>,
    separator: &str,
) -> Result<()> {
    let mut m: Map<String, Value> = crate::store::read_bytes(manifest)?
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let kept = match original {
        None if t.toml() => json!({"file": t.path, "separator": separator}),
        None => json!({"file": t.path, "existed": false}),
        Some(b) => {
            let v: Value = serde_json::from_slice(b).expect("parsed");
            let mut k =
                json!({"file": t.path, "existed": true, "had_servers": v.get(t.key()).is_some()});
            if encode(&v) != b {
                k["original"] = json!(String::from_utf8_lossy(b));
            }
            k
        }
    };
    m.insert("mcp".into(), kept);
    write_file(manifest, &encode(&Value::Object(m)), 0o600)
}

/// Remove the server entry conductor added.
pub fn uninstall(t: &McpTarget, manifest: &Path) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    if t.toml() {
        let Some(bytes) = crate::store::read_bytes(&t.path)? else {
            return Ok(changes);
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(changes);
        };
        let Some((s, e, _)) = find_toml_block(&text) else {
            return Ok(changes);
        };
        let sep = kept(manifest)?["separator"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let before = &text[..s];
        let before = before.strip_suffix(sep.as_str()).unwrap_or(before);
        let new = format!("{before}{}", &text[e..]);
        if new.is_empty() {
            std::fs::remove_file(&t.path).ctx("remove", &t.path)?;
            let _ = std::fs::remove_dir(t.path.parent().expect("in a directory"));
        } else {
            write_file(&t.path, new.as_bytes(), 0o600)?;
        }
        changes.push(format!(
            "{}: removed the MCP server `{NAME}`",
            t.path.display()
        ));
        return Ok(changes);
    }
    let Some((_, mut doc)) = read_json(&t.path)? else {
        return Ok(changes);
    };
    let Some(servers) = doc.get_mut(t.key()).and_then(Value::as_object_mut) else {
        return Ok(changes);
    };
    if !servers.get(NAME).is_some_and(ours) {
        return Ok(changes);
    }
    servers.remove(NAME);
    let kept = kept(manifest)?;
    if servers.is_empty() && kept["had_servers"] != true {
        doc.remove(t.key());
    }
    let now = Value::Object(doc);
    if kept["existed"] == false && now.as_object().is_some_and(Map::is_empty) {
        std::fs::remove_file(&t.path).ctx("remove", &t.path)?;
    } else {
        let bytes = match kept["original"].as_str() {
            Some(o) if serde_json::from_str::<Value>(o).ok().as_ref() == Some(&now) => {
                o.as_bytes().to_vec()
            }
            _ => encode(&now),
        };
        write_file(&t.path, &bytes, 0o644)?;
    }
    changes.push(format!(
        "{}: removed the MCP server `{NAME}`",
        t.path.display()
    ));
    Ok(changes)
}

/// What [`remember`] kept.
fn kept(manifest: &Path) -> Result<Value> {
    Ok(crate::store::read_bytes(manifest)?
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|m| m["mcp"].clone())
        .unwrap_or(Value::Null))
}

/// Write a configuration file atomically, keeping its permissions when it exists.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    super::write_atomic(path, bytes, mode, Some(path))
}

/// The command of the conductor MCP server registered in `t`, if any.
pub fn registered(t: &McpTarget) -> Option<String> {
    let bytes = std::fs::read(&t.path).ok()?;
    if t.toml() {
        return find_toml_block(std::str::from_utf8(&bytes).ok()?).map(|(_, _, c)| c);
    }
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let e = &v[t.key()][NAME];
    ours(e).then(|| program(e).0.unwrap_or_default().to_string())
}

/// Start `command mcp` and complete the MCP handshake (at most 10 s): Ok, or why not.
pub fn starts(command: &str) -> std::result::Result<(), String> {
    let mut child = Command::new(command)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {command}: {e}"))?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "conductor-doctor", "version": env!("CARGO_PKG_VERSION")}}});
    let mut stdin = child.stdin.take().expect("piped");
    let _ = writeln!(stdin, "{init}");
    let _ = stdin.flush();
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    drop(stdin); // the server sees its client go away and exits
    let _ = child.kill();
    let _ = child.wait();
    match got {
        Ok(line) if line.contains("\"serverInfo\"") => Ok(()),
        Ok(line) if line.is_empty() => Err(format!("`{command} mcp` exited without answering")),
        Ok(line) => Err(format!("`{command} mcp` answered: {}", line.trim())),
        Err(_) => Err(format!("`{command} mcp` did not answer within 10 s")),
    }
}

/// `doctor`'s check of an agent whose hooks are installed: is the MCP server registered in `t`,
/// and does it start and answer the MCP handshake? (`user`: the integration is `--user`.)
pub fn finding(t: &McpTarget, user: bool) -> Finding {
    let agent = t.agent;
    let file = t.path.display().to_string();
    let again = format!(
        "run `conductor integrate {}{}`",
        agent.name(),
        if user { " --user" } else { "" }
    );
    let (ok, detail, repair) = match registered(t) {
        None => (
            false,
            format!(
                "the {} hooks are installed but the conductor MCP server is not registered",
                agent.product()
            ),
            Some(again),
        ),
        Some(c) => match starts(&c) {
            Ok(()) => (
                true,
                format!("{} MCP server `{c} mcp` starts", agent.product()),
                None,
            ),
            Err(why) => (false, why, Some(again)),
        },
    };
    Finding {
        file,
        ok,
        detail,
        repair,
    }
}
