//! The MCP tools: each is a thin, synchronous call into the library (run on the runtime's
//! blocking pool), answering with a JSON object, or with a one-line error an agent can act on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::identity::Identity;
use crate::face::{Ctx, Report};
use crate::output::Output;
use conductor::agents::{self, Agents, Inbox, ops as aops};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::protocol::local::{PathNormalizer, ProcessTable};
use conductor::protocol::ops::ClaimOutcome;
use conductor::protocol::request::{ClaimRequest, DoneRequest, ReleaseRequest, Request};
use conductor::protocol::sessions::{self, Acting, DoneOutcome, StartOutcome, Step, Stepped};
use conductor::protocol::types::Outcome;
use conductor::protocol::{Priority, State};
use conductor::store::Store;
use conductor::time::Timestamp;

/// The longest `claim` waits (`wait_seconds`): MCP clients time requests out.
pub const MAX_WAIT_SECONDS: u64 = 600;

/// Tools offered without `--tools`.
pub const DEFAULT: &[&str] = &[
    "status",
    "start",
    "claim",
    "release",
    "done",
    "check",
    "events",
    "inbox",
    "inbox_act",
    "post",
    "dm",
];

/// Every tool: name, description, input schema.
pub fn catalog() -> Vec<(&'static str, &'static str, Value)> {
    let files = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
    vec![
        (
            "status",
            "Live sessions, their tasks and claimed files, conflicts; `you` is this session's instance.",
            json!({"type": "object", "properties": {}}),
        ),
        (
            "start",
            "State this session's task (runs the priority gate).",
            json!({"type": "object", "properties": {
             "task": {"type": "string"}, "priority": {"enum": ["P1", "P2", "P3"]},
             "project": {"type": "string"}, "override": {"type": "string", "description": "why to proceed past the gate"}},
             "required": ["task"]}),
        ),
        (
            "claim",
            "Claim files before editing them. Held files come back as an error naming the holder; wait_seconds waits for their release.",
            json!({"type": "object", "properties": {
             "files": files, "force": {"type": "string", "description": "take held files over, logging this reason"},
             "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS}},
             "required": ["files"]}),
        ),
        (
            "release",
            "Release claimed files (or all) without finishing the task.",
            json!({"type": "object", "properties": {"files": files, "all": {"type": "boolean"}, "reason": {"type": "string"}}}),
        ),
        (
            "done",
            "Finish the task: recorded in history, every claim released.",
            json!({"type": "object", "properties": {
             "outcome": {"enum": ["success", "abandoned", "conflict"]},
             "files_modified": {"type": "array", "items": {"type": "string"}}, "notes": {"type": "string"}}}),
        ),
        (
            "check",
            "Who holds these paths, and may this session edit them?",
            json!({"type": "object", "properties": {"files": files}, "required": ["files"]}),
        ),
        (
            "events",
            "Journal events after a seq, optionally of some types.",
            json!({"type": "object", "properties": {
             "after": {"type": "integer", "minimum": 0}, "types": {"type": "array", "items": {"type": "string"}},
             "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}}),
        ),
        (
            "inbox",
            "An agent's actionable inbox items.",
            json!({"type": "object", "properties": {"agent": {"type": "string"}}}),
        ),
        (
            "inbox_act",
            "Mark an inbox item seen, complete it (completion_ref required) or skip it.",
            json!({"type": "object", "properties": {
             "id": {"type": "string"}, "action": {"enum": ["seen", "complete", "skip"]},
             "completion_ref": {"type": "object", "additionalProperties": {"type": "string"}},
             "agent": {"type": "string"}},
             "required": ["id", "action"]}),
        ),
        (
            "post",
            "Post in a channel; @agent mentions reach their inboxes.",
            json!({"type": "object", "properties": {
             "channel": {"type": "string"}, "text": {"type": "string"}, "reply_to": {"type": "string"},
             "priority": {"enum": ["low", "normal", "high", "urgent"]}},
             "required": ["channel", "text"]}),
        ),
        (
            "dm",
            "Write to an agent directly (lands in its inbox).",
            json!({"type": "object", "properties": {
             "agent": {"type": "string"}, "text": {"type": "string"},
             "priority": {"enum": ["low", "normal", "high", "urgent"]}},
             "required": ["agent", "text"]}),
        ),
        (
            "workflow_transition",
            "Finish this worker's workflow state: move to TARGET (or done).",
            json!({"type": "object", "properties": {
             "target": {"type": "string"}, "summary": {"type": "string"}, "session": {"type": "string"}},
             "required": ["target", "summary"]}),
        ),
        (
            "workflow_update_snapshot",
            "Record findings, files, pending tasks or values for later workflow states.",
            json!({"type": "object", "properties": {
             "findings": {"type": "array", "items": {"type": "string"}},
             "files": {"type": "array", "items": {"type": "string"}},
             "pending": {"type": "array", "items": {"type": "string"}},
             "set": {"type": "object", "additionalProperties": {"type": "string"}},
             "session": {"type": "string"}}}),
        ),
        (
            "queue_submit",
            "Submit a job-queue manifest ({workspace, jobs}).",
            json!({"type": "object", "properties": {"manifest": {"type": "object"}}, "required": ["manifest"]}),
        ),
        (
            "queue_status",
            "Jobs and their states (a workspace's, archived ones included).",
            json!({"type": "object", "properties": {"workspace": {"type": "string"}, "all": {"type": "boolean"}}}),
        ),
    ]
}

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
        Answer {
            json: json!({"status": "error", "reason": e.reason(), "message": e.to_string()}),
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartArgs {
    task: String,
    #[serde(default)]
    priority: Option<Priority>,
    project: Option<String>,
    #[serde(rename = "override")]
    override_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimArgs {
    files: Vec<String>,
    force: Option<String>,
    wait_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseArgs {
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    all: bool,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DoneArgs {
    outcome: Option<String>,
    files_modified: Option<Vec<String>>,
    notes: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesArgs {
    files: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsArgs {
    after: Option<u64>,
    #[serde(default)]
    types: Vec<String>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InboxArgs {
    agent: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InboxActArgs {
    id: String,
    action: String,
    #[serde(default)]
    completion_ref: serde_json::Map<String, Value>,
    agent: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostArgs {
    channel: String,
    text: String,
    reply_to: Option<String>,
    priority: Option<agents::Priority>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DmArgs {
    agent: String,
    text: String,
    priority: Option<agents::Priority>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransitionArgs {
    target: String,
    summary: String,
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotArgs {
    #[serde(default)]
    findings: Vec<String>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    pending: Vec<String>,
    #[serde(default)]
    set: serde_json::Map<String, Value>,
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitArgs {
    manifest: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueueStatusArgs {
    workspace: Option<String>,
    #[serde(default)]
    all: bool,
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
        let r = self.ctx().and_then(|ctx| match name {
            "status" => self.status(&ctx, args(name, v)?),
            "start" => self.start(&ctx, args(name, v)?),
            "claim" => self.claim(&ctx, args(name, v)?, cancel),
            "release" => self.release(&ctx, args(name, v)?),
            "done" => self.done(&ctx, args(name, v)?),
            "check" => self.check(&ctx, args(name, v)?),
            "events" => self.events(&ctx, args(name, v)?),
            "inbox" => self.inbox(&ctx, args(name, v)?),
            "inbox_act" => self.inbox_act(&ctx, args(name, v)?),
            "post" => self.post(&ctx, args(name, v)?),
            "dm" => self.dm(&ctx, args(name, v)?),
            "workflow_transition" => self.transition(&ctx, args(name, v)?),
            "workflow_update_snapshot" => self.snapshot(&ctx, args(name, v)?),
            "queue_submit" => self.queue_submit(&ctx, args(name, v)?),
            "queue_status" => self.queue_status(&ctx, args(name, v)?),
            _ => Err(Error::invalid(
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

    fn status(&self, ctx: &Ctx, _: Empty) -> Result<Answer> {
        let state = conductor::protocol::read(&ctx.store, ctx.now)?;
        let you = self.identity.current(&state)?;
        let mut v = crate::face::status::report(state, ctx.now, ctx.cwd().ok()).to_json();
        v["you"] = json!(you);
        Ok(Answer::ok(v))
    }

    fn start(&self, ctx: &Ctx, a: StartArgs) -> Result<Answer> {
        if a.task.trim().is_empty() {
            return Err(Error::invalid(Reason::InvalidInput, "the task is empty"));
        }
        let req = sessions::RetaskRequest {
            task: a.task,
            project: a.project,
            priority: a.priority.unwrap_or(Priority::P1),
            override_reason: a.override_reason,
        };
        let own = |st: &mut State, now, fx: &mut Vec<_>| self.identity.require(st, now, fx);
        match sessions::retask_own(&ctx.store, ctx.now, &req, &own)? {
            StartOutcome::Blocked { message, options } => {
                let text = format!(
                    "BLOCKED by the priority gate: {message}\nOptions: {}\nCall start again with `override` set to your justification to proceed (a drift warning is recorded).",
                    options.join("; ")
                );
                Ok(Answer {
                    json: json!({"status": "blocked", "reason": "priority_gate", "message": message, "options": options}),
                    text,
                    error: true,
                })
            }
            StartOutcome::Started {
                instance_id: id,
                drift,
            } => Ok(Answer::ok(
                json!({"status": "ok", "instance_id": id, "drift_warning": drift,
                "message": "Task recorded. Claim files before editing them."}),
            )),
        }
    }

    fn claim(&self, ctx: &Ctx, a: ClaimArgs, cancel: &Cancel) -> Result<Answer> {
        conductor::protocol::request::validate(&Request::Claim(ClaimRequest {
            instance_id: None,
            files: a.files.clone(),
            force: a.force.clone(),
        }))?;
        if a.force.is_some() && a.wait_seconds.is_some() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "`force` and `wait_seconds` exclude each other",
            ));
        }
        if a.wait_seconds.is_some_and(|w| w > MAX_WAIT_SECONDS) {
            return Err(Error::invalid(
                Reason::InvalidInput,
                format!("wait_seconds is at most {MAX_WAIT_SECONDS}"),
            ));
        }
        let live = self.liveness(ctx)?;
        let now = ctx.now;
        let wait = a.wait_seconds.filter(|w| *w > 0);
        // Watch the journal before claiming, so a release right after is not missed.
        let watcher = match wait {
            Some(_) => Some(
                ctx.store
                    .watcher(|n| n == conductor::store::journal::ACTIVE)?,
            ),
            None => None,
        };
        let req = ClaimRequest {
            instance_id: None,
            files: a.files,
            force: a.force,
        };
        let since = match wait {
            Some(_) => ctx.store.last_event_seq()?,
            None => 0,
        };
        let step = match wait {
            Some(_) => Step::Enqueue {
                pid: std::process::id(),
            },
            None => Step::Plain {
                force: req.force.as_deref(),
            },
        };
        let own = |st: &mut State, now, fx: &mut Vec<_>| self.identity.require(st, now, fx);
        let Stepped {
            instance_id: id,
            files,
            outcome,
            state: st,
        } = sessions::claim_step(
            &ctx.store,
            now,
            &ctx.caller(),
            &req,
            step,
            &live,
            Acting::Own(&own),
        )?;
        if outcome.conflicts.is_empty() {
            return Ok(claimed(&outcome));
        }
        let (Some(secs), Some(watcher)) = (wait, watcher) else {
            return Ok(conflict(&outcome, &st, now, None));
        };
        cancel.on_cancel(watcher.stopper());
        let deadline = Instant::now() + Duration::from_secs(secs);
        use conductor::protocol::sessions::{Waited, wait_for_claim};
        let (outcome, st, now) = match wait_for_claim(
            &ctx.store,
            &id,
            &files,
            &live,
            &watcher,
            Some(deadline),
            since,
        )? {
            Waited::Claimed(outcome) => return Ok(claimed(&outcome)),
            Waited::GaveUp {
                outcome,
                state,
                now,
            } => (outcome, state, now),
        };
        // A cancelled call stopped the watcher: the wait gave up early; leave nothing behind.
        if cancel.cancelled() {
            return self.cancelled_wait(ctx, &id, &files);
        }
        if outcome.conflicts.is_empty() && outcome.lost.is_empty() {
            return Ok(claimed(&outcome));
        }
        Ok(conflict(&outcome, &st, now, Some(secs)))
    }

    /// The client cancelled a waiting claim: leave the queues and forget the conflicts the wait
    /// was about, so nothing is handed to a call no one waits for. Files already granted stay.
    fn cancelled_wait(&self, ctx: &Ctx, id: &str, files: &[String]) -> Result<Answer> {
        let held = sessions::leave_wait(&ctx.store, Timestamp::now(), id, files)?;
        let got: Vec<&String> = files.iter().filter(|f| held.contains(f)).collect();
        Ok(Answer {
            json: json!({"status": "cancelled", "claimed": got}),
            text: "The wait was cancelled; this session left the queue.".into(),
            error: true,
        })
    }

    fn release(&self, ctx: &Ctx, a: ReleaseArgs) -> Result<Answer> {
        if a.all == !a.files.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "give either `files` or `all: true`",
            ));
        }
        let req = ReleaseRequest {
            instance_id: None,
            files: Some(a.files.clone()),
            all: Some(a.all),
            reason: a.reason.clone(),
            force: None,
        };
        let current = |st: &State| self.identity.current(st);
        let released = sessions::release_as(
            &ctx.store,
            ctx.now,
            &ctx.caller(),
            &req,
            Acting::Face(&current),
        )?;
        let message = if released.is_empty() {
            "Nothing to release."
        } else {
            "Released."
        };
        Ok(Answer::ok(
            json!({"status": "ok", "released": released, "message": message}),
        ))
    }

    fn done(&self, ctx: &Ctx, a: DoneArgs) -> Result<Answer> {
        let outcome = match a.outcome.as_deref().unwrap_or("success") {
            "success" => Outcome::Success,
            "abandoned" => Outcome::Abandoned,
            "conflict" => Outcome::Conflict,
            s => {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "`{}` is not one of success, abandoned, conflict",
                        conductor::text::printable(s)
                    ),
                ));
            }
        };
        let req = DoneRequest {
            instance_id: None,
            outcome: Some(outcome),
            files_modified: a.files_modified.clone(),
            notes: a.notes.clone(),
        };
        let current = |st: &State| self.identity.current(st);
        let DoneOutcome {
            instance_id: id,
            released,
            ..
        } = sessions::done_as(
            &ctx.store,
            ctx.now,
            &ctx.caller(),
            &req,
            Acting::Face(&current),
        )?;
        Ok(Answer::ok(
            json!({"status": "ok", "instance_id": id, "outcome": outcome,
            "released": released, "message": "Task complete. All claims released."}),
        ))
    }

    fn check(&self, ctx: &Ctx, a: FilesArgs) -> Result<Answer> {
        if a.files.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "give at least one file",
            ));
        }
        let mut st = conductor::protocol::read(&ctx.store, ctx.now)?;
        let live = self.liveness(ctx)?;
        let enforce = conductor::config::read(&ctx.store)?
            .enforce
            .unwrap_or_default();
        let me_id = self.identity.current(&st)?;
        let files = match &me_id {
            Some(id) => conductor::protocol::sessions::resolve_with_paths(
                &ctx.store,
                &ctx.caller(),
                &mut st,
                &Some(id.clone()),
                &[&a.files],
            )?
            .1
            .remove(0),
            None => {
                let cwd = ctx.cwd()?;
                let mut norm = PathNormalizer::new(cwd).with_repo_keys(ctx.store.shared_by_hosts());
                let files = a
                    .files
                    .iter()
                    .map(|p| norm.normalize(p))
                    .collect::<Result<Vec<_>>>()?;
                st.repos.merge(norm.worktrees());
                files
            }
        };
        let me = me_id.as_deref().and_then(|id| st.instance(id));
        let home = match me {
            Some(m) => m.working_directory.clone(),
            None => ctx.cwd()?.to_string_lossy().into_owned(),
        };
        let globs: Vec<String> = conductor::protocol::claims::glob_keys(&st.global_claims)
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut out = Vec::new();
        for f in &files {
            let in_project = conductor::hooks::inside(f, &home);
            let d = conductor::hooks::decide(&st, me, f, in_project, enforce, ctx.now, &live);
            // Another session's claim over it (in any worktree of its repository), else its own.
            let holder = conductor::protocol::ops::overlapping_claims(&st, &globs, f)
                .iter()
                .filter_map(|(_, h, _)| st.instance(h))
                .find(|h| Some(h.id.as_str()) != me_id.as_deref())
                .or_else(|| st.global_claims.get(f).and_then(|h| st.instance(h)));
            let (may_edit, note) = match d {
                conductor::hooks::Decision::Allow => (true, None),
                conductor::hooks::Decision::Claim => (
                    true,
                    Some(
                        "free: it is claimed for you on your first edit (or call claim)"
                            .to_string(),
                    ),
                ),
                conductor::hooks::Decision::Deny(m) | conductor::hooks::Decision::Ask(m) => {
                    (false, Some(m))
                }
            };
            out.push(json!({
                "file": f,
                "may_edit": may_edit,
                "held_by": holder.map(|h| h.id.clone()),
                "holder_task": holder.map(|h| h.task.clone()),
                "holder_last_seen_minutes": holder.map(|h| h.last_heartbeat.minutes_until(ctx.now)),
                "yours": holder.is_some_and(|h| Some(h.id.as_str()) == me_id.as_deref()),
                "note": note,
            }));
        }
        Ok(Answer::ok(
            json!({"status": "ok", "you": me_id, "files": out}),
        ))
    }

    fn events(&self, ctx: &Ctx, a: EventsArgs) -> Result<Answer> {
        let limit = a.limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(Error::invalid(Reason::InvalidInput, "limit is 1 to 1000"));
        }
        let filter = conductor::app::events::Filter::new(a.types, None)?;
        Ok(Answer::ok(crate::face::events_page(
            ctx, a.after, limit, &filter,
        )?))
    }

    fn agent_name(&self, given: Option<String>) -> Result<String> {
        given.or_else(|| self.agent.clone()).ok_or_else(|| {
            Error::invalid(
                Reason::InvalidInput,
                "which agent? pass `agent`, or start the server with --agent NAME (or CONDUCTOR_AGENT)",
            )
        })
    }

    fn inbox(&self, ctx: &Ctx, a: InboxArgs) -> Result<Answer> {
        let name = self.agent_name(a.agent)?;
        let mut agents: Agents = ctx.store.read_doc(ctx.now)?;
        let name = aops::agent(&agents, &name)?.name.clone();
        let mut inbox: Inbox = agents::inbox_files::snapshot(
            &ctx.store,
            ctx.now,
            &agents::inbox_files::Scope::one(&name),
        )?;
        // What the next write will expire is not shown (the same rule and clock as `inbox`).
        aops::expire(
            &mut agents,
            &mut inbox,
            ctx.now,
            agents::now_ms(),
            &mut aops::Fx::default(),
        );
        let mut items: Vec<&agents::Item> =
            inbox.items.values().filter(|i| i.agent == name).collect();
        items.sort_by(|a, b| aops::pick_order(a, b));
        Ok(Answer::ok(
            json!({"status": "ok", "agent": name, "items": items}),
        ))
    }

    fn update_item(
        &self,
        ctx: &Ctx,
        id: &str,
        status: agents::Status,
        completion_ref: Option<serde_json::Map<String, Value>>,
        by: Option<&str>,
    ) -> Result<agents::Item> {
        let u = agents::service::ItemUpdate {
            id: id.to_string(),
            status,
            completion_ref,
        };
        let mut items = agents::service::update_items(&ctx.store, ctx.now, &[u], by, false)?;
        Ok(items.remove(0))
    }

    fn inbox_act(&self, ctx: &Ctx, a: InboxActArgs) -> Result<Answer> {
        let by = a
            .agent
            .clone()
            .or_else(|| self.agent.clone())
            .map(|s| s.to_ascii_lowercase());
        let status = match a.action.as_str() {
            "seen" => {
                if !a.completion_ref.is_empty() {
                    return Err(Error::invalid(
                        Reason::InvalidInput,
                        "completion_ref is for complete",
                    ));
                }
                let item = self.update_item(ctx, &a.id, agents::Status::Seen, None, None)?;
                return Ok(Answer::ok(json!({"status": "ok", "item": item})));
            }
            "complete" => agents::Status::Completed,
            "skip" => agents::Status::Skipped,
            s => {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "`{}` is not one of seen, complete, skip",
                        conductor::text::printable(s)
                    ),
                ));
            }
        };
        let refs: Vec<String> = a
            .completion_ref
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                )
            })
            .collect();
        let refs = aops::parse_refs(&refs)?;
        let refs = if status == agents::Status::Skipped && refs.is_empty() {
            None
        } else {
            Some(refs)
        };
        let item = self.update_item(ctx, &a.id, status, refs, by.as_deref())?;
        Ok(Answer::ok(json!({"status": "ok", "item": item})))
    }

    fn author(&self) -> String {
        crate::face::author(self.agent.clone())
    }

    fn post(&self, ctx: &Ctx, a: PostArgs) -> Result<Answer> {
        let m = agents::service::post(
            &ctx.store,
            ctx.now,
            aops::NewPost {
                channel: a.channel,
                author: self.author(),
                content: a.text,
                reply_to: a.reply_to,
                priority: a.priority.unwrap_or(agents::Priority::Normal),
                dm: false,
            },
        )?;
        Ok(Answer::ok(json!({"status": "ok", "message": m})))
    }

    fn dm(&self, ctx: &Ctx, a: DmArgs) -> Result<Answer> {
        let m = agents::service::post(
            &ctx.store,
            ctx.now,
            aops::NewPost {
                channel: a.agent,
                author: self.author(),
                content: a.text,
                reply_to: None,
                priority: a.priority.unwrap_or(agents::Priority::High),
                dm: true,
            },
        )?;
        Ok(Answer::ok(json!({"status": "ok", "message": m})))
    }

    fn workflow_session(&self, ctx: &Ctx, given: Option<String>) -> Result<String> {
        let env = std::env::var("CONDUCTOR_WORKFLOW_SESSION").ok();
        match given.or(env).filter(|s| !s.is_empty()) {
            Some(s) => Ok(conductor::workflows::find_session(&ctx.store, ctx.now, &s)?.id),
            None => Err(Error::invalid(
                Reason::UnknownSession,
                "no workflow session: pass `session`, or run under `conductor workflow run` (it sets CONDUCTOR_WORKFLOW_SESSION)",
            )),
        }
    }

    fn transition(&self, ctx: &Ctx, a: TransitionArgs) -> Result<Answer> {
        use conductor::workflows::service;
        let id = self.workflow_session(ctx, a.session)?;
        let state = std::env::var("CONDUCTOR_WORKFLOW_STATE")
            .ok()
            .filter(|s| !s.is_empty());
        let now = ctx.now;
        let from = service::transition(
            &ctx.store,
            now,
            &id,
            state.as_deref(),
            &a.target,
            &a.summary,
        )?;
        Ok(Answer::ok(
            json!({"status": "ok", "session": id, "from": from, "to": a.target,
            "message": "Recorded. Exit now; the supervisor moves the workflow on."}),
        ))
    }

    fn snapshot(&self, ctx: &Ctx, a: SnapshotArgs) -> Result<Answer> {
        if a.findings.is_empty() && a.files.is_empty() && a.pending.is_empty() && a.set.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "nothing to record: give findings, files, pending or set",
            ));
        }
        let id = self.workflow_session(ctx, a.session)?;
        let state = std::env::var("CONDUCTOR_WORKFLOW_STATE")
            .ok()
            .filter(|s| !s.is_empty());
        let set: Vec<(String, String)> = a
            .set
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                )
            })
            .collect();
        use conductor::workflows::service::{self, SnapshotUpdate};
        let add = SnapshotUpdate {
            findings: a.findings,
            files: a.files,
            pending: a.pending,
            set,
        };
        let snap = service::update_snapshot(&ctx.store, ctx.now, &id, state.as_deref(), &add)?;
        Ok(Answer::ok(
            json!({"status": "ok", "session": id, "snapshot": snap}),
        ))
    }

    fn queue_submit(&self, ctx: &Ctx, a: SubmitArgs) -> Result<Answer> {
        let text = a.manifest.to_string();
        let m = conductor::queue::manifest::parse_with(&text, "the manifest argument", &|_| true)?;
        let out = crate::face::queue::submit(ctx, &m, None)?;
        Ok(Answer::ok(out.to_json()))
    }

    fn queue_status(&self, ctx: &Ctx, a: QueueStatusArgs) -> Result<Answer> {
        let mut jobs = crate::face::queue::all_jobs(ctx, a.all || a.workspace.is_some())?;
        if let Some(ws) = &a.workspace {
            jobs.retain(|j| &j.workspace == ws);
        }
        let mut seen = std::collections::BTreeSet::new();
        jobs.retain(|j| seen.insert(j.key()));
        Ok(Answer::ok(json!({"status": "ok", "jobs": jobs})))
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
