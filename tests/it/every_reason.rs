//! Every documented `reason` (issue 38, item 5), produced by a real scenario and checked as
//! agents see it: the exit code and the `reason` of the `--json` error object, and, for a
//! refusal (exit 2), that the home is byte-identical. Grouped by domain so one test covers
//! several reasons; `tests/it/reasons.rs` fails when a documented reason has no test here or
//! elsewhere that asserts it.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// Run with extra environment and `input` on stdin.
fn run_stdin_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)], input: &str) -> Run {
    let mut c = env.cmd();
    c.args(args)
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn conductor");
    child.stdin.take().unwrap().write_all(input.as_bytes()).ok();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Assert that no file of the home changed since `before` (naming the ones that did).
#[track_caller]
fn unchanged(env: &TestEnv, before: &[(String, Vec<u8>)], what: &str) {
    // Lock files hold no state: taking a lock may create one.
    let state = |v: &[(String, Vec<u8>)]| -> Vec<(String, Vec<u8>)> {
        v.iter()
            .filter(|(n, _)| !n.ends_with(".lock"))
            .cloned()
            .collect()
    };
    let after = env.snapshot();
    if state(&after) != state(before) {
        let names = |v: &[(String, Vec<u8>)]| -> Vec<String> {
            v.iter()
                .map(|(n, b)| format!("{n} ({} bytes)", b.len()))
                .collect()
        };
        panic!(
            "{what} changed the home: before {:?}, after {:?}",
            names(before),
            names(&after)
        );
    }
}

/// Run `args`, expect the refusal `reason` (exit 2) and the home unchanged.
#[track_caller]
fn refused_reason(env: &TestEnv, name: &str, args: &[&str]) -> Run {
    let before = env.snapshot();
    let r = env.run(args);
    r.reason(2, name);
    unchanged(env, &before, &format!("{args:?}"));
    r
}

// ---------------------------------------------------------------- protocol

#[test]
fn protocol_reasons_and_the_exits_of_run() {
    let env = TestEnv::new();
    let holder = env.start("holds a.rs", "P1");
    env.run(&["claim", "--instance", &holder, "src/a.rs"])
        .code(0);

    // `op` names its instance through CONDUCTOR_INSTANCE_ID: one that is no id at all.
    let before = env.snapshot();
    let r = run_stdin_env(
        &env,
        &["op"],
        &[("CONDUCTOR_INSTANCE_ID", "bad")],
        r#"{"operation":"claim","files":["src/b.rs"]}"#,
    );
    r.reason(2, "invalid_instance_id");
    unchanged(&env, &before, "the refusals");

    // An operation `op` does not know; claims conductor cannot honour.
    let before = env.snapshot();
    env.run(&["op", r#"{"operation":"explode"}"#])
        .reason(2, "unknown_operation");
    env.run(&["--json", "claim", "--instance", &holder, "/"])
        .reason(2, "claim_too_wide");
    env.run(&["--json", "claim", "--instance", &holder, "src/a**"])
        .reason(2, "invalid_glob");
    unchanged(&env, &before, "the refusals");

    // A program that cannot start: exit 1, and the instance `run` registered is finished.
    let r = env.run(&[
        "--json",
        "run",
        "--task",
        "t",
        "--priority",
        "P1",
        "--",
        "/nonexistent/program",
    ]);
    r.reason(1, "spawn_failed");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/program")
    );
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 1);
    assert_eq!(env.history().last().unwrap()["outcome"], "abandoned");

    // `overlaps` with no git to run.
    let empty = env.dir("empty-path");
    let r = env.run_env(
        &["--json", "overlaps"],
        &[("PATH", empty.to_str().unwrap())],
    );
    r.reason(1, "git_failed");

    // `run --claim` of a held file: exit 3, the command never runs, recorded as a conflict.
    let marker = env.root.path().join("ran");
    let touch = ["touch", marker.to_str().unwrap()];
    let mut args = vec![
        "--json",
        "run",
        "--task",
        "t2",
        "--priority",
        "P1",
        "--claim",
        "src/a.rs",
        "--",
    ];
    args.extend(touch);
    let r = env.run(&args);
    r.code(3);
    assert_eq!(r.json()["status"], "conflict", "{r:?}");
    assert_eq!(r.json()["conflicts"][0]["held_by"], holder.as_str());
    assert!(!marker.exists(), "the command did not run");
    assert_eq!(env.history().last().unwrap()["outcome"], "conflict");
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 1);

    // The priority gate: exit 4, nothing registered, nothing run.
    env.write_home(
        "sprint.json",
        r#"{"sprint_name":"w","focus":"P1","explicitly_deferred":[]}"#,
    );
    let before = env.snapshot();
    let mut args = vec!["--json", "run", "--task", "t3", "--priority", "P2", "--"];
    args.extend(touch);
    let r = env.run(&args);
    r.code(4);
    assert_eq!(r.json()["status"], "blocked", "{r:?}");
    assert_eq!(r.json()["reason"], "priority_gate");
    assert!(!marker.exists(), "the command did not run");
    // Nothing registered: the protocol's files are as they were (the journal records the
    // blocked task, as for `start`).
    for f in ["status.json", "history.jsonl"] {
        let now = env.snapshot().into_iter().find(|(n, _)| n == f);
        assert!(
            now == before.iter().find(|(n, _)| n == f).cloned(),
            "{f} changed"
        );
    }
    // --override passes it, and the command runs.
    let mut args = vec![
        "--json",
        "run",
        "--task",
        "t3",
        "--priority",
        "P2",
        "--override",
        "asked for",
        "--",
    ];
    args.extend(touch);
    env.run(&args).code(0);
    assert!(marker.exists());
}

// ---------------------------------------------------------------- agents

#[test]
fn agents_reasons() {
    let env = TestEnv::new();
    env.run(&[
        "agent", "register", "scout", "--handle", "@scout", "--watch", "ops",
    ])
    .code(0);
    env.run(&["agent", "register", "lint", "--watch", "ops"])
        .code(0);
    let post = env.run(&["--json", "post", "ops", "@scout hello", "--as", "ana"]);
    post.code(0);
    let msg = post.json()["message"]["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = env.run(&["--json", "inbox", "--agent", "scout"]);
    let item = listed.json()["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // One byte over the limit of a post.
    let before = env.snapshot();
    let big = "a".repeat(16 * 1024 + 1);
    env.run_stdin(&["--json", "post", "ops", "-", "--as", "ana"], &big)
        .reason(2, "post_too_large");
    unchanged(&env, &before, "the refusals");
    refused_reason(
        &env,
        "unknown_agent",
        &["--json", "dm", "nobody", "hi", "--as", "ana"],
    );
    refused_reason(&env, "unknown_channel", &["--json", "messages", "nochan"]);
    refused_reason(
        &env,
        "not_author",
        &["--json", "edit", &msg, "x", "--as", "bob"],
    );
    refused_reason(
        &env,
        "message_not_found",
        &["--json", "edit", "msg-999999", "x", "--as", "ana"],
    );
    refused_reason(
        &env,
        "unknown_item",
        &["--json", "inbox", "seen", "inb-nope"],
    );
    refused_reason(
        &env,
        "unknown_mention",
        &["--json", "mentions", "ack", "men-nope"],
    );
    refused_reason(
        &env,
        "unknown_key",
        &["--json", "agent", "key", "revoke", "key-nope"],
    );
    refused_reason(
        &env,
        "completion_ref_required",
        &["--json", "inbox", "complete", &item, "--agent", "scout"],
    );
    refused_reason(
        &env,
        "invalid_ref",
        &[
            "--json", "inbox", "complete", &item, "--agent", "scout", "--ref", "nope",
        ],
    );

    // An artifact that is not text.
    let bad = env.root.path().join("artifact.bin");
    std::fs::write(&bad, b"\xff\xfe not utf-8").unwrap();
    refused_reason(
        &env,
        "invalid_artifact",
        &["--json", "artifact", "validate", bad.to_str().unwrap()],
    );

    // scout claims the item: lint may neither release nor finish it.
    env.run(&["--json", "inbox", "claim", &item, "--agent", "scout"])
        .code(0);
    refused_reason(
        &env,
        "not_holder",
        &["--json", "inbox", "release", &item, "--agent", "lint"],
    );
    let r = refused_reason(
        &env,
        "claim_held",
        &[
            "--json", "inbox", "complete", &item, "--agent", "lint", "--ref", "a=b",
        ],
    );
    assert!(
        r.json()["message"].as_str().unwrap().contains("`scout`"),
        "{r:?}"
    );

    // Finished, it is no longer actionable.
    env.run(&[
        "--json", "inbox", "complete", &item, "--agent", "scout", "--ref", "a=b",
    ])
    .code(0);
    refused_reason(&env, "not_actionable", &["--json", "inbox", "seen", &item]);
    refused_reason(
        &env,
        "not_actionable",
        &[
            "--json", "inbox", "complete", &item, "--agent", "scout", "--ref", "a=b",
        ],
    );
}

// ---------------------------------------------------------------- workflows

fn template(env: &TestEnv, name: &str, text: &str) {
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

const ONE: &str = r#"{"name":"One","initial":"a","states":{"a":{"persona":"A","next":["b"]},"b":{"persona":"B"}}}"#;

fn start_session(env: &TestEnv) -> String {
    let r = env.run(&["--json", "workflow", "start", "one", "t"]);
    r.code(0);
    r.json()["session"].as_str().unwrap().to_string()
}

#[test]
fn workflow_reasons() {
    let env = TestEnv::new();
    template(&env, "one", ONE);
    template(
        &env,
        "broken",
        r#"{"name":"X","initial":"plan","states":{"plan":{"persona":"A","next":["biuld"]}}}"#,
    );
    let id = start_session(&env);
    let other = start_session(&env);
    refused_reason(
        &env,
        "unknown_template",
        &["--json", "workflow", "start", "missing", "t"],
    );
    refused_reason(
        &env,
        "invalid_template",
        &["--json", "workflow", "start", "broken", "t"],
    );
    refused_reason(
        &env,
        "unknown_session",
        &["--json", "workflow", "show", "wf-nope"],
    );
    let r = refused_reason(
        &env,
        "ambiguous_session",
        &["--json", "workflow", "show", "wf-"],
    );
    let m = r.json()["message"].as_str().unwrap().to_string();
    assert!(m.contains(&id) && m.contains(&other), "{m}");
    refused_reason(
        &env,
        "invalid_workflow_operation",
        &["--json", "workflow", "approve", &id],
    );

    // The worker's tools, as a worker of session `id` in state `a` calls them.
    let before = env.snapshot();
    let worker = [("CONDUCTOR_WORKFLOW_SESSION", id.as_str())];
    env.run_env(
        &["--json", "workflow", "transition", "done", "--summary", "x"],
        &worker,
    )
    .reason(2, "invalid_transition");
    env.run_env(
        &["--json", "workflow", "transition", "b", "--summary", "x"],
        &[
            ("CONDUCTOR_WORKFLOW_SESSION", &id),
            ("CONDUCTOR_WORKFLOW_STATE", "b"),
        ],
    )
    .reason(2, "invalid_workflow_operation");
    unchanged(&env, &before, "the refusals");

    // A persona file with bad front matter stops `start`.
    let agents = env.project.join(".pi/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("A.md"), "---\nname: [\n---\nbody").unwrap();
    refused_reason(
        &env,
        "invalid_persona",
        &["--json", "workflow", "start", "one", "t"],
    );
}

#[test]
fn a_second_supervisor_of_a_session_is_already_supervised() {
    let env = TestEnv::new();
    template(&env, "one", ONE);
    let gate = env.root.path().join("go");
    let ready = env.root.path().join("ready");
    let script = env.root.path().join("worker.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch {}\nwhile [ ! -e {} ]; do sleep 0.05; done\n",
            ready.display(),
            gate.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent = format!("sh {} {{prompt_file}}", script.display());
    let id = start_session(&env);
    let mut first = env.cmd();
    first
        .args(["workflow", "run", &id, "--agent-cmd", &agent])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut first = first.spawn().unwrap();
    assert!(wait_until(60.0, || ready.exists()), "the worker started");
    let before = env.snapshot();
    env.run(&["--json", "workflow", "run", &id])
        .reason(2, "already_supervised");
    unchanged(&env, &before, "the refusals");
    // The first supervisor goes on: abort ends it.
    env.run(&["workflow", "abort", &id]).code(0);
    std::fs::write(&gate, "").unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = first.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the supervisor ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(10), "aborted");
}

// ---------------------------------------------------------------- queue

fn submit(env: &TestEnv, manifest: &Value) -> Run {
    env.run_stdin(&["--json", "queue", "submit", "-"], &manifest.to_string())
}

#[test]
fn queue_reasons() {
    let env = TestEnv::new();
    submit(
        &env,
        &json!({"workspace": "w1", "jobs": [{"id": "x", "prompt": "p"}]}),
    )
    .code(0);
    submit(
        &env,
        &json!({"workspace": "w2", "jobs": [{"id": "x", "prompt": "p"}]}),
    )
    .code(0);

    let before = env.snapshot();
    submit(
        &env,
        &json!({"workspace": "w1", "jobs": [{"id": "x", "prompt": "again"}]}),
    )
    .reason(2, "duplicate_job");
    submit(
        &env,
        &json!({"workspace": "w3", "jobs": [{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}]}),
    )
    .reason(2, "invalid_manifest");
    // No collection of docs exists at all here ($HOME has no .docpull).
    submit(
        &env,
        &json!({"workspace": "w3", "jobs": [{"id": "a", "prompt": "p", "docs": ["stripe"]}]}),
    )
    .reason(2, "unknown_docs");
    unchanged(&env, &before, "the refusals");

    refused_reason(&env, "ambiguous_job", &["--json", "queue", "show", "x"]);
    refused_reason(&env, "ambiguous_job", &["--json", "queue", "cancel", "x"]);
    refused_reason(&env, "unknown_job", &["--json", "queue", "show", "nope"]);
    refused_reason(&env, "unknown_job", &["--json", "queue", "cancel", "nope"]);
    refused_reason(
        &env,
        "unknown_workspace",
        &["--json", "queue", "results", "nows"],
    );
    refused_reason(
        &env,
        "not_retryable",
        &["--json", "queue", "retry", "w1/x", "--no-run"],
    );
    refused_reason(
        &env,
        "invalid_runner",
        &["--json", "queue", "run", "--runner", "bogus"],
    );

    let secrets = env.root.path().join("secrets.env");
    let s = secrets.to_str().unwrap();
    std::fs::write(&secrets, "KEY=value\n").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = refused_reason(
        &env,
        "unsafe_secrets_file",
        &["--json", "queue", "run", "--secrets-file", s],
    );
    assert!(
        r.json()["message"].as_str().unwrap().contains("644"),
        "{r:?}"
    );
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&secrets, "just a line\n").unwrap();
    let r = refused_reason(
        &env,
        "invalid_secrets_file",
        &["--json", "queue", "run", "--secrets-file", s],
    );
    assert!(!r.stdout.contains("just a line") && !r.stderr.contains("just a line"));

    // A planner that fails: exit 1, nothing submitted.
    let r = env.run(&[
        "--json",
        "queue",
        "plan",
        "build it",
        "--planner",
        "exit 7",
        "--yes",
    ]);
    r.reason(1, "planner_failed");
    unchanged(&env, &before, "the refusals");
}

// ---------------------------------------------------------------- integrations

#[test]
fn integration_reasons() {
    let env = TestEnv::new();
    let p = &env.project;
    std::fs::create_dir_all(p.join(".claude")).unwrap();
    std::fs::write(p.join(".claude/settings.json"), "not json {").unwrap();
    let before = crate::mcp::tree(p);
    env.run(&["--json", "integrate", "claude", "--project"])
        .reason(2, "unparseable_settings");
    assert_eq!(crate::mcp::tree(p), before, "nothing changed");

    // A plugin file conductor did not write is never overwritten.
    std::fs::create_dir_all(p.join(".opencode/plugins")).unwrap();
    std::fs::write(p.join(".opencode/plugins/conductor.js"), "// mine\n").unwrap();
    let before = crate::mcp::tree(p);
    env.run(&["--json", "integrate", "opencode", "--project"])
        .reason(2, "file_exists");
    assert_eq!(crate::mcp::tree(p), before, "nothing changed");
}

// ---------------------------------------------------------------- faces

#[test]
fn serve_on_a_bound_port_is_listen_failed() {
    let env = TestEnv::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    env.run(&["--json", "serve", "--listen", &addr])
        .reason(1, "listen_failed");
}

#[test]
fn mcp_without_the_handshake_is_mcp_failed() {
    let env = TestEnv::new();
    // The first message is a notification, not `initialize`.
    let r = env.run_stdin(
        &["--json", "mcp"],
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
    );
    r.reason(1, "mcp_failed");
    // A client that goes away before it says anything is no failure.
    env.run_stdin(&["mcp"], "").code(0);
}

#[test]
fn mcp_tools_name_their_reasons() {
    let env = TestEnv::new();
    let out = crate::mcp::run_plan(
        &env,
        &[],
        &[],
        json!([
            {"tool": "done", "args": {}},
            {"tool": "done", "args": {"outcome": "orphaned"}},
        ]),
    );
    let reason = |i: usize| {
        assert_eq!(out[i]["is_error"], true, "{}", out[i]);
        out[i]["structured"]["reason"].clone()
    };
    assert_eq!(reason(0), json!("no_instance"));
    assert_eq!(reason(1), json!("invalid_outcome"));
    assert!(!env.home_file("status.json").exists() || env.state()["instances"] == json!([]));
    // A server told to act as something that is no instance id.
    let out = crate::mcp::run_plan(
        &env,
        &["--instance", "bad"],
        &[],
        json!([{"tool": "claim", "args": {"files": ["src/a.rs"]}}]),
    );
    assert_eq!(
        out[0]["structured"]["reason"], "invalid_instance_id",
        "{}",
        out[0]
    );
}

#[test]
fn a_write_larger_than_etcd_takes_is_store_refused() {
    let cluster = crate::etcd::Cluster::with_flags(1, &["--max-request-bytes", "4096"]);
    let env = TestEnv::new();
    let url = cluster.url();
    let store = [("CONDUCTOR_STORE", url.as_str())];
    env.run_env(&["--json", "post", "ops", "small", "--as", "ana"], &store)
        .code(0);
    let before = cluster.dump();
    let big = "a".repeat(8000);
    let r = run_stdin_env(
        &env,
        &["--json", "post", "ops", "-", "--as", "ana"],
        &store,
        &big,
    );
    r.reason(2, "store_refused");
    assert_eq!(cluster.dump(), before, "nothing was written");
}

// ---------------------------------------------------------------- the home, and bugs

#[test]
fn a_home_that_is_a_file_is_unsafe_home() {
    let env = TestEnv::new();
    std::fs::write(&env.home, b"not a directory").unwrap();
    env.run(&["--json", "status"]).reason(1, "unsafe_home");
    assert_eq!(std::fs::read(&env.home).unwrap(), b"not a directory");
}

/// `internal` is a bug by definition, so no command produces it on purpose: provoke one through
/// the library (a transaction that reads a document without taking its lock) and check the
/// contract of the reason: exit 70, a hint asking for a report, nothing written.
#[test]
fn a_broken_rule_of_conductor_itself_is_internal_exit_70() {
    use conductor::store::{Lock, Store};
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let store = Store::open(env.home.clone(), Duration::from_secs(5)).unwrap();
    let before = env.snapshot();
    let e = store
        .transaction(conductor::time::Timestamp::now(), &[Lock::Queue], |tx| {
            tx.read::<conductor::agents::Agents>().map(|_| ())
        })
        .unwrap_err();
    assert_eq!(e.reason(), "internal");
    assert_eq!(e.exit_code(), 70);
    assert!(e.hint().unwrap().contains("report"), "{:?}", e.hint());
    unchanged(&env, &before, "the failed transaction");
}
