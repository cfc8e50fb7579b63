//! The spec's status object and its text form: `conductor status`, the MCP `status` tool.

use serde_json::json;

use super::Report;
use super::display_path;
pub use super::status_lines::*;
use conductor::integrations::verdicts::Enforcement;
use conductor::protocol::State;
use conductor::protocol::ops::{self, LiveConflict, Summary};
use conductor::protocol::repositories;
use conductor::protocol::sessions;
use conductor::time::Timestamp;

/// The spec's status object.
pub struct StatusReport {
    pub state: State,
    pub conflicts: Vec<LiveConflict>,
    pub summary: Summary,
    pub now: Timestamp,
    pub cwd: Option<std::path::PathBuf>,
    /// What another program left inconsistent ([`conductor::protocol::foreign::inspect`]).
    pub warnings: Vec<String>,
    /// Side files that could not be read, one sentence each (`app::picture::Picture::unreadable`).
    pub unreadable: Vec<String>,
    /// Each hook-registered session's enforcement (instance id → it), from the live checks.
    pub enforcement: std::collections::BTreeMap<String, Enforcement>,
    /// Claims grouped by git repository and worktree ([`repositories::group`]).
    pub repositories: Vec<repositories::RepositoryClaims>,
    /// Finished branches whose files are landing (`landing.json`).
    pub landing: Vec<conductor::protocol::landing::Landing>,
    /// Files changed in several live worktrees of a repository sessions work in
    /// ([`conductor::protocol::overlaps::of_sessions`]).
    pub overlaps: Vec<conductor::protocol::overlaps::Report>,
    /// Edits nobody claimed that concern a listed instance, newest first (`unclaimed.json`).
    pub unclaimed: Vec<conductor::protocol::unclaimed::UnclaimedEdit>,
    /// Whether the watcher of those edits runs (absent: not asked).
    pub edit_watch: Option<EditWatch>,
}

/// Whether `conductor watch-edits` watches, as status shows it.
pub use conductor::protocol::edit_watch::WatchStatus as EditWatch;

/// The watcher's state as `status --json` gives it.
pub fn edit_watch_json(w: &EditWatch) -> serde_json::Value {
    match &w.running {
        Some(r) => json!({"watching": true, "enabled": w.enabled, "pid": r.pid,
                          "since": r.since, "directories": r.directories, "problem": r.problem}),
        None => json!({"watching": false, "enabled": w.enabled}),
    }
}

/// One line: who watches what, or that nothing does and why.
pub fn edit_watch_line(w: &EditWatch) -> String {
    match &w.running {
        Some(w) => {
            let mut s = format!(
                "Edits nobody claimed: watched by pid {} in {}",
                w.pid.map_or("?".into(), |p| p.to_string()),
                if w.directories.is_empty() {
                    "no directory yet".to_string()
                } else {
                    w.directories.join(", ")
                }
            );
            if let Some(p) = &w.problem {
                s.push_str(&format!(" (but {p})"));
            }
            s
        }
        None if w.enabled => "Edits nobody claimed: NOT watched (no `conductor watch-edits` \
                 runs; a session's start launches it, or run it yourself)"
            .into(),
        None => "Edits nobody claimed: not watched (turned off: watch_edits in config.json \
                     or CONDUCTOR_WATCH_EDITS)"
            .into(),
    }
}

impl Report for StatusReport {
    fn json_text(&self) -> String {
        serde_json::to_string(&self.as_json()).expect("reports serialize")
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.as_json()).expect("reports serialize")
    }
    fn to_text(&self) -> String {
        let s = &self.summary;
        let mut out = vec![format!(
            "conductor · {} active · {} file{} claimed{}",
            s.active_count,
            s.total_files_claimed,
            if s.total_files_claimed == 1 { "" } else { "s" },
            if s.active_count > 0 {
                format!(" · oldest {}m", s.oldest_instance_age_minutes)
            } else {
                String::new()
            }
        )];
        if self.state.instances.is_empty() {
            out.push(
                "No active instances. Start one with: conductor start \"TASK\" --priority P1"
                    .into(),
            );
        }
        // Across machines (a shared store), say where each instance runs.
        let hosts: std::collections::BTreeSet<Option<&str>> = self
            .state
            .instances
            .iter()
            .map(|i| i.host.as_deref())
            .collect();
        let several_hosts = hosts.len() > 1;
        // A table of the instances (header, one row each), each row followed by its working
        // directory, its claims and its waits, indented.
        let mut table =
            super::table::Table::new(&["INSTANCE", "PRI", "STARTED", "BEAT", "PROJECT", "TASK"]);
        for i in &self.state.instances {
            table.row(vec![
                i.id.clone(),
                i.priority.to_string(),
                format!("{}m ago", i.started_at.minutes_until(self.now)),
                format!("{}m ago", i.last_heartbeat.minutes_until(self.now)),
                i.project.clone(),
                i.task.clone(),
            ]);
        }
        let rendered = table.render();
        let mut rows = rendered.lines();
        if !self.state.instances.is_empty() {
            out.push(fit(rows.next().unwrap_or_default(), WIDTH));
        }
        for (i, row) in self.state.instances.iter().zip(rows) {
            let wd = match (&i.host, several_hosts) {
                (Some(h), true) => format!("{h}:{}", i.working_directory),
                _ => i.working_directory.clone(),
            };
            out.push(fit(row, WIDTH));
            out.push(fit(&format!("    in {wd}"), WIDTH));
            if let Some(e) = self.enforcement.get(&i.id) {
                out.push(fit(&format!("    {}", enforcement_line(i, e)), WIDTH));
            }
            for f in &i.files_claimed {
                out.push(fit(
                    &format!("    {}", display_path(f, self.cwd.as_deref())),
                    WIDTH,
                ));
            }
            for w in &i.waiting_for {
                let pos = ops::queue_position(&self.state, &i.id, &w.file).unwrap_or(0);
                let file = display_path(&w.file, self.cwd.as_deref());
                out.push(fit(
                    &format!("    waiting for {file} (#{pos} in queue)"),
                    WIDTH,
                ));
            }
        }
        if repositories::worth_showing(&self.repositories) {
            out.extend(repository_lines(&self.repositories));
        }
        if !self.conflicts.is_empty() {
            out.push("Conflicts:".into());
            for c in &self.conflicts {
                out.push(fit(
                    &format!(
                        "  {} wants {} (held by {})",
                        c.requested_by,
                        display_path(&c.file, self.cwd.as_deref()),
                        c.held_by
                    ),
                    WIDTH,
                ));
            }
        }
        if !self.landing.is_empty() {
            out.push("Landing (reserved until merged or deleted):".into());
            for l in &self.landing {
                out.push(fit(
                    &format!(
                        "  branch {} → {} in {} ({}, \"{}\"): {}",
                        l.branch,
                        l.base,
                        l.worktree.trim_end_matches('/'),
                        l.instance_id,
                        l.task,
                        l.files.join(", ")
                    ),
                    WIDTH,
                ));
            }
        }
        let open: Vec<_> = self
            .state
            .drift_warnings
            .iter()
            .filter(|w| !w.acknowledged)
            .collect();
        if !open.is_empty() {
            out.push("Drift warnings:".into());
            for w in open {
                out.push(fit(&format!("  {}: {}", w.instance_id, w.reason), WIDTH));
            }
        }
        if !self.overlaps.is_empty() {
            out.push("Changed in several worktrees (see `conductor overlaps`):".into());
            out.extend(
                overlap_lines(&self.overlaps)
                    .iter()
                    .map(|l| format!("  {l}")),
            );
        }
        if !self.unclaimed.is_empty() {
            out.push("Edits nobody claimed (an agent editing without its hooks?):".into());
            for l in unclaimed_lines(&self.unclaimed, self.now, self.cwd.as_deref()) {
                out.push(fit(&format!("  {l}"), WIDTH));
            }
        }
        if let Some(w) = &self.edit_watch
            && !self.state.instances.is_empty()
            && (w.running.is_some() || w.enabled)
        {
            out.push(fit(&edit_watch_line(w), 400));
        }
        if !self.warnings.is_empty() {
            out.push(
                "Warning: status.json was written by another program and is not in conductor's form; \
                 it is served as it is (global_claims is the truth) and the next conductor command \
                 will repair it:"
                    .into(),
            );
            for w in &self.warnings {
                out.push(format!("  {}", fit(w, 400)));
            }
        }
        for u in &self.unreadable {
            out.push(format!("Warning: {}", fit(u, 400)));
        }
        out.join("\n")
    }
}

impl StatusReport {
    /// Add what is around the sessions: enforcement, landing, overlaps, unclaimed edits.
    pub fn picture(&mut self, p: conductor::app::picture::Picture) {
        self.enforcement = p.enforcement;
        self.landing = p.landing;
        self.overlaps = p.overlaps;
        self.unclaimed = p.unclaimed;
        self.unreadable = p.unreadable;
    }
}

/// Build the status report from a state (`protocol::sessions::status_of`).
pub fn report(state: State, now: Timestamp, cwd: Option<std::path::PathBuf>) -> StatusReport {
    from(sessions::status_of(state, now), now, cwd)
}

pub fn from(st: sessions::Status, now: Timestamp, cwd: Option<std::path::PathBuf>) -> StatusReport {
    let mut state = st.state;
    let repositories = repositories::find(&mut state);
    StatusReport {
        state,
        repositories,
        conflicts: st.conflicts,
        summary: st.summary,
        warnings: st.warnings,
        unreadable: Vec::new(),
        now,
        cwd,
        enforcement: Default::default(),
        landing: Vec::new(),
        overlaps: Vec::new(),
        unclaimed: Vec::new(),
        edit_watch: None,
    }
}
