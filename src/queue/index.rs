//! Jobs by `(workspace, id)`: a lookup that is checked on use, so it can never be wrong.
//!
//! The dispatcher finds a job per start, pid and end; a scan of a 10,000-job queue per lookup
//! made its throughput fall with the queue's size. The index maps each key to the position the
//! job had when the index was built; a lookup checks that the job is still there and rebuilds
//! the index from the queue when it is not (jobs moved: archived, or the queue was replaced),
//! so a stale index costs one rebuild, never a wrong answer.

use std::collections::HashMap;

use super::QueueDoc;

#[derive(Default, Debug, Clone)]
pub struct JobIndex {
    at: HashMap<(String, String), usize>,
}

impl JobIndex {
    fn rebuild(&mut self, doc: &QueueDoc) {
        self.at.clear();
        for (i, j) in doc.jobs.iter().enumerate() {
            self.at.insert((j.workspace.clone(), j.id.clone()), i);
        }
    }

    fn check(doc: &QueueDoc, i: usize, ws: &str, id: &str) -> bool {
        doc.jobs
            .get(i)
            .is_some_and(|j| j.workspace == ws && j.id == id)
    }

    fn lookup(&self, ws: &str, id: &str) -> Option<usize> {
        self.at.get(&(ws.to_string(), id.to_string())).copied()
    }

    /// The position of job `ws/id` in `doc`, if it is live.
    pub fn find(&mut self, doc: &QueueDoc, ws: &str, id: &str) -> Option<usize> {
        if let Some(i) = self.lookup(ws, id)
            && Self::check(doc, i, ws, id)
        {
            return Some(i);
        }
        // Missing or moved: a scan says whether it is live, and if so the index is rebuilt
        // (a job that is simply not live, say archived, costs a scan, never a rebuild).
        let i = doc
            .jobs
            .iter()
            .position(|j| j.workspace == ws && j.id == id)?;
        self.rebuild(doc);
        Some(i)
    }

    /// [`JobIndex::find`] by `WORKSPACE/JOB` key.
    pub fn find_key(&mut self, doc: &QueueDoc, key: &str) -> Option<usize> {
        let (ws, id) = key.split_once('/')?;
        self.find(doc, ws, id)
    }
}
