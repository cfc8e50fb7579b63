//! The protocol's operations as every face calls them: a typed request in, a typed outcome out,
//! one transaction each ([`super::transact`]). The CLI, the hooks, the MCP and HTTP servers and
//! the workflow supervisor all call these; none of them prints.
//!
//! The acting instance is resolved inside the transaction, on the state read under the lock:
//! the request's `instance_id`, else `CONDUCTOR_INSTANCE_ID`, else the one instance working in
//! the caller's directory ([`Caller::cwd`]). Paths are normalized against that instance.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::gate::{self, GateInputs, Verdict};
use super::local::{self, PathNormalizer, ProcessTable, waiter_is_dead};
use super::ops::{self, ClaimOutcome, DEFAULT_MAX_AGE_MINUTES, Effect, NewInstance, Orphan, Which};
use super::request::{
    ClaimRequest, CleanupRequest, DoneRequest, HeartbeatRequest, ReleaseRequest, StartRequest,
};
use super::{Outcome, ProjectConfig, State};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::schema::Schema;
use crate::store::Store;
use crate::time::Timestamp;

/// Who is asking: where they stand (`None`: the current directory is gone).
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub cwd: Option<PathBuf>,
}

impl Caller {
    /// The calling process: its current directory, symlinks resolved.
    pub fn this_process() -> Caller {
        Caller {
            cwd: crate::host::current_dir().ok(),
        }
    }
}

/// What `start` did.
#[derive(Clone, Debug, PartialEq)]
pub enum StartOutcome {
    /// Registered (or, in a hooked session, retasked) `instance_id`; `drift` when the gate was
    /// overridden.
    Started {
        instance_id: String,
        drift: Option<String>,
    },
    /// The priority gate refused the task (a `gate.blocked` event was written).
    Blocked {
        message: String,
        options: Vec<String>,
    },
}

/// What `done` did.
#[derive(Clone, Debug, PartialEq)]
pub struct DoneOutcome {
    pub instance_id: String,
    pub outcome: Outcome,
    /// The files it held, now released.
    pub released: Vec<String>,
    /// The worktree `start --worktree` made for it: removed, or kept and why.
    pub worktree: Option<TreeFate>,
    /// Its branch's files, reserved until the branch lands ([`super::landing`]).
    pub landing: Option<super::landing::Landing>,
}

/// What became of a session's own worktree at `done`.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeFate {
    /// Its branch was merged or had no changes: the worktree and the branch were removed.
    Removed { path: String, branch: String },
    /// Kept: `ahead` commits not in `base`, `dirty` uncommitted files; or `why` it could not be
    /// removed.
    Kept {
        path: String,
        branch: String,
        base: Option<String>,
        ahead: usize,
        dirty: usize,
        why: Option<String>,
    },
}

/// Register a task after the priority gate.
pub fn start(store: &Store, now: Timestamp, req: StartRequest) -> Result<StartOutcome> {
    start_in(store, now, req, None).map(|(o, _)| o)
}

/// A worktree `start --worktree` made for the session.
#[derive(Clone, Debug, PartialEq)]
pub struct MadeWorktree {
    /// Its directory (absolute, symlinks resolved): the session's working directory.
    pub path: String,
    pub branch: String,
}

/// [`start`], in a new git worktree and branch when `worktree` is `Some(name)` (`None` inside:
/// a generated name): see [`super::session_tree`]. Every check is made before anything is
/// written; a session that is not registered (the gate, an error) takes its worktree back.
pub fn start_in(
    store: &Store,
    now: Timestamp,
    mut req: StartRequest,
    worktree: Option<Option<&str>>,
) -> Result<(StartOutcome, Option<MadeWorktree>)> {
    let mut dir = working_directory(req.working_directory.as_deref().map(Path::new))?;
    let plan = match worktree {
        Some(name) => Some(super::session_tree::plan(Path::new(&dir), name)?),
        None => None,
    };
    let drift = match gate(store, &dir, &req.task, req.priority, &req.override_reason)? {
        Gated::Pass { drift } => drift,
        Gated::Blocked { message, options } => {
            let ev = crate::store::event::NewEvent {
                event_type: super::events::GATE_BLOCKED,
                actor: None,
                target: None,
                project: Some(req.project.clone()),
                payload: json!({"task": req.task, "priority": req.priority, "reason": message}),
            };
            store.append_events(now, vec![ev])?;
            return Ok((StartOutcome::Blocked { message, options }, None));
        }
    };
    let made = match &plan {
        Some(p) => {
            let path = super::session_tree::create(p)?;
            dir = path.to_string_lossy().into_owned();
            req.working_directory = Some(dir.clone());
            Some(MadeWorktree {
                path: dir.clone(),
                branch: p.branch.clone(),
            })
        }
        None => None,
    };
    let started = start_registered(store, now, req, dir, drift, plan.as_ref(), made.as_ref());
    if let (Err(_), Some(p), Some(m)) = (&started, &plan, &made) {
        super::session_tree::undo(p, Path::new(&m.path));
    }
    Ok((started?, made))
}

/// Register the task that passed the gate (in the worktree `made` from `plan`, if any).
fn start_registered(
    store: &Store,
    now: Timestamp,
    req: StartRequest,
    dir: String,
    drift: Option<String>,
    plan: Option<&super::session_tree::Plan>,
    made: Option<&MadeWorktree>,
) -> Result<StartOutcome> {
    let source = req
        .source
        .unwrap_or_else(|| local::detect_source(|k| std::env::var(k).ok()));
    let new = NewInstance {
        source,
        project: req.project,
        task: req.task,
        priority: req.priority,
        working_directory: dir,
        override_reason: req.override_reason,
        pid: req.owner_pid,
        host: crate::host::hostname(),
        session_id: req.session_id,
    };
    let recorded = drift.clone();
    // In a Claude Code session its hook already registered an instance and exported its id:
    // `/conductor start` then gives that instance the task rather than registering a second one.
    let session_instance = std::env::var("CONDUCTOR_INSTANCE_ID")
        .ok()
        .filter(|s| !s.is_empty());
    let instance_id = super::transact_tx(store, now, |st, fx, tx| {
        // A new instance, in this terminal's session.
        let register = |st: &mut State, fx: &mut _| {
            let id = ops::start(
                st,
                new.clone(),
                recorded.clone(),
                crate::host::random_hex6,
                now,
                fx,
            );
            if let Some(me) = st.instance_mut(&id) {
                me.terminal_session = crate::host::session_id();
            }
            id
        };
        if let (Some(p), Some(m)) = (plan, made) {
            // A new worktree is a new session's, never a hooked session's retask.
            let id = register(st, fx);
            let mut doc: super::landing::LandingDoc = tx.read()?;
            doc.created.push(super::landing::Created {
                instance_id: id.clone(),
                worktree: m.path.clone(),
                branch: m.branch.clone(),
                repo: p.repo.clone(),
                created_at: now,
            });
            tx.write(&doc)?;
            return Ok(id);
        }
        if let Some(id) = session_instance.clone()
            && st.instance(&id).is_some_and(|i| i.session_id.is_some())
        {
            ops::retask(st, &id, new.clone(), recorded.clone(), now, fx)?;
            return Ok(id);
        }
        Ok(register(st, fx))
    })?;
    Ok(StartOutcome::Started { instance_id, drift })
}

/// What the priority gate decided for a task.
enum Gated {
    /// Go ahead; `drift` when the gate was overridden.
    Pass { drift: Option<String> },
    /// Refused (nothing written).
    Blocked {
        message: String,
        options: Vec<String>,
    },
}

/// Run the priority gate for `task` worked on in `dir`.
fn gate(
    store: &Store,
    dir: &str,
    task: &str,
    priority: super::Priority,
    override_reason: &Option<String>,
) -> Result<Gated> {
    let inputs = gate_inputs(store, Some(dir))?;
    Ok(match gate::evaluate(task, priority, &inputs) {
        Verdict::Pass => Gated::Pass { drift: None },
        Verdict::Blocked {
            message,
            options,
            drift,
        } => match override_reason {
            None => Gated::Blocked { message, options },
            Some(_) => Gated::Pass { drift: Some(drift) },
        },
    })
}

/// A face's own instance (the MCP server's session), resolved on the state read under the
/// lock and registered there when it has none yet.
pub type Own<'a> = &'a dyn Fn(&mut State, Timestamp, &mut Vec<Effect>) -> Result<String>;

/// What a face asks of [`retask_own`].
#[derive(Clone, Debug)]
pub struct RetaskRequest {
    pub task: String,
    /// `None`: the instance's project stays.
    pub project: Option<String>,
    pub priority: super::Priority,
    pub override_reason: Option<String>,
}

/// Give a face's own instance (registered if need be) a task, after the priority gate run for
/// the current directory. A refused task writes nothing.
pub fn retask_own(
    store: &Store,
    now: Timestamp,
    req: &RetaskRequest,
    own: Own,
) -> Result<StartOutcome> {
    let dir = working_directory(None)?;
    let drift = match gate(store, &dir, &req.task, req.priority, &req.override_reason)? {
        Gated::Pass { drift } => drift,
        Gated::Blocked { message, options } => {
            return Ok(StartOutcome::Blocked { message, options });
        }
    };
    let instance_id = super::transact(store, now, |st, fx| {
        let id = own(st, now, fx)?;
        let me = st.instance(&id).expect("resolved").clone();
        let new = NewInstance {
            source: me.source,
            project: req.project.clone().unwrap_or(me.project.clone()),
            task: req.task.clone(),
            priority: req.priority,
            working_directory: me.working_directory.clone(),
            override_reason: req.override_reason.clone(),
            pid: me.pid,
            host: me.host.clone(),
            session_id: me.session_id.clone(),
        };
        ops::retask(st, &id, new, drift.clone(), now, fx)?;
        Ok(id)
    })?;
    Ok(StartOutcome::Started { instance_id, drift })
}

/// Finish instance `id` as abandoned (its owner went away), releasing its claims; nothing when
/// it is gone already.
pub fn abandon(store: &Store, now: Timestamp, id: &str, notes: &str) -> Result<()> {
    super::transact(store, now, |st, fx| {
        if st.instance(id).is_none() {
            return Ok(());
        }
        ops::drop_dead_waiters(st, &waiter_is_dead, now, fx);
        ops::done(
            st,
            id,
            Outcome::Abandoned,
            None,
            Some(notes.to_string()),
            now,
            fx,
        )
        .map(|_| ())
    })
}

/// Claim files for the acting instance (a conflict is an outcome, not an error). `admit` may
/// refuse the acting instance any claim ([`ops::Admission`]).
pub fn claim(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &ClaimRequest,
    admit: &dyn ops::Admission,
) -> Result<ClaimOutcome> {
    claim_as(store, now, caller, req, admit).map(|(_, outcome)| outcome)
}

/// [`claim`], also returning the acting instance (for a next step that names it).
pub fn claim_as(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &ClaimRequest,
    admit: &dyn ops::Admission,
) -> Result<(String, ClaimOutcome)> {
    let config = crate::config::read(store)?;
    let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
    let block = blocks_landing(&config, req.force.as_deref());
    let (id, mut outcome, found) = super::transact_claims(store, now, |st, fx, tx| {
        let (id, mut paths) =
            resolve_with_paths(store, caller, st, &req.instance_id, &[&req.files])?;
        let warnings = admitted(st, &id, admit)?;
        let files = paths.remove(0);
        super::paged::load_claims(tx, st, &files)?;
        // A waiter whose process is gone takes its pending conflict with it.
        ops::drop_dead_waiters(st, &waiter_is_dead, now, fx);
        let (files, found) = landing_in_tx(store, tx, st, &files, block)?;
        let mut outcome = ops::claim(st, &id, &files, req.force.as_deref(), now, &live, fx)?;
        outcome.warnings.extend(warnings);
        Ok((id, outcome, found))
    })?;
    settle_claim(store, now, caller, &id, &mut outcome, found, &live)?;
    Ok((id, outcome))
}

/// Ask `admit` whether instance `id` may claim at all (under the lock, before anything is
/// changed): its warnings, or the refusal.
fn admitted(st: &State, id: &str, admit: &dyn ops::Admission) -> Result<Vec<String>> {
    match st.instance(id) {
        Some(me) => admit.admit(me),
        None => Ok(Vec::new()),
    }
}

/// True when a landing file refuses a claim: `enforce = "block-foreign"`, and no `--force`.
fn blocks_landing(config: &crate::config::Config, force: Option<&str>) -> bool {
    config.enforce == Some(crate::config::Enforce::BlockForeign) && force.is_none()
}

/// The landing entries a claim's files hit, as the transaction saw them.
#[derive(Debug, Default)]
struct LandingFound {
    entries: Vec<super::landing::Landing>,
    /// The hits, each with its entry's index in `entries`.
    hits: Vec<(usize, super::landing::Hit)>,
}

/// Inside a claim's transaction: which of `files` a landing branch of another worktree holds
/// (`landing.json`, one read; no git). When `block`, those are left out of the files to claim
/// (returned first) and marked refused. A shared store keys claims by repository, not by
/// worktree path: landing is not kept there (nothing is read).
fn landing_in_tx(
    store: &Store,
    tx: &mut crate::store::Tx,
    st: &State,
    files: &[String],
    block: bool,
) -> Result<(Vec<String>, LandingFound)> {
    if store.shared_by_hosts() {
        return Ok((files.to_vec(), LandingFound::default()));
    }
    let doc: super::landing::LandingDoc = tx.read()?;
    let mut hits = super::landing::hits(&doc, &st.repos, files);
    if hits.is_empty() {
        return Ok((files.to_vec(), LandingFound::default()));
    }
    for (_, h) in &mut hits {
        h.refused = block;
    }
    let keep: Vec<String> = files
        .iter()
        .filter(|f| !block || !hits.iter().any(|(_, h)| &h.file == *f))
        .cloned()
        .collect();
    Ok((
        keep,
        LandingFound {
            entries: doc.landing,
            hits,
        },
    ))
}

/// After a claim's transaction, outside the lock: ask git whether the branches its files hit
/// have landed (only those; rare), drop the ones that did (with their history lines), claim the
/// files a landed branch was refusing, and report the rest in `outcome.landing`.
fn settle_claim(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    id: &str,
    outcome: &mut ops::ClaimOutcome,
    found: LandingFound,
    live: &ProcessTable,
) -> Result<()> {
    if found.hits.is_empty() {
        return Ok(());
    }
    let gone = settle_landing(store, now, &found)?;
    let mut freed = Vec::new();
    for (i, h) in found.hits {
        if gone.contains(&i) {
            if h.refused {
                freed.push(h.file);
            }
        } else {
            outcome.landing.push(h);
        }
    }
    if freed.is_empty() {
        return Ok(());
    }
    let more = super::transact(store, now, |st, fx| {
        let (_, mut paths) =
            resolve_with_paths(store, caller, st, &Some(id.to_string()), &[&freed])?;
        ops::claim(st, id, &paths.remove(0), None, now, live, fx)
    })?;
    outcome.claimed.extend(more.claimed);
    outcome.conflicts.extend(more.conflicts);
    outcome.tokens.extend(more.tokens);
    Ok(())
}

/// Ask git about each landing entry `found` hit (never under the lock); drop the ones that
/// landed from `landing.json`, writing their history lines. Returns their indexes.
fn settle_landing(store: &Store, now: Timestamp, found: &LandingFound) -> Result<Vec<usize>> {
    let mut used: Vec<usize> = found.hits.iter().map(|(i, _)| *i).collect();
    used.sort_unstable();
    used.dedup();
    let landed: Vec<(usize, super::session_tree::Landed)> = used
        .into_iter()
        .filter_map(|i| super::session_tree::landed(&found.entries[i]).map(|l| (i, l)))
        .collect();
    if landed.is_empty() {
        return Ok(Vec::new());
    }
    let entries: Vec<(super::landing::Landing, super::session_tree::Landed)> = landed
        .iter()
        .map(|(i, l)| (found.entries[*i].clone(), *l))
        .collect();
    drop_landed(store, now, &entries)?;
    Ok(landed.into_iter().map(|(i, _)| i).collect())
}

/// Remove landed branches from `landing.json`, each with a history line saying how it landed.
pub fn drop_landed(
    store: &Store,
    now: Timestamp,
    landed: &[(super::landing::Landing, super::session_tree::Landed)],
) -> Result<()> {
    super::transact_tx(store, now, |_, fx, tx| {
        let mut doc: super::landing::LandingDoc = tx.read()?;
        for (e, how) in landed {
            let same = |x: &super::landing::Landing| {
                x.repo == e.repo && x.branch == e.branch && x.instance_id == e.instance_id
            };
            if let Some(pos) = doc.landing.iter().position(same) {
                let cur = doc.landing.remove(pos);
                fx.push(Effect::History(super::landing::history(
                    &cur,
                    &cur.files,
                    &how.how(&cur.base),
                    now,
                )));
            }
        }
        tx.write_if_changed(&doc)?;
        Ok(())
    })
}

/// Which instance acts in [`release_as`] and [`done_as`].
#[derive(Clone, Copy)]
pub enum Acting<'a> {
    /// The request's `instance_id`, else `CONDUCTOR_INSTANCE_ID`, else the one instance working
    /// in the caller's directory (the CLI, the hooks).
    Request,
    /// The instance a face resolves on the state read under the lock (the MCP server's own
    /// identity); `Ok(None)`: it has none.
    Face(&'a dyn Fn(&State) -> Result<Option<String>>),
    /// A face's own instance, registered when it has none yet.
    Own(Own<'a>),
}

impl Acting<'_> {
    /// The instance to hand [`resolve_with_paths`], or `None` when a face has none.
    fn explicit(
        &self,
        st: &mut State,
        requested: &Option<String>,
        now: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<Option<Option<String>>> {
        Ok(match self {
            Acting::Request => Some(requested.clone()),
            Acting::Face(f) => f(st)?.map(Some),
            Acting::Own(f) => Some(Some(f(st, now, fx)?)),
        })
    }
}

/// How the first step of a claim treats held files ([`claim_step`]).
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// Refuse them (or take them over, logging `force`).
    Plain { force: Option<&'a str> },
    /// Join their first-come, first-served queues as process `pid` ([`claim_or_enqueue`]).
    Enqueue { pid: u32 },
}

/// What the first step of a claim did.
#[derive(Clone, Debug)]
pub struct Stepped {
    /// The acting instance.
    pub instance_id: String,
    /// The files, normalized against it.
    pub files: Vec<String>,
    pub outcome: ClaimOutcome,
    /// The state the claim decided on (to name holders and queue positions).
    pub state: State,
}

/// The first step of a claim that may wait ([`wait_for_claim`] is the second): resolve the
/// acting instance and its files and claim them, in one transaction. Dead waiters are left
/// for the next plain transaction.
#[allow(clippy::too_many_arguments)]
pub fn claim_step(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &ClaimRequest,
    step: Step,
    live: &ProcessTable,
    acting: Acting,
    admit: &dyn ops::Admission,
) -> Result<Stepped> {
    let block = match step {
        Step::Plain { force } => blocks_landing(&crate::config::read(store)?, force),
        // A waiting claim waits for holders, not for branches to land: a notice only.
        Step::Enqueue { .. } => false,
    };
    let (mut stepped, found) = super::transact_tx(store, now, |st, fx, tx| {
        let Some(explicit) = acting.explicit(st, &req.instance_id, now, fx)? else {
            return Err(Error::invalid(
                Reason::NoInstance,
                "this session has no conductor instance: nothing to claim for",
            ));
        };
        let (id, mut paths) = resolve_with_paths(store, caller, st, &explicit, &[&req.files])?;
        let warnings = admitted(st, &id, admit)?;
        let files = paths.remove(0);
        let (to_claim, found) = landing_in_tx(store, tx, st, &files, block)?;
        let mut outcome = match step {
            Step::Enqueue { pid } => claim_or_enqueue(st, &id, &to_claim, pid, now, live, fx)?,
            Step::Plain { force } => ops::claim(st, &id, &to_claim, force, now, live, fx)?,
        };
        outcome.warnings.extend(warnings);
        Ok((
            Stepped {
                instance_id: id,
                files,
                outcome,
                state: st.clone(),
            },
            found,
        ))
    })?;
    let id = stepped.instance_id.clone();
    settle_claim(store, now, caller, &id, &mut stepped.outcome, found, live)?;
    Ok(stepped)
}

/// A cancelled wait: `id` leaves the queues of `files` and forgets the conflicts the wait was
/// about, so nothing is handed to a call no one waits for. Returns the files it holds (those
/// already granted stay).
pub fn leave_wait(
    store: &Store,
    now: Timestamp,
    id: &str,
    files: &[String],
) -> Result<Vec<String>> {
    super::transact(store, now, |st, fx| {
        if st.instance(id).is_none() {
            return Ok(Vec::new());
        }
        ops::dequeue(st, id, files, now, fx)?;
        let me = st.instance_mut(id).expect("checked above");
        me.pending_conflicts.retain(|p| !files.contains(&p.file));
        Ok(me.files_claimed.to_vec())
    })
}

/// Release files (or all of them); returns the files released.
pub fn release(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &ReleaseRequest,
) -> Result<Vec<String>> {
    release_as(store, now, caller, req, Acting::Request)
}

/// [`release`] as `acting` (a face without an instance releases nothing).
pub fn release_as(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &ReleaseRequest,
    acting: Acting,
) -> Result<Vec<String>> {
    let listed = req.files.clone().unwrap_or_default();
    let force = req.force == Some(true);
    // A person's forced release also frees landing files (no instance needed for those).
    let freed = if force && !listed.is_empty() {
        release_landing(store, now, caller, &listed, req.reason.as_deref())?
    } else {
        Vec::new()
    };
    let all = req.all == Some(true);
    let released = super::transact_claims(store, now, |st, fx, tx| {
        let Some(explicit) = acting.explicit(st, &req.instance_id, now, fx)? else {
            return Ok(Vec::new());
        };
        let (id, mut paths) = resolve_with_paths(store, caller, st, &explicit, &[&listed])?;
        let which = if all {
            super::paged::load_all_claims(tx, st)?;
            Which::All
        } else {
            let files = paths.remove(0);
            super::paged::load_claims(tx, st, &files)?;
            Which::Files(files)
        };
        ops::drop_dead_waiters(st, &waiter_is_dead, now, fx);
        ops::release(st, &id, &which, force, req.reason.as_deref(), now, fx)
    });
    match released {
        Ok(mut r) => {
            r.extend(freed);
            Ok(r)
        }
        // Only landing files were meant: no instance needed to act for.
        Err(_) if !freed.is_empty() => Ok(freed),
        Err(e) => Err(e),
    }
}

/// `release --force --reason WHY PATH...`: take `paths` (resolved against the caller's
/// directory) out of the landing branches that hold them, with a history line each. Returns
/// the files freed, as paths in their branch's worktree.
fn release_landing(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    paths: &[String],
    why: Option<&str>,
) -> Result<Vec<String>> {
    use super::landing::{self, LandingDoc};
    let doc: LandingDoc = store.read_doc(now)?;
    if doc.landing.is_empty() {
        return Ok(Vec::new());
    }
    let cwd = match &caller.cwd {
        Some(c) => c.clone(),
        None => crate::host::current_dir()?,
    };
    let mut norm = PathNormalizer::new(cwd).with_repo_keys(store.shared_by_hosts());
    let keys = paths
        .iter()
        .map(|p| norm.normalize(p))
        .collect::<Result<Vec<_>>>()?;
    let repos = norm.worktrees().clone();
    if landing::release(&mut doc.clone(), &repos, &keys).is_empty() {
        return Ok(Vec::new());
    }
    let Some(why) = why else {
        return Err(Error::invalid(
            Reason::InvalidInput,
            "releasing landing files (a finished branch that has not landed yet) needs a reason; nothing was released",
        )
        .with_hint(format!(
            "say why: conductor release --force --reason \"WHY\" {}",
            paths.join(" ")
        )));
    };
    super::transact_tx(store, now, |_, fx, tx| {
        let mut doc: LandingDoc = tx.read()?;
        let freed = landing::release(&mut doc, &repos, &keys);
        let mut out = Vec::new();
        for (l, files) in &freed {
            fx.push(Effect::History(landing::history(
                l,
                files,
                &format!("released by hand: {why}"),
                now,
            )));
            fx.push(Effect::Log {
                kind: ops::LogKind::Release,
                text: format!(
                    "landing files of branch {} released by hand ({}): {why}",
                    l.branch,
                    files.join(", ")
                ),
            });
            out.extend(files.iter().map(|f| l.path(f)));
        }
        tx.write_if_changed(&doc)?;
        Ok(out)
    })
}

/// Finish the acting instance: history line, claims released (to waiters first), instance
/// removed.
pub fn done(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &DoneRequest,
) -> Result<DoneOutcome> {
    done_as(store, now, caller, req, Acting::Request)
}

/// [`done`] as `acting` (a face without an instance fails with `no_instance`).
pub fn done_as(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &DoneRequest,
    acting: Acting,
) -> Result<DoneOutcome> {
    let listed = req.files_modified.clone().unwrap_or_default();
    let outcome = req.outcome.unwrap_or(Outcome::Success);
    // Git first, never under the lock: what the finishing session leaves in its worktree.
    let base = crate::config::read(store)?.integration_branch;
    let pre = finishing_tree(store, now, caller, req, &acting, base.as_deref());
    let (instance_id, released, created, landing) = super::transact_tx(store, now, |st, fx, tx| {
        let Some(explicit) = acting.explicit(st, &req.instance_id, now, fx)? else {
            return Err(Error::invalid(
                Reason::NoInstance,
                "this session has no conductor instance: nothing to finish",
            ));
        };
        let (id, mut paths) = resolve_with_paths(store, caller, st, &explicit, &[&listed])?;
        let files_modified = req.files_modified.as_ref().map(|_| paths.remove(0));
        ops::drop_dead_waiters(st, &waiter_is_dead, now, fx);
        let me = st.instance(&id).cloned();
        let released = ops::done(st, &id, outcome, files_modified, req.notes.clone(), now, fx)?;
        let mut doc: super::landing::LandingDoc = tx.read()?;
        let created = doc
            .created
            .iter()
            .position(|c| c.instance_id == id)
            .map(|i| doc.created.remove(i));
        let finish = pre.as_ref().filter(|(pid, _)| *pid == id).map(|(_, f)| f);
        let landing = match (finish, me) {
            (Some(f), Some(me)) if !store.shared_by_hosts() => landing_of(f, &me, now),
            _ => None,
        };
        if let Some(l) = &landing {
            doc.landing
                .retain(|x| !(x.repo == l.repo && x.branch == l.branch));
            doc.landing.push(l.clone());
        }
        // A home that never used worktrees gets no landing.json.
        if created.is_some() || landing.is_some() {
            tx.write(&doc)?;
        }
        Ok((id, released, created, landing))
    })
    .map_err(|e| already_finished(store, req, e))?;
    // After the commit, outside the lock: remove the session's own worktree if it holds
    // nothing unlanded. `git worktree remove` (no --force) refuses a worktree with changes.
    let finish = pre.filter(|(pid, _)| *pid == instance_id).map(|(_, f)| f);
    let worktree = created.map(|c| match &finish {
        Some(f) if !f.unlanded() && f.base.is_some() => {
            match super::session_tree::remove(&c.repo, &c.worktree, &c.branch) {
                Ok(()) => TreeFate::Removed {
                    path: c.worktree,
                    branch: c.branch,
                },
                Err(why) => TreeFate::Kept {
                    path: c.worktree,
                    branch: c.branch,
                    base: f.base.clone(),
                    ahead: f.ahead,
                    dirty: f.dirty,
                    why: Some(why),
                },
            }
        }
        Some(f) => TreeFate::Kept {
            path: c.worktree,
            branch: c.branch,
            base: f.base.clone(),
            ahead: f.ahead,
            dirty: f.dirty,
            why: f.base.is_none().then(|| {
                "no integration branch (origin/HEAD, main, master or integration_branch in config.json) to compare it with".to_string()
            }),
        },
        None => TreeFate::Kept {
            path: c.worktree,
            branch: c.branch,
            base: None,
            ahead: 0,
            dirty: 0,
            why: Some("git could not tell what it holds".to_string()),
        },
    });
    Ok(DoneOutcome {
        instance_id,
        outcome,
        released,
        worktree,
        landing,
    })
}

/// The finishing instance (resolved on an unlocked read, as the transaction will) and what git
/// says of the worktree it works in; `None` outside a repository (no git is run then) or when
/// it cannot be told. The transaction uses it only if it resolves the same instance.
fn finishing_tree(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &DoneRequest,
    acting: &Acting,
    base: Option<&str>,
) -> Option<(String, super::session_tree::Finish)> {
    let mut st = super::read(store, now).ok()?;
    let explicit = match acting {
        Acting::Request => req.instance_id.clone(),
        Acting::Face(f) => Some(f(&st).ok()??),
        Acting::Own(_) => return None,
    };
    let (id, _) = resolve_with_paths(store, caller, &mut st, &explicit, &[]).ok()?;
    let wd = PathBuf::from(&st.instance(&id)?.working_directory);
    crate::host::repository_root(&wd)?;
    let f = super::session_tree::inspect(&wd, base)?;
    Some((id, f))
}

/// The landing entry of a session finishing in worktree `f`: its branch is not the
/// integration branch and changed files the integration branch does not have.
fn landing_of(
    f: &super::session_tree::Finish,
    me: &super::Instance,
    now: Timestamp,
) -> Option<super::landing::Landing> {
    if !f.on_side_branch() || !f.unlanded() || f.files.is_empty() {
        return None;
    }
    Some(super::landing::Landing {
        repo: f.repo.clone(),
        worktree: f.root.clone(),
        branch: f.branch.clone()?,
        base: f.base.clone()?,
        merge_base: f.merge_base.clone()?,
        instance_id: me.id.clone(),
        project: me.project.clone(),
        task: me.task.clone(),
        priority: me.priority,
        since: now,
        files: f.files.clone(),
    })
}

/// A `done` that found nothing to finish: when the instance it meant already finished (named
/// by the request, or remembered by the shell integration in `CONDUCTOR_FINISHED_ID` after the
/// previous `done`), say so by name instead of finishing someone else's.
fn already_finished(store: &Store, req: &DoneRequest, err: Error) -> Error {
    let meant = match &err {
        Error::UnknownInstance(id) => Some(id.clone()),
        Error::AmbiguousInstance { .. } if explicit_instance(&req.instance_id).is_none() => {
            std::env::var("CONDUCTOR_FINISHED_ID")
                .ok()
                .filter(|s| super::is_valid_instance_id(s))
        }
        _ => None,
    };
    let Some(h) = meant.and_then(|id| finished_entry(store, &id)) else {
        return err;
    };
    let mut message = format!(
        "{} already finished ({}, at {}); nothing was changed",
        h.id,
        h.outcome.as_str(),
        h.completed_at
    );
    if let Error::AmbiguousInstance { message: rest } = &err {
        message.push_str(&format!(" ({rest})"));
    }
    Error::invalid(Reason::AlreadyFinished, message)
}

/// The newest history line of instance `id`, if it finished.
fn finished_entry(store: &Store, id: &str) -> Option<super::HistoryEntry> {
    let mut found = None;
    let read = super::read_ledger(store, super::Ledger::History, |_, line| {
        if let crate::store::ledger::Line::Complete(text) = line
            && text.contains(id)
            && let Ok(h) = serde_json::from_str::<super::HistoryEntry>(&text)
            && h.id == id
            // A later line of its branch landing is not how it finished.
            && h.outcome != Outcome::Landed
        {
            found = Some(h);
        }
        Ok(true)
    });
    read.ok().and(found)
}

/// `check --token N PATH`: is `token` the current grant of a claim covering `path` (resolved
/// against the caller's directory, no instance needed)? Read without the lock: the answer is
/// as of one committed state.
pub fn check_token(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    path: &str,
    token: u64,
) -> Result<(String, ops::TokenCheck)> {
    let cwd = match &caller.cwd {
        Some(c) => c.clone(),
        None => crate::host::current_dir()?,
    };
    let mut norm = PathNormalizer::new(cwd).with_repo_keys(store.shared_by_hosts());
    let key = norm.normalize(path)?;
    let st = super::read(store, now)?;
    let found = ops::check_token(&st, &key, token);
    Ok((key, found))
}

/// Record that the acting instance is alive; returns its id.
pub fn heartbeat(
    store: &Store,
    now: Timestamp,
    caller: &Caller,
    req: &HeartbeatRequest,
) -> Result<String> {
    super::transact(store, now, |st, fx| {
        let (id, _) = resolve_with_paths(store, caller, st, &req.instance_id, &[])?;
        ops::heartbeat(st, &id, req.owner_pid, now, fx)?;
        Ok(id)
    })
}

/// Retire instances without a heartbeat for `max_age_minutes` (or whose owner is gone), or the
/// one named.
pub fn cleanup(store: &Store, now: Timestamp, req: &CleanupRequest) -> Result<Vec<Orphan>> {
    let max_age = match req.max_age_minutes {
        Some(m) => m,
        None => crate::config::read(store)?
            .default_max_age_minutes
            .unwrap_or(DEFAULT_MAX_AGE_MINUTES),
    };
    if let Some(id) = &req.instance_id
        && !super::is_valid_instance_id(id)
    {
        ops::resolve_instance(
            &super::read(store, now)?,
            Some(id),
            Path::new("/"),
            None,
            &|_| true,
        )?;
    }
    let live = ProcessTable::new();
    super::transact(store, now, |st, fx| {
        ops::drop_dead_waiters(st, &waiter_is_dead, now, fx);
        ops::cleanup(st, max_age, req.instance_id.as_deref(), now, &live, fx)
    })
}

/// The instance a request names, else `CONDUCTOR_INSTANCE_ID`.
fn explicit_instance(id: &Option<String>) -> Option<String> {
    id.clone().or_else(|| {
        std::env::var("CONDUCTOR_INSTANCE_ID")
            .ok()
            .filter(|s| !s.is_empty())
    })
}

/// Resolve the acting instance in `state` and normalize the given paths against it. Called
/// inside the transaction, on the state it read under the lock, so a write reads status.json
/// once. The git worktrees of the paths are recorded in [`State::repos`], so the operation
/// compares each path with the same path in the repository's other worktrees.
pub fn resolve_with_paths(
    store: &Store,
    caller: &Caller,
    state: &mut State,
    explicit: &Option<String>,
    paths: &[&[String]],
) -> Result<(String, Vec<Vec<String>>)> {
    let explicit = explicit_instance(explicit);
    // A vanished current directory only matters when it is needed to pick the instance.
    let cwd = match (&caller.cwd, &explicit) {
        (Some(c), _) => Some(c.clone()),
        // Needed to pick the instance: say why it is unusable.
        (None, None) => Some(crate::host::current_dir()?),
        (None, Some(_)) => None,
    };
    // Only a choice by directory asks whose instance it is (reading /proc only then).
    let lineage = match &explicit {
        None => local::Lineage::this_process(),
        Some(_) => local::Lineage::default(),
    };
    let id = ops::resolve_instance(
        state,
        explicit.as_deref(),
        cwd.as_deref().unwrap_or(Path::new("/")),
        crate::host::hostname().as_deref(),
        &|i| lineage.owns(i),
    )?;
    let inst = state.instance(&id).expect("just resolved");
    let wd = PathBuf::from(&inst.working_directory);
    let base = match &cwd {
        Some(c) => local::claim_base(c, &wd),
        None => wd.clone(),
    };
    let mut norm = PathNormalizer::new(base)
        .with_floor(&wd)
        .with_repo_keys(store.shared_by_hosts());
    let mut out = Vec::new();
    for list in paths {
        out.push(
            list.iter()
                .map(|p| norm.normalize(p))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    state.repos.merge(norm.worktrees());
    Ok((id, out))
}

/// An existing directory, absolute and with symlinks resolved, as a UTF-8 string.
pub fn working_directory(dir: Option<&Path>) -> Result<String> {
    let cwd = crate::host::current_dir();
    let raw = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => cwd?.join(d),
        None => cwd?,
    };
    let canon = std::fs::canonicalize(&raw).map_err(|e| {
        Error::invalid(
            Reason::InvalidDirectory,
            format!("working directory {} is not usable: {e}", raw.display()),
        )
    })?;
    if !canon.is_dir() {
        return Err(Error::invalid(
            Reason::InvalidDirectory,
            format!("working directory {} is not a directory", canon.display()),
        ));
    }
    canon.into_os_string().into_string().map_err(|_| {
        Error::invalid(
            Reason::InvalidDirectory,
            "the working directory's path is not UTF-8",
        )
    })
}

/// The project a session in `dir` works on when none is named: its repository's name, from
/// any directory inside it (`src/` is not a project), else the directory's.
pub fn project_of(dir: &str) -> String {
    crate::host::repository_root(Path::new(dir))
        .unwrap_or_else(|| Path::new(dir).to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
}

/// Gather what the priority gate looks at: sprint.json, the north-stars file, and the project's
/// priority source.
pub fn gate_inputs(store: &Store, working_directory: Option<&str>) -> Result<GateInputs> {
    let config = crate::config::read(store)?;
    let sprint = super::sprint(store)?;
    let ns_path = match &config.north_stars_path {
        Some(p) => expand_tilde(p),
        None => std::env::var_os("HOME")
            .map(|h| {
                PathBuf::from(h).join("Developer/digital-self/2-areas/personal/north-stars.md")
            })
            .unwrap_or_default(),
    };
    let north_stars = match std::fs::read_to_string(&ns_path) {
        Ok(text) => Some(gate::north_star_items(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read the north-stars file", &ns_path, e)),
    };
    let project_priorities = match working_directory {
        Some(dir) => project_priorities(Path::new(dir))?,
        None => None,
    };
    Ok(GateInputs {
        sprint,
        north_stars,
        north_stars_path: Some(ns_path.display().to_string()),
        project_priorities,
    })
}

fn expand_tilde(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => PathBuf::from(p),
    }
}

/// The task texts of a project's priority source (`.conductor/config.json` → `priority_source`,
/// `priority_field` like `tasks[].priority`): every string field of each item except the
/// priority itself.
fn project_priorities(dir: &Path) -> Result<Option<Vec<String>>> {
    let cfg_path = dir.join(".conductor/config.json");
    let Some(cfg) = crate::schema::read_doc::<ProjectConfig>(&cfg_path, Schema::ProjectConfig)?
    else {
        return Ok(None);
    };
    let Some(source) = cfg.priority_source else {
        return Ok(None);
    };
    let src_path = dir.join(&source);
    let Some(bytes) = crate::store::read_bytes(&src_path)? else {
        return Ok(None);
    };
    let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::corrupt(
            &src_path,
            format!("the project's priority source is not valid JSON ({e})"),
        )
    })?;
    let field = cfg
        .priority_field
        .unwrap_or_else(|| "tasks[].priority".into());
    let (array_key, prio_key) = field.split_once("[].").unwrap_or(("tasks", "priority"));
    let items = doc
        .pointer(&format!("/{}", array_key.replace('.', "/")))
        .and_then(|v| v.as_array());
    let texts = items
        .into_iter()
        .flatten()
        .map(|item| match item {
            serde_json::Value::Object(m) => m
                .iter()
                .filter(|(k, _)| k.as_str() != prio_key)
                .filter_map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            serde_json::Value::String(s) => s.clone(),
            _ => String::new(),
        })
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Some(texts))
}

/// How a claim that waits for held files ended ([`wait_for_claim`]).
#[derive(Clone, Debug)]
pub enum Waited {
    /// Every file is the instance's now (handed over by the releasing transaction).
    Claimed(ClaimOutcome),
    /// The deadline passed or the wait was stopped: the instance left the queues and the
    /// files were claimed again as a plain claim would now; `state` is what that claim decided
    /// on (to name the holders) at `now`.
    GaveUp {
        outcome: ClaimOutcome,
        state: State,
        now: Timestamp,
    },
}

/// The first step of a waiting claim, inside the caller's transaction: claim what is free and
/// join the first-come, first-served queue of each held file (as process `pid`, so a waiter
/// that dies is dropped from the queues).
pub fn claim_or_enqueue(
    st: &mut State,
    id: &str,
    files: &[String],
    pid: u32,
    now: Timestamp,
    live: &ProcessTable,
    fx: &mut Vec<super::ops::Effect>,
) -> Result<ClaimOutcome> {
    let out = ops::claim(st, id, files, None, now, live, fx)?;
    let held: Vec<String> = out.conflicts.iter().map(|c| c.file.clone()).collect();
    if !held.is_empty() {
        ops::enqueue(st, id, &held, Some(pid), now, fx)?;
    }
    Ok(out)
}

/// Wait, never holding the lock, until `id` holds every one of `files` (the handover happens
/// inside the releasing transaction, atomic and fair), or until `deadline` or a stop of
/// `watcher`; then leave the queues and answer as a plain claim would. `watcher` must have been
/// made before the first step, so a release right after it is not missed; `since` is the
/// journal's last seq before the first step (to tell what became of a lost grant).
///
/// A file the instance neither holds nor waits for any more was granted and then taken away
/// (`--force`, a force-release, its own release) while this process was not looking: that
/// grant is final. It is reported as lost, naming who took it, and never claimed again: one
/// request is granted at most once.
/// Which of `files` the instance `id` holds now, read without the lock: what a `claim --wait`
/// that failed (say, the lock was busy when it gave up) was granted meanwhile, and still holds.
/// Empty when the state cannot be read.
pub fn held_of(store: &Store, id: &str, files: &[String]) -> Vec<String> {
    let Ok(state) = super::read(store, Timestamp::now()) else {
        return Vec::new();
    };
    state.instance(id).map_or_else(Vec::new, |me| {
        files
            .iter()
            .filter(|f| me.files_claimed.contains(f))
            .cloned()
            .collect()
    })
}

pub fn wait_for_claim(
    store: &Store,
    id: &str,
    files: &[String],
    live: &ProcessTable,
    watcher: &crate::store::watch::HomeWatcher,
    deadline: Option<std::time::Instant>,
    since: u64,
) -> Result<Waited> {
    use crate::store::watch::Wake;
    use std::time::{Duration, Instant};
    // Re-read the state at least this often, in case a notification is lost.
    const SAFETY_RESCAN: Duration = Duration::from_secs(30);
    loop {
        let state = super::read(store, Timestamp::now())?;
        let me = state
            .instance(id)
            .ok_or_else(|| Error::UnknownInstance(id.to_string()))?;
        let waiting = files
            .iter()
            .any(|f| me.waiting_for.iter().any(|w| &w.file == f));
        if !waiting {
            if files.iter().all(|f| me.files_claimed.contains(f)) {
                return Ok(Waited::Claimed(ClaimOutcome {
                    claimed: files.to_vec(),
                    tokens: ops::tokens_of(&state, id, files),
                    ..ClaimOutcome::default()
                }));
            }
            // Something granted was taken away: nothing is left to wait for.
            break;
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) || watcher.stopped() {
            break;
        }
        if watcher.wait(Some(left.unwrap_or(SAFETY_RESCAN).min(SAFETY_RESCAN))) == Wake::Stop {
            break;
        }
    }
    let now = Timestamp::now();
    let (mut outcome, lost, state) = super::transact(store, now, |st, fx| {
        let me = st
            .instance(id)
            .ok_or_else(|| Error::UnknownInstance(id.to_string()))?;
        let queued: Vec<String> = files
            .iter()
            .filter(|f| me.waiting_for.iter().any(|w| &w.file == *f))
            .cloned()
            .collect();
        let held: Vec<String> = files
            .iter()
            .filter(|f| me.files_claimed.contains(f))
            .cloned()
            .collect();
        let lost: Vec<String> = files
            .iter()
            .filter(|f| !queued.contains(f) && !held.contains(f))
            .cloned()
            .collect();
        // Still queued: never granted, so this is still the one request; leave the queues and
        // answer as a plain claim would now.
        ops::dequeue(st, id, &queued, now, fx)?;
        let mut out = ops::claim(st, id, &queued, None, now, live, fx)?;
        out.claimed.extend(held);
        out.tokens = ops::tokens_of(st, id, &out.claimed);
        Ok((out, lost, st.clone()))
    })?;
    outcome.lost = explain_lost(store, id, &lost, since);
    Ok(Waited::GaveUp {
        outcome,
        state,
        now,
    })
}

/// What became of each of `files`, granted to `id` and since lost, from the journal after
/// `since`: the last event that took it from `id`.
fn explain_lost(store: &Store, id: &str, files: &[String], since: u64) -> Vec<ops::LostGrant> {
    use super::events::{CLAIM_FORCED, CLAIM_RELEASED};
    let mut found: Vec<ops::LostGrant> = files
        .iter()
        .map(|f| ops::LostGrant {
            file: f.clone(),
            by: None,
            how: "taken away".into(),
        })
        .collect();
    let Ok(mut tail) = store.tail(Some(since)) else {
        return found;
    };
    let _ = tail.read(|e| {
        if !e.involves(id) {
            return true;
        }
        let p = &e.payload;
        let named: Vec<&str> = match p.get("file").and_then(|v| v.as_str()) {
            Some(f) => vec![f],
            None => p
                .get("files")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default(),
        };
        let forced = p.get("forced").and_then(|v| v.as_bool()) == Some(true);
        let taken_from_me = e.target.as_deref() == Some(id) && e.actor.as_deref() != Some(id);
        let how = match e.event_type.as_str() {
            CLAIM_FORCED if taken_from_me => {
                let why = p.get("reason").and_then(|v| v.as_str()).unwrap_or("");
                format!("forced: {why}")
            }
            CLAIM_RELEASED if forced && taken_from_me => "force-released".to_string(),
            CLAIM_RELEASED if e.actor.as_deref() == Some(id) => {
                "released by the instance itself".to_string()
            }
            _ => return true,
        };
        for l in found
            .iter_mut()
            .filter(|l| named.contains(&l.file.as_str()))
        {
            l.by = e.actor.clone().filter(|a| a != id);
            l.how = how.clone();
        }
        true
    });
    found
}

/// The live picture `status` shows (the spec's status object, without its rendering).
#[derive(Clone, Debug)]
pub struct Status {
    pub state: State,
    /// Files someone waits for, with who holds them.
    pub conflicts: Vec<ops::LiveConflict>,
    pub summary: ops::Summary,
    /// What another program left inconsistent in `status.json` ([`super::foreign::inspect`]).
    pub warnings: Vec<String>,
}

/// The status of `state` at `now`. A killed `claim --wait` neither waits nor conflicts any
/// more (the next transaction records that; a view need not wait for it).
pub fn status_of(state: State, now: Timestamp) -> Status {
    status_with(state, now, true)
}

/// [`status_of`]; `foreign` false when conductor wrote the state last, which is then
/// consistent by construction (every transaction reconciles what another program left).
fn status_with(mut state: State, now: Timestamp, foreign: bool) -> Status {
    ops::drop_dead_waiters(&mut state, &waiter_is_dead, now, &mut Vec::new());
    local::note_waits(&mut state);
    Status {
        conflicts: ops::live_conflicts(&state),
        summary: ops::summary(&state, now),
        warnings: if foreign {
            super::foreign::inspect(&state)
        } else {
            Vec::new()
        },
        state,
    }
}

/// The status of the home, read without locking. Another program's inconsistencies are looked
/// for only when conductor did not write `status.json` last (at 1,000 claims the look costs
/// `status` a twelfth of its time; issue 35).
pub fn status(store: &Store, now: Timestamp) -> Result<Status> {
    let state = super::read(store, now)?;
    let foreign = !store.last_written_by_conductor(<State as crate::store::Document>::FILE);
    Ok(status_with(state, now, foreign))
}
