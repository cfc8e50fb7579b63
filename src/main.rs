use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match <conductor::cli::Cli as clap::Parser>::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
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

/// clap's usage errors; with `--json` they are also the JSON error object on stdout.
fn usage_error(e: clap::Error) -> ExitCode {
    let json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    if !json || !e.use_stderr() {
        e.exit();
    }
    let text = e.to_string();
    let head: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    let message = head.join(" ").trim_start_matches("error: ").to_string();
    let message = if message.is_empty() {
        "invalid usage".to_string()
    } else {
        message
    };
    println!(
        "{}",
        serde_json::json!({"status": "error", "reason": "usage", "message": message})
    );
    let _ = e.print();
    ExitCode::from(2)
}
