//! The agent runtime's domain: Canopy's coordination space (agents, channels, mentions, inbox,
//! work claims) kept as documents and ledgers in the conductor home.
//!
//! It models locally the feeds of Canopy, the server CanopyKit talks to; the CLI verb is
//! `conductor agent`, and the files keep their `runtime-*` names, which are API.
//!
//! Files (all under [`Lock::Agents`], written only through store transactions):
//! - `runtime-agents.json` ([`Agents`]): registered agents, each with its durable journal
//!   cursor, its durable work queue and its metrics. It stays small: it does not grow with the
//!   run loops' actions.
//! - `runtime/agents/<name>/run-status.json` ([`RunStatus`]): what the agent's run loop is doing
//!   now (its state machine state, cycles, cursor, current item and claim, last error,
//!   back-off, pid, timestamps), rewritten with every action; operator-readable, secrets
//!   redacted.
//! - `runtime/agents/<name>/actions.jsonl` ([`Action`]): the run loop's action log, one JSON
//!   object per line (every transition, routing decision, claim, execution, error, back-off),
//!   capped at [`ACTIONS_CAP_BYTES`]: an append that would pass the cap rewrites the file with
//!   its newest lines (half the cap), atomically.
//! - `runtime/agents/<name>/inbox.json` ([`inbox_files::AgentInbox`]): the agent's actionable
//!   inbox items (pending, seen) with their work claims and its unacknowledged mentions;
//!   `runtime-inbox.json` ([`Inbox`]) keeps the id counter (see [`inbox_files`]). Finished items (completed, skipped,
//!   expired) move to `runtime-inbox.jsonl`; acknowledged mentions to `runtime-mentions.jsonl`.
//! - `runtime-channels.json` ([`Channels`]): the last [`RECENT`] messages of each channel, a
//!   cache; every version of every message is in `runtime-messages.jsonl`.
//! - `runtime-conflicts.log`: claim conflicts and timeout takeovers, one line each.
//!
//! Every change a user can see is a journal event with Canopy's event type (see [`ev`]); the
//! bookkeeping of run loops (cursor moves, the action log) is not, so that a loop's own writes
//! never wake the loops. Operations here are pure: the clock is passed in.

pub mod artifact;
pub mod checks;
pub mod health;
pub mod inbox_files;
pub mod keys;
pub mod machine;
pub mod ops;
pub mod run_loop;
pub mod selftest;
pub mod service;
pub mod text;
pub mod views;

use std::collections::{BTreeMap, VecDeque};

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::store::{Document, LedgerFile, Lock, corrupt};
use crate::time::Timestamp;

/// The documents' format version.
pub const VERSION: &str = "1.0";
/// Messages kept per channel in `runtime-channels.json`.
pub const RECENT: usize = 100;
/// The largest an agent's `actions.jsonl` gets, in bytes (see [`crate::store::Tx::append_capped`]).
pub const ACTIONS_CAP_BYTES: u64 = 256 * 1024;
/// How long an actionable inbox item lives: an item that is still pending or seen this long
/// after it was created, with no live claim, is expired by the next transaction that reads the
/// inbox (see [`ops::expire`]).
pub const ITEM_EXPIRY_SECONDS: i64 = 7 * 24 * 3600;
/// The largest post, in bytes.
pub const MAX_POST_BYTES: usize = 16 * 1024;
/// Claim TTL bounds and default, in seconds (Canopy's).
pub const TTL_MIN: u64 = 15;
pub const TTL_MAX: u64 = 1800;
pub const TTL_DEFAULT: u64 = 120;

/// Every version of every message, one JSON object per line.
pub const MESSAGES: LedgerFile = LedgerFile {
    name: "runtime-messages.jsonl",
    lock: Lock::Agents,
};
/// Finished inbox items (completed, skipped, expired).
pub const INBOX_DONE: LedgerFile = LedgerFile {
    name: "runtime-inbox.jsonl",
    lock: Lock::Agents,
};
/// Acknowledged mentions.
pub const MENTIONS_DONE: LedgerFile = LedgerFile {
    name: "runtime-mentions.jsonl",
    lock: Lock::Agents,
};
/// Claim conflicts and timeout takeovers (`<time> | KIND | text`), the runtime's own log.
pub const CONFLICTS: LedgerFile = LedgerFile {
    name: "runtime-conflicts.log",
    lock: Lock::Agents,
};

/// Canopy's event types, as written to the journal.
pub mod ev {
    pub const AGENT_REGISTERED: &str = "agent.registered";
    pub const CHANNEL_MESSAGE_CREATED: &str = "channel.message.created";
    pub const CHANNEL_MESSAGE_EDITED: &str = "channel.message.edited";
    pub const DM_MESSAGE_CREATED: &str = "dm.message.created";
    pub const DM_MESSAGE_EDITED: &str = "dm.message.edited";
    pub const MENTION_CREATED: &str = "mention.created";
    pub const MENTION_ACKNOWLEDGED: &str = "mention.acknowledged";
    pub const INBOX_ITEM_CREATED: &str = "inbox.item.created";
    pub const INBOX_ITEM_UPDATED: &str = "inbox.item.updated";
    pub const CLAIM_ACQUIRED: &str = "inbox.claim.acquired";
    pub const CLAIM_RENEWED: &str = "inbox.claim.renewed";
    pub const CLAIM_RELEASED: &str = "inbox.claim.released";
    pub const CLAIM_TAKEN_OVER: &str = "inbox.claim.taken_over";
}

/// Milliseconds since the epoch: `CONDUCTOR_NOW` when set (tests pin the clock), else the
/// system clock. Latencies need more than the journal's whole seconds.
pub fn now_ms() -> i64 {
    if let Some(t) = std::env::var("CONDUCTOR_NOW")
        .ok()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
    {
        return t.timestamp_millis();
    }
    chrono::Utc::now().timestamp_millis()
}

/// The whole-second timestamp of an epoch-milliseconds instant.
pub fn ts(ms: i64) -> Timestamp {
    let t = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    Timestamp::parse(&t.to_rfc3339()).expect("chrono writes RFC 3339")
}

// ---------------------------------------------------------------------------------------------
// runtime-agents.json

/// `runtime-agents.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agents {
    pub version: String,
    pub agents: BTreeMap<String, Agent>,
}

/// A registered agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    /// `@name`: what a post mentions to address it.
    pub handle: String,
    pub user_id: String,
    /// Channels whose posts its run loop routes.
    pub watch: Vec<String>,
    pub registered_at: Timestamp,
    /// The last journal seq whose work is safely queued (durable; moves only forward).
    pub cursor: u64,
    /// Inbox item ids its run loop has queued and not finished (the durable work queue).
    pub queue: Vec<String>,
    pub metrics: Metrics,
    /// Earlier versions kept the run status and the action log here; they are read and dropped
    /// (both now live in `runtime/agents/<name>/`).
    #[serde(default, rename = "run", skip_serializing)]
    pub legacy_run: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "actions", skip_serializing)]
    pub legacy_actions: Option<serde::de::IgnoredAny>,
}

/// The directory of an agent's run files, relative to the home.
pub const AGENT_DIR: [&str; 2] = ["runtime", "agents"];
/// `runtime/agents/<name>/run-status.json`.
pub const RUN_STATUS_FILE: &str = "run-status.json";
/// `runtime/agents/<name>/actions.jsonl`.
pub const ACTIONS_FILE: &str = "actions.jsonl";

/// The path of one of an agent's run files (the name is checked again: never a path).
pub fn agent_file(agent: &str, file: &str) -> Result<crate::store::HomePath> {
    crate::store::HomePath::new(Lock::Agents, &[AGENT_DIR[0], AGENT_DIR[1], agent, file])
        .map_err(Into::into)
}

/// The agent's `run-status.json` (`None` before its first run).
pub fn read_run_status(store: &crate::store::Store, agent: &str) -> Result<Option<RunStatus>> {
    let f = agent_file(agent, RUN_STATUS_FILE)?;
    let Some(bytes) = store.read_at(&f)? else {
        return Ok(None);
    };
    let path = store.home().dir().join(f.rel());
    let r: RunStatus = parse(&path, &bytes)?;
    check_version(&path, &r.version)?;
    Ok(Some(r))
}

/// The work a run loop holds now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentWork {
    pub item_id: String,
    pub channel_id: String,
    pub message_id: String,
    pub claim_expires_at: Timestamp,
    /// True when the claim was taken over from an expired one.
    pub takeover: bool,
    pub started_at: Timestamp,
}

/// A back-off in progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    pub delay_ms: u64,
    pub until: Timestamp,
    pub consecutive_errors: u32,
    pub item_id: Option<String>,
}

/// What a run loop reports about itself (`runtime/agents/<name>/run-status.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStatus {
    pub version: String,
    pub agent: String,
    pub pid: u32,
    pub worker: String,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    /// `watcher`, `poll` or `heartbeat`.
    pub wake_source: String,
    /// Seconds between looks at the journal when not woken by the watcher (0 on the watcher).
    pub poll_interval_seconds: f64,
    pub state: String,
    pub cycles: u64,
    pub shadow: bool,
    /// `running`, `stopped`.
    pub status: String,
    /// The `--exec` command (secrets redacted), `None` in shadow mode.
    pub exec: Option<String>,
    /// The agent's durable cursor after the loop's last transaction.
    pub last_event_cursor: u64,
    /// The item being worked on, with its claim.
    pub current: Option<CurrentWork>,
    pub last_error: Option<String>,
    pub last_error_at: Option<Timestamp>,
    pub consecutive_errors: u32,
    /// The back-off in progress, if any.
    pub backoff: Option<Backoff>,
}

/// One line of an agent's action log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub at: Timestamp,
    /// `transition`, `route`, `claim`, `execute`, `complete`, `error`, `backoff`, ...
    pub kind: String,
    pub detail: Value,
}

/// Latency histograms and counters, persisted per agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    pub event_to_seen: Histogram,
    pub event_to_claim: Histogram,
    pub claim_to_complete: Histogram,
    pub timeout_recoveries: u64,
    pub completed: u64,
    pub errors: u64,
    pub last_success_at: Option<Timestamp>,
}

/// Upper bounds of the histogram buckets, in milliseconds (plus +Inf).
pub const BUCKETS_MS: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];
/// Samples kept for percentiles.
pub const SAMPLES_KEPT: usize = 64;

/// A latency histogram (per-bucket counts, not cumulative) plus the newest samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ms: u64,
    pub recent_ms: VecDeque<u64>,
}

impl Histogram {
    /// Record one sample.
    pub fn observe(&mut self, ms: u64) {
        if self.buckets.len() != BUCKETS_MS.len() + 1 {
            self.buckets = vec![0; BUCKETS_MS.len() + 1];
        }
        let i = BUCKETS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(BUCKETS_MS.len());
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
        self.recent_ms.push_back(ms);
        while self.recent_ms.len() > SAMPLES_KEPT {
            self.recent_ms.pop_front();
        }
    }

    /// The `p`th percentile (0..=100) of the recent samples (nearest rank).
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.recent_ms.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.recent_ms.iter().copied().collect();
        v.sort_unstable();
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        Some(v[rank.min(v.len()) - 1])
    }
}

impl Document for Agents {
    const FILE: &'static str = "runtime-agents.json";
    const LOCK: Lock = Lock::Agents;
    fn empty(_now: Timestamp) -> Self {
        Agents {
            version: VERSION.into(),
            agents: BTreeMap::new(),
        }
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let d: Agents = parse(path, bytes)?;
        check_version(path, &d.version)?;
        for (k, a) in &d.agents {
            if *k != a.name {
                return Err(corrupt(path, format!("agent key `{k}` holds `{}`", a.name)));
            }
            // A name also names the agent's directory under runtime/agents/.
            if text::check_name("agent name", k).is_err() || *k != k.to_ascii_lowercase() {
                return Err(corrupt(
                    path,
                    format!("`{}` is not a valid agent name", crate::text::printable(k)),
                ));
            }
        }
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        to_bytes(self)
    }
}

// ---------------------------------------------------------------------------------------------
// runtime-inbox.json

/// Inbox item statuses (Canopy's). `handled` is read as `completed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// New, actionable.
    Pending,
    /// Looked at, still actionable.
    Seen,
    /// Done, with a completion reference (terminal).
    #[value(alias = "handled")]
    #[serde(alias = "handled")]
    Completed,
    /// Deliberately not done (terminal).
    Skipped,
    /// Retired by the system (terminal).
    Expired,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Seen => "seen",
            Status::Completed => "completed",
            Status::Skipped => "skipped",
            Status::Expired => "expired",
        }
    }
    /// Pending and seen items are actionable.
    pub fn actionable(self) -> bool {
        matches!(self, Status::Pending | Status::Seen)
    }
}

/// Item priorities, most urgent first.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Urgent,
    High,
    Normal,
    Low,
}

/// `runtime-inbox.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inbox {
    pub version: String,
    /// The last id number handed out (ids are `msg-`, `men-`, `inb-` plus a number).
    pub last_id: u64,
    /// Actionable items by id.
    pub items: BTreeMap<String, Item>,
    /// Unacknowledged mentions by id.
    pub mentions: BTreeMap<String, Mention>,
}

/// An inbox item (Canopy's fields plus the agent, its claim and timing in milliseconds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub id: String,
    pub agent: String,
    /// `channel_message` or `dm`.
    pub source_type: String,
    pub source_id: String,
    pub channel_id: String,
    /// `mention`, `dm`, `reply`, `channel_added` (Canopy's), or `broadcast` (a post accepted
    /// by a run loop in broadcast mode).
    pub trigger_type: String,
    pub status: Status,
    pub priority: Priority,
    pub created_at: Timestamp,
    pub created_ms: i64,
    pub seen_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub completion_ref: Option<serde_json::Map<String, Value>>,
    pub preview: String,
    pub author: String,
    pub mention_id: Option<String>,
    pub claim: Option<Claim>,
    /// Claims granted so far (a takeover counts).
    pub attempts: u32,
}

/// A work claim on an item or mention.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub agent: String,
    /// Which process of the agent holds it (`cli`, or `run-<pid>` for a run loop).
    pub worker: String,
    pub ttl_seconds: u64,
    pub claimed_at: Timestamp,
    pub claimed_ms: i64,
    pub expires_ms: i64,
    pub expires_at: Timestamp,
}

/// A mention of an agent in a post.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mention {
    pub id: String,
    pub agent: String,
    pub source_type: String,
    pub source_id: String,
    pub channel_id: String,
    pub author: String,
    /// `handle` (`@name` in the text) or `assignment` (an `owner:` ... line).
    pub via: String,
    pub created_at: Timestamp,
    pub acknowledged_at: Option<Timestamp>,
    pub claim: Option<Claim>,
}

impl Document for Inbox {
    const FILE: &'static str = "runtime-inbox.json";
    const LOCK: Lock = Lock::Agents;
    fn empty(_now: Timestamp) -> Self {
        Inbox {
            version: VERSION.into(),
            last_id: 0,
            items: BTreeMap::new(),
            mentions: BTreeMap::new(),
        }
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let d: Inbox = parse(path, bytes)?;
        check_version(path, &d.version)?;
        for (k, i) in &d.items {
            if *k != i.id || !i.status.actionable() {
                return Err(corrupt(
                    path,
                    format!("inbox item `{k}` is misfiled or not actionable"),
                ));
            }
        }
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        to_bytes(self)
    }
}

// ---------------------------------------------------------------------------------------------
// runtime-channels.json

/// `runtime-channels.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channels {
    pub version: String,
    pub channels: BTreeMap<String, Channel>,
}

/// A channel (or a DM conversation, id `dm:a+b`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    pub created_at: Timestamp,
    pub message_count: u64,
    /// The newest [`RECENT`] messages, oldest first.
    pub recent: Vec<Message>,
}

/// A message (Canopy's fields: message_id, channel_id, user_id, content, created_at, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub message_id: String,
    pub channel_id: String,
    /// `channel` or `dm`.
    pub kind: String,
    pub author: String,
    pub user_id: String,
    pub content: String,
    pub reply_to: Option<String>,
    /// Agents the post addresses (by handle or assignment line), as they were at posting.
    pub addressed: Vec<String>,
    pub created_at: Timestamp,
    pub created_ms: i64,
    pub edited_at: Option<Timestamp>,
}

impl Document for Channels {
    const FILE: &'static str = "runtime-channels.json";
    const LOCK: Lock = Lock::Agents;
    fn empty(_now: Timestamp) -> Self {
        Channels {
            version: VERSION.into(),
            channels: BTreeMap::new(),
        }
    }
    fn decode(path: &Path, bytes: &[u8]) -> crate::store::Result<Self> {
        let d: Channels = parse(path, bytes)?;
        check_version(path, &d.version)?;
        Ok(d)
    }
    fn encode(&self) -> Vec<u8> {
        to_bytes(self)
    }
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> crate::store::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| corrupt(path, e.to_string()))
}

fn check_version(path: &Path, v: &str) -> crate::store::Result<()> {
    if v == VERSION {
        Ok(())
    } else {
        Err(corrupt(
            path,
            format!("version `{v}` is not one this build reads ({VERSION})"),
        ))
    }
}

/// Pretty JSON and a newline: how the runtime writes its documents.
pub fn to_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("documents serialize");
    b.push(b'\n');
    b
}

/// Stage what an operation produced in a transaction.
pub fn stage(tx: &mut crate::store::Tx, fx: ops::Fx) -> Result<()> {
    for (ledger, line) in fx.lines {
        tx.append(ledger, line)?;
    }
    for e in fx.events {
        tx.event(e);
    }
    Ok(())
}

/// A message by id: the recent window first, then `runtime-messages.jsonl` (its last version).
pub fn find_message(
    store: &crate::store::Store,
    channels: &Channels,
    id: &str,
) -> Result<Option<Message>> {
    if let Some(m) = ops::recent(channels, id) {
        return Ok(Some(m.clone()));
    }
    let mut found = None;
    store.read_ledger_file(MESSAGES, |_, line| {
        if let crate::store::ledger::Line::Complete(text) = line
            && text.contains(id)
            && let Ok(v) = serde_json::from_str::<Value>(&text)
            && v["message"]["message_id"] == id
            && let Ok(m) = serde_json::from_value::<Message>(v["message"].clone())
        {
            found = Some(m);
        }
        Ok::<_, crate::Error>(true)
    })?;
    Ok(found)
}

/// True when a finished item for agent + source + trigger is in `runtime-inbox.jsonl`.
pub fn finished_item(
    store: &crate::store::Store,
    agent: &str,
    source: &str,
    trigger: &str,
) -> Result<bool> {
    let mut found = false;
    store.read_ledger_file(INBOX_DONE, |_, line| {
        if let crate::store::ledger::Line::Complete(text) = line
            && text.contains(source)
            && let Ok(v) = serde_json::from_str::<Value>(&text)
        {
            let i = &v["item"];
            if i["agent"] == agent && i["source_id"] == source && i["trigger_type"] == trigger {
                found = true;
                return Ok::<_, crate::Error>(false);
            }
        }
        Ok(true)
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_files_stay_inside_the_home() {
        assert_eq!(
            agent_file("scout", RUN_STATUS_FILE).unwrap().rel(),
            "runtime/agents/scout/run-status.json"
        );
        for bad in ["..", ".", "", "a/b", "../x", ".hidden", "a\0b", "é"] {
            assert!(agent_file(bad, ACTIONS_FILE).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn agents_with_unsafe_names_are_corrupt_and_legacy_fields_are_dropped() {
        let p = Path::new("runtime-agents.json");
        let doc = |name: &str, extra: &str| {
            format!(
                r#"{{"version":"1.0","agents":{{"{name}":{{"name":"{name}","handle":"@x","user_id":"x",
                "watch":[],"registered_at":"2026-01-17T10:00:00Z","cursor":0,"queue":[],
                "metrics":{{"event_to_seen":{{"buckets":[],"count":0,"sum_ms":0,"recent_ms":[]}},
                "event_to_claim":{{"buckets":[],"count":0,"sum_ms":0,"recent_ms":[]}},
                "claim_to_complete":{{"buckets":[],"count":0,"sum_ms":0,"recent_ms":[]}},
                "timeout_recoveries":0,"completed":0,"errors":0,"last_success_at":null}}{extra}}}}}}}"#
            )
        };
        assert!(Agents::decode(p, doc("../../etc", "").as_bytes()).is_err());
        let old = Agents::decode(
            p,
            doc("scout", r#","run":{"pid":1},"actions":[{"at":"x"}]"#).as_bytes(),
        )
        .unwrap();
        let out = String::from_utf8(old.encode()).unwrap();
        assert!(
            !out.contains("\"run\"") && !out.contains("\"actions\""),
            "{out}"
        );
    }
}
