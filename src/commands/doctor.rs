//! `conductor doctor [--repair]`: explain what is wrong with the files in the home, and fix it.

use serde_json::json;

use super::{Ctx, Report, print};
use crate::error::Result;
use crate::store::doctor::{self, Finding};

/// Check (and repair) the home.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Checks status.json (JSON, version, schema, claim consistency), history.jsonl \
and conflicts.log line by line, sprint.json and config.json, and leftover temp files. With --repair, a bad \
file is kept under <name>.corrupt-<timestamp> (never deleted) and replaced: status.json by a state rebuilt \
from every instance that can be read, a ledger by its valid lines.\n\nExit status: 0 healthy or repaired, \
1 problems found."
)]
pub struct DoctorArgs {
    /// Move bad files aside and rebuild them.
    #[arg(long)]
    pub repair: bool,
}

struct DoctorReport {
    findings: Vec<Finding>,
    repaired: bool,
}

impl DoctorReport {
    fn healthy(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
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
        json!({"status": status, "findings": self.findings})
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
        lines.push(if self.healthy() {
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
        if self.healthy() || self.repaired {
            0
        } else {
            1
        }
    }
}

/// Run `doctor`.
pub fn run(ctx: &Ctx, args: DoctorArgs) -> Result<u8> {
    let findings = doctor::run(&ctx.store, ctx.now, args.repair)?;
    print(
        ctx.out,
        &DoctorReport {
            findings,
            repaired: args.repair,
        },
    )
}
