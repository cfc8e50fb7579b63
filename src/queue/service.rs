//! The queue's operations as every face calls them (the CLI's `queue submit` and `queue plan
//! --yes`, the MCP server's `queue_submit`): a typed request in, a typed outcome out, one
//! transaction each. Nothing here prints.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::manifest::Manifest;
use super::{Layout, QueueDoc, State, Workspace, archive, docs, ops};
use crate::error::Result;
use crate::store::{Lock, Store};
use crate::time::Timestamp;

/// What `submit` did: the workspace (created with its docs copied in) and the state each
/// submitted job starts in (`pending`, or `blocked` behind its dependencies).
#[derive(Clone, Debug, PartialEq)]
pub struct Submitted {
    pub workspace: String,
    pub workspace_dir: String,
    pub jobs: Vec<(String, State)>,
}

/// Check a parsed manifest, create its workspace (docs copied in from `docs_dir`, else
/// docpull's), and add its jobs in one transaction. Refused input creates nothing: it is
/// checked against a snapshot before any directory is made, and again under the lock.
pub fn submit(
    store: &Store,
    now: Timestamp,
    m: &Manifest,
    docs_dir: Option<&Path>,
) -> Result<Submitted> {
    // Repository jobs are checked against git (and named by their main checkout) first.
    let checked = super::worktree::check(m)?;
    let m = &checked;
    let source = docs::locate(docs_dir)?;
    let mut wanted: Vec<String> = Vec::new();
    for j in &m.jobs {
        for d in &j.docs {
            source.check(&j.id, d)?;
            if !wanted.contains(d) {
                wanted.push(d.clone());
            }
        }
    }
    let home = store.home().dir().to_path_buf();
    // Where workspaces live must mean the same to every host that may run a job of this one.
    super::workspaces_root()?;
    // The archive is consulted (through its index) only for dependencies that are neither in
    // the manifest nor live.
    let snapshot: QueueDoc = store.read_doc(now)?;
    let archived_completed = archive::completed(store, &m.workspace, &unresolved(m, &snapshot))?;
    let ws = Workspace {
        id: m.workspace.clone(),
        dir: Layout { home: home.clone() }
            .workspace(&m.workspace)
            .to_string_lossy()
            .into_owned(),
        docs_loaded: wanted.clone(),
        created_at: now,
    };
    ops::submit(
        &mut snapshot.clone(),
        m,
        ws.clone(),
        &archived_completed,
        now,
    )?;
    let dir = PathBuf::from(&ws.dir);
    // A submit that fails (a full disk) leaves no half-made workspace behind.
    let mut new_dirs = crate::store::atomic::NewDirs::new();
    for sub in ["docs", "output", "shared"] {
        new_dirs.create(&dir.join(sub))?;
    }
    for d in &wanted {
        source.copy_into(d, &dir.join("docs"))?;
    }
    let jobs = store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let wanted = unresolved(m, &doc);
        let archived_completed = archive::completed_tx(tx, store, &m.workspace, &wanted)?;
        let events = ops::submit(&mut doc, m, ws.clone(), &archived_completed, now)?;
        let submitted: HashSet<&str> = m.jobs.iter().map(|s| s.id.as_str()).collect();
        let states: Vec<(String, State)> = doc
            .jobs
            .iter()
            .filter(|j| j.workspace == m.workspace && submitted.contains(j.id.as_str()))
            .map(|j| (j.id.clone(), j.state.state))
            .collect();
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(states)
    })?;
    new_dirs.keep();
    Ok(Submitted {
        workspace: m.workspace.clone(),
        workspace_dir: ws.dir,
        jobs,
    })
}

/// The dependencies a manifest names that are neither among its jobs nor live jobs of its
/// workspace: only those can be satisfied by archived jobs.
fn unresolved(m: &Manifest, doc: &QueueDoc) -> BTreeSet<String> {
    let ids: HashSet<&str> = m.jobs.iter().map(|j| j.id.as_str()).collect();
    let live: HashSet<&str> = doc
        .jobs
        .iter()
        .filter(|j| j.workspace == m.workspace)
        .map(|j| j.id.as_str())
        .collect();
    m.jobs
        .iter()
        .flat_map(|j| &j.depends_on)
        .filter(|d| !ids.contains(d.as_str()) && !live.contains(d.as_str()))
        .cloned()
        .collect()
}

/// Pause (`pause` true) or resume the whole queue (`jobs` empty) or the jobs named (`JOB` or
/// `WORKSPACE/JOB`); returns the keys of the jobs named (none for the whole queue).
pub fn set_paused(
    store: &Store,
    now: Timestamp,
    jobs: &[String],
    pause: bool,
) -> Result<Vec<String>> {
    store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let mut events = Vec::new();
        let keys = ops::set_paused(&mut doc, jobs, pause, &mut events)?;
        doc.updated_at = now;
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(keys)
    })
}

/// Put a stuck or cancelled job (`JOB` or `WORKSPACE/JOB`) back in line with every job it
/// blocked; returns their keys, the job's first.
pub fn retry(store: &Store, now: Timestamp, job: &str) -> Result<Vec<String>> {
    store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let i = ops::find(&doc, job)?;
        let mut events = Vec::new();
        let keys = ops::retry(&mut doc, i, now, &mut events)?;
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>(keys)
    })
}

/// What `cancel` did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cancelled {
    /// The unfinished jobs cancelled (finished ones are left as they are).
    pub cancelled: Vec<String>,
    /// The running ones among them, whose process groups were killed.
    pub stopped: Vec<String>,
}

/// Cancel a job (`JOB` or `WORKSPACE/JOB`) or every unfinished job of a workspace: their
/// dependents become blocked, finished workspaces are archived, and running jobs' process
/// groups are killed (their dispatcher kills them too when it sees the cancel).
pub fn cancel(store: &Store, now: Timestamp, target: &str) -> Result<Cancelled> {
    let (cancelled, stop) = store.transaction(now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let targets: Vec<usize> = if doc.workspaces.contains_key(target)
            && !target.contains('/')
            && doc.jobs.iter().any(|j| j.workspace == target)
        {
            (0..doc.jobs.len())
                .filter(|i| doc.jobs[*i].workspace == target)
                .collect()
        } else {
            vec![ops::find(&doc, target)?]
        };
        let keys: Vec<String> = targets
            .iter()
            .filter(|i| !doc.jobs[**i].state.is_final())
            .map(|i| doc.jobs[*i].key())
            .collect();
        let mut events = Vec::new();
        let stop = ops::cancel(&mut doc, &targets, now, &mut events);
        let archived = ops::archive(&mut doc);
        archive::append(tx, store, archived)?;
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, crate::Error>((keys, stop))
    })?;
    for s in &stop {
        if let Some(d) = &s.dispatcher {
            let (ws, id) = s.key.split_once('/').unwrap_or(("", &s.key));
            super::exec::kill_run(&format!("{d}/{ws}/{id}/{}", s.attempt), s.pid);
        }
    }
    Ok(Cancelled {
        cancelled,
        stopped: stop.into_iter().map(|s| s.key).collect(),
    })
}
