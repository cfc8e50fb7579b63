//! The CLI face: one file per command. Each turns its arguments into a call of the library (for
//! the protocol, a [`Request`], the same object `conductor op` takes, run by
//! `conductor::protocol::sessions`) and renders what comes back: text, or with `--json` exactly
//! the protocol's output object. No command calls another command.

pub mod agent;
pub mod agent_run;
pub mod agent_selftest;
pub mod align;
pub mod artifact;
pub mod check;
pub mod claim;
pub mod claim_wait;
pub mod cleanup;
pub mod completions;
pub mod conflicts;
pub mod doctor;
pub mod done;
pub mod events;
pub mod export;
pub use conductor::follow;
pub mod heartbeat;
pub mod history;
pub mod hook;
pub mod import;
pub mod inbox;
pub mod integrate;
pub mod lock_wait;
pub mod man;
pub mod man_markdown;
pub mod metrics;
pub mod migrate_store;
pub mod mirror;
pub mod op;
pub mod overlaps;
pub mod post;
pub mod prompt;
pub mod queue;
pub mod read_only;
pub mod release;
pub mod reset;
pub mod run;
pub mod shell_init;
pub mod start;
pub mod status;
pub use crate::face::table;
pub mod wait;
pub mod watch;
pub mod watch_edits;
pub mod workflow;

use std::time::Duration;

use crate::cli::{Cli, Command};
pub use crate::face::{Ctx, Out, Report, display_path, print};
use crate::output::Output;
use conductor::error::Result;
use conductor::protocol::request::{Request, StatusRequest};
use conductor::store::{Home, Store};
use conductor::time::Timestamp;

/// Run the command line.
pub fn dispatch(cli: Cli, out: &Output) -> Result<u8> {
    // Commands that never open the store (or open it their own way).
    let command = match cli.command {
        Some(Command::Hook(a)) => return hook::run(&cli.global, a, out),
        Some(Command::Integrate(a)) => return integrate::run(&cli.global, a, out),
        Some(Command::ShellInit(a)) => return shell_init::run(a, out),
        Some(Command::Prompt(a)) => return prompt::run(&cli.global, a, out),
        Some(Command::Completions(a)) => return completions::run(a),
        Some(Command::Man(a)) => return man::run(a),
        c => c,
    };
    // `--store` reaches every Store this process (and the conductor processes it starts) opens.
    if let Some(url) = &cli.global.store {
        // SAFETY: no other thread runs yet (commands start theirs after this).
        unsafe { std::env::set_var("CONDUCTOR_STORE", url) };
    }
    if cli.global.insecure_store {
        // SAFETY: as above.
        unsafe { std::env::set_var("CONDUCTOR_STORE_INSECURE", "1") };
    }
    let dir = match cli.global.home.clone() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Home::default_dir()?,
    };
    // With a shared store the documents live in etcd: the home may rightly not exist yet.
    let named = cli
        .global
        .home
        .as_ref()
        .is_some_and(|d| !d.as_os_str().is_empty())
        && cli.global.store.as_deref().unwrap_or("").is_empty();
    read_only::check(&command, &dir, named)?;
    // A read-only command on a default home that does not exist yet answers as an empty home
    // would, from a scratch one removed on exit: it never creates ~/.conductor (the README).
    let shared = !cli.global.store.as_deref().unwrap_or("").is_empty();
    let scratch = read_only::scratch_home(&command, &dir, named || shared)?;
    let missing_home = scratch.as_ref().map(|_| dir.clone());
    let dir = scratch.as_ref().map_or(dir, |t| t.path().to_path_buf());
    let timeout = Duration::from_secs_f64(cli.global.lock_timeout);
    let mut store = Store::open(dir, timeout)?;
    if let conductor::store::backend::Backend::Etcd(r) = store.backend()
        && let Some(w) = r.plaintext_warning()
    {
        out.warn(&w);
    }
    if !cli.global.quiet {
        store = store.on_wait(lock_wait::notes());
    }
    let ctx = Ctx {
        store,
        now: Timestamp::now(),
        out,
    };
    let request = match command {
        None => Request::Status(StatusRequest {}),
        Some(Command::Start(a)) if a.worktree.is_some() => {
            let (req, worktree) = a.into_parts()?;
            conductor::protocol::request::validate(&Request::Start(req.clone()))?;
            ctx.store.short_lived();
            let report = start::execute_in(&ctx, req, worktree)?;
            return print(out, report.as_ref());
        }
        Some(Command::Start(a)) => Request::Start(a.into_request()?),
        Some(Command::Claim(a)) if a.wait.is_some() => return claim_wait::run(&ctx, a),
        Some(Command::Claim(a)) => return claim::run(&ctx, a),
        Some(Command::Release(a)) => Request::Release(a.into_request()),
        Some(Command::Done(a)) => Request::Done(a.into_request()),
        Some(Command::Heartbeat(a)) => Request::Heartbeat(a.into_request()),
        Some(Command::Check(a)) => return check::run(&ctx, a),
        Some(Command::Cleanup(a)) => Request::Cleanup(a.into_request()),
        Some(Command::Status(a)) if a.watch => return crate::top::watch_status(&ctx),
        Some(Command::Status(_)) => Request::Status(StatusRequest {}),
        Some(Command::Align(a)) => Request::Align(a.into_request()?),
        Some(Command::Conflicts(a)) => return conflicts::run(&ctx, a),
        Some(Command::Reset(a)) => return reset::run(&ctx, a),
        Some(Command::MigrateStore(a)) => return migrate_store::run(&ctx, a),
        Some(Command::History(a)) => return history::run(&ctx, a),
        Some(Command::Op(a)) => return op::run(&ctx, a),
        Some(Command::Doctor(a)) => return doctor::run(&ctx, a, missing_home.as_deref()),
        Some(Command::Export(a)) => return export::run(&ctx, a),
        Some(Command::Import(a)) => return import::run(&ctx, a),
        Some(Command::Mirror(a)) => return mirror::run(&ctx, a),
        Some(
            Command::Hook(_) | Command::Integrate(_) | Command::ShellInit(_) | Command::Prompt(_),
        )
        | Some(Command::Completions(_) | Command::Man(_)) => unreachable!("handled above"),
        Some(Command::Events(a)) => return events::run(&ctx, a),
        Some(Command::Watch(a)) => return watch::run(&ctx, a),
        Some(Command::Top(a)) => return crate::top::run(&ctx, a),
        Some(Command::Wait(a)) => return wait::run(&ctx, a),
        Some(Command::Overlaps(a)) => return overlaps::run(&ctx, a),
        Some(Command::Run(a)) => return run::run(&ctx, a),
        Some(Command::WatchEdits(a)) => return watch_edits::run(&ctx, a),
        Some(Command::Agent(c)) => return agent::run(&ctx, c),
        Some(Command::Post(a)) => return post::run_post(&ctx, a),
        Some(Command::Dm(a)) => return post::run_dm(&ctx, a),
        Some(Command::Edit(a)) => return post::run_edit(&ctx, a),
        Some(Command::Messages(a)) => return post::run_messages(&ctx, a),
        Some(Command::Inbox(a)) => return inbox::run(&ctx, a),
        Some(Command::Mentions(a)) => return inbox::run_mentions(&ctx, a),
        Some(Command::Artifact(c)) => return artifact::run(&ctx, c),
        Some(Command::Metrics(a)) => return metrics::run(&ctx, a),
        Some(Command::Queue(c)) => return queue::run(&ctx, c),
        Some(Command::Workflow(a)) => return workflow::run(&ctx, a),
        Some(Command::Serve(a)) => return crate::serve::run(&ctx, a),
        Some(Command::Mcp(a)) => return crate::mcp::run(&ctx, a),
    };
    conductor::protocol::request::validate(&request)?;
    // One request, then the process exits.
    ctx.store.short_lived();
    let report = execute(&ctx, request)?;
    let code = print(out, report.as_ref());
    // The process exits next: freeing a report that holds the whole state (`status` at 1,000
    // claims: thousands of strings) is work nobody needs.
    std::mem::forget(report);
    code
}

/// Run a validated request.
pub fn execute(ctx: &Ctx, request: Request) -> Result<Box<dyn Report>> {
    match request {
        Request::Start(r) => start::execute(ctx, r),
        Request::Claim(r) => claim::execute(ctx, r),
        Request::Release(r) => release::execute(ctx, r),
        Request::Done(r) => done::execute(ctx, r),
        Request::Heartbeat(r) => heartbeat::execute(ctx, r),
        Request::Cleanup(r) => cleanup::execute(ctx, r),
        Request::Status(_) => status::execute(ctx),
        Request::Align(r) => align::execute(ctx, r),
    }
}
