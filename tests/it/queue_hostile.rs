//! Hostile manifests, secrets and modes (issue 21, items 2, 3 and 7): values from a manifest stay
//! data in every command template, secrets never leak into a log or another job, reserved names
//! are refused, and everything the queue makes is private.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{Run, TestEnv};

/// A temp home with a `bin/` directory put first on the PATH.
pub struct H {
    pub env: TestEnv,
    pub bin: PathBuf,
    pub ctrl: PathBuf,
}

impl H {
    pub fn new() -> H {
        let env = TestEnv::new();
        let bin = env.dir("bin");
        let ctrl = env.dir("ctrl");
        H { env, bin, ctrl }
    }

    /// Write an executable script into `bin/`.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    pub fn submit(&self, manifest: &Value) -> Run {
        self.env
            .run_stdin(&["queue", "submit", "-"], &manifest.to_string())
    }

    /// `queue run ARGS` with `bin/` first on the PATH, `CTRL` set, and `env`.
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let path = self.path();
        let ctrl = self.ctrl.to_str().unwrap().to_string();
        let mut e = vec![("PATH", path.as_str()), ("CTRL", ctrl.as_str())];
        e.extend_from_slice(env);
        let mut a = vec!["queue", "run"];
        a.extend_from_slice(args);
        self.env.run_env(&a, &e)
    }

    pub fn ctrl_file(&self, name: &str) -> String {
        std::fs::read_to_string(self.ctrl.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub fn log(&self, ws: &str, job: &str) -> String {
        std::fs::read_to_string(
            self.env
                .home
                .join("queue-logs")
                .join(ws)
                .join(format!("{job}.log")),
        )
        .unwrap_or_default()
    }
}

/// Stands in for `opencode`: records its arguments (NUL-separated) and writes a RESULT.md.
const FAKE_OPENCODE: &str = r#"#!/bin/sh
for a in "$@"; do printf '%s\0' "$a"; done > "$CTRL/argv.$CONDUCTOR_QUEUE_JOB"
mkdir -p "$CONDUCTOR_QUEUE_OUTPUT" && echo ok > "$CONDUCTOR_QUEUE_OUTPUT/RESULT.md"
"#;

fn argv(h: &H, job: &str) -> Vec<String> {
    let raw = h.ctrl_file(&format!("argv.{job}"));
    raw.split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Issue 21 item 2: a manifest's `agent` and `model` reach the agent as the exact arguments
/// written, through the default agent command and through a `--runner` template: `{model}`
/// inside the agent is not filled again, and `$(...)`, backticks, `;`, quotes and newlines run
/// nothing.
#[test]
fn issue_21_manifest_values_never_become_shell_code() {
    let h = H::new();
    h.script("opencode", FAKE_OPENCODE);
    let pwned = h.env.dir("pwned");
    let p = |n: &str| pwned.join(n).display().to_string();
    let agent_a = format!("x{{model}}$(touch {})", p("1"));
    let model_a = format!(
        "`touch {}`;touch {} 'q\" \n  z {{agent}} [b]",
        p("2"),
        p("3")
    );
    let agent_b = format!("; touch {} # {{cmd}}", p("4"));
    let agent_c = format!("c\"$(touch {})\"", p("5"));
    let m = json!({"workspace": "hm", "jobs": [
        {"id": "a", "prompt": "p", "agent": agent_a, "model": model_a},
        {"id": "b", "prompt": "p", "agent": agent_b},
        {"id": "c", "prompt": "p", "agent": agent_c, "model": ""}]});
    h.submit(&m).code(0);
    h.run(&[], &[]).code(0);
    assert_eq!(
        argv(&h, "a"),
        ["run", "--agent", &agent_a, "--model", &model_a]
    );
    assert_eq!(argv(&h, "b"), ["run", "--agent", &agent_b]);
    assert_eq!(argv(&h, "c"), ["run", "--agent", &agent_c]);

    // The same manifest through a runner template (run by `sh -c`, `{cmd}` quoted once more).
    let h2 = H::new();
    h2.script("opencode", FAKE_OPENCODE);
    h2.submit(&m).code(0);
    h2.run(&["--runner", "sh -c {cmd}"], &[]).code(0);
    assert_eq!(
        argv(&h2, "a"),
        ["run", "--agent", &agent_a, "--model", &model_a]
    );
    assert_eq!(argv(&h2, "b"), ["run", "--agent", &agent_b]);
    let hit: Vec<_> = std::fs::read_dir(&pwned).unwrap().flatten().collect();
    assert!(hit.is_empty(), "a value ran as code: {hit:?}");
}

/// An agent or model starting with `-` would read as an option of the agent's CLI: refused at
/// submit, nothing written.
#[test]
fn issue_21_an_agent_or_model_that_reads_as_an_option_is_refused() {
    let h = H::new();
    for job in [
        json!({"id": "a", "prompt": "p", "agent": "--dangerously-skip-permissions"}),
        json!({"id": "a", "prompt": "p", "model": "-x"}),
    ] {
        let r = h.submit(&json!({"workspace": "w", "jobs": [job]}));
        r.code(2);
        assert!(
            r.stderr.contains("invalid_manifest") || r.stderr.contains("option"),
            "{r:?}"
        );
        assert!(r.error_and_hint(), "{r:?}");
        assert!(!h.env.home.join("queue.json").exists());
    }
}

/// The workflow worker command is filled in one pass too: a home whose path holds `{prompt}`
/// and a task with `$(...)`, quotes and `{prompt_file}` reach the worker as written.
#[test]
fn issue_21_the_workflow_worker_command_is_filled_in_one_pass() {
    let mut env = TestEnv::new();
    env.home = env.root.path().join("h{prompt}x");
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("one.json"),
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A"}}}"#,
    )
    .unwrap();
    let pwned = env.root.path().join("pwned");
    let task = format!(
        "it's {{prompt_file}} $(touch {p}) `touch {p}` ; touch {p}",
        p = pwned.display()
    );
    let r = env.run(&["--json", "workflow", "start", "one", &task]);
    r.code(0);
    let id = r.json()["session"].as_str().unwrap().to_string();
    let out = env.root.path().join("args");
    let worker = env.root.path().join("worker.sh");
    std::fs::write(
        &worker,
        format!(
            "#!/bin/sh\nprintf '%s\\0' \"$@\" > {out}\n\"$CONDUCTOR_BIN\" workflow transition done --summary ok\n",
            out = out.display()
        ),
    )
    .unwrap();
    let cmd = format!("sh {} {{prompt_file}} {{prompt}}", worker.display());
    let r = env.run_env(
        &["workflow", "run", &id, "--agent-cmd", &cmd],
        &[("CONDUCTOR_BIN", crate::common::bin().to_str().unwrap())],
    );
    r.code(0);
    let args = std::fs::read_to_string(&out).unwrap();
    let args: Vec<&str> = args.split('\0').filter(|s| !s.is_empty()).collect();
    assert_eq!(args.len(), 2, "{args:?}");
    assert!(
        args[0].contains("/h{prompt}x/") && Path::new(args[0]).is_file(),
        "{args:?}"
    );
    assert!(args[1].contains(&task), "{args:?}");
    assert!(!pwned.exists(), "the task ran as code");
}

/// A PEM-like key of several lines (its body lines are what must never reach a log).
fn pem() -> (String, Vec<String>) {
    let body: Vec<String> = (0..6)
        .map(|i| format!("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{i}KcwggSjAgEAAoIBAQC7x{i}Zq9Lp3Rk81m"))
        .collect();
    let key = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
        body.join("\n")
    );
    (key, body)
}

/// Echoes its job's secrets in every way: whole, cut in the middle of a line with a pause (two
/// reads of the pipe), one line at a time with a prefix, and to stderr.
const ECHO_AGENT: &str = r#"#!/bin/sh
mkdir -p "$CONDUCTOR_QUEUE_OUTPUT" && echo ok > "$CONDUCTOR_QUEUE_OUTPUT/RESULT.md"
env > "$CTRL/env.$CONDUCTOR_QUEUE_JOB"
for v in "$PEM_KEY" "$TOKEN_A" "$TOKEN_B"; do
  [ -n "$v" ] || continue
  echo "whole: $v"
  printf '%s' "$v" | head -c 100; sleep 0.2; printf '%s\n' "$v" | tail -c +101
  printf '%s\n' "$v" | while read -r l; do echo "line: $l"; sleep 0.01; done
  echo "err: $v" >&2
done
echo "agent done"
"#;

/// Issue 21 item 3: a multi-line secret (a PEM key) never reaches the job's log, however the
/// agent prints it; the rest of the output does.
#[test]
fn issue_21_a_multi_line_secret_is_redacted_across_lines_and_reads() {
    let h = H::new();
    let agent = h.script("echo-agent.sh", ECHO_AGENT);
    let (key, body) = pem();
    h.submit(&json!({"workspace": "s", "jobs": [
        {"id": "pem", "prompt": "p", "secrets": ["PEM_KEY"]}]}))
        .code(0);
    let cmd = format!("sh {}", agent.display());
    h.run(&["--agent-cmd", &cmd], &[("PEM_KEY", &key)]).code(0);
    let env = h.ctrl_file("env.pem");
    assert!(env.contains(&body[3]), "the job got its key");
    let log = h.log("s", "pem");
    for line in &body {
        assert!(!log.contains(line.as_str()), "key line in the log:\n{log}");
    }
    assert!(!log.contains("MIIEvQ"), "{log}");
    assert!(log.contains("whole: [secret PEM_KEY]"), "{log}");
    assert!(log.contains("line: [secret PEM_KEY]"), "{log}");
    assert!(log.contains("err: [secret PEM_KEY]"), "{log}");
    assert!(log.ends_with("agent done\n"), "{log}");
}

/// Issue 21 item 3: a job's secret reaches that job only, as a value in its environment and its
/// log; the other job's environment and log never hold it.
#[test]
fn issue_21_a_secret_reaches_its_own_job_only() {
    let h = H::new();
    let agent = h.script("echo-agent.sh", ECHO_AGENT);
    h.submit(&json!({"workspace": "two", "jobs": [
        {"id": "a", "prompt": "p", "secrets": ["TOKEN_A"]},
        {"id": "b", "prompt": "p", "secrets": ["TOKEN_B"]}]}))
        .code(0);
    let cmd = format!("sh {}", agent.display());
    h.run(
        &["--agent-cmd", &cmd],
        &[
            ("TOKEN_A", "alpha-4471-value"),
            ("TOKEN_B", "bravo-9982-value"),
        ],
    )
    .code(0);
    let (ea, eb) = (h.ctrl_file("env.a"), h.ctrl_file("env.b"));
    assert!(
        ea.contains("TOKEN_A=alpha-4471-value") && !ea.contains("bravo-9982"),
        "{ea}"
    );
    assert!(
        eb.contains("TOKEN_B=bravo-9982-value") && !eb.contains("alpha-4471"),
        "{eb}"
    );
    let (la, lb) = (h.log("two", "a"), h.log("two", "b"));
    assert!(
        la.contains("whole: [secret TOKEN_A]") && !la.contains("alpha-4471"),
        "{la}"
    );
    assert!(
        lb.contains("whole: [secret TOKEN_B]") && !lb.contains("bravo-9982"),
        "{lb}"
    );
}

/// Issue 21 item 3: a secret named like a variable conductor or the runner sets is refused at
/// submit (exit 2, one line naming it, the home byte-identical).
#[test]
fn issue_21_reserved_secret_names_are_refused_at_submit() {
    let h = H::new();
    h.submit(&json!({"workspace": "ok", "jobs": [{"id": "a", "prompt": "p"}]}))
        .code(0);
    let before = h.env.snapshot();
    for name in [
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "TMPDIR",
        "CONDUCTOR_QUEUE_RUN",
        "CONDUCTOR_HOME",
        "LD_PRELOAD",
        "DYLD_INSERT_LIBRARIES",
        "BWRAP_ARGS",
        "LANG",
        "TERM",
    ] {
        let r = h.submit(&json!({"workspace": "bad", "jobs": [
            {"id": "a", "prompt": "p", "secrets": ["FINE_ONE", name]}]}));
        r.code(2);
        let err = r.stderr.trim();
        assert!(r.error_and_hint(), "{r:?}");
        assert!(err.contains(&format!("secret `{name}`")), "{r:?}");
        let j = h.env.run_stdin(
            &["--json", "queue", "submit", "-"],
            &json!({"workspace": "bad", "jobs": [{"id": "a", "prompt": "p", "secrets": [name]}]})
                .to_string(),
        );
        j.code(2);
        assert_eq!(j.json()["reason"], "reserved_secret_name", "{j:?}");
        assert_eq!(h.env.snapshot(), before, "{name}: the home changed");
        assert!(!h.env.home.join("workspaces/bad").exists());
    }
}

/// A secrets file with a reserved name (`PATH=...`) takes nothing away from the jobs, and no
/// job's secret can replace conductor's own variables.
#[test]
fn issue_21_a_secrets_file_cannot_take_path_away_from_jobs() {
    let h = H::new();
    let agent = h.script("echo-agent.sh", ECHO_AGENT);
    let file = h.env.root.path().join("secrets.env");
    std::fs::write(
        &file,
        "PATH=/nowhere\nTOKEN_A=alpha-1\nCONDUCTOR_QUEUE_RUN=forged\n",
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    h.submit(&json!({"workspace": "sf", "jobs": [
        {"id": "a", "prompt": "p", "secrets": ["TOKEN_A"]}]}))
        .code(0);
    let cmd = format!("sh {}", agent.display());
    h.run(
        &[
            "--agent-cmd",
            &cmd,
            "--secrets-file",
            file.to_str().unwrap(),
        ],
        &[],
    )
    .code(0);
    let env = h.ctrl_file("env.a");
    assert!(env.contains(&format!("PATH={}\n", h.path())), "{env}");
    assert!(
        !env.contains("forged") && env.contains("CONDUCTOR_QUEUE_RUN="),
        "{env}"
    );
}

/// Every entry under `dir` whose mode lets anyone but the owner in (links are not followed).
pub fn open_modes(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut bad = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::symlink_metadata(&d).unwrap();
        if m.mode() & 0o077 != 0 {
            bad.push(format!("{:o} {}", m.mode() & 0o7777, d.display()));
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.is_dir() {
                    stack.push(p);
                } else if !m.file_type().is_symlink() && m.mode() & 0o077 != 0 {
                    bad.push(format!("{:o} {}", m.mode() & 0o7777, p.display()));
                }
            }
        }
    }
    bad
}

/// Issue 21 item 7: after a queue run (docs, secrets, outputs the agent wrote, a failure and a
/// retry; the sandbox runner too where bubblewrap works) every directory in the home is 0700
/// and every file 0600 or stricter, whatever the umask it ran under.
#[test]
fn issue_21_everything_the_queue_makes_is_private() {
    let h = H::new();
    let agent = h.script(
        "writer.sh",
        r#"#!/bin/sh
o="$CONDUCTOR_QUEUE_OUTPUT"; mkdir -p "$o/sub"
echo result > "$o/RESULT.md"; echo art > "$o/sub/artifact.txt"
mkdir -p "$CONDUCTOR_QUEUE_WORKSPACE/shared/x" && echo s > "$CONDUCTOR_QUEUE_WORKSPACE/shared/x/f"
mkdir -p "$HOME/.local/share/agent" 2>/dev/null && echo db > "$HOME/.local/share/agent/db" 2>/dev/null
echo "key $TOKEN_A"
[ -f "$CTRL/fail.$CONDUCTOR_QUEUE_JOB" ] && exit 3
exit 0
"#,
    );
    let docs = h.env.root.path().join(".docpull/slack");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("index.md"), "# slack\n").unwrap();
    std::fs::set_permissions(
        docs.join("index.md"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(
        h.env.root.path().join(".docpull/manifest.json"),
        r#"{"version":"1.0","api_url":"x","collections":{"slack":{"pages":1}}}"#,
    )
    .unwrap();
    std::fs::write(h.ctrl.join("fail.b"), "").unwrap();
    h.submit(&json!({"workspace": "perm", "jobs": [
        {"id": "a", "prompt": "p", "docs": ["slack"], "secrets": ["TOKEN_A"]},
        {"id": "b", "prompt": "p", "depends_on": ["a"]},
        {"id": "c", "prompt": "p", "depends_on": ["b"]}]}))
        .code(0);
    let cmd = format!("sh {}", agent.display());
    let umask = unsafe { libc::umask(0o022) };
    h.run(&["--agent-cmd", &cmd], &[("TOKEN_A", "t-1")]).code(5);
    std::fs::remove_file(h.ctrl.join("fail.b")).unwrap();
    let path = h.path();
    let ctrl = h.ctrl.to_str().unwrap();
    h.env
        .run_env(
            &["queue", "retry", "b", "--agent-cmd", &cmd],
            &[("PATH", &path), ("CTRL", ctrl)],
        )
        .code(0);
    let sandbox = std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if sandbox {
        h.submit(&json!({"workspace": "perm2", "jobs": [{"id": "s", "prompt": "p"}]}))
            .code(0);
        let ro = h.bin.to_str().unwrap();
        h.run(
            &[
                "--runner",
                "sandbox",
                "--sandbox-ro",
                ro,
                "--agent-cmd",
                &cmd,
                "--keep-home",
            ],
            &[],
        )
        .code(0);
        let db = h.env.home.join("queue-homes/perm2/s/.local/share/agent/db");
        assert!(db.is_file(), "the sandboxed agent wrote into its HOME");
    }
    unsafe { libc::umask(umask) };
    assert!(
        h.env
            .home
            .join("workspaces/perm/output/a/sub/artifact.txt")
            .is_file()
    );
    assert!(h.env.home.join("queue-logs/perm/a.log").is_file());
    let bad = open_modes(&h.env.home);
    assert!(
        bad.is_empty(),
        "open modes in the home:\n{}",
        bad.join("\n")
    );
    if !sandbox {
        // Fails the test, unless CONDUCTOR_TEST_SKIP=bwrap (then the rest above has run).
        crate::common::missing(
            "bwrap",
            "bwrap cannot create namespaces here (sandbox part)",
        );
    }
}

/// A `workdir` that is not normalized, or would be mounted over what the sandbox provides
/// (`/usr`, `/etc`, its prompt and HOME under `/run/conductor`), is refused at submit.
#[test]
fn issue_21_a_workdir_over_the_sandbox_is_refused() {
    let h = H::new();
    for w in ["/workspace/../etc", "/usr", "/run/conductor", "/", "/a//b"] {
        let r = h.submit(&json!({"workspace": "w", "jobs": [
            {"id": "a", "prompt": "p", "workdir": w}]}));
        r.code(2);
        assert!(r.stderr.contains("workdir"), "{r:?}");
        assert!(r.error_and_hint(), "{r:?}");
        assert!(!h.env.home.join("queue.json").exists());
    }
    h.submit(&json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "p", "workdir": "/home/agent/src"}]}))
        .code(0);
}
