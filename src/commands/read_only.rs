//! Commands that only read the home never create it: a mistyped `--home` (or
//! `CONDUCTOR_HOME`) fails with one clear line instead of leaving a new directory tree behind.

use std::path::Path;

use super::agent::AgentCommand;
use super::queue::QueueCommand;
use super::workflow::WorkflowCommand;
use crate::cli::Command;
use conductor::error::Reason;
use conductor::error::{Error, Result};

/// True for a command that only reads the home.
fn reads_only(command: &Option<Command>) -> bool {
    match command {
        None => true,
        Some(c) => matches!(
            c,
            Command::Status(_)
                | Command::Top(_)
                | Command::History(_)
                | Command::Conflicts(_)
                | Command::Overlaps(_)
                | Command::Events(_)
                | Command::Messages(_)
                | Command::Metrics(_)
                | Command::Export(_)
                | Command::Agent(
                    AgentCommand::List | AgentCommand::Status(_) | AgentCommand::Log(_)
                )
                | Command::Queue(
                    QueueCommand::Jobs(_)
                        | QueueCommand::Show(_)
                        | QueueCommand::Log(_)
                        | QueueCommand::Results(_)
                )
                | Command::Workflow(
                    WorkflowCommand::List(_)
                        | WorkflowCommand::Show(_)
                        | WorkflowCommand::Log(_)
                        | WorkflowCommand::Status(_)
                )
        ),
    }
}

/// A read-only command (or `doctor` without `--repair`) on the default home when it does not
/// exist: a scratch home to answer from (empty, removed when dropped), so the command does not
/// create the real one. `named`: the home was named, or the documents live in a shared store.
pub fn scratch_home(
    command: &Option<Command>,
    dir: &Path,
    named: bool,
) -> Result<Option<tempfile::TempDir>> {
    let doctor = matches!(command, Some(Command::Doctor(a)) if !a.repair);
    if named || !(reads_only(command) || doctor) || std::fs::symlink_metadata(dir).is_ok() {
        return Ok(None);
    }
    let scratch = tempfile::Builder::new()
        .prefix("conductor-empty-home-")
        .tempdir()
        .map_err(|e| Error::io("create a scratch home in", &std::env::temp_dir(), e))?;
    crate::face::stand_in(
        scratch.path().display().to_string(),
        format!("{} (not created yet)", dir.display()),
    );
    Ok(Some(scratch))
}

/// Refuse a read-only command on a home that was named (`--home`, `CONDUCTOR_HOME`) but does
/// not exist (and no shared store holds its documents). The default home is created as before.
pub fn check(command: &Option<Command>, dir: &Path, named: bool) -> Result<()> {
    if !named || !reads_only(command) || std::fs::symlink_metadata(dir).is_ok() {
        return Ok(());
    }
    Err(Error::invalid(
        Reason::NoHome,
        format!(
            "there is no conductor home at {} (check --home or CONDUCTOR_HOME; this command only \
             reads, so it does not create one)",
            dir.display()
        ),
    ))
}
