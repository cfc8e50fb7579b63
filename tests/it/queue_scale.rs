//! Issue 26: the archive's index (`queue-archive/`), which lets a submit resolve dependencies
//! on archived jobs without reading `queue-finished.jsonl`. Real binary, temp homes, real
//! SIGKILLs of the dispatcher while it archives.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Run, TestEnv};

fn submit(env: &TestEnv, m: &Value) -> Run {
    env.run_stdin(&["queue", "submit", "-"], &m.to_string())
}

fn run_all(env: &TestEnv) {
    env.run(&["-q", "queue", "run", "--agent-cmd", "true"])
        .code(0);
}

/// `(workspace, id, state, offset)` of every complete line of the archive.
fn archive(home: &Path) -> Vec<(String, String, String, u64)> {
    let bytes = std::fs::read(home.join("queue-finished.jsonl")).unwrap_or_default();
    let mut at = 0u64;
    let mut out = Vec::new();
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        if !line.ends_with(b"\n") {
            break;
        }
        let v: Value = serde_json::from_slice(line).unwrap();
        out.push((
            v["workspace"].as_str().unwrap().to_string(),
            v["id"].as_str().unwrap().to_string(),
            v["state"]["state"].as_str().unwrap().to_string(),
            at,
        ));
        at += line.len() as u64;
    }
    out
}

/// True when the marker describes the archive as it is; then every workspace's index file
/// must list exactly that workspace's archived jobs, in order, with their offsets.
fn index_in_sync(home: &Path) -> bool {
    let Ok(m) = std::fs::read(home.join("queue-archive/index.json")) else {
        return false;
    };
    let m: Value = serde_json::from_slice(&m).expect("the marker is JSON");
    let bytes = std::fs::read(home.join("queue-finished.jsonl")).unwrap_or_default();
    let tail = &bytes[bytes.len().saturating_sub(48)..];
    let b64 = base64::engine::general_purpose::STANDARD.encode(tail);
    if m["archive_bytes"] != json!(bytes.len()) || m["archive_tail"] != json!(b64) {
        return false;
    }
    let jobs = archive(home);
    let mut wss: Vec<&String> = jobs.iter().map(|j| &j.0).collect();
    wss.dedup();
    for ws in wss {
        let want: Vec<Value> = jobs
            .iter()
            .filter(|j| &j.0 == ws)
            .map(|j| json!({"id": j.1, "state": j.2, "at": j.3}))
            .collect();
        let got: Vec<Value> =
            crate::common::read_lines(&home.join(format!("queue-archive/{ws}.jsonl")))
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        assert_eq!(
            got, want,
            "the index of workspace {ws} disagrees with the archive"
        );
    }
    true
}

#[test]
fn issue_26_a_dependency_on_an_archived_job_resolves_through_the_index_and_never_wrongly() {
    let env = TestEnv::new();
    submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "a", "prompt": "p"}]}),
    )
    .code(0);
    // A dependency on a live job of the workspace waits for it.
    let r = submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "a2", "prompt": "p", "depends_on": ["a"]}]}),
    );
    r.code(0);
    assert!(r.stdout.contains("queued"), "{}", r.stdout);
    run_all(&env);
    submit(
        &env,
        &json!({"workspace": "x", "jobs": [{"id": "c", "prompt": "p"}]}),
    )
    .code(0);
    env.run(&["queue", "cancel", "x"]).code(0);
    assert!(
        index_in_sync(&env.home),
        "archiving keeps the index up to date"
    );
    // A completed archived job satisfies a dependency; a cancelled one does not.
    let r = submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "b", "prompt": "p", "depends_on": ["a"]}]}),
    );
    r.code(0);
    assert!(r.stdout.contains("ready"), "{}", r.stdout);
    let r = submit(
        &env,
        &json!({"workspace": "x", "jobs": [{"id": "d", "prompt": "p", "depends_on": ["c"]}]}),
    );
    r.code(2);
    assert!(r.stderr.contains("unknown job `c`"), "{}", r.stderr);

    // The index lost (a home from before it): the submit that needs it rebuilds it.
    std::fs::remove_dir_all(env.home.join("queue-archive")).unwrap();
    let r = submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "b2", "prompt": "p", "depends_on": ["a"]}]}),
    );
    r.code(0);
    assert!(index_in_sync(&env.home), "the submit rebuilt the index");
    // Private like the rest of the home, and doctor finds nothing to say about it.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.home.join("queue-archive")), 0o700);
    for e in std::fs::read_dir(env.home.join("queue-archive")).unwrap() {
        assert_eq!(mode(&e.unwrap().path()), 0o600);
    }
    env.run(&["doctor"]).code(0);

    // The archive replaced behind its back (an import, a hand edit): the stale index is not
    // believed. Here `w/a` is gone from the archive, so depending on it is refused.
    let kept: Vec<String> = crate::common::read_lines(&env.home.join("queue-finished.jsonl"))
        .into_iter()
        .filter(|l| !l.contains("\"workspace\":\"w\""))
        .collect();
    std::fs::write(
        env.home.join("queue-finished.jsonl"),
        kept.join("\n") + "\n",
    )
    .unwrap();
    assert!(!index_in_sync(&env.home));
    let r = submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "b3", "prompt": "p", "depends_on": ["a"]}]}),
    );
    r.code(2);
    assert!(r.stderr.contains("unknown job `a`"), "{}", r.stderr);
}

#[test]
fn issue_26_a_submit_with_many_jobs_keeps_their_order_states_and_dependencies() {
    let env = TestEnv::new();
    let jobs: Vec<Value> = (0..3000)
        .map(|i| {
            let deps = if i % 3 == 2 {
                vec![format!("j{}", i - 1)]
            } else {
                vec![]
            };
            json!({"id": format!("j{i}"), "prompt": "p", "depends_on": deps})
        })
        .collect();
    let r = env.run_stdin(
        &["--json", "queue", "submit", "-"],
        &json!({"workspace": "big", "jobs": jobs}).to_string(),
    );
    r.code(0);
    let got = r.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(got.len(), 3000);
    for (i, j) in got.iter().enumerate() {
        let want = if i % 3 == 2 { "queued" } else { "ready" };
        assert_eq!(j, &json!({"id": format!("j{i}"), "state": want}));
    }
}

/// The dispatcher is killed (SIGKILL) at random moments while it completes and archives jobs;
/// after each kill a fresh process finishes the work, and then the index agrees with the
/// archive and a dependency on the archived job resolves.
#[test]
fn issue_26_the_archive_index_survives_sigkill_mid_archive() {
    let env = TestEnv::new();
    let mut killed_mid = 0;
    for i in 0..30u64 {
        let ws = format!("w{i}");
        submit(
            &env,
            &json!({"workspace": ws, "jobs": [{"id": "a", "prompt": "p"}]}),
        )
        .code(0);
        let mut c = env.cmd();
        c.args(["-q", "queue", "run", "--agent-cmd", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = c.spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rand::random_range(0..40_000)));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if status.code().is_none() {
            killed_mid += 1;
        }
        // A fresh process finishes what the killed one left.
        run_all(&env);
        assert!(
            env.run(&["--json", "queue", "jobs", "--all"])
                .json()
                .to_string()
                .contains("completed"),
        );
        let r = submit(
            &env,
            &json!({"workspace": ws, "jobs": [{"id": "b", "prompt": "p", "depends_on": ["a"]}]}),
        );
        r.code(0);
        assert!(r.stdout.contains("ready"), "round {i}: {}", r.stdout);
        env.run(&["queue", "cancel", &ws]).code(0);
        assert!(
            index_in_sync(&env.home),
            "round {i}: the index is behind the archive"
        );
    }
    assert!(
        killed_mid > 5,
        "only {killed_mid} kills landed before the dispatcher ended"
    );
}
