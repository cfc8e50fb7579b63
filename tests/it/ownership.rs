//! Issue 37 item 1 and issue 34 section 2: a command never acts on someone else's session, and
//! one `claim --wait` is granted at most once.
//!
//! Sessions are started by separate OS processes in separate POSIX sessions (`setsid`, as two
//! terminals are), and the waiter is frozen with SIGSTOP to make the interleaving certain.

use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::common::TestEnv;

/// `conductor start` run from another terminal: a new POSIX session (util-linux `setsid`),
/// owned by a long-lived process of that session, as an agent's registration would be.
fn start_elsewhere(env: &TestEnv, task: &str) -> (String, Child) {
    let owner = Command::new("setsid")
        .args(["--fork", "sleep", "300"])
        .stdin(Stdio::null())
        .spawn()
        .expect("setsid (util-linux) must be installed");
    let out = env.run_cmd(
        Command::new("setsid")
            .arg("--wait")
            .arg(crate::common::bin())
            .args(["--json", "start", task, "--priority", "P1"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.root.path())
            .env("CONDUCTOR_WATCH_EDITS", "0")
            .env("CONDUCTOR_HOME", &env.home)
            .current_dir(&env.project)
            .stdin(Stdio::null()),
    );
    out.code(0);
    let id = out.json()["instance_id"].as_str().unwrap().to_string();
    (id, owner)
}

fn live(env: &TestEnv, id: &str) -> bool {
    env.instance(id).is_some()
}

#[test]
fn done_without_instance_never_finishes_a_session_started_in_another_terminal() {
    let env = TestEnv::new();
    let (agent, mut owner) = start_elsewhere(&env, "agent holds src");
    env.run(&["claim", "--instance", &agent, "src/"]).code(0);
    let before = env.snapshot();

    // The only session working here is the other terminal's: refused, and named with the
    // `--instance` to pass.
    let r = env.run(&["--json", "done"]);
    r.code(2);
    let err: Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|_| {
        serde_json::from_str(r.stderr.lines().last().unwrap_or("")).unwrap_or_default()
    });
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(
        text.contains(&format!("--instance {agent}")),
        "the refusal shows the --instance to pass: {r:#?}"
    );
    assert_eq!(err["reason"], "ambiguous_instance", "{r:#?}");
    assert!(
        live(&env, &agent),
        "the other terminal's session is still live"
    );
    assert_eq!(before, env.snapshot(), "a refused done changes no file");

    // A claim and a release from here are refused the same way.
    env.run(&["claim", "src/x.rs"]).code(2);
    env.run(&["release", "--all"]).code(2);
    assert!(live(&env, &agent));

    // Named explicitly, it is finished: the person said which one.
    env.run(&["done", "--instance", &agent]).code(0);
    assert!(!live(&env, &agent));
    owner.kill().ok();
    owner.wait().ok();
}

#[test]
fn done_by_directory_finishes_the_session_this_terminal_started() {
    let env = TestEnv::new();
    let (agent, mut owner) = start_elsewhere(&env, "the agent's task");
    // This test process's own session (same POSIX session as the `start` below).
    let mine = env.start("my task", "P2");
    env.run(&["claim", "src/mine.rs"]).code(0);
    let r = env.run(&["--json", "done"]);
    r.code(0);
    assert_eq!(r.json()["instance_id"], mine.as_str());
    assert!(
        live(&env, &agent),
        "the other terminal's session is untouched"
    );
    owner.kill().ok();
    owner.wait().ok();
}

/// The reported case: with the shell integration, the first `done` unsets the id; pressing
/// up-arrow and running it again must not end the agent's P1 session holding `src/`.
#[test]
fn a_repeated_done_in_the_shell_integration_names_the_finished_session() {
    let env = TestEnv::new();
    let (agent, mut owner) = start_elsewhere(&env, "agent P1 holding src");
    env.run(&["claim", "--instance", &agent, "src/"]).code(0);
    let script = r#"
        eval "$(conductor shell-init bash)"
        conductor start "my own task" --priority P2 >/dev/null || exit 90
        mine=$CONDUCTOR_INSTANCE_ID
        [ -n "$mine" ] || exit 91
        conductor done >/dev/null || exit 92
        [ -z "$CONDUCTOR_INSTANCE_ID" ] || exit 93
        conductor done
        echo "second-rc=$? mine=$mine"
    "#;
    let bindir = crate::common::bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bindir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = env.run_cmd(
        Command::new("bash")
            .args(["-c", script])
            .env_clear()
            .env("PATH", path)
            .env("HOME", env.root.path())
            .env("CONDUCTOR_WATCH_EDITS", "0")
            .env("CONDUCTOR_HOME", &env.home)
            .current_dir(&env.project),
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let mine = r
        .stdout
        .split("mine=")
        .nth(1)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    assert!(r.stdout.contains("second-rc=2"), "{r:#?}");
    assert!(
        r.stderr.contains(&format!("{mine} already finished")),
        "the second done names the finished session: {r:#?}"
    );
    assert!(
        live(&env, &agent),
        "the agent's session survived the repeated done"
    );
    assert_eq!(
        env.state()["global_claims"][format!("{}/", env.abs("src"))],
        agent.as_str()
    );
    owner.kill().ok();
    owner.wait().ok();
}

#[test]
fn done_of_a_finished_instance_is_a_harmless_error_that_names_it() {
    let env = TestEnv::new();
    let a = env.start("finish me", "P1");
    env.run(&["done", "--instance", &a]).code(0);
    let before = env.snapshot();
    let r = env.run(&["--json", "done", "--instance", &a]);
    r.code(2);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(text.contains("already_finished"), "{r:#?}");
    assert!(
        text.contains(&format!("{a} already finished (success")),
        "{r:#?}"
    );
    assert_eq!(before, env.snapshot());
    assert_eq!(env.history().len(), 1, "no second history line");
}

/// Issue 34's history: A holds f; B waits; A releases and f is handed to B while B's process is
/// frozen; C forces f away and releases it. B's one request was granted once: it must say so
/// and not take f again.
fn spawn_waiter(env: &TestEnv, id: &str, wait: &str) -> Child {
    env.cmd()
        .args(["--json", "claim", "--instance", id, wait, "src/f.rs"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn waiting(env: &TestEnv, id: &str) -> bool {
    env.instance(id)
        .is_some_and(|i| i["waiting_for"].as_array().is_some_and(|w| !w.is_empty()))
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

fn holder(env: &TestEnv) -> Value {
    env.state()["global_claims"][env.abs("src/f.rs")].clone()
}

fn regrab_scenario(wait: &str, c_releases: bool) {
    let env = TestEnv::new();
    let a = env.start("A holds f", "P1");
    let b = env.start("B waits", "P1");
    let c = env.start("C forces", "P1");
    env.run(&["claim", "--instance", &a, "src/f.rs"]).code(0);
    let mut waiter = spawn_waiter(&env, &b, wait);
    // "Waiting for ..." is printed once the first step's transaction is over and its lock
    // released: freezing B before that would freeze the lock with it.
    let mut err = std::io::BufReader::new(waiter.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("Waiting for") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0,
            "B ended before waiting"
        );
    }
    assert!(waiting(&env, &b), "B queued");
    signal(&waiter, "-STOP");
    env.run(&["release", "--instance", &a, "src/f.rs"]).code(0);
    assert_eq!(holder(&env), b.as_str(), "handed to B inside A's release");
    env.run(&["claim", "--instance", &c, "--force", "take it", "src/f.rs"])
        .code(0);
    if c_releases {
        env.run(&["release", "--instance", &c, "src/f.rs"]).code(0);
    }
    signal(&waiter, "-CONT");
    let out = waiter.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    crate::common::assert_schema(conductor::schema::Schema::Output, &v);
    assert_eq!(v["lost"][0]["by"], c.as_str(), "{v}");
    assert_eq!(v["lost"][0]["how"], "forced: take it", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains(&format!(
            "granted, then taken over by {c} (forced: take it)"
        )),
        "{v}"
    );
    if c_releases {
        assert_eq!(holder(&env), Value::Null, "B did not take f again");
    } else {
        assert_eq!(holder(&env), c.as_str(), "the forcer keeps it");
    }
    assert!(
        env.instance(&b).unwrap()["files_claimed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let regrants = std::fs::read_to_string(env.home_file("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("claim.granted") && l.contains(&b))
        .count();
    assert_eq!(regrants, 1, "B was granted f exactly once");
}

#[test]
fn a_waiter_whose_grant_was_forced_away_and_released_does_not_grab_it_again() {
    regrab_scenario("--wait=30s", true);
}

#[test]
fn a_waiter_whose_grant_the_forcer_still_holds_says_it_was_taken_over() {
    regrab_scenario("--wait=30s", false);
}

#[test]
fn an_unbounded_waiter_returns_at_once_when_its_grant_was_taken_away() {
    regrab_scenario("--wait", true);
}

/// Issue 34 section 3: every grant takes a fencing token that only grows; `check --token N
/// PATH` tells a writer outside an agent whether N is still the current grant.
#[test]
fn fencing_tokens_grow_per_grant_and_check_refuses_a_stale_holder() {
    let env = TestEnv::new();
    let a = env.start("first holder", "P1");
    let b = env.start("second holder", "P1");
    let r = env.run(&["--json", "claim", "--instance", &a, "src/"]);
    r.code(0);
    let v = r.json();
    crate::common::assert_schema(conductor::schema::Schema::Output, &v);
    let dir = format!("{}/", env.abs("src"));
    let t1 = v["tokens"][&dir]
        .as_u64()
        .expect("claim --json names the token");
    assert_eq!(
        env.instance(&a).unwrap()["claim_tokens"][&dir].as_u64(),
        Some(t1),
        "status.json keeps it"
    );
    // Current: the file is inside the directory claim.
    let ok = env.run(&["--json", "check", "--token", &t1.to_string(), "src/auth.rs"]);
    ok.code(0);
    crate::common::assert_schema(conductor::schema::Schema::Output, &ok.json());
    assert_eq!(ok.json()["current"], true);

    // A cleans up after missing heartbeats (reaped by name here), B takes the file.
    env.run(&["cleanup", "--instance", &a]).code(0);
    let r = env.run(&["--json", "claim", "--instance", &b, "src/auth.rs"]);
    r.code(0);
    let t2 = r.json()["tokens"][env.abs("src/auth.rs")].as_u64().unwrap();
    assert!(t2 > t1, "tokens only grow: {t1} then {t2}");
    let stale = env.run(&["check", "--token", &t1.to_string(), "src/auth.rs"]);
    stale.code(3);
    assert!(
        stale.stdout.contains(&format!("STALE: token {t1}")) && stale.stdout.contains(&b),
        "{stale:#?}"
    );
    env.run(&["check", "--token", &t2.to_string(), "src/auth.rs"])
        .code(0);
    // Released: nobody holds it.
    env.run(&["release", "--instance", &b, "src/auth.rs"])
        .code(0);
    let gone = env.run(&["check", "--token", &t2.to_string(), "src/auth.rs"]);
    gone.code(3);
    assert!(gone.stdout.contains("nobody holds it now"), "{gone:#?}");
}

/// In a container the terminal's session leader lives outside the pid namespace and `getsid`
/// answers 0 (CI machines and `docker exec` without a tty run this way). Commands from one
/// shell there still act on the session it started by directory, and a session started with
/// `setsid` inside the container is still someone else's.
#[test]
fn inside_a_pid_namespace_one_shell_is_one_terminal() {
    let env = TestEnv::new();
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        crate::common::missing(
            "root",
            "`unshare --pid --fork --mount-proc` is not permitted",
        );
        return;
    }
    let bin = crate::common::bin();
    let script = r#"
        set -e
        other=$(setsid --wait "$C" --json start "another shell's task" --priority P1 | jq -r .instance_id)
        "$C" claim --instance "$other" src/theirs.rs >/dev/null
        mine=$("$C" --json start "my task" --priority P2 | jq -r .instance_id)
        "$C" --json claim src/mine.rs | jq -r .status
        "$C" --json done | jq -r .instance_id
        echo "mine=$mine other=$other"
        setsid --wait "$C" --json done 2>/dev/null | jq -r .reason || true
    "#;
    let out = env.run_cmd(
        Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "sh", "-c", script])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.root.path())
            .env("CONDUCTOR_WATCH_EDITS", "0")
            .env("CONDUCTOR_HOME", &env.home)
            .env("C", &bin)
            .current_dir(&env.project)
            .stdin(Stdio::null()),
    );
    out.code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let ids = lines[2].to_string();
    let mine = ids
        .split_whitespace()
        .next()
        .unwrap()
        .trim_start_matches("mine=");
    let other = ids
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_start_matches("other=");
    assert_eq!(
        lines[0], "ok",
        "a claim by directory from the same shell: {out:#?}"
    );
    assert_eq!(
        lines[1], mine,
        "done by directory ends this shell's session: {out:#?}"
    );
    assert_eq!(
        lines[3], "ambiguous_instance",
        "a setsid process inside the container is another terminal: {out:#?}"
    );
    assert!(live(&env, other), "the other shell's session is untouched");
}
