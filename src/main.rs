use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = <conductor::cli::Cli as clap::Parser>::parse();
    let out = conductor::output::Output {
        json: cli.json_output(),
        quiet: cli.global.quiet,
    };
    match conductor::run(cli, &out) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            out.error(&e);
            ExitCode::from(e.exit_code())
        }
    }
}
