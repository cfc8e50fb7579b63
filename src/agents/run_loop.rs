//! `conductor agent run NAME [--exec CMD] ...`: the agent's loop.
//!
//! It wakes on journal appends through the watcher (no poll; an announced heartbeat fallback
//! only when no watcher can be had), reads its feed from its durable cursor, routes every event
//! (recording a reason for each one it does not act on), and in one transaction queues the
//! actionable items, moves the cursor past them, marks them seen (`--mark-seen`) and claims the
//! first one (priority, then age). With `--exec` the claimed item goes to a child process (item
//! JSON on stdin, ids in the environment, a timeout, the claim renewed while it runs); a valid
//! artifact on its stdout is posted back where the item came from and the item is completed
//! with a reference to that post, in one transaction. Anything else (non-zero exit, invalid
//! artifact, timeout) releases the claim, leaves the item actionable and backs off
//! exponentially. Exit status 3 from the child skips the item. Without `--exec` the loop only
//! queues and reports (shadow mode).
//!
//! Every state change goes through `agents::machine`'s table and is logged in the agent's
//! action log (`runtime/agents/NAME/actions.jsonl`, `conductor agent log NAME`); the loop's
//! status (`runtime/agents/NAME/run-status.json`) is rewritten in the same transactions. With
//! `--takeover-for OTHER` it also takes over OTHER's expired claims in channels it watches.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agents::machine::{Machine, State};
use crate::agents::{self, Agents, Channels, Inbox, ops};
use crate::error::{Error, Result};
use crate::store::event::Event;
use crate::store::journal::{self};
use crate::store::watch::{self, Wake};
use crate::store::{Lock, Store};
use crate::time::Timestamp;

use crate::error::Reason;
pub use crate::progress::Note;

/// `agent run`.
/// How the loop runs (the command line of `conductor agent run`).
#[derive(Clone, Debug)]
pub struct Options {
    /// The agent.
    pub name: String,
    /// Shell command that does the work (run with sh -c).
    pub exec: Option<String>,
    /// Stop after this many cycles (a cycle: wake, fetch, maybe claim and execute).
    pub max_cycles: Option<u64>,
    /// Stop after this many seconds.
    pub duration_seconds: Option<f64>,
    /// Mark queued items seen.
    pub mark_seen: bool,
    /// Also act on posts in watched channels that do not address the agent.
    pub broadcast: bool,
    /// Claim TTL in seconds (15 to 1800); the claim is renewed while the child runs.
    pub ttl: u64,
    /// Seconds the child may run before it is killed.
    pub timeout: f64,
    /// First back-off after an error, in milliseconds (doubles per consecutive error).
    pub backoff_ms: u64,
    /// Longest back-off, in milliseconds.
    pub backoff_max_ms: u64,
    /// Seconds between looks at the journal when no file system watcher is available.
    pub heartbeat: f64,
    /// Stand in for AGENT (repeatable): take over expired claims on AGENT's items in channels
    /// this agent watches, once their TTL has run out (say AGENT's loop was killed mid-item).
    /// Never a live claim, never an item nobody claimed, never a DM.
    pub takeover_for: Vec<String>,
}

/// Re-read at least this often even when nothing woke the loop (lost notifications).
const SAFETY_RESCAN: Duration = Duration::from_secs(60);
/// Events read per cycle at most.
const FEED_BATCH: usize = 1000;
/// Exit status with which a child skips an item.
const SKIP_EXIT: i32 = 3;

struct Loop<'a> {
    store: &'a Store,
    args: &'a Options,
    progress: &'a mut dyn FnMut(Note),
    name: String,
    worker: String,
    m: Machine,
    wake_source: &'static str,
    poll: f64,
    cycles: u64,
    consecutive_errors: u32,
    /// Items not to retry before an instant (back-off), with their failure counts.
    held_back: HashMap<String, Instant>,
    failures: HashMap<String, u32>,
    /// Foreign claims already logged as conflicts.
    announced: std::collections::HashSet<String>,
    /// Agents whose expired claims this loop takes over (`--takeover-for`).
    stand_in: Vec<String>,
    /// Actions not yet written to the action log (written with the next transaction).
    pending: Vec<agents::Action>,
    /// `running` or `stopped`, for run-status.json.
    run_state: &'static str,
    started_at: Timestamp,
    last_error: Option<(String, Timestamp)>,
    current: Option<agents::CurrentWork>,
    backoff_now: Option<agents::Backoff>,
    cursor: u64,
    status_file: crate::store::HomePath,
    actions_file: crate::store::HomePath,
}

/// What the fetch-and-claim transaction decided.
struct Plan {
    claimed: Option<(agents::Item, agents::Claim, bool)>,
    /// When a claim held by another worker expires (a timer for the takeover).
    next_expiry_ms: Option<i64>,
    /// More claimable work is queued.
    more: bool,
}

/// Run the loop until it is stopped (SIGINT/SIGTERM, `max_cycles`, `duration_seconds`); what
/// it has to say goes to `progress`.
pub fn run(store: &Store, args: Options, progress: &mut dyn FnMut(Note)) -> Result<u8> {
    let now = Timestamp::now();
    watch::block_stop_signals();
    ops::check_ttl(args.ttl)?;
    if args.exec.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "--exec needs a command",
        ));
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0)
        || args
            .duration_seconds
            .is_some_and(|d| !(d.is_finite() && d >= 0.0))
        || !(args.heartbeat.is_finite() && args.heartbeat >= 0.05)
    {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "--timeout, --duration-seconds and --heartbeat are positive numbers of seconds",
        ));
    }
    let agents: Agents = store.read_doc(now)?;
    let me = ops::agent(&agents, &args.name)?;
    let name = me.name.clone();
    let mut stand_in = Vec::new();
    for other in &args.takeover_for {
        let o = ops::agent(&agents, other)?.name.clone();
        if o == name {
            return Err(Error::invalid(
                Reason::InvalidInput,
                "--takeover-for names another agent (an agent's own expired claims are taken over anyway)",
            ));
        }
        if !stand_in.contains(&o) {
            stand_in.push(o);
        }
    }
    let cursor = me.cursor;
    let status_file = agents::agent_file(&name, agents::RUN_STATUS_FILE)?;
    let actions_file = agents::agent_file(&name, agents::ACTIONS_FILE)?;
    let (watcher, wake_source, poll) = match store.watcher(journal::is_journal_file) {
        Ok(w) if w.polling => (Some(w), "poll", watch::POLL_INTERVAL.as_secs_f64()),
        Ok(w) => (Some(w), "watcher", 0.0),
        Err(e) => {
            progress(Note::Warning(format!(
                "no file system watcher ({e}); looking at the journal every {} s instead",
                args.heartbeat
            )));
            (None, "heartbeat", args.heartbeat)
        }
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    match &watcher {
        Some(w) => w.stop_on_signals_and_closed_stdout(),
        None => {
            let s = stop.clone();
            std::thread::spawn(move || {
                watch::wait_stop_signal();
                s.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        }
    }
    let mut lp = Loop {
        store,
        args: &args,
        progress,
        name,
        worker: format!("run-{}", std::process::id()),
        m: Machine::default(),
        wake_source,
        poll,
        cycles: 0,
        consecutive_errors: 0,
        held_back: HashMap::new(),
        failures: HashMap::new(),
        announced: Default::default(),
        stand_in,
        pending: Vec::new(),
        run_state: "running",
        started_at: Timestamp::now(),
        last_error: None,
        current: None,
        backoff_now: None,
        cursor,
        status_file,
        actions_file,
    };
    let stopped = || {
        stop.load(std::sync::atomic::Ordering::SeqCst)
            || watcher.as_ref().is_some_and(|w| w.stopped())
    };
    lp.status(
        "running",
        json!({"event": "start", "worker": lp.worker, "wake_source": wake_source,
        "exec": args.exec, "shadow": args.exec.is_none()}),
    )?;
    (lp.progress)(Note::Status(format!(
        "Running agent {} as {} ({} wake path{}); Ctrl-C to stop",
        lp.name,
        lp.worker,
        wake_source,
        if args.exec.is_none() {
            ", shadow mode"
        } else {
            ""
        }
    )));
    let started = Instant::now();
    let deadline = args
        .duration_seconds
        .map(|d| started + Duration::from_secs_f64(d));
    let mut wait_for: Option<Duration> = None;
    let mut last_stat = None;
    loop {
        if stopped()
            || args.max_cycles.is_some_and(|m| lp.cycles >= m)
            || deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        if let Some(w) = wait_for.take() {
            let until = Instant::now() + w;
            let until = deadline.map_or(until, |d| until.min(d));
            // Our own reads of the journal (opens) also notify the watcher: only a journal that
            // changed (size or inode, from a stat, which notifies nobody) or a timer runs a cycle.
            loop {
                let left = until.saturating_duration_since(Instant::now());
                let woke = match &watcher {
                    Some(watcher) => watcher.wait(Some(left)),
                    None => {
                        sleep_unless(&stopped, left);
                        Wake::Timeout
                    }
                };
                if woke != Wake::Changed || stopped() || store.journal_mark() != last_stat {
                    break;
                }
            }
            if stopped() || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        last_stat = store.journal_mark();
        lp.cycles += 1;
        wait_for = Some(match lp.cycle(&stopped) {
            Ok(next) => next,
            Err(e) => {
                lp.error(None, &e.to_string());
                lp.backoff(&stopped, None)
            }
        });
        if wait_for == Some(Duration::ZERO) {
            wait_for = None;
        }
        if wake_source == "heartbeat" {
            wait_for = Some(
                wait_for
                    .unwrap_or(Duration::ZERO)
                    .min(Duration::from_secs_f64(poll))
                    .max(Duration::from_millis(1)),
            );
        }
    }
    lp.status("stopped", json!({"event": "stop", "cycles": lp.cycles}))?;
    if !lp.m.illegal.is_empty() {
        return Err(Error::Internal(format!(
            "the run loop attempted illegal transitions: {:?}",
            lp.m.illegal
        )));
    }
    Ok(0)
}

fn sleep_unless(stopped: &dyn Fn() -> bool, d: Duration) {
    let end = Instant::now() + d;
    while !stopped() && Instant::now() < end {
        std::thread::sleep(
            end.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100)),
        );
    }
}

fn transitions(made: Vec<(State, State)>) -> Vec<Value> {
    made.into_iter()
        .map(|(f, t)| json!({"from": f.as_str(), "to": t.as_str()}))
        .collect()
}

/// The channels an agent watches.
fn a_watch<'x>(agents: &'x Agents, name: &str) -> &'x agents::Agent {
    ops::agent(agents, name).expect("the loop's agent was read in this transaction")
}

impl<'a> Loop<'a> {
    /// True when `item` is another agent's that this loop stands in for (`--takeover-for`):
    /// claimed by someone else, in a channel `me` watches, not a DM.
    fn stands_in(&self, me: &agents::Agent, item: &agents::Item) -> bool {
        self.stand_in.contains(&item.agent)
            && item.source_type != "dm"
            && me.watch.contains(&item.channel_id)
            && item
                .claim
                .as_ref()
                .is_some_and(|c| !(c.agent == self.name && c.worker == self.worker))
    }

    /// The inboxes this loop works on: its own and those it stands in for.
    fn scope(&self) -> agents::inbox_files::Scope {
        let mut v = vec![self.name.clone()];
        v.extend(self.stand_in.iter().cloned());
        agents::inbox_files::Scope::Agents(v)
    }

    /// The context, borrowed for the loop's whole life (not from `self`).
    fn store(&self) -> &'a Store {
        self.store
    }

    /// Queue an action for the action log (written with the next transaction).
    fn act(&mut self, now: Timestamp, kind: &str, detail: Value) {
        self.pending.push(ops::action(now, kind, detail));
    }

    fn log_transitions(&mut self, now: Timestamp) {
        for t in transitions(self.m.drain()) {
            self.act(now, "transition", t);
        }
    }

    fn run_status(&self, now: Timestamp) -> agents::RunStatus {
        agents::RunStatus {
            version: agents::VERSION.into(),
            agent: self.name.clone(),
            pid: std::process::id(),
            worker: self.worker.clone(),
            started_at: self.started_at,
            updated_at: now,
            wake_source: self.wake_source.into(),
            poll_interval_seconds: self.poll,
            state: self.m.state.as_str().into(),
            cycles: self.cycles,
            shadow: self.args.exec.is_none(),
            status: self.run_state.into(),
            exec: self.args.exec.as_deref().map(agents::health::redact_text),
            last_event_cursor: self.cursor,
            current: self.current.clone(),
            last_error: self.last_error.as_ref().map(|(e, _)| e.clone()),
            last_error_at: self.last_error.as_ref().map(|(_, t)| *t),
            consecutive_errors: self.consecutive_errors,
            backoff: self.backoff_now.clone(),
        }
    }

    /// Run `f` in a transaction of the runtime and write the loop's run files with it: the
    /// actions queued so far (and the transitions made) appended to `actions.jsonl`, and
    /// `run-status.json`. If it fails, the actions `f` queued are dropped with it.
    fn commit<T>(
        &mut self,
        now: Timestamp,
        mut f: impl FnMut(&mut Self, &mut crate::store::Tx) -> Result<T>,
    ) -> Result<T> {
        // Transitions made before `f`, then what `f` logs, then the transitions it made.
        self.log_transitions(now);
        let mark = self.pending.len();
        // A shared store runs the transaction again when another writer committed first: `f`
        // then starts from the loop as it was.
        let (saved_machine, saved_cursor, saved_announced) =
            (self.m.clone(), self.cursor, self.announced.clone());
        let mut attempt = 0;
        let store = self.store();
        let res = store.transaction(now, &[Lock::Agents], |tx| {
            if attempt > 0 {
                self.m = saved_machine.clone();
                self.cursor = saved_cursor;
                self.announced = saved_announced.clone();
                self.pending.truncate(mark);
            }
            attempt += 1;
            let v = f(self, tx)?;
            self.log_transitions(now);
            let lines: Vec<String> = self
                .pending
                .iter()
                .map(|a| serde_json::to_string(a).expect("actions serialize"))
                .collect();
            tx.append_capped(&self.actions_file, &lines, agents::ACTIONS_CAP_BYTES)?;
            tx.write_at(&self.status_file, agents::to_bytes(&self.run_status(now)))?;
            Ok(v)
        });
        match &res {
            Ok(_) => self.pending.clear(),
            Err(_) => self.pending.truncate(mark),
        }
        res
    }

    /// Record the loop's status (and an action).
    fn status(&mut self, status: &'static str, detail: Value) -> Result<()> {
        self.run_state = status;
        let now = Timestamp::now();
        self.commit(now, |lp, _| {
            lp.act(now, "run", detail.clone());
            Ok(())
        })
    }

    /// One cycle: fetch, route, queue and claim; execute and complete. Returns how long to
    /// wait before the next cycle (zero: go on at once).
    fn cycle(&mut self, stopped: &dyn Fn() -> bool) -> Result<Duration> {
        self.m.go(State::Waking);
        self.m.go(State::FetchingEvents);
        let now = Timestamp::now();
        let snapshot: Agents = self.store.read_doc(now)?;
        let me = ops::agent(&snapshot, &self.name)?.clone();
        let channels: Channels = self.store.read_doc(now)?;
        let (events, read_to) = read_feed(self.store, &me, &mut *self.progress)?;
        let store = &self.store;
        let lookup = |id: &str| agents::find_message(store, &channels, id).ok().flatten();
        let routed: Vec<(Event, ops::Route)> = events
            .into_iter()
            .map(|e| {
                let r = ops::route(&me, &e, self.args.broadcast, &lookup);
                (e, r)
            })
            .collect();
        self.m.go(State::FetchingInbox);
        let inbox: Inbox = agents::inbox_files::snapshot(self.store, now, &self.scope())?;
        let idle = routed.is_empty()
            && me.queue.is_empty()
            && read_to.saturating_sub(me.cursor) < 500
            && !inbox
                .items
                .values()
                .any(|i| i.agent == self.name || self.stands_in(&me, i));
        if idle {
            // Nothing for this agent: no write (the transitions are logged with the next one).
            self.m.go(State::Idle);
            return Ok(SAFETY_RESCAN);
        }
        let plan = self.fetch_and_claim(&routed, read_to, &channels)?;
        let Some((item, claim, takeover)) = plan.claimed else {
            let now_ms = agents::now_ms();
            let mut wait = SAFETY_RESCAN;
            if let Some(exp) = plan.next_expiry_ms {
                wait = wait.min(Duration::from_millis((exp - now_ms).max(0) as u64 + 5));
            }
            if let Some(t) = self.held_back.values().min() {
                wait = wait.min(t.saturating_duration_since(Instant::now()));
            }
            return Ok(wait);
        };
        let _ = takeover;
        self.execute(item, claim, stopped)?;
        Ok(if plan.more {
            Duration::ZERO
        } else {
            Duration::from_millis(1)
        })
    }

    fn fetch_and_claim(
        &mut self,
        routed: &[(Event, ops::Route)],
        read_to: u64,
        channels: &Channels,
    ) -> Result<Plan> {
        let now = Timestamp::now();
        let now_ms = agents::now_ms();
        let name = self.name.clone();
        let exec = self.args.exec.is_some();
        let held: Vec<String> = self
            .held_back
            .iter()
            .filter(|(_, t)| **t > Instant::now())
            .map(|(k, _)| k.clone())
            .collect();
        let (ibstore, scope) = (self.store(), self.scope());
        self.commit(now, |lp, tx| {
            let mut agents: Agents = tx.read()?;
            let (mut inbox, loaded) = agents::inbox_files::read(tx, ibstore, &scope)?;
            let mut fx = ops::Fx::default();
            ops::expire(&mut agents, &mut inbox, now, now_ms, &mut fx);
            let a = ops::agent_mut(&mut agents, &name)?;
            let mut newly: Vec<String> = Vec::new();
            for (e, r) in routed {
                let mut detail = json!({"seq": e.seq, "event_type": e.event_type});
                detail["route"] = serde_json::to_value(r).expect("serializes");
                lp.act(now, "route", detail);
                if let ops::Route::Broadcast { message_id } = r
                    && !ops::has_item(&inbox, &name, message_id, "broadcast")
                    && let Some(m) = ops::recent(channels, message_id).cloned()
                {
                    let id = ops::add_item(&mut inbox, &m, &name, "broadcast", "broadcast",
                        agents::Priority::Low, now, now_ms, &mut fx);
                    newly.push(id);
                }
            }
            // The durable queue: every actionable item of this agent, in pick order.
            let mut mine: Vec<&agents::Item> =
                inbox.items.values().filter(|i| i.agent == name).collect();
            mine.sort_by(|x, y| ops::pick_order(x, y));
            let queue: Vec<String> = mine.iter().map(|i| i.id.clone()).collect();
            for id in &queue {
                if !a.queue.contains(id) {
                    newly.push(id.clone());
                }
            }
            newly.dedup();
            for id in &newly {
                let created = inbox.items.get(id).map(|i| (i.created_ms, i.status));
                if let Some((ms, status)) = created
                    && !(lp.args.mark_seen && status == agents::Status::Pending)
                    && status == agents::Status::Pending
                {
                    a.metrics.event_to_seen.observe((now_ms - ms).max(0) as u64);
                }
                lp.act(now, "queue", json!({"item_id": id}));
            }
            a.queue = queue.clone();
            // The cursor moves only now: everything it covers is queued in this commit.
            a.cursor = a.cursor.max(read_to);
            lp.cursor = a.cursor;
            if lp.args.mark_seen && queue.iter().any(|id| inbox.items[id].status == agents::Status::Pending) {
                lp.m.go(State::MarkingSeen);
                for id in &queue {
                    ops::mark_seen(&mut agents, &mut inbox, id, now, now_ms, &mut fx)?;
                }
            }
            let mut plan = Plan { claimed: None, next_expiry_ms: None, more: false };
            let mut candidates = Vec::new();
            for id in &queue {
                if held.contains(id) {
                    continue;
                }
                let item = &inbox.items[id];
                match &item.claim {
                    Some(c) if !(c.agent == name && c.worker == lp.worker) && c.expires_ms > now_ms => {
                        plan.next_expiry_ms = Some(plan.next_expiry_ms.map_or(c.expires_ms, |x| x.min(c.expires_ms)));
                        // Held by someone else while its TTL runs: wait for the expiry (logged once).
                        let key = format!("{id} {} {}", c.worker, c.claimed_ms);
                        if exec && lp.announced.insert(key) {
                            lp.act(now, "conflict", json!({"item_id": id, "holder": c.agent,
                                "worker": c.worker, "retry_after_seconds": ops::retry_after(c, now_ms)}));
                        }
                    }
                    Some(c) if !(c.agent == name && c.worker == lp.worker) => candidates.push((id.clone(), true)),
                    _ => candidates.push((id.clone(), false)),
                }
            }
            // Stand-in work: expired claims of the agents this loop stands in for, after its own.
            let mut theirs: Vec<&agents::Item> = inbox
                .items
                .values()
                .filter(|i| lp.stands_in(a_watch(&agents, &name), i) && !held.contains(&i.id))
                .collect();
            theirs.sort_by(|x, y| ops::pick_order(x, y));
            for item in theirs {
                let c = item.claim.as_ref().expect("stands_in needs a claim");
                if c.expires_ms > now_ms {
                    plan.next_expiry_ms = Some(plan.next_expiry_ms.map_or(c.expires_ms, |x| x.min(c.expires_ms)));
                    let key = format!("{} {} {}", item.id, c.worker, c.claimed_ms);
                    if exec && lp.announced.insert(key) {
                        lp.act(now, "conflict", json!({"item_id": item.id, "owner": item.agent,
                            "holder": c.agent, "worker": c.worker,
                            "retry_after_seconds": ops::retry_after(c, now_ms)}));
                    }
                } else {
                    candidates.push((item.id.clone(), true));
                }
            }
            plan.more = candidates.len() > 1;
            if exec && let Some((id, expired)) = candidates.first().cloned() {
                lp.m.go(State::Claiming);
                let out = ops::claim(&mut agents, &mut inbox, &id, &name, &lp.worker, lp.args.ttl,
                    expired, now, now_ms, &mut fx)?;
                match out {
                    ops::ClaimOutcome::Ok { claim, takeover, previous, .. } => {
                        if takeover {
                            lp.m.go(State::TimeoutTakeover);
                        }
                        lp.m.go(State::Executing);
                        lp.act(now, "claim", json!({"item_id": id, "owner": inbox.items[&id].agent,
                            "expires_at": claim.expires_at, "takeover": takeover,
                            "previous_holder": previous.map(|p| format!("{} ({})", p.agent, p.worker))}));
                        let item = inbox.items[&id].clone();
                        lp.current = Some(agents::CurrentWork {
                            item_id: id.clone(),
                            channel_id: item.channel_id.clone(),
                            message_id: item.source_id.clone(),
                            claim_expires_at: claim.expires_at,
                            takeover,
                            started_at: now,
                        });
                        plan.claimed = Some((item, claim, takeover));
                    }
                    ops::ClaimOutcome::Conflict { holder, worker, retry_after_seconds, .. } => {
                        lp.m.go(State::Idle);
                        lp.act(now, "conflict", json!({"item_id": id, "holder": holder,
                            "worker": worker, "retry_after_seconds": retry_after_seconds}));
                    }
                }
            } else {
                lp.m.go(State::Idle);
            }
            tx.write_if_changed(&agents)?;
            agents::inbox_files::write(tx, ibstore, &inbox, &loaded)?;
            agents::stage(tx, fx)?;
            Ok(plan)
        })
    }

    /// Run the child on a claimed item and finish it.
    fn execute(
        &mut self,
        item: agents::Item,
        claim: agents::Claim,
        stopped: &dyn Fn() -> bool,
    ) -> Result<()> {
        let cmd = self.args.exec.clone().expect("claims only with --exec");
        let channels: Channels = self.store.read_doc(Timestamp::now())?;
        let message = agents::find_message(&self.store, &channels, &item.source_id)?;
        let input = json!({"item": item, "message": message, "agent": self.name});
        let agent_name = self.name.clone();
        let result = run_child(
            &cmd,
            &input,
            &item,
            &agent_name,
            Duration::from_secs_f64(self.args.timeout),
            Duration::from_secs(claim.ttl_seconds.div_ceil(3).max(1)),
            stopped,
            &mut || self.renew(&item.id),
        );
        self.current = None;
        match result {
            Ok(ChildEnd::Exited(0, out)) => {
                let verdict = agents::artifact::validate(&out);
                if verdict.valid {
                    self.m.go(State::Completing);
                    match self.complete(&item, &out) {
                        Ok(post_id) => {
                            self.consecutive_errors = 0;
                            self.failures.remove(&item.id);
                            self.held_back.remove(&item.id);
                            self.m.go(State::Idle);
                            self.note("complete", json!({"item_id": item.id, "post_id": post_id}))?;
                            Ok(())
                        }
                        Err(e) => self.fail(&item, "complete_failed", &e.to_string(), stopped),
                    }
                } else {
                    self.fail(
                        &item,
                        "invalid_artifact",
                        &verdict.errors.join("; "),
                        stopped,
                    )
                }
            }
            Ok(ChildEnd::Exited(SKIP_EXIT, _)) => {
                self.m.go(State::Skipping);
                let now = Timestamp::now();
                let now_ms = agents::now_ms();
                let name = self.name.clone();
                let (ibstore, scope) = (self.store(), self.scope());
                let res = self.commit(now, |_, tx| {
                    let mut agents: Agents = tx.read()?;
                    let (mut inbox, loaded) = agents::inbox_files::read(tx, ibstore, &scope)?;
                    let mut fx = ops::Fx::default();
                    ops::finish(
                        &mut agents,
                        &mut inbox,
                        &item.id,
                        agents::Status::Skipped,
                        None,
                        Some(&name),
                        now,
                        now_ms,
                        &mut fx,
                    )?;
                    tx.write(&agents)?;
                    agents::inbox_files::write(tx, ibstore, &inbox, &loaded)?;
                    agents::stage(tx, fx)
                });
                match res {
                    Ok(()) => {
                        self.m.go(State::Idle);
                        self.note("skip", json!({"item_id": item.id}))
                    }
                    Err(e) => self.fail(&item, "skip_failed", &e.to_string(), stopped),
                }
            }
            Ok(ChildEnd::Exited(code, _)) => self.fail(
                &item,
                "exit_status",
                &format!("the command exited with status {code}"),
                stopped,
            ),
            Ok(ChildEnd::Signaled(sig)) => self.fail(
                &item,
                "killed",
                &format!("the command was killed by signal {sig}"),
                stopped,
            ),
            Ok(ChildEnd::TimedOut) => self.fail(
                &item,
                "timeout",
                &format!("the command ran longer than {} s", self.args.timeout),
                stopped,
            ),
            Ok(ChildEnd::Stopped) => {
                self.m.go(State::Error);
                self.release(&item.id, "stopped");
                self.m.go(State::BackingOff);
                self.m.go(State::Idle);
                self.note("stopped", json!({"item_id": item.id}))
            }
            Ok(ChildEnd::ClaimLost(why)) => self.fail(&item, "claim_lost", &why, stopped),
            Err(e) => self.fail(&item, "spawn_failed", &e.to_string(), stopped),
        }
    }

    fn renew(&mut self, id: &str) -> std::result::Result<(), String> {
        let now = Timestamp::now();
        let now_ms = agents::now_ms();
        let name = self.name.clone();
        let worker = self.worker.clone();
        let (ibstore, scope) = (self.store(), self.scope());
        self.store
            .transaction(now, &[Lock::Agents], |tx| {
                let (mut inbox, loaded) = agents::inbox_files::read(tx, ibstore, &scope)?;
                let held = inbox
                    .items
                    .get(id)
                    .and_then(|i| i.claim.as_ref())
                    .is_some_and(|c| c.agent == name && c.worker == worker);
                if !held {
                    return Err(Error::invalid(
                        Reason::NotHolder,
                        format!("the claim on {id} was taken over"),
                    ));
                }
                let mut fx = ops::Fx::default();
                ops::renew(&mut inbox, id, &name, None, now, now_ms, &mut fx)?;
                agents::inbox_files::write(tx, ibstore, &inbox, &loaded)?;
                agents::stage(tx, fx)
            })
            .map_err(|e| e.to_string())
    }

    /// Post the artifact and complete the item with a reference to the post, together.
    fn complete(&mut self, item: &agents::Item, artifact: &str) -> Result<String> {
        let now = Timestamp::now();
        let now_ms = agents::now_ms();
        let name = self.name.clone();
        let worker = self.worker.clone();
        let store = self.store();
        let (ibstore, scope) = (self.store(), self.scope());
        self.commit(now, |_, tx| {
            let mut agents: Agents = tx.read()?;
            let (mut inbox, loaded) = agents::inbox_files::read(tx, ibstore, &scope)?;
            let mut channels: Channels = tx.read()?;
            let still = inbox
                .items
                .get(&item.id)
                .and_then(|i| i.claim.as_ref())
                .is_some_and(|c| c.agent == name && c.worker == worker);
            if !still {
                return Err(Error::invalid(
                    Reason::NotHolder,
                    format!("the claim on {} is no longer ours", item.id),
                ));
            }
            let dm = item.source_type == "dm";
            let replied = agents::find_message(&store, &channels, &item.source_id)?;
            let mut fx = ops::Fx::default();
            let post = ops::post(
                &mut agents,
                &mut inbox,
                &mut channels,
                ops::NewPost {
                    channel: if dm {
                        item.author.clone()
                    } else {
                        item.channel_id.clone()
                    },
                    author: name.clone(),
                    content: artifact.to_string(),
                    reply_to: if dm {
                        None
                    } else {
                        replied.as_ref().map(|r| r.message_id.clone())
                    },
                    priority: agents::Priority::Normal,
                    dm,
                },
                if dm { None } else { replied.as_ref() },
                now,
                now_ms,
                &mut fx,
            );
            let post = post?;
            let mut r = serde_json::Map::new();
            r.insert("post_id".into(), json!(post.message_id));
            r.insert("channel_id".into(), json!(post.channel_id));
            r.insert("kind".into(), json!("artifact"));
            ops::finish(
                &mut agents,
                &mut inbox,
                &item.id,
                agents::Status::Completed,
                Some(r),
                Some(&name),
                now,
                now_ms,
                &mut fx,
            )?;
            let a = ops::agent_mut(&mut agents, &name)?;
            a.queue.retain(|q| *q != item.id);
            tx.write(&agents)?;
            agents::inbox_files::write(tx, ibstore, &inbox, &loaded)?;
            tx.write(&channels)?;
            agents::stage(tx, fx)?;
            Ok(post.message_id)
        })
    }

    fn release(&mut self, id: &str, reason: &str) {
        let now = Timestamp::now();
        let name = self.name.clone();
        let worker = self.worker.clone();
        let (ibstore, scope) = (self.store(), self.scope());
        let _ = self.store.transaction(now, &[Lock::Agents], |tx| {
            let (mut inbox, loaded) = agents::inbox_files::read(tx, ibstore, &scope)?;
            let ours = inbox
                .items
                .get(id)
                .and_then(|i| i.claim.as_ref())
                .is_some_and(|c| c.agent == name && c.worker == worker);
            if !ours {
                return Ok(());
            }
            let mut fx = ops::Fx::default();
            ops::release(&mut inbox, id, &name, reason, &mut fx)?;
            agents::inbox_files::write(tx, ibstore, &inbox, &loaded)?;
            agents::stage(tx, fx)
        });
    }

    /// An action in the log (with the transitions made so far).
    fn note(&mut self, kind: &str, detail: Value) -> Result<()> {
        let now = Timestamp::now();
        self.commit(now, |lp, _| {
            lp.act(now, kind, detail.clone());
            Ok(())
        })
    }

    /// Record an error (the item, if any, stays actionable; its claim is released).
    fn error(&mut self, item: Option<&agents::Item>, why: &str) {
        self.m.go(State::Error);
        self.consecutive_errors += 1;
        if let Some(i) = item {
            self.release(&i.id, "error");
        }
        let now = Timestamp::now();
        let name = self.name.clone();
        let item_id = item.map(|i| i.id.clone());
        let why = agents::health::redact_text(why);
        self.last_error = Some((why.clone(), now));
        let _ = self.commit(now, |lp, tx| {
            let mut agents: Agents = tx.read()?;
            let a = ops::agent_mut(&mut agents, &name)?;
            a.metrics.errors += 1;
            lp.act(now, "error", json!({"item_id": item_id, "error": why}));
            Ok::<_, crate::Error>(tx.write(&agents)?)
        });
        (self.progress)(Note::Warning(format!("agent {}: {why}", self.name)));
    }

    fn fail(
        &mut self,
        item: &agents::Item,
        kind: &str,
        why: &str,
        stopped: &dyn Fn() -> bool,
    ) -> Result<()> {
        self.error(Some(item), &format!("{kind}: {why}"));
        self.backoff(stopped, Some(&item.id));
        Ok(())
    }

    /// Back off exponentially: `backoff_ms * 2^(n-1)`, at most `backoff_max_ms`, for the n-th
    /// consecutive error. Returns the wait before the next cycle.
    fn backoff(&mut self, stopped: &dyn Fn() -> bool, item: Option<&str>) -> Duration {
        self.m.go(State::BackingOff);
        let n = self.consecutive_errors.max(1);
        let ms = self
            .args
            .backoff_ms
            .saturating_mul(1u64 << (n - 1).min(30))
            .min(self.args.backoff_max_ms);
        let d = Duration::from_millis(ms);
        if let Some(id) = item {
            *self.failures.entry(id.to_string()).or_default() += 1;
            self.held_back.insert(id.to_string(), Instant::now() + d);
        }
        self.backoff_now = Some(agents::Backoff {
            delay_ms: ms,
            until: agents::ts(agents::now_ms() + ms as i64),
            consecutive_errors: n,
            item_id: item.map(str::to_string),
        });
        let _ = self.note(
            "backoff",
            json!({"delay_ms": ms, "consecutive_errors": n, "item_id": item}),
        );
        sleep_unless(stopped, d);
        self.backoff_now = None;
        self.m.go(State::Recovering);
        self.m.go(State::Idle);
        Duration::ZERO
    }
}

/// The agent's feed after its cursor (at most [`FEED_BATCH`] events), and how far it read.
fn read_feed(
    store: &Store,
    me: &agents::Agent,
    progress: &mut dyn FnMut(Note),
) -> Result<(Vec<Event>, u64)> {
    let mut tail = match store.tail(Some(me.cursor)) {
        Ok(t) => t,
        Err(e) if e.reason() == "cursor_expired" => {
            let oldest = store.oldest_event()?.unwrap_or(1);
            progress(Note::Warning(format!(
                "agent {}: {e}; resuming at {}",
                me.name,
                oldest - 1
            )));
            store.tail(Some(oldest - 1))?
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    let mut seen = 0usize;
    tail.read(|e| {
        seen += 1;
        if ops::concerns(me, &e) {
            out.push(e);
        }
        seen < FEED_BATCH
    })?;
    Ok((out, tail.after))
}

enum ChildEnd {
    Exited(i32, String),
    Signaled(i32),
    TimedOut,
    Stopped,
    ClaimLost(String),
}

/// The largest artifact read from a child.
const MAX_ARTIFACT: u64 = 1024 * 1024;

#[allow(clippy::too_many_arguments)]
fn run_child(
    cmd: &str,
    input: &Value,
    item: &agents::Item,
    agent: &str,
    timeout: Duration,
    renew_every: Duration,
    stopped: &dyn Fn() -> bool,
    renew: &mut dyn FnMut() -> std::result::Result<(), String>,
) -> std::io::Result<ChildEnd> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env("CONDUCTOR_AGENT", agent)
        .env("CONDUCTOR_ITEM_ID", &item.id)
        .env("CONDUCTOR_CHANNEL_ID", &item.channel_id)
        .env("CONDUCTOR_MESSAGE_ID", &item.source_id)
        .process_group(0);
    unsafe {
        c.pre_exec(|| {
            watch::unblock_stop_signals();
            // Die with the loop: a SIGKILLed loop must not leave its worker running.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c.spawn().map_err(|e| crate::spawn::named(&c, e))?;
    let pid = child.id() as i32;
    let mut stdin = child.stdin.take().expect("piped");
    let body = serde_json::to_vec(input).expect("serializes");
    std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let (otx, orx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_ARTIFACT).read_to_end(&mut buf);
        let _ = otx.send(buf);
    });
    let (wtx, wrx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = wtx.send(child.wait());
    });
    let started = Instant::now();
    let mut next_renew = started + renew_every;
    let kill = || unsafe {
        libc::kill(-pid, libc::SIGKILL);
    };
    loop {
        let now = Instant::now();
        let until = (started + timeout)
            .min(next_renew)
            .saturating_duration_since(now);
        match wrx.recv_timeout(until.min(Duration::from_millis(250))) {
            Ok(status) => {
                let status = status?;
                let out = orx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
                let text = String::from_utf8_lossy(&out).into_owned();
                return Ok(match (status.code(), status.signal()) {
                    (Some(c), _) => ChildEnd::Exited(c, text),
                    (None, Some(s)) => ChildEnd::Signaled(s),
                    _ => ChildEnd::Signaled(0),
                });
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(ChildEnd::Signaled(0)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if stopped() {
            kill();
            let _ = wrx.recv();
            return Ok(ChildEnd::Stopped);
        }
        if Instant::now() >= started + timeout {
            kill();
            let _ = wrx.recv();
            return Ok(ChildEnd::TimedOut);
        }
        if Instant::now() >= next_renew {
            if let Err(why) = renew() {
                kill();
                let _ = wrx.recv();
                return Ok(ChildEnd::ClaimLost(why));
            }
            next_renew = Instant::now() + renew_every;
        }
    }
}
