//! The agent job queue (issue 14), end to end: the real binary, a temp home, a real stand-in
//! agent script (sh) whose behaviour each test steers through files in a control directory.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Run, TestEnv, wait_until};

/// The stand-in agent. It records `start`/`end` lines in `$CTRL/trace`, saves the prompt it was
/// given, writes RESULT.md, and obeys `$CTRL/<job>.fail` (exit 3), `<job>.sleep` (seconds),
/// `<job>.spawn` (start a background `sleep 300` and record its pid), `<job>.block` (wait until
/// the file is removed).
const AGENT: &str = r#"#!/bin/sh
job="$1"
echo "start $job $(date +%s.%N)" >> "$CTRL/trace"
out="$CONDUCTOR_QUEUE_OUTPUT"
mkdir -p "$out"
cat > "$CTRL/$job.prompt"
env > "$CTRL/$job.env"
echo "agent $job using key ${DD_API_KEY:-none}"
echo "to stderr: ${SLACK_WEBHOOK_SECRET:-none}" >&2
if [ -f "$CTRL/$job.spawn" ]; then
  sleep 300 &
  echo $! > "$CTRL/$job.grandchild"
fi
if [ -f "$CTRL/$job.sleep" ]; then sleep "$(cat "$CTRL/$job.sleep")"; fi
while [ -f "$CTRL/$job.block" ]; do sleep 0.02; done
if [ -f "$CTRL/$job.fail" ]; then echo "end $job fail" >> "$CTRL/trace"; exit 3; fi
printf '# %s\n\nBuilt %s.\n- [x] exists\n' "$job" "$job" > "$out/RESULT.md"
echo "end $job $(date +%s.%N)" >> "$CTRL/trace"
"#;

struct Q {
    env: TestEnv,
    ctrl: PathBuf,
    agent: PathBuf,
}

impl Q {
    fn new() -> Q {
        let env = TestEnv::new();
        let ctrl = env.dir("ctrl");
        let agent = env.dir("bin").join("agent.sh");
        std::fs::write(&agent, AGENT).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        // docpull's cache in $HOME/.docpull, as docpull lays it out.
        let dp = env.root.path().join(".docpull");
        for c in ["datadog", "slack"] {
            std::fs::create_dir_all(dp.join(c)).unwrap();
            std::fs::write(dp.join(c).join("index.md"), format!("# {c} docs\n")).unwrap();
        }
        std::fs::write(
            dp.join("manifest.json"),
            r#"{"version":"1.0","api_url":"x","collections":{"datadog":{"pages":1},"slack":{"pages":1}}}"#,
        )
        .unwrap();
        Q { env, ctrl, agent }
    }

    fn agent_cmd(&self) -> String {
        format!("sh {} {{job}}", self.agent.display())
    }

    fn ctl(&self, name: &str, contents: &str) {
        std::fs::write(self.ctrl.join(name), contents).unwrap();
    }

    fn submit(&self, manifest: &Value) -> Run {
        self.env
            .run_stdin(&["queue", "submit", "-"], &manifest.to_string())
    }

    fn run_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = ["queue", "run", "--agent-cmd"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.push(self.agent_cmd());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    fn dispatch(&self, extra: &[&str], envs: &[(&str, &str)]) -> Run {
        let args = self.run_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut e = vec![("CTRL", self.ctrl.to_str().unwrap())];
        e.extend_from_slice(envs);
        self.env.run_env(&args, &e)
    }

    /// `queue run --runner sandbox` with `script` as the agent (its directory shown read-only
    /// inside the sandbox).
    fn dispatch_sandboxed(&self, script: &Path, envs: &[(&str, &str)]) -> Run {
        let dir = script.parent().unwrap().to_str().unwrap();
        let cmd = format!("sh {}", script.display());
        let args = [
            "queue",
            "run",
            "--runner",
            "sandbox",
            "--sandbox-ro",
            dir,
            "--agent-cmd",
            &cmd,
        ];
        let mut e = vec![("CTRL", self.ctrl.to_str().unwrap())];
        e.extend_from_slice(envs);
        self.env.run_env(&args, &e)
    }

    fn spawn_dispatcher(&self, extra: &[&str], envs: &[(&str, &str)]) -> Child {
        let mut c = self.env.cmd();
        c.args(self.run_args(extra))
            .env("CTRL", &self.ctrl)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in envs {
            c.env(k, v);
        }
        c.spawn().unwrap()
    }

    /// `queue retry ARGS --agent-cmd <stand-in>` (it may run the dispatcher itself).
    fn retry(&self, extra: &[&str]) -> Run {
        let agent = self.agent_cmd();
        let mut args = vec!["queue", "retry"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--agent-cmd", &agent]);
        self.env
            .run_env(&args, &[("CTRL", self.ctrl.to_str().unwrap())])
    }

    /// The pid of the dispatcher that started `job` (from its `CONDUCTOR_QUEUE_RUN`).
    fn started_by(&self, job: &str) -> u32 {
        let env = std::fs::read_to_string(self.ctrl.join(format!("{job}.env"))).unwrap();
        let token = env
            .lines()
            .find_map(|l| l.strip_prefix("CONDUCTOR_QUEUE_RUN="))
            .unwrap();
        token.split(':').next().unwrap().parse().unwrap()
    }

    fn jobs(&self) -> Vec<Value> {
        let r = self.env.run(&["--json", "queue", "jobs", "--all"]);
        r.code(0);
        r.json()["jobs"].as_array().unwrap().clone()
    }

    fn state(&self, id: &str) -> String {
        self.jobs()
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["state"]["state"].as_str().unwrap().to_string())
            .unwrap_or_default()
    }

    fn trace(&self) -> Vec<String> {
        std::fs::read_to_string(self.ctrl.join("trace"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn pos(&self, word: &str, job: &str) -> usize {
        let t = self.trace();
        t.iter()
            .position(|l| l.starts_with(&format!("{word} {job} ")))
            .unwrap_or_else(|| panic!("no `{word} {job}` in trace {t:?}"))
    }
}

fn design_manifest() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/queue/design-manifest.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every regular file under `dir`, recursively, with its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                out.extend(tree(&p));
            } else if t.is_file() && !p.ends_with("queue.lock") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// queue.json and every queue-finished.jsonl line match schemas/queue.schema.json.
#[track_caller]
fn check_queue_files(home: &Path) {
    if let Ok(b) = std::fs::read(home.join("queue.json")) {
        let v: Value = serde_json::from_slice(&b).unwrap();
        if let Err(e) = conductor::queue::validate_doc(&v) {
            panic!("queue.json breaks its schema {e}:\n{v:#}");
        }
    }
    for line in crate::common::read_lines(&home.join("queue-finished.jsonl")) {
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Err(e) = conductor::queue::validate_job(&v) {
            panic!("queue-finished.jsonl line breaks the schema {e}: {line}");
        }
    }
}

/// The pid the fake agent wrote to `path` (`echo $! > FILE`: the file exists a moment before
/// its line does), waiting up to 10 s for it.
fn grandchild_pid(path: &std::path::Path) -> i32 {
    let mut pid = None;
    assert!(
        wait_until(10.0, || {
            pid = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        }),
        "no pid in {}",
        path.display()
    );
    pid.unwrap()
}

fn pid_alive(pid: i32) -> bool {
    // A zombie counts as dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s[s.rfind(')').unwrap() + 2..].starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn issue_14_design_manifest_runs_in_order_in_parallel_with_the_right_prompts_and_secrets() {
    let q = Q::new();
    for j in ["dd-skill", "slack-listener"] {
        q.ctl(&format!("{j}.sleep"), "0.4");
    }
    q.submit(&design_manifest()).code(0);
    let dd = "dd-secret-value-7f3a";
    let sl = "slack-secret-value-91bc";
    let r = q.dispatch(
        &["--parallel", "4"],
        &[("DD_API_KEY", dd), ("SLACK_WEBHOOK_SECRET", sl)],
    );
    r.code(0);
    // The two independent jobs overlap; each dependent starts after its dependencies end.
    assert!(q.pos("start", "slack-listener") < q.pos("end", "dd-skill"));
    assert!(q.pos("start", "dd-skill") < q.pos("end", "slack-listener"));
    assert!(q.pos("end", "dd-skill") < q.pos("start", "test-ui"));
    assert!(q.pos("end", "dd-skill") < q.pos("start", "integration"));
    assert!(q.pos("end", "slack-listener") < q.pos("start", "integration"));
    assert_eq!(q.trace().len(), 8, "each job ran once: {:?}", q.trace());

    // The prompt, exactly as the design lays it out, with prior work from RESULT.md.
    let ws = q.env.home.join("workspaces/dd-skill-20260205");
    let root = ws.display();
    let prompt = std::fs::read_to_string(q.ctrl.join("test-ui.prompt")).unwrap();
    let expected = format!(
        "You are working on job \"test-ui\".\n\
\n\
## Your Task\n\
Create a simple web UI for testing Datadog queries...\n\
\n\
## Documentation\n\
Reference docs are available at {root}/docs/. The following\n\
collections are loaded: datadog\n\
\n\
## Prior Work\n\
### dd-skill (completed; output in {root}/output/dd-skill/)\n\
# dd-skill\n\
\n\
Built dd-skill.\n\
- [x] exists\n\
\n\
## Output\n\
Write all output files to {root}/output/test-ui/.\n\
When done, write a RESULT.md summarizing what you built,\n\
any files created, and how to use them.\n\
\n\
## Success Criteria\n\
- A standalone HTML+JS or Streamlit app at /workspace/output/test-ui/\n\
- Uses the dd_skill module from /workspace/shared/\n\
- Has a text input for queries and displays results\n\
\n\
## Recording Your Outcome\n\
Your exit status is the job's outcome: exit 0 when the task is done (the job is\n\
`completed` and the jobs that depend on it start), any other status when it failed\n\
(the job is `failed` and its dependents `blocked`; `conductor queue retry test-ui` runs it again).\n\
In RESULT.md, copy each success criterion on its own line, marked `- [x] CRITERION`\n\
when it is met or `- [ ] CRITERION` when it is not; `conductor queue results` reports\n\
these marks (a criterion on no marked line is reported as not reported).\n"
    );
    assert_eq!(prompt, expected);
    assert!(ws.join("docs/datadog/index.md").is_file());
    assert!(ws.join("docs/slack/index.md").is_file());

    // Each job saw its own secrets and nobody else's.
    let envof = |j: &str| std::fs::read_to_string(q.ctrl.join(format!("{j}.env"))).unwrap();
    assert!(envof("dd-skill").contains(&format!("DD_API_KEY={dd}")));
    assert!(!envof("dd-skill").contains(sl));
    assert!(!envof("slack-listener").contains(dd));
    assert!(envof("integration").contains(dd) && envof("integration").contains(sl));

    // The agent printed its secrets: the log has their names instead.
    let log = std::fs::read_to_string(
        q.env
            .home
            .join("queue-logs/dd-skill-20260205/integration.log"),
    )
    .unwrap();
    assert!(
        log.contains("using key [secret DD_API_KEY]")
            && log.contains("[secret SLACK_WEBHOOK_SECRET]"),
        "{log}"
    );
    // No secret value in any file under the home, nor in any output.
    for (p, bytes) in tree(&q.env.home) {
        let t = String::from_utf8_lossy(&bytes);
        assert!(
            !t.contains(dd) && !t.contains(sl),
            "secret in {}",
            p.display()
        );
    }
    for args in [
        vec!["queue", "jobs", "--all"],
        vec!["--json", "queue", "jobs", "--all"],
        vec!["queue", "show", "integration"],
        vec!["queue", "results", "dd-skill-20260205"],
        vec!["events", "--limit", "1000"],
    ] {
        let out = q.env.run(&args);
        for s in [&out.stdout, &out.stderr, &r.stdout, &r.stderr] {
            assert!(
                !s.contains(dd) && !s.contains(sl),
                "secret in output of {args:?}"
            );
        }
    }

    // Everything completed and the workspace was archived out of queue.json.
    assert!(q.jobs().iter().all(|j| j["state"]["state"] == "completed"));
    let live: Value =
        serde_json::from_slice(&std::fs::read(q.env.home.join("queue.json")).unwrap()).unwrap();
    assert_eq!(live["jobs"], json!([]));
    check_queue_files(&q.env.home);
    let results = q.env.run(&["queue", "results", "dd-skill-20260205"]);
    results.code(0);
    assert!(
        results.stdout.contains("## test-ui (completed)"),
        "{}",
        results.stdout
    );
}

#[test]
fn issue_14_bad_manifests_are_refused_and_change_nothing() {
    let q = Q::new();
    q.submit(&json!({"workspace": "w0", "jobs": [{"id": "ok", "prompt": "p"}]}))
        .code(0);
    let before = tree(&q.env.home);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}]}),
            "duplicate job id `a`",
        ),
        (
            json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p", "depends_on": ["nope"]}]}),
            "unknown job `nope`",
        ),
        (
            json!({"workspace": "w", "jobs": [
                {"id": "a", "prompt": "p", "depends_on": ["b"]},
                {"id": "b", "prompt": "p", "depends_on": ["a"]}]}),
            "cycle: a -> b -> a",
        ),
        (
            json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p", "docs": ["stripe"]}]}),
            "available: datadog, slack",
        ),
        (
            json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p", "secrets": {"K": "hunter2"}}]}),
            "names",
        ),
        (json!({"workspace": "w", "jobs": [{"id": "a"}]}), "prompt"),
        (
            json!({"workspace": "w0", "jobs": [{"id": "ok", "prompt": "p"}]}),
            "already in workspace `w0`",
        ),
    ];
    for (m, want) in cases {
        let r = q.submit(&m);
        r.code(2);
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(want),
            "{want}: {r:?}"
        );
        assert!(!r.stderr.contains("hunter2"));
        assert_eq!(tree(&q.env.home), before, "files changed by {m}");
    }
    // --docs-dir replaces ~/.docpull, and the refusal names what it has.
    let dd = q.env.dir("mydocs/stripe");
    std::fs::write(dd.join("a.md"), "x").unwrap();
    let m = json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p", "docs": ["datadog"]}]});
    let r = q.env.run_stdin(
        &[
            "queue",
            "submit",
            "-",
            "--docs-dir",
            q.env.root.path().join("mydocs").to_str().unwrap(),
        ],
        &m.to_string(),
    );
    r.code(2);
    assert!(r.stderr.contains("available: stripe"), "{r:?}");
}

#[test]
fn issue_14_a_failure_blocks_exactly_its_dependents_and_retry_recovers() {
    let q = Q::new();
    q.ctl("a.fail", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a"]},
        {"id": "c", "prompt": "p", "depends_on": ["b"]},
        {"id": "x", "prompt": "p"},
        {"id": "y", "prompt": "p", "depends_on": ["x"]}]}))
        .code(0);
    let r = q.dispatch(&[], &[]);
    r.code(5);
    assert_eq!(q.state("a"), "failed");
    assert_eq!(q.state("b"), "blocked");
    assert_eq!(q.state("c"), "blocked");
    assert_eq!(q.state("x"), "completed");
    assert_eq!(q.state("y"), "completed");
    check_queue_files(&q.env.home);
    let show = q.env.run(&["queue", "show", "c"]);
    assert!(
        show.stdout.contains("dependency `b` is blocked"),
        "{show:?}"
    );
    let r = q.env.run(&["queue", "retry", "b"]);
    r.code(2);
    assert!(r.stderr.contains("retry `w/a` instead"), "{r:?}");

    std::fs::remove_file(q.ctrl.join("a.fail")).unwrap();
    // No dispatcher is running: retry runs a, and b and c that it unblocks, itself.
    let r = q.retry(&["a"]);
    r.code(0);
    assert!(r.stdout.contains("w/b, w/c"), "{r:?}");
    assert!(r.stdout.contains("3 completed"), "{r:?}");
    for j in ["a", "b", "c", "x", "y"] {
        assert_eq!(q.state(j), "completed", "{j}");
    }
    // x and y ran once; a twice.
    let t = q.trace();
    assert_eq!(t.iter().filter(|l| l.starts_with("start x ")).count(), 1);
    assert_eq!(t.iter().filter(|l| l.starts_with("start a ")).count(), 2);
}

#[test]
fn issue_14_a_timeout_kills_the_whole_process_tree() {
    let q = Q::new();
    q.ctl("slow.spawn", "");
    q.ctl("slow.sleep", "300");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "slow", "prompt": "p", "timeout_minutes": 0.01},
        {"id": "after", "prompt": "p", "depends_on": ["slow"]}]}))
        .code(0);
    let t0 = std::time::Instant::now();
    let r = q.dispatch(&[], &[]);
    r.code(5);
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(q.state("slow"), "timed_out");
    assert_eq!(q.state("after"), "blocked");
    check_queue_files(&q.env.home);
    let gc = grandchild_pid(&q.ctrl.join("slow.grandchild"));
    assert!(
        wait_until(5.0, || !pid_alive(gc)),
        "grandchild {gc} survived"
    );
}

#[test]
fn issue_14_a_missing_secret_blocks_the_job_naming_it() {
    let q = Q::new();
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p", "secrets": ["NOPE_NOT_SET"]},
        {"id": "b", "prompt": "p", "depends_on": ["a"]}]}))
        .code(0);
    let r = q.dispatch(&[], &[]);
    r.code(5);
    assert_eq!(q.state("a"), "blocked");
    assert_eq!(q.state("b"), "blocked");
    let show = q.env.run(&["queue", "show", "a"]);
    assert!(
        show.stdout.contains("missing secret NOPE_NOT_SET"),
        "{show:?}"
    );
    assert!(q.trace().is_empty());
    // From a 0600 secrets file, after a retry, it runs; a 0644 one is refused.
    let f = q.env.root.path().join("secrets.env");
    std::fs::write(&f, "NOPE_NOT_SET=from-file-42\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let fs = f.to_str().unwrap();
    // retry refuses it before changing anything; --no-run only puts the job back in line.
    let r = q.retry(&["a", "--secrets-file", fs]);
    r.code(2);
    assert!(r.stderr.contains("chmod 600"), "{r:?}");
    assert_eq!(q.state("a"), "blocked");
    q.env.run(&["queue", "retry", "--no-run", "a"]).code(0);
    let r = q.dispatch(&["--secrets-file", fs], &[]);
    r.code(2);
    assert!(r.stderr.contains("chmod 600"), "{r:?}");
    assert!(!r.stderr.contains("from-file-42"));
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    q.dispatch(&["--secrets-file", fs], &[]).code(0);
    let env_a = std::fs::read_to_string(q.ctrl.join("a.env")).unwrap();
    assert!(env_a.contains("NOPE_NOT_SET=from-file-42"));
}

#[test]
fn issue_14_cancel_stops_running_jobs() {
    let q = Q::new();
    q.ctl("long.spawn", "");
    q.ctl("long.block", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "long", "prompt": "p"},
        {"id": "next", "prompt": "p", "depends_on": ["long"]}]}))
        .code(0);
    let mut d = q.spawn_dispatcher(&[], &[]);
    assert!(wait_until(10.0, || q.ctrl.join("long.grandchild").exists()));
    let gc = grandchild_pid(&q.ctrl.join("long.grandchild"));
    let r = q.env.run(&["queue", "cancel", "w"]);
    r.code(0);
    assert!(r.stdout.contains("Cancelled 2 job(s)"), "{r:?}");
    let status = d.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "nothing failed: cancelled is not a failure"
    );
    assert!(wait_until(5.0, || !pid_alive(gc)));
    assert_eq!(q.state("long"), "cancelled");
    assert_eq!(q.state("next"), "cancelled");
}

#[test]
fn issue_14_a_sigkilled_dispatcher_restarted_never_reruns_a_completed_job() {
    let q = Q::new();
    q.ctl("b.block", "");
    q.ctl("b.spawn", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a"]},
        {"id": "c", "prompt": "p", "depends_on": ["b"]}]}))
        .code(0);
    let mut d = q.spawn_dispatcher(&[], &[]);
    assert!(wait_until(10.0, || q.ctrl.join("b.grandchild").exists()));
    // b's start is committed a moment after it was launched.
    assert!(wait_until(10.0, || q.state("b") == "running"));
    unsafe {
        libc::kill(d.id() as i32, libc::SIGKILL);
    }
    d.wait().unwrap();
    assert_eq!(q.state("a"), "completed");
    assert_eq!(q.state("b"), "running");
    check_queue_files(&q.env.home);
    let gc = grandchild_pid(&q.ctrl.join("b.grandchild"));
    std::fs::remove_file(q.ctrl.join("b.grandchild")).unwrap();
    std::fs::remove_file(q.ctrl.join("b.spawn")).unwrap();
    std::fs::remove_file(q.ctrl.join("b.block")).unwrap();
    let r = q.dispatch(&[], &[]);
    r.code(0);
    assert!(r.stderr.contains("interrupted"), "{r:?}");
    // The orphaned attempt was killed (with its tree), b ran again, a never did.
    assert!(wait_until(5.0, || !pid_alive(gc)), "old attempt survived");
    let t = q.trace();
    assert_eq!(
        t.iter().filter(|l| l.starts_with("start a ")).count(),
        1,
        "{t:?}"
    );
    assert_eq!(
        t.iter().filter(|l| l.starts_with("start b ")).count(),
        2,
        "{t:?}"
    );
    assert_eq!(q.state("c"), "completed");
    let b = q.jobs().into_iter().find(|j| j["id"] == "b").unwrap();
    assert_eq!(b["state"]["attempts"], 2);
}

#[test]
fn issue_14_follow_starts_later_submissions_and_retries_without_polling() {
    let q = Q::new();
    let mut d = q.spawn_dispatcher(&["--follow"], &[]);
    // Give it time to start watching, then submit: the journal wakes it.
    assert!(wait_until(10.0, || q
        .env
        .home
        .join("events.jsonl")
        .exists()
        || {
            q.submit(&json!({"workspace": "w", "jobs": [{"id": "late", "prompt": "p"}]}));
            true
        }));
    assert!(wait_until(10.0, || q.state("late") == "completed"));
    // A failure, then a retry from another process: the journal wakes it again.
    q.ctl("again.fail", "");
    q.submit(&json!({"workspace": "w2", "jobs": [{"id": "again", "prompt": "p"}]}))
        .code(0);
    assert!(wait_until(10.0, || q.state("again") == "failed"));
    std::fs::remove_file(q.ctrl.join("again.fail")).unwrap();
    // The running dispatcher takes it (retry does not run a second one, and needs no agent).
    let r = q.env.run(&["queue", "retry", "again"]);
    r.code(0);
    assert!(
        r.stdout.contains("running dispatcher starts it now"),
        "{r:?}"
    );
    assert!(wait_until(10.0, || q.state("again") == "completed"));
    assert_eq!(q.started_by("again"), d.id());
    unsafe {
        libc::kill(d.id() as i32, libc::SIGTERM);
    }
    d.wait().unwrap();
}

#[test]
fn issue_14_design_manifest_matches_the_schema_and_help_teaches() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/queue/design-manifest.json"),
    )
    .unwrap();
    let m = conductor::queue::manifest::parse(&text, "design").unwrap();
    assert_eq!(m.jobs.len(), 4);
    let q = Q::new();
    let h = q.env.run(&["queue", "run", "--help"]);
    h.code(0);
    for w in [
        "--parallel",
        "sandbox",
        "{cmd}",
        "{prompt_file}",
        "Exit codes",
        "5  the queue",
    ] {
        assert!(h.stdout.contains(w), "run --help lacks {w}");
    }
    let r = q.env.run(&["queue", "run", "--runner", "docker"]);
    r.code(2);
    assert!(r.stderr.contains("{cmd}"));
}

#[test]
fn issue_14_template_runner_wraps_the_agent_command() {
    let q = Q::new();
    q.submit(&json!({"workspace": "w", "jobs": [{"id": "t", "prompt": "p"}]}))
        .code(0);
    let wrap = q.env.dir("bin").join("wrap.sh");
    std::fs::write(
        &wrap,
        "#!/bin/sh\necho wrapped >> \"$CTRL/trace.wrap\"\nexec sh -c \"$1\"\n",
    )
    .unwrap();
    let runner = format!("sh {} {{cmd}}", wrap.display());
    q.dispatch(&["--runner", &runner], &[]).code(0);
    assert_eq!(q.state("t"), "completed");
    assert!(q.ctrl.join("trace.wrap").exists());
}

#[test]
fn issue_14_plan_runs_the_planner_and_submits_with_yes() {
    let q = Q::new();
    let planner = q.env.dir("bin").join("planner.sh");
    std::fs::write(
        &planner,
        "#!/bin/sh\ncat > \"$CTRL/planner.in\"\necho 'Here is the plan:'\ncat <<'EOF'\n{\"workspace\":\"pw\",\"jobs\":[{\"id\":\"one\",\"prompt\":\"do it\",\"docs\":[\"slack\"]}]}\nEOF\n",
    )
    .unwrap();
    let cmd = format!("sh {}", planner.display());
    let ctrl = q.ctrl.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "queue",
            "plan",
            "build a slack bot",
            "--docs",
            "slack",
            "--planner",
            &cmd,
        ];
        args.extend_from_slice(extra);
        q.env.run_env(&args, &[("CTRL", ctrl)])
    };
    let r = plan(&[]);
    r.code(0);
    assert!(r.stdout.contains("\"workspace\": \"pw\""), "{r:?}");
    assert!(q.jobs().is_empty(), "not submitted without --yes");
    let input = std::fs::read_to_string(q.ctrl.join("planner.in")).unwrap();
    assert!(input.contains("build a slack bot") && input.contains("datadog, slack"));
    plan(&["--yes"]).code(0);
    assert_eq!(q.state("one"), "ready");
}

/// Whether bubblewrap can create namespaces here; if not, the test fails naming bwrap (or, with
/// `CONDUCTOR_TEST_SKIP=bwrap`, is skipped and logged).
pub(crate) fn bwrap_works() -> bool {
    let o = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-all",
            "--die-with-parent",
            "true",
        ])
        .stdin(Stdio::null())
        .output();
    let why = match o {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "bwrap cannot create namespaces here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("bwrap cannot be run: {e}"),
    };
    crate::common::missing("bwrap", &why);
    false
}

#[test]
fn issue_14_a_sandboxed_job_sees_only_its_workspace_docs_and_secret() {
    if !bwrap_works() {
        return;
    }
    let q = Q::new();
    // A file outside the workspace (next to the home) and one in the home itself.
    let outside = q.env.root.path().join("outside.txt");
    std::fs::write(&outside, "top secret").unwrap();
    let probe = q.env.dir("sbin").join("probe.sh");
    std::fs::write(
        &probe,
        format!(
            r#"#!/bin/sh
cd "$CONDUCTOR_QUEUE_WORKSPACE"
o="$CONDUCTOR_QUEUE_OUTPUT"; mkdir -p "$o"
cat > "$o/prompt.txt"
# Both jobs look while both run (the other's secret is in a live process), through gate files
# in the workspace they share (at most 30 s each).
both() {{ i=0; until [ -e "shared/$1-a" ] && [ -e "shared/$1-b" ] || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done; }}
touch "shared/up-$CONDUCTOR_QUEUE_JOB"; both up
{{ [ -e shared/up-a ] && [ -e shared/up-b ] && echo both-up
   cat {outside} && echo LEAK-outside; cat {home}/queue.json && echo LEAK-home; ls {root} | grep -q outside.txt && echo LEAK-root
   cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -q other-secret-222 && echo LEAK-other
   env | grep -q SECRET_B && echo LEAK-env
   [ "$SECRET_A" = "mine-111" ] && echo own-secret-ok
   cat docs/slack/index.md >/dev/null && echo docs-ok
   touch docs/slack/x 2>/dev/null && echo LEAK-docs-writable
   echo hi > shared/from-$CONDUCTOR_QUEUE_JOB && echo shared-ok
   pwd; }} > "$o/report.txt" 2>/dev/null
touch "shared/probed-$CONDUCTOR_QUEUE_JOB"; both probed
echo done > "$o/RESULT.md"
"#,
            outside = outside.display(),
            home = q.env.home.display(),
            root = q.env.root.path().display(),
        ),
    )
    .unwrap();
    q.submit(&json!({"workspace": "sb", "jobs": [
        {"id": "a", "prompt": "p", "docs": ["slack"], "secrets": ["SECRET_A"]},
        {"id": "b", "prompt": "p", "secrets": ["SECRET_B"]}]}))
        .code(0);
    let r = q.dispatch_sandboxed(
        &probe,
        &[("SECRET_A", "mine-111"), ("SECRET_B", "other-secret-222")],
    );
    r.code(0);
    let rep =
        std::fs::read_to_string(q.env.home.join("workspaces/sb/output/a/report.txt")).unwrap();
    assert!(rep.contains("both-up"), "a looked while b ran: {rep}");
    assert!(!rep.contains("LEAK"), "{rep}");
    assert!(
        rep.contains("own-secret-ok") && rep.contains("docs-ok") && rep.contains("shared-ok"),
        "{rep}"
    );
    assert!(rep.contains("/workspace\n"), "{rep}");
    let prompt =
        std::fs::read_to_string(q.env.home.join("workspaces/sb/output/a/prompt.txt")).unwrap();
    assert!(
        prompt.contains("Write all output files to /workspace/output/a/."),
        "{prompt}"
    );
}

#[test]
fn issue_14_retry_no_run_only_marks_and_a_busy_dispatcher_picks_the_retry_up() {
    let q = Q::new();
    q.ctl("a.fail", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a"]}]}))
        .code(0);
    q.dispatch(&[], &[]).code(5);
    assert_eq!(q.state("b"), "blocked");
    std::fs::remove_file(q.ctrl.join("a.fail")).unwrap();

    // --no-run: back in line, nothing started.
    let before = q.trace().len();
    let r = q.retry(&["a", "--no-run"]);
    r.code(0);
    assert!(
        r.stdout.contains("Start it with `conductor queue run`"),
        "{r:?}"
    );
    assert_eq!(q.trace().len(), before);
    assert_eq!(q.state("a"), "ready");
    assert_eq!(q.state("b"), "queued");
    q.dispatch(&[], &[]).code(0);
    assert_eq!(q.state("b"), "completed");

    // A dispatcher (no --follow) busy with another job: a retry meanwhile is its work too.
    q.ctl("c.fail", "");
    q.submit(&json!({"workspace": "v", "jobs": [{"id": "c", "prompt": "p"}]}))
        .code(0);
    q.dispatch(&[], &[]).code(5);
    std::fs::remove_file(q.ctrl.join("c.fail")).unwrap();
    q.ctl("hold.block", "");
    q.submit(&json!({"workspace": "u", "jobs": [{"id": "hold", "prompt": "p"}]}))
        .code(0);
    let mut d = q.spawn_dispatcher(&[], &[]);
    assert!(wait_until(10.0, || q.state("hold") == "running"));
    let r = q.retry(&["c"]);
    r.code(0);
    assert!(
        r.stdout.contains("running dispatcher starts it now"),
        "{r:?}"
    );
    assert!(wait_until(10.0, || q.state("c") == "completed"));
    assert_eq!(q.started_by("c"), d.id());
    std::fs::remove_file(q.ctrl.join("hold.block")).unwrap();
    assert!(d.wait().unwrap().success());

    // Bad options change nothing.
    let before = std::fs::read(q.env.home.join("queue.json")).unwrap();
    let r = q.env.run(&["queue", "retry", "c", "--runner", "nope"]);
    r.code(2);
    assert!(r.error_and_hint(), "{r:?}");
    assert_eq!(
        std::fs::read(q.env.home.join("queue.json")).unwrap(),
        before
    );
}

/// One dispatcher leads a home's queue (it launches jobs before their start is committed): a
/// second one says so, waits, and takes over; no job ever starts twice.
#[test]
fn issue_14_a_second_dispatcher_waits_for_the_lead_and_no_job_runs_twice() {
    let q = Q::new();
    q.ctl("a.block", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a"]},
        {"id": "c", "prompt": "p"}]}))
        .code(0);
    let mut lead = q.spawn_dispatcher(&["--parallel", "1"], &[]);
    assert!(wait_until(10.0, || q.state("a") == "running"));
    let mut second = q.env.cmd();
    second
        .args(q.run_args(&["--parallel", "4"]))
        .env("CTRL", &q.ctrl)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut second = second.spawn().unwrap();
    // It waits for the lead (blocked on the lead lock: /proc/locks says so): c stays ready
    // although it has four free slots.
    assert!(
        wait_until(20.0, || crate::common::lock_waiter(
            &q.env.home.join("queue-lead.lock"),
            second.id()
        )),
        "the second dispatcher waits for the lead"
    );
    assert_eq!(q.state("c"), "ready");
    assert!(second.try_wait().unwrap().is_none());
    std::fs::remove_file(q.ctrl.join("a.block")).unwrap();
    assert!(lead.wait().unwrap().success());
    let out = second.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another dispatcher runs this home's queue") && err.contains("pid"),
        "{err}"
    );
    let t = q.trace();
    for job in ["a", "b", "c"] {
        assert_eq!(
            t.iter()
                .filter(|l| l.starts_with(&format!("start {job} ")))
                .count(),
            1,
            "{t:?}"
        );
    }
    assert!(q.jobs().is_empty() || q.jobs().iter().all(|j| j["state"]["state"] == "completed"));
}

/// A dispatcher that dies between launching a job and committing its start leaves a process
/// recorded nowhere but carrying its token: the next dispatcher kills it (then runs the job).
#[test]
fn issue_14_a_restarted_dispatcher_kills_what_the_dead_one_launched_unrecorded() {
    let q = Q::new();
    q.ctl("a.block", "");
    q.submit(&json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p"}]}))
        .code(0);
    let mut d = q.spawn_dispatcher(&[], &[]);
    assert!(wait_until(10.0, || q.state("a") == "running"));
    let a = q.jobs().into_iter().find(|j| j["id"] == "a").unwrap();
    let token = a["state"]["dispatcher"].as_str().unwrap().to_string();
    // What it would have launched for a job whose start it had not committed yet.
    let mut stray = std::process::Command::new("sleep")
        .arg("300")
        .env("CONDUCTOR_QUEUE_RUN", format!("{token}/w/unrecorded/1"))
        .process_group(0)
        .spawn()
        .unwrap();
    unsafe {
        libc::kill(d.id() as i32, libc::SIGKILL);
    }
    d.wait().unwrap();
    std::fs::remove_file(q.ctrl.join("a.block")).unwrap();
    let r = q.dispatch(&[], &[]);
    r.code(0);
    assert!(r.stderr.contains("interrupted"), "{r:?}");
    assert!(
        wait_until(5.0, || stray.try_wait().unwrap().is_some()),
        "the unrecorded launch survived"
    );
    assert_eq!(q.state("a"), "completed");
}

/// A lead that dies before committing anything (not even a start) leaves processes recorded
/// nowhere; the lock file names it, and the next lead kills them before anything else.
#[test]
fn issue_14_the_next_lead_kills_what_a_dead_lead_launched_before_any_commit() {
    let q = Q::new();
    let mut d = q.spawn_dispatcher(&["--follow"], &[]);
    let lock = q.env.home.join("queue-lead.lock");
    assert!(wait_until(10.0, || std::fs::read_to_string(&lock)
        .is_ok_and(|t| t.contains(':'))));
    let token = std::fs::read_to_string(&lock).unwrap().trim().to_string();
    let mut stray = std::process::Command::new("sleep")
        .arg("300")
        .env("CONDUCTOR_QUEUE_RUN", format!("{token}/w/never-recorded/1"))
        .process_group(0)
        .spawn()
        .unwrap();
    unsafe {
        libc::kill(d.id() as i32, libc::SIGKILL);
    }
    d.wait().unwrap();
    q.dispatch(&[], &[]).code(0);
    assert!(
        wait_until(5.0, || stray.try_wait().unwrap().is_some()),
        "the dead lead's launch survived"
    );
}

/// A run with nothing to start still reports what is left: failed work is not an empty queue.
#[test]
fn issue_14_a_run_that_starts_nothing_reports_the_failed_and_blocked_jobs_left() {
    let q = Q::new();
    q.ctl("a.fail", "");
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a"]}]}))
        .code(0);
    q.dispatch(&[], &[]).code(5);
    let again = q.dispatch(&["--json"], &[]);
    again.code(5);
    assert!(
        again.stdout.contains("\"failed\"") && again.stdout.contains("\"blocked\""),
        "{again:?}"
    );
}

/// SIGKILL the dispatcher at random moments of a run of short jobs (a chain and a fan-out),
/// restarting it each time, `rounds` times over (a fresh workspace each round, eight kills
/// each): the journal never shows a job started again after its completion was committed,
/// every job completes exactly once, and no process of a killed dispatcher's jobs outlives the
/// run.
fn sigkill_the_dispatcher_at_random_moments(rounds: usize) {
    let q = Q::new();
    let agent = q.env.dir("bin").join("short.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\necho $$ >> \"$CTRL/pids\"\nsleep 0.02\necho \"end $1\" >> \"$CTRL/trace\"\n",
    )
    .unwrap();
    let cmd = format!("sh {} {{job}}", agent.display());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let run = || {
        let mut c = q.env.cmd();
        c.args(["queue", "run", "--parallel", "3", "--agent-cmd", &cmd])
            .env("CTRL", &q.ctrl)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    for round in 0..rounds {
        let mut jobs: Vec<Value> = (0..10)
            .map(|i| {
                let deps: Vec<String> = if i == 0 {
                    vec![]
                } else {
                    vec![format!("c{}", i - 1)]
                };
                json!({"id": format!("c{i}"), "prompt": "p", "depends_on": deps})
            })
            .collect();
        jobs.extend((0..8).map(|i| json!({"id": format!("f{i}"), "prompt": "p"})));
        q.submit(&json!({"workspace": format!("w{round}"), "jobs": jobs}))
            .code(0);
        for _ in 0..8 {
            let mut d = run().spawn().unwrap();
            std::thread::sleep(Duration::from_millis(5 + next() % 60));
            unsafe {
                libc::kill(d.id() as i32, libc::SIGKILL);
            }
            d.wait().unwrap();
            check_queue_files(&q.env.home);
        }
        let last = run().output().unwrap();
        assert!(last.status.success(), "seed {seed}: {last:?}");
    }
    // Every job completed, each completion recorded once, nothing started after it.
    let mut completed: std::collections::BTreeMap<String, usize> = Default::default();
    let mut interrupted = 0;
    for line in crate::common::read_lines(&q.env.home.join("events.jsonl")) {
        let ev: Value = serde_json::from_str(&line).unwrap();
        let (ty, target) = (
            ev["event_type"].as_str().unwrap_or(""),
            ev["target"].as_str().unwrap_or("").to_string(),
        );
        match ty {
            "queue.job.completed" => *completed.entry(target).or_default() += 1,
            "queue.job.interrupted" => interrupted += 1,
            "queue.job.started" => assert!(
                !completed.contains_key(&target),
                "seed {seed}: {target} started again after its completion was committed"
            ),
            _ => {}
        }
    }
    eprintln!("seed {seed}: {interrupted} interrupted runs over {rounds} round(s)");
    assert_eq!(completed.len(), 18 * rounds, "seed {seed}: {completed:?}");
    assert!(
        completed.values().all(|n| *n == 1),
        "seed {seed}: {completed:?}"
    );
    // Whatever a killed dispatcher left running was killed by the next one.
    let pids: Vec<i32> = std::fs::read_to_string(q.ctrl.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(
        wait_until(5.0, || pids.iter().all(|p| !pid_alive(*p))),
        "seed {seed}: a job's process outlived the run"
    );
    check_queue_files(&q.env.home);
}

#[test]
fn issue_14_sigkilled_dispatchers_never_rerun_a_committed_completion() {
    sigkill_the_dispatcher_at_random_moments(2);
}

/// The long variant: `cargo test --test it -- --ignored sigkilled_dispatchers`.
#[test]
#[ignore]
fn issue_14_sigkilled_dispatchers_never_rerun_a_committed_completion_long() {
    sigkill_the_dispatcher_at_random_moments(40);
}

/// A job with secrets whose agent leaves a process outside its group holding the output pipe:
/// its end is recorded (completed, not timed out) once the log copy is given up on, and a
/// timeout that passes meanwhile does not apply to it.
#[test]
fn issue_14_a_finished_secret_job_with_an_escaped_child_completes() {
    let q = Q::new();
    let agent = q.env.dir("bin").join("escape.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\nsetsid sleep 30 &\necho $! > \"$CTRL/escaped\"\nsleep 0.5\necho done\n",
    )
    .unwrap();
    q.submit(&json!({"workspace": "w", "jobs": [
        {"id": "s", "prompt": "p", "secrets": ["ESC_KEY"], "timeout_minutes": 0.02}]}))
        .code(0);
    let cmd = format!("sh {}", agent.display());
    let r = q.env.run_env(
        &["queue", "run", "--agent-cmd", &cmd],
        &[
            ("CTRL", q.ctrl.to_str().unwrap()),
            ("ESC_KEY", "k-value-3391"),
        ],
    );
    r.code(0);
    let escaped: i32 = std::fs::read_to_string(q.ctrl.join("escaped"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe {
        libc::kill(escaped, libc::SIGKILL);
    }
    assert!(
        r.stderr.contains("completed") || r.stdout.contains("completed"),
        "{r:?}"
    );
    assert!(
        !r.stdout.contains("timed_out") && !r.stderr.contains("timed out"),
        "{r:?}"
    );
}

/// A sandboxed job cannot reach outside through links it leaves in its workspace: the next
/// job's prompt never carries a host file a `RESULT.md` link points at, a `docs` link is not
/// mounted into the next sandbox, and prompts live outside the workspace (nothing to redirect).
#[test]
fn issue_14_links_left_in_a_workspace_lead_nowhere() {
    if !bwrap_works() {
        return;
    }
    let q = Q::new();
    let victim = q.env.root.path().join("victim.txt");
    std::fs::write(&victim, "host-secret-content-7731").unwrap();
    let victim_dir = q.env.dir("victim-dir");
    std::fs::write(victim_dir.join("host-file-5521"), "x").unwrap();
    let probe = q.env.dir("sbin2").join("linker.sh");
    std::fs::write(
        &probe,
        format!(
            r#"#!/bin/sh
o="$CONDUCTOR_QUEUE_OUTPUT"; mkdir -p "$o"
if [ "$CONDUCTOR_QUEUE_JOB" = a ]; then
  ln -s {victim} "$o/RESULT.md"
  true
elif [ "$CONDUCTOR_QUEUE_JOB" = a2 ]; then
  cd / && rm -rf "$o" && ln -s {victim_dir} "$o"
else
  cat > "$o/prompt-seen.txt"
  ls "$CONDUCTOR_QUEUE_WORKSPACE/docs/" > "$o/docs-seen.txt" 2>&1
  echo done > "$o/RESULT.md"
fi
"#,
            victim = victim.display(),
            victim_dir = victim_dir.display(),
        ),
    )
    .unwrap();
    // a2 replaces its whole output directory with a link to a host directory holding a
    // RESULT.md of the user's.
    std::fs::write(victim_dir.join("RESULT.md"), "host-result-content-4410").unwrap();
    q.submit(&json!({"workspace": "ln", "jobs": [
        {"id": "a", "prompt": "p", "docs": ["slack"]},
        {"id": "a2", "prompt": "p"},
        {"id": "b", "prompt": "p", "depends_on": ["a", "a2"]}]}))
        .code(0);
    // docs is a read-only mount inside a sandbox; a job run without one (or anything else)
    // can turn it into a link.
    let docs = q.env.home.join("workspaces/ln/docs");
    std::fs::remove_dir_all(&docs).unwrap();
    std::os::unix::fs::symlink(&victim_dir, &docs).unwrap();
    let r = q.dispatch_sandboxed(&probe, &[]);
    r.code(0);
    let prompt = std::fs::read_to_string(q.env.home.join("queue-prompts/ln/b.md")).unwrap();
    assert!(!prompt.contains("host-secret-content-7731"), "{prompt}");
    assert!(!prompt.contains("host-result-content-4410"), "{prompt}");
    assert!(
        std::fs::symlink_metadata(q.env.home.join("workspaces/ln/output/a2"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "a2 left its output directory as a link"
    );
    let out = q.env.home.join("workspaces/ln/output/b");
    let seen = std::fs::read_to_string(out.join("prompt-seen.txt")).unwrap();
    assert_eq!(seen, prompt, "b read its prompt on stdin");
    let docs = std::fs::read_to_string(out.join("docs-seen.txt")).unwrap();
    assert!(!docs.contains("host-file-5521"), "{docs}");
    let results = q.env.run(&["queue", "results", "ln"]);
    assert!(
        !results.stdout.contains("host-secret-content-7731")
            && !results.stdout.contains("host-result-content-4410"),
        "{results:?}"
    );
    let shown = q.env.run(&["queue", "show", "a2"]);
    assert!(
        !shown.stdout.contains("host-result-content-4410"),
        "{shown:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "host-secret-content-7731"
    );
}
