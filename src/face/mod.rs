//! What the faces share: the floor under the CLI (`commands`), the MCP server (`mcp`), the HTTP
//! server (`serve`) and `top`, above the domains. A face imports this, never another face: the
//! context a request runs in ([`Ctx`]), a rendered answer ([`Report`], [`Out`]) and the
//! renderings more than one face prints (`status`, `queue`).

pub mod queue;
pub mod status;
pub mod status_json;
pub mod status_lines;
pub mod table;

use std::path::{Path, PathBuf};

use crate::output::Output;
use conductor::error::Result;
use conductor::store::Store;
use conductor::time::Timestamp;

/// After a session started: launch the watcher of edits nobody claimed, unless one runs or it
/// is turned off. A failure is a warning (the session is registered; `status` says nothing
/// watches).
pub fn watch_edits(store: &Store, out: &Output) {
    if let Err(e) = conductor::protocol::edit_watch::ensure_running(store) {
        out.warn(&format!(
            "edits nobody claimed are not watched (`conductor watch-edits` could not start): {e}"
        ));
    }
}

/// Everything a command needs besides its arguments.
pub struct Ctx<'a> {
    pub store: Store,
    pub now: Timestamp,
    pub out: &'a Output,
}

impl Ctx<'_> {
    /// Who is asking, for the protocol's services.
    pub fn caller(&self) -> conductor::protocol::sessions::Caller {
        conductor::protocol::sessions::Caller {
            cwd: self.cwd().ok(),
        }
    }

    /// Who may claim, by config.json's `enforce` and the live checks' verdicts (only
    /// `require-verified` refuses anyone; nothing is read until a claim asks).
    pub fn admission(&self) -> Result<conductor::app::admission::LiveChecked<'_>> {
        let config = conductor::config::read(&self.store)?;
        Ok(conductor::app::admission::admission(
            &self.store,
            self.now,
            &config,
        ))
    }

    /// The current directory (symlinks resolved).
    pub fn cwd(&self) -> Result<PathBuf> {
        Ok(conductor::host::current_dir()?)
    }
}

/// What a command produced: printed by [`Report::print`], exit code by [`Report::exit_code`].
pub trait Report {
    /// The output object for `--json`.
    fn to_json(&self) -> serde_json::Value;
    /// The `--json` line's text: [`Report::to_json`] serialized. A report as big as the state
    /// (`status`) writes itself straight into the text instead, the same bytes without building
    /// a JSON value of the whole state first.
    fn json_text(&self) -> String {
        serde_json::to_string(&self.to_json()).expect("reports serialize")
    }
    /// The text for people.
    fn to_text(&self) -> String;
    /// 0, or 3 for a conflict, 4 for a blocked gate.
    fn exit_code(&self) -> u8 {
        0
    }
}

/// A report made of a JSON object, its text form and an exit code (commands whose output is
/// built in place rather than from a typed report).
pub struct Out {
    pub json: serde_json::Value,
    pub text: String,
    pub code: u8,
}

impl Out {
    pub fn ok(json: serde_json::Value, text: impl Into<String>) -> Out {
        Out {
            json,
            text: text.into(),
            code: 0,
        }
    }
}

impl Report for Out {
    fn to_json(&self) -> serde_json::Value {
        self.json.clone()
    }
    fn to_text(&self) -> String {
        self.text.clone()
    }
    fn exit_code(&self) -> u8 {
        self.code
    }
}

/// Print a report in the chosen mode.
pub fn print(out: &Output, report: &dyn Report) -> Result<u8> {
    if out.json {
        out.json_text(report.json_text())?;
    } else {
        out.text(&report.to_text())?;
    }
    Ok(report.exit_code())
}

/// Show a path relative to `cwd` when it is inside it, as written otherwise: a directory
/// claim keeps its trailing `/` and a glob its pattern (`src/api/`, `tests/**/*.rs`), so what
/// is shown means what is claimed.
pub fn display_path(path: &str, cwd: Option<&Path>) -> String {
    let Some(base) = cwd.and_then(Path::to_str) else {
        return path.to_string();
    };
    match path
        .strip_prefix(base.trim_end_matches('/'))
        .and_then(|r| r.strip_prefix('/'))
    {
        Some(rel) if !rel.is_empty() => rel.to_string(),
        _ => path.to_string(),
    }
}

/// Where an instance's paths are shown from: its repository's root (the main checkout or the
/// worktree it works in), else its working directory.
pub fn instance_base(working_directory: &str) -> PathBuf {
    let dir = Path::new(working_directory);
    conductor::host::repository_root(dir).unwrap_or_else(|| dir.to_path_buf())
}

pub use conductor::follow::write_out;

/// One page of events, as JSON (`app::events::page`).
pub fn events_page(
    ctx: &Ctx,
    after: Option<u64>,
    limit: u64,
    filter: &conductor::app::events::Filter,
) -> Result<serde_json::Value> {
    let page = conductor::app::events::page(&ctx.store, after, limit, filter)?;
    Ok(serde_json::to_value(page).expect("events serialize"))
}

/// The author: `--as`, else CONDUCTOR_AS, else USER, else `user`.
pub fn author(given: Option<String>) -> String {
    given
        .or_else(|| std::env::var("CONDUCTOR_AS").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::env::var("USER")
                .ok()
                .filter(|u| conductor::agents::text::check_name("n", u).is_ok())
        })
        .unwrap_or_else(|| "user".into())
}

/// The scratch home standing in for a default home that does not exist yet (a read-only
/// command never creates it), and what to show for it.
static STAND_IN: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// Record that the scratch home at `scratch` stands in for `shown`.
pub fn stand_in(scratch: String, shown: String) {
    let _ = STAND_IN.set((scratch, shown));
}

/// Where the store is, as a person should read it: the home that does not exist yet rather
/// than the scratch one standing in for it.
pub fn shown_location(store: &Store) -> String {
    let location = store.location();
    match STAND_IN.get() {
        Some((scratch, shown)) if location.contains(scratch.as_str()) => shown.clone(),
        _ => location,
    }
}
