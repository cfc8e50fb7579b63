//! The live checks' verdicts, kept in the home (`live-checks.json`): which version of which agent
//! was proven to refuse a held file, in which project (or for the user). `status`, `top` and the
//! dashboard show each hook-registered session's enforcement from them:
//! - `enforced`: the live check passed for this agent at this version, here;
//! - `unverified`: no live check for this version here yet (a new version, say);
//! - `unenforced`: the last live check for it failed (the reason is kept).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::store::{Document, Lock, Store};
use crate::time::Timestamp;

/// `live-checks.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveChecks {
    pub version: String,
    pub checks: Vec<Verdict>,
}

/// One live check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub agent: String,
    /// The agent's version on PATH when it was checked (`None`: not found).
    pub agent_version: Option<String>,
    /// The project checked (its root), or the user's home for a `--user` install.
    pub root: String,
    /// Installed for the user (`--user`): it holds in every project.
    pub user: bool,
    pub enforced: bool,
    pub detail: String,
    pub checked_at: Timestamp,
}

/// A session's enforcement, as the views show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Enforced,
    Unverified,
    Unenforced(String),
}

impl Enforcement {
    /// `enforced`, `unverified` or `unenforced`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Enforcement::Enforced => "enforced",
            Enforcement::Unverified => "unverified",
            Enforcement::Unenforced(_) => "unenforced",
        }
    }
}

impl Document for LiveChecks {
    const FILE: &'static str = "live-checks.json";
    const LOCK: Lock = Lock::Status;
    fn empty(_now: Timestamp) -> Self {
        LiveChecks {
            version: "1.0".into(),
            checks: Vec::new(),
        }
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let corrupt = |detail: String| crate::store::Error::CorruptState {
            path: path.to_path_buf(),
            detail,
        };
        let d: LiveChecks = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        if d.version != "1.0" {
            return Err(corrupt(format!("version `{}` is not 1.0", d.version)));
        }
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(self).expect("documents serialize");
        b.push(b'\n');
        b
    }
}

impl LiveChecks {
    /// The enforcement of a session of `agent` at `version` working in `dir`: the newest verdict
    /// for that agent and version whose project holds `dir` (or that was installed for the user).
    pub fn of(&self, agent: &str, version: Option<&str>, dir: &str) -> Enforcement {
        let Some(version) = version else {
            return Enforcement::Unverified;
        };
        self.checks
            .iter()
            .filter(|v| v.agent == agent && v.agent_version.as_deref() == Some(version))
            .filter(|v| v.user || Path::new(dir).starts_with(&v.root))
            .max_by_key(|v| (v.checked_at, !v.user))
            .map_or(Enforcement::Unverified, |v| {
                if v.enforced {
                    Enforcement::Enforced
                } else {
                    Enforcement::Unenforced(v.detail.clone())
                }
            })
    }
}

/// Keep what the live check `c` of `agent`'s integration in `scope` found, for the agent's
/// installed version: status, top and the dashboard then say whether each session of it is
/// enforced.
pub fn record_check(
    store: &Store,
    now: Timestamp,
    agent: crate::hooks::Agent,
    scope: &super::Scope,
    c: &super::live_check::Check,
) -> Result<()> {
    record(
        store,
        now,
        Verdict {
            agent: agent.name().to_string(),
            agent_version: crate::hooks::version::installed(agent, super::cli(agent)),
            root: scope.root.to_string_lossy().into_owned(),
            user: scope.user,
            enforced: c.enforced,
            detail: c.detail.clone(),
            checked_at: now,
        },
    )
}

/// Keep `v`, replacing the verdict for the same agent, version and project.
pub fn record(store: &Store, now: Timestamp, v: Verdict) -> Result<()> {
    store.transaction(now, &[Lock::Status], |tx| {
        let mut d: LiveChecks = tx.read()?;
        d.checks.retain(|o| {
            !(o.agent == v.agent
                && o.agent_version == v.agent_version
                && o.root == v.root
                && o.user == v.user)
        });
        d.checks.push(v.clone());
        tx.write(&d)?;
        Ok::<_, crate::Error>(())
    })
}

/// The verdicts kept (none when the file does not exist).
pub fn read(store: &Store, now: Timestamp) -> Result<LiveChecks> {
    Ok(store.read_doc(now)?)
}

/// [`read`] for a caller inside a transaction of the state (which holds the lock the verdicts
/// are written under, and finished any crashed commit when it began): the file as it is.
pub fn read_in_transaction(store: &Store, now: Timestamp) -> Result<LiveChecks> {
    let path = store.home().dir().join(<LiveChecks as Document>::FILE);
    match store.read_doc_bytes(<LiveChecks as Document>::FILE)? {
        None => Ok(LiveChecks::empty(now)),
        Some(bytes) => Ok(LiveChecks::decode(&path, &bytes)?),
    }
}
