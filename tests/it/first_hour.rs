//! The first hour of a new user (issue 25): `queue retry` runs a job as it ran, "could not
//! start" names the program, exit codes, read-only commands and the help tell the truth.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::TestEnv;

/// A stand-in agent that fails while `$1.fail` exists next to it, and records each start.
fn agent(env: &TestEnv) -> PathBuf {
    let dir = env.dir("bin");
    let a = dir.join("agent.sh");
    std::fs::write(
        &a,
        "#!/bin/sh\ncat >/dev/null\necho \"start $1 $2\" >> \"$(dirname \"$0\")/trace\"\n\
         if [ -f \"$(dirname \"$0\")/$1.fail\" ]; then exit 3; fi\n\
         mkdir -p \"$CONDUCTOR_QUEUE_OUTPUT\"\necho ok > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o755)).unwrap();
    a
}

fn submit(env: &TestEnv, jobs: Value) {
    env.run_stdin(
        &["queue", "submit", "-"],
        &json!({"workspace": "w", "jobs": jobs}).to_string(),
    )
    .code(0);
}

fn job(env: &TestEnv, id: &str) -> Value {
    let q: Value =
        serde_json::from_slice(&std::fs::read(env.home.join("queue.json")).unwrap()).unwrap();
    q["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

fn trace(a: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(a.parent().unwrap().join("trace"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn retry_runs_the_job_with_the_agent_command_and_runner_it_ran_with() {
    let env = TestEnv::new();
    let a = agent(&env);
    std::fs::write(a.parent().unwrap().join("a.fail"), "").unwrap();
    submit(
        &env,
        json!([{"id": "a", "prompt": "p"}, {"id": "b", "prompt": "p", "depends_on": ["a"]}]),
    );
    let cmd = format!("{} {{job}} first", a.display());
    // A template runner: the job runs through `sh -c` of the template.
    let runner = "sh -c {cmd}";
    let r = env.run(&["queue", "run", "--runner", runner, "--agent-cmd", &cmd]);
    r.code(5);
    assert_eq!(job(&env, "a")["state"]["state"], "failed");
    assert_eq!(trace(&a), ["start a first"], "{r:?}");
    assert_eq!(job(&env, "a")["state"]["runner"], "template");
    assert_eq!(job(&env, "a")["ran_with"]["agent_cmd"], cmd.as_str());
    assert_eq!(job(&env, "a")["ran_with"]["runner"], runner);
    let show = env.run(&["queue", "show", "a"]);
    assert!(
        show.stdout
            .contains("ran with   --runner 'sh -c {cmd}' --agent-cmd '"),
        "{show:?}"
    );
    let q: Value =
        serde_json::from_slice(&std::fs::read(env.home.join("queue.json")).unwrap()).unwrap();
    conductor::queue::validate_doc(&q).unwrap();

    // Retried with no options: the same agent command (not the default `opencode ...`).
    std::fs::remove_file(a.parent().unwrap().join("a.fail")).unwrap();
    let r = env.run(&["queue", "retry", "a"]);
    r.code(0);
    assert!(r.stdout.contains("2 completed"), "{r:?}");
    assert!(
        r.stderr.contains("as it last ran") && r.stderr.contains(&cmd),
        "it says how it runs them: {r:?}"
    );
    assert_eq!(
        trace(&a),
        ["start a first", "start a first", "start b first"],
        "{r:?}"
    );

    // Told otherwise, it runs as told.
    std::fs::write(a.parent().unwrap().join("c.fail"), "").unwrap();
    submit(&env, json!([{"id": "c", "prompt": "p"}]));
    env.run(&["queue", "run", "--agent-cmd", &cmd]).code(5);
    std::fs::remove_file(a.parent().unwrap().join("c.fail")).unwrap();
    let other = format!("{} {{job}} second", a.display());
    env.run(&["queue", "retry", "c", "--agent-cmd", &other])
        .code(0);
    assert_eq!(trace(&a)[3..], ["start c first", "start c second"]);
}

#[test]
fn a_job_whose_program_is_missing_fails_naming_the_program() {
    let env = TestEnv::new();
    submit(&env, json!([{"id": "a", "prompt": "p"}]));
    // Run directly (plain words) and through the shell (quoted placeholders).
    for (cmd, n) in [
        ("no-such-agent-xyz run", 1),
        ("no-such-agent-xyz run --agent {agent}", 2),
    ] {
        let r = env.run(&["queue", "run", "--agent-cmd", cmd]);
        r.code(5);
        let show = env.run(&["queue", "show", "a"]);
        assert!(
            show.stdout
                .contains("could not start the job: `no-such-agent-xyz`"),
            "{n}: {show:?}"
        );
        // The retry runs the same command and says the same.
        let r = env.run(&["queue", "retry", "a"]);
        r.code(5);
        let show = env.run(&["queue", "show", "a"]);
        assert!(show.stdout.contains("`no-such-agent-xyz`"), "{n}: {show:?}");
        env.run(&["queue", "cancel", "a"]);
        submit(&env, json!([{"id": "a", "prompt": "p"}]));
    }
}

#[test]
fn a_read_only_command_with_a_mistyped_home_creates_nothing() {
    let env = TestEnv::new();
    let typo = env.root.path().join("hom").join("e");
    let typo_s = typo.to_str().unwrap();
    for args in [
        &["status"][..],
        &["queue", "jobs"],
        &["workflow", "list"],
        &["history"],
        &["agent", "list"],
    ] {
        let mut all = vec!["--home", typo_s];
        all.extend_from_slice(args);
        let r = env.run(&all);
        r.code(2);
        assert!(r.error_and_hint(), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("no conductor home at") && r.stderr.contains(typo_s),
            "{args:?}: {r:?}"
        );
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let r = env.run_env(&all, &[("CONDUCTOR_HOME", typo_s)]);
        assert_eq!(r.json()["reason"], "no_home", "{r:?}");
        assert!(!env.root.path().join("hom").exists(), "{args:?} created it");
    }
    // A command that records something creates the home, as before.
    env.run(&["--home", typo_s, "start", "t", "--priority", "P1"])
        .code(0);
    env.run(&["--home", typo_s, "status"]).code(0);
}

#[test]
fn the_usage_line_does_not_show_options_set_from_the_environment() {
    let env = TestEnv::new();
    // TestEnv sets CONDUCTOR_HOME; add the store and the lock timeout too.
    let r = env.run_env(
        &["claim"],
        &[("CONDUCTOR_STORE", ""), ("CONDUCTOR_LOCK_TIMEOUT", "2")],
    );
    r.code(2);
    // One line of error, one of hint: the hint carries the usage line.
    let usage = r
        .stderr
        .lines()
        .find(|l| l.starts_with("hint: usage:"))
        .unwrap_or_default();
    assert_eq!(
        usage, "hint: usage: conductor claim <FILE>... (more in `conductor claim --help`)",
        "{r:?}"
    );
    // The same for a command's own options (the shell integration sets CONDUCTOR_OWNER_PID).
    let r = env.run_env(&["start"], &[("CONDUCTOR_OWNER_PID", "1")]);
    r.code(2);
    assert!(
        r.stderr.contains("usage: conductor start <TASK> ("),
        "{r:?}"
    );
    // The variables are still read: a bad timeout is a usage error naming the variable, and
    // the option wins over it.
    let r = env.run_env(&["--json", "status"], &[("CONDUCTOR_LOCK_TIMEOUT", "soon")]);
    r.code(2);
    assert_eq!(r.json()["reason"], "usage");
    assert!(r.stderr.contains("CONDUCTOR_LOCK_TIMEOUT"), "{r:?}");
    env.run_env(
        &["start", "u", "--lock-timeout", "1"],
        &[("CONDUCTOR_LOCK_TIMEOUT", "soon")],
    )
    .code(0);
    // The variable still names the home.
    env.run(&["start", "t", "--priority", "P1"]).code(0);
    assert!(env.home.join("status.json").exists());
}

#[test]
fn queue_run_exits_5_when_jobs_failed_or_timed_out() {
    let env = TestEnv::new();
    let a = agent(&env);
    std::fs::write(a.parent().unwrap().join("f.fail"), "").unwrap();
    submit(
        &env,
        json!([{"id": "f", "prompt": "p"}, {"id": "ok", "prompt": "p"},
               {"id": "slow", "prompt": "p", "timeout_minutes": 0.002}]),
    );
    let cmd = format!(
        "if test {{job}} = slow; then sleep 30; fi; {} {{job}}",
        a.display()
    );
    let r = env.run(&["--json", "queue", "run", "--agent-cmd", &cmd]);
    r.code(5);
    assert_eq!(r.json()["status"], "incomplete", "{r:?}");
    assert_eq!(r.json()["ended"]["failed"], 1, "{r:?}");
    assert_eq!(r.json()["ended"]["timed_out"], 1, "{r:?}");
    // A second run starts nothing, and still says they are stuck.
    env.run(&["queue", "run", "--agent-cmd", &cmd]).code(5);
}

#[test]
fn the_man_page_refers_only_to_what_exists() {
    let env = TestEnv::new();
    let r = env.run(&["man"]);
    r.code(0);
    assert!(!r.stdout.contains("conductor\\-claim(1)"), "{}", r.stdout);
    assert!(!r.stdout.contains("(1)"), "a page that is not installed");
    // Every command it names is one: its --help works.
    let named: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("\\fBconductor "))
        .filter_map(|l| l.split("\\fR").next())
        .filter(|s| *s != "COMMAND \\-\\-help")
        .map(|s| s.replace("\\-", "-"))
        .collect();
    assert!(
        named.len() > 20 && named.contains(&"shell-init".to_string()),
        "{named:?}"
    );
    for sub in &named {
        let help = if sub == "help" { "claim" } else { "--help" };
        env.run(&[sub.as_str(), help]).code(0);
    }
}

#[test]
fn start_defaults_to_priority_p2() {
    let env = TestEnv::new();
    let r = env.run(&["--json", "start", "fix the build"]);
    r.code(0);
    let st = env.state();
    assert_eq!(st["instances"][0]["priority"], "P2", "{st}");
}

#[test]
fn registering_an_agent_again_keeps_its_watch_list_handle_and_user_id() {
    let env = TestEnv::new();
    env.run(&[
        "agent",
        "register",
        "scout",
        "--handle",
        "@sc",
        "--user-id",
        "u-1",
        "--watch",
        "ops",
        "--watch",
        "review",
    ])
    .code(0);
    let r = env.run(&["agent", "register", "scout"]);
    r.code(0);
    assert!(r.stdout.contains("watching ops, review"), "{r:?}");
    let list = env.run(&["--json", "agent", "list"]).json();
    let a = &list["agents"][0];
    assert_eq!(a["watch"], json!(["ops", "review"]), "{list}");
    assert_eq!(a["handle"], "@sc", "{list}");
    assert_eq!(a["user_id"], "u-1", "{list}");
    // Given, --watch replaces the list.
    env.run(&["agent", "register", "scout", "--watch", "dev"])
        .code(0);
    let list = env.run(&["--json", "agent", "list"]).json();
    assert_eq!(list["agents"][0]["watch"], json!(["dev"]), "{list}");
}

#[test]
fn integrate_with_project_alone_means_the_current_directory() {
    let env = TestEnv::new();
    let r = env.run(&["integrate", "claude", "--project"]);
    r.code(0);
    assert!(env.project.join(".claude/settings.json").is_file(), "{r:?}");
    assert!(!env.project.join("claude").exists());
}
