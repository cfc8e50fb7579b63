//! `conductor queue submit MANIFEST|-`: check a manifest, create its workspace (docs copied in),
//! and add its jobs.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;

use crate::commands::{Ctx, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::queue::manifest;

/// The long help of `queue submit`.
pub const ABOUT: &str = "Submit a manifest: `{\"workspace\": ID, \"jobs\": [{\"id\", \"prompt\", \"docs\", \"secrets\", \"depends_on\",\n\
\"outcomes\", ...}]}` (schemas/queue-manifest.schema.json).\n\
\n\
Refused, with nothing changed: a schema violation, a duplicate job id, a dependency on an\n\
unknown job, a dependency cycle (spelled out), a doc collection that does not exist (the\n\
available ones are named). `secrets` are environment-variable names; their values are read\n\
when the job starts.\n\
\n\
A job with `\"repo\": DIR, \"branch\": NAME` (optional `\"base\"`) runs in a git worktree of that\n\
repository, <main checkout>.worktrees/NAME, starting from its dependency's branch (else base,\n\
else the integration branch); refused too: one without the other, a directory that is not a\n\
checkout with a commit, a bad branch name (docs/queue.md, \"Jobs in a worktree of a repository\").";

/// The arguments of `queue submit` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The manifest file, or `-` to read it from stdin.
    #[arg(value_name = "MANIFEST")]
    pub manifest: String,
    /// Take doc collections from DIR/<collection>/ instead of docpull's ~/.docpull.
    #[arg(long, value_name = "DIR")]
    pub docs_dir: Option<PathBuf>,
}

/// Read a manifest's text from a file or stdin.
pub fn read_text(arg: &str) -> Result<(String, String)> {
    if arg == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| {
            Error::invalid(Reason::InvalidManifest, format!("cannot read stdin: {e}"))
        })?;
        return Ok((s, "stdin".into()));
    }
    let text = std::fs::read_to_string(arg).map_err(|e| {
        Error::invalid(
            Reason::InvalidManifest,
            format!("cannot read manifest `{arg}`: {e}"),
        )
    })?;
    Ok((text, arg.to_string()))
}

/// Run `queue submit`.
pub fn run(ctx: &Ctx, args: SubmitArgs) -> Result<u8> {
    let (text, source) = read_text(&args.manifest)?;
    // Dependencies on jobs already in the workspace are checked by `submit`, against the queue.
    let m = manifest::parse_with(&text, &source, &|_| true)?;
    let report = submit(ctx, &m, args.docs_dir.as_deref())?;
    print(ctx.out, &report)
}

pub use crate::face::queue::submit;
