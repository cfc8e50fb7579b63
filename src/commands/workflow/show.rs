//! `conductor workflow show SESSION`: the timeline (`Planning [✓] -> Implementation [●] ->
//! Verification [ ]`), time and tokens per state, totals, the files modified since the current
//! state began, the snapshot and the latest checkpoints.

use std::path::Path;

use serde_json::json;

use super::{Ctx, emit, title};
use conductor::error::Result;
pub use conductor::workflows::timeline::{breadcrumbs, timeline};
use conductor::workflows::{self, Status, baseline};

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
    let now = ctx.now;
    let mut per_state = Vec::new();
    for name in s.template.states.keys() {
        let runs: Vec<_> = s.runs.iter().filter(|r| &r.state == name).collect();
        let secs: u64 = runs
            .iter()
            .map(|r| {
                r.elapsed_secs
                    .unwrap_or_else(|| r.started_at.seconds_until(now))
            })
            .sum();
        let tokens: u64 = runs.iter().map(|r| r.tokens).sum();
        // Plus 0.0: an empty f64 sum is -0.0, which prints as `$-0.0000`.
        let cost: f64 = runs.iter().map(|r| r.cost_usd).sum::<f64>() + 0.0;
        per_state.push((name.clone(), runs.len(), secs, tokens, cost));
    }
    let current_run = s
        .runs
        .iter()
        .rev()
        .find(|r| Some(&r.state) == s.current_state.as_ref());
    let modified = match current_run {
        Some(r) if !s.status.is_finished() => {
            baseline::modified_since(&r.baseline, Path::new(&s.project_dir), 200)
        }
        _ => Vec::new(),
    };
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
    for (name, runs, secs, tokens, cost) in &per_state {
        text.push_str(&format!(
            "{:<16} {:>4}  {:<8} {:>8}  ${cost:.4}\n",
            title(name),
            runs,
            duration(*secs),
            tokens
        ));
    }
    let total_secs: u64 = per_state.iter().map(|p| p.2).sum();
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
    let states: Vec<_> = per_state
        .iter()
        .map(|(n, runs, secs, tokens, cost)| {
            json!({"state": n, "runs": runs, "elapsed_secs": secs, "tokens": tokens, "cost_usd": cost})
        })
        .collect();
    emit(
        ctx,
        json!({"status": "ok", "session": s, "timeline": timeline, "breadcrumbs": breadcrumbs(&s),
               "per_state": states, "modified_since_state_began": modified}),
        text,
        0,
    )
}
