//! The augmented prompt, laid out exactly as the design does: the task, the docs, prior work
//! from the dependencies' RESULT.md files, where to write output, and the success criteria.
//! `root` is the workspace as the agent sees it (the workspace directory for the `local`
//! runner, the job's `workdir` inside a sandbox).

use super::Job;

/// The longest part of one dependency's RESULT.md copied into a prompt.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// One completed dependency and its RESULT.md text, if it wrote one.
pub struct Prior {
    pub id: String,
    pub result: Option<String>,
}

/// Build the prompt.
pub fn augmented(job: &Job, root: &str, prior: &[Prior]) -> String {
    let docs = if job.docs.is_empty() {
        "(none)".to_string()
    } else {
        job.docs.join(", ")
    };
    let prior_text = if prior.is_empty() {
        "None: this job has no dependencies.".to_string()
    } else {
        prior
            .iter()
            .map(|p| {
                let body = match &p.result {
                    Some(r) => truncate(r.trim_end()),
                    None => "(it wrote no RESULT.md)".to_string(),
                };
                format!(
                    "### {} (completed; output in {root}/output/{}/)\n{body}",
                    p.id, p.id
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let outcomes = if job.outcomes.is_empty() {
        "- (none given)".to_string()
    } else {
        job.outcomes
            .iter()
            .map(|o| format!("- {o}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "You are working on job \"{id}\".\n\
         \n\
         ## Your Task\n\
         {task}\n\
         \n\
         ## Documentation\n\
         Reference docs are available at {root}/docs/. The following\n\
         collections are loaded: {docs}\n\
         \n\
         ## Prior Work\n\
         {prior_text}\n\
         \n\
         ## Output\n\
         Write all output files to {root}/output/{id}/.\n\
         When done, write a RESULT.md summarizing what you built,\n\
         any files created, and how to use them.\n\
         \n\
         ## Success Criteria\n\
         {outcomes}\n\
         {recording}",
        id = job.id,
        task = job.prompt.trim_end(),
        recording = recording(job),
    ) + &repository(job)
}

/// Where a repository job works: its worktree and branch, and that its commits are its work.
fn repository(job: &Job) -> String {
    let (Some(repo), Some(branch)) = (&job.repo, &job.branch) else {
        return String::new();
    };
    let wt = super::worktree::path_of(job)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let from = match &job.base {
        Some(b) => format!(" (started from `{b}`)"),
        None => String::new(),
    };
    format!(
        "\n## Repository\n\
         You work in a git worktree of {repo} at {wt}, on branch `{branch}`{from}: your\n\
         current directory. Make your changes there and commit them on this branch; what you\n\
         leave uncommitted is committed for you when you exit 0. Jobs that depend on this one\n\
         start from this branch.\n"
    )
}

/// How the agent records its outcome (after the design's sections, so they stay as laid out):
/// the exit status, and the `[x]`/`[ ]` marks `conductor queue results` reads from RESULT.md.
fn recording(job: &Job) -> String {
    let mut t = format!(
        "\n## Recording Your Outcome\n\
         Your exit status is the job's outcome: exit 0 when the task is done (the job is\n\
         `completed` and the jobs that depend on it start), any other status when it failed\n\
         (the job is `failed` and its dependents `blocked`; `conductor queue retry {id}` runs it again).\n",
        id = job.id
    );
    if !job.outcomes.is_empty() {
        t.push_str(
            "In RESULT.md, copy each success criterion on its own line, marked `- [x] CRITERION`\n\
             when it is met or `- [ ] CRITERION` when it is not; `conductor queue results` reports\n\
             these marks (a criterion on no marked line is reported as not reported).\n",
        );
    }
    t
}

fn truncate(s: &str) -> String {
    if s.len() <= MAX_RESULT_BYTES {
        return s.to_string();
    }
    let mut end = MAX_RESULT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... RESULT.md truncated at {MAX_RESULT_BYTES} bytes]",
        &s[..end]
    )
}
