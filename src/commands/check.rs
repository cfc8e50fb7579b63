//! `conductor check --token N PATH`: is fencing token N still the current grant of PATH?

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::ops::TokenCheck;
use conductor::protocol::sessions;

/// Check a claim's fencing token before writing.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Every grant of a claim takes a fencing token, a number that only \
grows: `claim --json` prints it (`tokens`), and `status --json` lists each instance's \
`claim_tokens`. A script or CI step that writes files outside an agent asks before writing:\n\n  \
conductor check --token 42 src/auth.rs && ./deploy.sh\n\nExit 0: token N is the current grant of a \
claim covering PATH (the file, a directory above it, a glob that matches it). Exit 3: it is not \
(the holder was cleaned up after missing heartbeats, released, or lost the claim to --force): the \
holder it names now is printed. A process that ignores tokens can still write; this only lets a \
careful writer refuse to act as a stale holder."
)]
pub struct CheckArgs {
    /// The token the writer was given.
    #[arg(long, value_name = "N")]
    pub token: u64,
    /// The file (or directory, or glob) about to be written.
    #[arg(value_name = "PATH")]
    pub path: String,
}

struct Checked {
    key: String,
    token: u64,
    found: TokenCheck,
}

impl Report for Checked {
    fn to_json(&self) -> serde_json::Value {
        let holders: Vec<serde_json::Value> = self
            .found
            .holders
            .iter()
            .map(|(k, h, t)| json!({"claim": k, "held_by": h, "token": t}))
            .collect();
        json!({"status": if self.found.current { "ok" } else { "stale" },
               "path": self.key, "token": self.token, "current": self.found.current,
               "holders": holders, "message": self.to_text()})
    }
    fn to_text(&self) -> String {
        let now: Vec<String> = self
            .found
            .holders
            .iter()
            .map(|(k, h, t)| match t {
                Some(t) => format!("{h} holds {k} with token {t}"),
                None => format!("{h} holds {k} (no token: claimed by another program)"),
            })
            .collect();
        if self.found.current {
            format!("Token {} is current for {}.", self.token, self.key)
        } else if now.is_empty() {
            format!(
                "STALE: token {} is not current for {}: nobody holds it now.",
                self.token, self.key
            )
        } else {
            format!(
                "STALE: token {} is not current for {}: {}.",
                self.token,
                self.key,
                now.join("; ")
            )
        }
    }
    fn exit_code(&self) -> u8 {
        if self.found.current { 0 } else { 3 }
    }
}

/// Run `check`.
pub fn run(ctx: &Ctx, a: CheckArgs) -> Result<u8> {
    let (key, found) = sessions::check_token(&ctx.store, ctx.now, &ctx.caller(), &a.path, a.token)?;
    print(
        ctx.out,
        &Checked {
            key,
            token: a.token,
            found,
        },
    )
}
