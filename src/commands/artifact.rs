//! `conductor artifact validate [FILE|-]`: closed-world validation of structured blocks.

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::agent::Out;
use super::{Ctx, print};
use conductor::agents::artifact;
use conductor::error::Reason;
use conductor::error::{Error, IoContext, Result};

/// The artifact verbs.
#[derive(Debug, Subcommand)]
pub enum ArtifactCommand {
    /// Check an artifact's blocks; exit 0 when valid, 2 when not.
    Validate(ValidateArgs),
}

/// `artifact validate`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "A block is a line `[name]`, its content, and a line `[/name]`. Valid: \
Canopy's task, request, objective (with nested [tasks] holding `- [ ] ...` / `- [x] ...` lines), handoff, \
signal, circle, contract, skill, poll, input-card, telemetry-card, and the evidence blocks completion, \
error, evidence, files_changed, notes, plan, result, summary. Each Canopy block needs its field: task, \
request, objective, contract, input-card, telemetry-card `title:`; handoff `to:`; signal `type:`; circle \
`topic:`; skill `name:`; poll `question:`. [completion] needs non-empty text in completion, summary, \
result or evidence. Each unknown block is reported once. Code fences, markdown links and list \
checkboxes are not blocks.\n\nExit 0: valid; 2: invalid (reason `invalid_artifact`).\n\nExample:\n  \
printf '[result]\\nall 42 tests pass\\n[/result]\\n' | conductor artifact validate -"
)]
pub struct ValidateArgs {
    /// The artifact file, or `-` for stdin.
    #[arg(default_value = "-")]
    pub file: PathBuf,
}

/// Run `artifact`.
pub fn run(ctx: &Ctx, cmd: ArtifactCommand) -> Result<u8> {
    let ArtifactCommand::Validate(a) = cmd;
    let mut bytes = Vec::new();
    if a.file.as_os_str() == "-" {
        std::io::stdin()
            .take(16 * 1024 * 1024)
            .read_to_end(&mut bytes)
            .ctx("read", std::path::Path::new("stdin"))?;
    } else {
        bytes = std::fs::read(&a.file).ctx("read", &a.file)?;
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::invalid(Reason::InvalidArtifact, "the artifact is not UTF-8 text"))?;
    let v = artifact::validate(&text);
    let mut lines = Vec::new();
    if v.valid {
        lines.push(format!(
            "valid: {} block(s){}",
            v.blocks.len(),
            if v.blocks.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.blocks.join(", "))
            }
        ));
    } else {
        lines.push(format!("invalid: {} error(s)", v.errors.len()));
        lines.extend(v.errors.iter().map(|e| format!("  error: {e}")));
    }
    lines.extend(v.warnings.iter().map(|w| format!("  warning: {w}")));
    let code = if v.valid { 0 } else { 2 };
    let mut j = serde_json::to_value(&v).expect("serializes");
    j["status"] = json!(if v.valid { "ok" } else { "invalid" });
    if !v.valid {
        j["reason"] = json!("invalid_artifact");
    }
    print(
        ctx.out,
        &Out {
            json: j,
            text: lines.join("\n"),
            code,
        },
    )
}
