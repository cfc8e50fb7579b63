//! The overview's rows and sections, and how a time ago is shown.

use super::*;

/// The four parts of the home, in the order they are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Instances,
    Agents,
    Workflows,
    Queue,
}

impl Section {
    pub const ALL: [Section; 4] = [
        Section::Instances,
        Section::Agents,
        Section::Workflows,
        Section::Queue,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Section::Instances => "Instances and claims",
            Section::Agents => "Agents and inboxes",
            Section::Workflows => "Workflow sessions",
            Section::Queue => "Queue jobs",
        }
    }

    /// What the section says when it has nothing.
    pub fn empty(self) -> &'static str {
        match self {
            Section::Instances => "no active instances",
            Section::Agents => "no registered agents",
            Section::Workflows => "no live workflow sessions",
            Section::Queue => "no live jobs",
        }
    }
}

/// An active instance and what it holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceRow {
    pub id: String,
    pub priority: String,
    pub project: String,
    pub task: String,
    pub claims: Vec<String>,
    pub waiting_for: Vec<String>,
    pub started_at: Timestamp,
    pub last_heartbeat: Timestamp,
    pub working_directory: String,
    /// A hook-registered session's agent, version and enforcement, as one line
    /// (`claude 2.1.197 · enforced`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<String>,
    /// The git worktree it works in, when its repository has several: its root, its branch and
    /// the repository, as one line (`worktree /w/app-b · branch feature/b · repository /w/app/.git`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// Files its worktree changed that another live worktree of the repository changed too
    /// (`src/x.rs also changed in /w/app-b (feature/b) · CONFLICT predicted`), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlaps: Vec<String>,
}

/// A registered agent and its inbox.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentRow {
    pub name: String,
    pub handle: String,
    pub watch: Vec<String>,
    /// Actionable inbox items (pending or seen).
    pub open: usize,
    /// Of those, claimed by a worker now.
    pub claimed: usize,
    /// Unacknowledged mentions.
    pub mentions: usize,
    /// The newest actionable items' previews (newest first, at most 5).
    pub latest: Vec<String>,
}

/// A live workflow session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionRow {
    pub id: String,
    pub template: String,
    pub task: String,
    pub status: String,
    pub current_state: Option<String>,
    /// `Plan [✓] -> Build [●] -> Verify [ ]`.
    pub timeline: String,
    pub runs: usize,
    pub tokens: u64,
    pub cost_usd: f64,
}

/// A live queue job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRow {
    pub key: String,
    pub state: String,
    pub attempts: u32,
    pub agent: String,
    pub depends_on: Vec<String>,
    pub reason: Option<String>,
    pub since: Timestamp,
}

/// Counts of the queue's jobs per state (progress).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Progress {
    pub total: usize,
    pub by_state: BTreeMap<String, usize>,
}

/// The whole overview.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overview {
    pub home: String,
    /// The journal's last seq when it was read (what it is up to date with).
    pub seq: u64,
    pub instances: Vec<InstanceRow>,
    pub agents: Vec<AgentRow>,
    pub sessions: Vec<SessionRow>,
    pub jobs: Vec<JobRow>,
    pub progress: Progress,
    /// Finished branches whose files stay reserved until they land (`landing.json`), as lines:
    /// one per branch, then one per file, indented.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub landing: Vec<String>,
    /// Edits nobody claimed (`unclaimed.json`), one line each, then whether anything watches;
    /// empty when no instance is listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclaimed: Vec<String>,
}

/// The title of the block of edits nobody claimed.
pub const UNCLAIMED_TITLE: &str = "Edits nobody claimed";

/// The title of the landing block (shown only when something is landing).
pub const LANDING_TITLE: &str = "Landing (reserved until merged or deleted)";

/// The lines `top` shows for what is landing: per branch, where it must land, its worktree and
/// the session that finished it, then its files (relative to the worktree).
pub fn landing_lines(landing: &[conductor::protocol::landing::Landing]) -> Vec<String> {
    let mut out = Vec::new();
    for l in landing {
        out.push(one_line(&format!(
            "branch {} → {} · worktree {} · finished by {} \"{}\" · {} file{}",
            l.branch,
            l.base,
            l.worktree.trim_end_matches('/'),
            l.instance_id,
            l.task,
            l.files.len(),
            if l.files.len() == 1 { "" } else { "s" }
        )));
        out.extend(l.files.iter().map(|f| format!("    {}", one_line(f))));
    }
    out
}

/// One selectable line: its section and its index in that section's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemRef {
    pub section: Section,
    pub index: usize,
}

/// How long ago, in a few characters (`42s`, `5m`, `3h`, `2d`).
pub fn ago(then: Timestamp, now: Timestamp) -> String {
    let secs = then.seconds_until(now);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

pub(super) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

impl InstanceRow {
    /// How this instance's paths are shown: relative to its repository (or directory), with a
    /// directory's `/` and a glob's pattern kept, on one line.
    pub fn shown_paths(&self) -> impl Fn(&str) -> String + '_ {
        let base = crate::face::instance_base(&self.working_directory);
        move |p: &str| one_line(&crate::face::display_path(p, Some(&base)))
    }
}
