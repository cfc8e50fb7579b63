//! Integration tests: the real binary against temp homes. One module per area.

mod common;

mod hooks;
mod props;
mod protocol;
mod schemas;
mod shell;
mod smoke;
