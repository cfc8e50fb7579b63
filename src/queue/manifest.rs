//! The job manifest (`{workspace, jobs[]}`, the planner's output in the design): parsed, checked
//! against `schemas/queue-manifest.schema.json`, then checked as a graph (unique ids, known
//! dependencies, no cycles). Everything here is pure.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use crate::error::Reason;
use crate::error::{Error, Result};

/// The checked-in schema text.
pub const SCHEMA: &str = include_str!("../../schemas/queue-manifest.schema.json");

#[jsonschema::validator(path = "schemas/queue-manifest.schema.json")]
struct ManifestSchema;

/// A submitted manifest.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub workspace: String,
    pub jobs: Vec<JobSpec>,
}

/// One job as submitted (defaults filled in by serde).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub id: String,
    pub prompt: String,
    #[serde(default)]
    pub docs: Vec<String>,
    #[serde(default)]
    pub secrets: Vec<String>,
    #[serde(default = "default_workdir")]
    pub workdir: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub outcomes: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_minutes: f64,
    #[serde(default = "default_agent")]
    pub agent: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub priority: super::JobPriority,
    /// Run in a worktree of this repository (with `branch`; see [`super::worktree`]).
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    /// Where a new branch starts when no dependency of the same repository says.
    #[serde(default)]
    pub base: Option<String>,
}

fn default_workdir() -> String {
    "/workspace".into()
}
fn default_timeout() -> f64 {
    30.0
}
fn default_agent() -> String {
    "build".into()
}

fn bad(message: String) -> Error {
    Error::invalid(Reason::InvalidManifest, message)
}

/// Parse and check a manifest's text. `source` names it in errors (a path or "stdin"). Every
/// dependency must be a job of the manifest (a planner's output stands alone).
pub fn parse(text: &str, source: &str) -> Result<Manifest> {
    parse_with(text, source, &|_| false)
}

/// [`parse`] for a submit: a dependency outside the manifest passes here when `known` says it
/// may be a job already in the workspace (live, or completed and archived), which the submit
/// then checks against the queue.
pub fn parse_with(text: &str, source: &str, known: &dyn Fn(&str) -> bool) -> Result<Manifest> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("{source} is not valid JSON: {e}")))?;
    // The design's dataclass had `secrets: dict[str, str]`; say plainly why that is refused.
    if let Some(jobs) = value.get("jobs").and_then(Value::as_array) {
        for (i, j) in jobs.iter().enumerate() {
            if j.get("secrets").is_some_and(Value::is_object) {
                return Err(bad(format!(
                    "{source}: /jobs/{i}/secrets must be a list of environment variable names, \
                     not values (values are read from the dispatcher's environment or a secrets file)"
                )));
            }
        }
    }
    // A repository job names both its repository and its branch: say which is missing before
    // the schema's words do.
    if let Some(jobs) = value.get("jobs").and_then(Value::as_array) {
        for (i, j) in jobs.iter().enumerate() {
            let has = |k: &str| j.get(k).is_some_and(|v| !v.is_null());
            let id = j.get("id").and_then(Value::as_str).unwrap_or("?");
            let missing = match (has("repo"), has("branch")) {
                (true, false) => Some(("repo", "branch")),
                (false, true) => Some(("branch", "repo")),
                _ => None,
            };
            if let Some((given, lacking)) = missing {
                return Err(bad(format!(
                    "{source}: /jobs/{i} (job `{id}`) names `{given}` but no `{lacking}`; nothing was submitted"
                ))
                .with_hint(
                    "a job in a worktree names both, e.g. `\"repo\": \"/src/app\", \"branch\": \"feature/x\"`; a plain job neither",
                ));
            }
        }
    }
    if let Some(err) = ManifestSchema::iter_errors(&value).next() {
        let at = err.instance_path().to_string();
        let at = if at.is_empty() { "/".to_string() } else { at };
        let msg = crate::text::printable_max(&err.to_string(), 160);
        return Err(bad(format!(
            "{source} does not match the manifest schema at {at}: {msg}"
        )));
    }
    let m: Manifest = serde_json::from_value(value).map_err(|e| bad(format!("{source}: {e}")))?;
    check_graph(&m, known)?;
    super::guard::check(m.jobs.iter().map(|j| super::guard::JobAsks {
        id: &j.id,
        secrets: &j.secrets,
        agent: &j.agent,
        model: j.model.as_ref(),
        workdir: &j.workdir,
    }))?;
    Ok(m)
}

/// Unique ids, dependencies that exist (in the manifest, or for which `known` says yes: a job
/// already in the workspace), and no cycle (spelled out: `a -> b -> a`).
pub fn check_graph(m: &Manifest, known: &dyn Fn(&str) -> bool) -> Result<()> {
    let mut seen = BTreeSet::new();
    for j in &m.jobs {
        if !seen.insert(j.id.as_str()) {
            return Err(bad(format!("duplicate job id `{}` in the manifest", j.id)));
        }
    }
    for j in &m.jobs {
        for d in &j.depends_on {
            if d == &j.id {
                return Err(bad(format!(
                    "job `{}` depends on itself (cycle: {} -> {})",
                    j.id, j.id, j.id
                )));
            }
            if !seen.contains(d.as_str()) && !known(d) {
                return Err(bad(format!(
                    "job `{}` depends on unknown job `{d}` (not in the manifest nor in workspace `{}`)",
                    j.id, m.workspace
                )));
            }
        }
    }
    if let Some(cycle) = find_cycle(m) {
        return Err(bad(format!(
            "the dependencies form a cycle: {}",
            cycle.join(" -> ")
        )));
    }
    Ok(())
}

/// A cycle among the manifest's jobs, as `[a, b, c, a]`.
fn find_cycle(m: &Manifest) -> Option<Vec<String>> {
    let deps: BTreeMap<&str, Vec<&str>> = m
        .jobs
        .iter()
        .map(|j| {
            (
                j.id.as_str(),
                j.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    // 0 unvisited, 1 on the stack, 2 done. Depth-first with an explicit stack of (job, next
    // dependency to look at): a chain of 100,000 jobs is no deeper for the thread's stack.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    let mut stack: Vec<(&str, usize)> = Vec::new();
    for j in &m.jobs {
        if mark.get(j.id.as_str()).copied().unwrap_or(0) != 0 {
            continue;
        }
        mark.insert(&j.id, 1);
        stack.push((&j.id, 0));
        while let Some(&(n, next)) = stack.last() {
            let ds = deps.get(n).map(Vec::as_slice).unwrap_or(&[]);
            let Some(d) = ds.get(next).copied() else {
                mark.insert(n, 2);
                stack.pop();
                continue;
            };
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            if !deps.contains_key(d) {
                continue;
            }
            match mark.get(d).copied().unwrap_or(0) {
                2 => {}
                1 => {
                    let from = stack.iter().position(|(s, _)| *s == d).unwrap_or(0);
                    let mut c: Vec<String> =
                        stack[from..].iter().map(|(s, _)| s.to_string()).collect();
                    c.push(d.to_string());
                    return Some(c);
                }
                _ => {
                    mark.insert(d, 1);
                    stack.push((d, 0));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(jobs: &str) -> Result<Manifest> {
        parse(&format!(r#"{{"workspace":"w","jobs":{jobs}}}"#), "test")
    }

    #[test]
    fn defaults_are_the_designs() {
        let m = m(r#"[{"id":"a","prompt":"p"}]"#).unwrap();
        let j = &m.jobs[0];
        assert_eq!(
            (j.workdir.as_str(), j.timeout_minutes, j.agent.as_str()),
            ("/workspace", 30.0, "build")
        );
    }

    #[test]
    fn cycles_are_spelled_out() {
        let e = m(r#"[{"id":"a","prompt":"p","depends_on":["c"]},
                      {"id":"b","prompt":"p","depends_on":["a"]},
                      {"id":"c","prompt":"p","depends_on":["b"]}]"#)
        .unwrap_err()
        .to_string();
        assert!(e.contains("a -> c -> b -> a"), "{e}");
    }

    #[test]
    fn duplicates_and_unknown_dependencies_are_refused() {
        let e = m(r#"[{"id":"a","prompt":"p"},{"id":"a","prompt":"q"}]"#).unwrap_err();
        assert!(e.to_string().contains("duplicate job id `a`"));
        let e = m(r#"[{"id":"a","prompt":"p","depends_on":["zz"]}]"#).unwrap_err();
        assert!(e.to_string().contains("unknown job `zz`"));
    }

    #[test]
    fn a_deep_chain_is_checked_without_overflowing_the_stack() {
        // Each job depends on the next: the search goes 100,000 deep (it overflowed before).
        let n = 100_000;
        let jobs = (0..n)
            .map(|i| {
                let deps = if i + 1 < n {
                    format!(r#"["j{}"]"#, i + 1)
                } else {
                    "[]".into()
                };
                format!(r#"{{"id":"j{i}","prompt":"p","depends_on":{deps}}}"#)
            })
            .collect::<Vec<_>>()
            .join(",");
        let text = format!(r#"{{"workspace":"w","jobs":[{jobs}]}}"#);
        let mut m: Manifest = serde_json::from_str(&text).unwrap();
        assert!(check_graph(&m, &|_| false).is_ok());
        m.jobs[n - 1].depends_on = vec!["j0".into()];
        let e = check_graph(&m, &|_| false).unwrap_err().to_string();
        assert!(
            e.contains("j0 -> j1 -> j2") && e.ends_with("j99999 -> j0"),
            "{}",
            &e[..80]
        );
    }

    #[test]
    fn secret_values_are_refused() {
        let e = m(r#"[{"id":"a","prompt":"p","secrets":{"K":"v"}}]"#).unwrap_err();
        assert!(e.to_string().contains("names"), "{e}");
        assert!(!e.to_string().contains("\"v\""));
    }
}
