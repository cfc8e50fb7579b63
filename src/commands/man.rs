//! `conductor man`: the man page, rendered by clap_mangen from the clap definitions.

use clap::CommandFactory;

use crate::cli::Cli;
use conductor::error::Result;

/// Print the man page.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Example:\n  conductor man > ~/.local/share/man/man1/conductor.1 && man conductor"
)]
pub struct ManArgs {
    /// Print the CLI reference as Markdown instead (docs/reference/cli.md is this output).
    #[arg(long, hide = true)]
    pub markdown: bool,
}

/// Run `man`.
pub fn run(args: ManArgs) -> Result<u8> {
    if args.markdown {
        return super::completions::write_stdout(
            crate::commands::man_markdown::render().as_bytes(),
        );
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| {
            conductor::error::Error::io("render", std::path::Path::new("the man page"), e)
        })?;
    super::completions::write_stdout(&refer_to_help(&buf))
}

/// clap_mangen names each subcommand as a page of its own (`conductor-claim(1)`), which is not
/// installed: name the command as typed instead and point to its `--help`.
fn refer_to_help(page: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(page);
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        match bare
            .strip_prefix("conductor\\-")
            .and_then(|r| r.strip_suffix("(1)"))
        {
            Some("help") => out.push_str("\\fBconductor help\\fR [COMMAND]\n"),
            Some(sub) => out.push_str(&format!(
                "\\fBconductor {sub}\\fR (see \\fBconductor {sub} \\-\\-help\\fR)\n"
            )),
            None => out.push_str(line),
        }
        if bare == ".SH SUBCOMMANDS" {
            out.push_str(
                "Each command's options and exit codes: \\fBconductor COMMAND \\-\\-help\\fR.\n",
            );
        }
    }
    out.into_bytes()
}
