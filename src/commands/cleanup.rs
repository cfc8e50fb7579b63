//! `conductor cleanup [--max-age-minutes 60] [--instance ID]`: retire orphaned instances.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Ctx, Report};
use crate::error::Result;
use crate::protocol::ops::{self, DEFAULT_MAX_AGE_MINUTES, Orphan};
use crate::runtime::ProcessTable;

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

/// The `cleanup` operation input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanupRequest {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_minutes"
    )]
    pub max_age_minutes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

/// `max_age_minutes` as a u64. The schema's `integer` admits `1e2` and integers beyond u64;
/// serde's own error for those does not say which field is wrong.
fn whole_minutes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    n.as_u64().map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "max_age_minutes must be a whole number of minutes written without a fraction or \
             exponent, at most {} (got {n})",
            u64::MAX
        ))
    })
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
        None => crate::config::read(&ctx.store)?
            .default_max_age_minutes
            .unwrap_or(DEFAULT_MAX_AGE_MINUTES),
    };
    if let Some(id) = &req.instance_id
        && !crate::protocol::is_valid_instance_id(id)
    {
        ops::resolve_instance(
            &crate::protocol::read(&ctx.store, ctx.now)?,
            Some(id),
            std::path::Path::new("/"),
            None,
        )?;
    }
    let now = ctx.now;
    let live = ProcessTable::new();
    let orphans = crate::protocol::transact(&ctx.store, now, |st, fx| {
        ops::drop_dead_waiters(st, &crate::runtime::waiter_is_dead, now, fx);
        ops::cleanup(st, max_age, req.instance_id.as_deref(), now, &live, fx)
    })?;
    Ok(Box::new(Cleaned { orphans }))
}
