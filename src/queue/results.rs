//! A workspace's results (`queue results`): every job's RESULT.md, with each outcome the
//! manifest asked for marked as the job reported it.

use std::path::PathBuf;

use serde::Serialize;

use super::{Job, Layout};
use crate::error::{Error, Reason, Result};
use crate::store::Store;
use crate::time::Timestamp;

/// Whether RESULT.md reports an outcome as met: `Some(true)` for a `[x]` line naming it,
/// `Some(false)` for `[ ]`, `None` when not reported.
pub fn reported(result: &str, outcome: &str) -> Option<bool> {
    let want = outcome.trim().to_lowercase();
    for line in result.lines() {
        let l = line.to_lowercase();
        if !l.contains(&want) {
            continue;
        }
        if l.contains("[x]") {
            return Some(true);
        }
        if l.contains("[ ]") {
            return Some(false);
        }
    }
    None
}

/// One outcome a job was asked for, and whether its RESULT.md reports it met.
#[derive(Clone, Debug, Serialize)]
pub struct OutcomeMet {
    pub outcome: String,
    pub met: Option<bool>,
}

/// One job's result.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub job: Job,
    /// Where its RESULT.md is.
    pub result_path: PathBuf,
    /// Its RESULT.md (never read through a link a job left in its workspace).
    pub result: Option<String>,
    pub outcomes: Vec<OutcomeMet>,
}

/// The results of every job of workspace `workspace` (live and archived, each id once), or
/// `unknown_workspace`.
pub fn of_workspace(store: &Store, now: Timestamp, workspace: &str) -> Result<Vec<JobResult>> {
    let mut jobs = super::lookup::all(store, now, true)?;
    jobs.retain(|j| j.workspace == workspace);
    let mut seen = std::collections::BTreeSet::new();
    jobs.retain(|j| seen.insert(j.id.clone()));
    if jobs.is_empty() {
        return Err(Error::invalid(
            Reason::UnknownWorkspace,
            format!("no jobs in workspace `{workspace}`"),
        ));
    }
    let layout = Layout {
        home: store.home().dir().to_path_buf(),
    };
    Ok(jobs
        .into_iter()
        .map(|j| {
            let result_path = layout.output(&j.workspace, &j.id).join("RESULT.md");
            let result =
                layout.read_in_workspace(&j.workspace, &format!("output/{}/RESULT.md", j.id));
            let outcomes = j
                .outcomes
                .iter()
                .map(|o| OutcomeMet {
                    outcome: o.clone(),
                    met: result.as_deref().and_then(|t| reported(t, o)),
                })
                .collect();
            JobResult {
                job: j,
                result_path,
                result,
                outcomes,
            }
        })
        .collect())
}
