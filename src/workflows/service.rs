//! The workflow operations as every face calls them (the CLI's `workflow start`, `workflow
//! transition` and `workflow snapshot`, the MCP server's `workflow_transition` and
//! `workflow_update_snapshot`): a typed request in, a typed outcome out, one transaction each
//! ([`super::update`]). Nothing here prints.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

use super::session::{SessionRules, Snapshot};
use super::{Session, Sessions, event, persona, rules, template, update};
use crate::error::{Error, Reason, Result};
use crate::store::{Lock, Store};
use crate::time::Timestamp;

/// Damage-control's rules file, used when the template names none.
pub const DEFAULT_RULES: &str = ".pi/damage-control-rules.yaml";

/// What `start` is asked.
#[derive(Clone, Debug)]
pub struct StartRequest {
    /// A name (NAME.json in the project's .conductor/workflows/, then in the home's
    /// workflows/) or a path to a .json file.
    pub template: String,
    /// What the workflow is for; every worker sees it.
    pub task: String,
    /// The project directory the workers run in (absolute, symlinks resolved).
    pub project: String,
}

/// A started session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Started {
    pub session: String,
    /// The template's name.
    pub template: String,
    /// Its initial state.
    pub state: String,
    /// The safety rules file in force, if any.
    pub rules_file: Option<String>,
}

/// Start a session in the template's initial state. The template is checked, every state's
/// persona resolved and the safety rules parsed first: any problem is an error and nothing is
/// written.
pub fn start(store: &Store, now: Timestamp, req: &StartRequest) -> Result<Started> {
    let pdir = Path::new(&req.project);
    if req.task.trim().is_empty() {
        return Err(Error::invalid(Reason::InvalidInput, "the task is empty"));
    }
    let path = template::find(&req.template, pdir, store.home().dir())?;
    let t = template::load(&path)?;
    for def in t.states.values() {
        persona::resolve(&def.persona, pdir)?;
    }
    let rules = load_rules(&t, pdir)?;
    let id = format!("wf-{}", crate::host::random_hex6());
    let s = Session::new(
        id.clone(),
        t,
        path.display().to_string(),
        req.task.clone(),
        req.project.clone(),
        rules,
        now,
    );
    let initial = s.template.initial.clone();
    let name = s.template.name.clone();
    let rules_file = s.rules.as_ref().map(|r| r.file.clone());
    store.transaction(now, &[Lock::Workflows], |tx| {
        let mut doc: Sessions = tx.read()?;
        tx.event(super::event(
            event::STARTED,
            &s,
            json!({"template": name, "task": s.task, "initial": initial}),
        ));
        doc.sessions.push(s.clone());
        doc.updated_at = now;
        tx.write(&doc)
    })?;
    Ok(Started {
        session: id,
        template: name,
        state: initial,
        rules_file,
    })
}

fn expand(p: &str, base: &Path) -> PathBuf {
    let p = match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => PathBuf::from(p),
    };
    base.join(p)
}

/// Parse the session's rules file; a file that does not parse is an error, not an empty set.
pub fn load_rules(t: &template::Template, project: &Path) -> Result<Option<SessionRules>> {
    let (path, named) = match &t.rules {
        Some(r) => (expand(r, project), true),
        None => (project.join(DEFAULT_RULES), false),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(e) => {
            return Err(Error::invalid(
                Reason::InvalidRules,
                format!("cannot read the rules file `{}`: {e}", path.display()),
            ));
        }
    };
    let parsed = rules::parse(&text).map_err(|e| {
        Error::invalid(
            Reason::InvalidRules,
            format!("the rules file `{}` does not parse: {e}", path.display()),
        )
    })?;
    Ok(Some(SessionRules {
        file: path.display().to_string(),
        rules: parsed,
    }))
}

/// A person's control of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Let a state that `requires_approval` run.
    Approve,
    /// Leave human_intervention (or failed, budget_exceeded) for state `to`.
    Resolve {
        to: String,
    },
    Pause,
    Resume,
    Abort,
}

/// Apply a person's control to a session (by id or unique prefix); returns the session after
/// it.
pub fn control(store: &Store, now: Timestamp, session: &str, c: &Control) -> Result<Session> {
    let id = super::find_session(store, now, session)?.id;
    update(store, now, &id, |s, _| {
        match c {
            Control::Approve => s.approve(now),
            Control::Resolve { to } => s.resolve(to, now),
            Control::Pause => s.pause(now),
            Control::Resume => s.resume(now),
            Control::Abort => s.abort(now),
        }?;
        Ok(s.clone())
    })
}

/// What a worker's usage report did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsageRecorded {
    /// The budget passed (the session stopped in budget_exceeded), if any.
    pub exceeded: Option<String>,
    /// The session's totals after the report.
    pub totals: super::session::Totals,
}

/// Add what the worker of `state` (`None`: whichever is current) used to its run and the
/// session's totals; a budget passed stops the session.
pub fn report_usage(
    store: &Store,
    now: Timestamp,
    session: &str,
    state: Option<&str>,
    tokens: u64,
    cost_usd: f64,
) -> Result<UsageRecorded> {
    update(store, now, session, |s, _| {
        let exceeded = s.add_usage(state, tokens, cost_usd, now)?;
        Ok(UsageRecorded {
            exceeded,
            totals: s.totals.clone(),
        })
    })
}

/// Record that the worker of `state` (`None`: whichever is current) finished it, moving to
/// `target` with `summary`; the supervisor applies it when the worker exits. Returns the state
/// it leaves.
pub fn transition(
    store: &Store,
    now: Timestamp,
    session: &str,
    state: Option<&str>,
    target: &str,
    summary: &str,
) -> Result<String> {
    update(store, now, session, |s, ev| {
        s.request_transition(state, target, summary, now)?;
        let from = s.current_state.clone().unwrap_or_default();
        ev.push(super::event(
            event::TRANSITION_REQUESTED,
            s,
            json!({"from": from, "to": target, "summary": summary}),
        ));
        Ok(from)
    })
}

/// What a worker adds to the session's snapshot (each list appended to, each value set).
#[derive(Clone, Debug, Default)]
pub struct SnapshotUpdate {
    pub findings: Vec<String>,
    pub files: Vec<String>,
    pub pending: Vec<String>,
    pub set: Vec<(String, String)>,
}

impl SnapshotUpdate {
    /// Values to set from a JSON object (a value that is not a string as its JSON text).
    pub fn values_of(map: &serde_json::Map<String, serde_json::Value>) -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| {
                let v = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                (k.clone(), v)
            })
            .collect()
    }
}

/// Add to the snapshot of `session` as the worker of `state`; returns the whole snapshot.
pub fn update_snapshot(
    store: &Store,
    now: Timestamp,
    session: &str,
    state: Option<&str>,
    add: &SnapshotUpdate,
) -> Result<Snapshot> {
    update(store, now, session, |s, ev| {
        s.update_snapshot(
            state,
            &add.findings,
            &add.files,
            &add.pending,
            &add.set,
            now,
        )?;
        // Written so that a reader of the journal (an MCP resource subscriber) sees the change.
        ev.push(super::event(
            super::event::SNAPSHOT_UPDATED,
            s,
            serde_json::json!({"state": state}),
        ));
        Ok(s.snapshot.clone())
    })
}
