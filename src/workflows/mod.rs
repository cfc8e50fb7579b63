//! Workflows (the Chronicle): supervised state machines where each state is run by a fresh agent
//! process with its own persona, and everything is kept in a ledger in the home.
//!
//! # Files
//! - `workflows.json` ([`Sessions`], under `workflows.lock`): every session that is not finished,
//!   whole: its template (copied at `start`, so editing the file never changes a running
//!   session), status, current state, the pending transition, the history of state runs, the
//!   snapshot, the transition counts per directed edge, totals, the baseline each run started
//!   from, the safety rules and a log of every checkpoint (transition, snapshot update, usage
//!   report, cleanup command, interception). One document rather than one file per session: the
//!   store's transactions are per document, and the live set is small.
//! - `workflows-finished.jsonl` ([`FINISHED`]): a session that ends (`done` or `aborted`) leaves
//!   `workflows.json` and is appended here, whole, as one line, in the same transaction; so the
//!   live document does not grow with history, and nothing is ever lost.
//! - `workflow-sessions/<id>/`: each run's prompt, system prompt and output (0700/0600); the
//!   only files of this domain written outside the store.
//! - Events in the journal: `workflow.started`, `workflow.state.started`,
//!   `workflow.transition.requested`, `workflow.transition`, `workflow.worker.exited`,
//!   `workflow.status` (any status change), `workflow.intercepted`.
//!
//! Every change is one transaction under `Lock::Workflows` whose operation is a pure function of
//! the session and `now` (the functions of [`session`]), so a crash at any instant leaves either
//! the whole change or none of it; the supervisor (`conductor workflow run`) is restartable at
//! any point from what the ledger says.

pub mod baseline;
pub mod checks;
pub mod persona;
pub mod rules;
pub mod service;
pub mod session;
pub mod supervisor;
pub mod template;
pub mod timeline;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use session::{Run, RunOutcome, Session, Status};

use crate::error::Reason;
use crate::error::{Error, Result};
use crate::store::event::NewEvent;
use crate::store::{Document, LedgerFile, Lock, Store};
use crate::time::Timestamp;

/// Finished sessions, one JSON object per line.
pub const FINISHED: LedgerFile = LedgerFile {
    name: "workflows-finished.jsonl",
    lock: Lock::Workflows,
};

/// The directory (in the home) of the per-session prompt and output files.
pub const SESSION_FILES_DIR: &str = "workflow-sessions";

/// The live sessions (`workflows.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    pub version: String,
    pub updated_at: Timestamp,
    pub sessions: Vec<Session>,
}

impl Document for Sessions {
    const FILE: &'static str = "workflows.json";
    const LOCK: Lock = Lock::Workflows;

    fn empty(now: Timestamp) -> Self {
        Sessions {
            version: "1.0".into(),
            updated_at: now,
            sessions: Vec::new(),
        }
    }

    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let doc: Sessions = serde_json::from_slice(bytes)
            .map_err(|e| crate::store::corrupt(path, format!("not a workflows document ({e})")))?;
        if doc.version != "1.0" {
            return Err(crate::store::corrupt(
                path,
                format!("unknown version `{}` (this build reads 1.0)", doc.version),
            ));
        }
        Ok(doc)
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("workflow sessions serialize");
        v.push(b'\n');
        v
    }
}

impl Sessions {
    /// The session with this id.
    pub fn get_mut(&mut self, id: &str) -> Result<&mut Session> {
        self.sessions
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| unknown_session(id))
    }
}

/// The error for a session id that is not live.
pub fn unknown_session(id: &str) -> Error {
    Error::invalid(
        Reason::UnknownSession,
        format!("no live workflow session `{id}` (see `conductor workflow list`)"),
    )
}

/// Event types of this domain.
pub mod event {
    pub const STARTED: &str = "workflow.started";
    pub const STATE_STARTED: &str = "workflow.state.started";
    pub const TRANSITION_REQUESTED: &str = "workflow.transition.requested";
    pub const TRANSITION: &str = "workflow.transition";
    pub const WORKER_EXITED: &str = "workflow.worker.exited";
    pub const STATUS: &str = "workflow.status";
    pub const INTERCEPTED: &str = "workflow.intercepted";
    /// A worker recorded findings, files, pending tasks or values (MCP subscribers re-read).
    pub const SNAPSHOT_UPDATED: &str = "workflow.snapshot.updated";
}

/// An event about a session.
pub fn event(kind: &'static str, s: &Session, payload: serde_json::Value) -> NewEvent {
    let mut payload = payload;
    if let serde_json::Value::Object(m) = &mut payload {
        m.insert("session".into(), s.id.clone().into());
    }
    NewEvent {
        event_type: kind,
        actor: s.active_run().and_then(|r| r.instance_id.clone()),
        target: None,
        project: Path::new(&s.project_dir)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        payload,
    }
}

/// Run `op` on one live session in a transaction: the session's status before and after are
/// compared (a change is a `workflow.status` event), a finished session moves to
/// [`FINISHED`], and `op`'s events are appended. An `Err` writes nothing.
pub fn update<T>(
    store: &Store,
    now: Timestamp,
    id: &str,
    mut op: impl FnMut(&mut Session, &mut Vec<NewEvent>) -> Result<T>,
) -> Result<T> {
    store.transaction(now, &[Lock::Workflows], |tx| {
        let mut doc: Sessions = tx.read()?;
        let s = doc.get_mut(id)?;
        let before = s.status;
        let mut events = Vec::new();
        let value = op(s, &mut events)?;
        s.updated_at = now;
        if s.status != before {
            events.push(event(
                event::STATUS,
                s,
                serde_json::json!({"from": before, "to": s.status, "reason": s.halt}),
            ));
        }
        let finished = s.status.is_finished();
        if finished {
            let line = serde_json::to_string(&*s).expect("sessions serialize");
            tx.append(FINISHED, line)?;
            doc.sessions.retain(|x| x.id != id);
        }
        doc.updated_at = now;
        tx.write(&doc)?;
        events.into_iter().for_each(|e| tx.event(e));
        Ok(value)
    })
}

/// Every session: the live ones, then the finished ones (newest last).
pub fn all_sessions(store: &Store, now: Timestamp) -> Result<Vec<Session>> {
    let doc: Sessions = store.read_doc(now)?;
    let mut out = doc.sessions;
    store.read_ledger_file(FINISHED, |_, line| {
        if let crate::store::ledger::Line::Complete(text) = line
            && let Ok(s) = serde_json::from_str::<Session>(&text)
        {
            out.retain(|x| x.id != s.id);
            out.push(s);
        }
        Ok::<_, crate::Error>(true)
    })?;
    Ok(out)
}

/// One session, live or finished. A unique prefix of its id is enough.
pub fn find_session(store: &Store, now: Timestamp, id: &str) -> Result<Session> {
    let all = all_sessions(store, now)?;
    if let Some(s) = all.iter().find(|s| s.id == id) {
        return Ok(s.clone());
    }
    let matching: Vec<&Session> = all.iter().filter(|s| s.id.starts_with(id)).collect();
    match matching.as_slice() {
        [one] if !id.is_empty() => Ok((*one).clone()),
        [] | [_] => Err(unknown_session(id)),
        many => Err(Error::invalid(
            Reason::AmbiguousSession,
            format!(
                "`{id}` matches {} sessions: {}",
                many.len(),
                many.iter()
                    .map(|s| s.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The enforcement entry point for the agent hook: decide a worker's tool call against its
/// session's rules, and log every interception (deny or ask) in the session's ledger with a
/// `workflow.intercepted` event. With `log_allowed`, an allowed call is checkpointed too (as
/// `tool_call`, no event): `workflow guard` does that, since a worker calling it reports the
/// call; a hook may prefer not to write on every allowed call. A session without rules allows
/// everything.
///
/// The hook (PreToolUse) calls it for workers only, that is when `CONDUCTOR_WORKFLOW_SESSION`
/// is set in its environment (the supervisor sets it for the worker, and the agent passes its
/// environment to its hooks):
///
/// ```ignore
/// if let Some(sid) = std::env::var("CONDUCTOR_WORKFLOW_SESSION").ok().filter(|s| !s.is_empty())
///     && let Some(call) = rules::ToolCall::from_hook(&tool_name, &tool_input)
/// {
///     match workflows::guard(&store, now, &sid, &call, &cwd, false) {
///         Ok(rules::Decision::Deny(reason)) => /* permissionDecision "deny", reason */,
///         Ok(rules::Decision::Ask(reason)) => /* permissionDecision "ask", reason */,
///         Ok(rules::Decision::Allow) | Err(_) => /* go on with the claim checks */,
///     }
/// }
/// ```
///
/// `conductor workflow guard --bash CMD | --read PATH | --edit PATH` runs the same check from the
/// command line (exit 0 allow, 3 ask, 4 deny), for agent CLIs whose hooks are shell commands.
pub fn guard(
    store: &Store,
    now: Timestamp,
    session_id: &str,
    call: &rules::ToolCall,
    cwd: &Path,
    log_allowed: bool,
) -> Result<rules::Decision> {
    let doc: Sessions = store.read_doc(now)?;
    let Some(s) = doc.sessions.iter().find(|s| s.id == session_id) else {
        return Err(unknown_session(session_id));
    };
    let decision = match &s.rules {
        Some(r) => rules::check(&r.rules, call, &rules::Context::new(cwd)),
        None => rules::Decision::Allow,
    };
    if decision == rules::Decision::Allow && log_allowed {
        update(store, now, session_id, |s, _| {
            s.log(now, "tool_call", serde_json::json!({"call": call}));
            Ok(())
        })?;
    } else if decision != rules::Decision::Allow {
        let d = decision.clone();
        update(store, now, session_id, |s, ev| {
            let detail = serde_json::json!({"call": call, "decision": d});
            s.log(now, "intercepted", detail.clone());
            ev.push(event(event::INTERCEPTED, s, detail));
            Ok(())
        })?;
    }
    Ok(decision)
}
