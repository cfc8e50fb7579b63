//! `conductor claim FILE... [--force WHY]`: lock files before editing them.

use serde_json::json;

use super::{Ctx, Report, display_path, print};
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
            && looks_like_path(why)
        {
            return Err(forgot_reason(why, &self.files));
        }
        Ok(ClaimRequest {
            instance_id: self.instance.id(),
            files: self.files,
            force: self.force,
        })
    }
}

/// True for a word that is more likely a duration than a file name: `30s`, `500ms`, `5m`, `2h`,
/// `1d`, `forever` (what `--wait` takes; a plain number counts too).
pub fn looks_like_duration(s: &str) -> bool {
    !s.is_empty()
        && (s.starts_with(|c: char| c.is_ascii_digit()) || s == "forever" || s == "inf")
        && conductor::time::parse_duration(s).is_ok()
}

/// True for a `--force` reason that is really a path: a glob, a directory (`src/`), a name
/// with a directory and an extension (`src/a.rs`), or a file that exists. A reason with spaces
/// is a sentence, never a path.
pub fn looks_like_path(why: &str) -> bool {
    if why.is_empty() || why.contains(char::is_whitespace) {
        return false;
    }
    let last = why.rsplit('/').next().unwrap_or(why);
    why.contains(['*', '?'])
        || why.ends_with('/')
        || (why.contains('/') && last.contains('.'))
        || std::path::Path::new(why).exists()
}

/// The error for `--force FILE`: the reason was forgotten.
pub fn forgot_reason(why: &str, files: &[String]) -> conductor::error::Error {
    let mut all = vec![quote(why)];
    all.extend(files.iter().map(|f| quote(f)));
    conductor::error::Error::invalid(
        conductor::error::Reason::InvalidInput,
        format!("`--force {why}` reads `{why}` as the reason, but it looks like a path: nothing was claimed"),
    )
    .with_hint(format!(
        "give the reason first: conductor claim --force \"WHY\" {}",
        all.join(" ")
    ))
}

/// `f` as one shell word.
pub fn quote(f: &str) -> String {
    if f.is_empty() || f.contains(|c: char| !(c.is_alphanumeric() || "/._-@:=+,".contains(c))) {
        format!("'{}'", f.replace('\'', "'\\''"))
    } else {
        f.to_string()
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

/// A duration as a person writes it: `500ms`, `2s`, `1.5s`, `5m`, `2h`.
pub fn human_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 3_600_000 == 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

impl Report for Claimed {
    fn to_json(&self) -> serde_json::Value {
        let o = &self.outcome;
        if o.conflicts.is_empty() && o.lost.is_empty() && !refused_landing(o) {
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
            let mut v = json!({"status": "conflict", "conflicts": o.conflicts, "claimed": o.claimed, "message": conflict_message(o)});
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
                        human_duration(d),
                        conflict_message(o)
                    ));
                }
                Some(GaveUp::Stopped) => {
                    v["waited"] = json!("stopped");
                    v["message"] = json!(format!("Stopped waiting. {}", conflict_message(o)));
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
            Some(GaveUp::TimedOut(d)) => {
                (format!("TIMED OUT after {}: ", human_duration(d)), "still")
            }
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
            && !refused_landing(&self.outcome)
        {
            0
        } else {
            3
        }
    }
}

/// True when a landing file was refused (block-foreign).
fn refused_landing(o: &ClaimOutcome) -> bool {
    o.landing.iter().any(|h| h.refused)
}

fn conflict_message(o: &ClaimOutcome) -> String {
    if o.conflicts.is_empty() && o.lost.is_empty() {
        let hits: Vec<String> = o.landing.iter().map(|h| h.notice()).collect();
        return format!("Landing: {}.", hits.join("; "));
    }
    if o.conflicts.is_empty() {
        let lost: Vec<String> = o
            .lost
            .iter()
            .map(|l| format!("{} was {}", l.file, l.describe()))
            .collect();
        return format!("Not held: {}.", lost.join("; "));
    }
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

/// What the user can do next about a conflict: wait for the files, or take them over, as
/// commands that can be pasted as they are.
fn next_steps(o: &ClaimOutcome, instance: Option<&str>, gave_up: Option<GaveUp>) -> String {
    let mut files: Vec<&str> = Vec::new();
    for c in &o.conflicts {
        if !files.contains(&c.file.as_str()) {
            files.push(&c.file);
        }
    }
    let files: Vec<String> = files.into_iter().map(quote).collect();
    let files = files.join(" ");
    let who = instance
        .map(|id| format!("--instance {id} "))
        .unwrap_or_default();
    let wait = match gave_up {
        Some(GaveUp::TimedOut(d)) => format!(
            "`conductor claim {who}--wait={} {files}` waits longer",
            human_duration(d * 5)
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
        if let Some(close) = close_sibling(std::path::Path::new(f)) {
            ctx.out.status(&format!(
                "note: {} does not exist; did you mean {}? (claimed anyway: a file may be claimed before it is created)",
                display_path(f, cwd.as_deref()),
                display_path(&close.to_string_lossy(), cwd.as_deref())
            ));
        }
    }
    print(ctx.out, &Claimed::new(outcome, ctx, &arg, &id))
}

/// For a claimed file that does not exist: an existing entry beside it whose name is one or
/// two edits away (`src/mian.rs` -> `src/main.rs`), the likely typo.
fn close_sibling(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let name = path.file_name()?.to_str()?;
    if name.contains(['*', '?']) || path.to_string_lossy().ends_with('/') || path.exists() {
        return None;
    }
    let parent = path.parent()?;
    let mut best: Option<(usize, std::path::PathBuf)> = None;
    for entry in std::fs::read_dir(parent).ok()?.flatten().take(10_000) {
        let other = entry.file_name();
        let Some(other) = other.to_str() else {
            continue;
        };
        let d = edit_distance(name, other);
        let limit = if name.chars().count() <= 4 { 1 } else { 2 };
        if d > 0 && d <= limit && best.as_ref().is_none_or(|(b, _)| d < *b) {
            best = Some((d, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// Damerau-Levenshtein distance (optimal string alignment): a swap of two neighbours is one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > 2 {
        return usize::MAX;
    }
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
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
