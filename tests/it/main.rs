//! Integration tests: the real binary against temp homes. One module per area.

mod common;

mod corrupt;
mod hostile;
mod security;
mod smoke;
