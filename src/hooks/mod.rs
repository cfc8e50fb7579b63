//! Pure decision logic for agent hooks (`conductor hook claude`): which instance belongs to a
//! session, and whether an edit is allowed, blocked, or claims the file first. No I/O and no
//! clock: the command in `commands/hook.rs` reads the state lock-free, asks [`decide`], and only
//! takes the lock when the answer is [`Decision::Claim`] (or a heartbeat is due).

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::ops::{Liveness, is_alive};
use crate::protocol::{Enforce, Instance, State};
use crate::time::Timestamp;

/// Tools whose PreToolUse the hook checks: they write the file named in their input.
pub const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// The task of a session registered by a hook when the project names none.
pub const DEFAULT_TASK: &str = "interactive session";

/// Minutes after which an editing session's heartbeat is refreshed by the PreToolUse hook.
pub const HEARTBEAT_REFRESH_MINUTES: u64 = 5;

/// The fields conductor reads from a Claude Code hook's stdin; everything else is ignored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub hook_event_name: String,
    /// SessionStart: startup, resume, clear or compact.
    #[serde(default)]
    pub source: Option<String>,
    /// SessionEnd: clear, logout, prompt_input_exit or other.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<Value>,
}

impl Payload {
    /// The file an edit tool writes: `file_path`, or `notebook_path` for NotebookEdit.
    pub fn target_file(&self) -> Option<&str> {
        let input = self.tool_input.as_ref()?;
        input
            .get("file_path")
            .or_else(|| input.get("notebook_path"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// True for PreToolUse of a tool that edits files.
    pub fn is_edit(&self) -> bool {
        self.tool_name
            .as_deref()
            .is_some_and(|t| EDIT_TOOLS.contains(&t))
    }
}

/// The live instance a Claude Code session registered, by its session id.
pub fn session_instance<'a>(st: &'a State, session_id: &str) -> Option<&'a Instance> {
    if session_id.is_empty() {
        return None;
    }
    st.instances
        .iter()
        .find(|i| i.session_id.as_deref() == Some(session_id))
}

/// What the PreToolUse hook does with one edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Let the edit through silently.
    Allow,
    /// Let the edit through, with a warning on stderr.
    Warn(String),
    /// Refuse the edit (exit 2) with this one-line reason for the agent.
    Block(String),
    /// The file is free and `enforce` is auto-claim: claim it for the session, then allow.
    Claim,
}

/// Decide about an edit of `file` (normalized) by the session whose instance is `me` (None if
/// the session never registered).
pub fn decide(
    st: &State,
    me: Option<&Instance>,
    file: &str,
    enforce: Enforce,
    now: Timestamp,
    live: &dyn Liveness,
) -> Decision {
    if enforce == Enforce::Off {
        return Decision::Allow;
    }
    let my_id = me.map(|m| m.id.as_str());
    let holder = st.global_claims.get(file).and_then(|h| st.instance(h));
    if let Some(h) = holder {
        if Some(h.id.as_str()) == my_id {
            return Decision::Allow;
        }
        if is_alive(h, now, live) {
            return Decision::Block(blocked_message(file, h, my_id, now));
        }
        let stale = format!(
            "{file} is claimed by {} ({}) but that instance looks dead (last heartbeat {} min ago); \
             allowing the edit. Run `conductor cleanup` to reap it.",
            h.id,
            h.task,
            h.last_heartbeat.minutes_until(now)
        );
        return match enforce {
            Enforce::RequireClaim => Decision::Block(format!(
                "BLOCKED: enforce is require-claim and {file} is still claimed by {} (looks dead: no heartbeat for {} min). \
                 Take it over with: conductor claim{} --force \"holder is dead\" {file}",
                h.id,
                h.last_heartbeat.minutes_until(now),
                instance_flag(my_id)
            )),
            _ => Decision::Warn(stale),
        };
    }
    match enforce {
        Enforce::AutoClaim => Decision::Claim,
        Enforce::BlockForeign | Enforce::Off => Decision::Allow,
        Enforce::RequireClaim => Decision::Block(match my_id {
            Some(id) => format!(
                "BLOCKED: enforce is require-claim and this session ({id}) has not claimed {file}. Claim it first: conductor claim --instance {id} {file}"
            ),
            None => format!(
                "BLOCKED: enforce is require-claim and this session is not registered with conductor. Register and claim first: \
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

/// The one-line reason an edit of a file held by a live instance is refused.
pub fn blocked_message(
    file: &str,
    holder: &Instance,
    my_id: Option<&str>,
    now: Timestamp,
) -> String {
    format!(
        "BLOCKED: {file} is claimed by {} (task: \"{}\", project {}, started {} min ago). Coordinate with that session \
         (`conductor status`) or wait until it releases the file; a human can take it over with: conductor claim{} --force \"WHY\" {file}",
        holder.id,
        holder.task,
        holder.project,
        holder.started_at.minutes_until(now),
        instance_flag(my_id)
    )
}

/// True when the session's heartbeat is old enough that an edit should refresh it.
pub fn heartbeat_due(me: &Instance, now: Timestamp) -> bool {
    me.last_heartbeat.minutes_until(now) >= HEARTBEAT_REFRESH_MINUTES
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

    #[test]
    fn foreign_live_holder_blocks_in_every_mode_but_off() {
        let (st, a, _) = state_with_two();
        let me = session_instance(&st, "s-b");
        for mode in [
            Enforce::AutoClaim,
            Enforce::BlockForeign,
            Enforce::RequireClaim,
        ] {
            match decide(&st, me, "/w/a.rs", mode, now(), &AssumeAlive) {
                Decision::Block(m) => {
                    assert!(
                        m.contains(&a) && m.contains("Refactor auth") && m.contains("--force"),
                        "{m}"
                    );
                    assert!(!m.contains('\n'));
                }
                d => panic!("{mode:?}: {d:?}"),
            }
        }
        assert_eq!(
            decide(&st, me, "/w/a.rs", Enforce::Off, now(), &AssumeAlive),
            Decision::Allow
        );
    }

    #[test]
    fn own_and_free_files() {
        let (st, _, _) = state_with_two();
        let a = session_instance(&st, "s-a");
        let b = session_instance(&st, "s-b");
        assert_eq!(
            decide(
                &st,
                a,
                "/w/a.rs",
                Enforce::RequireClaim,
                now(),
                &AssumeAlive
            ),
            Decision::Allow
        );
        assert_eq!(
            decide(
                &st,
                b,
                "/w/free.rs",
                Enforce::AutoClaim,
                now(),
                &AssumeAlive
            ),
            Decision::Claim
        );
        assert_eq!(
            decide(
                &st,
                b,
                "/w/free.rs",
                Enforce::BlockForeign,
                now(),
                &AssumeAlive
            ),
            Decision::Allow
        );
        assert!(matches!(
            decide(
                &st,
                b,
                "/w/free.rs",
                Enforce::RequireClaim,
                now(),
                &AssumeAlive
            ),
            Decision::Block(_)
        ));
    }

    #[test]
    fn dead_holder_warns_instead_of_blocking() {
        let (st, _, _) = state_with_two();
        let later = Timestamp::parse("2026-01-17T12:00:00Z").unwrap();
        let b = session_instance(&st, "s-b");
        assert!(matches!(
            decide(&st, b, "/w/a.rs", Enforce::AutoClaim, later, &AssumeAlive),
            Decision::Warn(_)
        ));
    }

    #[test]
    fn payload_target_file() {
        let p: Payload = serde_json::from_str(r#"{"hook_event_name":"PreToolUse","tool_name":"NotebookEdit","tool_input":{"notebook_path":"/w/n.ipynb","new_source":"x"}}"#).unwrap();
        assert!(p.is_edit());
        assert_eq!(p.target_file(), Some("/w/n.ipynb"));
    }
}
