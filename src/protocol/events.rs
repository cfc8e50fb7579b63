//! The event journal's records (`events.jsonl`), modelled on Canopy's workspace event feed.
//!
//! Operations push [`crate::store::event::NewEvent`]s as [`super::ops::Effect::Event`]; the store gives each its `seq`,
//! `event_id` and `created_at` when it appends them, inside the same locked transaction as the
//! state change they describe.

/// `instance.started`: an instance registered (payload: task, priority, working_directory).
pub const INSTANCE_STARTED: &str = "instance.started";
/// `instance.heartbeat`: an instance said it is alive.
pub const INSTANCE_HEARTBEAT: &str = "instance.heartbeat";
/// `claim.granted`: files given to the actor (payload `files`; `via: "wait"` when handed over
/// from a waiting queue).
pub const CLAIM_GRANTED: &str = "claim.granted";
/// `claim.conflict`: the actor asked for a file the target holds.
pub const CLAIM_CONFLICT: &str = "claim.conflict";
/// `claim.forced`: the actor took a file from the target with `--force`.
pub const CLAIM_FORCED: &str = "claim.forced";
/// `claim.released`: files no longer held (payload `files`).
pub const CLAIM_RELEASED: &str = "claim.released";
/// `claim.queued`: the actor joined the waiting queue of files (`claim --wait`).
pub const CLAIM_QUEUED: &str = "claim.queued";
/// `claim.dequeued`: the actor left waiting queues without getting the files (timeout).
pub const CLAIM_DEQUEUED: &str = "claim.dequeued";
/// `instance.done`: an instance finished (payload `outcome`).
pub const INSTANCE_DONE: &str = "instance.done";
/// `instance.orphaned`: cleanup retired an instance.
pub const INSTANCE_ORPHANED: &str = "instance.orphaned";
/// `drift.warning`: a task started against the sprint focus with an override.
pub const DRIFT_WARNING: &str = "drift.warning";
/// `gate.blocked`: the priority gate refused a task (no state change).
pub const GATE_BLOCKED: &str = "gate.blocked";

/// `edit.unclaimed`: a file changed in a live session's directory that no live session claimed
/// (payload `path`, `at`, `sessions`, `count`; see [`super::unclaimed`]).
pub const EDIT_UNCLAIMED: &str = "edit.unclaimed";

pub use crate::store::journal::JOURNAL_GAP;

/// Every event type this build writes.
pub const ALL_TYPES: &[&str] = &[
    INSTANCE_STARTED,
    INSTANCE_HEARTBEAT,
    CLAIM_GRANTED,
    CLAIM_CONFLICT,
    CLAIM_FORCED,
    CLAIM_RELEASED,
    CLAIM_QUEUED,
    CLAIM_DEQUEUED,
    INSTANCE_DONE,
    INSTANCE_ORPHANED,
    DRIFT_WARNING,
    GATE_BLOCKED,
    EDIT_UNCLAIMED,
    JOURNAL_GAP,
];

#[cfg(test)]
mod tests {
    use super::super::ops::{self, AssumeAlive, Effect, NewInstance, Which};
    use super::super::types::*;
    use crate::time::Timestamp;

    fn new(task: &str) -> NewInstance {
        NewInstance {
            source: Source::Web,
            project: "p".into(),
            task: task.into(),
            priority: Priority::P1,
            working_directory: "/w".into(),
            override_reason: None,
            pid: None,
            host: None,
            session_id: None,
        }
    }

    fn types(fx: &[Effect]) -> Vec<&'static str> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Event(ev) => Some(ev.event_type),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn released_files_go_to_waiters_in_ticket_order() {
        let now = Timestamp::parse("2026-01-17T10:00:00Z").unwrap();
        let mut st = State::empty(now);
        let mut fx = Vec::new();
        let mut n = 0;
        let mut hex = || {
            n += 1;
            format!("{n:06x}")
        };
        let ids: Vec<String> = ["h", "w1", "w2", "w3"]
            .iter()
            .map(|t| ops::start(&mut st, new(t), None, &mut hex, now, &mut fx))
            .collect();
        let f = vec!["/w/f".to_string()];
        ops::claim(&mut st, &ids[0], &f, None, now, &AssumeAlive, &mut fx).unwrap();
        for w in &ids[1..] {
            let out = ops::claim(&mut st, w, &f, None, now, &AssumeAlive, &mut fx).unwrap();
            assert_eq!(out.conflicts.len(), 1);
            ops::enqueue(&mut st, w, &f, Some(1), now, &mut fx).unwrap();
        }
        assert_eq!(ops::queue_position(&st, &ids[3], "/w/f"), Some(3));
        fx.clear();
        ops::release(&mut st, &ids[0], &Which::All, false, None, now, &mut fx).unwrap();
        assert_eq!(st.global_claims["/w/f"], ids[1]);
        assert_eq!(types(&fx), ["claim.released", "claim.granted"]);
        fx.clear();
        ops::done(&mut st, &ids[1], Outcome::Success, None, None, now, &mut fx).unwrap();
        assert_eq!(st.global_claims["/w/f"], ids[2]);
        assert_eq!(
            types(&fx),
            ["claim.released", "instance.done", "claim.granted"]
        );
        ops::dequeue(&mut st, &ids[3], &f, now, &mut fx).unwrap();
        ops::release(&mut st, &ids[2], &Which::All, false, None, now, &mut fx).unwrap();
        assert!(
            st.global_claims.is_empty(),
            "a waiter that left is not served"
        );
        crate::protocol::codec::check_consistency(&st).unwrap();
    }
}
