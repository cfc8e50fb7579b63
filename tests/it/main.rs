//! Integration tests: the real binary against temp homes. One module per area.

mod common;

mod events;
mod smoke;
