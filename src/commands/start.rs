//! `conductor start "TASK" --project NAME --priority P1|P2|P3`: register an instance.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Ctx, Report};
use conductor::error::{Error, Result};
use conductor::protocol::gate::{self, GateInputs, Verdict};
use conductor::protocol::local;
use conductor::protocol::ops::{self, NewInstance};
use conductor::protocol::request::StartRequest;
use conductor::protocol::{Priority, ProjectConfig, Source};
use conductor::schema::Schema;
use conductor::store;

/// Register a task.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "Example:\n  conductor start \"Fix auth bug\" --project pitchello --priority P1\n  export CONDUCTOR_INSTANCE_ID=itm-a1b2c3   # the id it printed"
)]
pub struct StartArgs {
    /// What this session is going to do.
    pub task: String,
    /// Project name [default: the working directory's name].
    #[arg(long)]
    pub project: Option<String>,
    /// Task priority; non-P1 work may be blocked by the sprint focus or north stars.
    #[arg(long, value_enum)]
    pub priority: Priority,
    /// Proceed even if the priority gate blocks, recording this justification and a drift warning.
    #[arg(long = "override", value_name = "WHY")]
    pub override_reason: Option<String>,
    /// Where the session runs [default: detected from CURSOR_SESSION, VSCODE_GIT_IPC_HANDLE,
    /// TERM_PROGRAM=iTerm.app, CLAUDE_COWORK_SESSION, else web].
    #[arg(long, value_enum)]
    pub source: Option<Source>,
    /// The project directory; relative claims resolve against it [default: current directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// The long-lived process this session belongs to (a shell's $$); when it exits on this host,
    /// `cleanup` reaps the instance without waiting for the heartbeat to expire.
    #[arg(long, env = "CONDUCTOR_OWNER_PID", value_name = "PID")]
    pub owner_pid: Option<u32>,
}

impl StartArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> Result<StartRequest> {
        let dir = working_directory(self.dir.as_deref())?;
        let project = match self.project {
            Some(p) => p,
            None => Path::new(&dir)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "root".into()),
        };
        Ok(StartRequest {
            task: self.task,
            project,
            priority: self.priority,
            working_directory: Some(dir),
            override_reason: self.override_reason,
            source: self.source,
            owner_pid: self.owner_pid,
            session_id: None,
        })
    }
}

/// An existing directory, absolute and with symlinks resolved, as a UTF-8 string.
pub fn working_directory(dir: Option<&Path>) -> Result<String> {
    let cwd = conductor::host::current_dir();
    let raw = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => cwd?.join(d),
        None => cwd?,
    };
    let canon = std::fs::canonicalize(&raw).map_err(|e| {
        Error::invalid(
            "invalid_directory",
            format!("working directory {} is not usable: {e}", raw.display()),
        )
    })?;
    if !canon.is_dir() {
        return Err(Error::invalid(
            "invalid_directory",
            format!("working directory {} is not a directory", canon.display()),
        ));
    }
    canon.into_os_string().into_string().map_err(|_| {
        Error::invalid(
            "invalid_directory",
            "the working directory's path is not UTF-8",
        )
    })
}

/// Gather what the priority gate looks at: sprint.json, the north-stars file, and the project's
/// priority source.
pub fn gate_inputs(ctx: &Ctx, working_directory: Option<&str>) -> Result<GateInputs> {
    let config = conductor::config::read(&ctx.store)?;
    let sprint = conductor::protocol::sprint(&ctx.store)?;
    let ns_path = match &config.north_stars_path {
        Some(p) => expand_tilde(p),
        None => std::env::var_os("HOME")
            .map(|h| {
                PathBuf::from(h).join("Developer/digital-self/2-areas/personal/north-stars.md")
            })
            .unwrap_or_default(),
    };
    let north_stars = match std::fs::read_to_string(&ns_path) {
        Ok(text) => Some(gate::north_star_items(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read the north-stars file", &ns_path, e)),
    };
    let project_priorities = match working_directory {
        Some(dir) => project_priorities(Path::new(dir))?,
        None => None,
    };
    Ok(GateInputs {
        sprint,
        north_stars,
        north_stars_path: Some(ns_path.display().to_string()),
        project_priorities,
    })
}

fn expand_tilde(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => PathBuf::from(p),
    }
}

/// The task texts of a project's priority source (`.conductor/config.json` → `priority_source`,
/// `priority_field` like `tasks[].priority`): every string field of each item except the
/// priority itself.
fn project_priorities(dir: &Path) -> Result<Option<Vec<String>>> {
    let cfg_path = dir.join(".conductor/config.json");
    let Some(cfg) = conductor::schema::read_doc::<ProjectConfig>(&cfg_path, Schema::ProjectConfig)?
    else {
        return Ok(None);
    };
    let Some(source) = cfg.priority_source else {
        return Ok(None);
    };
    let src_path = dir.join(&source);
    let Some(bytes) = store::read_bytes(&src_path)? else {
        return Ok(None);
    };
    let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::corrupt(
            &src_path,
            format!("the project's priority source is not valid JSON ({e})"),
        )
    })?;
    let field = cfg
        .priority_field
        .unwrap_or_else(|| "tasks[].priority".into());
    let (array_key, prio_key) = field.split_once("[].").unwrap_or(("tasks", "priority"));
    let items = doc
        .pointer(&format!("/{}", array_key.replace('.', "/")))
        .and_then(|v| v.as_array());
    let texts = items
        .into_iter()
        .flatten()
        .map(|item| match item {
            serde_json::Value::Object(m) => m
                .iter()
                .filter(|(k, _)| k.as_str() != prio_key)
                .filter_map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            serde_json::Value::String(s) => s.clone(),
            _ => String::new(),
        })
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Some(texts))
}

/// The spec's success output.
pub struct Started {
    pub instance_id: String,
    pub drift: Option<String>,
}

impl Report for Started {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "ok", "instance_id": self.instance_id,
               "message": "Registered. Use /conductor claim to lock files before editing."})
    }
    fn to_text(&self) -> String {
        let mut s = format!("Registered as {}\n", self.instance_id);
        if let Some(d) = &self.drift {
            s.push_str(&format!("Drift warning recorded: {d}\n"));
        }
        s.push_str("Next: use /conductor claim <files> to lock files before editing\n");
        s.push_str(&format!(
            "      (in a shell: export CONDUCTOR_INSTANCE_ID={})",
            self.instance_id
        ));
        s
    }
}

/// The spec's `blocked` output (exit 4).
pub struct Blocked {
    pub message: String,
    pub options: Vec<String>,
}

impl Report for Blocked {
    fn to_json(&self) -> serde_json::Value {
        json!({"status": "blocked", "reason": "priority_gate", "message": self.message, "options": self.options})
    }
    fn to_text(&self) -> String {
        let mut s = format!("BLOCKED by the priority gate: {}\nOptions:", self.message);
        for o in &self.options {
            s.push_str(&format!("\n  - {o}"));
        }
        s
    }
    fn exit_code(&self) -> u8 {
        4
    }
}

/// Run `start`.
pub fn execute(ctx: &Ctx, req: StartRequest) -> Result<Box<dyn Report>> {
    let dir = working_directory(req.working_directory.as_deref().map(Path::new))?;
    let inputs = gate_inputs(ctx, Some(&dir))?;
    let verdict = gate::evaluate(&req.task, req.priority, &inputs);
    let drift = match verdict {
        Verdict::Pass => None,
        Verdict::Blocked {
            message,
            options,
            drift,
        } => match &req.override_reason {
            None => {
                let ev = conductor::store::event::NewEvent {
                    event_type: conductor::protocol::events::GATE_BLOCKED,
                    actor: None,
                    target: None,
                    project: Some(req.project.clone()),
                    payload: json!({"task": req.task, "priority": req.priority, "reason": message}),
                };
                ctx.store.append_events(ctx.now, vec![ev])?;
                return Ok(Box::new(Blocked { message, options }));
            }
            Some(_) => Some(drift),
        },
    };
    let source = req
        .source
        .unwrap_or_else(|| local::detect_source(|k| std::env::var(k).ok()));
    let new = NewInstance {
        source,
        project: req.project,
        task: req.task,
        priority: req.priority,
        working_directory: dir,
        override_reason: req.override_reason,
        pid: req.owner_pid,
        host: conductor::host::hostname(),
        session_id: req.session_id,
    };
    let now = ctx.now;
    let recorded = drift.clone();
    // In a Claude Code session its hook already registered an instance and exported its id:
    // `/conductor start` then gives that instance the task rather than registering a second one.
    let session_instance = std::env::var("CONDUCTOR_INSTANCE_ID")
        .ok()
        .filter(|s| !s.is_empty());
    let instance_id = conductor::protocol::transact(&ctx.store, now, |st, fx| {
        if let Some(id) = session_instance.clone()
            && st.instance(&id).is_some_and(|i| i.session_id.is_some())
        {
            ops::retask(st, &id, new.clone(), recorded.clone(), now, fx)?;
            return Ok(id);
        }
        Ok(ops::start(
            st,
            new.clone(),
            recorded.clone(),
            conductor::host::random_hex6,
            now,
            fx,
        ))
    })?;
    Ok(Box::new(Started { instance_id, drift }))
}
