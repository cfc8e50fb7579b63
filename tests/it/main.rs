//! Integration tests: the real binary against temp homes. One module per area.

mod common;

mod agents;
mod agree;
mod claims;
mod corrupt;
mod crash;
mod disk_full;
mod etcd;
mod events;
mod faults;
mod first_hour;
mod foreign;
mod hooks;
mod hostile;
mod integrations;
mod journal_seek;
mod layers;
mod mcp;
mod props;
mod protocol;
mod queue;
mod queue_hostile;
mod queue_scale;
mod races;
mod reasons;
mod sandbox;
mod schemas;
mod security;
mod serve;
mod shell;
mod smoke;
mod stale;
mod startup;
mod txn_crash;
mod workflow;
