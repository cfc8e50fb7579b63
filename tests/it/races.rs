//! Issue 3, item 1: real OS processes racing for real locks. Exactly one claimant wins, every
//! loser is told who won, and no acknowledged update is ever lost.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// Start `n` instances in the test project; returns their ids.
fn instances(env: &TestEnv, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| env.start(&format!("racer {i}"), "P1"))
        .collect()
}

fn spawn_claim(env: &TestEnv, id: &str, file: &str) -> Child {
    env.cmd()
        .args([
            "--json",
            "--lock-timeout",
            "60",
            "claim",
            "--instance",
            id,
            file,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn claim")
}

/// One race: `ids.len()` processes claim `file` at once. With `barrier`, the test holds the state
/// lock until every process is blocked on it, so they are all released into the race together.
/// Returns the winner's index after checking every process's answer.
fn race(env: &TestEnv, ids: &[String], file: &str, barrier: bool) -> usize {
    let lock = barrier.then(|| {
        conductor::store::lock::acquire(
            &env.home_file("status.lock"),
            Duration::from_secs(10),
            &|| {},
        )
        .expect("test takes the lock")
    });
    let (tx, rx) = mpsc::channel();
    let mut children = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let mut child = spawn_claim(env, id, file);
        let stderr = child.stderr.take().unwrap();
        let tx = tx.clone();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stderr);
            let mut all = String::new();
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                if line.starts_with("Blocking") {
                    let _ = tx.send(i);
                }
                all.push_str(&line);
                line.clear();
            }
            all
        });
        children.push((child, reader));
    }
    if let Some(lock) = lock {
        for _ in ids {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("every racer blocks on the lock");
        }
        drop(lock);
    }
    let mut winners = Vec::new();
    let mut results = Vec::new();
    for (i, (mut child, reader)) in children.into_iter().enumerate() {
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        let stderr = reader.join().unwrap();
        let json: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("racer {i}: {e}: {out:?} {stderr}"));
        match status.code() {
            Some(0) => winners.push(i),
            Some(3) => {}
            other => panic!("racer {i} exited {other:?}: {out} {stderr}"),
        }
        results.push(json);
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one winner for {file}: {results:#?}"
    );
    let w = winners[0];
    let abs = env.abs(file);
    assert_eq!(results[w]["claimed"], serde_json::json!([abs]));
    for (i, r) in results.iter().enumerate().filter(|(i, _)| *i != w) {
        assert_eq!(r["status"], "conflict", "racer {i}");
        assert_eq!(r["claimed"], serde_json::json!([]), "racer {i} got nothing");
        assert_eq!(
            r["conflicts"][0]["held_by"],
            ids[w].as_str(),
            "racer {i} is told the winner"
        );
        assert_eq!(r["conflicts"][0]["file"], abs.as_str());
    }
    assert_eq!(env.state()["global_claims"][&abs], ids[w].as_str());
    w
}

fn assert_state_sound(env: &TestEnv) {
    let bytes = std::fs::read(env.home_file("status.json")).unwrap();
    conductor::protocol::codec::decode(&env.home_file("status.json"), &bytes)
        .expect("status.json parses, validates and is consistent");
}

fn races(n_procs: usize, n_races: usize) {
    let env = TestEnv::new();
    let ids = instances(&env, n_procs);
    let mut wins = vec![0usize; n_procs];
    for r in 0..n_races {
        let w = race(&env, &ids, &format!("src/race-{r}.rs"), r % 2 == 0);
        wins[w] += 1;
    }
    assert_state_sound(&env);
    let held: usize = env.state()["global_claims"].as_object().unwrap().len();
    assert_eq!(held, n_races, "one claim per race, none lost or doubled");
    eprintln!("{n_races} races of {n_procs} processes; wins per racer: {wins:?}");
}

#[test]
fn two_process_races_200() {
    races(2, 200);
}

#[test]
fn sixteen_process_races_50() {
    races(16, 50);
}

#[test]
#[ignore = "long: 1,000 races; run with `cargo test --test it -- --ignored`"]
fn two_process_races_1000() {
    races(2, 1000);
}

#[test]
#[ignore = "long: 1,000 sixteen-process races"]
fn sixteen_process_races_1000() {
    races(16, 1000);
}

/// What one driver believes, from the answers it was given.
#[derive(Default)]
struct Driver {
    live: Option<String>,
    held: BTreeSet<String>,
    dones: Vec<(String, BTreeSet<String>)>,
    conflicts_seen: usize,
    released: usize,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn drive(env: &TestEnv, seed: u64, cycles: usize, files: &[String]) -> Driver {
    let mut d = Driver::default();
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let run = |args: &[&str]| env.run(&[&["--json", "--lock-timeout", "60"], args].concat());
    for _ in 0..cycles {
        let Some(id) = d.live.clone() else {
            let r = run(&["start", "mixed", "--project", "proj", "--priority", "P1"]);
            r.code(0);
            d.live = Some(r.json()["instance_id"].as_str().unwrap().to_string());
            continue;
        };
        match xorshift(&mut rng) % 100 {
            0..=49 => {
                let n = 1 + (xorshift(&mut rng) % 3) as usize;
                let pick: Vec<&str> = (0..n)
                    .map(|_| files[(xorshift(&mut rng) % files.len() as u64) as usize].as_str())
                    .collect();
                let r = run(&[&["claim", "--instance", &id], pick.as_slice()].concat());
                assert!(r.code == 0 || r.code == 3, "{r:?}");
                let j = r.json();
                for f in j["claimed"].as_array().unwrap() {
                    d.held.insert(f.as_str().unwrap().to_string());
                }
                for c in j["conflicts"].as_array().into_iter().flatten() {
                    assert_ne!(c["held_by"], id.as_str(), "never in conflict with oneself");
                    assert!(
                        !d.held.contains(c["file"].as_str().unwrap()),
                        "a file I hold is never reported as someone else's"
                    );
                    d.conflicts_seen += 1;
                }
            }
            50..=69 if !d.held.is_empty() => {
                let f = d
                    .held
                    .iter()
                    .nth((xorshift(&mut rng) % d.held.len() as u64) as usize)
                    .unwrap()
                    .clone();
                run(&["release", "--instance", &id, &f]).code(0);
                d.held.remove(&f);
                d.released += 1;
            }
            50..=84 => {
                run(&["heartbeat", "--instance", &id]).code(0);
            }
            _ => {
                let r = run(&["done", "--instance", &id]);
                r.code(0);
                let released: BTreeSet<String> = r.json()["released"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                assert_eq!(released, d.held, "done releases exactly what I hold");
                d.released += released.len();
                d.dones.push((id, std::mem::take(&mut d.held)));
                d.live = None;
            }
        }
    }
    d
}

/// An instance's (or a history line's) id and the files listed under `field`.
fn id_and_files(v: &Value, field: &str) -> (String, BTreeSet<String>) {
    let files = v[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    (v["id"].as_str().unwrap().to_string(), files)
}

fn mixed(drivers: usize, cycles: usize) {
    let env = TestEnv::new();
    let files: Vec<String> = (0..10).map(|i| format!("src/shared-{i}.rs")).collect();
    let results: Vec<Driver> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..drivers)
            .map(|k| {
                let (env, files) = (&env, &files);
                s.spawn(move || drive(env, k as u64 + 1, cycles, files))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_state_sound(&env);
    let state = env.state();
    // Every live instance holds exactly what its driver was told it holds.
    let live: BTreeMap<String, BTreeSet<String>> = state["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| id_and_files(i, "files_claimed"))
        .collect();
    let expected_live: BTreeMap<String, BTreeSet<String>> = results
        .iter()
        .filter_map(|d| d.live.clone().map(|id| (id, d.held.clone())))
        .collect();
    assert_eq!(
        live, expected_live,
        "no acknowledged claim or release was lost"
    );
    // Every acknowledged done is in history exactly once, with the files it held. (An id is
    // unique among live instances only: `start` may give a finished instance's id again, six
    // random hex digits, so over ~2,000 instances two dones can share one; hence the multiset
    // of (id, files), not one line per id.)
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap_or_default();
    let lines: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).expect("history line parses"))
        .collect();
    let mut in_history: Vec<(String, BTreeSet<String>)> = lines
        .iter()
        .map(|l| id_and_files(l, "files_modified"))
        .collect();
    let mut acknowledged: Vec<(String, BTreeSet<String>)> =
        results.iter().flat_map(|d| d.dones.clone()).collect();
    in_history.sort();
    acknowledged.sort();
    assert_eq!(
        in_history, acknowledged,
        "one history line per acknowledged done, listing the files it held"
    );
    // Replaying conflicts.log agrees with what the drivers were told.
    let log = std::fs::read_to_string(env.home_file("conflicts.log")).unwrap_or_default();
    let count = |kind: &str| {
        log.lines()
            .filter(|l| l.split(" | ").nth(1) == Some(kind))
            .count()
    };
    assert_eq!(
        count("CONFLICT"),
        results.iter().map(|d| d.conflicts_seen).sum::<usize>(),
        "one CONFLICT line per reported conflict"
    );
    assert_eq!(
        count("RELEASE"),
        results.iter().map(|d| d.released).sum::<usize>(),
        "one RELEASE line per released file"
    );
    eprintln!(
        "mixed: {drivers} drivers x {cycles} cycles; {} dones, {} conflicts, {} releases",
        lines.len(),
        count("CONFLICT"),
        count("RELEASE")
    );
}

#[test]
fn eight_processes_mixed_workload() {
    mixed(8, 200);
}

#[test]
#[ignore = "long: 16 drivers x 1,000 cycles"]
fn sixteen_processes_mixed_workload_long() {
    mixed(16, 1000);
}
