//! The queue's own health (`doctor`): its document, the programs it runs (bubblewrap for the
//! sandbox runner, the agent command of each live job). The sandbox's guarantees are
//! [`super::sandbox::guarantees`].

use std::collections::BTreeSet;

use crate::health::{self, Finding, Tools};
use crate::store::Store;
use crate::time::Timestamp;

/// The queue's document, when it exists: readable, or what is wrong with it.
pub fn checks(store: &Store, now: Timestamp) -> Vec<Finding> {
    health::document::<super::QueueDoc>(store, now, "job queue", None)
        .into_iter()
        .collect()
}

/// The programs the queue's runners need.
pub fn tools(t: &mut Tools) {
    t.need(
        "bwrap",
        "the sandbox runner, queue run --runner sandbox".into(),
        "the sandbox runner: `queue run --runner sandbox` refuses to start jobs; \
         install bubblewrap (apt-get install bubblewrap)"
            .into(),
    );
}

/// The agent commands the live jobs are set to run.
pub fn agent_commands(store: &Store, now: Timestamp) -> BTreeSet<String> {
    let mut commands = BTreeSet::new();
    if let Ok(doc) = store.read_doc::<super::QueueDoc>(now) {
        for j in doc.jobs.iter().filter(|j| !j.state.state.is_final()) {
            let cmd = j
                .ran_with
                .as_ref()
                .map(|r| r.agent_cmd.clone())
                .unwrap_or_else(|| super::exec::DEFAULT_AGENT_CMD.to_string());
            commands.insert(cmd);
        }
    }
    commands
}
