//! The checked-in schemas against the fixtures and against the Rust types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use conductor::config::Config;
use conductor::protocol::ops::{Conflict, LiveConflict, Summary};
use conductor::protocol::*;
use conductor::schema::{self, Schema};
use conductor::time::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn manifest() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("manifest.json")).unwrap())
        .unwrap()
}

/// The schema for a fixture file name, by the manifest's prefix rule (longest prefix first,
/// after an optional `spec-`, followed by `-` or `.`).
fn schema_for(name: &str) -> Schema {
    let m = manifest();
    let stem = name.strip_prefix("spec-").unwrap_or(name);
    let mut prefixes: Vec<(&String, &Value)> =
        m["schema_for_prefix"].as_object().unwrap().iter().collect();
    prefixes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    let file = prefixes
        .iter()
        .find(|(p, _)| stem.starts_with(&format!("{p}-")) || stem.starts_with(&format!("{p}.")))
        .unwrap_or_else(|| panic!("no manifest prefix for fixture {name}"))
        .1
        .as_str()
        .unwrap();
    if name.ends_with(".jsonl") {
        return Schema::HistoryEntry;
    }
    [
        Schema::Status,
        Schema::HistoryEntry,
        Schema::Sprint,
        Schema::Config,
        Schema::ProjectConfig,
        Schema::OpInput,
        Schema::Output,
    ]
    .into_iter()
    .find(|s| s.file() == file)
    .unwrap_or_else(|| panic!("manifest names unknown schema {file}"))
}

/// Fixture files (`.json`, `.jsonl`) in a directory, sorted.
fn files(dir: &str) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| n.ends_with(".json") || n.ends_with(".jsonl"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "fixtures/{dir} has fixtures");
    v
}

/// Every document in a fixture file: the whole file, or each line of a `.jsonl`.
fn documents(name: &str, path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    if name.ends_with(".jsonl") {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        vec![serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))]
    }
}

/// Ok if every document validates; Err with the first failure.
fn check(name: &str, path: &Path) -> Result<(), String> {
    let s = schema_for(name);
    for d in documents(name, path) {
        schema::validate(s, &d)?;
    }
    Ok(())
}

#[test]
fn valid_fixtures_validate() {
    let mut failures = Vec::new();
    for (name, path) in files("valid") {
        if let Err(e) = check(&name, &path) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "valid fixtures rejected:\n{}",
        failures.join("\n")
    );
}

#[test]
fn valid_status_fixtures_are_consistent_and_round_trip() {
    for (name, path) in files("valid")
        .into_iter()
        .filter(|(n, _)| schema_for(n) == Schema::Status)
    {
        let v = &documents(&name, &path)[0];
        let st: State = serde_json::from_value(v.clone())
            .unwrap_or_else(|e| panic!("{name} does not deserialize: {e}"));
        conductor::protocol::codec::check_consistency(&st)
            .unwrap_or_else(|e| panic!("{name} is inconsistent: {e}"));
        let back = serde_json::to_value(&st).unwrap();
        assert_eq!(&back, v, "{name} does not round-trip through State");
    }
}

#[test]
fn invalid_fixtures_fail() {
    let accepted: Vec<String> = files("invalid")
        .into_iter()
        .filter(|(n, p)| check(n, p).is_ok())
        .map(|(n, _)| n)
        .collect();
    assert!(
        accepted.is_empty(),
        "invalid fixtures accepted by their schema: {accepted:?}"
    );
}

#[test]
fn inconsistent_fixtures_validate_but_fail_the_consistency_check() {
    for (name, path) in files("inconsistent") {
        check(&name, &path).unwrap_or_else(|e| panic!("{name} should pass its schema: {e}"));
        let st: State = serde_json::from_value(documents(&name, &path).remove(0)).unwrap();
        assert!(
            conductor::protocol::codec::check_consistency(&st).is_err(),
            "{name} passes check_consistency"
        );
    }
}

/// Decode, reconcile as the next transaction would (without asking the filesystem), and check
/// the result is conductor's consistent form that reads back the same.
fn read_and_repair(name: &str, path: &Path) -> (State, State, Vec<String>) {
    use conductor::protocol::{codec, foreign};
    let bytes = std::fs::read(path).unwrap();
    let read = codec::decode(path, &bytes).unwrap_or_else(|e| panic!("{name} is not read: {e}"));
    let mut st = read.clone();
    let mut fx = Vec::new();
    let now = Timestamp::parse("2026-03-02T16:00:00Z").unwrap();
    let seen = foreign::Seen::Changed(None);
    foreign::reconcile(&mut st, seen, now, &mut foreign::Lexical, &mut fx).unwrap();
    codec::check_consistency(&st).unwrap_or_else(|e| panic!("{name} after repair: {e}"));
    assert!(foreign::inspect(&st).is_empty(), "{name}: repaired twice");
    let written = codec::encode(&st);
    let again = codec::decode(path, &written).unwrap();
    assert_eq!(again, st, "{name}: the repaired state reads back the same");
    let v: Value = serde_json::from_slice(&written).unwrap();
    schema::validate(Schema::Status, &v).unwrap_or_else(|e| panic!("{name} repaired: {e}"));
    let notes = fx
        .iter()
        .filter_map(|e| match e {
            conductor::protocol::ops::Effect::Log { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    (read, st, notes)
}

#[test]
fn inconsistent_states_are_served_and_repaired_with_global_claims_as_the_truth() {
    for (name, path) in files("inconsistent") {
        let (read, repaired, notes) = read_and_repair(&name, &path);
        assert!(
            !conductor::protocol::foreign::inspect(&read).is_empty(),
            "{name}"
        );
        assert!(!notes.is_empty(), "{name}: the repair is logged");
        for (file, holder) in &read.global_claims {
            if read.instance(holder).is_some() {
                assert_eq!(
                    repaired.global_claims.get(file),
                    Some(holder),
                    "{name}: {file}"
                );
            } else {
                assert!(!repaired.global_claims.contains_key(file), "{name}: {file}");
            }
        }
    }
}

#[test]
fn foreign_fixtures_validate_are_read_and_become_canonical() {
    for (name, path) in files("foreign") {
        check(&name, &path).unwrap_or_else(|e| panic!("{name} should validate: {e}"));
        let (read, repaired, _) = read_and_repair(&name, &path);
        assert!(
            repaired.global_claims.keys().all(|k| k.starts_with('/')),
            "{name}: keys are absolute"
        );
        // Unknown fields survive the rewrite.
        let before: Value = documents(&name, &path).remove(0);
        let after = serde_json::to_value(&repaired).unwrap();
        for (k, v) in before.as_object().unwrap() {
            if ![
                "version",
                "updated_at",
                "instances",
                "global_claims",
                "drift_warnings",
            ]
            .contains(&k.as_str())
            {
                assert_eq!(after.get(k), Some(v), "{name}: top-level {k} kept");
            }
        }
        for (i, inst) in read.instances.iter().enumerate() {
            for (k, v) in &inst.extra {
                assert_eq!(
                    &after["instances"][i][k], v,
                    "{name}: instance field {k} kept"
                );
            }
        }
    }
}

#[test]
fn the_plugin_style_state_is_resolved_against_each_holders_directory() {
    let path = fixtures().join("foreign/status-plugin-recipes.json");
    let (_, st, _) = read_and_repair("status-plugin-recipes.json", &path);
    assert_eq!(
        st.global_claims.keys().collect::<Vec<_>>(),
        ["/srv/app/README.md", "/srv/app/lib/parse.rs"]
    );
    assert_eq!(
        st.instances[0].files_claimed,
        ["/srv/app/lib/parse.rs", "/srv/app/README.md"]
    );
    assert!(st.instances[1].files_claimed.is_empty());
    assert_eq!(st.extra["dashboard_url"], "http://localhost:8080");
    assert_eq!(st.instances[1].extra["editor"]["name"], "vim");
    assert_eq!(
        st.instances[1].last_heartbeat.to_string(),
        "2026-03-02T14:01:00Z"
    );
    assert_eq!(
        st.instances[0].last_heartbeat.to_string(),
        "2026-03-02T14:00:00Z"
    );
}

#[test]
fn spec_fixtures_as_the_manifest_says() {
    let m = manifest();
    let expected_invalid: BTreeSet<&str> = m["spec_expected_invalid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // The spec's files have no `spec-` prefix for status/history; the prefix rule still applies.
    for (name, path) in files("spec") {
        let r = check(&name, &path);
        if expected_invalid.contains(name.as_str()) {
            assert!(
                r.is_err(),
                "spec/{name} is listed as failing our schemas but validates"
            );
        } else {
            r.unwrap_or_else(|e| panic!("spec/{name} should validate: {e}"));
        }
    }
    for (spec, twin) in m["spec_corrected_twins"].as_object().unwrap() {
        assert!(
            expected_invalid.contains(spec.as_str()),
            "twin listed for {spec}, which is not expected invalid"
        );
        let path = fixtures().join(twin.as_str().unwrap());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        check(&name, &path)
            .unwrap_or_else(|e| panic!("corrected twin {twin} should validate: {e}"));
    }
}

#[test]
fn the_spec_history_example_fails_only_on_its_non_hex_id() {
    let path = fixtures().join("spec/history.jsonl");
    let docs = documents("history.jsonl", &path);
    assert_eq!(docs.len(), 2);
    schema::validate(Schema::HistoryEntry, &docs[0]).expect("line 1 validates");
    let e = schema::validate(Schema::HistoryEntry, &docs[1]).expect_err("line 2 fails");
    assert!(e.contains("/id"), "fails at the id: {e}");
}

// ---- the schemas and the Rust types stay in step ----

fn schema_doc(file: &str) -> Value {
    let text = schema::FILES.iter().find(|(n, _)| *n == file).unwrap().1;
    serde_json::from_str(text).unwrap()
}

/// `(properties, required)` of a schema object.
fn shape(def: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let props = def["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties in {def}"))
        .keys()
        .cloned()
        .collect();
    let req = def["required"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (props, req)
}

fn keys(v: &impl Serialize) -> BTreeSet<String> {
    serde_json::to_value(v)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// `maximal` sets every optional field, `minimal` none: their keys must be the schema's
/// `properties` and `required` (plus `always`: optional fields conductor always writes).
#[track_caller]
fn in_step(
    what: &str,
    def: &Value,
    maximal: &impl Serialize,
    minimal: &impl Serialize,
    always: &[&str],
) {
    let (props, mut req) = shape(def);
    req.extend(always.iter().map(|s| s.to_string()));
    assert_eq!(
        keys(maximal),
        props,
        "{what}: serialized keys (every field set) vs schema properties"
    );
    assert_eq!(
        keys(minimal),
        req,
        "{what}: serialized keys (optional fields unset) vs schema required"
    );
}

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

fn instance(max: bool) -> Instance {
    Instance {
        id: "itm-a1b2c3".into(),
        source: Source::Itm,
        project: "p".into(),
        task: "t".into(),
        priority: Priority::P2,
        files_claimed: if max {
            vec!["/p/a".to_string()]
        } else {
            vec![]
        }
        .into(),
        started_at: ts("2026-01-17T09:00:00Z"),
        last_heartbeat: ts("2026-01-17T09:10:00Z"),
        working_directory: "/p".into(),
        override_reason: max.then(|| "why".into()),
        pid: max.then_some(42),
        host: max.then(|| "h".into()),
        session_id: max.then(|| "s".into()),
        agent: max.then(|| "codex".into()),
        agent_version: max.then(|| "0.169.0".into()),
        terminal_session: max.then_some(4242),
        claim_tokens: if max {
            BTreeMap::from([("/p/a".to_string(), 7)])
        } else {
            BTreeMap::new()
        }
        .into(),
        pending_conflicts: if max {
            vec![PendingConflict {
                file: "/p/b".into(),
                held_by: "cur-000001".into(),
                since: ts("2026-01-17T09:05:00Z"),
            }]
        } else {
            vec![]
        },
        waiting_for: if max {
            vec![conductor::protocol::types::Waiting {
                file: "/p/c".into(),
                ticket: 1,
                since: ts("2026-01-17T09:06:00Z"),
                pid: Some(7),
            }]
        } else {
            vec![]
        },
        extra: Default::default(),
    }
}

#[test]
fn rust_types_and_schemas_have_the_same_fields() {
    let defs = schema_doc("defs.schema.json")["$defs"].clone();
    let t = ts("2026-01-17T10:00:00Z");

    let max_state = State {
        version: STATE_VERSION.into(),
        updated_at: t,
        instances: vec![instance(true)],
        global_claims: BTreeMap::from([("/p/a".to_string(), "itm-a1b2c3".to_string())]),
        last_token: 7,
        drift_warnings: vec![],
        extra: Default::default(),
        repos: Default::default(),
    };
    // drift_warnings and files_claimed are optional in the protocol; conductor always writes them.
    in_step(
        "State",
        &schema_doc("status.schema.json"),
        &max_state,
        &State::empty(t),
        &["drift_warnings"],
    );
    in_step(
        "Instance",
        &defs["instance"],
        &instance(true),
        &instance(false),
        &["files_claimed"],
    );

    let dw = |max: bool| DriftWarning {
        instance_id: "itm-a1b2c3".into(),
        reason: "r".into(),
        acknowledged: max,
        acknowledged_at: max.then_some(t),
        extra: Default::default(),
    };
    in_step(
        "DriftWarning",
        &defs["drift_warning"],
        &dw(true),
        &dw(false),
        &[],
    );

    let pc = PendingConflict {
        file: "/p/b".into(),
        held_by: "cur-000001".into(),
        since: t,
    };
    in_step("PendingConflict", &defs["pending_conflict"], &pc, &pc, &[]);

    let he = |max: bool| HistoryEntry {
        id: "itm-a1b2c3".into(),
        project: "p".into(),
        task: "t".into(),
        priority: Priority::P1,
        started_at: t,
        completed_at: t,
        outcome: Outcome::Success,
        duration_minutes: max.then_some(3),
        files_modified: max.then(|| vec!["/p/a".into()]),
        notes: max.then(|| "n".into()),
    };
    in_step(
        "HistoryEntry",
        &defs["history_entry"],
        &he(true),
        &he(false),
        &[],
    );

    let sp = |max: bool| Sprint {
        sprint_name: "s".into(),
        focus: Priority::P1,
        start_date: max.then(|| "2026-01-12".into()),
        end_date: max.then(|| "2026-01-18".into()),
        priorities: max.then(|| vec!["x".into()]),
        explicitly_deferred: max.then(|| vec!["y".into()]),
    };
    in_step(
        "Sprint",
        &schema_doc("sprint.schema.json"),
        &sp(true),
        &sp(false),
        &[],
    );

    let cfg = Config {
        north_stars_path: Some("~/ns.md".into()),
        default_max_age_minutes: Some(60),
        enforce: Some(conductor::config::Enforce::BlockForeign),
        watch_edits: Some(false),
        integration_branch: Some("origin/develop".into()),
        events_segment_bytes: Some(4096),
        events_keep_segments: Some(4),
        store: Some("etcd://127.0.0.1:2379/team".into()),
        events_keep_days: Some(7),
        ledger_rotate_bytes: Some(1 << 20),
        ledger_keep_files: Some(8),
        ledger_keep_days: Some(90),
        store_cacert: Some("etcd/ca.pem".into()),
        store_cert: Some("etcd/client.pem".into()),
        store_key: Some("etcd/client.key".into()),
        store_user: Some("team".into()),
        store_password_file: Some("etcd/password".into()),
        store_insecure: Some(false),
        queue_lease_seconds: Some(30),
    };
    in_step(
        "Config",
        &schema_doc("config.schema.json"),
        &cfg,
        &Config::default(),
        &[],
    );

    let pcfg = ProjectConfig {
        priority_source: Some("plans/prd.json".into()),
        priority_field: Some("tasks[].priority".into()),
        task: Some("t".into()),
    };
    in_step(
        "ProjectConfig",
        &schema_doc("project-config.schema.json"),
        &pcfg,
        &ProjectConfig::default(),
        &[],
    );

    // Output pieces built from Rust types.
    let c = Conflict {
        file: "/p/a".into(),
        held_by: "cur-000001".into(),
        holder_task: "t".into(),
        holder_started: t,
        holder_alive: true,
        holder_last_heartbeat: t,
        held_claim: Some("/p/".into()),
        overlap_undecided: true,
        holder_worktree: Some("/p-b".into()),
        holder_branch: Some("feature/x".into()),
    };
    let (props, _) = shape(&defs["conflict"]);
    assert_eq!(keys(&c), props, "ops::Conflict vs $defs/conflict");
    let lc = LiveConflict {
        file: "/p/a".into(),
        requested_by: "itm-a1b2c3".into(),
        held_by: "cur-000001".into(),
        holder_task: "t".into(),
        since: t,
    };
    in_step("LiveConflict", &defs["live_conflict"], &lc, &lc, &[]);
    let sm = Summary {
        active_count: 1,
        total_files_claimed: 2,
        oldest_instance_age_minutes: 3,
    };
    let out = schema_doc("output.schema.json");
    in_step(
        "Summary",
        &out["$defs"]["status"]["properties"]["summary"],
        &sm,
        &sm,
        &[],
    );

    // And the maximal values are valid documents.
    schema::validate(Schema::Status, &serde_json::to_value(&max_state).unwrap()).unwrap();
    schema::validate(
        Schema::HistoryEntry,
        &serde_json::to_value(he(true)).unwrap(),
    )
    .unwrap();
    schema::validate(Schema::Sprint, &serde_json::to_value(sp(true)).unwrap()).unwrap();
    schema::validate(Schema::Config, &serde_json::to_value(&cfg).unwrap()).unwrap();
    schema::validate(Schema::ProjectConfig, &serde_json::to_value(&pcfg).unwrap()).unwrap();
    let mut with_dw = max_state.clone();
    with_dw.drift_warnings.push(dw(true));
    schema::validate(Schema::Status, &serde_json::to_value(&with_dw).unwrap()).unwrap();
}

#[test]
fn every_operation_in_the_schema_is_a_request_variant() {
    // `conductor op` dispatches on the schema's $defs; each must deserialize as a Request.
    let minimal = |op: &str| -> Value {
        match op {
            "start" => json!({"operation": "start", "task": "t", "project": "p", "priority": "P1"}),
            "claim" => json!({"operation": "claim", "files": ["a"]}),
            "release" => json!({"operation": "release", "all": true}),
            "align" => json!({"operation": "align", "task": "t", "priority": "P2"}),
            other => json!({ "operation": other }),
        }
    };
    let ops = schema::operations();
    assert_eq!(
        ops.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "start",
            "claim",
            "release",
            "done",
            "heartbeat",
            "cleanup",
            "status",
            "align"
        ])
    );
    for op in &ops {
        let v = minimal(op);
        schema::validate(Schema::OpInput, &v).unwrap_or_else(|e| panic!("{op}: {e}"));
        conductor::protocol::request::parse(&v.to_string()).unwrap_or_else(|e| panic!("{op}: {e}"));
    }
}

/// Issue 10: the agent runtime's `--json` outputs are described in `schemas/output.schema.json`
/// (one branch each; `agent events` prints Canopy's feed page, `$defs/agent_events_page`).
/// Real outputs of the real binary, including a running loop's status, validate.
#[test]
fn runtime_outputs_match_the_output_schema() {
    use crate::common::*;
    let mut env = TestEnv::new();
    env.at("2026-01-17T10:00:00Z");
    let mut outputs: Vec<(String, Value)> = Vec::new();
    let mut run = |env: &TestEnv, args: &[&str], code: i32| -> Value {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let r = env.run(&full);
        r.code(code);
        let v = r.json();
        outputs.push((args.join(" "), v.clone()));
        v
    };
    run(&env, &["agent", "register", "scout", "--watch", "ops"], 0);
    run(&env, &["post", "release", "kickoff", "--as", "ana"], 0);
    run(
        &env,
        &[
            "agent", "register", "lint", "--watch", "ops", "--watch", "release",
        ],
        0,
    );
    let m = run(
        &env,
        &["post", "ops", "@scout hi\nreviewer: lint", "--as", "ana"],
        0,
    );
    let mid = m["message"]["message_id"].as_str().unwrap().to_string();
    run(
        &env,
        &["edit", &mid, "@scout hi!\nreviewer: lint", "--as", "ana"],
        0,
    );
    run(&env, &["dm", "scout", "psst", "--as", "ana"], 0);
    run(&env, &["messages", "ops"], 0);
    let items = run(&env, &["inbox", "--agent", "scout"], 0);
    let id = items["items"][0]["id"].as_str().unwrap().to_string();
    run(&env, &["inbox", "seen", &id], 0);
    run(
        &env,
        &["inbox", "claim", &id, "--agent", "scout", "--ttl", "15"],
        0,
    );
    run(
        &env,
        &["inbox", "claim", &id, "--agent", "lint", "--ttl", "15"],
        3,
    );
    run(&env, &["inbox", "renew", &id, "--agent", "scout"], 0);
    run(&env, &["inbox", "release", &id, "--agent", "scout"], 0);
    let mentions = run(&env, &["mentions"], 0);
    run(
        &env,
        &["inbox", "complete", &id, "--ref", "post_id=msg-000001"],
        0,
    );
    run(&env, &["inbox", "--status", "completed"], 0);
    let lint_items = run(&env, &["inbox", "--agent", "lint"], 0);
    let lid = lint_items["items"][0]["id"].as_str().unwrap().to_string();
    run(&env, &["inbox", "skip", &lid], 0);
    assert!(!mentions["mentions"].as_array().unwrap().is_empty());
    run(&env, &["post", "ops", "@lint ping", "--as", "ana"], 0);
    let lm = run(&env, &["mentions", "--agent", "lint"], 0);
    let men = lm["mentions"][0]["id"].as_str().unwrap().to_string();
    run(&env, &["mentions", "ack", &men], 0);
    run(&env, &["agent", "list"], 0);
    run(&env, &["agent", "status", "scout"], 0);
    run(&env, &["agent", "selftest", "scout"], 0);
    run(
        &env,
        &["agent", "selftest", "scout", "--min-level", "full_pass"],
        1,
    );
    run(&env, &["inbox", "claim", &id, "--agent", "nobody"], 2);
    // A loop that ran (its run-status.json shows in agent status), unpinned clock.
    env.now = None;
    let mut c = env.cmd();
    c.args(["-q", "agent", "run", "scout", "--max-cycles", "1"]);
    assert!(c.status().unwrap().success());
    let st = run(&env, &["agent", "status", "scout"], 0);
    assert!(st["run"].is_object(), "{st}");
    let r = env.run_stdin(
        &["--json", "artifact", "validate"],
        "[result]\nok\n[/result]\n",
    );
    outputs.push(("artifact validate".into(), r.json()));
    let r = env.run_stdin(&["--json", "artifact", "validate"], "[bogus]\n[/bogus]\n");
    outputs.push(("artifact validate (invalid)".into(), r.json()));
    for (what, v) in &outputs {
        schema::validate(Schema::Output, v).unwrap_or_else(|e| panic!("{what}: {e}\n{v}"));
    }
    // The feed page is not an envelope: its own definition.
    let page = env
        .run(&["agent", "events", "scout", "--after", "0"])
        .json();
    schema::validate(Schema::AgentEventsPage, &page).unwrap_or_else(|e| panic!("{e}\n{page}"));
    assert!(schema::validate(Schema::Output, &page).is_err());
}
