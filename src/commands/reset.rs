//! `conductor reset`: move status.json aside (never deleted) and start from an empty state.

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;

/// Back up and reset the state.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The old file is kept as status.json.<timestamp>.bak in the home. Works even \
when status.json is corrupt, so it is also a way out of a broken state."
)]
pub struct ResetArgs {}

struct ResetDone {
    backup: Option<String>,
}

impl Report for ResetDone {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "backup": self.backup, "message": self.to_text()})
    }
    fn to_text(&self) -> String {
        match &self.backup {
            Some(b) => format!("State reset. The previous status.json is saved as {b}"),
            None => "State reset (there was no previous status.json).".into(),
        }
    }
}

/// Run `reset`.
pub fn run(ctx: &Ctx, _args: ResetArgs) -> Result<u8> {
    let backup = conductor::protocol::reset(&ctx.store, ctx.now)?.map(|p| p.display().to_string());
    print(ctx.out, &ResetDone { backup })
}
