//! The `reason` codes agents branch on are one closed list (`conductor::error::Reason`, the
//! store's `Refusal`, and the few fixed ones), and the exit-code table (docs/exit-codes.md) says the same as
//! the code: every reason is in the row of its exit code, and the table names no other.

use std::collections::{BTreeMap, BTreeSet};

use conductor::error::Reason;
use conductor::store::error::Refusal;

/// The exit-code table of docs/exit-codes.md: exit code → the reasons its row names.
fn readme_table() -> BTreeMap<u8, BTreeSet<String>> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/exit-codes.md"))
            .unwrap();
    let table = readme
        .split("# Exit codes")
        .nth(1)
        .expect("docs/exit-codes.md has its table");
    let mut rows = BTreeMap::new();
    for line in table.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let Ok(code) = cells[0].trim_start_matches("| ").trim().parse::<u8>() else {
            continue;
        };
        let reasons = cells
            .last()
            .unwrap()
            .trim_end_matches(" |")
            .trim_end_matches('|');
        let names: BTreeSet<String> = reasons
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        rows.insert(code, names);
    }
    rows
}

/// Every reason conductor can print, with its exit code.
fn every_reason() -> Vec<(String, u8)> {
    let mut all: Vec<(String, u8)> = Reason::ALL
        .iter()
        .map(|r| (r.as_str().to_string(), r.exit_code()))
        .collect();
    all.extend(Refusal::ALL.iter().map(|r| (r.as_str().to_string(), 2)));
    for (name, code) in [
        ("lock_timeout", 1),
        ("io", 1),
        ("corrupt_state", 1),
        ("unsafe_home", 1),
        ("usage", 2),
        ("unknown_instance", 2),
        ("ambiguous_instance", 2),
        ("priority_gate", 4),
        ("store_unavailable", 11),
        ("store_untrusted", 11),
        ("store_unauthorized", 11),
        ("internal", 70),
    ] {
        all.push((name.to_string(), code));
    }
    all
}

#[test]
fn every_reason_is_in_the_documented_row_of_its_exit_code() {
    let table = readme_table();
    let missing: Vec<String> = every_reason()
        .into_iter()
        .filter(|(name, code)| !table.get(code).is_some_and(|row| row.contains(name)))
        .map(|(name, code)| format!("{name} (exit {code})"))
        .collect();
    assert!(
        missing.is_empty(),
        "not in the exit-code table of docs/exit-codes.md: {missing:?}"
    );
}

#[test]
fn the_documented_table_names_no_reason_the_code_does_not_have() {
    let known: BTreeSet<String> = every_reason().into_iter().map(|(n, _)| n).collect();
    let unknown: Vec<String> = readme_table()
        .into_values()
        .flatten()
        .filter(|n| !known.contains(n) && n != "retry_after_seconds")
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/exit-codes.md names reasons that do not exist: {unknown:?}"
    );
}

#[test]
fn reasons_are_distinct_snake_case_names() {
    let names: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    let set: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(set.len(), names.len(), "a reason is listed twice");
    assert!(
        names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    );
}

/// The `.rs` files under tests/it, with their text.
fn test_sources() -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it"
    ))];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out
}

/// True when `text` asserts that something answered with reason `name`: the literal `"name"`
/// on a line that, with the two lines before it (where rustfmt breaks a long call), checks a
/// reason: `.reason(2, "name")`, `["reason"], "name"`, `"reason": "name"` in an expected
/// object, or a table row's `reason: "name"`.
fn asserts_reason(text: &str, name: &str) -> bool {
    let literal = format!("\"{name}\"");
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().any(|(i, line)| {
        line.contains(&literal) && {
            let window = lines[i.saturating_sub(2)..=i].join("\n");
            ["reason(", "[\"reason\"]", "\"reason\":", "reason:"]
                .iter()
                .any(|k| window.contains(k))
        }
    })
}

#[test]
fn every_documented_reason_is_produced_and_asserted_by_a_test() {
    // This file names every reason, so it does not count.
    let sources: Vec<(std::path::PathBuf, String)> = test_sources()
        .into_iter()
        .filter(|(p, _)| !p.ends_with("reasons.rs"))
        .collect();
    let missing: Vec<String> = every_reason()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| !sources.iter().any(|(_, text)| asserts_reason(text, name)))
        .collect();
    assert!(
        missing.is_empty(),
        "no test under tests/it produces and asserts these documented reasons (add one, for \
         example in tests/it/every_reason.rs with `Run::reason`): {missing:?}"
    );
}

#[test]
fn the_scan_for_asserted_reasons_tells_an_assertion_from_a_mention() {
    assert!(asserts_reason(
        r#"r.reason(2, "unknown_job");"#,
        "unknown_job"
    ));
    assert!(asserts_reason(
        "assert_eq!(\n    r.json()[\"reason\"],\n    \"unknown_job\"\n);",
        "unknown_job"
    ));
    assert!(asserts_reason(
        r#"json!({"reason": "priority_gate"})"#,
        "priority_gate"
    ));
    assert!(!asserts_reason(
        r#"// unknown_job is refused"#,
        "unknown_job"
    ));
    assert!(!asserts_reason(r#"let id = "unknown_job";"#, "unknown_job"));
    assert!(!asserts_reason(
        r#"r.reason(2, "unknown_jobs");"#,
        "unknown_job"
    ));
}
