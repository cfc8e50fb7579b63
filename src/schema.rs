//! The JSON Schemas in `schemas/`, compiled into the binary, and validation against them with the
//! `jsonschema` crate (offline: every `$ref` resolves to one of these files, nothing is fetched).
//! Inputs to `conductor op` and every state file read from disk pass through [`validate`].

use std::sync::OnceLock;

use jsonschema::{Registry, Resource, Validator};
use serde_json::Value;

const BASE: &str = "https://conductor.invalid/schemas/";

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
];

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
        }
    }

    fn index(self) -> usize {
        self as usize
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

fn registry() -> &'static Registry<'static> {
    static REGISTRY: OnceLock<Registry<'static>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut builder = Registry::new();
        for (name, _) in FILES {
            builder = builder
                .add(
                    format!("{BASE}{name}"),
                    Resource::from_contents(parsed(name)),
                )
                .expect("schema URIs are valid");
        }
        builder
            .prepare()
            .expect("checked-in schemas resolve (tested)")
    })
}

fn validator(schema: Schema) -> &'static Validator {
    static VALIDATORS: [OnceLock<Validator>; 7] = [const { OnceLock::new() }; 7];
    VALIDATORS[schema.index()].get_or_init(|| {
        jsonschema::options()
            .offline()
            .with_registry(registry())
            .build(&parsed(schema.file()))
            .expect("checked-in schemas compile (tested)")
    })
}

/// Check an operation input against its own branch of `op-input.schema.json`, so the error
/// names the field that is wrong rather than "matches none of the branches".
pub fn validate_op(operation: &str, value: &Value) -> Result<(), String> {
    static OPS: OnceLock<Vec<(String, Validator)>> = OnceLock::new();
    let ops = OPS.get_or_init(|| {
        let root = parsed("op-input.schema.json");
        let names: Vec<String> = root["$defs"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        names
            .into_iter()
            .map(|n| {
                let reference =
                    serde_json::json!({ "$ref": format!("{BASE}op-input.schema.json#/$defs/{n}") });
                let v = jsonschema::options()
                    .offline()
                    .with_registry(registry())
                    .build(&reference)
                    .expect("op branches compile (tested)");
                (n, v)
            })
            .collect()
    });
    let Some((_, v)) = ops.iter().find(|(n, _)| n == operation) else {
        return Err(format!("unknown operation"));
    };
    first_error(v, value)
}

/// The operation names `conductor op` accepts.
pub fn operations() -> Vec<String> {
    let root = parsed("op-input.schema.json");
    root["$defs"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn first_error(v: &Validator, value: &Value) -> Result<(), String> {
    match v.iter_errors(value).next() {
        None => Ok(()),
        Some(err) => {
            let at = err.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            let msg = crate::protocol::ops::printable_max(&err.to_string(), 160);
            Err(format!("at {at}: {msg}"))
        }
    }
}

/// Check `value` against a schema. The error names where in the document the first violation
/// is and which rule it breaks, on one line.
pub fn validate(schema: Schema, value: &Value) -> Result<(), String> {
    first_error(validator(schema), value)
}
