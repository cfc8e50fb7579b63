//! What `conductor top` and `conductor status --watch` show: one overview of the home, built
//! from the domains' reads by pure functions ([`Overview::build`]), so it is tested without a
//! terminal. Only [`read`] touches the store.

use std::collections::BTreeMap;

use serde::Serialize;

use conductor::agents::{self, Agents, Inbox};
use conductor::protocol::State;
use conductor::queue::Job;
use conductor::time::Timestamp;
use conductor::workflows::Session;

mod read;
mod rows;

pub use read::read;
pub use rows::*;

impl Overview {
    /// Build the overview from what the domains hold. Pure.
    pub fn build(
        home: String,
        seq: u64,
        state: &State,
        agents: &Agents,
        inbox: &Inbox,
        sessions: &[Session],
        jobs: &[Job],
    ) -> Overview {
        let instances = state
            .instances
            .iter()
            .map(|i| InstanceRow {
                id: i.id.clone(),
                priority: i.priority.to_string(),
                project: one_line(&i.project),
                task: one_line(&i.task),
                claims: i.files_claimed.to_vec(),
                waiting_for: i.waiting_for.iter().map(|w| w.file.clone()).collect(),
                started_at: i.started_at,
                last_heartbeat: i.last_heartbeat,
                working_directory: i.working_directory.clone(),
                enforcement: None,
                worktree: None,
                overlaps: Vec::new(),
            })
            .collect();
        let agents = agents
            .agents
            .values()
            .map(|a| {
                let g = agents::views::glance(inbox, &a.name);
                AgentRow {
                    name: a.name.clone(),
                    handle: a.handle.clone(),
                    watch: a.watch.clone(),
                    open: g.open.len(),
                    claimed: g.claimed,
                    mentions: g.mentions,
                    latest: g
                        .open
                        .iter()
                        .take(5)
                        .map(|it| format!("{}: {}", it.author, one_line(&it.preview)))
                        .collect(),
                }
            })
            .collect();
        let sessions = sessions
            .iter()
            .map(|s| SessionRow {
                id: s.id.clone(),
                template: s.template.name.clone(),
                task: one_line(&s.task),
                status: s.status.as_str().to_string(),
                current_state: s.current_state.clone(),
                timeline: conductor::workflows::timeline::breadcrumbs(s),
                runs: s.runs.len(),
                tokens: s.totals.tokens,
                cost_usd: s.totals.cost_usd,
            })
            .collect();
        let mut progress = Progress::default();
        let jobs = jobs
            .iter()
            .map(|j| {
                progress.total += 1;
                *progress
                    .by_state
                    .entry(j.state.state.as_str().to_string())
                    .or_default() += 1;
                JobRow {
                    key: j.key(),
                    state: j.state.state.as_str().to_string(),
                    attempts: j.state.attempts,
                    agent: j.agent.clone(),
                    depends_on: j.depends_on.clone(),
                    reason: j.state.reason.as_ref().map(|r| one_line(r)),
                    since: j.state.since,
                }
            })
            .collect();
        Overview {
            home,
            seq,
            instances,
            agents,
            sessions,
            jobs,
            progress,
            landing: Vec::new(),
            unclaimed: Vec::new(),
        }
    }

    /// How many rows a section has.
    pub fn len(&self, s: Section) -> usize {
        match s {
            Section::Instances => self.instances.len(),
            Section::Agents => self.agents.len(),
            Section::Workflows => self.sessions.len(),
            Section::Queue => self.jobs.len(),
        }
    }

    /// Every selectable line, in display order.
    pub fn items(&self) -> Vec<ItemRef> {
        Section::ALL
            .iter()
            .flat_map(|&section| {
                (0..self.len(section)).map(move |index| ItemRef { section, index })
            })
            .collect()
    }

    /// A row's one-line summary, as a list shows it.
    pub fn line(&self, it: ItemRef, now: Timestamp) -> String {
        match it.section {
            Section::Instances => {
                let i = &self.instances[it.index];
                format!(
                    "{}  {}  {} · {} · {} claim{} · beat {} ago",
                    i.id,
                    i.priority,
                    i.project,
                    i.task,
                    i.claims.len(),
                    if i.claims.len() == 1 { "" } else { "s" },
                    ago(i.last_heartbeat, now)
                )
            }
            Section::Agents => {
                let a = &self.agents[it.index];
                format!(
                    "{}  inbox {} open ({} claimed) · {} mention{} · watching {}",
                    a.handle,
                    a.open,
                    a.claimed,
                    a.mentions,
                    if a.mentions == 1 { "" } else { "s" },
                    if a.watch.is_empty() {
                        "-".to_string()
                    } else {
                        a.watch.join(", ")
                    }
                )
            }
            Section::Workflows => {
                let s = &self.sessions[it.index];
                format!(
                    "{}  {}  {} · {} · {}",
                    s.id, s.status, s.template, s.task, s.timeline
                )
            }
            Section::Queue => {
                let j = &self.jobs[it.index];
                format!(
                    "{:<10} {}  attempt {}{} · {} ago",
                    j.state,
                    j.key,
                    j.attempts,
                    j.reason
                        .as_ref()
                        .map(|r| format!(" · {r}"))
                        .unwrap_or_default(),
                    ago(j.since, now)
                )
            }
        }
    }

    /// A row as a list shows it: its summary line, then (for an instance) one line per claimed
    /// path and per path it waits for.
    pub fn lines(&self, it: ItemRef, now: Timestamp) -> Vec<String> {
        let mut out = vec![self.line(it, now)];
        if it.section == Section::Instances {
            let i = &self.instances[it.index];
            let shown = i.shown_paths();
            out.extend(i.worktree.iter().map(|w| format!("    {w}")));
            out.extend(i.enforcement.iter().map(|e| format!("    {e}")));
            out.extend(i.overlaps.iter().map(|o| format!("    {o}")));
            out.extend(i.claims.iter().map(|c| format!("    {}", shown(c))));
            out.extend(
                i.waiting_for
                    .iter()
                    .map(|c| format!("    waiting for {}", shown(c))),
            );
        }
        out
    }

    /// How many lines a section's rows take.
    pub fn height(&self, s: Section) -> usize {
        match s {
            Section::Instances => self
                .instances
                .iter()
                .map(|i| {
                    1 + usize::from(i.worktree.is_some())
                        + usize::from(i.enforcement.is_some())
                        + i.overlaps.len()
                        + i.claims.len()
                        + i.waiting_for.len()
                })
                .sum(),
            _ => self.len(s),
        }
    }

    /// Everything about one row, one line each (the detail view).
    pub fn details(&self, it: ItemRef, now: Timestamp) -> Vec<String> {
        let mut out = Vec::new();
        match it.section {
            Section::Instances => {
                let i = &self.instances[it.index];
                out.push(format!("instance   {}", i.id));
                out.push(format!("task       {}", i.task));
                out.push(format!("project    {} ({})", i.project, i.priority));
                out.push(format!("directory  {}", i.working_directory));
                if let Some(w) = &i.worktree {
                    out.push(format!("git        {w}"));
                }
                if let Some(e) = &i.enforcement {
                    out.push(format!("agent      {e}"));
                }
                for o in &i.overlaps {
                    out.push(format!("overlap    {o}"));
                }
                out.push(format!(
                    "started    {} ago · heartbeat {} ago",
                    ago(i.started_at, now),
                    ago(i.last_heartbeat, now)
                ));
                out.push(format!("claims     {}", i.claims.len()));
                let shown = i.shown_paths();
                out.extend(i.claims.iter().map(|c| format!("  {}", shown(c))));
                if !i.waiting_for.is_empty() {
                    out.push("waiting for".into());
                    out.extend(i.waiting_for.iter().map(|c| format!("  {}", shown(c))));
                }
            }
            Section::Agents => {
                let a = &self.agents[it.index];
                out.push(format!("agent      {} ({})", a.name, a.handle));
                out.push(format!("watching   {}", a.watch.join(", ")));
                out.push(format!(
                    "inbox      {} open, {} claimed, {} mentions",
                    a.open, a.claimed, a.mentions
                ));
                out.extend(a.latest.iter().map(|l| format!("  {l}")));
            }
            Section::Workflows => {
                let s = &self.sessions[it.index];
                out.push(format!("session    {} ({})", s.id, s.template));
                out.push(format!("task       {}", s.task));
                out.push(format!("status     {}", s.status));
                out.push(format!(
                    "state      {}",
                    s.current_state.as_deref().unwrap_or("-")
                ));
                out.push(format!("timeline   {}", s.timeline));
                out.push(format!(
                    "runs       {} · {} tokens · ${:.4}",
                    s.runs, s.tokens, s.cost_usd
                ));
                out.push(format!(
                    "output     conductor workflow log {} --follow",
                    s.id
                ));
            }
            Section::Queue => {
                let j = &self.jobs[it.index];
                out.push(format!("job        {}", j.key));
                out.push(format!(
                    "state      {} since {} ago (attempts: {})",
                    j.state,
                    ago(j.since, now),
                    j.attempts
                ));
                out.push(format!("agent      {}", j.agent));
                out.push(format!(
                    "depends on {}",
                    if j.depends_on.is_empty() {
                        "-".to_string()
                    } else {
                        j.depends_on.join(", ")
                    }
                ));
                if let Some(r) = &j.reason {
                    out.push(format!("reason     {r}"));
                }
                out.push(format!("output     conductor queue log {} --follow", j.key));
            }
        }
        out
    }

    /// The queue's progress in one line (`3 jobs: 1 completed, 1 running, 1 queued`).
    pub fn progress_line(&self) -> String {
        let p = &self.progress;
        if p.total == 0 {
            return "no live jobs".into();
        }
        let parts: Vec<String> = p.by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!(
            "{} job{}: {}",
            p.total,
            if p.total == 1 { "" } else { "s" },
            parts.join(", ")
        )
    }

    /// The overview as plain text (`status --watch`), at most `width` columns a line.
    pub fn to_text(&self, now: Timestamp, width: usize) -> String {
        let mut out = vec![fit(
            &format!(
                "conductor · {} · journal seq {} · {}",
                self.home, self.seq, now
            ),
            width,
        )];
        for section in Section::ALL {
            let n = self.len(section);
            let head = match section {
                Section::Queue => format!("{} ({})", section.title(), self.progress_line()),
                _ => format!("{} ({n})", section.title()),
            };
            out.push(fit(&head, width));
            if n == 0 {
                out.push(fit(&format!("  {}", section.empty()), width));
            }
            for index in 0..n {
                let it = ItemRef { section, index };
                for l in self.lines(it, now) {
                    out.push(fit(&format!("  {l}"), width));
                }
            }
            if section == Section::Instances && !self.landing.is_empty() {
                out.push(fit(LANDING_TITLE, width));
                for l in &self.landing {
                    out.push(fit(&format!("  {l}"), width));
                }
            }
            if section == Section::Instances && !self.unclaimed.is_empty() {
                out.push(fit(UNCLAIMED_TITLE, width));
                for l in &self.unclaimed {
                    out.push(fit(&format!("  {l}"), width));
                }
            }
        }
        out.join("\n")
    }
}

/// Cut a line to `width` characters, marking the cut with `…`.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
