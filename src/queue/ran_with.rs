//! How a job was last started (its runner and agent command), recorded in the job so that
//! `queue retry` runs it again exactly as it ran, unless the user says otherwise.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::exec::Runner;

/// The runner (`local`, `sandbox` or the template itself), the agent command template and the
/// sandbox's extra read-only paths and passed-through variable names (names only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RanWith {
    pub runner: String,
    pub agent_cmd: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_ro: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
}

impl RanWith {
    /// What a dispatcher with this runner and agent command starts its jobs with.
    pub fn new(runner: &Runner, agent_cmd: &str) -> RanWith {
        let (spec, ro, env) = match runner {
            Runner::Local => ("local".to_string(), Vec::new(), Vec::new()),
            Runner::Sandbox {
                read_only,
                pass_env,
            } => (
                "sandbox".to_string(),
                read_only
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                pass_env.clone(),
            ),
            Runner::Template(t) => (t.clone(), Vec::new(), Vec::new()),
        };
        RanWith {
            runner: spec,
            agent_cmd: agent_cmd.to_string(),
            sandbox_ro: ro,
            pass_env: env,
        }
    }

    /// `local`, `sandbox` or `template` (as recorded in the job's state).
    pub fn name(&self) -> &'static str {
        match self.runner.as_str() {
            "local" => "local",
            "sandbox" => "sandbox",
            _ => "template",
        }
    }

    /// The sandbox's read-only paths as paths.
    pub fn sandbox_ro_paths(&self) -> Vec<PathBuf> {
        self.sandbox_ro.iter().map(PathBuf::from).collect()
    }
}
