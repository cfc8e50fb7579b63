//! Issue 3 item 7: the home is private (0700, files 0600, tightened if looser, refused if owned
//! by someone else), writes never leave temp files or follow planted symlinks, and claims are
//! keyed by the real path behind symlinks.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::common::*;
use crate::hostile::{assert_error, realistic};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Every entry in the home with its mode, for the assertion message.
fn modes(env: &TestEnv) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                mode(&e.path()),
            )
        })
        .collect();
    v.sort();
    v
}

fn temp_files(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-"))
        .collect()
}

#[test]
fn home_is_0700_and_every_file_0600_even_with_umask_0() {
    let env = TestEnv::new();
    // A permissive umask must not leak into the modes.
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.args(args);
        unsafe {
            c.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        env.run_cmd(&mut c)
    };
    let r = run(&[
        "--json",
        "start",
        "Mode check",
        "--project",
        "p",
        "--priority",
        "P1",
    ]);
    r.code(0);
    let id = r.json()["instance_id"].as_str().unwrap().to_string();
    let a = env.abs("src/a.rs");
    run(&["claim", "--instance", &id, &a]).code(0);
    run(&["release", "--instance", &id, &a, "--reason", "mode test"]).code(0);
    run(&["done", "--instance", &id]).code(0);
    run(&["reset"]).code(0);
    // Corrupt copies made by doctor --repair.
    std::fs::write(env.home_file("status.json"), b"{not json").unwrap();
    std::fs::set_permissions(
        env.home_file("status.json"),
        PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let h = env.home_file("history.jsonl");
    let mut text = std::fs::read(&h).unwrap();
    text.extend_from_slice(b"torn");
    std::fs::write(&h, text).unwrap();
    run(&["doctor", "--repair"]).code(0);

    assert_eq!(mode(&env.home), 0o700, "home mode");
    let all = modes(&env);
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "status.json",
        "status.lock",
        "history.jsonl",
        "conflicts.log",
    ] {
        assert!(names.contains(&want), "{want} missing: {all:?}");
    }
    for prefix in [
        "status.json.corrupt-",
        "history.jsonl.corrupt-",
        "status.json.",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no {prefix}* file: {all:?}"
        );
    }
    assert!(
        names.iter().any(|n| n.ends_with(".bak")),
        "no backup: {all:?}"
    );
    for (n, m) in &all {
        assert_eq!(*m, 0o600, "{n} has mode {m:o}: {all:?}");
    }
    assert!(temp_files(&env).is_empty(), "temp files left: {all:?}");
}

#[test]
fn loose_home_is_tightened() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::set_permissions(&env.home, PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(mode(&env.home), 0o755);
    env.run(&["status"]).code(0);
    assert_eq!(mode(&env.home), 0o700);
    std::fs::set_permissions(&env.home, PermissionsExt::from_mode(0o777)).unwrap();
    env.start("Tighten again", "P1");
    assert_eq!(mode(&env.home), 0o700);
}

/// A uid no account uses (checked against /etc/passwd).
fn unused_uid() -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let used: Vec<u32> = passwd
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
        .collect();
    (54321..).find(|u| !used.contains(u)).unwrap()
}

#[test]
fn home_owned_by_another_user_is_refused() {
    if unsafe { libc::geteuid() } != 0 {
        return missing(
            "root",
            "not root: cannot chown the temp home to another uid",
        );
    }
    let r = realistic();
    let env = &r.env;
    let uid = unused_uid();
    std::os::unix::fs::chown(&env.home, Some(uid), None).unwrap();
    let before = env.snapshot();
    let home = env.home.to_string_lossy().into_owned();
    let a = env.abs("src/a.rs");
    for args in [
        vec!["status"],
        vec!["start", "Intruder", "--project", "p", "--priority", "P1"],
        vec!["claim", "--instance", r.ids[0].as_str(), a.as_str()],
        vec!["doctor", "--repair"],
        vec!["reset"],
        vec!["history"],
    ] {
        for json in [false, true] {
            let mut full = args.clone();
            if json {
                full.insert(0, "--json");
            }
            let run = env.run(&full);
            assert_error(&format!("{full:?}"), &run, 1, "unsafe_home", &home, json);
            assert!(run.stderr.contains(&uid.to_string()), "{run:#?}");
        }
    }
    assert!(env.snapshot() == before, "the foreign home changed");
    assert_eq!(std::fs::metadata(&env.home).unwrap().uid(), uid);
}

#[test]
fn home_that_is_a_file_is_refused() {
    let env = TestEnv::new();
    std::fs::write(&env.home, b"not a directory").unwrap();
    let run = env.run(&["--json", "status"]);
    assert_error(
        "home is a file",
        &run,
        1,
        "unsafe_home",
        "not a directory",
        true,
    );
    assert_eq!(std::fs::read(&env.home).unwrap(), b"not a directory");
}

#[test]
fn temp_files_are_never_left_and_planted_symlinks_are_not_followed() {
    let r = realistic();
    let env = &r.env;
    assert!(temp_files(env).is_empty(), "{:?}", temp_files(env));
    // A victim file outside the home, and symlinks to it named like the store's temp files,
    // plus a stale regular temp file from a "crashed" writer.
    let victim = env.root.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    for name in [".tmp-AAAAAA.tmp", ".tmp-status.tmp", ".tmp-.tmp"] {
        symlink(&victim, env.home_file(name)).unwrap();
    }
    std::fs::write(env.home_file(".tmp-stale0.tmp"), b"debris").unwrap();
    let a = env.abs("src/sym.rs");
    env.run(&["claim", "--instance", &r.ids[0], &a]).code(0);
    env.run(&["release", "--instance", &r.ids[0], &a]).code(0);
    env.run(&["doctor", "--repair"]).code(0);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        temp_files(env).is_empty(),
        "stale temp files and planted links are cleaned under the lock: {:?}",
        temp_files(env)
    );
    env.run(&["doctor"]).code(0);
}

#[test]
fn planted_symlinks_for_lock_and_ledgers_are_not_followed() {
    let r = realistic();
    let env = &r.env;
    let a = env.abs("src/planted.rs");
    for name in ["status.lock", "history.jsonl", "conflicts.log"] {
        let victim = env.root.path().join(format!("victim-{name}"));
        std::fs::write(&victim, b"precious\n").unwrap();
        let path = env.home_file(name);
        let saved = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        symlink(&victim, &path).unwrap();
        // A claim conflict takes the lock and writes conflicts.log; done writes history.jsonl.
        let c = if name == "history.jsonl" {
            let id = env.start("Planted", "P1");
            env.run(&["claim", "--instance", &id, &a]).code(0);
            env.run(&["done", "--instance", &id])
        } else {
            env.run(&["claim", "--instance", &r.ids[2], &env.abs("api/auth.rs")])
        };
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"precious\n",
            "{name} as a symlink: its target was written through:\n{c:#?}"
        );
        // The write that would have gone through the link fails instead, naming the file,
        // and the state is unchanged.
        assert_eq!(c.code, 1, "{name}: {c:#?}");
        assert!(
            c.stderr.contains(&*path.to_string_lossy()),
            "{name}: {c:#?}"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, saved).unwrap();
    }
}

#[test]
fn claims_through_a_symlinked_directory_are_keyed_by_the_real_path() {
    let env = TestEnv::new();
    let outside = env.root.path().join("outside");
    std::fs::create_dir_all(outside.join("lib")).unwrap();
    let outside = std::fs::canonicalize(&outside).unwrap();
    symlink(&outside, env.project.join("vendor")).unwrap();
    let a = env.start("Through the link", "P1");
    let r = env.run(&["--json", "claim", "--instance", &a, "vendor/lib/x.rs"]);
    r.code(0);
    let real = outside.join("lib/x.rs").to_string_lossy().into_owned();
    assert_eq!(r.json()["claimed"][0], real.as_str(), "{r:#?}");
    assert!(env.state()["global_claims"].get(&real).is_some());
    // Another spelling of the same file, and the real path, are the same claim.
    let b = env.start("Direct", "P1");
    for spelling in [real.clone(), env.abs("vendor/./lib/../lib/x.rs")] {
        let c = env.run(&["--json", "claim", "--instance", &b, &spelling]);
        c.code(3);
        assert_eq!(c.json()["conflicts"][0]["held_by"], a.as_str(), "{c:#?}");
    }
    // A symlinked file is keyed by its target too.
    std::fs::write(outside.join("lib/target.rs"), b"").unwrap();
    symlink(
        outside.join("lib/target.rs"),
        env.project.join("src/alias.rs"),
    )
    .unwrap();
    let c = env.run(&["--json", "claim", "--instance", &a, "src/alias.rs"]);
    c.code(0);
    assert_eq!(
        c.json()["claimed"][0],
        outside.join("lib/target.rs").to_string_lossy().as_ref()
    );
}

#[test]
fn relative_claims_that_escape_with_dotdot_are_invalid() {
    let r = realistic();
    let env = &r.env;
    let before = env.snapshot();
    std::fs::create_dir_all(env.project.join("src/deep")).unwrap();
    for p in [
        "../x.rs",
        "src/../../x.rs",
        "src/deep/../../../etc/passwd",
        "..",
    ] {
        for json in [false, true] {
            let mut args = vec!["claim", "--instance", r.ids[2].as_str(), p];
            if json {
                args.insert(0, "--json");
            }
            let run = env.run(&args);
            assert_error(p, &run, 2, "path_outside_project", p, json);
        }
    }
    assert!(env.snapshot() == before);
}

/// Review finding: `link/../x.rs` used to be collapsed before the symlink was resolved, so it was
/// keyed next to the link while the file it names sits next to the link's target; two instances
/// could then both be told a single file was safe to edit.
#[test]
fn dot_dot_after_a_symlink_is_resolved_physically() {
    let env = TestEnv::new();
    let other = env.root.path().join("other");
    std::fs::create_dir_all(other.join("sub")).unwrap();
    let other = std::fs::canonicalize(&other).unwrap();
    std::os::unix::fs::symlink(other.join("sub"), env.project.join("link")).unwrap();
    let a = env.start("through the link", "P1");
    let b = env.start("direct", "P1");
    let direct = other.join("x.rs").display().to_string();
    let r = env.run(&["--json", "claim", "--instance", &b, &direct]);
    r.code(0);
    let r = env.run(&["--json", "claim", "--instance", &a, "link/../x.rs"]);
    r.code(3);
    assert_eq!(
        r.json()["conflicts"][0]["file"],
        direct.as_str(),
        "one file, one claim"
    );
    assert_eq!(r.json()["conflicts"][0]["held_by"], b.as_str());
    // A name that does not exist yet still collapses lexically.
    let r = env.run(&["--json", "claim", "--instance", &a, "newdir/../src/y.rs"]);
    r.code(0);
    assert_eq!(r.json()["claimed"][0], env.abs("src/y.rs"));
}
