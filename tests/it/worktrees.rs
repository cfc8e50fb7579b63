//! One repository, many worktrees (docs/protocol.md, "Agents in worktrees"): a claim in one git
//! worktree covers the same path in every other worktree of the repository, on real
//! repositories made with the system's git (Debian's 2.47 on the CI image).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// Run git in `dir` with a private configuration; panics unless it succeeds.
#[track_caller]
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository `name` on branch `main` with one commit (src/x.rs, src/y.rs, lib/z.rs).
pub(crate) fn repo(env: &TestEnv, name: &str) -> PathBuf {
    let dir = env.dir(name);
    git(&dir, &["init", "-q", "-b", "main"]);
    for f in ["src/x.rs", "src/y.rs", "lib/z.rs"] {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "fn x() {}\n").unwrap();
    }
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    dir
}

/// A linked worktree of `repo` at `../name` on a new branch `branch`.
pub(crate) fn worktree(repo: &Path, name: &str, branch: &str) -> PathBuf {
    let path = repo.parent().unwrap().join(name);
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            branch,
            path.to_str().unwrap(),
        ],
    );
    std::fs::canonicalize(path).unwrap()
}

/// The main checkout `app` (branch main) and a linked worktree `app-b` (branch feature/b).
fn two_worktrees() -> (TestEnv, PathBuf, PathBuf) {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let b = worktree(&main, "app-b", "feature/b");
    (env, main, b)
}

fn start(env: &TestEnv, dir: &Path, task: &str) -> String {
    env.start_in(dir, "app", task, "P1")
}

fn p(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

#[test]
fn a_claim_in_one_worktree_refuses_the_same_file_in_another_naming_worktree_and_branch() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    // The scenario: B is refused, and told where A works.
    let r = env.exec_in(&b, &["claim", "--instance", &bb, "src/x.rs"]);
    r.code(3);
    assert!(
        r.stdout.contains(&format!(
            "src/x.rs is the same file as {}, which {a} (A) in the worktree {} (branch main) holds",
            p(&main, "src/x.rs"),
            main.display()
        )),
        "{r:?}"
    );
    let v = env
        .exec_in(&b, &["--json", "claim", "--instance", &bb, "src/x.rs"])
        .json();
    let c = &v["conflicts"][0];
    assert_eq!(c["file"], p(&b, "src/x.rs"), "{v}");
    assert_eq!(c["held_by"], a.as_str());
    assert_eq!(c["held_claim"], p(&main, "src/x.rs"));
    assert_eq!(c["holder_worktree"], main.to_str().unwrap());
    assert_eq!(c["holder_branch"], "main");
    // And the other way round, naming B's branch.
    env.exec_in(&b, &["claim", "--instance", &bb, "src/y.rs"])
        .code(0);
    let v = env
        .exec_in(&main, &["--json", "claim", "--instance", &a, "src/y.rs"])
        .json();
    assert_eq!(v["conflicts"][0]["holder_branch"], "feature/b", "{v}");
    assert_eq!(
        v["conflicts"][0]["holder_worktree"],
        b.to_str().unwrap(),
        "{v}"
    );
    // status.json keeps absolute keys, each in its holder's worktree.
    assert_eq!(
        env.state()["global_claims"],
        json!({p(&main, "src/x.rs"): a, p(&b, "src/y.rs"): bb})
    );
    // Released in one worktree, free in the other.
    env.exec_in(&main, &["release", "--instance", &a, "src/x.rs"])
        .code(0);
    env.exec_in(&b, &["claim", "--instance", &bb, "src/x.rs"])
        .code(0);
}

#[test]
fn directory_and_glob_claims_cover_every_worktree() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "src/"])
        .code(0);
    let v = env
        .exec_in(&b, &["--json", "claim", "--instance", &bb, "src/new.rs"])
        .json();
    assert_eq!(
        v["conflicts"][0]["held_claim"],
        p(&main, "src") + "/",
        "{v}"
    );
    env.exec_in(&b, &["claim", "--instance", &bb, "src/**/*.rs"])
        .code(3);
    env.exec_in(&b, &["claim", "--instance", &bb, "."]).code(3);
    env.exec_in(&b, &["claim", "--instance", &bb, "lib/z.rs"])
        .code(0);
    env.exec_in(&main, &["release", "--instance", &a, "--all"])
        .code(0);
    // A glob in one worktree against files and directories in the other.
    env.exec_in(&main, &["claim", "--instance", &a, "src/*.rs"])
        .code(0);
    env.exec_in(&b, &["claim", "--instance", &bb, "src/y.rs"])
        .code(3);
    env.exec_in(&b, &["claim", "--instance", &bb, "src/deep/y.rs"])
        .code(0);
    // B's directory claim in its worktree holds A's file there.
    let v = env
        .exec_in(&main, &["--json", "claim", "--instance", &a, "lib/z.rs"])
        .json();
    assert_eq!(v["conflicts"][0]["held_claim"], p(&b, "lib/z.rs"), "{v}");
    env.exec_in(&b, &["release", "--instance", &bb, "--all"])
        .code(0);
    env.exec_in(&b, &["claim", "--instance", &bb, "lib/"])
        .code(0);
    env.exec_in(&main, &["claim", "--instance", &a, "lib/z.rs"])
        .code(3);
}

#[test]
fn unrelated_repositories_and_plain_directories_never_conflict() {
    let env = TestEnv::new();
    let one = repo(&env, "one");
    let two = repo(&env, "two");
    worktree(&two, "two-b", "b");
    let plain = env.dir("plain");
    let plain2 = env.dir("plain2");
    let a = start(&env, &one, "A");
    let b = start(&env, &two, "B");
    let c = start(&env, &plain, "C");
    let d = start(&env, &plain2, "D");
    env.exec_in(&one, &["claim", "--instance", &a, "src/x.rs", "lib/"])
        .code(0);
    env.exec_in(&two, &["claim", "--instance", &b, "src/x.rs", "lib/"])
        .code(0);
    env.exec_in(&plain, &["claim", "--instance", &c, "src/x.rs"])
        .code(0);
    env.exec_in(&plain2, &["claim", "--instance", &d, "src/x.rs"])
        .code(0);
    assert_eq!(env.state()["global_claims"].as_object().unwrap().len(), 6);
}

/// Two sessions in two worktrees claim one file at once, as separate processes, released
/// into the race together (the test holds the state lock until both wait for it): exactly one
/// wins, every round.
#[test]
fn two_sessions_in_two_worktrees_race_for_one_file_and_exactly_one_wins() {
    let (env, main, b) = two_worktrees();
    let ids = [start(&env, &main, "A"), start(&env, &b, "B")];
    let dirs = [&main, &b];
    let mut wins = [0, 0];
    for round in 0..6 {
        let lock = conductor::store::lock::acquire(
            &env.home_file("status.lock"),
            Duration::from_secs(10),
            &|| {},
        )
        .expect("test takes the lock");
        let (tx, rx) = mpsc::channel();
        let mut racers = Vec::new();
        for i in 0..2 {
            let mut child = env
                .cmd()
                .current_dir(dirs[i])
                .args(["--json", "--lock-timeout", "60", "claim", "--instance"])
                .args([&ids[i], "src/x.rs"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn claim");
            let stderr = child.stderr.take().unwrap();
            let tx = tx.clone();
            let reader = std::thread::spawn(move || {
                let mut r = BufReader::new(stderr);
                let (mut all, mut line) = (String::new(), String::new());
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    if line.starts_with("Blocking") {
                        let _ = tx.send(i);
                    }
                    all.push_str(&line);
                    line.clear();
                }
                all
            });
            racers.push((child, reader));
        }
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("both racers wait for the lock");
        }
        drop(lock);
        let mut winners = Vec::new();
        let mut answers = Vec::new();
        for (i, (mut child, reader)) in racers.into_iter().enumerate() {
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            let code = child.wait().unwrap().code();
            let err = reader.join().unwrap();
            let v: Value = serde_json::from_str(out.trim())
                .unwrap_or_else(|e| panic!("racer {i}: {e}: {out} {err}"));
            match code {
                Some(0) => winners.push(i),
                Some(3) => {}
                other => panic!("racer {i} exited {other:?}: {out} {err}"),
            }
            answers.push(v);
        }
        assert_eq!(winners.len(), 1, "round {round}: {answers:#?}");
        let w = winners[0];
        let l = 1 - w;
        assert_eq!(answers[l]["conflicts"][0]["held_by"], ids[w].as_str());
        assert_eq!(
            answers[l]["conflicts"][0]["holder_worktree"],
            dirs[w].to_str().unwrap()
        );
        assert_eq!(
            env.state()["global_claims"],
            json!({p(dirs[w], "src/x.rs"): ids[w]})
        );
        wins[w] += 1;
        env.exec_in(dirs[w], &["release", "--instance", &ids[w], "--all"])
            .code(0);
    }
    check_home(&env.home);
}

/// A waiter in one worktree is handed the file the moment a session in another releases it.
#[test]
fn a_release_hands_the_file_to_a_waiter_in_another_worktree() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let waiter = env
        .cmd()
        .current_dir(&b)
        .args([
            "--json",
            "claim",
            "--wait=60s",
            "--instance",
            &bb,
            "src/x.rs",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(20.0, || {
            env.instance(&bb)
                .is_some_and(|i| i["waiting_for"].as_array().is_some_and(|w| !w.is_empty()))
        }),
        "B waits"
    );
    env.exec_in(&main, &["release", "--instance", &a, "src/x.rs"])
        .code(0);
    let o = waiter.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(env.state()["global_claims"], json!({p(&b, "src/x.rs"): bb}));
}

/// The agents' edit hooks compare paths the same way: a Claude Code session in one worktree is
/// refused an edit of a file a session in another worktree claimed, with its worktree and branch.
#[test]
fn an_agent_hook_refuses_an_edit_held_in_another_worktree() {
    let (env, main, b) = two_worktrees();
    let fixture = |name: &str, dir: &Path| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/hooks/claude")
            .join(format!("{name}.json"));
        std::fs::read_to_string(path)
            .unwrap()
            .replace("/home/user/proj", dir.to_str().unwrap())
    };
    let hook = |name: &str, dir: &Path| env.run_stdin(&["hook", "claude"], &fixture(name, dir));
    hook("session-start-a", &main).code(0);
    // Session A edits src/auth.rs in the main checkout: claimed for it.
    let r = hook("pre-tool-use-edit-a", &main);
    r.code(0);
    assert_eq!(env.state()["global_claims"].as_object().unwrap().len(), 1);
    let holder = env.state()["global_claims"][p(&main, "src/auth.rs")].clone();
    assert!(holder.is_string(), "{:?}", env.state());
    hook("session-start-b", &b).code(0);
    let r = hook("pre-tool-use-write-b", &b);
    let v = r.code(0).json();
    let out = &v["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "deny", "{v}");
    let why = out["permissionDecisionReason"].as_str().unwrap();
    assert!(
        why.contains(&format!(
            "{} (as {} in the worktree {}, branch main) is claimed by {}",
            p(&b, "src/auth.rs"),
            p(&main, "src/auth.rs"),
            main.display(),
            holder.as_str().unwrap()
        )),
        "{why}"
    );
    // Nothing was claimed for B.
    assert_eq!(env.state()["global_claims"].as_object().unwrap().len(), 1);
}

/// Bad input: what git keeps under `.git/` is not shared between worktrees.
#[test]
fn paths_under_dot_git_are_keyed_by_their_absolute_path() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, ".git/info/"])
        .code(0);
    // The same relative path in B's worktree is not the same file (B's `.git` is a file).
    env.exec_in(&b, &["claim", "--instance", &bb, ".git/info/"])
        .code(0);
    assert_eq!(
        env.state()["global_claims"],
        json!({p(&main, ".git/info") + "/": a, p(&b, ".git/info") + "/": bb})
    );
    // A worktree path that only looks like `.git` in a name is shared as usual.
    env.exec_in(&main, &["claim", "--instance", &a, "src/.github.rs"])
        .code(0);
    env.exec_in(&b, &["claim", "--instance", &bb, "src/.github.rs"])
        .code(3);
}

/// Bad input: a worktree whose main repository was moved. Its paths fall back to their absolute
/// path, with a warning that says so and how to repair it; nothing else is written.
#[test]
fn a_worktree_whose_repository_moved_falls_back_to_absolute_paths_with_a_warning() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let moved = main.with_file_name("app-moved");
    std::fs::rename(&main, &moved).unwrap();
    let r = env.exec_in(&b, &["claim", "--instance", &bb, "src/x.rs"]);
    r.code(0);
    assert!(
        r.stderr.starts_with("warning: the git worktree ")
            && r.stderr.contains("does not exist")
            && r.stderr.contains("git worktree repair"),
        "{r:?}"
    );
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    assert_eq!(env.state()["global_claims"][p(&b, "src/x.rs")], bb.as_str());
}

/// Bad input: the worktrees of a bare repository share claims like any other.
#[test]
fn worktrees_of_a_bare_repository_share_claims() {
    let env = TestEnv::new();
    let src = repo(&env, "src-repo");
    let root = env.dir("");
    git(
        &root,
        &["clone", "-q", "--bare", src.to_str().unwrap(), "bare.git"],
    );
    let bare = root.join("bare.git");
    let one = worktree(&bare, "one", "one");
    let two = worktree(&bare, "two", "two");
    let a = start(&env, &one, "A");
    let b = start(&env, &two, "B");
    env.exec_in(&one, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let v = env
        .exec_in(&two, &["--json", "claim", "--instance", &b, "src/x.rs"])
        .json();
    assert_eq!(
        v["conflicts"][0]["holder_worktree"],
        one.to_str().unwrap(),
        "{v}"
    );
    assert_eq!(v["conflicts"][0]["holder_branch"], "one", "{v}");
}

/// Bad input: a detached HEAD is named by its short commit.
#[test]
fn a_detached_worktree_is_named_by_its_short_commit() {
    let (env, main, _) = two_worktrees();
    let d = main.with_file_name("app-detached");
    git(
        &main,
        &["worktree", "add", "-q", "--detach", d.to_str().unwrap()],
    );
    let head = git(&main, &["rev-parse", "--short=7", "HEAD"]);
    let a = start(&env, &d, "A");
    let b = start(&env, &main, "B");
    env.exec_in(&d, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let r = env.exec_in(&main, &["claim", "--instance", &b, "src/x.rs"]);
    r.code(3);
    assert!(
        r.stdout.contains(&format!("(branch {})", head.trim())),
        "{r:?}"
    );
}

/// Bad input: a repository with no commits yet (its branch is unborn) still has worktrees.
#[test]
fn a_repository_with_no_commits_shares_claims_on_its_unborn_branch() {
    let env = TestEnv::new();
    let main = env.dir("empty");
    git(&main, &["init", "-q", "-b", "trunk"]);
    let other = main.with_file_name("empty-b");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "--orphan",
            "-b",
            "b",
            other.to_str().unwrap(),
        ],
    );
    let a = start(&env, &main, "A");
    let b = start(&env, &other, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "new.rs"])
        .code(0);
    let v = env
        .exec_in(&other, &["--json", "claim", "--instance", &b, "new.rs"])
        .json();
    assert_eq!(v["conflicts"][0]["holder_branch"], "trunk", "{v}");
}

/// `overlaps` finds a collision nobody claimed: files changed in two worktrees (committed on
/// their branches, uncommitted, or new), and which pairs git predicts to conflict when merged.
#[test]
fn overlaps_lists_files_changed_in_several_worktrees_and_predicts_conflicts() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    std::fs::write(main.join("src/f.rs"), "a\nb\nc\nd\ne\nf\ng\n").unwrap();
    git(&main, &["add", "."]);
    git(&main, &["commit", "-q", "-m", "f"]);
    let one = worktree(&main, "one", "one");
    let two = worktree(&main, "two", "two");
    let three = worktree(&main, "three", "three");
    // one: line 1, committed; two: line 1, uncommitted; three: line 7, committed.
    std::fs::write(one.join("src/f.rs"), "A\nb\nc\nd\ne\nf\ng\n").unwrap();
    git(&one, &["commit", "-q", "-am", "one"]);
    std::fs::write(two.join("src/f.rs"), "Z\nb\nc\nd\ne\nf\ng\n").unwrap();
    std::fs::write(three.join("src/f.rs"), "a\nb\nc\nd\ne\nf\nG\n").unwrap();
    git(&three, &["commit", "-q", "-am", "three"]);
    // A new file in two worktrees, and a file only one worktree changed.
    std::fs::write(two.join("src/new.rs"), "two\n").unwrap();
    std::fs::write(three.join("src/new.rs"), "three\n").unwrap();
    std::fs::write(one.join("lib/z.rs"), "one\n").unwrap();
    let a = start(&env, &one, "A");
    let v = env.exec_in(&two, &["--json", "overlaps"]).code(0).json();
    assert_eq!(v["base"], "main", "{v}");
    assert_eq!(v["worktrees"].as_array().unwrap().len(), 4, "{v}");
    let sessions: Vec<&Value> = v["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["path"] == one.to_str().unwrap())
        .map(|t| &t["sessions"])
        .collect();
    assert_eq!(sessions, [&json!([a])], "{v}");
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    assert_eq!(
        v["overlaps"],
        json!([
            // In the order git lists the worktrees: the main one, then by name.
            {"file": "src/f.rs", "worktrees": [s(&one), s(&three), s(&two)],
             "conflicts": [[s(&one), s(&two)]]},
            // New in both, untracked, with different contents: git's add/add conflict.
            {"file": "src/new.rs", "worktrees": [s(&three), s(&two)],
             "conflicts": [[s(&three), s(&two)]]},
        ]),
        "{v}"
    );
    // Nothing in the worktrees changed: two's edit is still uncommitted, and no ref was made.
    assert_eq!(
        git(&two, &["status", "--porcelain"]),
        " M src/f.rs\n?? src/new.rs\n"
    );
    assert_eq!(git(&main, &["stash", "list"]), "");
    let r = env.exec_in(&one, &["overlaps"]);
    r.code(0);
    assert!(
        r.stdout.contains(&format!(
            "CONFLICT when {} and {} are merged",
            s(&one),
            s(&two)
        )) && r.stdout.contains(&format!("{} (one; {a})", s(&one))),
        "{r:?}"
    );
    // Outside a repository, and with a base that does not exist: one line, exit 2.
    let plain = env.dir("plain");
    let r = env.exec_in(&plain, &["--json", "overlaps"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "invalid_directory");
    env.exec_in(&one, &["overlaps", "--base", "nope"]).code(2);
}

/// With sessions in two worktrees of one repository, `status` and `top` group the claims by
/// repository: each worktree with its branch and the sessions working there, its claims
/// relative to its root (a directory's `/` and a glob kept); `status --json` gives the same
/// as `repositories`.
#[test]
fn status_and_top_group_claims_by_repository_naming_worktree_and_branch() {
    let (env, main, b) = two_worktrees();
    let a = start(&env, &main, "A");
    let bb = start(&env, &b, "B");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    env.exec_in(&b, &["claim", "--instance", &bb, "lib/", "docs/*.md"])
        .code(0);
    // A claim outside any repository is not grouped.
    let plain = env.dir("notes");
    env.exec(&["claim", "--instance", &bb, &p(&plain, "todo.md")])
        .code(0);
    let v = env.run(&["--json", "status"]).json();
    assert_schema(conductor::schema::Schema::Output, &v);
    let repo = format!("{}", main.join(".git").display());
    assert_eq!(
        v["repositories"],
        json!([{
            "repository": repo,
            "worktree_count": 2,
            "worktrees": [
                {"worktree": main.to_str().unwrap(), "branch": "main", "instances": [a],
                 "claims": [{"path": "src/x.rs", "held_by": a}]},
                {"worktree": b.to_str().unwrap(), "branch": "feature/b", "instances": [bb],
                 "claims": [{"path": "docs/*.md", "held_by": bb}, {"path": "lib/", "held_by": bb}]},
            ],
        }]),
        "{v:#}"
    );
    let text = env.run(&["status"]).stdout;
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "By repository:")
        .take(7)
        .collect();
    assert_eq!(
        section,
        [
            "By repository:".to_string(),
            format!("  {repo} (2 worktrees)"),
            format!("    {} · branch main · {a}", main.display()),
            "      src/x.rs".to_string(),
            format!("    {} · branch feature/b · {bb}", b.display()),
            "      docs/*.md".to_string(),
            "      lib/".to_string(),
        ],
        "{text}"
    );
    // (`top --once` draws `·` as `-` outside a UTF-8 locale.)
    let top = env
        .run(&["top", "--once", "--size", "160x40"])
        .stdout
        .replace('·', "-");
    for (id, dir, branch) in [(&a, &main, "main"), (&bb, &b, "feature/b")] {
        let want = format!(
            "worktree {} - branch {branch} - repository {repo}",
            dir.display()
        );
        let row = top
            .lines()
            .position(|l| l.contains(id.as_str()))
            .unwrap_or_else(|| panic!("{id} in top:\n{top}"));
        assert!(
            top.lines().nth(row + 1).is_some_and(|l| l.contains(&want)),
            "top names {id}'s worktree under it:\n{top}"
        );
    }
}

/// One repository with a single checkout: nothing to group, status says nothing more.
#[test]
fn a_single_checkout_is_not_grouped_in_status_text() {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let a = start(&env, &main, "A");
    env.exec_in(&main, &["claim", "--instance", &a, "src/x.rs"])
        .code(0);
    let text = env.run(&["status"]).stdout;
    assert!(!text.contains("By repository:"), "{text}");
    let v = env.run(&["--json", "status"]).json();
    assert_eq!(v["repositories"][0]["worktree_count"], 1, "{v:#}");
}
