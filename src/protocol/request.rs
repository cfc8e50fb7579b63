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
    if surely_valid(request) {
        return Ok(());
    }
    let value = serde_json::to_value(request).expect("requests serialize");
    let op = value["operation"].as_str().unwrap_or_default().to_string();
    crate::schema::validate_op(&op, &value).map_err(|e| readable(&op, &e.to_string()))
}

/// True when `request` certainly passes its schema branch, checked without the schema: the
/// claim and release of every command line (compiling the schema's patterns for them was a
/// measurable part of a claim). Each check is at least as strict as the schema's rule (a length
/// in bytes for one in characters); anything else, or anything not certain, goes to the schema,
/// which words the error. A unit test holds both to agreement.
fn surely_valid(request: &Request) -> bool {
    const MAX_FILES: usize = 1000;
    let id_ok = |id: &Option<String>| id.as_deref().is_none_or(super::types::is_valid_instance_id);
    // `input_path`: 1 to 4,096 characters; `input_text`: 1 to 65,536.
    let path_ok = |p: &String| !p.is_empty() && p.len() <= 4096;
    let text_ok = |t: &Option<String>| t.as_ref().is_none_or(|t| !t.is_empty() && t.len() <= 65536);
    let files_ok = |f: &[String]| (1..=MAX_FILES).contains(&f.len()) && f.iter().all(path_ok);
    match request {
        Request::Claim(c) => id_ok(&c.instance_id) && files_ok(&c.files) && text_ok(&c.force),
        Request::Release(r) => {
            let target = match (&r.files, r.all) {
                (Some(f), None) => files_ok(f),
                (None, Some(true)) => true,
                _ => false,
            };
            id_ok(&r.instance_id) && target && text_ok(&r.reason)
        }
        _ => false,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn by_schema(r: &Request) -> bool {
        let value = serde_json::to_value(r).unwrap();
        let op = value["operation"].as_str().unwrap().to_string();
        crate::schema::validate_op(&op, &value).is_ok()
    }

    #[test]
    fn the_quick_check_passes_only_what_the_schema_passes_and_passes_every_command_line_claim() {
        let ids = [
            None,
            Some("web-3f9a1c"),
            Some("WEB-3f9a1c"),
            Some("web-3f9a1g"),
            Some("web-3f9a1c0"),
            Some("we-3f9a1c"),
            Some(""),
        ];
        let long_ascii = "a".repeat(4096);
        let too_long = "a".repeat(4097);
        let wide = "é".repeat(2048); // 4,096 bytes
        let wide_over = "é".repeat(3000); // 3,000 characters, 6,000 bytes: the schema allows it
        let lists: Vec<Vec<String>> = vec![
            vec![],
            vec![String::new()],
            vec!["src/a.rs".into()],
            vec!["/abs/b.rs".into(), "src/".into(), "src/**/*.rs".into()],
            (0..1000).map(|i| format!("f{i}")).collect(),
            (0..1001).map(|i| format!("f{i}")).collect(),
            vec![long_ascii.clone()],
            vec![too_long.clone()],
            vec![wide.clone()],
            vec![wide_over.clone()],
        ];
        let texts = [
            None,
            Some(String::new()),
            Some("why".to_string()),
            Some("x".repeat(65536)),
            Some("x".repeat(65537)),
        ];
        let mut quick = 0;
        let mut cases = 0;
        let mut check = |r: Request| {
            cases += 1;
            if surely_valid(&r) {
                quick += 1;
                assert!(
                    by_schema(&r),
                    "passed quickly, refused by the schema: {r:?}"
                );
            }
            // Whatever the quick check says, `validate` agrees with the schema.
            assert_eq!(validate(&r).is_ok(), by_schema(&r), "{r:?}");
        };
        for id in ids {
            for files in &lists {
                for force in &texts {
                    check(Request::Claim(ClaimRequest {
                        instance_id: id.map(str::to_string),
                        files: files.clone(),
                        force: force.clone(),
                    }));
                }
                for all in [None, Some(true), Some(false)] {
                    for with_files in [false, true] {
                        check(Request::Release(ReleaseRequest {
                            instance_id: id.map(str::to_string),
                            files: with_files.then(|| files.clone()),
                            all,
                            reason: texts[2].clone(),
                            force: Some(true),
                        }));
                    }
                }
            }
        }
        assert!(cases > 500, "{cases}");
        // The command lines of every day take the quick path.
        let everyday = Request::Claim(ClaimRequest {
            instance_id: Some("web-3f9a1c".into()),
            files: vec!["/p/src/a.rs".into()],
            force: None,
        });
        assert!(surely_valid(&everyday));
        // Every case the schema passes, but for the 6,000-byte path of 3,000 characters (the
        // quick check counts bytes): 2 ids x 5 lists x 3 reasons claims, 2 x 5 releases of
        // files and 2 x 10 of `all`.
        assert_eq!(quick, 60);
    }
}
