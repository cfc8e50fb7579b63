//! `conductor workflow validate FILE`: every problem of a template, with its JSON path.

use std::path::PathBuf;

use serde_json::json;

use super::{Ctx, emit};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::workflows::template;

/// Check a workflow template file.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Checks the file against schemas/workflow-template.schema.json, then \
that the initial state exists, every `next` target names a state (or `done`), every state can be \
reached from the initial state, and every state has a path to `done`. Each problem is printed with \
its JSON path, like `/states/build/next/1: `next` names an unknown state `verfy``.\n\n\
Exit 0 when the template is valid, 2 when it has problems."
)]
pub struct ValidateArgs {
    /// The template file.
    pub file: PathBuf,
}

/// Run `workflow validate`.
pub fn run(ctx: &Ctx, args: ValidateArgs) -> Result<u8> {
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        Error::invalid(
            Reason::UnknownTemplate,
            format!("cannot read `{}`: {e}", args.file.display()),
        )
    })?;
    match template::load_text(&text) {
        Ok(t) => emit(
            ctx,
            json!({"status": "ok", "file": args.file, "name": t.name,
                   "states": t.states.keys().collect::<Vec<_>>(), "problems": []}),
            format!(
                "{}: valid ({} states: {})",
                args.file.display(),
                t.states.len(),
                t.states.keys().cloned().collect::<Vec<_>>().join(" -> ")
            ),
            0,
        ),
        Err(problems) => {
            let mut text = format!(
                "{}: {} problem{}",
                args.file.display(),
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            for p in &problems {
                text.push_str(&format!("\n  {p}"));
            }
            emit(
                ctx,
                json!({"status": "invalid", "file": args.file, "problems": problems}),
                text,
                2,
            )
        }
    }
}
