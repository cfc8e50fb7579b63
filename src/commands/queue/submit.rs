//! `conductor queue submit MANIFEST|-`: check a manifest, create its workspace (docs copied in),
//! and add its jobs.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use crate::error::{Error, Result};
use crate::queue::manifest::{self, Manifest};
use crate::queue::{Layout, QueueDoc, State, Workspace, docs, ops};
use crate::store::Lock;

/// The long help of `queue submit`.
pub const ABOUT: &str = "Submit a manifest: `{\"workspace\": ID, \"jobs\": [{\"id\", \"prompt\", \"docs\", \"secrets\", \"depends_on\",\n\
\"outcomes\", ...}]}` (schemas/queue-manifest.schema.json).\n\
\n\
Refused, with nothing changed: a schema violation, a duplicate job id, a dependency on an\n\
unknown job, a dependency cycle (spelled out), a doc collection that does not exist (the\n\
available ones are named). `secrets` are environment-variable names; their values are read\n\
when the job starts.";

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
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Error::invalid("invalid_manifest", format!("cannot read stdin: {e}")))?;
        return Ok((s, "stdin".into()));
    }
    let text = std::fs::read_to_string(arg).map_err(|e| {
        Error::invalid(
            "invalid_manifest",
            format!("cannot read manifest `{arg}`: {e}"),
        )
    })?;
    Ok((text, arg.to_string()))
}

/// Run `queue submit`.
pub fn run(ctx: &Ctx, args: SubmitArgs) -> Result<u8> {
    let (text, source) = read_text(&args.manifest)?;
    let m = manifest::parse(&text, &source)?;
    let report = submit(ctx, &m, args.docs_dir.as_deref())?;
    print(ctx.out, &report)
}

/// Submit a parsed manifest (also used by `queue plan --yes`).
pub fn submit(ctx: &Ctx, m: &Manifest, docs_dir: Option<&std::path::Path>) -> Result<Out> {
    let source = docs::locate(docs_dir)?;
    let mut wanted: Vec<String> = Vec::new();
    for j in &m.jobs {
        for d in &j.docs {
            source.check(&j.id, d)?;
            if !wanted.contains(d) {
                wanted.push(d.clone());
            }
        }
    }
    let home = ctx.store.home().dir().to_path_buf();
    let archived_completed: BTreeSet<String> = crate::queue::archived(&ctx.store)?
        .into_iter()
        .filter(|j| j.workspace == m.workspace && j.state.state == State::Completed)
        .map(|j| j.id)
        .collect();
    // Check against a snapshot first, so refused input creates no directory at all; the
    // transaction checks again under the lock.
    let snapshot: QueueDoc = ctx.store.read_doc(ctx.now)?;
    let ws = Workspace {
        id: m.workspace.clone(),
        dir: Layout { home: home.clone() }
            .workspace(&m.workspace)
            .to_string_lossy()
            .into_owned(),
        docs_loaded: wanted.clone(),
        created_at: ctx.now,
    };
    ops::submit(
        &mut snapshot.clone(),
        m,
        ws.clone(),
        &archived_completed,
        ctx.now,
    )?;
    let dir = PathBuf::from(&ws.dir);
    // A submit that fails (a full disk) leaves no half-made workspace behind.
    let mut new_dirs = crate::store::atomic::NewDirs::new();
    for sub in ["docs", "output", "shared"] {
        new_dirs.create(&dir.join(sub))?;
    }
    for d in &wanted {
        source.copy_into(d, &dir.join("docs"))?;
    }
    let jobs = ctx.store.transaction(ctx.now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let events = ops::submit(&mut doc, m, ws.clone(), &archived_completed, ctx.now)?;
        let states: Vec<(String, State)> = doc
            .jobs
            .iter()
            .filter(|j| j.workspace == m.workspace && m.jobs.iter().any(|s| s.id == j.id))
            .map(|j| (j.id.clone(), j.state.state))
            .collect();
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok(states)
    })?;
    new_dirs.keep();
    let n = jobs.len();
    let message = format!(
        "Submitted {n} job{} to workspace {}. Start them with `conductor queue run`.",
        if n == 1 { "" } else { "s" },
        m.workspace
    );
    let mut text = String::new();
    for (id, s) in &jobs {
        text.push_str(&format!("{:<10} {}/{id}\n", s.as_str(), m.workspace));
    }
    text.push_str(&message);
    Ok(Out {
        json: json!({
            "status": "ok",
            "workspace": m.workspace,
            "workspace_dir": ws.dir,
            "jobs": jobs.iter().map(|(id, s)| json!({"id": id, "state": s.as_str()})).collect::<Vec<_>>(),
            "message": message,
        }),
        text,
        code: 0,
    })
}
