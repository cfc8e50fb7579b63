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
