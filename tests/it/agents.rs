//! Issue 10: the agent runtime. Channels, mentions, inbox and work claims as ledgers in the
//! home, and `agent run` loops as real processes running real child commands. No mocks, no
//! fixed sleeps (everything polls with a deadline).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::common::*;

fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.run(&[
        "agent", "register", "scout", "--handle", "@scout", "--watch", "ops",
    ])
    .code(0);
    env.run(&["agent", "register", "lint", "--watch", "ops"])
        .code(0);
    env
}

fn post(env: &TestEnv, text: &str) -> Value {
    let r = env.run(&["--json", "post", "ops", text, "--as", "ana"]);
    r.code(0);
    r.json()["message"].clone()
}

fn items(env: &TestEnv, agent: &str) -> Vec<Value> {
    let r = env.run(&["--json", "inbox", "--agent", agent]);
    r.code(0);
    r.json()["items"].as_array().unwrap().clone()
}

fn done_lines(env: &TestEnv) -> Vec<Value> {
    read_lines(&env.home_file("runtime-inbox.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn journal_types(env: &TestEnv) -> Vec<String> {
    read_lines(&env.home_file("events.jsonl"))
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event_type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn script(env: &TestEnv, name: &str, body: &str) -> PathBuf {
    let p = env.dir("bin").join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn spawn_loop(env: &TestEnv, args: &[&str]) -> Child {
    let mut c = env.cmd();
    c.args(["-q", "agent", "run"])
        .args(args)
        .env("CONDUCTOR_STRICT_MACHINE", "1");
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c.spawn().unwrap()
}

fn status(env: &TestEnv, agent: &str) -> Value {
    let r = env.run(&["--json", "agent", "status", agent]);
    r.code(0);
    r.json()
}

fn actions(env: &TestEnv, agent: &str) -> Vec<Value> {
    let r = env.run(&["agent", "log", agent]);
    r.code(0);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The state machine's transitions an agent's loop logged, as `from->to`.
fn transitions(env: &TestEnv, agent: &str) -> Vec<String> {
    actions(env, agent)
        .iter()
        .filter(|a| a["kind"] == "transition")
        .map(|a| {
            format!(
                "{}->{}",
                a["detail"]["from"].as_str().unwrap(),
                a["detail"]["to"].as_str().unwrap()
            )
        })
        .collect()
}

fn stop(mut child: Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait().unwrap();
    assert_eq!(out.code(), Some(0), "the loop exits 0 on SIGTERM");
}

fn schema_accepts(schema_file: &str, doc: &Path) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("schemas")
                .join(schema_file),
        )
        .unwrap(),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(doc).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    if let Some(e) = validator.iter_errors(&v).next() {
        panic!(
            "{schema_file} rejects {}: {e} at {}",
            doc.display(),
            e.instance_path()
        );
    }
}

#[test]
fn runtime_post_writes_mention_and_item_with_it_and_edits_dedupe() {
    let env = setup();
    let m = post(
        &env,
        "thanks @scout. please review\nnext: lint\nmail me@lint.dev",
    );
    assert_eq!(m["addressed"], serde_json::json!(["scout", "lint"]));
    let s = items(&env, "scout");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["status"], "pending");
    assert_eq!(s[0]["trigger_type"], "mention");
    assert_eq!(s[0]["source_id"], m["message_id"]);
    assert_eq!(items(&env, "lint").len(), 1);
    let types = journal_types(&env);
    let tail: Vec<&str> = types
        .iter()
        .rev()
        .take(5)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "channel.message.created",
            "mention.created",
            "inbox.item.created",
            "mention.created",
            "inbox.item.created"
        ]
    );
    // Chatter addresses nobody.
    let chat = post(&env, "just thinking out loud about @nobody");
    assert_eq!(chat["addressed"], serde_json::json!([]));
    // An edit that adds a mention creates one item; editing again does not duplicate it.
    let id = chat["message_id"].as_str().unwrap();
    env.run(&["edit", id, "ok @scout, yours", "--as", "ana"])
        .code(0);
    env.run(&["edit", id, "ok @scout, yours!", "--as", "ana"])
        .code(0);
    assert_eq!(items(&env, "scout").len(), 2);
    let r = env.run(&["edit", id, "hijack", "--as", "mallory"]);
    r.code(2);
    assert!(r.stderr.contains("only its author"), "{}", r.stderr);
    // A DM lands in the inbox with trigger dm; a reply to an agent's message with trigger reply.
    env.run(&["dm", "lint", "can you check the build?", "--as", "ana"])
        .code(0);
    let l = items(&env, "lint");
    assert!(l.iter().any(|i| i["trigger_type"] == "dm"), "{l:?}");
    let own = env.run(&[
        "--json",
        "post",
        "ops",
        "[result]\nbuild is green\n[/result]",
        "--as",
        "lint",
    ]);
    let own_id = own.json()["message"]["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    env.run(&[
        "post",
        "ops",
        "thanks!",
        "--as",
        "ana",
        "--reply-to",
        &own_id,
    ])
    .code(0);
    assert!(
        items(&env, "lint")
            .iter()
            .any(|i| i["trigger_type"] == "reply")
    );
    let msgs = env
        .run(&["--json", "messages", "ops", "--limit", "2"])
        .json();
    assert_eq!(msgs["messages"].as_array().unwrap().len(), 2);
    // The documents match their published schemas.
    schema_accepts(
        "runtime-agents.schema.json",
        &env.home_file("runtime-agents.json"),
    );
    schema_accepts(
        "runtime-inbox.schema.json",
        &env.home_file("runtime-inbox.json"),
    );
    schema_accepts(
        "runtime-channels.schema.json",
        &env.home_file("runtime-channels.json"),
    );
}

#[test]
fn runtime_statuses_and_claims_ttl_conflict_takeover() {
    let mut env = setup();
    env.at("2026-01-17T10:00:00Z");
    post(&env, "@scout please look");
    let id = items(&env, "scout")[0]["id"].as_str().unwrap().to_string();
    env.run(&["inbox", "seen", &id]).code(0);
    assert_eq!(items(&env, "scout")[0]["status"], "seen");
    // Claimed by scout for 15 s.
    env.run(&["inbox", "claim", &id, "--agent", "scout", "--ttl", "15"])
        .code(0);
    env.at("2026-01-17T10:00:10Z");
    let c = env.run(&[
        "--json",
        "inbox",
        "claim",
        &id,
        "--agent",
        "lint",
        "--ttl",
        "15",
        "--takeover",
    ]);
    c.code(3);
    let j = c.json();
    assert_eq!(j["status"], "conflict");
    assert_eq!(j["holder"], "scout");
    assert_eq!(j["retry_after_seconds"], 5);
    // Completing while another agent's claim runs is refused, files unchanged.
    let before = env.snapshot();
    let r = env.run(&[
        "inbox",
        "complete",
        &id,
        "--agent",
        "lint",
        "--ref",
        "post_id=msg-9",
    ]);
    r.code(2);
    assert!(r.stderr.contains("claimed by `scout`"), "{}", r.stderr);
    assert_eq!(before, env.snapshot());
    // Expired: a plain claim still conflicts; --takeover takes it over and is counted and logged.
    env.at("2026-01-17T10:00:16Z");
    let c = env.run(&[
        "--json", "inbox", "claim", &id, "--agent", "lint", "--ttl", "15",
    ]);
    c.code(3);
    assert_eq!(c.json()["expired"], true);
    let t = env.run(&[
        "--json",
        "inbox",
        "claim",
        &id,
        "--agent",
        "lint",
        "--ttl",
        "15",
        "--takeover",
    ]);
    t.code(0);
    assert_eq!(t.json()["takeover"], true);
    assert_eq!(status(&env, "lint")["metrics"]["timeout_recoveries"], 1);
    let log = read_lines(&env.home_file("runtime-conflicts.log"));
    assert!(
        log.iter()
            .any(|l| l.contains(" | TAKEOVER | lint (cli) took over")),
        "{log:?}"
    );
    env.run(&["inbox", "renew", &id, "--agent", "lint", "--ttl", "60"])
        .code(0);
    // Complete needs a non-empty reference, always.
    let r = env.run(&["inbox", "complete", &id, "--agent", "lint"]);
    r.code(2);
    assert!(r.stderr.contains("completion_ref"), "{}", r.stderr);
    env.run(&[
        "inbox",
        "complete",
        &id,
        "--agent",
        "lint",
        "--ref",
        "post_id=msg-000042",
        "--ref",
        "note=done",
    ])
    .code(0);
    let done = done_lines(&env);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["item"]["status"], "completed");
    assert_eq!(done[0]["item"]["completion_ref"]["post_id"], "msg-000042");
    // Twice is an error naming the status; the mention was acknowledged with the completion.
    let r = env.run(&[
        "inbox",
        "complete",
        &id,
        "--agent",
        "lint",
        "--ref",
        "post_id=x",
    ]);
    r.code(2);
    assert!(r.stderr.contains("already completed"), "{}", r.stderr);
    assert_eq!(
        env.run(&["--json", "mentions"]).json()["mentions"],
        serde_json::json!([])
    );
    let c = env
        .run(&["--json", "inbox", "--status", "completed"])
        .json();
    assert_eq!(c["items"].as_array().unwrap().len(), 1);
}

#[test]
fn runtime_bad_input_is_refused_with_files_unchanged() {
    let env = setup();
    post(&env, "@scout hi");
    let id = items(&env, "scout")[0]["id"].as_str().unwrap().to_string();
    let big = "x".repeat(16 * 1024 + 1);
    let before = env.snapshot();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["inbox", "--agent", "nobody"], "no agent `nobody`"),
        (vec!["dm", "nobody", "hello"], "no agent `nobody`"),
        (
            vec!["inbox", "claim", &id, "--agent", "nobody"],
            "no agent `nobody`",
        ),
        (
            vec!["inbox", "claim", &id, "--agent", "scout", "--ttl", "5"],
            "15 to 1800",
        ),
        (
            vec!["inbox", "claim", &id, "--agent", "scout", "--ttl", "1801"],
            "15 to 1800",
        ),
        (
            vec!["agent", "run", "scout", "--ttl", "2", "--max-cycles", "1"],
            "15 to 1800",
        ),
        (
            vec!["inbox", "complete", &id, "--ref", "post_id"],
            "KEY=VALUE",
        ),
        (
            vec!["inbox", "complete", &id, "--ref", "=x"],
            "not a reference",
        ),
        (vec!["inbox", "complete", &id], "completion_ref"),
        (
            vec!["inbox", "seen", "inb-999999"],
            "no actionable inbox item",
        ),
        (vec!["post", "ops", &big, "--as", "ana"], "limit is 16384"),
        (vec!["post", "no channel", "hi"], "not a valid channel name"),
        (vec!["post", "ops", "   "], "needs some text"),
        (
            vec!["post", "ops", "hi", "--as", "bad name"],
            "not a valid author name",
        ),
        (
            vec!["post", "ops", "hi", "--reply-to", "msg-424242"],
            "to reply to",
        ),
        (
            vec!["agent", "register", "bad.", "--watch", "ops"],
            "not a valid agent name",
        ),
        (
            vec!["agent", "register", "other", "--handle", "@scout"],
            "already belongs",
        ),
        (
            vec!["mentions", "ack", "men-000001", "men-999999"],
            "no unacknowledged mention",
        ),
        (vec!["agent", "status", "nobody"], "no agent `nobody`"),
        (
            vec![
                "agent",
                "run",
                "scout",
                "--takeover-for",
                "nobody",
                "--max-cycles",
                "1",
            ],
            "no agent `nobody`",
        ),
        (
            vec![
                "agent",
                "run",
                "scout",
                "--takeover-for",
                "scout",
                "--max-cycles",
                "1",
            ],
            "names another agent",
        ),
        (vec!["messages", "nowhere"], "no channel"),
    ];
    for (args, needle) in cases {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?} should exit 2:\n{r:#?}");
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(needle),
            "{args:?}: {first}"
        );
        assert_eq!(before, env.snapshot(), "{args:?} changed a file");
    }
    // With --json the error is the one-line envelope with a stable reason.
    let r = env.run(&[
        "--json", "inbox", "claim", &id, "--agent", "scout", "--ttl", "5",
    ]);
    assert_eq!(r.json()["reason"], "invalid_ttl");
    // An invalid artifact exits 2 naming the valid blocks.
    let r = env.run_stdin(
        &["artifact", "validate", "-"],
        "[bogus]\nx\n[/bogus]\n[bogus]\n[/bogus]\n",
    );
    r.code(2);
    assert_eq!(
        r.stdout.matches("unknown block `[bogus]`").count(),
        1,
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("valid blocks: task, request"),
        "{}",
        r.stdout
    );
    assert_eq!(before, env.snapshot());
}

#[test]
fn runtime_artifact_validate_accepts_canopy_blocks() {
    let env = TestEnv::new();
    let ok = "[objective]\ntitle: Ship 1.0\n[tasks]\n- [ ] write notes\n- [x] tag\n[/tasks]\n[/objective]\n\
              See [the plan](http://x) and\n- [x] a checkbox\n```\n[not-a-block]\n```\n[poll]\nquestion: Friday?\n[/poll]\n\
              [completion]\nall 42 tests pass\n[/completion]\n";
    let r = env.run_stdin(&["--json", "artifact", "validate"], ok);
    r.code(0);
    assert_eq!(r.json()["valid"], true);
    let r = env.run_stdin(
        &["artifact", "validate", "-"],
        "[completion]\n[/completion]\n[task]\nowner: x\n[/task]\n",
    );
    r.code(2);
    assert!(
        r.stdout.contains("needs evidence")
            && r.stdout.contains("`[task]` needs a non-empty `title:`"),
        "{}",
        r.stdout
    );
}

#[test]
fn runtime_feed_is_agent_scoped_and_resumable_with_the_cursor() {
    let env = setup();
    post(&env, "@scout one");
    post(&env, "chatter");
    env.run(&["post", "elsewhere", "not for anyone"]).code(0);
    let p = env.run(&["agent", "events", "scout", "--advance"]);
    p.code(0);
    let page = p.json();
    let types: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "channel.message.created",
            "mention.created",
            "inbox.item.created",
            "channel.message.created"
        ]
    );
    let first = &page["items"][1];
    assert_eq!(first["target_user_id"], "scout");
    assert!(first["message_id"].is_string() && first["channel_id"] == "ops");
    // Resumed from the durable cursor: nothing new yet, then only the new event.
    let again = env.run(&["agent", "events", "scout"]).json();
    assert_eq!(again["items"], serde_json::json!([]));
    env.run(&["dm", "scout", "psst", "--as", "ana"]).code(0);
    let next = env.run(&["agent", "events", "scout"]).json();
    let types: Vec<&str> = next["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["dm.message.created", "inbox.item.created"]);
}

/// The issue's "Done means": two agents and a person on one channel; the addressed agent's
/// loop claims, runs a real child that writes an artifact, posts it and completes the item with
/// a reference to the post; the other agent records `not_addressed`; a loop SIGKILLed mid-item
/// has its claim taken over by another loop after the TTL, and the item is completed once.
#[test]
fn runtime_end_to_end_two_agents_a_person_and_a_sigkill() {
    let env = setup();
    let marker = env.root.path().join("first-attempt");
    let worker = script(
        &env,
        "worker.sh",
        &format!(
            "input=$(cat)\nif [ ! -e {m} ]; then touch {m}; sleep 120; fi\n\
             printf '[result]\\nsummarized %s for %s\\n[/result]\\n[completion]\\nsummary posted\\n[/completion]\\n' \"$CONDUCTOR_ITEM_ID\" \"$CONDUCTOR_AGENT\"",
            m = marker.display()
        ),
    );
    let w = worker.to_str().unwrap();
    let lint = spawn_loop(&env, &["lint", "--exec", "false"]);
    let first = spawn_loop(&env, &["scout", "--exec", w, "--ttl", "15"]);
    assert!(wait_until(10.0, || status(&env, "scout")["running"]
        == true
        && status(&env, "lint")["running"] == true));
    let msg = post(&env, "@scout please summarize the failing tests");
    let item = |env: &TestEnv| items(env, "scout").first().cloned();
    // The first loop claims and starts the child.
    assert!(
        wait_until(10.0, || marker.exists()),
        "the child never started"
    );
    let claimed = item(&env).unwrap();
    let id = claimed["id"].as_str().unwrap().to_string();
    let first_worker = format!("run-{}", first.id());
    assert_eq!(claimed["claim"]["worker"], first_worker.as_str());
    // SIGKILL it mid-item, start another loop for the agent.
    let mut first = first;
    first.kill().unwrap();
    first.wait().unwrap();
    let second = spawn_loop(&env, &["scout", "--exec", w, "--ttl", "15"]);
    // While the TTL runs, the claim is not taken over (the new loop waits for the expiry).
    assert!(wait_until(10.0, || actions(&env, "scout")
        .iter()
        .any(|a| a["kind"] == "conflict")));
    assert_eq!(
        item(&env).unwrap()["claim"]["worker"],
        first_worker.as_str()
    );
    // After the TTL: taken over, executed, posted, completed with a reference to the post.
    assert!(
        wait_until(30.0, || item(&env).is_none()),
        "the item was never completed"
    );
    let done: Vec<Value> = done_lines(&env)
        .into_iter()
        .filter(|d| d["item"]["id"] == id.as_str())
        .collect();
    assert_eq!(done.len(), 1, "completed exactly once");
    let r = &done[0]["item"]["completion_ref"];
    assert_eq!(done[0]["item"]["status"], "completed");
    let post_id = r["post_id"].as_str().unwrap();
    let msgs = env.run(&["--json", "messages", "ops"]).json()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let answer = msgs
        .iter()
        .find(|m| m["message_id"] == post_id)
        .expect("the referenced post exists");
    assert_eq!(answer["author"], "scout");
    assert_eq!(answer["reply_to"], msg["message_id"]);
    assert!(
        answer["content"]
            .as_str()
            .unwrap()
            .contains(&format!("summarized {id} for scout"))
    );
    assert_eq!(
        msgs.iter().filter(|m| m["author"] == "scout").count(),
        1,
        "one artifact posted"
    );
    let st = status(&env, "scout");
    assert_eq!(st["metrics"]["timeout_recoveries"], 1);
    assert_eq!(st["metrics"]["completed"], 1);
    let log = read_lines(&env.home_file("runtime-conflicts.log"));
    assert!(
        log.iter()
            .any(|l| l.contains("TAKEOVER") && l.contains(&first_worker)),
        "{log:?}"
    );
    let takeover_path = transitions(&env, "scout");
    assert!(
        takeover_path
            .windows(2)
            .any(|w| w == ["claiming->timeout_takeover", "timeout_takeover->executing"]),
        "{takeover_path:?}"
    );
    // The other agent saw the person's post and recorded why it did not act.
    let lint_routes = actions(&env, "lint");
    assert!(
        lint_routes.iter().any(|a| a["kind"] == "route"
            && a["detail"]["route"]["reason"] == "not_addressed"
            && a["detail"]["event_type"] == "channel.message.created"),
        "{lint_routes:?}"
    );
    stop(second);
    stop(lint);
}

#[test]
fn runtime_errors_back_off_exponentially_then_recover() {
    let env = setup();
    let n = env.root.path().join("attempts");
    let worker = script(
        &env,
        "flaky.sh",
        &format!(
            "cat >/dev/null\nc=$(cat {n} 2>/dev/null || echo 0); c=$((c+1)); echo $c > {n}\n\
             case $c in 1) exit 1;; 2) echo '[bogus]'; echo '[/bogus]';; 3) sleep 30;; *) printf '[result]\\nok\\n[/result]\\n';; esac",
            n = n.display()
        ),
    );
    let lp = spawn_loop(
        &env,
        &[
            "scout",
            "--exec",
            worker.to_str().unwrap(),
            "--backoff-ms",
            "100",
            "--timeout",
            "1",
        ],
    );
    post(&env, "@scout flaky job");
    assert!(
        wait_until(30.0, || items(&env, "scout").is_empty()),
        "never completed"
    );
    stop(lp);
    let acts = actions(&env, "scout");
    let delays: Vec<u64> = acts
        .iter()
        .filter(|a| a["kind"] == "backoff")
        .map(|a| a["detail"]["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [100, 200, 400], "{acts:?}");
    let errors: Vec<String> = acts
        .iter()
        .filter(|a| a["kind"] == "error")
        .map(|a| a["detail"]["error"].as_str().unwrap().to_string())
        .collect();
    assert!(
        errors[0].starts_with("exit_status")
            && errors[1].starts_with("invalid_artifact")
            && errors[2].starts_with("timeout"),
        "{errors:?}"
    );
    let st = status(&env, "scout");
    assert_eq!(st["metrics"]["errors"], 3);
    assert_eq!(st["metrics"]["completed"], 1);
    assert_eq!(done_lines(&env).len(), 1);
}

#[test]
fn runtime_status_relay_grade_selftest_metrics_and_redaction() {
    let env = setup();
    post(&env, "hello everyone");
    // No loop: background, and the self-test is only a compatibility pass.
    assert_eq!(status(&env, "scout")["mode"], "background");
    env.run(&["agent", "selftest", "scout"]).code(0);
    env.run(&["agent", "selftest", "scout", "--min-level", "full_pass"])
        .code(1);
    // A shadow loop on the watcher: relay_grade, near-zero blind window, full pass.
    let lp = spawn_loop(&env, &["scout", "--mark-seen"]);
    assert!(wait_until(10.0, || status(&env, "scout")["running"] == true));
    let st = status(&env, "scout");
    assert_eq!(st["wake_source"], "watcher");
    assert_eq!(st["blind_window_seconds"], 0.0);
    assert_eq!(st["mode"], "relay_grade", "{st}");
    assert_eq!(st["health"], "healthy", "{st}");
    let r = env.run(&[
        "--json",
        "agent",
        "selftest",
        "scout",
        "--min-level",
        "full_pass",
    ]);
    r.code(0);
    assert_eq!(r.json()["level"], "full_pass");
    // Shadow mode queues and marks seen without claiming.
    post(&env, "@scout take a look");
    assert!(wait_until(10.0, || items(&env, "scout")
        .first()
        .is_some_and(|i| i["status"] == "seen")));
    assert!(items(&env, "scout")[0]["claim"].is_null());
    stop(lp);
    // Prometheus text: promtool (Debian's prometheus package) when installed, else the basics.
    let m = env.run(&["metrics"]);
    m.code(0);
    assert!(
        m.stdout
            .contains("# TYPE conductor_event_to_claim_seconds histogram")
    );
    assert!(
        m.stdout
            .contains("conductor_pending_inbox{agent=\"scout\"} 1"),
        "{}",
        m.stdout
    );
    assert!(
        m.stdout
            .contains("# TYPE conductor_timeout_recoveries_total counter")
    );
    // Without promtool the test fails here (CONDUCTOR_TEST_SKIP=promtool: skips this part).
    let promtool = which("promtool");
    if promtool.is_err() {
        missing("promtool", "promtool is not on PATH");
    }
    if let Ok(p) = promtool {
        let mut c = std::process::Command::new(p);
        c.args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(m.stdout.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = env.dir("textfile");
    env.run(&["metrics", "--textfile", dir.to_str().unwrap()])
        .code(0);
    assert_eq!(
        std::fs::read_to_string(dir.join("conductor.prom")).unwrap(),
        m.stdout
    );
    // Secrets in what the loop records are redacted; harmless keys are not.
    let lp = spawn_loop(
        &env,
        &[
            "lint",
            "--exec",
            "true X-API-Key: s3cret --max_tokens=512 Authorization: Bearer tok",
            "--max-cycles",
            "1",
        ],
    );
    let out = lp.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = env.run(&["agent", "log", "lint"]).stdout;
    assert!(!log.contains("s3cret") && !log.contains("tok\""), "{log}");
    assert!(
        log.contains("max_tokens=512") && log.contains("X-API-Key: [redacted]"),
        "{log}"
    );
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

#[test]
fn runtime_dm_answered_by_dm_and_broadcast_takes_unaddressed_posts() {
    let env = setup();
    let worker = script(
        &env,
        "echo.sh",
        "cat >/dev/null\nprintf '[result]\\nhandled %s\\n[/result]\\n' \"$CONDUCTOR_ITEM_ID\"",
    );
    let lp = spawn_loop(
        &env,
        &["scout", "--exec", worker.to_str().unwrap(), "--broadcast"],
    );
    assert!(wait_until(10.0, || status(&env, "scout")["running"] == true));
    env.run(&["dm", "scout", "are you there?", "--as", "ana"])
        .code(0);
    post(&env, "anyone free to look at CI?");
    assert!(
        wait_until(20.0, || done_lines(&env).len() == 2),
        "{:?}",
        items(&env, "scout")
    );
    stop(lp);
    let done = done_lines(&env);
    let triggers: Vec<&str> = done
        .iter()
        .map(|d| d["item"]["trigger_type"].as_str().unwrap())
        .collect();
    assert!(
        triggers.contains(&"dm") && triggers.contains(&"broadcast"),
        "{triggers:?}"
    );
    // The DM is answered in the DM conversation, the broadcast post in the channel.
    let dm = env.run(&["--json", "messages", "dm:ana+scout"]).json();
    let dms = dm["messages"].as_array().unwrap();
    assert_eq!(dms.len(), 2);
    assert_eq!(dms[1]["author"], "scout");
    let ops = env.run(&["--json", "messages", "ops"]).json();
    assert!(
        ops["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["author"] == "scout")
    );
    // Nothing was answered twice.
    assert_eq!(
        env.run(&["--json", "inbox", "--agent", "scout"]).json()["items"],
        serde_json::json!([])
    );
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Issue 10: `run-status.json` and a capped JSONL action log per agent, operator-readable files
/// in the home, written through the store (private, atomic), secrets redacted; the shared
/// `runtime-agents.json` does not grow with the loop's actions.
#[test]
fn runtime_run_status_and_capped_action_log_are_per_agent_files() {
    let env = setup();
    let dir = env.home.join("runtime/agents/lint");
    let status_file = dir.join("run-status.json");
    let log_file = dir.join("actions.jsonl");
    // A first run creates the agent's files.
    let first = spawn_loop(&env, &["lint", "--max-cycles", "1"]);
    assert!(first.wait_with_output().unwrap().status.success());
    assert!(status_file.is_file() && log_file.is_file());
    // An action log already at the cap (old lines from earlier runs).
    let old: String = (0..3000)
        .map(|i| {
            format!(
                "{{\"at\":\"2026-01-01T00:00:00Z\",\"kind\":\"old\",\"detail\":{{\"n\":{i},\"pad\":\"{}\"}}}}\n",
                "x".repeat(60)
            )
        })
        .collect();
    assert!(old.len() > 256 * 1024);
    std::fs::write(&log_file, &old).unwrap();
    post(&env, "@lint hello");
    let lp = spawn_loop(
        &env,
        &[
            "lint",
            "--exec",
            "true X-API-Key: s3cret --max_tokens=512",
            "--max-cycles",
            "2",
            "--backoff-ms",
            "10",
        ],
    );
    let pid = lp.id();
    let out = lp.wait_with_output().unwrap();
    assert!(out.status.success());
    // run-status.json: the loop's state, readable by an operator, private, schema-valid.
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&status_file).unwrap()).unwrap();
    schema_accepts("runtime-run-status.schema.json", &status_file);
    assert_eq!(st["agent"], "lint");
    assert_eq!(st["pid"], pid);
    assert_eq!(st["status"], "stopped");
    assert_eq!(st["state"], "idle");
    assert_eq!(st["cycles"], 2);
    assert!(st["last_event_cursor"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(
        st["exec"], "true X-API-Key: [redacted] --max_tokens=512",
        "{st}"
    );
    assert_eq!(mode_of(&status_file), 0o600);
    assert_eq!(mode_of(&log_file), 0o600);
    for d in [
        &dir,
        &env.home.join("runtime/agents"),
        &env.home.join("runtime"),
    ] {
        assert_eq!(mode_of(d), 0o700, "{}", d.display());
    }
    // actions.jsonl: capped (rewritten with its newest lines), every line one valid action,
    // newest last, secrets redacted.
    let text = std::fs::read_to_string(&log_file).unwrap();
    assert!(text.len() as u64 <= 256 * 1024, "{}", text.len());
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|a| a["kind"] == "old"),
        "the newest old lines stay"
    );
    assert!(
        !lines.iter().any(|a| a["detail"]["n"] == 0),
        "the oldest went"
    );
    assert_eq!(lines.last().unwrap()["detail"]["event"], "stop");
    assert!(lines.iter().any(|a| a["kind"] == "transition"));
    assert!(lines.iter().any(|a| a["kind"] == "route"));
    assert!(!text.contains("s3cret"));
    let one_line = tempfile::NamedTempFile::new().unwrap();
    for l in text.lines().rev().take(20) {
        std::fs::write(one_line.path(), l).unwrap();
        schema_accepts("runtime-action.schema.json", one_line.path());
    }
    // `agent log` reads that file (newest last); `agent status` reads run-status.json.
    let log = env.run(&["agent", "log", "lint", "--limit", "3"]);
    log.code(0);
    assert_eq!(
        log.stdout.lines().collect::<Vec<_>>(),
        text.lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
    );
    let s = status(&env, "lint");
    assert_eq!(s["run"]["pid"], pid);
    assert_eq!(s["run"]["status"], "stopped");
    assert_eq!(s["running"], false);
    // runtime-agents.json holds no run status and no actions: only the cursor moved.
    let agents_after = std::fs::read_to_string(env.home_file("runtime-agents.json")).unwrap();
    assert!(
        !agents_after.contains("\"actions\"") && !agents_after.contains("\"run\""),
        "{agents_after}"
    );
    // Runs with nothing new to do write their run files only.
    let shadow = || {
        let again = spawn_loop(&env, &["lint", "--max-cycles", "1"]);
        assert!(again.wait_with_output().unwrap().status.success());
        std::fs::read_to_string(env.home_file("runtime-agents.json")).unwrap()
    };
    let settled = shadow();
    assert_eq!(shadow(), settled);
    assert_ne!(std::fs::read_to_string(&log_file).unwrap(), text);
    check_home(&env.home);
}

/// Issue 10: inbox status `expired`. An actionable item still pending or seen 7 days after it
/// was created, with no live claim, is expired by the next transaction that reads the inbox
/// (deterministically: the clock is passed in), with an `inbox.item.updated` event.
#[test]
fn runtime_items_expire_after_seven_days_without_a_live_claim() {
    let mut env = setup();
    env.at("2026-01-10T10:00:00Z");
    post(&env, "@scout old request");
    env.at("2026-01-16T10:00:00Z");
    post(&env, "@lint newer request");
    let old = items(&env, "scout")[0]["id"].as_str().unwrap().to_string();
    let newer = items(&env, "lint")[0]["id"].as_str().unwrap().to_string();
    // One second short of 7 days: still actionable.
    env.at("2026-01-17T09:59:59Z");
    assert_eq!(items(&env, "scout").len(), 1);
    // 7 days: listed as expired already; acting on it is refused with files unchanged.
    env.at("2026-01-17T10:00:00Z");
    assert_eq!(items(&env, "scout"), Vec::<Value>::new());
    let e = env.run(&["--json", "inbox", "--status", "expired"]).json();
    assert_eq!(e["items"][0]["id"], old.as_str());
    let before = env.snapshot();
    let r = env.run(&["inbox", "seen", &old]);
    r.code(2);
    assert!(r.stderr.contains("has expired"), "{}", r.stderr);
    assert_eq!(before, env.snapshot());
    // A write that does not load scout's inbox leaves it alone (a post only adds to the
    // inboxes it addresses); the next write that loads it records the expiry: the ledger line,
    // the event, out of the live document.
    post(&env, "unrelated chatter");
    assert!(done_lines(&env).is_empty());
    env.run(&["agent", "register", "scout"]).code(0);
    let done = done_lines(&env);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["item"]["id"], old.as_str());
    assert_eq!(done[0]["item"]["status"], "expired");
    assert_eq!(done[0]["expired_at"], "2026-01-17T10:00:00Z");
    let ev: Vec<Value> = read_lines(&env.home_file("events.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["payload"]["status"] == "expired")
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["event_type"], "inbox.item.updated");
    assert_eq!(ev[0]["actor"], "conductor");
    assert_eq!(ev[0]["target"], "scout");
    assert!(
        !std::fs::read_to_string(env.home_file("runtime/agents/scout/inbox.json"))
            .unwrap()
            .contains(&old)
    );
    let r = env.run(&["inbox", "seen", &old]);
    assert!(r.stderr.contains("already expired"), "{}", r.stderr);
    assert_eq!(
        env.run(&["--json", "inbox", "--status", "expired"]).json()["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A live claim keeps an item past its 7 days; once the claim lapses, it expires.
    env.at("2026-01-23T09:59:30Z");
    env.run(&["inbox", "claim", &newer, "--agent", "lint", "--ttl", "60"])
        .code(0);
    env.at("2026-01-23T10:00:10Z");
    post(&env, "more chatter");
    assert_eq!(items(&env, "lint").len(), 1);
    env.at("2026-01-23T10:00:30Z");
    post(&env, "even more chatter");
    assert_eq!(items(&env, "lint"), Vec::<Value>::new());
    env.run(&["agent", "register", "lint"]).code(0);
    assert_eq!(done_lines(&env).len(), 2);
}

/// Issue 10: the `channel_added` trigger. An agent added to a channel that already exists
/// (`agent register --watch`, or named on a `members:` line of a post there) gets an inbox item
/// with trigger `channel_added`, deduplicated by agent + source + trigger.
#[test]
fn runtime_channel_added_when_an_agent_joins_an_existing_channel() {
    let env = setup();
    env.run(&["post", "release", "kickoff", "--as", "ana"])
        .code(0);
    let join = |agent: &str, channels: &[&str]| {
        let mut args = vec!["--json", "agent", "register", agent];
        for c in channels {
            args.extend(["--watch", c]);
        }
        let r = env.run(&args);
        r.code(0);
        r.json()["channel_added"].as_array().unwrap().len()
    };
    assert_eq!(join("scout", &["ops", "release"]), 1);
    let s = items(&env, "scout");
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["trigger_type"], "channel_added");
    assert_eq!(s[0]["channel_id"], "release");
    assert_eq!(s[0]["source_type"], "channel");
    assert_eq!(s[0]["source_id"], "release");
    let ev: Vec<Value> = read_lines(&env.home_file("events.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["payload"]["trigger_type"] == "channel_added")
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["event_type"], "inbox.item.created");
    assert_eq!(ev[0]["target"], "scout");
    // Registering again, or watching a channel with no messages yet, adds nothing.
    assert_eq!(join("scout", &["ops", "release"]), 0);
    assert_eq!(join("scout", &["ops", "release", "quiet"]), 0);
    // Deduplicated against finished items too: leave and rejoin after completing it.
    let id = s[0]["id"].as_str().unwrap();
    env.run(&["inbox", "complete", id, "--ref", "note=joined"])
        .code(0);
    assert_eq!(join("scout", &["ops"]), 0);
    assert_eq!(join("scout", &["ops", "release"]), 0);
    assert_eq!(items(&env, "scout"), Vec::<Value>::new());
    // A new agent watching an existing channel is added to it too.
    assert_eq!(join("docs", &["release"]), 1);
    // `members:` adds lint (who does not watch release) with a channel_added item and a
    // mention; scout, already there, gets a plain mention.
    let m = env.run(&[
        "--json",
        "post",
        "release",
        "members: @lint, scout\nplease help with the release",
        "--as",
        "ana",
    ]);
    m.code(0);
    let mid = m.json()["message"]["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    let l = items(&env, "lint");
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0]["trigger_type"], "channel_added");
    assert_eq!(l[0]["source_id"], mid.as_str());
    assert!(l[0]["mention_id"].is_string());
    let agents = env.run(&["--json", "agent", "list"]).json();
    let lint = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "lint")
        .unwrap()
        .clone();
    assert_eq!(lint["watch"], serde_json::json!(["ops", "release"]));
    let s = items(&env, "scout");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["trigger_type"], "mention");
    // The same line again: lint is a member now, so a mention, not a second channel_added.
    env.run(&["post", "release", "members: lint", "--as", "ana"])
        .code(0);
    let triggers: Vec<String> = items(&env, "lint")
        .iter()
        .map(|i| i["trigger_type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(triggers, ["channel_added", "mention"]);
}

/// Issue 10: `conductor doctor` validates the runtime's documents and each agent's run files
/// with their JSON Schemas (compiled like the protocol's): a document the Rust model would
/// read but the published schema rejects is reported (exit 1), never rewritten.
#[test]
fn runtime_doctor_validates_the_runtime_documents_with_their_schemas() {
    let env = setup();
    env.run(&["post", "release", "kickoff", "--as", "ana"])
        .code(0);
    env.run(&[
        "agent", "register", "scout", "--watch", "ops", "--watch", "release",
    ])
    .code(0);
    post(&env, "@scout look");
    let lp = spawn_loop(&env, &["scout", "--max-cycles", "1"]);
    assert!(lp.wait_with_output().unwrap().status.success());
    let r = env.run(&["--json", "doctor"]);
    r.code(0);
    let docs = r.json()["documents"].as_array().unwrap().clone();
    for f in [
        "runtime-agents.json",
        "runtime-inbox.json",
        "runtime-channels.json",
        "runtime/agents/scout/run-status.json",
        "runtime/agents/scout/actions.jsonl",
        "runtime/agents/scout/inbox.json",
    ] {
        let d = docs
            .iter()
            .find(|d| d["file"] == f)
            .unwrap_or_else(|| panic!("{f} not checked: {docs:?}"));
        assert_eq!(d["ok"], true, "{d}");
    }
    // Schema violations the model does not see: a handle without `@`, an unknown loop state.
    let agents = env.home_file("runtime-agents.json");
    let text = std::fs::read_to_string(&agents).unwrap();
    let bad = text.replace("\"@scout\"", "\"scout-no-at\"");
    std::fs::write(&agents, &bad).unwrap();
    let status_file = env.home.join("runtime/agents/scout/run-status.json");
    let st = std::fs::read_to_string(&status_file).unwrap();
    let bad_st = st.replace("\"state\": \"idle\"", "\"state\": \"dancing\"");
    assert_ne!(st, bad_st);
    std::fs::write(&status_file, &bad_st).unwrap();
    let r = env.run(&["--json", "doctor", "--repair"]);
    r.code(1);
    let docs = r.json()["documents"].as_array().unwrap().clone();
    let a = docs
        .iter()
        .find(|d| d["file"] == "runtime-agents.json")
        .unwrap();
    assert_eq!(a["ok"], false);
    let detail = a["detail"].as_str().unwrap();
    assert!(
        detail.contains("runtime-agents.schema.json") && detail.contains("/agents/scout/handle"),
        "{detail}"
    );
    let s = docs
        .iter()
        .find(|d| d["file"] == "runtime/agents/scout/run-status.json")
        .unwrap();
    assert_eq!(s["ok"], false);
    assert!(s["detail"].as_str().unwrap().contains("/state"), "{s}");
    assert_eq!(std::fs::read_to_string(&agents).unwrap(), bad);
    assert_eq!(std::fs::read_to_string(&status_file).unwrap(), bad_st);
}

/// Issue 10, "Done means": an agent SIGKILLed mid-item (its `--exec` child running) has its
/// claim taken over by *another agent* after the TTL (15 s, the minimum), and the item is
/// completed exactly once. lint stands in for scout (`--takeover-for scout`): it waits while
/// the TTL runs, then takes over, runs its own child, posts the artifact as itself and
/// completes scout's item with a reference to that post.
#[test]
fn runtime_another_agent_takes_over_a_sigkilled_agents_claim_after_the_ttl() {
    let env = setup();
    let started = env.root.path().join("scout-child-started");
    let scout_worker = script(
        &env,
        "scout.sh",
        &format!("cat >/dev/null\ntouch {}\nsleep 300", started.display()),
    );
    let lint_worker = script(
        &env,
        "lint.sh",
        "cat >/dev/null\nprintf '[result]\\n%s finished %s for a stand-in\\n[/result]\\n' \"$CONDUCTOR_AGENT\" \"$CONDUCTOR_ITEM_ID\"",
    );
    let mut scout = spawn_loop(
        &env,
        &[
            "scout",
            "--exec",
            scout_worker.to_str().unwrap(),
            "--ttl",
            "15",
        ],
    );
    let lint = spawn_loop(
        &env,
        &[
            "lint",
            "--exec",
            lint_worker.to_str().unwrap(),
            "--ttl",
            "15",
            "--takeover-for",
            "scout",
        ],
    );
    assert!(wait_until(10.0, || status(&env, "scout")["running"]
        == true
        && status(&env, "lint")["running"] == true));
    let msg = post(&env, "@scout please triage the flaky test");
    assert!(
        wait_until(10.0, || started.exists()),
        "scout's child never started"
    );
    let item = items(&env, "scout")[0].clone();
    let id = item["id"].as_str().unwrap().to_string();
    let scout_worker_id = format!("run-{}", scout.id());
    assert_eq!(item["claim"]["worker"], scout_worker_id.as_str());
    let rs: Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.join("runtime/agents/scout/run-status.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rs["state"], "executing");
    assert_eq!(rs["current"]["item_id"], id.as_str());
    // SIGKILL scout's loop while its child runs (the child dies with it).
    scout.kill().unwrap();
    scout.wait().unwrap();
    // lint sees the claim, and does not touch it while the TTL runs.
    assert!(wait_until(10.0, || actions(&env, "lint")
        .iter()
        .any(
            |a| a["kind"] == "conflict" && a["detail"]["item_id"] == id.as_str()
        )));
    assert_eq!(
        items(&env, "scout")[0]["claim"]["worker"],
        scout_worker_id.as_str()
    );
    // After the TTL: lint takes over and completes the item, once.
    assert!(
        wait_until(40.0, || items(&env, "scout").is_empty()),
        "the item was never completed"
    );
    stop(lint);
    let done: Vec<Value> = done_lines(&env)
        .into_iter()
        .filter(|d| d["item"]["id"] == id.as_str())
        .collect();
    assert_eq!(done.len(), 1, "completed exactly once");
    assert_eq!(done[0]["item"]["status"], "completed");
    assert_eq!(done[0]["item"]["agent"], "scout");
    assert_eq!(done[0]["finished_by"], "lint");
    assert_eq!(done[0]["last_claim"]["agent"], "lint");
    let post_id = done[0]["item"]["completion_ref"]["post_id"]
        .as_str()
        .unwrap();
    let msgs = env.run(&["--json", "messages", "ops"]).json()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let answer = msgs.iter().find(|m| m["message_id"] == post_id).unwrap();
    assert_eq!(answer["author"], "lint");
    assert_eq!(answer["reply_to"], msg["message_id"]);
    assert!(
        answer["content"]
            .as_str()
            .unwrap()
            .contains(&format!("lint finished {id}"))
    );
    assert_eq!(
        msgs.iter().filter(|m| m["author"] != "ana").count(),
        1,
        "one artifact"
    );
    assert_eq!(status(&env, "lint")["metrics"]["timeout_recoveries"], 1);
    assert_eq!(status(&env, "scout")["metrics"]["completed"], 0);
    let log = read_lines(&env.home_file("runtime-conflicts.log"));
    assert!(
        log.iter().any(|l| l.contains(" | TAKEOVER | lint (run-")
            && l.contains(&format!("from scout ({scout_worker_id})"))),
        "{log:?}"
    );
    let path = transitions(&env, "lint");
    assert!(
        path.windows(2)
            .any(|w| w == ["claiming->timeout_takeover", "timeout_takeover->executing"]),
        "{path:?}"
    );
    // Bad stand-in requests are refused before the loop starts.
    let r = env.run(&[
        "agent",
        "run",
        "lint",
        "--takeover-for",
        "nobody",
        "--max-cycles",
        "1",
    ]);
    r.code(2);
    assert!(r.stderr.contains("no agent `nobody`"), "{}", r.stderr);
    let r = env.run(&[
        "agent",
        "run",
        "lint",
        "--takeover-for",
        "lint",
        "--max-cycles",
        "1",
    ]);
    r.code(2);
}

/// A post that is not UTF-8 is bad input (exit 2), on stdin as on the command line, and
/// changes nothing.
#[test]
fn a_post_that_is_not_utf8_is_input_error() {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    let env = setup();
    post(&env, "@scout first");
    let before = env.snapshot();
    let mut c = env.cmd();
    c.args(["--json", "post", "ops", "-", "--as", "ana"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"@scout caf\xe9 latin-1\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reason"], "invalid_input", "{v}");
    assert!(v["message"].as_str().unwrap().contains("not UTF-8"), "{v}");
    let out = env
        .cmd()
        .args(["post", "ops"])
        .arg(std::ffi::OsStr::from_bytes(b"caf\xe9"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(env.snapshot(), before, "files are byte-identical");
}
