//! `conductor cleanup [--max-age-minutes 60] [--instance ID]`: retire orphaned instances.

use serde_json::json;

use super::{Ctx, Report};
use conductor::error::Result;
use conductor::protocol::ops::Orphan;
use conductor::protocol::request::CleanupRequest;
use conductor::protocol::sessions;

/// Remove orphans.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "An orphan has had no heartbeat for --max-age-minutes, or recorded an owner \
process on this host that no longer exists. Each is written to history.jsonl with outcome `orphaned` \
and its claims are released."
)]
pub struct CleanupArgs {
    /// Heartbeat age that makes an instance an orphan [default: config.json's
    /// default_max_age_minutes, else 60].
    #[arg(long, value_name = "MINUTES")]
    pub max_age_minutes: Option<u64>,
    /// Retire this one instance now, whatever its age (for a session you know is gone).
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
}

impl CleanupArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> CleanupRequest {
        CleanupRequest {
            max_age_minutes: self.max_age_minutes,
            instance_id: self.instance,
        }
    }
}

/// The orphans removed.
pub struct Cleaned {
    pub orphans: Vec<Orphan>,
}

impl Report for Cleaned {
    fn to_json(&self) -> serde_json::Value {
        let ids: Vec<&str> = self.orphans.iter().map(|o| o.id.as_str()).collect();
        json!({"status": "ok", "orphaned": ids, "message": format!("Cleaned up {} orphaned instances", ids.len())})
    }
    fn to_text(&self) -> String {
        let mut s = format!("Cleaned up {} orphaned instances", self.orphans.len());
        for o in &self.orphans {
            s.push_str(&format!("\n  {}: {}", o.id, o.why));
        }
        s
    }
}

/// Run `cleanup`.
pub fn execute(ctx: &Ctx, req: CleanupRequest) -> Result<Box<dyn Report>> {
    let orphans = sessions::cleanup(&ctx.store, ctx.now, &req)?;
    Ok(Box::new(Cleaned { orphans }))
}
