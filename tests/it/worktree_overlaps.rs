//! Files another live worktree changed, claimed or not (docs/protocol.md, "Agents in
//! worktrees"): every agent's edit hook names the worktree, its branch and its session, refuses
//! the edit under `enforce = "block-overlap"`, and follows new commits and uncommitted changes
//! through its per-worktree cache; `status --json` and the MCP `check` tool show the same. Real
//! repositories and worktrees made with the system's git (Debian's 2.47 on the CI image).

use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;
use crate::worktrees::{git, repo, worktree};

fn p(dir: &Path, rel: &str) -> String {
    dir.join(rel).to_string_lossy().into_owned()
}

/// A Claude Code PreToolUse payload: session `sid` in `dir` edits `file`.
fn claude_edit(sid: &str, dir: &Path, file: &str) -> String {
    json!({"session_id": sid, "cwd": dir, "hook_event_name": "PreToolUse", "tool_name": "Edit",
           "permission_mode": "default",
           "tool_input": {"file_path": file, "old_string": "fn x() {}", "new_string": "fn x() -> u8 { 1 }"}})
    .to_string()
}

/// Run the Claude Code hook for an edit of `file` by session `sid` in `dir`; its output.
#[track_caller]
fn edit(env: &TestEnv, sid: &str, dir: &Path, file: &str) -> Value {
    let r = env.run_stdin(&["hook", "claude"], &claude_edit(sid, dir, file));
    r.code(0);
    // An edit allowed with nothing to say prints nothing.
    if r.stdout.trim().is_empty() {
        return Value::Null;
    }
    r.json()
}

/// The claims in the home (none before the first write).
fn claims(env: &TestEnv) -> Value {
    if env.home_file("status.json").exists() {
        env.state()["global_claims"].clone()
    } else {
        json!({})
    }
}

/// What the model is told (additionalContext), or "".
fn context(v: &Value) -> String {
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The main checkout `app` (branch main) and linked worktrees `app-b` (feature/b).
fn setup() -> (TestEnv, std::path::PathBuf, std::path::PathBuf) {
    let env = TestEnv::new();
    let main = repo(&env, "app");
    let b = worktree(&main, "app-b", "feature/b");
    (env, main, b)
}

/// [`setup`], a session in app-b, and src/x.rs changed in both worktrees, uncommitted, so that
/// merging them conflicts.
fn conflicting_edits() -> (TestEnv, std::path::PathBuf, std::path::PathBuf) {
    let (env, main, b) = setup();
    env.start_in(&b, "app", "B", "P1");
    std::fs::write(main.join("src/x.rs"), "fn x() -> u8 { 1 }\n").unwrap();
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    (env, main, b)
}

#[test]
fn an_edit_of_a_file_another_worktree_changed_is_allowed_with_a_notice_naming_it() {
    let (env, main, b) = setup();
    // A session works in app-b and changed src/x.rs there, uncommitted and unclaimed.
    let sb = env.start_in(&b, "app", "B", "P1");
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    let v = edit(&env, "sess-a", &main, &p(&main, "src/x.rs"));
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    let told = context(&v);
    assert!(
        told.contains(&format!(
            "{} is changed in another worktree of this repository, {} (branch feature/b, session {sb}): \
             this worktree has not changed it yet; textual conflict: none predicted until it does",
            p(&main, "src/x.rs"),
            b.display()
        )),
        "{v}"
    );
    // The free file was claimed as usual, and the model is told that too.
    assert!(told.contains("now claimed for this session"), "{told}");
    // Once main changed it too (uncommitted), the conflict is unknown to the hook.
    std::fs::write(main.join("src/x.rs"), "fn x() -> u32 { 3 }\n").unwrap();
    let told = context(&edit(&env, "sess-a", &main, &p(&main, "src/x.rs")));
    assert!(
        told.contains("this worktree changed it too; textual conflict: unknown (the hook does not run git merge-tree"),
        "{told}"
    );
    // A branch's commit counts like an uncommitted change: a Codex patch of lib/z.rs in main
    // is told about app-b's commit of it, with no session named there once B is done.
    env.exec(&["done", "--instance", &sb]).code(0);
    std::fs::write(b.join("lib/z.rs"), "b\n").unwrap();
    git(&b, &["commit", "-q", "-am", "z"]);
    let patch = json!({"session_id": "codex-a", "cwd": main, "hook_event_name": "PreToolUse",
        "tool_name": "apply_patch", "tool_input": {"command":
        "*** Begin Patch\n*** Update File: lib/z.rs\n@@\n-fn x() {}\n+fn z() {}\n*** End Patch\n"}});
    let r = env.run_stdin(&["hook", "codex"], &patch.to_string());
    assert!(
        r.stdout.contains(&format!(
            "{} is changed in another worktree of this repository, {} (branch feature/b, no conductor session works there)",
            p(&main, "lib/z.rs"),
            b.display()
        )),
        "{r:?}"
    );
}

#[test]
fn block_overlap_refuses_the_edit_and_the_reason_reaches_the_model() {
    let (env, main, b) = setup();
    env.write_home("config.json", r#"{"enforce": "block-overlap"}"#);
    std::fs::write(b.join("src/y.rs"), "fn y() {}\n").unwrap();
    git(&b, &["commit", "-q", "-am", "y"]);
    let v = edit(&env, "sess-a", &main, &p(&main, "src/y.rs"));
    let out = &v["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "deny", "{v}");
    let why = out["permissionDecisionReason"].as_str().unwrap();
    assert!(
        why.starts_with("BLOCKED: enforce is block-overlap and ")
            && why.contains(&format!(
                "{} is changed in another worktree of this repository, {} (branch feature/b, no conductor session works there)",
                p(&main, "src/y.rs"),
                b.display()
            )),
        "{why}"
    );
    // Nothing was claimed; a file no other worktree changed is claimed as under auto-claim.
    assert_eq!(claims(&env), json!({}));
    let v = edit(&env, "sess-a", &main, &p(&main, "src/x.rs"));
    assert_ne!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    assert!(
        claims(&env).get(p(&main, "src/x.rs")).is_some(),
        "{}",
        claims(&env)
    );
    // The same refusal for Codex's patch tool.
    let patch = json!({"session_id": "codex-a", "cwd": main, "hook_event_name": "PreToolUse",
        "tool_name": "apply_patch", "tool_input": {"command":
        "*** Begin Patch\n*** Update File: src/y.rs\n@@\n-fn y() {}\n+fn y2() {}\n*** End Patch\n"}});
    let r = env.run_stdin(&["hook", "codex"], &patch.to_string());
    assert!(
        r.stdout.contains("deny") && r.stdout.contains("enforce is block-overlap"),
        "{r:?}"
    );
}

#[test]
fn no_notice_for_unchanged_files_or_unrelated_repositories() {
    let (env, main, b) = setup();
    std::fs::write(b.join("src/x.rs"), "changed in b\n").unwrap();
    // Another repository with its own worktree that changed the same relative path.
    let other = repo(&env, "other");
    let ob = worktree(&other, "other-b", "feature/b");
    std::fs::write(ob.join("src/y.rs"), "changed in other-b\n").unwrap();
    // src/y.rs of app: nobody changed it in another worktree of app.
    let v = edit(&env, "sess-a", &main, &p(&main, "src/y.rs"));
    assert!(!context(&v).contains("another worktree"), "{v}");
    // src/x.rs of other: app-b's change is another repository's.
    let v = edit(&env, "sess-o", &other, &p(&other, "src/x.rs"));
    assert!(!context(&v).contains("another worktree"), "{v}");
    // The control: the same hook does tell about app-b's file.
    let v = edit(&env, "sess-a", &main, &p(&main, "src/x.rs"));
    assert!(context(&v).contains("another worktree"), "{v}");
}

#[test]
fn the_cache_follows_new_uncommitted_changes_and_new_commits() {
    let (env, main, b) = setup();
    let x = p(&main, "src/x.rs");
    // Nothing changed in app-b yet: no notice (and app-b's changes are now cached).
    assert!(!context(&edit(&env, "sess-a", &main, &x)).contains("another worktree"));
    let cached = env.home_file("worktree-changes");
    assert_eq!(
        std::fs::read_dir(&cached).unwrap().count(),
        1,
        "one worktree measured"
    );
    // An uncommitted change in app-b: the notice appears.
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    assert!(context(&edit(&env, "sess-a", &main, &x)).contains("another worktree"));
    // Reverted: it disappears.
    git(&b, &["checkout", "--", "src/x.rs"]);
    assert!(!context(&edit(&env, "sess-a", &main, &x)).contains("another worktree"));
    // A new commit on app-b's branch: it appears again.
    std::fs::write(b.join("src/x.rs"), "fn x() -> u64 { 4 }\n").unwrap();
    git(&b, &["commit", "-q", "-am", "x"]);
    assert!(context(&edit(&env, "sess-a", &main, &x)).contains("another worktree"));
    // Merged into main: main has the change too, and app-b no longer differs from its merge
    // base with main.
    git(&main, &["merge", "-q", "--ff-only", "feature/b"]);
    assert!(!context(&edit(&env, "sess-a", &main, &x)).contains("another worktree"));
    // A file deleted in app-b (uncommitted) is a change of it.
    std::fs::remove_file(b.join("src/y.rs")).unwrap();
    let v = edit(&env, "sess-a", &main, &p(&main, "src/y.rs"));
    assert!(context(&v).contains("another worktree"), "{v}");
}

#[test]
fn status_json_and_the_mcp_check_tool_show_the_overlap() {
    let (env, main, b) = setup();
    let sa = env.start_in(&main, "app", "A", "P1");
    let sb = env.start_in(&b, "app", "B", "P1");
    std::fs::write(main.join("src/x.rs"), "fn x() -> u8 { 1 }\n").unwrap();
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    let v = env.exec(&["--json", "status"]).code(0).json();
    let s = |d: &Path| d.to_str().unwrap().to_string();
    let r = &v["overlaps"][0];
    assert_eq!(r["base"], "main", "{v}");
    assert_eq!(
        r["overlaps"],
        json!([{"file": "src/x.rs", "worktrees": [s(&main), s(&b)],
                "conflicts": [[s(&main), s(&b)]]}]),
        "{v}"
    );
    let sessions: Vec<&Value> = r["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["sessions"])
        .collect();
    assert_eq!(sessions, [&json!([sa]), &json!([sb])], "{v}");
    let text = env.exec(&["status"]).code(0).stdout.clone();
    assert!(
        text.contains(&format!(
            "src/x.rs in {} (main; {sa}), {} (feature/b; {sb}) · CONFLICT predicted",
            s(&main),
            s(&b)
        )),
        "{text}"
    );
    // The MCP check tool, for a file in main: app-b changed it.
    let out = crate::mcp::run_plan(
        &env,
        &[],
        &[],
        json!([{"tool": "check", "args": {"files": [p(&main, "src/x.rs"), p(&main, "src/y.rs")]}}]),
    );
    let files = &out[0]["structured"]["files"];
    assert_eq!(
        files[0]["changed_in_worktrees"],
        json!([{"path": s(&b), "branch": "feature/b", "sessions": [sb], "changed_here": true}]),
        "{}",
        out[0]
    );
    assert!(
        files[0]["note"]
            .as_str()
            .unwrap_or_default()
            .contains("is changed in another worktree of this repository"),
        "{}",
        out[0]
    );
    assert_eq!(files[1]["changed_in_worktrees"], json!([]), "{}", out[0]);
}

#[test]
fn top_and_the_dashboard_show_the_overlap_under_the_sessions_working_there() {
    use std::io::BufRead;
    let (env, main, b) = setup();
    let sa = env.start_in(&main, "app", "A", "P1");
    let sb = env.start_in(&b, "app", "B", "P1");
    std::fs::write(main.join("src/x.rs"), "fn x() -> u8 { 1 }\n").unwrap();
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    let s = |d: &Path| d.to_str().unwrap().to_string();
    let line_a = format!(
        "src/x.rs also changed in {} (feature/b) · CONFLICT predicted",
        s(&b)
    );
    let line_b = format!(
        "src/x.rs also changed in {} (main) · CONFLICT predicted",
        s(&main)
    );
    // `top`'s overview, as `status --watch --json` prints it (its first document).
    let mut c = env.cmd();
    c.args(["--json", "status", "--watch"])
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let o: Value = serde_json::from_str(&first).unwrap();
    let of = |id: &str| {
        o["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .map(|i| i["overlaps"].clone())
    };
    assert_eq!(of(&sa), Some(json!([line_a])), "{o}");
    assert_eq!(of(&sb), Some(json!([line_b])), "{o}");
    // The dashboard's state: the same lines per instance, and the reports.
    let srv = crate::serve::Server::start(&env);
    let r = srv.raw("GET", &format!("/?token={}", srv.token), &[], b"");
    let cookie = r.header("set-cookie").unwrap();
    let cookie = cookie.split(';').next().unwrap();
    let st = srv
        .raw("GET", "/dashboard/state", &[("Cookie", cookie)], b"")
        .expect(200);
    let row = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == sa.as_str())
        .cloned()
        .unwrap();
    assert_eq!(row["overlaps"], json!([line_a]), "{st}");
    assert_eq!(st["overlaps"][0]["overlaps"][0]["file"], "src/x.rs", "{st}");
}

/// On a shared store (etcd) claims are keyed by repository, and the hook still finds the other
/// worktree's change of the file by its path.
#[test]
fn on_a_shared_etcd_store_the_hook_still_names_the_other_worktree() {
    use std::io::Write;
    let cluster = crate::etcd::Cluster::with_members(1);
    let (env, main, b) = setup();
    std::fs::write(b.join("src/x.rs"), "changed in b\n").unwrap();
    let mut c = env.cmd();
    c.env("CONDUCTOR_STORE", cluster.url())
        .args(["hook", "claude"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(claude_edit("sess-a", &main, &p(&main, "src/x.rs")).as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let told = context(&v);
    assert!(
        told.contains(&format!(
            "{} is changed in another worktree of this repository, {} (branch feature/b",
            p(&main, "src/x.rs"),
            b.display()
        )),
        "{v}"
    );
}

/// The files of `conductor overlaps`' per-worktree cache in the home (`worktree-index`).
fn index_cache(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.home_file("worktree-index"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The files `conductor overlaps` lists as changed in two or more worktrees, with the pairs it
/// predicts to conflict.
fn overlapping(env: &TestEnv, dir: &Path) -> Value {
    let v = env.exec_in(dir, &["--json", "overlaps"]).code(0).json();
    Value::Array(
        v["overlaps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| json!([o["file"], o["conflicts"].as_array().unwrap().len()]))
            .collect(),
    )
}

/// A worktree's own index: its bytes, inode and mtime.
fn own_index(worktree: &Path) -> (Vec<u8>, u64, std::time::SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let dir = git(worktree, &["rev-parse", "--absolute-git-dir"]);
    let path = Path::new(dir.trim()).join("index");
    let m = std::fs::metadata(&path).unwrap();
    (
        std::fs::read(&path).unwrap(),
        m.ino(),
        m.modified().unwrap(),
    )
}

/// `conductor overlaps` keeps each worktree's merge base and a private copy of its index
/// between runs (docs/internals.md, "Worktree change cache"), yet every run still sees every
/// change: an uncommitted edit in another worktree that touched no index, a staged one, a
/// commit, a file rewritten with the same size in the same second as its index was written
/// (git's racy-clean case, which the copy must not hide). It never writes a worktree's own
/// index, and forgets a worktree that was removed.
#[test]
fn overlaps_reuses_its_cache_yet_reports_every_new_change() {
    let (env, main, b) = setup();
    let c = worktree(&main, "app-c", "feature/c");
    env.start_in(&c, "app", "C", "P1");
    std::fs::write(b.join("src/x.rs"), "fn x() -> u16 { 2 }\n").unwrap();
    assert_eq!(overlapping(&env, &main), json!([]));
    let first = index_cache(&env);
    // Per worktree: its root and merge base, and a copy of its index.
    assert_eq!(
        first.iter().filter(|n| n.ends_with(".json")).count(),
        3,
        "{first:?}"
    );
    assert_eq!(
        first.iter().filter(|n| n.ends_with(".index")).count(),
        3,
        "{first:?}"
    );
    let owns = [own_index(&main), own_index(&b), own_index(&c)];
    // Nothing changed: the same files serve the second run.
    assert_eq!(overlapping(&env, &main), json!([]));
    assert_eq!(index_cache(&env), first);
    // An uncommitted edit in app-c (no index changed, the cache kept): the overlap is found,
    // and git predicts the conflict.
    std::fs::write(c.join("src/x.rs"), "fn x() -> u32 { 3 }\n").unwrap();
    assert_eq!(overlapping(&env, &main), json!([["src/x.rs", 1]]));
    assert_eq!(index_cache(&env), first);
    // Predicting it (`git stash create`) wrote no worktree's own index.
    assert_eq!([own_index(&main), own_index(&b), own_index(&c)], owns);
    // A staged change in main, and a commit in app-b.
    std::fs::write(main.join("lib/z.rs"), "main\n").unwrap();
    git(&main, &["add", "lib/z.rs"]);
    std::fs::write(b.join("lib/z.rs"), "b\n").unwrap();
    git(&b, &["commit", "-q", "-am", "b"]);
    assert_eq!(
        overlapping(&env, &main),
        json!([["lib/z.rs", 1], ["src/x.rs", 1]])
    );
    // src/y.rs in app-c rewritten with the same size in the same second as app-c's index was
    // written (its stat data then matches the index's but for the nanoseconds): still seen.
    let mtime_s = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().mtime()
    };
    let cindex = Path::new(git(&c, &["rev-parse", "--absolute-git-dir"]).trim()).join("index");
    for _ in 0..20 {
        std::fs::write(c.join("src/y.rs"), "fn x() {}\n").unwrap();
        git(&c, &["add", "src/y.rs"]);
        std::fs::write(c.join("src/y.rs"), "fn y() {}\n").unwrap();
        if mtime_s(&c.join("src/y.rs")) == mtime_s(&cindex) {
            break;
        }
    }
    // A run in a later second: a copy of the index written now, or refreshed now, must not
    // take the racily clean entry for clean.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(b.join("src/y.rs"), "fn why() {}\n").unwrap();
    assert_eq!(
        overlapping(&env, &main),
        json!([["lib/z.rs", 1], ["src/x.rs", 1], ["src/y.rs", 1]])
    );
    assert_eq!(
        overlapping(&env, &main),
        json!([["lib/z.rs", 1], ["src/x.rs", 1], ["src/y.rs", 1]])
    );
    // Reverted in app-c: gone again.
    git(&c, &["checkout", "HEAD", "--", "src/x.rs", "src/y.rs"]);
    assert_eq!(overlapping(&env, &main), json!([["lib/z.rs", 1]]));
    // app-c removed: its files are removed from the cache at the next run.
    git(
        &main,
        &["worktree", "remove", "--force", c.to_str().unwrap()],
    );
    assert_eq!(overlapping(&env, &main), json!([["lib/z.rs", 1]]));
    let last = index_cache(&env);
    assert_eq!(
        last.iter().filter(|n| n.ends_with(".json")).count(),
        2,
        "{last:?}"
    );
    assert_eq!(
        last.iter().filter(|n| n.ends_with(".index")).count(),
        2,
        "{last:?}"
    );
}

/// Runs at once (`overlaps`, `status`, `top` and the dashboard all measure) while a worktree's
/// index keeps changing: each run replaces or removes the cache's copies under the others, and
/// every run still gives the right answer (git never reads a copy that is gone, which it would
/// take for an empty index: every file deleted).
#[test]
fn concurrent_runs_replacing_the_cache_under_each_other_all_answer_right() {
    let (env, main, b) = conflicting_edits();
    for round in 0..6 {
        // A new index in app-b at every round: every run makes a new copy, removes the old.
        std::fs::write(b.join(format!("lib/r{round}.rs")), "r\n").unwrap();
        git(&b, &["add", "lib"]);
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let mut c = env.cmd();
                c.current_dir(&main)
                    .args(["--json", "overlaps"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        for r in runs {
            let out = r.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let changed: Vec<&Value> = v["worktrees"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| &t["changed"])
                .collect();
            // main: src/x.rs; app-b: src/x.rs and lib/r0.rs .. lib/r{round}.rs.
            assert_eq!(changed, [&json!(1), &json!(round + 2)], "{v}");
            assert_eq!(v["overlaps"][0]["file"], "src/x.rs", "{v}");
            assert_eq!(
                v["overlaps"][0]["conflicts"].as_array().unwrap().len(),
                1,
                "{v}"
            );
        }
    }
    // Nothing left behind but one copy per worktree and its record.
    let left = index_cache(&env);
    assert_eq!(left.len(), 4, "{left:?}");
}

/// Another git process holding a worktree's index lock (an editor's `git add`) does not stop
/// the prediction: the snapshot takes no lock. When git cannot snapshot a worktree at all (here:
/// nowhere to make a temporary copy of its index), `overlaps` says the conflict is unknown and
/// why; it never reports such a pair as clean.
#[test]
fn a_worktree_git_cannot_snapshot_makes_its_conflicts_unknown_not_clean() {
    let (env, main, b) = conflicting_edits();
    let (m, bs) = (main.to_string_lossy(), b.to_string_lossy());
    let lock = main.join(".git/worktrees/app-b/index.lock");
    std::fs::write(&lock, "").unwrap();
    // (`exec_in` checks the JSON against the documented output.)
    let v = env.exec_in(&main, &["--json", "overlaps"]).code(0).json();
    assert_eq!(v["overlaps"][0]["conflicts"], json!([[m, bs]]), "{v}");
    assert!(v["overlaps"][0].get("unpredicted").is_none(), "{v}");
    // The other program's lock is left as it was.
    assert_eq!(std::fs::read(&lock).unwrap(), b"");
    // The cache's directory is a file and the system's temporary directory is none.
    std::fs::remove_dir_all(env.home_file("worktree-index")).unwrap();
    std::fs::write(env.home_file("worktree-index"), "not a directory\n").unwrap();
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.current_dir(&main)
            .env("TMPDIR", env.home_file("worktree-index"))
            .args(args);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&run(&["--json", "overlaps"])).unwrap();
    // The new fields are part of the documented output.
    assert_schema(conductor::schema::Schema::Output, &v);
    assert_eq!(v["overlaps"][0]["file"], "src/x.rs", "{v}");
    assert_eq!(v["overlaps"][0]["conflicts"], json!([]), "{v}");
    assert_eq!(v["overlaps"][0]["unpredicted"], json!([[m, bs]]), "{v}");
    for t in v["worktrees"].as_array().unwrap() {
        let why = t["unpredictable"].as_str().unwrap_or_default();
        assert!(
            why.contains("could not make a temporary copy of its index"),
            "{v}"
        );
    }
    assert_eq!(
        v["message"],
        "1 file changed in more than one worktree; 0 would conflict when merged, \
         and for 1 it is unknown (git could not predict it).",
        "{v}"
    );
    let text = run(&["overlaps"]);
    assert!(
        text.contains(&format!("UNKNOWN whether merging {m} and {bs} conflicts")),
        "{text}"
    );
}

/// A file new (untracked) in two worktrees is merged as git would merge it once both are
/// committed: different contents conflict (add/add), the same content does not (`git stash
/// create`, which this stood on before, leaves untracked files out: both were "clean").
#[test]
fn untracked_files_of_one_name_in_two_worktrees_are_merged_as_git_would() {
    let (env, main, b) = setup();
    env.start_in(&b, "app", "B", "P1");
    std::fs::write(main.join("src/new.rs"), "fn new() -> u8 { 1 }\n").unwrap();
    std::fs::write(b.join("src/new.rs"), "fn new() -> u16 { 2 }\n").unwrap();
    let overlaps = || env.exec_in(&main, &["--json", "overlaps"]).code(0).json();
    let (m, bs) = (main.to_string_lossy(), b.to_string_lossy());
    let v = overlaps();
    assert_eq!(v["overlaps"][0]["file"], "src/new.rs", "{v}");
    assert_eq!(v["overlaps"][0]["conflicts"], json!([[m, bs]]), "{v}");
    assert_eq!(
        v["message"], "1 file changed in more than one worktree; 1 would conflict when merged.",
        "{v}"
    );
    // The same new file in both: git merges it cleanly.
    std::fs::write(b.join("src/new.rs"), "fn new() -> u8 { 1 }\n").unwrap();
    let v = overlaps();
    assert_eq!(v["overlaps"][0]["conflicts"], json!([]), "{v}");
    assert!(v["overlaps"][0].get("unpredicted").is_none(), "{v}");
    // Nothing untracked was added to either worktree's own index.
    let status = git(&b, &["status", "--porcelain", "--", "src/new.rs"]);
    assert_eq!(status.trim(), "?? src/new.rs");
}
