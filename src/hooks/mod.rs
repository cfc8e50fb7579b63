//! Agent hooks (`conductor hook AGENT`): one decision core for every coding agent, and one module
//! per agent that turns its hook payload into a [`HookInput`] and a [`Verdict`] back into the
//! output that agent reads ([`claude`], [`cursor`], [`codex`], [`gemini`], [`qwen`], ...).
//!
//! The rule is written once, here: which instance belongs to a session, and for each file a tool
//! call is about to write, whether it is allowed, denied, left to a person (ask), or claimed
//! first. No I/O and no clock here: [`service`] (called by `commands/hook.rs`) reads the state
//! lock-free, asks [`decide`], and only takes the lock to claim, register, heartbeat or release.

pub mod check;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod landing;
pub mod opencode;
pub mod overlap;
pub mod pi;
pub mod qwen;
pub mod respond;
pub mod service;
pub mod shell;
pub mod version;
pub mod worktree;

use std::path::Path;

use serde_json::Value;

use crate::config::Enforce;
use crate::protocol::ops::{Liveness, is_alive};
use crate::protocol::{Instance, State};
use crate::time::Timestamp;

/// The task of a session registered by a hook when the project names none.
pub const DEFAULT_TASK: &str = "interactive session";

/// Minutes after which any hook event of a session refreshes its heartbeat. Hook-registered
/// sessions have no process to watch, so these heartbeats are what keeps their claims: a session
/// with no hook event for `default_max_age_minutes` (60) is an orphan and `cleanup` frees its files.
pub const HEARTBEAT_REFRESH_MINUTES: u64 = 5;

/// At most this many other instances, and files per instance, are listed at session start.
const CONTEXT_MAX_INSTANCES: usize = 8;
const CONTEXT_MAX_FILES: usize = 10;

/// The agents conductor has hooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code (settings.json hooks or the plugin)
    Claude,
    /// Cursor (hooks.json, version 1)
    Cursor,
    /// OpenAI Codex CLI (hooks.json)
    Codex,
    /// Google Gemini CLI (settings.json hooks)
    Gemini,
    /// OpenCode (a plugin in .opencode/plugins/)
    Opencode,
    /// Pi, the coding agent (an extension in .pi/extensions/)
    Pi,
    /// Qwen Code (settings.json hooks in .qwen/)
    Qwen,
    /// GitHub Copilot CLI (hooks in .github/hooks/conductor.json)
    Copilot,
}

impl Agent {
    /// The lowercase name used on the command line and in the instance's `agent` field.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Cursor => "cursor",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
            Agent::Pi => "pi",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
        }
    }

    /// The product name, for messages.
    pub fn product(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Cursor => "Cursor",
            Agent::Codex => "Codex CLI",
            Agent::Gemini => "Gemini CLI",
            Agent::Opencode => "OpenCode",
            Agent::Pi => "Pi",
            Agent::Qwen => "Qwen Code",
            Agent::Copilot => "Copilot CLI",
        }
    }

    /// True for the pre-tool event of an agent that gives the model nothing said there: what it
    /// must hear waits for the same session's after-tool event (Gemini CLI's BeforeTool output
    /// reaches only the person; Qwen Code drops PreToolUse's additionalContext).
    pub fn context_waits_for_after_tool(self, event: &str) -> bool {
        matches!(
            (self, event),
            (Agent::Gemini, "BeforeTool") | (Agent::Qwen, "PreToolUse")
        )
    }

    /// Parse this agent's hook payload.
    pub fn parse(self, text: &str) -> Result<HookInput, String> {
        match self {
            Agent::Claude => claude::parse(text),
            Agent::Cursor => cursor::parse(text),
            Agent::Codex => codex::parse(text),
            Agent::Gemini => gemini::parse(text),
            Agent::Opencode => opencode::parse(text),
            Agent::Pi => pi::parse(text),
            Agent::Qwen => qwen::parse(text),
            Agent::Copilot => copilot::parse(text),
        }
    }

    /// Shape a verdict into what this agent reads from the hook (`event` is the payload's event
    /// name, empty when the payload could not be read).
    pub fn render(self, event: &str, v: &Verdict) -> Answer {
        match self {
            Agent::Claude => claude::render(event, v),
            Agent::Cursor => cursor::render(event, v),
            Agent::Codex => codex::render(event, v),
            Agent::Gemini => gemini::render(event, v),
            Agent::Opencode => opencode::render(event, v),
            Agent::Pi => pi::render(event, v),
            Agent::Qwen => qwen::render(event, v),
            Agent::Copilot => copilot::render(event, v),
        }
    }
}

/// What a hook event means to conductor, whatever the agent calls it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The session starts or resumes: register it.
    SessionStart,
    /// A tool is about to write these files (as given: absolute or relative to the session).
    BeforeEdit(Vec<String>),
    /// These files were written already (the agent cannot be stopped any more): record it.
    AfterEdit(Vec<String>),
    /// The agent's shell tool is about to run this command: the files it writes are decided as
    /// for an edit ([`shell::written_paths`]).
    BeforeShell(String),
    /// A tool call finished (Gemini CLI's AfterTool): heartbeat, and hand the model a notice that
    /// could not be given before the call.
    AfterTool,
    /// Any other sign of life (a prompt, a finished turn, a tool call): heartbeat.
    Activity,
    /// The session ends: release its claims.
    SessionEnd(Option<String>),
    /// Claude Code's WorktreeCreate: create the worktree, print its path ([`worktree::create`]).
    WorktreeCreate(worktree::Request),
    /// Claude Code's WorktreeRemove: remove the worktree at this path when nothing would be lost
    /// ([`worktree::remove`]).
    WorktreeRemove(String),
    /// Nothing for conductor to do.
    Ignore,
}

/// One hook call, in conductor's terms.
#[derive(Clone, Debug)]
pub struct HookInput {
    /// The agent's id for the session (Cursor: `conversation_id`).
    pub session_id: String,
    /// The session's directory, when the payload names one.
    pub cwd: Option<String>,
    /// The event's name in the agent's own vocabulary (decides the output shape).
    pub event_name: String,
    pub event: Event,
    /// True when Cursor runs this Claude Code hook from `.claude` settings.
    pub run_by_cursor: bool,
}

impl HookInput {
    /// A parsed payload with the fields every agent's payload spells alike (`session_id`,
    /// `cwd`).
    pub(crate) fn new(v: &Value, event_name: String, event: Event) -> HookInput {
        HookInput {
            session_id: str_field(v, "session_id").to_string(),
            cwd: Some(str_field(v, "cwd").to_string()).filter(|c| !c.is_empty()),
            event_name,
            event,
            run_by_cursor: false,
        }
    }
}

/// A string field of a JSON object, or "".
pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A JSON object payload, or a one-line reason why it is not one.
pub(crate) fn parse_object(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the top level is not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The agent's permission answer for a tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Permission {
    /// No objection (the agent's own permission rules still apply).
    #[default]
    Allow,
    /// Refuse the tool call; the reason goes to the model.
    Deny,
    /// Leave it to the person at the keyboard (agents without "ask" refuse instead).
    Ask,
}

/// What conductor answers to one hook call, before an agent module shapes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub permission: Permission,
    /// Why (for Deny and Ask), for the model.
    pub reason: Option<String>,
    /// A line for the person (Claude Code `systemMessage`).
    pub notice: Option<String>,
    /// Facts for the model (Claude Code `additionalContext`).
    pub context: Option<String>,
}

impl Verdict {
    /// Refuse with a reason the person sees too.
    pub fn deny(reason: String) -> Verdict {
        Verdict {
            permission: Permission::Deny,
            notice: Some(format!("conductor blocked an edit: {reason}")),
            reason: Some(reason),
            context: None,
        }
    }

    /// Ask the person.
    pub fn ask(reason: String) -> Verdict {
        Verdict {
            permission: Permission::Ask,
            notice: None,
            reason: Some(reason),
            context: None,
        }
    }

    /// Conductor could not do its job: say so to the person and the model, and let the agent go
    /// on (the hook never blocks because of its own failure).
    pub fn failed(what: &str) -> Verdict {
        Verdict {
            permission: Permission::Allow,
            reason: None,
            notice: Some(format!("conductor: {what}")),
            context: Some(format!(
                "conductor (file coordination between agent sessions) failed for this call: {what}. \
                 Edits are not being checked against other sessions' claims until this is fixed."
            )),
        }
    }
}

/// What the hook prints and its exit code.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub code: u8,
    pub stdout: String,
    pub stderr: String,
}

impl Answer {
    /// Exit 0 with one JSON object on stdout.
    pub(crate) fn json(out: serde_json::Map<String, Value>) -> Answer {
        Answer {
            code: 0,
            stdout: Value::Object(out).to_string(),
            stderr: String::new(),
        }
    }
}

/// The live instance a session registered, by its session id.
pub fn session_instance<'a>(st: &'a State, session_id: &str) -> Option<&'a Instance> {
    if session_id.is_empty() {
        return None;
    }
    st.instances
        .iter()
        .find(|i| i.session_id.as_deref() == Some(session_id))
}

/// The instance a session acts as: the one registered for its session id, else the live
/// instance `adopt` names (`CONDUCTOR_INSTANCE_ID`, set by whoever started the session, e.g. a
/// workflow supervisor or `conductor run`) when no other session took it.
pub fn session_or_adopted<'a>(
    st: &'a State,
    session_id: &str,
    adopt: Option<&str>,
) -> Option<&'a Instance> {
    session_instance(st, session_id).or_else(|| {
        st.instance(adopt?).filter(|i| {
            i.session_id
                .as_deref()
                .is_none_or(|s| s.is_empty() || s == session_id)
        })
    })
}

/// True when `file` (normalized, absolute) lies inside directory `dir`.
pub fn inside(file: &str, dir: &str) -> bool {
    Path::new(file).starts_with(dir) && file != dir
}

/// What the hook does with one file a tool call writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Let it through.
    Allow,
    /// Refuse, with this one-line reason.
    Deny(String),
    /// A person should decide (a holder that looks dead, a file that must be claimed first).
    Ask(String),
    /// The file is free, inside the project, and `enforce` is auto-claim: claim it, then allow.
    Claim,
}

/// Decide about a write of `file` (normalized) by the session whose instance is `me` (None if
/// the session never registered). `in_project` is false for files outside the session's
/// directory (an agent's own memory files, scratch files in /tmp): they are never claimed and
/// need no claim, but a file another live instance holds is still refused.
pub fn decide(
    st: &State,
    me: Option<&Instance>,
    file: &str,
    in_project: bool,
    enforce: Enforce,
    now: Timestamp,
    live: &dyn Liveness,
) -> Decision {
    if enforce == Enforce::Off {
        return Decision::Allow;
    }
    let my_id = me.map(|m| m.id.as_str());
    // The holder of the file or of a directory or glob over it; for a directory or glob
    // written (`rm -r src`), of anything inside it. Another instance's claim comes first.
    let globs: Vec<String> = crate::protocol::claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    // In every worktree of the file's repository (`st.repos`).
    let overlapping = crate::protocol::ops::overlapping_claims(st, &globs, file);
    let holders: Vec<(&str, &Instance)> = overlapping
        .iter()
        .filter_map(|(k, h, _)| Some((k.as_str(), st.instance(h)?)))
        .collect();
    let holder = holders
        .iter()
        .find(|(_, h)| Some(h.id.as_str()) != my_id && is_alive(h, now, live))
        .or_else(|| holders.iter().find(|(_, h)| Some(h.id.as_str()) != my_id))
        .or(holders.first());
    if let Some(&(key, h)) = holder {
        if Some(h.id.as_str()) == my_id {
            return Decision::Allow;
        }
        let tree = crate::protocol::ops::holder_worktree(st, key, file, h);
        let file_there = in_worktree(
            file,
            key,
            tree.map(|w| (w.root.trim_end_matches('/'), w.branch.as_deref())),
        );
        if is_alive(h, now, live) {
            return Decision::Deny(held_message_as(file, &file_there, h, my_id, now));
        }
        return Decision::Ask(format!(
            "{file_there} is claimed by {} ({}, task \"{}\") but that session looks gone (last seen {} min ago). \
             Allow the edit only if you know it stopped; to take the file over: conductor claim{} --force \"holder is gone\" {file}",
            h.id,
            agent_of(h),
            h.task,
            h.last_heartbeat.minutes_until(now),
            instance_flag(my_id)
        ));
    }
    if !in_project {
        return Decision::Allow;
    }
    match enforce {
        // (require-verified refuses the claim itself of a session whose hooks failed their
        // live check: the caller's admission, asked when claiming.)
        Enforce::AutoClaim | Enforce::BlockOverlap | Enforce::RequireVerified => Decision::Claim,
        Enforce::BlockForeign | Enforce::Off => Decision::Allow,
        Enforce::RequireClaim => Decision::Ask(match my_id {
            Some(id) => format!(
                "enforce is require-claim and this session ({id}) has not claimed {file}. Claim it first: conductor claim --instance {id} {file}"
            ),
            None => format!(
                "enforce is require-claim and this session is not registered with conductor. Register and claim first: \
                 conductor start \"TASK\" --priority P1, then conductor claim {file}"
            ),
        }),
    }
}

fn instance_flag(my_id: Option<&str>) -> String {
    my_id
        .map(|id| format!(" --instance {id}"))
        .unwrap_or_default()
}

/// "Claude Code session" or "session" for an instance without an agent.
fn agent_of(inst: &Instance) -> String {
    match inst.agent.as_deref() {
        Some("claude") => "Claude Code session".into(),
        Some("cursor") => "Cursor session".into(),
        Some("codex") => "Codex CLI session".into(),
        Some("gemini") => "Gemini CLI session".into(),
        Some("opencode") => "OpenCode session".into(),
        Some("pi") => "Pi session".into(),
        Some(other) => format!("{other} session"),
        None => "session".into(),
    }
}

/// `file` as a refusal names it: with the holder's worktree and branch when it works in another
/// worktree of the repository (`held`: the key it holds there).
pub fn in_worktree(file: &str, held: &str, tree: Option<(&str, Option<&str>)>) -> String {
    use crate::protocol::claims::{Kind, kind};
    let Some((root, branch)) = tree else {
        return file.to_string();
    };
    let branch = branch.map(|b| format!(", branch {b}")).unwrap_or_default();
    if kind(held) == Kind::File && held != file {
        format!("{file} (as {held} in the worktree {root}{branch})")
    } else {
        format!("{file} (in the worktree {root}{branch})")
    }
}

/// The one-line reason a write of a file held by a live instance is refused: the holder, its
/// task, when it was last seen, and what to do.
pub fn held_message(file: &str, holder: &Instance, my_id: Option<&str>, now: Timestamp) -> String {
    held_message_as(file, file, holder, my_id, now)
}

/// [`held_message`], naming the file as `shown` (with the holder's worktree: [`in_worktree`]).
pub fn held_message_as(
    file: &str,
    shown: &str,
    holder: &Instance,
    my_id: Option<&str>,
    now: Timestamp,
) -> String {
    format!(
        "{shown} is claimed by {} ({}, task \"{}\", last seen {} min ago). Do not edit it: work on other files, \
         coordinate with that session (`conductor status`) or wait until it releases the file; a person can take \
         it over with: conductor claim{} --force \"WHY\" {file}",
        holder.id,
        agent_of(holder),
        holder.task,
        holder.last_heartbeat.minutes_until(now),
        instance_flag(my_id)
    )
}

/// Fold the decisions for every file of one tool call into the verdict for the call: any denial
/// refuses the whole call (naming each held file), else any "ask" asks. The files to claim are
/// returned separately.
pub fn combine(decisions: &[(String, Decision)]) -> (Option<Verdict>, Vec<String>) {
    let of = |n: usize| {
        if decisions.len() > 1 {
            format!(" ({n} of the {} files this call writes)", decisions.len())
        } else {
            String::new()
        }
    };
    let denied: Vec<&str> = decisions
        .iter()
        .filter_map(|(_, d)| match d {
            Decision::Deny(m) => Some(m.as_str()),
            _ => None,
        })
        .collect();
    if !denied.is_empty() {
        return (
            Some(Verdict::deny(format!(
                "BLOCKED{}: {}",
                of(denied.len()),
                denied.join(" | ")
            ))),
            Vec::new(),
        );
    }
    let asked: Vec<&str> = decisions
        .iter()
        .filter_map(|(_, d)| match d {
            Decision::Ask(m) => Some(m.as_str()),
            _ => None,
        })
        .collect();
    if !asked.is_empty() {
        return (
            Some(Verdict::ask(format!(
                "conductor{}: {}",
                of(asked.len()),
                asked.join(" | ")
            ))),
            Vec::new(),
        );
    }
    let claim = decisions
        .iter()
        .filter(|(_, d)| *d == Decision::Claim)
        .map(|(f, _)| f.clone())
        .collect();
    (None, claim)
}

/// True when the session's heartbeat is old enough that a hook event should refresh it.
pub fn heartbeat_due(me: &Instance, now: Timestamp) -> bool {
    me.last_heartbeat.minutes_until(now) >= HEARTBEAT_REFRESH_MINUTES
}

/// What a session is told when it starts: its instance, and who else works in this project on
/// which files, stated as facts (bounded in size).
pub fn session_context(
    st: &State,
    me: &Instance,
    enforce: Enforce,
    resumed: bool,
    now: Timestamp,
    live: &dyn Liveness,
) -> String {
    let verb = if resumed {
        "resumed as"
    } else {
        "registered as"
    };
    let mut s = format!(
        "conductor: this session is {verb} {} (task: \"{}\"; enforce: {}). CONDUCTOR_INSTANCE_ID={}. \
         Edits of files another live session holds are refused; run `conductor status` to see who holds what, \
         `conductor claim --instance {} FILE` to claim ahead, `conductor done --instance {}` when finished.",
        me.id,
        me.task,
        enforce.as_str(),
        me.id,
        me.id,
        me.id
    );
    let dir = me.working_directory.as_str();
    let near = |i: &&Instance| {
        i.id != me.id
            && is_alive(i, now, live)
            && (i.working_directory == dir
                || inside(&i.working_directory, dir)
                || inside(dir, &i.working_directory))
    };
    let others: Vec<&Instance> = st.instances.iter().filter(near).collect();
    if others.is_empty() {
        s.push_str(" No other live session works in this project.");
        return s;
    }
    s.push_str(&format!(
        " Other live sessions in this project ({}):",
        others.len()
    ));
    for i in others.iter().take(CONTEXT_MAX_INSTANCES) {
        let files: Vec<String> = i
            .files_claimed
            .iter()
            .take(CONTEXT_MAX_FILES)
            .map(|f| {
                Path::new(f)
                    .strip_prefix(dir)
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| f.clone())
            })
            .collect();
        let more = i.files_claimed.len().saturating_sub(CONTEXT_MAX_FILES);
        s.push_str(&format!(
            " {} ({}, task \"{}\") holds {}{}.",
            i.id,
            agent_of(i),
            i.task,
            if files.is_empty() {
                "no files".to_string()
            } else {
                files.join(", ")
            },
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if others.len() > CONTEXT_MAX_INSTANCES {
        s.push_str(&format!(
            " ({} more sessions: see `conductor status`.)",
            others.len() - CONTEXT_MAX_INSTANCES
        ));
    }
    s.push_str(" Leave their files alone.");
    s
}

/// `[itm-a1b2c3 · 3 claimed]` for the prompt, or None when the instance is not live.
pub fn prompt_segment(st: &State, id: &str) -> Option<String> {
    let inst = st.instance(id)?;
    Some(format!(
        "[{} · {} claimed]",
        inst.id,
        inst.files_claimed.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::{self, AssumeAlive, NewInstance};
    use crate::protocol::{Priority, Source};

    fn now() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    fn state_with_two() -> (State, String, String) {
        let mut st = State::empty(now());
        let mut n = 0;
        let mut mk = |task: &str, sid: &str| {
            let new = NewInstance {
                source: Source::Web,
                project: "p".into(),
                task: task.into(),
                priority: Priority::P1,
                working_directory: "/w".into(),
                override_reason: None,
                pid: None,
                host: None,
                session_id: Some(sid.into()),
            };
            n += 1;
            let k = n;
            ops::start(
                &mut st,
                new,
                None,
                move || format!("00000{k}"),
                now(),
                &mut Vec::new(),
            )
        };
        let a = mk("Refactor auth", "s-a");
        let b = mk("Docs", "s-b");
        st.instance_mut(&a).unwrap().agent = Some("claude".into());
        let mut fx = Vec::new();
        ops::claim(
            &mut st,
            &a,
            &["/w/a.rs".to_string()],
            None,
            now(),
            &AssumeAlive,
            &mut fx,
        )
        .unwrap();
        (st, a, b)
    }

    fn d(st: &State, sid: &str, file: &str, inside: bool, mode: Enforce) -> Decision {
        decide(
            st,
            session_instance(st, sid),
            file,
            inside,
            mode,
            now(),
            &AssumeAlive,
        )
    }

    #[test]
    fn foreign_live_holder_is_denied_in_every_mode_but_off_even_outside_the_project() {
        let (st, a, _) = state_with_two();
        for mode in [
            Enforce::AutoClaim,
            Enforce::BlockForeign,
            Enforce::RequireClaim,
        ] {
            for inside in [true, false] {
                match d(&st, "s-b", "/w/a.rs", inside, mode) {
                    Decision::Deny(m) => {
                        assert!(
                            m.contains(&a)
                                && m.contains("Refactor auth")
                                && m.contains("Claude Code session")
                                && m.contains("last seen 0 min ago"),
                            "{m}"
                        );
                        assert!(!m.contains('\n'));
                    }
                    d => panic!("{mode:?}: {d:?}"),
                }
            }
        }
        assert_eq!(
            d(&st, "s-b", "/w/a.rs", true, Enforce::Off),
            Decision::Allow
        );
    }

    #[test]
    fn own_free_and_outside_files() {
        let (st, _, _) = state_with_two();
        assert_eq!(
            d(&st, "s-a", "/w/a.rs", true, Enforce::RequireClaim),
            Decision::Allow
        );
        assert_eq!(
            d(&st, "s-b", "/w/free.rs", true, Enforce::AutoClaim),
            Decision::Claim
        );
        // block-overlap claims like auto-claim (other worktrees' changes are the service's).
        assert_eq!(
            d(&st, "s-b", "/w/free.rs", true, Enforce::BlockOverlap),
            Decision::Claim
        );
        assert_eq!(
            d(&st, "s-b", "/tmp/scratch", false, Enforce::AutoClaim),
            Decision::Allow,
            "never claimed outside the project"
        );
        assert_eq!(
            d(&st, "s-b", "/tmp/scratch", false, Enforce::RequireClaim),
            Decision::Allow
        );
        assert_eq!(
            d(&st, "s-b", "/w/free.rs", true, Enforce::BlockForeign),
            Decision::Allow
        );
        assert!(matches!(
            d(&st, "s-b", "/w/free.rs", true, Enforce::RequireClaim),
            Decision::Ask(_)
        ));
    }

    #[test]
    fn dead_holder_is_left_to_a_person() {
        let (st, _, _) = state_with_two();
        let later = Timestamp::parse("2026-01-17T12:00:00Z").unwrap();
        let b = session_instance(&st, "s-b");
        match decide(
            &st,
            b,
            "/w/a.rs",
            true,
            Enforce::AutoClaim,
            later,
            &AssumeAlive,
        ) {
            Decision::Ask(m) => assert!(m.contains("looks gone") && m.contains("120 min")),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn one_held_file_refuses_the_whole_call() {
        let (v, claim) = combine(&[
            ("/w/x".into(), Decision::Claim),
            ("/w/a.rs".into(), Decision::Deny("held".into())),
            ("/w/y".into(), Decision::Allow),
        ]);
        let v = v.unwrap();
        assert_eq!(v.permission, Permission::Deny);
        assert!(v.reason.unwrap().contains("1 of the 3 files"));
        assert!(claim.is_empty());
        let (v, claim) = combine(&[
            ("/w/x".into(), Decision::Claim),
            ("/w/y".into(), Decision::Allow),
        ]);
        assert!(v.is_none());
        assert_eq!(claim, vec!["/w/x".to_string()]);
    }

    #[test]
    fn session_context_lists_others_and_their_files() {
        let (st, a, b) = state_with_two();
        let me = st.instance(&b).unwrap();
        let c = session_context(&st, me, Enforce::AutoClaim, false, now(), &AssumeAlive);
        assert!(c.contains(&format!("registered as {b}")), "{c}");
        assert!(
            c.contains(&format!(
                "{a} (Claude Code session, task \"Refactor auth\") holds a.rs"
            )),
            "{c}"
        );
    }
}
