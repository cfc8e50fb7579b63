//! `conductor done [--outcome O] [--files-modified FILE...] [--notes TEXT]`.

use serde_json::json;

use super::{Ctx, Report};
use crate::cli::InstanceArg;
use conductor::error::Result;
use conductor::protocol::landing::Landing;
use conductor::protocol::request::DoneRequest;
use conductor::protocol::sessions::{self, TreeFate};
use conductor::protocol::types::Outcome;

/// Finish the task.
#[derive(Debug, clap::Args)]
pub struct DoneArgs {
    /// How the task ended.
    #[arg(long, value_enum, default_value = "success", value_parser = done_outcome)]
    pub outcome: Outcome,
    /// Files the task changed [default: the files the instance held].
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub files_modified: Option<Vec<String>>,
    /// A note kept in history.jsonl.
    #[arg(long)]
    pub notes: Option<String>,
    #[command(flatten)]
    pub instance: InstanceArg,
}

fn done_outcome(s: &str) -> Result<Outcome, String> {
    match s {
        "success" => Ok(Outcome::Success),
        "abandoned" => Ok(Outcome::Abandoned),
        "conflict" => Ok(Outcome::Conflict),
        _ => Err(format!("`{s}` is not one of success, abandoned, conflict")),
    }
}

impl DoneArgs {
    /// The request these arguments make.
    pub fn into_request(self) -> DoneRequest {
        DoneRequest {
            instance_id: self.instance.id(),
            outcome: Some(self.outcome),
            files_modified: self.files_modified,
            notes: self.notes,
        }
    }
}

/// The task is recorded and its claims released.
pub struct Done {
    pub instance_id: String,
    pub outcome: Outcome,
    pub released: Vec<String>,
    pub worktree: Option<TreeFate>,
    pub landing: Option<Landing>,
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// What is left in a kept worktree, and how to remove it.
fn kept_text(f: &TreeFate) -> String {
    match f {
        TreeFate::Removed { path, branch } => {
            format!("Removed its worktree {path} and branch {branch} (nothing left to land).")
        }
        TreeFate::Kept {
            path,
            branch,
            base,
            ahead,
            dirty,
            why,
        } => {
            let mut left = Vec::new();
            if *ahead > 0 {
                left.push(format!(
                    "{} not merged into {}",
                    plural(*ahead, "commit"),
                    base.as_deref().unwrap_or("the integration branch")
                ));
            }
            if *dirty > 0 {
                left.push(format!("{} uncommitted", plural(*dirty, "file")));
            }
            if let Some(w) = why {
                left.push(w.clone());
            }
            format!(
                "Kept its worktree {path} (branch {branch}): {}. Nothing was deleted. Once its work has landed (or to throw it away): \
                 git worktree remove {path} && git branch -d {branch} (`git worktree remove --force` and `git branch -D` discard what is left)",
                left.join(", ")
            )
        }
    }
}

impl Report for Done {
    fn to_json(&self) -> serde_json::Value {
        let mut v = json!({"status": "ok", "instance_id": self.instance_id, "outcome": self.outcome,
               "released": self.released, "message": "Task complete. All claims released."});
        match &self.worktree {
            Some(TreeFate::Removed { path, branch }) => {
                v["worktree"] = json!({"path": path, "branch": branch, "removed": true});
            }
            Some(
                f @ TreeFate::Kept {
                    path,
                    branch,
                    ahead,
                    dirty,
                    ..
                },
            ) => {
                v["worktree"] = json!({"path": path, "branch": branch, "removed": false,
                    "commits_not_merged": ahead, "uncommitted_files": dirty, "message": kept_text(f)});
            }
            None => {}
        }
        if let Some(l) = &self.landing {
            v["landing"] = json!({"branch": l.branch, "base": l.base,
                "worktree": l.worktree.trim_end_matches('/'), "files": l.files});
        }
        v
    }
    fn to_text(&self) -> String {
        let mut s = format!(
            "Task complete ({}). All claims released ({} file{}). {} is no longer registered.",
            self.outcome.as_str(),
            self.released.len(),
            if self.released.len() == 1 { "" } else { "s" },
            self.instance_id
        );
        if let Some(l) = &self.landing {
            s.push_str(&format!(
                "\nLanding: {} of branch {} {} reserved until it is merged into {} or deleted \
                 (`conductor release --force --reason \"WHY\" FILE` frees one by hand).",
                plural(l.files.len(), "file"),
                l.branch,
                if l.files.len() == 1 { "stays" } else { "stay" },
                l.base
            ));
        }
        if let Some(f) = &self.worktree {
            s.push('\n');
            s.push_str(&kept_text(f));
        }
        s
    }
}

/// Run `done`.
pub fn execute(ctx: &Ctx, req: DoneRequest) -> Result<Box<dyn Report>> {
    let d = sessions::done(&ctx.store, ctx.now, &ctx.caller(), &req)?;
    Ok(Box::new(Done {
        instance_id: d.instance_id,
        outcome: d.outcome,
        released: d.released,
        worktree: d.worktree,
        landing: d.landing,
    }))
}
