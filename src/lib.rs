//! conductor: a file-based coordinator for AI coding agents, faithful to the Conductor protocol.
//!
//! The library holds everything but the faces: the domains (`protocol`, `agents` (the Canopy
//! agent runtime), `queue`, `workflows`, `hooks`, `integrations`), each pure logic plus the
//! services every face calls and the checks `doctor` renders (`health`), over the store
//! (`crates/conductor-store`: every file of the home and every key of the shared store, with the
//! base utilities `time`, `text` and `host`; it knows no domain). `app` is the one place that lists every domain. The faces (the CLI's `cli` and `commands`, `mcp`,
//! `serve`, `top`, over their shared `face` and `output`) live in the binary crate, so no domain
//! can reach them.

pub mod agents;
pub mod app;
pub mod config;
pub mod error;
pub mod follow;
pub mod health;
pub mod hooks;
pub mod integrations;
pub mod progress;
pub mod protocol;
pub mod queue;
pub mod schema;
pub mod spawn;
pub mod template;
pub mod usage;
pub mod workflows;

pub use conductor_store as store;
pub use conductor_store::{host, text, time};
pub use error::{Error, Result};
