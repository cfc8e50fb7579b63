//! The command line, declared with clap derive. Doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod raw;
use raw::{args, forgot_force_reason, one_line, subcommand_at};

use crate::commands::{
    align, claim, cleanup, completions, conflicts, doctor, done, events, heartbeat, history, hook,
    integrate, man, op, prompt, release, reset, shell_init, start, status,
};

/// Exit codes, shown at the end of `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  ok (or nothing to do)
  1  operational error: lock_timeout, io, corrupt_state, unsafe_home
  2  invalid input or usage: bad arguments, schema violations, unknown or ambiguous instance,
     cursor_expired (events/watch --after older than the oldest kept event)
  3  claim conflict (the free files were still claimed); claim --wait or wait timed out
  4  blocked by the priority gate
  5  queue run: some job failed, timed out or is blocked (see `queue run --help`)
  11 store_unavailable: the shared store (etcd) has no reachable member or no quorum;
     store_untrusted / store_unauthorized: its certificate could not be verified, or it
     refused our credentials or role; nothing was changed

With --json, stdout carries exactly one JSON object; errors are
{\"status\":\"error\",\"reason\":\"<snake_case>\",\"message\":\"...\"}.";

/// Coordinate AI coding agents and people working on one machine: register tasks, claim files
/// before editing them, release them when done.
///
/// All state lives in ~/.conductor (or CONDUCTOR_HOME): the protocol's status.json,
/// history.jsonl and conflicts.log, the agent runtime's, the workflows' and the job queue's own
/// documents and ledgers, and one event journal (events.jsonl), written by transactions that a
/// crash can never half-apply; no daemon. Agents on several machines share one etcd cluster
/// instead (`--store https://HOST:PORT`, or CONDUCTOR_STORE). With no command, shows the status.
#[derive(Debug, Parser)]
#[command(name = "conductor", version, after_long_help = EXIT_CODES_HELP, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `--lock-timeout` when neither it nor CONDUCTOR_LOCK_TIMEOUT is given.
pub(crate) const DEFAULT_LOCK_TIMEOUT: f64 = 5.0;

/// Options every command accepts.
#[derive(Debug, Default, Args)]
pub struct GlobalArgs {
    /// Print exactly one JSON object on stdout (the protocol's output object).
    #[arg(long, global = true)]
    pub json: bool,
    /// State directory [env: CONDUCTOR_HOME] [default: ~/.conductor].
    // The variable is read after parsing (see `parse`): clap would show an option it filled
    // from the environment in every usage line, as if it were required.
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Seconds to wait for the state lock before failing with `lock_timeout` [env:
    /// CONDUCTOR_LOCK_TIMEOUT].
    #[arg(long, global = true, default_value_t = DEFAULT_LOCK_TIMEOUT, value_name = "SECS",
          value_parser = parse_timeout)]
    pub lock_timeout: f64,
    /// Hide status messages on stderr (errors and warnings are still printed).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Keep state in a shared etcd cluster instead of the home's files, for agents on several
    /// machines: https://HOST:PORT[,HOST:PORT...][/PREFIX] (TLS), or etcd://... for plain http
    /// (also `store` in config.json). TLS files and credentials: CONDUCTOR_ETCD_CACERT, _CERT,
    /// _KEY, _USER, _PASSWORD_FILE (or _PASSWORD).
    /// Check it with `conductor doctor`. [env: CONDUCTOR_STORE]
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// Allow a plain http:// store URL that names another machine (claims then cross the
    /// network unencrypted; a warning says so on every command). Also `"store_insecure": true`
    /// in config.json. [env: CONDUCTOR_STORE_INSECURE=1]
    #[arg(long, global = true)]
    pub insecure_store: bool,
}

/// Parse the command line, then `CONDUCTOR_LOCK_TIMEOUT` when `--lock-timeout` was not given
/// (read here, not by clap: see `GlobalArgs::home`).
fn parse_with_env() -> Result<Cli, clap::Error> {
    let argv = args();
    if let Some(cli) = raw::hot_line(&argv) {
        return Ok(cli);
    }
    // Building the whole command tree (every command, option and help text) costs a hook or a
    // claim about as much as its own work (issue 35). The commands that run on every tool call,
    // prompt and claim are parsed against a tree of their own: the global options and that
    // command alone. Anything that tree refuses (help, a typo) is parsed again against the whole
    // tree, which says it as it always did.
    macro_rules! alone {
        ($($name:literal => $variant:ident($args:ty)),* $(,)?) => {
            match subcommand_at(&argv).and_then(|i| argv[i].to_str()) {
                $(Some($name) => {
                    #[derive(Parser)]
                    #[command(name = "conductor")]
                    struct One {
                        #[command(flatten)]
                        global: GlobalArgs,
                        #[command(subcommand)]
                        command: OneCommand,
                    }
                    #[derive(Subcommand)]
                    enum OneCommand {
                        #[command(name = $name)]
                        It($args),
                    }
                    if let Ok((one, global)) = parse_as::<One>(&argv, |o| &mut o.global) {
                        let OneCommand::It(args) = one.command;
                        return Ok(Cli {
                            global,
                            command: Some(Command::$variant(args)),
                        });
                    }
                })*
                _ => {}
            }
        };
    }
    alone!(
        "hook" => Hook(hook::HookArgs),
        "prompt" => Prompt(prompt::PromptArgs),
        "claim" => Claim(claim::ClaimArgs),
        "release" => Release(release::ReleaseArgs),
        "heartbeat" => Heartbeat(heartbeat::HeartbeatArgs),
        "check" => Check(crate::commands::check::CheckArgs),
        "status" => Status(status::StatusArgs),
        "start" => Start(start::StartArgs),
        "done" => Done(done::DoneArgs),
    );
    parse_as::<Cli>(&argv, |c| &mut c.global).map(|(mut cli, global)| {
        cli.global = global;
        cli
    })
}

/// Parse `argv` as `P`, then `CONDUCTOR_LOCK_TIMEOUT` when `--lock-timeout` was not given;
/// returns `P` and its global options.
fn parse_as<P: Parser>(
    argv: &[std::ffi::OsString],
    global: fn(&mut P) -> &mut GlobalArgs,
) -> Result<(P, GlobalArgs), clap::Error> {
    let mut cmd = P::command();
    let m = cmd.try_get_matches_from_mut(argv)?;
    let mut parsed = P::from_arg_matches(&m).map_err(|e| e.format(&mut cmd))?;
    let mut g = std::mem::take(global(&mut parsed));
    if m.value_source("lock_timeout") == Some(clap::parser::ValueSource::DefaultValue)
        && let Some(v) = lock_timeout_env()
    {
        g.lock_timeout = v.map_err(|why| {
            cmd.error(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value {why}"),
            )
        })?;
    }
    Ok((parsed, g))
}

/// clap shows an option that a variable filled (`CONDUCTOR_OWNER_PID`) in the usage line of an
/// error as if it were required: the same error, parsed again without conductor's variables.
/// The process exits right after printing it.
fn without_env_in_usage(e: clap::Error) -> clap::Error {
    let ours: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| k.to_string_lossy().starts_with("CONDUCTOR_"))
        .collect();
    if ours.is_empty() {
        return e;
    }
    for k in ours {
        // SAFETY: parsing happens before any other thread starts.
        unsafe { std::env::remove_var(k) };
    }
    match <Cli as Parser>::try_parse_from(args()) {
        Err(again) if again.kind() == e.kind() => again,
        _ => e,
    }
}

/// CONDUCTOR_LOCK_TIMEOUT when it is set and not empty: its seconds, or what is wrong with it
/// ("'VALUE' for CONDUCTOR_LOCK_TIMEOUT: WHY").
pub(crate) fn lock_timeout_env() -> Option<Result<f64, String>> {
    let v = std::env::var("CONDUCTOR_LOCK_TIMEOUT")
        .ok()
        .filter(|v| !v.is_empty())?;
    Some(parse_timeout(&v).map_err(|why| format!("'{v}' for CONDUCTOR_LOCK_TIMEOUT: {why}")))
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds between 0 and 86400"
        )),
    }
}

/// Which instance a command acts on.
#[derive(Debug, Args, Clone)]
pub struct InstanceArg {
    /// The instance to act on [default: $CONDUCTOR_INSTANCE_ID, else the one live instance whose
    /// working directory contains the current directory].
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
}

impl InstanceArg {
    /// The id given with `--instance` (an empty one is an error later, like any bad id), else
    /// CONDUCTOR_INSTANCE_ID, where an empty variable counts as unset (`op` does the same).
    pub fn id(&self) -> Option<String> {
        self.instance.clone().or_else(|| {
            std::env::var("CONDUCTOR_INSTANCE_ID")
                .ok()
                .filter(|s| !s.is_empty())
        })
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Register a task and get an instance id (runs the priority gate).
    Start(start::StartArgs),
    /// Claim files before editing them; a conflict is reported (exit 3), free files are still claimed.
    Claim(claim::ClaimArgs),
    /// Release claimed files without finishing the task.
    Release(release::ReleaseArgs),
    /// Finish the task: record it in history, release every claim, remove the instance.
    Done(done::DoneArgs),
    /// Record that an instance is still alive.
    Heartbeat(heartbeat::HeartbeatArgs),
    /// Is a claim's fencing token still the current grant? (for scripts that write files)
    Check(crate::commands::check::CheckArgs),
    /// Show live instances, their claims, unresolved conflicts and drift warnings.
    Status(status::StatusArgs),
    /// Remove orphaned instances (no heartbeat for an hour, or their process is gone).
    Cleanup(cleanup::CleanupArgs),
    /// Check a task against the priority gate without registering it.
    Align(align::AlignArgs),
    /// Show recent entries of conflicts.log and the conflicts still unresolved.
    Conflicts(conflicts::ConflictsArgs),
    /// Show finished tasks from history.jsonl (streamed, filterable).
    History(history::HistoryArgs),
    /// Print a page of the event journal as JSON (resumable with --after).
    Events(events::EventsArgs),
    /// Print events as they happen (resumable with --after; JSON lines with --json).
    Watch(crate::commands::watch::WatchArgs),
    /// A live overview of the home in the terminal (instances, agents, workflows, queue).
    #[command(long_about = crate::top::ABOUT)]
    Top(crate::top::TopArgs),
    /// Wait until files are released or instances are done (for scripts).
    Wait(crate::commands::wait::WaitArgs),
    /// Files changed in two or more git worktrees of a repository, and which would conflict.
    Overlaps(crate::commands::overlaps::OverlapsArgs),
    /// Run a command as a registered instance: heartbeats while it runs, done when it exits.
    Run(crate::commands::run::RunArgs),
    /// Record edits nobody claimed in the live sessions' directories (started by session start).
    WatchEdits(crate::commands::watch_edits::WatchEditsArgs),
    /// Agent runtime: register agents, run their loops, show their status and feed.
    #[command(subcommand)]
    Agent(crate::commands::agent::AgentCommand),
    /// Post a message to a channel; addressed agents get a mention and an inbox item.
    Post(crate::commands::post::PostArgs),
    /// Send a direct message to an agent (lands in its inbox).
    Dm(crate::commands::post::DmArgs),
    /// Edit a message you posted.
    Edit(crate::commands::post::EditArgs),
    /// Show a channel's messages.
    Messages(crate::commands::post::MessagesArgs),
    /// Show and act on agents' inbox items: seen, complete, skip, claim, renew, release.
    Inbox(crate::commands::inbox::InboxArgs),
    /// Show unacknowledged mentions, or acknowledge them.
    Mentions(crate::commands::inbox::MentionsArgs),
    /// Validate an artifact's structured blocks.
    #[command(subcommand)]
    Artifact(crate::commands::artifact::ArtifactCommand),
    /// Print the agent runtime's metrics in Prometheus text format.
    Metrics(crate::commands::metrics::MetricsArgs),
    /// Run one protocol operation given as JSON, like {"operation":"claim",...}.
    Op(op::OpArgs),
    /// Check the files in the home and explain what is wrong; --repair fixes it without deleting anything.
    Doctor(doctor::DoctorArgs),
    /// Write everything the home (or the shared store) holds to one JSON bundle.
    Export(crate::commands::export::ExportArgs),
    /// Load an export bundle into an empty home or store (nothing is ever replaced).
    Import(crate::commands::import::ImportArgs),
    /// Move a shared store's status.json into the paged layout (flat cost at 10,000 claims; safe to run twice).
    MigrateStore(crate::commands::migrate_store::MigrateStoreArgs),
    /// Keep grep-able copies of history.jsonl and conflicts.log in a directory, live.
    Mirror(crate::commands::mirror::MirrorArgs),
    /// Back up status.json beside itself, then start from an empty state.
    Reset(reset::ResetArgs),
    /// Run as an agent hook (Claude Code, Cursor, Codex CLI, Gemini CLI): register sessions, refuse edits of held files.
    Hook(hook::HookArgs),
    /// Install an agent's hooks (claude, cursor, codex, gemini) into the project or ~ (--user); --uninstall removes them.
    Integrate(integrate::IntegrateArgs),
    /// Print shell functions: `start` exports CONDUCTOR_INSTANCE_ID, `done` unsets it, plus a prompt segment.
    ShellInit(shell_init::ShellInitArgs),
    /// Print a prompt segment like `[itm-a1b2c3 · 3 claimed]` for CONDUCTOR_INSTANCE_ID (no locking).
    Prompt(prompt::PromptArgs),
    /// Print a shell completion script generated from the command definitions.
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff) generated from the command definitions.
    Man(man::ManArgs),
    /// The agent job queue: submit planned jobs, dispatch them, collect their results.
    #[command(subcommand)]
    Queue(crate::commands::queue::QueueCommand),
    /// Workflows: a supervised state machine, each state run by a fresh agent process.
    #[command(subcommand, after_long_help = crate::commands::workflow::HELP)]
    Workflow(crate::commands::workflow::WorkflowCommand),
    /// Serve Canopy's agent API (X-API-Key) and a live dashboard over HTTP, on loopback.
    Serve(crate::serve::ServeArgs),
    /// Serve conductor's tools to an agent over MCP (stdio): claim, check, release, inbox, ...
    Mcp(crate::mcp::McpArgs),
}

impl Cli {
    /// True when the result is printed as JSON: `--json`, always for `op`, and for `events`
    /// unless stdout is a terminal.
    pub fn json_output(&self) -> bool {
        use std::io::IsTerminal;
        self.global.json
            || matches!(self.command, Some(Command::Op(_)))
            // `events` is for scripts unless a person reads it on a terminal.
            || matches!(self.command, Some(Command::Events(_)))
                && !std::io::stdout().is_terminal()
    }
}

/// Parse the command line. `--help` and `--version` print and exit 0. A usage error exits 2
/// with clap's message on stderr, or, when `--json` is among the arguments, with the JSON error
/// envelope (`reason: "usage"`) on stdout so scripts parsing stdout are never surprised.
pub fn parse() -> Result<Cli, u8> {
    use clap::error::ErrorKind;
    match parse_with_env() {
        Ok(mut cli) => {
            // The options' variables, read here rather than by clap (see `GlobalArgs::home`).
            if cli.global.home.is_none() {
                cli.global.home = std::env::var_os("CONDUCTOR_HOME").map(PathBuf::from);
            }
            if cli.global.store.is_none() {
                cli.global.store = std::env::var("CONDUCTOR_STORE").ok();
            }
            Ok(cli)
        }
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            Err(0)
        }
        Err(e) => {
            let e = without_env_in_usage(e);
            let wants_json = std::env::args_os().any(|a| a == "--json")
                || std::env::args_os().nth(1).is_some_and(|a| a == "op");
            let (message, hint) = match forgot_force_reason(&e) {
                Some(e) => (
                    e.to_string(),
                    conductor::error::Error::hint(&e).unwrap_or_default(),
                ),
                None => one_line(&e),
            };
            if wants_json {
                let obj =
                    serde_json::json!({"status": "error", "reason": "usage", "message": message});
                println!("{obj}");
            }
            eprintln!("error: {message}");
            eprintln!("hint: {hint}");
            Err(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clap_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
