//! The Conductor protocol: its documents ([`types`]), its operations as pure functions over the
//! state ([`ops`], with the clock and process liveness passed in), the priority gate ([`gate`]),
//! and the services every face calls: [`sessions`] (start, claim, release, done, heartbeat,
//! cleanup: a typed request in, a typed outcome out) over [`service`] (one transaction on
//! `status.json` through the store, reconciling other programs' writes first). The pure parts
//! touch neither the disk, the clock nor the terminal; nothing here prints.
//!
//! Wire format: with `--json` every command prints exactly one object whose `status` is `ok`,
//! `conflict` (exit 3), `blocked` (exit 4, `reason: "priority_gate"`) or `error` (exit 1 or 2,
//! with a stable `reason`). The shapes are in `schemas/output.schema.json`.

pub mod aliases;
pub mod changes;
pub mod claims;
pub mod codec;
pub mod conflicts_log;
pub mod doctor;
pub mod edit_watch;
pub mod events;
pub mod foreign;
pub mod gate;
pub mod git;
pub mod history;
pub mod journal_check;
pub mod landing;
pub mod lazy_list;
pub mod local;
pub mod mirror;
pub mod ops;
pub mod overlaps;
pub mod paged;
pub mod repositories;
pub mod request;
pub mod service;
pub mod session_tree;
pub mod sessions;
pub mod supervise;
pub mod types;
pub mod unclaimed;
pub mod waits;
pub mod worktree_index;
pub mod worktrees;

pub use service::{
    CONFLICTS, Glance, HISTORY, Ledger, glance, migrate_store, read, read_ledger, read_unvalidated,
    reset, sprint, transact, transact_claims, transact_tx,
};
pub use types::*;
