//! The tools' arguments: one type per tool, from which both its input schema (`schemars`) and
//! the parsing of a call (`serde`) are derived, so the two cannot drift. Where a tool takes what
//! a domain request takes, the type is that request (`status`, `release`) or flattens it
//! (`claim`), so a field added to the request reaches the CLI, the HTTP API and MCP alike. The
//! rest take what only MCP offers; their limits are schemars attributes, their descriptions
//! `#[schemars(description)]` (every character is paid for by the agent, so they are few).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::MAX_WAIT_SECONDS;
use conductor::agents;
use conductor::protocol::Priority;
pub use conductor::protocol::request::{ClaimRequest, ReleaseRequest, StatusRequest as StatusArgs};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    pub task: String,
    #[serde(default)]
    pub priority: Option<Priority>,
    pub project: Option<String>,
    #[serde(rename = "override")]
    #[schemars(description = "why to proceed past the gate")]
    pub override_reason: Option<String>,
}

/// `claim`: the protocol's claim (its `instance_id` withheld: the server is the session), and
/// how long to wait for held files.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimArgs {
    #[serde(flatten)]
    pub request: ClaimRequest,
    #[schemars(range(max = MAX_WAIT_SECONDS))]
    pub wait_seconds: Option<u64>,
}

/// The outcomes a session chooses (`orphaned` and `landed` are recorded by conductor).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    Success,
    Abandoned,
    Conflict,
}

/// `done`. The outcome is read as text and then as a [`Finish`], so a wrong one is answered as
/// the CLI words it (`invalid_outcome`), not as a parse error.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DoneArgs {
    #[schemars(with = "Option<Finish>")]
    pub outcome: Option<String>,
    pub files_modified: Option<Vec<String>>,
    pub notes: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesArgs {
    #[schemars(length(min = 1))]
    pub files: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    pub after: Option<u64>,
    #[serde(default)]
    pub types: Vec<String>,
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxArgs {
    pub agent: Option<String>,
}

/// What `inbox_act` does to an item.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Act {
    Seen,
    Complete,
    Skip,
}

/// `inbox_act`. The action is read as text and then as an [`Act`], so a wrong one is answered
/// with the choices.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxActArgs {
    pub id: String,
    #[schemars(with = "Act")]
    pub action: String,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub completion_ref: Map<String, Value>,
    pub agent: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostArgs {
    pub channel: String,
    pub text: String,
    pub reply_to: Option<String>,
    pub priority: Option<agents::Priority>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DmArgs {
    pub agent: String,
    pub text: String,
    pub priority: Option<agents::Priority>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransitionArgs {
    pub target: String,
    pub summary: String,
    pub session: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArgs {
    #[serde(default)]
    pub findings: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub pending: Vec<String>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub set: Map<String, Value>,
    pub session: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitArgs {
    #[schemars(with = "Map<String, Value>")]
    pub manifest: Value,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueStatusArgs {
    pub workspace: Option<String>,
    #[serde(default)]
    pub all: bool,
}
