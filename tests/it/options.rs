//! Options no other test touched (issue 38, item 8): each check here fails if its option were
//! ignored (the default would give another answer). `run --override` and `mcp --instance` are
//! in every_reason.rs (the gate passes and the command runs; a server told to act as `bad`
//! refuses with `invalid_instance_id`); `serve --token` is in serve.rs.

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
