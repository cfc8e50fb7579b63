//! Issue 3 item 5: hostile input. Every input in `tests/corpus/` (plus the generated ones below
//! that cannot live in a text file) runs against a home with a realistic state and must fail
//! cleanly: exit 2, one JSON error line with `--json`, a specific `error: ` line on stderr, no
//! panic, and every file in the home byte-identical afterwards.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::common::*;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// A home with a few live instances, claims (one contested), history and conflicts.log lines.
pub struct Realistic {
    pub env: TestEnv,
    pub ids: Vec<String>,
}

pub fn realistic() -> Realistic {
    let env = TestEnv::new();
    for d in ["api", "web"] {
        std::fs::create_dir_all(env.project.join(d)).unwrap();
    }
    let start = |task: &str, prio: &str, dir: &str| -> String {
        let r = env.run(&[
            "--json",
            "start",
            task,
            "--project",
            "proj",
            "--priority",
            prio,
            "--dir",
            dir,
        ]);
        r.code(0);
        r.json()["instance_id"].as_str().unwrap().to_string()
    };
    let a = start("Fix auth bug", "P1", "api");
    let b = start("Refactor the web layer", "P2", "web");
    let c = start("Write docs", "P1", ".");
    let gone = start("Quick typo fix", "P1", ".");
    let abs = |f: &str| env.abs(f);
    let claim = |id: &str, files: &[&str], code: i32| {
        let mut args = vec!["claim".to_string(), "--instance".into(), id.into()];
        args.extend(files.iter().map(|f| abs(f)));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        env.run(&args).code(code);
    };
    claim(&a, &["api/auth.rs", "api/users.rs"], 0);
    claim(&b, &["web/page.rs", "web/app.rs"], 0);
    claim(&c, &["README.md"], 0);
    // A conflict (logged, exit 3) and a release with a reason (logged).
    claim(&c, &["api/auth.rs"], 3);
    let app = abs("web/app.rs");
    env.run(&["release", "--instance", &b, &app, "--reason", "not needed"])
        .code(0);
    // A finished task (history.jsonl).
    claim(&gone, &["src/typo.rs"], 0);
    env.run(&["done", "--instance", &gone, "--notes", "fixed"])
        .code(0);
    for f in ["status.json", "history.jsonl", "conflicts.log"] {
        assert!(env.home_file(f).exists(), "realistic home lacks {f}");
    }
    Realistic {
        env,
        ids: vec![a, b, c],
    }
}

const PANIC_MARKERS: &[&str] = &["panicked", "stack backtrace", "RUST_BACKTRACE"];

/// Assert a failed run is clean: the exit code, no panic text, and (`json`) exactly one JSON
/// error line on stdout with the reason and a one-line message naming `needle`; without
/// `json` an empty stdout. Either way the first stderr line is `error: ...` and names `needle`.
#[track_caller]
pub fn assert_error(label: &str, r: &Run, code: i32, reason: &str, needle: &str, json: bool) {
    let problems = error_problems(r, code, reason, needle, json);
    assert!(
        problems.is_empty(),
        "case {label}: {}\n{r:#?}",
        problems.join("; ")
    );
}

/// What is wrong with a failed run (see [`assert_error`]); empty when it is clean.
pub fn error_problems(r: &Run, code: i32, reason: &str, needle: &str, json: bool) -> Vec<String> {
    let mut p = Vec::new();
    if r.code != code {
        p.push(format!("exit code {} (expected {code})", r.code));
    }
    for m in PANIC_MARKERS {
        if r.stderr.contains(m) || r.stdout.contains(m) {
            p.push(format!("panic text `{m}`"));
        }
    }
    let needle_lc = needle.to_lowercase();
    if json {
        let lines: Vec<&str> = r.stdout.lines().collect();
        if lines.len() != 1 || !r.stdout.ends_with('\n') {
            p.push(format!(
                "stdout has {} lines, expected one JSON line",
                lines.len()
            ));
        } else {
            match serde_json::from_str::<Value>(lines[0]) {
                Err(e) => p.push(format!("stdout is not JSON ({e})")),
                Ok(v) => {
                    let mut keys: Vec<&str> = v
                        .as_object()
                        .map(|o| o.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    keys.sort();
                    if keys != ["message", "reason", "status"] {
                        p.push(format!("keys {keys:?}"));
                    }
                    if v["status"] != "error" {
                        p.push("status is not \"error\"".into());
                    }
                    let got = v["reason"].as_str().unwrap_or_default();
                    let snake = !got.is_empty()
                        && got
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit());
                    if !snake {
                        p.push(format!("reason `{got}` is not snake_case"));
                    }
                    if got != reason {
                        p.push(format!("reason `{got}` (expected `{reason}`)"));
                    }
                    let msg = v["message"].as_str().unwrap_or_default();
                    if msg.is_empty() || msg.contains('\n') || msg.contains('\r') {
                        p.push("message is not one non-empty line".into());
                    }
                    if !msg.to_lowercase().contains(&needle_lc) {
                        p.push(format!("message does not name `{needle}`"));
                    }
                }
            }
        }
    } else if !r.stdout.is_empty() {
        p.push("stdout is not empty without --json".into());
    }
    let first = r.stderr.lines().next().unwrap_or_default();
    if !first.starts_with("error: ") {
        p.push("first stderr line is not `error: ...`".into());
    }
    // One line of error and one of what to do about it (issue 37: "one line plus one hint").
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| !l.starts_with("warning: "))
        .collect();
    if lines.len() != 2 || !lines[1].starts_with("hint: ") {
        p.push(format!(
            "stderr is not one `error:` line and one `hint:` line ({} lines)",
            lines.len()
        ));
    }
    // clap puts a missing required argument on the second line ("  <TASK>"), hence three lines.
    let head: String = r.stderr.lines().take(3).collect::<Vec<_>>().join("\n");
    if !head.to_lowercase().contains(&needle_lc) {
        p.push(format!("stderr does not name `{needle}`"));
    }
    p
}

/// Collects failures so one run shows every bad case, then fails once.
#[derive(Default)]
pub struct Failures(pub Vec<String>);

impl Failures {
    pub fn check(
        &mut self,
        label: &str,
        r: &Run,
        code: i32,
        reason: &str,
        needle: &str,
        json: bool,
    ) {
        let p = error_problems(r, code, reason, needle, json);
        if !p.is_empty() {
            let show = |s: &str| s.chars().take(400).collect::<String>();
            self.0.push(format!(
                "{label}: {}\n    exit {} stdout {:?}\n    stderr {:?}",
                p.join("; "),
                r.code,
                show(&r.stdout),
                show(&r.stderr)
            ));
        }
    }
    pub fn unchanged(&mut self, label: &str, before: &[(String, Vec<u8>)], env: &TestEnv) {
        let after = env.snapshot();
        if after != before {
            let changed: Vec<&str> = after
                .iter()
                .filter(|f| !before.contains(f))
                .map(|f| f.0.as_str())
                .chain(
                    before
                        .iter()
                        .filter(|f| !after.contains(f))
                        .map(|f| f.0.as_str()),
                )
                .collect();
            self.0
                .push(format!("{label}: the home changed: {changed:?}"));
        }
    }
    #[track_caller]
    pub fn assert_none(self, total: usize) {
        assert!(
            self.0.is_empty(),
            "{} of {total} cases failed:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn run_bytes(env: &TestEnv, args: &[&OsStr], stdin: Option<&[u8]>) -> Run {
    use std::io::Write;
    let mut c = env.cmd();
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        c.stdin(Stdio::piped());
    }
    let mut child = c.spawn().expect("spawn conductor");
    if let Some(input) = stdin {
        let mut w = child.stdin.take().unwrap();
        let input = input.to_vec();
        // A writer thread, so a child that exits early cannot dead-lock us on a full pipe.
        std::thread::spawn(move || {
            let _ = w.write_all(&input);
        });
    }
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// The largest single argument execve takes (MAX_ARG_STRLEN), with a margin.
const MAX_ARG: usize = 120 * 1024;

fn substitute(bytes: &[u8], id: &str) -> Vec<u8> {
    let text = bytes;
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(b"@ID@") {
            out.extend_from_slice(id.as_bytes());
            i += 4;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

struct Expect {
    reason: String,
    needle: String,
}

fn op_expectations() -> std::collections::BTreeMap<String, Expect> {
    let text = std::fs::read_to_string(corpus_dir().join("op.expect")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut p = l.splitn(3, '\t');
            let name = p.next().unwrap().to_string();
            let reason = p.next().expect("reason column").to_string();
            let needle = p.next().expect("needle column").to_string();
            (name, Expect { reason, needle })
        })
        .collect()
}

/// Check one `op` input three ways: as the argument, on stdin, and with `--json` given.
fn check_op_input(
    f: &mut Failures,
    r: &Realistic,
    label: &str,
    input: &[u8],
    reason: &str,
    needle: &str,
) {
    let env = &r.env;
    let before = env.snapshot();
    // Twice: on stdin, and as the argument (or, when an argument cannot hold it because of a
    // NUL byte or MAX_ARG_STRLEN, on stdin again as `--json op -`).
    type Way<'a> = (&'a str, Vec<&'a OsStr>, Option<&'a [u8]>);
    let mut ways: Vec<Way> = vec![("stdin", vec![os("op")], Some(input))];
    if !input.contains(&0) && input.len() < MAX_ARG {
        ways.push(("arg", vec![os("op"), OsStr::from_bytes(input)], None));
    } else {
        ways.push((
            "stdin -",
            vec![os("--json"), os("op"), os("-")],
            Some(input),
        ));
    }
    for (how, args, stdin) in ways {
        let run = run_bytes(env, &args, stdin);
        // Arguments are checked for UTF-8 by clap, before `op` sees them.
        let (reason, needle) = if stdin.is_none() && std::str::from_utf8(input).is_err() {
            ("usage", "UTF-8")
        } else {
            (reason, needle)
        };
        // `op` always answers in JSON.
        let label = format!("{label} ({how})");
        f.check(&label, &run, 2, reason, needle, true);
        f.unchanged(&label, &before, env);
    }
}

#[test]
fn op_corpus_is_rejected_cleanly() {
    let r = realistic();
    let expect = op_expectations();
    let dir = corpus_dir().join("op");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 100, "only {} op corpus inputs", names.len());
    for n in &names {
        assert!(expect.contains_key(n), "{n} has no line in op.expect");
    }
    for n in expect.keys() {
        assert!(names.contains(n), "op.expect names missing file {n}");
    }
    let mut f = Failures::default();
    for n in &names {
        let e = &expect[n];
        let input = substitute(&std::fs::read(dir.join(n)).unwrap(), &r.ids[0]);
        check_op_input(&mut f, &r, n, &input, &e.reason, &e.needle);
    }
    f.assert_none(names.len());
}

#[test]
fn args_corpus_is_rejected_cleanly() {
    let r = realistic();
    let env = &r.env;
    let text = std::fs::read_to_string(corpus_dir().join("args.jsonl")).unwrap();
    let mut n = 0;
    let mut f = Failures::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("args.jsonl line {}: {e}", i + 1));
        let args: Vec<String> = case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("@ID@", &r.ids[0]))
            .collect();
        let reason = case["reason"].as_str().unwrap();
        let needle = case["needle"].as_str().unwrap();
        let label = format!("args.jsonl:{} {:?}", i + 1, args);
        let before = env.snapshot();
        for json in [false, true] {
            let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
            if json {
                full.insert(0, "--json");
            }
            let run = env.run(&full);
            // `op` answers in JSON even without --json.
            let json = json || args.first().is_some_and(|a| a == "op");
            f.check(&label, &run, 2, reason, needle, json);
            f.unchanged(&label, &before, env);
        }
        n += 1;
    }
    assert!(n >= 50, "only {n} argument vectors");
    f.assert_none(n);
}

fn op_json(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn generated_op_inputs_are_rejected_cleanly() {
    let r = realistic();
    let id = &r.ids[0];
    let mb = "t".repeat(1 << 20);
    let files_10k: Vec<String> = (0..10_000).map(|i| format!("src/f{i}.rs")).collect();
    let files_1001: Vec<String> = (0..1001).map(|i| format!("src/f{i}.rs")).collect();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "1 MB task",
            op_json(
                serde_json::json!({"operation":"start","task":mb,"project":"p","priority":"P1"}),
            ),
            "invalid_input",
            "/task",
        ),
        (
            "1 MB force reason",
            op_json(
                serde_json::json!({"operation":"claim","instance_id":id,"files":["src/a.rs"],"force":mb}),
            ),
            "invalid_input",
            "/force",
        ),
        (
            "1 MB path",
            op_json(serde_json::json!({"operation":"claim","instance_id":id,"files":[mb]})),
            "invalid_input",
            "/files/0",
        ),
        (
            "10,000 files in one claim",
            op_json(serde_json::json!({"operation":"claim","instance_id":id,"files":files_10k})),
            "invalid_input",
            "/files",
        ),
        (
            "1,001 files in one claim",
            op_json(serde_json::json!({"operation":"claim","instance_id":id,"files":files_1001})),
            "invalid_input",
            "/files",
        ),
        (
            "10,000 files in one release",
            op_json(serde_json::json!({"operation":"release","instance_id":id,"files":files_10k})),
            "invalid_input",
            "/files",
        ),
        (
            "10,000 files_modified",
            op_json(
                serde_json::json!({"operation":"done","instance_id":id,"files_modified":files_10k}),
            ),
            "invalid_input",
            "/files_modified",
        ),
        (
            "more than 16 MB on stdin",
            {
                let mut v = br#"{"operation":"status","x":""#.to_vec();
                v.extend(std::iter::repeat_n(b'x', 17 << 20));
                v.extend_from_slice(b"\"}");
                v
            },
            "invalid_input",
            "larger than",
        ),
        (
            "non-UTF-8 bytes on stdin",
            b"{\"operation\":\"claim\",\"files\":[\"src/\xff.rs\"]}".to_vec(),
            "invalid_input",
            "UTF-8",
        ),
    ];
    let mut f = Failures::default();
    for (label, input, reason, needle) in &cases {
        check_op_input(&mut f, &r, label, input, reason, needle);
    }
    f.assert_none(cases.len());
}

#[test]
fn generated_arguments_are_rejected_cleanly() {
    let r = realistic();
    let env = &r.env;
    let id = r.ids[0].clone();
    let big = "t".repeat(MAX_ARG);
    let many: Vec<String> = (0..10_000).map(|i| format!("src/f{i}.rs")).collect();
    let s = |v: &[&str]| v.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
    let mut claim_many = s(&["claim", "--instance", &id]);
    claim_many.extend(many.iter().map(|f| f.as_bytes().to_vec()));
    let mut release_many = s(&["release", "--instance", &id]);
    release_many.extend(many.iter().take(1001).map(|f| f.as_bytes().to_vec()));
    let cases: Vec<(&str, Vec<Vec<u8>>, &str, &str)> = vec![
        (
            "120 KB task",
            s(&["start", &big, "--project", "p", "--priority", "P1"]),
            "invalid_input",
            "/task",
        ),
        (
            "120 KB path",
            s(&["claim", "--instance", &id, &big]),
            "invalid_input",
            "/files/0",
        ),
        (
            "10,000 files in one claim",
            claim_many,
            "invalid_input",
            "/files",
        ),
        (
            "1,001 files in one release",
            release_many,
            "invalid_input",
            "/files",
        ),
        (
            "non-UTF-8 claim path",
            vec![
                b"claim".to_vec(),
                b"--instance".to_vec(),
                id.as_bytes().to_vec(),
                b"src/\xff\xfe.rs".to_vec(),
            ],
            "usage",
            "UTF-8",
        ),
        (
            "non-UTF-8 task",
            vec![
                b"start".to_vec(),
                b"caf\xe9".to_vec(),
                b"--priority".to_vec(),
                b"P1".to_vec(),
            ],
            "usage",
            "UTF-8",
        ),
        (
            "non-UTF-8 instance id",
            vec![
                b"heartbeat".to_vec(),
                b"--instance".to_vec(),
                b"web-\xff\xff\xff".to_vec(),
            ],
            "usage",
            "UTF-8",
        ),
        (
            "non-UTF-8 op input",
            vec![b"op".to_vec(), b"{\"operation\":\"st\xffatus\"}".to_vec()],
            "usage",
            "UTF-8",
        ),
        (
            "non-UTF-8 subcommand",
            vec![b"\xffclaim".to_vec()],
            "usage",
            "\u{fffd}claim",
        ),
    ];
    let mut f = Failures::default();
    for (label, args, reason, needle) in &cases {
        let before = env.snapshot();
        for json in [false, true] {
            let mut full: Vec<&OsStr> = args.iter().map(|a| OsStr::from_bytes(a)).collect();
            if json {
                full.insert(0, os("--json"));
            }
            let run = run_bytes(env, &full, None);
            let is_op = args[0] == b"op";
            f.check(label, &run, 2, reason, needle, json || is_op);
            f.unchanged(label, &before, env);
        }
    }
    f.assert_none(cases.len());
}

/// A task is free text (newlines, tabs, terminal escapes are valid); an error that quotes it
/// must still be one line.
#[test]
fn errors_quoting_hostile_tasks_stay_one_line() {
    let r = realistic();
    let env = &r.env;
    let evil = "line one\nline two\t\u{1b}[2J\u{7}";
    env.run(&["start", evil, "--project", "proj", "--priority", "P1"])
        .code(0);
    let before = env.snapshot();
    let mut f = Failures::default();
    // Two instances work in the project directory now: which one is meant is ambiguous.
    for json in [false, true] {
        let mut args = vec!["claim", "src/x.rs"];
        if json {
            args.insert(0, "--json");
        }
        let run = env.run(&args);
        f.check(
            "ambiguous",
            &run,
            2,
            "ambiguous_instance",
            "pass --instance",
            json,
        );
        if !json && !run.error_and_hint() {
            f.0.push(format!(
                "ambiguous: stderr is not one error and one hint: {:?}",
                run.stderr
            ));
        }
        f.unchanged("ambiguous", &before, env);
    }
    // From outside every working directory: no instance works there, and the list names them.
    let elsewhere = env.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for json in [false, true] {
        let mut args = vec!["heartbeat"];
        if json {
            args.insert(0, "--json");
        }
        let run = env.run_in(&elsewhere, &args);
        f.check(
            "no match",
            &run,
            2,
            "ambiguous_instance",
            "no live instance",
            json,
        );
        if !json && !run.error_and_hint() {
            f.0.push(format!(
                "no match: stderr is not one error and one hint: {:?}",
                run.stderr
            ));
        }
        f.unchanged("no match", &before, env);
    }
    f.assert_none(4);
}
