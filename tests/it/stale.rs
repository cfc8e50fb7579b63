//! Issue 3, item 6: a holder whose process is gone, or whose heartbeat expired, never blocks
//! others forever, and is never taken over silently.

use std::process::Command;

use crate::common::*;

#[test]
fn start_records_host_and_owner_pid_and_heartbeat_updates_it() {
    let env = TestEnv::new();
    let r = env.run(&[
        "--json",
        "start",
        "owned",
        "--priority",
        "P1",
        "--owner-pid",
        "4242",
    ]);
    let id = r.json()["instance_id"].as_str().unwrap().to_string();
    let inst = env.state()["instances"][0].clone();
    assert_eq!(inst["pid"], 4242);
    assert_eq!(inst["host"], conductor::host::hostname().unwrap().as_str());
    env.run_env(
        &["heartbeat", "--instance", &id],
        &[("CONDUCTOR_OWNER_PID", "4343")],
    )
    .code(0);
    assert_eq!(env.state()["instances"][0]["pid"], 4343);
}

#[test]
fn a_dead_owner_is_reported_then_reaped_never_taken_over_silently() {
    let env = TestEnv::new();
    let mut owner = Command::new("sleep").arg("600").spawn().unwrap();
    let pid = owner.id().to_string();
    let r = env.run(&[
        "--json",
        "start",
        "doomed",
        "--priority",
        "P1",
        "--owner-pid",
        &pid,
    ]);
    let a = r.json()["instance_id"].as_str().unwrap().to_string();
    env.run(&["claim", "--instance", &a, "src/held.rs"]).code(0);
    let b = env.start("waiting", "P1");

    let alive = env.run(&["--json", "claim", "--instance", &b, "src/held.rs"]);
    alive.code(3);
    assert_eq!(
        alive.json()["conflicts"][0]["holder_alive"],
        true,
        "the owner still runs"
    );

    owner.kill().unwrap();
    owner.wait().unwrap();
    let dead = env.run(&["--json", "claim", "--instance", &b, "src/held.rs"]);
    dead.code(3);
    let c = &dead.json()["conflicts"][0];
    assert_eq!(c["held_by"], a.as_str());
    assert_eq!(
        c["holder_alive"], false,
        "the conflict says the holder is gone"
    );
    assert!(c["holder_last_heartbeat"].is_string());
    assert_eq!(
        env.state()["global_claims"][env.abs("src/held.rs")],
        a.as_str(),
        "no silent takeover"
    );

    let r = env.run(&["--json", "cleanup"]);
    r.code(0);
    assert_eq!(r.json()["orphaned"], serde_json::json!([a]));
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert_eq!(line["outcome"], "orphaned");
    assert!(
        line["notes"]
            .as_str()
            .unwrap()
            .contains(&format!("process {pid}")),
        "{line}"
    );
    env.run(&["--json", "claim", "--instance", &b, "src/held.rs"])
        .code(0);
}

#[test]
fn an_expired_heartbeat_is_reported_at_more_than_sixty_minutes() {
    let mut env = TestEnv::new();
    env.at("2026-01-17T09:00:00Z");
    let a = env.start("quiet holder", "P1");
    env.run(&["claim", "--instance", &a, "src/held.rs"]).code(0);
    env.at("2026-01-17T09:59:00Z");
    let b = env.start("newcomer", "P1");

    let at = |env: &mut TestEnv, t: &str| {
        env.at(t);
        let r = env.run(&["--json", "claim", "--instance", &b, "src/held.rs"]);
        r.code(3);
        r.json()["conflicts"][0].clone()
    };
    assert_eq!(at(&mut env, "2026-01-17T09:30:00Z")["holder_alive"], true);
    assert_eq!(
        at(&mut env, "2026-01-17T10:00:00Z")["holder_alive"],
        true,
        "exactly 60 minutes is not yet expired"
    );
    let c = at(&mut env, "2026-01-17T10:00:01Z");
    assert_eq!(c["holder_alive"], false);
    assert_eq!(c["holder_last_heartbeat"], "2026-01-17T09:00:00Z");

    env.at("2026-01-17T10:00:00Z");
    assert_eq!(
        env.run(&["--json", "cleanup"]).json()["orphaned"],
        serde_json::json!([]),
        "60:00 is not an orphan"
    );
    env.at("2026-01-17T10:01:00Z");
    assert_eq!(
        env.run(&["--json", "cleanup"]).json()["orphaned"],
        serde_json::json!([a])
    );
}

#[test]
fn configured_max_age_applies_to_holder_alive() {
    let mut env = TestEnv::new();
    env.at("2026-01-17T09:00:00Z");
    let a = env.start("holder", "P1");
    env.run(&["claim", "--instance", &a, "src/held.rs"]).code(0);
    let b = env.start("newcomer", "P1");
    std::fs::write(
        env.home_file("config.json"),
        r#"{"default_max_age_minutes": 10}"#,
    )
    .unwrap();
    env.at("2026-01-17T09:11:00Z");
    let r = env.run(&["--json", "claim", "--instance", &b, "src/held.rs"]);
    assert_eq!(r.json()["conflicts"][0]["holder_alive"], false);
}

#[test]
fn a_dead_pid_on_another_host_is_not_trusted() {
    let env = TestEnv::new();
    let a = env.start("remote", "P1");
    env.run(&["claim", "--instance", &a, "src/held.rs"]).code(0);
    // Rewrite the instance as if another machine sharing the home had registered it.
    let mut st = env.state();
    st["instances"][0]["host"] = "some-other-host".into();
    st["instances"][0]["pid"] = 999_999_999u64.into();
    std::fs::write(
        env.home_file("status.json"),
        serde_json::to_vec_pretty(&st).unwrap(),
    )
    .unwrap();
    let b = env.start("local", "P1");
    let r = env.run(&["--json", "claim", "--instance", &b, "src/held.rs"]);
    assert_eq!(
        r.json()["conflicts"][0]["holder_alive"],
        true,
        "a pid means nothing on another host"
    );
    assert_eq!(
        env.run(&["--json", "cleanup"]).json()["orphaned"],
        serde_json::json!([])
    );
}

/// Review finding: a file released while its first waiter's process was dead used to be handed
/// to that waiter, whose agent would never know it held it.
#[test]
fn a_release_skips_waiters_whose_process_is_gone() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P1");
    env.run(&["claim", "--instance", &a, "src/w.rs"]).code(0);
    let mut waiter = env
        .cmd()
        .args(["--json", "claim", "--instance", &b, "--wait", "src/w.rs"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(10.0, || env.state()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["waiting_for"].is_array())),
        "B queued"
    );
    waiter.kill().unwrap();
    waiter.wait().unwrap();
    env.run(&["--json", "release", "--instance", &a, "src/w.rs"])
        .code(0);
    let st = env.state();
    assert!(
        st["global_claims"].get(env.abs("src/w.rs")).is_none(),
        "the file is free, not given to a dead waiter: {st}"
    );
    assert!(
        st["instances"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["waiting_for"].is_null()),
        "the dead waiter's place is gone"
    );
}
