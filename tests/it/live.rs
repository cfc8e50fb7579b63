//! Issue 25, the live views: `queue log --follow`, `workflow log --follow`, `top`,
//! `status --watch`, driven by real processes against a temp home.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{TestEnv, blocks_sigint, parked, wait_until};

/// The bound within which a follower must show what was written.
const BOUND: Duration = Duration::from_secs(5);
/// The bound within which a change the test made must wake a follower: the followers run with
/// `CONDUCTOR_WATCH_POLL=never`, so only a notification can wake them in time (a poller of a
/// few seconds would fail).
const WAKE: Duration = Duration::from_secs(2);

/// A child whose stdout lines arrive on a channel.
struct Follower {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Follower {
    fn spawn(mut c: Command) -> Follower {
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn conductor");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Follower {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Wait (at most `bound`) for a line containing `needle`; true when it came.
    fn until(&mut self, needle: &str, bound: Duration) -> bool {
        if self.seen.iter().any(|l| l.contains(needle)) {
            return true;
        }
        let deadline = Instant::now() + bound;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    self.seen.push(l);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Wait (at most `bound`) for the process to exit; its code.
    fn exit(&mut self, bound: Duration) -> Option<i32> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(l);
                }
                return st.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn script(env: &TestEnv, name: &str, body: &str) -> PathBuf {
    let p = env.dir("bin").join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn submit(env: &TestEnv, manifest: &serde_json::Value) {
    env.run_stdin(&["queue", "submit", "-"], &manifest.to_string())
        .code(0);
}

fn spawn_args(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = env.cmd();
    c.args(args).env("CONDUCTOR_WATCH_POLL", "never");
    c
}

/// A job that writes a line, then waits for the test's gate file, then writes another.
fn gated_job(env: &TestEnv) -> (PathBuf, String) {
    let gate = env.root.path().join("gate");
    let agent = script(
        env,
        "gated.sh",
        &format!(
            "echo first-line-from-job\nwhile [ ! -e {g} ]; do sleep 0.02; done\necho second-line-from-job\n",
            g = gate.display()
        ),
    );
    (gate, format!("sh {}", agent.display()))
}

#[test]
fn issue_25_queue_log_follow_streams_lines_as_written_and_ends_with_the_job() {
    let env = TestEnv::new();
    let (gate, cmd) = gated_job(&env);
    submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "j", "prompt": "p"}]}),
    );
    // The follower starts before the job: it waits for the first attempt.
    let mut f = Follower::spawn(spawn_args(&env, &["queue", "log", "j", "--follow"]));
    let mut dispatcher = spawn_args(&env, &["queue", "run", "--agent-cmd", &cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        f.until("===== conductor: attempt 1 (local runner) at ", BOUND),
        "no attempt header: {:?}",
        f.seen
    );
    assert!(
        f.until("first-line-from-job", BOUND),
        "the follower did not show the first line while the job runs: {:?}",
        f.seen
    );
    // The job is still running (it waits for the gate), and the follower too.
    assert!(f.child.try_wait().unwrap().is_none());
    assert!(!f.seen.iter().any(|l| l.contains("second-line")));
    std::fs::write(&gate, "").unwrap();
    assert!(f.until("second-line-from-job", WAKE), "{:?}", f.seen);
    let code = f.exit(BOUND);
    let err = f.stderr();
    assert_eq!(code, Some(0), "follower exit: {:?} {err}", f.seen);
    assert_eq!(dispatcher.wait().unwrap().code(), Some(0));
    // Without --follow: the whole log, once.
    let r = env.run(&["queue", "log", "w/j"]);
    r.code(0);
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| !l.starts_with("===== conductor: attempt"))
            .collect::<Vec<_>>(),
        ["first-line-from-job", "second-line-from-job"]
    );
}

#[test]
fn issue_25_queue_log_separates_attempts_and_follow_exits_5_on_failure() {
    let env = TestEnv::new();
    let marker = env.root.path().join("tried");
    let agent = script(
        &env,
        "flaky.sh",
        &format!(
            "if [ -e {m} ]; then echo second-try-ok; else touch {m}; echo first-try-bad; exit 3; fi\n",
            m = marker.display()
        ),
    );
    let cmd = format!("sh {}", agent.display());
    submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "j", "prompt": "p"}]}),
    );
    env.run(&["queue", "run", "--agent-cmd", &cmd]).code(5);
    // A follower of a failed job prints what there is and says how it ended.
    let r = env.run(&["queue", "log", "j", "--follow"]);
    assert_eq!(r.code, 5, "{r:#?}");
    assert!(r.stdout.contains("first-try-bad"), "{r:#?}");
    env.run(&["queue", "retry", "j", "--agent-cmd", &cmd])
        .code(0);
    let r = env.run(&["queue", "log", "j"]);
    r.code(0);
    let lines: Vec<&str> = r.stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("===== conductor: attempt 1"),
        "{lines:?}"
    );
    assert_eq!(lines[1], "first-try-bad");
    assert!(
        lines[2].starts_with("===== conductor: attempt 2 (local runner) at "),
        "{lines:?}"
    );
    assert_eq!(lines[3], "second-try-ok");
    // A finished job's follower ends at once with 0.
    env.run(&["queue", "log", "j", "--follow"]).code(0);
    // An unknown job: exit 2, one line.
    let r = env.run(&["queue", "log", "nope"]);
    r.code(2);
    assert!(r.stderr.contains("no job `nope`"), "{r:#?}");
}

#[test]
fn issue_25_queue_log_follow_stops_on_sigint_with_0() {
    let env = TestEnv::new();
    submit(
        &env,
        &json!({"workspace": "w", "jobs": [{"id": "j", "prompt": "p"}]}),
    );
    // No dispatcher: the job stays queued and the follower waits.
    let mut f = Follower::spawn(spawn_args(&env, &["queue", "log", "j", "--follow"]));
    // It handles SIGINT itself, looked at the job and waits for a change.
    let pid = f.child.id();
    assert!(
        wait_until(20.0, || blocks_sigint(pid) && parked(pid)),
        "the follower waits"
    );
    assert!(f.child.try_wait().unwrap().is_none(), "{}", f.stderr());
    unsafe { libc::kill(f.child.id() as i32, libc::SIGINT) };
    assert_eq!(f.exit(BOUND), Some(0));
}

const TWO_STATES: &str = r#"{
  "name": "Two",
  "initial": "plan",
  "states": {
    "plan":  { "persona": "architect", "prompt": "Plan.", "next": ["build"] },
    "build": { "persona": "builder", "prompt": "Build.", "next": ["done"] }
  }
}"#;

#[test]
fn issue_25_workflow_log_follow_streams_each_run_under_its_header_until_done() {
    let env = TestEnv::new();
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("two.json"), TWO_STATES).unwrap();
    let gate = env.root.path().join("gate");
    let worker = script(
        &env,
        "worker.sh",
        &format!(
            r#"C="$CONDUCTOR_BIN"
case "$CONDUCTOR_WORKFLOW_STATE" in
  plan) echo plan-starts
        while [ ! -e {g} ]; do sleep 0.02; done
        echo plan-ends
        $C workflow transition build --summary planned >/dev/null ;;
  build) echo build-output
         $C workflow transition done --summary built >/dev/null ;;
esac
"#,
            g = gate.display()
        ),
    );
    let r = env.run(&["--json", "workflow", "start", "two", "Live views"]);
    r.code(0);
    let id = r.json()["session"].as_str().unwrap().to_string();
    let mut f = Follower::spawn(spawn_args(&env, &["workflow", "log", &id, "--follow"]));
    let agent = format!("sh {} {{prompt_file}}", worker.display());
    let mut sup = spawn_args(&env, &["workflow", "run", &id, "--agent-cmd", &agent]);
    sup.env("CONDUCTOR_BIN", crate::common::bin())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut sup = sup.spawn().unwrap();
    assert!(
        f.until("===== conductor: run 1 (state plan, attempt 1) at ", BOUND),
        "{:?}",
        f.seen
    );
    assert!(f.until("plan-starts", BOUND), "{:?}", f.seen);
    // The worker still runs (it waits for the gate): the follower showed its line live.
    assert!(f.child.try_wait().unwrap().is_none());
    assert!(!f.seen.iter().any(|l| l.contains("plan-ends")));
    std::fs::write(&gate, "").unwrap();
    assert!(
        f.until("===== conductor: run 2 (state build, attempt 1)", BOUND),
        "{:?}",
        f.seen
    );
    assert!(f.until("build-output", BOUND), "{:?}", f.seen);
    assert_eq!(f.exit(BOUND), Some(0), "{:?}", f.seen);
    assert_eq!(sup.wait().unwrap().code(), Some(0));
    let body: Vec<&String> = f
        .seen
        .iter()
        .filter(|l| !l.starts_with("=====") && !l.is_empty())
        .collect();
    assert_eq!(body, ["plan-starts", "plan-ends", "build-output"]);
    // --state: only that state's runs; an unknown state is refused with exit 2.
    let r = env.run(&["workflow", "log", &id, "--state", "build"]);
    r.code(0);
    assert_eq!(r.stdout.lines().count(), 2, "{r:#?}");
    assert!(r.stdout.contains("build-output") && !r.stdout.contains("plan-starts"));
    let r = env.run(&["workflow", "log", &id, "--state", "nope"]);
    r.code(2);
    assert!(r.stderr.contains("no state `nope`"), "{r:#?}");
}

/// A home with one of everything: an instance holding a claim, an agent with an inbox item,
/// a workflow session, two queue jobs. Returns the instance id and the session id.
fn seed(env: &TestEnv) -> (String, String) {
    let id = env.start("refactor the parser", "P1");
    let a = env.project.join("src/a.rs").display().to_string();
    env.run(&["claim", &a, "--instance", &id]).code(0);
    env.run(&["agent", "register", "reviewer", "--watch", "general"])
        .code(0);
    env.run(&[
        "post",
        "general",
        "@reviewer please look at the parser",
        "--as",
        "ana",
    ])
    .code(0);
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("two.json"), TWO_STATES).unwrap();
    let r = env.run(&["--json", "workflow", "start", "two", "Live views"]);
    r.code(0);
    let session = r.json()["session"].as_str().unwrap().to_string();
    submit(
        env,
        &json!({"workspace": "w", "jobs": [{"id": "j", "prompt": "p"},
            {"id": "k", "prompt": "p", "depends_on": ["j"]}]}),
    );
    (id, session)
}

#[test]
fn issue_25_top_frame_shows_the_seeded_home_and_the_next_frame_shows_a_new_claim() {
    let env = TestEnv::new();
    let (id, session) = seed(&env);
    let frame = |extra: &[&str]| {
        let mut args = vec!["top", "--once", "--size", "120x40"];
        args.extend_from_slice(extra);
        let r = env.run_env(&args, &[("TERM", "xterm-256color")]);
        r.code(0);
        r.stdout
    };
    let f = frame(&[]);
    let has = |f: &str, needle: &str| assert!(f.contains(needle), "no `{needle}` in:\n{f}");
    has(&f, "┌ Instances and claims (1) ");
    has(
        &f,
        &format!("> {id}  P1  proj · refactor the parser · 1 claim"),
    );
    has(&f, "src/a.rs");
    has(&f, "┌ Agents and inboxes (1) ");
    has(
        &f,
        "@reviewer  inbox 1 open (0 claimed) · 1 mention · watching general",
    );
    has(&f, "┌ Workflow sessions (1) ");
    has(
        &f,
        &format!("{session}  running  Two · Live views · Plan [●]"),
    );
    has(&f, "┌ Queue jobs · 2 jobs: 1 queued, 1 ready ");
    has(&f, "ready      w/j  attempt 0");
    has(&f, "queued     w/k  attempt 0");
    has(&f, "Enter details · q quit");
    assert!(!f.contains("lexer.rs"));
    // A claim made by another process: the next frame shows it.
    let lexer = env.project.join("src/lexer.rs").display().to_string();
    env.run(&["claim", &lexer, "--instance", &id]).code(0);
    let f = frame(&[]);
    has(&f, "refactor the parser · 2 claims");
    has(&f, "src/lexer.rs");
    // --ascii (and TERM=dumb): nothing but ASCII.
    let f = frame(&["--ascii"]);
    assert!(f.is_ascii(), "{f}");
    has(&f, "+ Instances and claims (1) ---");
    let r = env.run_env(&["top", "--once"], &[("TERM", "dumb")]);
    assert!(
        r.stdout.is_ascii() && r.stdout.contains("| "),
        "{}",
        r.stdout
    );
    // A bad size is refused by the parser (exit 2), and top without a terminal says what to use.
    env.run(&["top", "--once", "--size", "5x5"]).code(2);
    let r = env.run(&["top"]);
    r.code(2);
    assert!(r.stderr.contains("status --watch"), "{r:#?}");
}

fn python3() -> &'static str {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "python3 is needed to drive `conductor top` in a pseudo-terminal: install it (apt-get install python3)"
    );
    "python3"
}

#[test]
fn issue_25_top_in_a_pseudo_terminal_shows_a_claim_as_it_happens_and_quits_on_q() {
    let env = TestEnv::new();
    let (id, _) = seed(&env);
    let driver = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/pty_top.py");
    let bin = crate::common::bin();
    let mut c = Command::new(python3());
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env("CONDUCTOR_WATCH_POLL", "never")
        .current_dir(&env.project)
        .stdin(Stdio::piped())
        .arg(&driver)
        .args(["120", "40"])
        .args([
            "see:src/a.rs",
            "line:",
            "see:src/lexer.rs",
            "key:enter",
            "see:Instances and claims · details",
            "see:claims     2",
            "key:esc",
            "see:Agents and inboxes (1)",
            "key:j",
            "key:enter",
            "see:agent      reviewer (@reviewer)",
            "key:esc",
            "gone:agent      reviewer",
            "key:q",
            "--",
        ])
        .arg(&bin)
        .arg("top");
    let mut f = Follower::spawn(c);
    let mut go = f.child.stdin.take().unwrap();
    assert!(f.until("SEEN src/a.rs", BOUND), "{:?}", f.seen);
    let lexer = env.project.join("src/lexer.rs").display().to_string();
    let t = Instant::now();
    env.run(&["claim", &lexer, "--instance", &id]).code(0);
    use std::io::Write;
    writeln!(go).unwrap();
    assert!(f.until("SEEN src/lexer.rs", BOUND), "{:?}", f.seen);
    let seen_in = t.elapsed();
    assert!(f.until("SEEN claims     2", BOUND), "{:?}", f.seen);
    assert!(
        f.until("SEEN Agents and inboxes (1)", BOUND),
        "{:?}",
        f.seen
    );
    // j moves to the next row (the agent), Enter opens its details, Esc closes them.
    assert!(
        f.until("SEEN agent      reviewer (@reviewer)", BOUND),
        "{:?}",
        f.seen
    );
    assert!(f.until("GONE agent      reviewer", BOUND), "{:?}", f.seen);
    assert!(f.until("EXIT 0", BOUND), "{:?}", f.seen);
    assert!(
        seen_in < WAKE,
        "woken by the claim's notification: {seen_in:?}"
    );
}

#[test]
fn issue_25_status_watch_reprints_on_each_change_and_json_gives_one_document_per_change() {
    let env = TestEnv::new();
    let id = env.start("watch me", "P2");
    let mut text = Follower::spawn(spawn_args(&env, &["status", "--watch"]));
    let mut js = Follower::spawn(spawn_args(&env, &["--json", "status", "--watch"]));
    assert!(
        text.until("Instances and claims (1)", BOUND),
        "{:?}",
        text.seen
    );
    assert!(text.until("watch me · 0 claims", BOUND), "{:?}", text.seen);
    assert!(js.until("\"instances\"", BOUND), "{:?}", js.seen);
    let lexer = env.project.join("src/lexer.rs").display().to_string();
    env.run(&["claim", &lexer, "--instance", &id]).code(0);
    assert!(text.until("watch me · 1 claim ", WAKE), "{:?}", text.seen);
    assert!(text.until("src/lexer.rs", BOUND), "{:?}", text.seen);
    assert!(js.until("lexer.rs", BOUND), "{:?}", js.seen);
    // One JSON document per line, each the whole overview.
    let docs: Vec<serde_json::Value> = js
        .seen
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert_eq!(docs[0]["instances"][0]["claims"], json!([]));
    assert_eq!(docs[1]["instances"][0]["claims"], json!([lexer]));
    assert!(docs[1]["seq"].as_u64() > docs[0]["seq"].as_u64());
    for f in [&mut text, &mut js] {
        unsafe { libc::kill(f.child.id() as i32, libc::SIGTERM) };
        assert_eq!(f.exit(BOUND), Some(0));
    }
}
