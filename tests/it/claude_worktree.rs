//! Claude Code's `WorktreeCreate` and `WorktreeRemove` hooks (issue 32, section 2): the real
//! binary gets the payloads Claude Code 2.1.197 sends (`name`; `worktree_path`), on real
//! repositories made with the system's git. Create makes the worktree with git where Claude Code
//! would (`.claude/worktrees/NAME`, branch `worktree-NAME`), registers the session there and
//! prints the path alone; remove deletes only what holds no work; bad input is one error line
//! and a hint, with nothing written. The real Claude Code runs these hooks in
//! `e2e_agents::claude_code_in_its_own_worktree_*`.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;
use crate::worktrees::{git, repo};

fn create(env: &TestEnv, cwd: &Path, session: &str, name: &str) -> Run {
    env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": session, "cwd": cwd, "hook_event_name": "WorktreeCreate",
                "name": name, "transcript_path": "/dev/null"})
        .to_string(),
    )
}

fn remove(env: &TestEnv, path: &Path, session: &str) -> Run {
    env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": session, "cwd": path, "hook_event_name": "WorktreeRemove",
                "worktree_path": path})
        .to_string(),
    )
}

/// The worktree roots `git worktree list` names.
fn listed(repo: &Path) -> Vec<String> {
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

fn instances_of(env: &TestEnv, session: &str) -> Vec<Value> {
    env.state()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["session_id"] == json!(session))
        .cloned()
        .collect()
}

#[test]
fn worktree_create_makes_a_git_worktree_registers_the_session_and_prints_its_path() {
    let env = TestEnv::new();
    let app = repo(&env, "app");
    // The project's integration, not committed: git does not bring it to the worktree.
    env.run_in(&app, &["integrate", "claude"]).code(0);
    let settings = std::fs::read_to_string(app.join(".claude/settings.json")).unwrap();
    for event in ["WorktreeCreate", "WorktreeRemove"] {
        assert!(
            settings.contains(&format!("\"{event}\"")),
            "integrate installs the {event} hook: {settings}"
        );
    }

    // Git-ignored files `.worktreeinclude` names come along (Claude Code copies them itself only
    // when no hook replaces its creation); other untracked files do not.
    std::fs::write(app.join(".gitignore"), ".env\nbuild/\n").unwrap();
    std::fs::write(app.join(".worktreeinclude"), ".env\n").unwrap();
    std::fs::write(app.join(".env"), "KEY=1\n").unwrap();
    std::fs::create_dir_all(app.join("build")).unwrap();
    std::fs::write(app.join("build/out"), "x").unwrap();
    std::fs::write(app.join("scratch.txt"), "x").unwrap();

    let r = create(&env, &app, "sess-1", "feature/x");
    r.code(0);
    let path = app.join(".claude/worktrees/feature+x");
    // Claude Code takes the last line of stdout as the path: it is the only one.
    assert_eq!(r.stdout, format!("{}\n", path.display()), "{r:?}");
    assert_eq!(
        listed(&app),
        [app.display().to_string(), path.display().to_string()]
    );
    assert_eq!(
        git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "worktree-feature+x"
    );
    assert_eq!(
        git(&path, &["rev-parse", "HEAD"]),
        git(&app, &["rev-parse", "HEAD"])
    );
    assert!(path.join("src/x.rs").is_file());
    // Claude Code reads the session's settings in the worktree: conductor's are there.
    assert_eq!(
        std::fs::read_to_string(path.join(".claude/settings.json")).unwrap(),
        settings
    );
    assert!(path.join(".mcp.json").is_file());
    assert_eq!(
        std::fs::read_to_string(path.join(".env")).unwrap(),
        "KEY=1\n"
    );
    assert!(!path.join("build/out").exists() && !path.join("scratch.txt").exists());

    // The session is registered with the worktree before Claude Code starts it there.
    let mine = instances_of(&env, "sess-1");
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(
        mine[0]["working_directory"],
        json!(path.display().to_string())
    );
    assert_eq!(mine[0]["agent"], "claude");
    let id = mine[0]["id"].as_str().unwrap().to_string();
    let status = env.run(&["status"]);
    assert!(
        status.stdout.contains(&format!("in {}", path.display())),
        "{status:?}"
    );
    // Its SessionStart (cwd: the worktree) finds that instance.
    let s = env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": "sess-1", "cwd": path, "hook_event_name": "SessionStart",
                "source": "startup"})
        .to_string(),
    );
    s.code(0);
    assert!(s.stdout.contains(&id), "{s:?}");
    assert!(
        s.stdout.contains(&format!(
            "This session works in the git worktree {} (branch worktree-feature+x); the repository's other worktrees: {} (branch main).",
            path.display(),
            app.display()
        )),
        "{s:?}"
    );
    assert_eq!(instances_of(&env, "sess-1").len(), 1);

    // `claude --worktree feature/x` again: the same worktree, nothing new.
    let again = create(&env, &app, "sess-2", "feature/x");
    again.code(0);
    assert_eq!(again.stdout, format!("{}\n", path.display()));
    assert_eq!(listed(&app).len(), 2);

    // A claim in the main checkout covers the same file in the new worktree (section 1).
    let other = env.start("other", "P2");
    env.run(&[
        "claim",
        "--instance",
        &other,
        app.join("src/x.rs").to_str().unwrap(),
    ])
    .code(0);
    let edit = env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": "sess-1", "cwd": path, "hook_event_name": "PreToolUse",
                "tool_name": "Edit", "tool_input": {"file_path": path.join("src/x.rs")}})
        .to_string(),
    );
    edit.code(0);
    let v: Value = serde_json::from_str(edit.stdout.trim()).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "deny",
        "{edit:?}"
    );
    assert!(
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains(&other),
        "{edit:?}"
    );

    // uninstall takes the worktree hooks away with the others.
    env.run_in(&app, &["integrate", "claude", "--uninstall"])
        .code(0);
    let left = std::fs::read_to_string(app.join(".claude/settings.json")).unwrap_or_default();
    assert!(!left.contains("Worktree"), "{left}");
}

#[test]
fn worktree_remove_deletes_only_a_worktree_whose_work_is_safe_elsewhere() {
    let env = TestEnv::new();
    let app = repo(&env, "app");
    create(&env, &app, "sess-1", "fix").code(0);
    let path = app.join(".claude/worktrees/fix");

    // An untracked file: kept, and said so in one error line and a hint.
    std::fs::write(path.join("notes.txt"), "mine\n").unwrap();
    let r = remove(&env, &path, "sess-1");
    r.code(2);
    assert!(r.error_and_hint(), "{r:?}");
    assert!(
        r.stderr.contains("kept the worktree") && r.stderr.contains("notes.txt"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("notes.txt")).unwrap(),
        "mine\n"
    );
    std::fs::remove_file(path.join("notes.txt")).unwrap();

    // A commit no other branch has: kept, branch and all.
    std::fs::write(path.join("src/x.rs"), "fn fixed() {}\n").unwrap();
    git(&path, &["commit", "-q", "-am", "fix"]);
    let r = remove(&env, &path, "sess-1");
    r.code(2);
    assert!(r.error_and_hint(), "{r:?}");
    assert!(
        r.stderr
            .contains("1 commit on branch worktree-fix that no other branch has"),
        "{r:?}"
    );
    assert!(path.join("src/x.rs").is_file());
    assert_eq!(listed(&app).len(), 2);

    // Merged: the worktree and its branch go, the commit stays on main.
    git(&app, &["merge", "-q", "worktree-fix"]);
    remove(&env, &path, "sess-1").code(0);
    assert!(!path.exists());
    assert_eq!(listed(&app), [app.display().to_string()]);
    assert!(
        git(&app, &["branch", "--list", "worktree-fix"])
            .trim()
            .is_empty()
    );
    assert_eq!(
        std::fs::read_to_string(app.join("src/x.rs")).unwrap(),
        "fn fixed() {}\n"
    );
    // Gone already: nothing to do.
    remove(&env, &path, "sess-1").code(0);

    // No commits at all, nothing changed: removed.
    // ... unless another live session works in it.
    create(&env, &app, "sess-2", "idle").code(0);
    let idle = app.join(".claude/worktrees/idle");
    let busy = env.run_in(&idle, &["--json", "start", "busy", "--priority", "P2"]);
    let busy = busy.json()["instance_id"].as_str().unwrap().to_string();
    let r = remove(&env, &idle, "sess-2");
    r.code(2);
    assert!(r.error_and_hint(), "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "1 other live session working in it ({busy} (task \"busy\"))"
        )),
        "{r:?}"
    );
    assert!(idle.is_dir());
    env.run(&["done", "--instance", &busy]).code(0);
    remove(&env, &idle, "sess-2").code(0);
    assert_eq!(listed(&app).len(), 1);

    // The main worktree is never removed.
    let r = remove(&env, &app, "sess-1");
    r.code(2);
    assert!(r.error_and_hint(), "{r:?}");
    assert!(r.stderr.contains("is not a linked git worktree"), "{r:?}");
    assert!(app.join("src/x.rs").is_file());
}

#[test]
fn bad_worktree_input_is_one_error_line_and_a_hint_with_nothing_written() {
    let env = TestEnv::new();
    let app = repo(&env, "app");
    git(&app, &["branch", "worktree-taken"]);
    let empty = env.dir("empty");
    git(&empty, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(app.join(".claude/worktrees/squat")).unwrap();
    std::fs::write(app.join(".claude/worktrees/squat/keep.txt"), "x").unwrap();
    let plain = env.dir("plain");
    let bare = env.dir("bare.git");
    git(&bare, &["init", "-q", "--bare"]);

    let cases: [(&Path, &str, &str); 6] = [
        (&bare, "x", "is a bare repository"),
        (&plain, "x", "is not inside a git repository"),
        (&app, "taken", "the branch `worktree-taken` exists already"),
        (&empty, "x", "has no commits yet"),
        (&app, "../up", "the worktree name `../up`"),
        (
            &app,
            "squat",
            "exists and is not a worktree of this repository",
        ),
    ];
    for (cwd, name, says) in cases {
        let home = env.snapshot();
        let before = listed(&app);
        let r = create(&env, cwd, "sess", name);
        assert_eq!(r.code, 2, "{name}: {r:?}");
        assert!(r.error_and_hint(), "{name}: {r:?}");
        assert!(r.stderr.contains(says), "{name}: {r:?}");
        assert!(r.stdout.is_empty(), "{name}: no path on stdout: {r:?}");
        assert_eq!(env.snapshot(), home, "{name}: the home is unchanged");
        assert_eq!(listed(&app), before, "{name}: no worktree");
    }
    assert!(!plain.join(".claude").exists());
    assert!(!empty.join(".claude").exists());
    assert_eq!(
        std::fs::read_dir(app.join(".claude/worktrees"))
            .unwrap()
            .count(),
        1,
        "only the squatter's directory"
    );
    assert_eq!(
        std::fs::read_to_string(app.join(".claude/worktrees/squat/keep.txt")).unwrap(),
        "x"
    );
}

#[test]
fn doctor_reports_the_worktree_hooks_and_their_absence() {
    let env = TestEnv::new();
    let app = repo(&env, "app");
    env.run_in(&app, &["integrate", "claude"]).code(0);
    let d = env.run_in(&app, &["doctor"]);
    assert!(
        d.stdout
            .contains("the WorktreeCreate and WorktreeRemove hooks are installed"),
        "{d:?}"
    );
    // Settings from before conductor had them.
    let path = app.join(".claude/settings.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["hooks"].as_object_mut().unwrap().remove("WorktreeCreate");
    std::fs::write(&path, v.to_string()).unwrap();
    let d = env.run_in(&app, &["doctor"]);
    assert!(
        d.stdout.contains(
            "no conductor WorktreeCreate hook: `claude --worktree` sessions are not registered"
        ),
        "{d:?}"
    );
    assert!(d.stdout.contains("conductor integrate claude"), "{d:?}");
    // integrate again puts it back.
    env.run_in(&app, &["integrate", "claude"]).code(0);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("WorktreeCreate")
    );
}

/// Claude Code's hooks reference spells the payload `worktree_name`, `base_path` and
/// `source_ref`, which neither 2.1.197 nor 2.1.332 sends: read when they come.
#[test]
fn the_documented_payload_spelling_is_read_too() {
    let env = TestEnv::new();
    let app = repo(&env, "app");
    git(&app, &["branch", "release"]);
    git(&app, &["commit", "-q", "--allow-empty", "-m", "later"]);
    let r = env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": "s", "cwd": app, "hook_event_name": "WorktreeCreate",
                "worktree_name": "doc", "base_path": ".worktrees", "source_ref": "release"})
        .to_string(),
    );
    r.code(0);
    let path = app.join(".worktrees/doc");
    assert_eq!(r.stdout, format!("{}\n", path.display()));
    assert_eq!(
        git(&path, &["rev-parse", "HEAD"]),
        git(&app, &["rev-parse", "release"])
    );
    let r = env.run_stdin(
        &["hook", "claude"],
        &json!({"session_id": "s", "cwd": app, "hook_event_name": "WorktreeCreate",
                "worktree_name": "bad", "source_ref": "nope"})
        .to_string(),
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.error_and_hint() && r.stderr.contains("`nope` names no commit"),
        "{r:?}"
    );
    assert!(!app.join(".claude/worktrees/bad").exists());
}
