//! `conductor integrate AGENT [--project DIR | --user] [--uninstall]`: install conductor's hooks
//! into an agent's settings: Claude Code `.claude/settings.json` (plus the `/conductor` command),
//! Cursor `.cursor/hooks.json`, Codex CLI `.codex/hooks.json`, Gemini CLI `.gemini/settings.json`.
//! Hooks are merged next to whatever is there; a settings file that does not parse is never
//! touched. Hook commands name the absolute path of this binary, so they do not depend on the
//! PATH the agent runs hooks with (re-running `integrate` updates them after a move).
//! `--uninstall` removes exactly the entries it added, and when nothing else changed in between,
//! restores the settings file byte for byte: the original bytes are kept in
//! `conductor-integration.json` beside it (mode 0600: settings files can hold API keys) when
//! re-serializing would not give them back.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Report;
use crate::output::Output;
use conductor::error::Reason;
use conductor::error::{Error, IoContext, Result};
use conductor::hooks::Agent;

/// The `/conductor` command file, as shipped in the Claude Code plugin.
pub const COMMAND_MD: &str = include_str!("../../shell/claude/commands/conductor.md");
/// The Claude Code plugin's hooks, merged into settings.json.
pub const CLAUDE_HOOKS: &str = include_str!("../../shell/claude/hooks/hooks.json");
/// Cursor's hooks.json entries.
pub const CURSOR_HOOKS: &str = include_str!("../../shell/cursor/hooks.json");
/// Codex CLI's hooks.json entries.
pub const CODEX_HOOKS: &str = include_str!("../../shell/codex/hooks.json");
/// Gemini CLI's settings.json hooks.
pub const GEMINI_HOOKS: &str = include_str!("../../shell/gemini/settings.json");
/// The manifest kept beside the settings file.
pub const MANIFEST: &str = "conductor-integration.json";

/// Install (or remove) an agent integration.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Where each agent's hooks go:\n  \
claude   .claude/settings.json (+ .claude/commands/conductor.md)\n  \
cursor   .cursor/hooks.json\n  \
codex    .codex/hooks.json (+ trust in $CODEX_HOME/config.toml)\n  \
gemini   .gemini/settings.json\n  \
opencode .opencode/plugins/conductor.js (--user: ~/.config/opencode/plugins/)\n  \
pi       ~/.pi/agent/extensions/conductor.ts, acting in the projects of \
~/.pi/agent/conductor-projects.json (--user: in every project; Pi 1.x loads a project's \
.pi/extensions/ only once the project is trusted)\n\
under the project directory, or under ~ with --user. The MCP server (`conductor mcp`) is \
registered beside them: claude .mcp.json (--user: ~/.claude.json), cursor .cursor/mcp.json, codex \
.codex/config.toml, gemini .gemini/settings.json, opencode opencode.json (--user: \
~/.config/opencode/opencode.json).\n\nExamples:\n  \
conductor integrate claude                 # this project: ./.claude/\n  \
conductor integrate codex --user           # every project: ~/.codex/hooks.json\n  \
conductor integrate cursor --uninstall     # remove exactly what was added\n\n\
Hook commands name this binary by its absolute path; run `integrate` again after moving it \
(`conductor doctor` reports an integration whose binary is gone).\n\n\
Last, a live check: in a throwaway conductor home (never yours), a throwaway session holds a \
canary file of the project, and the agent's own hook (the command its settings file names, or \
Pi's extension under the node Pi runs with) is driven with the agent's payload for an edit of \
it. It prints `live check: enforced`, or exactly why not (untrusted project, extension not \
loaded, wrong Node, binary moved, hook timed out). `conductor doctor` runs it for every \
integrated agent.")]
pub struct IntegrateArgs {
    /// Which agent to integrate with.
    #[arg(value_enum)]
    pub agent: Agent,
    /// Install into DIR/.AGENT/ [default: the current directory, also for `--project` alone].
    #[arg(long, value_name = "DIR", conflicts_with = "user", num_args = 0..=1, default_missing_value = ".")]
    pub project: Option<PathBuf>,
    /// Install into ~/.AGENT/ (every project of this user).
    #[arg(long)]
    pub user: bool,
    /// Remove what an earlier install added.
    #[arg(long)]
    pub uninstall: bool,
    /// Codex: mark the project trusted in Codex's config.toml even when it has a
    /// `.codex/config.toml` of its own or is marked untrusted (Codex runs project hooks only in
    /// trusted projects).
    #[arg(long)]
    pub trust_project: bool,
}

/// Where and how one agent keeps its hooks.
pub struct Target {
    pub agent: Agent,
    /// The agent's directory under the project or home (`.claude`).
    pub dir: &'static str,
    /// The settings file in it.
    pub file: &'static str,
    /// Cursor: entries are `{command, matcher}` directly; others nest `{matcher, hooks: [...]}`.
    flat: bool,
    template: &'static str,
}

/// Every agent's target.
pub fn target(agent: Agent) -> Target {
    let (dir, file, flat, template) = match agent {
        Agent::Claude => (".claude", "settings.json", false, CLAUDE_HOOKS),
        Agent::Cursor => (".cursor", "hooks.json", true, CURSOR_HOOKS),
        Agent::Codex => (".codex", "hooks.json", false, CODEX_HOOKS),
        Agent::Gemini => (".gemini", "settings.json", false, GEMINI_HOOKS),
        // A plugin file of their own (integrate_plugin.rs), no hooks document.
        Agent::Opencode => (
            ".opencode",
            "plugins/conductor.js",
            false,
            r#"{"hooks":{}}"#,
        ),
        Agent::Pi => (".pi", "extensions/conductor.ts", false, r#"{"hooks":{}}"#),
    };
    Target {
        agent,
        dir,
        file,
        flat,
        template,
    }
}

/// What changed.
pub struct Integrated {
    pub agent: Agent,
    pub dir: PathBuf,
    pub changes: Vec<String>,
    /// Whether the agent will load the integration here (Pi), said after the changes.
    pub notes: Vec<String>,
    /// The live check (`integrate_check`), after an install.
    pub check: Option<super::integrate_check::Check>,
}

impl Report for Integrated {
    fn to_json(&self) -> Value {
        let message = if self.changes.is_empty() {
            "Nothing to change.".to_string()
        } else {
            format!("{} integration updated.", self.agent.product())
        };
        let mut v = json!({"status": "ok", "agent": self.agent.name(), "directory": self.dir.display().to_string(),
               "changes": self.changes, "message": message});
        if !self.notes.is_empty() {
            v["notes"] = json!(self.notes);
        }
        if let Some(c) = &self.check {
            v["live_check"] = json!(c);
        }
        v
    }
    fn to_text(&self) -> String {
        let mut lines = if self.changes.is_empty() {
            vec![format!("Nothing to change in {}.", self.dir.display())]
        } else {
            self.changes.clone()
        };
        lines.extend(self.notes.iter().cloned());
        lines.extend(self.check.as_ref().map(|c| c.line()));
        lines.join("\n")
    }
}

/// Run `integrate`.
pub fn run(args: IntegrateArgs, out: &Output) -> Result<u8> {
    let root = if args.user {
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => {
                return Err(Error::invalid(
                    Reason::NoHome,
                    "HOME is not set; use --project DIR instead of --user",
                ));
            }
        }
    } else {
        match args.project.clone() {
            Some(p) if p.is_absolute() => p,
            Some(p) if p.as_os_str() == "." => conductor::host::current_dir()?,
            Some(p) => conductor::host::current_dir()?.join(p),
            None => conductor::host::current_dir()?,
        }
    };
    if !root.is_dir() {
        return Err(Error::invalid(
            Reason::InvalidDirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    if args.agent == Agent::Pi {
        let home = super::integrate_pi::home()?;
        let (mut notes, mut check) = (Vec::new(), None);
        let changes = if args.uninstall {
            super::integrate_pi::uninstall(&root, args.user, &home)?
        } else {
            super::integrate_pi::install(&root, args.user, &home, &hook_program()?)?
        };
        if !args.uninstall {
            let project = if args.user {
                conductor::host::current_dir()?
            } else {
                root.clone()
            };
            let cli = super::integrate_pi::pi_cli();
            let l = super::integrate_pi::loads_in(&project, &home, cli.as_ref());
            notes.push(format!(
                "Pi {}: {}",
                if l.loads {
                    "loads it here"
                } else {
                    "does NOT load it here"
                },
                l.detail
            ));
            check = Some(super::integrate_check::run(Agent::Pi, &project, args.user));
        }
        let dir = super::integrate_pi::extension_path(&home)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or(home);
        return super::print(
            out,
            &Integrated {
                agent: Agent::Pi,
                dir,
                changes,
                notes,
                check,
            },
        );
    }
    if super::integrate_plugin::is_plugin_agent(args.agent) {
        use super::integrate_plugin as plugin;
        let path = plugin::location(args.agent, &root, args.user);
        let changes = if args.agent == Agent::Opencode {
            super::integrate_mcp::opencode(&path, &root, args.user, args.uninstall)?
        } else if args.uninstall {
            plugin::uninstall(&path, &root)?
        } else {
            plugin::install(args.agent, &path, &hook_program()?)?
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or(root);
        let agent = args.agent;
        return super::print(
            out,
            &Integrated {
                agent,
                dir,
                changes,
                notes: Vec::new(),
                check: None,
            },
        );
    }
    let t = target(args.agent);
    let dir = match args.agent {
        // Codex reads its user hooks from $CODEX_HOME (default ~/.codex).
        Agent::Codex if args.user => super::codex_trust::codex_home()?,
        _ => root.join(t.dir),
    };
    // The MCP server is registered after the hooks and removed before them (a shared settings
    // file then gets its original bytes back from the hooks' manifest).
    let mcp = super::integrate_mcp::target(args.agent, &root, args.user);
    let project = (!args.user).then_some(root.as_path());
    let check: Option<super::integrate_check::Check> = None;
    let changes = if args.uninstall {
        let mut c = super::integrate_mcp::uninstall(&mcp, &dir.join(MANIFEST))?;
        if args.agent == Agent::Codex {
            c.extend(codex(&t, &dir, project, &args)?);
        } else {
            c.extend(uninstall(&t, &dir)?);
        }
        c
    } else {
        super::integrate_mcp::check(&mcp)?;
        let mut c = if args.agent == Agent::Codex {
            codex(&t, &dir, project, &args)?
        } else {
            install(&t, &dir, &hook_command(args.agent)?)?
        };
        c.extend(super::integrate_mcp::install(
            &mcp,
            &super::integrate_mcp::exe()?,
            &dir.join(MANIFEST),
        )?);
        c
    };
    let check = match check {
        Some(c) => Some(c),
        None if args.uninstall => None,
        None => {
            let here = match project {
                Some(p) => p.to_path_buf(),
                None => conductor::host::current_dir()?,
            };
            Some(super::integrate_check::run(args.agent, &here, args.user))
        }
    };
    super::print(
        out,
        &Integrated {
            agent: args.agent,
            dir,
            changes,
            notes: Vec::new(),
            check,
        },
    )
}

/// Codex: the hooks, then their trust in Codex's config.toml (recorded in the manifest, so that
/// `--uninstall` puts config.toml back as it was).
fn codex(
    t: &Target,
    dir: &Path,
    project: Option<&Path>,
    args: &IntegrateArgs,
) -> Result<Vec<String>> {
    let manifest_path = dir.join(MANIFEST);
    let read_manifest = || -> Result<Option<Value>> {
        Ok(conductor::store::read_bytes(&manifest_path)?
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok()))
    };
    if args.uninstall {
        let record = read_manifest()?.map(|m| m["codex_trust"].clone());
        let mut changes = uninstall(t, dir)?;
        if let Some(r) = record.filter(|r| !r.is_null()) {
            changes.extend(super::codex_trust::uninstall(&r)?);
        }
        let _ = std::fs::remove_dir(dir); // only if conductor left it empty
        return Ok(changes);
    }
    let mut changes = install(t, dir, &hook_command(Agent::Codex)?)?;
    let hooks_path = dir.join(t.file);
    let Some((_, settings)) = read_settings(&hooks_path)? else {
        return Ok(changes);
    };
    let mut manifest = read_manifest()?.unwrap_or_else(|| {
        json!({"installed_by": format!("conductor {}", env!("CARGO_PKG_VERSION")), "agent": "codex"})
    });
    let (record, more) = super::codex_trust::install(
        &hooks_path,
        &Value::Object(settings),
        project,
        args.trust_project,
        manifest.get("codex_trust"),
    )?;
    if manifest.get("codex_trust") != Some(&record) {
        manifest["codex_trust"] = record;
        write_atomic(&manifest_path, &encode(&manifest), 0o600, None)?;
    }
    changes.extend(more);
    Ok(changes)
}

/// The absolute path of this binary, symlinks resolved.
pub fn hook_program() -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| Error::io("find", Path::new("conductor"), e))?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.to_str().map(str::to_string).ok_or_else(|| {
        Error::invalid(
            Reason::InvalidDirectory,
            "the path of the conductor binary is not UTF-8",
        )
    })
}

/// `'/abs/path/to/conductor' hook AGENT`, quoted for the shell only when it must be.
fn hook_command(agent: Agent) -> Result<String> {
    let path = hook_program()?;
    let path = path.as_str();
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,@%".contains(c));
    let quoted = if plain {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    };
    Ok(format!("{quoted} hook {}", agent.name()))
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

fn read_settings(path: &Path) -> Result<Option<Settings>> {
    let Some(bytes) = conductor::store::read_bytes(path)? else {
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

/// Pretty JSON with a final newline: how conductor writes settings files.
fn encode(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON values serialize");
    b.push(b'\n');
    b
}

fn install(t: &Target, dir: &Path, command: &str) -> Result<Vec<String>> {
    let settings_path = dir.join(t.file);
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join("commands").join("conductor.md");
    let existing = read_settings(&settings_path)?;
    let with_command_file = t.agent == Agent::Claude;
    // Refuse before changing anything: a different conductor.md is someone else's.
    let command_state = if with_command_file {
        conductor::store::read_bytes(&command_path)?
    } else {
        None
    };
    if let Some(b) = &command_state
        && b != COMMAND_MD.as_bytes()
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
                manifest["command_file"] = json!("commands/conductor.md");
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
    if with_command_file && command_state.as_deref() != Some(COMMAND_MD.as_bytes()) {
        write_atomic(
            &command_path,
            COMMAND_MD.as_bytes(),
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

fn uninstall(t: &Target, dir: &Path) -> Result<Vec<String>> {
    let settings_path = dir.join(t.file);
    let manifest_path = dir.join(MANIFEST);
    let command_path = dir.join("commands").join("conductor.md");
    let manifest: Option<Value> =
        conductor::store::read_bytes(&manifest_path)?.and_then(|b| serde_json::from_slice(&b).ok());
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
    if t.agent == Agent::Claude {
        match conductor::store::read_bytes(&command_path)? {
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

/// Replace `path` atomically (temp file in the same directory, fsync, rename), keeping the
/// permissions of `mode_from` when it exists, else `mode`.
pub(crate) fn write_atomic(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    mode_from: Option<&Path>,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().expect("files live in the agent's directory");
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
        .unwrap_or(mode);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .ctx("set permissions of", tmp.path())?;
    tmp.as_file().sync_all().ctx("sync", tmp.path())?;
    tmp.persist(path)
        .map_err(|e| Error::io("replace", path, e.error))?;
    Ok(conductor::store::atomic::sync_dir(dir)?)
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
        for a in [Agent::Claude, Agent::Cursor, Agent::Codex, Agent::Gemini] {
            let t = target(a);
            let hooks = our_hooks(&t, "/x/conductor hook test");
            assert!(!hooks.is_empty());
            let v: Value = serde_json::from_str(t.template).unwrap();
            for (_, c) in installed_commands(&t, &v) {
                assert!(our_program(&c, a).is_some(), "{c}");
            }
        }
    }
}
