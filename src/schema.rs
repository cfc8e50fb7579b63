//! The JSON Schemas in `schemas/`, compiled into Rust at build time by `jsonschema`'s
//! `validator` macro (offline: every `$ref` resolves to one of these files, nothing is fetched).
//! Inputs to `conductor op` and every state file read from disk pass through [`validate`]; the
//! agent runtime's documents are validated by `conductor doctor`.
//!
//! Compiling at build time matters: every conductor call is a process start, and building the
//! validators at run time (meta-validating the schemas, resolving references) cost more than
//! reading, checking and rewriting a 1,000-claim state.

use serde_json::Value;

/// The schema files, by name, as checked in.
pub const FILES: &[(&str, &str)] = &[
    (
        "defs.schema.json",
        include_str!("../schemas/defs.schema.json"),
    ),
    (
        "status.schema.json",
        include_str!("../schemas/status.schema.json"),
    ),
    (
        "history-entry.schema.json",
        include_str!("../schemas/history-entry.schema.json"),
    ),
    (
        "sprint.schema.json",
        include_str!("../schemas/sprint.schema.json"),
    ),
    (
        "config.schema.json",
        include_str!("../schemas/config.schema.json"),
    ),
    (
        "project-config.schema.json",
        include_str!("../schemas/project-config.schema.json"),
    ),
    (
        "op-input.schema.json",
        include_str!("../schemas/op-input.schema.json"),
    ),
    (
        "output.schema.json",
        include_str!("../schemas/output.schema.json"),
    ),
    (
        "runtime-agents.schema.json",
        include_str!("../schemas/runtime-agents.schema.json"),
    ),
    (
        "runtime-inbox.schema.json",
        include_str!("../schemas/runtime-inbox.schema.json"),
    ),
    (
        "runtime-channels.schema.json",
        include_str!("../schemas/runtime-channels.schema.json"),
    ),
    (
        "runtime-run-status.schema.json",
        include_str!("../schemas/runtime-run-status.schema.json"),
    ),
    (
        "runtime-action.schema.json",
        include_str!("../schemas/runtime-action.schema.json"),
    ),
    (
        "landing.schema.json",
        include_str!("../schemas/landing.schema.json"),
    ),
];

/// A validator generated from one checked-in schema file, resolving `defs.schema.json`.
macro_rules! from_file {
    ($name:ident, $path:literal) => {
        #[jsonschema::validator(
            path = $path,
            resources = { "https://conductor.invalid/schemas/defs.schema.json" => { path = "schemas/defs.schema.json" } }
        )]
        struct $name;
    };
}

/// A validator for one branch (`$defs/<op>`) of `op-input.schema.json`, so an error names the
/// field that is wrong rather than "matches none of the branches".
macro_rules! op_branch {
    ($name:ident, $reference:literal) => {
        #[jsonschema::validator(
            schema = $reference,
            resources = {
                "https://conductor.invalid/schemas/defs.schema.json" => { path = "schemas/defs.schema.json" },
                "https://conductor.invalid/schemas/op-input.schema.json" => { path = "schemas/op-input.schema.json" }
            }
        )]
        struct $name;
    };
}

/// status.json's validator asserts `format` (its `date_time` is any RFC 3339 date-time, which
/// a pattern alone cannot check: days per month, leap seconds).
#[jsonschema::validator(
    path = "schemas/status.schema.json",
    validate_formats = true,
    resources = { "https://conductor.invalid/schemas/defs.schema.json" => { path = "schemas/defs.schema.json" } }
)]
struct StatusSchema;
from_file!(HistoryEntrySchema, "schemas/history-entry.schema.json");
from_file!(SprintSchema, "schemas/sprint.schema.json");
from_file!(ConfigSchema, "schemas/config.schema.json");
from_file!(ProjectConfigSchema, "schemas/project-config.schema.json");
from_file!(OpInputSchema, "schemas/op-input.schema.json");
/// The output schema refers to run-status.json's (`agent status --json` shows it).
#[jsonschema::validator(
    path = "schemas/output.schema.json",
    resources = {
        "https://conductor.invalid/schemas/defs.schema.json" => { path = "schemas/defs.schema.json" },
        "https://conductor.invalid/schemas/runtime-run-status.schema.json" => { path = "schemas/runtime-run-status.schema.json" }
    }
)]
struct OutputSchema;
/// Canopy's feed page printed by `agent events` (`$defs/agent_events_page` of the output schema).
#[jsonschema::validator(
    schema = r#"{"$ref": "https://conductor.invalid/schemas/output.schema.json#/$defs/agent_events_page"}"#,
    resources = {
        "https://conductor.invalid/schemas/defs.schema.json" => { path = "schemas/defs.schema.json" },
        "https://conductor.invalid/schemas/runtime-run-status.schema.json" => { path = "schemas/runtime-run-status.schema.json" },
        "https://conductor.invalid/schemas/output.schema.json" => { path = "schemas/output.schema.json" }
    }
)]
struct AgentEventsPageSchema;
from_file!(RuntimeAgentsSchema, "schemas/runtime-agents.schema.json");
from_file!(RuntimeInboxSchema, "schemas/runtime-inbox.schema.json");
from_file!(
    RuntimeChannelsSchema,
    "schemas/runtime-channels.schema.json"
);
from_file!(
    RuntimeRunStatusSchema,
    "schemas/runtime-run-status.schema.json"
);
from_file!(RuntimeActionSchema, "schemas/runtime-action.schema.json");
from_file!(LandingSchema, "schemas/landing.schema.json");

op_branch!(
    OpStart,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/start"}"#
);
op_branch!(
    OpClaim,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/claim"}"#
);
op_branch!(
    OpRelease,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/release"}"#
);
op_branch!(
    OpDone,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/done"}"#
);
op_branch!(
    OpHeartbeat,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/heartbeat"}"#
);
op_branch!(
    OpCleanup,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/cleanup"}"#
);
op_branch!(
    OpStatus,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/status"}"#
);
op_branch!(
    OpAlign,
    r#"{"$ref": "https://conductor.invalid/schemas/op-input.schema.json#/$defs/align"}"#
);

/// Which document a value claims to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    Status,
    HistoryEntry,
    Sprint,
    Config,
    ProjectConfig,
    OpInput,
    Output,
    /// The agent runtime's `runtime-agents.json`.
    RuntimeAgents,
    /// `runtime-inbox.json`.
    RuntimeInbox,
    /// `runtime-channels.json`.
    RuntimeChannels,
    /// `runtime/agents/NAME/run-status.json`.
    RuntimeRunStatus,
    /// One line of `runtime/agents/NAME/actions.jsonl`.
    RuntimeAction,
    /// What `agent events` prints (Canopy's feed page, not the status envelope).
    AgentEventsPage,
    /// `landing.json`: worktrees made for sessions, and branches whose files are landing.
    Landing,
}

impl Schema {
    /// The schema's file name in `schemas/`.
    pub fn file(self) -> &'static str {
        match self {
            Schema::Status => "status.schema.json",
            Schema::HistoryEntry => "history-entry.schema.json",
            Schema::Sprint => "sprint.schema.json",
            Schema::Config => "config.schema.json",
            Schema::ProjectConfig => "project-config.schema.json",
            Schema::OpInput => "op-input.schema.json",
            Schema::Output => "output.schema.json",
            Schema::RuntimeAgents => "runtime-agents.schema.json",
            Schema::RuntimeInbox => "runtime-inbox.schema.json",
            Schema::RuntimeChannels => "runtime-channels.schema.json",
            Schema::RuntimeRunStatus => "runtime-run-status.schema.json",
            Schema::RuntimeAction => "runtime-action.schema.json",
            Schema::AgentEventsPage => "output.schema.json",
            Schema::Landing => "landing.schema.json",
        }
    }
}

fn parsed(name: &str) -> Value {
    let text = FILES
        .iter()
        .find(|(n, _)| *n == name)
        .expect("schema file is listed")
        .1;
    serde_json::from_str(text).expect("checked-in schemas are valid JSON (tested)")
}

/// Check an operation input against its own branch of `op-input.schema.json`.
pub fn validate_op(operation: &str, value: &Value) -> Result<(), String> {
    let mut errors = match operation {
        "start" => OpStart::iter_errors(value),
        "claim" => OpClaim::iter_errors(value),
        "release" => OpRelease::iter_errors(value),
        "done" => OpDone::iter_errors(value),
        "heartbeat" => OpHeartbeat::iter_errors(value),
        "cleanup" => OpCleanup::iter_errors(value),
        "status" => OpStatus::iter_errors(value),
        "align" => OpAlign::iter_errors(value),
        _ => return Err("unknown operation".to_string()),
    };
    first_error(errors.next())
}

/// The operation names `conductor op` accepts.
pub fn operations() -> Vec<String> {
    let root = parsed("op-input.schema.json");
    root["$defs"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn first_error(err: Option<jsonschema::ValidationError<'_>>) -> Result<(), String> {
    match err {
        None => Ok(()),
        Some(err) => {
            let at = err.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            // The message quotes the value first, then the rule it breaks: a long value (a
            // claim of 1,001 files) is cut, never the rule.
            let text = err.to_string();
            let value = err.instance().to_string();
            let text = match text.strip_prefix(&value) {
                Some(rule) => format!("{}{rule}", crate::text::printable_max(&value, 60)),
                None => text,
            };
            let msg = crate::text::printable_max(&text, 200);
            Err(format!("at {at}: {msg}"))
        }
    }
}

/// Check `value` against a schema. The error names where in the document the first violation
/// is and which rule it breaks, on one line.
pub fn validate(schema: Schema, value: &Value) -> Result<(), String> {
    let mut errors = match schema {
        Schema::Status => StatusSchema::iter_errors(value),
        Schema::HistoryEntry => HistoryEntrySchema::iter_errors(value),
        Schema::Sprint => SprintSchema::iter_errors(value),
        Schema::Config => ConfigSchema::iter_errors(value),
        Schema::ProjectConfig => ProjectConfigSchema::iter_errors(value),
        Schema::OpInput => OpInputSchema::iter_errors(value),
        Schema::Output => OutputSchema::iter_errors(value),
        Schema::RuntimeAgents => RuntimeAgentsSchema::iter_errors(value),
        Schema::RuntimeInbox => RuntimeInboxSchema::iter_errors(value),
        Schema::RuntimeChannels => RuntimeChannelsSchema::iter_errors(value),
        Schema::RuntimeRunStatus => RuntimeRunStatusSchema::iter_errors(value),
        Schema::RuntimeAction => RuntimeActionSchema::iter_errors(value),
        Schema::AgentEventsPage => AgentEventsPageSchema::iter_errors(value),
        Schema::Landing => LandingSchema::iter_errors(value),
    };
    first_error(errors.next())
}

/// Read and validate a JSON document against its schema; `None` if the file does not exist.
pub fn read_doc<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    schema: Schema,
) -> crate::Result<Option<T>> {
    use crate::store::corrupt;
    let Some(bytes) = crate::store::read_bytes(path)? else {
        return Ok(None);
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| crate::Error::from(corrupt(path, format!("not valid JSON ({e})"))))?;
    validate(schema, &value).map_err(|e| corrupt(path, format!("schema violation {e}")))?;
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| corrupt(path, e.to_string()).into())
}
