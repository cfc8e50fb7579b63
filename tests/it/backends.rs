//! The protocol's behaviour suite, run against both backends: each scenario below is one
//! function over a [`Env`], and `both!` makes two tests of it, `backends::files::NAME` (a
//! temp home's files), `backends::etcd::NAME` (a real single-member etcd on a loopback port,
//! started for the test and killed after it) and `backends::etcd_tls::NAME` (the same over TLS
//! with a client certificate, as a user whose role covers only the test's prefix). The scenarios read state only through commands
//! (`status`, `history`, `events`, `conflicts`), never through the home's files, so the same
//! assertions hold whichever backend keeps it. What differs is said in one place,
//! [`Env::key`]: with a shared store a path outside any repository is keyed by its host.
//!
//! Needs Debian's `etcd-server` for the etcd half (`./test` installs it).

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

const T0: &str = "2026-01-17T09:00:00Z";
/// The host name the etcd variant runs as (plain directories are keyed by it).
const HOST: &str = "hostA";

/// A test environment on one backend: the binary against a temp home, with the shared store
/// set when the backend is etcd.
struct Env {
    t: TestEnv,
    etcd: Option<crate::etcd::Cluster>,
}

impl Env {
    fn files() -> Env {
        Env {
            t: home(),
            etcd: None,
        }
    }

    fn etcd() -> Env {
        Env {
            t: home(),
            etcd: Some(crate::etcd::Cluster::with_members(1)),
        }
    }

    /// A single member with TLS (client and peer), `--client-cert-auth` and authentication
    /// enabled, entered as user `team`, whose role may touch only this test's prefix.
    fn etcd_tls() -> Env {
        Env {
            t: home(),
            etcd: Some(crate::etcd::Cluster::secure(1)),
        }
    }

    fn at(&mut self, now: &str) -> &mut Self {
        self.t.at(now);
        self
    }

    fn cmd(&self) -> Command {
        let mut c = self.t.cmd();
        if let Some(e) = &self.etcd {
            c.env("CONDUCTOR_STORE", e.url())
                .env("CONDUCTOR_HOST", HOST)
                .envs(e.env_for("team"));
        }
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        self.t.run_cmd(self.cmd().args(args))
    }

    /// The same command from another machine: on etcd a second home and host name on the
    /// same cluster, so what it sees came through the store; on the file home, the same home.
    fn elsewhere(&self, args: &[&str]) -> Run {
        let mut c = self.cmd();
        if self.etcd.is_some() {
            let other = self.t.root.path().join("other-machine");
            std::fs::create_dir_all(other.join(".conductor")).unwrap();
            c.env("HOME", &other)
                .env("CONDUCTOR_WATCH_EDITS", "0")
                .env("CONDUCTOR_HOME", other.join(".conductor"))
                .env("CONDUCTOR_HOST", "hostB");
        }
        self.t.run_cmd(c.args(args))
    }

    /// `args` with `input` on stdin.
    fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut c = self.cmd();
        c.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn conductor");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// `--json` output of a command that must exit `code`, checked against the Output schema.
    #[track_caller]
    fn json(&self, code: i32, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let r = self.run(&a);
        r.code(code);
        let v = r.json();
        assert_schema(conductor::schema::Schema::Output, &v);
        v
    }

    #[track_caller]
    fn start(&self, task: &str, priority: &str) -> String {
        let v = self.json(
            0,
            &["start", task, "--project", "proj", "--priority", priority],
        );
        v["instance_id"].as_str().unwrap().to_string()
    }

    /// How a claim on `rel` (relative to the project, a plain directory) is keyed: its
    /// absolute path, and with a shared store also the host it is on.
    fn key(&self, rel: &str) -> String {
        let abs = self.t.abs(rel);
        match self.etcd {
            None => abs,
            Some(_) => format!("/@host={HOST}:{abs}"),
        }
    }

    fn status(&self) -> Value {
        self.json(0, &["status"])
    }

    fn instance(&self, id: &str) -> Option<Value> {
        self.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .cloned()
    }

    fn history(&self) -> Vec<Value> {
        let v = self.json(0, &["history"]);
        v["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("history has entries: {v}"))
            .clone()
    }

    /// The journal's events, from the first.
    fn events(&self) -> Vec<Value> {
        self.events_after("0")["items"].as_array().unwrap().clone()
    }

    /// `events --json --after SEQ` (a page: `items`, `next_after_seq`, `has_more`).
    fn events_after(&self, seq: &str) -> Value {
        let r = self.run(&["--json", "events", "--after", seq]);
        r.code(0);
        r.json()
    }
}

/// A test environment whose (empty, private) home exists, so read-only commands answer.
fn home() -> TestEnv {
    use std::os::unix::fs::DirBuilderExt;
    let mut t = TestEnv::new();
    t.at(T0);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&t.home)
        .unwrap();
    t
}

/// Three tests per scenario: `files::NAME`, `etcd::NAME` and `etcd_tls::NAME` (TLS and
/// authentication on).
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod files {
            $( #[test] fn $name() { super::$name(super::Env::files()) } )*
        }
        mod etcd {
            $( #[test] fn $name() { super::$name(super::Env::etcd()) } )*
        }
        mod etcd_tls {
            $( #[test] fn $name() { super::$name(super::Env::etcd_tls()) } )*
        }
    };
}

both!(
    start_registers_and_status_lists_it,
    claim_conflict_and_release,
    done_releases_and_writes_history,
    heartbeat_moves_only_the_heartbeat,
    cleanup_orphans_the_silent_and_keeps_the_rest,
    directory_and_glob_claims_protect_what_they_name,
    events_number_every_step_in_order,
    claim_wait_gets_the_file_on_release_or_gives_up,
    worktrees_of_one_repository_share_claims,
    agents_posts_inboxes_and_work_claims,
    workflow_transitions_and_approvals,
    queue_runs_dependent_jobs,
);

/// The agent runtime on the backend: agents registered on one machine, a post made from
/// another lands in the right inbox, one agent's work claim makes the other wait, and the
/// completion is seen everywhere.
fn agents_posts_inboxes_and_work_claims(env: Env) {
    for a in ["scout", "lint"] {
        env.run(&["agent", "register", a, "--watch", "ops"]).code(0);
    }
    let r = env.elsewhere(&["--json", "post", "ops", "@scout please look", "--as", "ana"]);
    r.code(0);
    let items = |e: &Env, agent: &str| -> Vec<Value> {
        let r = e.run(&["--json", "inbox", "--agent", agent]);
        r.code(0);
        r.json()["items"].as_array().unwrap().clone()
    };
    let got = items(&env, "scout");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["status"], "pending", "{got:?}");
    let id = got[0]["id"].as_str().unwrap().to_string();
    // lint claims the item from the other machine; scout is refused, naming lint.
    env.elsewhere(&["inbox", "claim", &id, "--agent", "lint", "--ttl", "60"])
        .code(0);
    let c = env.run(&[
        "--json", "inbox", "claim", &id, "--agent", "scout", "--ttl", "60",
    ]);
    c.code(3);
    assert_eq!(c.json()["holder"], "lint", "{c:?}");
    env.elsewhere(&[
        "inbox",
        "complete",
        &id,
        "--agent",
        "lint",
        "--ref",
        "post_id=msg-1",
    ])
    .code(0);
    let r = env.run(&[
        "--json",
        "inbox",
        "--agent",
        "scout",
        "--status",
        "completed",
    ]);
    r.code(0);
    let after = r.json()["items"].as_array().unwrap().clone();
    assert!(
        after.iter().any(|i| i["id"] == id.as_str()),
        "the completion is seen where the item was read: {after:?}"
    );
    let types: Vec<String> = env
        .events()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap_or("").to_string())
        .collect();
    for t in [
        "inbox.item.created",
        "inbox.claim.acquired",
        "inbox.item.updated",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} in {types:?}");
    }
}

/// A workflow on the backend: a worker's transition waits for a person's approval (given from
/// another machine), then the session runs to done.
fn workflow_transitions_and_approvals(env: Env) {
    use std::os::unix::fs::PermissionsExt;
    let dir = env.t.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("gated.json"),
        r#"{"name":"Gated","initial":"plan","states":{
          "plan":{"persona":"Architect","next":["build"],"requires_approval":true},
          "build":{"persona":"Engineer"}}}"#,
    )
    .unwrap();
    let worker = env.t.root.path().join("worker.sh");
    std::fs::write(
        &worker,
        r#"#!/bin/sh
echo "$CONDUCTOR_WORKFLOW_STATE" >> "$TRACE"
case "$CONDUCTOR_WORKFLOW_STATE" in
  plan) "$CONDUCTOR_BIN" workflow transition build --summary "the plan" ;;
  build) "$CONDUCTOR_BIN" workflow transition done --summary built ;;
esac
"#,
    )
    .unwrap();
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agent = format!("sh {} {{prompt_file}}", worker.display());
    let trace = env.t.root.path().join("trace.txt");
    let r = env.run(&["--json", "workflow", "start", "gated", "Add rate limiting"]);
    r.code(0);
    let v = r.json();
    let id = v["session"].as_str().unwrap().to_string();
    let supervise = |args: &[&str]| {
        let mut c = env.cmd();
        c.args(args)
            .env("CONDUCTOR_BIN", bin())
            .env("TRACE", &trace);
        env.t.run_cmd(&mut c)
    };
    let r = supervise(&["workflow", "run", &id, "--agent-cmd", &agent]);
    r.code(5);
    assert!(r.stdout.contains("awaiting_approval"), "{r:?}");
    env.elsewhere(&["workflow", "approve", &id]).code(0);
    // Approved once: a second approval is refused, wherever it comes from.
    env.run(&["workflow", "approve", &id]).code(2);
    supervise(&["workflow", "run", &id, "--agent-cmd", &agent]).code(0);
    assert_eq!(read_lines(&trace), ["plan", "build"]);
    let show = env.elsewhere(&["--json", "workflow", "show", &id]);
    show.code(0);
    let session = &show.json()["session"];
    assert_eq!(session["status"], "done", "{show:?}");
    let kinds: Vec<&str> = session["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds
            .windows(2)
            .any(|w| w == ["awaiting_approval", "approved"]),
        "{kinds:?}"
    );
}

/// The job queue on the backend: a manifest submitted from another machine, dependent jobs
/// run in order by a dispatcher here, and the results are read back from there.
fn queue_runs_dependent_jobs(env: Env) {
    use std::os::unix::fs::PermissionsExt;
    let agent = env.t.root.path().join("agent.sh");
    let trace = env.t.root.path().join("trace");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
echo "$1" >> "$TRACE"
mkdir -p "$CONDUCTOR_QUEUE_OUTPUT"
printf '# %s

Built %s.
' "$1" "$1" > "$CONDUCTOR_QUEUE_OUTPUT/RESULT.md"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let manifest = json!({"workspace": "w", "jobs": [
        {"id": "a", "prompt": "first"},
        {"id": "b", "prompt": "second", "depends_on": ["a"]}]});
    let r = env.run_stdin(&["queue", "submit", "-"], &manifest.to_string());
    r.code(0);
    let cmd = format!("sh {} {{job}}", agent.display());
    let mut c = env.cmd();
    c.args(["queue", "run", "--agent-cmd", &cmd])
        .env("TRACE", &trace);
    env.t.run_cmd(&mut c).code(0);
    assert_eq!(read_lines(&trace), ["a", "b"]);
    let r = env.run(&["--json", "queue", "jobs", "--all"]);
    r.code(0);
    let jobs = r.json();
    let mut states: Vec<(&str, &str)> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap(),
                j["state"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    states.sort();
    assert_eq!(states, [("a", "completed"), ("b", "completed")], "{jobs}");
    let r = env.elsewhere(&["--json", "queue", "jobs", "--all"]);
    r.code(0);
    assert_eq!(r.json()["jobs"].as_array().unwrap().len(), 2, "{r:?}");
}

/// Two git worktrees of one repository (without a remote: on a shared store it is keyed by
/// this host and its common git directory): the same path in both is one claim.
fn worktrees_of_one_repository_share_claims(env: Env) {
    use crate::worktrees::{repo, worktree};
    let main = repo(&env.t, "app");
    let b = worktree(&main, "app-b", "feature/b");
    let start_in = |dir: &std::path::Path, task: &str| {
        env.json(
            0,
            &[
                "start",
                task,
                "--priority",
                "P1",
                "--dir",
                dir.to_str().unwrap(),
            ],
        )["instance_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let a = start_in(&main, "A");
    let bb = start_in(&b, "B");
    env.json(0, &["claim", "--instance", &a, "src/x.rs"]);
    let v = env.json(3, &["claim", "--instance", &bb, "src/x.rs"]);
    let c = &v["conflicts"][0];
    assert_eq!(c["held_by"], a.as_str(), "{v}");
    assert_eq!(c["holder_worktree"], main.to_str().unwrap(), "{v}");
    assert_eq!(c["holder_branch"], "main", "{v}");
    env.json(3, &["claim", "--instance", &bb, "src/"]);
    env.json(0, &["claim", "--instance", &bb, "lib/z.rs"]);
    env.json(3, &["claim", "--instance", &a, "lib/"]);
    env.json(0, &["release", "--instance", &a, "src/x.rs"]);
    env.json(0, &["claim", "--instance", &bb, "src/x.rs"]);
}

fn start_registers_and_status_lists_it(env: Env) {
    let empty = env.status();
    assert_eq!(empty["instances"], json!([]), "{empty}");
    let v = env.json(
        0,
        &[
            "start",
            "Fix auth bug",
            "--project",
            "pitchello",
            "--priority",
            "P2",
        ],
    );
    assert_eq!(v["status"], "ok", "{v}");
    let id = v["instance_id"].as_str().unwrap().to_string();
    let i = env.instance(&id).expect("status lists the new instance");
    assert_eq!(
        (&i["task"], &i["project"], &i["priority"], &i["started_at"]),
        (
            &json!("Fix auth bug"),
            &json!("pitchello"),
            &json!("P2"),
            &json!(T0)
        ),
        "{i}"
    );
    assert_eq!(i["files_claimed"], json!([]));
    let text = env.run(&["status"]);
    assert!(text.code(0).stdout.contains("Fix auth bug"), "{text:?}");
    // A second start is another instance.
    let other = env.start("Other", "P1");
    assert_ne!(other, id);
    assert_eq!(env.status()["instances"].as_array().unwrap().len(), 2);
}

fn claim_conflict_and_release(env: Env) {
    let a = env.start("a", "P1");
    let b = env.start("b", "P1");
    let (ka, kb) = (env.key("src/a.rs"), env.key("src/b.rs"));
    let v = env.json(0, &["claim", "--instance", &a, "src/a.rs"]);
    assert_eq!(v["claimed"], json!([ka]), "{v}");
    // Reclaiming your own file is a no-op success.
    env.json(0, &["claim", "--instance", &a, "src/a.rs"]);
    // b asks for both: the held one is refused and named, the free one granted.
    let v = env.json(3, &["claim", "--instance", &b, "src/a.rs", "src/b.rs"]);
    let c = &v["conflicts"][0];
    assert_eq!((&c["file"], &c["held_by"]), (&json!(ka), &json!(a)), "{v}");
    assert_eq!(env.instance(&b).unwrap()["files_claimed"], json!([kb]));
    let log = env.run(&["conflicts"]);
    assert!(
        log.code(0).stdout.contains(&b),
        "the conflict is logged: {log:?}"
    );
    // Releasing a file you do not hold is refused.
    env.run(&["release", "--instance", &b, "src/a.rs"]).code(2);
    let v = env.json(0, &["release", "--instance", &a, "src/a.rs"]);
    assert_eq!(v["released"], json!([ka]), "{v}");
    assert_eq!(env.instance(&a).unwrap()["files_claimed"], json!([]));
    env.json(0, &["claim", "--instance", &b, "src/a.rs"]);
    let mut held = env.instance(&b).unwrap()["files_claimed"].clone();
    held.as_array_mut().unwrap().sort_by_key(|v| v.to_string());
    assert_eq!(held, json!([ka, kb]));
    // --force takes it back, with a reason.
    let v = env.json(
        0,
        &["claim", "--instance", &a, "src/b.rs", "--force", "urgent"],
    );
    assert_eq!(v["claimed"], json!([kb]), "{v}");
    assert_eq!(env.instance(&b).unwrap()["files_claimed"], json!([ka]));
}

fn done_releases_and_writes_history(mut env: Env) {
    let id = env.start("Fix auth bug", "P2");
    let other = env.start("Other", "P1");
    env.json(0, &["claim", "--instance", &id, "src/api/users.ts"]);
    env.json(0, &["claim", "--instance", &other, "src/keep.rs"]);
    env.at("2026-01-17T09:45:30Z");
    let v = env.json(0, &["done", "--instance", &id, "--notes", "shipped"]);
    let u = env.key("src/api/users.ts");
    assert_eq!(
        v,
        json!({"status": "ok", "instance_id": id, "outcome": "success", "released": [u],
               "message": "Task complete. All claims released."})
    );
    assert!(env.instance(&id).is_none());
    assert_eq!(
        env.instance(&other).unwrap()["files_claimed"],
        json!([env.key("src/keep.rs")])
    );
    let h = env.history();
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(
        (
            &h[0]["id"],
            &h[0]["outcome"],
            &h[0]["duration_minutes"],
            &h[0]["notes"]
        ),
        (&json!(id), &json!("success"), &json!(45), &json!("shipped"))
    );
    // The file is free again.
    env.json(0, &["claim", "--instance", &other, "src/api/users.ts"]);
    // Done twice: no such instance.
    assert_ne!(env.run(&["done", "--instance", &id]).code, 0);
}

fn heartbeat_moves_only_the_heartbeat(mut env: Env) {
    let id = env.start("t", "P1");
    env.at("2026-01-17T09:07:00Z");
    let v = env.json(0, &["heartbeat", "--instance", &id]);
    assert_eq!(
        v,
        json!({"status": "ok", "instance_id": id, "last_heartbeat": "2026-01-17T09:07:00Z",
               "message": "Heartbeat recorded."})
    );
    let i = env.instance(&id).unwrap();
    assert_eq!(
        (&i["last_heartbeat"], &i["started_at"]),
        (&json!("2026-01-17T09:07:00Z"), &json!(T0))
    );
}

fn cleanup_orphans_the_silent_and_keeps_the_rest(mut env: Env) {
    let old = env.start("old task", "P1");
    env.json(0, &["claim", "--instance", &old, "src/old.rs"]);
    env.at("2026-01-17T09:02:00Z");
    let young = env.start("young task", "P1");
    env.at("2026-01-17T09:59:00Z");
    assert_eq!(
        env.json(0, &["cleanup"]),
        json!({"status": "ok", "orphaned": [], "message": "Cleaned up 0 orphaned instances"})
    );
    env.at("2026-01-17T10:01:00Z");
    assert_eq!(
        env.json(0, &["cleanup"]),
        json!({"status": "ok", "orphaned": [old], "message": "Cleaned up 1 orphaned instances"})
    );
    assert!(env.instance(&old).is_none());
    assert!(env.instance(&young).is_some());
    let h = env.history();
    assert_eq!(
        (h.len(), &h[0]["id"], &h[0]["outcome"]),
        (1, &json!(old), &json!("orphaned"))
    );
    // Its claim went with it.
    env.json(0, &["claim", "--instance", &young, "src/old.rs"]);
    // An instance whose owner process is gone is retired at once.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id().to_string();
    gone.wait().unwrap();
    let v = env.json(
        0,
        &[
            "start",
            "owned",
            "--project",
            "proj",
            "--priority",
            "P2",
            "--owner-pid",
            &pid,
        ],
    );
    let owned = v["instance_id"].as_str().unwrap().to_string();
    let v = env.json(0, &["cleanup"]);
    assert_eq!(v["orphaned"], json!([owned]), "{v}");
}

fn directory_and_glob_claims_protect_what_they_name(env: Env) {
    let a = env.start("refactor src", "P1");
    let b = env.start("other work", "P1");
    let v = env.json(0, &["claim", "--instance", &a, "src"]);
    let dir = format!("{}/", env.key("src"));
    assert_eq!(v["claimed"], json!([dir]), "{v}");
    for f in ["src/main.rs", "src/new/deep/mod.rs", ".", "**/*.rs"] {
        let v = env.json(3, &["claim", "--instance", &b, f]);
        let c = &v["conflicts"][0];
        assert_eq!(
            (&c["held_by"], &c["held_claim"]),
            (&json!(a), &json!(dir)),
            "{f}: {v}"
        );
    }
    env.json(0, &["claim", "--instance", &b, "srcx/a.rs", "README.md"]);
    let v = env.json(0, &["claim", "--instance", &b, "lib/**/*.rs"]);
    assert_eq!(v["claimed"], json!([env.key("lib/**/*.rs")]), "{v}");
    for overlapping in ["lib/*.rs", "lib/x/y/z.rs", "lib/a/", "lib/**/mod.*"] {
        env.json(3, &["claim", "--instance", &a, overlapping]);
    }
    env.json(
        0,
        &["claim", "--instance", &a, "lib/**/*.ts", "lib/notes.md"],
    );
    env.json(0, &["release", "--instance", &a, "src/"]);
    env.json(0, &["claim", "--instance", &b, "src/main.rs"]);
}

fn events_number_every_step_in_order(env: Env) {
    assert_eq!(env.events(), Vec::<Value>::new());
    let a = env.start("a", "P1");
    let b = env.start("b", "P1");
    env.json(0, &["claim", "--instance", &a, "src/x.rs"]);
    env.json(3, &["claim", "--instance", &b, "src/x.rs"]);
    env.json(0, &["heartbeat", "--instance", &b]);
    env.json(0, &["release", "--instance", &a, "--all"]);
    env.json(0, &["done", "--instance", &a]);
    let ev = env.events();
    let seqs: Vec<u64> = ev.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=ev.len() as u64).collect::<Vec<_>>(), "gap-free");
    let kinds: Vec<(&str, &str)> = ev
        .iter()
        .map(|e| {
            (
                e["event_type"].as_str().unwrap(),
                e["actor"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("instance.started", a.as_str()),
            ("instance.started", b.as_str()),
            ("claim.granted", a.as_str()),
            ("claim.conflict", b.as_str()),
            ("instance.heartbeat", b.as_str()),
            ("claim.released", a.as_str()),
            ("instance.done", a.as_str()),
        ],
        "{ev:#?}"
    );
    // A cursor reads what came after it, and the end is empty.
    let last = seqs.len().to_string();
    let before = (seqs.len() - 1).to_string();
    let tail = env.events_after(&before);
    assert_eq!(tail["items"].as_array().unwrap().len(), 1, "{tail}");
    let end = env.events_after(&last);
    assert_eq!(end["items"], json!([]), "{end}");
}

fn claim_wait_gets_the_file_on_release_or_gives_up(env: Env) {
    let a = env.start("holder", "P1");
    let b = env.start("waiter", "P1");
    env.json(0, &["claim", "--instance", &a, "src/a.rs"]);
    let queued = |env: &Env| {
        env.instance(&b)
            .is_some_and(|i| i["waiting_for"].as_array().is_some_and(|w| !w.is_empty()))
    };
    // Gives up at the deadline: a plain conflict (exit 3), and the queue is left.
    let r = env.run(&["--json", "claim", "--instance", &b, "--wait=1s", "src/a.rs"]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["held_by"], a.as_str(), "{r:?}");
    assert!(!queued(&env), "the waiter left the queue");
    // Gets the file the moment it is released.
    let waiter = env
        .cmd()
        .args([
            "--json",
            "claim",
            "--instance",
            &b,
            "--wait=30s",
            "src/a.rs",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(20.0, || queued(&env)), "the waiter queued");
    env.json(0, &["release", "--instance", &a, "src/a.rs"]);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["claimed"], json!([env.key("src/a.rs")]), "{v}");
    let i = env.instance(&b).unwrap();
    assert_eq!(i["files_claimed"], json!([env.key("src/a.rs")]));
    assert!(i.get("waiting_for").is_none(), "no queue left: {i}");
}
