//! Jobs by `(workspace, id)`: a lookup that is checked on use, so it can never be wrong.
//!
//! The dispatcher finds a job per start, pid and end; a scan of a 10,000-job queue per lookup
//! made its throughput fall with the queue's size. The index maps each key to the position the
//! job had when the index was built; a lookup checks that the job is still there and rebuilds
//! the index from the queue when it is not (jobs moved: archived, or the queue was replaced),
//! so a stale index costs one rebuild, never a wrong answer.

use std::collections::HashMap;

use super::{Job, QueueDoc};

/// Keyed by a 64-bit hash of `(workspace, id)`, not by copies of both strings (16 bytes an
/// entry instead of about 120, in each copy of the queue): two keys that collide share an
/// entry, and a lookup that lands on the other job is caught by the check, like any stale
/// entry (a scan finds the right one).
#[derive(Default, Debug, Clone)]
pub struct JobIndex {
    at: HashMap<u64, usize>,
}

fn key(ws: &str, id: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one((ws, id))
}

/// Any two indexes are equal: an index is a cache, not part of the queue.
impl PartialEq for JobIndex {
    fn eq(&self, _: &JobIndex) -> bool {
        true
    }
}

impl QueueDoc {
    /// The position of live job `ws/id` (through the index the queue carries).
    pub fn position(&mut self, ws: &str, id: &str) -> Option<usize> {
        self.index.find_in(&self.jobs, ws, id)
    }

    /// [`QueueDoc::position`] by `WORKSPACE/JOB` key.
    pub fn position_of(&mut self, key: &str) -> Option<usize> {
        let (ws, id) = key.split_once('/')?;
        self.position(ws, id)
    }
}

impl JobIndex {
    fn rebuild(&mut self, jobs: &[Job]) {
        self.at.clear();
        for (i, j) in jobs.iter().enumerate() {
            self.at.insert(key(&j.workspace, &j.id), i);
        }
    }

    fn check(jobs: &[Job], i: usize, ws: &str, id: &str) -> bool {
        jobs.get(i).is_some_and(|j| j.workspace == ws && j.id == id)
    }

    fn lookup(&self, ws: &str, id: &str) -> Option<usize> {
        self.at.get(&key(ws, id)).copied()
    }

    /// The position of job `ws/id` in `jobs`, if it is live.
    pub fn find_in(&mut self, jobs: &[Job], ws: &str, id: &str) -> Option<usize> {
        if let Some(i) = self.lookup(ws, id)
            && Self::check(jobs, i, ws, id)
        {
            return Some(i);
        }
        // Missing or moved: a scan says whether it is live, and if so the index is rebuilt
        // (a job that is simply not live, say archived, costs a scan, never a rebuild).
        let i = jobs.iter().position(|j| j.workspace == ws && j.id == id)?;
        self.rebuild(jobs);
        Some(i)
    }
}
