//! A power cut with big documents logged as deltas (issue 35): the machine goes down after
//! acknowledged claims whose `status.json` only the commit log holds, as changes to a version it
//! logged whole. The next command rebuilds every version from the log, and nothing acknowledged
//! is lost. A power cut is played by what survives one: the synced log, the files as they were
//! before the unsynced writes, and a log header naming another boot.

use crate::common::TestEnv;

/// Replace the boot id in the commit log's header by one no machine has.
fn from_another_boot(env: &TestEnv) {
    let path = env.home_file("commit.log");
    let log = std::fs::read(&path).unwrap();
    let nl = log.iter().position(|b| *b == b'\n').unwrap();
    let header = std::str::from_utf8(&log[..nl]).unwrap();
    let (prefix, boot) = header.rsplit_once(' ').unwrap();
    assert!(prefix.starts_with("conductor-commit-log"), "{header}");
    let mut other = format!("{prefix} {}", "0".repeat(boot.len())).into_bytes();
    other.extend_from_slice(&log[nl..]);
    std::fs::write(&path, other).unwrap();
}

#[test]
fn a_power_cut_after_claims_logged_as_deltas_loses_none_of_them() {
    if std::fs::read_to_string("/proc/sys/kernel/random/boot_id").is_err() {
        return; // not Linux: every commit checkpoints, there is no delta to rebuild
    }
    let env = TestEnv::new();
    let a = env.start("big", "P1");
    let files: Vec<String> = (0..400).map(|i| format!("src/many/f{i}.rs")).collect();
    let mut args = vec!["--json", "claim", "--instance", a.as_str()];
    args.extend(files.iter().map(String::as_str));
    env.run(&args).code(0);
    let size = std::fs::metadata(env.home_file("status.json"))
        .unwrap()
        .len();
    assert!(size > 32 * 1024, "status.json is {size} bytes");
    // What the disk holds of these files if nothing written after this point reached it.
    let kept: Vec<(&str, Vec<u8>)> = [
        "status.json",
        ".status.json.last",
        "events.jsonl",
        "events.seq",
    ]
    .into_iter()
    .map(|f| (f, std::fs::read(env.home_file(f)).unwrap()))
    .collect();
    let log_before = std::fs::metadata(env.home_file("commit.log"))
        .unwrap()
        .len();
    let b = env.start("second", "P2");
    let mut acked = Vec::new();
    for i in 0..20 {
        let (who, file) = if i % 3 == 0 {
            (&b, format!("src/b{i}.rs"))
        } else {
            (&a, format!("src/a{i}.rs"))
        };
        env.run(&["--json", "claim", "--instance", who, &file])
            .code(0);
        acked.push((who.clone(), env.abs(&file)));
    }
    env.run(&["--json", "release", "--instance", &a, "src/many/f7.rs"])
        .code(0);
    // Each claim logged its changes, not the whole state again.
    let log = std::fs::read(env.home_file("commit.log")).unwrap();
    let grown = log.len() as u64 - log_before;
    assert!(
        grown < 22 * size / 4,
        "the log grew by {grown} for 22 commits of a {size}-byte state"
    );
    // (a record's index lists its deltas under "d")
    assert!(log.windows(6).filter(|w| w == b"\"d\":[[").count() >= 15);
    let want = env.state();

    // The machine goes down: only the log was synced.
    from_another_boot(&env);
    for (f, bytes) in &kept {
        std::fs::write(env.home_file(f), bytes).unwrap();
    }
    let seen = env.run(&["--json", "status"]);
    seen.code(0);
    let state = env.state();
    let n = |v: &serde_json::Value| v["global_claims"].as_object().map_or(0, |m| m.len());
    assert!(
        state["global_claims"] == want["global_claims"],
        "global_claims after recovery: {} claims, acknowledged: {}",
        n(&state),
        n(&want)
    );
    assert!(
        state["instances"] == want["instances"],
        "the instances differ after recovery"
    );
    for (who, file) in &acked {
        assert_eq!(
            state["global_claims"][file.as_str()],
            who.as_str(),
            "{file}"
        );
    }
    assert!(state["global_claims"][env.abs("src/many/f7.rs").as_str()].is_null());
    // The journal has every commit's events, numbered without a gap.
    let events = crate::common::read_lines(&env.home_file("events.jsonl"));
    let seqs: Vec<u64> = events
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(seqs.len() >= 24, "{} events", seqs.len());
    // And the next commit works on from there.
    env.run(&["--json", "claim", "--instance", &b, "src/after.rs"])
        .code(0);
}
