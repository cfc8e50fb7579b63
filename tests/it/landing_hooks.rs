//! Edits of landing files (docs/protocol.md, "Agents in worktrees"): an agent's edit hook tells
//! the model which branch must land first (its worktree, the session that finished it, the
//! base), refuses the edit under `enforce = "block-foreign"`, and forgets the branch once a real
//! `git merge` landed it. Real repositories and worktrees made with the system's git.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;
use crate::worktrees::{git, repo};

/// A Claude Code PreToolUse payload: session `sid` in `dir` edits `file`; the hook's output.
#[track_caller]
fn edit(env: &TestEnv, sid: &str, dir: &Path, file: &Path) -> Value {
    let payload = json!({"session_id": sid, "cwd": dir, "hook_event_name": "PreToolUse",
        "tool_name": "Edit", "permission_mode": "default",
        "tool_input": {"file_path": file, "old_string": "fn x() {}", "new_string": "fn x() -> u8 { 1 }"}});
    let r = env.run_stdin(&["hook", "claude"], &payload.to_string());
    r.code(0);
    if r.stdout.trim().is_empty() {
        return Value::Null;
    }
    r.json()
}

fn context(v: &Value) -> String {
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn landing(env: &TestEnv) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.home_file("landing.json")).unwrap()).unwrap()
}

/// Repository `app` (main) and a session that worked in worktree `feat` (made by
/// `start --worktree`), committed a change of src/x.rs there and finished: src/x.rs is landing.
/// Returns the main checkout, the worktree and the finished session's id.
fn setup(env: &TestEnv) -> (PathBuf, PathBuf, String) {
    let main = repo(env, "app");
    let r = env.exec_in(
        &main,
        &[
            "--json",
            "start",
            "Feature",
            "--project",
            "app",
            "--priority",
            "P1",
            "--worktree",
            "feat",
        ],
    );
    r.code(0);
    let v = r.json();
    let b = v["instance_id"].as_str().unwrap().to_string();
    let wt = PathBuf::from(v["worktree"].as_str().unwrap());
    std::fs::write(wt.join("src/x.rs"), "fn x() { 3 }\n").unwrap();
    git(&wt, &["commit", "-q", "-am", "feat"]);
    let v = env.exec(&["--json", "done", "--instance", &b]).json();
    assert_eq!(v["landing"]["files"], json!(["src/x.rs"]), "{v}");
    (main, wt, b)
}

#[test]
fn an_edit_of_a_landing_file_is_told_which_branch_must_land_first() {
    let env = TestEnv::new();
    let (main, wt, b) = setup(&env);
    let x = main.join("src/x.rs");
    let v = edit(&env, "sess-a", &main, &x);
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    let told = context(&v);
    assert!(
        told.contains(&format!(
            "{} is landing: branch feat (worktree {}, finished by session {b} \"Feature\") changed it and must land in main first",
            x.display(),
            wt.display()
        )),
        "{v}"
    );
    // A file no branch holds gets no landing notice (it is claimed as usual).
    let v = edit(&env, "sess-a", &main, &main.join("src/y.rs"));
    let told = context(&v);
    assert!(!told.contains("is landing"), "{v}");
    assert!(told.contains("now claimed for this session"), "{v}");
    // The worktree the branch was worked in is its own: no landing notice there.
    let v = edit(&env, "sess-b", &wt, &wt.join("src/x.rs"));
    assert!(!context(&v).contains("is landing"), "{v}");
}

#[test]
fn block_foreign_refuses_the_edit_naming_the_branch_until_it_is_merged() {
    let env = TestEnv::new();
    let (main, wt, b) = setup(&env);
    env.write_home("config.json", r#"{"enforce": "block-foreign"}"#);
    let x = main.join("src/x.rs");
    let v = edit(&env, "sess-a", &main, &x);
    let out = &v["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "deny", "{v}");
    let why = out["permissionDecisionReason"].as_str().unwrap();
    assert!(
        why.starts_with(&format!(
            "BLOCKED: enforce is block-foreign and {} is landing: branch feat (worktree {}, finished by session {b}",
            x.display(),
            wt.display()
        )),
        "{why}"
    );
    assert!(why.contains("must land in main first"), "{why}");
    // Nothing was claimed for it, and the entry stays.
    assert!(
        !env.home_file("status.json").exists()
            || env.state()["global_claims"]
                .get(x.to_str().unwrap())
                .is_none()
    );
    assert_eq!(landing(&env)["landing"][0]["branch"], "feat");
    // Merged with real git: the edit is allowed with no landing notice, the entry is dropped
    // and history says how the branch landed.
    git(&main, &["merge", "-q", "feat"]);
    let v = edit(&env, "sess-a", &main, &x);
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert!(!context(&v).contains("is landing"), "{v}");
    assert_eq!(landing(&env)["landing"], json!([]));
    let h = env.history();
    assert_eq!(
        h.last().unwrap()["notes"],
        "branch feat landed: merged into main",
        "{h:?}"
    );
}

#[test]
fn top_lists_what_is_landing_and_where() {
    let env = TestEnv::new();
    let (main, wt, b) = setup(&env);
    // (`top --once` draws `·` as `-` and `→` as `>` outside a UTF-8 locale.)
    let top = env
        .run(&["top", "--once", "--size", "160x40"])
        .stdout
        .replace('·', "-")
        .replace('→', ">");
    assert!(
        top.contains("Landing (reserved until merged or deleted)"),
        "{top}"
    );
    let want = format!(
        "branch feat > main - worktree {} - finished by {b} \"Feature\" - 1 file",
        wt.display()
    );
    let row = top
        .lines()
        .position(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("{want} in\n{top}"));
    assert!(
        top.lines().nth(row + 1).unwrap().contains("    src/x.rs"),
        "{top}"
    );
    // Once the branch is merged and a claim found it landed, top no longer lists it.
    git(&main, &["merge", "-q", "feat"]);
    let a = env.start_in(&main, "app", "Main", "P1");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let top = env.run(&["top", "--once", "--size", "160x40"]);
    top.code(0);
    assert!(top.stdout.contains(&a), "{top:?}");
    assert!(!top.stdout.contains("Landing"), "{top:?}");
}
