//! Integration tests: the real binary against temp homes. One module per area.

mod common;

mod crash;

mod hooks;
mod props;
mod protocol;
mod races;
mod schemas;
mod shell;
mod smoke;
