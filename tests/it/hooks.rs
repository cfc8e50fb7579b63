//! Agent hooks (issues 5 and 13): `integrate AGENT` for Claude Code, Cursor, Codex CLI and Gemini
//! CLI, and each agent's documented hook payloads (fixtures/hooks/AGENT/) replayed through the
//! real binary, checking the decision, the output shape the agent reads, and the state.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

const SESSION_A: &str = "3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01";
const SESSION_B: &str = "9b2e4d6f-1a3c-4e5b-8d7f-0c2a4e6b8d02";
const CODEX_SESSION: &str = "019a7c2e-5b1d-7f30-9e44-2c6d8a1b3f05";
const CURSOR_SESSION: &str = "c0f3e8a1-6b2d-4e7f-9a15-3d8c2b7e4f60";
const GEMINI_SESSION: &str = "7e2b9d14-3c8a-4f61-b5e0-9a4d2c6f8b13";
/// The session of the Qwen Code payloads built below (its fixtures name another).
const QWEN_SESSION: &str = "5d1c8e2a-6b4f-4a90-8e3d-2f7c9b1a0e64";
/// The session of the Copilot CLI payloads built below.
const COPILOT_SESSION: &str = "9a3e7c10-2d4b-4f8e-b6a1-5c0d8e2f4a97";

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A fixture payload with the sample project path replaced by the test's project.
fn fixture(env: &TestEnv, agent: &str, name: &str) -> String {
    let path = repo_file(&format!("fixtures/hooks/{agent}/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.replace("/home/user/proj", env.project.to_str().unwrap())
}

/// Feed a fixture to `conductor hook AGENT`.
fn hook_as(env: &TestEnv, agent: &str, name: &str) -> Run {
    env.run_stdin(&["hook", agent], &fixture(env, agent, name))
}

/// Feed a Claude Code fixture to `conductor hook claude`.
fn hook(env: &TestEnv, name: &str) -> Run {
    hook_as(env, "claude", name)
}

fn hook_env(env: &TestEnv, agent: &str, name: &str, args: &[&str], vars: &[(&str, &str)]) -> Run {
    use std::io::Write;
    let mut c = env.cmd();
    c.args(["hook", agent])
        .args(args)
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
        .write_all(fixture(env, agent, name).as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// The hook's stdout as JSON (Claude Code, Codex and Gemini read exactly one object).
#[track_caller]
fn out(r: &Run) -> Value {
    r.code(0);
    r.json()
}

/// Claude Code / Codex CLI: the permission decision of a PreToolUse answer ("" when none).
fn permission(r: &Run) -> String {
    if r.stdout.trim().is_empty() {
        return String::new();
    }
    out(r)["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn reason(r: &Run) -> String {
    out(r)["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string()
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

fn holder(env: &TestEnv, rel: &str) -> Value {
    env.state()["global_claims"][env.abs(rel)].clone()
}

fn set_enforce(env: &TestEnv, mode: &str) {
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("config.json"),
        format!("{{\"enforce\": \"{mode}\"}}\n"),
    )
    .unwrap();
}

/// The hook commands `integrate claude` wrote for an event in `<project>/.claude/settings.json`.
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
/// with a PATH that does not contain conductor (the command names the binary itself).
fn run_installed(env: &TestEnv, event: &str, name: &str) -> Run {
    use std::io::Write;
    let commands = installed_commands(env, event);
    assert_eq!(commands.len(), 1, "{event}: {commands:?}");
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(&commands[0])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
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
        .write_all(fixture(env, "claude", name).as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

fn bin_canonical() -> String {
    std::fs::canonicalize(bin())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------- Claude Code

#[test]
fn installed_hooks_deny_a_second_session_until_the_first_ends_without_conductor_on_path() {
    let env = TestEnv::new();
    // README: "Claude Code"
    env.run(&["integrate", "claude", "--project", "."]).code(0);
    assert!(env.project.join(".claude/commands/conductor.md").exists());
    assert_eq!(
        installed_commands(&env, "PreToolUse"),
        vec![format!("{} hook claude", bin_canonical())],
        "issue 13 (7): the hooks name the binary by its absolute path"
    );

    let a = run_installed(&env, "SessionStart", "session-start-a");
    let id_a = id_of(&env, SESSION_A);
    let ctx = out(&a)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ctx.contains(&format!("registered as {id_a}")), "{ctx}");
    assert_eq!(instance_of(&env, SESSION_A).unwrap()["agent"], "claude");

    let edit = run_installed(&env, "PreToolUse", "pre-tool-use-edit-a");
    assert_eq!(
        permission(&edit),
        "",
        "an auto-claim is no permission decision: {edit:?}"
    );
    // The model is told about the auto-claim, with the grant's fencing token (issue 34 §3).
    let tokens = instance_of(&env, SESSION_A).unwrap()["claim_tokens"].clone();
    let token = tokens
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.ends_with("/src/auth.rs"))
        .map(|(_, t)| t.as_u64().unwrap())
        .unwrap_or_else(|| panic!("a token for src/auth.rs: {tokens}"));
    assert!(
        out(&edit)["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains(&format!(
                "src/auth.rs (fencing token {token}) now claimed for this session"
            )),
        "issue 13 (2): the model is told about the auto-claim: {edit:?}"
    );
    assert_eq!(holder(&env, "src/auth.rs"), id_a.as_str());

    let b = run_installed(&env, "SessionStart", "session-start-b");
    let ctx_b = out(&b)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ctx_b.contains(&format!(
            "{id_a} (Claude Code session, task \"interactive session\") holds src/auth.rs"
        )),
        "issue 13 (3): SessionStart says who holds what: {ctx_b}"
    );

    let denied = run_installed(&env, "PreToolUse", "pre-tool-use-write-b");
    assert_eq!(permission(&denied), "deny", "{denied:?}");
    let why = reason(&denied);
    assert!(
        why.contains(&id_a)
            && why.contains("interactive session")
            && why.contains("last seen 0 min ago")
            && why.contains("--force"),
        "{why}"
    );
    assert!(!why.contains('\n'));
    assert!(
        out(&denied)["systemMessage"]
            .as_str()
            .unwrap()
            .contains(&id_a),
        "the person sees it too"
    );

    // Bash is not an edit tool: no answer at all.
    let bash = hook(&env, "pre-tool-use-bash-a");
    assert_eq!((bash.code, bash.stdout.as_str()), (0, ""));

    run_installed(&env, "SessionEnd", "session-end-a").code(0);
    assert!(instance_of(&env, SESSION_A).is_none());
    assert_eq!(
        permission(&run_installed(&env, "PreToolUse", "pre-tool-use-write-b")),
        ""
    );
    assert_eq!(holder(&env, "src/auth.rs"), id_of(&env, SESSION_B).as_str());
}

#[test]
fn multiedit_and_notebookedit_are_checked() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-notebookedit-a").code(0);
    let id_a = id_of(&env, SESSION_A);
    assert_eq!(holder(&env, "analysis.ipynb"), id_a.as_str());
    hook(&env, "session-start-b").code(0);
    hook(&env, "pre-tool-use-multiedit-b").code(0);
    assert_eq!(holder(&env, "src/docs.rs"), id_of(&env, SESSION_B).as_str());
}

#[test]
fn enforce_block_foreign_never_claims() {
    let env = TestEnv::new();
    set_enforce(&env, "block-foreign");
    hook(&env, "session-start-a").code(0);
    assert_eq!(permission(&hook(&env, "pre-tool-use-edit-a")), "");
    assert!(env.state()["global_claims"].as_object().unwrap().is_empty());
    // A foreign claim still refuses.
    let id_a = id_of(&env, SESSION_A);
    env.run(&["claim", "--instance", &id_a, "src/auth.rs"])
        .code(0);
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    assert_eq!(permission(&r), "deny");
    assert!(reason(&r).contains(&id_a));
}

#[test]
fn enforce_require_claim_asks_the_person_until_the_file_is_claimed() {
    let env = TestEnv::new();
    set_enforce(&env, "require-claim");
    hook(&env, "session-start-a").code(0);
    let id_a = id_of(&env, SESSION_A);
    let r = hook(&env, "pre-tool-use-edit-a");
    assert_eq!(permission(&r), "ask", "{r:?}");
    assert!(
        reason(&r).contains("require-claim")
            && reason(&r).contains(&format!("conductor claim --instance {id_a}")),
        "{r:?}"
    );
    env.run(&["claim", "--instance", &id_a, "src/auth.rs"])
        .code(0);
    assert_eq!(permission(&hook(&env, "pre-tool-use-edit-a")), "");
}

#[test]
fn a_holder_that_looks_gone_is_left_to_the_person() {
    let mut env = TestEnv::new();
    env.at("2026-11-23T10:00:00Z");
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    env.at("2026-11-23T12:00:00Z");
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    assert_eq!(permission(&r), "ask", "{r:?}");
    assert!(
        reason(&r).contains("looks gone") && reason(&r).contains("120 min"),
        "{r:?}"
    );
}

#[test]
fn enforce_off_never_blocks() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    set_enforce(&env, "off");
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
}

#[test]
fn resume_reuses_the_instance() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    let id = id_of(&env, SESSION_A);
    let r = hook(&env, "session-start-a-resume");
    let ctx = out(&r)["hookSpecificOutput"]["additionalContext"].clone();
    assert!(
        ctx.as_str().unwrap().contains(&format!("resumed as {id}")),
        "{r:?}"
    );
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

/// Issue 13 (1): a hook that fails open says so where the person and the model see it, not on
/// stderr (which Claude Code only writes to its debug log on exit 0).
#[test]
fn issue_13_failures_are_told_to_the_person_and_the_model() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    std::fs::write(env.home_file("status.json"), "{ not json").unwrap();
    let r = hook(&env, "pre-tool-use-write-b");
    let j = out(&r);
    assert!(
        j["systemMessage"]
            .as_str()
            .unwrap()
            .starts_with("conductor:")
            && j["systemMessage"]
                .as_str()
                .unwrap()
                .contains("allowed unchecked"),
        "{r:?}"
    );
    assert!(
        j["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("not being checked"),
        "{r:?}"
    );
    assert!(j["hookSpecificOutput"].get("permissionDecision").is_none());
    assert!(r.stderr.is_empty(), "{r:?}");
    // Garbage on stdin too.
    let r = env.run_stdin(&["hook", "claude"], "not a payload");
    assert!(
        out(&r)["systemMessage"]
            .as_str()
            .unwrap()
            .contains("not a Claude Code hook payload")
    );
    // A bad config.json as well.
    std::fs::remove_file(env.home_file("status.json")).unwrap();
    set_enforce(&env, "strict");
    assert!(out(&hook(&env, "pre-tool-use-write-b"))["systemMessage"].is_string());
    // No session id.
    std::fs::remove_file(env.home_file("config.json")).unwrap();
    let r = env.run_stdin(
        &["hook", "claude"],
        r#"{"hook_event_name":"SessionStart","cwd":"/tmp"}"#,
    );
    assert!(
        out(&r)["systemMessage"]
            .as_str()
            .unwrap()
            .contains("names no session")
    );
}

/// Issue 13 (4): a session that only reads and talks keeps its claims: prompts and stops
/// heartbeat (at most every five minutes), so it is not an orphan after an hour.
#[test]
fn issue_13_idle_sessions_heartbeat_on_prompts_and_keep_their_claims() {
    let mut env = TestEnv::new();
    env.at("2026-11-23T10:00:00Z");
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    env.at("2026-11-23T10:02:00Z");
    let before = env.snapshot();
    hook(&env, "user-prompt-submit-a").code(0);
    assert_eq!(
        env.snapshot(),
        before,
        "no write when the heartbeat is fresh"
    );
    env.at("2026-11-23T10:50:00Z");
    let r = hook(&env, "user-prompt-submit-a");
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert_eq!(
        instance_of(&env, SESSION_A).unwrap()["last_heartbeat"],
        "2026-11-23T10:50:00Z"
    );
    env.at("2026-11-23T11:40:00Z");
    hook(&env, "stop-a").code(0);
    env.at("2026-11-23T12:30:00Z");
    env.run(&["cleanup"]).code(0);
    assert_eq!(holder(&env, "src/auth.rs"), id_of(&env, SESSION_A).as_str());
}

/// Issue 13 (5): edits outside the session's directory (Claude Code's memory under ~/.claude,
/// scratch files) are never claimed.
#[test]
fn issue_13_edits_outside_the_project_are_not_claimed() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    let r = hook(&env, "pre-tool-use-write-memory-a");
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert!(env.state()["global_claims"].as_object().unwrap().is_empty());
}

/// Issue 13 (8): SessionEnd fits the plugin budget (about 1.5 s) even when the lock is busy,
/// and says the claims are left to the heartbeat rule.
#[test]
fn issue_13_session_end_fits_its_budget_when_the_lock_is_busy() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    let lock = conductor::store::lock::acquire(
        &env.home_file("status.lock"),
        std::time::Duration::from_secs(5),
        &|| {},
    )
    .unwrap();
    let t = std::time::Instant::now();
    let r = hook(&env, "session-end-a");
    let took = t.elapsed();
    drop(lock);
    assert!(took.as_secs_f64() < 1.5, "took {took:?}");
    assert!(
        out(&r)["systemMessage"]
            .as_str()
            .unwrap()
            .contains("heartbeat rule"),
        "{r:?}"
    );
    assert!(instance_of(&env, SESSION_A).is_some(), "nothing half-done");
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
        "claude",
        "session-start-a",
        &[],
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

/// Issue 13 (9): the plugin's hooks step aside when `integrate claude` installed the same hooks,
/// so each event is decided once.
#[test]
fn issue_13_plugin_hooks_step_aside_for_integrated_hooks() {
    let env = TestEnv::new();
    let r = hook_env(&env, "claude", "session-start-a", &["--from-plugin"], &[]);
    out(&r);
    assert!(
        instance_of(&env, SESSION_A).is_some(),
        "alone, the plugin's hook works"
    );
    hook(&env, "session-end-a").code(0);
    env.run(&["integrate", "claude"]).code(0);
    let r = hook_env(&env, "claude", "session-start-a", &["--from-plugin"], &[]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert!(instance_of(&env, SESSION_A).is_none());
}

#[test]
fn plugin_and_marketplace_files_are_well_formed() {
    let read = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo_file(p)).unwrap()).unwrap()
    };
    let plugin = read("shell/claude/.claude-plugin/plugin.json");
    assert_eq!(plugin["name"], "conductor");
    let market = read(".claude-plugin/marketplace.json");
    assert_eq!(market["plugins"][0]["name"], "conductor");
    assert!(
        repo_file(market["plugins"][0]["source"].as_str().unwrap())
            .join(".claude-plugin/plugin.json")
            .exists(),
        "the marketplace points at the plugin"
    );
    let hooks = read("shell/claude/hooks/hooks.json");
    for event in [
        "SessionStart",
        "PreToolUse",
        "UserPromptSubmit",
        "Stop",
        "SessionEnd",
    ] {
        assert_eq!(
            hooks["hooks"][event][0]["hooks"][0]["command"], "conductor hook claude --from-plugin",
            "{event}"
        );
    }
    assert_eq!(
        hooks["hooks"]["PreToolUse"][0]["matcher"],
        "Edit|Write|MultiEdit|NotebookEdit|Bash|Read|Grep|Glob",
        "issue 22: shell and read calls reach the hook (claims, workflow rules)"
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
    for agent in ["claude", "cursor", "codex", "gemini", "qwen", "copilot"] {
        let dir = repo_file(&format!("fixtures/hooks/{agent}"));
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains("read on 2026-11-23")
                || readme.contains("read on\n2026-11-23")
                || readme.contains("captured on\n2026-11-28")
                || readme.contains("captured on 2026-11-28"),
            "{agent}: the documentation or capture date is noted"
        );
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "json") {
                let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                assert!(v["hook_event_name"].is_string(), "{}", p.display());
            }
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

// ---------------------------------------------------------------- Codex CLI

/// Issue 13: a Codex session's apply_patch touching three files is refused for the one a Claude
/// Code session holds, and none of the three is claimed; once the holder ends, the same patch
/// claims all three.
#[test]
fn issue_13_codex_apply_patch_is_refused_for_the_file_claude_holds() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    let id_a = id_of(&env, SESSION_A);

    let start = hook_as(&env, "codex", "session-start");
    assert!(
        out(&start)["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains(&format!("{id_a} (Claude Code session"))
    );
    let codex = instance_of(&env, CODEX_SESSION).unwrap();
    assert_eq!(codex["agent"], "codex");

    let r = hook_as(&env, "codex", "pre-tool-use-apply-patch");
    assert_eq!(permission(&r), "deny", "{r:?}");
    let why = reason(&r);
    assert!(
        why.contains("1 of the 3 files")
            && why.contains(&env.abs("src/auth.rs"))
            && why.contains(&id_a),
        "{why}"
    );
    assert!(
        !why.contains("session.rs") && !why.contains("legacy.rs"),
        "{why}"
    );
    let claims = env.state()["global_claims"].clone();
    assert_eq!(
        claims.as_object().unwrap().len(),
        1,
        "nothing else claimed: {claims}"
    );

    // A plain shell command is no edit.
    let bash = hook_as(&env, "codex", "pre-tool-use-bash");
    assert_eq!((bash.code, bash.stdout.as_str()), (0, ""));

    hook(&env, "session-end-a").code(0);
    let r = hook_as(&env, "codex", "pre-tool-use-apply-patch");
    assert_eq!(permission(&r), "", "{r:?}");
    let id_c = id_of(&env, CODEX_SESSION);
    for f in ["src/auth.rs", "src/session.rs", "src/legacy.rs"] {
        assert_eq!(holder(&env, f), id_c.as_str(), "{f}");
    }
    // A Claude Code session is now refused the file Codex holds.
    hook(&env, "session-start-b").code(0);
    let r = hook(&env, "pre-tool-use-write-b");
    assert_eq!(permission(&r), "deny");
    assert!(reason(&r).contains("Codex CLI session"), "{r:?}");
}

#[test]
fn codex_prompts_and_stops_heartbeat_and_ask_becomes_deny() {
    let mut env = TestEnv::new();
    env.at("2026-11-23T10:00:00Z");
    hook_as(&env, "codex", "session-start").code(0);
    env.at("2026-11-23T10:30:00Z");
    hook_as(&env, "codex", "user-prompt-submit").code(0);
    assert_eq!(
        instance_of(&env, CODEX_SESSION).unwrap()["last_heartbeat"],
        "2026-11-23T10:30:00Z"
    );
    env.at("2026-11-23T10:40:00Z");
    hook_as(&env, "codex", "stop").code(0);
    hook_as(&env, "codex", "post-tool-use-apply-patch").code(0);
    assert!(
        instance_of(&env, CODEX_SESSION).is_some(),
        "Stop does not end the session"
    );
    set_enforce(&env, "require-claim");
    let r = hook_as(&env, "codex", "pre-tool-use-apply-patch");
    assert_eq!(permission(&r), "deny", "Codex has no ask: {r:?}");
    assert!(reason(&r).contains("require-claim"));
}

// ---------------------------------------------------------------- Cursor

#[test]
fn cursor_is_refused_a_file_claude_holds_and_records_edits_after_the_fact() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    let id_a = id_of(&env, SESSION_A);

    let s = hook_as(&env, "cursor", "session-start");
    assert!(
        out(&s)["additional_context"]
            .as_str()
            .unwrap()
            .contains(&id_a)
    );
    let cur = instance_of(&env, CURSOR_SESSION).unwrap();
    assert_eq!(
        (cur["agent"].as_str(), cur["source"].as_str()),
        (Some("cursor"), Some("cur"))
    );

    let r = hook_as(&env, "cursor", "pre-tool-use-write");
    let j = out(&r);
    assert_eq!(j["permission"], "deny", "{r:?}");
    assert!(j["agent_message"].as_str().unwrap().contains(&id_a));
    assert!(j["user_message"].as_str().unwrap().contains(&id_a));

    let r = hook_as(&env, "cursor", "pre-tool-use-str-replace");
    assert_eq!(out(&r), serde_json::json!({}), "JSON on every path");
    let id_c = id_of(&env, CURSOR_SESSION);
    assert_eq!(holder(&env, "src/docs.rs"), id_c.as_str());

    // afterFileEdit cannot refuse: the edit is recorded as a claim.
    assert_eq!(
        out(&hook_as(&env, "cursor", "after-file-edit")),
        serde_json::json!({})
    );
    assert_eq!(holder(&env, "src/notes.md"), id_c.as_str());
    assert_eq!(
        out(&hook_as(&env, "cursor", "before-submit-prompt")),
        serde_json::json!({"continue": true})
    );
    out(&hook_as(&env, "cursor", "stop"));
    out(&hook_as(&env, "cursor", "session-end"));
    assert!(instance_of(&env, CURSOR_SESSION).is_none());
    assert!(env.state()["global_claims"][env.abs("src/notes.md")].is_null());
}

/// A user with both integrations gets one decision per edit: when Cursor runs Claude Code's hooks
/// from `.claude` settings, the Claude Code hook steps aside for `integrate cursor`'s hooks.
#[test]
fn cursor_running_claude_hooks_decides_once() {
    let env = TestEnv::new();
    hook(&env, "session-start-b").code(0);
    hook(&env, "pre-tool-use-write-b").code(0);
    let vars = [("CURSOR_VERSION", "2.1.42")];
    // Only the Claude Code integration: its hook is the gate, also under Cursor.
    let r = hook_env(&env, "claude", "pre-tool-use-edit-a", &[], &vars);
    assert_eq!(permission(&r), "deny");
    env.run(&["integrate", "cursor"]).code(0);
    let r = hook_env(&env, "claude", "pre-tool-use-edit-a", &[], &vars);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, ""),
        "steps aside for `hook cursor`"
    );
    let r = hook_env(&env, "claude", "pre-tool-use-edit-a", &[], &[]);
    assert_eq!(permission(&r), "deny", "outside Cursor nothing changes");
}

// ---------------------------------------------------------------- Gemini CLI

#[test]
fn gemini_is_refused_a_held_file_and_stdout_is_always_json() {
    let env = TestEnv::new();
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    let id_a = id_of(&env, SESSION_A);

    let s = out(&hook_as(&env, "gemini", "session-start"));
    assert!(
        s["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains(&id_a)
    );
    assert_eq!(
        instance_of(&env, GEMINI_SESSION).unwrap()["agent"],
        "gemini"
    );

    let r = hook_as(&env, "gemini", "before-tool-replace");
    let j = out(&r);
    assert_eq!(j["decision"], "deny", "{r:?}");
    assert!(j["reason"].as_str().unwrap().contains(&id_a));
    assert_eq!(r.stdout.trim().lines().count(), 1, "one JSON object only");

    // The claim notice waits for AfterTool (issue 22): BeforeTool only tells the person.
    let before = out(&hook_as(&env, "gemini", "before-tool-write-file"));
    assert!(before.get("hookSpecificOutput").is_none(), "{before}");
    assert!(
        before["systemMessage"]
            .as_str()
            .unwrap()
            .contains("now claimed")
    );
    let id_g = id_of(&env, GEMINI_SESSION);
    assert_eq!(holder(&env, "src/new.rs"), id_g.as_str());
    out(&hook_as(&env, "gemini", "after-tool-write-file"));
    let end = out(&hook_as(&env, "gemini", "session-end"));
    assert!(
        end["systemMessage"]
            .as_str()
            .unwrap()
            .contains("released 1 file")
    );
    assert!(instance_of(&env, GEMINI_SESSION).is_none());
    // Garbage in, JSON out.
    let r = env.run_stdin(&["hook", "gemini"], "oops");
    assert!(
        out(&r)["systemMessage"]
            .as_str()
            .unwrap()
            .contains("not a Gemini CLI hook payload")
    );
}

// ---------------------------------------------------------------- Qwen Code and Copilot CLI

/// Each agent's captured payloads (fixtures/hooks/qwen, fixtures/hooks/copilot) replayed: the
/// session registers with its agent, the edit of a file another session holds is refused with
/// the holder in the reason (Claude Code's answer shape), a free file is claimed and the model is
/// told (Copilot CLI at PreToolUse; Qwen Code, which drops PreToolUse's context, at PostToolUse),
/// and the session's end releases its claims.
#[test]
fn qwen_code_and_copilot_cli_payloads_are_refused_claim_and_release() {
    for (agent, write, after) in [
        (
            "qwen",
            "pre-tool-use-write-file",
            Some("post-tool-use-write-file"),
        ),
        ("copilot", "pre-tool-use-write", None),
    ] {
        let env = TestEnv::new();
        let other = env.start("other-task", "P2");
        env.run(&["claim", "--instance", &other, "held.txt"])
            .code(0);
        let session: Value = serde_json::from_str(&fixture(&env, agent, "session-start")).unwrap();
        let sid = session["session_id"].as_str().unwrap().to_string();

        let s = out(&hook_as(&env, agent, "session-start"));
        assert!(
            s["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap()
                .contains(&other),
            "{agent}: {s}"
        );
        assert_eq!(instance_of(&env, &sid).unwrap()["agent"], agent);
        let id = id_of(&env, &sid);

        let r = out(&hook_as(&env, agent, "pre-tool-use-edit"));
        assert_eq!(
            r["hookSpecificOutput"]["permissionDecision"], "deny",
            "{agent}: {r}"
        );
        assert!(
            r["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .contains(&format!("is claimed by {other}")),
            "{agent}: {r}"
        );

        let w = out(&hook_as(&env, agent, write));
        assert_eq!(holder(&env, "free.txt"), serde_json::json!(id), "{agent}");
        let told = |v: &Value| {
            v["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .is_some_and(|c| c.contains(&format!("now claimed for this session ({id})")))
        };
        match after {
            Some(post) => {
                assert!(!told(&w), "{agent}: PreToolUse's context is dropped: {w}");
                let p = out(&hook_as(&env, agent, post));
                assert!(told(&p), "{agent}: told at PostToolUse: {p}");
            }
            None => assert!(told(&w), "{agent}: {w}"),
        }

        out(&hook_as(&env, agent, "session-end"));
        assert!(instance_of(&env, &sid).is_none(), "{agent}");
        assert_eq!(
            holder(&env, "held.txt"),
            serde_json::json!(other),
            "{agent}"
        );
    }
}

// ---------------------------------------------------------------- integrate, every agent

const AGENTS: [(&str, &str, &str); 5] = [
    ("claude", ".claude", "settings.json"),
    ("cursor", ".cursor", "hooks.json"),
    ("codex", ".codex", "hooks.json"),
    ("gemini", ".gemini", "settings.json"),
    ("qwen", ".qwen", "settings.json"),
];

/// Someone's existing settings, oddly formatted, with a hook of their own in the agent's shape.
fn their_settings(agent: &str) -> &'static str {
    match agent {
        "cursor" => "{\"version\":1,\"hooks\":{\"afterFileEdit\":[{\"command\":\"./format.sh\"}]}}",
        "gemini" => {
            "{\n\t\"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n\t\"apiKey\": \"AIza-secret\",\n\t\"hooks\": {\"BeforeTool\": [{\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"audit.sh\"}]}]}\n}"
        }
        _ => {
            "{\n\t\"model\": \"opus\",\n\t\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]}]},\n\t\"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}"
        }
    }
}

#[test]
fn integrate_round_trips_every_agents_settings_byte_for_byte() {
    use std::os::unix::fs::PermissionsExt;
    for (agent, dir, file) in AGENTS {
        let env = TestEnv::new();
        let d = env.project.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let original = their_settings(agent);
        std::fs::write(d.join(file), original).unwrap();
        std::fs::set_permissions(d.join(file), std::fs::Permissions::from_mode(0o600)).unwrap();

        let r = env.run(&["--json", "integrate", agent]);
        r.code(0);
        assert_eq!(r.json()["agent"], agent);
        let merged: Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(file)).unwrap()).unwrap();
        let text = merged.to_string();
        assert!(
            text.contains(&format!("{} hook {agent}", bin_canonical())),
            "{agent}: {text}"
        );
        assert!(
            text.contains("lint.sh") || text.contains("format.sh") || text.contains("audit.sh"),
            "{agent}: theirs kept"
        );
        // Issue 13 (6): the manifest keeping the original bytes is as private as the original.
        let manifest = d.join("conductor-integration.json");
        let mode = std::fs::metadata(&manifest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{agent}: manifest mode");
        assert_eq!(
            std::fs::metadata(d.join(file))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600,
            "{agent}: settings keep their mode"
        );

        let again = env.run(&["integrate", agent]);
        again.code(0);
        assert!(
            again.stdout.starts_with("Nothing to change"),
            "{agent}: idempotent: {again:?}"
        );

        env.run(&["integrate", agent, "--uninstall"]).code(0);
        assert_eq!(
            std::fs::read_to_string(d.join(file)).unwrap(),
            original,
            "{agent}: byte for byte"
        );
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from(file)],
            "{agent}: nothing of ours left"
        );
    }
}

#[test]
fn integrate_into_a_fresh_directory_and_back_leaves_nothing() {
    for (agent, dir, file) in AGENTS {
        let env = TestEnv::new();
        env.run(&[
            "integrate",
            agent,
            "--project",
            env.project.to_str().unwrap(),
        ])
        .code(0);
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(env.project.join(dir).join(file)).unwrap(),
        )
        .unwrap();
        let template = match agent {
            "claude" => "shell/claude/hooks/hooks.json",
            "cursor" => "shell/cursor/hooks.json",
            "codex" => "shell/codex/hooks.json",
            "qwen" => "shell/qwen/settings.json",
            _ => "shell/gemini/settings.json",
        };
        let ours: Value =
            serde_json::from_str(&std::fs::read_to_string(repo_file(template)).unwrap()).unwrap();
        let expected = ours["hooks"]
            .to_string()
            .replace(
                &format!("conductor hook {agent} --from-plugin"),
                &format!("conductor hook {agent}"),
            )
            .replace(
                &format!("\"conductor hook {agent}\""),
                &format!("\"{} hook {agent}\"", bin_canonical()),
            );
        assert_eq!(
            v["hooks"].to_string(),
            expected,
            "{agent}: exactly the shipped hooks"
        );
        env.run(&["integrate", agent, "--uninstall"]).code(0);
        assert!(!env.project.join(dir).exists(), "{agent}");
    }
}

#[test]
fn integrate_user_scope_writes_home() {
    let env = TestEnv::new();
    env.run(&["integrate", "claude", "--user"]).code(0);
    assert!(env.root.path().join(".claude/settings.json").exists());
    assert!(
        env.root
            .path()
            .join(".claude/commands/conductor.md")
            .exists()
    );
    env.run(&["integrate", "codex", "--user"]).code(0);
    assert!(env.root.path().join(".codex/hooks.json").exists());
    env.run(&["integrate", "claude", "--user", "--uninstall"])
        .code(0);
    env.run(&["integrate", "codex", "--user", "--uninstall"])
        .code(0);
    assert!(!env.root.path().join(".claude").exists());
    assert!(!env.root.path().join(".codex").exists());
}

#[test]
fn integrate_never_overwrites_unparseable_settings() {
    for (agent, dir, file) in AGENTS {
        let env = TestEnv::new();
        let d = env.project.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(file), "{ \"model\": ").unwrap();
        let r = env.run(&["integrate", agent]);
        r.code(2);
        assert!(r.stderr.contains("not a JSON object"), "{agent}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(d.join(file)).unwrap(),
            "{ \"model\": "
        );
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(left.len(), 1, "{agent}: nothing else written");
    }
}

/// Issue 13 (7): a hook whose binary is gone silently switches coordination off; `doctor` says so,
/// and `integrate` again points the hooks at the current binary.
#[test]
fn issue_13_doctor_reports_an_integration_whose_binary_is_gone() {
    let env = TestEnv::new();
    env.run(&["integrate", "codex"]).code(0);
    let r = env.run(&["--json", "doctor"]);
    r.code(0);
    assert_eq!(r.json()["integrations"][0]["ok"], true, "{r:?}");
    let path = env.project.join(".codex/hooks.json");
    let moved = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&bin_canonical(), "/nonexistent/bin/conductor");
    std::fs::write(&path, moved).unwrap();
    let r = env.run(&["doctor"]);
    r.code(1);
    assert!(
        r.stdout
            .contains("/nonexistent/bin/conductor, which does not exist")
            && r.stdout.contains("conductor integrate codex"),
        "{r:?}"
    );
    let r = env.run(&["integrate", "codex"]);
    r.code(0);
    assert!(r.stdout.contains("pointed the"), "{r:?}");
    env.run(&["doctor"]).code(0);
}

/// Issue 13 (6, 7): an install made by an earlier conductor (hooks running `conductor` from PATH,
/// a manifest written 0644 holding the original settings, API key included) is upgraded in place:
/// the manifest becomes private, the hooks name the binary, and uninstall still restores the
/// original bytes.
#[test]
fn issue_13_integrate_upgrades_an_earlier_install() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let d = env.project.join(".claude");
    std::fs::create_dir_all(&d).unwrap();
    let original = "{\"env\": {\"ANTHROPIC_API_KEY\": \"sk-secret\"}}";
    let old = serde_json::json!({
        "env": {"ANTHROPIC_API_KEY": "sk-secret"},
        "hooks": {"PreToolUse": [{"matcher": "Edit|Write|MultiEdit|NotebookEdit",
                                   "hooks": [{"type": "command", "command": "conductor hook claude", "timeout": 10}]}]}
    });
    std::fs::write(
        d.join("settings.json"),
        serde_json::to_string_pretty(&old).unwrap(),
    )
    .unwrap();
    std::fs::set_permissions(
        d.join("settings.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let manifest = serde_json::json!({"installed_by": "conductor 0.1.0", "settings": {"existed": true, "original": original},
                                      "command_file": "commands/conductor.md", "hook_command": "conductor hook claude"});
    std::fs::write(d.join("conductor-integration.json"), manifest.to_string()).unwrap();
    std::fs::set_permissions(
        d.join("conductor-integration.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();

    let r = env.run(&["integrate", "claude"]);
    r.code(0);
    assert!(r.stdout.contains("made private"), "{r:?}");
    let mode = std::fs::metadata(d.join("conductor-integration.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        installed_commands(&env, "PreToolUse"),
        vec![format!("{} hook claude", bin_canonical())]
    );
    assert_eq!(installed_commands(&env, "UserPromptSubmit").len(), 1);
    env.run(&["integrate", "claude", "--uninstall"]).code(0);
    assert_eq!(
        std::fs::read_to_string(d.join("settings.json")).unwrap(),
        original
    );
}

// ------------------------------------------------ issue 22: what the real agents showed

/// Feed a payload (any agent's JSON) to `conductor hook AGENT` with extra environment.
fn send(env: &TestEnv, agent: &str, payload: &Value, vars: &[(&str, &str)]) -> Run {
    let mut c = env.cmd();
    c.args(["hook", agent])
        .env_remove("CONDUCTOR_INSTANCE_ID")
        .env_remove("CONDUCTOR_WORKFLOW_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    use std::io::Write;
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// Each agent's shell-tool payload for `command`, and how that agent reads a refusal.
fn shell_payload(env: &TestEnv, agent: &str, session: &str, command: &str) -> Value {
    let cwd = env.project.to_str().unwrap();
    match agent {
        "claude" | "codex" => serde_json::json!({"session_id": session, "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}}),
        "gemini" => serde_json::json!({"session_id": session, "cwd": cwd,
            "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": command}}),
        "qwen" => serde_json::json!({"session_id": session, "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": "run_shell_command", "tool_input": {"command": command}}),
        "copilot" => serde_json::json!({"hook_event_name": "PreToolUse", "session_id": session,
            "cwd": cwd, "tool_name": "Bash", "tool_input": {"command": command, "description": "x"}}),
        "cursor" => serde_json::json!({"conversation_id": session, "workspace_roots": [cwd],
            "hook_event_name": "beforeShellExecution", "command": command, "cwd": cwd}),
        _ => unreachable!(),
    }
}

/// The refusal reason an agent's answer carries, or None when it lets the call through.
fn refusal(agent: &str, r: &Run) -> Option<String> {
    r.code(0);
    if r.stdout.trim().is_empty() {
        return None;
    }
    let v = r.json();
    let s = |v: &Value| v.as_str().map(str::to_string);
    match agent {
        "claude" | "codex" | "qwen" | "copilot" => (v["hookSpecificOutput"]["permissionDecision"]
            == "deny")
            .then(|| s(&v["hookSpecificOutput"]["permissionDecisionReason"]).unwrap()),
        "gemini" => (v["decision"] == "deny").then(|| s(&v["reason"]).unwrap()),
        "cursor" => (v["permission"] == "deny").then(|| s(&v["agent_message"]).unwrap()),
        _ => unreachable!(),
    }
}

#[test]
fn issue_22_shell_writes_of_a_held_file_are_refused_for_every_agent() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::fs::write(env.project.join("src/auth.rs"), "fn a() {}\n").unwrap();
    // Session A (Claude Code) holds src/auth.rs.
    hook(&env, "session-start-a").code(0);
    hook(&env, "pre-tool-use-edit-a").code(0);
    let id_a = id_of(&env, SESSION_A);
    assert_eq!(holder(&env, "src/auth.rs"), id_a.as_str());
    // A patch file that writes it.
    std::fs::write(
        env.project.join("fix.patch"),
        "diff --git a/src/auth.rs b/src/auth.rs\n--- a/src/auth.rs\n+++ b/src/auth.rs\n@@ -1 +1 @@\n-fn a() {}\n+fn b() {}\n",
    )
    .unwrap();
    let writes = [
        "sed -i 's/a/b/' src/auth.rs",
        "echo x > src/auth.rs",
        "printf x >> ./src/auth.rs",
        "ls | tee src/auth.rs",
        "cp /dev/null src/auth.rs",
        "mv src/auth.rs src/old.rs",
        "rm -f src/auth.rs",
        "git checkout HEAD -- src/auth.rs",
        "patch -p1 < fix.patch",
        "git apply fix.patch",
        "cd src && echo y > auth.rs",
    ];
    for (agent, session) in [
        ("claude", SESSION_B),
        ("codex", CODEX_SESSION),
        ("gemini", GEMINI_SESSION),
        ("qwen", QWEN_SESSION),
        ("copilot", COPILOT_SESSION),
        ("cursor", CURSOR_SESSION),
    ] {
        for cmd in writes {
            let r = send(&env, agent, &shell_payload(&env, agent, session, cmd), &[]);
            let why =
                refusal(agent, &r).unwrap_or_else(|| panic!("{agent}: `{cmd}` let through: {r:?}"));
            assert!(
                why.contains(&id_a) && why.contains("src/auth.rs"),
                "{agent} `{cmd}`: {why}"
            );
        }
        // Reading the file, or writing elsewhere outside the project, is no claim matter.
        for cmd in [
            "cat src/auth.rs | grep fn",
            "cargo test 2>&1 | tail",
            "echo x > /tmp/scratch-c22",
        ] {
            let r = send(&env, agent, &shell_payload(&env, agent, session, cmd), &[]);
            assert_eq!(refusal(agent, &r), None, "{agent} `{cmd}`: {r:?}");
        }
    }
    assert_eq!(holder(&env, "src/auth.rs"), id_a.as_str(), "still A's");

    // A free file written through the shell is auto-claimed, and the model is told.
    let r = send(
        &env,
        "claude",
        &shell_payload(&env, "claude", SESSION_B, "cp src/auth.rs src/copy.rs"),
        &[],
    );
    let ctx = out(&r)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ctx.contains("src/copy.rs (fencing token"), "{ctx}");
    assert_eq!(holder(&env, "src/copy.rs"), id_of(&env, SESSION_B).as_str());
    assert!(
        holder(&env, "src/auth.rs") == id_a.as_str(),
        "cp's source is only read"
    );
}

#[test]
fn issue_22_installed_matchers_send_every_shell_tool_to_the_hook() {
    let env = TestEnv::new();
    for agent in ["claude", "codex", "gemini", "qwen", "copilot", "cursor"] {
        env.run(&["integrate", agent, "--project", "."]).code(0);
    }
    let read = |rel: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(env.project.join(rel)).unwrap()).unwrap()
    };
    let claude = read(".claude/settings.json");
    let m = claude["hooks"]["PreToolUse"][0]["matcher"]
        .as_str()
        .unwrap();
    assert!(
        m.split('|').any(|t| t == "Bash") && m.split('|').any(|t| t == "Read"),
        "{m}"
    );
    let codex = read(".codex/hooks.json");
    let m = codex["hooks"]["PreToolUse"][0]["matcher"].as_str().unwrap();
    assert!(m.split('|').any(|t| t == "Bash"), "{m}");
    assert!(
        codex["hooks"]["SessionEnd"].is_array(),
        "Codex's SessionEnd is installed"
    );
    let gemini = read(".gemini/settings.json");
    let m = gemini["hooks"]["BeforeTool"][0]["matcher"]
        .as_str()
        .unwrap();
    assert!(m.split('|').any(|t| t == "run_shell_command"), "{m}");
    let qwen = read(".qwen/settings.json");
    let m = qwen["hooks"]["PreToolUse"][0]["matcher"].as_str().unwrap();
    assert!(
        m.split('|').any(|t| t == "run_shell_command") && m.split('|').any(|t| t == "edit"),
        "{m}"
    );
    assert!(
        qwen["hooks"]["SessionEnd"].is_array() && qwen["hooks"]["PostToolUse"].is_array(),
        "{qwen}"
    );
    let copilot = read(".github/hooks/conductor.json");
    let m = copilot["hooks"]["PreToolUse"][0]["matcher"]
        .as_str()
        .unwrap();
    assert!(
        m.split('|').any(|t| t == "Bash") && m.split('|').any(|t| t == "Edit"),
        "{m}"
    );
    let cursor = read(".cursor/hooks.json");
    assert!(
        cursor["hooks"]["beforeShellExecution"].is_array(),
        "{cursor}"
    );
}

#[test]
fn issue_22_workflow_rules_hold_for_every_agents_shell_tool() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".conductor/workflows")).unwrap();
    std::fs::write(
        env.project.join(".conductor/workflows/one.json"),
        r#"{"name": "One", "initial": "work", "states": {"work": {"persona": "Engineer", "next": []}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(env.project.join(".pi")).unwrap();
    std::fs::write(
        env.project.join(".pi/damage-control-rules.yaml"),
        "bashToolPatterns:\n  - pattern: '\\brm\\s+-[a-zA-Z]*r'\n    reason: recursive delete is not allowed\nreadOnlyPaths:\n  - Cargo.lock\n",
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "one", "guarded"]);
    r.code(0);
    let j = r.json();
    let sid = j["session"]
        .as_str()
        .unwrap_or_else(|| panic!("{j}"))
        .to_string();
    for (agent, session) in [
        ("claude", SESSION_A),
        ("codex", CODEX_SESSION),
        ("gemini", GEMINI_SESSION),
        ("cursor", CURSOR_SESSION),
    ] {
        let vars = [("CONDUCTOR_WORKFLOW_SESSION", sid.as_str())];
        let r = send(
            &env,
            agent,
            &shell_payload(&env, agent, session, "rm -rf src/keep"),
            &vars,
        );
        let why = refusal(agent, &r).unwrap_or_else(|| panic!("{agent}: {r:?}"));
        assert!(
            why.contains("recursive delete is not allowed"),
            "{agent}: {why}"
        );
        // A shell write of a read-only path, found by the parser.
        let r = send(
            &env,
            agent,
            &shell_payload(&env, agent, session, "echo x >> Cargo.lock"),
            &vars,
        );
        let why = refusal(agent, &r).unwrap_or_else(|| panic!("{agent}: {r:?}"));
        assert!(why.contains("read-only"), "{agent}: {why}");
        let r = send(
            &env,
            agent,
            &shell_payload(&env, agent, session, "ls src"),
            &vars,
        );
        assert_eq!(refusal(agent, &r), None, "{agent}");
    }
}

#[test]
fn issue_22_gemini_is_told_of_the_auto_claim_after_the_tool_ran() {
    let env = TestEnv::new();
    hook_as(&env, "gemini", "session-start").code(0);
    let before = out(&hook_as(&env, "gemini", "before-tool-write-file"));
    assert!(
        before.get("hookSpecificOutput").is_none(),
        "BeforeTool's context never reaches Gemini's model: {before}"
    );
    assert!(
        before["systemMessage"]
            .as_str()
            .unwrap_or("")
            .contains("now claimed"),
        "the person sees it at once: {before}"
    );
    let after = out(&hook_as(&env, "gemini", "after-tool-write-file"));
    let ctx = after["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_else(|| panic!("{after}"));
    assert!(ctx.contains("now claimed for this session"), "{ctx}");
    assert_eq!(after["hookSpecificOutput"]["hookEventName"], "AfterTool");
    let again = out(&hook_as(&env, "gemini", "after-tool-write-file"));
    assert!(
        again.get("hookSpecificOutput").is_none(),
        "told once: {again}"
    );
    // Kept private in the home.
    use std::os::unix::fs::PermissionsExt;
    let dir = env.home.join("hook-notices");
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn issue_22_a_session_started_with_an_instance_adopts_it_for_every_agent() {
    for (agent, session) in [
        ("claude", SESSION_A),
        ("codex", CODEX_SESSION),
        ("gemini", GEMINI_SESSION),
        ("cursor", CURSOR_SESSION),
    ] {
        let env = TestEnv::new();
        // What a workflow supervisor (or `conductor run`) does before it starts the agent.
        let id = env.start("workflow worker", "P1");
        let vars = [("CONDUCTOR_INSTANCE_ID", id.as_str())];
        let cwd = env.project.to_str().unwrap();
        let (start_event, end_event, sid_key) = match agent {
            "cursor" => ("sessionStart", "sessionEnd", "conversation_id"),
            _ => ("SessionStart", "SessionEnd", "session_id"),
        };
        let start = serde_json::json!({sid_key: session, "cwd": cwd, "workspace_roots": [cwd],
            "hook_event_name": start_event, "source": "startup"});
        let r = send(&env, agent, &start, &vars);
        r.code(0);
        let instances = env.state()["instances"].as_array().unwrap().clone();
        assert_eq!(
            instances.len(),
            1,
            "{agent}: no second instance: {instances:?}"
        );
        assert_eq!(instances[0]["id"], id.as_str());
        assert_eq!(instances[0]["session_id"], session, "{agent}");
        assert!(r.stdout.contains("adopted"), "{agent}: {}", r.stdout);
        // Its shell writes claim for the adopted instance.
        let w = send(
            &env,
            agent,
            &shell_payload(&env, agent, session, "echo x > notes.txt"),
            &vars,
        );
        assert_eq!(refusal(agent, &w), None, "{agent}: {w:?}");
        assert_eq!(holder(&env, "notes.txt"), id.as_str(), "{agent}");
        assert_eq!(env.state()["instances"].as_array().unwrap().len(), 1);
        // The session's end leaves the instance to whoever registered it.
        let end = serde_json::json!({sid_key: session, "cwd": cwd, "workspace_roots": [cwd],
            "hook_event_name": end_event, "reason": "other"});
        send(&env, agent, &end, &vars).code(0);
        assert!(env.instance(&id).is_some(), "{agent}: its owner ends it");
    }
}

#[test]
fn issue_22_the_documented_claude_worker_command_may_run_workflow_transition() {
    let env = TestEnv::new();
    // The command exactly as `workflow run --help` documents it.
    let help = env.run(&["workflow", "run", "--help"]);
    help.code(0);
    // Help text is wrapped at spaces: join its lines again.
    let text = help
        .stdout
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let line = text
        .split("conductor workflow run wf-1a2b3c")
        .find(|l| l.contains("--agent-cmd 'claude -p"))
        .unwrap_or_else(|| panic!("{}", help.stdout));
    let cmd = line.split("--agent-cmd '").nth(1).unwrap();
    // The help splits it with `\` continuations (joined by `sh -c`); the docs keep one line.
    let cmd = &cmd[..cmd.find('\'').unwrap()].replace(" \\ ", " ");
    let readme = std::fs::read_to_string(repo_file("docs/workflows.md")).unwrap();
    assert!(
        readme.contains(&format!("--agent-cmd '{cmd}'")),
        "docs/workflows.md documents the same command"
    );
    // A stand-in `claude` that records its arguments, then finishes the state.
    let bin_dir = env.root.path().join("fakebin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let fake = bin_dir.join("claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"{}\"\n\"{}\" workflow transition done --summary ok\n",
            env.root.path().join("argv").display(),
            bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(env.project.join(".conductor/workflows")).unwrap();
    std::fs::write(
        env.project.join(".conductor/workflows/one.json"),
        r#"{"name": "One", "initial": "work", "states": {"work": {"persona": "Engineer", "next": []}}}"#,
    )
    .unwrap();
    let sid = env.run(&["--json", "workflow", "start", "one", "t"]).json()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.run_env(
        &["workflow", "run", &sid, "--agent-cmd", cmd],
        &[("PATH", &path)],
    )
    .code(0);
    let argv: Vec<String> = std::fs::read_to_string(env.root.path().join("argv"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(argv[0], "-p", "{argv:?}");
    let i = argv
        .iter()
        .position(|a| a == "--allowedTools")
        .expect("an allowed-tools rule");
    // Claude Code's rule syntax: Bash(PREFIX:*) allows `conductor workflow transition …` in -p mode.
    let rule = &argv[i + 1];
    let prefix = rule
        .strip_prefix("Bash(")
        .and_then(|r| r.strip_suffix(":*)"))
        .unwrap_or_else(|| panic!("{rule}"));
    assert!(
        "conductor workflow transition done --summary ok".starts_with(prefix),
        "{rule}"
    );
    // --allowedTools takes several values: the next argument must be an option, not swallowed.
    assert!(argv[i + 2].starts_with("--"), "{argv:?}");
    assert_eq!(argv[i + 2], "--append-system-prompt-file");
    assert!(
        Path::new(&argv[i + 3]).is_file(),
        "the system prompt file exists: {argv:?}"
    );
}
