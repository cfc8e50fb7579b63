//! Issue 26: `--version` answers before the command tree is built, with clap's exact output.

use crate::common::TestEnv;

#[test]
fn version_prints_the_name_and_version_and_exits_zero() {
    let env = TestEnv::new();
    let want = format!("conductor {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"], &["--json", "--version"]] {
        let out = env.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
    // Not alone: still clap's business (an unknown argument is a usage error, exit 2).
    let out = env.cmd().args(["--bogus", "--version"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(env.home.read_dir().map_or(true, |mut d| d.next().is_none()));
}
