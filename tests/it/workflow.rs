//! Workflows (issue 11): templates, sessions, the worker's tools, the supervisor with a scripted
//! stand-in worker (a real child process calling the real binary), recovery, safety rules.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const FEATURE: &str = r#"{
  "name": "Feature",
  "initial": "plan",
  "states": {
    "plan":   { "persona": "architect", "prompt": "Write the plan.", "next": ["build"] },
    "build":  { "persona": "Senior Engineer", "next": ["verify", "plan"],
                "cleanup": ["echo cleaned >> cleanup.txt", "exit 3"] },
    "verify": { "persona": "QA", "next": ["done", "build"] }
  }
}"#;

/// A worker script: `$CONDUCTOR_BIN` is the binary; each call appends its state to trace.txt.
fn worker(env: &TestEnv, body: &str) -> String {
    let path = env.root.path().join("worker.sh");
    let script = format!(
        "#!/bin/sh\nC=\"$CONDUCTOR_BIN\"\nS=\"$CONDUCTOR_WORKFLOW_STATE\"\necho \"$S\" >> \"$TRACE\"\n{body}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("sh {} {{prompt_file}} {{system_file}}", path.display())
}

fn template(env: &TestEnv, name: &str, text: &str) {
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

fn trace(env: &TestEnv) -> Vec<String> {
    read_lines(&env.root.path().join("trace.txt"))
}

fn start(env: &TestEnv, tpl: &str) -> String {
    let r = env.run(&["--json", "workflow", "start", tpl, "Add rate limiting"]);
    r.code(0);
    r.json()["session"].as_str().unwrap().to_string()
}

fn run_cmd(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.cmd();
    c.args(args)
        .env("CONDUCTOR_BIN", bin())
        .env("TRACE", env.root.path().join("trace.txt"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run the supervisor to completion (at most 120 s: every step is a durable commit, and fsync
/// can take seconds on a machine busy writing).
fn supervise(env: &TestEnv, args: &[&str]) -> Run {
    let child = run_cmd(env, args).spawn().unwrap();
    finish_in(env, child, 120)
}

/// Wait for a supervisor; on a timeout, show its output and the ledger.
fn finish_in(env: &TestEnv, mut child: Child, secs: u64) -> Run {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let ps = Command::new("ps")
                .args(["-eo", "pid,ppid,pgid,etimes,stat,wchan:20,args"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            child.kill().ok();
            let o = child.wait_with_output().unwrap();
            let ours: Vec<&str> = ps
                .lines()
                .filter(|l| l.contains("worker.sh") || l.contains("debug/conductor"))
                .collect();
            panic!(
                "supervisor still running after {secs}s\n{}\n{}\nledger:\n{}\nprocesses:\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                std::fs::read_to_string(env.home_file("workflows.json")).unwrap_or_default(),
                ours.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn show(env: &TestEnv, id: &str) -> Value {
    let r = env.run(&["--json", "workflow", "show", id]);
    r.code(0);
    r.json()
}

#[test]
fn workflow_three_states_run_to_done_with_handover_personas_and_instances() {
    let env = TestEnv::new();
    template(&env, "feature", FEATURE);
    let agents = env.project.join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("architect.md"),
        "---\nname: architect\ndescription: Designs before building\ntools: Read, Grep\n---\nYou are the ARCHITECT-PERSONA.\n",
    )
    .unwrap();
    let agent = worker(
        &env,
        r#"case "$S" in
  plan) grep -q ARCHITECT-PERSONA "$2" || exit 41
        grep -q "Designs before building" "$1" || exit 42
        grep -q "Add rate limiting" "$1" || exit 43
        cat > stdin.txt
        $C workflow snapshot --finding "the API port is 8081" --set branch=feat-x
        $C workflow usage --tokens 100 --cost 0.5
        $C workflow transition build --summary "planned the limiter" ;;
  build) grep -q "the API port is 8081" "$1" || exit 44
         grep -q "planned the limiter" "$1" || exit 45
         test -n "$CONDUCTOR_INSTANCE_ID" || exit 46
         $C claim src/limiter.rs || exit 47
         echo limiter > src/limiter.rs
         $C workflow snapshot --file src/limiter.rs
         $C workflow usage --tokens 200
         $C workflow transition verify --summary built ;;
  verify) $C workflow transition done --summary verified ;;
esac"#,
    );
    let id = start(&env, "feature");
    let r = supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(0);
    assert!(r.stdout.contains("done"), "{r:?}");
    assert_eq!(trace(&env), ["plan", "build", "verify"]);
    // The prompt was also on stdin.
    let stdin = std::fs::read_to_string(env.project.join("stdin.txt")).unwrap();
    assert!(stdin.contains("conductor workflow transition build"));
    // Cleanup ran after build; its failure is recorded, not fatal.
    assert_eq!(
        std::fs::read_to_string(env.project.join("cleanup.txt")).unwrap(),
        "cleaned\n"
    );
    let v = show(&env, &id);
    let s = &v["session"];
    assert_eq!(s["status"], "done");
    assert_eq!(s["totals"]["tokens"], 300);
    assert_eq!(s["snapshot"]["custom"]["branch"], "feat-x");
    assert_eq!(s["snapshot"]["modified_files"][0], "src/limiter.rs");
    assert_eq!(
        s["runs"][0]["persona"]["source"],
        agents.join("architect.md").to_str().unwrap()
    );
    assert_eq!(
        s["runs"][0]["persona"]["tools"],
        serde_json::json!(["Read", "Grep"])
    );
    assert_eq!(s["transition_counts"]["plan->build"], 1);
    let cleanup: Vec<&Value> = s["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "cleanup")
        .collect();
    assert_eq!(cleanup.len(), 2);
    assert_eq!(cleanup[1]["detail"]["exit_code"], 3);
    assert_eq!(v["breadcrumbs"], "Plan [✓] -> Build [✓] -> Verify [✓]");
    // Each worker was a conductor instance, recorded as done; none is left.
    let hist = env.history();
    assert_eq!(hist.len(), 3, "{hist:?}");
    assert!(hist.iter().all(|h| h["outcome"] == "success"));
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 0);
    // The finished session left workflows.json for the finished ledger.
    let live: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home_file("workflows.json")).unwrap())
            .unwrap();
    assert_eq!(live["sessions"].as_array().unwrap().len(), 0);
    assert_eq!(
        read_lines(&env.home_file("workflows-finished.jsonl")).len(),
        1
    );
    let list = env.run(&["workflow", "list"]);
    assert!(
        list.stdout.contains(&id) && list.stdout.contains("done"),
        "{list:?}"
    );
    // Events in the journal.
    let ev = std::fs::read_to_string(env.home_file("events.jsonl")).unwrap();
    for t in [
        "workflow.started",
        "workflow.state.started",
        "workflow.transition",
        "workflow.worker.exited",
    ] {
        assert!(ev.contains(t), "no {t} event");
    }
    // Private files.
    let dir = env.home.join("workflow-sessions").join(&id);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for e in std::fs::read_dir(&dir).unwrap() {
        let m = e.unwrap().metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600);
    }
}

#[test]
fn workflow_show_draws_the_timeline_while_running() {
    let env = TestEnv::new();
    template(&env, "feature", FEATURE);
    let agent = worker(
        &env,
        r#"case "$S" in
  plan) $C workflow transition build --summary p ;;
  build) echo x > src/new.rs; touch "$TRACE.ready"; while [ ! -e "$TRACE.go" ]; do sleep 0.05; done
         $C workflow transition verify --summary b ;;
  verify) $C workflow transition done --summary v ;;
esac"#,
    );
    let id = start(&env, "feature");
    let child = run_cmd(&env, &["workflow", "run", &id, "--agent-cmd", &agent])
        .spawn()
        .unwrap();
    let ready = env.root.path().join("trace.txt.ready");
    assert!(wait_until(30.0, || ready.exists()));
    let r = env.run(&["workflow", "show", &id]);
    r.code(0);
    assert!(
        r.stdout.contains("Plan [✓] -> Build [●] -> Verify [ ]"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Files modified since `build` began: src/new.rs"),
        "{}",
        r.stdout
    );
    let st = env.run_env(
        &["--json", "workflow", "status"],
        &[
            ("CONDUCTOR_WORKFLOW_SESSION", &id),
            ("CONDUCTOR_WORKFLOW_STATE", "build"),
        ],
    );
    assert_eq!(st.json()["allowed"], serde_json::json!(["verify", "plan"]));
    // One supervisor per session.
    let second = env.run(&["workflow", "run", &id]);
    second.code(2);
    assert!(
        second.stderr.contains("is already being run by process"),
        "{second:?}"
    );
    std::fs::write(env.root.path().join("trace.txt.go"), "").unwrap();
    finish_in(&env, child, 120).code(0);
}

#[test]
fn workflow_abort_stops_the_worker_and_pause_holds_after_it() {
    let env = TestEnv::new();
    template(&env, "feature", FEATURE);
    let agent = worker(
        &env,
        r#"case "$S" in
  plan) touch "$TRACE.ready"; while [ ! -e "$TRACE.go" ]; do sleep 0.05; done
        $C workflow transition build --summary p ;;
  build) sleep 30 ;;
esac"#,
    );
    let id = start(&env, "feature");
    let ready = env.root.path().join("trace.txt.ready");
    let child = run_cmd(&env, &["workflow", "run", &id, "--agent-cmd", &agent])
        .spawn()
        .unwrap();
    assert!(wait_until(30.0, || ready.exists()));
    env.run(&["workflow", "pause", &id]).code(0);
    std::fs::write(env.root.path().join("trace.txt.go"), "").unwrap();
    // The plan worker finishes its state; then the session holds.
    let r = finish_in(&env, child, 120);
    r.code(6);
    assert_eq!(trace(&env), ["plan"]);
    env.run(&["workflow", "resume", &id]).code(0);
    let child = run_cmd(&env, &["workflow", "run", &id]).spawn().unwrap();
    assert!(wait_until(30.0, || !show(&env, &id)["session"]["runs"][1]
        ["worker_pid"]
        .is_null()));
    let t0 = Instant::now();
    env.run(&["workflow", "abort", &id]).code(0);
    finish_in(&env, child, 120).code(10);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the sleeping worker was stopped"
    );
    let s = &show(&env, &id)["session"];
    assert_eq!(s["status"], "aborted");
    assert_eq!(s["runs"][1]["outcome"], "stopped");
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 0);
    env.run(&["workflow", "abort", &id]).code(2);
}

/// A two-state workflow whose plan needs approval, started, with a worker that moves it on.
fn gated() -> (TestEnv, String, String) {
    let env = TestEnv::new();
    template(
        &env,
        "gated",
        r#"{"name":"Gated","initial":"plan","states":{
          "plan":{"persona":"Architect","next":["build"],"requires_approval":true},
          "build":{"persona":"Engineer"}}}"#,
    );
    let agent = worker(
        &env,
        r#"case "$S" in
  plan) $C workflow transition build --summary "the plan" ;;
  build) $C workflow transition done --summary built ;;
esac"#,
    );
    let id = start(&env, "gated");
    (env, id, agent)
}

#[test]
fn workflow_approval_gate_holds_until_approve() {
    let (env, id, agent) = gated();
    let r = supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(5);
    assert!(r.stdout.contains("awaiting_approval"), "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("conductor workflow approve {id}")),
        "{r:?}"
    );
    assert_eq!(trace(&env), ["plan"]);
    // Running again without approval changes nothing.
    supervise(&env, &["workflow", "run", &id]).code(5);
    assert_eq!(trace(&env), ["plan"]);
    // A state with no runs yet costs $0.0000 (not `$-0.0000`).
    let r = env.run(&["workflow", "show", &id]);
    r.code(0);
    assert!(
        r.stdout.contains("$0.0000") && !r.stdout.contains("-0.0"),
        "{r:?}"
    );
    // Nothing runs it: approve says so, and how to run it (issue 25).
    let r = env.run(&["workflow", "approve", &id]);
    r.code(0);
    assert!(!r.stdout.contains("now running"), "{r:?}");
    assert!(
        r.stdout.contains("no supervisor is running it")
            && r.stdout.contains(&format!("conductor workflow run {id}")),
        "{r:?}"
    );
    env.run(&["workflow", "approve", &id]).code(2);
    supervise(&env, &["workflow", "run", &id]).code(0);
    assert_eq!(trace(&env), ["plan", "build"]);
}

#[test]
fn workflow_follow_waits_through_the_approval() {
    let (env, id, agent) = gated();
    let child = run_cmd(
        &env,
        &["workflow", "run", &id, "--follow", "--agent-cmd", &agent],
    )
    .spawn()
    .unwrap();
    assert!(wait_until(30.0, || show(&env, &id)["session"]["status"]
        == "awaiting_approval"));
    let r = env.run(&["workflow", "approve", &id]);
    r.code(0);
    assert!(r.stdout.contains("now running in `plan`"), "{r:?}");
    finish_in(&env, child, 120).code(0);
    assert_eq!(trace(&env), ["plan", "build"]);
}

#[test]
fn workflow_ping_pong_lands_in_human_intervention_on_the_fourth_edge() {
    let env = TestEnv::new();
    template(
        &env,
        "pingpong",
        r#"{"name":"Ping","initial":"a","states":{
          "a":{"persona":"A","next":["b"]},
          "b":{"persona":"B","next":["a","done"]}}}"#,
    );
    let agent = worker(
        &env,
        r#"case "$S" in
  a) $C workflow transition b --summary ping ;;
  b) $C workflow transition a --summary pong ;;
esac"#,
    );
    let id = start(&env, "pingpong");
    let r = supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(7);
    assert_eq!(trace(&env), ["a", "b", "a", "b", "a", "b", "a"]);
    let s = &show(&env, &id)["session"];
    assert_eq!(s["status"], "human_intervention");
    assert!(s["halt"].as_str().unwrap().contains("a->b"), "{s}");
    assert_eq!(s["current_state"], "a");
    // Blocked until resolve: running again does nothing.
    supervise(&env, &["workflow", "run", &id]).code(7);
    assert_eq!(trace(&env).len(), 7);
    env.run(&["workflow", "resolve", &id, "--to", "nowhere"])
        .code(2);
    env.run(&["workflow", "resolve", &id, "--to", "b"]).code(0);
    let agent2 = worker(&env, r#"$C workflow transition done --summary finished"#);
    supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent2]).code(0);
    assert_eq!(trace(&env).last().unwrap(), "b");
}

#[test]
fn workflow_budget_stops_a_session_with_the_figures() {
    let env = TestEnv::new();
    template(
        &env,
        "budget",
        r#"{"name":"B","initial":"a","budget":{"max_cost_usd":10},"states":{
          "a":{"persona":"A","budget":{"max_tokens":500}}}}"#,
    );
    let agent = worker(
        &env,
        r#"$C workflow usage --tokens 300
$C workflow usage --tokens 300 --cost 0.25
sleep 30"#,
    );
    let id = start(&env, "budget");
    let t0 = Instant::now();
    let r = supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(8);
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "the worker was stopped"
    );
    assert!(
        r.stdout.contains("600 tokens of its 500-token budget"),
        "{r:?}"
    );
    // The worker's report that passes the budget exits 8 with the figures.
    let u = env.run_env(
        &["workflow", "usage", "--tokens", "1"],
        &[
            ("CONDUCTOR_WORKFLOW_SESSION", &id),
            ("CONDUCTOR_WORKFLOW_STATE", "a"),
        ],
    );
    u.code(8);
    assert!(
        u.stdout.contains("601 tokens of its 500-token budget"),
        "{u:?}"
    );
    let s = &show(&env, &id)["session"];
    assert_eq!(s["status"], "budget_exceeded");
    assert_eq!(s["totals"]["tokens"], 601);
}

#[test]
fn workflow_sigkilled_supervisor_resumes_without_repeating_a_completed_state() {
    let env = TestEnv::new();
    template(
        &env,
        "two",
        r#"{"name":"Two","initial":"one","states":{
          "one":{"persona":"A","next":["two"]},
          "two":{"persona":"B"}}}"#,
    );
    let agent = worker(
        &env,
        r#"case "$S" in
  one) $C workflow snapshot --finding "found in one"; $C workflow transition two --summary first ;;
  two) if [ ! -e "$TRACE.second" ]; then touch "$TRACE.second"; echo $$ > "$TRACE.pid"; sleep 60; exit 0; fi
       grep -q "found in one" "$1" || exit 40
       grep -q "interrupted" "$1" || exit 41
       $C workflow transition done --summary second ;;
esac"#,
    );
    let id = start(&env, "two");
    let mut sup = run_cmd(&env, &["workflow", "run", &id, "--agent-cmd", &agent])
        .spawn()
        .unwrap();
    let pidfile = env.root.path().join("trace.txt.pid");
    assert!(wait_until(30.0, || std::fs::read_to_string(&pidfile)
        .is_ok_and(|s| s.ends_with('\n'))));
    // The supervisor records the worker's pid right after starting it.
    assert!(wait_until(30.0, || !show(&env, &id)["session"]["runs"][1]
        ["worker_pid"]
        .is_null()));
    sup.kill().unwrap(); // SIGKILL
    sup.wait().unwrap();
    let orphan: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        unsafe { libc::kill(orphan, 0) },
        0,
        "the worker outlived its supervisor"
    );
    let r = supervise(&env, &["workflow", "run", &id]);
    r.code(0);
    assert_eq!(trace(&env), ["one", "two", "two"]);
    assert!(
        wait_until(10.0, || unsafe { libc::kill(orphan, 0) } != 0
            || std::fs::read_to_string(format!("/proc/{orphan}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "the interrupted worker was stopped"
    );
    let s = &show(&env, &id)["session"];
    let outcomes: Vec<&str> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["transitioned", "interrupted", "transitioned"]);
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 0);
}

#[test]
fn workflow_exit_without_transition_is_retried_once_then_needs_a_person() {
    let env = TestEnv::new();
    one_state(&env);
    let agent = worker(
        &env,
        "cp \"$1\" \"prompt-$(wc -l < \"$TRACE\").md\"; exit 1",
    );
    let id = start(&env, "one");
    let r = supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(7);
    assert_eq!(trace(&env), ["a", "a"]);
    let second = std::fs::read_to_string(env.project.join("prompt-2.md")).unwrap();
    assert!(
        second.contains("exited with status 1 without calling"),
        "{second}"
    );
    let s = &show(&env, &id)["session"];
    assert!(s["halt"].as_str().unwrap().contains("twice"), "{s}");
    assert_eq!(s["runs"][1]["exit_code"], 1);
    // A worker command that cannot be run fails the session.
    let id2 = start(&env, "one");
    supervise(
        &env,
        &[
            "workflow",
            "run",
            &id2,
            "--agent-cmd",
            "no-such-agent-cli {prompt_file}",
        ],
    )
    .code(9);
}

/// The template `one`: a single state `a`.
fn one_state(env: &TestEnv) {
    template(
        env,
        "one",
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A"}}}"#,
    );
}

/// A one-state workflow in a project with these damage-control rules.
fn one_state_with_rules(rules: &str) -> TestEnv {
    let env = TestEnv::new();
    one_state(&env);
    std::fs::create_dir_all(env.project.join(".pi")).unwrap();
    std::fs::write(env.project.join(".pi/damage-control-rules.yaml"), rules).unwrap();
    env
}

#[test]
fn workflow_safety_rules_deny_and_log_interceptions() {
    let env = one_state_with_rules(
        "bashToolPatterns:\n  - pattern: '\\brm\\s+-[a-zA-Z]*r'\n    reason: recursive delete is not allowed\nzeroAccessPaths:\n  - .env\n  - ~/.ssh/\n",
    );
    let agent = worker(
        &env,
        r#"$C workflow guard --bash "rm -rf build"; echo "bash $?" >> guard.txt
$C workflow guard --read .env; echo "read $?" >> guard.txt
$C workflow guard --read src/main.rs; echo "ok $?" >> guard.txt
$C workflow transition done --summary checked"#,
    );
    let id = start(&env, "one");
    supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]).code(0);
    assert_eq!(
        std::fs::read_to_string(env.project.join("guard.txt")).unwrap(),
        "bash 4\nread 4\nok 0\n"
    );
    let s = &show(&env, &id)["session"];
    let hits: Vec<&Value> = s["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "intercepted")
        .collect();
    assert_eq!(hits.len(), 2, "{s}");
    assert_eq!(
        hits[0]["detail"]["decision"]["reason"],
        "recursive delete is not allowed"
    );
    assert_eq!(hits[1]["detail"]["call"]["tool"], "read");
    let allowed: Vec<&Value> = s["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_call")
        .collect();
    assert_eq!(allowed.len(), 1, "the allowed call is checkpointed too");
    assert_eq!(allowed[0]["detail"]["call"]["path"], "src/main.rs");
    assert!(
        std::fs::read_to_string(env.home_file("events.jsonl"))
            .unwrap()
            .contains("workflow.intercepted")
    );
}

/// Globs are `globset`'s: character classes match, and a pattern full of stars answers (the
/// hand-written matcher took exponential time on it) within a generous bound.
#[test]
fn workflow_rules_globs_have_classes_and_never_hang() {
    let stars = format!("{}b", "*a".repeat(30));
    let env = one_state_with_rules(&format!(
        "zeroAccessPaths:\n  - 'secret[0-9].txt'\n  - '*.[pP][eE][mM]'\n  - '{stars}'\n"
    ));
    let id = start(&env, "one");
    let guard = |path: &str| {
        let child = run_cmd(
            &env,
            &["workflow", "guard", "--session", &id, "--read", path],
        )
        .spawn()
        .unwrap();
        finish_in(&env, child, 20)
    };
    guard("secret4.txt").code(4);
    guard("certs/server.PEM").code(4);
    guard("secretX.txt").code(0);
    guard(&format!("src/{}", "a".repeat(200))).code(0);
}

#[test]
fn workflow_bad_input_is_a_clear_error_and_changes_nothing() {
    let env = TestEnv::new();
    template(
        &env,
        "one",
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A","next":["b"]},"b":{"persona":"B"}}}"#,
    );
    let id = start(&env, "one");
    let before = env.snapshot();
    let broken = env.project.join(".conductor/workflows/broken.json");
    std::fs::write(
        &broken,
        r#"{"name":"X","initial":"plan","states":{
          "plan":{"persona":"A","next":["biuld"]},
          "orphan":{"persona":"B","next":["done"]},
          "spin":{"persona":"C","next":["spin"]}}}"#,
    )
    .unwrap();
    let v = env.run(&["workflow", "validate", broken.to_str().unwrap()]);
    v.code(2);
    assert!(
        v.stdout
            .contains("/states/plan/next/0: `next` names an unknown state `biuld`"),
        "{v:?}"
    );
    assert!(
        v.stdout
            .contains("/states/orphan: state `orphan` cannot be reached"),
        "{v:?}"
    );
    assert!(
        v.stdout
            .contains("/states/spin/next: state `spin` has no way to finish"),
        "{v:?}"
    );
    let v = env.run(&["--json", "workflow", "validate", broken.to_str().unwrap()]);
    assert_eq!(v.json()["problems"].as_array().unwrap().len(), 5, "{v:?}");
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["workflow", "start", "broken", "t"],
            vec![],
            "is invalid",
        ),
        (
            vec!["workflow", "start", "missing", "t"],
            vec![],
            "no workflow template `missing`",
        ),
        (
            vec!["workflow", "show", "wf-nope"],
            vec![],
            "no live workflow session",
        ),
        (
            vec!["workflow", "approve", &id],
            vec![],
            "not awaiting_approval",
        ),
        (
            vec!["workflow", "transition", "done", "--summary", "x"],
            vec![("CONDUCTOR_WORKFLOW_SESSION", &id)],
            "allowed: b",
        ),
        (
            vec!["workflow", "transition", "b", "--summary", "x"],
            vec![
                ("CONDUCTOR_WORKFLOW_SESSION", &id),
                ("CONDUCTOR_WORKFLOW_STATE", "b"),
            ],
            "is in state `a`, not `b`",
        ),
        (
            vec!["workflow", "transition", "b", "--summary", "x"],
            vec![],
            "no workflow session",
        ),
        (
            vec!["workflow", "usage", "--tokens", "5"],
            vec![("CONDUCTOR_WORKFLOW_SESSION", &id)],
            "has not started a worker",
        ),
        (
            vec!["workflow", "snapshot"],
            vec![("CONDUCTOR_WORKFLOW_SESSION", &id)],
            "nothing to record",
        ),
        (
            vec!["workflow", "run", &id],
            vec![],
            "run `conductor integrate pi",
        ),
    ];
    for (args, envs, msg) in cases {
        let r = env.run_env(&args, &envs);
        r.code(2);
        assert!(r.stderr.contains(msg), "{args:?}: {r:?}");
        assert_eq!(
            r.stderr.lines().next().unwrap().matches("error:").count(),
            1
        );
    }
    // A rules file that does not parse stops `start`.
    std::fs::create_dir_all(env.project.join(".pi")).unwrap();
    std::fs::write(
        env.project.join(".pi/damage-control-rules.yaml"),
        "zeroAcessPaths: [.env]\n",
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "one", "t"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "invalid_rules");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `zeroAcessPaths`")
    );
    // So does a bad glob or a bad regex: one line naming the rule.
    for (rules, says) in [
        (
            "zeroAccessPaths: [.env, 'secret[0-9.txt']\n",
            "zeroAccessPaths[1] `secret[0-9.txt` is not a valid glob",
        ),
        (
            "bashToolPatterns:\n  - pattern: 'rm (-r'\n    reason: r\n",
            "bashToolPatterns[0].pattern `rm (-r` is not a valid regex: unclosed group",
        ),
    ] {
        std::fs::write(env.project.join(".pi/damage-control-rules.yaml"), rules).unwrap();
        let r = env.run(&["workflow", "start", "one", "t"]);
        r.code(2);
        assert!(r.stderr.contains(says), "{r:?}");
        let error_lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| !l.trim_start().starts_with("hint:"))
            .collect();
        assert_eq!(error_lines.len(), 1, "{r:?}");
    }
    // A broken agent file stops `start` too.
    std::fs::remove_file(env.project.join(".pi/damage-control-rules.yaml")).unwrap();
    std::fs::create_dir_all(env.project.join(".pi/agents")).unwrap();
    std::fs::write(
        env.project.join(".pi/agents/A.md"),
        "---\nname: [\n---\nbody",
    )
    .unwrap();
    let r = env.run(&["workflow", "start", "one", "t"]);
    r.code(2);
    assert!(r.stderr.contains("bad front matter"), "{r:?}");
    assert_eq!(env.snapshot(), before, "files are byte-identical");
}

#[test]
fn workflow_templates_are_found_in_the_project_then_the_home() {
    let env = TestEnv::new();
    template(&env, "feature", FEATURE);
    std::fs::create_dir_all(env.home.join("workflows")).unwrap();
    std::fs::write(env.home.join("workflows/feature.json"), FEATURE).unwrap();
    std::fs::write(
        env.home.join("workflows/solo.json"),
        r#"{"name":"Solo","initial":"a","states":{"a":{"persona":"A"}}}"#,
    )
    .unwrap();
    std::fs::write(env.home.join("workflows/bad.json"), "{").unwrap();
    let r = env.run(&["--json", "workflow", "templates"]);
    r.code(0);
    let t = r.json()["templates"].as_array().unwrap().clone();
    let names: Vec<(&str, bool)> = t
        .iter()
        .map(|x| {
            (
                x["name"].as_str().unwrap(),
                x["shadowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("feature", false),
            ("bad", false),
            ("feature", true),
            ("solo", false)
        ]
    );
    assert!(t[1]["problem"].as_str().unwrap().contains("not valid JSON"));
    let id = start(&env, "solo");
    assert!(
        show(&env, &id)["session"]["template_file"]
            .as_str()
            .unwrap()
            .contains("home/workflows/solo.json")
    );
    let readme = readme_template();
    let path = env.root.path().join("readme.json");
    std::fs::write(&path, readme).unwrap();
    env.run(&["workflow", "validate", path.to_str().unwrap()])
        .code(0);
}

/// The template in docs/workflows.md.
fn readme_template() -> String {
    let readme = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/workflows.md"),
    )
    .unwrap();
    let at = readme
        .find("# Workflows")
        .expect("docs/workflows.md has a Workflows section");
    let rest = &readme[at..];
    let fence = rest.find("```json").expect("with a JSON template");
    let start = fence + rest[fence..].find('\n').unwrap() + 1;
    let end = rest[start..].find("```").unwrap();
    rest[start..start + end].to_string()
}

#[test]
fn workflow_help_teaches() {
    let env = TestEnv::new();
    let r = env.run(&["workflow", "run", "--help"]);
    r.code(0);
    for s in [
        "{prompt_file}",
        "CONDUCTOR_WORKFLOW_SESSION",
        "awaiting_approval",
        "human_intervention",
        "budget_exceeded",
    ] {
        assert!(r.stdout.contains(s), "{s}");
    }
    let _ = Path::new("");
}

/// Check a value against `schemas/workflows.schema.json` (`pointer`: a definition in it, like
/// `#/$defs/session`, or `""` for the whole document).
#[track_caller]
fn assert_ledger_schema(v: &Value, pointer: &str) {
    let base = "https://conductor.invalid/schemas/";
    let tpl: Value =
        serde_json::from_str(include_str!("../../schemas/workflow-template.schema.json")).unwrap();
    let root: Value =
        serde_json::from_str(include_str!("../../schemas/workflows.schema.json")).unwrap();
    let registry = jsonschema::Registry::new()
        .add(format!("{base}workflow-template.schema.json"), tpl)
        .unwrap()
        .add(format!("{base}workflows.schema.json"), root)
        .unwrap()
        .prepare()
        .unwrap();
    let schema = serde_json::json!({"$ref": format!("{base}workflows.schema.json{pointer}")});
    let validator = jsonschema::options()
        .with_registry(&registry)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the ledger schema rejects what was written: {errors:#?}"
    );
}

#[test]
fn workflow_ledger_matches_its_published_schema() {
    let env = TestEnv::new();
    template(&env, "feature", FEATURE);
    let agent = worker(
        &env,
        r#"case "$S" in
  plan) $C workflow snapshot --finding f --pending p --set k=v --file a.rs
        $C workflow usage --tokens 5 --cost 0.01
        $C workflow transition build --summary p ;;
  build) exit 1 ;;
esac"#,
    );
    let id = start(&env, "feature");
    let live = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(env.home_file("workflows.json")).unwrap())
            .unwrap()
    };
    assert_ledger_schema(&live(), "");
    supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]).code(7);
    assert_ledger_schema(&live(), "");
    env.run(&["workflow", "abort", &id]).code(0);
    let finished = read_lines(&env.home_file("workflows-finished.jsonl"));
    let s: Value = serde_json::from_str(&finished[0]).unwrap();
    assert_eq!(s["status"], "aborted");
    assert_ledger_schema(&s, "#/$defs/session");
}

#[test]
fn workflow_sigterm_stops_the_supervisor_and_its_worker_cleanly() {
    let env = TestEnv::new();
    one_state(&env);
    let agent = worker(
        &env,
        r#"if [ ! -e "$TRACE.once" ]; then touch "$TRACE.once"; echo $$ > "$TRACE.pid"; sleep 60; exit 0; fi
$C workflow transition done --summary finished"#,
    );
    let id = start(&env, "one");
    let sup = run_cmd(&env, &["workflow", "run", &id, "--agent-cmd", &agent])
        .spawn()
        .unwrap();
    let pidfile = env.root.path().join("trace.txt.pid");
    assert!(wait_until(30.0, || std::fs::read_to_string(&pidfile)
        .is_ok_and(|s| s.ends_with('\n'))));
    let worker_pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(sup.id() as i32, libc::SIGTERM) };
    let r = finish_in(&env, sup, 60);
    r.code(130);
    assert!(r.stderr.contains("to resume"), "{r:?}");
    assert!(
        wait_until(10.0, || unsafe { libc::kill(worker_pid, 0) } != 0
            || std::fs::read_to_string(format!("/proc/{worker_pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "the worker was stopped with its supervisor"
    );
    assert_eq!(
        show(&env, &id)["session"]["runs"][0]["outcome"],
        "interrupted"
    );
    supervise(&env, &["workflow", "run", &id]).code(0);
    assert_eq!(trace(&env), ["a", "a"]);
}

#[test]
fn workflow_rules_are_enforced_by_the_agent_hook_for_workers() {
    let env = one_state_with_rules(
        "bashToolPatterns:\n  - pattern: '\\brm\\s+-[a-zA-Z]*r'\n    reason: recursive delete is not allowed\nzeroAccessPaths:\n  - .env\n",
    );
    // The worker is an agent whose PreToolUse hook is `conductor hook claude`: it feeds the hook
    // the payloads Claude Code would, with the environment the supervisor gave it.
    let agent = worker(
        &env,
        r#"echo '{"session_id":"w1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf build"}}' | $C hook claude > hook-bash.json
echo '{"session_id":"w1","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":".env"}}' | $C hook claude > hook-read.json
echo '{"session_id":"w1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}' | $C hook claude > hook-ok.json
$C workflow transition done --summary checked"#,
    );
    let id = start(&env, "one");
    supervise(&env, &["workflow", "run", &id, "--agent-cmd", &agent]).code(0);
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(env.project.join(name)).unwrap();
        serde_json::from_str(text.trim()).unwrap_or(Value::Null)
    };
    let bash = read("hook-bash.json");
    assert_eq!(
        bash["hookSpecificOutput"]["permissionDecision"], "deny",
        "{bash}"
    );
    assert!(
        bash["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("recursive delete is not allowed"),
        "{bash}"
    );
    assert_eq!(
        read("hook-read.json")["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    let ok = read("hook-ok.json");
    assert_ne!(
        ok["hookSpecificOutput"]["permissionDecision"], "deny",
        "{ok}"
    );
    let s = &show(&env, &id)["session"];
    let hits = s["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "intercepted")
        .count();
    assert_eq!(
        hits, 2,
        "both interceptions are in the session's ledger: {s}"
    );
}
