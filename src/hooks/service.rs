//! The hook's operations as the `conductor hook AGENT` face calls them: one agent session's
//! event in (who the session is, what it is about to write), a [`Verdict`] or a typed outcome
//! out. Reads are lock-free first ([`crate::protocol::read_unvalidated`]); only registering,
//! claiming a free file, a due heartbeat and the end of a session take the lock, in one
//! transaction each. Nothing here prints.

use std::path::Path;

use super::{Agent, DEFAULT_TASK, Verdict};
use crate::config::Enforce;
use crate::error::{Error, Reason, Result};
use crate::protocol::local::{self, ProcessTable};
use crate::protocol::ops::{self, Effect, NewInstance};
use crate::protocol::types::Outcome;
use crate::protocol::{Instance, Priority, ProjectConfig, Source, State};
use crate::schema::Schema;
use crate::store::Store;
use crate::time::Timestamp;

/// The agent session a hook event comes from.
#[derive(Clone, Copy, Debug)]
pub struct Session<'a> {
    pub agent: Agent,
    /// The agent's session id (empty: the payload named none).
    pub id: &'a str,
    /// `CONDUCTOR_INSTANCE_ID` from the agent's environment: the instance whoever started the
    /// session registered for it (a workflow supervisor, `conductor run`), which it adopts.
    pub adopted: Option<&'a str>,
}

impl Session<'_> {
    /// The instance this session acts as in `st` (its own, or the adopted one).
    pub fn mine<'s>(&self, st: &'s State) -> Option<&'s Instance> {
        super::session_or_adopted(st, self.id, self.adopted)
    }
}

/// What a session start found or registered.
#[derive(Clone, Debug)]
pub struct SessionStarted {
    pub instance_id: String,
    /// The session's own instance was there already (a resumed session).
    pub resumed: bool,
    /// The session took over the instance `CONDUCTOR_INSTANCE_ID` names.
    pub adopted: bool,
    /// The state after the start, for the context the model is told.
    pub state: State,
}

/// Session start: find the session's instance (or the adopted one) and refresh it, else
/// register one for the session in `dir`.
pub fn start_session(
    store: &Store,
    now: Timestamp,
    session: &Session,
    dir: &Path,
) -> Result<SessionStarted> {
    let new = new_instance(session, dir)?;
    // Outside the lock: which version of the agent runs this session (an upgrade is seen).
    let version = super::version::running(session.agent);
    crate::protocol::transact(store, now, |st, fx| {
        let found = super::session_instance(st, session.id)
            .map(|i| (i.id.clone(), true, false))
            .or_else(|| {
                super::session_or_adopted(st, session.id, session.adopted)
                    .map(|i| (i.id.clone(), false, true))
            });
        let (id, resumed, adopted) = match found {
            Some((id, resumed, adopted)) => {
                ops::heartbeat(st, &id, None, now, fx)?;
                if let Some(i) = st.instance_mut(&id) {
                    i.agent
                        .get_or_insert_with(|| session.agent.name().to_string());
                    if version.is_some() {
                        i.agent_version = version.clone();
                    }
                    if adopted {
                        i.session_id = Some(session.id.to_string());
                    }
                }
                (id, resumed, adopted)
            }
            None => (
                register(st, new.clone(), session.agent, version.clone(), now, fx),
                false,
                false,
            ),
        };
        Ok(SessionStarted {
            instance_id: id,
            resumed,
            adopted,
            state: st.clone(),
        })
    })
}

/// A tool call about to write `files` (normalized), or (`after`) one that wrote them already.
#[derive(Clone, Debug)]
pub struct Edit<'a> {
    pub session: Session<'a>,
    /// The session's directory: files outside it are never claimed.
    pub dir: &'a Path,
    pub files: Vec<String>,
    pub enforce: Enforce,
    pub after: bool,
    /// The git worktrees of `files` (see [`crate::protocol::worktrees`]).
    pub repos: crate::protocol::worktrees::Worktrees,
    /// `files` as absolute paths when their keys name repositories instead (a shared store):
    /// what other worktrees' changes are looked up by.
    pub paths: Option<Vec<String>>,
}

/// Decide an edit for every file and claim the free ones (registering the session's instance
/// first if it has none). After the fact (the agent cannot be stopped), claim what can be
/// claimed and tell the person about a file another session holds. `admit` may refuse the
/// session any claim (`enforce = "require-verified"`): the edit of a free file is then refused
/// with its reason.
pub fn edit(
    store: &Store,
    now: Timestamp,
    live: &ProcessTable,
    admit: &dyn ops::Admission,
    req: &Edit,
) -> Result<Verdict> {
    let after = req.after;
    let dir_str = req.dir.to_string_lossy().into_owned();
    let decide_all = |st: &State| {
        let me = req.session.mine(st);
        let home = me.map_or(dir_str.as_str(), |m| m.working_directory.as_str());
        req.files
            .iter()
            .map(|f| {
                let d = super::decide(st, me, f, super::inside(f, home), req.enforce, now, live);
                (f.clone(), d)
            })
            .collect::<Vec<_>>()
    };
    // Lock-free first: most edits are of files the session already holds, or are refused.
    let mut state = crate::protocol::glance(store, now)?;
    state.merge_repos(&req.repos);
    let (verdict, to_claim) = super::combine(&decide_all(&state));
    if let Some(v) = verdict {
        return Ok(if after { after_the_fact(v) } else { v });
    }
    let paths = req.paths.as_ref().unwrap_or(&req.files);
    // Files a finished branch of another worktree holds until it lands.
    let landing = match super::landing::find(store, now, &req.repos, paths) {
        Ok(found) if found.is_empty() => None,
        Ok(found) if req.enforce == Enforce::BlockForeign => {
            let v = Verdict::deny(super::landing::refusal(&found));
            return Ok(if after { after_the_fact(v) } else { v });
        }
        Ok(found) => Some(super::landing::notice(&found)),
        Err(e) => Some(format!(
            "conductor: could not check whether these files are landing ({e})."
        )),
    };
    // Files another live worktree of the repository changed, claimed or not.
    let overlap = match super::overlap::find(store, &req.repos, paths, &state) {
        Ok(found) if found.is_empty() => None,
        Ok(found) if req.enforce == Enforce::BlockOverlap => {
            let v = Verdict::deny(super::overlap::refusal(&found));
            return Ok(if after { after_the_fact(v) } else { v });
        }
        Ok(found) => Some(super::overlap::notice(&found)),
        Err(e) => Some(format!(
            "conductor: could not check whether another worktree changed these files ({e})."
        )),
    };
    let overlap = match (landing, overlap) {
        (Some(l), Some(o)) => Some(format!("{l} {o}")),
        (l, o) => l.or(o),
    };
    let v = claim_or_allow(store, now, live, admit, req, &state, to_claim, &decide_all)?;
    Ok(match overlap {
        Some(more) if v.permission == super::Permission::Allow => Verdict {
            context: Some(match v.context {
                Some(c) => format!("{c} {more}"),
                None => more,
            }),
            ..v
        },
        _ => v,
    })
}

/// The rest of [`edit`] once nothing refuses it: claim the free files (under the lock, if
/// `admit` lets the session claim), or refresh a due heartbeat.
#[allow(clippy::too_many_arguments)]
fn claim_or_allow(
    store: &Store,
    now: Timestamp,
    live: &ProcessTable,
    admit: &dyn ops::Admission,
    req: &Edit,
    state: &State,
    to_claim: Vec<String>,
    decide_all: &dyn Fn(&State) -> Vec<(String, super::Decision)>,
) -> Result<Verdict> {
    let after = req.after;
    if to_claim.is_empty() {
        if let Some(id) = req
            .session
            .mine(state)
            .filter(|m| super::heartbeat_due(m, now))
            .map(|m| m.id.clone())
        {
            // Best effort: a busy lock must not turn an allowed edit into a warning.
            let _ = crate::protocol::transact(store, now, |st, fx| {
                ops::heartbeat(st, &id, None, now, fx)
            });
        }
        return Ok(Verdict::default());
    }
    if req.session.id.is_empty() {
        return Ok(Verdict::failed(&format!(
            "the hook input names no session, so {} could not be claimed",
            to_claim.join(", ")
        )));
    }
    let new = new_instance(&req.session, req.dir)?;
    crate::protocol::transact(store, now, |st, fx| {
        st.repos.merge(&req.repos);
        // Decide again under the lock: another session may have claimed a file meanwhile.
        let (verdict, to_claim) = super::combine(&decide_all(st));
        if let Some(v) = verdict {
            return Ok(if after { after_the_fact(v) } else { v });
        }
        if to_claim.is_empty() {
            return Ok(Verdict::default());
        }
        let id = match req.session.mine(st) {
            Some(m) => m.id.clone(),
            // Registered by its first edit (rare): the agent's version is looked up only then.
            None => {
                let version = super::version::running(req.session.agent);
                register(st, new.clone(), req.session.agent, version, now, fx)
            }
        };
        // May this session claim at all? (An instance registered above is kept: status then
        // shows the session, unenforced.)
        // (Any other failure, an unreadable verdicts file say, is the hook's own.)
        if let Err(e) = admit.admit(st.instance(&id).expect("found or registered above")) {
            if e.reason() != Reason::UnenforcedSession.as_str() {
                return Err(e);
            }
            let why = match e.hint() {
                Some(h) => format!("{e}. Next: {h}"),
                None => e.to_string(),
            };
            return Ok(if after {
                Verdict {
                    notice: Some(format!(
                        "conductor: this session edited {} without a claim: {why}",
                        to_claim.join(", ")
                    )),
                    ..Verdict::default()
                }
            } else {
                Verdict::deny(format!("REFUSED: {why}"))
            });
        }
        let out = ops::claim(st, &id, &to_claim, None, now, live, fx)?;
        if let Some(c) = out.conflicts.first() {
            let held = st.instance(&c.held_by).cloned();
            let shown = super::in_worktree(
                &c.file,
                c.held_claim.as_deref().unwrap_or(&c.file),
                c.holder_worktree
                    .as_deref()
                    .map(|w| (w, c.holder_branch.as_deref())),
            );
            let msg = match held {
                Some(h) => super::held_message_as(&c.file, &shown, &h, Some(&id), now),
                None => format!("{} is claimed by {}", c.file, c.held_by),
            };
            let v = Verdict::deny(format!("BLOCKED: {msg}"));
            return Ok(if after { after_the_fact(v) } else { v });
        }
        // Each with its fencing token: a script can ask `conductor check --token N FILE`
        // whether this grant is still the current one.
        let granted: Vec<String> = to_claim
            .iter()
            .map(|k| match out.tokens.get(k) {
                Some(t) => format!("{k} (fencing token {t})"),
                None => k.clone(),
            })
            .collect();
        Ok(Verdict {
            context: Some(format!(
                "conductor: {} now claimed for this session ({id}); other sessions' edits of {} are refused until you \
                 release {} (`conductor release --instance {id} FILE`) or finish (`conductor done --instance {id}`).",
                granted.join(", "),
                if to_claim.len() == 1 { "it" } else { "them" },
                if to_claim.len() == 1 { "it" } else { "them" },
            )),
            ..Verdict::default()
        })
    })
}

/// A refusal that came too late (the file is written already): tell the person.
fn after_the_fact(v: Verdict) -> Verdict {
    let why = v.reason.unwrap_or_default();
    Verdict {
        notice: Some(format!(
            "conductor: this session edited a file it should not have: {why}"
        )),
        context: Some(format!(
            "conductor: the edit you just made touched a file another session holds: {why}. Tell the user, \
             and consider reverting it."
        )),
        ..Verdict::default()
    }
}

/// Any sign of life: refresh the session's heartbeat when it is due (lock-free check first).
pub fn activity(store: &Store, now: Timestamp, session: &Session) -> Result<()> {
    if session.id.is_empty() {
        return Ok(());
    }
    let state = crate::protocol::read_unvalidated(store, now)?;
    let Some(id) = session
        .mine(&state)
        .filter(|m| super::heartbeat_due(m, now))
        .map(|m| m.id.clone())
    else {
        return Ok(());
    };
    crate::protocol::transact(store, now, |st, fx| {
        if st.instance(&id).is_some() {
            ops::heartbeat(st, &id, None, now, fx)?;
        }
        Ok(())
    })
}

/// What the end of a session did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEnded {
    pub instance_id: String,
    /// How many files it held, now released.
    pub released: usize,
}

/// Session end: finish the session's own instance as abandoned (`reason`: why the agent says
/// it ended), releasing its claims to waiters first. `None`: it has none (already done, never
/// registered), or its instance is the adopted one, which whoever started the session ends.
pub fn end_session(
    store: &Store,
    now: Timestamp,
    session: &Session,
    reason: &str,
) -> Result<Option<SessionEnded>> {
    let Some(found) =
        super::session_instance(&crate::protocol::read_unvalidated(store, now)?, session.id)
            .map(|i| i.id.clone())
    else {
        return Ok(None); // already done, or never registered
    };
    // An adopted instance belongs to whoever started the session (a workflow supervisor,
    // `conductor run`): it ends it, with the real outcome.
    if session.adopted == Some(found.as_str()) {
        return Ok(None);
    }
    crate::protocol::transact(store, now, |st, fx| {
        let Some(id) = super::session_instance(st, session.id).map(|i| i.id.clone()) else {
            return Ok(None);
        };
        // A released file goes to the first waiter that is still there.
        ops::drop_dead_waiters(st, &local::waiter_is_dead, now, fx);
        let released = ops::done(
            st,
            &id,
            Outcome::Abandoned,
            None,
            Some(format!(
                "{} session ended ({reason})",
                session.agent.product()
            )),
            now,
            fx,
        )?;
        Ok(Some(SessionEnded {
            instance_id: id,
            released: released.len(),
        }))
    })
}

/// The other live instances working in `dir` or below it (not the session's own): a worktree
/// they work in is not removed under them. Each as `ID (task "TASK")`.
pub fn others_in(
    store: &Store,
    now: Timestamp,
    session: &Session,
    dir: &Path,
) -> Result<Vec<String>> {
    let st = crate::protocol::read_unvalidated(store, now)?;
    let mine = session.mine(&st).map(|i| i.id.clone());
    Ok(st
        .instances
        .iter()
        .filter(|i| Some(&i.id) != mine.as_ref())
        .filter(|i| Path::new(&i.working_directory).starts_with(dir))
        .map(|i| format!("{} (task \"{}\")", i.id, i.task))
        .collect())
}

/// Register a new instance for the session, naming its agent.
fn register(
    st: &mut State,
    new: NewInstance,
    agent: Agent,
    version: Option<String>,
    now: Timestamp,
    fx: &mut Vec<Effect>,
) -> String {
    let id = ops::start(st, new, None, crate::host::random_hex6, now, fx);
    if let Some(i) = st.instance_mut(&id) {
        i.agent = Some(agent.name().to_string());
        i.agent_version = version;
    }
    id
}

/// What a hook registers for a session: task from `.conductor/config.json`, project from the
/// directory name, source from the environment (Cursor sessions are `cur`).
fn new_instance(session: &Session, dir: &Path) -> Result<NewInstance> {
    let cfg: Option<ProjectConfig> =
        crate::schema::read_doc(&dir.join(".conductor/config.json"), Schema::ProjectConfig)?;
    let task = cfg
        .and_then(|c| c.task)
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_TASK.to_string());
    let project = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let working_directory = dir
        .to_str()
        .ok_or_else(|| {
            Error::invalid(
                Reason::InvalidDirectory,
                "the session's directory is not UTF-8",
            )
        })?
        .to_string();
    let source = match session.agent {
        Agent::Cursor => Source::Cur,
        _ => local::detect_source(|k| std::env::var(k).ok()),
    };
    Ok(NewInstance {
        source,
        project,
        task,
        priority: Priority::P1,
        working_directory,
        override_reason: None,
        pid: None,
        host: crate::host::hostname(),
        session_id: Some(session.id.to_string()),
    })
}

/// The instance an MCP server registers for itself when the agent's hooks registered none: in
/// the current directory, owned by the agent's process `owner_pid`, for the agent's session
/// `session_id` (the hooks then find this instance as the session's own, so its claims are the
/// session's).
pub fn own_instance(owner_pid: u32, session_id: Option<String>) -> Result<NewInstance> {
    let dir = crate::host::current_dir()?;
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let working_directory = dir
        .to_str()
        .ok_or_else(|| {
            Error::invalid(
                Reason::InvalidDirectory,
                "the working directory is not UTF-8",
            )
        })?
        .to_string();
    Ok(NewInstance {
        source: local::detect_source(|k| std::env::var(k).ok()),
        project: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into()),
        task: DEFAULT_TASK.to_string(),
        priority: Priority::P1,
        working_directory,
        override_reason: None,
        pid: Some(owner_pid),
        host: crate::host::hostname(),
        session_id,
    })
}
