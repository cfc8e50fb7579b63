//! Pi (`conductor integrate pi`): Pi speaks no MCP, the extension is its whole integration.
//! Pi loads a project's `.pi/extensions/` only after the project is
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

use super::{Changes, Check, plugin, write_atomic};
use crate::error::{Error, Reason, Result};
use crate::health::Finding;

/// The line of the extension that names the project list.
const PROJECTS_LINE: &str = "const PROJECTS = ";
/// The project list, beside the extensions directory (Pi loads every file in that directory).
pub const PROJECTS_FILE: &str = "conductor-projects.json";

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
    plugin::render(EXTENSION, program).replacen(
        &format!("{PROJECTS_LINE}\"\";"),
        &format!("{PROJECTS_LINE}{quoted};"),
        1,
    )
}

/// The project list: the canonical directories, and whether it acts everywhere (`--user`).
#[derive(Debug, Default, PartialEq)]
pub struct Projects {
    pub projects: Vec<String>,
    pub everywhere: bool,
}

/// Read the project list (absent or unreadable: empty).
pub fn projects(home: &Path) -> Projects {
    let v: Value = std::fs::read(projects_path(home))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    Projects {
        projects: v["projects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect(),
        everywhere: v["everywhere"] == json!(true),
    }
}

fn write_projects(home: &Path, s: &Projects) -> Result<()> {
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
pub fn covers(s: &Projects, dir: &Path) -> bool {
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
pub fn install_at(root: &Path, user: bool, home: &Path, program: &str) -> Result<Vec<String>> {
    let path = extension_path(home);
    let mut changes = Vec::new();
    let want = render(program, &projects_path(home));
    match crate::store::read_bytes(&path)? {
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
    let mut s = projects(home);
    if user {
        if !s.everywhere {
            s.everywhere = true;
            write_projects(home, &s)?;
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
            write_projects(home, &s)?;
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
pub fn uninstall_at(root: &Path, user: bool, home: &Path) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    if !user {
        let old = project_extension_path(root);
        if crate::store::read_bytes(&old)?.is_some() {
            changes.extend(plugin::uninstall(&old, root)?);
        }
    }
    let mut s = projects(home);
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
        write_projects(home, &s)?;
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

/// The directory `integrate pi` reports: the user-level extensions directory.
fn dir(home: &Path) -> PathBuf {
    extension_path(home)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| home.to_path_buf())
}

/// Install (or update) the user-level extension, acting in `scope`'s project (every project with
/// `--user`).
pub fn install(scope: &super::Scope) -> Result<Changes> {
    let home = home()?;
    let changes = install_at(&scope.root, scope.user, &home, &super::program()?)?;
    Ok(Changes {
        dir: dir(&home),
        changes,
    })
}

/// Stop the extension acting in `scope`'s project (or everywhere); remove it when it acts nowhere.
pub fn uninstall(scope: &super::Scope) -> Result<Changes> {
    let home = home()?;
    let changes = uninstall_at(&scope.root, scope.user, &home)?;
    Ok(Changes {
        dir: dir(&home),
        changes,
    })
}

/// After an install: whether Pi loads the extension in `project`, as a line for `integrate`.
pub fn note(project: &Path) -> Result<String> {
    let home = home()?;
    let cli = pi_cli();
    let l = loads_in(project, &home, cli.as_ref());
    Ok(format!(
        "Pi {}: {}",
        if l.loads {
            "loads it here"
        } else {
            "does NOT load it here"
        },
        l.detail
    ))
}

/// `doctor`: whether Pi loads conductor's extension in `root` (user-level, or a project extension
/// an earlier conductor installed, which Pi 1.x loads only in a trusted project). Seen once, from
/// the current directory (`user`: the home seen as `--user`, nothing).
pub fn check(root: &Path, user: bool) -> Check {
    loads_check(root, user).0
}

/// [`check`], and the extension file when Pi loads it here (what the live check then drives).
pub fn loads_check(root: &Path, user: bool) -> (Check, Option<PathBuf>) {
    let Ok(home) = home() else {
        return (Check::default(), None);
    };
    if user {
        return (Check::default(), None);
    }
    let here = root;
    let user_ext = extension_path(&home);
    let project_ext = project_extension_path(here);
    let file = if plugin::is_installed(&user_ext) {
        user_ext
    } else if plugin::is_installed(&project_ext) {
        project_ext
    } else {
        return (Check::default(), None);
    };
    let cli = pi_cli();
    let l = loads_in(here, &home, cli.as_ref());
    let version = cli
        .as_ref()
        .and_then(|c| c.version.clone())
        .map_or("Pi (not on PATH)".to_string(), |v| format!("Pi {v}"));
    // Not acting in a directory that was never integrated is by design, not a problem.
    let by_design = l.detail.starts_with("extension not active here");
    let findings = vec![Finding {
        file: file.display().to_string(),
        ok: l.loads || by_design,
        detail: format!(
            "{version} {} here: {}",
            if l.loads {
                "loads the extension"
            } else {
                "does NOT load the extension"
            },
            l.detail
        ),
        repair: (!l.loads && !by_design)
            .then(|| "run `conductor integrate pi` in this project".to_string()),
    }];
    (
        Check {
            hooks: true,
            findings,
        },
        l.loads.then_some(file),
    )
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
    let path = crate::health::which("pi")?;
    Some(PiCli {
        version: package_version(&path).or_else(|| version_of(&path)),
        node: crate::health::which("node").and_then(|n| version_of(&n)),
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
    let s = projects(home);
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
        let s = Projects {
            projects: vec!["/p/a".into()],
            everywhere: false,
        };
        assert!(covers(&s, Path::new("/p/a")));
        assert!(covers(&s, Path::new("/p/a/src")));
        assert!(!covers(&s, Path::new("/p/ab")));
        assert!(!covers(&s, Path::new("/p")));
    }
}
