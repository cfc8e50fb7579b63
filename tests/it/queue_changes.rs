//! Issue 26: the dispatcher's change log (`queue-changes.jsonl`), which records job state
//! changes by appending instead of rewriting `queue.json`. Real binary, temp homes, real
//! SIGKILLs of `queue run` in the middle of a burst of jobs.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{TestEnv, wait_until};

const JOBS: usize = 400;

/// Every job the journal says completed (committed, hence acknowledged), by `ws/job`.
fn completed_events(env: &TestEnv) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut after = 0u64;
    loop {
        let r = env.run(&[
            "--json",
            "events",
            "--types",
            "queue.job.completed",
            "--limit",
            "1000",
            "--after",
            &after.to_string(),
        ]);
        r.code(0);
        let v = r.json();
        for e in v["items"].as_array().unwrap() {
            out.insert(e["target"].as_str().unwrap().to_string());
        }
        if v["has_more"] != json!(true) {
            return out;
        }
        after = v["next_after_seq"].as_u64().unwrap();
    }
}

/// Each job's state as a fresh process reads it (`queue jobs --all`), by `ws/job`.
fn states(env: &TestEnv) -> BTreeMap<String, String> {
    let r = env.run(&["--json", "queue", "jobs", "--all"]);
    r.code(0);
    r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (key(j), j["state"]["state"].as_str().unwrap().to_string()))
        .collect()
}

/// A job's `ws/job`.
fn key(j: &Value) -> String {
    format!(
        "{}/{}",
        j["workspace"].as_str().unwrap(),
        j["id"].as_str().unwrap()
    )
}

/// The completed jobs of a queue document (or of `queue jobs --json`'s answer), by `ws/job`.
fn completed(queue: &Value) -> BTreeSet<String> {
    queue["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["state"]["state"] == "completed")
        .map(key)
        .collect()
}

/// How many times each job ran (the agent appends its name to a file).
fn runs(path: &std::path::Path) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for l in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *n.entry(format!("b/{l}")).or_default() += 1;
    }
    n
}

/// The completed jobs that `queue.json` alone (without the change log) shows.
fn completed_in_queue_json(env: &TestEnv) -> BTreeSet<String> {
    let Ok(bytes) = std::fs::read(env.home.join("queue.json")) else {
        return BTreeSet::new();
    };
    completed(&serde_json::from_slice(&bytes).unwrap())
}

fn change_records(env: &TestEnv) -> usize {
    std::fs::read_to_string(env.home.join("queue-changes.jsonl"))
        .map(|t| t.lines().count().saturating_sub(1))
        .unwrap_or(0)
}

/// `queue run` is killed (SIGKILL) again and again in the middle of a burst of no-op jobs,
/// while it appends state changes to the change log. After each kill a fresh process reads
/// the queue: every completion the journal acknowledged is there (also when only the change
/// log holds it), `export` shows the same, and a job whose completion was acknowledged never
/// runs again. A `queue cancel` between runs (which rewrites `queue.json` whole) keeps both
/// the log's changes and its own. At the end every job completed.
#[test]
fn issue_26_the_change_log_survives_sigkill_mid_burst_and_is_read_back() {
    let env = TestEnv::new();
    let ran = env.root.path().join("ran.log");
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| json!({"id": format!("j{i}"), "prompt": "p"}))
        .collect();
    env.run_stdin(
        &["queue", "submit", "-"],
        &json!({"workspace": "b", "jobs": jobs}).to_string(),
    )
    .code(0);
    let agent = format!("echo \"$CONDUCTOR_QUEUE_JOB\" >> '{}'", ran.display());
    let mut acknowledged_before: Vec<(BTreeSet<String>, BTreeMap<String, usize>)> = Vec::new();
    let mut only_in_log = 0;
    let mut kills = 0;
    for round in 0..12 {
        let mut c = env.cmd();
        c.args([
            "-q",
            "queue",
            "run",
            "--parallel",
            "4",
            "--agent-cmd",
            &agent,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
        let mut child = c.spawn().unwrap();
        // Kill it once it is appending to the change log, at a random moment of the burst.
        let base = change_records(&env);
        wait_until(20.0, || {
            change_records(&env) > base + 2 || child.try_wait().unwrap().is_some()
        });
        std::thread::sleep(Duration::from_micros(rand::random_range(0..30_000)));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if status.code().is_some() {
            break; // it finished first
        }
        kills += 1;
        // Its jobs may still run a moment (the next dispatcher kills them): let them end so
        // that the run counts below are final.
        std::thread::sleep(Duration::from_millis(50));
        let acked = completed_events(&env);
        let now = states(&env);
        for key in &acked {
            let s = now.get(key).map(String::as_str);
            assert_eq!(
                s,
                Some("completed"),
                "round {round}: {key} was acknowledged as completed but a fresh process reads {s:?}"
            );
        }
        only_in_log += acked.difference(&completed_in_queue_json(&env)).count();
        // export folds the change log in too.
        let bundle: Value = serde_json::from_str(&env.run(&["export"]).stdout).unwrap();
        let exported: Value =
            serde_json::from_str(bundle["documents"]["queue.json"].as_str().unwrap()).unwrap();
        let exported_done = completed(&exported);
        let live_done = completed(&env.run(&["--json", "queue", "jobs"]).json());
        assert_eq!(
            exported_done, live_done,
            "round {round}: export disagrees with queue jobs"
        );
        if round == 1 {
            // A rewrite of the whole queue by another command, beside a change log.
            env.run_stdin(
                &["queue", "submit", "-"],
                &json!({"workspace": "other", "jobs": [{"id": "x", "prompt": "p"}]}).to_string(),
            )
            .code(0);
            env.run(&["queue", "cancel", "other/x"]).code(0);
            let after = states(&env);
            assert_eq!(after.get("other/x").map(String::as_str), Some("cancelled"));
            for key in &acked {
                assert_eq!(
                    after.get(key).map(String::as_str),
                    Some("completed"),
                    "{key}"
                );
            }
        }
        acknowledged_before.push((acked, runs(&ran)));
    }
    // A fresh dispatcher finishes the rest.
    env.run(&[
        "-q",
        "queue",
        "run",
        "--parallel",
        "4",
        "--agent-cmd",
        &agent,
    ])
    .code(0);
    let end = states(&env);
    let done = end
        .iter()
        .filter(|(k, s)| k.starts_with("b/") && *s == "completed")
        .count();
    assert_eq!(done, JOBS, "every job completed in the end");
    let total = runs(&ran);
    for (acked, counts) in &acknowledged_before {
        for key in acked {
            assert_eq!(
                total.get(key),
                counts.get(key),
                "{key} ran again after its completion was acknowledged"
            );
        }
    }
    assert!(kills >= 3, "only {kills} kills landed mid-burst");
    assert!(
        only_in_log > 0,
        "no kill left an acknowledged completion only in the change log (nothing read it back)"
    );
}

/// The change log grows by records, not rewrites: after a run of many no-op jobs, `queue.json`
/// was rewritten only a bounded number of times (compactions), and a reader of `queue.json`
/// plus the log sees the same queue as the dispatcher's summary.
#[test]
fn issue_26_queue_run_appends_state_changes_instead_of_rewriting_the_queue() {
    let env = TestEnv::new();
    // A workspace that finishes (archived at the end) and one that stays (blocked).
    let jobs: Vec<Value> = (0..300)
        .map(|i| json!({"id": format!("j{i}"), "prompt": "p"}))
        .collect();
    env.run_stdin(
        &["queue", "submit", "-"],
        &json!({"workspace": "b", "jobs": jobs}).to_string(),
    )
    .code(0);
    env.run_stdin(
        &["queue", "submit", "-"],
        &json!({"workspace": "held", "jobs": [{"id": "h", "prompt": "p", "secrets": ["NOPE_NOT_SET"]}]})
            .to_string(),
    )
    .code(0);
    let ino = |p: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(env.home.join(p)).unwrap().ino()
    };
    let watch = env.home.join("queue.json");
    let mut c = env.cmd();
    c.args([
        "-q",
        "queue",
        "run",
        "--parallel",
        "4",
        "--agent-cmd",
        "true",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    // Count how often queue.json is replaced while it runs (a new inode each time).
    let mut seen = BTreeSet::new();
    seen.insert(ino("queue.json"));
    while child.try_wait().unwrap().is_none() {
        if let Ok(m) = std::fs::metadata(&watch) {
            use std::os::unix::fs::MetadataExt;
            seen.insert(m.ino());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(child.wait().unwrap().code().is_some());
    assert!(
        seen.len() < 30,
        "queue.json was replaced {} times for 300 jobs (each state change rewrote it)",
        seen.len()
    );
    let s = states(&env);
    assert_eq!(s.get("held/h").map(String::as_str), Some("blocked"));
    assert_eq!(
        s.values().filter(|v| *v == "completed").count(),
        300,
        "{s:?}"
    );
}
