//! `conductor claim FILE... [--force WHY]`: lock files before editing them.

use serde_json::json;

use super::{Ctx, Report, display_path};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::ops::ClaimOutcome;
use conductor::protocol::request::ClaimRequest;
use conductor::protocol::sessions;

/// Claim files.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Relative paths resolve against the current directory when it is inside the \
instance's working directory, else against the working directory. Claims are keyed by the absolute path \
with `.`/`..` collapsed and symlinks resolved.\n\nA directory (`src/`, or any existing directory) is claimed \
with everything below it, now and later. An argument with `*` or `?` is a glob (quote it: 'src/**/*.rs'): \
`?` is one character of a name, `*` any run within a name, `**` any number of directories; `[`, `]`, `{`, `}` \
are literal. A claim is refused while another instance holds anything that overlaps it (a file inside a \
directory, a directory holding a file, overlapping globs); two globs too large to compare are treated as \
overlapping.\n\nExit status 3 means some files are held by others; the \
free ones were still claimed."
)]
pub struct ClaimArgs {
    /// Files, directories (`src/`) or globs ('src/**/*.rs') to claim.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Take the files over from their holders, recording this reason in conflicts.log.
    #[arg(long, value_name = "WHY")]
    pub force: Option<String>,
    /// Wait for files held by others and take each the moment it is released (first come,
    /// first served), for at most DURATION (500ms, 30s, 5m, 2h; without a value, forever).
    /// On timeout (or SIGINT/SIGTERM): leaves the queues, prints the usual conflict result,
    /// exit 3.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "forever", require_equals = true,
          conflicts_with = "force", value_parser = conductor::time::parse_limit)]
    pub wait: Option<conductor::time::Limit>,
    #[command(flatten)]
    pub instance: InstanceArg,
}

impl ClaimArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> ClaimRequest {
        ClaimRequest {
            instance_id: self.instance.id(),
            files: self.files,
            force: self.force,
        }
    }
}

/// The claim result: the spec's success or conflict object.
pub struct Claimed {
    pub outcome: ClaimOutcome,
    pub cwd: Option<std::path::PathBuf>,
}

impl Report for Claimed {
    fn to_json(&self) -> serde_json::Value {
        let o = &self.outcome;
        if o.conflicts.is_empty() {
            let mut v = json!({"status": "ok", "claimed": o.claimed, "message": "Files claimed. Safe to edit."});
            if !o.forced.is_empty() {
                v["forced"] = json!(o.forced);
            }
            v
        } else {
            json!({"status": "conflict", "conflicts": o.conflicts, "claimed": o.claimed, "message": conflict_message(o)})
        }
    }
    fn to_text(&self) -> String {
        let o = &self.outcome;
        let show = |f: &str| {
            let shown = display_path(f, self.cwd.as_deref());
            // A directory keeps its final `/`.
            if f.ends_with('/') && !shown.ends_with('/') {
                format!("{shown}/")
            } else {
                shown
            }
        };
        let mut lines = Vec::new();
        if !o.claimed.is_empty() {
            let files: Vec<String> = o.claimed.iter().map(|f| show(f)).collect();
            lines.push(format!(
                "Claimed: {}.{}",
                files.join(", "),
                if o.conflicts.is_empty() {
                    " Safe to edit."
                } else {
                    ""
                }
            ));
        }
        for f in &o.forced {
            lines.push(format!(
                "Forced: took {} from {} (logged)",
                show(&f.file),
                f.from
            ));
        }
        for c in &o.conflicts {
            let stale = if c.holder_alive {
                String::new()
            } else {
                format!(
                    " [holder looks dead: last heartbeat {}]",
                    c.holder_last_heartbeat
                )
            };
            let through = match &c.held_claim {
                Some(k) if c.overlap_undecided => format!(
                    " through {} (the two globs are too large to compare, so they are treated as overlapping)",
                    show(k)
                ),
                Some(k) => format!(" through {}", show(k)),
                None => String::new(),
            };
            let tree = match (&c.holder_worktree, &c.holder_branch) {
                (Some(w), Some(b)) => format!(" in the worktree {w} (branch {b})"),
                (Some(w), None) => format!(" in the worktree {w}"),
                _ => String::new(),
            };
            lines.push(format!(
                "CONFLICT: {} is claimed by {}{through} ({}){tree}. Coordinate or wait.{stale}",
                show(&c.file),
                c.held_by,
                c.holder_task
            ));
        }
        if !o.conflicts.is_empty() {
            lines.push(next_steps(o));
        }
        lines.join("\n")
    }
    fn exit_code(&self) -> u8 {
        if self.outcome.conflicts.is_empty() {
            0
        } else {
            3
        }
    }
}

fn conflict_message(o: &ClaimOutcome) -> String {
    let mut holders: Vec<&str> = Vec::new();
    for c in &o.conflicts {
        if !holders.contains(&c.held_by.as_str()) {
            holders.push(&c.held_by);
        }
    }
    let n = o.conflicts.len();
    // The protocol's exact message; the human output adds the next steps.
    format!(
        "{n} conflict{} detected. Coordinate with {} or wait for release.",
        if n == 1 { "" } else { "s" },
        holders.join(", ")
    )
}

/// What the user can do next about a conflict: wait for the files, or take them over.
fn next_steps(o: &ClaimOutcome) -> String {
    let mut files: Vec<&str> = Vec::new();
    for c in &o.conflicts {
        if !files.contains(&c.file.as_str()) {
            files.push(&c.file);
        }
    }
    let quote = |f: &str| {
        if f.contains(|c: char| !(c.is_alphanumeric() || "/._-@:=+,".contains(c))) {
            format!("'{}'", f.replace('\'', "'\\''"))
        } else {
            f.to_string()
        }
    };
    let files: Vec<String> = files.into_iter().map(quote).collect();
    let files = files.join(" ");
    format!(
        "Next: `conductor claim --wait {files}` waits and takes them the moment they are released \
         (first come, first served; --wait=5m to give up after 5 minutes); \
         `conductor claim --force \"WHY\" {files}` takes them over now: each holder loses its overlapping \
         claim (a directory or glob whole) without being asked, and WHY is logged in conflicts.log."
    )
}

/// Run `claim`.
pub fn execute(ctx: &Ctx, req: ClaimRequest) -> Result<Box<dyn Report>> {
    let outcome = sessions::claim(&ctx.store, ctx.now, &ctx.caller(), &req)?;
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Box::new(Claimed {
        outcome,
        cwd: ctx.cwd().ok(),
    }))
}
