//! Issue 26: a reader positioned after a cursor seeks by seq in a big active segment (one large
//! transaction under a large `events_segment_bytes`) and reads back exactly the events after it.
//! Real binary, temp home.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::TestEnv;

fn seqs(page: &Value) -> Vec<u64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_reader_after_the_last_seq_of_a_big_journal_reads_exactly_the_new_events() {
    let env = TestEnv::new();
    // One transaction of many jobs: a multi-megabyte active segment of thousands of lines (a
    // segment size above it, so that the transaction is not cut into segments: see
    // journal_big.rs for that).
    env.write_home(
        "config.json",
        &json!({"events_segment_bytes": 64 * 1024 * 1024}).to_string(),
    );
    let jobs: Vec<Value> = (0..20_000)
        .map(|i| json!({"id": format!("j{i}"), "prompt": "p"}))
        .collect();
    env.run_stdin(
        &["queue", "submit", "-"],
        &json!({"workspace": "w", "jobs": jobs}).to_string(),
    )
    .code(0);
    let size = std::fs::metadata(env.home_file("events.jsonl"))
        .unwrap()
        .len();
    assert!(
        size > 4 * 1024 * 1024,
        "the active segment is only {size} bytes"
    );
    let last = env.run(&["events", "--after", "0", "--limit", "1"]).json();
    assert_eq!(seqs(&last), vec![1]);
    let total: u64 = std::fs::read_to_string(env.home_file("events.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert!(total >= 20_000, "expected an event per job, got {total}");

    // Cursors all over the segment read back exactly the events after them.
    for after in [0, 1, 2, total / 3, total / 2, total - 7, total - 1] {
        let page = env
            .run(&["events", "--after", &after.to_string(), "--limit", "5"])
            .json();
        let want: Vec<u64> = (after + 1..=(after + 5).min(total)).collect();
        assert_eq!(seqs(&page), want, "events --after {after}");
    }
    let page = env.run(&["events", "--after", &total.to_string()]).json();
    assert_eq!(seqs(&page), Vec::<u64>::new());
    assert_eq!(page["next_after_seq"], json!(total));

    // A watcher started after the last seq, then new events: it prints exactly those.
    let watch = env
        .cmd()
        .args([
            "--json",
            "watch",
            "--after",
            &total.to_string(),
            "--count",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = env.start("after-the-big-one", "P1");
    env.run(&["claim", "--instance", &id, "a.rs"]).code(0);
    env.run(&["claim", "--instance", &id, "b.rs"]).code(0);
    let out = watch.wait_with_output().unwrap();
    assert!(out.status.success());
    let watched: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(watched, (total + 1..=total + 2).collect::<Vec<_>>());

    // And a page after the old last seq is exactly the new events, in order.
    let page = env.run(&["events", "--after", &total.to_string()]).json();
    let new = seqs(&page);
    assert!(new.len() >= 2, "{page}");
    assert_eq!(
        new,
        (total + 1..=total + new.len() as u64).collect::<Vec<_>>()
    );
}
