//! Issue 33 §2: with `enforce = "require-verified"`, a session whose agent's hooks failed their
//! live check (for that agent version, here) is refused every claim, on every face: `claim`,
//! `claim --wait`, `op claim`, the MCP `claim` tool and the hook's own auto-claim, with the
//! agent, its version and the check's reason. A session whose version passed claims as usual; one
//! whose version no live check saw (unverified) claims with a warning. The verdicts are made by
//! the real `conductor integrate claude` live check, broken on purpose by a `conductor` on PATH
//! that lets every edit through.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::*;

const UNENFORCED: &str = "22222222-aaaa-4bbb-8ccc-000000000001";
const ENFORCED: &str = "22222222-aaaa-4bbb-8ccc-000000000002";
const UNVERIFIED: &str = "22222222-aaaa-4bbb-8ccc-000000000003";

/// A fake `claude` at `version`, laid out as npm installs it under `npm`, so `integrate` reads
/// its version from its package.
fn install_claude(npm: &Path, version: &str) {
    let pkg = npm.join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        format!(r#"{{"name": "@anthropic-ai/claude-code", "version": "{version}"}}"#),
    )
    .unwrap();
    let exe = pkg.join("bin/claude.exe");
    std::fs::write(&exe, format!("#!/bin/sh\necho {version}\n")).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(npm.join("bin")).unwrap();
    let link = npm.join("bin/claude");
    if !link.exists() {
        std::os::unix::fs::symlink(&exe, &link).unwrap();
    }
}

/// Register a Claude Code session through its SessionStart hook, at agent `version`; its
/// instance id.
pub(crate) fn session(env: &TestEnv, sid: &str, version: &str) -> String {
    let mut c = env.cmd();
    c.args(["hook", "claude"])
        .env("CONDUCTOR_AGENT_VERSION", version)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let payload = json!({"session_id": sid, "cwd": env.project, "hook_event_name": "SessionStart",
                         "source": "startup"});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    env.state()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["session_id"] == sid)
        .map(|i| i["id"].as_str().unwrap().to_string())
        .expect("the session registered")
}

/// A home where claude 3.1.0 passed its live check in the project and claude 3.0.0 failed it,
/// with three hook-registered sessions: at 3.0.0 (unenforced), 3.1.0 (enforced) and 3.2.0
/// (unverified); `enforce` is `mode`. Returns their instance ids in that order.
fn home_with_verdicts(mode: &str) -> (TestEnv, [String; 3]) {
    let env = TestEnv::new();
    let npm = env.root.path().join("npm");
    let path = format!(
        "{}:{}",
        npm.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    install_claude(&npm, "3.1.0");
    let r = env.run_env(&["integrate", "claude"], &[("PATH", &path)]);
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    // Now 3.0.0, and a `conductor` on PATH that lets everything through: the hooks name it, and
    // the live check fails.
    install_claude(&npm, "3.0.0");
    let stub = env.root.path().join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(
        stub.join("conductor"),
        "#!/bin/sh\ncat >/dev/null\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(
        stub.join("conductor"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let broken = format!("{}:{path}", stub.display());
    let r = env.run_env(&["integrate", "claude"], &[("PATH", &broken)]);
    assert!(r.stdout.contains("live check: NOT enforced"), "{r:?}");
    env.write_home("config.json", &format!("{{\"enforce\": \"{mode}\"}}\n"));
    let ids = [
        session(&env, UNENFORCED, "3.0.0"),
        session(&env, ENFORCED, "3.1.0"),
        session(&env, UNVERIFIED, "3.2.0"),
    ];
    let status = env.run(&["--json", "status"]).json();
    for (id, state) in ids.iter().zip(["unenforced", "enforced", "unverified"]) {
        assert_eq!(status["enforcement"][id]["state"], state, "{status}");
    }
    (env, ids)
}

/// The files an instance holds.
fn held(env: &TestEnv, id: &str) -> Value {
    env.instance(id).unwrap()["files_claimed"].clone()
}

/// A Claude Code PreToolUse Write of `rel` by session `sid`: its hook output.
fn pre_write(env: &TestEnv, sid: &str, rel: &str) -> Value {
    let payload = json!({"session_id": sid, "cwd": env.project, "hook_event_name": "PreToolUse",
                         "tool_name": "Write",
                         "tool_input": {"file_path": env.abs(rel), "content": "x"}});
    let r = env.run_stdin(&["hook", "claude"], &payload.to_string());
    r.code(0);
    if r.stdout.trim().is_empty() {
        return json!({});
    }
    r.json()
}

#[test]
fn require_verified_refuses_an_unenforced_sessions_claims_with_the_live_checks_reason() {
    let (env, [bad, good, unverified]) = home_with_verdicts("require-verified");

    // `claim`: refused, exit 4, naming the agent, its version and the check's reason.
    let r = env.run(&["--json", "claim", "--instance", &bad, "src/a.rs"]);
    r.reason(4, "unenforced_session");
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(&bad)
            && message.contains("claude 3.0.0")
            && message.contains("require-verified")
            && message.contains("live check"),
        "{message}"
    );
    let status = env.run(&["--json", "status"]).json();
    let detail = status["enforcement"][&bad]["detail"].as_str().unwrap();
    let shown: String = detail.chars().take(40).collect();
    assert!(message.contains(shown.trim()), "{message} / {detail}");
    assert_eq!(held(&env, &bad), json!([]));
    // For people: one `error:` line, then what to do.
    let r = env.run(&["claim", "--instance", &bad, "src/a.rs"]);
    r.code(4);
    assert!(r.error_and_hint(), "{r:?}");
    assert!(
        r.stderr.contains("conductor integrate claude") && r.stderr.contains("auto-claim"),
        "{r:?}"
    );
    // `claim --wait` and `op claim` are refused the same way.
    env.run(&[
        "--json",
        "claim",
        "--wait=1s",
        "--instance",
        &bad,
        "src/a.rs",
    ])
    .reason(4, "unenforced_session");
    let op = json!({"operation": "claim", "instance_id": bad, "files": ["src/a.rs"]});
    env.run(&["--json", "op", &op.to_string()])
        .reason(4, "unenforced_session");
    assert_eq!(held(&env, &bad), json!([]));

    // Its own edit: the hook's auto-claim is refused, and so is the edit, with the reason.
    let v = pre_write(&env, UNENFORCED, "src/b.rs");
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    let why = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        why.contains("claude 3.0.0")
            && why.contains(shown.trim())
            && why.contains("conductor integrate claude"),
        "{why}"
    );
    assert_eq!(held(&env, &bad), json!([]));

    // The session whose version passed claims as usual, by command and by its edit.
    let r = env.run(&["claim", "--instance", &good, "src/a.rs"]);
    r.code(0);
    assert!(!r.stderr.contains("warning"), "{r:?}");
    let v = pre_write(&env, ENFORCED, "src/c.rs");
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert_eq!(
        held(&env, &good),
        json!([env.abs("src/a.rs"), env.abs("src/c.rs")])
    );

    // A version no live check saw claims, warned that its hooks were never checked here.
    let r = env.run(&["claim", "--instance", &unverified, "src/d.rs"]);
    r.code(0);
    assert!(
        r.stderr
            .contains("warning: claude 3.2.0's hooks have not been live-checked")
            && r.stderr.contains("conductor integrate claude"),
        "{r:?}"
    );
    assert_eq!(held(&env, &unverified), json!([env.abs("src/d.rs")]));
}

#[test]
fn require_verified_refuses_the_mcp_claim_of_an_unenforced_session() {
    let (env, [bad, good, _]) = home_with_verdicts("require-verified");
    let out = crate::mcp::run_plan(
        &env,
        &[],
        &[("CLAUDE_CODE_SESSION_ID", UNENFORCED)],
        json!([{"tool": "claim", "args": {"files": ["src/m.rs"]}}]),
    );
    assert_eq!(out[0]["is_error"], true, "{}", out[0]);
    assert_eq!(
        out[0]["structured"]["reason"], "unenforced_session",
        "{}",
        out[0]
    );
    let text = out[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("error: ")
            && text.contains("claude 3.0.0")
            && text.contains("\nhint: ")
            && text.contains("conductor integrate claude"),
        "{text}"
    );
    assert_eq!(held(&env, &bad), json!([]));
    // The enforced session's server claims.
    let out = crate::mcp::run_plan(
        &env,
        &[],
        &[("CLAUDE_CODE_SESSION_ID", ENFORCED)],
        json!([{"tool": "claim", "args": {"files": ["src/m.rs"]}}]),
    );
    assert_eq!(out[0]["is_error"], false, "{}", out[0]);
    assert_eq!(held(&env, &good), json!([env.abs("src/m.rs")]));
}

/// Under auto-claim (the default) the live checks' verdicts refuse nothing, and warn of
/// nothing: status, top and the dashboard show the session as UNENFORCED instead.
#[test]
fn under_auto_claim_an_unenforced_session_still_claims() {
    let (env, [bad, _, unverified]) = home_with_verdicts("auto-claim");
    let r = env.run(&["claim", "--instance", &bad, "src/a.rs"]);
    r.code(0);
    assert!(!r.stderr.contains("warning"), "{r:?}");
    let v = pre_write(&env, UNENFORCED, "src/b.rs");
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert_eq!(
        held(&env, &bad),
        json!([env.abs("src/a.rs"), env.abs("src/b.rs")])
    );
    let r = env.run(&["claim", "--instance", &unverified, "src/d.rs"]);
    r.code(0);
    assert!(!r.stderr.contains("warning"), "{r:?}");
    assert!(
        env.run(&["status"])
            .stdout
            .contains("claude 3.0.0 · UNENFORCED: ")
    );
}
