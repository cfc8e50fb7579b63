//! The agent runtime's own health (`doctor`): its documents against their schemas, and each
//! agent's run files. Reported, never rewritten.

use crate::health::{self, Finding};
use crate::schema::Schema;
use crate::store::Store;
use crate::time::Timestamp;

use super::inbox_files::{ADDED_FILE, INBOX_FILE};
use super::{ACTIONS_FILE, AGENT_DIR, RUN_STATUS_FILE};

/// The runtime's live documents that exist: readable, or what is wrong with them.
pub fn documents(store: &Store, now: Timestamp) -> Vec<Finding> {
    let domain = "agent runtime";
    [
        health::document::<super::Agents>(store, now, domain, Some(Schema::RuntimeAgents)),
        health::document::<super::Inbox>(store, now, domain, Some(Schema::RuntimeInbox)),
        health::document::<super::Channels>(store, now, domain, Some(Schema::RuntimeChannels)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every agent's run files, as the home or the shared store names them
/// (`runtime/agents/NAME/run-status.json`, `actions.jsonl`, `inbox.json`).
pub fn run_file_names(store: &Store) -> crate::Result<Vec<String>> {
    store
        .files_below(
            AGENT_DIR,
            &[RUN_STATUS_FILE, ACTIONS_FILE, INBOX_FILE, ADDED_FILE],
        )
        .map_err(Into::into)
}

/// Each agent's run files (`runtime/agents/NAME/run-status.json`, `inbox.json` and
/// `actions.jsonl`) against their schemas. Reported, never rewritten: the next run of the agent's
/// loop replaces run-status.json, and a bad action line ages out of the capped log.
pub fn run_files(store: &Store) -> Vec<Finding> {
    // In the home's directory or under the shared store's keys alike.
    let Ok(files) = run_file_names(store) else {
        return Vec::new();
    };
    let mut names: Vec<String> = files
        .iter()
        .filter_map(|f| f.split('/').nth(2).map(str::to_string))
        .collect();
    names.dedup();
    let read = |rel: &str| store.read_doc_bytes(rel).ok().flatten();
    let fix = "not rewritten by --repair: the agent's next `conductor agent run` replaces run-status.json; move a bad actions.jsonl aside to start its log afresh";
    let mut out = Vec::new();
    for name in names {
        let rel = |f: &str| format!("{}/{}/{name}/{f}", AGENT_DIR[0], AGENT_DIR[1]);
        if let Some(bytes) = read(&rel(RUN_STATUS_FILE)) {
            let r = health::schema_check(&bytes, Schema::RuntimeRunStatus).and_then(|()| {
                super::read_run_status(store, &name)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            out.push(health::finding(rel(RUN_STATUS_FILE), r, "valid", fix));
        }
        let inbox = rel(INBOX_FILE);
        if let Some(bytes) = read(&inbox) {
            let path = store.home().dir().join(&inbox);
            let added = rel(ADDED_FILE);
            let r = super::inbox_files::AgentInbox::decode(&path, &name, &bytes)
                .and_then(|mut a| match read(&added) {
                    Some(lines) => a.add_lines(&store.home().dir().join(&added), &lines),
                    None => Ok(()),
                })
                .map(|_| ())
                .map_err(|e| e.to_string());
            out.push(health::finding(
                inbox,
                r,
                "valid",
                "not rewritten by --repair; move it aside to drop the agent's live inbox (its finished items stay in runtime-inbox.jsonl)",
            ));
        }
        if let Some(bytes) = read(&rel(ACTIONS_FILE)) {
            let text = String::from_utf8_lossy(&bytes);
            let mut bad = None;
            let mut n = 0;
            for (i, line) in text.split_terminator('\n').enumerate() {
                let torn_tail =
                    i + 1 == text.split_terminator('\n').count() && !text.ends_with('\n');
                let r = serde_json::from_str::<serde_json::Value>(line)
                    .map_err(|e| format!("not JSON ({e})"))
                    .and_then(|v| crate::schema::validate(Schema::RuntimeAction, &v));
                match r {
                    Ok(()) => n += 1,
                    Err(_) if torn_tail => {}
                    Err(e) => {
                        bad = Some(format!("line {}: {e}", i + 1));
                        break;
                    }
                }
            }
            let r = match bad {
                Some(e) => Err(e),
                None => Ok(()),
            };
            out.push(health::finding(
                rel(ACTIONS_FILE),
                r,
                &format!("{n} valid action(s)"),
                fix,
            ));
        }
    }
    out
}
