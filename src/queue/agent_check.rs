//! A job's `agent` checked against the agents its runner knows, before the job runs. OpenCode
//! falls back silently to its default agent when `--agent` names an unknown one (and exits 0),
//! so a typo would run the wrong agent: when the agent command is OpenCode's, the dispatcher asks
//! `opencode agent list` once per workspace and runner (in the same place the job runs: the
//! workspace directory, or the sandbox) and refuses a job whose agent is not listed.
//! Other agent commands, and the template runner (a remote engine), are not checked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long `opencode agent list` may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(90);

/// The agent names in the output of `opencode agent list` (lines `NAME (primary|subagent|all)`,
/// each followed by its indented permissions).
pub fn parse_opencode_list(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| {
            let (name, mode) = l.trim_end().rsplit_once(" (")?;
            let mode = mode.strip_suffix(')')?;
            let known = ["primary", "subagent", "all"].contains(&mode);
            (known && !name.is_empty() && !name.contains(char::is_whitespace))
                .then(|| name.to_string())
        })
        .collect()
}

/// True when the agent command (a template) runs OpenCode with the job's agent.
pub fn is_opencode(agent_cmd: &str) -> bool {
    agent_cmd.contains("{agent}")
        && super::agent_path::program_of(agent_cmd).is_some_and(|p| p == "opencode")
}

type Cache = HashMap<(PathBuf, &'static str), Option<Vec<String>>>;

/// The agents `list` (a command ready to run `opencode agent list`) prints, asked once per
/// workspace and runner for this process; `None` when they cannot be known (OpenCode failed).
pub fn known(key: (PathBuf, &'static str), list: impl Fn() -> Command) -> Option<Vec<String>> {
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    if let Some(hit) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return hit.clone();
    }
    // A failure can be passing (a loaded machine, OpenCode setting up its database): try again.
    let mut found = Err(String::new());
    for attempt in 0..3 {
        found = run_list(list());
        if found.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500 * (attempt + 1)));
    }
    let found = match found {
        Ok(names) => Some(names),
        Err(why) => {
            eprintln!(
                "warning: could not list OpenCode's agents ({why}); the jobs' agents are not checked"
            );
            None
        }
    };
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, found.clone());
    found
}

fn run_list(mut c: Command) -> Result<Vec<String>, String> {
    let text = |e: std::io::Error| e.to_string();
    let out = tempfile::tempfile().map_err(text)?;
    let err = tempfile::tempfile().map_err(text)?;
    let mut child = c
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(text)?)
        .stderr(err.try_clone().map_err(text)?)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("`opencode agent list`: {e}"))?;
    let deadline = Instant::now() + LIST_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                crate::spawn::kill_group(child.id());
                let _ = child.wait();
                return Err(format!(
                    "`opencode agent list` took over {}s",
                    LIST_TIMEOUT.as_secs()
                ));
            }
        }
    };
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut t = String::new();
        let _ = f.rewind();
        let _ = f.read_to_string(&mut t);
        t
    };
    let (out, err) = (read(out), read(err));
    let names = parse_opencode_list(&out);
    if !status.success() || names.is_empty() {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!(
            "`opencode agent list` exited with {status}: {}",
            crate::text::printable_max(last, 200)
        ));
    }
    Ok(names)
}

/// The refusal of a job whose agent OpenCode does not know.
pub fn unknown(agent: &str, known: &[String]) -> String {
    format!(
        "unknown agent `{agent}`: OpenCode knows {} here (`opencode agent list`); define it in \
         .opencode/agents/ or opencode.json, or fix the job's agent",
        known.join(", ")
    )
}

use std::os::unix::process::CommandExt;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_of_opencode_agent_list() {
        // OpenCode 1.18.33's output: each name, then its permissions as indented JSON.
        let out = "build (primary)\n  [\n  {\n    \"permission\": \"*\"\n  }\n]\ncompaction (primary)\n  []\nexplore (subagent)\n  []\nreviewer (all)\n  []\n";
        assert_eq!(
            parse_opencode_list(out),
            ["build", "compaction", "explore", "reviewer"]
        );
        assert!(parse_opencode_list("Error: no config\n").is_empty());
    }

    #[test]
    fn only_opencode_with_the_jobs_agent_is_checked() {
        assert!(is_opencode(
            "opencode run --agent {agent} [--model {model}]"
        ));
        assert!(!is_opencode("opencode run"));
        assert!(!is_opencode("claude -p --agent {agent}"));
    }
}
