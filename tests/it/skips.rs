//! Issue 38: no silent skips. A test that needs a real component (bubblewrap, mounting, promtool,
//! root, ...) fails naming it and how to install it; only `CONDUCTOR_TEST_SKIP` naming that
//! component turns the failure into a skip, which says SKIPPED and is logged for `./test`'s
//! summary. Checked on this very test binary, run as a child with the environment set.

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "a fixture: run by a_missing_component_fails_unless_conductor_test_skip_names_it"]
fn fixture_needs_a_missing_component() {
    // Only as the child of the test below (not in a run of every ignored test).
    if std::env::var_os("CONDUCTOR_TEST_FIXTURE").is_none() {
        return;
    }
    crate::common::missing("zsh", "the fixture's zsh is missing");
    // Reached only when skipped: the caller returns.
}

/// Run the fixture with `CONDUCTOR_TEST_SKIP` = `skip` (unset with `None`), logging to `log`.
fn fixture(skip: Option<&str>, log: &Path) -> (i32, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        "skips::fixture_needs_a_missing_component",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env_remove("CONDUCTOR_TEST_SKIP")
    .env("CONDUCTOR_TEST_FIXTURE", "1")
    .env("CONDUCTOR_TEST_SKIP_LOG", log);
    if let Some(s) = skip {
        c.env("CONDUCTOR_TEST_SKIP", s);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn a_missing_component_fails_unless_conductor_test_skip_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skipped.txt");
    for skip in [None, Some(""), Some("bwrap,mount"), Some("zsh-extra")] {
        let (code, out) = fixture(skip, &log);
        assert_eq!(code, 101, "fails with CONDUCTOR_TEST_SKIP={skip:?}:\n{out}");
        assert!(
            out.contains("the fixture's zsh is missing")
                && out.contains("This test needs zsh: apt-get install zsh")
                && out.contains("CONDUCTOR_TEST_SKIP=zsh turns this failure into a skip"),
            "{out}"
        );
        assert!(out.contains("1 failed"), "{out}");
        assert!(!log.exists(), "nothing logged as skipped: {out}");
    }
    for round in 1..=2 {
        let (code, out) = fixture(Some("bwrap, zsh"), &log);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("SKIPPED skips::fixture_needs_a_missing_component: the fixture's zsh is missing (CONDUCTOR_TEST_SKIP names zsh)"),
            "{out}"
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "skips::fixture_needs_a_missing_component (no zsh)\n".repeat(round),
            "each skip appends one line"
        );
    }
}

/// Every skip goes through `common::missing`: no test prints its own "skipped" and returns.
#[test]
fn no_test_skips_on_its_own() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut bad = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "rs") || p.ends_with("skips.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap().to_lowercase();
        for (at, _) in text.match_indices("println!(") {
            let call = &text[at..];
            let call = &call[..call.find(");").unwrap_or(call.len())];
            if call.contains("skip") {
                let line = text[..at].lines().count();
                bad.push(format!("{}:{line}: {call}", p.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "skip through common::missing (CONDUCTOR_TEST_SKIP), not by printing:\n{}",
        bad.join("\n")
    );
}
