//! `conductor prompt`: `[itm-a1b2c3 · 3 claimed]` for the shell prompt. Reads `status.json`
//! without the lock and without schema validation (a prompt must be fast and never fail): any
//! problem prints nothing.

use crate::cli::{GlobalArgs, InstanceArg};
use crate::output::Output;
use conductor::error::Result;
use conductor::protocol::State;
use conductor::store::Home;

/// Print a prompt segment.
#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    #[command(flatten)]
    pub instance: InstanceArg,
}

/// Run `prompt`: prints the segment, or nothing when the instance is unknown.
pub fn run(global: &GlobalArgs, args: PromptArgs, _out: &Output) -> Result<u8> {
    let Some(id) = args.instance.id().filter(|s| !s.is_empty()) else {
        return Ok(0);
    };
    let dir = match global.home.clone() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => match Home::default_dir() {
            Ok(d) => d,
            Err(_) => return Ok(0),
        },
    };
    // A shared store from CONDUCTOR_STORE (set, even empty, it wins) or config.json.
    let shared = match std::env::var("CONDUCTOR_STORE") {
        Ok(s) => !s.is_empty(),
        Err(_) => std::fs::read(dir.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["store"].as_str().is_some_and(|s| !s.is_empty())),
    };
    let state = if shared {
        // A shared store: one request, and a prompt never waits long for it.
        if std::env::var_os("CONDUCTOR_STORE_TIMEOUT").is_none() {
            // SAFETY: no other thread runs yet.
            unsafe { std::env::set_var("CONDUCTOR_STORE_TIMEOUT", "0.3") };
        }
        let Ok(store) = conductor::store::Store::open(dir, std::time::Duration::ZERO) else {
            return Ok(0);
        };
        let Ok(state) =
            conductor::protocol::read_unvalidated(&store, conductor::time::Timestamp::now())
        else {
            return Ok(0);
        };
        state
    } else {
        let Ok(bytes) = std::fs::read(dir.join("status.json")) else {
            return Ok(0);
        };
        let Ok(state) = serde_json::from_slice::<State>(&bytes) else {
            return Ok(0);
        };
        state
    };
    if let Some(seg) = conductor::hooks::prompt_segment(&state, &id) {
        super::completions::write_stdout(format!("{seg}\n").as_bytes())?;
    }
    Ok(0)
}
