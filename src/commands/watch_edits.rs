//! `conductor watch-edits`: the watcher of edits nobody claimed (issue 33 §2). A session's
//! start launches it in the background when none runs on the home; it ends by itself when no
//! live session of this machine is left. See `conductor::protocol::edit_watch`.

use super::Ctx;
use conductor::error::Result;
use conductor::protocol::edit_watch::{self, Ended, Options, Said};

/// Watch the live sessions' directories for edits nobody claimed.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Watches the working directory of every live session on this \
machine (inotify; not .git/, target/, node_modules/, the home, nor what git ignores). When a file \
changes there that no live session holds a claim covering (file, directory or glob), under an \
`enforce` mode whose hooks claim or refuse (auto-claim, require-claim, block-overlap, \
require-verified), it records an `edit.unclaimed` event (payload: path, at, sessions, count) and \
keeps the latest in unclaimed.json; `status`, `top` and the dashboard show them. A changed file \
is judged after 300 ms without further change (at most 2 s).\n\n\
Every session's start (`start`, `run`, an agent's SessionStart hook) launches it in the \
background when none runs (one per home; `\"watch_edits\": false` in config.json or \
CONDUCTOR_WATCH_EDITS=0 turns that off). It exits 0 once no live session of this machine is left \
(--stay: keeps watching), or at once when another watcher runs on the home. `status` says \
whether one runs.\n\nExample:\n  conductor watch-edits --stay &"
)]
pub struct WatchEditsArgs {
    /// Keep running when no live session is left (new sessions are watched as they start).
    #[arg(long)]
    pub stay: bool,
}

/// Run `watch-edits`.
pub fn run(ctx: &Ctx, args: WatchEditsArgs) -> Result<u8> {
    let out = ctx.out;
    let ended = edit_watch::run(
        &ctx.store,
        &Options { stay: args.stay },
        &mut |said| match said {
            Said::Watching([]) => out.status("watching no directory"),
            Said::Watching(dirs) => out.status(&format!("watching {}", dirs.join(", "))),
            Said::Recorded(e) => out.warn(&format!(
                "edit.unclaimed: {} changed, claimed by no session (live there: {})",
                e.path,
                e.sessions.join(", ")
            )),
            Said::Problem(p) => out.warn(p),
        },
    )?;
    match ended {
        Ended::AlreadyRunning(pid) => out.status(&match pid {
            Some(p) => format!("another watcher (pid {p}) watches this home"),
            None => "another watcher watches this home".into(),
        }),
        Ended::NoSessions => out.status("no live session left: stopped watching"),
        Ended::HomeGone => out.status("the home is gone: stopped watching"),
    }
    Ok(0)
}
