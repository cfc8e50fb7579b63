//! `conductor overlaps`: files changed in two or more live worktrees of a repository, claimed or
//! not, and which pairs git predicts would conflict when merged.

use std::path::PathBuf;

use serde_json::json;

use super::{Ctx, Report, print};
use conductor::error::Result;
use conductor::protocol::overlaps::{self, Report as Found};

/// Show files changed in several worktrees of one repository.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "A worktree's changes are what differs between the merge base of its HEAD with \
the integration branch and its working tree: its branch's commits, its staged and unstaged changes and \
its untracked files. For each pair of worktrees that changed the same file, `git merge-tree --write-tree` \
(git 2.38 or newer) predicts whether merging them conflicts textually, on a snapshot of each worktree's \
tracked changes and of the untracked files it shares (the tree `git stash create` records, made from a copy of \
its index: nothing in the worktree or its index changes). Where git cannot make a snapshot, the pairs are \
listed as UNKNOWN (`unpredicted`), with why. Runs git; exit 0 whatever it finds.\n\n\
Examples:\n  conductor overlaps\n  conductor overlaps --base origin/develop --json"
)]
pub struct OverlapsArgs {
    /// A directory in the repository [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The integration branch to measure changes against [default: origin/HEAD, else main,
    /// else master].
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,
}

struct Shown(Found);

impl Report for Shown {
    fn to_json(&self) -> serde_json::Value {
        let r = &self.0;
        json!({
            "status": "ok",
            "repository": r.repository,
            "base": r.base,
            "worktrees": r.worktrees,
            "overlaps": r.overlaps,
            "message": summary(r),
        })
    }
    fn to_text(&self) -> String {
        let r = &self.0;
        let name = |path: &str| {
            let t = r.worktrees.iter().find(|t| t.path == path);
            match t {
                Some(t) if t.sessions.is_empty() => format!("{path} ({})", t.branch),
                Some(t) => format!("{path} ({}; {})", t.branch, t.sessions.join(", ")),
                None => path.to_string(),
            }
        };
        let mut out = vec![format!(
            "Repository {} against {}: {} live worktree{}.",
            r.repository,
            r.base,
            r.worktrees.len(),
            if r.worktrees.len() == 1 { "" } else { "s" }
        )];
        for t in r.worktrees.iter().filter(|t| t.skipped.is_some()) {
            out.push(format!(
                "  skipped {}: {}",
                name(&t.path),
                t.skipped.as_deref().unwrap_or("")
            ));
        }
        for t in r.worktrees.iter().filter(|t| t.unpredictable.is_some()) {
            out.push(format!(
                "  could not predict the merges of {}: {}",
                name(&t.path),
                t.unpredictable.as_deref().unwrap_or("")
            ));
        }
        for o in &r.overlaps {
            out.push(format!("{}  changed in:", o.file));
            for w in &o.worktrees {
                out.push(format!("  {}", name(w)));
            }
            for [a, b] in &o.conflicts {
                out.push(format!("  CONFLICT when {a} and {b} are merged"));
            }
            for [a, b] in &o.unpredicted {
                out.push(format!("  UNKNOWN whether merging {a} and {b} conflicts"));
            }
        }
        out.push(summary(r));
        out.join("\n")
    }
}

fn summary(r: &Found) -> String {
    let n = r.overlaps.len();
    let c = r
        .overlaps
        .iter()
        .filter(|o| !o.conflicts.is_empty())
        .count();
    let u = r
        .overlaps
        .iter()
        .filter(|o| o.conflicts.is_empty() && !o.unpredicted.is_empty())
        .count();
    match n {
        0 => "No file is changed in more than one worktree.".to_string(),
        _ if u > 0 => format!(
            "{n} file{} changed in more than one worktree; {c} would conflict when merged, \
             and for {u} it is unknown (git could not predict it).",
            if n == 1 { "" } else { "s" }
        ),
        _ => format!(
            "{n} file{} changed in more than one worktree; {c} would conflict when merged.",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Run `overlaps`.
pub fn run(ctx: &Ctx, args: OverlapsArgs) -> Result<u8> {
    let dir = match args.dir {
        Some(d) => d,
        None => ctx.cwd()?,
    };
    let state = conductor::protocol::read(&ctx.store, ctx.now)?;
    let base = args
        .base
        .or(conductor::config::read(&ctx.store)?.integration_branch);
    let found = overlaps::find(&ctx.store, &dir, base.as_deref(), &state)?;
    print(ctx.out, &Shown(found))
}
