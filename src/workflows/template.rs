//! Workflow templates: the JSON model (`schemas/workflow-template.schema.json`), where they are
//! looked up, and the checks `conductor workflow validate` reports, each with its JSON path.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Reason;
use crate::error::{Error, Result};

/// The reserved transition target that finishes a workflow.
pub const DONE: &str = "done";

/// The published schema of a template.
pub const SCHEMA: &str = include_str!("../../schemas/workflow-template.schema.json");

/// A workflow: states run one after another by fresh agent processes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    #[serde(default, rename = "$schema", skip_serializing)]
    pub schema: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub initial: String,
    /// In the order the file lists them (the timeline's order).
    pub states: IndexMap<String, StateDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
}

/// One state of a template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateDef {
    pub persona: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default)]
    pub next: Vec<String>,
    #[serde(default)]
    pub requires_approval: bool,
    #[serde(default)]
    pub cleanup: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// Token and cost limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

/// A problem in a template, at a JSON path (RFC 6901 pointer, `""` for the whole file).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{at}: {}", self.message)
    }
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl StateDef {
    /// The targets a worker in this state may transition to.
    pub fn allowed(&self) -> Vec<String> {
        if self.next.is_empty() {
            vec![DONE.to_string()]
        } else {
            self.next.clone()
        }
    }
}

impl Template {
    /// The state definition, if the template has it.
    pub fn state(&self, name: &str) -> Option<&StateDef> {
        self.states.get(name)
    }
}

/// Parse a template's text: JSON, then the schema, then the model. Every schema violation is a
/// problem with its path; the model is returned only when there are none.
pub fn parse(text: &str) -> std::result::Result<Template, Vec<Problem>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        vec![Problem {
            path: String::new(),
            message: format!("not valid JSON: {e}"),
        }]
    })?;
    let schema: Value = serde_json::from_str(SCHEMA).expect("the template schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the template schema compiles");
    let mut problems: Vec<Problem> = validator
        .iter_errors(&value)
        .map(|e| Problem {
            path: e.instance_path().to_string(),
            message: e.to_string(),
        })
        .collect();
    if !problems.is_empty() {
        problems.dedup();
        return Err(problems);
    }
    serde_json::from_value(value).map_err(|e| {
        vec![Problem {
            path: String::new(),
            message: e.to_string(),
        }]
    })
}

/// The structural checks: the initial state exists, every `next` target exists, every state is
/// reachable from the initial one, and every state has a path to `done`.
pub fn check(t: &Template) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !t.states.contains_key(&t.initial) {
        problems.push(Problem {
            path: "/initial".into(),
            message: format!(
                "the initial state `{}` is not defined in /states (defined: {})",
                t.initial,
                t.states.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    for (name, s) in &t.states {
        for (i, target) in s.next.iter().enumerate() {
            if target != DONE && !t.states.contains_key(target) {
                problems.push(Problem {
                    path: format!("/states/{}/next/{i}", pointer_escape(name)),
                    message: format!("`next` names an unknown state `{target}`"),
                });
            }
        }
    }
    // Reachable from the initial state.
    let mut seen = BTreeSet::new();
    let mut todo = VecDeque::new();
    if t.states.contains_key(&t.initial) {
        seen.insert(t.initial.clone());
        todo.push_back(t.initial.clone());
    }
    while let Some(s) = todo.pop_front() {
        for n in &t.states[&s].next {
            if t.states.contains_key(n) && seen.insert(n.clone()) {
                todo.push_back(n.clone());
            }
        }
    }
    if t.states.contains_key(&t.initial) {
        for name in t.states.keys() {
            if !seen.contains(name) {
                problems.push(Problem {
                    path: format!("/states/{}", pointer_escape(name)),
                    message: format!(
                        "state `{name}` cannot be reached from the initial state `{}`",
                        t.initial
                    ),
                });
            }
        }
    }
    // Can finish: a fixed point over "some next target can finish".
    let mut finishes: BTreeSet<&str> = t
        .states
        .iter()
        .filter(|(_, s)| s.allowed().iter().any(|n| n == DONE))
        .map(|(n, _)| n.as_str())
        .collect();
    loop {
        let before = finishes.len();
        for (name, s) in &t.states {
            if s.next.iter().any(|n| finishes.contains(n.as_str())) {
                finishes.insert(name);
            }
        }
        if finishes.len() == before {
            break;
        }
    }
    for name in t.states.keys() {
        if !finishes.contains(name.as_str()) {
            problems.push(Problem {
                path: format!("/states/{}/next", pointer_escape(name)),
                message: format!(
                    "state `{name}` has no way to finish: no path of `next` targets reaches `done` \
                     (list `done` in a `next`, or leave a final state's `next` empty)"
                ),
            });
        }
    }
    problems
}

/// Parse and check; all problems at once.
pub fn load_text(text: &str) -> std::result::Result<Template, Vec<Problem>> {
    let t = parse(text)?;
    let problems = check(&t);
    if problems.is_empty() {
        Ok(t)
    } else {
        Err(problems)
    }
}

/// The error for a template with problems (exit 2), naming the file.
pub fn invalid(path: &Path, problems: &[Problem]) -> Error {
    let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    Error::invalid(
        Reason::InvalidTemplate,
        format!(
            "workflow template `{}` is invalid: {}",
            path.display(),
            list.join("; ")
        ),
    )
}

/// Where templates are looked up, in order: the project's `.conductor/workflows/`, then the
/// home's `workflows/`.
pub fn search_dirs(project: &Path, home: &Path) -> Vec<PathBuf> {
    vec![
        project.join(".conductor").join("workflows"),
        home.join("workflows"),
    ]
}

/// Find a template by name (`NAME` → `NAME.json` in the search directories) or by path (a name
/// with a `/` or ending in `.json`).
pub fn find(name: &str, project: &Path, home: &Path) -> Result<PathBuf> {
    if name.contains('/') || name.ends_with(".json") {
        let p = if Path::new(name).is_absolute() {
            PathBuf::from(name)
        } else {
            project.join(name)
        };
        if p.is_file() {
            return Ok(p);
        }
        return Err(Error::invalid(
            Reason::UnknownTemplate,
            format!("no workflow template file `{}`", p.display()),
        ));
    }
    let dirs = search_dirs(project, home);
    for d in &dirs {
        let p = d.join(format!("{name}.json"));
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::invalid(
        Reason::UnknownTemplate,
        format!(
            "no workflow template `{name}` (looked for {name}.json in {})",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    ))
}

/// Read and check a template file.
pub fn load(path: &Path) -> Result<Template> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::invalid(
            Reason::UnknownTemplate,
            format!("cannot read workflow template `{}`: {e}", path.display()),
        )
    })?;
    load_text(&text).map_err(|p| invalid(path, &p))
}

/// Every template file in the search directories: (name, path), first occurrence wins.
pub fn list(project: &Path, home: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out: Vec<(String, PathBuf, bool)> = Vec::new();
    for d in search_dirs(project, home) {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut names: Vec<(String, PathBuf)> = rd
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                let n = p.file_name()?.to_str()?.strip_suffix(".json")?.to_string();
                p.is_file().then_some((n, p))
            })
            .collect();
        names.sort();
        for (n, p) in names {
            let shadowed = out.iter().any(|(m, _, _)| *m == n);
            out.push((n, p, shadowed));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        match load_text(text) {
            Ok(_) => vec![],
            Err(p) => p.iter().map(|p| p.to_string()).collect(),
        }
    }

    const GOOD: &str = r#"{"name":"F","initial":"plan","states":{
        "plan":{"persona":"Architect","next":["build"],"requires_approval":true},
        "build":{"persona":"Engineer","next":["verify","plan"]},
        "verify":{"persona":"QA","next":["done","build"]}}}"#;

    #[test]
    fn a_good_template_keeps_its_state_order() {
        let t = load_text(GOOD).unwrap();
        assert_eq!(
            t.states.keys().collect::<Vec<_>>(),
            ["plan", "build", "verify"]
        );
        assert_eq!(t.states["verify"].allowed(), ["done", "build"]);
    }

    #[test]
    fn structural_problems_have_paths() {
        let p = problems(
            r#"{"name":"F","initial":"start","states":{
            "plan":{"persona":"A","next":["bulid"]},
            "island":{"persona":"B","next":["done"]},
            "loop":{"persona":"C","next":["loop2"]},
            "loop2":{"persona":"C","next":["loop"]}}}"#,
        );
        assert!(
            p.iter()
                .any(|m| m.starts_with("/initial: the initial state `start`"))
        );
        assert!(
            p.iter().any(
                |m| m.starts_with("/states/plan/next/0: `next` names an unknown state `bulid`")
            )
        );
        assert!(
            p.iter()
                .any(|m| m.starts_with("/states/loop/next: state `loop` has no way to finish"))
        );
        let p = problems(
            r#"{"name":"F","initial":"a","states":{
            "a":{"persona":"A"}, "b":{"persona":"B","next":["a"]}}}"#,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("/states/b: state `b` cannot be reached"));
    }

    #[test]
    fn schema_violations_have_paths() {
        let p = problems(r#"{"name":"F","initial":"a","states":{"a":{"persona":"A","nxt":[]}}}"#);
        assert!(p[0].starts_with("/states/a:"), "{p:?}");
        let p = problems(r#"{"name":"F","initial":"a","states":{"a":{"persona":""}}}"#);
        assert!(p[0].starts_with("/states/a/persona:"), "{p:?}");
        let p = problems(r#"{"name":"F","initial":"done","states":{"done":{"persona":"x"}}}"#);
        assert!(!p.is_empty());
        let p = problems("{nope");
        assert!(p[0].starts_with("/: not valid JSON"), "{p:?}");
    }
}
