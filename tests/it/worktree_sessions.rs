//! A worktree per session, and claims that last until the change lands (docs/protocol.md,
//! "Agents in worktrees"): `start --worktree` makes a real git worktree and branch, `done`
//! removes it only when nothing is left to land, and a finished branch's files stay `landing`
//! until a real `git merge`, the branch's deletion, or `release --force --reason`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;
use crate::worktrees::{git, repo};

/// `start --worktree NAME` in `dir` with --json: the instance id and the new worktree.
#[track_caller]
fn start_wt(env: &TestEnv, dir: &Path, task: &str, name: &str) -> (String, PathBuf) {
    let r = env.exec_in(
        dir,
        &[
            "--json",
            "start",
            task,
            "--project",
            "app",
            "--priority",
            "P1",
            "--worktree",
            name,
        ],
    );
    r.code(0);
    let v = r.json();
    assert_eq!(v["branch"], name, "{v}");
    let path = PathBuf::from(v["worktree"].as_str().expect("worktree path"));
    (v["instance_id"].as_str().unwrap().to_string(), path)
}

fn branches(repo: &Path) -> String {
    git(repo, &["branch", "--list", "--format=%(refname:short)"])
}

fn commit(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["commit", "-q", "-am", "change"]);
}

fn landing(env: &TestEnv) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.home_file("landing.json")).unwrap()).unwrap()
}

#[test]
fn start_worktree_makes_a_worktree_and_a_branch_and_works_there() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let (id, path) = start_wt(&env, &main, "Refunds", "feature/refunds");
    // Beside the repository: <main checkout>.worktrees/NAME, a `/` made `-`.
    assert_eq!(
        path,
        main.with_file_name("app.worktrees").join("feature-refunds")
    );
    assert!(path.join("src/x.rs").is_file());
    assert!(branches(&main).lines().any(|b| b == "feature/refunds"));
    let list = git(&main, &["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("worktree {}", path.display())),
        "{list}"
    );
    assert_eq!(
        git(&path, &["symbolic-ref", "--short", "HEAD"]).trim(),
        "feature/refunds"
    );
    // The session works in it.
    assert_eq!(
        env.instance(&id).unwrap()["working_directory"],
        path.to_str().unwrap()
    );
    // Without NAME: a generated branch; the text says where to cd.
    let r = env.exec_in(&main, &["start", "Other", "--priority", "P1", "--worktree"]);
    r.code(0);
    assert!(r.stdout.contains("Working in the new worktree "), "{r:?}");
    assert!(
        branches(&main).lines().any(|b| b.starts_with("session-")),
        "{}",
        branches(&main)
    );
}

#[test]
fn start_worktree_refuses_bad_input_and_writes_nothing() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    git(&main, &["branch", "taken"]);
    let plain = env.dir("plain");
    let bare = env.dir("bare.git");
    git(&bare, &["init", "-q", "--bare"]);
    let empty = env.dir("empty");
    git(&empty, &["init", "-q", "-b", "main"]);
    // One session exists, so the home has files to compare.
    env.start_in(&main, "app", "A", "P1");
    let before = env.snapshot();
    let branches_before = branches(&main);
    struct Bad<'a> {
        dir: &'a Path,
        name: &'a str,
        reason: &'a str,
    }
    let cases = [
        Bad {
            dir: &plain,
            name: "w",
            reason: "not_a_repository",
        },
        Bad {
            dir: &bare,
            name: "w",
            reason: "bare_repository",
        },
        Bad {
            dir: &empty,
            name: "w",
            reason: "no_commits",
        },
        Bad {
            dir: &main,
            name: "taken",
            reason: "branch_exists",
        },
        Bad {
            dir: &main,
            name: "bad..name",
            reason: "invalid_input",
        },
    ];
    for Bad { dir, name, reason } in cases {
        let args = [
            "--json",
            "start",
            "T",
            "--priority",
            "P1",
            "--worktree",
            name,
        ];
        env.exec_in(dir, &args).reason(2, reason);
        let r = env.run_in(dir, &args[1..]);
        assert!(r.error_and_hint(), "{r:?}");
        assert_eq!(env.snapshot(), before, "{reason}: the home is unchanged");
    }
    // No worktree, branch or holder directory was made.
    assert_eq!(branches(&main), branches_before);
    assert_eq!(
        git(&main, &["worktree", "list"]).lines().count(),
        1,
        "only the main checkout"
    );
    for holder in [
        "app.worktrees",
        "plain.worktrees",
        "bare.worktrees",
        "empty.worktrees",
    ] {
        assert!(!main.with_file_name(holder).exists(), "{holder}");
    }
}

#[test]
fn start_worktree_from_a_detached_head_branches_from_that_commit() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let head = git(&main, &["rev-parse", "HEAD"]);
    git(&main, &["checkout", "-q", "--detach"]);
    let (_, path) = start_wt(&env, &main, "D", "from-detached");
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), head);
}

#[test]
fn done_removes_a_clean_or_merged_worktree_and_keeps_one_with_work_left() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    // No changes: removed, worktree and branch.
    let (a, pa) = start_wt(&env, &main, "Clean", "clean");
    let v = env.exec(&["--json", "done", "--instance", &a]).json();
    assert_eq!(v["worktree"]["removed"], true, "{v}");
    assert!(!pa.exists());
    assert!(!branches(&main).lines().any(|b| b == "clean"));
    // Merged into main: removed too.
    let (m, pm) = start_wt(&env, &main, "Merged", "merged");
    commit(&pm, "src/y.rs", "fn y() { 1 }\n");
    git(&main, &["merge", "-q", "merged"]);
    let v = env.exec(&["--json", "done", "--instance", &m]).json();
    assert_eq!(v["worktree"]["removed"], true, "{v}");
    assert!(v.get("landing").is_none(), "nothing left to land: {v}");
    assert!(!pm.exists());
    assert!(!branches(&main).lines().any(|b| b == "merged"));
    // A commit not merged and an uncommitted file: kept, and told what is left and how.
    let (d, pd) = start_wt(&env, &main, "Dirty", "dirty");
    commit(&pd, "src/x.rs", "fn x() { 2 }\n");
    std::fs::write(pd.join("notes.txt"), "draft\n").unwrap();
    let r = env.exec(&["done", "--instance", &d]);
    r.code(0);
    assert!(
        r.stdout.contains(&format!(
            "Kept its worktree {} (branch dirty): 1 commit not merged into main, 1 file uncommitted. Nothing was deleted.",
            pd.display()
        )),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(&format!("git worktree remove {}", pd.display())),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(pd.join("notes.txt")).unwrap(),
        "draft\n"
    );
    assert!(branches(&main).lines().any(|b| b == "dirty"));
    // The JSON says the same.
    let (j, pj) = start_wt(&env, &main, "Json", "json");
    std::fs::write(pj.join("new.txt"), "x\n").unwrap();
    let v = env.exec(&["--json", "done", "--instance", &j]).json();
    assert_eq!(v["worktree"]["removed"], false, "{v}");
    assert_eq!(v["worktree"]["uncommitted_files"], 1, "{v}");
    assert_eq!(v["worktree"]["commits_not_merged"], 0, "{v}");
    assert!(pj.join("new.txt").is_file());
}

/// A session that finished in worktree `feat` with a commit changing src/x.rs, and a session
/// `a` in the main checkout.
fn landed_setup() -> (TestEnv, PathBuf, PathBuf, String) {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let (b, pb) = start_wt(&env, &main, "Feature", "feat");
    commit(&pb, "src/x.rs", "fn x() { 3 }\n");
    let v = env.exec(&["--json", "done", "--instance", &b]).json();
    assert_eq!(v["landing"]["branch"], "feat", "{v}");
    assert_eq!(
        v["landing"]["files"],
        serde_json::json!(["src/x.rs"]),
        "{v}"
    );
    assert_eq!(v["worktree"]["removed"], false, "{v}");
    let a = env.start_in(&main, "app", "Main", "P1");
    (env, main, pb, a)
}

fn block_foreign(env: &TestEnv) {
    env.write_home("config.json", r#"{"enforce": "block-foreign"}"#);
}

#[test]
fn a_landing_file_gives_another_worktree_a_notice_or_a_refusal_under_block_foreign() {
    let (env, main, pb, a) = landed_setup();
    let x = main.join("src/x.rs").to_string_lossy().into_owned();
    // A notice naming the branch that must land first; the claim succeeds.
    let r = env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"]);
    r.code(0);
    assert!(
        r.stdout.contains(&format!(
            "Note: src/x.rs is landing: branch feat (worktree {}, finished by",
            pb.display()
        )),
        "{r:?}"
    );
    assert!(r.stdout.contains("must land in main first"), "{r:?}");
    let v = env
        .exec_in(&main, &["--json", "claim", "--instance", &a, "src/x.rs"])
        .json();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["landing"][0]["branch"], "feat", "{v}");
    assert_eq!(v["landing"][0]["refused"], false, "{v}");
    env.exec_in(&main, &["release", "--instance", &a, "src/x.rs"])
        .code(0);
    // Under block-foreign: refused, nothing claimed; other files are free.
    block_foreign(&env);
    let r = env.exec_in(
        &main,
        &["--json", "claim", "--instance", &a, "src/x.rs", "src/y.rs"],
    );
    r.code(3);
    let v = r.json();
    assert_eq!(v["status"], "conflict", "{v}");
    assert_eq!(v["landing"][0]["file"], x.as_str(), "{v}");
    assert_eq!(v["landing"][0]["refused"], true, "{v}");
    assert_eq!(
        v["claimed"],
        serde_json::json!([main.join("src/y.rs").to_string_lossy()])
    );
    assert!(env.state()["global_claims"].get(&x).is_none());
    let r = env.exec_in(&main, &["claim", "--instance", &a, "src/"]);
    r.code(3);
    assert!(
        r.stdout.contains("LANDING: src/ is landing: branch feat"),
        "{r:?}"
    );
    // Still landing: the entry stays, and status shows what is landing and where.
    assert_eq!(landing(&env)["landing"][0]["branch"], "feat");
    let v = env.exec(&["--json", "status"]).json();
    assert_eq!(v["landing"][0]["branch"], "feat", "{v}");
    assert_eq!(v["landing"][0]["worktree"], pb.to_str().unwrap(), "{v}");
    assert_eq!(v["landing"][0]["files"], serde_json::json!(["src/x.rs"]));
    let r = env.exec(&["status"]);
    assert!(
        r.stdout
            .contains("Landing (reserved until merged or deleted):"),
        "{r:?}"
    );
    assert!(r.stdout.contains("  branch feat → main in "), "{r:?}");
}

#[test]
fn merging_the_branch_lands_its_files() {
    let (env, main, _pb, a) = landed_setup();
    block_foreign(&env);
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(3);
    git(&main, &["merge", "-q", "feat"]);
    let v = env
        .exec_in(&main, &["--json", "claim", "--instance", &a, "src/x.rs"])
        .json();
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v.get("landing").is_none(), "{v}");
    assert_eq!(landing(&env)["landing"], serde_json::json!([]));
    let h = env.history();
    let last = h.last().unwrap();
    assert_eq!(last["outcome"], "landed", "{h:?}");
    assert_eq!(last["notes"], "branch feat landed: merged into main");
    let v = env
        .exec(&["--json", "history", "--outcome", "landed"])
        .json();
    assert_eq!(v["entries"].as_array().unwrap().len(), 1, "{v}");
}

#[test]
fn deleting_the_branch_lands_its_files() {
    let (env, main, pb, a) = landed_setup();
    block_foreign(&env);
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(3);
    git(
        &main,
        &["worktree", "remove", "--force", pb.to_str().unwrap()],
    );
    git(&main, &["branch", "-D", "feat"]);
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    assert_eq!(landing(&env)["landing"], serde_json::json!([]));
    assert_eq!(
        env.history().last().unwrap()["notes"],
        "branch feat landed: the branch was deleted"
    );
}

#[test]
fn a_person_releases_landing_files_with_force_and_a_reason() {
    let (env, main, pb, a) = landed_setup();
    block_foreign(&env);
    // Without a reason: refused, nothing changed.
    let before = env.snapshot();
    env.exec_in(&main, &["--json", "release", "--force", "src/x.rs"])
        .reason(2, "invalid_input");
    assert_eq!(env.snapshot(), before);
    let v = env
        .exec_in(
            &main,
            &[
                "--json", "release", "--force", "--reason", "ship it", "src/x.rs",
            ],
        )
        .json();
    assert_eq!(
        v["released"],
        serde_json::json!([pb.join("src/x.rs").to_string_lossy()]),
        "{v}"
    );
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let v = env
        .exec(&["--json", "history", "--outcome", "landed"])
        .json();
    assert_eq!(
        v["entries"][0]["notes"], "branch feat released by hand: ship it",
        "{v}"
    );
    assert!(
        env.log()
            .iter()
            .any(|l| l.contains("RELEASE") && l.contains("ship it")),
        "{:?}",
        env.log()
    );
}

/// Any session on a side branch leaves its files landing, in a worktree it did not make too;
/// one on the integration branch leaves nothing.
#[test]
fn a_session_on_a_side_branch_of_any_worktree_leaves_its_files_landing() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let b = crate::worktrees::worktree(&main, "app-b", "side");
    let s = env.start_in(&b, "app", "Side", "P1");
    std::fs::write(b.join("lib/z.rs"), "fn z() { 1 }\n").unwrap();
    let v = env.exec(&["--json", "done", "--instance", &s]).json();
    assert_eq!(v["landing"]["branch"], "side", "{v}");
    assert_eq!(v["landing"]["files"], serde_json::json!(["lib/z.rs"]));
    assert!(
        v.get("worktree").is_none(),
        "not its worktree to remove: {v}"
    );
    assert!(b.join("lib/z.rs").is_file());
    // On main: nothing lands, and nothing is written for it.
    let m = env.start_in(&main, "app", "Main", "P1");
    std::fs::write(main.join("src/y.rs"), "fn y() { 1 }\n").unwrap();
    let v = env.exec(&["--json", "done", "--instance", &m]).json();
    assert!(v.get("landing").is_none(), "{v}");
    assert_eq!(landing(&env)["landing"].as_array().unwrap().len(), 1);
    // A home that never used worktrees has no landing.json.
    let plain = TestEnv::new();
    let p = plain.start("P", "P1");
    plain.exec(&["done", "--instance", &p]).code(0);
    assert!(!plain.home_file("landing.json").exists());
}

/// `export` and `import` carry what is landing to another home.
#[test]
fn landing_moves_with_export_and_import() {
    let (env, main, _pb, a) = landed_setup();
    let bundle = env.dir("out").join("bundle.json");
    env.run(&["export", bundle.to_str().unwrap()]).code(0);
    let fresh = TestEnv::new();
    fresh.run(&["import", bundle.to_str().unwrap()]).code(0);
    assert_eq!(landing(&fresh), landing(&env));
    // The imported home gives the same notice.
    let v = fresh
        .exec_in(&main, &["--json", "claim", "--instance", &a, "src/x.rs"])
        .json();
    assert_eq!(v["landing"][0]["branch"], "feat", "{v}");
}
