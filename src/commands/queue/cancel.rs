//! `conductor queue cancel JOB|WORKSPACE`.

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::{QueueDoc, exec, ops};
use conductor::store::Lock;

/// The long help of `queue cancel`.
pub const ABOUT: &str = "Cancel a job, or every unfinished job of a workspace. Running jobs' process groups are\n\
killed (by this command, and by their dispatcher when it sees the cancel); their dependents\n\
become blocked. Completed jobs are left as they are.";

/// The arguments of `queue cancel` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// A workspace id, a `JOB` or a `WORKSPACE/JOB`.
    #[arg(value_name = "JOB|WORKSPACE")]
    pub target: String,
}

/// Run `queue cancel`.
pub fn run(ctx: &Ctx, args: CancelArgs) -> Result<u8> {
    let (keys, stop) = ctx.store.transaction(ctx.now, &[Lock::Queue], |tx| {
        let mut doc: QueueDoc = tx.read()?;
        let targets: Vec<usize> = if doc.workspaces.contains_key(&args.target)
            && !args.target.contains('/')
            && doc.jobs.iter().any(|j| j.workspace == args.target)
        {
            (0..doc.jobs.len())
                .filter(|i| doc.jobs[*i].workspace == args.target)
                .collect()
        } else {
            vec![ops::find(&doc, &args.target)?]
        };
        let keys: Vec<String> = targets
            .iter()
            .filter(|i| !doc.jobs[**i].state.is_final())
            .map(|i| doc.jobs[*i].key())
            .collect();
        let mut events = Vec::new();
        let stop = ops::cancel(&mut doc, &targets, ctx.now, &mut events);
        let archived = ops::archive(&mut doc);
        conductor::queue::archive::append(tx, &ctx.store, archived)?;
        tx.write(&doc)?;
        for e in events {
            tx.event(e);
        }
        Ok::<_, conductor::Error>((keys, stop))
    })?;
    for s in &stop {
        if let Some(d) = &s.dispatcher {
            let (ws, id) = s.key.split_once('/').unwrap_or(("", &s.key));
            exec::kill_run(&format!("{d}/{ws}/{id}/{}", s.attempt), s.pid);
        }
    }
    let message = if keys.is_empty() {
        format!(
            "Nothing to cancel in {}: every job there already finished.",
            args.target
        )
    } else {
        format!(
            "Cancelled {} job(s): {}{}.",
            keys.len(),
            keys.join(", "),
            if stop.is_empty() {
                String::new()
            } else {
                format!(" (stopped {} running)", stop.len())
            }
        )
    };
    print(
        ctx.out,
        &Out {
            json: json!({"status": "ok", "cancelled": keys, "stopped": stop.iter().map(|s| &s.key).collect::<Vec<_>>(), "message": message}),
            text: message.clone(),
            code: 0,
        },
    )
}
