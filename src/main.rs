//! The `conductor` command line: parse (`cli`), run one command (`commands`), print (`output`).
//! The other faces (`mcp`, `serve`, `top`) and their shared floor (`face`) live here too.

mod cli;
mod commands;
mod face;
mod mcp;
mod output;
mod serve;
mod top;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args
        .first()
        .is_some_and(|a| a == conductor::queue::worktree::WRAPPER_ARG)
    {
        // A queue job in a repository's worktree (see conductor::queue::worktree).
        let code = conductor::queue::worktree::job_main(&args[1..]);
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    if version_only() {
        return ExitCode::SUCCESS;
    }
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(code) => return ExitCode::from(code),
    };
    let out = output::Output {
        json: cli.json_output(),
        quiet: cli.global.quiet,
    };
    match commands::dispatch(cli, &out) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            out.error(&e);
            ExitCode::from(e.exit_code())
        }
    }
}

/// `conductor --version` (or `-V`) alone: print what clap prints, without building the command
/// tree first (start-up cost, issue 26). Anything else goes through clap as before.
fn version_only() -> bool {
    let mut args = std::env::args_os().skip(1);
    let (Some(arg), None) = (args.next(), args.next()) else {
        return false;
    };
    if arg != "--version" && arg != "-V" {
        return false;
    }
    use std::io::Write;
    // A closed stdout is not an error for a version query (clap ignores it too).
    let _ = writeln!(std::io::stdout(), "conductor {}", env!("CARGO_PKG_VERSION"));
    true
}
