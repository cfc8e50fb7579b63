//! The MCP tools: each is a thin, synchronous call into the library (run on the runtime's
//! blocking pool), answering with a JSON object, or with a one-line error an agent can act on.
//! The catalog (names, descriptions, input schemas derived from the argument types of `args`)
//! is `catalog`; the protocol's tools are in `protocol`, the runtime's, the workflows' and the
//! queue's in `more`.

mod args;
mod catalog;
mod more;
mod protocol;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::identity::Identity;
use crate::face::{Ctx, Report};
use crate::output::Output;
use args::*;
pub use catalog::{DEFAULT, MAX_WAIT_SECONDS, catalog};
use conductor::agents::{self, ops as aops};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::protocol::local::ProcessTable;
use conductor::protocol::ops::ClaimOutcome;
use conductor::protocol::request::{DoneRequest, Request};
use conductor::protocol::sessions::{self, Acting, DoneOutcome, StartOutcome, Step, Stepped};
use conductor::protocol::types::Outcome;
use conductor::protocol::{Priority, State};
use conductor::store::Store;
use conductor::time::Timestamp;

/// The client's `notifications/cancelled` for a call: set from the runtime, seen by the call's
/// blocking thread, which it wakes when it waits on the journal.
#[derive(Clone, Default)]
pub struct Cancel(Arc<Mutex<CancelState>>);

#[derive(Default)]
struct CancelState {
    cancelled: bool,
    wake: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Cancel {
    /// The client gave the call up.
    pub fn cancel(&self) {
        let mut s = self.0.lock().expect("not poisoned");
        s.cancelled = true;
        if let Some(w) = &s.wake {
            w();
        }
    }

    fn cancelled(&self) -> bool {
        self.0.lock().expect("not poisoned").cancelled
    }

    /// Call `wake` on cancellation (at once if it already came).
    fn on_cancel(&self, wake: impl Fn() + Send + Sync + 'static) {
        let mut s = self.0.lock().expect("not poisoned");
        if s.cancelled {
            wake();
        }
        s.wake = Some(Box::new(wake));
    }
}

/// What a tool answered: an object, and whether it is an error the agent must act on.
pub struct Answer {
    pub json: Value,
    pub text: String,
    pub error: bool,
}

impl Answer {
    fn ok(json: Value) -> Answer {
        Answer {
            text: json.to_string(),
            json,
            error: false,
        }
    }
    /// An error as the CLI words it (`error: MESSAGE`, then `hint: ...`).
    pub fn failed(e: &Error) -> Answer {
        let mut text = format!("error: {e}");
        if let Some(h) = e.hint() {
            text.push_str(&format!("\nhint: {h}"));
        }
        let mut json = json!({"status": "error", "reason": e.reason(), "message": e.to_string()});
        if let Some(m) = e.maybe_applied() {
            json["maybe_applied"] = json!(m);
        }
        Answer {
            json,
            text,
            error: true,
        }
    }
}

/// The tools' shared state.
pub struct Tools {
    pub dir: PathBuf,
    pub lock_timeout: Duration,
    pub identity: Identity,
    /// The agent-runtime name for `inbox`, `post` and `dm`.
    pub agent: Option<String>,
}

/// The tools, built once for the server's life (each call looks its tool up here).
static CATALOG: std::sync::LazyLock<Vec<catalog::ToolDef>> = std::sync::LazyLock::new(catalog);

static OUT: Output = Output {
    json: true,
    quiet: true,
};

fn args<T: DeserializeOwned>(tool: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| {
        Error::invalid(
            Reason::InvalidInput,
            format!("invalid {tool} arguments: {e}"),
        )
    })
}

impl Tools {
    /// A fresh view of the home for one call (a store is cheap to open; calls run in parallel).
    pub fn store(&self) -> Result<Store> {
        Ok(Store::open(self.dir.clone(), self.lock_timeout)?)
    }

    fn ctx(&self) -> Result<Ctx<'static>> {
        Ok(Ctx {
            store: self.store()?,
            now: Timestamp::now(),
            out: &OUT,
        })
    }

    /// Run one tool; `cancel` ends a waiting claim early.
    pub fn call(&self, name: &str, v: Value, cancel: &Cancel) -> Answer {
        let r = self
            .ctx()
            .and_then(|ctx| match CATALOG.iter().find(|t| t.name == name) {
                Some(t) => t.call(self, &ctx, v, cancel),
                None => Err(Error::invalid(
                    Reason::InvalidInput,
                    format!("unknown tool `{name}`"),
                )),
            });
        r.unwrap_or_else(|e| Answer::failed(&e))
    }

    fn liveness(&self, ctx: &Ctx) -> Result<ProcessTable> {
        Ok(ProcessTable::new()
            .with_max_age(conductor::config::read(&ctx.store)?.default_max_age_minutes))
    }
}

fn claimed(o: &ClaimOutcome) -> Answer {
    let mut v =
        json!({"status": "ok", "claimed": o.claimed, "message": "Files claimed. Safe to edit."});
    if !o.tokens.is_empty() {
        v["tokens"] = json!(o.tokens);
    }
    if !o.forced.is_empty() {
        v["forced"] = json!(o.forced);
    }
    // What the CLI prints as `warning:` lines (an agent whose hooks were never live-checked
    // here, under require-verified).
    if !o.warnings.is_empty() {
        v["warnings"] = json!(o.warnings);
    }
    // Files a finished branch of another worktree changed, that must land first.
    if !o.landing.is_empty() {
        let notices: Vec<String> = o.landing.iter().map(|h| h.notice()).collect();
        v["landing"] = json!(o.landing);
        v["message"] = json!(format!("{}.", notices.join("; ")));
        if o.landing.iter().any(|h| h.refused) {
            v["status"] = json!("conflict");
        }
    }
    Answer::ok(v)
}

/// A refused claim: who holds each file, their task, when they were last seen, what to do next.
fn conflict(o: &ClaimOutcome, st: &State, now: Timestamp, waited: Option<u64>) -> Answer {
    let mut lines = Vec::new();
    if let Some(s) = waited {
        lines.push(format!("Waited {s} s; still held:"));
    }
    for c in &o.conflicts {
        let agent = st
            .instance(&c.held_by)
            .and_then(|i| i.agent.clone())
            .map(|a| format!("{a} session, "))
            .unwrap_or_default();
        let seen = c.holder_last_heartbeat.minutes_until(now);
        let next = if c.holder_alive {
            "Do not edit it: work on other files, coordinate with that session (dm, post), or call claim again with wait_seconds to take it the moment it is released."
        } else {
            "That session looks gone: a person may let you take it over with claim and force \"WHY\"."
        };
        let shown = conductor::hooks::in_worktree(
            &c.file,
            c.held_claim.as_deref().unwrap_or(&c.file),
            c.holder_worktree
                .as_deref()
                .map(|w| (w, c.holder_branch.as_deref())),
        );
        lines.push(format!(
            "CONFLICT: {shown} is claimed by {} ({agent}task \"{}\", last seen {seen} min ago). {next}",
            c.held_by,
            conductor::text::printable(&c.holder_task)
        ));
    }
    for l in &o.lost {
        lines.push(format!(
            "NOT HELD: {} was {}. Do not edit it; claim it again if you still need it.",
            l.file,
            l.describe()
        ));
    }
    if !o.claimed.is_empty() {
        lines.push(format!("Claimed the free ones: {}.", o.claimed.join(", ")));
    }
    let holders: Vec<Value> = o
        .conflicts
        .iter()
        .map(|c| {
            let mut v = json!({"file": c.file, "held_by": c.held_by, "holder_task": c.holder_task,
                   "holder_alive": c.holder_alive,
                   "holder_last_seen_minutes": c.holder_last_heartbeat.minutes_until(now)});
            if let Some(w) = &c.holder_worktree {
                v["holder_worktree"] = json!(w);
            }
            if let Some(b) = &c.holder_branch {
                v["holder_branch"] = json!(b);
            }
            v
        })
        .collect();
    let mut json = json!({"status": "conflict", "conflicts": holders, "claimed": o.claimed});
    if !o.lost.is_empty() {
        json["lost"] = json!(o.lost);
    }
    Answer {
        json,
        text: lines.join("\n"),
        error: true,
    }
}
