//! Test environment: the real `conductor` binary run against a private temp home, with a clean
//! environment (no inherited CONDUCTOR_* or editor variables) and a pinned clock.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Path of the binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_conductor"))
}

/// A temp home plus a project directory to run commands in.
pub struct TestEnv {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub now: Option<String>,
}

/// What a command did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as one JSON object.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{self:?}"))
    }
    /// stderr is one `error: …` line and one `hint: …` line, as every error should be.
    pub fn error_and_hint(&self) -> bool {
        let l: Vec<&str> = self.stderr.lines().collect();
        l.len() == 2 && l[0].starts_with("error: ") && l[1].starts_with("hint: ")
    }
    /// Assert the exit code, showing everything on failure.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(self.code, expected, "unexpected exit code:\n{self:#?}");
        self
    }
    /// Assert a refusal as agents see it (run with `--json`): exit `code`, stdout exactly one
    /// line `{"status":"error","reason":NAME,"message":...}`, and stderr opening with the
    /// one-line `error: ...`. `tests/it/reasons.rs` finds the reasons tests produce by the
    /// calls of this helper.
    #[track_caller]
    pub fn reason(&self, code: i32, name: &str) -> &Self {
        self.code(code);
        assert_eq!(
            self.stdout.trim_end().lines().count(),
            1,
            "one line on stdout:\n{self:#?}"
        );
        let v = self.json();
        let keys: Vec<&String> = v.as_object().expect("an object").keys().collect();
        assert_eq!(keys, ["status", "reason", "message"], "{v}");
        assert_eq!(v["status"], "error", "{v}");
        assert_eq!(v["reason"], name, "unexpected reason:\n{self:#?}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert!(
            self.stderr.starts_with("error: ") || self.stderr.contains("\nerror: "),
            "stderr has the `error:` line:\n{self:#?}"
        );
        // Followed by what to do about it (issue 37: every error has a hint).
        let after: Vec<&str> = self
            .stderr
            .lines()
            .skip_while(|l| !l.starts_with("error: "))
            .collect();
        assert!(
            after.len() == 2 && after[1].starts_with("hint: "),
            "the `error:` line is followed by one `hint:` line:\n{self:#?}"
        );
        self
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let root = tempfile::tempdir().expect("temp dir");
        let root_path = std::fs::canonicalize(root.path()).unwrap();
        let home = root_path.join("home");
        let project = root_path.join("proj");
        std::fs::create_dir_all(project.join("src")).unwrap();
        TestEnv {
            root,
            home,
            project,
            now: None,
        }
    }

    /// Pin the clock (RFC 3339) for later commands.
    pub fn at(&mut self, now: &str) -> &mut Self {
        self.now = Some(now.to_string());
        self
    }

    /// A command for the binary with a clean environment, run in the project directory.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(bin());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("CONDUCTOR_HOME", &self.home)
            .env("NO_COLOR", "1")
            // No background watcher of unclaimed edits (tests/it/unclaimed_edits.rs turns it
            // on): it would outlive the test's commands and record the files tests write.
            .env("CONDUCTOR_WATCH_EDITS", "0")
            .current_dir(&self.project)
            .stdin(Stdio::null());
        if let Some(now) = &self.now {
            c.env("CONDUCTOR_NOW", now);
        }
        c
    }

    /// Run with arguments.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_cmd(self.cmd().args(args))
    }

    /// Run with arguments and extra environment.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        self.run_cmd(&mut c)
    }

    /// Run in another directory.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        self.run_cmd(self.cmd().current_dir(dir).args(args))
    }

    /// Run with `stdin` fed from a string.
    pub fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut c = self.cmd();
        c.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn conductor");
        child.stdin.take().unwrap().write_all(input.as_bytes()).ok();
        to_run(child.wait_with_output().unwrap())
    }

    pub fn run_cmd(&self, c: &mut Command) -> Run {
        to_run(c.output().expect("spawn conductor"))
    }

    /// `start` with --json; returns the new instance id.
    pub fn start(&self, task: &str, priority: &str) -> String {
        let r = self.run(&[
            "--json",
            "start",
            task,
            "--project",
            "proj",
            "--priority",
            priority,
        ]);
        r.code(0);
        r.json()["instance_id"].as_str().unwrap().to_string()
    }

    /// Path of a file in the home.
    pub fn home_file(&self, name: &str) -> PathBuf {
        self.home.join(name)
    }

    /// status.json parsed.
    pub fn state(&self) -> Value {
        let text =
            std::fs::read_to_string(self.home_file("status.json")).expect("status.json exists");
        serde_json::from_str(&text).expect("status.json parses")
    }

    /// The bytes of every regular file in the home, for byte-identical checks.
    pub fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&self.home) {
            Ok(rd) => rd
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
                .filter(|e| e.file_name() != "status.lock")
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Absolute path of a project file, as claims are keyed.
    pub fn abs(&self, rel: &str) -> String {
        self.project.join(rel).to_string_lossy().into_owned()
    }
}

fn to_run(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Validate a value against one of the checked-in schemas (through the library).
pub fn assert_schema(schema: conductor::schema::Schema, v: &Value) {
    if let Err(e) = conductor::schema::validate(schema, v) {
        panic!("{schema:?} schema rejects {v}: {e}");
    }
}

/// Poll `cond` until it holds or `secs` pass; no fixed sleeps in tests.
pub fn wait_until(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    cond()
}

/// How to get each real component a test may find missing, by the name `CONDUCTOR_TEST_SKIP`
/// knows it by.
const COMPONENTS: &[(&str, &str)] = &[
    (
        "bwrap",
        "install bubblewrap (apt-get install bubblewrap; ./test does) and let it create \
         namespaces: run as root, and for an unprivileged user allow user namespaces \
         (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu \
         kernel.apparmor_restrict_unprivileged_userns=0); in a container, one that allows them",
    ),
    (
        "mount",
        "run the tests as root (CI does) where mounting a tmpfs is allowed, with `unshare` and \
         `mount` installed (apt-get install util-linux mount; ./test does) and user namespaces \
         allowed (sysctl kernel.unprivileged_userns_clone=1)",
    ),
    ("root", "run the tests as root (CI does)"),
    (
        "userns",
        "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1; in a container, one \
         that allows them) and install util-linux for `unshare` (./test does)",
    ),
    (
        "promtool",
        "apt-get install prometheus (it has promtool; ./test does)",
    ),
    ("flock", "apt-get install util-linux (./test does)"),
    ("zsh", "apt-get install zsh (./test does)"),
    ("fish", "apt-get install fish (./test does)"),
];

/// The components `CONDUCTOR_TEST_SKIP` (a comma list: `bwrap,mount`) lets tests skip.
fn allowed_skips() -> Vec<String> {
    std::env::var("CONDUCTOR_TEST_SKIP")
        .unwrap_or_default()
        .split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// This test needs `component`, which is missing or unusable here (`why`). Fails the test with a
/// message naming the component and how to get it, unless `CONDUCTOR_TEST_SKIP` names it: then
/// prints a SKIPPED line on stderr, appends the test's name to `$CONDUCTOR_TEST_SKIP_LOG` (when
/// set; `./test` lists them at the end) and returns, and the caller returns (or skips that part).
#[track_caller]
pub fn missing(component: &str, why: &str) {
    let install = COMPONENTS
        .iter()
        .find(|(c, _)| *c == component)
        .map(|(_, i)| *i)
        .unwrap_or_else(|| panic!("unknown test component `{component}` (see COMPONENTS)"));
    let here = std::panic::Location::caller();
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}:{}", here.file(), here.line()));
    if !allowed_skips().iter().any(|c| c == component) {
        panic!(
            "{why}.\nThis test needs {component}: {install}.\n\
             (CONDUCTOR_TEST_SKIP={component} turns this failure into a skip.)"
        );
    }
    eprintln!("SKIPPED {test}: {why} (CONDUCTOR_TEST_SKIP names {component})");
    if let Some(log) = std::env::var_os("CONDUCTOR_TEST_SKIP_LOG") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("CONDUCTOR_TEST_SKIP_LOG {log:?}: {e}"));
        // One write per line: tests run in parallel threads and processes.
        f.write_all(format!("{test} (no {component})\n").as_bytes())
            .unwrap();
    }
}

// ---- Helpers added for the protocol / schema suites (existing helpers above are unchanged). ----

/// Check every state file in the home against its schema: status.json (Status, plus the claims
/// consistency rule), each history.jsonl line (HistoryEntry), and that conflicts.log lines have
/// the `<RFC3339> | KIND | text` layout.
#[track_caller]
pub fn check_home(home: &Path) {
    use conductor::schema::Schema;
    if let Ok(text) = std::fs::read_to_string(home.join("status.json")) {
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status.json does not parse ({e}):\n{text}"));
        assert_schema(Schema::Status, &v);
        let st: conductor::protocol::State =
            serde_json::from_value(v).expect("status.json deserializes");
        if let Err(e) = conductor::protocol::codec::check_consistency(&st) {
            panic!("status.json breaks the claims consistency rule: {e}");
        }
    }
    for line in read_lines(&home.join("history.jsonl")) {
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("history line does not parse ({e}): {line}"));
        assert_schema(Schema::HistoryEntry, &v);
    }
    if let Ok(text) = std::fs::read_to_string(home.join("landing.json")) {
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("landing.json does not parse ({e}):\n{text}"));
        assert_schema(Schema::Landing, &v);
    }
    for line in read_lines(&home.join("conflicts.log")) {
        let parts: Vec<&str> = line.splitn(3, " | ").collect();
        assert_eq!(
            parts.len(),
            3,
            "conflicts.log line is not `<time> | KIND | text`: {line}"
        );
        assert!(
            conductor::time::Timestamp::parse(parts[0]).is_some(),
            "bad timestamp in conflicts.log line: {line}"
        );
        assert!(
            ["CONFLICT", "RESOLVED", "FORCE", "RELEASE", "REPAIR"].contains(&parts[1]),
            "bad kind in conflicts.log line: {line}"
        );
    }
}

/// The lines of a text file (empty if it does not exist).
pub fn read_lines(path: &Path) -> Vec<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => t.lines().map(str::to_string).collect(),
        Err(_) => Vec::new(),
    }
}

impl TestEnv {
    /// Run, then check the home's files against their schemas and, when the output is JSON
    /// (`--json` or `op`), check stdout against the Output schema.
    #[track_caller]
    pub fn exec(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        self.checked(args, r)
    }

    /// [`TestEnv::exec`] with extra environment variables.
    #[track_caller]
    pub fn exec_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let r = self.run_env(args, env);
        self.checked(args, r)
    }

    /// [`TestEnv::exec`] in another directory.
    #[track_caller]
    pub fn exec_in(&self, dir: &Path, args: &[&str]) -> Run {
        let r = self.run_in(dir, args);
        self.checked(args, r)
    }

    /// [`TestEnv::exec`] with stdin.
    #[track_caller]
    pub fn exec_stdin(&self, args: &[&str], input: &str) -> Run {
        let r = self.run_stdin(args, input);
        self.checked(args, r)
    }

    #[track_caller]
    fn checked(&self, args: &[&str], r: Run) -> Run {
        check_home(&self.home);
        if args.contains(&"--json") || args.contains(&"op") {
            let v = r.json();
            assert_schema(conductor::schema::Schema::Output, &v);
            if v["status"] == "error" {
                let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
                assert_eq!(
                    keys,
                    ["status", "reason", "message"],
                    "error object has exactly these keys: {v}"
                );
                assert!(r.code == 1 || r.code == 2, "an error exits 1 or 2:\n{r:#?}");
            }
        }
        r
    }

    /// `start` in `dir` (via `--dir`) with a project name; returns the id.
    #[track_caller]
    pub fn start_in(&self, dir: &Path, project: &str, task: &str, priority: &str) -> String {
        let d = dir.to_str().unwrap();
        let r = self.exec(&[
            "--json",
            "start",
            task,
            "--project",
            project,
            "--priority",
            priority,
            "--dir",
            d,
        ]);
        r.code(0);
        r.json()["instance_id"].as_str().unwrap().to_string()
    }

    /// A new directory under the temp root (symlinks resolved), created.
    pub fn dir(&self, rel: &str) -> PathBuf {
        let p = std::fs::canonicalize(self.root.path()).unwrap().join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Write a file in the home (creating the home).
    pub fn write_home(&self, name: &str, contents: &str) {
        std::fs::create_dir_all(&self.home).unwrap();
        std::fs::write(self.home_file(name), contents).unwrap();
    }

    /// The history.jsonl lines, parsed.
    pub fn history(&self) -> Vec<Value> {
        read_lines(&self.home_file("history.jsonl"))
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The conflicts.log lines.
    pub fn log(&self) -> Vec<String> {
        read_lines(&self.home_file("conflicts.log"))
    }

    /// The instance object with this id in status.json.
    pub fn instance(&self, id: &str) -> Option<Value> {
        self.state()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .cloned()
    }
}

// ---- Observable waiting (issue 38): what a test waits for before a negative check, instead
// of sleeping and hoping the other process got there.

/// True when process `pid` waits (blocked in flock) for the lock on `lock` held by someone
/// else: /proc/locks lists it as a blocked waiter (`->`) on that file's inode.
pub fn lock_waiter(lock: &Path, pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(ino) = std::fs::metadata(lock).map(|m| m.ino()) else {
        return false;
    };
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: -> FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"
        f.get(1) == Some(&"->")
            && f.get(5) == Some(&pid.to_string().as_str())
            && f.get(6)
                .and_then(|d| d.rsplit(':').next())
                .is_some_and(|i| i == ino.to_string())
    })
}

/// True when process `pid` is parked: it watches something with inotify, and every one of its
/// threads sleeps (state S), in three looks 10 ms apart. A conductor command that waits for a
/// change (`wait`, `queue run --follow`, `queue log --follow`, a waiting claim) gets there only
/// after it looked at the state it waits on.
pub fn parked(pid: u32) -> bool {
    (0..3).all(|i| {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        watches_with_inotify(pid) && all_threads_sleep(pid)
    })
}

fn watches_with_inotify(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|t| t.to_string_lossy() == "anon_inode:inotify")
            && std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .is_ok_and(|i| i.contains("inotify wd:"))
    })
}

fn all_threads_sleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            return false;
        };
        // "tid (comm) S ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if state != Some("S") {
            return false;
        }
        any = true;
    }
    any
}

/// True when process `pid` has SIGINT blocked (a conductor command that finishes cleanly on
/// SIGINT blocks it once its handling is in place).
pub fn blocks_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigBlk:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}
