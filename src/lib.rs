//! conductor: a file-based coordinator for AI coding agents, faithful to the Conductor protocol.
//!
//! Layers: `cli` (clap) → `commands` (one file per verb: arguments → request → report) →
//! `protocol` (pure operations on the state) + `store` (every file in the home) + `output`.

pub mod canopy;
pub mod cli;
pub mod commands;
pub mod error;
pub mod hooks;
pub mod output;
pub mod protocol;
pub mod queue;
pub mod runtime;
pub mod schema;
pub mod store;
pub mod template;
pub mod time;
pub mod watch;
pub mod workflows;

pub use error::{Error, Result};

/// Run a parsed command line; returns the exit code.
pub fn run(cli: cli::Cli, out: &output::Output) -> Result<u8> {
    commands::dispatch(cli, out)
}
