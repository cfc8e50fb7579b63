//! `conductor workflow show SESSION`: the timeline (`Planning [✓] -> Implementation [●] ->
//! Verification [ ]`), time and tokens per state, totals, the files modified since the current
//! state began, the snapshot and the latest checkpoints.

use serde_json::json;

use super::{Ctx, emit, title};
use conductor::error::Result;
pub use conductor::workflows::timeline::{breadcrumbs, timeline};
use conductor::workflows::{self, Status};

/// Show a session.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The session id (a unique prefix is enough).
    pub session: String,
    /// How many of the latest checkpoints to show.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub log: usize,
}

fn duration(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

/// Run `workflow show`.
pub fn run(ctx: &Ctx, args: ShowArgs) -> Result<u8> {
    let s = workflows::find_session(&ctx.store, ctx.now, &args.session)?;
    let per_state = workflows::timeline::per_state(&s, ctx.now);
    let modified = workflows::timeline::modified_in_current_state(&s);
    let mut text = format!(
        "{} · {} · {}\nTask: {}\n{}\n",
        s.id,
        s.template.name,
        s.status.as_str(),
        s.task,
        breadcrumbs(&s)
    );
    if let Some(h) = &s.halt
        && s.status != Status::Running
    {
        text.push_str(&format!("Why: {h}\n"));
    }
    if let Some(p) = &s.pending {
        text.push_str(&format!(
            "Pending: {} -> {}{}: {}\n",
            p.from,
            p.to,
            if p.approved { " (approved)" } else { "" },
            p.summary
        ));
    }
    text.push_str("\nState            Runs  Time      Tokens     Cost\n");
    for p in &per_state {
        text.push_str(&format!(
            "{:<16} {:>4}  {:<8} {:>8}  ${:.4}\n",
            title(&p.state),
            p.runs,
            duration(p.elapsed_secs),
            p.tokens,
            p.cost_usd
        ));
    }
    let total_secs: u64 = per_state.iter().map(|p| p.elapsed_secs).sum();
    text.push_str(&format!(
        "{:<16} {:>4}  {:<8} {:>8}  ${:.4}\n",
        "Total",
        s.runs.len(),
        duration(total_secs),
        s.totals.tokens,
        s.totals.cost_usd + 0.0
    ));
    if let Some(cur) = &s.current_state {
        text.push_str(&format!(
            "\nFiles modified since `{cur}` began: {}\n",
            if modified.is_empty() {
                "none".to_string()
            } else {
                modified.join(", ")
            }
        ));
    }
    let sn = &s.snapshot;
    if !sn.key_findings.is_empty() {
        text.push_str(&format!("Key findings: {}\n", sn.key_findings.join("; ")));
    }
    if !sn.modified_files.is_empty() {
        text.push_str(&format!(
            "Files (snapshot): {}\n",
            sn.modified_files.join(", ")
        ));
    }
    if !sn.pending_tasks.is_empty() {
        text.push_str(&format!("Pending tasks: {}\n", sn.pending_tasks.join("; ")));
    }
    for (k, v) in &sn.custom {
        text.push_str(&format!("{k} = {v}\n"));
    }
    if args.log > 0 && !s.log.is_empty() {
        text.push_str("\nLatest checkpoints:\n");
        for e in s.log.iter().rev().take(args.log).rev() {
            text.push_str(&format!(
                "  {} {:<20} {} {}\n",
                e.at,
                e.kind,
                e.state.as_deref().unwrap_or("-"),
                conductor::text::printable_max(&e.detail.to_string(), 120)
            ));
        }
    }
    let timeline: Vec<_> = timeline(&s)
        .into_iter()
        .map(|(n, m)| json!({"state": n, "mark": m}))
        .collect();
    emit(
        ctx,
        json!({"status": "ok", "session": s, "timeline": timeline, "breadcrumbs": breadcrumbs(&s),
               "per_state": per_state, "modified_since_state_began": modified}),
        text,
        0,
    )
}
