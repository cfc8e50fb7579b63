//! `conductor doctor`'s examination: every domain's health, gathered in the order it is shown.
//! Each domain answers for its own files and invariants (`checks`); this is the one place that
//! asks them all, and the face only renders what it gets.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::Result;
use crate::health::{Finding, Tool, Tools};
use crate::queue::sandbox::Guarantee;
use crate::store::Store;
use crate::store::etcd::Etcd;
use crate::time::Timestamp;

/// What doctor found, section by section.
pub struct Examination {
    /// The home's own files (or the shared store's cluster and its security).
    pub findings: Vec<Finding>,
    /// Every domain's documents.
    pub documents: Vec<Finding>,
    /// The agent integrations here and in `~`.
    pub integrations: Vec<Finding>,
    /// Whether `findings` were repaired (`--repair`).
    pub repaired: bool,
    /// `{"kind": "files", "home": ...}`, or the cluster's.
    pub backend: Value,
    /// The shared store could not be reached: nothing else was examined.
    pub unavailable: bool,
    /// The sandbox's guarantees on this machine.
    pub sandbox: Vec<Guarantee>,
    /// The external programs the features run.
    pub tools: Vec<Tool>,
}

impl Examination {
    /// The home's own files are in order.
    pub fn healthy(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }

    /// The integrations and every domain's documents are in order.
    pub fn integrations_ok(&self) -> bool {
        self.integrations
            .iter()
            .chain(&self.documents)
            .all(|f| f.ok)
    }

    /// The verdict: `ok`, `repaired`, `problems` (a bad integration or document makes it so
    /// even after a repair), or `unavailable` (the shared store could not be reached).
    pub fn status(&self) -> &'static str {
        if self.unavailable {
            "unavailable"
        } else if !self.integrations_ok() {
            "problems"
        } else if self.healthy() {
            "ok"
        } else if self.repaired {
            "repaired"
        } else {
            "problems"
        }
    }
}

/// Examine a file home (`repair`: fix what can be fixed, keeping every original).
/// `missing_home`: the home does not exist yet (`store` is an empty scratch one instead).
pub fn examine(
    store: &Store,
    now: Timestamp,
    repair: bool,
    missing_home: Option<&Path>,
) -> Result<Examination> {
    let mut findings = if repair {
        crate::protocol::doctor::repair(store, now)?
    } else {
        crate::protocol::doctor::checks(store, now)?
    };
    let home = missing_home.unwrap_or(store.home().dir()).to_path_buf();
    if let Some(dir) = missing_home {
        // The scratch home's own findings say nothing about the real one: only that it is
        // missing, which is fine, and whether it can be created.
        findings = vec![missing(dir)];
    }
    let (integrations, integrated) = crate::integrations::checks();
    Ok(Examination {
        findings,
        documents: documents(store, now),
        tools: tools(store, now, &integrated),
        integrations,
        repaired: repair,
        backend: json!({"kind": "files", "home": home}),
        unavailable: false,
        sandbox: crate::queue::sandbox::guarantees(&home),
    })
}

/// Examine a shared store: the cluster's health and revision, then every document.
pub fn examine_remote(store: &Store, now: Timestamp, cluster: &Etcd) -> Examination {
    let (finding, mut backend, unavailable) = crate::health::cluster(cluster);
    let (security, detail) = crate::health::store_security(cluster);
    backend["security"] = detail;
    let documents = if unavailable {
        Vec::new()
    } else {
        let mut d = documents(store, now);
        d.insert(0, crate::protocol::doctor::remote(store, now));
        d
    };
    let (integrations, integrated) = crate::integrations::checks();
    Examination {
        findings: vec![finding, security],
        documents,
        tools: tools(store, now, &integrated),
        integrations,
        repaired: false,
        backend,
        unavailable,
        sandbox: crate::queue::sandbox::guarantees(store.home().dir()),
    }
}

/// A home that does not exist yet: fine when it can be created.
fn missing(dir: &Path) -> Finding {
    let parent: Option<PathBuf> = dir.ancestors().skip(1).find(|a| a.exists()).map(Into::into);
    let writable = parent.is_some_and(|p| {
        tempfile::Builder::new()
            .prefix(".conductor-probe-")
            .tempfile_in(p)
            .is_ok()
    });
    Finding {
        file: "home".into(),
        ok: writable,
        detail: if writable {
            format!(
                "{} does not exist yet: the first command that changes something (`conductor start`) creates it",
                dir.display()
            )
        } else {
            format!("{} does not exist and cannot be created", dir.display())
        },
        repair: (!writable)
            .then(|| "point CONDUCTOR_HOME at a directory on a local, writable disk".to_string()),
    }
}

/// What every domain reports about its own documents, in the order doctor prints them.
fn documents(store: &Store, now: Timestamp) -> Vec<Finding> {
    let mut out = crate::agents::checks::documents(store, now);
    out.extend(crate::workflows::checks::checks(store, now));
    out.extend(crate::queue::checks::checks(store, now));
    out.extend(crate::agents::checks::run_files(store));
    out
}

/// The external programs the domains' features run (`hooked`: the agents whose hooks are
/// installed), each once.
fn tools(store: &Store, now: Timestamp, hooked: &[crate::hooks::Agent]) -> Vec<Tool> {
    let mut t = Tools::default();
    crate::queue::checks::tools(&mut t);
    crate::protocol::doctor::tools(&mut t);
    crate::integrations::tools(hooked, &mut t);
    for c in crate::queue::checks::agent_commands(store, now) {
        t.agent_command("queue jobs", &c);
    }
    for c in crate::workflows::checks::agent_commands(store, now) {
        t.agent_command("workflow sessions", &c);
    }
    t.0
}
