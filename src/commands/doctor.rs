//! `conductor doctor [--repair]`: explain what is wrong with the files in the home, and fix it.

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Reason;
use conductor::error::Result;
use conductor::health::{Finding, Tool, Tools};
use conductor::protocol::doctor;

/// Check (and repair) the home.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Checks status.json (JSON, version, schema, claim consistency), history.jsonl \
and conflicts.log line by line, sprint.json and config.json, the agent runtime's, the workflows' and \
the queue's documents, a commit left unfinished by a crashed writer, and leftover temp files. With --repair, a bad \
file is kept under <name>.corrupt-<timestamp> (never deleted) and replaced: status.json by a state rebuilt \
from every instance that can be read, a ledger by its valid lines.\n\nIt also checks the agent integrations \
(`conductor integrate`) in this directory and in ~: a hook whose conductor binary is gone would silently \
switch coordination off. Fix those by running `conductor integrate AGENT` again (--repair leaves agent \
settings alone).\n\nLast, it runs a real sandbox (bubblewrap, as `queue run --runner sandbox` would) with a probe that \
tries each escape, and prints one line per sandbox guarantee saying whether it holds on this machine (informational: \
it does not change the exit status).\n\nThen the external programs the features run: bubblewrap (the sandbox runner), jq (the \
protocol's shell recipes), the CLI of each agent whose hooks are installed, and the agent commands of live queue \
jobs and workflow sessions; each line says where the program is, or what its absence disables (informational too). \
With a shared store (etcd), the cluster's reachability and health come first (exit 11 when it cannot be reached).\n\nExit status: 0 healthy or repaired, 1 problems found."
)]
pub struct DoctorArgs {
    /// Move bad files aside and rebuild them.
    #[arg(long)]
    pub repair: bool,
}

struct DoctorReport {
    findings: Vec<Finding>,
    /// The other domains' documents: reported, never rewritten (conductor does not overwrite a
    /// file it cannot interpret).
    documents: Vec<Finding>,
    /// Agent integrations: reported, never repaired here.
    integrations: Vec<Finding>,
    repaired: bool,
    /// Where state lives: the home, or the shared store with its cluster's health.
    backend: serde_json::Value,
    /// The shared store could not be reached (exit 11).
    unavailable: bool,
    /// Which guarantees of the queue's sandbox runner hold on this machine (reported, never
    /// a problem of the home).
    sandbox: Vec<conductor::queue::sandbox::Guarantee>,
    /// The external programs the features need (reported, never a problem of the home).
    tools: Vec<Tool>,
}

impl DoctorReport {
    fn healthy(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }
    fn integrations_ok(&self) -> bool {
        self.integrations
            .iter()
            .chain(&self.documents)
            .all(|f| f.ok)
    }
}

impl Report for DoctorReport {
    fn to_json(&self) -> serde_json::Value {
        let status = if self.healthy() {
            "ok"
        } else if self.repaired {
            "repaired"
        } else {
            "problems"
        };
        let status = if self.integrations_ok() {
            status
        } else {
            "problems"
        };
        let status = if self.unavailable {
            "unavailable"
        } else {
            status
        };
        let sandbox: Vec<serde_json::Value> = self
            .sandbox
            .iter()
            .map(|g| json!({"guarantee": g.name, "holds": g.holds, "detail": g.detail}))
            .collect();
        json!({"status": status, "backend": self.backend, "findings": self.findings, "documents": self.documents, "integrations": self.integrations, "sandbox": sandbox, "tools": self.tools})
    }
    fn to_text(&self) -> String {
        let mut lines: Vec<String> = self
            .findings
            .iter()
            .map(|f| {
                let mark = if f.ok {
                    "ok "
                } else if self.repaired {
                    "FIXED"
                } else {
                    "BAD"
                };
                let mut s = format!("{mark:<5} {}: {}", f.file, f.detail);
                if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                    s.push_str(&format!(
                        "\n      {}: {r}",
                        if self.repaired { "repaired" } else { "fix" }
                    ));
                }
                s
            })
            .collect();
        for f in self.documents.iter().chain(&self.integrations) {
            let mark = if f.ok { "ok " } else { "BAD" };
            lines.push(format!("{mark:<5} {}: {}", f.file, f.detail));
            if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                lines.push(format!("      fix: {r}"));
            }
        }
        for g in &self.sandbox {
            let mark = if g.holds { "yes" } else { "no" };
            lines.push(format!("{mark:<5} sandbox: {}: {}", g.name, g.detail));
        }
        lines.extend(tool_lines(&self.tools));
        lines.push(if self.unavailable {
            "The shared store is unavailable; nothing was changed.".into()
        } else if self.healthy() {
            "Everything is in order.".into()
        } else if self.repaired {
            "Repaired. Nothing was deleted: the originals are kept beside the rebuilt files.".into()
        } else {
            "Problems found; nothing was changed. Run `conductor doctor --repair` to fix them."
                .into()
        });
        lines.join("\n")
    }
    fn exit_code(&self) -> u8 {
        if self.unavailable {
            return 11;
        }
        if !self.integrations_ok() {
            return 1;
        }
        if self.healthy() || self.repaired {
            0
        } else {
            1
        }
    }
}

/// Run `doctor`.
/// `missing_home`: the home does not exist yet (`ctx` holds an empty scratch one instead).
pub fn run(ctx: &Ctx, args: DoctorArgs, missing_home: Option<&std::path::Path>) -> Result<u8> {
    if let Some(r) = ctx.store.backend().cluster() {
        if args.repair {
            return Err(conductor::error::Error::invalid(
                Reason::InvalidInput,
                "--repair rewrites a file home's files; with a shared store doctor only checks the cluster and its documents (run it without --repair)",
            ));
        }
        return run_remote(ctx, r);
    }
    let mut findings = if args.repair {
        doctor::repair(&ctx.store, ctx.now)?
    } else {
        doctor::checks(&ctx.store, ctx.now)?
    };
    let home = missing_home.unwrap_or(ctx.store.home().dir()).to_path_buf();
    if let Some(dir) = missing_home {
        // The scratch home's own findings say nothing about the real one: only that it is
        // missing, which is fine, and whether it can be created.
        let parent = dir.ancestors().skip(1).find(|a| a.exists());
        let writable = parent.is_some_and(|p| {
            tempfile::Builder::new()
                .prefix(".conductor-probe-")
                .tempfile_in(p)
                .is_ok()
        });
        findings = vec![Finding {
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
            repair: (!writable).then(|| {
                "point CONDUCTOR_HOME at a directory on a local, writable disk".to_string()
            }),
        }];
    }
    let (integrations, integrated) = conductor::integrations::checks();
    print(
        ctx.out,
        &DoctorReport {
            findings,
            documents: documents(ctx),
            tools: tools(ctx, &integrated),
            integrations,
            repaired: args.repair,
            backend: json!({"kind": "files", "home": home}),
            unavailable: false,
            sandbox: conductor::queue::sandbox::guarantees(&home),
        },
    )
}

/// `doctor` against a shared store: the cluster's health and revision, then every document.
fn run_remote(ctx: &Ctx, r: &conductor::store::etcd::Etcd) -> Result<u8> {
    let (finding, mut backend, unavailable) = conductor::health::cluster(r);
    let (security, detail) = conductor::health::store_security(r);
    backend["security"] = detail;
    let documents = if unavailable {
        Vec::new()
    } else {
        let mut d = documents(ctx);
        d.insert(0, doctor::remote(&ctx.store, ctx.now));
        d
    };
    let (integrations, integrated) = conductor::integrations::checks();
    print(
        ctx.out,
        &DoctorReport {
            findings: vec![finding, security],
            documents,
            tools: tools(ctx, &integrated),
            integrations,
            repaired: false,
            backend,
            unavailable,
            sandbox: conductor::queue::sandbox::guarantees(ctx.store.home().dir()),
        },
    )
}

/// What every domain reports about its own documents, in the order doctor prints them.
fn documents(ctx: &Ctx) -> Vec<Finding> {
    let (store, now) = (&ctx.store, ctx.now);
    let mut out = conductor::agents::checks::documents(store, now);
    out.extend(conductor::workflows::checks::checks(store, now));
    out.extend(conductor::queue::checks::checks(store, now));
    out.extend(conductor::agents::checks::run_files(store));
    out
}

/// The external programs the domains' features run (`hooked`: the agents whose hooks are
/// installed), each once.
fn tools(ctx: &Ctx, hooked: &[conductor::hooks::Agent]) -> Vec<Tool> {
    let mut t = Tools::default();
    conductor::queue::checks::tools(&mut t);
    conductor::protocol::doctor::tools(&mut t);
    conductor::integrations::tools(hooked, &mut t);
    for c in conductor::queue::checks::agent_commands(&ctx.store, ctx.now) {
        t.agent_command("queue jobs", &c);
    }
    for c in conductor::workflows::checks::agent_commands(&ctx.store, ctx.now) {
        t.agent_command("workflow sessions", &c);
    }
    t.0
}

/// The text lines of the tools: `ok` or `MISSING`, the tool, and what it is for or what its
/// absence disables.
fn tool_lines(tools: &[Tool]) -> Vec<String> {
    tools
        .iter()
        .map(|t| match &t.path {
            Some(p) => format!("ok    tool {}: {} ({})", t.tool, p.display(), t.needed_for),
            None => format!(
                "MISSING tool {}: not on PATH; disables {}",
                t.tool, t.missing_disables
            ),
        })
        .collect()
}
