//! Issue 4: the event journal, `events`, `watch`, `claim --wait`, `wait` and `run`.
//! Real processes against temp homes; no fixed sleeps (everything polls with a deadline).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::common::*;

/// Every event in the journal, through `conductor events` pages.
fn all_events(env: &TestEnv) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after: Option<u64> = None; // first page: from the oldest kept event
    loop {
        let mut args = vec!["events".to_string(), "--limit".into(), "50".into()];
        if let Some(a) = after {
            args.extend(["--after".to_string(), a.to_string()]);
        }
        let r = env.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        r.code(0);
        let page = r.json();
        out.extend(page["items"].as_array().unwrap().iter().cloned());
        after = Some(page["next_after_seq"].as_u64().unwrap());
        if !page["has_more"].as_bool().unwrap() {
            return out;
        }
    }
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

fn files(v: &Value) -> Vec<String> {
    v["files"]
        .as_array()
        .map(|a| a.iter().map(|f| f.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Rebuild the claims map from the journal alone.
fn replay_claims(events: &[Value]) -> BTreeMap<String, String> {
    let mut claims = BTreeMap::new();
    for e in events {
        let actor = e["actor"].as_str().unwrap_or_default().to_string();
        match e["event_type"].as_str().unwrap() {
            "claim.granted" => {
                for f in files(&e["payload"]) {
                    claims.insert(f, actor.clone());
                }
            }
            "claim.forced" => {
                claims.insert(
                    e["payload"]["file"].as_str().unwrap().to_string(),
                    actor.clone(),
                );
            }
            "claim.released" => {
                for f in files(&e["payload"]) {
                    claims.remove(&f);
                }
            }
            _ => {}
        }
    }
    claims
}

fn state_claims(env: &TestEnv) -> BTreeMap<String, String> {
    env.state()["global_claims"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn issue_4_journal_replay_equals_state_after_random_ops() {
    for seed in [0x9E37_79B9_7F4A_7C15u64, 42, 7] {
        let env = TestEnv::new();
        let mut rng = Rng(seed);
        let mut ids: Vec<String> = Vec::new();
        let names = ["a.rs", "b.rs", "c.rs", "d.rs"];
        for step in 0..40 {
            let pick = rng.next(7);
            if ids.is_empty() || pick == 0 {
                ids.push(env.start(&format!("task {step}"), "P1"));
                continue;
            }
            let id = ids[rng.next(ids.len())].clone();
            let f = names[rng.next(names.len())];
            let g = names[rng.next(names.len())];
            let r = match pick {
                1 | 2 => env.run(&["claim", "--instance", &id, f, g]),
                3 => env.run(&["claim", "--instance", &id, "--force", "test", f]),
                4 => env.run(&["release", "--instance", &id, "--all"]),
                5 => env.run(&["release", "--instance", &id, "--force", f]),
                _ => {
                    ids.retain(|i| *i != id);
                    if rng.next(2) == 0 {
                        env.run(&["done", "--instance", &id, "--outcome", "abandoned"])
                    } else {
                        env.run(&["cleanup", "--instance", &id])
                    }
                }
            };
            assert!(matches!(r.code, 0 | 3), "step {step}: {r:?}");
            let events = all_events(&env);
            assert_eq!(
                seqs(&events),
                (1..=events.len() as u64).collect::<Vec<_>>(),
                "seq must be 1..N"
            );
            assert_eq!(
                replay_claims(&events),
                state_claims(&env),
                "seed {seed} step {step}"
            );
        }
    }
}

#[test]
fn issue_4_cursors_never_skip_or_repeat_across_segment_rolls() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("config.json"),
        r#"{"events_segment_bytes": 600, "events_keep_segments": 1000}"#,
    )
    .unwrap();
    let id = env.start("rolling", "P1");
    let mut seen = Vec::new();
    let mut after = 0u64;
    for round in 0..12 {
        // Interleave writes with paging so readers cross rolls mid-stream.
        for _ in 0..3 {
            env.run(&["heartbeat", "--instance", &id]).code(0);
        }
        env.run(&["claim", "--instance", &id, &format!("f{round}.rs")])
            .code(0);
        loop {
            let page = env
                .run(&["events", "--after", &after.to_string(), "--limit", "2"])
                .json();
            seen.extend(seqs(page["items"].as_array().unwrap()));
            after = page["next_after_seq"].as_u64().unwrap();
            if !page["has_more"].as_bool().unwrap() {
                break;
            }
        }
    }
    let total = all_events(&env).len() as u64;
    assert_eq!(seen, (1..=total).collect::<Vec<_>>());
    let segments = std::fs::read_dir(&env.home)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("events.0")
        })
        .count();
    assert!(
        segments >= 5,
        "expected several rolled segments, got {segments}"
    );
    // A watcher replaying from 0 sees the same sequence.
    let r = env.run(&[
        "--json",
        "watch",
        "--after",
        "0",
        "--count",
        &total.to_string(),
    ]);
    r.code(0);
    let watched: Vec<u64> = r
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(watched, (1..=total).collect::<Vec<_>>());
}

#[test]
fn issue_4_pruned_cursor_is_expired_and_seq_is_never_reused() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("config.json"),
        r#"{"events_segment_bytes": 300, "events_keep_segments": 1}"#,
    )
    .unwrap();
    let id = env.start("pruning", "P1");
    for _ in 0..10 {
        env.run(&["heartbeat", "--instance", &id]).code(0);
    }
    let kept = all_events(&env);
    let oldest = kept[0]["seq"].as_u64().unwrap();
    assert!(oldest > 2, "old segments were pruned");
    let r = env.run(&["events", "--after", "0"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "cursor_expired");
    env.run(&["events", "--after", &(oldest - 1).to_string()])
        .code(0);
    let r = env.run(&["--json", "watch", "--after", "1"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "cursor_expired");

    // A crash after the journal append but before the state rename: the journal has an event
    // the state never saw, plus a torn line. The next seq still comes after it.
    let last = kept.last().unwrap()["seq"].as_u64().unwrap();
    let mut ghost = kept.last().unwrap().clone();
    ghost["seq"] = json!(last + 1);
    let mut text = serde_json::to_string(&ghost).unwrap();
    text.push('\n');
    text.push_str(r#"{"seq":99999,"event_id":"torn"#);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(env.home_file("events.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    env.run(&["heartbeat", "--instance", &id]).code(0);
    let after = all_events(&env);
    assert_eq!(after.last().unwrap()["seq"].as_u64().unwrap(), last + 2);
    let first = after[0]["seq"].as_u64().unwrap(); // the heartbeat may have rolled and pruned again
    assert_eq!(seqs(&after), (first..=last + 2).collect::<Vec<_>>());
}

/// Spawn `conductor` with piped stdout.
fn spawn(env: &TestEnv, args: &[&str]) -> Child {
    env.cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn conductor")
}

#[test]
fn issue_4_watch_sees_every_event_under_8_concurrent_writers() {
    let env = TestEnv::new();
    let ids: Vec<String> = (0..8)
        .map(|i| env.start(&format!("writer {i}"), "P1"))
        .collect();
    let base = all_events(&env).len() as u64;
    let per_writer = 6u64;
    let total = base + 8 * per_writer;
    let mut watch = spawn(
        &env,
        &[
            "--json",
            "watch",
            "--after",
            "0",
            "--count",
            &total.to_string(),
        ],
    );
    let writers: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let script = format!(
                "set -e; for n in 1 2 3; do \"$0\" claim --instance {id} w{i}-$n.rs >/dev/null; \"$0\" release --instance {id} w{i}-$n.rs >/dev/null; done"
            );
            let mut c = sh(&env, &script);
            c.stdout(Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    let out = BufReader::new(watch.stdout.take().unwrap());
    let got: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(&l.unwrap()).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(watch.wait().unwrap().success());
    assert_eq!(
        got,
        (1..=total).collect::<Vec<_>>(),
        "watch must see each event once, in order"
    );
}

/// `sh -c SCRIPT BIN` in the test environment: the script calls conductor as "$0".
fn sh(env: &TestEnv, script: &str) -> std::process::Command {
    let mut c = std::process::Command::new("sh");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .current_dir(&env.project)
        .args(["-c", script])
        .arg(bin());
    c
}

#[test]
fn issue_4_watch_exits_zero_on_sigterm_and_closed_stdout() {
    let env = TestEnv::new();
    env.start("x", "P1");
    // From the journal's start, so the next start's event reaches it however late `watch`
    // begins (a plain `watch` that starts after the event would wait forever).
    let mut w = spawn(&env, &["watch", "--json", "--after", "0"]);
    // Wait until it is watching: the new event shows up on its stdout.
    let mut lines = BufReader::new(w.stdout.take().unwrap()).lines();
    let id = env.start("y", "P1");
    let seen = lines.by_ref().any(|l| {
        let e: Value = serde_json::from_str(&l.unwrap()).unwrap();
        e["actor"] == id.as_str()
    });
    assert!(seen, "watch shows the new instance's event");
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    assert_eq!(w.wait().unwrap().code(), Some(0));

    let mut w = spawn(&env, &["watch", "--json", "--after", "0"]);
    let mut out = w.stdout.take().unwrap();
    let mut buf = [0u8; 16];
    std::io::Read::read(&mut out, &mut buf).unwrap(); // it is running and writing
    drop(out); // close the pipe while it idles
    assert_eq!(w.wait().unwrap().code(), Some(0));
}

fn waiting_count(env: &TestEnv) -> usize {
    env.state()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["waiting_for"].as_array().map_or(0, |a| a.len()))
        .sum()
}

#[test]
fn issue_4_claim_wait_is_first_come_first_served_with_three_waiters() {
    let env = TestEnv::new();
    let holder = env.start("holder", "P1");
    env.run(&["claim", "--instance", &holder, "shared.rs"])
        .code(0);
    let waiters: Vec<String> = (0..3)
        .map(|i| env.start(&format!("waiter {i}"), "P1"))
        .collect();
    let mut procs = Vec::new();
    for (n, w) in waiters.iter().enumerate() {
        procs.push(spawn(
            &env,
            &[
                "--json",
                "claim",
                "--instance",
                w,
                "--wait=20s",
                "shared.rs",
            ],
        ));
        assert!(
            wait_until(10.0, || waiting_count(&env) == n + 1),
            "waiter {n} queued"
        );
    }
    let json = env.run(&["--json", "status"]).json();
    assert_eq!(json["instances"][3]["waiting_for"][0]["ticket"], 3);
    assert_schema(conductor::schema::Schema::Output, &json);
    assert_schema(conductor::schema::Schema::Status, &env.state());
    let status = env.run(&["status"]);
    for n in 1..=3 {
        let line = format!("waiting for shared.rs (#{n} in queue)");
        assert!(status.stdout.contains(&line), "{status:?}");
    }
    env.run(&["release", "--instance", &holder, "shared.rs"])
        .code(0);
    for (n, w) in waiters.iter().enumerate() {
        let p = procs.remove(0);
        let o = p.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "waiter {n}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["status"], "ok");
        assert_eq!(
            env.state()["global_claims"][env.abs("shared.rs")],
            w.as_str(),
            "waiter {n} holds it"
        );
        for later in &mut procs {
            assert!(
                later.try_wait().unwrap().is_none(),
                "later waiters still wait"
            );
        }
        env.run(&["done", "--instance", w]).code(0);
    }
    let granted: Vec<String> = all_events(&env)
        .iter()
        .filter(|e| e["event_type"] == "claim.granted" && e["payload"]["via"] == "wait")
        .map(|e| e["actor"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(granted, waiters);
}

#[test]
fn issue_4_claim_wait_times_out_with_the_conflict_result() {
    let env = TestEnv::new();
    let a = env.start("a", "P1");
    let b = env.start("b", "P1");
    env.run(&["claim", "--instance", &a, "x.rs"]).code(0);
    let r = env.run(&["--json", "claim", "--instance", &b, "--wait=200ms", "x.rs"]);
    r.code(3);
    assert_eq!(r.json()["status"], "conflict");
    assert_eq!(
        waiting_count(&env),
        0,
        "a waiter that gave up leaves the queue"
    );
    let r = env.run(&["--json", "wait", "--released", "x.rs", "--timeout", "100ms"]);
    r.code(3);
    assert_schema(conductor::schema::Schema::Output, &r.json());
    assert_schema(
        conductor::schema::Schema::Output,
        &env.run(&["--json", "status"]).json(),
    );
    let w = spawn(
        &env,
        &[
            "--json",
            "wait",
            "--released",
            "x.rs",
            "--done",
            &a,
            "--timeout",
            "20s",
        ],
    );
    env.run(&["done", "--instance", &a]).code(0);
    let o = w.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_schema(
        conductor::schema::Schema::Output,
        &serde_json::from_slice(&o.stdout).unwrap(),
    );
}

fn run_events(env: &TestEnv, task: &str) -> (String, Vec<Value>) {
    let events = all_events(env);
    let id = events
        .iter()
        .find(|e| e["event_type"] == "instance.started" && e["payload"]["task"] == task)
        .map(|e| e["actor"].as_str().unwrap().to_string())
        .expect("run registered");
    let mine = events
        .into_iter()
        .filter(|e| e["actor"] == id.as_str())
        .collect();
    (id, mine)
}

fn history_outcome(env: &TestEnv, id: &str) -> (String, String) {
    let text = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    let line: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|h| h["id"] == id)
        .expect("history line");
    (
        line["outcome"].as_str().unwrap().to_string(),
        line["notes"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn issue_4_run_heartbeats_and_records_done_for_exit_0() {
    let env = TestEnv::new();
    let stop = env.root.path().join("stop");
    let script = format!(
        "test -n \"$CONDUCTOR_INSTANCE_ID\" || exit 9; while [ ! -e '{}' ]; do sleep 0.02; done",
        stop.display()
    );
    let child = spawn(
        &env,
        &[
            "run",
            "--task",
            "ok",
            "--priority",
            "P1",
            "--claim",
            "r.rs",
            "--heartbeat",
            "50ms",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert!(
        wait_until(15.0, || {
            env.home_file("events.jsonl").exists()
                && all_events(&env)
                    .iter()
                    .any(|e| e["event_type"] == "instance.heartbeat")
        }),
        "a heartbeat event while the command runs"
    );
    let (id, _) = run_events(&env, "ok");
    let inst = env.state()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        inst["pid"].as_u64().unwrap(),
        child.id() as u64,
        "run's pid is the instance's pid"
    );
    assert_eq!(inst["files_claimed"][0], env.abs("r.rs"));
    std::fs::write(&stop, "").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (_, mine) = run_events(&env, "ok");
    assert_eq!(mine.last().unwrap()["event_type"], "instance.done");
    assert_eq!(history_outcome(&env, &id).0, "success");
    assert!(env.state()["global_claims"].as_object().unwrap().is_empty());
}

#[test]
fn issue_4_run_records_abandoned_for_exit_1_and_forwards_the_code() {
    let env = TestEnv::new();
    let r = env.run(&[
        "run",
        "--task",
        "fails",
        "--priority",
        "P1",
        "--",
        "sh",
        "-c",
        "exit 1",
    ]);
    r.code(1);
    let (id, _) = run_events(&env, "fails");
    let (outcome, notes) = history_outcome(&env, &id);
    assert_eq!(outcome, "abandoned");
    assert!(notes.contains("status 1"), "{notes}");
}

#[test]
fn issue_4_run_forwards_sigterm_and_records_abandoned() {
    let env = TestEnv::new();
    let child = spawn(
        &env,
        &[
            "run",
            "--task",
            "term",
            "--priority",
            "P1",
            "--",
            "sleep",
            "30",
        ],
    );
    assert!(wait_until(10.0, || env.home_file("status.json").exists()
        && env.state()["instances"].as_array().unwrap().len() == 1));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (id, _) = run_events(&env, "term");
    let (outcome, notes) = history_outcome(&env, &id);
    assert_eq!(outcome, "abandoned");
    assert!(notes.contains("signal 15"), "{notes}");
}

#[test]
fn issue_4_gate_blocked_is_an_event_without_a_state_change() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("sprint.json"),
        r#"{"sprint_name": "s", "focus": "P1"}"#,
    )
    .unwrap();
    let r = env.run(&["start", "side quest", "--priority", "P3"]);
    r.code(4);
    let events = all_events(&env);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event_type"], "gate.blocked");
    assert_eq!(events[0]["seq"], 1);
    let r = env.run(&["events", "--types", "gate.blocked,claim.granted"]);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    env.run(&["events", "--types", "no.such"]).code(2);
}

#[test]
fn issue_4_watch_falls_back_to_polling_and_says_so_once() {
    let env = TestEnv::new();
    let id = env.start("poll", "P1");
    let mut c = env.cmd();
    c.args(["--json", "watch", "--count", "2"])
        .env("CONDUCTOR_WATCH_POLL", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    // Each heartbeat is an event; keep going until the watcher has seen two and exits.
    let mut beats = 0;
    let pid = child.id();
    assert!(
        wait_until(20.0, || {
            env.run(&["heartbeat", "--instance", &id]).code(0);
            beats += 1;
            !std::path::Path::new(&format!("/proc/{pid}/status")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .unwrap_or_default()
                    .contains("State:\tZ")
        }),
        "the polling watcher saw the events"
    );
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("polling").count(), 1, "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2);
}

/// Issue 38: `CONDUCTOR_WATCH_POLL=never` forbids the polling fallback, so the tests that bound
/// a wake-up with it can only pass through a notification. Where no watcher can be made (in a
/// user namespace allowed no inotify instance), a waiting command polls and says so; with
/// `never` it fails instead, one line naming the home, and changes nothing.
#[test]
fn issue_38_watch_poll_never_fails_where_the_watcher_is_unavailable_instead_of_polling() {
    let env = TestEnv::new();
    env.start("poll", "P1");
    let before = env.snapshot();
    let run = |poll: Option<&str>| {
        let c = env.cmd();
        let script = "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$@\"";
        let mut u = std::process::Command::new("unshare");
        u.args(["-rU", "sh", "-c", script, "sh"])
            .arg(bin())
            .args(["wait", "--released", "src/a.rs", "--timeout", "10s"])
            .env_clear()
            .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .current_dir(&env.project);
        if let Some(p) = poll {
            u.env("CONDUCTOR_WATCH_POLL", p);
        }
        env.run_cmd(&mut u)
    };
    let polled = run(None);
    // unshare or the limit's write failed (the shell's message, not conductor's).
    if polled.stderr.starts_with("unshare:") || polled.stderr.starts_with("sh:") {
        return missing(
            "userns",
            &format!(
                "cannot limit inotify in a user namespace: {}",
                polled.stderr.trim()
            ),
        );
    }
    polled.code(0);
    assert!(
        polled
            .stderr
            .contains("the file system watcher is unavailable")
            && polled.stderr.contains("polling"),
        "without a watcher it polls, and says so: {polled:?}"
    );
    let never = run(Some("never"));
    never.code(1);
    let lines: Vec<&str> = never.stderr.lines().collect();
    assert!(
        lines[0].starts_with("error: could not watch")
            && lines[0].contains(&env.home.display().to_string())
            && lines[0].contains("CONDUCTOR_WATCH_POLL=never forbids polling")
            && !never.stderr.contains("polling /"),
        "{never:?}"
    );
    assert_eq!(env.snapshot(), before, "nothing changed");
}

#[test]
fn issue_4_cleanup_drops_queue_places_of_dead_waiters() {
    let env = TestEnv::new();
    let a = env.start("a", "P1");
    let b = env.start("b", "P1");
    env.run(&["claim", "--instance", &a, "q.rs"]).code(0);
    let mut w = spawn(&env, &["claim", "--instance", &b, "--wait", "q.rs"]);
    assert!(wait_until(10.0, || waiting_count(&env) == 1));
    unsafe { libc::kill(w.id() as i32, libc::SIGKILL) };
    w.wait().unwrap();
    env.run(&["cleanup"]).code(0);
    assert_eq!(waiting_count(&env), 0);
    env.run(&["release", "--instance", &a, "q.rs"]).code(0);
    assert!(
        env.state()["global_claims"].as_object().unwrap().is_empty(),
        "nobody was handed the file"
    );
}

#[test]
fn issue_4_watch_survives_a_torn_line_cut_by_the_next_writer() {
    let env = TestEnv::new();
    let id = env.start("torn", "P1");
    let mut w = spawn(&env, &["--json", "watch", "--after", "0", "--count", "3"]);
    let mut lines = BufReader::new(w.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["seq"], 1);
    // A writer crashed mid-append: a torn line the watcher reads (and must not trust).
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(env.home_file("events.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, br#"{"seq":2,"event_id":"torn","event_ty"#).unwrap();
    drop(f);
    env.run(&["heartbeat", "--instance", &id]).code(0);
    env.run(&["heartbeat", "--instance", &id]).code(0);
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(
        rest.iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [2, 3]
    );
    assert!(rest.iter().all(|e| e["event_type"] == "instance.heartbeat"));
    assert_eq!(w.wait().unwrap().code(), Some(0));
}

#[test]
fn issue_4_fixtures_for_queues_config_and_wait_outputs() {
    use conductor::schema::{Schema, validate};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let load = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(p)).unwrap()).unwrap()
    };
    for (file, schema) in [
        ("valid/status-waiting-queue.json", Schema::Status),
        ("valid/config-events.json", Schema::Config),
        ("valid/out-wait.json", Schema::Output),
        ("valid/out-wait-timeout.json", Schema::Output),
    ] {
        assert_schema(schema, &load(file));
    }
    for (file, schema) in [
        ("invalid/config-events-keep-zero.json", Schema::Config),
        ("invalid/status-waiting-missing-ticket.json", Schema::Status),
    ] {
        assert!(validate(schema, &load(file)).is_err(), "{file} must fail");
    }
    let st: conductor::protocol::State =
        serde_json::from_value(load("valid/status-waiting-queue.json")).unwrap();
    conductor::protocol::codec::check_consistency(&st).unwrap();
    assert_eq!(
        conductor::protocol::ops::queue_position(&st, "web-0a0b0c", "/work/pitchello/src/auth.rs"),
        Some(2)
    );
}

#[test]
fn issue_8_one_journal_carries_every_domain_in_one_sequence() {
    let env = TestEnv::new();
    let id = env.start("protocol work", "P1");
    env.run(&[
        "agent", "register", "scout", "--handle", "@scout", "--watch", "ops",
    ])
    .code(0);
    env.run(&["claim", "--instance", &id, "src/a.rs"]).code(0);
    env.run(&["post", "ops", "@scout please look", "--as", "ana"])
        .code(0);
    let events = all_events(&env);
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    // Protocol and runtime events interleave in the order they happened, numbered 1, 2, 3, ...
    let granted = types.iter().position(|t| *t == "claim.granted").unwrap();
    let posted = types
        .iter()
        .position(|t| *t == "channel.message.created")
        .unwrap();
    assert!(granted < posted, "{types:?}");
    assert_eq!(seqs(&events), (1..=events.len() as u64).collect::<Vec<_>>());
    // A filter may name any domain's event type.
    let r = env.run(&["events", "--types", "mention.created,claim.granted"]);
    let items = r.json()["items"].as_array().unwrap().clone();
    let got: Vec<&str> = items
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(got, vec!["claim.granted", "mention.created"]);
}

/// Issue 21 item 5: cutting `events.jsonl` back by hand (truncating it, rewriting it, deleting
/// it) never makes conductor give a seq out again: the next events continue above the highest
/// seq ever given, a `journal.gap` event names the lost range, readers move past it, and
/// `doctor` reports the damage until `doctor --repair` acknowledges it.
#[test]
fn a_journal_cut_back_by_hand_never_reuses_a_seq() {
    let env = TestEnv::new();
    let id = env.start("Journal", "P1");
    for i in 0..4 {
        env.exec(&["claim", "--instance", &id, &env.abs(&format!("f{i}.rs"))])
            .code(0);
    }
    let seen = all_events(&env);
    let max = seen.last().unwrap()["seq"].as_u64().unwrap();
    assert!(max >= 5, "{seen:?}");
    let journal = env.home_file("events.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let first_two: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    let doctor_says = |code: i32| {
        let r = env.run(&["doctor"]);
        r.code(code);
        r.stdout
            .lines()
            .find(|l| l.contains("events.seq"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(doctor_says(0).starts_with("ok"));

    // Truncated: doctor says so on one line, before any new write.
    std::fs::write(&journal, &first_two).unwrap();
    let line = doctor_says(1);
    assert!(
        line.starts_with("BAD")
            && line.contains(&format!(
                "ends at seq 2 but seq {max} was already given out"
            )),
        "{line}"
    );
    // A watcher that had read everything, waiting for more.
    let mut watch = env
        .cmd()
        .args(["watch", "--json", "--after", &max.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    env.exec(&["heartbeat", "--instance", &id]).code(0);
    let next: Vec<Value> = (0..2)
        .map(|_| serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap())
        .collect();
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(next[0]["event_type"], "journal.gap", "{next:?}");
    assert_eq!(next[0]["seq"], max + 1);
    assert_eq!(next[0]["payload"]["lost_after"], 2);
    assert_eq!(next[0]["payload"]["lost_through"], max);
    assert_eq!(next[1]["event_type"], "instance.heartbeat");
    assert_eq!(next[1]["seq"], max + 2);
    // A reader from the start moves past the marked gap without an error.
    let all = all_events(&env);
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, max + 1, max + 2]);
    // The gap stays reported until acknowledged.
    assert!(doctor_says(1).contains(&format!("events 3..{max} were lost")));
    let r = env.run(&["doctor", "--repair"]);
    r.code(0);
    assert!(doctor_says(0).starts_with("ok"));

    // Rewritten by hand with smaller seqs, then deleted: still never reused.
    let rewritten: String = all.iter().take(2).map(|e| format!("{e}\n")).collect();
    std::fs::write(&journal, rewritten).unwrap();
    env.exec(&["heartbeat", "--instance", &id]).code(0);
    let seqs: Vec<u64> = all_events(&env)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        [1, 2, max + 3, max + 4],
        "a new gap marker, then the event"
    );
    std::fs::remove_file(&journal).unwrap();
    assert!(doctor_says(1).contains("ends at seq 0"));
    env.exec(&["heartbeat", "--instance", &id]).code(0);
    let after: Vec<Value> = all_events(&env);
    assert_eq!(after[0]["seq"], max + 5);
    assert_eq!(after[0]["event_type"], "journal.gap");
    assert_eq!(after[1]["seq"], max + 6);
}
