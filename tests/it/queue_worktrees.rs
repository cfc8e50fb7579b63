//! Queue jobs in git worktrees (issue 32 §2, docs/queue.md "Jobs in a worktree of a
//! repository"): a job naming `repo` and `branch` runs in `<repo>.worktrees/<branch>`, a
//! dependent starts from its dependency's branch, independent jobs run at once in two
//! worktrees, and a bad manifest is refused with nothing written. Real git, real worktrees, the
//! real binary, and a stand-in agent (sh) that commits in its working directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;
use crate::worktrees::{git, repo};

/// The stand-in agent: records where it ran, commits `$job.txt` in its working directory
/// (the job's worktree), leaves `$job-left.txt` uncommitted, and writes RESULT.md to the
/// workspace's `output/$job/`. With `$CTRL/rendezvous`, it first waits (up to 30 s) until every
/// job named there has started: only jobs running at the same time get past it.
const AGENT: &str = r#"#!/bin/sh
job="$1"
pwd -P > "$CTRL/$job.pwd"
ls > "$CTRL/$job.ls"
env > "$CTRL/$job.env"
touch "$CTRL/$job.started"
if [ -f "$CTRL/rendezvous" ]; then
  for other in $(cat "$CTRL/rendezvous"); do
    n=0
    while [ ! -f "$CTRL/$other.started" ]; do
      n=$((n+1)); [ $n -gt 1500 ] && exit 5
      sleep 0.02
    done
  done
fi
echo "made by $job $(date +%s%N)" > "$job.txt"
git add "$job.txt"
git -c user.email=agent@example.com -c user.name=agent commit -q -m "job $job" || exit 4
echo "left by $job" > "$job-left.txt"
mkdir -p "$CONDUCTOR_QUEUE_OUTPUT"
printf '# %s\n\nCommitted %s.txt.\n' "$job" "$job" > "$CONDUCTOR_QUEUE_OUTPUT/RESULT.md"
"#;

struct W {
    env: TestEnv,
    ctrl: PathBuf,
    agent: PathBuf,
    repo: PathBuf,
}

impl W {
    fn new() -> W {
        let env = TestEnv::new();
        let ctrl = env.dir("ctrl");
        let agent = env.dir("bin").join("agent.sh");
        std::fs::write(&agent, AGENT).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let repo = repo(&env, "app");
        W {
            env,
            ctrl,
            agent,
            repo,
        }
    }

    fn submit(&self, manifest: &Value) -> Run {
        self.env
            .run_stdin(&["--json", "queue", "submit", "-"], &manifest.to_string())
    }

    fn dispatch(&self) -> Run {
        let cmd = format!("sh {} {{job}}", self.agent.display());
        self.env.run_env(
            &["queue", "run", "--agent-cmd", &cmd],
            &[
                ("CTRL", self.ctrl.to_str().unwrap()),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ],
        )
    }

    /// Run the dispatcher and expect every job to complete (showing the jobs' logs if not).
    fn dispatch_ok(&self) {
        let r = self.dispatch();
        if r.code != 0 {
            let mut logs = String::new();
            for ws in std::fs::read_dir(self.env.home.join("queue-logs"))
                .unwrap()
                .flatten()
            {
                for f in std::fs::read_dir(ws.path()).unwrap().flatten() {
                    logs += &format!(
                        "== {}\n{}",
                        f.path().display(),
                        std::fs::read_to_string(f.path()).unwrap_or_default()
                    );
                }
            }
            panic!("{r:?}\n{logs}");
        }
    }

    fn job(&self, id: &str, branch: &str, deps: &[&str]) -> Value {
        json!({"id": id, "prompt": format!("do {id}"), "repo": self.repo, "branch": branch,
               "depends_on": deps})
    }

    fn worktree(&self, branch: &str) -> PathBuf {
        self.repo
            .with_file_name("app.worktrees")
            .join(branch.replace('/', "-"))
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.ctrl.join(name)).unwrap_or_default()
    }
}

fn log(dir: &Path, rev: &str) -> String {
    git(dir, &["log", "--format=%s", rev])
}

#[test]
fn a_dependent_job_starts_from_its_dependencys_branch_and_sees_its_commits() {
    let w = W::new();
    let m = json!({"workspace": "feat", "jobs": [
        w.job("a", "feature/a", &[]),
        w.job("b", "feature/b", &["a"]),
    ]});
    w.submit(&m).code(0);
    w.dispatch_ok();
    // Each ran in its own worktree, in the documented place.
    let (wa, wb) = (w.worktree("feature/a"), w.worktree("feature/b"));
    assert_eq!(w.read("a.pwd").trim(), wa.to_str().unwrap());
    assert_eq!(w.read("b.pwd").trim(), wb.to_str().unwrap());
    // b started from a's branch once a completed: a's commit and the file a left uncommitted
    // (committed by the dispatcher when a completed) are in b's worktree from its start.
    let b_saw = w.read("b.ls");
    assert!(
        b_saw.contains("a.txt") && b_saw.contains("a-left.txt"),
        "{b_saw}"
    );
    assert!(!w.read("a.ls").contains("b.txt"));
    let b_log = log(&w.repo, "feature/b");
    for s in [
        "job a",
        "conductor queue: job feat/a",
        "job b",
        "conductor queue: job feat/b",
    ] {
        assert!(b_log.contains(s), "{s} not in feature/b:\n{b_log}");
    }
    assert!(!log(&w.repo, "feature/a").contains("job b"));
    // The main checkout is untouched; the workspace's output convention still holds.
    assert_eq!(git(&w.repo, &["status", "--porcelain"]), "");
    assert!(!w.repo.join("a.txt").exists());
    let env_b = w.read("b.env");
    assert!(
        env_b.contains(&format!("CONDUCTOR_QUEUE_WORKTREE={}", wb.display())),
        "{env_b}"
    );
    let out = w.env.home.join("workspaces/feat/output/b/RESULT.md");
    assert!(
        std::fs::read_to_string(out)
            .unwrap()
            .contains("Committed b.txt")
    );
    // The worktrees are kept (the branches hold the work), and `show`/`jobs` say where.
    assert!(wa.join("a.txt").is_file() && wb.join("b.txt").is_file());
    let show = w.env.run(&["queue", "show", "feat/b"]);
    show.code(0);
    assert!(
        show.stdout.contains("feature/b (from feature/a)"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains(&wb.display().to_string()),
        "{}",
        show.stdout
    );
    let v = w.env.run(&["--json", "queue", "show", "feat/b"]).json();
    assert_eq!(v["paths"]["worktree"], json!(wb), "{v}");
    assert_eq!(v["job"]["branch"], "feature/b");
    assert_eq!(v["job"]["base"], "feature/a");
    let jobs = w.env.run(&["queue", "jobs", "feat"]);
    assert!(
        jobs.stdout
            .contains(&format!("branch feature/a in {}", wa.display())),
        "{}",
        jobs.stdout
    );
    // The prompt told the agent where it works.
    let prompt = std::fs::read_to_string(w.env.home.join("queue-prompts/feat/b.md")).unwrap();
    assert!(prompt.contains("## Repository"), "{prompt}");
    assert!(
        prompt.contains("on branch `feature/b` (started from `feature/a`)"),
        "{prompt}"
    );
}

#[test]
fn independent_jobs_run_at_the_same_time_in_two_worktrees() {
    let w = W::new();
    // Each job waits until the other has started: only a parallel run completes them both.
    std::fs::write(w.ctrl.join("rendezvous"), "x y").unwrap();
    let m = json!({"workspace": "par", "jobs": [w.job("x", "x", &[]), w.job("y", "y", &[])]});
    w.submit(&m).code(0);
    w.dispatch_ok();
    let (wx, wy) = (w.read("x.pwd"), w.read("y.pwd"));
    assert_eq!(wx.trim(), w.worktree("x").to_str().unwrap());
    assert_eq!(wy.trim(), w.worktree("y").to_str().unwrap());
    // Both started from main, and neither sees the other's work.
    assert!(!log(&w.repo, "x").contains("job y"));
    assert!(!log(&w.repo, "y").contains("job x"));
    assert!(log(&w.repo, "x").contains("init"));
}

#[test]
fn a_rerun_continues_on_the_existing_branch_and_base_is_used_for_a_new_one() {
    let w = W::new();
    git(&w.repo, &["branch", "release", "main"]);
    std::fs::write(w.repo.join("rel.txt"), "r").unwrap();
    git(&w.repo, &["checkout", "-q", "release"]);
    git(&w.repo, &["add", "rel.txt"]);
    git(&w.repo, &["commit", "-q", "-m", "on release"]);
    git(&w.repo, &["checkout", "-q", "main"]);
    let mut j = w.job("a", "fix", &[]);
    j["base"] = json!("release");
    w.submit(&json!({"workspace": "one", "jobs": [j.clone()]}))
        .code(0);
    w.dispatch_ok();
    assert!(log(&w.repo, "fix").contains("on release"));
    // Submitted again (its workspace was archived): the branch and worktree are used as they are.
    w.submit(&json!({"workspace": "two", "jobs": [j]})).code(0);
    w.dispatch_ok();
    let l = log(&w.repo, "fix");
    assert_eq!(l.matches("job a").count(), 2, "{l}");
}

#[test]
fn bad_repository_jobs_are_refused_with_nothing_written() {
    let w = W::new();
    let empty = w.env.dir("empty");
    git(&empty, &["init", "-q", "-b", "main"]);
    let plain = w.env.dir("plain");
    let bare = w.env.dir("bare.git");
    git(&bare, &["init", "-q", "--bare"]);
    let r = w.repo.to_str().unwrap();
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"id": "a", "prompt": "p", "repo": r}),
            "invalid_manifest",
            "names `repo` but no `branch`",
        ),
        (
            json!({"id": "a", "prompt": "p", "branch": "x"}),
            "invalid_manifest",
            "names `branch` but no `repo`",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": plain, "branch": "x"}),
            "not_a_repository",
            "is not a git repository",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": w.env.root.path().join("nowhere"), "branch": "x"}),
            "not_a_repository",
            "is not a git repository",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": empty, "branch": "x"}),
            "no_commits",
            "has no commit",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": bare, "branch": "x"}),
            "bare_repository",
            "bare repository",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": r, "branch": "bad..name"}),
            "invalid_manifest",
            "not a valid git branch name",
        ),
        (
            json!({"id": "a", "prompt": "p", "repo": r, "branch": "x", "base": "nope"}),
            "invalid_manifest",
            "names no commit",
        ),
    ];
    let before = w.env.snapshot();
    for (job, reason, says) in cases {
        let run = w.submit(&json!({"workspace": "bad", "jobs": [job]}));
        run.reason(2, reason);
        assert!(run.stderr.contains(says), "{says}: {run:?}");
        assert!(
            run.stderr.lines().any(|l| l.starts_with("hint: ")),
            "{run:?}"
        );
    }
    // Two jobs on one branch that could run at once.
    let run = w
        .submit(&json!({"workspace": "bad", "jobs": [w.job("a", "x", &[]), w.job("b", "x", &[])]}));
    run.reason(2, "invalid_manifest");
    assert!(
        run.stderr.contains("neither depends on the other"),
        "{run:?}"
    );
    assert_eq!(w.env.snapshot(), before, "a refused submit wrote nothing");
    assert!(!w.env.home.join("workspaces/bad").exists());
    assert_eq!(git(&w.repo, &["branch", "--list", "x"]), "");
    // Ordered jobs on one branch are fine: the later continues in the same worktree.
    w.submit(&json!({"workspace": "ok", "jobs": [w.job("a", "x", &[]), w.job("b", "x", &["a"])]}))
        .code(0);
    w.dispatch_ok();
    let l = log(&w.repo, "x");
    assert!(l.contains("job a") && l.contains("job b"), "{l}");
}

#[test]
fn a_job_with_two_dependencies_in_the_repository_gets_both_branches() {
    let w = W::new();
    let m = json!({"workspace": "two", "jobs": [
        w.job("a", "a", &[]),
        w.job("b", "b", &[]),
        w.job("c", "c", &["a", "b"]),
    ]});
    w.submit(&m).code(0);
    w.dispatch_ok();
    let c_saw = w.read("c.ls");
    assert!(
        c_saw.contains("a.txt") && c_saw.contains("b.txt"),
        "{c_saw}"
    );
    let v = w.env.run(&["--json", "queue", "show", "two/c"]).json();
    assert_eq!(v["job"]["base"], "a", "{v}");
    assert_eq!(v["job"]["merge"], json!(["b"]), "{v}");
}

#[test]
fn the_sandbox_runner_refuses_a_repository_job_before_it_runs() {
    let w = W::new();
    w.submit(&json!({"workspace": "sb", "jobs": [w.job("a", "a", &[])]}))
        .code(0);
    w.env
        .run(&["queue", "run", "--runner", "sandbox", "--agent-cmd", "true"])
        .code(5);
    let v = w.env.run(&["--json", "queue", "show", "sb/a"]).json();
    let why = v["job"]["state"]["reason"].as_str().unwrap_or("");
    assert!(why.contains("not in the sandbox"), "{v}");
    assert_eq!(git(&w.repo, &["branch", "--list", "a"]), "");
}
