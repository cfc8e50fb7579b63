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
mod foreign;
mod hooks;
mod hostile;
mod journal_seek;
mod layers;
mod props;
mod protocol;
mod queue;
mod queue_hostile;
mod queue_scale;
mod races;
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
