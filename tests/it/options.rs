//! Options no other test touched (issue 38, item 8): each check here fails if its option were
//! ignored (the default would give another answer, or the command would not end in time).
//! `run --override` and `mcp --instance` are in every_reason.rs (the gate passes and the command
//! runs; a server told to act as `bad` refuses with `invalid_instance_id`); `serve --token` is
//! in serve.rs.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

#[test]
fn run_source_names_the_instance() {
    let env = TestEnv::new();
    let out = env.root.path().join("id");
    let script = format!("echo $CONDUCTOR_INSTANCE_ID > {}", out.display());
    env.run(&[
        "run",
        "--source",
        "cur",
        "--task",
        "t",
        "--priority",
        "P1",
        "--",
        "sh",
        "-c",
        &script,
    ])
    .code(0);
    let id = std::fs::read_to_string(&out).unwrap();
    assert!(id.starts_with("cur-"), "{id}");
    assert_eq!(env.history().last().unwrap()["id"], id.trim());
}

#[test]
fn post_and_dm_priority_set_the_inbox_items_priority() {
    let env = TestEnv::new();
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    // The defaults are normal (post) and high (dm): ask for others.
    env.run(&[
        "post",
        "ops",
        "@scout look",
        "--as",
        "ana",
        "--priority",
        "low",
    ])
    .code(0);
    env.run(&[
        "dm",
        "scout",
        "a word",
        "--as",
        "ana",
        "--priority",
        "normal",
    ])
    .code(0);
    let items = env.run(&["--json", "inbox", "--agent", "scout"]).json()["items"].clone();
    let by = |t: &str| -> Value {
        items
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["trigger_type"] == t)
            .unwrap_or_else(|| panic!("no {t} item: {items}"))["priority"]
            .clone()
    };
    assert_eq!(by("mention"), "low");
    assert_eq!(by("dm"), "normal");
}

#[test]
fn events_and_watch_instance_keep_only_that_instances_events() {
    let env = TestEnv::new();
    let a = env.start("first", "P1");
    let b = env.start("second", "P1");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    let page = env.run(&["--json", "events", "--instance", &b]).json();
    let items = page["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for e in items {
        assert!(e["actor"] == b.as_str() || e["target"] == b.as_str(), "{e}");
    }
    // `watch` from the start: the first event it prints is b's (a's came first in the journal).
    let mut child = env
        .cmd()
        .args(["watch", "--json", "--after", "0", "--instance", &b])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().ok();
    child.wait().ok();
    let e: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(e["actor"], b.as_str(), "{e}");
}

#[test]
fn queue_add_workspace_agent_model_and_timeout_land_in_the_job() {
    let env = TestEnv::new();
    let r = env.run(&[
        "--json",
        "queue",
        "add",
        "--workspace",
        "ws",
        "--agent",
        "reviewer",
        "--model",
        "small-1",
        "--timeout",
        "7",
        "--",
        "do it",
    ]);
    r.code(0);
    assert_eq!(r.json()["workspace"], "ws");
    let job = env.run(&["--json", "queue", "show", "ws/job-1"]).json();
    let job = if job["job"].is_object() {
        job["job"].clone()
    } else {
        job
    };
    assert_eq!(job["agent"], "reviewer", "{job}");
    assert_eq!(job["model"], "small-1", "{job}");
    assert_eq!(job["timeout_minutes"].as_f64(), Some(7.0), "{job}");
    // Without them: another workspace, no agent or model, another timeout.
    env.run(&["queue", "add", "--", "plain"]).code(0);
    let plain = env
        .run(&["--json", "queue", "show", "default/job-1"])
        .json();
    let plain = if plain["job"].is_object() {
        plain["job"].clone()
    } else {
        plain
    };
    assert_ne!(plain["timeout_minutes"].as_f64(), Some(7.0), "{plain}");
    assert_ne!(plain["agent"], "reviewer", "{plain}");
}

#[test]
fn agent_run_duration_seconds_and_backoff_max_ms() {
    let env = TestEnv::new();
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    env.run(&["post", "ops", "@scout fail please", "--as", "ana"])
        .code(0);
    // A failing command, a first back-off of 100 s capped at 30 ms: two cycles end at once.
    let mut child = env
        .cmd()
        .args([
            "agent",
            "run",
            "scout",
            "--exec",
            "exit 1",
            "--backoff-ms",
            "100000",
            "--backoff-max-ms",
            "30",
            "--max-cycles",
            "2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ended = wait_until(60.0, || child.try_wait().unwrap().is_some());
    if !ended {
        child.kill().ok();
    }
    assert!(ended, "the back-off was capped at 30 ms");
    let log = env.run(&["--json", "agent", "log", "scout"]);
    let delays: Vec<i64> = log
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "backoff")
        .map(|e| e["detail"]["delay_ms"].as_i64().unwrap())
        .collect();
    assert!(!delays.is_empty(), "{log:?}");
    assert!(delays.iter().all(|d| *d == 30), "{delays:?}");

    // --duration-seconds: the loop stops by itself (with nothing to do, it would wait forever).
    let t0b = Instant::now();
    let mut child = env
        .cmd()
        .args([
            "agent",
            "run",
            "scout",
            "--mark-seen",
            "--duration-seconds",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ended = wait_until(60.0, || child.try_wait().unwrap().is_some());
    if !ended {
        child.kill().ok();
    }
    assert!(ended, "the loop stopped after its duration");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(
        t0b.elapsed() >= Duration::from_secs(1),
        "it ran for its second"
    );
}

#[test]
fn workflow_show_log_and_guard_edit() {
    let env = TestEnv::new();
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("one.json"),
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A"}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(env.project.join(".pi")).unwrap();
    std::fs::write(
        env.project.join(".pi/damage-control-rules.yaml"),
        "readOnlyPaths:\n  - docs/\n",
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "one", "t"]);
    r.code(0);
    let id = r.json()["session"].as_str().unwrap().to_string();
    for cmd in ["pause", "resume", "pause"] {
        env.run(&["workflow", cmd, &id]).code(0);
    }
    let checkpoints = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["workflow", "show", id.as_str()];
        full.extend(args);
        let r = env.run(&full);
        r.code(0);
        r.stdout
            .lines()
            .skip_while(|l| !l.starts_with("Latest checkpoints:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        checkpoints(&[]).len(),
        4,
        "started, paused, resumed, paused"
    );
    let last = checkpoints(&["--log", "1"]);
    assert_eq!(last.len(), 1, "{last:?}");
    assert!(last[0].contains("paused"), "{last:?}");

    // A read-only path may be read, not edited.
    let worker = [("CONDUCTOR_WORKFLOW_SESSION", id.as_str())];
    let r = env.run_env(&["workflow", "guard", "--edit", "docs/a.md"], &worker);
    r.code(4);
    assert!(r.stdout.contains("read-only"), "{r:?}");
    env.run_env(&["workflow", "guard", "--read", "docs/a.md"], &worker)
        .code(0);
    env.run_env(&["workflow", "guard", "--edit", "src/a.rs"], &worker)
        .code(0);
}

/// A stand-in agent for the queue: records `start JOB` and `end JOB` in `$CTRL/trace`, waits while
/// `$CTRL/JOB.block` exists, fails (exit 3) while `$CTRL/JOB.fail` exists.
const QUEUE_AGENT: &str = r#"#!/bin/sh
job="$1"
echo "start $job" >> "$CTRL/trace"
while [ -f "$CTRL/$job.block" ]; do sleep 0.02; done
if [ -f "$CTRL/$job.fail" ]; then echo "end $job fail" >> "$CTRL/trace"; exit 3; fi
mkdir -p "$CONDUCTOR_QUEUE_OUTPUT"
printf '# %s\n' "$job" > "$CONDUCTOR_QUEUE_OUTPUT/RESULT.md"
echo "end $job" >> "$CTRL/trace"
"#;

#[test]
fn queue_retry_parallel_bounds_the_jobs_the_retry_runs_at_once() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let ctrl = env.dir("ctrl");
    let agent = env.dir("bin").join("agent.sh");
    std::fs::write(&agent, QUEUE_AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = format!("sh {} {{job}}", agent.display());
    let vars = [("CTRL", ctrl.to_str().unwrap())];
    let trace = || read_lines(&ctrl.join("trace"));
    env.run_stdin(
        &["queue", "submit", "-"],
        r#"{"workspace": "w", "jobs": [{"id": "a", "prompt": "p"},
            {"id": "b", "prompt": "p", "depends_on": ["a"]},
            {"id": "c", "prompt": "p", "depends_on": ["a"]}]}"#,
    )
    .code(0);
    std::fs::write(ctrl.join("a.fail"), "").unwrap();
    env.run_env(&["queue", "run", "--agent-cmd", &cmd], &vars)
        .code(5);
    std::fs::remove_file(ctrl.join("a.fail")).unwrap();
    std::fs::write(ctrl.join("b.block"), "").unwrap();
    std::fs::write(ctrl.join("c.block"), "").unwrap();
    // The default would run b and c together once a completes; --parallel 1 runs one of them.
    let mut retry = env
        .cmd()
        .args([
            "queue",
            "retry",
            "a",
            "--parallel",
            "1",
            "--agent-cmd",
            &cmd,
        ])
        .env("CTRL", &ctrl)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = |t: &[String]| {
        t.iter()
            .find(|l| *l == "start b" || *l == "start c")
            .map(|l| l[6..].to_string())
    };
    assert!(
        wait_until(60.0, || first(&trace()).is_some()),
        "{:?}",
        trace()
    );
    let x = first(&trace()).unwrap();
    let y = if x == "b" { "c" } else { "b" };
    // The dispatcher has started what it was going to start and waits.
    assert!(
        wait_until(60.0, || parked(retry.id())),
        "the retry waits on its running job"
    );
    assert!(
        !trace().contains(&format!("start {y}")),
        "one job at a time: {:?}",
        trace()
    );
    std::fs::remove_file(ctrl.join(format!("{x}.block"))).unwrap();
    assert!(
        wait_until(60.0, || trace().contains(&format!("start {y}"))),
        "{:?}",
        trace()
    );
    std::fs::remove_file(ctrl.join(format!("{y}.block"))).unwrap();
    assert!(wait_until(60.0, || retry.try_wait().unwrap().is_some()));
    assert_eq!(retry.wait().unwrap().code(), Some(0));
    let t = trace();
    let at = |l: &str| t.iter().position(|x| x == l).unwrap();
    assert!(at(&format!("end {x}")) < at(&format!("start {y}")), "{t:?}");
}

#[test]
fn queue_retry_sandbox_ro_and_pass_env_reach_the_sandboxed_job() {
    if !crate::queue::bwrap_works() {
        return;
    }
    let env = TestEnv::new();
    // The agent lives outside the job's workspace: only --sandbox-ro shows it in the sandbox.
    let tools = env.dir("tools");
    let agent = tools.join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\n[ -n \"$PASSED_VAR\" ] || { echo no PASSED_VAR; exit 3; }\n\
         mkdir -p \"$CONDUCTOR_QUEUE_OUTPUT\"\n\
         printf '# r\\n\\ngot %s\\n' \"$PASSED_VAR\" > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\"\n",
    )
    .unwrap();
    let cmd = format!("sh {}", agent.display());
    env.run(&["queue", "add", "--id", "j", "--", "hello"])
        .code(0);
    // Locally, without the variable: it fails.
    env.run(&["queue", "run", "--agent-cmd", &cmd]).code(5);
    let retry = |extra: &[&str]| {
        let mut args = vec!["queue", "retry", "j", "--runner", "sandbox"];
        args.extend(extra);
        env.run_env(&args, &[("PASSED_VAR", "sekrit")])
    };
    // Each option alone is not enough: the other one is missing.
    retry(&["--sandbox-ro", tools.to_str().unwrap()]).code(5);
    retry(&["--pass-env", "PASSED_VAR"]).code(5);
    retry(&[
        "--sandbox-ro",
        tools.to_str().unwrap(),
        "--pass-env",
        "PASSED_VAR",
    ])
    .code(0);
    let result = env.home_file("workspaces/default/output/j/RESULT.md");
    assert!(
        std::fs::read_to_string(&result)
            .unwrap()
            .contains("got sekrit"),
        "{}",
        result.display()
    );
}

#[test]
fn workflow_run_exit_grace_stops_a_worker_that_lingers_after_its_transition() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("one.json"),
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A"}}}"#,
    )
    .unwrap();
    let script = env.root.path().join("worker.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{} workflow transition done --summary finished || exit 9\nsleep 300\n",
            bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = env.run(&["--json", "workflow", "start", "one", "t"]);
    let id = r.json()["session"].as_str().unwrap().to_string();
    let agent = format!("sh {} {{prompt_file}}", script.display());
    // The default grace is 60 s: with 1 s the supervisor ends long before that.
    let t0 = Instant::now();
    let mut sup = env
        .cmd()
        .args([
            "workflow",
            "run",
            &id,
            "--agent-cmd",
            &agent,
            "--exit-grace",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ended = wait_until(40.0, || sup.try_wait().unwrap().is_some());
    if !ended {
        sup.kill().ok();
    }
    assert!(ended, "the lingering worker was stopped after its grace");
    assert_eq!(sup.wait().unwrap().code(), Some(0));
    assert!(t0.elapsed() < Duration::from_secs(40));
    let s = env.run(&["--json", "workflow", "show", &id]).json();
    assert_eq!(s["session"]["status"], "done", "{s}");
    // Stopped (SIGTERM), not ended by itself.
    assert_eq!(s["session"]["runs"][0]["exit_code"], 143, "{s}");
}

/// `agent run --heartbeat`: where no file system watcher can be made (a user namespace allowed
/// no inotify instance) and polling is forbidden, the loop looks at the journal every
/// --heartbeat seconds: in 4 s, a cycle a second instead of the default's one every 5 s.
#[test]
fn agent_run_heartbeat_paces_the_loop_without_a_watcher() {
    let env = TestEnv::new();
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    let c = env.cmd();
    let script = "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$@\"";
    let mut u = std::process::Command::new("unshare");
    u.args(["-rU", "sh", "-c", script, "sh"])
        .arg(bin())
        .args([
            "agent",
            "run",
            "scout",
            "--mark-seen",
            "--heartbeat",
            "1",
            "--duration-seconds",
            "4",
        ])
        .env_clear()
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("CONDUCTOR_WATCH_POLL", "never")
        .current_dir(&env.project);
    let r = env.run_cmd(&mut u);
    if r.stderr.starts_with("unshare:") || r.stderr.starts_with("sh:") {
        return missing(
            "userns",
            &format!(
                "cannot limit inotify in a user namespace: {}",
                r.stderr.trim()
            ),
        );
    }
    r.code(0);
    assert!(r.stderr.contains("every 1 s"), "{r:?}");
    let run = env.run(&["--json", "agent", "status", "scout"]).json()["run"].clone();
    assert_eq!(run["wake_source"], "heartbeat", "{run}");
    assert!(
        run["cycles"].as_u64().unwrap() >= 2,
        "more than the one cycle a 5 s heartbeat makes in 4 s: {run}"
    );
}
