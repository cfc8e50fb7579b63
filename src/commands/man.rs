//! `conductor man`: the man page, rendered by clap_mangen from the clap definitions.

use clap::CommandFactory;

use crate::cli::Cli;
use conductor::error::Result;

/// Print the man page.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Example:\n  conductor man > ~/.local/share/man/man1/conductor.1 && man conductor"
)]
pub struct ManArgs {}

/// Run `man`.
pub fn run(_args: ManArgs) -> Result<u8> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| {
            conductor::error::Error::io("render", std::path::Path::new("the man page"), e)
        })?;
    super::completions::write_stdout(&buf)
}
