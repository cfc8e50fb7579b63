//! `conductor cleanup [--max-age-minutes 60] [--instance ID]`: retire orphaned instances.

use serde_json::json;

use super::{Ctx, Report};
use conductor::error::Result;
use conductor::protocol::local::ProcessTable;
use conductor::protocol::ops::{self, DEFAULT_MAX_AGE_MINUTES, Orphan};
use conductor::protocol::request::CleanupRequest;

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
    let max_age = match req.max_age_minutes {
        Some(m) => m,
        None => conductor::config::read(&ctx.store)?
            .default_max_age_minutes
            .unwrap_or(DEFAULT_MAX_AGE_MINUTES),
    };
    if let Some(id) = &req.instance_id
        && !conductor::protocol::is_valid_instance_id(id)
    {
        ops::resolve_instance(
            &conductor::protocol::read(&ctx.store, ctx.now)?,
            Some(id),
            std::path::Path::new("/"),
            None,
        )?;
    }
    let now = ctx.now;
    let live = ProcessTable::new();
    let orphans = conductor::protocol::transact(&ctx.store, now, |st, fx| {
        ops::drop_dead_waiters(st, &conductor::protocol::local::waiter_is_dead, now, fx);
        ops::cleanup(st, max_age, req.instance_id.as_deref(), now, &live, fx)
    })?;
    Ok(Box::new(Cleaned { orphans }))
}
