//! `conductor doctor [--repair]`: explain what is wrong with the files in the home, and fix it.

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::app::doctor::{self, Examination};
use conductor::error::Reason;
use conductor::error::Result;
use conductor::health::Tool;

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

/// The examination, as doctor shows it.
struct DoctorReport(Examination);

impl Report for DoctorReport {
    fn to_json(&self) -> serde_json::Value {
        let status = self.0.status();
        let sandbox: Vec<serde_json::Value> = self
            .0
            .sandbox
            .iter()
            .map(|g| json!({"guarantee": g.name, "holds": g.holds, "detail": g.detail}))
            .collect();
        json!({"status": status, "backend": self.0.backend, "findings": self.0.findings, "documents": self.0.documents, "integrations": self.0.integrations, "sandbox": sandbox, "tools": self.0.tools})
    }
    fn to_text(&self) -> String {
        let mut lines: Vec<String> = self
            .0
            .findings
            .iter()
            .map(|f| {
                let mark = if f.ok {
                    "ok "
                } else if self.0.repaired {
                    "FIXED"
                } else {
                    "BAD"
                };
                let mut s = format!("{mark:<5} {}: {}", f.file, f.detail);
                if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                    s.push_str(&format!(
                        "\n      {}: {r}",
                        if self.0.repaired { "repaired" } else { "fix" }
                    ));
                }
                s
            })
            .collect();
        for f in self.0.documents.iter().chain(&self.0.integrations) {
            let mark = if f.ok { "ok " } else { "BAD" };
            lines.push(format!("{mark:<5} {}: {}", f.file, f.detail));
            if let Some(r) = f.repair.as_ref().filter(|_| !f.ok) {
                lines.push(format!("      fix: {r}"));
            }
        }
        for g in &self.0.sandbox {
            let mark = if g.holds { "yes" } else { "no" };
            lines.push(format!("{mark:<5} sandbox: {}: {}", g.name, g.detail));
        }
        lines.extend(tool_lines(&self.0.tools));
        lines.push(if self.0.unavailable {
            "The shared store is unavailable; nothing was changed.".into()
        } else if self.0.healthy() {
            "Everything is in order.".into()
        } else if self.0.repaired {
            "Repaired. Nothing was deleted: the originals are kept beside the rebuilt files.".into()
        } else {
            "Problems found; nothing was changed. Run `conductor doctor --repair` to fix them."
                .into()
        });
        lines.join("\n")
    }
    fn exit_code(&self) -> u8 {
        if self.0.unavailable {
            return 11;
        }
        if !self.0.integrations_ok() {
            return 1;
        }
        if self.0.healthy() || self.0.repaired {
            0
        } else {
            1
        }
    }
}

/// Run `doctor`.
/// `missing_home`: the home does not exist yet (`ctx` holds an empty scratch one instead).
pub fn run(ctx: &Ctx, args: DoctorArgs, missing_home: Option<&std::path::Path>) -> Result<u8> {
    let examined = match ctx.store.backend().cluster() {
        Some(_) if args.repair => {
            return Err(conductor::error::Error::invalid(
                Reason::InvalidInput,
                "--repair rewrites a file home's files; with a shared store doctor only checks the cluster and its documents (run it without --repair)",
            ));
        }
        Some(r) => doctor::examine_remote(&ctx.store, ctx.now, r),
        None => doctor::examine(&ctx.store, ctx.now, args.repair, missing_home)?,
    };
    print(ctx.out, &DoctorReport(examined))
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
