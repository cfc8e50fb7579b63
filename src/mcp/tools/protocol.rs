//! The protocol's tools: status, start, claim (with its wait), release, done, check, events.

use super::*;

impl Tools {
    pub(super) fn status(&self, ctx: &Ctx, _: StatusArgs) -> Result<Answer> {
        let state = conductor::protocol::read(&ctx.store, ctx.now)?;
        let you = self.identity.current(&state)?;
        let mut report = crate::face::status::report(state, ctx.now, ctx.cwd().ok());
        // Edits nobody claimed, as `conductor status` lists them.
        let doc = conductor::protocol::unclaimed::read(&ctx.store, ctx.now)?;
        report.unclaimed = conductor::protocol::unclaimed::current(&doc, &report.state)
            .into_iter()
            .cloned()
            .collect();
        let mut v = report.to_json();
        v["you"] = json!(you);
        Ok(Answer::ok(v))
    }

    pub(super) fn start(&self, ctx: &Ctx, a: StartArgs) -> Result<Answer> {
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

    pub(super) fn claim(&self, ctx: &Ctx, a: ClaimArgs, cancel: &Cancel) -> Result<Answer> {
        let ClaimArgs {
            request: req,
            wait_seconds,
        } = a;
        conductor::protocol::request::validate(&Request::Claim(req.clone()))?;
        if req.force.is_some() && wait_seconds.is_some() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "`force` and `wait_seconds` exclude each other",
            ));
        }
        if wait_seconds.is_some_and(|w| w > MAX_WAIT_SECONDS) {
            return Err(Error::invalid(
                Reason::InvalidInput,
                format!("wait_seconds is at most {MAX_WAIT_SECONDS}"),
            ));
        }
        let live = self.liveness(ctx)?;
        let now = ctx.now;
        let wait = wait_seconds.filter(|w| *w > 0);
        // Watch the journal before claiming, so a release right after is not missed.
        let watcher = match wait {
            Some(_) => Some(
                ctx.store
                    .watcher(|n| n == conductor::store::journal::ACTIVE)?,
            ),
            None => None,
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
        let admit = ctx.admission()?;
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
            &admit,
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
    pub(super) fn cancelled_wait(&self, ctx: &Ctx, id: &str, files: &[String]) -> Result<Answer> {
        let held = sessions::leave_wait(&ctx.store, Timestamp::now(), id, files)?;
        let got: Vec<&String> = files.iter().filter(|f| held.contains(f)).collect();
        Ok(Answer {
            json: json!({"status": "cancelled", "claimed": got}),
            text: "The wait was cancelled; this session left the queue.".into(),
            error: true,
        })
    }

    pub(super) fn release(&self, ctx: &Ctx, mut req: ReleaseRequest) -> Result<Answer> {
        let files = req.files.take().unwrap_or_default();
        let all = req.all.unwrap_or(false);
        if all != files.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "give either `files` or `all: true`",
            ));
        }
        req.files = Some(files);
        req.all = Some(all);
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

    pub(super) fn done(&self, ctx: &Ctx, a: DoneArgs) -> Result<Answer> {
        let chosen = a.outcome.as_deref().unwrap_or("success");
        let outcome = match serde_json::from_value(json!(chosen)) {
            Ok(Finish::Success) => Outcome::Success,
            Ok(Finish::Abandoned) => Outcome::Abandoned,
            Ok(Finish::Conflict) => Outcome::Conflict,
            Err(_) => {
                return Err(Error::invalid(
                    Reason::InvalidOutcome,
                    format!(
                        "`{}` is not one of success, abandoned, conflict",
                        conductor::text::printable(chosen)
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

    pub(super) fn check(&self, ctx: &Ctx, a: FilesArgs) -> Result<Answer> {
        if a.files.is_empty() {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "give at least one file",
            ));
        }
        let st = conductor::protocol::read(&ctx.store, ctx.now)?;
        let live = self.liveness(ctx)?;
        let me_id = self.identity.current(&st)?;
        let out = conductor::hooks::check::as_given(
            &ctx.store,
            ctx.now,
            &ctx.caller(),
            st,
            me_id.as_deref(),
            &a.files,
            &|| ctx.cwd(),
            &live,
        )?;
        Ok(Answer::ok(
            json!({"status": "ok", "you": me_id, "files": out}),
        ))
    }

    pub(super) fn events(&self, ctx: &Ctx, a: EventsArgs) -> Result<Answer> {
        let limit = a.limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(Error::invalid(Reason::InvalidInput, "limit is 1 to 1000"));
        }
        let filter = conductor::app::events::Filter::new(a.types, None)?;
        Ok(Answer::ok(crate::face::events_page(
            ctx, a.after, limit, &filter,
        )?))
    }
}
