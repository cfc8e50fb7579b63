//! `conductor queue run`: the dispatcher, with a live progress display on stderr.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use crate::commands::Out;
use crate::commands::{Ctx, print};
use conductor::error::Result;
use conductor::queue::State;
use conductor::queue::dispatch::{self, Options, Update};
use conductor::queue::exec::{DEFAULT_AGENT_CMD, Runner};

/// The long help of `queue run`.
pub const ABOUT: &str = "Start every ready job (up to --parallel at once) and each dependent the moment its last\n\
dependency completes; return when no job can make progress (--follow: keep waiting for\n\
submissions, retries and cancels). One dispatcher runs a home's queue at a time: a second\n\
one says which process does and waits for it to finish, then takes over. With a shared store\n\
(etcd), dispatchers on every host share the queue: each holds a lease (CONDUCTOR_QUEUE_LEASE or\n\
config.json's queue_lease_seconds, default 30 s), and a dead one's jobs are taken over once its\n\
lease has expired, never before; one that loses its lease stops its jobs and exits 11\n\
(lease_lost). See docs/queue.md, Several hosts.\n\
\n\
Every state change is durable: a job is launched the moment it is ready and its start is\n\
committed a few milliseconds later, with whatever else changed meanwhile. If the dispatcher\n\
dies, the next one kills what it left running and runs those jobs again; a job whose\n\
completion was committed never runs again.\n\
\n\
Ready jobs start by priority (P0 first, `queue add --priority` or a manifest's `priority`),\n\
then in submission order. Nothing starts while the queue is paused (`queue pause`), nor a job\n\
paused by name; `queue resume` lets them start (a --follow dispatcher starts them at once).\n\
\n\
Each job's agent gets the augmented prompt on stdin (also in queue-prompts/<ws>/<job>.md),\n\
runs in its own process group (a timeout or cancel kills the whole tree), with its stdout and\n\
stderr in queue-logs/<ws>/<job>.log. Its secrets are read now, from this process's environment\n\
or --secrets-file, and given to that job only; a missing one blocks the job, naming it.\n\
\n\
Runners: `local` runs the agent command in the workspace directory. `sandbox` runs it under\n\
bubblewrap (bwrap): the workspace read-write at the job's workdir (/workspace), its docs\n\
read-only, a private /tmp, a private HOME, as uid 65534 in its own user namespace with no\n\
capabilities (see `conductor doctor`), an environment with only PATH, HOME, LANG,\n\
TERM, --pass-env variables and its own secrets. The agent command's program (and the\n\
interpreter of its #! line), found on this process's PATH, is shown read-only with its\n\
install tree (its npm package or its directory) and linked first on the sandbox's PATH, so an\n\
agent installed in your home runs there as it is. Anything else is a template with `{cmd}`\n\
(the agent command, shell-quoted), run by `sh -c` with the prompt on stdin:\n\
`--runner 'ssh build1 -- {cmd}'`.\n\
\n\
With OpenCode's command (the default), a job's agent is checked first against `opencode agent\n\
list` (in the workspace, or the sandbox): an unknown agent fails the job, naming it, instead of\n\
OpenCode's silent fallback to its default agent. Logs are stored without ANSI escapes; a job\n\
run again gets a header line in its log before each new attempt.\n\
\n\
Agent command placeholders (values shell-quoted): {agent}, {model}, {job}, {workspace}\n\
(the workspace as the agent sees it), {prompt_file}; a `[...]` part is dropped when a\n\
placeholder in it is empty.";

/// The arguments of `queue run` (see [`ABOUT`]).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub dispatch: DispatchArgs,
    /// Keep running: wait for new submissions, retries and cancels instead of returning.
    #[arg(long)]
    pub follow: bool,
}

/// How jobs are started: shared by `queue run` and `queue retry` (which runs the dispatcher
/// itself when none is running).
#[derive(Debug, Args)]
pub struct DispatchArgs {
    /// How many jobs run at once.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    /// `local`, `sandbox`, or a template containing {cmd} [default: local; `queue retry`: the
    /// runner the job last ran with].
    #[arg(long, value_name = "local|sandbox|TEMPLATE")]
    pub runner: Option<String>,
    /// The agent command template (run by sh -c) [default: `opencode run --agent {agent}
    /// [--model {model}]`; `queue retry`: the one the job last ran with].
    #[arg(long, value_name = "TEMPLATE")]
    pub agent_cmd: Option<String>,
    /// A file of NAME=value lines (mode 0600) to read secrets from, after the environment.
    #[arg(long, env = "CONDUCTOR_SECRETS_FILE", value_name = "FILE")]
    pub secrets_file: Option<PathBuf>,
    /// Sandbox: also show this host path read-only (where the agent is installed). Repeatable.
    #[arg(long = "sandbox-ro", value_name = "PATH")]
    pub sandbox_ro: Vec<PathBuf>,
    /// Sandbox: pass this variable through from the environment (e.g. a model API key). Repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// Sandbox: keep each job's private HOME (`<home>/queue-homes/WS/JOB`) after it ends, to
    /// debug the agent. It may hold the secrets the job saw; by default it is removed.
    #[arg(long)]
    pub keep_home: bool,
}

pub use conductor::queue::options::parse_runner;

/// The progress display: one line per change, or a table redrawn in place on a terminal.
struct Progress {
    live: bool,
    quiet: bool,
    rows: BTreeMap<String, (State, String, Instant, Option<Duration>)>,
    order: Vec<String>,
    drawn: usize,
}

impl Progress {
    fn update(&mut self, u: Update) {
        if let Update::WaitingForLead { pid } = &u {
            eprintln!(
                "conductor: another dispatcher runs this home's queue{}; waiting for it to finish (one dispatcher per home)",
                pid.as_ref()
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default()
            );
            return;
        }
        if self.quiet {
            return;
        }
        if let Update::Job {
            key,
            state,
            detail,
            elapsed,
        } = &u
        {
            if !self.rows.contains_key(key) {
                self.order.push(key.clone());
            }
            let start = match (state, self.rows.get(key)) {
                (State::Running, _) => Instant::now(),
                (_, Some(r)) => r.2,
                _ => Instant::now(),
            };
            self.rows
                .insert(key.clone(), (*state, detail.clone(), start, *elapsed));
            if !self.live {
                let took = elapsed
                    .map(|d| format!(" after {:.2}s", d.as_secs_f64()))
                    .unwrap_or_default();
                let detail = if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                };
                eprintln!("{:<10} {key}{took}{detail}", state.as_str());
                return;
            }
        }
        if self.live {
            self.redraw();
        }
    }

    fn redraw(&mut self) {
        let mut err = std::io::stderr().lock();
        let mut s = String::new();
        if self.drawn > 0 {
            s.push_str(&format!("\x1b[{}A", self.drawn));
        }
        for key in &self.order {
            let (state, detail, start, elapsed) = &self.rows[key];
            let secs = match (state, elapsed) {
                (State::Running, _) => start.elapsed().as_secs_f64(),
                (_, Some(d)) => d.as_secs_f64(),
                _ => 0.0,
            };
            s.push_str(&format!(
                "\x1b[2K{:<10} {key:<32} {secs:>7.1}s  {detail}\n",
                state.as_str()
            ));
        }
        self.drawn = self.order.len();
        let _ = err.write_all(s.as_bytes());
    }
}

impl DispatchArgs {
    /// The dispatcher's options (`follow`, `only` as given).
    pub fn options(
        self,
        ctx: &Ctx,
        follow: bool,
        only: Option<std::collections::BTreeSet<String>>,
    ) -> Result<Options> {
        let runner = parse_runner(
            self.runner.as_deref().unwrap_or("local"),
            self.sandbox_ro,
            self.pass_env,
        )?;
        if let Some(f) = &self.secrets_file {
            // Refused now, before anything changes (the dispatcher reads it again).
            dispatch::read_secrets_file(f)?;
        }
        if self.keep_home {
            if matches!(runner, Runner::Sandbox { .. }) {
                eprintln!(
                    "warning: --keep-home: each job's HOME stays in {} after it ends, with what \
                     the agent kept there (its transcripts may hold the job's secrets); delete it \
                     when you are done",
                    ctx.store.home().dir().join("queue-homes").display()
                );
            } else {
                eprintln!(
                    "warning: --keep-home has no effect without --runner sandbox (other runners \
                     use the agent's own HOME)"
                );
            }
        }
        Ok(Options {
            parallel: usize::from(self.parallel),
            runner,
            agent_cmd: self
                .agent_cmd
                .unwrap_or_else(|| DEFAULT_AGENT_CMD.to_string()),
            follow,
            secrets_file: self.secrets_file,
            tick: std::io::stderr().is_terminal() && !ctx.out.quiet,
            only,
            keep_home: self.keep_home,
            lease: conductor::queue::options::lease_ttl(&ctx.store)?,
        })
    }
}

/// Run the dispatcher with the progress display on stderr; returns what it did and how long
/// it took (seconds).
pub fn dispatch_with_progress(ctx: &Ctx, opts: &Options) -> Result<(dispatch::Summary, f64)> {
    let mut p = Progress {
        live: opts.tick,
        quiet: ctx.out.quiet,
        rows: BTreeMap::new(),
        order: Vec::new(),
        drawn: 0,
    };
    let began = Instant::now();
    let summary = dispatch::run(&ctx.store, opts, &mut |u| p.update(u))?;
    Ok((summary, began.elapsed().as_secs_f64()))
}

/// `3 completed, 1 failed`.
pub fn counts(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Run `queue run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<u8> {
    let opts = args.dispatch.options(ctx, args.follow, None)?;
    let (summary, took) = dispatch_with_progress(ctx, &opts)?;
    let ok = summary.all_completed();
    let paused = ctx
        .store
        .read_doc::<conductor::queue::QueueDoc>(ctx.now)
        .is_ok_and(|d| d.paused);
    let message = format!(
        "{}{}Started {} job(s) in {took:.2}s{}.{}",
        if paused {
            "The queue is paused (`conductor queue resume`). "
        } else {
            ""
        },
        if summary.stopped { "Stopped. " } else { "" },
        summary.started,
        if summary.ended.is_empty() {
            String::new()
        } else {
            format!(" ({})", counts(&summary.ended))
        },
        if summary.remaining.is_empty() {
            " The queue is empty (finished workspaces are archived).".to_string()
        } else {
            format!(" Left in the queue: {}.", counts(&summary.remaining))
        }
    );
    print(
        ctx.out,
        &Out {
            json: json!({
                "status": if ok { "ok" } else { "incomplete" },
                "started": summary.started,
                "ended": summary.ended,
                "remaining": summary.remaining,
                "stopped": summary.stopped,
                "seconds": took,
                "message": message,
            }),
            text: message.clone(),
            code: if ok { 0 } else { 5 },
        },
    )
}
