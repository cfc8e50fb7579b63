//! The protocol's operations as pure functions over [`State`]: no I/O, no clock. `now` and
//! anything learned from the machine (is a process alive?) are passed in, and what must be
//! appended to the ledgers is pushed to `fx` as [`Effect`]s, so the store can write state and
//! ledger lines in one locked transaction.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;
use serde_json::json;

use super::claims;
use super::events;
use super::types::*;
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::store::event::NewEvent;
use crate::text::printable;
use crate::time::Timestamp;

/// Heartbeat age after which an instance counts as orphaned (the protocol's one hour).
pub const DEFAULT_MAX_AGE_MINUTES: u64 = 60;

/// A ledger line an operation asks the store to append.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// A line of `history.jsonl`.
    History(HistoryEntry),
    /// A line of `conflicts.log`.
    Log { kind: LogKind, text: String },
    /// A line of `events.jsonl` (the store numbers it).
    Event(NewEvent),
}

/// The event kinds of `conflicts.log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LogKind {
    #[serde(rename = "CONFLICT")]
    Conflict,
    #[serde(rename = "RESOLVED")]
    Resolved,
    #[serde(rename = "FORCE")]
    Force,
    #[serde(rename = "RELEASE")]
    Release,
    /// conductor repaired a state another program wrote (see `protocol::foreign`).
    #[serde(rename = "REPAIR")]
    Repair,
}

impl LogKind {
    /// The upper-case word written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Conflict => "CONFLICT",
            LogKind::Resolved => "RESOLVED",
            LogKind::Force => "FORCE",
            LogKind::Release => "RELEASE",
            LogKind::Repair => "REPAIR",
        }
    }

    /// Parse the word written in the log.
    pub fn parse(s: &str) -> Option<LogKind> {
        Some(match s {
            "CONFLICT" => LogKind::Conflict,
            "RESOLVED" => LogKind::Resolved,
            "FORCE" => LogKind::Force,
            "RELEASE" => LogKind::Release,
            "REPAIR" => LogKind::Repair,
            _ => return None,
        })
    }
}

fn log(fx: &mut Vec<Effect>, kind: LogKind, text: String) {
    fx.push(Effect::Log { kind, text });
}

/// Push an event whose actor is `actor` (its project is looked up in `st`).
fn event(
    st: &State,
    fx: &mut Vec<Effect>,
    event_type: &'static str,
    actor: &str,
    target: Option<&str>,
    payload: serde_json::Value,
) {
    let project = st.instance(actor).map(|i| i.project.clone());
    fx.push(Effect::Event(NewEvent {
        event_type,
        actor: Some(actor.to_string()),
        target: target.map(str::to_string),
        project,
        payload,
    }));
}

/// What the machine knows about an instance's liveness: whether its process is gone (pid dead
/// on this host), and after how long without a heartbeat it counts as orphaned.
pub trait Liveness {
    fn process_gone(&self, inst: &Instance) -> bool;
    /// Minutes without a heartbeat after which an instance is an orphan.
    fn max_age_minutes(&self) -> u64 {
        DEFAULT_MAX_AGE_MINUTES
    }
}

/// For pure tests: every process is alive.
pub struct AssumeAlive;
impl Liveness for AssumeAlive {
    fn process_gone(&self, _: &Instance) -> bool {
        false
    }
}

/// Whether an instance may claim at all, by what its caller knows and the protocol does not
/// (whether its agent's hooks were proven to bite: the integrations' live checks, under
/// `enforce = "require-verified"`). Asked under the lock, on the acting instance as the claim
/// sees it: `Err` refuses the whole claim (nothing is changed); `Ok` lets it claim, with these
/// warnings for the outcome.
pub trait Admission {
    fn admit(&self, inst: &Instance) -> Result<Vec<String>>;
}

/// Every instance may claim (every `enforce` mode but require-verified; pure tests).
pub struct AdmitAll;
impl Admission for AdmitAll {
    fn admit(&self, _: &Instance) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// True when the last heartbeat is more than `max_age` minutes old (the protocol: "no heartbeat
/// in >1 hour"; exactly 60:00 is not yet an orphan).
pub fn heartbeat_expired(inst: &Instance, now: Timestamp, max_age: u64) -> bool {
    inst.last_heartbeat.seconds_until(now) > max_age.saturating_mul(60)
}

/// Alive means: heartbeat not expired and process not known to be gone.
pub fn is_alive(inst: &Instance, now: Timestamp, live: &dyn Liveness) -> bool {
    !heartbeat_expired(inst, now, live.max_age_minutes()) && !live.process_gone(inst)
}

fn require<'a>(st: &'a mut State, id: &str) -> Result<&'a mut Instance> {
    st.instance_mut(id)
        .ok_or_else(|| Error::UnknownInstance(id.to_string()))
}

/// What `start` registers.
#[derive(Clone, Debug)]
pub struct NewInstance {
    pub source: Source,
    pub project: String,
    pub task: String,
    pub priority: Priority,
    pub working_directory: String,
    pub override_reason: Option<String>,
    pub pid: Option<u32>,
    pub host: Option<String>,
    pub session_id: Option<String>,
}

/// Register an instance under a fresh id. `random_hex6` is asked until the id is unused.
/// `drift` is the reason recorded when the priority gate was overridden.
pub fn start(
    st: &mut State,
    new: NewInstance,
    drift: Option<String>,
    mut random_hex6: impl FnMut() -> String,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> String {
    let id = loop {
        let id = format!("{}-{}", new.source.code(), random_hex6());
        if st.instance(&id).is_none() {
            break id;
        }
    };
    let drift_reason = drift.clone();
    if let Some(reason) = drift {
        st.drift_warnings.push(DriftWarning {
            instance_id: id.clone(),
            reason,
            acknowledged: false,
            acknowledged_at: None,
            extra: Default::default(),
        });
    }
    st.instances.push(Instance {
        id: id.clone(),
        source: new.source,
        project: new.project,
        task: new.task,
        priority: new.priority,
        files_claimed: Default::default(),
        started_at: now,
        last_heartbeat: now,
        working_directory: new.working_directory,
        override_reason: new.override_reason,
        pid: new.pid,
        host: new.host,
        session_id: new.session_id,
        agent: None,
        agent_version: None,
        terminal_session: None,
        claim_tokens: Default::default(),
        pending_conflicts: Vec::new(),
        waiting_for: Vec::new(),
        extra: Default::default(),
    });
    st.updated_at = now;
    let me = st.instance(&id).expect("just added");
    let payload = json!({"task": me.task, "priority": me.priority, "working_directory": me.working_directory});
    event(st, fx, events::INSTANCE_STARTED, &id, None, payload);
    if let Some(reason) = drift_reason {
        event(
            st,
            fx,
            events::DRIFT_WARNING,
            &id,
            None,
            json!({"reason": reason}),
        );
    }
    id
}

/// Give the instance a hook registered for a Claude Code session the task the session now
/// states with `/conductor start`, instead of registering a second instance for one session.
/// Keeps its id, claims and working directory; the gate has already run.
pub fn retask(
    st: &mut State,
    id: &str,
    new: NewInstance,
    drift: Option<String>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<()> {
    let me = require(st, id)?;
    me.task = new.task;
    me.project = new.project;
    me.priority = new.priority;
    me.override_reason = new.override_reason;
    me.last_heartbeat = now;
    st.updated_at = now;
    st.drift_warnings.retain(|w| w.instance_id != id);
    if let Some(reason) = &drift {
        st.drift_warnings.push(DriftWarning {
            instance_id: id.to_string(),
            reason: reason.clone(),
            acknowledged: false,
            acknowledged_at: None,
            extra: Default::default(),
        });
    }
    let me = st.instance(id).expect("checked above");
    let payload = json!({"task": me.task, "priority": me.priority, "working_directory": me.working_directory, "retasked": true});
    event(st, fx, events::INSTANCE_STARTED, id, None, payload);
    if let Some(reason) = drift {
        event(
            st,
            fx,
            events::DRIFT_WARNING,
            id,
            None,
            json!({"reason": reason}),
        );
    }
    Ok(())
}

/// A file someone else holds, as the claim output reports it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Conflict {
    pub file: String,
    pub held_by: String,
    pub holder_task: String,
    pub holder_started: Timestamp,
    /// False when the holder's heartbeat expired or its process is gone: `--force` is safe-ish.
    pub holder_alive: bool,
    pub holder_last_heartbeat: Timestamp,
    /// The claim of the holder that overlaps `file`, when it is another key (a directory that
    /// holds the file, a file inside the directory, an overlapping glob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_claim: Option<String>,
    /// True when the two globs were too large to compare and are taken as overlapping.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overlap_undecided: bool,
    /// The root of the git worktree the holder works in, when it is another worktree of the
    /// same repository (docs/protocol.md, "Agents in worktrees").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_worktree: Option<String>,
    /// That worktree's branch (a detached HEAD: its short commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_branch: Option<String>,
}

/// A file taken over with `--force`.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Forced {
    pub file: String,
    pub from: String,
}

/// A file a waiting claim was granted (or claimed at once) and then lost before the waiter
/// saw it: taken over with `--force`, force-released, or released by the instance itself. The
/// waiter's one request was granted once; it is never taken again behind the taker's back.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct LostGrant {
    pub file: String,
    /// Who took it away (`None`: not found in the journal, which may have been pruned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// How: `forced: REASON`, `force-released`, `released by the instance itself`, `taken away`.
    pub how: String,
}

impl LostGrant {
    /// What happened, as one clause: `granted, then taken over by C (forced: WHY)`.
    pub fn describe(&self) -> String {
        let by = self.by.as_deref().unwrap_or("another instance");
        if self.how.starts_with("forced") {
            format!("granted, then taken over by {by} ({})", self.how)
        } else if self.how == "force-released" {
            format!("granted, then force-released by {by}")
        } else {
            format!("granted, then {}", self.how)
        }
    }
}

/// The result of a claim: granted files and refused ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimOutcome {
    pub claimed: Vec<String>,
    pub conflicts: Vec<Conflict>,
    pub forced: Vec<Forced>,
    /// Waiting claims only: files granted and since taken away ([`LostGrant`]).
    pub lost: Vec<LostGrant>,
    /// The fencing token of each claimed key ([`Instance::claim_tokens`]).
    pub tokens: std::collections::BTreeMap<String, u64>,
    /// Paths whose git worktree could not be followed (its main repository moved or deleted),
    /// claimed by their absolute path alone: one line each, for the person.
    pub warnings: Vec<String>,
    /// Paths a finished branch of another worktree changed and that must land first
    /// ([`super::landing`]): claimed with this notice, or refused under block-foreign.
    pub landing: Vec<super::landing::Hit>,
}

impl ClaimOutcome {
    /// True when a landing file was refused (block-foreign).
    pub fn refused_landing(&self) -> bool {
        self.landing.iter().any(|h| h.refused)
    }

    /// The protocol's message for a claim that did not get every file.
    pub fn message(&self) -> String {
        let o = self;
        if o.conflicts.is_empty() && o.lost.is_empty() {
            let hits: Vec<String> = o.landing.iter().map(|h| h.notice()).collect();
            return format!("Landing: {}.", hits.join("; "));
        }
        if o.conflicts.is_empty() {
            let lost: Vec<String> = o
                .lost
                .iter()
                .map(|l| format!("{} was {}", l.file, l.describe()))
                .collect();
            return format!("Not held: {}.", lost.join("; "));
        }
        let mut holders: Vec<&str> = Vec::new();
        for c in &o.conflicts {
            if !holders.contains(&c.held_by.as_str()) {
                holders.push(&c.held_by);
            }
        }
        let n = o.conflicts.len();
        // The protocol's exact message; the human output adds the next steps.
        format!(
            "{n} conflict{} detected. Coordinate with {} or wait for release.",
            if n == 1 { "" } else { "s" },
            holders.join(", ")
        )
    }
}

/// The claims of other registered instances that overlap `key` (see [`claims`]): the key
/// held, its holder, and whether the overlap was decided.
fn others_overlapping(
    st: &State,
    globs: &[String],
    id: &str,
    key: &str,
) -> Vec<(String, String, claims::Overlap)> {
    overlapping_claims(st, globs, key)
        .into_iter()
        .filter(|(_, h, _)| *h != id && st.instance(h).is_some())
        .collect()
}

/// The claims of `st` that overlap `key` ([`claims::overlapping`]), in `key`'s own worktree
/// and in every other worktree of its repository that `st.repos` knows: the key held, its
/// holder, and whether the overlap was decided.
pub fn overlapping_claims(
    st: &State,
    globs: &[String],
    key: &str,
) -> Vec<(String, String, claims::Overlap)> {
    let spellings = st.repos.spellings(key);
    let mut out: Vec<(String, String, claims::Overlap)> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for spelling in &spellings {
        for (k, h, o) in claims::overlapping(&st.global_claims, globs, spelling) {
            // One spelling (no other worktree): `overlapping` lists each key once already.
            if spellings.len() == 1 || seen.insert(k) {
                out.push((k.to_string(), h.to_string(), o));
            }
        }
    }
    out
}

/// The worktree and branch to name for a conflict over `file` with `holder`'s key `held`, when
/// the holder works in another worktree of the repository: the worktree `held` lies in, or
/// (a shared store's repository key) the one the holder works in.
pub fn holder_worktree<'a>(
    st: &'a State,
    held: &str,
    file: &str,
    holder: &Instance,
) -> Option<&'a super::worktrees::Worktree> {
    if let Some(w) = st.repos.other_worktree(held, file) {
        return Some(w);
    }
    if !held.starts_with("/@") {
        return None;
    }
    let wd = format!("{}/", holder.working_directory.trim_end_matches('/'));
    let (w, _) = st.repos.of(&wd)?;
    (!st.repos.siblings(&wd).is_empty()).then_some(w)
}

/// Claim normalized paths for `id`. A key is a file, a directory (ending in `/`) or a glob
/// ([`claims`]); it is refused while any other instance holds a key that overlaps it. Free keys
/// are granted even when others conflict (the spec's partial claim); with `force`, every
/// overlapping claim is taken from its holder (whole: a directory or glob that only partly
/// overlaps is taken entirely) and the reason is logged.
pub fn claim(
    st: &mut State,
    id: &str,
    files: &[String],
    force: Option<&str>,
    now: Timestamp,
    live: &dyn Liveness,
    fx: &mut Vec<Effect>,
) -> Result<ClaimOutcome> {
    require(st, id)?.last_heartbeat = now;
    let mut out = ClaimOutcome {
        warnings: st.repos.warnings.clone(),
        ..ClaimOutcome::default()
    };
    let mut newly = Vec::new();
    let mut seen = BTreeSet::new();
    let mut globs: Vec<String> = claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    for file in files {
        if !seen.insert(file.as_str()) {
            continue;
        }
        let others = others_overlapping(st, &globs, id, file);
        if others.is_empty() {
            if st.global_claims.get(file).map(String::as_str) == Some(id) {
                out.claimed.push(file.clone());
            } else {
                grant(st, id, file, Some(()), fx);
                if claims::is_glob(file) {
                    globs.push(file.clone());
                }
                newly.push(file.clone());
                out.claimed.push(file.clone());
            }
            continue;
        }
        if let Some(why) = force {
            for (k, h, _) in &others {
                drop_claim(st, h, k);
                let via = if k == file {
                    String::new()
                } else {
                    format!(" (it overlaps {file})")
                };
                log(
                    fx,
                    LogKind::Force,
                    format!("{id} took {k} from {h}{via}: {why}"),
                );
                event(
                    st,
                    fx,
                    events::CLAIM_FORCED,
                    id,
                    Some(h),
                    json!({"file": k, "from": h, "reason": why, "for": file}),
                );
                out.forced.push(Forced {
                    file: k.clone(),
                    from: h.clone(),
                });
            }
            grant(st, id, file, None, fx);
            if claims::is_glob(file) {
                globs.push(file.clone());
            }
            out.claimed.push(file.clone());
            continue;
        }
        for (k, h, o) in &others {
            let holder = st.instance(h).expect("holder is registered");
            let tree = holder_worktree(st, k, file, holder);
            out.conflicts.push(Conflict {
                holder_worktree: tree.map(|w| w.root.trim_end_matches('/').to_string()),
                holder_branch: tree.and_then(|w| w.branch.clone()),
                file: file.clone(),
                held_by: h.clone(),
                holder_task: holder.task.clone(),
                holder_started: holder.started_at,
                holder_alive: is_alive(holder, now, live),
                holder_last_heartbeat: holder.last_heartbeat,
                held_claim: (k != file).then(|| k.clone()),
                overlap_undecided: *o == claims::Overlap::Undecided,
            });
            let via = match (k == file, *o == claims::Overlap::Undecided) {
                (true, _) => String::new(),
                (false, false) => format!(" (through its claim on {k})"),
                (false, true) => format!(
                    " (through its claim on {k}: the two globs are too large to compare, taken as overlapping)"
                ),
            };
            log(
                fx,
                LogKind::Conflict,
                format!("{id} tried to claim {file} already held by {h}{via}"),
            );
            let mut payload = json!({"file": file, "held_by": h});
            if k != file {
                payload["held_claim"] = json!(k);
            }
            event(st, fx, events::CLAIM_CONFLICT, id, Some(h), payload);
        }
        let h = others[0].1.clone();
        let me = st.instance_mut(id).expect("checked above");
        match me.pending_conflicts.iter_mut().find(|p| &p.file == file) {
            Some(p) => p.held_by = h,
            None => me.pending_conflicts.push(PendingConflict {
                file: file.clone(),
                held_by: h,
                since: now,
            }),
        }
    }
    if !newly.is_empty() {
        event(
            st,
            fx,
            events::CLAIM_GRANTED,
            id,
            None,
            json!({"files": newly}),
        );
    }
    st.updated_at = now;
    out.tokens = tokens_of(st, id, &out.claimed);
    Ok(out)
}

/// The fencing tokens `id` holds for `keys`.
pub fn tokens_of(st: &State, id: &str, keys: &[String]) -> std::collections::BTreeMap<String, u64> {
    let Some(me) = st.instance(id) else {
        return Default::default();
    };
    keys.iter()
        .filter_map(|k| me.claim_tokens.get(k).map(|t| (k.clone(), *t)))
        .collect()
}

/// Give `file` to `id`; when `log_resolution` is set and `id` had been refused it, log RESOLVED.
fn grant(st: &mut State, id: &str, file: &str, log_resolution: Option<()>, fx: &mut Vec<Effect>) {
    st.global_claims.insert(file.to_string(), id.to_string());
    st.last_token += 1;
    let token = st.last_token;
    let me = st.instance_mut(id).expect("caller checked");
    me.claim_tokens.insert(file.to_string(), token);
    if !me.files_claimed.iter().any(|f| f == file) {
        me.files_claimed.push(file.to_string());
    }
    me.waiting_for.retain(|w| w.file != file);
    if let Some(pos) = me.pending_conflicts.iter().position(|p| p.file == file) {
        let p = me.pending_conflicts.remove(pos);
        if log_resolution.is_some() {
            log(
                fx,
                LogKind::Resolved,
                format!("{} released {file}, {id} claimed it", p.held_by),
            );
        }
    }
}

/// Which files a release covers.
#[derive(Clone, Debug, PartialEq)]
pub enum Which {
    Files(Vec<String>),
    All,
}

/// Release files held by `id`. A file `id` does not hold is an error unless `force`, which
/// releases it from whoever holds it (logged).
pub fn release(
    st: &mut State,
    id: &str,
    which: &Which,
    force: bool,
    reason: Option<&str>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<Vec<String>> {
    let me = require(st, id)?;
    me.last_heartbeat = now;
    let files: Vec<String> = match which {
        Which::All => me.files_claimed.to_vec(),
        Which::Files(f) => {
            let mut seen = BTreeSet::new();
            f.iter()
                .filter(|x| seen.insert(x.as_str()))
                .cloned()
                .collect()
        }
    };
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    let mut released = Vec::new();
    for file in files {
        match st.global_claims.get(&file).cloned() {
            Some(h) if h == id => {
                drop_claim(st, &h, &file);
                log(fx, LogKind::Release, format!("{id} released {file}{why}"));
                event(
                    st,
                    fx,
                    events::CLAIM_RELEASED,
                    id,
                    None,
                    json!({"files": [file]}),
                );
                handoff(st, &file, now, fx);
                released.push(file);
            }
            Some(h) if force => {
                drop_claim(st, &h, &file);
                log(
                    fx,
                    LogKind::Release,
                    format!("{id} force-released {file} held by {h}{why}"),
                );
                event(
                    st,
                    fx,
                    events::CLAIM_RELEASED,
                    id,
                    Some(&h),
                    json!({"files": [file], "forced": true}),
                );
                handoff(st, &file, now, fx);
                released.push(file);
            }
            Some(h) => {
                return Err(Error::invalid(
                    Reason::NotHeld,
                    format!(
                        "{id} does not hold {file} (held by {h}); use --force to release it anyway"
                    ),
                ));
            }
            None if force => {}
            None => return Err(not_held_as_such(st, id, &file)),
        }
    }
    st.updated_at = now;
    Ok(released)
}

/// The error for releasing `file`, which no claim names as such: a claim that covers it (a
/// directory, a glob) is named, with how to release or narrow it.
fn not_held_as_such(st: &State, id: &str, file: &str) -> Error {
    let globs: Vec<String> = claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    let covering: Vec<(String, String)> = claims::overlapping(&st.global_claims, &globs, file)
        .into_iter()
        // Only the claims above it: a directory holding it, a glob matching it.
        .filter(|(k, _, _)| {
            *k != file && (file.starts_with(*k) || claims::kind(k) == claims::Kind::Glob)
        })
        .map(|(k, h, _)| (k.to_string(), h.to_string()))
        .collect();
    let quote = |k: &str| {
        if k.contains(|c: char| !(c.is_alphanumeric() || "/._-@:=+,".contains(c))) {
            format!("'{}'", k.replace('\'', "'\\''"))
        } else {
            k.to_string()
        }
    };
    let own = covering.iter().find(|(_, h)| h == id);
    let other = covering.iter().find(|(_, h)| h != id);
    match (own, other) {
        (Some((k, _)), _) => Error::invalid(
            Reason::NotHeld,
            format!("{id} holds {file} through its claim {k}, not on its own: release that claim, or narrow it"),
        )
        .with_hint(format!(
            "`conductor release --instance {id} {}` releases all of {k}; to narrow it, release it and then `conductor claim --instance {id}` only the files you keep",
            quote(k)
        )),
        (None, Some((k, h))) => Error::invalid(
            Reason::NotHeld,
            format!("{id} does not hold {file}: {h} holds it through {k}"),
        )
        .with_hint(format!(
            "`conductor release --instance {id} --force {}` takes {h}'s claim away (logged)",
            quote(k)
        )),
        (None, None) => Error::invalid(
            Reason::NotHeld,
            format!("{id} does not hold {file} (nobody does)"),
        )
        .with_hint("`conductor status` lists what each instance holds"),
    }
}

fn drop_claim(st: &mut State, holder: &str, file: &str) {
    st.global_claims.remove(file);
    if let Some(h) = st.instance_mut(holder) {
        h.files_claimed.retain(|f| f != file);
        h.claim_tokens.remove(file);
    }
}

/// What `conductor check --token N PATH` found: whether `token` is the current grant of a
/// claim covering `key`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenCheck {
    pub current: bool,
    /// The claims covering the path now: (key, holder, token).
    pub holders: Vec<(String, String, Option<u64>)>,
}

/// Is `token` the current grant of a claim that covers `key` (the key itself, a directory
/// above it, a glob that matches it)?
pub fn check_token(st: &State, key: &str, token: u64) -> TokenCheck {
    let globs: Vec<String> = claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    let holders: Vec<(String, String, Option<u64>)> =
        claims::overlapping(&st.global_claims, &globs, key)
            .into_iter()
            .map(|(k, h, _)| {
                let t = st.instance(h).and_then(|i| i.claim_tokens.get(k).copied());
                (k.to_string(), h.to_string(), t)
            })
            .collect();
    TokenCheck {
        current: holders.iter().any(|(_, _, t)| *t == Some(token)),
        holders,
    }
}

/// Give what waiters wait for once `freed` is released: every waiter whose key overlaps `freed`
/// is served in ticket order (first come, first served) when no other instance holds a key that
/// overlaps its own, in the same transaction that freed it.
fn handoff(st: &mut State, freed: &str, now: Timestamp, fx: &mut Vec<Effect>) {
    let mut heads: Vec<(u64, String, String)> = st
        .instances
        .iter()
        .flat_map(|i| {
            i.waiting_for
                .iter()
                .filter(|w| st.repos.overlap(&w.file, freed).conflicts())
                .map(|w| (w.ticket, i.id.clone(), w.file.clone()))
        })
        .collect();
    if heads.is_empty() {
        return;
    }
    heads.sort();
    for (_, next, file) in heads {
        let globs: Vec<String> = claims::glob_keys(&st.global_claims)
            .into_iter()
            .map(str::to_string)
            .collect();
        if !others_overlapping(st, &globs, &next, &file).is_empty() {
            continue;
        }
        grant(st, &next, &file, Some(()), fx);
        if let Some(me) = st.instance_mut(&next) {
            me.last_heartbeat = me.last_heartbeat.max(now);
        }
        event(
            st,
            fx,
            events::CLAIM_GRANTED,
            &next,
            None,
            json!({"files": [file], "via": "wait"}),
        );
    }
}

/// The place of `id` in the queue for `file` (1 = next), if it waits for it.
pub fn queue_position(st: &State, id: &str, file: &str) -> Option<usize> {
    let mine = st
        .instance(id)?
        .waiting_for
        .iter()
        .find(|w| w.file == file)?
        .ticket;
    Some(
        1 + st
            .instances
            .iter()
            .flat_map(|i| &i.waiting_for)
            .filter(|w| w.file == file && w.ticket < mine)
            .count(),
    )
}

/// Join the waiting queues of `files` (those `id` does not hold), first come, first served:
/// each entry gets a ticket above every ticket in the state. `pid` is the waiting process.
pub fn enqueue(
    st: &mut State,
    id: &str,
    files: &[String],
    pid: Option<u32>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<Vec<String>> {
    require(st, id)?;
    let mut ticket = st
        .instances
        .iter()
        .flat_map(|i| &i.waiting_for)
        .map(|w| w.ticket)
        .max()
        .unwrap_or(0);
    let mut queued = Vec::new();
    for file in files {
        let held_by_me = st.global_claims.get(file).map(String::as_str) == Some(id);
        let me = st.instance_mut(id).expect("checked above");
        if held_by_me || me.waiting_for.iter().any(|w| &w.file == file) {
            continue;
        }
        ticket += 1;
        me.waiting_for.push(Waiting {
            file: file.clone(),
            ticket,
            since: now,
            pid,
        });
        queued.push(file.clone());
    }
    if !queued.is_empty() {
        let positions: Vec<usize> = queued
            .iter()
            .map(|f| queue_position(st, id, f).unwrap_or(0))
            .collect();
        event(
            st,
            fx,
            events::CLAIM_QUEUED,
            id,
            None,
            json!({"files": queued, "positions": positions}),
        );
        st.updated_at = now;
    }
    Ok(queued)
}

/// Drop queue places whose waiting process is gone (a `claim --wait` that was killed), so
/// released files are not handed to an instance that no longer waits for them. `is_dead`
/// judges a waiting pid of an instance (only a pid of this host can be judged).
pub fn drop_dead_waiters(
    st: &mut State,
    is_dead: &dyn Fn(&Instance, u32) -> bool,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) {
    let mut dropped: Vec<(String, Vec<String>)> = Vec::new();
    for inst in &mut st.instances {
        let gone: Vec<String> = inst
            .waiting_for
            .iter()
            .filter(|w| w.pid.is_some_and(|p| is_dead(inst, p)))
            .map(|w| w.file.clone())
            .collect();
        if !gone.is_empty() {
            inst.waiting_for.retain(|w| !gone.contains(&w.file));
            // The conflict was the waiter's: it does not outlive it.
            inst.pending_conflicts.retain(|p| !gone.contains(&p.file));
            dropped.push((inst.id.clone(), gone));
        }
    }
    for (id, files) in dropped {
        event(
            st,
            fx,
            events::CLAIM_DEQUEUED,
            &id,
            None,
            json!({"files": files, "reason": "waiting process is gone"}),
        );
        st.updated_at = now;
    }
}

/// Leave the waiting queues of `files` (a waiter that gave up). Files already handed over stay.
pub fn dequeue(
    st: &mut State,
    id: &str,
    files: &[String],
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<Vec<String>> {
    let me = require(st, id)?;
    let before: Vec<String> = me.waiting_for.iter().map(|w| w.file.clone()).collect();
    me.waiting_for.retain(|w| !files.contains(&w.file));
    let left: Vec<String> = before.into_iter().filter(|f| files.contains(f)).collect();
    if !left.is_empty() {
        event(
            st,
            fx,
            events::CLAIM_DEQUEUED,
            id,
            None,
            json!({"files": left}),
        );
        st.updated_at = now;
    }
    Ok(left)
}

/// Remove an instance: release its claims, write its history line, forget its warnings.
fn retire(
    st: &mut State,
    id: &str,
    outcome: Outcome,
    files_modified: Option<Vec<String>>,
    notes: Option<String>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<(Instance, Vec<String>)> {
    let pos = st
        .instances
        .iter()
        .position(|i| i.id == id)
        .ok_or_else(|| Error::UnknownInstance(id.to_string()))?;
    let inst = st.instances.remove(pos);
    let mut released = Vec::new();
    for f in &inst.files_claimed {
        if st.global_claims.get(f).map(String::as_str) == Some(id) {
            st.global_claims.remove(f);
            log(
                fx,
                LogKind::Release,
                format!("{id} released {f} ({})", outcome.as_str()),
            );
            released.push(f.clone());
        }
    }
    st.global_claims.retain(|_, h| h != id);
    st.drift_warnings.retain(|w| w.instance_id != id);
    let ev = |event_type, payload| {
        Effect::Event(NewEvent {
            event_type,
            actor: Some(id.to_string()),
            target: None,
            project: Some(inst.project.clone()),
            payload,
        })
    };
    if !released.is_empty() {
        fx.push(ev(
            events::CLAIM_RELEASED,
            json!({"files": released, "reason": outcome.as_str()}),
        ));
    }
    let kind = if outcome == Outcome::Orphaned {
        events::INSTANCE_ORPHANED
    } else {
        events::INSTANCE_DONE
    };
    fx.push(ev(
        kind,
        json!({"outcome": outcome.as_str(), "task": inst.task, "notes": notes}),
    ));
    for f in &released {
        handoff(st, f, now, fx);
    }
    fx.push(Effect::History(HistoryEntry {
        id: inst.id.clone(),
        project: inst.project.clone(),
        task: inst.task.clone(),
        priority: inst.priority,
        started_at: inst.started_at,
        completed_at: now,
        outcome,
        duration_minutes: Some(inst.started_at.minutes_until(now)),
        files_modified: Some(files_modified.unwrap_or_else(|| inst.files_claimed.to_vec())),
        notes,
    }));
    st.updated_at = now;
    Ok((inst, released))
}

/// Finish `id`: history line, all claims released, instance removed. `files_modified` defaults
/// to the files the instance held.
pub fn done(
    st: &mut State,
    id: &str,
    outcome: Outcome,
    files_modified: Option<Vec<String>>,
    notes: Option<String>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<Vec<String>> {
    if outcome == Outcome::Orphaned {
        return Err(Error::invalid(
            Reason::InvalidOutcome,
            "outcome `orphaned` is recorded by cleanup, not by done",
        ));
    }
    Ok(retire(st, id, outcome, files_modified, notes, now, fx)?.1)
}

/// Record that `id` is alive.
pub fn heartbeat(
    st: &mut State,
    id: &str,
    pid: Option<u32>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> Result<()> {
    let me = require(st, id)?;
    me.last_heartbeat = now;
    if pid.is_some() {
        me.pid = pid;
    }
    st.updated_at = now;
    event(
        st,
        fx,
        events::INSTANCE_HEARTBEAT,
        id,
        None,
        json!({"at": now}),
    );
    Ok(())
}

/// One instance removed by cleanup, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Orphan {
    pub id: String,
    pub why: String,
}

/// Retire orphans: no heartbeat for `max_age` minutes, or a process known to be gone. With
/// `only`, retire that one instance whatever its age (a human's explicit request).
pub fn cleanup(
    st: &mut State,
    max_age: u64,
    only: Option<&str>,
    now: Timestamp,
    live: &dyn Liveness,
    fx: &mut Vec<Effect>,
) -> Result<Vec<Orphan>> {
    let targets: Vec<Orphan> = match only {
        Some(id) => {
            let inst = st
                .instance(id)
                .ok_or_else(|| Error::UnknownInstance(id.to_string()))?;
            vec![Orphan {
                id: inst.id.clone(),
                why: "cleaned up by request".into(),
            }]
        }
        None => st
            .instances
            .iter()
            .filter_map(|i| {
                let age = i.last_heartbeat.minutes_until(now);
                if heartbeat_expired(i, now, max_age) {
                    Some(Orphan {
                        id: i.id.clone(),
                        why: format!("no heartbeat for {age} minutes"),
                    })
                } else if live.process_gone(i) {
                    Some(Orphan {
                        id: i.id.clone(),
                        why: format!(
                            "process {} on {} is gone",
                            i.pid.unwrap_or(0),
                            i.host.as_deref().unwrap_or("?")
                        ),
                    })
                } else {
                    None
                }
            })
            .collect(),
    };
    for o in &targets {
        retire(
            st,
            &o.id,
            Outcome::Orphaned,
            None,
            Some(o.why.clone()),
            now,
            fx,
        )?;
    }
    Ok(targets)
}

/// An unresolved conflict between two live instances, as `status` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct LiveConflict {
    pub file: String,
    pub requested_by: String,
    pub held_by: String,
    pub holder_task: String,
    pub since: Timestamp,
}

/// The `summary` of the status output.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    pub active_count: usize,
    pub total_files_claimed: usize,
    pub oldest_instance_age_minutes: u64,
}

/// Refused claims whose holder still holds the file (or a key that overlaps it).
pub fn live_conflicts(st: &State) -> Vec<LiveConflict> {
    let mut out = Vec::new();
    let globs: Vec<String> = claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    for inst in &st.instances {
        for p in &inst.pending_conflicts {
            if st.global_claims.get(&p.file) == Some(&inst.id) {
                continue;
            }
            let others = others_overlapping(st, &globs, &inst.id, &p.file);
            let holder = others
                .iter()
                .find(|(_, h, _)| *h == p.held_by)
                .or(others.first())
                .and_then(|(_, h, _)| st.instance(h));
            if let Some(h) = holder {
                out.push(LiveConflict {
                    file: p.file.clone(),
                    requested_by: inst.id.clone(),
                    held_by: h.id.clone(),
                    holder_task: h.task.clone(),
                    since: p.since,
                });
            }
        }
    }
    out
}

/// The status summary.
pub fn summary(st: &State, now: Timestamp) -> Summary {
    Summary {
        active_count: st.instances.len(),
        total_files_claimed: st.global_claims.len(),
        oldest_instance_age_minutes: st
            .instances
            .iter()
            .map(|i| i.started_at.minutes_until(now))
            .max()
            .unwrap_or(0),
    }
}

/// Decide which live instance a command acts on: the explicit id, else the one instance whose
/// working directory contains `cwd` on this host (`host`: instances that recorded another host
/// run on another machine, whose directories are not ours). Never guesses between several.
/// An instance found only by its directory is acted on only when `owned` says it is the
/// caller's (started from its terminal, or owned by one of its processes): otherwise the
/// candidates are listed with the `--instance` to pass.
pub fn resolve_instance(
    st: &State,
    explicit: Option<&str>,
    cwd: &Path,
    host: Option<&str>,
    owned: &dyn Fn(&Instance) -> bool,
) -> Result<String> {
    if let Some(id) = explicit {
        if !is_valid_instance_id(id) {
            return Err(Error::invalid(
                Reason::InvalidInstanceId,
                format!(
                    "`{}` is not an instance id (expected {{itm|cur|vsc|web|cow}}-{{6 hex digits}}, like itm-a1b2c3)",
                    printable(id)
                ),
            ));
        }
        return st
            .instance(id)
            .map(|i| i.id.clone())
            .ok_or_else(|| Error::UnknownInstance(id.to_string()));
    }
    let matching: Vec<&Instance> = st
        .instances
        .iter()
        .filter(|i| cwd.starts_with(Path::new(&i.working_directory)))
        .filter(|i| match (i.host.as_deref(), host) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => true,
        })
        .collect();
    let list = |v: &[&Instance]| {
        v.iter()
            // Tasks are free text: escape newlines and terminal controls to keep one line.
            .map(|i| format!("{} ({})", i.id, printable(&i.task)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mine: Vec<&Instance> = matching.iter().copied().filter(|i| owned(i)).collect();
    match (matching.as_slice(), mine.as_slice()) {
        (_, [one]) => Ok(one.id.clone()),
        ([], _) => {
            let all: Vec<&Instance> = st.instances.iter().collect();
            let live = if all.is_empty() {
                "there are no live instances".to_string()
            } else {
                format!("live: {}", list(&all))
            };
            Err(Error::AmbiguousInstance {
                message: format!(
                    "no live instance works in {}; pass --instance ID or set CONDUCTOR_INSTANCE_ID ({live})",
                    cwd.display()
                ),
            })
        }
        (others, []) => {
            let hint = match others {
                [one] => format!("pass --instance {} to act on it anyway", one.id),
                _ => "pass --instance ID to act on one of them".to_string(),
            };
            Err(Error::AmbiguousInstance {
                message: format!(
                    "no instance of yours works in {}: {} {} started from another terminal or process; {hint}",
                    cwd.display(),
                    list(others),
                    if others.len() == 1 { "was" } else { "were" },
                ),
            })
        }
        (_, many) => Err(Error::AmbiguousInstance {
            message: format!(
                "{} live instances work in {}: {}; pass --instance ID or set CONDUCTOR_INSTANCE_ID",
                many.len(),
                cwd.display(),
                list(many)
            ),
        }),
    }
}

#[cfg(test)]
mod claim_tests {
    use super::*;
    use crate::protocol::codec;

    fn now() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    fn two() -> (State, String, String) {
        let mut st = State::empty(now());
        let mut fx = Vec::new();
        let mut n = 0;
        let mut ids = Vec::new();
        for t in ["a", "b"] {
            let new = NewInstance {
                source: Source::Web,
                project: "p".into(),
                task: t.into(),
                priority: Priority::P1,
                working_directory: "/w".into(),
                override_reason: None,
                pid: None,
                host: None,
                session_id: None,
            };
            ids.push(start(
                &mut st,
                new,
                None,
                || {
                    n += 1;
                    format!("{n:06x}")
                },
                now(),
                &mut fx,
            ));
        }
        (st, ids.remove(0), ids.remove(0))
    }

    fn c(st: &mut State, id: &str, keys: &[&str], force: Option<&str>) -> ClaimOutcome {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        claim(st, id, &keys, force, now(), &AssumeAlive, &mut Vec::new()).unwrap()
    }

    #[test]
    fn a_directory_refuses_a_file_inside_and_the_other_way_round() {
        let (mut st, a, b) = two();
        assert_eq!(c(&mut st, &a, &["/w/src/"], None).claimed, ["/w/src/"]);
        let out = c(&mut st, &b, &["/w/src/deep/x.rs", "/w/lib.rs"], None);
        assert_eq!(out.claimed, ["/w/lib.rs"]);
        assert_eq!(out.conflicts.len(), 1);
        assert_eq!(out.conflicts[0].held_by, a);
        assert_eq!(out.conflicts[0].held_claim.as_deref(), Some("/w/src/"));
        // A directory holding someone's file.
        let out = c(&mut st, &a, &["/w/"], None);
        assert!(out.claimed.is_empty());
        assert_eq!(out.conflicts[0].held_claim.as_deref(), Some("/w/lib.rs"));
        assert_eq!(live_conflicts(&st).len(), 2);
        // The holder itself may claim inside its own directory.
        assert_eq!(
            c(&mut st, &a, &["/w/src/a.rs"], None).claimed,
            ["/w/src/a.rs"]
        );
    }

    #[test]
    fn overlapping_globs_conflict_and_disjoint_ones_do_not() {
        let (mut st, a, b) = two();
        c(&mut st, &a, &["/w/src/**/*.rs"], None);
        assert_eq!(c(&mut st, &b, &["/w/src/*.rs"], None).conflicts.len(), 1);
        assert_eq!(c(&mut st, &b, &["/w/src/a.rs"], None).conflicts.len(), 1);
        assert_eq!(c(&mut st, &b, &["/w/src/x/"], None).conflicts.len(), 1);
        assert_eq!(c(&mut st, &b, &["/w/src/**/*.ts"], None).claimed.len(), 1);
        assert_eq!(c(&mut st, &b, &["/w/src/a.ts"], None).claimed.len(), 1);
    }

    #[test]
    fn force_takes_every_overlapping_claim_whole() {
        let (mut st, a, b) = two();
        c(
            &mut st,
            &a,
            &["/w/src/a.rs", "/w/src/x/**", "/w/other.rs"],
            None,
        );
        let mut fx = Vec::new();
        let out = claim(
            &mut st,
            &b,
            &["/w/src/".into()],
            Some("taking over"),
            now(),
            &AssumeAlive,
            &mut fx,
        )
        .unwrap();
        assert_eq!(out.forced.len(), 2);
        assert_eq!(st.global_claims.get("/w/src/"), Some(&b));
        assert!(!st.global_claims.contains_key("/w/src/a.rs"));
        assert!(!st.global_claims.contains_key("/w/src/x/**"));
        assert_eq!(st.instance(&a).unwrap().files_claimed, ["/w/other.rs"]);
        assert!(codec::check_consistency(&st).is_ok());
        let forced = fx
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Effect::Log {
                        kind: LogKind::Force,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(forced, 2);
    }

    #[test]
    fn a_waiter_for_a_file_gets_it_when_the_directory_is_released() {
        let (mut st, a, b) = two();
        c(&mut st, &a, &["/w/src/"], None);
        let f = vec!["/w/src/a.rs".to_string()];
        assert_eq!(c(&mut st, &b, &["/w/src/a.rs"], None).conflicts.len(), 1);
        enqueue(&mut st, &b, &f, Some(1), now(), &mut Vec::new()).unwrap();
        release(
            &mut st,
            &a,
            &Which::All,
            false,
            None,
            now(),
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(st.global_claims.get("/w/src/a.rs"), Some(&b));
        assert!(live_conflicts(&st).is_empty());
    }

    #[test]
    fn a_dead_waiter_leaves_no_conflict_behind() {
        let (mut st, a, b) = two();
        c(&mut st, &a, &["/w/f"], None);
        let f = vec!["/w/f".to_string()];
        c(&mut st, &b, &["/w/f"], None);
        enqueue(&mut st, &b, &f, Some(4242), now(), &mut Vec::new()).unwrap();
        assert_eq!(live_conflicts(&st).len(), 1);
        drop_dead_waiters(&mut st, &|_, pid| pid == 4242, now(), &mut Vec::new());
        assert!(live_conflicts(&st).is_empty());
        assert!(st.instance(&b).unwrap().waiting_for.is_empty());
    }
}
