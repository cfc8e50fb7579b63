//! `conductor heartbeat`: record that an instance is alive.

use serde_json::json;

use super::{Ctx, Report};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::request::HeartbeatRequest;
use conductor::protocol::sessions;
use conductor::time::Timestamp;

/// Record a heartbeat.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Instances with no heartbeat for an hour are orphans that `cleanup` removes. \
Claims and releases count as heartbeats too. Long tasks should heartbeat every 5-10 minutes \
(`conductor run` does it for you)."
)]
pub struct HeartbeatArgs {
    /// Also record this process as the instance's owner (see `start --owner-pid`).
    #[arg(long, env = "CONDUCTOR_OWNER_PID", value_name = "PID")]
    pub owner_pid: Option<u32>,
    #[command(flatten)]
    pub instance: InstanceArg,
}

impl HeartbeatArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> HeartbeatRequest {
        HeartbeatRequest {
            instance_id: self.instance.id(),
            owner_pid: self.owner_pid,
        }
    }
}

/// The heartbeat was recorded.
pub struct Beat {
    pub instance_id: String,
    pub at: Timestamp,
}

impl Report for Beat {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "instance_id": self.instance_id, "last_heartbeat": self.at, "message": "Heartbeat recorded."})
    }
    fn to_text(&self) -> String {
        format!("Heartbeat recorded for {} at {}", self.instance_id, self.at)
    }
}

/// Run `heartbeat`.
pub fn execute(ctx: &Ctx, req: HeartbeatRequest) -> Result<Box<dyn Report>> {
    let instance_id = sessions::heartbeat(&ctx.store, ctx.now, &ctx.caller(), &req)?;
    Ok(Box::new(Beat {
        instance_id,
        at: ctx.now,
    }))
}
