//! `conductor op [JSON|-]`: the machine interface. Takes one of the protocol's operation inputs
//! and prints its output object (always JSON).

use std::io::Read;

use super::{Ctx, execute, print};
use conductor::error::Result;
use conductor::protocol::request::{self, MAX_INPUT, bad};

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
    let request = request::parse(&text)?;
    let report = execute(ctx, request)?;
    print(ctx.out, report.as_ref())
}
