//! Finding jobs, as every face does: the queue's jobs (live, then archived), the listing of
//! `queue jobs` and the MCP `queue_status` tool, one job by `JOB` or `WORKSPACE/JOB`, and a
//! job's current record.

use super::{Job, QueueDoc, State};
use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::time::Timestamp;

/// Every job of the queue: the live ones, then (when `finished`) the archived ones. Live jobs
/// come first so a lookup finds the current run of an id.
pub fn all(store: &Store, now: Timestamp, finished: bool) -> Result<Vec<Job>> {
    let doc: QueueDoc = store.read_doc(now)?;
    let mut jobs = doc.jobs;
    if finished {
        let mut old = super::archived(store)?;
        old.reverse();
        jobs.extend(old);
    }
    Ok(jobs)
}

/// The jobs of workspace `workspace` (live and archived), else the live ones (with `all`,
/// the archived ones too), each key once: archived runs of an id that is live again are older,
/// the first (live) one is kept.
pub fn listed(
    store: &Store,
    now: Timestamp,
    workspace: Option<&str>,
    all_of_them: bool,
) -> Result<Vec<Job>> {
    let mut jobs = all(store, now, all_of_them || workspace.is_some())?;
    if let Some(ws) = workspace {
        jobs.retain(|j| j.workspace == ws);
    }
    let mut seen = std::collections::BTreeSet::new();
    jobs.retain(|j| seen.insert(j.key()));
    Ok(jobs)
}

/// Find a job by `JOB` or `WS/JOB` among `jobs` (live then archived: [`all`]).
pub fn find(jobs: &[Job], name: &str) -> Result<Job> {
    if let Some(j) = jobs.iter().find(|j| j.key() == name) {
        return Ok(j.clone());
    }
    let mut hits: Vec<&Job> = jobs.iter().filter(|j| j.id == name).collect();
    let mut keys: Vec<String> = hits.iter().map(|j| j.key()).collect();
    keys.dedup();
    match keys.len() {
        0 => Err(Error::invalid(
            Reason::UnknownJob,
            format!("no job `{name}` (see `conductor queue jobs --all`)"),
        )),
        1 => Ok(hits.remove(0).clone()),
        _ => Err(Error::invalid(
            Reason::AmbiguousJob,
            format!(
                "job id `{name}` is in several workspaces: {}; name it as WORKSPACE/JOB",
                keys.join(", ")
            ),
        )),
    }
}

/// The current record of the job `key` (`WORKSPACE/JOB`): live first, then archived.
pub fn current(store: &Store, now: Timestamp, key: &str) -> Result<Option<Job>> {
    let doc: QueueDoc = store.read_doc(now)?;
    if let Some(j) = doc.jobs.into_iter().find(|j| j.key() == key) {
        return Ok(Some(j));
    }
    let mut old = super::archived(store)?;
    old.reverse();
    Ok(old.into_iter().find(|j| j.key() == key))
}

/// Has a job in `state` ended (nothing more will be written until someone retries it)?
pub fn ended(state: State) -> bool {
    !matches!(state, State::Queued | State::Ready | State::Running)
}

/// How live job `name` (`JOB` or `WORKSPACE/JOB`) last ran, if it is live and ran.
pub fn last_ran_with(
    store: &Store,
    now: Timestamp,
    name: &str,
) -> Result<Option<super::ran_with::RanWith>> {
    let doc: QueueDoc = store.read_doc(now)?;
    Ok(super::ops::find(&doc, name)
        .ok()
        .and_then(|i| doc.jobs[i].ran_with.clone()))
}

/// The state of each job of `keys` (`WORKSPACE/JOB`), live or archived with its finished
/// workspace (the current run of a key first).
pub fn states_of(
    store: &Store,
    now: Timestamp,
    keys: &std::collections::BTreeSet<String>,
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut states = std::collections::BTreeMap::new();
    for j in all(store, now, true)? {
        let key = j.key();
        if keys.contains(&key) && !states.contains_key(&key) {
            states.insert(key, j.state.state.as_str().to_string());
        }
    }
    Ok(states)
}

/// The live jobs as the dashboard shows them, each with the last `log_bytes` bytes of its log.
pub fn for_dashboard(
    store: &Store,
    now: Timestamp,
    log_bytes: u64,
) -> Result<Vec<serde_json::Value>> {
    let queue: QueueDoc = store.read_doc(now)?;
    let layout = super::Layout {
        home: store.home().dir().to_path_buf(),
    };
    Ok(queue
        .jobs
        .iter()
        .map(|j| {
            serde_json::json!({"id": j.id, "workspace": j.workspace, "state": j.state.state,
                   "since": j.state.since, "attempts": j.state.attempts,
                   "exit_code": j.state.exit_code, "depends_on": j.depends_on,
                   "agent": j.agent, "submitted_at": j.submitted_at,
                   "log_tail": layout.log_tail(&j.workspace, &j.id, log_bytes)})
        })
        .collect())
}

/// The workspace and dependencies of a job added alone (`queue add`): `--after WORKSPACE/JOB`
/// names the workspace too, and every dependency is in the job's own (`workspace`, else the
/// one they name, else `default`).
pub fn workspace_and_deps(
    workspace: Option<String>,
    after: &[String],
) -> Result<(String, Vec<String>)> {
    let mut workspace = workspace;
    let mut deps = Vec::new();
    for d in after {
        let (ws, id) = match d.split_once('/') {
            Some((w, j)) => (Some(w.to_string()), j.to_string()),
            None => (None, d.clone()),
        };
        if let Some(w) = ws {
            match &workspace {
                Some(cur) if *cur != w => {
                    return Err(Error::invalid(
                        Reason::InvalidManifest,
                        format!(
                            "--after {d} is in workspace {w}, the job goes to {cur}: a job depends only on jobs of its own workspace"
                        ),
                    ));
                }
                _ => workspace = Some(w),
            }
        }
        deps.push(id);
    }
    Ok((workspace.unwrap_or_else(|| "default".into()), deps))
}

/// The first free job id `job-N` of live workspace `workspace`.
pub fn free_id(store: &Store, now: Timestamp, workspace: &str) -> Result<String> {
    let doc: QueueDoc = store.read_doc(now)?;
    let taken: std::collections::BTreeSet<&str> = doc
        .jobs
        .iter()
        .filter(|j| j.workspace == workspace)
        .map(|j| j.id.as_str())
        .collect();
    let n = (1..)
        .find(|n| !taken.contains(format!("job-{n}").as_str()))
        .expect("a free number");
    Ok(format!("job-{n}"))
}
