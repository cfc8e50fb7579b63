//! Running an installed agent in the sandbox. The sandbox shows the host's `/usr`, `/bin`,
//! `/lib*` and `/etc` only, with a fixed `PATH`, so an agent installed elsewhere (`npm -g` with a
//! prefix in the home, `~/.opencode/bin`, a Node from nvm) is not found there. The dispatcher
//! resolves the agent command's program on its own `PATH`, and its script interpreter (`#!/usr/
//! bin/env node`), and shows each one's install tree read-only at the same path, with a link named
//! after the program in a directory of its own that comes first on the sandbox's `PATH`
//! ([`SANDBOX_BIN`]). Nothing else of the host's home becomes visible: a tree is the npm package
//! (`…/node_modules/NAME`) or the program's own directory, never the home or one of its parents.

use std::path::{Component, Path, PathBuf};

/// Where a sandboxed job's private HOME appears (bound read-write from [`super::Layout::job_home`]).
pub const SANDBOX_HOME: &str = "/run/conductor/home";

/// The sandbox directory (first on its `PATH`) holding a link for each resolved program.
pub const SANDBOX_BIN: &str = "/run/conductor/bin";

/// The directories of the sandbox's fixed `PATH`.
const SANDBOX_PATH_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Host directories every sandbox shows already.
const VISIBLE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// What a sandbox needs to run a program of the host.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposed {
    /// Host trees to bind read-only at the same path.
    pub trees: Vec<PathBuf>,
    /// (link name in [`SANDBOX_BIN`], target path).
    pub links: Vec<(String, PathBuf)>,
}

/// The first word of a shell command, when it is a plain program name (no path, no shell syntax).
pub fn program_of(script: &str) -> Option<&str> {
    let mut words = script.split_whitespace();
    let mut first = words.next()?;
    // `env VAR=x prog ...` and `exec prog`: the program is further on.
    while first == "exec" || first == "env" || first.contains('=') {
        first = words.next()?;
    }
    let plain = first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c));
    plain.then_some(first)
}

/// Find `name` on `path_var` (a `PATH` value): the first executable file.
pub fn which(name: &str, path_var: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn visible(p: &Path) -> bool {
    VISIBLE.iter().any(|v| p.starts_with(v))
}

/// The install tree of a program at its canonical path `real`: the npm package it belongs to, or
/// its directory; `None` when that would be the home, `/`, or one of the home's parents (then
/// only the file itself is shown).
fn tree_of(real: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let comps: Vec<Component> = real.components().collect();
    if let Some(i) = comps.iter().position(|c| c.as_os_str() == "node_modules")
        && i + 1 < comps.len() - 1
    {
        let scoped = comps[i + 1].as_os_str().to_string_lossy().starts_with('@');
        let end = if scoped { i + 3 } else { i + 2 };
        if end < comps.len() {
            return Some(comps[..end].iter().collect());
        }
    }
    let dir = real.parent()?;
    let too_wide = dir == Path::new("/") || home.is_some_and(|h| h.starts_with(dir));
    (!too_wide).then(|| dir.to_path_buf())
}

/// The interpreter a script names on its `#!` line (`/usr/bin/env node` → `node`).
fn interpreter(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    let line = text.strip_prefix("#!")?.lines().next()?.trim().to_string();
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        words.find(|w| !w.starts_with('-')).map(str::to_string)
    } else {
        Some(first.to_string())
    }
}

/// What the sandbox needs to run `program` (a name looked up on `path_var`, the dispatcher's
/// `PATH`) and its interpreter. Empty when the program is not found or the sandbox shows it.
pub fn expose(program: &str, path_var: &std::ffi::OsStr, home: Option<&Path>) -> Exposed {
    let mut out = Exposed::default();
    let mut todo = vec![program.to_string()];
    while let Some(name) = todo.pop() {
        if out.links.iter().any(|(n, _)| *n == name) || out.links.len() > 4 {
            continue;
        }
        let found = if name.contains('/') {
            Some(PathBuf::from(&name))
        } else {
            which(&name, path_var)
        };
        let Some(found) = found else { continue };
        let Ok(real) = std::fs::canonicalize(&found) else {
            continue;
        };
        if let Some(i) = interpreter(&real) {
            todo.push(i);
        }
        let on_path = found
            .parent()
            .is_some_and(|d| SANDBOX_PATH_DIRS.iter().any(|p| d == Path::new(p)));
        if visible(&real) {
            if on_path {
                continue;
            }
        } else {
            let tree = tree_of(&real, home).unwrap_or_else(|| real.clone());
            if !out.trees.iter().any(|t| real.starts_with(t)) {
                out.trees.push(tree);
            }
        }
        let link = Path::new(&name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(name.clone());
        out.links.push((link, real));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn program_names() {
        assert_eq!(program_of("opencode run --agent 'x'"), Some("opencode"));
        assert_eq!(program_of("env A=1 exec pi -p"), Some("pi"));
        assert_eq!(program_of("./agent.sh"), None);
        assert_eq!(program_of("\"$X\" run"), None);
    }

    #[test]
    fn an_npm_package_in_the_home_and_its_node() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let pkg = home.join(".npm/lib/node_modules/@scope/tool");
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::create_dir_all(home.join(".npm/bin")).unwrap();
        let script = pkg.join("bin/tool.js");
        std::fs::write(&script, "#!/usr/bin/env mynode\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&script, home.join(".npm/bin/tool")).unwrap();
        let nvm = home.join(".nvm/v22/bin");
        std::fs::create_dir_all(&nvm).unwrap();
        std::fs::write(nvm.join("mynode"), "\x7fELF").unwrap();
        std::fs::set_permissions(nvm.join("mynode"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let path = std::env::join_paths([home.join(".npm/bin"), nvm.clone()]).unwrap();
        let e = expose("tool", &path, Some(&home));
        let real = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(e.trees, vec![real(&pkg), real(&nvm)]);
        assert_eq!(e.links[0], ("tool".to_string(), real(&script)));
        assert_eq!(e.links[1].0, "mynode");
        // A program right in the home: only the file, never the home.
        std::fs::write(home.join("agent"), "x").unwrap();
        std::fs::set_permissions(home.join("agent"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let e = expose("agent", home.as_os_str(), Some(&home));
        assert_eq!(e.trees, vec![real(&home.join("agent"))]);
        // A link elsewhere to a program the sandbox shows: only the link.
        std::os::unix::fs::symlink("/bin/sh", home.join(".npm/bin/mysh")).unwrap();
        let e = expose("mysh", &path, Some(&home));
        assert!(e.trees.is_empty());
        assert_eq!(e.links.len(), 1);
        // What the sandbox shows anyway needs nothing.
        assert_eq!(
            expose("sh", std::ffi::OsStr::new("/bin:/usr/bin"), None),
            Exposed::default()
        );
        assert_eq!(expose("no-such-program-x", &path, None), Exposed::default());
    }
}
