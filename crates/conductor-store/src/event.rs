//! The journal's records (`events.jsonl`), written by every domain: an operation describes a
//! [`NewEvent`]; the store numbers it when it appends it, inside the same commit as the change it
//! describes, and readers get [`Event`]s back. Each domain names its own event types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Timestamp;

/// An event as an operation describes it, before the store numbers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    pub event_type: &'static str,
    /// The instance that acted, when there is one.
    pub actor: Option<String>,
    /// The other instance concerned (the holder in a conflict, the previous holder when forced).
    pub target: Option<String>,
    /// The actor's project.
    pub project: Option<String>,
    pub payload: Value,
}

/// One line of `events.jsonl`. Every key is always present (`null` when not applicable).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub event_id: String,
    pub event_type: String,
    pub actor: Option<String>,
    pub target: Option<String>,
    pub project: Option<String>,
    pub payload: Value,
    pub created_at: Timestamp,
    /// Only on the events of a transaction too big for one journal segment (all but its last):
    /// the seq of the transaction's last event. Readers deliver such a transaction once they
    /// have read all of it (see `journal::Tail::read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_end: Option<u64>,
}

impl Event {
    /// True when the event concerns instance `id` (as actor or target).
    pub fn involves(&self, id: &str) -> bool {
        self.actor.as_deref() == Some(id) || self.target.as_deref() == Some(id)
    }

    /// A readable one-line form: `#12 2026-01-17T10:30:00Z claim.granted itm-a1b2c3 files=[...]`.
    pub fn one_line(&self) -> String {
        let mut s = format!("#{} {} {}", self.seq, self.created_at, self.event_type);
        if let Some(a) = &self.actor {
            s.push_str(&format!(" {a}"));
        }
        if let Some(t) = &self.target {
            s.push_str(&format!(" -> {t}"));
        }
        if let Value::Object(m) = &self.payload {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                s.push_str(&format!(" {k}={}", crate::text::printable_max(&v, 200)));
            }
        }
        s
    }
}
