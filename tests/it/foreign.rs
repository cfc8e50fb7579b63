//! Sharing the home with other writers of status.json (issue 9): the original plugin's recipes
//! (its `commands/conductor.md`, written with `jq`, each write wrapped in the protocol's
//! `conductor_write`: `flock` on status.lock, jq to a temp file, `mv`), and people editing the
//! file with one jq command. Each item of the issue is reproduced with them, in both directions.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::{Run, TestEnv, read_lines};

/// The plugin's recipes as a bash script (see the module doc).
pub(crate) const PLUGIN: &str = r#"#!/usr/bin/env bash
set -euo pipefail
H="$CONDUCTOR_HOME"
mkdir -p "$H"
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
# The protocol's conductor_write: lock, read, jq, write a temp file, mv, unlock.
write() {
  exec 200>"$H/status.lock"
  flock -w 5 200 || { echo "Failed to acquire lock" >&2; return 1; }
  jq "$@" "$H/status.json" > "$H/status.json.tmp"
  mv "$H/status.json.tmp" "$H/status.json"
  exec 200>&-
}
# The plugin's setup check.
if [[ ! -f "$H/status.json" ]]; then
  echo '{"version": "1.0", "updated_at": "'"$(stamp)"'", "instances": [], "global_claims": {}, "drift_warnings": []}' > "$H/status.json"
fi
verb=$1; shift
case "$verb" in
  start) # ID SOURCE PROJECT TASK PRIORITY WORKDIR
    now=$(stamp)
    write --arg id "$1" --arg source "$2" --arg project "$3" --arg task "$4" \
      --arg priority "$5" --arg started "$now" --arg heartbeat "$now" --arg workdir "$6" \
      '.instances += [{id: $id, source: $source, project: $project, task: $task,
         priority: $priority, files_claimed: [], started_at: $started,
         last_heartbeat: $heartbeat, working_directory: $workdir}] | .updated_at = $heartbeat' ;;
  claim) # ID FILE: the holder is checked before the lock is taken, as the plugin does
    holder=$(jq -r --arg f "$2" '.global_claims[$f] // empty' "$H/status.json")
    if [[ -n "$holder" && "$holder" != "$1" ]]; then
      echo "CONFLICT: $2 is claimed by $holder"; exit 3
    fi
    write --arg id "$1" --arg file "$2" \
      '.instances |= map(if .id == $id then .files_claimed += [$file] else . end)
       | .global_claims[$file] = $id | .updated_at = (now | todate)' ;;
  release) # ID FILE
    write --arg id "$1" --arg file "$2" \
      '.instances |= map(if .id == $id then .files_claimed -= [$file] else . end)
       | del(.global_claims[$file]) | .updated_at = (now | todate)' ;;
  done) # ID
    write --arg id "$1" \
      'del(.instances[] | select(.id == $id))
       | .global_claims |= with_entries(select(.value != $id)) | .updated_at = (now | todate)' ;;
  edit) # JQ-ARGS...: one jq edit by hand, under the lock
    write "$@" ;;
  *) echo "unknown verb $verb" >&2; exit 2 ;;
esac
"#;

struct Home {
    env: TestEnv,
    script: PathBuf,
}

impl Home {
    fn new() -> Home {
        let env = TestEnv::new();
        let script = env.root.path().join("plugin.sh");
        std::fs::write(&script, PLUGIN).unwrap();
        Home { env, script }
    }

    /// Run a plugin recipe; panics unless it exits `code`.
    #[track_caller]
    fn plugin(&self, code: i32, args: &[&str]) -> Run {
        let r = self.env.run_cmd(
            Command::new("bash")
                .arg(&self.script)
                .args(args)
                .env("CONDUCTOR_WATCH_EDITS", "0")
                .env("CONDUCTOR_HOME", &self.env.home),
        );
        assert_eq!(r.code, code, "plugin {args:?}: {r:#?}");
        r
    }

    /// The plugin's `start` in the project directory.
    fn plugin_start(&self, id: &str, project: &str, task: &str) {
        let wd = self.env.project.to_str().unwrap();
        self.plugin(0, &["start", id, "web", project, task, "P1", wd]);
    }

    /// One jq edit of status.json, under the lock.
    fn edit(&self, filter: &str) {
        self.plugin(0, &["edit", filter]);
    }

    /// `conductor --json status`, which must succeed.
    #[track_caller]
    fn status(&self) -> Value {
        // `run`, not `exec`: the file on disk is the other writer's until conductor's next write.
        let r = self.env.run(&["--json", "status"]);
        r.code(0);
        crate::common::assert_schema(conductor::schema::Schema::Output, &r.json());
        r.json()
    }

    fn copies(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.env.home)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("status.json.foreign-")
            })
            .collect();
        v.sort();
        v
    }

    fn repairs(&self) -> Vec<String> {
        read_lines(&self.env.home_file("conflicts.log"))
            .into_iter()
            .filter(|l| l.contains(" | REPAIR | "))
            .collect()
    }

    fn events(&self) -> Vec<Value> {
        let r = self.env.run(&["events", "--limit", "1000"]);
        r.code(0);
        r.json()["items"].as_array().unwrap().clone()
    }
}

fn claims(st: &Value) -> Vec<(String, String)> {
    st["global_claims"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// Every conductor command works on the home and conductor's next write repairs it; the state it
/// leaves is its own consistent form (checked by `exec`).
#[track_caller]
fn conductor_still_works(h: &Home) -> String {
    h.status();
    let id = h.env.start("Conductor work", "P1");
    let f = h.env.abs("src/conductor-owned.rs");
    h.env.exec(&["claim", "--instance", &id, &f]).code(0);
    assert_eq!(h.env.state()["global_claims"][&f], id.as_str());
    id
}

#[test]
fn plugin_start_without_project_or_task_is_read() {
    // Item 1: the plugin's `start` writes "" when --project is omitted.
    let h = Home::new();
    h.plugin_start("web-0a0b0c", "", "");
    let st = h.status();
    assert_eq!(st["instances"][0]["project"], "");
    conductor_still_works(&h);
    assert!(h.env.instance("web-0a0b0c").is_some());
}

#[test]
fn an_instance_without_files_claimed_and_a_state_without_drift_warnings_are_read() {
    // Items 2 and 3: both fields are optional in the plugin's schema.
    let h = Home::new();
    h.plugin_start("web-0a0b0c", "p", "t");
    h.edit("del(.instances[0].files_claimed) | del(.drift_warnings)");
    assert_eq!(h.status()["summary"]["active_count"], 1);
    conductor_still_works(&h);
    // conductor writes its own form: both fields are back.
    let st = h.env.state();
    assert!(st["drift_warnings"].is_array());
    assert!(
        h.env.instance("web-0a0b0c").unwrap()["files_claimed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn fractional_seconds_offsets_and_lowercase_are_read_as_rfc_3339() {
    // Item 4.
    let h = Home::new();
    h.plugin_start("web-0a0b0c", "p", "t");
    h.edit(
        r#".updated_at = "2026-01-17T10:30:00.5Z" | .instances[0].started_at = "2026-01-17T11:30:00+01:00"
           | .instances[0].last_heartbeat = (now | todate | ascii_downcase)"#,
    );
    let st = h.status();
    assert_eq!(st["instances"][0]["started_at"], "2026-01-17T10:30:00Z");
    conductor_still_works(&h);
    assert_eq!(
        h.env.instance("web-0a0b0c").unwrap()["started_at"],
        "2026-01-17T10:30:00Z"
    );
    // What is not a date-time is still refused, and the file is left as it is.
    h.edit(r#".instances[0].started_at = "2026-02-30T10:30:00Z""#);
    let before = std::fs::read(h.env.home_file("status.json")).unwrap();
    let r = h.env.run(&["--json", "status"]);
    r.code(1);
    assert_eq!(r.json()["reason"], "corrupt_state");
    assert_eq!(
        std::fs::read(h.env.home_file("status.json")).unwrap(),
        before
    );
}

#[test]
fn unknown_fields_are_kept_when_conductor_rewrites_the_file() {
    // Item 5.
    let h = Home::new();
    h.plugin_start("web-0a0b0c", "p", "t");
    h.edit(r#".dashboard = {"url": "http://localhost:8080", "refresh": 5} | .instances[0].editor = "vim" | .drift_warnings = [{"instance_id": "web-0a0b0c", "reason": "r", "acknowledged": false, "by": "me"}]"#);
    conductor_still_works(&h);
    let st = h.env.state();
    assert_eq!(st["dashboard"]["refresh"], 5);
    assert_eq!(h.env.instance("web-0a0b0c").unwrap()["editor"], "vim");
    assert_eq!(st["drift_warnings"][0]["by"], "me");
}

#[test]
fn a_relative_claim_is_the_holders_file_and_is_rewritten_absolute() {
    // Item 6: the plugin's documented `claim src/api/users.ts`.
    let h = Home::new();
    let env = &h.env;
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", "src/api/users.ts"]);
    h.plugin(0, &["claim", "web-0a0b0c", &env.abs("src/lib/auth.ts")]);
    // Served as it is, and reported.
    let st = h.status();
    assert_eq!(st["summary"]["total_files_claimed"], 2);
    let warnings = st["state_warnings"].as_array().expect("warnings").clone();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("src/api/users.ts")),
        "{warnings:?}"
    );
    let doctor = env.run(&["--json", "doctor"]);
    assert_eq!(doctor.json()["status"], "problems", "{doctor:?}");
    // Another instance asking for the same file, spelled absolute, is refused.
    let mine = env.start("Conductor work", "P1");
    let users = env.abs("src/api/users.ts");
    let r = env.exec(&["--json", "claim", "--instance", &mine, &users]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["held_by"], "web-0a0b0c");
    // The file is in conductor's form now, the original is kept, the rewrite is logged.
    let st = env.state();
    assert_eq!(
        claims(&st),
        [
            (users.clone(), "web-0a0b0c".to_string()),
            (env.abs("src/lib/auth.ts"), "web-0a0b0c".to_string())
        ]
    );
    let copies = h.copies();
    assert_eq!(copies.len(), 1);
    let kept = std::fs::read_to_string(&copies[0]).unwrap();
    assert!(kept.contains("\"src/api/users.ts\""));
    assert!(
        h.repairs()
            .iter()
            .any(|l| l.contains("src/api/users.ts -> ")),
        "{:?}",
        h.repairs()
    );
    // The plugin keeps reading the file and its release of the absolute key works.
    h.plugin(0, &["release", "web-0a0b0c", &users]);
    env.exec(&["claim", "--instance", &mine, &users]).code(0);
}

#[test]
fn doctor_repair_resolves_relative_claims_and_keeps_the_plugins_instance() {
    // Item 6, second half: doctor used to drop the whole instance.
    let h = Home::new();
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", "src/api/users.ts"]);
    h.plugin(0, &["claim", "web-0a0b0c", &h.env.abs("src/lib/auth.ts")]);
    let r = h.env.run(&["--json", "doctor", "--repair"]);
    assert_eq!(r.json()["status"], "repaired", "{r:?}");
    let st = h.env.state();
    assert_eq!(st["instances"].as_array().unwrap().len(), 1);
    assert_eq!(
        st["global_claims"][h.env.abs("src/api/users.ts")],
        "web-0a0b0c"
    );
    assert_eq!(h.copies().len(), 1);
    assert_eq!(h.env.run(&["--json", "doctor"]).json()["status"], "ok");
}

fn symlinked(h: &Home) -> (String, String) {
    let real = h.env.dir("real/src");
    std::fs::write(real.join("s.ts"), "x").unwrap();
    let link = h.env.root.path().join("link");
    std::os::unix::fs::symlink(real.parent().unwrap(), &link).unwrap();
    let via_link = format!(
        "{}/src/s.ts",
        std::fs::canonicalize(h.env.root.path())
            .unwrap()
            .join("link")
            .display()
    );
    (via_link, real.join("s.ts").to_string_lossy().into_owned())
}

#[test]
fn a_claim_through_a_symlink_is_the_same_file() {
    // Item 7: the plugin claims /link/src/s.ts, conductor is asked for /real/src/s.ts.
    let h = Home::new();
    let (via_link, real) = symlinked(&h);
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", &via_link]);
    let mine = h.env.start("Conductor work", "P1");
    let r = h.env.exec(&["--json", "claim", "--instance", &mine, &real]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["held_by"], "web-0a0b0c");
    // Compared resolved, kept as the plugin wrote it.
    assert_eq!(
        claims(&h.env.state()),
        [(via_link.clone(), "web-0a0b0c".to_string())]
    );
}

/// Issue 21 item 9: conductor resolves the plugin's symlinked key when it compares, and keeps
/// the key as written, so the plugin's own `release` recipe (jq, by the exact key) finds it.
#[test]
fn the_plugins_release_finds_its_claim_through_a_symlink() {
    let h = Home::new();
    let (via_link, real) = symlinked(&h);
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", &via_link]);
    let mine = h.env.start("Conductor work", "P1");
    // conductor's own writes since (its file, its last version known) keep the spelling and
    // still see the file as held.
    for _ in 0..2 {
        let r = h.env.exec(&["--json", "claim", "--instance", &mine, &real]);
        r.code(3);
        assert_eq!(r.json()["conflicts"][0]["held_by"], "web-0a0b0c", "{r:?}");
        h.env.exec(&["heartbeat", "--instance", &mine]).code(0);
        let st = h.env.state();
        assert_eq!(claims(&st), [(via_link.clone(), "web-0a0b0c".to_string())]);
        assert_eq!(
            h.env.instance("web-0a0b0c").unwrap()["files_claimed"],
            serde_json::json!([via_link])
        );
    }
    // The agent hook, which reads without a lock, sees the plugin's claim on the real path.
    let payload = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("fixtures/hooks/claude/{name}.json"));
        std::fs::read_to_string(path)
            .unwrap()
            .replace("/home/user/proj/src/auth.rs", &real)
            .replace("/home/user/proj", h.env.project.to_str().unwrap())
    };
    h.env
        .run_stdin(&["hook", "claude"], &payload("session-start-a"))
        .code(0);
    let r = h
        .env
        .run_stdin(&["hook", "claude"], &payload("pre-tool-use-edit-a"));
    r.code(0);
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{r:?}"
    );
    assert!(r.stdout.contains("web-0a0b0c"), "{r:?}");
    assert!(h.repairs().is_empty(), "not a repair: {:?}", h.repairs());
    assert!(h.copies().is_empty());
    // The plugin's own recipe releases it; the file is free for conductor.
    h.plugin(0, &["release", "web-0a0b0c", &via_link]);
    assert!(claims(&h.env.state()).is_empty());
    h.env.exec(&["claim", "--instance", &mine, &real]).code(0);
    assert_eq!(claims(&h.env.state()), [(real.clone(), mine.clone())]);
    assert!(
        !h.env.home_file("status-aliases.json").exists()
            || !std::fs::read_to_string(h.env.home_file("status-aliases.json"))
                .unwrap()
                .contains(&via_link),
        "the map forgets a released spelling"
    );
}

#[test]
fn a_plugin_claim_through_a_symlink_never_takes_conductors_file() {
    // Item 7, the other direction: conductor holds /real/src/s.ts; the plugin's lexical check
    // lets it write /link/src/s.ts. conductor's acknowledged claim wins.
    let h = Home::new();
    let (via_link, real) = symlinked(&h);
    let mine = h.env.start("Conductor work", "P1");
    h.env.exec(&["claim", "--instance", &mine, &real]).code(0);
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", &via_link]);
    h.env.exec(&["heartbeat", "--instance", &mine]).code(0);
    let st = h.env.state();
    assert_eq!(claims(&st), [(real.clone(), mine.clone())]);
    assert!(
        h.env.instance("web-0a0b0c").unwrap()["files_claimed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        h.repairs().iter().any(|l| l.contains("claimed by both")),
        "{:?}",
        h.repairs()
    );
}

#[test]
fn a_file_under_two_instances_is_served_with_global_claims_as_the_truth() {
    // Item 8: a buggy writer lists one file under two instances.
    let h = Home::new();
    let env = &h.env;
    let a = env.start("A", "P1");
    let b = env.start("B", "P1");
    let f = env.abs("src/shared.rs");
    env.exec(&["claim", "--instance", &a, &f]).code(0);
    h.edit(&format!(
        r#".instances |= map(if .id == "{b}" then .files_claimed += ["{f}"] else . end)"#
    ));
    let st = h.status();
    assert!(
        st["state_warnings"]
            .as_array()
            .is_some_and(|w| !w.is_empty())
    );
    // Every reader works; the holder is global_claims' one.
    env.run(&["--json", "conflicts"]).code(0);
    let r = env.exec(&["--json", "claim", "--instance", &b, &f]);
    r.code(3);
    assert_eq!(r.json()["conflicts"][0]["held_by"], a.as_str());
    assert!(
        env.instance(&b).unwrap()["files_claimed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(h.copies().len(), 1);
    assert!(!h.repairs().is_empty());
    assert!(h.status().get("state_warnings").is_none());
}

#[test]
fn a_global_claim_by_an_unknown_instance_is_dropped_and_named() {
    let h = Home::new();
    let a = h.env.start("A", "P1");
    let f = h.env.abs("src/ghost.rs");
    h.edit(&format!(r#".global_claims["{f}"] = "web-999999""#));
    h.status();
    h.env.exec(&["claim", "--instance", &a, &f]).code(0);
    assert!(
        h.repairs().iter().any(|l| l.contains("web-999999")),
        "{:?}",
        h.repairs()
    );
}

#[test]
fn the_journal_sees_what_the_plugin_did() {
    // Item 9: changes made outside conductor become events (marked external) at conductor's
    // next transaction, before its own.
    let h = Home::new();
    let env = &h.env;
    let mine = env.start("Conductor work", "P1");
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", "src/api/users.ts"]);
    env.exec(&["heartbeat", "--instance", &mine]).code(0);
    let users = env.abs("src/api/users.ts");
    let ev = h.events();
    let external: Vec<(&str, &str)> = ev
        .iter()
        .filter(|e| e["payload"]["external"] == true)
        .map(|e| {
            (
                e["event_type"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        external,
        [
            ("instance.started", "web-0a0b0c"),
            ("claim.granted", "web-0a0b0c")
        ]
    );
    let granted = ev
        .iter()
        .find(|e| e["event_type"] == "claim.granted")
        .unwrap();
    assert_eq!(granted["payload"]["files"][0], users.as_str());
    let heartbeat = ev
        .iter()
        .position(|e| e["event_type"] == "instance.heartbeat")
        .unwrap();
    let started = ev
        .iter()
        .position(|e| e["payload"]["external"] == true)
        .unwrap();
    assert!(started < heartbeat, "external events come first");
    // Reported once: another transaction adds nothing external.
    env.exec(&["heartbeat", "--instance", &mine]).code(0);
    let n = h
        .events()
        .iter()
        .filter(|e| e["payload"]["external"] == true)
        .count();
    assert_eq!(n, 2);
    // The plugin's done: released and gone.
    h.plugin(0, &["done", "web-0a0b0c"]);
    env.exec(&["heartbeat", "--instance", &mine]).code(0);
    let tail: Vec<String> = h
        .events()
        .iter()
        .filter(|e| e["payload"]["external"] == true)
        .skip(2)
        .map(|e| e["event_type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tail, ["claim.released", "instance.done"]);
}

#[test]
fn the_plugin_reads_what_conductor_writes() {
    // The other direction: the plugin's own conflict check sees conductor's claims.
    let h = Home::new();
    let mine = h.env.start("Conductor work", "P1");
    let f = h.env.abs("src/a.rs");
    h.env.exec(&["claim", "--instance", &mine, &f]).code(0);
    h.plugin_start("web-0a0b0c", "p", "t");
    let r = h.plugin(3, &["claim", "web-0a0b0c", &f]);
    assert!(r.stdout.contains(&mine));
    let jq = Command::new("jq")
        .args([
            "-e",
            r#".version == "1.0" and (.instances | type) == "array""#,
        ])
        .arg(h.env.home_file("status.json"))
        .output()
        .unwrap();
    assert!(jq.status.success());
}

#[test]
fn concurrent_conductors_and_recipes_lose_no_acknowledged_claim() {
    // Several conductor processes claim and release their own files while several recipe
    // processes start, claim (relative keys too), release and finish on the same home. No
    // command may ever find the home unusable, and every claim conductor acknowledged and did not
    // release is in the final state.
    let h = Home::new();
    let env = &h.env;
    let rounds = 12;
    let conductors: Vec<String> = (0..3).map(|n| env.start(&format!("C{n}"), "P1")).collect();
    let script = h.script.clone();
    let home = env.home.clone();
    let project = env.project.clone();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (n, id) in conductors.iter().enumerate() {
            handles.push(s.spawn(move || {
                let mut kept = Vec::new();
                for r in 0..rounds {
                    let f = env.abs(&format!("src/c{n}-{r}.rs"));
                    let out = env.run(&["claim", "--instance", id, &f]);
                    assert_eq!(out.code, 0, "conductor claim: {out:?}");
                    if r % 3 == 2 {
                        let out = env.run(&["release", "--instance", id, &f]);
                        assert_eq!(out.code, 0, "conductor release: {out:?}");
                    } else {
                        kept.push((f, id.clone()));
                    }
                }
                kept
            }));
        }
        let mut recipes = Vec::new();
        for n in 0..3 {
            let (script, home, project) = (script.clone(), home.clone(), project.clone());
            recipes.push(s.spawn(move || {
                let run = |args: &[&str]| {
                    let out = Command::new("bash")
                        .arg(&script)
                        .args(args)
                        .env("CONDUCTOR_WATCH_EDITS", "0")
                        .env("CONDUCTOR_HOME", &home)
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "recipe {args:?}: {out:?}");
                };
                for r in 0..rounds / 3 {
                    let id = format!("cow-{n:03x}{r:03x}");
                    let wd = project.to_str().unwrap();
                    run(&["start", &id, "cow", "p", "recipe", "P1", wd]);
                    run(&["claim", &id, &format!("src/p{n}-{r}.ts")]);
                    run(&["claim", &id, &format!("{wd}/src/q{n}-{r}.ts")]);
                    run(&["release", &id, &format!("src/p{n}-{r}.ts")]);
                    run(&["done", &id]);
                }
            }));
        }
        let kept: Vec<(String, String)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        recipes.into_iter().for_each(|r| r.join().unwrap());
        // One more transaction settles whatever the recipes left.
        env.exec(&["heartbeat", "--instance", &conductors[0]])
            .code(0);
        let st = env.state();
        for (f, id) in &kept {
            assert_eq!(st["global_claims"][f], id.as_str(), "{f} lost");
        }
        let extra: Vec<_> = claims(&st)
            .into_iter()
            .filter(|c| !kept.contains(c))
            .collect();
        assert!(extra.is_empty(), "left over: {extra:?}\n{:#?}", env.log());
    });
}

#[test]
fn the_claude_hook_sees_a_relative_plugin_claim_before_any_rewrite() {
    // The hook decides from a lock-free read: a relative key another program just wrote must
    // already mean its file there.
    let h = Home::new();
    let env = &h.env;
    let payload = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("fixtures/hooks/claude/{name}.json"));
        std::fs::read_to_string(path)
            .unwrap()
            .replace("/home/user/proj", env.project.to_str().unwrap())
    };
    env.run_stdin(&["hook", "claude"], &payload("session-start-a"))
        .code(0);
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", "src/auth.rs"]);
    let before = std::fs::read(env.home_file("status.json")).unwrap();
    let r = env.run_stdin(&["hook", "claude"], &payload("pre-tool-use-edit-a"));
    r.code(0);
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{r:?}"
    );
    assert!(r.stdout.contains("web-0a0b0c"), "{r:?}");
    assert_eq!(
        std::fs::read(env.home_file("status.json")).unwrap(),
        before,
        "decided without a write"
    );
}

#[test]
fn doctor_repair_drops_only_what_it_cannot_interpret_and_names_it() {
    let h = Home::new();
    let mine = h.env.start("Conductor work", "P1");
    let f = h.env.abs("src/kept.rs");
    h.env.exec(&["claim", "--instance", &mine, &f]).code(0);
    h.plugin_start("web-0a0b0c", "p", "t");
    h.plugin(0, &["claim", "web-0a0b0c", "src/rel.ts"]);
    h.edit(r#".instances[1].started_at = "yesterday""#);
    h.env.run(&["status"]).code(1);
    let r = h.env.run(&["--json", "doctor", "--repair"]);
    let status = &r.json()["findings"][0];
    let repair = status["repair"].as_str().unwrap();
    assert!(repair.contains("dropped instance web-0a0b0c ("), "{repair}");
    let st = h.env.state();
    assert_eq!(claims(&st), [(f, mine)]);
}

#[test]
fn copies_of_foreign_states_are_bounded_and_doctor_rewrites_are_not_foreign() {
    // A plugin that always claims relative paths: each conductor transaction after it keeps a
    // copy of what the plugin left; only the newest 20 stay, as docs/protocol.md says (the
    // expected count comes from the documentation, not from the constant under test).
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    assert!(
        doc.contains("`status.json.foreign-<time>` (the newest 20 copies are kept"),
        "docs/protocol.md states how many copies are kept"
    );
    let kept = 20;
    let h = Home::new();
    let env = &h.env;
    h.plugin_start("web-0a0b0c", "p", "t");
    let mine = env.start("Conductor work", "P1");
    for i in 0..kept + 5 {
        h.plugin(0, &["claim", "web-0a0b0c", &format!("src/rel-{i}.ts")]);
        env.exec(&["heartbeat", "--instance", &mine]).code(0);
    }
    assert_eq!(h.copies().len(), kept);
    // The newest copy holds the newest relative claim.
    let newest = h
        .copies()
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .filter(|t| t.contains(&format!("\"src/rel-{}.ts\"", kept + 4)))
        .count();
    assert_eq!(newest, 1);
    // After doctor --repair rewrites the file, the next transaction still reports what the
    // plugin did (its claim), once, and nothing of doctor's respelling.
    h.plugin(0, &["claim", "web-0a0b0c", "src/after.ts"]);
    env.run(&["doctor", "--repair"]).code(0);
    let before = h.events().len();
    env.exec(&["heartbeat", "--instance", &mine]).code(0);
    env.exec(&["heartbeat", "--instance", &mine]).code(0);
    let external: Vec<Value> = h.events()[before..]
        .iter()
        .filter(|e| e["payload"]["external"] == true)
        .cloned()
        .collect();
    assert_eq!(external.len(), 1, "{external:?}");
    assert_eq!(external[0]["event_type"], "claim.granted");
    assert_eq!(
        external[0]["payload"]["files"],
        serde_json::json!([env.abs("src/after.ts")])
    );
}
