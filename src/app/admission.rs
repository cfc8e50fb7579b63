//! `enforce = "require-verified"`: a session whose agent's hooks are proven not to bite here
//! (its live check failed for that agent version in this project: `unenforced`) may not claim,
//! on any face (the CLI, `op`, the MCP server, the hook's own auto-claim). The verdicts live in
//! the integrations domain and the claim in the protocol, which knows no integration: this is
//! the [`Admission`] the faces hand the protocol's claim, which asks it under the lock about the
//! acting instance.
//!
//! A session no live check saw at its version (`unverified`: a new version, or none known)
//! still claims, with a warning: the verdict says nothing against it, and refusing it would stop
//! every session at each agent upgrade until someone ran `conductor integrate` again. Sessions
//! that name no agent conductor has hooks for (`conductor start`, an MCP server's own `mcp`
//! instance) are not asked.

use std::cell::OnceCell;

use crate::config::{Config, Enforce};
use crate::error::{Error, Reason, Result};
use crate::integrations::verdicts::{self, Enforcement, LiveChecks};
use crate::protocol::Instance;
use crate::protocol::ops::Admission;
use crate::store::Store;
use crate::time::Timestamp;

/// Who may claim, by the live checks' verdicts (under require-verified; anyone otherwise).
pub struct LiveChecked<'a> {
    store: &'a Store,
    now: Timestamp,
    required: bool,
    /// `live-checks.json`, read the first time an instance that names an agent asks.
    checks: OnceCell<LiveChecks>,
}

/// The admission `config` asks for: nothing is read unless `enforce` is require-verified and an
/// instance that names its agent claims.
pub fn admission<'a>(store: &'a Store, now: Timestamp, config: &Config) -> LiveChecked<'a> {
    LiveChecked {
        store,
        now,
        required: config.enforce == Some(Enforce::RequireVerified),
        checks: OnceCell::new(),
    }
}

impl LiveChecked<'_> {
    /// The enforcement of `inst`, when it names its agent and require-verified is on.
    fn enforcement(&self, inst: &Instance) -> Result<Option<Enforcement>> {
        // Only an agent conductor has hooks for has live checks (not an MCP server's own
        // instance, `mcp`).
        let hooked = |a: &&str| {
            <crate::hooks::Agent as clap::ValueEnum>::value_variants()
                .iter()
                .any(|h| h.name() == *a)
        };
        let Some(agent) = inst
            .agent
            .as_deref()
            .filter(|_| self.required)
            .filter(hooked)
        else {
            return Ok(None);
        };
        if self.checks.get().is_none() {
            // Asked under the claim's lock: the verdicts are written under the same one.
            let read = verdicts::read_in_transaction(self.store, self.now)?;
            let _ = self.checks.set(read);
        }
        let checks = self.checks.get().expect("read above");
        Ok(Some(checks.of(
            agent,
            inst.agent_version.as_deref(),
            &inst.working_directory,
        )))
    }
}

impl Admission for LiveChecked<'_> {
    fn admit(&self, inst: &Instance) -> Result<Vec<String>> {
        let Some(e) = self.enforcement(inst)? else {
            return Ok(Vec::new());
        };
        let agent = inst.agent.as_deref().unwrap_or("agent");
        let who = match &inst.agent_version {
            Some(v) => format!("{agent} {v}"),
            None => agent.to_string(),
        };
        match e {
            Enforcement::Enforced => Ok(Vec::new()),
            Enforcement::Unverified => Ok(vec![format!(
                "{who}'s hooks have not been live-checked in {} (enforce is require-verified; an unverified session may still claim): `conductor integrate {agent}` checks them",
                inst.working_directory
            )]),
            Enforcement::Unenforced(why) => Err(refused(inst, &who, agent, &why)),
        }
    }
}

/// The refusal of a claim by `inst`, whose agent (`who`: name and version) failed its live
/// check: one line naming them and the check's reason, and what to do.
pub fn refused(inst: &Instance, who: &str, agent: &str, why: &str) -> Error {
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    let why = crate::text::printable_max(why.trim_end_matches([':', '.', ' ']), 200);
    Error::invalid(
        Reason::UnenforcedSession,
        format!(
            "session {} may not claim: enforce is require-verified and {who}'s hooks failed their live check here ({why})",
            inst.id
        ),
    )
    .with_hint(format!(
        "fix what the live check names, then `conductor integrate {agent}` checks again; or set \"enforce\" to \"auto-claim\" in config.json to let it claim anyway"
    ))
}

/// The enforcement of every instance a hook registered (it names its agent), from the live
/// checks' verdicts kept in the home, as `status`, `top` and the dashboard show it. Nothing is
/// read when no instance names an agent.
pub fn enforcement_of(
    store: &Store,
    now: Timestamp,
    state: &crate::protocol::State,
) -> std::collections::BTreeMap<String, Enforcement> {
    let mut out = std::collections::BTreeMap::new();
    if state.instances.iter().all(|i| i.agent.is_none()) {
        return out;
    }
    let checks = verdicts::read(store, now).unwrap_or_default();
    for i in &state.instances {
        if let Some(agent) = &i.agent {
            out.insert(
                i.id.clone(),
                checks.of(agent, i.agent_version.as_deref(), &i.working_directory),
            );
        }
    }
    out
}
