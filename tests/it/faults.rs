//! Issue 3, item 4: faults. A held lock, a read-only home, a full disk, a vanished directory:
//! each fails with a clear error and the documented exit code, and every file in the home is
//! byte-identical afterwards.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// A home with some of everything: two instances, claims, a conflict, history.
fn busy_env() -> (TestEnv, String, String) {
    let env = TestEnv::new();
    let a = env.start("writer A", "P1");
    let b = env.start("writer B", "P1");
    env.run(&["claim", "--instance", &a, "src/a.rs", "src/b.rs"])
        .code(0);
    env.run(&["claim", "--instance", &b, "src/a.rs", "src/c.rs"])
        .code(3);
    let c = env.start("finished", "P1");
    env.run(&["done", "--instance", &c]).code(0);
    (env, a, b)
}

#[test]
fn a_lock_held_past_the_timeout_names_the_lock_and_its_holder() {
    let (env, a, _) = busy_env();
    let before = env.snapshot();
    let lock = conductor::store::lock::acquire(
        &env.home_file("status.lock"),
        Duration::from_secs(5),
        &|| {},
    )
    .expect("the test holds the lock");
    let r = env.run(&[
        "--json",
        "--lock-timeout",
        "1.5",
        "claim",
        "--instance",
        &a,
        "src/new.rs",
    ]);
    r.code(1);
    let j = r.json();
    assert_eq!(j["reason"], "lock_timeout");
    let msg = j["message"].as_str().unwrap();
    assert!(
        msg.contains(&env.home_file("status.lock").display().to_string()),
        "names the lock file: {msg}"
    );
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "names the holder: {msg}"
    );
    assert!(
        r.stderr
            .matches("Blocking: waiting for the state lock")
            .count()
            == 1,
        "says once that it is waiting: {}",
        r.stderr
    );
    assert_eq!(env.snapshot(), before, "nothing changed");
    drop(lock);
    env.run(&["claim", "--instance", &a, "src/new.rs"]).code(0);
}

#[test]
fn a_holder_that_is_not_conductor_is_not_misnamed() {
    let (env, a, _) = busy_env();
    // flock(1) holds the lock and writes no holder note; a stale note from a finished
    // conductor must not be reported as the holder.
    if let Err(e) = Command::new("flock").arg("--version").output() {
        return missing("flock", &format!("flock(1) cannot be run: {e}"));
    }
    let mut holder = Command::new("flock")
        .arg(env.home_file("status.lock"))
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    assert!(wait_until(5.0, || env
        .run(&[
            "--json",
            "--lock-timeout",
            "0",
            "heartbeat",
            "--instance",
            &a
        ])
        .code
        == 1));
    let r = env.run(&[
        "--json",
        "--lock-timeout",
        "0.2",
        "heartbeat",
        "--instance",
        &a,
    ]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    r.code(1);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(!msg.contains("held by"), "no holder is invented: {msg}");
}

/// Run conductor in a private mount namespace where the home is mounted read-only. `None` when
/// this machine does not allow unprivileged user namespaces.
fn run_read_only(env: &TestEnv, args: &[&str]) -> Option<Run> {
    let probe = Command::new("unshare").args(["-rm", "true"]).output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        return None;
    }
    let home = env.home.display().to_string();
    let mut c = env.cmd();
    c.program_replace("unshare");
    let script = r#"mount --bind "$CONDUCTOR_HOME" "$CONDUCTOR_HOME" && mount -o remount,bind,ro "$CONDUCTOR_HOME" && exec "$@""#;
    c.args(["-rm", "sh", "-c", script, "sh"])
        .arg(bin())
        .args(args);
    let _ = home;
    Some(env.run_cmd(&mut c))
}

trait ProgramReplace {
    fn program_replace(&mut self, program: &str) -> &mut Self;
}

impl ProgramReplace for Command {
    /// Keep the environment and directory of a prepared command, but run another program.
    fn program_replace(&mut self, program: &str) -> &mut Self {
        let mut c = Command::new(program);
        c.env_clear();
        for (k, v) in self.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        if let Some(d) = self.get_current_dir() {
            c.current_dir(d);
        }
        *self = c;
        self
    }
}

#[test]
fn a_read_only_home_fails_writes_cleanly_and_still_serves_reads() {
    let (env, a, _) = busy_env();
    let before = env.snapshot();
    let Some(r) = run_read_only(&env, &["--json", "claim", "--instance", &a, "src/new.rs"]) else {
        return missing(
            "mount",
            "`unshare -rm` fails: no user namespace for a read-only bind mount of the home",
        );
    };
    r.code(1);
    let j = r.json();
    assert_eq!(j["reason"], "io", "{j}");
    assert!(
        j["message"]
            .as_str()
            .unwrap()
            .contains(&env.home.display().to_string()),
        "{j}"
    );
    assert_eq!(env.snapshot(), before);
    let status = run_read_only(&env, &["--json", "status"]).unwrap();
    status.code(0);
    assert_eq!(
        status.json()["summary"]["active_count"],
        2,
        "reads need no write access"
    );
}

/// Run with a file-size limit: writes past `limit` bytes fail with EFBIG, like a full disk
/// (SIGXFSZ is ignored so the write returns the error instead of killing the process).
fn run_with_fsize_limit(env: &TestEnv, limit: u64, args: &[&str]) -> Run {
    let mut c = env.cmd();
    c.args(args);
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    env.run_cmd(&mut c)
}

#[test]
fn a_full_disk_leaves_every_file_byte_identical() {
    let (env, a, b) = busy_env();
    // Grow the journal past the state, so a limit can sit between them.
    for _ in 0..30 {
        env.run(&["heartbeat", "--instance", &a]).code(0);
    }
    let size = |n: &str| {
        std::fs::metadata(env.home_file(n))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    assert!(
        size("events.jsonl") > size("status.json") + 2000,
        "the journal is the biggest file"
    );
    let before = env.snapshot();
    let cases: [(&str, u64); 2] = [
        // The new state does not fit: fails before anything is appended.
        ("state write", size("status.json")),
        // The state fits, conflicts.log takes its line, the journal append fails: the
        // conflicts.log line must be cut back off.
        ("journal append", size("events.jsonl")),
    ];
    for (what, limit) in cases {
        for args in [
            vec![
                "--json",
                "claim",
                "--instance",
                &b,
                "src/a.rs",
                "src/new-1.rs",
                "src/new-2.rs",
            ],
            vec!["--json", "release", "--instance", &a, "src/b.rs"],
            vec!["--json", "start", "one more", "--priority", "P1"],
        ] {
            let r = run_with_fsize_limit(&env, limit, &args);
            r.code(1);
            let j = r.json();
            assert_eq!(j["reason"], "io", "{what} {args:?}: {j}");
            assert!(
                j["message"].as_str().unwrap().contains("too large"),
                "{what}: {j}"
            );
            assert_eq!(
                env.snapshot(),
                before,
                "{what}: {args:?} left the home byte-identical"
            );
        }
    }
    let temps: Vec<_> = std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "no temp files left behind");
    // With room again, the same claim works and nothing from the failed attempts shows up.
    env.run(&["--json", "claim", "--instance", &b, "src/new-1.rs"])
        .code(0);
    let log = std::fs::read_to_string(env.home_file("conflicts.log")).unwrap();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("src/a.rs already held"))
            .count(),
        1,
        "the failed claims' CONFLICT lines were taken back"
    );
}

#[test]
fn a_real_full_tmpfs_leaves_every_file_byte_identical() {
    let probe = Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"])
        .output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        return missing("mount", "cannot mount a tmpfs in a user namespace here");
    }
    let (env, a, _) = busy_env();
    // Inside a private namespace: copy the home onto a small tmpfs, fill it, run a claim,
    // and compare every file before and after.
    let script = r#"
        set -e
        src="$CONDUCTOR_HOME"; mnt="$(mktemp -d)"
        mount -t tmpfs -o size=256k,mode=0700 none "$mnt"
        cp -a "$src/." "$mnt/"
        dd if=/dev/zero of="$mnt/filler" bs=1k 2>/dev/null || true
        before=$(cd "$mnt" && sha256sum $(ls -A | grep -v -e '^filler$' -e '^status.lock$'))
        set +e
        CONDUCTOR_HOME="$mnt" "$@" >"$mnt.out" 2>"$mnt.err"; code=$?
        set -e
        after=$(cd "$mnt" && sha256sum $(ls -A | grep -v -e '^filler$' -e '^status.lock$'))
        echo "code=$code"; cat "$mnt.out"
        if [ "$before" = "$after" ]; then echo identical; else echo CHANGED; echo "$before"; echo "$after"; fi
    "#;
    let mut c = env.cmd();
    c.program_replace("unshare");
    c.args(["-rm", "sh", "-c", script, "sh"]).arg(bin()).args([
        "--json",
        "claim",
        "--instance",
        &a,
        "src/new.rs",
    ]);
    let r = env.run_cmd(&mut c);
    assert!(r.stdout.contains("code=1"), "a full disk is exit 1: {r:?}");
    assert!(r.stdout.contains("\"reason\":\"io\""), "{r:?}");
    assert!(
        r.stdout.contains("identical"),
        "every file byte-identical: {r:?}"
    );
}

#[test]
fn a_vanished_current_directory() {
    let (env, a, _) = busy_env();
    let before = env.snapshot();
    let gone = env.root.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let run_in_deleted = |args: &[&str]| {
        let mut c = env.cmd();
        c.program_replace("sh");
        c.arg("-c")
            .arg(r#"cd "$1" && rmdir "$1" && shift && exec "$@""#)
            .arg("sh")
            .arg(&gone)
            .arg(bin())
            .args(args);
        let r = env.run_cmd(&mut c);
        std::fs::create_dir_all(&gone).unwrap();
        r
    };
    // Without --instance the directory is needed to pick the instance: a clear exit 2.
    let r = run_in_deleted(&["--json", "claim", "src/x.rs"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "no_working_directory");
    assert_eq!(env.snapshot(), before);
    // With --instance, relative paths resolve against the instance's working directory.
    let r = run_in_deleted(&["--json", "claim", "--instance", &a, "src/x.rs"]);
    r.code(0);
    assert_eq!(r.json()["claimed"][0], env.abs("src/x.rs"));
}

#[test]
fn a_vanished_working_directory_of_an_instance() {
    let env = TestEnv::new();
    let other = env.root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let r = env.run(&[
        "--json",
        "start",
        "elsewhere",
        "--priority",
        "P1",
        "--dir",
        other.to_str().unwrap(),
    ]);
    let id = r.json()["instance_id"].as_str().unwrap().to_string();
    let other = std::fs::canonicalize(&other).unwrap();
    std::fs::remove_dir(&other).unwrap();
    let r = env.run(&["--json", "claim", "--instance", &id, "src/x.rs"]);
    r.code(0);
    assert_eq!(
        r.json()["claimed"][0],
        other.join("src/x.rs").display().to_string()
    );
    env.run(&["--json", "status"]).code(0);
    env.run(&["--json", "done", "--instance", &id]).code(0);
}
