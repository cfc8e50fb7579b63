//! The `conductor` command line: parse (`cli`), run one command (`commands`), print (`output`).

mod cli;
mod commands;
mod output;
mod serve;

use std::process::ExitCode;

fn main() -> ExitCode {
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
