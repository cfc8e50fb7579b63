//! The protocol's operations as inputs: what `conductor op` reads, what every subcommand builds
//! from its arguments, and what the MCP and HTTP faces will send (the `op` wire format of
//! `schemas/op-input.schema.json`).

use serde::{Deserialize, Serialize};

use super::{Outcome, Priority, Source};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::schema;

/// A protocol operation, as `conductor op` reads it and every subcommand builds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Start(StartRequest),
    Claim(ClaimRequest),
    Release(ReleaseRequest),
    Done(DoneRequest),
    Heartbeat(HeartbeatRequest),
    Cleanup(CleanupRequest),
    Status(StatusRequest),
    Align(AlignRequest),
}

/// Check a request against its schema branch (the same check `op` applies to its input).
pub fn validate(request: &Request) -> Result<()> {
    let value = serde_json::to_value(request).expect("requests serialize");
    let op = value["operation"].as_str().unwrap_or_default().to_string();
    crate::schema::validate_op(&op, &value).map_err(|e| readable(&op, &e.to_string()))
}

/// A schema violation as a person reads it: the JSON pointer stays (scripts and tests look for
/// it), a regular expression or a length in characters becomes what it means, with a hint.
fn readable(op: &str, e: &str) -> Error {
    const ID: &str = r#"does not match "^[a-z]{3}-[0-9a-f]{6}$""#;
    let (message, hint) = if e.contains(ID) {
        (
            e.replace(
                ID,
                "is not an instance id (three letters, a dash and six hex digits, like web-3f9a1c)",
            ),
            Some("`conductor status` lists the live instances and their ids"),
        )
    } else if e.contains("/files/") && e.contains(r#""" is shorter than 1 character"#) {
        (
            e.replace(r#""" is shorter than 1 character"#, "a path is empty"),
            Some("name a file (src/a.rs), a directory (src/) or a quoted glob ('src/**/*.rs')"),
        )
    } else if let Some(at) = e.find(" does not match \"") {
        (format!("{} is not in the expected form", &e[..at]), None)
    } else {
        (e.to_string(), None)
    };
    let err = Error::invalid(
        Reason::InvalidInput,
        format!("invalid {op} input {message}"),
    );
    match hint {
        Some(h) => err.with_hint(h),
        None => err,
    }
}

/// The most `op` reads from stdin.
pub const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// An `invalid_input` error about an operation input.
pub fn bad(message: String) -> Error {
    Error::invalid(Reason::InvalidInput, message)
}

/// Parse and validate an operation input.
pub fn parse(text: &str) -> Result<Request> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| bad(format!("the operation is not valid JSON: {e}")))?;
    let op = match value.get("operation") {
        None if value.is_object() => {
            return Err(bad("the operation object has no `operation` field".into()));
        }
        None => {
            return Err(bad(
                "the operation must be a JSON object like {\"operation\":\"status\"}".into(),
            ));
        }
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Err(bad("`operation` must be a string".into())),
    };
    let known = schema::operations();
    if !known.contains(&op) {
        return Err(Error::invalid(
            Reason::UnknownOperation,
            format!(
                "unknown operation `{}` (expected one of: {})",
                crate::text::printable(&op),
                known.join(", ")
            ),
        ));
    }
    schema::validate_op(&op, &value).map_err(|e| bad(format!("invalid {op} operation {e}")))?;
    serde_json::from_value(value).map_err(|e| bad(format!("invalid {op} operation: {e}")))
}

/// The `align` operation input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlignRequest {
    pub task: String,
    pub priority: Priority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
}

/// The `claim` operation input. Its JSON Schema (derived) is the MCP `claim` tool's input.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[schemars(length(min = 1))]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(description = "take held files over, logging this reason")]
    pub force: Option<String>,
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

/// The `done` operation input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoneRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_modified: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// The `heartbeat` operation input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// Not part of the JSON protocol: set by the CLI.
    #[serde(skip)]
    pub owner_pid: Option<u32>,
}

/// The `release` operation input. Its JSON Schema (derived) is the MCP `release` tool's input.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub files: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// The `start` operation input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    pub task: String,
    pub project: String,
    pub priority: Priority,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// Not part of the JSON protocol: set by the CLI.
    #[serde(skip)]
    pub owner_pid: Option<u32>,
    /// Not part of the JSON protocol: set by hooks.
    #[serde(skip)]
    pub session_id: Option<String>,
}

/// The `status` operation input (no fields), and the MCP `status` tool's.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {}
