//! The overview's one impure part: everything it shows, read from the store without a lock.

use conductor::agents::{self, Agents, Inbox};
use conductor::error::Result;
use conductor::queue::QueueDoc;
use conductor::store::Store;
use conductor::time::Timestamp;
use conductor::workflows::Sessions;

use super::{Overview, landing_lines, one_line};

/// Read everything the overview shows, without taking a lock. The only impure part.
pub fn read(store: &Store) -> Result<Overview> {
    let now = Timestamp::now();
    // The seq first: the overview is at least this fresh, so a wakeup for a later seq
    // is never lost.
    let seq = store.last_event_seq()?;
    let mut state = conductor::protocol::read(store, now)?;
    let agents: Agents = store.read_doc(now)?;
    // Every agent's inbox file (one per agent since the split).
    let inbox: Inbox = agents::inbox_files::snapshot(store, now, &agents::inbox_files::Scope::All)?;
    let sessions: Sessions = store.read_doc(now)?;
    let queue: QueueDoc = store.read_doc(now)?;
    let mut o = Overview::build(
        crate::face::shown_location(store),
        seq,
        &state,
        &agents,
        &inbox,
        &sessions.sessions,
        &queue.jobs,
    );
    let enforcement = conductor::app::admission::enforcement_of(store, now, &state);
    for (row, i) in o.instances.iter_mut().zip(&state.instances) {
        row.enforcement = enforcement
            .get(&i.id)
            .map(|e| one_line(&crate::face::status::enforcement_line(i, e)));
    }
    // Sessions in worktrees of one repository are listed together, each with its worktree.
    let groups = conductor::protocol::repositories::find(&mut state);
    let mut order = std::collections::HashMap::new();
    for r in groups.iter().filter(|r| r.worktree_count > 1) {
        for w in &r.worktrees {
            for id in &w.instances {
                order.insert(id.clone(), (r.repository.clone(), w.worktree.clone()));
                if let Some(row) = o.instances.iter_mut().find(|row| row.id == *id) {
                    row.worktree = Some(one_line(&format!(
                        "worktree {} · branch {} · repository {}",
                        w.worktree,
                        w.branch.as_deref().unwrap_or("unknown"),
                        r.repository
                    )));
                }
            }
        }
    }
    if !order.is_empty() {
        // Stable: rows outside such a repository keep their order, after the grouped ones.
        o.instances.sort_by_key(|row| {
            order
                .get(&row.id)
                .cloned()
                .map_or((1, None), |k| (0, Some(k)))
        });
    }
    // What is landing, and where (one lock-free read; a shared store keeps none).
    let landing: conductor::protocol::landing::LandingDoc = store.read_doc(now)?;
    o.landing = landing_lines(&landing.landing);
    // Edits nobody claimed, and whether anything watches for them.
    if !state.instances.is_empty() {
        let doc = conductor::protocol::unclaimed::read(store, now)?;
        let edits: Vec<_> = conductor::protocol::unclaimed::current(&doc, &state)
            .into_iter()
            .cloned()
            .collect();
        o.unclaimed = crate::face::status::unclaimed_lines(&edits, now, None)
            .iter()
            .map(|l| one_line(l))
            .collect();
        let watch = crate::face::status::EditWatch::of(store);
        if !o.unclaimed.is_empty() || watch.running.is_some() || watch.enabled {
            o.unclaimed.push(one_line(&watch.line()));
        }
    }
    // Files changed in several worktrees (runs git only for repositories with several live
    // worktrees that sessions work in).
    for r in conductor::protocol::overlaps::of_sessions(store, &state) {
        for t in &r.worktrees {
            let lines = crate::face::status::overlaps_of_worktree(&r, &t.path);
            for row in o
                .instances
                .iter_mut()
                .filter(|row| t.sessions.contains(&row.id))
            {
                row.overlaps.extend(lines.iter().map(|l| one_line(l)));
            }
        }
    }
    Ok(o)
}
