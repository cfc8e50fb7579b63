//! `conductor claim FILE... [--force WHY]`: lock files before editing them.

use serde_json::json;

use super::{Ctx, Report, display_path, print};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::ops::ClaimOutcome;
use conductor::protocol::request::ClaimRequest;
use conductor::protocol::sessions;
use conductor::template::shell_quote;

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
free ones were still claimed. Exit status 4 (`unenforced_session`): `enforce` is require-verified and the session's \
agent failed its live check here, so nothing was claimed."
)]
pub struct ClaimArgs {
    /// Files, directories (`src/`) or globs ('src/**/*.rs') to claim.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Take the files over from their holders, recording this reason in conflicts.log.
    #[arg(long, value_name = "WHY")]
    pub force: Option<String>,
    /// Wait for files held by others and take each the moment it is released (first come,
    /// first served), for at most DURATION: `--wait=30s` or `--wait 30s` (500ms, 30s, 5m, 2h).
    /// `--wait` alone or `--wait=forever` waits with no time limit. On timeout (or
    /// SIGINT/SIGTERM): leaves the queues, says so, exit 3.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "forever", require_equals = true,
          conflicts_with = "force", value_parser = conductor::time::parse_limit)]
    pub wait: Option<conductor::time::Limit>,
    #[command(flatten)]
    pub instance: InstanceArg,
}

impl ClaimArgs {
    /// The request these arguments make. A `--force` reason that looks like a path or glob
    /// (`--force 'src/**/*.rs' src/a.rs`: the reason was forgotten, and the first file taken
    /// for it) is refused before anything is claimed.
    pub fn into_request(self) -> Result<ClaimRequest> {
        if let Some(why) = &self.force
            && crate::cli::raw::looks_like_path(why)
        {
            return Err(crate::cli::raw::forgot_reason(why, &self.files));
        }
        Ok(ClaimRequest {
            instance_id: self.instance.id(),
            files: self.files,
            force: self.force,
        })
    }
}

/// The claim result: the spec's success or conflict object.
pub struct Claimed {
    pub outcome: ClaimOutcome,
    pub cwd: Option<std::path::PathBuf>,
    /// The acting instance, when the next step must name it (`--instance ID`) to act on the
    /// same one: the command was given `--instance`, or found it by directory.
    pub instance: Option<String>,
    /// How a `claim --wait` ended without every file, if it did.
    pub gave_up: Option<GaveUp>,
}

/// Why a `claim --wait` stopped before it had every file.
#[derive(Clone, Copy, Debug)]
pub enum GaveUp {
    /// Its time limit passed.
    TimedOut(std::time::Duration),
    /// SIGINT, SIGTERM or a closed stdout stopped it.
    Stopped,
}

impl Claimed {
    /// A claim's result as the command line shows it: `instance` is the acting instance, named
    /// in the next steps unless it came from CONDUCTOR_INSTANCE_ID (which the next command
    /// reads too).
    pub fn new(outcome: ClaimOutcome, ctx: &Ctx, args: &InstanceArg, instance: &str) -> Claimed {
        let from_env = args.instance.is_none()
            && std::env::var("CONDUCTOR_INSTANCE_ID").is_ok_and(|v| !v.is_empty());
        Claimed {
            outcome,
            cwd: ctx.cwd().ok(),
            instance: (!from_env).then(|| instance.to_string()),
            gave_up: None,
        }
    }
}

impl Report for Claimed {
    fn to_json(&self) -> serde_json::Value {
        let o = &self.outcome;
        if o.conflicts.is_empty() && o.lost.is_empty() && !o.refused_landing() {
            let mut v = json!({"status": "ok", "claimed": o.claimed, "message": "Files claimed. Safe to edit."});
            if !o.landing.is_empty() {
                v["landing"] = json!(o.landing);
                v["message"] = json!(format!(
                    "Files claimed. {}",
                    o.landing
                        .iter()
                        .map(|h| h.notice())
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            if !o.tokens.is_empty() {
                v["tokens"] = json!(o.tokens);
            }
            if !o.forced.is_empty() {
                v["forced"] = json!(o.forced);
            }
            v
        } else {
            let mut v = json!({"status": "conflict", "conflicts": o.conflicts, "claimed": o.claimed, "message": o.message()});
            if !o.landing.is_empty() {
                v["landing"] = json!(o.landing);
            }
            if !o.lost.is_empty() {
                v["lost"] = json!(o.lost);
            }
            match self.gave_up {
                Some(GaveUp::TimedOut(d)) => {
                    v["waited"] = json!("timed_out");
                    v["message"] = json!(format!(
                        "Timed out after {}. {}",
                        conductor::time::format_duration(d),
                        o.message()
                    ));
                }
                Some(GaveUp::Stopped) => {
                    v["waited"] = json!("stopped");
                    v["message"] = json!(format!("Stopped waiting. {}", o.message()));
                }
                None => {}
            }
            v
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
                if o.conflicts.is_empty() && o.landing.is_empty() {
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
        let (head, tail) = match self.gave_up {
            Some(GaveUp::TimedOut(d)) => (
                format!("TIMED OUT after {}: ", conductor::time::format_duration(d)),
                "still",
            ),
            Some(GaveUp::Stopped) => ("STOPPED waiting: ".to_string(), "still"),
            None => ("CONFLICT: ".to_string(), ""),
        };
        for c in &o.conflicts {
            let stale = if c.holder_alive {
                String::new()
            } else {
                format!(
                    " [holder looks dead: last heartbeat {}]",
                    c.holder_last_heartbeat
                )
            };
            let tree = match (&c.holder_worktree, &c.holder_branch) {
                (Some(w), Some(b)) => format!(" in the worktree {w} (branch {b})"),
                (Some(w), None) => format!(" in the worktree {w}"),
                _ => String::new(),
            };
            let who = format!("{} ({}){tree}", c.held_by, c.holder_task);
            let file = show(&c.file);
            let what = match &c.held_claim {
                Some(k) if *k != c.file => {
                    let plain = |p: &str| !p.ends_with('/') && !p.contains(['*', '?']);
                    let relation = if plain(k) && plain(&c.file) {
                        // The same file seen from another git worktree of the repository.
                        "is the same file as"
                    } else if k.ends_with('/') && c.file.starts_with(k.as_str()) {
                        "is inside"
                    } else if k.contains(['*', '?']) && !c.file.contains(['*', '?']) {
                        "matches"
                    } else {
                        "overlaps"
                    };
                    let undecided = if c.overlap_undecided {
                        " (the two globs are too large to compare, so they are treated as overlapping)"
                    } else {
                        ""
                    };
                    let tail = if tail.is_empty() { "" } else { " still" };
                    format!(
                        "{file} {relation} {}, which {who}{tail} holds{undecided}",
                        show(k)
                    )
                }
                _ if tail.is_empty() => format!("{file} is claimed by {who}"),
                _ => format!("{file} is still claimed by {who}"),
            };
            let advice = if self.gave_up.is_some() {
                ""
            } else {
                " Coordinate or wait."
            };
            lines.push(format!("{head}{what}.{advice}{stale}"));
        }
        for h in &o.landing {
            let mut h = h.clone();
            h.file = show(&h.file);
            let head = if h.refused { "LANDING" } else { "Note" };
            lines.push(format!("{head}: {}.", h.notice()));
        }
        if o.landing.iter().any(|h| h.refused) {
            lines.push(
                "Next: wait until that branch is merged (or deleted), or a person frees the file: \
                 conductor release --force --reason \"WHY\" FILE"
                    .to_string(),
            );
        }
        for l in &o.lost {
            lines.push(format!(
                "NOT HELD: {} was {} while this claim waited. It is not claimed again: claim it anew if you still need it.",
                show(&l.file),
                l.describe()
            ));
        }
        if !o.conflicts.is_empty() {
            lines.push(next_steps(o, self.instance.as_deref(), self.gave_up));
        }
        lines.join("\n")
    }
    fn exit_code(&self) -> u8 {
        if self.outcome.conflicts.is_empty()
            && self.outcome.lost.is_empty()
            && !self.outcome.refused_landing()
        {
            0
        } else {
            3
        }
    }
}

/// What the user can do next about a conflict: wait for the files, or take them over, as
/// commands that can be pasted as they are.
fn next_steps(o: &ClaimOutcome, instance: Option<&str>, gave_up: Option<GaveUp>) -> String {
    let mut files: Vec<&str> = Vec::new();
    for c in &o.conflicts {
        if !files.contains(&c.file.as_str()) {
            files.push(&c.file);
        }
    }
    let files: Vec<String> = files.into_iter().map(shell_quote).collect();
    let files = files.join(" ");
    let who = instance
        .map(|id| format!("--instance {id} "))
        .unwrap_or_default();
    let wait = match gave_up {
        Some(GaveUp::TimedOut(d)) => format!(
            "`conductor claim {who}--wait={} {files}` waits longer",
            conductor::time::format_duration(d * 5)
        ),
        _ => format!(
            "`conductor claim {who}--wait=5m {files}` waits up to 5 minutes and takes them the moment \
             they are released (first come, first served; --wait=forever has no time limit)"
        ),
    };
    format!(
        "Next: {wait}; `conductor claim {who}--force \"WHY\" {files}` takes them over now: each holder \
         loses its overlapping claim (a directory or glob whole) without being asked, and WHY is \
         logged in conflicts.log."
    )
}

/// Run `claim` (without `--wait`).
pub fn run(ctx: &Ctx, args: ClaimArgs) -> Result<u8> {
    let arg = args.instance.clone();
    let req = args.into_request()?;
    conductor::protocol::request::validate(&conductor::protocol::request::Request::Claim(
        req.clone(),
    ))?;
    ctx.store.short_lived();
    let admit = ctx.admission()?;
    let (id, outcome) = sessions::claim_as(&ctx.store, ctx.now, &ctx.caller(), &req, &admit)?;
    for w in &outcome.warnings {
        ctx.out.warn(w);
    }
    let cwd = ctx.cwd().ok();
    for f in &outcome.claimed {
        if let Some(close) = conductor::protocol::local::close_sibling(std::path::Path::new(f)) {
            ctx.out.status(&format!(
                "note: {} does not exist; did you mean {}? (claimed anyway: a file may be claimed before it is created)",
                display_path(f, cwd.as_deref()),
                display_path(&close.to_string_lossy(), cwd.as_deref())
            ));
        }
    }
    print(ctx.out, &Claimed::new(outcome, ctx, &arg, &id))
}

/// Run a claim request (`op`: its answer is JSON, which names no next step).
pub fn execute(ctx: &Ctx, req: ClaimRequest) -> Result<Box<dyn Report>> {
    let admit = ctx.admission()?;
    let outcome = sessions::claim(&ctx.store, ctx.now, &ctx.caller(), &req, &admit)?;
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Box::new(Claimed {
        outcome,
        cwd: ctx.cwd().ok(),
        instance: None,
        gave_up: None,
    }))
}
