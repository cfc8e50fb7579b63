//! `conductor integrate claude [--project DIR | --user] [--uninstall]`: install the `/conductor`
//! command and the hooks of `shell/claude/` into a `.claude/` directory. Hooks are merged into
//! `settings.json` next to whatever is there; a settings file that does not parse is never
//! touched. `--uninstall` removes exactly the hook entries and the command file it added, and
//! when nothing else changed in between, restores `settings.json` byte for byte (the original
//! bytes are kept in `.claude/conductor-integration.json` when re-serializing would not give
//! them back).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Report;
use super::hook::Agent;
use crate::error::{Error, IoContext, Result};
use crate::output::Output;

/// The `/conductor` command file, as shipped in the plugin.
pub const COMMAND_MD: &str = include_str!("../../shell/claude/commands/conductor.md");
/// The plugin's hooks, merged into settings.json.
pub const HOOKS_JSON: &str = include_str!("../../shell/claude/hooks/hooks.json");
/// The command every hook entry runs; entries with it are ours.
pub const HOOK_COMMAND: &str = "conductor hook claude";
const MANIFEST: &str = "conductor-integration.json";

/// Install (or remove) the Claude Code integration.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Examples:\n  conductor integrate claude                 # this project: ./.claude/\n  \
conductor integrate claude --user          # every project: ~/.claude/\n  conductor integrate claude --uninstall     \
# remove exactly what was added"
)]
pub struct IntegrateArgs {
    /// Which agent to integrate with.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Install into DIR/.claude/ [default: the current directory].
    #[arg(long, value_name = "DIR", conflicts_with = "user")]
    pub project: Option<PathBuf>,
    /// Install into ~/.claude/ (every project of this user).
    #[arg(long)]
    pub user: bool,
    /// Remove what an earlier install added.
    #[arg(long)]
    pub uninstall: bool,
}

/// What changed.
pub struct Integrated {
    pub dir: PathBuf,
    pub changes: Vec<String>,
}

impl Report for Integrated {
    fn to_json(&self) -> Value {
        json!({"status": "ok", "directory": self.dir.display().to_string(), "changes": self.changes,
               "message": if self.changes.is_empty() { "Nothing to change." } else { "Claude Code integration updated." }})
    }
    fn to_text(&self) -> String {
        if self.changes.is_empty() {
            return format!("Nothing to change in {}.", self.dir.display());
        }
        self.changes.join("\n")
    }
}

/// Run `integrate`.
pub fn run(args: IntegrateArgs, out: &Output) -> Result<u8> {
    let root = if args.user {
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => {
                return Err(Error::invalid(
                    "no_home",
                    "HOME is not set; use --project DIR instead of --user",
                ));
            }
        }
    } else {
        match args.project {
            Some(p) if p.is_absolute() => p,
            Some(p) => crate::runtime::current_dir()?.join(p),
            None => crate::runtime::current_dir()?,
        }
    };
    if !root.is_dir() {
        return Err(Error::invalid(
            "invalid_directory",
            format!("{} is not a directory", root.display()),
        ));
    }
    let dir = root.join(".claude");
    let changes = if args.uninstall {
        uninstall(&dir)?
    } else {
        install(&dir)?
    };
    super::print(out, &Integrated { dir, changes })
}

fn our_hooks() -> Map<String, Value> {
    let v: Value = serde_json::from_str(HOOKS_JSON)
        .expect("shell/claude/hooks/hooks.json is valid JSON (tested)");
    v["hooks"]
        .as_object()
        .cloned()
        .expect("hooks.json has a hooks object")
}

/// A settings file's original bytes and its parsed top-level object.
type Settings = (Vec<u8>, Map<String, Value>);

fn read_settings(path: &Path) -> Result<Option<Settings>> {
    let Some(bytes) = crate::store::read_bytes(path)? else {
        return Ok(None);
    };
    let parse_err = |detail: String| {
        Error::invalid(
            "unparseable_settings",
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

/// Pretty JSON with a final newline: how conductor writes settings files.
fn encode(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON values serialize");
    b.push(b'\n');
    b
}

fn has_our_command(group: &Value) -> bool {
    group["hooks"]
        .as_array()
        .is_some_and(|hs| hs.iter().any(|h| h["command"] == HOOK_COMMAND))
}

fn install(dir: &Path) -> Result<Vec<String>> {
    let settings_path = dir.join("settings.json");
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join("commands").join("conductor.md");
    let existing = read_settings(&settings_path)?;
    // Refuse before changing anything: a different conductor.md is someone else's.
    let command_state = crate::store::read_bytes(&command_path)?;
    if let Some(b) = &command_state
        && b != COMMAND_MD.as_bytes()
        && !manifest_path.exists()
    {
        return Err(Error::invalid(
            "file_exists",
            format!(
                "{} exists and was not installed by conductor; move it away and retry",
                command_path.display()
            ),
        ));
    }
    let mut changes = Vec::new();
    let (original, mut settings) = match existing {
        Some((b, m)) => (Some(b), m),
        None => (None, Map::new()),
    };
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(Error::invalid(
            "unparseable_settings",
            format!(
                "`hooks` in {} is not an object; nothing was changed",
                settings_path.display()
            ),
        ));
    };
    let mut added = Vec::new();
    for (event, groups) in our_hooks() {
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err(Error::invalid(
                "unparseable_settings",
                format!(
                    "`hooks.{event}` in {} is not an array; nothing was changed",
                    settings_path.display()
                ),
            ));
        };
        if list.iter().any(has_our_command) {
            continue;
        }
        list.extend(groups.as_array().cloned().unwrap_or_default());
        added.push(event);
    }
    std::fs::create_dir_all(dir.join("commands")).ctx("create", &dir.join("commands"))?;
    if !added.is_empty() {
        let new_bytes = encode(&Value::Object(settings));
        // Keep the original bytes only when re-serializing would not reproduce them.
        if !manifest_path.exists() {
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
            let manifest = json!({"installed_by": format!("conductor {}", env!("CARGO_PKG_VERSION")), "settings": keep,
                                  "command_file": "commands/conductor.md", "hook_command": HOOK_COMMAND});
            write_atomic(&manifest_path, &encode(&manifest), None)?;
        }
        write_atomic(&settings_path, &new_bytes, Some(&settings_path))?;
        changes.push(format!(
            "{}: added {} hooks running `{HOOK_COMMAND}`",
            settings_path.display(),
            added.join(", ")
        ));
    }
    if command_state.as_deref() != Some(COMMAND_MD.as_bytes()) {
        write_atomic(&command_path, COMMAND_MD.as_bytes(), Some(&command_path))?;
        changes.push(format!(
            "{}: installed the /conductor command",
            command_path.display()
        ));
    }
    Ok(changes)
}

fn uninstall(dir: &Path) -> Result<Vec<String>> {
    let settings_path = dir.join("settings.json");
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join("commands").join("conductor.md");
    let manifest: Option<Value> =
        crate::store::read_bytes(&manifest_path)?.and_then(|b| serde_json::from_slice(&b).ok());
    let mut changes = Vec::new();
    if let Some((_, mut settings)) = read_settings(&settings_path)? {
        let mut removed = Vec::new();
        if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
            for (event, groups) in hooks.iter_mut() {
                let Some(list) = groups.as_array_mut() else {
                    continue;
                };
                let before = list.len();
                let mut touched = false;
                for g in list.iter_mut() {
                    if let Some(hs) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                        let n = hs.len();
                        hs.retain(|h| h["command"] != HOOK_COMMAND);
                        touched |= hs.len() != n;
                    }
                }
                list.retain(|g| {
                    g.get("hooks")
                        .and_then(Value::as_array)
                        .is_none_or(|hs| !hs.is_empty())
                });
                if touched || list.len() != before {
                    removed.push(event.clone());
                }
            }
            hooks.retain(|_, groups| groups.as_array().is_none_or(|l| !l.is_empty()));
        }
        if !removed.is_empty() {
            if settings
                .get("hooks")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                settings.remove("hooks");
            }
            let now = Value::Object(settings);
            let kept = manifest
                .as_ref()
                .map(|m| m["settings"].clone())
                .unwrap_or(Value::Null);
            let original_text = kept["original"].as_str();
            let original_value = original_text.and_then(|t| serde_json::from_str::<Value>(t).ok());
            if kept["existed"] == false && now.as_object().is_some_and(Map::is_empty) {
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
                write_atomic(&settings_path, &bytes, Some(&settings_path))?;
                changes.push(format!(
                    "{}: removed {} hooks running `{HOOK_COMMAND}`",
                    settings_path.display(),
                    removed.join(", ")
                ));
            }
        }
    }
    match crate::store::read_bytes(&command_path)? {
        Some(b) if b == COMMAND_MD.as_bytes() => {
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
    if manifest_path.exists() {
        std::fs::remove_file(&manifest_path).ctx("remove", &manifest_path)?;
    }
    let _ = std::fs::remove_dir(dir); // only if conductor left it empty
    Ok(changes)
}

/// Replace `path` atomically (temp file in the same directory, fsync, rename), keeping the
/// permissions of `mode_from` when it exists (0644 for a new file).
fn write_atomic(path: &Path, bytes: &[u8], mode_from: Option<&Path>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().expect("files live in .claude/");
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".conductor-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .ctx("create a temp file in", dir)?;
    tmp.write_all(bytes).ctx("write", tmp.path())?;
    let mode = mode_from
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .ctx("set permissions of", tmp.path())?;
    tmp.as_file().sync_all().ctx("sync", tmp.path())?;
    tmp.persist(path)
        .map_err(|e| Error::io("replace", path, e.error))?;
    crate::store::atomic::sync_dir(dir)
}
