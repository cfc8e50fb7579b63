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
    // Sessions in worktrees of one repository are listed together, each with its worktree.
    let groups = conductor::protocol::repositories::find(&mut state);
    let picture = conductor::app::picture::read(store, now, &state)?;
    for (row, i) in o.instances.iter_mut().zip(&state.instances) {
        row.enforcement = picture
            .enforcement
            .get(&i.id)
            .map(|e| one_line(&crate::face::status::enforcement_line(i, e)));
    }
    let places = conductor::protocol::repositories::places(&groups);
    for row in o.instances.iter_mut() {
        if let Some((repository, w)) = places.get(row.id.as_str()) {
            row.worktree = Some(one_line(&format!(
                "worktree {} · branch {} · repository {repository}",
                w.worktree,
                w.branch.as_deref().unwrap_or("unknown"),
            )));
        }
    }
    // Stable: rows outside such a repository keep their order, after the grouped ones.
    o.instances
        .sort_by_key(|row| conductor::protocol::repositories::listing_key(&places, &row.id));
    // What is landing, and where.
    o.landing = landing_lines(&picture.landing);
    // Edits nobody claimed, and whether anything watches for them.
    if !state.instances.is_empty() {
        o.unclaimed = crate::face::status::unclaimed_lines(&picture.unclaimed, now, None)
            .iter()
            .map(|l| one_line(l))
            .collect();
        let watch = conductor::protocol::edit_watch::status(store);
        if !o.unclaimed.is_empty() || watch.running.is_some() || watch.enabled {
            o.unclaimed
                .push(one_line(&crate::face::status::edit_watch_line(&watch)));
        }
    }
    // Files changed in several worktrees, per session.
    for r in &picture.overlaps {
        for t in &r.worktrees {
            let lines = crate::face::status::overlaps_of_worktree(r, &t.path);
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
