//! `conductor completions SHELL`: a completion script generated from the clap definitions.

use clap::CommandFactory;

use crate::cli::Cli;
use conductor::error::{Error, Result};

/// Print a completion script.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Examples:\n  conductor completions bash > ~/.local/share/bash-completion/completions/conductor\n  \
conductor completions zsh > ~/.zfunc/_conductor\n  conductor completions fish > ~/.config/fish/completions/conductor.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Run `completions`.
pub fn run(args: CompletionsArgs) -> Result<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "conductor", &mut buf);
    write_stdout(&buf)
}

/// Write bytes to stdout, mapping failures (a closed pipe) to the usual error.
pub fn write_stdout(bytes: &[u8]) -> Result<u8> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("write to", std::path::Path::new("stdout"), e))?;
    Ok(0)
}
