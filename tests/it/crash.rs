//! Issue 3, item 2: SIGKILL at random moments. After every kill status.json parses, validates and
//! is consistent; every operation whose success was printed is in the state; history.jsonl has at
//! most one torn line, the last, which the next append repairs; temp files do not accumulate.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

enum Op {
    Claim(String),
    Start,
    Done(String),
}

struct Tally {
    killed: usize,
    torn_seen: usize,
}

fn check_after_kill(env: &TestEnv, tally: &mut Tally) {
    let path = env.home_file("status.json");
    let bytes = std::fs::read(&path).expect("status.json survives every kill");
    conductor::protocol::codec::decode(&path, &bytes)
        .unwrap_or_else(|e| panic!("state after a kill: {e}"));
    let history = std::fs::read(env.home_file("history.jsonl")).unwrap_or_default();
    let text = String::from_utf8_lossy(&history);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, l) in lines.iter().enumerate() {
        let complete = l.ends_with('\n');
        if !complete {
            assert_eq!(i, lines.len() - 1, "a torn line can only be the last one");
            tally.torn_seen += 1;
            continue;
        }
        serde_json::from_str::<Value>(l.trim_end())
            .unwrap_or_else(|e| panic!("history line {i} is complete but bad ({e}): {l:?}"));
    }
}

/// How long one op takes here, so kill delays can cover its whole run (median of a few).
fn calibrate(env: &TestEnv, a: &str) -> u64 {
    let mut t: Vec<u128> = (0..7)
        .map(|k| {
            let start = Instant::now();
            env.run(&[
                "--json",
                "claim",
                "--instance",
                a,
                &format!("src/calibrate-{k}.rs"),
            ])
            .code(0);
            start.elapsed().as_micros()
        })
        .collect();
    t.sort();
    t[t.len() / 2] as u64
}

fn crash_loop(iterations: usize) {
    let env = TestEnv::new();
    let a = env.start("crash target", "P1");
    // Delays from 0 to 2.5x a typical op (spawn included): many kills land inside an op, and
    // enough ops finish first that acknowledged work is checked too.
    let mut max_delay_us = calibrate(&env, &a) * 5 / 2 + 1;
    let first_delay_us = max_delay_us;
    // Kills in the current window of 50 ops; the window adapts so that, on any machine, roughly
    // half the ops are killed mid-run and half complete (and are then checked).
    let mut recent_kills = 0;
    let mut rng: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut acked_claims = BTreeSet::new();
    let mut acked_live: Vec<String> = Vec::new();
    // Dones killed before they answered: each may or may not have happened.
    let mut unknown: Vec<String> = Vec::new();
    let mut acked_done: Vec<String> = Vec::new();
    let mut tally = Tally {
        killed: 0,
        torn_seen: 0,
    };
    for i in 0..iterations {
        if i > 0 && i % 50 == 0 {
            if recent_kills > 35 {
                max_delay_us = max_delay_us * 3 / 2;
            } else if recent_kills < 15 {
                max_delay_us = (max_delay_us * 2 / 3).max(1);
            }
            recent_kills = 0;
        }
        let op = match next() % 10 {
            0..=5 => Op::Claim(format!("src/f{i}.rs")),
            6..=7 => Op::Start,
            _ => match acked_live.pop() {
                Some(x) => Op::Done(x),
                None => Op::Start,
            },
        };
        let mut cmd = env.cmd();
        cmd.arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match &op {
            Op::Claim(f) => cmd.args(["claim", "--instance", &a, f]),
            Op::Start => cmd.args([
                "start",
                "crash child",
                "--project",
                "proj",
                "--priority",
                "P1",
            ]),
            Op::Done(x) => cmd.args(["done", "--instance", x]),
        };
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_micros(next() % max_delay_us);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::hint::spin_loop();
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let acked = out.status.code() == Some(0);
        if out.status.signal() == Some(9) {
            tally.killed += 1;
            recent_kills += 1;
        } else {
            assert!(acked, "op {i} failed without being killed: {:?}", out);
        }
        let json = || {
            serde_json::from_slice::<Value>(&out.stdout)
                .expect("an acknowledged op printed its JSON")
        };
        match op {
            Op::Claim(f) if acked => {
                acked_claims.insert(json()["claimed"][0].as_str().unwrap().to_string());
                let _ = f;
            }
            Op::Start if acked => {
                acked_live.push(json()["instance_id"].as_str().unwrap().to_string())
            }
            Op::Done(x) if acked => acked_done.push(x),
            Op::Done(x) => {
                unknown.push(x);
            }
            _ => {}
        }
        check_after_kill(&env, &mut tally);
    }
    // One clean write repairs everything a kill may have left.
    let last = env.start("after the storm", "P1");
    env.run(&["--json", "done", "--instance", &last]).code(0);
    let state = env.state();
    let held: BTreeSet<String> = state["global_claims"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, h)| h.as_str() == Some(a.as_str()))
        .map(|(f, _)| f.clone())
        .collect();
    assert!(
        acked_claims.is_subset(&held),
        "every acknowledged claim survived: missing {:?}",
        acked_claims.difference(&held).collect::<Vec<_>>()
    );
    let live: BTreeSet<&str> = state["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    for x in &acked_live {
        assert!(
            live.contains(x.as_str()),
            "acknowledged start {x} is registered"
        );
    }
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    assert!(
        history.ends_with('\n'),
        "the last append repaired any torn tail"
    );
    let entries: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).expect("no torn line in the middle"))
        .collect();
    // An id is unique among live instances only (six random hex digits): over thousands of
    // starts a finished instance's id may be handed out again. So each acknowledged done is in
    // history as often as it was acknowledged, plus at most the killed dones of that id; and a
    // live instance with its id is a later start (another `started_at`).
    let count = |v: &[String], x: &str| v.iter().filter(|y| *y == x).count();
    for x in acked_done.iter().collect::<BTreeSet<_>>() {
        let mine: Vec<&Value> = entries.iter().filter(|e| e["id"] == x.as_str()).collect();
        let (acked, killed) = (count(&acked_done, x), count(&unknown, x));
        assert!(
            acked <= mine.len() && mine.len() <= acked + killed,
            "{x} is in history once per acknowledged done ({acked} acknowledged, {killed} killed, \
             {} in history)",
            mine.len()
        );
        if live.contains(x.as_str()) {
            let again = state["instances"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["id"] == x.as_str())
                .unwrap();
            assert!(
                mine.iter().all(|e| e["started_at"] != again["started_at"]),
                "acknowledged done {x} is gone from the state (the live {x} is a later start)"
            );
        }
    }
    let temps: Vec<String> = std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        temps.is_empty(),
        "no temp files left after a clean write: {temps:?}"
    );
    eprintln!(
        "{iterations} ops (kill delay 0-{first_delay_us} us, adapted to 0-{max_delay_us} us), {} SIGKILLed mid-run, {} torn history tails seen, {} claims and {} dones acknowledged",
        tally.killed,
        tally.torn_seen,
        acked_claims.len(),
        acked_done.len()
    );
    assert!(
        tally.killed * 4 >= iterations,
        "at least a quarter of the ops were killed mid-run ({})",
        tally.killed
    );
    assert!(
        tally.killed * 10 <= iterations * 9,
        "at least a tenth of the ops completed, so acknowledged work is checked ({})",
        tally.killed
    );
}

#[test]
fn sigkill_at_random_moments() {
    crash_loop(400);
}

#[test]
#[ignore = "long: 5,000 kills"]
fn sigkill_at_random_moments_long() {
    crash_loop(5000);
}
