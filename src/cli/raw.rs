//! The raw command line, before and after clap: the arguments as clap should see them, where
//! the subcommand is, and clap's errors as one line and one hint (with the claim mistakes a
//! person makes named for what they are).

use conductor::template::shell_quote;

/// The command line as clap should see it: `claim --wait 30s FILE` (a duration right after
/// `--wait`, which only takes its value with `=`) is read as `claim --wait=30s FILE`, not as a
/// wait without limit for a file called `30s`.
pub fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(at) = subcommand_at(&args) else {
        return args;
    };
    if args[at] != "claim" {
        return args;
    }
    let mut i = at + 1;
    while i + 1 < args.len() {
        if args[i] == "--" {
            break;
        }
        if args[i] == "--wait"
            && let Some(v) = args[i + 1].to_str()
            && looks_like_duration(v)
        {
            args[i] = format!("--wait={v}").into();
            args.remove(i + 1);
        }
        i += 1;
    }
    args
}

/// Where the subcommand is among the arguments: the first one that is neither a global option
/// nor the value of one.
pub fn subcommand_at(args: &[std::ffi::OsString]) -> Option<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "--home" || a == "--lock-timeout" || a == "--store" {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            return Some(i);
        }
    }
    None
}

/// clap's usage error as one line plus one hint: its message up to the first blank line, on
/// one line ("the following required arguments were not provided: <TASK>"), and its tip, else
/// the usage line and where the help is.
pub fn one_line(e: &clap::Error) -> (String, String) {
    let rendered = e.to_string();
    let mut blocks = rendered.split("\n\n");
    let head: Vec<&str> = blocks
        .next()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = head.join(" ").trim_start_matches("error: ").to_string();
    let mut tip = None;
    let mut usage = None;
    for block in blocks {
        let b = block.trim();
        if let Some(t) = b.strip_prefix("tip: ") {
            tip.get_or_insert_with(|| t.lines().map(str::trim).collect::<Vec<_>>().join(" "));
        } else if let Some(u) = b.strip_prefix("Usage: ") {
            usage = Some(u.lines().next().unwrap_or_default().trim().to_string());
        }
    }
    let raw = args();
    let help = subcommand_at(&raw)
        .map(|i| format!("conductor {} --help", raw[i].to_string_lossy()))
        .unwrap_or_else(|| "conductor --help".into());
    let hint = match (tip, usage) {
        (Some(t), _) => t,
        (None, Some(u)) => format!("usage: {u} (more in `{help}`)"),
        (None, None) => format!("see `{help}`"),
    };
    (message, hint)
}

/// `claim --force 'src/**/*.rs'` with no file after it: the reason was forgotten and the
/// file taken for it, which says more than "FILE is required".
pub fn forgot_force_reason(e: &clap::Error) -> Option<conductor::error::Error> {
    if e.kind() != clap::error::ErrorKind::MissingRequiredArgument {
        return None;
    }
    let raw = args();
    let at = subcommand_at(&raw)?;
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args[at] != "claim" {
        return None;
    }
    let why = args[at + 1..].iter().enumerate().find_map(|(i, a)| {
        if a == "--force" {
            args.get(at + 2 + i).cloned()
        } else {
            a.strip_prefix("--force=").map(str::to_string)
        }
    })?;
    looks_like_path(&why).then(|| forgot_reason(&why, &[]))
}

/// True for a word that is more likely a duration than a file name: `30s`, `500ms`, `5m`, `2h`,
/// `1d`, `forever` (what `--wait` takes; a plain number counts too).
pub fn looks_like_duration(s: &str) -> bool {
    !s.is_empty()
        && (s.starts_with(|c: char| c.is_ascii_digit()) || s == "forever" || s == "inf")
        && conductor::time::parse_duration(s).is_ok()
}

/// True for a `--force` reason that is really a path: a glob, a directory (`src/`), a name
/// with a directory and an extension (`src/a.rs`), or a file that exists. A reason with spaces
/// is a sentence, never a path.
pub fn looks_like_path(why: &str) -> bool {
    if why.is_empty() || why.contains(char::is_whitespace) {
        return false;
    }
    let last = why.rsplit('/').next().unwrap_or(why);
    why.contains(['*', '?'])
        || why.ends_with('/')
        || (why.contains('/') && last.contains('.'))
        || std::path::Path::new(why).exists()
}

/// The error for `--force FILE`: the reason was forgotten.
pub fn forgot_reason(why: &str, files: &[String]) -> conductor::error::Error {
    let mut all = vec![shell_quote(why)];
    all.extend(files.iter().map(|f| shell_quote(f)));
    conductor::error::Error::invalid(
        conductor::error::Reason::InvalidInput,
        format!("`--force {why}` reads `{why}` as the reason, but it looks like a path: nothing was claimed"),
    )
    .with_hint(format!(
        "give the reason first: conductor claim --force \"WHY\" {}",
        all.join(" ")
    ))
}

/// The hottest command lines, read without building even their own clap tree (which costs a
/// hook a tenth of its time; issue 35): `conductor hook AGENT [--from-plugin]`, exactly as
/// `integrate` installs it (every agent's every tool call runs it), and `conductor [--json]
/// status [--json]` (what people, prompts and status lines run most). Any other shape, a global
/// option or an agent name clap would refuse included, is left to clap (`None`).
pub fn hot_line(argv: &[std::ffi::OsString]) -> Option<super::Cli> {
    let rest: Vec<&str> = argv
        .get(1..)?
        .iter()
        .map(|a| a.to_str())
        .collect::<Option<_>>()?;
    let hook = |agent: &str, from_plugin: bool| {
        let agent = <conductor::hooks::Agent as clap::ValueEnum>::from_str(agent, false).ok()?;
        Some(super::Command::Hook(crate::commands::hook::HookArgs {
            agent,
            from_plugin,
        }))
    };
    let command = match rest[..] {
        ["hook", agent] => hook(agent, false)?,
        ["hook", agent, "--from-plugin"] | ["hook", "--from-plugin", agent] => hook(agent, true)?,
        ["status"] | ["--json", "status"] | ["status", "--json"] => {
            super::Command::Status(crate::commands::status::StatusArgs { watch: false })
        }
        _ => return None,
    };
    let lock_timeout = match super::lock_timeout_env() {
        None => super::DEFAULT_LOCK_TIMEOUT,
        Some(Ok(v)) => v,
        // clap says what is wrong with it.
        Some(Err(_)) => return None,
    };
    Some(super::Cli {
        global: super::GlobalArgs {
            json: rest.contains(&"--json"),
            lock_timeout,
            ..super::GlobalArgs::default()
        },
        command: Some(command),
    })
}
