//! Issue 26: a transaction bigger than a journal segment (a 100k-job submit) no longer writes
//! one giant segment: it is cut into whole segments plus the rest in the fresh active file, and
//! its events carry `txn_end` (the seq of its last event) so that a reader delivers it whole or
//! not at all. Real binary; real SIGKILLs mid-commit, read back by a fresh process.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::TestEnv;

const SEGMENT: u64 = 20_000;

fn env() -> TestEnv {
    let mut env = TestEnv::new();
    env.at("2026-01-17T10:00:00Z");
    env.write_home(
        "config.json",
        &json!({"events_segment_bytes": SEGMENT}).to_string(),
    );
    env
}

fn manifest(ws: &str, n: usize) -> String {
    json!({"workspace": ws, "jobs": (0..n).map(|i| json!({"id": format!("j{i}"), "prompt": "no-op", "depends_on": []})).collect::<Vec<_>>()})
        .to_string()
}

/// Every event after `after`, as one fresh process reads them.
fn events(home: &Path, after: u64) -> Vec<Value> {
    let out = Command::new(crate::common::bin())
        .args([
            "--json",
            "events",
            "--after",
            &after.to_string(),
            "--limit",
            "100000",
        ])
        .env_clear()
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", home)
        .env("PATH", std::env::var("PATH").unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["has_more"], false);
    v["items"].as_array().unwrap().clone()
}

fn segments(home: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(home)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            (n.starts_with("events.") && n.ends_with(".jsonl") && n != "events.jsonl")
                .then(|| (n, e.metadata().unwrap().len()))
        })
        .collect();
    v.sort();
    v
}

fn assert_contiguous(ev: &[Value]) {
    for w in ev.windows(2) {
        assert_eq!(w[1]["seq"].as_u64(), w[0]["seq"].as_u64().map(|s| s + 1));
    }
}

#[test]
fn a_transaction_bigger_than_a_segment_is_cut_into_whole_segments() {
    let env = env();
    env.run_stdin(&["queue", "submit", "-"], &manifest("small", 3))
        .code(0);
    let before = events(&env.home, 0).len();
    env.run_stdin(&["queue", "submit", "-"], &manifest("big", 400))
        .code(0);
    let segs = segments(&env.home);
    assert!(segs.len() >= 3, "{segs:?}");
    for (name, size) in &segs {
        assert!(*size <= SEGMENT + 2_000, "{name}: {size} bytes");
    }
    let all = events(&env.home, 0);
    assert_contiguous(&all);
    let big: Vec<&Value> = all[before..].iter().collect();
    assert!(big.len() >= 400, "{}", big.len());
    let last = big.last().unwrap()["seq"].as_u64().unwrap();
    // Every event of the big transaction but its last names where it ends.
    for e in &big[..big.len() - 1] {
        assert_eq!(e["txn_end"].as_u64(), Some(last), "{e}");
    }
    assert!(big.last().unwrap().get("txn_end").is_none());
    // A cursor inside the transaction reads the rest of it.
    let mid = big[big.len() / 2]["seq"].as_u64().unwrap();
    let rest = events(&env.home, mid);
    assert_eq!(rest.len() as u64, last - mid);
    // The next small transaction goes on in the active file.
    env.run_stdin(&["queue", "submit", "-"], &manifest("after", 1))
        .code(0);
    let again = events(&env.home, last);
    assert!(!again.is_empty() && again[0].get("txn_end").is_none());
    assert_eq!(again[0]["seq"].as_u64(), Some(last + 1));
}

#[test]
fn a_reader_sees_a_big_transaction_whole_or_not_at_all() {
    let env = env();
    env.run_stdin(&["queue", "submit", "-"], &manifest("small", 2))
        .code(0);
    let n0 = events(&env.home, 0).len();
    let stop = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut counts = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                counts.push(events(&env.home, 0).len());
            }
            counts
        });
        for k in 0..3 {
            env.run_stdin(
                &["queue", "submit", "-"],
                &manifest(&format!("big{k}"), 300),
            )
            .code(0);
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });
    let total = events(&env.home, 0).len();
    let per = (total - n0) / 3;
    assert_eq!(n0 + 3 * per, total);
    for c in &seen {
        assert!(
            (*c - n0) % per == 0,
            "a reader saw {c} events: part of a transaction of {per} (before: {n0})"
        );
    }
    eprintln!("{} reads during the submits: {seen:?}", seen.len());
}

#[test]
fn a_big_transaction_killed_mid_commit_leaves_it_whole_or_absent() {
    let env = env();
    env.run_stdin(&["queue", "submit", "-"], &manifest("small", 2))
        .code(0);
    let base = env.root.path().join("base");
    assert!(
        Command::new("cp")
            .args(["-a", env.home.to_str().unwrap(), base.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let n0 = events(&env.home, 0).len();
    let body = manifest("big", 300);
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut max_delay_us: u64 = 60_000;
    let (mut whole, mut none) = (0, 0);
    let mut per = None;
    for round in 0..25 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let _ = std::fs::remove_dir_all(&env.home);
        assert!(
            Command::new("cp")
                .args(["-a", base.to_str().unwrap(), env.home.to_str().unwrap()])
                .status()
                .unwrap()
                .success()
        );
        let mut c = env.cmd();
        c.args(["-q", "queue", "submit", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let start = Instant::now();
        let delay = Duration::from_micros(rng % max_delay_us);
        while start.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(300));
        }
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let acked = child.wait().unwrap().success();
        // A fresh process (which finishes a commit the kill interrupted, as every reader of
        // the documents does): the journal is consistent and holds all of it or none of it.
        env.run(&["--json", "queue", "jobs"]).code(0);
        let jobs_text = std::fs::read_to_string(env.home_file("queue.json")).unwrap_or_default();
        let ev = events(&env.home, 0);
        assert_contiguous(&ev);
        let added = ev.len() - n0;
        if added == 0 {
            assert!(!acked, "round {round}: acknowledged and lost");
            assert!(
                !jobs_text.contains("\"j299\""),
                "round {round}: jobs without events"
            );
            none += 1;
            max_delay_us = (max_delay_us * 3 / 2).min(3_000_000);
        } else {
            assert_eq!(
                *per.get_or_insert(added),
                added,
                "round {round}: part of it"
            );
            assert!(
                jobs_text.contains("j299"),
                "round {round}: events without jobs"
            );
            whole += 1;
            max_delay_us = (max_delay_us * 2 / 3).max(5_000);
        }
        // The next writer goes on from a consistent journal.
        env.run_stdin(&["queue", "submit", "-"], &manifest("next", 1))
            .code(0);
        assert_contiguous(&events(&env.home, 0));
    }
    eprintln!("25 kills: {whole} whole, {none} absent");
    assert!(
        whole > 0 && none > 0,
        "the kills never landed on both sides of the commit"
    );
}
