//! The plugin files of the agents that take no hook commands but load JS/TS modules from a
//! directory (OpenCode's plugin and Pi's extension: their modules say where): conductor installs
//! one file of its own there. The file
//! names this binary by its absolute path (one line, `const CONDUCTOR = "...";`) and starts with a
//! marker line; `--uninstall` removes only a file with that marker, and the directories conductor
//! created if they are left empty.

use std::path::Path;

use super::write_atomic;
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::hooks::Agent;

/// The first line of every file conductor installs this way.
const MARKER: &str = "// conductor-integration:";
const PROGRAM_LINE: &str = "const CONDUCTOR = ";

/// The file's text with `program` as the conductor it runs.
pub fn render(template: &str, program: &str) -> String {
    let quoted = serde_json::to_string(program).expect("strings serialize");
    template.replacen(
        &format!("{PROGRAM_LINE}\"conductor\";"),
        &format!("{PROGRAM_LINE}{quoted};"),
        1,
    )
}

/// The conductor an installed file runs, when it is conductor's file.
pub fn installed_program(text: &str) -> Option<String> {
    if !text.starts_with(MARKER) {
        return None;
    }
    let line = text.lines().find(|l| l.starts_with(PROGRAM_LINE))?;
    let v = line[PROGRAM_LINE.len()..].trim().trim_end_matches(';');
    serde_json::from_str(v).ok()
}

/// True when `path` is conductor's file (installed by `integrate`).
pub fn is_installed(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| installed_program(&t).is_some())
}

/// Install (or update) `agent`'s file (its `noun`: plugin, extension) from its `template`.
pub fn install(
    agent: Agent,
    noun: &str,
    template: &str,
    path: &Path,
    program: &str,
) -> Result<Vec<String>> {
    let want = render(template, program);
    match crate::store::read_bytes(path)? {
        Some(b) if b == want.as_bytes() => return Ok(Vec::new()),
        Some(b) if installed_program(&String::from_utf8_lossy(&b)).is_none() => {
            return Err(Error::invalid(
                Reason::FileExists,
                format!(
                    "{} exists and was not installed by conductor; move it away and retry",
                    path.display()
                ),
            ));
        }
        _ => {}
    }
    write_atomic(path, want.as_bytes(), 0o644, Some(path))?;
    Ok(vec![format!(
        "{}: installed the {} {} running `{program} hook {}`",
        path.display(),
        agent.product(),
        noun,
        agent.name()
    )])
}

/// Remove conductor's file, and the directories up to `stop` that it leaves empty.
pub fn uninstall(path: &Path, stop: &Path) -> Result<Vec<String>> {
    let Some(b) = crate::store::read_bytes(path)? else {
        return Ok(Vec::new());
    };
    if installed_program(&String::from_utf8_lossy(&b)).is_none() {
        return Ok(vec![format!(
            "{}: left in place (not conductor's file)",
            path.display()
        )]);
    }
    std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))?;
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == stop || !d.starts_with(stop) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(vec![format!("{}: removed", path.display())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_line_round_trips() {
        for a in [super::super::opencode::PLUGIN, super::super::pi::EXTENSION] {
            let t = render(a, "/opt/my \"tools\"/conductor");
            assert_eq!(
                installed_program(&t).as_deref(),
                Some("/opt/my \"tools\"/conductor")
            );
            assert_eq!(
                installed_program(&render(a, "conductor")).as_deref(),
                Some("conductor")
            );
        }
        assert!(installed_program("const CONDUCTOR = \"x\";").is_none());
    }
}
