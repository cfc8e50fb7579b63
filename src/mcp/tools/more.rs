//! The agent runtime's tools (inbox, post, dm), the workflows' (transition, snapshot) and the
//! queue's (submit, status).

use super::*;

impl Tools {
    pub(super) fn agent_name(&self, given: Option<String>) -> Result<String> {
        given.or_else(|| self.agent.clone()).ok_or_else(|| {
            Error::invalid(
                Reason::InvalidInput,
                "which agent? pass `agent`, or start the server with --agent NAME (or CONDUCTOR_AGENT)",
            )
        })
    }

    pub(super) fn inbox(&self, ctx: &Ctx, a: InboxArgs) -> Result<Answer> {
        let name = self.agent_name(a.agent)?;
        let name = agents::views::agent_name(&ctx.store, ctx.now, &name)?;
        // What the next write will expire is not shown (the same rule and clock as `inbox`).
        let items = agents::views::items(&ctx.store, ctx.now, Some(&name), None)?;
        Ok(Answer::ok(
            json!({"status": "ok", "agent": name, "items": items}),
        ))
    }

    pub(super) fn inbox_act(&self, ctx: &Ctx, a: InboxActArgs) -> Result<Answer> {
        let by = a
            .agent
            .clone()
            .or_else(|| self.agent.clone())
            .map(|s| s.to_ascii_lowercase());
        let status = match serde_json::from_value(json!(a.action)) {
            Ok(Act::Seen) => {
                if !a.completion_ref.is_empty() {
                    return Err(Error::invalid(
                        Reason::InvalidInput,
                        "completion_ref is for complete",
                    ));
                }
                let item = agents::service::update_item(
                    &ctx.store,
                    ctx.now,
                    &a.id,
                    agents::Status::Seen,
                    None,
                    None,
                )?;
                return Ok(Answer::ok(json!({"status": "ok", "item": item})));
            }
            Ok(Act::Complete) => agents::Status::Completed,
            Ok(Act::Skip) => agents::Status::Skipped,
            Err(_) => {
                return Err(Error::invalid(
                    Reason::InvalidInput,
                    format!(
                        "`{}` is not one of seen, complete, skip",
                        conductor::text::printable(&a.action)
                    ),
                ));
            }
        };
        let refs = aops::refs_of(&a.completion_ref);
        let refs = aops::completion_ref(status, &refs)?;
        let item =
            agents::service::update_item(&ctx.store, ctx.now, &a.id, status, refs, by.as_deref())?;
        Ok(Answer::ok(json!({"status": "ok", "item": item})))
    }

    pub(super) fn author(&self) -> String {
        crate::face::author(self.agent.clone())
    }

    pub(super) fn post(&self, ctx: &Ctx, a: PostArgs) -> Result<Answer> {
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

    pub(super) fn dm(&self, ctx: &Ctx, a: DmArgs) -> Result<Answer> {
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

    pub(super) fn workflow_session(&self, ctx: &Ctx, given: Option<String>) -> Result<String> {
        let env = std::env::var("CONDUCTOR_WORKFLOW_SESSION").ok();
        match given.or(env).filter(|s| !s.is_empty()) {
            Some(s) => Ok(conductor::workflows::find_session(&ctx.store, ctx.now, &s)?.id),
            None => Err(Error::invalid(
                Reason::UnknownSession,
                "no workflow session: pass `session`, or run under `conductor workflow run` (it sets CONDUCTOR_WORKFLOW_SESSION)",
            )),
        }
    }

    pub(super) fn transition(&self, ctx: &Ctx, a: TransitionArgs) -> Result<Answer> {
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

    pub(super) fn snapshot(&self, ctx: &Ctx, a: SnapshotArgs) -> Result<Answer> {
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
        use conductor::workflows::service::{self, SnapshotUpdate};
        let add = SnapshotUpdate {
            findings: a.findings,
            files: a.files,
            pending: a.pending,
            set: SnapshotUpdate::values_of(&a.set),
        };
        let snap = service::update_snapshot(&ctx.store, ctx.now, &id, state.as_deref(), &add)?;
        Ok(Answer::ok(
            json!({"status": "ok", "session": id, "snapshot": snap}),
        ))
    }

    pub(super) fn queue_submit(&self, ctx: &Ctx, a: SubmitArgs) -> Result<Answer> {
        let text = a.manifest.to_string();
        let m = conductor::queue::manifest::parse_with(&text, "the manifest argument", &|_| true)?;
        let out = crate::face::queue::submit(ctx, &m, None)?;
        Ok(Answer::ok(out.to_json()))
    }

    pub(super) fn queue_status(&self, ctx: &Ctx, a: QueueStatusArgs) -> Result<Answer> {
        let jobs =
            conductor::queue::lookup::listed(&ctx.store, ctx.now, a.workspace.as_deref(), a.all)?;
        Ok(Answer::ok(json!({"status": "ok", "jobs": jobs})))
    }
}
