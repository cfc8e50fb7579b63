//! Which instance an MCP server acts as: the agent's own session (the instance its hooks
//! registered), else `CONDUCTOR_INSTANCE_ID`, else `--instance`; with none of these, an instance
//! of its own, registered on the first call that needs one, tied to the agent's process and
//! finished when the agent goes away.

use std::path::Path;
use std::sync::Mutex;

use conductor::error::Result;
use conductor::hooks;
use conductor::protocol::State;
use conductor::protocol::ops::{self, Effect};
use conductor::time::Timestamp;

/// How the server finds its instance.
pub struct Identity {
    /// The agent's session id (`CLAUDE_CODE_SESSION_ID`), matched against the `session_id` its
    /// SessionStart hook recorded.
    pub session: Option<String>,
    /// `CONDUCTOR_INSTANCE_ID`, else `--instance`.
    pub named: Option<String>,
    /// The agent's process (our parent): the owner pid of an instance we register.
    pub owner_pid: u32,
    /// The instance this server registered itself (and so must finish), if any.
    own: Mutex<Option<String>>,
}

/// The agent a session id belongs to, for the instance's `agent` field.
const SESSION_VARS: &[(&str, &str)] = &[("CLAUDE_CODE_SESSION_ID", "claude")];

impl Identity {
    /// Read the environment (`--instance` comes last, as the issue orders them).
    pub fn from_env(explicit: Option<String>) -> Identity {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.trim().is_empty());
        let session = SESSION_VARS.iter().find_map(|(k, _)| var(k));
        Identity {
            session,
            named: var("CONDUCTOR_INSTANCE_ID").or(explicit.filter(|s| !s.is_empty())),
            owner_pid: std::os::unix::process::parent_id(),
            own: Mutex::new(None),
        }
    }

    fn agent(&self) -> &'static str {
        SESSION_VARS
            .iter()
            .find(|(k, _)| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()))
            .map(|(_, a)| *a)
            .unwrap_or("mcp")
    }

    /// The instance this server acts as in `st`, without registering one.
    pub fn current(&self, st: &State) -> Result<Option<String>> {
        if let Some(sid) = &self.session
            && let Some(i) = hooks::session_instance(st, sid)
        {
            return Ok(Some(i.id.clone()));
        }
        if let Some(id) = &self.named {
            return ops::resolve_instance(st, Some(id), Path::new("/"), None, &|_| true).map(Some);
        }
        let own = self.own.lock().expect("not poisoned").clone();
        Ok(own.filter(|id| st.instance(id).is_some()))
    }

    /// The instance this server acts as, registering its own when there is none yet.
    pub fn require(&self, st: &mut State, now: Timestamp, fx: &mut Vec<Effect>) -> Result<String> {
        if let Some(id) = self.current(st)? {
            return Ok(id);
        }
        let new = hooks::service::own_instance(self.owner_pid, self.session.clone())?;
        let id = ops::start(st, new, None, conductor::host::random_hex6, now, fx);
        if let Some(i) = st.instance_mut(&id) {
            i.agent = Some(self.agent().to_string());
        }
        *self.own.lock().expect("not poisoned") = Some(id.clone());
        Ok(id)
    }

    /// Finish the instance this server registered (the agent went away), releasing its claims.
    pub fn finish_own(&self, store: &conductor::store::Store) -> Result<()> {
        let Some(id) = self.own.lock().expect("not poisoned").take() else {
            return Ok(());
        };
        conductor::protocol::sessions::abandon(
            store,
            Timestamp::now(),
            &id,
            "the MCP client went away",
        )
    }
}
