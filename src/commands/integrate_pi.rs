//! `conductor integrate pi`: Pi loads a project's `.pi/extensions/` only after the project is
//! trusted (Pi 1.x: `docs/security.md`, "Resources protected by project trust"; `pi -p` in an
//! untrusted project loads none of them), but it loads the user-level extensions in
//! `~/.pi/agent/extensions/` (or `$PI_CODING_AGENT_DIR/extensions/`) everywhere, without a trust
//! prompt. So conductor's extension goes there, in Pi 0.x and 1.x alike, scoped: it acts only in
//! the projects listed in `conductor-projects.json` beside the extensions directory (`integrate pi`
//! adds the current project, `--uninstall` removes it), everywhere with `--user`, and in every
//! workflow worker. An extension an earlier conductor put in the project's `.pi/extensions/` is
//! removed on install (it would make Pi ask for trust, and run the hooks twice once trusted).
//! `loads_in` says whether Pi will load the extension in a project, and why not.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::integrate::write_atomic;
use super::integrate_plugin as plugin;
use conductor::error::{Error, Reason, Result};
use conductor::hooks::Agent;

/// The line of the extension that names the project list.
const PROJECTS_LINE: &str = "const PROJECTS = ";
/// The project list, beside the extensions directory (Pi loads every file in that directory).
pub const PROJECTS_FILE: &str = "conductor-projects.json";

/// Pi's agent directory: `$PI_CODING_AGENT_DIR`, or `HOME/.pi/agent`.
pub fn agent_dir(home: &Path) -> PathBuf {
    std::env::var_os("PI_CODING_AGENT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".pi/agent"))
}

/// Where conductor's extension is installed.
pub fn extension_path(home: &Path) -> PathBuf {
    agent_dir(home).join("extensions/conductor.ts")
}

/// The project list the extension reads.
pub fn projects_path(home: &Path) -> PathBuf {
    agent_dir(home).join(PROJECTS_FILE)
}

/// Where an earlier conductor installed the extension in a project.
pub fn project_extension_path(project: &Path) -> PathBuf {
    project.join(".pi/extensions/conductor.ts")
}

/// The user's home directory.
pub fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            Error::invalid(
                Reason::NoHome,
                "HOME is not set; Pi's extensions live under ~/.pi/agent (or set PI_CODING_AGENT_DIR)",
            )
        })
}

/// The extension's text, running `program` and reading the project list at `projects`.
pub fn render(program: &str, projects: &Path) -> String {
    let quoted = serde_json::to_string(&projects.display().to_string()).expect("strings");
    plugin::render(Agent::Pi, program).replacen(
        &format!("{PROJECTS_LINE}\"\";"),
        &format!("{PROJECTS_LINE}{quoted};"),
        1,
    )
}

/// The project list: the canonical directories, and whether it acts everywhere (`--user`).
#[derive(Debug, Default, PartialEq)]
pub struct Scope {
    pub projects: Vec<String>,
    pub everywhere: bool,
}

/// Read the project list (absent or unreadable: empty).
pub fn scope(home: &Path) -> Scope {
    let v: Value = std::fs::read(projects_path(home))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    Scope {
        projects: v["projects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect(),
        everywhere: v["everywhere"] == json!(true),
    }
}

fn write_scope(home: &Path, s: &Scope) -> Result<()> {
    let mut b = serde_json::to_vec_pretty(&json!({
        "about": "the projects where conductor's Pi extension (extensions/conductor.ts) acts; `conductor integrate pi [--user] [--uninstall]` edits this list",
        "projects": s.projects, "everywhere": s.everywhere}))
    .expect("JSON");
    b.push(b'\n');
    write_atomic(&projects_path(home), &b, 0o644, None)
}

fn canonical(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string()
}

/// True when the extension acts in `dir` under scope `s`.
pub fn covers(s: &Scope, dir: &Path) -> bool {
    let dir = canonical(dir);
    s.everywhere
        || s.projects.iter().any(|p| {
            dir == *p
                || dir
                    .strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with('/') || p.ends_with('/'))
        })
}

/// Install the user-level extension and add `root` to its projects (or every project with
/// `user`); remove conductor's extension from the project's `.pi/extensions/`.
pub fn install(root: &Path, user: bool, home: &Path, program: &str) -> Result<Vec<String>> {
    let path = extension_path(home);
    let mut changes = Vec::new();
    let want = render(program, &projects_path(home));
    match conductor::store::read_bytes(&path)? {
        Some(b) if b == want.as_bytes() => {}
        Some(b) if plugin::installed_program(&String::from_utf8_lossy(&b)).is_none() => {
            return Err(Error::invalid(
                Reason::FileExists,
                format!(
                    "{} exists and was not installed by conductor; move it away and retry",
                    path.display()
                ),
            ));
        }
        _ => {
            write_atomic(&path, want.as_bytes(), 0o644, Some(&path))?;
            changes.push(format!(
                "{}: installed the Pi extension running `{program} hook pi` (a user-level extension: Pi loads it without a project trust prompt)",
                path.display()
            ));
        }
    }
    let mut s = scope(home);
    if user {
        if !s.everywhere {
            s.everywhere = true;
            write_scope(home, &s)?;
            changes.push(format!(
                "{}: the extension acts in every project",
                projects_path(home).display()
            ));
        }
    } else {
        let dir = canonical(root);
        if !s.projects.contains(&dir) {
            s.projects.push(dir.clone());
            s.projects.sort();
            write_scope(home, &s)?;
            changes.push(format!(
                "{}: the extension acts in {dir}",
                projects_path(home).display()
            ));
        }
    }
    if !user {
        let old = project_extension_path(root);
        if plugin::is_installed(&old) {
            for c in plugin::uninstall(&old, root)? {
                changes.push(format!(
                    "{c} (an earlier conductor's project extension: Pi 1.x loads it only in a trusted project)"
                ));
            }
        }
    }
    Ok(changes)
}

/// Remove `root` from the projects (everywhere with `user`), and the extension when no project is
/// left.
pub fn uninstall(root: &Path, user: bool, home: &Path) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    if !user {
        let old = project_extension_path(root);
        if conductor::store::read_bytes(&old)?.is_some() {
            changes.extend(plugin::uninstall(&old, root)?);
        }
    }
    let mut s = scope(home);
    let before = (s.projects.len(), s.everywhere);
    if user {
        s.everywhere = false;
    } else {
        let dir = canonical(root);
        s.projects.retain(|p| *p != dir);
    }
    let path = extension_path(home);
    if s.projects.is_empty() && !s.everywhere {
        if projects_path(home).exists() {
            std::fs::remove_file(projects_path(home))
                .map_err(|e| Error::io("remove", &projects_path(home), e))?;
        }
        changes.extend(plugin::uninstall(&path, home)?);
    } else if before != (s.projects.len(), s.everywhere) {
        write_scope(home, &s)?;
        changes.push(format!(
            "{}: the extension no longer acts in {}",
            projects_path(home).display(),
            if user {
                "every project".to_string()
            } else {
                canonical(root)
            }
        ));
    }
    Ok(changes)
}

/// The Pi on PATH: its version (`pi --version`, printed on stderr) and the Node it runs with.
#[derive(Debug, Clone)]
pub struct PiCli {
    pub path: PathBuf,
    pub version: Option<String>,
    /// `node --version` of the node on PATH (Pi's `#!/usr/bin/env node`).
    pub node: Option<String>,
}

impl PiCli {
    /// The major version of Pi.
    pub fn major(&self) -> Option<u64> {
        self.version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
    }
    /// Why this Pi cannot run on its Node (Pi 1.x needs Node 22.19 or newer).
    pub fn wrong_node(&self) -> Option<String> {
        if self.major().unwrap_or(0) < 1 {
            return None;
        }
        let Some(node) = &self.node else {
            return Some(format!(
                "wrong Node: Pi {} needs Node 22.19 or newer and there is no `node` on PATH",
                self.version.as_deref().unwrap_or("?")
            ));
        };
        let nums: Vec<u64> = node
            .trim_start_matches('v')
            .split('.')
            .filter_map(|n| n.parse().ok())
            .collect();
        let old = nums.first().copied().unwrap_or(0) < 22
            || (nums.first() == Some(&22) && nums.get(1).copied().unwrap_or(0) < 19);
        old.then(|| {
            format!(
                "wrong Node: Pi {} ({}) needs Node 22.19 or newer, the node on PATH is {node}",
                self.version.as_deref().unwrap_or("?"),
                self.path.display()
            )
        })
    }
}

fn version_of(program: &Path) -> Option<String> {
    let out = std::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.split_whitespace()
        .map(|w| w.trim_start_matches('v'))
        .find(|w| w.split('.').count() >= 2 && w.split('.').all(|n| n.parse::<u64>().is_ok()))
        .map(|w| format!("{}{w}", if program.ends_with("node") { "v" } else { "" }))
}

/// Pi's version from the package.json of the package its program belongs to (no Node needed:
/// a Pi that cannot start on the Node at hand still has a version).
fn package_version(program: &Path) -> Option<String> {
    let real = std::fs::canonicalize(program).ok()?;
    real.ancestors().skip(1).take(6).find_map(|d| {
        let v: Value = serde_json::from_slice(&std::fs::read(d.join("package.json")).ok()?).ok()?;
        v["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("pi-coding-agent"))
            .then(|| v["version"].as_str().map(str::to_string))
            .flatten()
    })
}

/// The Pi on PATH, if any.
pub fn pi_cli() -> Option<PiCli> {
    let path = super::doctor_tools::which("pi")?;
    Some(PiCli {
        version: package_version(&path).or_else(|| version_of(&path)),
        node: super::doctor_tools::which("node").and_then(|n| version_of(&n)),
        path,
    })
}

/// Whether Pi will load conductor's extension in `project`.
#[derive(Debug, Clone)]
pub struct Loads {
    pub loads: bool,
    pub detail: String,
}

/// Whether Pi trusts `project` (Pi 1.x): a `--approve`-less run's decision, from the agent
/// directory's `trust.json` (closest saved decision) and `defaultProjectTrust`.
pub fn trusted(project: &Path, home: &Path) -> bool {
    let dir = agent_dir(home);
    let trust: Value = std::fs::read(dir.join("trust.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let mut cur = Some(PathBuf::from(canonical(project)));
    while let Some(d) = cur {
        if let Some(b) = trust.get(d.display().to_string()).and_then(Value::as_bool) {
            return b;
        }
        cur = d.parent().map(Path::to_path_buf);
    }
    let settings: Value = std::fs::read(dir.join("settings.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    settings["defaultProjectTrust"] == json!("always")
}

/// Whether Pi (`cli`, when known) loads conductor's extension in `project`, and why not.
pub fn loads_in(project: &Path, home: &Path, cli: Option<&PiCli>) -> Loads {
    let user_ext = extension_path(home);
    let s = scope(home);
    if let Some(why) = cli.and_then(PiCli::wrong_node) {
        return Loads {
            loads: false,
            detail: format!("Pi does not start: {why}"),
        };
    }
    if plugin::is_installed(&user_ext) {
        if covers(&s, project) {
            return Loads {
                loads: true,
                detail: format!(
                    "Pi loads the user-level extension {} in {} (no project trust needed)",
                    user_ext.display(),
                    canonical(project)
                ),
            };
        }
        return Loads {
            loads: false,
            detail: format!(
                "extension not active here: {} is not in {} (run `conductor integrate pi` in it, or `--user`)",
                canonical(project),
                projects_path(home).display()
            ),
        };
    }
    let old = project_extension_path(project);
    if plugin::is_installed(&old) {
        let v1 = cli.and_then(PiCli::major).unwrap_or(1) >= 1;
        if v1 && !trusted(project, home) {
            return Loads {
                loads: false,
                detail: format!(
                    "untrusted project: Pi 1.x loads {} only in a trusted project, and `pi -p` never asks (run `conductor integrate pi` again to install it at user level)",
                    old.display()
                ),
            };
        }
        return Loads {
            loads: true,
            detail: format!("Pi loads the project extension {}", old.display()),
        };
    }
    Loads {
        loads: false,
        detail: "extension not loaded: conductor's Pi extension is not installed (run `conductor integrate pi`)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_line_is_filled_in() {
        let t = render(
            "/bin/conductor",
            Path::new("/h/.pi/agent/conductor-projects.json"),
        );
        assert!(t.contains("const PROJECTS = \"/h/.pi/agent/conductor-projects.json\";"));
        assert_eq!(
            plugin::installed_program(&t).as_deref(),
            Some("/bin/conductor")
        );
    }

    #[test]
    fn a_project_covers_its_subdirectories_only() {
        let s = Scope {
            projects: vec!["/p/a".into()],
            everywhere: false,
        };
        assert!(covers(&s, Path::new("/p/a")));
        assert!(covers(&s, Path::new("/p/a/src")));
        assert!(!covers(&s, Path::new("/p/ab")));
        assert!(!covers(&s, Path::new("/p")));
    }
}
