//! A workflow session's ledger and the pure operations on it (`now` passed in, no I/O).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::baseline::Baseline;
use super::persona::Persona;
use super::rules::Rules;
use super::template::{DONE, Template};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::time::Timestamp;

/// The fourth traversal of one directed edge stops automated moves.
pub const MAX_EDGE_TRAVERSALS: u32 = 3;

/// Where a session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    AwaitingApproval,
    Paused,
    HumanIntervention,
    BudgetExceeded,
    Done,
    Failed,
    Aborted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::AwaitingApproval => "awaiting_approval",
            Status::Paused => "paused",
            Status::HumanIntervention => "human_intervention",
            Status::BudgetExceeded => "budget_exceeded",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Aborted => "aborted",
        }
    }

    /// Ended for good: the session leaves `workflows.json` for the finished ledger.
    pub fn is_finished(self) -> bool {
        matches!(self, Status::Done | Status::Aborted)
    }

    /// `workflow run`'s exit code when it returns in this status.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Done | Status::Running => 0,
            Status::AwaitingApproval => 5,
            Status::Paused => 6,
            Status::HumanIntervention => 7,
            Status::BudgetExceeded => 8,
            Status::Failed => 9,
            Status::Aborted => 10,
        }
    }
}

/// How a state run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The worker is (or was last known to be) running.
    Running,
    /// The worker asked for a transition and exited.
    Transitioned,
    /// The worker exited without a transition.
    Exited,
    /// The supervisor died or was stopped while the worker ran; the state runs again.
    Interrupted,
    /// Stopped by `abort` or a budget.
    Stopped,
}

/// One run of one state by one worker process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub state: String,
    /// 1 for the first run of this state since the session entered it, 2 for its retry, ...
    pub attempt: u32,
    pub persona: Persona,
    /// The worker's conductor instance.
    pub instance_id: Option<String>,
    pub worker_pid: Option<u32>,
    pub started_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    pub summary: Option<String>,
    pub tokens: u64,
    pub cost_usd: f64,
    pub elapsed_secs: Option<u64>,
    pub exit_code: Option<i32>,
    pub outcome: RunOutcome,
    pub baseline: Baseline,
    /// The prompt, system prompt and output files (in the home).
    pub files: RunFiles,
    /// The state's cleanup commands ran (after the worker ended).
    pub cleaned_up: bool,
}

/// Where a run's files are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFiles {
    pub prompt: String,
    pub system: String,
    pub output: String,
}

/// What the workers carried forward.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub modified_files: Vec<String>,
    pub key_findings: Vec<String>,
    pub pending_tasks: Vec<String>,
    pub custom: BTreeMap<String, String>,
}

/// A transition a worker asked for, applied by the supervisor once the worker exits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub from: String,
    pub to: String,
    pub summary: String,
    pub at: Timestamp,
    /// A person approved it (states with `requires_approval`).
    pub approved: bool,
}

/// Sums over every run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub tokens: u64,
    pub cost_usd: f64,
    pub elapsed_secs: u64,
    pub runs: u32,
}

/// The safety rules the session's workers run under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRules {
    pub file: String,
    pub rules: Rules,
}

/// A checkpoint in the session's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    pub at: Timestamp,
    pub kind: String,
    pub state: Option<String>,
    pub detail: Value,
}

/// One workflow session: the ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub template: Template,
    pub template_file: String,
    pub task: String,
    pub project_dir: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub status: Status,
    /// The status before `pause`.
    pub paused_from: Option<Status>,
    /// Why automated progress stopped (human_intervention, budget_exceeded, failed).
    pub halt: Option<String>,
    /// `None` once done.
    pub current_state: Option<String>,
    pub pending: Option<Pending>,
    /// Runs of the current state that ended without a transition.
    pub failures: u32,
    /// Said to the next worker of the current state (why the last run did not finish it).
    pub retry_note: Option<String>,
    pub runs: Vec<Run>,
    pub snapshot: Snapshot,
    /// `"from->to"` → times traversed.
    pub transition_counts: BTreeMap<String, u32>,
    pub totals: Totals,
    pub rules: Option<SessionRules>,
    /// The pid of the supervisor (`workflow run`) last driving the session.
    pub supervisor_pid: Option<u32>,
    /// The agent command template the supervisor runs (kept so `workflow run SESSION` resumes
    /// without it; pass secrets in the environment, never in the command).
    #[serde(default)]
    pub agent_cmd: Option<String>,
    pub log: Vec<LogEntry>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::invalid(Reason::InvalidWorkflowOperation, msg)
}

impl Session {
    /// A new session in its initial state.
    pub fn new(
        id: String,
        template: Template,
        template_file: String,
        task: String,
        project_dir: String,
        rules: Option<SessionRules>,
        now: Timestamp,
    ) -> Session {
        let initial = template.initial.clone();
        let mut s = Session {
            id,
            template,
            template_file,
            task,
            project_dir,
            created_at: now,
            updated_at: now,
            status: Status::Running,
            paused_from: None,
            halt: None,
            current_state: Some(initial),
            pending: None,
            failures: 0,
            retry_note: None,
            runs: Vec::new(),
            snapshot: Snapshot::default(),
            transition_counts: BTreeMap::new(),
            totals: Totals::default(),
            rules,
            supervisor_pid: None,
            agent_cmd: None,
            log: Vec::new(),
        };
        s.log(now, "started", json!({"task": s.task}));
        s
    }

    /// Add a checkpoint.
    pub fn log(&mut self, at: Timestamp, kind: &str, detail: Value) {
        let state = self.current_state.clone();
        self.log.push(LogEntry {
            at,
            kind: kind.into(),
            state,
            detail,
        });
    }

    /// The run whose worker is (last known to be) running.
    pub fn active_run(&self) -> Option<&Run> {
        self.runs
            .last()
            .filter(|r| r.outcome == RunOutcome::Running)
    }

    fn active_run_mut(&mut self) -> Option<&mut Run> {
        self.runs
            .last_mut()
            .filter(|r| r.outcome == RunOutcome::Running)
    }

    /// The state the session is in, or an error naming the status.
    fn current(&self) -> Result<String> {
        self.current_state
            .clone()
            .ok_or_else(|| invalid(format!("session {} is {}", self.id, self.status.as_str())))
    }

    /// Check that a worker acting for `state` (from its environment) acts on the current state.
    fn check_worker_state(&self, state: Option<&str>) -> Result<String> {
        let cur = self.current()?;
        if let Some(st) = state
            && st != cur
        {
            return Err(invalid(format!(
                "session {} is in state `{cur}`, not `{st}` (this worker's state has ended)",
                self.id
            )));
        }
        Ok(cur)
    }

    /// The worker asks to move to `target` (checked against the state's `next`).
    pub fn request_transition(
        &mut self,
        state: Option<&str>,
        target: &str,
        summary: &str,
        now: Timestamp,
    ) -> Result<()> {
        let cur = self.check_worker_state(state)?;
        if !matches!(self.status, Status::Running | Status::Paused) {
            return Err(invalid(format!(
                "session {} is {}; no transition is possible now",
                self.id,
                self.status.as_str()
            )));
        }
        let def = self
            .template
            .state(&cur)
            .expect("current state is in the template");
        let allowed = def.allowed();
        if !allowed.iter().any(|a| a == target) {
            return Err(Error::invalid(
                Reason::InvalidTransition,
                format!(
                    "state `{cur}` cannot move to `{target}`; allowed: {}",
                    allowed.join(", ")
                ),
            ));
        }
        if let Some(p) = &self.pending
            && p.to != target
        {
            return Err(Error::invalid(
                Reason::InvalidTransition,
                format!(
                    "state `{cur}` already asked to move to `{}`; the supervisor applies it when the worker exits",
                    p.to
                ),
            ));
        }
        self.pending = Some(Pending {
            from: cur,
            to: target.to_string(),
            summary: summary.to_string(),
            at: now,
            approved: false,
        });
        self.log(
            now,
            "transition_requested",
            json!({"to": target, "summary": summary}),
        );
        Ok(())
    }

    /// Merge snapshot data.
    pub fn update_snapshot(
        &mut self,
        state: Option<&str>,
        findings: &[String],
        files: &[String],
        pending: &[String],
        set: &[(String, String)],
        now: Timestamp,
    ) -> Result<()> {
        self.check_worker_state(state)?;
        let sn = &mut self.snapshot;
        let add = |list: &mut Vec<String>, items: &[String]| {
            for i in items {
                if !list.contains(i) {
                    list.push(i.clone());
                }
            }
        };
        add(&mut sn.key_findings, findings);
        add(&mut sn.modified_files, files);
        add(&mut sn.pending_tasks, pending);
        for (k, v) in set {
            sn.custom.insert(k.clone(), v.clone());
        }
        self.log(
            now,
            "snapshot",
            json!({"findings": findings, "files": files, "pending": pending,
                   "set": set.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<BTreeMap<_, _>>()}),
        );
        Ok(())
    }

    /// Add usage to the active run (or the last run) and the totals; stop the session in
    /// budget_exceeded when a limit is passed. Returns the exceeded limit's description.
    pub fn add_usage(
        &mut self,
        state: Option<&str>,
        tokens: u64,
        cost: f64,
        now: Timestamp,
    ) -> Result<Option<String>> {
        let cur = self.check_worker_state(state)?;
        let Some(run) = self.runs.iter_mut().rev().find(|r| r.state == cur) else {
            return Err(invalid(format!(
                "state `{cur}` of session {} has not started a worker yet",
                self.id
            )));
        };
        run.tokens += tokens;
        run.cost_usd += cost;
        let (run_tokens, run_cost) = (run.tokens, run.cost_usd);
        self.totals.tokens += tokens;
        self.totals.cost_usd += cost;
        self.log(now, "usage", json!({"tokens": tokens, "cost_usd": cost}));
        let mut exceeded = None;
        if let Some(b) = self.template.state(&cur).and_then(|d| d.budget.clone()) {
            exceeded = over(&b, run_tokens, run_cost, &format!("state `{cur}`"));
        }
        if exceeded.is_none()
            && let Some(b) = &self.template.budget
        {
            exceeded = over(b, self.totals.tokens, self.totals.cost_usd, "the session");
        }
        if let Some(why) = &exceeded
            && !matches!(self.status, Status::BudgetExceeded)
            && !self.status.is_finished()
        {
            self.status = Status::BudgetExceeded;
            self.halt = Some(why.clone());
            self.log(now, "budget_exceeded", json!({"reason": why}));
        }
        Ok(exceeded)
    }

    /// A person approves the held transition.
    pub fn approve(&mut self, now: Timestamp) -> Result<()> {
        if self.status != Status::AwaitingApproval {
            return Err(invalid(format!(
                "session {} is {}, not awaiting_approval",
                self.id,
                self.status.as_str()
            )));
        }
        if let Some(p) = &mut self.pending {
            p.approved = true;
        }
        self.status = Status::Running;
        self.halt = None;
        self.log(now, "approved", json!({}));
        Ok(())
    }

    /// A person moves a stopped session to `to` and lets automation continue.
    pub fn resolve(&mut self, to: &str, now: Timestamp) -> Result<()> {
        if !matches!(
            self.status,
            Status::HumanIntervention | Status::Failed | Status::BudgetExceeded
        ) {
            return Err(invalid(format!(
                "session {} is {}; resolve is for human_intervention, failed or budget_exceeded",
                self.id,
                self.status.as_str()
            )));
        }
        if self.template.state(to).is_none() {
            return Err(Error::invalid(
                Reason::InvalidTransition,
                format!(
                    "no state `{to}` in the template (states: {})",
                    self.template
                        .states
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if self.active_run().is_some() {
            return Err(invalid("a worker is still running; wait for it to exit"));
        }
        self.current_state = Some(to.to_string());
        self.pending = None;
        self.failures = 0;
        self.retry_note = None;
        self.transition_counts.clear();
        self.status = Status::Running;
        self.halt = None;
        self.log(now, "resolved", json!({"to": to}));
        Ok(())
    }

    /// Hold automated progress after the current worker ends.
    pub fn pause(&mut self, now: Timestamp) -> Result<()> {
        if !matches!(self.status, Status::Running | Status::AwaitingApproval) {
            return Err(invalid(format!(
                "session {} is {}; only a running or awaiting session can be paused",
                self.id,
                self.status.as_str()
            )));
        }
        self.paused_from = Some(self.status);
        self.status = Status::Paused;
        self.log(now, "paused", json!({}));
        Ok(())
    }

    /// Undo [`Session::pause`].
    pub fn resume(&mut self, now: Timestamp) -> Result<()> {
        if self.status != Status::Paused {
            return Err(invalid(format!(
                "session {} is {}, not paused",
                self.id,
                self.status.as_str()
            )));
        }
        self.status = self.paused_from.take().unwrap_or(Status::Running);
        self.log(now, "resumed", json!({}));
        Ok(())
    }

    /// End the session (the supervisor stops a running worker).
    pub fn abort(&mut self, now: Timestamp) -> Result<()> {
        if self.status.is_finished() {
            return Err(invalid(format!(
                "session {} is already {}",
                self.id,
                self.status.as_str()
            )));
        }
        if let Some(r) = self.active_run_mut() {
            r.outcome = RunOutcome::Stopped;
            r.completed_at = Some(now);
        }
        self.status = Status::Aborted;
        self.halt = Some("aborted by a person".into());
        self.log(now, "aborted", json!({}));
        Ok(())
    }

    /// The supervisor starts a worker for the current state.
    pub fn begin_run(&mut self, run: Run, now: Timestamp) -> Result<()> {
        let cur = self.current()?;
        if self.status != Status::Running {
            return Err(invalid(format!(
                "session {} is {}",
                self.id,
                self.status.as_str()
            )));
        }
        if self.active_run().is_some() {
            return Err(invalid("a worker is already running for this session"));
        }
        debug_assert_eq!(run.state, cur);
        self.totals.runs += 1;
        self.log(
            now,
            "state_started",
            json!({"attempt": run.attempt, "persona": run.persona.name, "instance_id": run.instance_id}),
        );
        self.runs.push(run);
        Ok(())
    }

    /// The attempt number of the next run of the current state.
    pub fn next_attempt(&self) -> u32 {
        let cur = self.current_state.as_deref();
        let mut n = 0;
        for r in self.runs.iter().rev() {
            if Some(r.state.as_str()) != cur || r.outcome == RunOutcome::Transitioned {
                break;
            }
            n += 1;
        }
        n + 1
    }

    /// The worker of run `index` exited with `code` (`None`: killed by a signal).
    pub fn record_exit(&mut self, index: usize, code: Option<i32>, now: Timestamp) {
        let Some(r) = self.runs.get_mut(index) else {
            return;
        };
        if r.exit_code.is_none() {
            r.exit_code = code.or(Some(-1));
        }
        if r.outcome == RunOutcome::Running {
            r.outcome = RunOutcome::Exited;
            r.completed_at = Some(now);
            r.elapsed_secs = Some(r.started_at.seconds_until(now));
            self.totals.elapsed_secs += r.started_at.seconds_until(now);
        }
        self.log(
            now,
            "worker_exited",
            json!({"run": index, "exit_code": code}),
        );
    }

    /// The supervisor lost the active run (it died, or was stopped): the worker is gone.
    pub fn interrupt_active(&mut self, why: &str, now: Timestamp) {
        if let Some(r) = self.active_run_mut() {
            r.outcome = RunOutcome::Interrupted;
            r.completed_at = Some(now);
            let secs = r.started_at.seconds_until(now);
            r.elapsed_secs = Some(secs);
            self.totals.elapsed_secs += secs;
            self.log(now, "interrupted", json!({"reason": why}));
        }
    }

    /// After the last run ended and its cleanup ran: record the cleanup, then decide. A run
    /// that exited without a transition is retried once, then the session needs a person.
    pub fn finish_run(&mut self, cleanup: Vec<Value>, now: Timestamp) {
        let pending_from = self.pending.as_ref().map(|p| p.from.clone());
        let Some(i) = self.runs.len().checked_sub(1) else {
            return;
        };
        let r = &mut self.runs[i];
        if r.cleaned_up || r.outcome == RunOutcome::Running {
            return;
        }
        r.cleaned_up = true;
        let state = r.state.clone();
        let outcome = r.outcome;
        let code = r.exit_code;
        if pending_from.as_deref() == Some(state.as_str())
            && matches!(outcome, RunOutcome::Exited | RunOutcome::Interrupted)
        {
            r.outcome = RunOutcome::Transitioned;
            r.summary = self.pending.as_ref().map(|p| p.summary.clone());
        }
        let transitioned = r.outcome == RunOutcome::Transitioned;
        for c in &cleanup {
            self.log(now, "cleanup", c.clone());
        }
        if transitioned || self.status != Status::Running {
            return;
        }
        match outcome {
            RunOutcome::Exited if matches!(code, Some(126 | 127)) => {
                self.status = Status::Failed;
                self.halt = Some(format!(
                    "the agent command for state `{state}` could not be run (exit status {}: not found or not executable)",
                    code.unwrap_or_default()
                ));
            }
            RunOutcome::Exited => {
                self.failures += 1;
                let what = match code {
                    Some(c) if c >= 0 => format!("exited with status {c}"),
                    _ => "was killed".to_string(),
                };
                if self.failures >= 2 {
                    self.status = Status::HumanIntervention;
                    self.halt = Some(format!(
                        "the worker for state `{state}` {what} without calling `conductor workflow transition`, twice"
                    ));
                } else {
                    self.retry_note = Some(format!(
                        "The previous worker for this state {what} without calling `conductor workflow transition`. \
                         Finish the state and call it."
                    ));
                }
            }
            RunOutcome::Interrupted => {
                self.retry_note = Some(
                    "The previous worker for this state was interrupted (the supervisor stopped). \
                     Continue from the snapshot; check what is already done."
                        .into(),
                );
            }
            _ => {}
        }
    }

    /// Apply the pending transition (no worker running, its cleanup done): hold for approval,
    /// stop a loop, finish, or move on. Returns the state entered, if any.
    pub fn apply_pending(&mut self, now: Timestamp) -> Option<String> {
        let p = self.pending.clone()?;
        if self.status != Status::Running || self.active_run().is_some() {
            return None;
        }
        let def = self.template.state(&p.from)?;
        if def.requires_approval && !p.approved {
            self.status = Status::AwaitingApproval;
            self.halt = Some(format!(
                "`{}` -> `{}` needs approval: conductor workflow approve {}",
                p.from, p.to, self.id
            ));
            self.log(
                now,
                "awaiting_approval",
                json!({"from": p.from, "to": p.to}),
            );
            return None;
        }
        let edge = format!("{}->{}", p.from, p.to);
        let n = self.transition_counts.entry(edge.clone()).or_insert(0);
        *n += 1;
        let n = *n;
        if n > MAX_EDGE_TRAVERSALS {
            self.status = Status::HumanIntervention;
            self.halt = Some(format!(
                "loop: `{edge}` would be traversed for the {}th time; automated moves are blocked until `conductor workflow resolve {} --to STATE`",
                n, self.id
            ));
            self.pending = None;
            self.log(now, "loop_detected", json!({"edge": edge, "count": n}));
            return None;
        }
        self.pending = None;
        self.failures = 0;
        self.retry_note = None;
        self.log(
            now,
            "transition",
            json!({"from": p.from, "to": p.to, "summary": p.summary}),
        );
        if p.to == DONE {
            self.current_state = None;
            self.status = Status::Done;
            return None;
        }
        self.current_state = Some(p.to.clone());
        Some(p.to)
    }

    /// The latest summary of each state that transitioned (the handover).
    pub fn summaries(&self) -> Vec<(String, String)> {
        self.runs
            .iter()
            .filter(|r| r.outcome == RunOutcome::Transitioned)
            .filter_map(|r| r.summary.clone().map(|s| (r.state.clone(), s)))
            .collect()
    }
}

fn over(b: &super::template::Budget, tokens: u64, cost: f64, what: &str) -> Option<String> {
    if let Some(max) = b.max_tokens
        && tokens > max
    {
        return Some(format!(
            "{what} used {tokens} tokens of its {max}-token budget"
        ));
    }
    if let Some(max) = b.max_cost_usd
        && cost > max
    {
        return Some(format!("{what} cost ${cost:.4} of its ${max:.4} budget"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflows::template::load_text;

    fn t() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    fn session(text: &str) -> Session {
        let tpl = load_text(text).unwrap();
        Session::new(
            "wf-1".into(),
            tpl,
            "f".into(),
            "task".into(),
            "/p".into(),
            None,
            t(),
        )
    }

    fn run(s: &mut Session) -> usize {
        let state = s.current_state.clone().unwrap();
        let attempt = s.next_attempt();
        s.begin_run(
            Run {
                state,
                attempt,
                persona: crate::workflows::persona::resolve(
                    "X",
                    std::path::Path::new("/nonexistent"),
                )
                .unwrap(),
                instance_id: None,
                worker_pid: None,
                started_at: t(),
                completed_at: None,
                summary: None,
                tokens: 0,
                cost_usd: 0.0,
                elapsed_secs: None,
                exit_code: None,
                outcome: RunOutcome::Running,
                baseline: Baseline::Mtime { since_ns: 0 },
                files: RunFiles {
                    prompt: String::new(),
                    system: String::new(),
                    output: String::new(),
                },
                cleaned_up: false,
            },
            t(),
        )
        .unwrap();
        s.runs.len() - 1
    }

    const PING: &str = r#"{"name":"P","initial":"a","states":{
        "a":{"persona":"A","next":["b"]},"b":{"persona":"B","next":["a","done"]}}}"#;

    #[test]
    fn fourth_traversal_of_an_edge_needs_a_person() {
        let mut s = session(PING);
        for i in 0..8 {
            let cur = s.current_state.clone().unwrap();
            let to = if cur == "a" { "b" } else { "a" };
            let idx = run(&mut s);
            s.request_transition(Some(&cur), to, "x", t()).unwrap();
            s.record_exit(idx, Some(0), t());
            s.finish_run(vec![], t());
            s.apply_pending(t());
            if s.status == Status::HumanIntervention {
                assert_eq!(i, 6, "a->b three times, b->a three times, then a->b again");
                assert!(s.halt.as_ref().unwrap().contains("a->b"));
                return;
            }
        }
        panic!("no loop detected");
    }

    #[test]
    fn exit_without_transition_is_retried_once() {
        let mut s = session(PING);
        let i = run(&mut s);
        s.record_exit(i, Some(1), t());
        s.finish_run(vec![], t());
        assert_eq!(s.status, Status::Running);
        assert!(s.retry_note.as_ref().unwrap().contains("status 1"));
        assert_eq!(s.next_attempt(), 2);
        let i = run(&mut s);
        s.record_exit(i, Some(0), t());
        s.finish_run(vec![], t());
        assert_eq!(s.status, Status::HumanIntervention);
        s.resolve("b", t()).unwrap();
        assert_eq!(s.current_state.as_deref(), Some("b"));
        assert_eq!(s.next_attempt(), 1);
    }

    #[test]
    fn targets_are_checked_and_done_finishes() {
        let mut s = session(PING);
        let i = run(&mut s);
        let e = s
            .request_transition(Some("a"), "done", "x", t())
            .unwrap_err();
        assert!(e.to_string().contains("allowed: b"), "{e}");
        assert!(s.request_transition(Some("b"), "a", "x", t()).is_err());
        s.request_transition(None, "b", "x", t()).unwrap();
        s.record_exit(i, Some(0), t());
        s.finish_run(vec![], t());
        assert_eq!(s.apply_pending(t()).as_deref(), Some("b"));
        let i = run(&mut s);
        s.request_transition(Some("b"), "done", "fin", t()).unwrap();
        s.record_exit(i, Some(0), t());
        s.finish_run(vec![], t());
        s.apply_pending(t());
        assert_eq!(s.status, Status::Done);
        assert_eq!(
            s.summaries(),
            [("a".into(), "x".into()), ("b".into(), "fin".into())]
        );
    }

    #[test]
    fn budgets_stop_the_session() {
        let mut s = session(
            r#"{"name":"P","initial":"a","budget":{"max_tokens":100},"states":{
            "a":{"persona":"A","budget":{"max_cost_usd":1.0}}}}"#,
        );
        run(&mut s);
        assert_eq!(s.add_usage(Some("a"), 60, 0.5, t()).unwrap(), None);
        let why = s.add_usage(Some("a"), 50, 0.1, t()).unwrap().unwrap();
        assert!(why.contains("110 tokens of its 100-token budget"), "{why}");
        assert_eq!(s.status, Status::BudgetExceeded);
    }

    #[test]
    fn approval_holds_the_transition() {
        let mut s = session(
            r#"{"name":"P","initial":"a","states":{
            "a":{"persona":"A","next":["b"],"requires_approval":true},"b":{"persona":"B"}}}"#,
        );
        let i = run(&mut s);
        s.request_transition(Some("a"), "b", "plan", t()).unwrap();
        s.record_exit(i, Some(0), t());
        s.finish_run(vec![], t());
        assert_eq!(s.apply_pending(t()), None);
        assert_eq!(s.status, Status::AwaitingApproval);
        s.approve(t()).unwrap();
        assert_eq!(s.apply_pending(t()).as_deref(), Some("b"));
    }
}
