//! Issue 3 item 3: corrupt or foreign state. A status.json that cannot be trusted is never
//! overwritten: every command that reads it exits 1 with `corrupt_state` and the file's path,
//! and the home stays byte-identical; `doctor` explains, `doctor --repair` moves the bad file
//! aside and rebuilds a state every command accepts. The ledgers (history.jsonl, conflicts.log)
//! are read around a bad middle line or a torn last line, repaired on the next append, and
//! cleaned by `doctor --repair` without losing the original.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::*;
use crate::hostile::{Failures, Realistic, realistic};

/// Files in the home whose name starts with `prefix`.
fn beside(env: &TestEnv, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

fn instance_ids(state: &Value) -> Vec<String> {
    let mut v: Vec<String> = state["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Every command that reads the state, as argument vectors (`@ID@` is a live instance id).
/// (`align` and `history` do not read status.json and rightly keep working.)
const READERS: &[&[&str]] = &[
    &["status"],
    &[],
    &["start", "New task", "--project", "proj", "--priority", "P1"],
    &["claim", "--instance", "@ID@", "src/new.rs"],
    &["release", "--instance", "@ID@", "--all"],
    &["done", "--instance", "@ID@"],
    &["heartbeat", "--instance", "@ID@"],
    &["cleanup"],
    &["cleanup", "--instance", "@ID@"],
    &["conflicts"],
    &["op", r#"{"operation":"status"}"#],
    &[
        "op",
        r#"{"operation":"claim","instance_id":"@ID@","files":["src/new.rs"]}"#,
    ],
    &["op", r#"{"operation":"heartbeat","instance_id":"@ID@"}"#],
    &[
        "op",
        r#"{"operation":"start","task":"t","project":"p","priority":"P1"}"#,
    ],
];

/// Put `bytes` in place of status.json and check every reader refuses it without changing a
/// byte; then doctor, doctor --repair, and every command on the repaired state.
fn check_corrupt_status(
    r: &Realistic,
    label: &str,
    bytes: &[u8],
    doctor_needle: &str,
    keep: &[String],
) {
    let env = &r.env;
    let status = env.home_file("status.json");
    std::fs::write(&status, bytes).unwrap();
    let before = env.snapshot();
    let path = status.to_string_lossy().into_owned();
    let mut f = Failures::default();
    let mut n = 0;
    for args in READERS {
        let args: Vec<String> = args.iter().map(|a| a.replace("@ID@", &r.ids[0])).collect();
        for json in [false, true] {
            let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
            if json {
                full.insert(0, "--json");
            }
            let label = format!("{label}: {full:?}");
            let run = env.run(&full);
            let json = json || args.first().is_some_and(|a| a == "op");
            f.check(&label, &run, 1, "corrupt_state", &path, json);
            f.unchanged(&label, &before, env);
            n += 1;
        }
    }
    f.assert_none(n);

    // doctor explains, changes nothing, exits 1.
    let d = env.run(&["doctor"]);
    d.code(1);
    assert!(
        d.stdout.contains("status.json") && d.stdout.contains(doctor_needle),
        "{label}: doctor does not explain (`{doctor_needle}`):\n{d:#?}"
    );
    assert!(env.snapshot() == before, "{label}: doctor changed the home");
    let dj = env.run(&["--json", "doctor"]);
    dj.code(1);
    assert_eq!(dj.json()["status"], "problems", "{label}: {dj:#?}");

    // doctor --repair keeps the original bytes beside and rebuilds.
    let rep = env.run(&["doctor", "--repair"]);
    rep.code(0);
    let aside = beside(env, "status.json.corrupt-");
    assert_eq!(
        aside.len(),
        1,
        "{label}: want one corrupt copy: {aside:?}\n{rep:#?}"
    );
    assert_eq!(
        std::fs::read(&aside[0]).unwrap(),
        bytes,
        "{label}: the corrupt copy is not the original"
    );
    let mut keep = keep.to_vec();
    keep.sort();
    assert_eq!(
        instance_ids(&env.state()),
        keep,
        "{label}: the repaired state did not keep the valid instances\n{rep:#?}"
    );
    // The other files were fine and are untouched.
    for name in ["history.jsonl", "conflicts.log"] {
        let old = before
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone());
        assert_eq!(
            std::fs::read(env.home_file(name)).ok(),
            old,
            "{label}: repair changed {name}"
        );
    }
    env.run(&["doctor"]).code(0);

    // Every command accepts the repaired state.
    env.run(&["status"]).code(0);
    env.run(&["--json", "op", r#"{"operation":"status"}"#])
        .code(0);
    env.run(&["conflicts"]).code(0);
    let id = env.start("After repair", "P1");
    let file = env.abs("src/after-repair.rs");
    env.run(&["claim", "--instance", &id, &file]).code(0);
    env.run(&["heartbeat", "--instance", &id]).code(0);
    env.run(&["release", "--instance", &id, &file]).code(0);
    env.run(&["claim", "--instance", &id, &file]).code(0);
    env.run(&["done", "--instance", &id]).code(0);
    env.run(&["cleanup"]).code(0);
    env.run(&["history"]).code(0);
    env.run(&["doctor"]).code(0);
}

fn realistic_status(r: &Realistic) -> Value {
    r.env.state()
}

#[test]
fn status_not_json() {
    let r = realistic();
    check_corrupt_status(&r, "not JSON", b"this is not JSON {", "not valid JSON", &[]);
}

#[test]
fn status_truncated_midway() {
    let r = realistic();
    let bytes = std::fs::read(r.env.home_file("status.json")).unwrap();
    let cut = bytes[..bytes.len() / 2].to_vec();
    check_corrupt_status(&r, "truncated", &cut, "not valid JSON", &[]);
}

#[test]
fn status_empty_file() {
    let r = realistic();
    check_corrupt_status(&r, "empty", b"", "not valid JSON", &[]);
}

#[test]
fn status_schema_invalid() {
    let r = realistic();
    let mut st = realistic_status(&r);
    // The second instance breaks the schema; the other two are fine and must be kept.
    let bad = r.ids[1].clone();
    for i in st["instances"].as_array_mut().unwrap() {
        if i["id"] == bad.as_str() {
            i["priority"] = "P9".into();
        }
    }
    let bytes = serde_json::to_vec_pretty(&st).unwrap();
    check_corrupt_status(
        &r,
        "schema-invalid",
        &bytes,
        "/priority",
        &[r.ids[0].clone(), r.ids[2].clone()],
    );
}

#[test]
fn status_newer_version() {
    let r = realistic();
    let mut st = realistic_status(&r);
    st["version"] = "2.0".into();
    let bytes = serde_json::to_vec_pretty(&st).unwrap();
    check_corrupt_status(&r, "version 2.0", &bytes, "\"2.0\"", &r.ids.clone());
}

// Inconsistent but readable states (a file under two instances, a global claim its holder does
// not list) are not corrupt: they are served and repaired, see tests/it/foreign.rs.

// ---- ledgers ----

#[derive(Clone, Copy, Debug)]
enum Ledger {
    History,
    Conflicts,
}

impl Ledger {
    fn file(self) -> &'static str {
        match self {
            Ledger::History => "history.jsonl",
            Ledger::Conflicts => "conflicts.log",
        }
    }
    /// The command that reads it.
    fn reader(self) -> &'static str {
        match self {
            Ledger::History => "history",
            Ledger::Conflicts => "conflicts",
        }
    }
    /// Run a command that appends one or more lines to it.
    fn append(self, r: &Realistic) {
        let env = &r.env;
        match self {
            Ledger::History => {
                let id = env.start("Append a history line", "P1");
                env.run(&["done", "--instance", &id]).code(0);
            }
            Ledger::Conflicts => {
                let f = env.abs("api/auth.rs");
                env.run(&["claim", "--instance", &r.ids[1], &f]).code(3);
            }
        }
    }
    fn line_ok(self, line: &str) -> bool {
        match self {
            Ledger::History => serde_json::from_str::<Value>(line).is_ok_and(|v| {
                conductor::schema::validate(conductor::schema::Schema::HistoryEntry, &v).is_ok()
            }),
            Ledger::Conflicts => {
                conductor::protocol::conflicts_log::LogEntry::parse(line).is_some()
            }
        }
    }
    /// How many entries the reader shows (with --json).
    fn shown(self, out: &Value) -> usize {
        match self {
            Ledger::History => out["entries"].as_array().unwrap().len(),
            Ledger::Conflicts => out["recent"].as_array().unwrap().len(),
        }
    }
}

/// The valid lines of a realistic ledger (at least two).
fn valid_lines(r: &Realistic, l: Ledger) -> Vec<String> {
    if matches!(l, Ledger::History) {
        // realistic() finished one task; finish a second so there is a middle.
        l.append(r);
    }
    let text = std::fs::read_to_string(r.env.home_file(l.file())).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(lines.len() >= 2, "{} has {} lines", l.file(), lines.len());
    assert!(lines.iter().all(|x| l.line_ok(x)));
    lines
}

fn check_bad_middle_line(l: Ledger) {
    let r = realistic();
    let env = &r.env;
    let lines = valid_lines(&r, l);
    let path = env.home_file(l.file());
    let mut text = String::new();
    text.push_str(&lines[0]);
    text.push('\n');
    text.push_str("{\"this is\": not a valid line\n");
    for x in &lines[1..] {
        text.push_str(x);
        text.push('\n');
    }
    std::fs::write(&path, &text).unwrap();
    let before = env.snapshot();

    // The reader skips it with a warning naming the line, and shows the rest.
    let out = env.run(&["--json", l.reader()]);
    out.code(0);
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains("line 2"),
        "{l:?}: no warning for line 2:\n{out:#?}"
    );
    assert_eq!(l.shown(&out.json()), lines.len(), "{l:?}: {out:#?}");
    assert!(env.snapshot() == before, "{l:?}: reading changed the home");

    // doctor reports it (and changes nothing).
    let d = env.run(&["doctor"]);
    d.code(1);
    assert!(
        d.stdout.contains(l.file()) && d.stdout.contains("line 2"),
        "{l:?}: doctor does not name line 2:\n{d:#?}"
    );
    assert!(env.snapshot() == before, "{l:?}: doctor changed the home");

    // An append leaves the earlier bytes alone and adds whole lines.
    l.append(&r);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.starts_with(&text),
        "{l:?}: append rewrote earlier lines"
    );
    assert!(after.len() > text.len() && after.ends_with('\n'));
    assert!(after[text.len()..].lines().all(|x| l.line_ok(x)));

    // --repair keeps the valid lines, in order, and the original beside.
    let original = std::fs::read(&path).unwrap();
    env.run(&["doctor", "--repair"]).code(0);
    let aside = beside(env, &format!("{}.corrupt-", l.file()));
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), original);
    let repaired = std::fs::read_to_string(&path).unwrap();
    let expect: String = String::from_utf8(original)
        .unwrap()
        .lines()
        .filter(|x| l.line_ok(x))
        .map(|x| format!("{x}\n"))
        .collect();
    assert_eq!(
        repaired, expect,
        "{l:?}: repair lost or kept the wrong lines"
    );
    env.run(&["doctor"]).code(0);
    env.run(&[l.reader()]).code(0);
}

fn check_torn_last_line(l: Ledger) {
    let r = realistic();
    let env = &r.env;
    let lines = valid_lines(&r, l);
    let path = env.home_file(l.file());
    let mut text: String = lines.iter().map(|x| format!("{x}\n")).collect();
    let last = &lines[lines.len() - 1];
    let torn = &last[..last.len() / 2];
    text.push_str(torn);
    std::fs::write(&path, &text).unwrap();
    let before = env.snapshot();

    let out = env.run(&["--json", l.reader()]);
    out.code(0);
    let n = lines.len() + 1;
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains(&format!("line {n}")),
        "{l:?}: no warning for the torn line {n}:\n{out:#?}"
    );
    assert_eq!(l.shown(&out.json()), lines.len(), "{l:?}: {out:#?}");
    assert!(env.snapshot() == before, "{l:?}: reading changed the home");

    let d = env.run(&["doctor"]);
    d.code(1);
    assert!(
        d.stdout.contains(l.file()) && d.stdout.contains("torn"),
        "{l:?}: doctor does not report the torn line:\n{d:#?}"
    );
    assert!(env.snapshot() == before, "{l:?}: doctor changed the home");

    // doctor --repair on a copy of this home: keeps the complete lines, moves the original aside.
    let copy = TestEnv::new();
    std::fs::create_dir_all(&copy.home).unwrap();
    for (name, bytes) in &before {
        std::fs::write(copy.home.join(name), bytes).unwrap();
    }
    copy.run(&["doctor", "--repair"]).code(0);
    let aside = beside(&copy, &format!("{}.corrupt-", l.file()));
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), text.as_bytes());
    let kept: String = lines.iter().map(|x| format!("{x}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(copy.home.join(l.file())).unwrap(),
        kept
    );
    copy.run(&["doctor"]).code(0);

    // The next append cuts the torn tail first: no torn line ever ends up in the middle.
    l.append(&r);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.starts_with(&kept),
        "{l:?}: append lost complete lines"
    );
    assert!(after.ends_with('\n'));
    // Every line is whole and valid: torn bytes glued to the next line would not parse.
    for x in after.lines() {
        assert!(
            l.line_ok(x),
            "{l:?}: line {x:?} is not valid after the append:\n{after}"
        );
    }
    assert!(after.lines().count() > lines.len());
    env.run(&["doctor"]).code(0);
}

#[test]
fn history_bad_middle_line() {
    check_bad_middle_line(Ledger::History);
}

#[test]
fn history_torn_last_line() {
    check_torn_last_line(Ledger::History);
}

#[test]
fn conflicts_log_bad_middle_line() {
    check_bad_middle_line(Ledger::Conflicts);
}

#[test]
fn conflicts_log_torn_last_line() {
    check_torn_last_line(Ledger::Conflicts);
}

/// Review finding: a bad line in events.jsonl stopped every write, and doctor said all was well.
#[test]
fn a_bad_journal_line_is_found_and_repaired_by_doctor() {
    let env = TestEnv::new();
    let a = env.start("journal", "P1");
    env.run(&["claim", "--instance", &a, "src/x.rs"]).code(0);
    let journal = env.home_file("events.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("garbage\n");
    std::fs::write(&journal, &text).unwrap();
    let r = env.run(&["--json", "claim", "--instance", &a, "src/y.rs"]);
    r.code(1);
    assert_eq!(r.json()["reason"], "corrupt_state");
    let d = env.run(&["doctor"]);
    d.code(1);
    assert!(
        d.stdout
            .contains("events.jsonl: 1 invalid line(s), first at line"),
        "{}",
        d.stdout
    );
    env.run(&["doctor", "--repair"]).code(0);
    let kept = std::fs::read_dir(&env.home).unwrap().flatten().find(|e| {
        e.file_name()
            .to_string_lossy()
            .starts_with("events.jsonl.corrupt-")
    });
    assert_eq!(
        std::fs::read_to_string(kept.expect("original kept").path()).unwrap(),
        text,
        "nothing deleted"
    );
    env.run(&["--json", "claim", "--instance", &a, "src/y.rs"])
        .code(0);
    let seqs: Vec<u64> = env.run(&["events"]).json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seqs continue without reuse: {seqs:?}"
    );
}

/// Review finding: a complete history line without its final newline (written by hand, by `jq -j`
/// or by the original plugin) was skipped as torn and then cut off by the next append.
#[test]
fn a_whole_last_record_without_newline_is_kept() {
    let env = TestEnv::new();
    let id = env.start("later", "P1");
    let line = r#"{"id":"itm-a1b2c3","project":"pitchello","task":"Fix auth bug","priority":"P1","started_at":"2026-01-17T09:45:00Z","completed_at":"2026-01-17T10:30:00Z","files_modified":["/p/src/api/users.ts"],"outcome":"success"}"#;
    std::fs::write(env.home_file("history.jsonl"), line).unwrap();
    let r = env.run(&["--json", "history"]);
    r.code(0);
    assert_eq!(
        r.json()["entries"].as_array().unwrap().len(),
        1,
        "listed: {r:?}"
    );
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    env.run(&["done", "--instance", &id]).code(0);
    let text = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    assert!(
        text.starts_with(&format!("{line}\n")),
        "the old line is kept, newline added: {text}"
    );
    assert_eq!(text.lines().count(), 2);
}

#[test]
fn a_bad_document_of_another_domain_is_reported_never_rewritten_and_stops_no_claim() {
    let env = TestEnv::new();
    let id = env.start("protocol work", "P1");
    env.run(&["agent", "register", "scout", "--handle", "@scout"])
        .code(0);
    std::fs::write(env.home_file("queue.json"), "{ not json").unwrap();
    let r = env.run(&["--json", "doctor"]);
    r.code(1);
    let docs = r.json()["documents"].as_array().unwrap().clone();
    let queue = docs.iter().find(|f| f["file"] == "queue.json").unwrap();
    assert_eq!(queue["ok"], false, "{docs:?}");
    let agents = docs
        .iter()
        .find(|f| f["file"] == "runtime-agents.json")
        .unwrap();
    assert_eq!(agents["ok"], true, "{docs:?}");
    // --repair does not overwrite what it cannot interpret, and says so.
    env.run(&["doctor", "--repair"]).code(1);
    assert_eq!(
        std::fs::read(env.home_file("queue.json")).unwrap(),
        b"{ not json"
    );
    // The protocol and the runtime go on working.
    env.run(&["claim", "--instance", &id, "src/a.rs"]).code(0);
    env.run(&["post", "ops", "@scout hello", "--as", "ana"])
        .code(0);
    // The queue itself refuses with corrupt_state (exit 1) and changes nothing.
    env.run(&["queue", "jobs"]).code(1);
}

/// A bad side file (`landing.json`, `unclaimed.json`) does not hide the sessions: `status` still
/// shows them, says which file it could not read and what is left out, and changes nothing.
#[test]
fn a_corrupt_side_file_leaves_status_showing_every_session_and_says_what_it_left_out() {
    let env = TestEnv::new();
    let id = env.start("Refactor", "P1");
    env.run(&["claim", "--instance", &id, "src/a.rs"]).code(0);
    env.write_home("unclaimed.json", "{\"edits\": [garbage");
    env.write_home("landing.json", "{bad");
    let before = env.snapshot();

    let text = env.run(&["status"]);
    text.code(0);
    assert!(text.stdout.contains(&id), "{}", text.stdout);
    assert!(text.stdout.contains("src/a.rs"), "{}", text.stdout);
    for (file, what) in [
        ("unclaimed.json", "edits nobody claimed are not shown"),
        ("landing.json", "what is landing is not shown"),
    ] {
        assert!(
            text.stdout
                .lines()
                .any(|l| l.starts_with("Warning: ") && l.contains(file) && l.contains(what)),
            "{file}: {}",
            text.stdout
        );
    }

    let json = env.run(&["--json", "status"]);
    json.code(0);
    let v = json.json();
    assert_schema(conductor::schema::Schema::Output, &v);
    assert_eq!(v["instances"].as_array().unwrap().len(), 1);
    let warnings: Vec<&str> = v["state_warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("unclaimed.json")));
    assert!(warnings.iter().any(|w| w.contains("landing.json")));
    assert_eq!(env.snapshot(), before, "status changed the home");
}
