//! Issue 37, "everyday use, second pass": what a developer with two agents types, and what
//! conductor must answer: `claim --wait 30s` with a space, a `--force` whose reason was
//! forgotten, conflicts and releases that say exactly who holds what, one-line usage errors.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::*;

/// The stderr of a refused command: one `error:` line and one `hint:` line.
#[track_caller]
fn one_error_one_hint(r: &Run) -> (String, String) {
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one error line and one hint: {r:#?}");
    assert!(lines[0].starts_with("error: "), "{r:#?}");
    assert!(lines[1].starts_with("hint: "), "{r:#?}");
    (lines[0].to_string(), lines[1].to_string())
}

/// The commands quoted in backticks in a `Next:` line.
fn commands_in(next: &str) -> Vec<String> {
    next.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Run a command line as a person pastes it, in a shell that finds this `conductor`.
fn paste(env: &TestEnv, line: &str) -> Run {
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut sh = std::process::Command::new("sh");
    sh.env_clear()
        .env("PATH", path)
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(&env.project)
        .stdin(Stdio::null())
        .args(["-c", line]);
    env.run_cmd(&mut sh)
}

#[test]
fn claim_wait_with_a_space_takes_the_duration_and_says_it_timed_out() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P2");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    // A free file: claimed at once, and `2s` is not a file.
    let r = env.run(&["claim", "--instance", &b, "--wait", "2s", "src/b.rs"]);
    r.code(0);
    let claims = env.state()["global_claims"].clone();
    assert!(claims.get(env.abs("src/b.rs")).is_some(), "{claims}");
    assert!(
        claims.get(env.abs("2s")).is_none(),
        "`2s` claimed as a file: {claims}"
    );
    // A held file: waits, then says it timed out, and how long it waited.
    let r = env.run(&["claim", "--instance", &b, "--wait", "1s", "src/a.rs"]);
    r.code(3);
    assert!(
        r.stdout
            .contains("TIMED OUT after 1s: src/a.rs is still claimed by"),
        "{r:#?}"
    );
    assert!(
        !r.stdout.contains("CONFLICT"),
        "not the conflict again: {r:#?}"
    );
    let next = r.stdout.lines().find(|l| l.starts_with("Next:")).unwrap();
    assert!(
        next.contains(&format!("--instance {b} --wait=5s")),
        "{next}"
    );
    let claims = env.state()["global_claims"].clone();
    assert!(claims.get(env.abs("1s")).is_none(), "{claims}");
    let r = env.run(&[
        "--json",
        "claim",
        "--instance",
        &b,
        "--wait",
        "1s",
        "src/a.rs",
    ]);
    r.code(3);
    assert_eq!(r.json()["waited"], "timed_out");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("Timed out after 1s."),
        "{r:#?}"
    );
}

#[test]
fn a_wait_without_limit_says_so_and_help_names_forever() {
    let env = TestEnv::new();
    let help = env.run(&["claim", "--help"]);
    help.code(0);
    assert!(help.stdout.contains("--wait=forever"), "{}", help.stdout);
    assert!(help.stdout.contains("no time limit"), "{}", help.stdout);
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P2");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    let mut child = env
        .cmd()
        .args(["claim", "--instance", &b, "--wait", "src/a.rs"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("Waiting for src/a.rs"), "{line}");
    assert!(line.contains("with no time limit"), "{line}");
    // Stopped by SIGTERM: it says it stopped, not that it timed out.
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("STOPPED waiting: src/a.rs"), "{stdout}");
}

#[test]
fn a_force_whose_reason_is_a_path_is_refused() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("taker", "P2");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    let before = env.state()["global_claims"].clone();
    // The reason forgotten, no file after the glob.
    let r = env.run(&["claim", "--instance", &b, "--force", "src/**/*.rs"]);
    r.code(2);
    let (error, hint) = one_error_one_hint(&r);
    assert!(error.contains("looks like a path"), "{error}");
    assert!(
        hint.contains("conductor claim --force \"WHY\" 'src/**/*.rs'"),
        "{hint}"
    );
    // The reason forgotten, the first file taken for it.
    let r = env.run(&["claim", "--instance", &b, "--force", "src/a.rs", "src/b.rs"]);
    r.code(2);
    let (_, hint) = one_error_one_hint(&r);
    assert!(hint.contains("--force \"WHY\" src/a.rs src/b.rs"), "{hint}");
    let r = env.run(&[
        "--json",
        "claim",
        "--instance",
        &b,
        "--force",
        "src/",
        "x.rs",
    ]);
    r.code(2);
    assert_eq!(r.json()["reason"], "invalid_input");
    assert_eq!(env.state()["global_claims"], before, "nothing claimed");
    // A sentence is a reason.
    env.run(&[
        "claim",
        "--instance",
        &b,
        "--force",
        "pairing with a",
        "src/a.rs",
    ])
    .code(0);
}

#[test]
fn a_conflict_names_the_claim_it_overlaps_and_its_next_step_can_be_pasted() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join("api")).unwrap();
    let a = env.start("api owner", "P1");
    let b = env.start("refactor", "P2");
    env.run(&["claim", "--instance", &a, "api/"]).code(0);
    let r = env.run(&["claim", "--instance", &b, "**/*.rs", "api/x.rs"]);
    r.code(3);
    assert!(
        r.stdout.contains(&format!(
            "CONFLICT: **/*.rs overlaps api/, which {a} (api owner) holds."
        )),
        "{r:#?}"
    );
    assert!(
        r.stdout
            .contains(&format!("CONFLICT: api/x.rs is inside api/, which {a}")),
        "{r:#?}"
    );
    assert!(!r.stdout.contains("**/*.rs is claimed by"), "{r:#?}");
    let next = r.stdout.lines().find(|l| l.starts_with("Next:")).unwrap();
    let cmds = commands_in(next);
    assert_eq!(cmds.len(), 2, "{next}");
    assert!(
        cmds.iter().all(|c| c.contains(&format!("--instance {b} "))),
        "{next}"
    );
    // The --force step, pasted as it is (with a real reason): it takes the files over.
    let force = cmds[1].replace("\"WHY\"", "\"api owner agreed\"");
    let r = paste(&env, &force);
    r.code(0);
    let claims = env.state()["global_claims"].clone();
    assert_eq!(claims[env.abs("**/*.rs")], b.as_str(), "{claims}");
    assert_eq!(claims[env.abs("api/x.rs")], b.as_str(), "{claims}");
    // With CONDUCTOR_INSTANCE_ID set, the next command finds the instance the same way.
    let c = env.start("third", "P3");
    let r = env.run_env(&["claim", "api/x.rs"], &[("CONDUCTOR_INSTANCE_ID", &c)]);
    r.code(3);
    let next = r.stdout.lines().find(|l| l.starts_with("Next:")).unwrap();
    assert!(!next.contains("--instance"), "{next}");
}

#[test]
fn releasing_a_file_held_through_a_directory_names_the_directory() {
    let env = TestEnv::new();
    let a = env.start("owner", "P1");
    let b = env.start("other", "P2");
    env.run(&["claim", "--instance", &a, "src/"]).code(0);
    let r = env.run(&["release", "--instance", &a, "src/a.rs"]);
    r.code(2);
    let (error, hint) = one_error_one_hint(&r);
    assert!(
        error.contains(&format!(
            "{a} holds {} through its claim {}",
            env.abs("src/a.rs"),
            env.abs("src/")
        )),
        "{error}"
    );
    assert!(!error.contains("nobody"), "{error}");
    assert!(
        hint.contains(&format!(
            "conductor release --instance {a} {}",
            env.abs("src/")
        )),
        "{hint}"
    );
    assert!(hint.contains("narrow"), "{hint}");
    let r = env.run(&["release", "--instance", &b, "src/a.rs"]);
    r.code(2);
    let (error, _) = one_error_one_hint(&r);
    assert!(error.contains(&format!("{a} holds it through")), "{error}");
    let r = env.run(&["--json", "release", "--instance", &a, "src/a.rs"]);
    assert_eq!(r.json()["reason"], "not_held");
}

#[test]
fn usage_errors_are_one_line_and_one_hint() {
    let env = TestEnv::new();
    for args in [
        &["start"][..],
        &["frobnicate"],
        &["status", "--bogus"],
        &["claim", "--wait=soon", "src/a.rs"],
        &["claim"],
    ] {
        let r = env.run(args);
        r.code(2);
        let (error, hint) = one_error_one_hint(&r);
        assert!(!error.ends_with(':'), "{error}");
        assert!(hint.len() > "hint: ".len(), "{hint}");
    }
    let r = env.run(&["start"]);
    assert!(r.stderr.contains("<TASK>"), "{r:#?}");
    assert!(r.stderr.contains("conductor start --help"), "{r:#?}");
}

#[test]
fn waiting_for_an_instance_that_never_existed_is_an_error() {
    let env = TestEnv::new();
    let r = env.run(&["wait", "--done", "web-abcdef"]);
    r.code(2);
    let (error, hint) = one_error_one_hint(&r);
    assert!(error.contains("web-abcdef"), "{error}");
    assert!(hint.contains("conductor history"), "{hint}");
    // One that finished is not: the wait is over at once.
    let a = env.start("short", "P2");
    env.run(&["done", "--instance", &a]).code(0);
    env.run(&["wait", "--done", &a]).code(0);
}

/// Run the binary in a pseudo-terminal (stdout is a terminal), as a person would.
fn on_a_terminal(env: &TestEnv, args: &[&str]) -> Run {
    let c = env.cmd();
    let mut py = std::process::Command::new("python3");
    py.env_clear()
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))))
        .current_dir(&env.project)
        .stdin(Stdio::null())
        .args([
            "-c",
            "import os, pty, sys; st = pty.spawn(sys.argv[1:]); sys.exit(os.waitstatus_to_exitcode(st))",
        ])
        .arg(bin())
        .args(args);
    env.run_cmd(&mut py)
}

#[test]
fn events_on_a_terminal_shows_the_newest_readably() {
    let env = TestEnv::new();
    let a = env.start("first", "P2");
    for f in ["src/a.rs", "src/b.rs", "src/c.rs"] {
        env.run(&["claim", "--instance", &a, f]).code(0);
    }
    let r = on_a_terminal(&env, &["events", "--limit", "2"]);
    r.code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{r:#?}");
    assert!(
        lines[0].starts_with("#3 ") && lines[0].contains("src/b.rs"),
        "{r:#?}"
    );
    assert!(
        lines[1].starts_with("#4 ") && lines[1].contains("src/c.rs"),
        "{r:#?}"
    );
    let r = on_a_terminal(&env, &["events", "--limit", "1", "--oldest"]);
    assert!(
        r.stdout.starts_with("#1 ") && r.stdout.contains("instance.started"),
        "{r:#?}"
    );
    // For scripts (stdout not a terminal) the JSON page is unchanged: from the oldest.
    let page = env.run(&["events", "--limit", "1"]).json();
    assert_eq!(page["items"][0]["seq"], 1);
}

#[test]
fn read_only_commands_never_create_the_default_home() {
    let env = TestEnv::new();
    let default_home = env.root.path().join(".conductor");
    for args in [
        &["status"][..],
        &["doctor"],
        &["history"],
        &["top", "--once"],
        &["events"],
        &["conflicts"],
    ] {
        let mut c = env.cmd();
        c.env_remove("CONDUCTOR_HOME").args(args);
        let r = env.run_cmd(&mut c);
        r.code(0);
        assert!(!default_home.exists(), "{args:?} created {default_home:?}");
        if args[0] == "doctor" {
            assert!(r.stdout.contains("does not exist yet"), "{r:#?}");
        }
        if args[0] == "top" {
            assert!(r.stdout.contains("(not created yet)"), "{r:#?}");
        }
    }
    // A command that changes something creates it.
    let mut c = env.cmd();
    c.env_remove("CONDUCTOR_HOME")
        .args(["start", "t", "--project", "p"]);
    env.run_cmd(&mut c).code(0);
    assert!(default_home.is_dir());
}

#[test]
fn doctor_finds_a_home_that_cannot_be_written() {
    let env = TestEnv::new();
    env.start("something", "P2");
    let r = env.run(&["doctor"]);
    assert!(r.stdout.contains("is writable and lockable"), "{r:#?}");
    // The home on a read-only file system (a read-only bind mount in a user namespace).
    let script = format!(
        "mount --bind '{h}' '{h}' && mount -o remount,bind,ro '{h}' && exec '{b}' doctor",
        h = env.home.display(),
        b = bin().display()
    );
    let mut c = std::process::Command::new("unshare");
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(&env.project)
        .args(["-Urm", "sh", "-c", &script]);
    let r = env.run_cmd(&mut c);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("cannot be written or locked"), "{r:#?}");
    assert!(!r.stdout.contains("Everything is in order"), "{r:#?}");
}

#[test]
fn bad_ids_and_empty_paths_are_explained() {
    let env = TestEnv::new();
    let a = env.start("x", "P2");
    let r = env.run(&["claim", "--instance", "nonsense", "src/a.rs"]);
    r.code(2);
    let (error, hint) = one_error_one_hint(&r);
    assert!(!error.contains("^[a-z]"), "a raw regex: {error}");
    assert!(error.contains("is not an instance id"), "{error}");
    assert!(hint.contains("conductor status"), "{hint}");
    let r = env.run(&["claim", "--instance", &a, ""]);
    r.code(2);
    let (error, hint) = one_error_one_hint(&r);
    assert!(error.contains("a path is empty"), "{error}");
    assert!(!error.contains("shorter than"), "{error}");
    assert!(hint.contains("src/"), "{hint}");
}

#[test]
fn a_claim_of_a_missing_file_with_a_close_neighbour_adds_a_note() {
    let env = TestEnv::new();
    std::fs::write(env.project.join("src/main.rs"), "fn main() {}\n").unwrap();
    let a = env.start("typo", "P2");
    let r = env.run(&["claim", "--instance", &a, "src/mian.rs", "src/brand_new.rs"]);
    r.code(0);
    assert!(
        r.stderr
            .contains("note: src/mian.rs does not exist; did you mean src/main.rs?"),
        "{r:#?}"
    );
    assert!(
        !r.stderr.contains("brand_new"),
        "no note without a close name: {r:#?}"
    );
    // Still claimed: a file may be claimed before it is created.
    assert_eq!(
        env.state()["global_claims"][env.abs("src/mian.rs")],
        a.as_str()
    );
    let r = env.run(&["claim", "--instance", &a, "src/main.rs"]);
    assert!(!r.stderr.contains("note:"), "{r:#?}");
}

#[test]
fn queue_add_takes_the_prompt_as_an_argument() {
    let env = TestEnv::new();
    let r = env.run(&["--json", "queue", "add", "Write a haiku"]);
    r.code(0);
    let r = env.run(&[
        "--json",
        "queue",
        "add",
        "--priority",
        "P1",
        "--",
        "-v",
        "flag-like",
    ]);
    r.code(0);
    let show = env
        .run(&["--json", "queue", "show", "default/job-1"])
        .json();
    assert_eq!(show["job"]["prompt"], "Write a haiku");
    let show = env
        .run(&["--json", "queue", "show", "default/job-2"])
        .json();
    assert_eq!(show["job"]["prompt"], "-v flag-like");
}

/// A git repository (a `.git` directory is all conductor looks for) in the project, and a
/// directory holding a `conductor` that PATH finds.
fn repo_with_conductor_on_path(env: &TestEnv) -> (std::path::PathBuf, String) {
    std::fs::create_dir_all(env.project.join(".git")).unwrap();
    let bin_dir = env.root.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("conductor")).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (env.project.join("src"), path)
}

#[test]
fn integrate_from_a_subdirectory_installs_at_the_repository_root_with_a_portable_command() {
    let env = TestEnv::new();
    let (src, path) = repo_with_conductor_on_path(&env);
    let mut c = env.cmd();
    c.current_dir(&src)
        .env("PATH", &path)
        .args(["integrate", "claude"]);
    let r = env.run_cmd(&mut c);
    r.code(0);
    assert!(
        r.stdout.contains(&format!(
            "Installed at the repository root {}",
            env.project.display()
        )),
        "{r:#?}"
    );
    assert!(!src.join(".claude").exists(), "not in src/");
    let settings = std::fs::read_to_string(env.project.join(".claude/settings.json")).unwrap();
    assert!(settings.contains("\"conductor hook claude\""), "{settings}");
    assert!(
        !settings.contains(&bin().display().to_string()),
        "{settings}"
    );
    // doctor, from the same subdirectory, says which form the hooks use.
    let mut c = env.cmd();
    c.current_dir(&src).env("PATH", &path).args(["doctor"]);
    let r = env.run_cmd(&mut c);
    assert!(
        r.stdout.contains("hooks run `conductor` from the PATH"),
        "{r:#?}"
    );
    // A user-level install names this binary by its absolute path.
    let mut c = env.cmd();
    c.current_dir(&src)
        .env("PATH", &path)
        .args(["integrate", "claude", "--user"]);
    env.run_cmd(&mut c).code(0);
    let user = std::fs::read_to_string(env.root.path().join(".claude/settings.json")).unwrap();
    assert!(!user.contains("\"conductor hook claude\""), "{user}");
    assert!(user.contains("/conductor hook claude"), "{user}");
}

#[test]
fn a_session_started_in_a_subdirectory_belongs_to_the_repository() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".git")).unwrap();
    let r = env.run_in(&env.project.join("src"), &["--json", "start", "work"]);
    r.code(0);
    let id = r.json()["instance_id"].as_str().unwrap().to_string();
    assert_eq!(env.instance(&id).unwrap()["project"], "proj");
}

#[test]
fn a_handoff_may_name_its_recipient_with_next() {
    let env = TestEnv::new();
    let ok = env.run_stdin(
        &["artifact", "validate", "-"],
        "[handoff]\nnext: @reviewer\ncontext: the parser is done\n[/handoff]\n",
    );
    ok.code(0);
    let ok = env.run_stdin(
        &["artifact", "validate", "-"],
        "[handoff]\nto: @reviewer\n[/handoff]\n",
    );
    ok.code(0);
    let bad = env.run_stdin(
        &["artifact", "validate", "-"],
        "[handoff]\ncontext: x\n[/handoff]\n",
    );
    bad.code(2);
    assert!(bad.stdout.contains("`to:` field (or `next:`)"), "{bad:#?}");
}

/// Issue 37: the help's worker examples are pasted as they are shown. At 80 columns no example
/// line is wrapped inside its quoted `--agent-cmd` template: a line that opens a quote and does
/// not close it ends with a `\` continuation, which `sh -c` joins.
#[test]
fn help_examples_are_never_wrapped_inside_an_argument() {
    let env = TestEnv::new();
    for args in [
        &["workflow", "--help"][..],
        &["workflow", "run", "--help"],
        &["workflow", "start", "--help"],
    ] {
        let r = env.run_env(args, &[("COLUMNS", "80")]);
        r.code(0);
        let mut open = false;
        let mut examples = 0;
        for line in r.stdout.lines() {
            if line.contains("--agent-cmd '") {
                examples += 1;
            }
            // Example lines (and the lines continuing one) only: prose has apostrophes.
            if open || line.trim_start().starts_with("conductor ") {
                if line.matches('\'').count() % 2 == 1 {
                    open = !open;
                }
            }
            assert!(
                !open || line.ends_with(" \\"),
                "{args:?}: a quoted argument is broken across lines at `{line}`:\n{}",
                r.stdout
            );
        }
        assert!(
            examples > 0,
            "{args:?} shows a worker example:\n{}",
            r.stdout
        );
        assert!(!open, "{args:?}: a quote is never closed:\n{}", r.stdout);
    }
}

/// Issue 37: every view shows a claimed path relative to the claimant's project (or repository)
/// and never shortened into something else: a directory keeps its `/`, a glob its whole
/// pattern, and `top` shows no absolute path.
#[test]
fn status_and_top_show_paths_as_the_project_names_them() {
    let env = TestEnv::new();
    let id = env.start("paths", "P2");
    env.run(&[
        "claim",
        "--instance",
        &id,
        "src/api/",
        "tests/**/*.rs",
        "src/main.rs",
    ])
    .code(0);
    let status = env.run(&["status"]);
    status.code(0);
    let top = env.run(&["top", "--once"]);
    top.code(0);
    let abs = env.project.display().to_string();
    for (view, text) in [("status", &status.stdout), ("top", &top.stdout)] {
        for shown in ["src/api/", "tests/**/*.rs", "src/main.rs"] {
            assert!(
                text.lines()
                    .any(|l| l.trim_end_matches([' ', '|']).ends_with(shown)),
                "{view} shows `{shown}` as claimed:\n{text}"
            );
        }
        assert!(
            !text
                .lines()
                .any(|l| l.trim_end_matches([' ', '|']).ends_with("src/api")),
            "{view} drops a directory's `/`:\n{text}"
        );
        // (The instance's own directory is named once, absolute: `in /…/proj`.)
        assert!(
            !text
                .lines()
                .any(|l| l.contains(&abs) && !l.trim_start().starts_with("in ")),
            "{view} shows an absolute path:\n{text}"
        );
    }
}
