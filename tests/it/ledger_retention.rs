//! Issue 26: every append-only ledger rotates like the event journal. Past
//! `ledger_rotate_bytes` a ledger's file becomes `<name>.<N>` and a fresh one starts, so
//! `grep PATTERN <home>/history.jsonl*` still finds every line kept; readers (`history`,
//! export) read across the rotated files; `ledger_keep_files` bounds how many are kept.
//! Real binary, real files.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::TestEnv;

fn env_with(config: Value) -> TestEnv {
    let mut env = TestEnv::new();
    env.at("2026-01-17T10:00:00Z");
    std::fs::create_dir_all(&env.home).unwrap();
    env.write_home("config.json", &config.to_string());
    env
}

/// `(name, size)` of the files of the home whose names start with `prefix`, sorted.
fn files(home: &Path, prefix: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(home)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(prefix)
                .then(|| (n, e.metadata().unwrap().len()))
        })
        .collect();
    v.sort();
    v
}

/// `grep -h PATTERN <home>/<glob>` through a shell, as a user would type it.
fn grep(home: &Path, pattern: &str, glob: &str) -> Vec<String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("grep -h -- '{pattern}' {}/{glob}", home.display()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn finish_tasks(env: &TestEnv, n: usize) -> Vec<String> {
    (0..n)
        .map(|k| {
            let id = env.start(&format!("task number {k:03}"), "P2");
            env.run(&[
                "done",
                "--instance",
                &id,
                "--notes",
                &format!("note-{k:03}"),
            ])
            .code(0);
            id
        })
        .collect()
}

#[test]
fn history_rotates_past_the_limit_and_nothing_is_lost() {
    let env = env_with(json!({"ledger_rotate_bytes": 1500}));
    let ids = finish_tasks(&env, 40);
    let rotated = files(&env.home, "history.jsonl.");
    assert!(rotated.len() >= 3, "no rotation: {rotated:?}");
    // Names sort oldest first; every file stops at the first line that reached the limit.
    let line_max = 600;
    for (name, size) in &rotated {
        assert!(name.len() == "history.jsonl.000001".len(), "{name}");
        assert!(*size >= 1500 && *size < 1500 + line_max, "{name}: {size}");
    }
    assert_eq!(rotated[0].0, "history.jsonl.000001");
    // grep across the files finds every entry, once.
    let lines = grep(&env.home, "note-", "history.jsonl*");
    assert_eq!(lines.len(), 40);
    let mut found: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .into()
        })
        .collect();
    found.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(found, want);
    // `history` reads across them, oldest first.
    let h = env.run(&["--json", "history"]).json();
    let listed: Vec<&str> = h["entries"]
        .as_array()
        .or(h["history"].as_array())
        .unwrap_or_else(|| panic!("{h}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 40, "{h}");
    let mut sorted = listed.clone();
    sorted.sort_by_key(|id| ids.iter().position(|x| x == id));
    assert_eq!(listed, sorted, "not oldest first");
    // Export carries every line; an import into a fresh home reads the same history.
    let bundle = env.root.path().join("b.json");
    env.run(&["export", bundle.to_str().unwrap()]).code(0);
    let fresh = TestEnv::new();
    fresh.run(&["import", bundle.to_str().unwrap()]).code(0);
    let h2 = fresh.run(&["--json", "history"]).json();
    assert_eq!(h2, h);
}

#[test]
fn only_the_newest_rotated_files_are_kept() {
    let env = env_with(json!({"ledger_rotate_bytes": 800, "ledger_keep_files": 2}));
    finish_tasks(&env, 30);
    let rotated = files(&env.home, "history.jsonl.");
    assert_eq!(rotated.len(), 2, "{rotated:?}");
    // Numbering goes on past the removed ones: the kept files are the newest.
    let n: Vec<u64> = rotated
        .iter()
        .map(|(f, _)| f.rsplit('.').next().unwrap().parse().unwrap())
        .collect();
    assert!(n[0] > 2 && n[1] == n[0] + 1, "{rotated:?}");
    // The newest entries are all there, contiguous up to the last one.
    let lines = grep(&env.home, "note-", "history.jsonl*");
    // (The glob lists the live file first: order by note.)
    let mut notes: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["notes"]
                .as_str()
                .unwrap()
                .into()
        })
        .collect();
    notes.sort();
    assert_eq!(notes.last().unwrap(), "note-029");
    let first: usize = notes[0].trim_start_matches("note-").parse().unwrap();
    let want: Vec<String> = (first..30).map(|k| format!("note-{k:03}")).collect();
    assert_eq!(notes, want);
}

#[test]
fn every_domains_ledger_rotates_under_the_same_rule() {
    let env = env_with(json!({"ledger_rotate_bytes": 1000}));
    for a in ["me", "other"] {
        env.run(&["agent", "register", a, "--watch", "ops"]).code(0);
    }
    for k in 0..20 {
        env.run(&["post", "ops", &format!("@me msg-{k:03}"), "--as", "ana"])
            .code(0);
    }
    assert!(!files(&env.home, "runtime-messages.jsonl.").is_empty());
    assert_eq!(grep(&env.home, "msg-", "runtime-messages.jsonl*").len(), 20);
    // Finished items: complete every item, then the finished-item ledger rotates too, and
    // `inbox --status completed` reads across its files.
    let items = env.run(&["--json", "inbox", "--agent", "me"]).json()["items"]
        .as_array()
        .unwrap()
        .clone();
    for i in &items {
        env.run(&[
            "inbox",
            "complete",
            i["id"].as_str().unwrap(),
            "--agent",
            "me",
            "--ref",
            "post_id=msg-000001",
        ])
        .code(0);
    }
    assert!(!files(&env.home, "runtime-inbox.jsonl.").is_empty());
    let done = env
        .run(&["--json", "inbox", "--status", "completed"])
        .json();
    assert_eq!(done["items"].as_array().unwrap().len(), 20);
    // A value that is not a count is refused like the journal's settings.
    env.write_home("config.json", r#"{"ledger_rotate_bytes": "big"}"#);
    let r = env.run(&["post", "ops", "x", "--as", "ana"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("config.json"), "{}", r.stderr);
}
