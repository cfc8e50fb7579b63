//! The real binary, field by field against conductor-protocol.md and the decisions in NOTES.md
//! and issue 2. Every command goes through `exec`, which also checks status.json, history.jsonl
//! and conflicts.log against their schemas and every JSON output against the Output schema.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;

const T0: &str = "2026-01-17T09:00:00Z";
const REGISTERED: &str = "Registered. Use /conductor claim to lock files before editing.";

fn is_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && ["itm", "cur", "vsc", "web", "cow"].contains(&&s[..3])
        && b[3] == b'-'
        && b[4..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

fn env_at(now: &str) -> TestEnv {
    let mut e = TestEnv::new();
    e.at(now);
    e
}

fn id_of(r: &Run) -> String {
    r.json()["instance_id"].as_str().unwrap().to_string()
}

fn sprint(env: &TestEnv, focus: &str, deferred: &[&str]) {
    env.write_home(
        "sprint.json",
        &json!({"sprint_name": "2026-W03", "focus": focus, "explicitly_deferred": deferred})
            .to_string(),
    );
}

// ---------------------------------------------------------------- start

#[test]
fn start_prints_the_spec_object_and_records_the_instance() {
    let env = env_at(T0);
    let r = env.exec(&[
        "--json",
        "start",
        "Fix auth bug",
        "--project",
        "pitchello",
        "--priority",
        "P1",
    ]);
    r.code(0);
    let v = r.json();
    assert_eq!(keys(&v), ["instance_id", "message", "status"]);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["message"], REGISTERED);
    let id = id_of(&r);
    assert!(is_id(&id), "{id}");
    assert!(id.starts_with("web-"), "no editor variables → web: {id}");

    let st = env.state();
    assert_eq!(st["version"], "1.0");
    assert_eq!(st["updated_at"], T0);
    let i = env.instance(&id).expect("instance recorded");
    assert_eq!(i["source"], "web");
    assert_eq!(i["project"], "pitchello");
    assert_eq!(i["task"], "Fix auth bug");
    assert_eq!(i["priority"], "P1");
    assert_eq!(i["files_claimed"], json!([]));
    assert_eq!(i["started_at"], T0);
    assert_eq!(i["last_heartbeat"], T0);
    assert_eq!(i["working_directory"], env.project.to_str().unwrap());
    assert!(i.get("override_reason").is_none());
    assert_eq!(st["global_claims"], json!({}));
    assert_eq!(st["drift_warnings"], json!([]));
}

#[test]
fn start_text_output_names_the_id() {
    let env = env_at(T0);
    let r = env.exec(&["start", "Fix auth bug", "--priority", "P1"]);
    r.code(0);
    let id = env.state()["instances"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        r.stdout.contains(&format!("Registered as {id}")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("conductor claim --instance {id} FILE")),
        "{}",
        r.stdout
    );
}

#[test]
fn source_is_detected_from_the_environment_in_the_spec_order() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("CURSOR_SESSION", "1"),
                ("VSCODE_GIT_IPC_HANDLE", "/tmp/x"),
                ("TERM_PROGRAM", "iTerm.app"),
            ],
            "cur",
        ),
        (
            &[
                ("VSCODE_GIT_IPC_HANDLE", "/tmp/x"),
                ("TERM_PROGRAM", "iTerm.app"),
                ("CLAUDE_COWORK_SESSION", "s"),
            ],
            "vsc",
        ),
        (
            &[
                ("TERM_PROGRAM", "iTerm.app"),
                ("CLAUDE_COWORK_SESSION", "s"),
            ],
            "itm",
        ),
        (&[("CLAUDE_COWORK_SESSION", "s")], "cow"),
        (&[("TERM_PROGRAM", "Apple_Terminal")], "web"),
        (&[], "web"),
    ];
    for (vars, want) in cases {
        let env = env_at(T0);
        let r = env.exec_env(&["--json", "start", "t", "--priority", "P1"], vars);
        r.code(0);
        let id = id_of(&r);
        assert!(id.starts_with(&format!("{want}-")), "{vars:?} gave {id}");
        assert_eq!(env.instance(&id).unwrap()["source"], *want);
    }
}

#[test]
fn source_flag_beats_the_environment() {
    let env = env_at(T0);
    let r = env.exec_env(
        &[
            "--json",
            "start",
            "t",
            "--priority",
            "P1",
            "--source",
            "cow",
        ],
        &[("CURSOR_SESSION", "1")],
    );
    let id = id_of(r.code(0));
    assert!(id.starts_with("cow-"), "{id}");
    assert_eq!(env.instance(&id).unwrap()["source"], "cow");
}

#[test]
fn ids_are_unique_among_live_instances() {
    let env = env_at(T0);
    let mut ids: Vec<String> = (0..8)
        .map(|_| env.start_in(&env.project, "p", "t", "P1"))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
}

#[test]
fn dir_sets_the_working_directory_and_the_default_project_name() {
    let env = env_at(T0);
    let other = env.dir("clients/mission-control");
    let r = env.exec(&[
        "--json",
        "start",
        "t",
        "--priority",
        "P1",
        "--dir",
        other.to_str().unwrap(),
    ]);
    let i = env.instance(&id_of(r.code(0))).unwrap();
    assert_eq!(i["working_directory"], other.to_str().unwrap());
    assert_eq!(i["project"], "mission-control");

    // Without --dir and --project: the current directory and its name.
    let r = env.exec(&["--json", "start", "t", "--priority", "P1"]);
    let i = env.instance(&id_of(r.code(0))).unwrap();
    assert_eq!(i["working_directory"], env.project.to_str().unwrap());
    assert_eq!(i["project"], "proj");

    // A relative --dir resolves against the current directory.
    let r = env.exec(&["--json", "start", "t", "--priority", "P1", "--dir", "src"]);
    let i = env.instance(&id_of(r.code(0))).unwrap();
    assert_eq!(i["working_directory"], env.abs("src"));
    assert_eq!(i["project"], "src");
}

#[test]
fn start_in_a_missing_directory_is_invalid_input() {
    let env = env_at(T0);
    let r = env.exec(&[
        "--json",
        "start",
        "t",
        "--priority",
        "P1",
        "--dir",
        "/nonexistent/dir/x",
    ]);
    r.code(2);
    assert_eq!(r.json()["reason"], "invalid_directory");
    assert!(!env.home_file("status.json").exists() || env.state()["instances"] == json!([]));
}

// ---------------------------------------------------------------- priority gate

#[test]
fn sprint_focus_p1_blocks_p2_and_p3_with_the_spec_object_and_leaves_state_alone() {
    let env = env_at(T0);
    env.start("Existing P1 work", "P1");
    sprint(&env, "P1", &[]);
    let before = std::fs::read(env.home_file("status.json")).unwrap();
    for p in ["P2", "P3"] {
        let r = env.exec(&[
            "--json",
            "start",
            "Write docs",
            "--project",
            "x",
            "--priority",
            p,
        ]);
        r.code(4);
        assert_eq!(
            r.json(),
            json!({
                "status": "blocked",
                "reason": "priority_gate",
                "message": format!("Task priority {p} doesn't align with current P1 sprint focus."),
                "options": ["Use --override 'justification' to proceed anyway", "Change to a P1 task instead"]
            })
        );
        assert_eq!(
            std::fs::read(env.home_file("status.json")).unwrap(),
            before,
            "status.json unchanged"
        );
    }
    // Text mode says so and exits 4 too.
    let r = env.exec(&["start", "Write docs", "--priority", "P3"]);
    r.code(4);
    assert!(r.stdout.contains("BLOCKED"), "{}", r.stdout);
    // P1 passes.
    env.exec(&["--json", "start", "Ship it", "--priority", "P1"])
        .code(0);
}

#[test]
fn override_passes_the_gate_and_records_reason_and_drift_warning() {
    let env = env_at(T0);
    sprint(&env, "P1", &[]);
    let r = env.exec(&[
        "--json",
        "start",
        "Tidy docs",
        "--priority",
        "P3",
        "--override",
        "Customer asked",
    ]);
    r.code(0);
    assert_eq!(r.json()["message"], REGISTERED);
    let id = id_of(&r);
    let i = env.instance(&id).unwrap();
    assert_eq!(i["override_reason"], "Customer asked");
    assert_eq!(
        env.state()["drift_warnings"],
        json!([{"instance_id": id, "reason": "P3 task during P1 sprint focus", "acknowledged": false}])
    );
    // The warning shows in status and goes away when the instance is done.
    let s = env.exec(&["--json", "status"]);
    assert_eq!(s.json()["drift_warnings"][0]["instance_id"], id.as_str());
    env.exec(&["--json", "done", "--instance", &id]).code(0);
    assert_eq!(env.state()["drift_warnings"], json!([]));
}

#[test]
fn override_on_a_task_that_passes_records_no_drift_warning() {
    let env = env_at(T0);
    let r = env.exec(&[
        "--json",
        "start",
        "t",
        "--priority",
        "P2",
        "--override",
        "just in case",
    ]);
    let id = id_of(r.code(0));
    assert_eq!(
        env.instance(&id).unwrap()["override_reason"],
        "just in case"
    );
    assert_eq!(env.state()["drift_warnings"], json!([]));
}

#[test]
fn explicitly_deferred_work_is_blocked_when_the_focus_is_not_p1() {
    let env = env_at(T0);
    sprint(&env, "P2", &["Documentation improvements", "Refactoring"]);
    let r = env.exec(&[
        "--json",
        "start",
        "Refactor the auth module",
        "--priority",
        "P2",
    ]);
    r.code(4);
    let v = r.json();
    assert_eq!(v["status"], "blocked");
    assert_eq!(v["reason"], "priority_gate");
    assert!(
        v["message"].as_str().unwrap().contains("Refactoring"),
        "{v}"
    );
    assert_eq!(
        v["options"][0],
        "Use --override 'justification' to proceed anyway"
    );
    env.exec(&[
        "--json",
        "start",
        "Lead scoring endpoint",
        "--priority",
        "P2",
    ])
    .code(0);
    // Override records a drift warning naming the deferred item.
    let r = env.exec(&[
        "--json",
        "start",
        "Documentation improvements",
        "--priority",
        "P3",
        "--override",
        "ok",
    ]);
    r.code(0);
    let w = &env.state()["drift_warnings"][0];
    assert_eq!(w["instance_id"], id_of(&r).as_str());
    assert_eq!(w["acknowledged"], false);
}

#[test]
fn north_stars_file_from_config_gates_non_p1_tasks() {
    let env = env_at(T0);
    let ns = env.root.path().join("north-stars.md");
    std::fs::write(&ns, "# Me\n- bullet outside\n## Priority hierarchy\n1. Pitchello revenue features\n2. Mission Control lead scoring\n## Later\n- Knitting\n").unwrap();
    env.write_home(
        "config.json",
        &json!({"north_stars_path": ns.to_str().unwrap()}).to_string(),
    );
    env.exec(&[
        "--json",
        "start",
        "Add revenue dashboard",
        "--priority",
        "P2",
    ])
    .code(0);
    env.exec(&[
        "--json",
        "align",
        "Tune lead-scoring weights",
        "--priority",
        "P3",
    ])
    .code(0);
    let r = env.exec(&["--json", "start", "Knitting patterns", "--priority", "P2"]);
    r.code(4);
    assert_eq!(r.json()["reason"], "priority_gate");
    // P1 always passes.
    env.exec(&["--json", "start", "Knitting patterns", "--priority", "P1"])
        .code(0);
}

#[test]
fn north_stars_path_with_tilde_expands_to_home() {
    let env = env_at(T0);
    std::fs::write(env.root.path().join("ns.md"), "## Priorities\n- Revenue\n").unwrap();
    env.write_home("config.json", r#"{"north_stars_path":"~/ns.md"}"#);
    env.exec(&["--json", "align", "Gardening", "--priority", "P2"])
        .code(4);
    env.exec(&["--json", "align", "Revenue report", "--priority", "P2"])
        .code(0);
}

#[test]
fn project_priority_source_gates_tasks_in_that_project() {
    let env = env_at(T0);
    std::fs::create_dir_all(env.project.join(".conductor")).unwrap();
    std::fs::create_dir_all(env.project.join("plans")).unwrap();
    std::fs::write(
        env.project.join(".conductor/config.json"),
        r#"{"priority_source":"plans/prd.json","priority_field":"tasks[].priority"}"#,
    )
    .unwrap();
    std::fs::write(
        env.project.join("plans/prd.json"),
        r#"{"tasks":[{"title":"Billing webhooks","priority":"P1"},{"title":"Invoice export","priority":"P2"}]}"#,
    )
    .unwrap();
    env.exec(&[
        "--json",
        "start",
        "Retry billing webhooks",
        "--priority",
        "P2",
    ])
    .code(0);
    env.exec(&["--json", "start", "Dark mode", "--priority", "P3"])
        .code(4);
    // Another directory without that config is not gated.
    let other = env.dir("other");
    env.exec_in(
        &other,
        &["--json", "start", "Dark mode", "--priority", "P3"],
    )
    .code(0);
}

#[test]
fn align_runs_the_gate_without_registering() {
    let env = env_at(T0);
    sprint(&env, "P1", &[]);
    let r = env.exec(&["--json", "align", "Write docs", "--priority", "P3"]);
    r.code(4);
    assert_eq!(r.json()["status"], "blocked");
    assert_eq!(
        r.json()["message"],
        "Task priority P3 doesn't align with current P1 sprint focus."
    );
    let r = env.exec(&["--json", "align", "Fix login", "--priority", "P1"]);
    r.code(0);
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(r.json()["aligned"], true);
    let st = env.home_file("status.json");
    assert!(
        !st.exists() || env.state()["instances"] == json!([]),
        "align registered nothing"
    );
}

#[test]
fn an_invalid_sprint_file_is_reported_not_ignored() {
    let env = env_at(T0);
    env.write_home("sprint.json", r#"{"sprint_name":"x","focus":"P9"}"#);
    let r = env.exec(&["--json", "start", "t", "--priority", "P2"]);
    r.code(1);
    assert_eq!(r.json()["reason"], "corrupt_state");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("sprint.json")
    );
}

// ---------------------------------------------------------------- claim

/// Two instances in the project directory; returns (a, b).
fn two(env: &TestEnv) -> (String, String) {
    let a = env.start_in(&env.project, "proj", "Refactoring user service", "P1");
    let b = env.start_in(&env.project, "proj", "Fix auth bug", "P1");
    (a, b)
}

#[test]
fn claim_success_is_the_spec_object_with_absolute_paths() {
    let env = env_at(T0);
    let id = env.start("Fix auth bug", "P1");
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        "src/api/users.ts",
        "src/lib/auth.ts",
    ]);
    r.code(0);
    let (u, a) = (env.abs("src/api/users.ts"), env.abs("src/lib/auth.ts"));
    // The spec's object, plus each claim's fencing token (issue 34).
    let mut v = r.json();
    assert_eq!(v["tokens"], json!({ u.clone(): 1, a.clone(): 2 }));
    v.as_object_mut().unwrap().remove("tokens");
    assert_eq!(
        v,
        json!({"status": "ok", "claimed": [u, a], "message": "Files claimed. Safe to edit."})
    );
    let st = env.state();
    assert_eq!(st["global_claims"], json!({ &u: id, &a: id }));
    assert_eq!(env.instance(&id).unwrap()["files_claimed"], json!([u, a]));
}

#[test]
fn claim_text_output() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let r = env.exec(&["claim", "--instance", &id, "src/a.rs"]);
    r.code(0);
    assert_eq!(r.stdout.trim(), "Claimed: src/a.rs. Safe to edit.");
}

#[test]
fn conflict_reports_the_holder_grants_the_rest_exits_3_and_logs() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/api/users.ts"])
        .code(0);
    let mut env = env;
    env.at("2026-01-17T09:10:00Z");
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &b,
        "src/api/users.ts",
        "src/lib/auth.ts",
    ]);
    r.code(3);
    let users = env.abs("src/api/users.ts");
    assert_eq!(
        r.json(),
        json!({
            "status": "conflict",
            "conflicts": [{
                "file": users,
                "held_by": a,
                "holder_task": "Refactoring user service",
                "holder_started": T0,
                "holder_alive": true,
                "holder_last_heartbeat": T0,
            }],
            "claimed": [env.abs("src/lib/auth.ts")],
            "message": format!("1 conflict detected. Coordinate with {a} or wait for release."),
        })
    );
    // The free file was granted; the held one stayed with its holder.
    let st = env.state();
    assert_eq!(st["global_claims"][&users], a.as_str());
    assert_eq!(st["global_claims"][env.abs("src/lib/auth.ts")], b.as_str());
    assert_eq!(
        env.log(),
        [format!(
            "2026-01-17T09:10:00Z | CONFLICT | {b} tried to claim {users} already held by {a}"
        )]
    );
    // Text form.
    let r = env.exec(&["claim", "--instance", &b, "src/api/users.ts"]);
    r.code(3);
    assert!(
        r.stdout.contains(&format!("CONFLICT: src/api/users.ts is claimed by {a} (Refactoring user service). Coordinate or wait.")),
        "{}",
        r.stdout
    );
}

#[test]
fn a_conflict_with_a_stale_holder_says_so() {
    let mut env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/x.rs"])
        .code(0);
    env.at("2026-01-17T10:30:00Z");
    let r = env.exec(&["--json", "claim", "--instance", &b, "src/x.rs"]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["holder_alive"], false);
    assert_eq!(r.json()["conflicts"][0]["holder_last_heartbeat"], T0);
}

#[test]
fn several_conflicts_name_every_holder() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    let c = env.start_in(&env.project, "proj", "third", "P1");
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    env.exec(&["--json", "claim", "--instance", &b, "src/b.rs"])
        .code(0);
    let r = env.exec(&["--json", "claim", "--instance", &c, "src/a.rs", "src/b.rs"]);
    r.code(3);
    let v = r.json();
    assert_eq!(v["conflicts"][0]["held_by"], a.as_str());
    assert_eq!(v["conflicts"][1]["held_by"], b.as_str());
    assert_eq!(v["claimed"], json!([]));
    assert_eq!(
        v["message"],
        format!("2 conflicts detected. Coordinate with {a}, {b} or wait for release.")
    );
}

#[test]
fn reclaiming_your_own_file_is_a_no_op_success() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    env.exec(&["--json", "claim", "--instance", &id, "src/a.rs"])
        .code(0);
    let before = env.state();
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        "src/a.rs",
        "./src/a.rs",
    ]);
    r.code(0);
    assert_eq!(r.json()["claimed"], json!([env.abs("src/a.rs")]));
    let after = env.state();
    assert_eq!(after["global_claims"], before["global_claims"]);
    assert_eq!(
        after["instances"][0]["files_claimed"],
        json!([env.abs("src/a.rs")])
    );
    assert!(env.log().is_empty());
}

#[test]
fn force_takes_the_file_over_and_logs_a_force_line() {
    let mut env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs", "src/b.rs"])
        .code(0);
    env.at("2026-01-17T09:20:00Z");
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &b,
        "src/a.rs",
        "--force",
        "Talked to other instance, taking over",
    ]);
    r.code(0);
    let f = env.abs("src/a.rs");
    let mut v = r.json();
    assert!(v["tokens"][&f].as_u64().is_some(), "{v}");
    v.as_object_mut().unwrap().remove("tokens");
    assert_eq!(
        v,
        json!({"status": "ok", "claimed": [f], "message": "Files claimed. Safe to edit.", "forced": [{"file": f, "from": a}]})
    );
    assert_eq!(env.state()["global_claims"][&f], b.as_str());
    assert_eq!(
        env.instance(&a).unwrap()["files_claimed"],
        json!([env.abs("src/b.rs")])
    );
    assert_eq!(env.instance(&b).unwrap()["files_claimed"], json!([f]));
    let log = env.log();
    assert_eq!(log.len(), 1, "{log:?}");
    let parts: Vec<&str> = log[0].splitn(3, " | ").collect();
    assert_eq!(parts[..2], ["2026-01-17T09:20:00Z", "FORCE"]);
    for needle in [
        a.as_str(),
        b.as_str(),
        f.as_str(),
        "Talked to other instance, taking over",
    ] {
        assert!(
            parts[2].contains(needle),
            "FORCE line lacks {needle}: {}",
            log[0]
        );
    }
}

#[test]
fn a_refused_file_claimed_later_logs_resolved() {
    let mut env = env_at(T0);
    let (a, b) = two(&env);
    let f = env.abs("src/api/users.ts");
    env.exec(&["--json", "claim", "--instance", &a, "src/api/users.ts"])
        .code(0);
    env.exec(&["--json", "claim", "--instance", &b, "src/api/users.ts"])
        .code(3);
    env.at("2026-01-17T09:35:00Z");
    env.exec(&["--json", "release", "--instance", &a, "src/api/users.ts"])
        .code(0);
    let r = env.exec(&["--json", "claim", "--instance", &b, "src/api/users.ts"]);
    r.code(0);
    let log = env.log();
    assert!(log[0].contains("| CONFLICT |"), "{log:?}");
    assert_eq!(
        log.last().unwrap(),
        &format!("2026-01-17T09:35:00Z | RESOLVED | {a} released {f}, {b} claimed it"),
        "{log:?}"
    );
    // Only once: claiming again logs nothing new.
    let n = env.log().len();
    env.exec(&["--json", "claim", "--instance", &b, "src/api/users.ts"])
        .code(0);
    assert_eq!(env.log().len(), n);
    // A claim with no earlier conflict writes no RESOLVED line.
    env.exec(&["--json", "claim", "--instance", &a, "src/other.rs"])
        .code(0);
    assert_eq!(
        env.log().iter().filter(|l| l.contains("RESOLVED")).count(),
        1
    );
}

#[test]
fn relative_paths_resolve_against_the_cwd_inside_the_working_directory() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let sub = env.project.join("src");
    let r = env.exec_in(&sub, &["--json", "claim", "--instance", &id, "a.rs"]);
    assert_eq!(r.code(0).json()["claimed"], json!([env.abs("src/a.rs")]));
    // Outside the working directory they resolve against the working directory.
    let elsewhere = env.dir("elsewhere");
    let r = env.exec_in(&elsewhere, &["--json", "claim", "--instance", &id, "b.rs"]);
    assert_eq!(r.code(0).json()["claimed"], json!([env.abs("b.rs")]));
}

#[test]
fn dot_and_dotdot_collapse() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        "./src/../src/./lib/x.rs",
        "src//y.rs",
    ]);
    assert_eq!(
        r.code(0).json()["claimed"],
        json!([env.abs("src/lib/x.rs"), env.abs("src/y.rs")])
    );
    let abs = format!("{}/src/../src/lib/x.rs", env.project.display());
    let r = env.exec(&["--json", "claim", "--instance", &id, &abs]);
    assert_eq!(
        r.code(0).json()["claimed"],
        json!([env.abs("src/lib/x.rs")])
    );
}

#[test]
fn a_symlinked_parent_is_the_same_claim_as_the_real_path() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    let link = env.root.path().join("link-to-src");
    std::os::unix::fs::symlink(env.project.join("src"), &link).unwrap();
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    let via_link = format!("{}/a.rs", link.display());
    let r = env.exec(&["--json", "claim", "--instance", &b, &via_link]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["file"], env.abs("src/a.rs"));
    // Also for a file in a directory that does not exist yet below the link.
    let r = env.exec(&[
        "--json",
        "claim",
        "--instance",
        &a,
        &format!("{}/new/dir/z.rs", link.display()),
    ]);
    assert_eq!(
        r.code(0).json()["claimed"],
        json!([env.abs("src/new/dir/z.rs")])
    );
}

#[test]
fn dotdot_escaping_the_base_is_refused() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let r = env.exec(&["--json", "claim", "--instance", &id, "../outside.rs"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "path_outside_project");
    let r = env.exec(&["--json", "claim", "--instance", &id, "src/../../outside.rs"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "path_outside_project");
    assert_eq!(env.state()["global_claims"], json!({}), "nothing claimed");
    // An absolute path outside the project is allowed (explicit).
    let outside = env.root.path().join("outside.rs");
    env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        outside.to_str().unwrap(),
    ])
    .code(0);
}

#[test]
fn dotdot_from_a_subdirectory_may_climb_to_the_working_directory_but_not_above() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let sub = env.project.join("src");
    let r = env.exec_in(
        &sub,
        &["--json", "claim", "--instance", &id, "../README.md"],
    );
    assert_eq!(r.code(0).json()["claimed"], json!([env.abs("README.md")]));
    let r = env.exec_in(
        &sub,
        &["--json", "claim", "--instance", &id, "../../outside.rs"],
    );
    r.code(2);
    assert_eq!(r.json()["reason"], "path_outside_project");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains(env.project.to_str().unwrap())
    );
}

#[test]
fn two_projects_with_the_same_relative_path_never_collide() {
    let env = env_at(T0);
    let p2 = env.dir("proj2");
    let a = env.start_in(&env.project, "one", "t", "P1");
    let b = env.start_in(&p2, "two", "t", "P1");
    env.exec(&["--json", "claim", "src/main.rs"]).code(0);
    let r = env.exec_in(&p2, &["--json", "claim", "src/main.rs"]);
    r.code(0);
    assert_eq!(
        r.json()["claimed"],
        json!([p2.join("src/main.rs").to_str().unwrap()])
    );
    let st = env.state();
    assert_eq!(st["global_claims"][env.abs("src/main.rs")], a.as_str());
    assert_eq!(
        st["global_claims"][p2.join("src/main.rs").to_str().unwrap()],
        b.as_str()
    );
}

#[test]
fn invalid_claim_paths_are_rejected_without_change() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let r = env.exec(&["--json", "claim", "--instance", &id, ""]);
    r.code(2);
    let r = env.exec(&["--json", "claim", "--instance", &id, "a\nb"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "invalid_path");
    assert_eq!(env.state()["global_claims"], json!({}));
}

// ---------------------------------------------------------------- release, done, heartbeat, cleanup

#[test]
fn release_files_all_and_reason() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        "src/a.rs",
        "src/b.rs",
        "src/c.rs",
    ])
    .code(0);
    let r = env.exec(&[
        "--json",
        "release",
        "--instance",
        &id,
        "src/a.rs",
        "--reason",
        "Switching to higher priority task",
    ]);
    r.code(0);
    let a = env.abs("src/a.rs");
    assert_eq!(
        r.json(),
        json!({"status": "ok", "released": [a], "message": format!("Released: {a}")})
    );
    assert!(env.state()["global_claims"].get(&a).is_none());
    assert_eq!(
        env.instance(&id).unwrap()["files_claimed"],
        json!([env.abs("src/b.rs"), env.abs("src/c.rs")])
    );
    let last = env.log().pop().unwrap();
    assert_eq!(
        last,
        format!("{T0} | RELEASE | {id} released {a}: Switching to higher priority task")
    );

    let r = env.exec(&["--json", "release", "--instance", &id, "--all"]);
    r.code(0);
    assert_eq!(
        r.json()["released"],
        json!([env.abs("src/b.rs"), env.abs("src/c.rs")])
    );
    assert_eq!(env.state()["global_claims"], json!({}));
    assert_eq!(env.instance(&id).unwrap()["files_claimed"], json!([]));
    // Text form of an empty release.
    let r = env.exec(&["release", "--instance", &id, "--all"]);
    assert_eq!(r.code(0).stdout.trim(), "Nothing to release.");
}

#[test]
fn releasing_a_file_you_do_not_hold_is_not_held_unless_forced() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    let before = std::fs::read(env.home_file("status.json")).unwrap();
    for file in ["src/a.rs", "src/nobody.rs"] {
        let r = env.exec(&["--json", "release", "--instance", &b, file]);
        r.code(2);
        assert_eq!(r.json()["reason"], "not_held");
        assert_eq!(std::fs::read(env.home_file("status.json")).unwrap(), before);
    }
    let r = env.exec(&["--json", "release", "--instance", &b, "--force", "src/a.rs"]);
    r.code(0);
    assert_eq!(r.json()["released"], json!([env.abs("src/a.rs")]));
    assert_eq!(env.state()["global_claims"], json!({}));
    assert_eq!(env.instance(&a).unwrap()["files_claimed"], json!([]));
    assert!(env.log().last().unwrap().contains(&format!(
        "{b} force-released {} held by {a}",
        env.abs("src/a.rs")
    )));
}

#[test]
fn release_needs_files_or_all() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    env.run(&["release", "--instance", &id]).code(2);
}

#[test]
fn done_writes_the_history_line_releases_and_removes_the_instance() {
    let mut env = env_at(T0);
    let id = env.start_in(&env.project, "pitchello", "Fix auth bug", "P2");
    let other = env.start_in(&env.project, "pitchello", "Other", "P1");
    env.exec(&[
        "--json",
        "claim",
        "--instance",
        &id,
        "src/api/users.ts",
        "src/lib/auth.ts",
    ])
    .code(0);
    env.exec(&["--json", "claim", "--instance", &other, "src/keep.rs"])
        .code(0);
    env.at("2026-01-17T09:45:30Z");
    let r = env.exec(&["--json", "done", "--instance", &id, "--notes", "shipped"]);
    r.code(0);
    let (u, a) = (env.abs("src/api/users.ts"), env.abs("src/lib/auth.ts"));
    assert_eq!(
        r.json(),
        json!({"status": "ok", "instance_id": id, "outcome": "success", "released": [u, a],
               "message": "Task complete. All claims released."})
    );
    assert_eq!(
        env.history(),
        [json!({
            "id": id, "project": "pitchello", "task": "Fix auth bug", "priority": "P2",
            "started_at": T0, "completed_at": "2026-01-17T09:45:30Z", "outcome": "success",
            "duration_minutes": 45, "files_modified": [u, a], "notes": "shipped"
        })]
    );
    let st = env.state();
    assert!(env.instance(&id).is_none());
    assert_eq!(
        st["global_claims"],
        json!({ env.abs("src/keep.rs"): other })
    );
    assert_eq!(st["updated_at"], "2026-01-17T09:45:30Z");
    // The id is gone now: a second done names it as finished and changes nothing.
    let r = env.exec(&["--json", "done", "--instance", &id]);
    r.code(2);
    assert_eq!(r.json()["reason"], "already_finished");
}

#[test]
fn done_with_outcome_abandoned_and_files_modified() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    env.exec(&["--json", "claim", "--instance", &id, "src/a.rs"])
        .code(0);
    let r = env.exec(&[
        "--json",
        "done",
        "--instance",
        &id,
        "--outcome",
        "abandoned",
        "--files-modified",
        "src/b.rs",
        "/etc/x",
    ]);
    r.code(0);
    assert_eq!(r.json()["outcome"], "abandoned");
    let h = &env.history()[0];
    assert_eq!(h["outcome"], "abandoned");
    assert_eq!(h["files_modified"], json!([env.abs("src/b.rs"), "/etc/x"]));
    assert!(h.get("notes").is_none());
    // orphaned is cleanup's word, not done's.
    let id = env.start("t", "P1");
    env.run(&["done", "--instance", &id, "--outcome", "orphaned"])
        .code(2);
    assert!(env.instance(&id).is_some());
}

#[test]
fn done_text_output() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    let r = env.exec(&["done", "--instance", &id]);
    assert!(r.code(0).stdout.contains("Task complete"), "{}", r.stdout);
}

#[test]
fn heartbeat_updates_last_heartbeat_only() {
    let mut env = env_at(T0);
    let id = env.start("t", "P1");
    env.at("2026-01-17T09:07:00Z");
    let r = env.exec(&["--json", "heartbeat", "--instance", &id]);
    r.code(0);
    assert_eq!(
        r.json(),
        json!({"status": "ok", "instance_id": id, "last_heartbeat": "2026-01-17T09:07:00Z", "message": "Heartbeat recorded."})
    );
    let i = env.instance(&id).unwrap();
    assert_eq!(i["last_heartbeat"], "2026-01-17T09:07:00Z");
    assert_eq!(i["started_at"], T0);
}

#[test]
fn cleanup_orphans_after_more_than_an_hour_without_heartbeat() {
    let mut env = env_at(T0);
    let old = env.start("old task", "P1");
    env.exec(&["--json", "claim", "--instance", &old, "src/old.rs"])
        .code(0);
    env.at("2026-01-17T09:02:00Z");
    let young = env.start_in(&env.dir("young"), "young", "young task", "P1");
    env.exec(&["--json", "claim", "--instance", &young, "/tmp/young.rs"])
        .code(0);
    // 59 minutes after the old one's last heartbeat: nothing to do.
    env.at("2026-01-17T09:59:00Z");
    let r = env.exec(&["--json", "cleanup"]);
    r.code(0);
    assert_eq!(
        r.json(),
        json!({"status": "ok", "orphaned": [], "message": "Cleaned up 0 orphaned instances"})
    );
    assert!(env.instance(&old).is_some());
    // 61 minutes: the old one is orphaned, the young one (59 min) stays.
    env.at("2026-01-17T10:01:00Z");
    let r = env.exec(&["--json", "cleanup"]);
    r.code(0);
    assert_eq!(
        r.json(),
        json!({"status": "ok", "orphaned": [old], "message": "Cleaned up 1 orphaned instances"})
    );
    assert!(env.instance(&old).is_none());
    assert!(env.instance(&young).is_some());
    assert_eq!(
        env.state()["global_claims"],
        json!({"/tmp/young.rs": young})
    );
    let h = &env.history()[0];
    assert_eq!(h["id"], old.as_str());
    assert_eq!(h["outcome"], "orphaned");
    assert_eq!(h["completed_at"], "2026-01-17T10:01:00Z");
    assert_eq!(h["duration_minutes"], 61);
    assert_eq!(h["files_modified"], json!([env.abs("src/old.rs")]));
}

#[test]
fn a_heartbeat_keeps_an_instance_from_being_orphaned() {
    let mut env = env_at(T0);
    let id = env.start("t", "P1");
    env.at("2026-01-17T09:30:00Z");
    env.exec(&["--json", "heartbeat", "--instance", &id])
        .code(0);
    env.at("2026-01-17T10:29:00Z");
    assert_eq!(
        env.exec(&["--json", "cleanup"]).code(0).json()["orphaned"],
        json!([])
    );
    env.at("2026-01-17T10:31:00Z");
    assert_eq!(
        env.exec(&["--json", "cleanup"]).code(0).json()["orphaned"],
        json!([id])
    );
}

#[test]
fn cleanup_max_age_and_config_default() {
    let mut env = env_at(T0);
    let id = env.start("t", "P1");
    env.at("2026-01-17T09:11:00Z");
    assert_eq!(
        env.exec(&["--json", "cleanup", "--max-age-minutes", "20"])
            .code(0)
            .json()["orphaned"],
        json!([])
    );
    env.write_home("config.json", r#"{"default_max_age_minutes": 10}"#);
    assert_eq!(
        env.exec(&["--json", "cleanup"]).code(0).json()["orphaned"],
        json!([id])
    );
}

#[test]
fn cleanup_instance_retires_that_one_now() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    let r = env.exec(&["--json", "cleanup", "--instance", &a]);
    assert_eq!(r.code(0).json()["orphaned"], json!([a]));
    assert!(env.instance(&a).is_none());
    assert!(env.instance(&b).is_some());
    assert_eq!(env.state()["global_claims"], json!({}));
    assert_eq!(env.history()[0]["outcome"], "orphaned");
    let r = env.exec(&["--json", "cleanup", "--instance", &a]);
    r.code(2);
    assert_eq!(r.json()["reason"], "unknown_instance");
    let r = env.exec(&["--json", "cleanup", "--instance", "nope"]);
    r.code(2);
    assert!(
        r.json()["message"].as_str().unwrap().contains("nope"),
        "{}",
        r.stdout
    );
}

// ---------------------------------------------------------------- which instance

#[test]
fn the_instance_comes_from_flag_env_or_cwd() {
    let env = env_at(T0);
    let p2 = env.dir("proj2");
    let a = env.start_in(&env.project, "one", "t", "P1");
    let b = env.start_in(&p2, "two", "t", "P1");
    // The one instance whose working directory contains the cwd (also from a subdirectory).
    let r = env.exec_in(&env.project.join("src"), &["--json", "heartbeat"]);
    assert_eq!(r.code(0).json()["instance_id"], a.as_str());
    let r = env.exec_in(&p2, &["--json", "heartbeat"]);
    assert_eq!(r.code(0).json()["instance_id"], b.as_str());
    // CONDUCTOR_INSTANCE_ID beats the cwd; --instance beats both.
    let r = env.exec_env(&["--json", "heartbeat"], &[("CONDUCTOR_INSTANCE_ID", &b)]);
    assert_eq!(r.code(0).json()["instance_id"], b.as_str());
    let r = env.exec_env(
        &["--json", "heartbeat", "--instance", &a],
        &[("CONDUCTOR_INSTANCE_ID", &b)],
    );
    assert_eq!(r.code(0).json()["instance_id"], a.as_str());
    // Same through `op`.
    let r = env.exec_env(
        &["op", r#"{"operation":"heartbeat"}"#],
        &[("CONDUCTOR_INSTANCE_ID", &b)],
    );
    assert_eq!(r.code(0).json()["instance_id"], b.as_str());
}

#[test]
fn no_matching_instance_is_ambiguous_and_lists_the_candidates() {
    let env = env_at(T0);
    let r = env.exec(&["--json", "claim", "src/a.rs"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "ambiguous_instance");
    let a = env.start_in(&env.project, "one", "task one", "P1");
    let elsewhere = env.dir("elsewhere");
    let r = env.exec_in(&elsewhere, &["--json", "claim", "a.rs"]);
    r.code(2);
    assert_eq!(r.json()["reason"], "ambiguous_instance");
    assert!(
        r.json()["message"].as_str().unwrap().contains(&a),
        "{}",
        r.stdout
    );
    assert_eq!(env.state()["global_claims"], json!({}));
}

#[test]
fn several_matching_instances_are_ambiguous_and_listed() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    for args in [
        &["--json", "claim", "src/a.rs"][..],
        &["--json", "done"],
        &["--json", "heartbeat"],
        &["--json", "release", "--all"],
    ] {
        let r = env.exec(args);
        r.code(2);
        let v = r.json();
        assert_eq!(v["reason"], "ambiguous_instance", "{args:?}");
        let m = v["message"].as_str().unwrap();
        assert!(m.contains(&a) && m.contains(&b), "{m}");
    }
    assert_eq!(
        env.state()["instances"].as_array().unwrap().len(),
        2,
        "nothing done"
    );
    // Text mode: the message is on stderr.
    let r = env.exec(&["claim", "src/a.rs"]);
    r.code(2);
    assert!(
        r.stderr.contains(&a) && r.stderr.contains(&b),
        "{}",
        r.stderr
    );
}

#[test]
fn malformed_and_unknown_ids_are_invalid() {
    let env = env_at(T0);
    env.start("t", "P1");
    for bad in ["itm-ABCDEF", "xy-a1b2c3", "itm-a1b2c", "../../etc"] {
        let r = env.exec(&["--json", "claim", "--instance", bad, "src/a.rs"]);
        r.code(2);
        // The schema check names the field and the rule (reason invalid_input).
        let m = r.json()["message"].as_str().unwrap().to_string();
        assert!(m.contains("/instance_id") && m.contains(bad), "{bad}: {m}");
    }
    // Any three lowercase letters make a well-formed id (the protocol's pattern).
    for unknown in ["itm-000000", "xyz-a1b2c3"] {
        let r = env.exec(&["--json", "claim", "--instance", unknown, "src/a.rs"]);
        r.code(2);
        assert_eq!(r.json()["reason"], "unknown_instance");
    }
    let r = env.exec_env(
        &["--json", "heartbeat"],
        &[("CONDUCTOR_INSTANCE_ID", "web-ffffff")],
    );
    r.code(2);
    assert_eq!(r.json()["reason"], "unknown_instance");
}

// ---------------------------------------------------------------- status

#[test]
fn status_json_is_the_spec_object() {
    let mut env = env_at(T0);
    sprint(&env, "P1", &[]);
    let (a, b) = two(&env);
    env.at("2026-01-17T09:20:00Z");
    let c = env.exec(&[
        "--json",
        "start",
        "docs",
        "--priority",
        "P3",
        "--override",
        "asked",
    ]);
    let c = id_of(c.code(0));
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs", "src/b.rs"])
        .code(0);
    env.exec(&["--json", "claim", "--instance", &b, "src/a.rs", "src/c.rs"])
        .code(3);
    env.at("2026-01-17T09:45:00Z");
    let r = env.exec(&["--json", "status"]);
    r.code(0);
    let v = r.json();
    assert_eq!(
        keys(&v),
        [
            "conflicts",
            "drift_warnings",
            "instances",
            "status",
            "summary"
        ]
    );
    assert_eq!(v["status"], "ok");
    let st = env.state();
    assert_eq!(v["instances"], st["instances"]);
    assert_eq!(v["drift_warnings"], st["drift_warnings"]);
    assert_eq!(v["drift_warnings"][0]["instance_id"], c.as_str());
    assert_eq!(
        v["conflicts"],
        json!([{"file": env.abs("src/a.rs"), "requested_by": b, "held_by": a,
                "holder_task": "Refactoring user service", "since": "2026-01-17T09:20:00Z"}])
    );
    assert_eq!(
        v["summary"],
        json!({"active_count": 3, "total_files_claimed": 3, "oldest_instance_age_minutes": 45})
    );
    // Parsed back, the instances are the same State the store holds.
    let from_status: Vec<conductor::protocol::Instance> =
        serde_json::from_value(v["instances"].clone()).unwrap();
    let from_disk: conductor::protocol::State = serde_json::from_value(st).unwrap();
    assert_eq!(from_status, from_disk.instances);

    // The conflict is gone from status once the holder lets go (no longer between live instances).
    env.exec(&["--json", "done", "--instance", &a]).code(0);
    assert_eq!(
        env.exec(&["--json", "status"]).json()["conflicts"],
        json!([])
    );
}

#[test]
fn status_on_an_empty_home() {
    let env = env_at(T0);
    // An existing, empty home (a read-only command does not create a missing one).
    std::fs::create_dir(&env.home).unwrap();
    std::fs::set_permissions(
        &env.home,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let r = env.exec(&["--json", "status"]);
    assert_eq!(
        r.code(0).json(),
        json!({"status": "ok", "instances": [], "conflicts": [], "drift_warnings": [],
               "summary": {"active_count": 0, "total_files_claimed": 0, "oldest_instance_age_minutes": 0}})
    );
    let r = env.exec(&["status"]);
    assert!(
        r.code(0).stdout.contains("No active instances"),
        "{}",
        r.stdout
    );
}

#[test]
fn bare_conductor_shows_the_status() {
    let env = env_at(T0);
    let id = env.start("t", "P1");
    env.exec(&["--json", "claim", "--instance", &id, "src/a.rs"])
        .code(0);
    let bare = env.exec(&[]);
    let status = env.exec(&["status"]);
    assert_eq!(bare.code(0).stdout, status.code(0).stdout);
    assert!(bare.stdout.contains(&id));
    assert_eq!(
        env.exec(&["--json"]).code(0).json(),
        env.exec(&["--json", "status"]).json()
    );
}

#[test]
fn human_status_fits_80_columns_and_shows_files_relative_to_the_cwd() {
    let mut env = env_at(T0);
    sprint(&env, "P1", &[]);
    let long_task = "Refactor the whole authentication subsystem so that every service uses the new token broker and nothing else";
    let a = env.start_in(
        &env.project,
        &"long-project-name-".repeat(4),
        long_task,
        "P1",
    );
    let deep = format!("src/{}/file.rs", "very_long_directory_name".repeat(5));
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs", &deep])
        .code(0);
    let b = env.exec(&[
        "--json",
        "start",
        &"x".repeat(120),
        "--priority",
        "P3",
        "--override",
        "y",
    ]);
    let b = id_of(b.code(0));
    env.exec(&["--json", "claim", "--instance", &b, "src/a.rs"])
        .code(3);
    env.at("2026-01-17T09:05:00Z");
    let r = env.exec(&["status"]);
    r.code(0);
    for line in r.stdout.lines() {
        assert!(
            line.chars().count() <= 80,
            "line wider than 80 columns ({}):\n{line}",
            line.chars().count()
        );
    }
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines.iter().any(|l| l.trim() == "src/a.rs"),
        "relative path shown:\n{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains(&env.abs("src/a.rs")),
        "absolute path not shown:\n{}",
        r.stdout
    );
    assert!(r.stdout.contains(&a) && r.stdout.contains(&b));
    assert!(
        r.stdout.contains("Conflicts:") && r.stdout.contains("Drift warnings:"),
        "{}",
        r.stdout
    );
    // From a subdirectory, paths are relative to it; from outside, absolute.
    let r = env.exec_in(&env.project.join("src"), &["status"]);
    assert!(r.stdout.lines().any(|l| l.trim() == "a.rs"), "{}", r.stdout);
    let elsewhere = env.dir("elsewhere");
    let r = env.exec_in(&elsewhere, &["status"]);
    assert!(
        r.stdout.lines().any(|l| l.trim() == env.abs("src/a.rs")),
        "{}",
        r.stdout
    );
}

#[test]
fn control_characters_in_a_task_do_not_break_the_dashboard() {
    let env = env_at(T0);
    let id = env.start("line one\nline two \u{1b}[31mred", "P1");
    let r = env.exec(&["status"]);
    r.code(0);
    assert!(
        !r.stdout.contains('\u{1b}'),
        "raw escape reaches the terminal:\n{}",
        r.stdout
    );
    let line = r.stdout.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        line.contains("line one") && line.contains("line two"),
        "task on one line: {line:?}"
    );
    // The JSON keeps the task as given.
    assert_eq!(
        env.exec(&["--json", "status"]).json()["instances"][0]["task"],
        "line one\nline two \u{1b}[31mred"
    );
}

// ---------------------------------------------------------------- conflicts, reset, history

#[test]
fn conflicts_shows_the_log_and_the_unresolved() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    env.exec(&["--json", "claim", "--instance", &b, "src/a.rs"])
        .code(3);
    let r = env.exec(&["--json", "conflicts"]);
    r.code(0);
    let v = r.json();
    assert_eq!(
        v["recent"],
        json!([{"at": T0, "kind": "CONFLICT", "text": format!("{b} tried to claim {} already held by {a}", env.abs("src/a.rs"))}])
    );
    assert_eq!(v["unresolved"][0]["requested_by"], b.as_str());
    assert_eq!(v["unresolved"][0]["held_by"], a.as_str());
    let r = env.exec(&["conflicts"]);
    assert!(r.code(0).stdout.contains("CONFLICT"), "{}", r.stdout);
    // Once released, nothing is unresolved; the log still has the history.
    env.exec(&["--json", "release", "--instance", &a, "--all"])
        .code(0);
    let v = env.exec(&["--json", "conflicts", "--limit", "1"]).json();
    assert_eq!(v["unresolved"], json!([]));
    assert_eq!(v["recent"].as_array().unwrap().len(), 1);
    assert_eq!(v["recent"][0]["kind"], "RELEASE");
}

#[test]
fn reset_backs_up_status_json_byte_for_byte_then_starts_fresh() {
    let mut env = env_at(T0);
    let id = env.start("t", "P1");
    env.exec(&["--json", "claim", "--instance", &id, "src/a.rs"])
        .code(0);
    let old = std::fs::read(env.home_file("status.json")).unwrap();
    env.at("2026-01-17T10:00:00Z");
    let r = env.exec(&["--json", "reset"]);
    r.code(0);
    let backup = r.json()["backup"].as_str().unwrap().to_string();
    assert!(Path::new(&backup).is_absolute());
    assert_eq!(
        Path::new(&backup).parent().unwrap(),
        env.home.as_path(),
        "beside status.json"
    );
    assert!(backup.contains("20260117T100000Z"), "{backup}");
    assert_eq!(std::fs::read(&backup).unwrap(), old);
    let st = env.state();
    assert_eq!(st["instances"], json!([]));
    assert_eq!(st["global_claims"], json!({}));
    assert_eq!(st["updated_at"], "2026-01-17T10:00:00Z");
    // A second reset at the same second keeps both backups.
    let r2 = env.exec(&["--json", "reset"]);
    let backup2 = r2.code(0).json()["backup"].as_str().unwrap().to_string();
    assert_ne!(backup, backup2);
    assert_eq!(std::fs::read(&backup).unwrap(), old);
}

#[test]
fn reset_rescues_a_corrupt_status_json() {
    let env = env_at(T0);
    env.write_home("status.json", "{ this is not json");
    let r = env.run(&["--json", "status"]);
    r.code(1);
    assert_schema(conductor::schema::Schema::Output, &r.json());
    assert_eq!(r.json()["reason"], "corrupt_state");
    let r = env.run(&["--json", "claim", "--instance", "itm-000000", "a"]);
    r.code(1);
    assert_eq!(
        std::fs::read_to_string(env.home_file("status.json")).unwrap(),
        "{ this is not json",
        "never overwritten"
    );
    let r = env.exec(&["--json", "reset"]);
    r.code(0);
    let backup = r.json()["backup"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(backup).unwrap(),
        "{ this is not json"
    );
    env.exec(&["--json", "start", "t", "--priority", "P1"])
        .code(0);
}

#[test]
fn reset_without_a_status_json() {
    let env = env_at(T0);
    let r = env.exec(&["--json", "reset"]);
    assert_eq!(r.code(0).json()["backup"], Value::Null);
}

/// A home with four finished tasks across two projects and outcomes.
fn history_env() -> (TestEnv, Vec<String>) {
    let mut env = env_at(T0);
    let p2 = env.dir("proj2");
    let mut ids = Vec::new();
    for (i, (dir, project, outcome)) in [
        (env.project.clone(), "one", "success"),
        (p2.clone(), "two", "abandoned"),
        (env.project.clone(), "one", "abandoned"),
        (p2.clone(), "two", "success"),
    ]
    .into_iter()
    .enumerate()
    {
        env.at(&format!("2026-01-1{}T09:00:00Z", 5 + i));
        let id = env.start_in(&dir, project, &format!("task {i}"), "P1");
        env.at(&format!("2026-01-1{}T10:00:00Z", 5 + i));
        env.exec(&["--json", "done", "--instance", &id, "--outcome", outcome])
            .code(0);
        ids.push(id);
    }
    (env, ids)
}

fn history_ids(r: &Run) -> Vec<String> {
    r.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn history_filters() {
    let (env, ids) = history_env();
    let all = env.exec(&["--json", "history"]);
    assert_eq!(history_ids(all.code(0)), ids);
    assert_eq!(all.json()["entries"][0], env.history()[0]);
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--project", "two"])),
        [ids[1].clone(), ids[3].clone()]
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--outcome", "abandoned"])),
        [ids[1].clone(), ids[2].clone()]
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--since", "2026-01-17T10:00:00Z"])),
        [ids[2].clone(), ids[3].clone()]
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--since", "2026-01-18"])),
        [ids[3].clone()]
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--limit", "2"])),
        [ids[2].clone(), ids[3].clone()],
        "the last N"
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--limit", "1", "--project", "one"])),
        [ids[2].clone()]
    );
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--limit", "0"])),
        Vec::<String>::new()
    );
    // --since as an age, against the pinned clock (2026-01-18T10:00:00Z).
    assert_eq!(
        history_ids(&env.exec(&["--json", "history", "--since", "25h"])),
        [ids[2].clone(), ids[3].clone()]
    );
    // Text form: a header, then one line per entry.
    let r = env.exec(&["history", "--project", "one"]);
    assert_eq!(r.code(0).stdout.lines().count(), 3, "{}", r.stdout);
    assert!(r.stdout.starts_with("COMPLETED "), "{}", r.stdout);
    let r = env.exec(&["history", "--project", "nope"]);
    assert_eq!(r.code(0).stdout.trim(), "No matching history.");
    env.run(&["history", "--since", "yesterday-ish"]).code(2);
}

#[test]
fn history_skips_unreadable_lines_with_a_warning() {
    let (env, ids) = history_env();
    let path = env.home_file("history.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.insert_str(0, "{\"not\":\"an entry\"}\n");
    std::fs::write(&path, text).unwrap();
    let r = env.run(&["--json", "history"]);
    assert_eq!(history_ids(r.code(0)), ids);
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
}

// ---------------------------------------------------------------- op

#[test]
fn op_runs_every_operation() {
    let mut env = env_at(T0);
    let dir = env.project.to_str().unwrap().to_string();
    let r = env.exec(&["op", &json!({"operation": "start", "task": "Fix auth", "project": "pitchello", "priority": "P1", "working_directory": dir}).to_string()]);
    r.code(0);
    assert_eq!(keys(&r.json()), ["instance_id", "message", "status"]);
    let id = id_of(&r);
    assert_eq!(
        env.instance(&id).unwrap()["working_directory"],
        dir.as_str()
    );

    let r = env.exec(&[
        "op",
        &json!({"operation": "claim", "instance_id": id, "files": ["src/a.rs", "src/b.rs"]})
            .to_string(),
    ]);
    assert_eq!(
        r.code(0).json()["claimed"],
        json!([env.abs("src/a.rs"), env.abs("src/b.rs")])
    );

    let r = env.exec(&[
        "op",
        &json!({"operation": "release", "instance_id": id, "files": ["src/a.rs"], "reason": "r"})
            .to_string(),
    ]);
    assert_eq!(r.code(0).json()["released"], json!([env.abs("src/a.rs")]));
    let r = env.exec(&[
        "op",
        &json!({"operation": "release", "instance_id": id, "all": true}).to_string(),
    ]);
    assert_eq!(r.code(0).json()["released"], json!([env.abs("src/b.rs")]));

    env.at("2026-01-17T09:05:00Z");
    let r = env.exec(&[
        "op",
        &json!({"operation": "heartbeat", "instance_id": id}).to_string(),
    ]);
    assert_eq!(r.code(0).json()["last_heartbeat"], "2026-01-17T09:05:00Z");

    let r = env.exec(&["op", r#"{"operation":"status"}"#]);
    assert_eq!(r.code(0).json()["summary"]["active_count"], 1);

    let r = env.exec(&["op", r#"{"operation":"align","task":"x","priority":"P2"}"#]);
    assert_eq!(r.code(0).json()["aligned"], true);

    let r = env.exec(&["op", &json!({"operation": "done", "instance_id": id, "outcome": "success", "files_modified": ["src/api/users.ts"]}).to_string()]);
    r.code(0);
    assert_eq!(
        env.history()[0]["files_modified"],
        json!([env.abs("src/api/users.ts")])
    );

    let id2 = env.start("t", "P1");
    env.at("2026-01-17T11:00:00Z");
    let r = env.exec(&["op", r#"{"operation":"cleanup","max_age_minutes":60}"#]);
    assert_eq!(r.code(0).json()["orphaned"], json!([id2]));
}

#[test]
fn op_reads_stdin() {
    let env = env_at(T0);
    let r = env.exec_stdin(
        &["op"],
        r#"{"operation":"start","task":"t","project":"p","priority":"P1"}"#,
    );
    let id = id_of(r.code(0));
    let r = env.exec_stdin(
        &["op", "-"],
        &json!({"operation": "claim", "instance_id": id, "files": ["src/a.rs"]}).to_string(),
    );
    assert_eq!(r.code(0).json()["claimed"], json!([env.abs("src/a.rs")]));
    let r = env.exec_stdin(&["op"], "{\"operation\":\"status\"}\n");
    assert_eq!(r.code(0).json()["summary"]["total_files_claimed"], 1);
}

#[test]
fn op_gate_and_conflict_exit_codes() {
    let env = env_at(T0);
    sprint(&env, "P1", &[]);
    let r = env.exec(&[
        "op",
        r#"{"operation":"start","task":"docs","project":"p","priority":"P3"}"#,
    ]);
    r.code(4);
    assert_eq!(r.json()["reason"], "priority_gate");
    let r = env.exec(&[
        "op",
        r#"{"operation":"start","task":"docs","project":"p","priority":"P3","override":"asked"}"#,
    ]);
    let a = id_of(r.code(0));
    assert_eq!(env.instance(&a).unwrap()["override_reason"], "asked");
    let b = env.start("t", "P1");
    env.exec(&[
        "op",
        &json!({"operation": "claim", "instance_id": a, "files": ["src/a.rs"]}).to_string(),
    ])
    .code(0);
    let r = env.exec(&[
        "op",
        &json!({"operation": "claim", "instance_id": b, "files": ["src/a.rs"]}).to_string(),
    ]);
    assert_eq!(r.code(3).json()["status"], "conflict");
    let r = env.exec(&["op", &json!({"operation": "claim", "instance_id": b, "files": ["src/a.rs"], "force": "mine now"}).to_string()]);
    assert_eq!(
        r.code(0).json()["forced"],
        json!([{"file": env.abs("src/a.rs"), "from": a}])
    );
}

#[test]
fn op_rejects_bad_input_with_exit_2() {
    let env = env_at(T0);
    let cases = [
        ("not json", "invalid_input"),
        ("[1,2]", "invalid_input"),
        (r#"{"task":"x"}"#, "invalid_input"),
        (r#"{"operation":"explode"}"#, "unknown_operation"),
        (
            r#"{"operation":"Claim","files":["a"]}"#,
            "unknown_operation",
        ),
        (r#"{"operation":"claim","files":[]}"#, "invalid_input"),
        (
            r#"{"operation":"start","task":"t","project":"p","priority":"P1","extra":1}"#,
            "invalid_input",
        ),
        (
            r#"{"operation":"release","all":true,"files":["a"]}"#,
            "invalid_input",
        ),
        (
            r#"{"operation":"done","outcome":"orphaned"}"#,
            "invalid_input",
        ),
    ];
    for (input, reason) in cases {
        let r = env.exec(&["op", input]);
        r.code(2);
        assert_eq!(r.json()["reason"], reason, "{input}");
    }
    let r = env.exec_stdin(&["op"], "");
    assert_eq!(r.code(2).json()["reason"], "invalid_input");
    assert!(!env.home_file("status.json").exists() || env.state()["instances"] == json!([]));
}

// ---------------------------------------------------------------- errors and files

#[test]
fn json_errors_are_one_object_on_stdout_with_exit_1_or_2() {
    let env = env_at(T0);
    // exit 2: invalid input.
    let r = env.exec(&["--json", "claim", "--instance", "web-abcdef", "a"]);
    r.code(2);
    assert_eq!(r.json()["status"], "error");
    assert_eq!(r.json()["reason"], "unknown_instance");
    assert!(!r.json()["message"].as_str().unwrap().is_empty());
    assert!(
        r.stderr.contains("error:"),
        "the message also goes to stderr"
    );
    // exit 1: corrupt state.
    env.write_home("status.json", r#"{"version":"9.9","updated_at":"x","instances":[],"global_claims":{},"drift_warnings":[]}"#);
    let r = env.run(&["--json", "status"]);
    r.code(1);
    let v = r.json();
    assert_eq!(keys(&v), ["message", "reason", "status"]);
    assert_eq!(v["reason"], "corrupt_state");
    assert!(v["message"].as_str().unwrap().contains("9.9"), "{v}");
    // Without --json, nothing on stdout.
    let r = env.run(&["status"]);
    r.code(1);
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn usage_errors_with_json_are_json_too() {
    let env = env_at(T0);
    for args in [
        &["--json", "start"][..],
        &["--json", "claim"],
        &["--json", "frobnicate"],
        &["--json", "start", "t", "--priority", "P7"],
    ] {
        let r = env.run(args);
        r.code(2);
        let v = r.json();
        assert_schema(conductor::schema::Schema::Output, &v);
        assert_eq!(v["status"], "error", "{args:?}");
    }
}

#[test]
fn the_home_is_private() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    env.exec(&["--json", "claim", "--instance", &a, "src/a.rs"])
        .code(0);
    env.exec(&["--json", "claim", "--instance", &b, "src/a.rs"])
        .code(3);
    env.exec(&["--json", "done", "--instance", &a]).code(0);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.home), 0o700);
    for name in [
        "status.json",
        "history.jsonl",
        "conflicts.log",
        "status.lock",
    ] {
        assert_eq!(mode(&env.home_file(name)), 0o600, "{name}");
    }
    let r = env.exec(&["--json", "reset"]);
    let backup = r.code(0).json()["backup"].as_str().unwrap().to_string();
    assert_eq!(mode(Path::new(&backup)), 0o600, "backup");
    assert_eq!(mode(&env.home_file("status.json")), 0o600, "after reset");
}

#[test]
fn a_group_readable_home_is_tightened() {
    let env = env_at(T0);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.exec(&["--json", "status"]).code(0);
    assert_eq!(
        std::fs::metadata(&env.home).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn home_flag_overrides_conductor_home() {
    let env = env_at(T0);
    let other = env.root.path().join("other-home");
    let r = env.exec(&[
        "--json",
        "--home",
        other.to_str().unwrap(),
        "start",
        "t",
        "--priority",
        "P1",
    ]);
    r.code(0);
    assert!(other.join("status.json").exists());
    assert!(!env.home_file("status.json").exists());
}

// ---------------------------------------------------------------- concurrency

#[test]
fn concurrent_claims_of_one_file_have_exactly_one_winner() {
    let env = env_at(T0);
    let ids: Vec<String> = (0..6)
        .map(|i| env.start_in(&env.project, "proj", &format!("agent {i}"), "P1"))
        .collect();
    let children: Vec<_> = ids
        .iter()
        .map(|id| {
            let mut c = env.cmd();
            c.args(["--json", "claim", "--instance", id, "src/shared.rs"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            (id.clone(), c.spawn().unwrap())
        })
        .collect();
    let mut winners = Vec::new();
    for (id, child) in children {
        let o = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_schema(conductor::schema::Schema::Output, &v);
        match o.status.code() {
            Some(0) => winners.push(id),
            Some(3) => assert_eq!(v["conflicts"][0]["file"], env.abs("src/shared.rs")),
            other => panic!("unexpected exit {other:?}: {v}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    check_home(&env.home);
    assert_eq!(
        env.state()["global_claims"],
        json!({ env.abs("src/shared.rs"): winners[0] })
    );
    let conflicts = env
        .log()
        .iter()
        .filter(|l| l.contains("| CONFLICT |"))
        .count();
    assert_eq!(conflicts, 5);
    assert!(
        env.log()
            .iter()
            .all(|l| l.contains(&format!("already held by {}", winners[0])))
    );
}

#[test]
fn op_cleanup_of_one_instance() {
    let env = env_at(T0);
    let (a, b) = two(&env);
    let r = env.exec(&[
        "op",
        &json!({"operation": "cleanup", "instance_id": b}).to_string(),
    ]);
    assert_eq!(r.code(0).json()["orphaned"], json!([b]));
    assert!(env.instance(&a).is_some());
}

/// Review finding: reset removed instances without a trace in history or the journal.
#[test]
fn reset_records_what_it_removes() {
    let env = TestEnv::new();
    let a = env.start("to be reset", "P1");
    env.run(&["claim", "--instance", &a, "src/r.rs"]).code(0);
    env.run(&["reset"]).code(0);
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert_eq!(line["id"], a.as_str());
    assert_eq!(line["outcome"], "orphaned");
    assert_eq!(line["notes"], "removed by conductor reset");
    let events = env.run(&["events"]).json();
    let types: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"instance.orphaned") && types.contains(&"claim.released"),
        "{types:?}"
    );
    assert_eq!(env.state()["instances"].as_array().unwrap().len(), 0);
}
