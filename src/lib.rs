//! conductor: a file-based coordinator for AI coding agents, faithful to the Conductor protocol.
//!
//! The library holds everything but the faces: the domains (`protocol`, `agents` (the Canopy agent runtime),
//! `queue`, `workflows`, `hooks`), each pure logic plus the services every face calls, over the
//! `store` (every file in the home and every key of the shared store), over base utilities
//! (`time`, `text`, `runtime`). `app` is the one place that lists every domain. The faces (the
//! CLI's `cli`, `commands` and `output`) live in the binary crate, so no domain can reach them.

pub mod agents;
pub mod app;
pub mod config;
pub mod error;
pub mod hooks;
pub mod host;
pub mod protocol;
pub mod queue;
pub mod schema;
pub mod store;
pub mod text;
pub mod time;
pub mod workflows;

pub use error::{Error, Result};
