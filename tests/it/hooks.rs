//! Claude Code integration (issue 5): the plugin files, `integrate claude`, and real hook
//! payloads (fixtures/claude-hooks) replayed through the installed hook command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

const SESSION_A: &str = "3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01";
const SESSION_B: &str = "9b2e4d6f-1a3c-4e5b-8d7f-0c2a4e6b8d02";

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A fixture payload with the sample project path replaced by the test's project.
fn payload(env: &TestEnv, name: &str) -> String {
    let text =
        std::fs::read_to_string(repo_file(&format!("fixtures/claude-hooks/{name}.json"))).unwrap();
    text.replace("/home/user/proj", env.project.to_str().unwrap())
}

/// Feed a fixture to `conductor hook claude`.
fn hook(env: &TestEnv, name: &str) -> Run {
    env.run_stdin(&["hook", "claude"], &payload(env, name))
}

fn hook_env(env: &TestEnv, name: &str, vars: &[(&str, &str)]) -> Run {
    use std::io::Write;
    let mut c = env.cmd();
    c.args(["hook", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload(env, name).as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

fn instance_of(env: &TestEnv, session: &str) -> Option<Value> {
    env.state()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["session_id"] == session)
        .cloned()
}

fn id_of(env: &TestEnv, session: &str) -> String {
    instance_of(env, session).expect("session registered")["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn set_enforce(env: &TestEnv, mode: &str) {
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("config.json"),
        format!("{{\"enforce\": \"{mode}\"}}\n"),
    )
    .unwrap();
}

/// The hook commands `integrate` wrote for an event in `<project>/.claude/settings.json`.
fn installed_commands(env: &TestEnv, event: &str) -> Vec<String> {
    let text = std::fs::read_to_string(env.project.join(".claude/settings.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| {
            g["hooks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["command"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Run an installed hook command the way Claude Code does: through the shell, payload on stdin,
/// with `conductor` found on PATH.
fn run_installed(env: &TestEnv, event: &str, fixture: &str) -> Run {
    use std::io::Write;
    let commands = installed_commands(env, event);
    assert_eq!(
        commands,
        vec!["conductor hook claude".to_string()],
        "{event}"
    );
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(&commands[0])
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.root.path())
        .env("CONDUCTOR_HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(&env.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload(env, fixture).as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

#[test]
fn installed_hooks_block_a_second_session_until_the_first_ends() {
    let env = TestEnv::new();
    // README: "Use it from Claude Code"
    env.run(&["integrate", "claude", "--project", "."]).code(0);
    assert!(env.project.join(".claude/commands/conductor.md").exists());

    let a = run_installed(&env, "SessionStart", "session-start-a");
    a.code(0);
    let id_a = id_of(&env, SESSION_A);
    assert!(
        a.stdout.contains(&id_a),
        "SessionStart tells the agent its instance: {a:?}"
    );
    run_installed(&env, "PreToolUse", "pre-tool-use-edit-a").code(0);
    assert_eq!(
        env.state()["global_claims"][env.abs("src/auth.rs")],
        id_a.as_str(),
        "auto-claimed on first edit"
    );

    run_installed(&env, "SessionStart", "session-start-b").code(0);
    let blocked = run_installed(&env, "PreToolUse", "pre-tool-use-write-b");
    blocked.code(2);
    assert_eq!(
        blocked.stderr.trim().lines().count(),
        1,
        "one-line reason: {blocked:?}"
    );
    assert!(
        blocked.stderr.contains(&id_a) && blocked.stderr.contains("interactive session"),
        "{blocked:?}"
    );
    assert!(blocked.stderr.contains("--force"), "{blocked:?}");

    // Bash is not an edit tool: ignored even if routed to the hook.
    hook(&env, "pre-tool-use-bash-a").code(0);

    run_installed(&env, "SessionEnd", "session-end-a").code(0);
    assert!(instance_of(&env, SESSION_A).is_none());
    run_installed(&env, "PreToolUse", "pre-tool-use-write-b").code(0);
    assert_eq!(
        env.state()["global_claims"][env.abs("src/auth.rs")],
        id_of(&env, SESSION_B).as_str()
    );
}

#[test]
fn multiedit_and_notebookedit_are_checked() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-notebookedit-a").code(0);
    let id_a = id_of(&env, SESSION_A);
    assert_eq!(
        env.state()["global_claims"][env.abs("analysis.ipynb")],
        id_a.as_str()
    );
    hook(&env, "session-start-b").code(0);
    hook(&env, "pre-tool-use-multiedit-b").code(0);
    assert_eq!(
        env.state()["global_claims"][env.abs("src/docs.rs")],
        id_of(&env, SESSION_B).as_str()
    );
}

#[test]
fn enforce_block_foreign_never_claims() {
    let env = TestEnv::new();
    set_enforce(&env, "block-foreign");
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    assert!(env.state()["global_claims"].as_object().unwrap().is_empty());
    // A foreign claim still blocks.
    let id_a = id_of(&env, SESSION_A);
    env.run(&["claim", "--instance", &id_a, "src/auth.rs"])
        .code(0);
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    r.code(2);
    assert!(r.stderr.contains(&id_a));
}

#[test]
fn enforce_require_claim_blocks_unclaimed_files() {
    let env = TestEnv::new();
    set_enforce(&env, "require-claim");
    hook(&env, "session-start-a").code(0);
    let id_a = id_of(&env, SESSION_A);
    let r = hook(&env, "pre-tool-use-edit-a");
    r.code(2);
    assert!(
        r.stderr.contains("require-claim")
            && r.stderr
                .contains(&format!("conductor claim --instance {id_a}")),
        "{r:?}"
    );
    env.run(&["claim", "--instance", &id_a, "src/auth.rs"])
        .code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
}

#[test]
fn enforce_off_never_blocks() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    set_enforce(&env, "off");
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    r.code(0);
    assert!(r.stderr.is_empty(), "{r:?}");
}

#[test]
fn resume_reuses_the_instance() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    let id = id_of(&env, SESSION_A);
    let r = hook(&env, "session-start-a-resume");
    r.code(0);
    assert!(r.stdout.contains(&format!("resumed as {id}")), "{r:?}");
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 1);
}

#[test]
fn session_end_records_abandoned_unless_already_done() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    hook(&env, "session-end-a").code(0);
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    let line: Value = serde_json::from_str(history.lines().next().unwrap()).unwrap();
    assert_eq!(line["outcome"], "abandoned");
    assert_eq!(line["files_modified"][0], env.abs("src/auth.rs"));
    assert!(env.state()["global_claims"].as_object().unwrap().is_empty());

    // The agent called done itself: SessionEnd changes nothing.
    hook(&env, "session-start-b").code(0);
    let id_b = id_of(&env, SESSION_B);
    env.run(&["done", "--instance", &id_b]).code(0);
    hook(&env, "session-end-b").code(0);
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    let outcomes: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].clone())
        .collect();
    assert_eq!(outcomes, vec!["abandoned", "success"]);
}

#[test]
fn internal_error_allows_the_edit_with_a_warning() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    std::fs::write(env.home_file("status.json"), "{ not json").unwrap();
    let r = hook(&env, "pre-tool-use-write-b");
    r.code(0);
    assert!(
        r.stderr.starts_with("warning: conductor:") && r.stderr.contains("allowing"),
        "{r:?}"
    );
    // Garbage on stdin too.
    let r = env.run_stdin(&["hook", "claude"], "not a payload");
    r.code(0);
    assert!(r.stderr.contains("warning"), "{r:?}");
    // A bad config.json as well.
    std::fs::write(env.home_file("status.json"), "").unwrap();
    std::fs::remove_file(env.home_file("status.json")).unwrap();
    set_enforce(&env, "strict");
    let r = hook(&env, "pre-tool-use-write-b");
    r.code(0);
    assert!(r.stderr.contains("warning"), "{r:?}");
}

#[test]
fn task_comes_from_the_project_config_and_id_reaches_claude_env_file() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".conductor")).unwrap();
    std::fs::write(
        env.project.join(".conductor/config.json"),
        r#"{"task": "Ship the login page"}"#,
    )
    .unwrap();
    let env_file = env.root.path().join("claude-env");
    let r = hook_env(
        &env,
        "session-start-a",
        &[
            ("CLAUDE_ENV_FILE", env_file.to_str().unwrap()),
            ("TERM_PROGRAM", "iTerm.app"),
        ],
    );
    r.code(0);
    let inst = instance_of(&env, SESSION_A).unwrap();
    assert_eq!(inst["task"], "Ship the login page");
    assert_eq!(inst["project"], "proj");
    assert_eq!(inst["source"], "itm");
    let id = inst["id"].as_str().unwrap();
    assert!(id.starts_with("itm-"));
    assert_eq!(
        std::fs::read_to_string(env_file).unwrap(),
        format!("export CONDUCTOR_INSTANCE_ID={id}\n")
    );
}

#[test]
fn integrate_round_trip_leaves_existing_settings_byte_identical() {
    let env = TestEnv::new();
    let claude = env.project.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    // Unusual formatting on purpose: tabs, no final newline, someone else's hook.
    let original = "{\n\t\"model\": \"opus\",\n\t\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]}]},\n\t\"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}";
    std::fs::write(claude.join("settings.json"), original).unwrap();

    let r = env.run(&["integrate", "claude"]);
    r.code(0);
    assert!(
        r.stdout.contains("added") && r.stdout.contains("SessionStart"),
        "{r:?}"
    );
    let merged: Value =
        serde_json::from_str(&std::fs::read_to_string(claude.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(merged["model"], "opus");
    assert_eq!(
        merged["hooks"]["PreToolUse"].as_array().unwrap().len(),
        2,
        "theirs kept, ours added"
    );
    assert_eq!(
        merged["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "lint.sh"
    );

    let again = env.run(&["integrate", "claude"]);
    again.code(0);
    assert!(
        again.stdout.starts_with("Nothing to change"),
        "idempotent: {again:?}"
    );

    let r = env.run(&["--json", "integrate", "claude", "--uninstall"]);
    r.code(0);
    assert!(!r.json()["changes"].as_array().unwrap().is_empty());
    assert_eq!(
        std::fs::read_to_string(claude.join("settings.json")).unwrap(),
        original
    );
    assert!(!claude.join("commands/conductor.md").exists());
    let left: Vec<_> = std::fs::read_dir(&claude)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("settings.json")],
        "nothing of ours left"
    );
}

#[test]
fn integrate_into_a_fresh_directory_and_back_leaves_nothing() {
    let env = TestEnv::new();
    env.run(&[
        "integrate",
        "claude",
        "--project",
        env.project.to_str().unwrap(),
    ])
    .code(0);
    let settings = std::fs::read_to_string(env.project.join(".claude/settings.json")).unwrap();
    let v: Value = serde_json::from_str(&settings).unwrap();
    let ours: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("shell/claude/hooks/hooks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        v["hooks"], ours["hooks"],
        "settings carry exactly the plugin's hooks"
    );
    env.run(&["integrate", "claude", "--uninstall"]).code(0);
    assert!(!env.project.join(".claude").exists());
}

#[test]
fn integrate_user_scope_writes_home_claude() {
    let env = TestEnv::new();
    env.run(&["integrate", "claude", "--user"]).code(0);
    assert!(env.root.path().join(".claude/settings.json").exists());
    assert!(
        env.root
            .path()
            .join(".claude/commands/conductor.md")
            .exists()
    );
    env.run(&["integrate", "claude", "--user", "--uninstall"])
        .code(0);
    assert!(!env.root.path().join(".claude").exists());
}

#[test]
fn integrate_never_overwrites_unparseable_settings() {
    let env = TestEnv::new();
    let claude = env.project.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(claude.join("settings.json"), "{ \"model\": ").unwrap();
    let r = env.run(&["integrate", "claude"]);
    r.code(2);
    assert!(r.stderr.contains("not a JSON object"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(claude.join("settings.json")).unwrap(),
        "{ \"model\": "
    );
    assert!(!claude.join("commands").exists());
}

#[test]
fn plugin_files_are_well_formed() {
    let plugin: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("shell/claude/.claude-plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["name"], "conductor");
    let hooks: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("shell/claude/hooks/hooks.json")).unwrap(),
    )
    .unwrap();
    for event in ["SessionStart", "PreToolUse", "SessionEnd"] {
        assert_eq!(
            hooks["hooks"][event][0]["hooks"][0]["command"], "conductor hook claude",
            "{event}"
        );
    }
    assert_eq!(
        hooks["hooks"]["PreToolUse"][0]["matcher"],
        "Edit|Write|MultiEdit|NotebookEdit"
    );
    let md = std::fs::read_to_string(repo_file("shell/claude/commands/conductor.md")).unwrap();
    let front = md
        .strip_prefix("---\n")
        .unwrap()
        .split("\n---\n")
        .next()
        .unwrap();
    assert!(front.lines().any(|l| l == "argument-hint: <start|status|claim|release|done|align|conflicts|cleanup|reset> [args]"));
    assert!(md.contains("conductor --json $ARGUMENTS"));
    for f in std::fs::read_dir(repo_file("fixtures/claude-hooks")).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|e| e == "json") {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            assert!(
                v["session_id"].is_string() && v["hook_event_name"].is_string(),
                "{}",
                p.display()
            );
        }
    }
}

/// Review finding: `/conductor start` inside a hooked session registered a second instance. It now
/// gives the session's own instance (named by the exported CONDUCTOR_INSTANCE_ID) the task.
#[test]
fn slash_start_in_a_hooked_session_retasks_its_instance() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    let id = id_of(&env, SESSION_A);
    let r = env.run_env(
        &[
            "--json",
            "start",
            "Fix the login form",
            "--project",
            "web",
            "--priority",
            "P2",
        ],
        &[("CONDUCTOR_INSTANCE_ID", &id)],
    );
    r.code(0);
    assert_eq!(r.json()["instance_id"], id.as_str(), "same instance");
    let instances = env.state()["instances"].as_array().unwrap().clone();
    assert_eq!(instances.len(), 1, "no second instance");
    assert_eq!(instances[0]["task"], "Fix the login form");
    assert_eq!(instances[0]["priority"], "P2");
    assert_eq!(instances[0]["session_id"], SESSION_A);
    // Outside a hooked session (an id without a session), start registers as before.
    let plain = env.start("separate work", "P1");
    let r = env.run_env(
        &["--json", "start", "more", "--priority", "P1"],
        &[("CONDUCTOR_INSTANCE_ID", &plain)],
    );
    assert_ne!(r.json()["instance_id"], plain.as_str());
}
