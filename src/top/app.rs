//! The state of a `top` screen between keys: the overview shown, which row is selected, and
//! whether one row's details are open. Pure (keys in, state out), so it is tested without a
//! terminal.

use super::model::{ItemRef, Overview, Section};

/// What a key asks for (the terminal's keys are mapped to these in `top::run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    /// The first row of the next section (Tab).
    NextSection,
    Enter,
    Back,
    Quit,
}

/// The screen's state.
pub struct App {
    pub overview: Overview,
    /// Index into `overview.items()`.
    pub selected: usize,
    /// The details of the selected row are open.
    pub detail: bool,
    /// Draw with ASCII only (TERM=dumb, --ascii).
    pub ascii: bool,
}

impl App {
    pub fn new(overview: Overview, ascii: bool) -> App {
        App {
            overview,
            selected: 0,
            detail: false,
            ascii,
        }
    }

    /// The selected row, if there is any row.
    pub fn current(&self) -> Option<ItemRef> {
        self.overview.items().get(self.selected).copied()
    }

    /// A stable name for a row (its id), to keep the selection on it across updates.
    fn identity(o: &Overview, it: ItemRef) -> String {
        match it.section {
            Section::Instances => o.instances[it.index].id.clone(),
            Section::Agents => o.agents[it.index].name.clone(),
            Section::Workflows => o.sessions[it.index].id.clone(),
            Section::Queue => o.jobs[it.index].key.clone(),
        }
    }

    /// Show a newer overview, keeping the selection on the same thing when it is still there
    /// (else on the same position). Details stay open only while their row exists.
    pub fn update(&mut self, overview: Overview) {
        let old = self
            .current()
            .map(|it| (it.section, Self::identity(&self.overview, it)));
        self.overview = overview;
        let items = self.overview.items();
        let found = old.as_ref().and_then(|(sec, id)| {
            items
                .iter()
                .position(|it| it.section == *sec && &Self::identity(&self.overview, *it) == id)
        });
        match found {
            Some(i) => self.selected = i,
            None => {
                self.detail = false;
                self.selected = self.selected.min(items.len().saturating_sub(1));
            }
        }
    }

    /// Apply a key; false when the screen should close.
    pub fn key(&mut self, k: Key) -> bool {
        let n = self.overview.items().len();
        match k {
            Key::Quit => return false,
            Key::Up if !self.detail => self.selected = self.selected.saturating_sub(1),
            Key::Down if !self.detail => {
                self.selected = (self.selected + 1).min(n.saturating_sub(1))
            }
            Key::NextSection if !self.detail => {
                let items = self.overview.items();
                if let Some(cur) = items.get(self.selected) {
                    let next = items
                        .iter()
                        .enumerate()
                        .skip(self.selected)
                        .find(|(_, it)| it.section != cur.section)
                        .map_or(0, |(i, _)| i);
                    self.selected = next;
                }
            }
            Key::Enter if n > 0 => self.detail = true,
            Key::Back => self.detail = false,
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::{AgentRow, InstanceRow, JobRow, Progress};
    use conductor::time::Timestamp;

    fn overview(instances: &[&str], agents: &[&str], jobs: &[&str]) -> Overview {
        let t = Timestamp::parse("2026-11-25T04:00:00Z").unwrap();
        Overview {
            home: "/h".into(),
            seq: 1,
            instances: instances
                .iter()
                .map(|id| InstanceRow {
                    id: id.to_string(),
                    priority: "P1".into(),
                    project: "p".into(),
                    task: "t".into(),
                    claims: vec![format!("/src/{id}.rs")],
                    waiting_for: vec![],
                    started_at: t,
                    last_heartbeat: t,
                    working_directory: "/".into(),
                    enforcement: None,
                    worktree: None,
                    overlaps: Vec::new(),
                })
                .collect(),
            landing: Vec::new(),
            unclaimed: Vec::new(),
            agents: agents
                .iter()
                .map(|n| AgentRow {
                    name: n.to_string(),
                    handle: format!("@{n}"),
                    watch: vec![],
                    open: 0,
                    claimed: 0,
                    mentions: 0,
                    latest: vec![],
                })
                .collect(),
            sessions: vec![],
            jobs: jobs
                .iter()
                .map(|k| JobRow {
                    key: k.to_string(),
                    state: "queued".into(),
                    attempts: 0,
                    agent: "a".into(),
                    depends_on: vec![],
                    reason: None,
                    since: t,
                })
                .collect(),
            progress: Progress::default(),
        }
    }

    #[test]
    fn keys_move_through_all_sections_and_stop_at_the_ends() {
        let mut app = App::new(overview(&["i1", "i2"], &["ana"], &["w/j"]), false);
        assert!(app.key(Key::Up));
        assert_eq!(app.selected, 0);
        for _ in 0..10 {
            app.key(Key::Down);
        }
        assert_eq!(app.current().unwrap().section, Section::Queue);
        app.selected = 0;
        app.key(Key::NextSection);
        assert_eq!(app.current().unwrap().section, Section::Agents);
        app.key(Key::NextSection);
        assert_eq!(app.current().unwrap().section, Section::Queue);
        app.key(Key::NextSection);
        assert_eq!(app.selected, 0, "wraps to the first row");
        app.key(Key::Enter);
        assert!(app.detail);
        app.key(Key::Down);
        assert_eq!(app.selected, 0, "rows do not move under open details");
        app.key(Key::Back);
        assert!(!app.detail);
        assert!(!app.key(Key::Quit));
    }

    #[test]
    fn an_update_keeps_the_selection_on_the_same_thing() {
        let mut app = App::new(overview(&["i1", "i2"], &["ana"], &[]), false);
        app.key(Key::Down);
        app.key(Key::Enter);
        assert_eq!(
            app.overview.instances[app.current().unwrap().index].id,
            "i2"
        );
        // i0 appears before it: the selection follows i2, details stay open.
        app.update(overview(&["i0", "i1", "i2"], &["ana"], &[]));
        assert_eq!(app.selected, 2);
        assert!(app.detail);
        // i2 is gone: details close, the selection stays in range.
        app.update(overview(&["i0"], &[], &[]));
        assert!(!app.detail);
        assert_eq!(app.selected, 0);
        // Nothing at all: no row, Enter opens nothing.
        app.update(overview(&[], &[], &[]));
        assert!(app.current().is_none());
        app.key(Key::Enter);
        assert!(!app.detail);
    }
}
