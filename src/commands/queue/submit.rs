//! `conductor queue submit MANIFEST|-`: check a manifest, create its workspace (docs copied in),
//! and add its jobs.

use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Reason;
use conductor::error::{Error, Result};
use conductor::queue::manifest::{self, Manifest};
use conductor::queue::{Layout, QueueDoc, State, Workspace, archive, docs, ops};
use conductor::store::Lock;

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
    // Check against a snapshot first, so refused input creates no directory at all; the
    // transaction checks again under the lock. The archive is consulted (through its index)
    // only for dependencies that are neither in the manifest nor live.
    let snapshot: QueueDoc = ctx.store.read_doc(ctx.now)?;
    let archived_completed =
        archive::completed(&ctx.store, &m.workspace, &unresolved(m, &snapshot))?;
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
    let mut new_dirs = conductor::store::atomic::NewDirs::new();
    for sub in ["docs", "output", "shared"] {
        new_dirs.create(&dir.join(sub))?;
    }
    for d in &wanted {
        source.copy_into(d, &dir.join("docs"))?;
    }
    let jobs = ctx.store.transaction(ctx.now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let wanted = unresolved(m, &doc);
        let archived_completed = archive::completed_tx(tx, &ctx.store, &m.workspace, &wanted)?;
        let events = ops::submit(&mut doc, m, ws.clone(), &archived_completed, ctx.now)?;
        let submitted: HashSet<&str> = m.jobs.iter().map(|s| s.id.as_str()).collect();
        let states: Vec<(String, State)> = doc
            .jobs
            .iter()
            .filter(|j| j.workspace == m.workspace && submitted.contains(j.id.as_str()))
            .map(|j| (j.id.clone(), j.state.state))
            .collect();
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, conductor::Error>(states)
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

/// The dependencies a manifest names that are neither among its jobs nor live jobs of its
/// workspace: only those can be satisfied by archived jobs.
fn unresolved(m: &Manifest, doc: &QueueDoc) -> BTreeSet<String> {
    let ids: HashSet<&str> = m.jobs.iter().map(|j| j.id.as_str()).collect();
    let live: HashSet<&str> = doc
        .jobs
        .iter()
        .filter(|j| j.workspace == m.workspace)
        .map(|j| j.id.as_str())
        .collect();
    m.jobs
        .iter()
        .flat_map(|j| &j.depends_on)
        .filter(|d| !ids.contains(d.as_str()) && !live.contains(d.as_str()))
        .cloned()
        .collect()
}
