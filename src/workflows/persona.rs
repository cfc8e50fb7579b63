//! Personas from the agent files people already keep: `.claude/agents/NAME.md` (Claude Code)
//! or `.pi/agents/NAME.md` (pi's agent-team), with YAML front matter `name`, `description` and
//! `tools` (a list, or a comma-separated string); the body is the system prompt. A persona that
//! names no such file is a role: the string itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Reason;
use crate::error::{Error, Result};

/// A persona, resolved for one state run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Persona {
    /// The persona as the template names it.
    pub persona: String,
    /// The agent's name (front matter `name`, else the persona).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The system prompt (the agent file's body, or a one-line role).
    #[serde(skip)]
    pub system_prompt: String,
    /// The agent file it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<PathBuf>,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    tools: Option<Tools>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Tools {
    List(Vec<String>),
    Text(String),
}

/// The file names tried for a persona: as written, and lower-case with dashes for spaces
/// (`Software Architect` → `software-architect`).
fn candidates(persona: &str) -> Vec<String> {
    let mut c = Vec::new();
    let safe = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|ch| ch.is_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            && !s.starts_with('.')
    };
    if safe(persona) {
        c.push(persona.to_string());
    }
    let slug: String = persona
        .trim()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-");
    if safe(&slug) && !c.contains(&slug) {
        c.push(slug);
    }
    c
}

/// Resolve a persona against the project's agent files.
pub fn resolve(persona: &str, project: &Path) -> Result<Persona> {
    for dir in [".claude/agents", ".pi/agents"] {
        for name in candidates(persona) {
            let path = project.join(dir).join(format!("{name}.md"));
            if let Ok(text) = std::fs::read_to_string(&path) {
                return parse_agent_file(persona, &path, &text);
            }
        }
    }
    Ok(Persona {
        persona: persona.to_string(),
        name: persona.to_string(),
        description: None,
        tools: Vec::new(),
        system_prompt: format!("You are a {persona}."),
        source: None,
    })
}

/// Parse an agent file: optional `---` front matter, then the body.
pub fn parse_agent_file(persona: &str, path: &Path, text: &str) -> Result<Persona> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = match text.strip_prefix("---") {
        Some(rest) if rest.starts_with('\n') || rest.starts_with("\r\n") => {
            let rest = rest.trim_start_matches(['\r', '\n']);
            let end = rest
                .find("\n---")
                .map(|i| (i, i + 4))
                .or_else(|| rest.starts_with("---").then_some((0, 3)));
            match end {
                Some((i, j)) => (Some(&rest[..i]), rest[j..].trim_start_matches(['-'])),
                None => {
                    return Err(Error::invalid(
                        Reason::InvalidPersona,
                        format!(
                            "agent file `{}` opens front matter with `---` and never closes it",
                            path.display()
                        ),
                    ));
                }
            }
        }
        _ => (None, text),
    };
    let fm = match front {
        Some(f) if !f.trim().is_empty() => yaml_serde::from_str::<FrontMatter>(f).map_err(|e| {
            Error::invalid(
                Reason::InvalidPersona,
                format!("agent file `{}` has bad front matter: {e}", path.display()),
            )
        })?,
        _ => FrontMatter {
            name: None,
            description: None,
            tools: None,
        },
    };
    let tools = match fm.tools {
        None => Vec::new(),
        Some(Tools::List(l)) => l,
        Some(Tools::Text(t)) => t
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    let body = body.trim().to_string();
    Ok(Persona {
        persona: persona.to_string(),
        name: fm.name.unwrap_or_else(|| persona.to_string()),
        description: fm.description,
        tools,
        system_prompt: if body.is_empty() {
            format!("You are a {persona}.")
        } else {
            body
        },
        source: Some(path.to_path_buf()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_and_body() {
        let p = parse_agent_file(
            "architect",
            Path::new("/x/architect.md"),
            "---\nname: architect\ndescription: Designs things\ntools: Read, Grep, Glob\n---\nYou design.\n\nCarefully.\n",
        )
        .unwrap();
        assert_eq!(p.name, "architect");
        assert_eq!(p.description.as_deref(), Some("Designs things"));
        assert_eq!(p.tools, ["Read", "Grep", "Glob"]);
        assert_eq!(p.system_prompt, "You design.\n\nCarefully.");
        let p =
            parse_agent_file("x", Path::new("x.md"), "---\ntools: [Bash, Edit]\n---\nHi").unwrap();
        assert_eq!(p.tools, ["Bash", "Edit"]);
        let p = parse_agent_file("x", Path::new("x.md"), "Just a body").unwrap();
        assert_eq!(p.system_prompt, "Just a body");
        assert!(parse_agent_file("x", Path::new("x.md"), "---\nname: [\n---\nb").is_err());
        assert!(parse_agent_file("x", Path::new("x.md"), "---\nname: a\n").is_err());
    }

    #[test]
    fn names_tried() {
        assert_eq!(candidates("Software Architect"), ["software-architect"]);
        assert_eq!(candidates("qa"), ["qa"]);
        assert!(candidates("../etc/passwd").is_empty());
    }
}
