//! `conductor op [JSON|-]`: the machine interface. Takes one of the protocol's operation inputs
//! and prints its output object (always JSON).

use std::io::Read;

use super::{Ctx, Request, execute, print};
use crate::error::{Error, Result};
use crate::schema;

/// Run one operation from JSON.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Examples:\n  conductor op '{\"operation\":\"claim\",\"instance_id\":\"itm-a1b2c3\",\"files\":[\"src/a.rs\"]}'\n  echo '{\"operation\":\"status\"}' | conductor op\n\nOperations: start, claim, release, done, heartbeat, cleanup, status, align. The input is checked \
against schemas/op-input.schema.json; the output is always one JSON object."
)]
pub struct OpArgs {
    /// The operation object, or `-` (the default) to read it from stdin.
    #[arg(value_name = "JSON|-")]
    pub input: Option<String>,
}

/// The most `op` reads from stdin.
pub const MAX_INPUT: u64 = 16 * 1024 * 1024;

fn bad(message: String) -> Error {
    Error::invalid("invalid_input", message)
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
            "unknown_operation",
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

/// Run `op`. (`main` turns on JSON output for `op`, so errors are JSON too.)
pub fn run(ctx: &Ctx, args: OpArgs) -> Result<u8> {
    let text = match args.input.as_deref() {
        None | Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .take(MAX_INPUT + 1)
                .read_to_string(&mut s)
                .map_err(|e| bad(format!("could not read the operation from stdin: {e}")))?;
            if s.len() as u64 > MAX_INPUT {
                return Err(bad(format!(
                    "the operation is larger than {MAX_INPUT} bytes"
                )));
            }
            s
        }
        Some(s) => s.to_string(),
    };
    let request = parse(&text)?;
    let report = execute(ctx, request)?;
    print(ctx.out, report.as_ref())
}
