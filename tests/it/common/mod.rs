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
    /// Assert the exit code, showing everything on failure.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(self.code, expected, "unexpected exit code:\n{self:#?}");
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
