//! Claims on directories and globs (issue 25, blocker 1): they protect what they name, in both
//! directions, against real processes racing, through every agent's hook, and the original
//! plugin's jq recipes still read the state. Also the conflict message's next steps and a
//! SIGKILLed `claim --wait` (issue 25, friction and bugs).

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

fn claims_of(env: &TestEnv) -> Value {
    env.state()["global_claims"].clone()
}

fn claim(env: &TestEnv, id: &str, keys: &[&str]) -> Run {
    let mut args = vec!["--json", "claim", "--instance", id];
    args.extend_from_slice(keys);
    env.run(&args)
}

#[test]
fn directory_and_glob_claims_protect_what_they_name_in_both_directions() {
    let env = TestEnv::new();
    std::fs::write(env.project.join("src/main.rs"), "fn main() {}\n").unwrap();
    let a = env.start("refactor src", "P1");
    let b = env.start("other work", "P1");

    let r = env.run(&["claim", "--instance", &a, "src"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Claimed: src/. Safe to edit."), "{r:?}");
    let dir = format!("{}/", env.abs("src"));
    assert_eq!(claims_of(&env), json!({ dir.clone(): a.clone() }));

    // A file inside, existing or not yet.
    for f in ["src/main.rs", "src/new/deep/mod.rs"] {
        let r = claim(&env, &b, &[f]);
        assert_eq!(r.code, 3, "{f}: {r:?}");
        let c = &r.json()["conflicts"][0];
        assert_eq!(
            (c["held_by"].as_str(), c["held_claim"].as_str()),
            (Some(a.as_str()), Some(dir.as_str()))
        );
        assert_schema(conductor::schema::Schema::Output, &r.json());
    }
    // A directory holding it, and a glob reaching into it.
    assert_eq!(claim(&env, &b, &["."]).code, 3);
    assert_eq!(claim(&env, &b, &["**/*.rs"]).code, 3);
    // Beside it: free.
    assert_eq!(claim(&env, &b, &["srcx/a.rs", "README.md"]).code, 0);
    // The other way round: a directory holding someone's file.
    assert_eq!(claim(&env, &a, &["./"]).code, 3);

    // Globs: overlapping ones conflict, disjoint ones do not, now and later.
    let r = claim(&env, &b, &["lib/**/*.rs"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["claimed"], json!([env.abs("lib/**/*.rs")]));
    for overlapping in ["lib/*.rs", "lib/x/y/z.rs", "lib/a/", "lib/**/mod.*"] {
        assert_eq!(claim(&env, &a, &[overlapping]).code, 3, "{overlapping}");
    }
    assert_eq!(claim(&env, &a, &["lib/**/*.ts", "lib/notes.md"]).code, 0);

    // Release by the same spelling; then the file inside is free.
    env.run(&["release", "--instance", &a, "src/"]).code(0);
    assert_eq!(claim(&env, &b, &["src/main.rs"]).code, 0);
    check_home(&env.home);
}

#[test]
fn what_cannot_be_honoured_is_refused_and_leaves_every_file_unchanged() {
    let env = TestEnv::new();
    let a = env.start("t", "P1");
    let before = env.snapshot();
    for (arg, reason) in [
        ("/", "claim_too_wide"),
        ("src/a**", "invalid_glob"),
        ("src/*/../x", "invalid_glob"),
        ("../**/*.rs", "path_outside_project"),
    ] {
        let r = claim(&env, &a, &[arg]);
        assert_eq!(r.code, 2, "{arg}: {r:?}");
        assert_eq!(r.json()["reason"], reason, "{arg}: {r:?}");
        let text = env.run(&["claim", "--instance", &a, arg]);
        assert!(text.error_and_hint(), "{text:?}");
    }
    assert_eq!(env.snapshot(), before);
}

#[test]
fn a_conflict_offers_wait_and_force_with_what_force_does() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("wants it", "P1");
    claim(&env, &a, &["src/"]).code(0);
    let r = env.run(&["claim", "--instance", &b, "src/a.rs"]);
    assert_eq!(r.code, 3);
    assert!(r.stdout.contains("is inside src/, which"), "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("conductor claim --instance {b} --wait=5m")),
        "{r:?}"
    );
    assert!(r.stdout.contains("--force \"WHY\""), "{r:?}");
    assert!(r.stdout.contains("without being asked"), "{r:?}");
    // --json keeps the protocol's exact message.
    let j = claim(&env, &b, &["src/a.rs"]).json();
    assert_eq!(
        j["message"],
        format!("1 conflict detected. Coordinate with {a} or wait for release.")
    );

    // What --force does: the directory is taken whole, and it is logged.
    let r = env.run(&["claim", "--instance", &b, "--force", "pairing", "src/a.rs"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(claims_of(&env), json!({ env.abs("src/a.rs"): b.clone() }));
    assert!(
        env.log()
            .iter()
            .any(|l| l.contains(" | FORCE | ") && l.contains("pairing"))
    );
}

#[test]
fn racing_processes_for_a_directory_and_a_file_inside_exactly_one_wins() {
    for round in 0..6 {
        let env = TestEnv::new();
        let a = env.start("dir", "P1");
        let b = env.start("file", "P1");
        let spawn = |id: &str, key: &str| {
            env.cmd()
                .args(["--json", "claim", "--instance", id, key])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (first, second) = if round % 2 == 0 {
            let x = spawn(&a, "src/");
            (x, spawn(&b, "src/deep/f.rs"))
        } else {
            let y = spawn(&b, "src/deep/f.rs");
            (spawn(&a, "src/"), y)
        };
        let ca = first.wait_with_output().unwrap().status.code();
        let cb = second.wait_with_output().unwrap().status.code();
        let mut codes = [ca, cb];
        codes.sort();
        assert_eq!(codes, [Some(0), Some(3)], "round {round}");
        let claims = claims_of(&env);
        assert_eq!(
            claims.as_object().unwrap().len(),
            1,
            "round {round}: {claims}"
        );
        check_home(&env.home);
    }
}

/// A hook payload of `agent` (a fixture) aimed at `file` in the project.
fn payload(env: &TestEnv, agent: &str, name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("fixtures/hooks/{agent}/{name}.json"));
    std::fs::read_to_string(path)
        .unwrap()
        .replace("/home/user/proj", env.project.to_str().unwrap())
}

fn denied(agent: &str, r: &Run) -> Option<String> {
    let j: Value = serde_json::from_str(r.stdout.trim()).ok()?;
    let (decision, why) = match agent {
        "cursor" => (&j["permission"], &j["agent_message"]),
        "gemini" => (&j["decision"], &j["reason"]),
        _ => (
            &j["hookSpecificOutput"]["permissionDecision"],
            &j["hookSpecificOutput"]["permissionDecisionReason"],
        ),
    };
    (decision == "deny").then(|| why.as_str().unwrap_or("").to_string())
}

#[test]
fn hooks_of_every_agent_refuse_edits_below_a_claimed_directory_or_glob() {
    let env = TestEnv::new();
    let holder = env.start("owns src", "P1");
    claim(&env, &holder, &["src/"]).code(0);
    for (agent, start, edit) in [
        ("claude", "session-start-a", "pre-tool-use-edit-a"),
        ("codex", "session-start", "pre-tool-use-apply-patch"),
        ("cursor", "session-start", "pre-tool-use-write"),
        ("gemini", "session-start", "before-tool-replace"),
    ] {
        env.run_stdin(&["hook", agent], &payload(&env, agent, start))
            .code(0);
        let r = env.run_stdin(&["hook", agent], &payload(&env, agent, edit));
        let why = denied(agent, &r).unwrap_or_else(|| panic!("{agent} not refused: {r:?}"));
        assert!(why.contains(&holder), "{agent}: {why}");
    }
    // A shell write below the directory (Claude Code's Bash tool).
    let mut bash: Value =
        serde_json::from_str(&payload(&env, "claude", "pre-tool-use-bash-a")).unwrap();
    bash["tool_input"]["command"] = json!("echo hi > src/generated.rs");
    let r = env.run_stdin(&["hook", "claude"], &bash.to_string());
    assert!(
        denied("claude", &r).is_some_and(|w| w.contains(&holder)),
        "{r:?}"
    );
    // Nothing was claimed by the refused sessions.
    assert_eq!(claims_of(&env).as_object().unwrap().len(), 1);

    // A glob: what it matches is refused, what it does not is not.
    env.run(&["release", "--instance", &holder, "src/"]).code(0);
    claim(&env, &holder, &["src/**/*.rs"]).code(0);
    let r = env.run_stdin(
        &["hook", "gemini"],
        &payload(&env, "gemini", "before-tool-replace"),
    );
    assert!(denied("gemini", &r).is_some(), "{r:?}");
    bash["tool_input"]["command"] = json!("echo hi > src/notes.md");
    let r = env.run_stdin(&["hook", "claude"], &bash.to_string());
    assert!(denied("claude", &r).is_none(), "{r:?}");

    // The other direction: a shell command removing a directory that holds a claimed file.
    env.run(&["release", "--instance", &holder, "--all"])
        .code(0);
    claim(&env, &holder, &["src/auth.rs"]).code(0);
    bash["tool_input"]["command"] = json!("rm -rf src");
    let r = env.run_stdin(&["hook", "claude"], &bash.to_string());
    assert!(
        denied("claude", &r).is_some_and(|w| w.contains(&holder)),
        "{r:?}"
    );
}

#[test]
fn a_sigkilled_waiter_leaves_no_pending_conflict_behind() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P1");
    claim(&env, &a, &["src/"]).code(0);
    let mut waiter = env
        .cmd()
        .args(["claim", "--instance", &b, "--wait", "src/a.rs"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let waiting = wait_until(20.0, || {
        env.instance(&b)
            .is_some_and(|i| i["waiting_for"].as_array().is_some_and(|w| !w.is_empty()))
    });
    assert!(waiting, "the waiter queued");
    let status = env.run(&["--json", "status"]).json();
    assert_eq!(status["conflicts"].as_array().unwrap().len(), 1, "{status}");

    waiter.kill().unwrap(); // SIGKILL: no chance to leave the queue
    waiter.wait().unwrap();
    let status = env.run(&["--json", "status"]).json();
    assert_eq!(status["conflicts"], json!([]), "{status}");
    let conflicts = env.run(&["--json", "conflicts"]).json();
    assert_eq!(conflicts["unresolved"], json!([]), "{conflicts}");
    // The next transaction records it, and the released directory goes to nobody.
    env.run(&["release", "--instance", &a, "src/"]).code(0);
    let inst = env.instance(&b).unwrap();
    assert_eq!(
        inst["pending_conflicts"].as_array().map_or(0, Vec::len),
        0,
        "{inst}"
    );
    assert_eq!(
        inst["waiting_for"].as_array().map_or(0, Vec::len),
        0,
        "{inst}"
    );
    assert_eq!(claims_of(&env), json!({}));
}

#[test]
fn a_waiter_for_a_file_gets_it_when_the_directory_is_released() {
    let env = TestEnv::new();
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P1");
    claim(&env, &a, &["src/"]).code(0);
    let waiter = env
        .cmd()
        .args([
            "--json",
            "claim",
            "--instance",
            &b,
            "--wait=20s",
            "src/a.rs",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(20.0, || env.instance(&b).is_some_and(|i| {
        i["waiting_for"].as_array().is_some_and(|w| !w.is_empty())
    })));
    env.run(&["release", "--instance", &a, "src/"]).code(0);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(claims_of(&env), json!({ env.abs("src/a.rs"): b.clone() }));
}

/// The plugin's recipes (tests/it/foreign.rs) with directory and glob keys: its jq still parses
/// the state, its own conflict check sees the keys as written, it releases them by the exact key,
/// and a directory it claims with its recipe protects the files below it.
#[test]
fn the_plugins_jq_recipes_read_directory_and_glob_keys() {
    let env = TestEnv::new();
    let script = env.root.path().join("plugin.sh");
    std::fs::write(&script, crate::foreign::PLUGIN).unwrap();
    let plugin = |code: i32, args: &[&str]| {
        let r = env.run_cmd(
            Command::new("bash")
                .arg(&script)
                .args(args)
                .env("CONDUCTOR_WATCH_EDITS", "0")
                .env("CONDUCTOR_HOME", &env.home),
        );
        assert_eq!(r.code, code, "plugin {args:?}: {r:#?}");
        r
    };
    let mine = env.start("conductor work", "P1");
    claim(&env, &mine, &["src/", "lib/**/*.rs"]).code(0);
    let dir = format!("{}/", env.abs("src"));
    let glob = env.abs("lib/**/*.rs");

    // The plugin's jq parses the file and finds both keys as plain keys.
    let jq = Command::new("jq")
        .args(["-r", ".global_claims | keys[]"])
        .arg(env.home_file("status.json"))
        .output()
        .expect("jq is needed by the plugin recipes: apt-get install jq");
    assert!(jq.status.success());
    let keys = String::from_utf8(jq.stdout).unwrap();
    assert_eq!(
        keys.lines().collect::<Vec<_>>(),
        [glob.as_str(), dir.as_str()]
    );
    assert_schema(conductor::schema::Schema::Status, &env.state());

    let wd = env.project.to_str().unwrap();
    plugin(0, &["start", "web-0a0b0c", "web", "p", "t", "P1", wd]);
    let r = plugin(3, &["claim", "web-0a0b0c", &dir]);
    assert!(r.stdout.contains(&mine), "{r:?}");
    let r = plugin(3, &["claim", "web-0a0b0c", &glob]);
    assert!(r.stdout.contains(&mine), "{r:?}");

    // Conductor's next transaction neither rewrites nor drops them.
    let other = env.start("second", "P1");
    assert_eq!(claim(&env, &other, &["src/x.rs"]).code, 3);
    assert_eq!(
        claims_of(&env),
        json!({ dir.clone(): mine.clone(), glob.clone(): mine.clone() })
    );
    assert!(
        !env.log().iter().any(|l| l.contains(" | REPAIR | ")),
        "{:?}",
        env.log()
    );

    // The plugin releases by the exact key; conductor agrees.
    plugin(0, &["release", mine.as_str(), &dir]);
    assert_eq!(claim(&env, &other, &["src/x.rs"]).code, 0);

    // A relative directory key the plugin writes is a directory claim for conductor.
    plugin(0, &["claim", "web-0a0b0c", "docs/"]);
    let r = claim(&env, &other, &["docs/guide.md"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert_eq!(r.json()["conflicts"][0]["held_by"], "web-0a0b0c");
    assert_eq!(
        claims_of(&env)[format!("{}/", env.abs("docs"))],
        "web-0a0b0c"
    );
    std::thread::sleep(Duration::from_millis(0));
}
