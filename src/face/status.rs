//! The spec's status object and its text form: `conductor status`, the MCP `status` tool.

use serde_json::json;

use super::{Report, display_path};
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
#[derive(Clone, Debug)]
pub struct EditWatch {
    /// The running watcher's note, if one runs.
    pub running: Option<conductor::protocol::edit_watch::Watching>,
    /// False when its automatic start is turned off.
    pub enabled: bool,
}

impl EditWatch {
    /// What the home's watcher does now.
    pub fn of(store: &conductor::store::Store) -> EditWatch {
        use conductor::protocol::edit_watch;
        let enabled = conductor::config::read(store)
            .map(|c| edit_watch::enabled(&c))
            .unwrap_or(true);
        EditWatch {
            running: edit_watch::watching(store.home().dir()).ok().flatten(),
            enabled,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match &self.running {
            Some(w) => json!({"watching": true, "enabled": self.enabled, "pid": w.pid,
                              "since": w.since, "directories": w.directories, "problem": w.problem}),
            None => json!({"watching": false, "enabled": self.enabled}),
        }
    }

    /// One line: who watches what, or that nothing does and why.
    pub fn line(&self) -> String {
        match &self.running {
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
            None if self.enabled => {
                "Edits nobody claimed: NOT watched (no `conductor watch-edits` \
                 runs; a session's start launches it, or run it yourself)"
                    .into()
            }
            None => "Edits nobody claimed: not watched (turned off: watch_edits in config.json \
                     or CONDUCTOR_WATCH_EDITS)"
                .into(),
        }
    }
}

/// The unclaimed edits as lines: the file, how long ago, how often, the sessions there.
pub fn unclaimed_lines(
    edits: &[conductor::protocol::unclaimed::UnclaimedEdit],
    now: Timestamp,
    cwd: Option<&std::path::Path>,
) -> Vec<String> {
    edits
        .iter()
        .map(|e| {
            let times = if e.count > 1 {
                format!(" ({} times)", e.count)
            } else {
                String::new()
            };
            format!(
                "{} · {}m ago{times} · claimed by no session; live there: {}",
                display_path(&e.path, cwd),
                e.at.minutes_until(now),
                e.sessions.join(", ")
            )
        })
        .collect()
}

/// The landing branches as status and the dashboard show them.
pub fn landing_json(landing: &[conductor::protocol::landing::Landing]) -> serde_json::Value {
    landing
        .iter()
        .map(|l| {
            json!({"branch": l.branch, "base": l.base, "worktree": l.worktree.trim_end_matches('/'),
                   "instance_id": l.instance_id, "task": l.task, "since": l.since, "files": l.files})
        })
        .collect()
}

/// The enforcement of every instance a hook registered (it names its agent), from the live
/// checks' verdicts kept in the home. Nothing is read when no instance names an agent.
pub fn enforcement_of(
    store: &conductor::store::Store,
    now: Timestamp,
    state: &State,
) -> std::collections::BTreeMap<String, Enforcement> {
    let mut out = std::collections::BTreeMap::new();
    if state.instances.iter().all(|i| i.agent.is_none()) {
        return out;
    }
    let checks = conductor::integrations::verdicts::read(store, now).unwrap_or_default();
    for i in &state.instances {
        if let Some(agent) = &i.agent {
            out.insert(
                i.id.clone(),
                checks.of(agent, i.agent_version.as_deref(), &i.working_directory),
            );
        }
    }
    out
}

/// One line naming a session's agent, its version and whether its hooks are proven to bite.
pub fn enforcement_line(i: &conductor::protocol::Instance, e: &Enforcement) -> String {
    let agent = i.agent.as_deref().unwrap_or("agent");
    let who = match &i.agent_version {
        Some(v) => format!("{agent} {v}"),
        None => agent.to_string(),
    };
    match e {
        Enforcement::Enforced => format!("{who} · enforced"),
        // (No live check saw this version here yet.)
        Enforcement::Unverified => {
            format!("{who} · unverified: `conductor integrate {agent}` checks it")
        }
        Enforcement::Unenforced(why) => format!("{who} · UNENFORCED: {why}"),
    }
}

/// The claims of each repository with several worktrees, under the worktree they were made in
/// (its branch, the sessions working there), relative to its root.
pub fn repository_lines(groups: &[repositories::RepositoryClaims]) -> Vec<String> {
    let mut out = vec!["By repository:".to_string()];
    for r in groups.iter().filter(|r| r.worktree_count > 1) {
        out.push(fit(
            &format!("  {} ({} worktrees)", r.repository, r.worktree_count),
            WIDTH,
        ));
        for w in &r.worktrees {
            let mut head = format!(
                "    {} · branch {}",
                w.worktree,
                w.branch.as_deref().unwrap_or("unknown")
            );
            if !w.instances.is_empty() {
                head.push_str(&format!(" · {}", w.instances.join(", ")));
            }
            out.push(fit(&head, WIDTH));
            for c in &w.claims {
                // The holder is named unless it is the one session working there.
                let own = w.instances.len() == 1 && w.instances[0] == c.held_by;
                let line = if own {
                    format!("      {}", c.path)
                } else {
                    format!("      {}  held by {}", c.path, c.held_by)
                };
                out.push(fit(&line, WIDTH));
            }
        }
    }
    out
}

const WIDTH: usize = 80;

fn fit(s: &str, width: usize) -> String {
    // Control characters (a newline or an escape sequence in a task) must not break the
    // dashboard's lines or reach the terminal raw.
    let escaped: String;
    let s = if s.chars().any(char::is_control) {
        escaped = s
            .chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        escaped.as_str()
    } else {
        s
    };
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

impl Report for StatusReport {
    fn to_json(&self) -> serde_json::Value {
        let mut v = json!({"status": "ok", "instances": self.state.instances, "conflicts": self.conflicts,
               "drift_warnings": self.state.drift_warnings, "summary": self.summary});
        if !self.repositories.is_empty() {
            v["repositories"] = json!(self.repositories);
        }
        if !self.warnings.is_empty() {
            v["state_warnings"] = json!(self.warnings);
        }
        if !self.landing.is_empty() {
            v["landing"] = landing_json(&self.landing);
        }
        if !self.overlaps.is_empty() {
            v["overlaps"] = json!(self.overlaps);
        }
        if !self.unclaimed.is_empty() {
            v["unclaimed_edits"] = json!(self.unclaimed);
        }
        // Turned off on purpose, the watcher is not news: the protocol's object stays as the
        // spec gives it (the text still says so). Running, or meant to run and not running, is.
        if let Some(w) = &self.edit_watch
            && !self.state.instances.is_empty()
            && (w.enabled || w.running.is_some())
        {
            v["edit_watch"] = w.to_json();
        }
        if !self.enforcement.is_empty() {
            v["enforcement"] = self
                .enforcement
                .iter()
                .map(|(id, e)| {
                    let detail = match e {
                        Enforcement::Unenforced(why) => json!(why),
                        _ => serde_json::Value::Null,
                    };
                    (id.clone(), json!({"state": e.as_str(), "detail": detail}))
                })
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        v
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
            out.push(fit(&w.line(), 400));
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
        out.join("\n")
    }
}

/// One line per file changed in several worktrees: the file, each worktree with its branch
/// and sessions, and the pairs git predicts to conflict.
pub fn overlap_lines(reports: &[conductor::protocol::overlaps::Report]) -> Vec<String> {
    let mut out = Vec::new();
    for r in reports {
        let name = |path: &str| match r.worktrees.iter().find(|t| t.path == path) {
            Some(t) if t.sessions.is_empty() => format!("{path} ({})", t.branch),
            Some(t) => format!("{path} ({}; {})", t.branch, t.sessions.join(", ")),
            None => path.to_string(),
        };
        for o in &r.overlaps {
            let conflict = if o.conflicts.is_empty() {
                String::new()
            } else {
                format!(
                    " · CONFLICT predicted: {}",
                    o.conflicts
                        .iter()
                        .map(|[a, b]| format!("{a} + {b}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            out.push(format!(
                "{} in {}{conflict}",
                o.file,
                o.worktrees
                    .iter()
                    .map(|w| name(w))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    out
}

/// The files worktree `path` changed that other worktrees changed too, one line each, naming
/// the others with their branches and the pairs with `path` git predicts to conflict.
pub fn overlaps_of_worktree(r: &conductor::protocol::overlaps::Report, path: &str) -> Vec<String> {
    let branch = |p: &str| {
        r.worktrees
            .iter()
            .find(|t| t.path == p)
            .map(|t| format!("{p} ({})", t.branch))
            .unwrap_or_else(|| p.to_string())
    };
    r.overlaps
        .iter()
        .filter(|o| o.worktrees.iter().any(|w| w == path))
        .map(|o| {
            let others: Vec<String> = o
                .worktrees
                .iter()
                .filter(|w| *w != path)
                .map(|w| branch(w))
                .collect();
            let conflict = o.conflicts.iter().any(|[a, b]| a == path || b == path);
            format!(
                "{} also changed in {}{}",
                o.file,
                others.join(", "),
                if conflict {
                    " · CONFLICT predicted"
                } else {
                    ""
                }
            )
        })
        .collect()
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
        now,
        cwd,
        enforcement: Default::default(),
        landing: Vec::new(),
        overlaps: Vec::new(),
        unclaimed: Vec::new(),
        edit_watch: None,
    }
}
