//! Planning a workspace (`queue plan`): a planner command is given the task, the doc
//! collections and the secret names on stdin, and must print a manifest, checked exactly as
//! `queue submit` checks one.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{docs, manifest};
use crate::error::{Error, Reason, Result};

/// The planner's instructions.
pub fn planning_prompt(
    task: &str,
    docs: &[String],
    available: &[String],
    secrets: &[String],
) -> String {
    format!(
        "You are the planner of an agent job queue. Split the task below into jobs for coding \
agents and print ONLY a JSON manifest of this shape (no other text):\n\
{{\"workspace\": \"<short-id>\", \"jobs\": [{{\"id\": \"<job-id>\", \"prompt\": \"...\", \
\"docs\": [\"<collection>\"], \"secrets\": [\"<ENV_VAR_NAME>\"], \"depends_on\": [\"<job-id>\"], \
\"outcomes\": [\"<observable success criterion>\"]}}]}}\n\
Ids use letters, digits, '.', '_' and '-'. Jobs that need another job's files depend on it; \
independent jobs do not. Jobs share files through /workspace/shared/.\n\n\
## Task\n{task}\n\n\
## Docs requested\n{}\n\n\
## Docs available\n{}\n\n\
## Secrets available (names only)\n{}\n",
        list(docs),
        list(available),
        list(secrets)
    )
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

/// The first `{` to the last `}` of the planner's output.
fn extract_json(out: &str) -> Option<&str> {
    let a = out.find('{')?;
    let b = out.rfind('}')?;
    (b > a).then(|| &out[a..=b])
}

/// What the planner proposed: the manifest, and its JSON as the planner printed it.
pub struct Planned {
    pub manifest: manifest::Manifest,
    pub json: serde_json::Value,
}

/// Run `planner` (by `sh -c`) on the task `prompt` with the doc collections `docs_wanted` (of
/// those in `docs_dir`, else ~/.docpull) and the secret names `secrets`, and check the
/// manifest it prints.
pub fn plan(
    planner: &str,
    prompt: &str,
    docs_wanted: &[String],
    secrets: &[String],
    docs_dir: Option<&Path>,
) -> Result<Planned> {
    let source = docs::locate(docs_dir)?;
    for d in docs_wanted {
        source.check("(plan)", d)?;
    }
    let text = planning_prompt(prompt, docs_wanted, &source.available, secrets);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(planner)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            Error::invalid(
                Reason::PlannerFailed,
                format!("could not start the planner `{planner}`: {e}"),
            )
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::invalid(Reason::PlannerFailed, format!("planner `{planner}`: {e}")))?;
    if !out.status.success() {
        return Err(Error::invalid(
            Reason::PlannerFailed,
            format!("the planner `{planner}` exited with {}", out.status),
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_text = extract_json(&stdout).ok_or_else(|| {
        Error::invalid(
            Reason::InvalidManifest,
            format!("the planner `{planner}` printed no JSON manifest"),
        )
    })?;
    let m = manifest::parse(json_text, "the planner's manifest")?;
    let json: serde_json::Value = serde_json::from_str(json_text).expect("parsed above");
    Ok(Planned { manifest: m, json })
}
