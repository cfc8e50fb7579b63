//! Issue 25, "friction to remove": long waits announced once, list commands with headers and
//! aligned columns, prompts that say how to record an outcome, `queue add`/`pause`/`resume`,
//! `doctor`'s tool checks, the shell integration's source and messages, `wait` on directories.

use std::time::{Duration, Instant};

use crate::common::*;

fn hold_state_lock(env: &TestEnv) -> conductor::store::lock::StoreLock {
    conductor::store::lock::acquire(
        &env.home_file("status.lock"),
        Duration::from_secs(5),
        &|| {},
    )
    .expect("the test holds the lock")
}

#[test]
fn a_short_wait_for_a_lock_says_nothing() {
    let env = TestEnv::new();
    let a = env.start("writer", "P1");
    let lock = hold_state_lock(&env);
    let child = env
        .cmd()
        .args(["claim", "--instance", &a, "src/a.rs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Blocking"), "a 0.3 s wait is not announced: {stderr}");
}

#[test]
fn a_long_wait_for_a_lock_is_announced_once_after_about_a_second() {
    let env = TestEnv::new();
    let a = env.start("writer", "P1");
    let lock = hold_state_lock(&env);
    let started = Instant::now();
    let mut child = env
        .cmd()
        .args(["claim", "--instance", &a, "src/a.rs", "src/b.rs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr as it comes: the line appears while the lock is still held.
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut first = [0u8; 8];
        let n = stderr.read(&mut first).unwrap_or(0);
        let at = Instant::now();
        let mut rest = Vec::new();
        let _ = stderr.read_to_end(&mut rest);
        let mut all = first[..n].to_vec();
        all.extend(rest);
        (at, String::from_utf8_lossy(&all).to_string())
    });
    std::thread::sleep(Duration::from_millis(2500));
    drop(lock);
    let status = child.wait().unwrap();
    let (first_line_at, stderr) = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("Blocking: waiting for the state lock").count(),
        1,
        "one line, however long the wait: {stderr}"
    );
    let after = first_line_at - started;
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_millis(2500),
        "announced after about a second, while still waiting (after {after:?})"
    );
    assert!(stderr.contains("--lock-timeout"), "{stderr}");
    // --quiet: nothing at all.
    let lock = hold_state_lock(&env);
    let child = env
        .cmd()
        .args(["--quiet", "claim", "--instance", &a, "src/c.rs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    drop(lock);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
