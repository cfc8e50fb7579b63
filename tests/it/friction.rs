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
    // It waits for the lock (blocked in flock: /proc/locks says so), and goes on waiting for
    // 0.3 s of the second after which a wait is announced.
    assert!(
        wait_until(20.0, || lock_waiter(
            &env.home_file("status.lock"),
            child.id()
        )),
        "the claim waits for the lock"
    );
    std::thread::sleep(Duration::from_millis(300));
    drop(lock);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("Blocking"),
        "a 0.3 s wait is not announced: {stderr}"
    );
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
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut first = [0u8; 8];
        let n = stderr.read(&mut first).unwrap_or(0);
        let _ = first_tx.send(Instant::now());
        let mut rest = Vec::new();
        let _ = stderr.read_to_end(&mut rest);
        let mut all = first[..n].to_vec();
        all.extend(rest);
        String::from_utf8_lossy(&all).to_string()
    });
    assert!(
        wait_until(20.0, || lock_waiter(
            &env.home_file("status.lock"),
            child.id()
        )),
        "the claim waits for the lock"
    );
    // The lock stays held until the announcement came, and for a while after (it is said once,
    // however long the wait).
    let first_line_at = first_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the wait is announced while the lock is held");
    std::thread::sleep(Duration::from_millis(1500));
    drop(lock);
    let status = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr
            .matches("Blocking: waiting for the state lock")
            .count(),
        1,
        "one line, however long the wait: {stderr}"
    );
    let after = first_line_at - started;
    assert!(
        after >= Duration::from_millis(900),
        "announced after about a second (after {after:?})"
    );
    assert!(stderr.contains("--lock-timeout"), "{stderr}");
    // --quiet: nothing at all. It waits first; a twin without --quiet that starts waiting after
    // it is announced, so the quiet one has waited long enough to have announced too.
    let lock = hold_state_lock(&env);
    let waiting = |c: &std::process::Child| lock_waiter(&env.home_file("status.lock"), c.id());
    let quiet = env
        .cmd()
        .args(["--quiet", "claim", "--instance", &a, "src/c.rs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(20.0, || waiting(&quiet)),
        "the quiet claim waits"
    );
    let mut twin = env
        .cmd()
        .args(["claim", "--instance", &a, "src/d.rs"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(20.0, || waiting(&twin)), "the twin waits");
    let mut twin_err = std::io::BufReader::new(twin.stderr.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    twin_err.read_line(&mut line).unwrap();
    assert!(
        line.contains("Blocking: waiting for the state lock"),
        "{line}"
    );
    drop(lock);
    let out = quiet.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(twin.wait().unwrap().success());
}

/// Every row of a table starts each column at the header's offset for it.
#[track_caller]
fn assert_aligned(text: &str, header: &[&str]) {
    let lines: Vec<&str> = text.lines().collect();
    let head = lines[0];
    let mut offsets = Vec::new();
    for h in header {
        let at = head
            .find(&format!("{h}"))
            .unwrap_or_else(|| panic!("header {h} in {head:?}"));
        offsets.push(at);
    }
    assert_eq!(offsets[0], 0, "{text}");
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{text}");
    for row in &lines[1..] {
        for &o in &offsets[1..] {
            if row.len() <= o {
                // Empty trailing cells are not padded.
                assert!(!row.ends_with(' '), "{row:?}");
                continue;
            }
            let before = &row[..o];
            assert!(
                before.ends_with("  ") && !row[o..].starts_with(' '),
                "column at {o} of {row:?} is aligned under the header:\n{text}"
            );
        }
    }
}

#[test]
fn list_commands_print_a_header_and_aligned_columns() {
    let env = TestEnv::new();
    // queue jobs
    env.run_stdin(
        &["queue", "submit", "-"],
        &serde_json::json!({"workspace": "w", "jobs": [
            {"id": "a", "prompt": "p"},
            {"id": "a-much-longer-job-name", "prompt": "p", "depends_on": ["a"]}
        ]})
        .to_string(),
    )
    .code(0);
    let r = env.run(&["queue", "jobs"]);
    r.code(0);
    assert_aligned(&r.stdout, &["STATE", "JOB", "ATTEMPTS", "DETAIL"]);
    assert!(
        r.stdout.contains("w/a-much-longer-job-name"),
        "{}",
        r.stdout
    );
    let j = env.run(&["--json", "queue", "jobs"]).json();
    assert_eq!(
        j["jobs"].as_array().unwrap().len(),
        2,
        "--json as before: {j}"
    );
    assert_eq!(j["jobs"][0]["id"], "a");

    // status
    let a = env.start("short", "P1");
    let b = env.start("a task with a longer description", "P2");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    let r = env.run(&["status"]);
    r.code(0);
    let table: Vec<&str> = r
        .stdout
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("    "))
        .collect();
    assert_aligned(
        &table.join("\n"),
        &["INSTANCE", "PRI", "STARTED", "BEAT", "PROJECT", "TASK"],
    );
    assert!(
        r.stdout.contains(&a) && r.stdout.contains(&b),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.lines().any(|l| l.trim() == "src/a.rs"),
        "{}",
        r.stdout
    );

    // history
    env.run(&["done", "--instance", &a]).code(0);
    env.run(&["done", "--instance", &b]).code(0);
    let r = env.run(&["history"]);
    r.code(0);
    assert_aligned(
        &r.stdout,
        &[
            "COMPLETED",
            "OUTCOME",
            "ID",
            "PRIORITY",
            "PROJECT",
            "MINUTES",
            "TASK",
        ],
    );
    assert_eq!(r.stdout.lines().count(), 3, "{}", r.stdout);

    // inbox
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    env.run(&["post", "ops", "hello @scout", "--as", "ana"])
        .code(0);
    env.run(&[
        "post",
        "ops",
        "a second, longer message for @scout",
        "--as",
        "bob-the-builder",
    ])
    .code(0);
    let r = env.run(&["inbox"]);
    r.code(0);
    assert_aligned(
        &r.stdout,
        &[
            "ID", "STATUS", "PRIORITY", "TRIGGER", "AGENT", "CHANNEL", "FROM", "PREVIEW",
        ],
    );
    assert_eq!(r.stdout.lines().count(), 3, "{}", r.stdout);

    // workflow list
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("feature.json"),
        r#"{"name": "Feature", "initial": "plan",
            "states": {"plan": {"persona": "architect", "next": ["done"]}}}"#,
    )
    .unwrap();
    env.run(&["workflow", "start", "feature", "one"]).code(0);
    env.run(&["workflow", "start", "feature", "another task"])
        .code(0);
    let r = env.run(&["workflow", "list"]);
    r.code(0);
    assert_aligned(
        &r.stdout,
        &["SESSION", "STATUS", "STATE", "TEMPLATE", "TASK"],
    );
    assert_eq!(r.stdout.lines().count(), 3, "{}", r.stdout);
}

#[test]
fn a_queue_job_prompt_says_how_to_record_the_outcome() {
    let env = TestEnv::new();
    env.run_stdin(
        &["queue", "submit", "-"],
        &serde_json::json!({"workspace": "w", "jobs": [
            {"id": "a", "prompt": "do it", "outcomes": ["tests pass"]}
        ]})
        .to_string(),
    )
    .code(0);
    // The agent command copies its prompt where the test can read it, writes a RESULT.md
    // as the prompt asks, and exits 0.
    let copy = env.root.path().join("prompt.txt");
    let cmd = format!(
        "cp {{prompt_file}} {} && mkdir -p output/a && printf -- '- [x] tests pass\\n' > output/a/RESULT.md",
        copy.display()
    );
    env.run(&["queue", "run", "--runner", "local", "--agent-cmd", &cmd])
        .code(0);
    let prompt = std::fs::read_to_string(&copy).unwrap();
    assert!(prompt.contains("exit 0 when the task is done"), "{prompt}");
    assert!(prompt.contains("`- [x] CRITERION`"), "{prompt}");
    assert!(prompt.contains("conductor queue retry a"), "{prompt}");
    let r = env.run(&["--json", "queue", "results", "w"]);
    r.code(0);
    assert!(r.stdout.contains("tests pass"), "{}", r.stdout);
}

/// An agent command that appends its job's id to `trace` (and waits `secs`).
fn tracer(env: &TestEnv, secs: f64) -> (String, std::path::PathBuf) {
    let trace = env.root.path().join("trace.txt");
    (
        format!("echo {{job}} >> {} && sleep {secs}", trace.display()),
        trace,
    )
}

#[test]
fn queue_add_submits_one_job_from_words_or_stdin_and_prints_its_id() {
    let env = TestEnv::new();
    let r = env.run(&["queue", "add", "--", "write", "the", "notes"]);
    r.code(0);
    assert_eq!(r.stdout.trim(), "default/job-1");
    let r = env.run_stdin(
        &["queue", "add", "--id", "from-stdin", "--after", "job-1"],
        "a prompt\non two lines\n",
    );
    r.code(0);
    assert_eq!(r.stdout.trim(), "default/from-stdin");
    let r = env.run(&[
        "--json",
        "queue",
        "add",
        "--priority",
        "P0",
        "--outcome",
        "it works",
        "--",
        "urgent",
    ]);
    r.code(0);
    assert_eq!(r.json()["jobs"][0]["id"], "job-2", "{}", r.stdout);
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.home.join("queue.json")).unwrap()).unwrap();
    conductor::queue::validate_doc(&q).expect("queue.json matches its schema");
    let jobs = q["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["prompt"], "write the notes");
    assert_eq!(jobs[1]["prompt"], "a prompt\non two lines\n");
    assert_eq!(jobs[1]["depends_on"], serde_json::json!(["job-1"]));
    assert_eq!(jobs[2]["priority"], "P0");
    assert_eq!(jobs[2]["outcomes"], serde_json::json!(["it works"]));
    // Bad input: refused, nothing changed.
    let before = env.snapshot();
    env.run(&["queue", "add", "--after", "nope", "--", "x"])
        .code(2);
    env.run(&["queue", "add", "--id", "job-1", "--", "x"])
        .code(2);
    env.run(&["queue", "add", "--priority", "P9", "--", "x"])
        .code(2);
    env.run_stdin(&["queue", "add"], "  \n").code(2);
    assert_eq!(env.snapshot(), before, "refused input changes nothing");
    // One at a time: the P0 job, added last, starts first; the dependent after its dependency.
    let (cmd, trace) = tracer(&env, 0.0);
    env.run(&["queue", "run", "--parallel", "1", "--agent-cmd", &cmd])
        .code(0);
    assert_eq!(read_lines(&trace), ["job-2", "job-1", "from-stdin"]);
}

#[test]
fn a_paused_queue_starts_nothing_until_resumed_and_a_paused_job_waits_alone() {
    let env = TestEnv::new();
    env.run(&["queue", "add", "--", "a"]).code(0);
    env.run(&["queue", "add", "--", "b"]).code(0);
    env.run(&["queue", "pause"]).code(0);
    let (cmd, trace) = tracer(&env, 0.0);
    let r = env.run(&["queue", "run", "--agent-cmd", &cmd]);
    r.code(0);
    assert!(r.stdout.contains("paused"), "{}", r.stdout);
    assert!(!trace.exists(), "a paused queue starts nothing");
    let jobs = env.run(&["queue", "jobs"]);
    assert!(
        jobs.stdout.starts_with("The queue is paused"),
        "{}",
        jobs.stdout
    );
    assert_eq!(
        env.run(&["--json", "queue", "jobs"]).json()["queue_paused"],
        true
    );
    // A following dispatcher waits, and starts the jobs when the queue is resumed, except
    // the one paused by name.
    env.run(&["queue", "pause", "job-2"]).code(0);
    let mut follower = env
        .cmd()
        .args(["queue", "run", "--follow", "--agent-cmd", &cmd])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // It leads the queue, looked at it, and waits for a change: then nothing has started.
    assert!(
        wait_until(20.0, || parked(follower.id())),
        "the follower waits"
    );
    assert!(!trace.exists(), "nothing starts while paused");
    env.run(&["queue", "resume"]).code(0);
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.home.join("queue.json")).unwrap()).unwrap();
    conductor::queue::validate_doc(&q).expect("queue.json matches its schema");
    assert!(
        wait_until(10.0, || read_lines(&trace) == ["job-1"]),
        "the follower starts job-1 on resume: {:?}",
        read_lines(&trace)
    );
    // job-1 is recorded completed and the follower waits again: job-2 was not started.
    let state = |id: &str| {
        let r = env.run(&["--json", "queue", "jobs", "--all"]);
        r.json()["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["state"]["state"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert!(
        wait_until(20.0, || state("job-1") == "completed"
            && parked(follower.id())),
        "job-1 completes and the follower waits: {}",
        state("job-1")
    );
    assert_eq!(read_lines(&trace), ["job-1"], "job-2 stays paused");
    assert_eq!(state("job-2"), "ready");
    let jobs = env.run(&["queue", "jobs"]);
    assert!(
        jobs.stdout.contains("paused (conductor queue resume JOB)"),
        "{}",
        jobs.stdout
    );
    env.run(&["queue", "resume", "default/job-2"]).code(0);
    assert!(
        wait_until(10.0, || read_lines(&trace) == ["job-1", "job-2"]),
        "{:?}",
        read_lines(&trace)
    );
    let _ = follower.kill();
    let _ = follower.wait();
    // Pausing an unknown job is refused.
    env.run(&["queue", "pause", "nope"]).code(2);
    // Each pause and resume is in the journal, and the types can be filtered on.
    let r = env.run(&["events", "--types", "queue.paused,queue.resumed"]);
    r.code(0);
    let types: Vec<String> = r.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e["event_type"].as_str().unwrap(), e["target"]))
        .collect();
    assert_eq!(
        types,
        [
            "queue.paused null",
            "queue.paused \"default/job-2\"",
            "queue.resumed null",
            "queue.resumed \"default/job-2\""
        ]
    );
}

/// A directory holding links to these programs (found on the test's PATH), to run doctor with.
fn path_with(env: &TestEnv, name: &str, programs: &[&str]) -> String {
    let dir = env.root.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for p in programs {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(p))
            .find(|f| f.is_file())
            .unwrap_or_else(|| {
                let package = if *p == "bwrap" { "bubblewrap" } else { p };
                panic!("{p} is not installed: apt-get install {package} (./test does)")
            });
        let _ = std::os::unix::fs::symlink(found, dir.join(p));
    }
    dir.display().to_string()
}

#[test]
fn doctor_names_each_external_tool_and_what_its_absence_disables() {
    let env = TestEnv::new();
    // An integrated agent and a queued job (the default agent command runs opencode).
    env.run(&["integrate", "claude"]).code(0);
    env.run(&["queue", "add", "--", "x"]).code(0);
    // Found: jq and bubblewrap (./test installs both), each line saying where.
    let all = path_with(&env, "bin", &["jq", "bwrap"]);
    let r = env.run_env(&["doctor"], &[("PATH", &all)]);
    r.code(0);
    for t in ["jq", "bwrap"] {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with(&format!("ok    tool {t}: {all}/{t} "))),
            "{t} found:\n{}",
            r.stdout
        );
    }
    // Only jq: bubblewrap, Claude Code and the queue's agent are named as missing, with what
    // each disables; the home is still healthy (exit 0).
    let some = path_with(&env, "only-jq", &["jq"]);
    let r = env.run_env(&["doctor"], &[("PATH", &some)]);
    r.code(0);
    let line = |t: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(&format!("MISSING tool {t}: ")))
            .unwrap_or_else(|| panic!("{t} missing:\n{}", r.stdout))
            .to_string()
    };
    assert!(line("bwrap").contains("sandbox"), "{}", r.stdout);
    assert!(line("claude").contains("Claude Code"), "{}", r.stdout);
    assert!(line("opencode").contains("queue jobs"), "{}", r.stdout);
    assert!(r.stdout.contains("ok    tool jq: "), "{}", r.stdout);
    let j = env
        .run_env(&["--json", "doctor"], &[("PATH", &some)])
        .json();
    let tools = j["tools"].as_array().unwrap();
    let bwrap = tools.iter().find(|t| t["tool"] == "bwrap").unwrap();
    assert!(
        bwrap["path"].is_null()
            && bwrap["missing_disables"]
                .as_str()
                .unwrap()
                .contains("sandbox")
    );
}

fn bash(env: &TestEnv, script: &str, vars: &[(&str, &str)]) -> Run {
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = std::process::Command::new("bash");
    c.arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(&env.project);
    for (k, v) in vars {
        c.env(k, v);
    }
    env.run_cmd(&mut c)
}

#[test]
fn the_shell_integration_detects_the_source_and_names_the_right_commands() {
    let env = TestEnv::new();
    let script = r#"eval "$(conductor shell-init bash)"
conductor start "t" --priority P1 || exit 9
echo "id=$CONDUCTOR_INSTANCE_ID"
conductor done >/dev/null"#;
    for (vars, prefix) in [
        (&[("TERM_PROGRAM", "iTerm.app")][..], "itm-"),
        (
            &[("CURSOR_SESSION", "1"), ("VSCODE_GIT_IPC_HANDLE", "x")][..],
            "cur-",
        ),
        (&[("VSCODE_GIT_IPC_HANDLE", "x")][..], "vsc-"),
        (&[("CLAUDE_COWORK_SESSION", "s")][..], "cow-"),
        (&[][..], "web-"),
    ] {
        let r = bash(&env, script, vars);
        r.code(0);
        let id = r
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("id="))
            .unwrap_or_else(|| panic!("{r:?}"));
        assert!(id.starts_with(prefix), "{vars:?} gives {prefix}: {r:?}");
        assert!(
            r.stdout
                .contains(&format!("CONDUCTOR_INSTANCE_ID={id} is set in this shell")),
            "{r:?}"
        );
        assert!(
            r.stdout.contains("`conductor claim FILE...`") && r.stdout.contains("`conductor done`"),
            "{r:?}"
        );
        assert!(
            !r.stdout.contains("/conductor claim"),
            "no slash command in a shell: {r:?}"
        );
    }
    // Without the integration, the message names the instance in each command.
    let r = env.run(&["start", "plain", "--priority", "P1"]);
    r.code(0);
    let id = r
        .stdout
        .lines()
        .next()
        .unwrap()
        .strip_prefix("Registered as ")
        .unwrap();
    assert!(
        r.stdout
            .contains(&format!("conductor claim --instance {id} FILE..."))
            && r.stdout
                .contains(&format!("conductor done --instance {id}")),
        "{r:?}"
    );
}

#[test]
fn wait_released_honours_directory_and_glob_claims() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join("src/deep")).unwrap();
    let a = env.start("holder", "P1");
    // A file inside a claimed directory, a directory holding a claimed file, overlapping globs.
    for (claim, wait) in [
        ("src/", "src/deep/x.rs"),
        ("src/deep/y.rs", "src/"),
        ("src/**/*.rs", "src/deep/*.rs"),
    ] {
        env.run(&["claim", "--instance", &a, claim]).code(0);
        let r = env.run(&["--json", "wait", "--released", wait, "--timeout", "300ms"]);
        r.code(3);
        assert_eq!(
            r.json()["still_held"].as_array().unwrap().len(),
            1,
            "{claim} holds {wait}: {r:?}"
        );
        // Released meanwhile: the waiter is woken and exits 0.
        let child = env
            .cmd()
            .args(["wait", "--released", wait, "--timeout", "20s"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // It saw the claim and waits for a change (not yet done: it cannot be, the claim holds).
        assert!(wait_until(20.0, || parked(child.id())), "{claim}: it waits");
        env.run(&["release", "--instance", &a, claim]).code(0);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{claim} released frees {wait}");
    }
    // Keys that do not overlap never made anyone wait.
    env.run(&["claim", "--instance", &a, "src/**/*.md"]).code(0);
    env.run(&[
        "wait",
        "--released",
        "src/deep/*.rs",
        "src/x.rs",
        "--timeout",
        "1s",
    ])
    .code(0);
}

#[test]
fn a_workflow_workers_prompt_gives_the_command_that_records_its_outcome() {
    let env = TestEnv::new();
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("f.json"),
        r#"{"name": "F", "initial": "plan",
            "states": {"plan": {"persona": "architect", "next": ["build", "done"]},
                       "build": {"persona": "architect", "next": ["done"]}}}"#,
    )
    .unwrap();
    let copy = env.root.path().join("prompt.md");
    let script = env.root.path().join("worker.sh");
    std::fs::write(
        &script,
        format!(
            "cp \"$1\" {}\n\"$CONDUCTOR_BIN\" workflow transition done --summary recorded\n",
            copy.display()
        ),
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "f", "Ship it"]);
    r.code(0);
    let id = r.json()["session"].as_str().unwrap().to_string();
    let agent = format!("sh {} {{prompt_file}}", script.display());
    let r = env.run_env(
        &["workflow", "run", &id, "--agent-cmd", &agent],
        &[("CONDUCTOR_BIN", bin().to_str().unwrap())],
    );
    r.code(0);
    let prompt = std::fs::read_to_string(&copy).unwrap();
    for want in [
        "conductor workflow transition build --summary \"what you did\"",
        "conductor workflow transition done --summary \"what you did\"",
        "That command is how this state's outcome is recorded",
        "Exiting without it counts as a failed attempt",
    ] {
        assert!(prompt.contains(want), "{want:?} in:\n{prompt}");
    }
    let show = env.run(&["--json", "workflow", "show", &id]).json();
    assert_eq!(show["session"]["status"], "done", "{show}");
}

/// A `claim --wait` that fails as it gives up (here the state lock stays busy past its
/// `--lock-timeout`) exits with the error, and still says which files were handed over to it
/// while it waited: they stay granted, and nobody would know otherwise.
#[test]
fn a_waiting_claim_that_fails_names_the_files_it_was_granted_meanwhile() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P1");
    env.run(&["claim", "--instance", &a, "src/x.rs", "src/y.rs"])
        .code(0);
    let child = env
        .cmd()
        .args([
            "--lock-timeout",
            "1",
            "claim",
            "--instance",
            &b,
            "--wait=10s",
            "src/x.rs",
            "src/y.rs",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Queued for both, then x is handed over by A's release.
    assert!(
        wait_until(20.0, || env.instance(&b).is_some_and(|i| i["waiting_for"]
            .as_array()
            .is_some_and(|w| w.len() == 2))),
        "the waiter is queued for both files"
    );
    env.run(&["release", "--instance", &a, "src/x.rs"]).code(0);
    let granted = env.abs("src/x.rs");
    assert!(
        env.instance(&b).is_some_and(|i| i["files_claimed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str() == Some(granted.as_str()))),
        "x is handed over to the waiter"
    );
    // The lock is busy when the wait gives up on y.
    let lock = hold_state_lock(&env);
    let out = child.wait_with_output().unwrap();
    drop(lock);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("lock"), "{stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("warning: ") && l.contains("still holds"))
        .unwrap_or_else(|| panic!("no warning names the granted file: {stderr}"));
    assert!(
        warning.contains("src/x.rs") && !warning.contains("src/y.rs"),
        "{warning}"
    );
    assert!(
        warning.contains(&format!("conductor release --instance {b} ")),
        "{warning}"
    );
    // And it is indeed still held.
    assert!(
        env.instance(&b).unwrap()["files_claimed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str() == Some(granted.as_str()))
    );
}

/// A value too long to quote whole (a claim of 1,001 files) is cut in the error, never the rule
/// it breaks; nothing is claimed.
#[test]
fn a_claim_of_too_many_files_says_the_limit() {
    let env = TestEnv::new();
    let a = env.start("many", "P2");
    let files: Vec<String> = (0..1001).map(|i| format!("src/f{i}.rs")).collect();
    let mut args = vec!["claim", "--instance", a.as_str()];
    args.extend(files.iter().map(String::as_str));
    let before = std::fs::read(env.home_file("status.json")).unwrap();
    let r = env.run(&args);
    assert_eq!(r.code, 2, "{r:#?}");
    let line = r.stderr.lines().next().unwrap_or_default();
    assert!(
        line.starts_with("error: invalid claim input at /files: ")
            && line.ends_with("has more than 1000 items"),
        "{line}"
    );
    assert!(line.chars().count() < 200, "{line}");
    assert_eq!(std::fs::read(env.home_file("status.json")).unwrap(), before);
}
