//! `conductor mcp` driven by a real MCP client: the official Python SDK (`mcp` on PyPI, pinned
//! in ./test) running tests/mcp/client.py, which spawns the server over stdio, lists the tools
//! and calls them. The home is checked with the CLI and status.json.
//!
//! Needs `python3` with the `mcp` package: `python3 -m pip install mcp==2.3.0`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

fn client_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

fn require_client() {
    let ok = Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the Python MCP client is missing: `python3 -m pip install mcp==2.3.0` (./test does it)"
    );
}

/// A running client (and through it, a running `conductor mcp`).
struct Client {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Client {
    fn spawn(env: &TestEnv, server_args: &[&str], vars: &[(&str, &str)], plan: Value) -> Client {
        require_client();
        let mut c = env.cmd();
        c.env("CONDUCTOR_BIN", bin())
            .env("MCP_ARGS", json!(server_args).to_string());
        for (k, v) in vars {
            c.env(k, v);
        }
        // `env.cmd()` runs the binary; the client is python3 with the same clean environment.
        let mut py = Command::new("python3");
        py.arg(client_script())
            .arg(plan.to_string())
            .current_dir(&env.project)
            .env_clear()
            .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = py.spawn().expect("spawn python3");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Client { child, stdin, out }
    }

    /// The next step's result.
    #[track_caller]
    fn next(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(
            !line.is_empty(),
            "the MCP client ended early (see its stderr above)"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Let a `sync` step go on.
    fn go(&mut self) {
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Wait for the client (and so the server) to finish.
    #[track_caller]
    fn finish(mut self) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the MCP client failed: {status}");
    }
}

/// Run a whole plan and return its results.
pub(crate) fn run_plan(
    env: &TestEnv,
    server_args: &[&str],
    vars: &[(&str, &str)],
    plan: Value,
) -> Vec<Value> {
    let n = plan.as_array().unwrap().len();
    let mut c = Client::spawn(env, server_args, vars, plan);
    let out: Vec<Value> = (0..n).map(|_| c.next()).collect();
    c.finish();
    out
}

fn instances(env: &TestEnv) -> Vec<Value> {
    env.state()["instances"].as_array().unwrap().clone()
}

#[test]
fn lists_protocol_and_inbox_tools_by_default_the_rest_behind_an_option() {
    let env = TestEnv::new();
    let default = run_plan(&env, &[], &[], json!([{"list": true}]));
    assert_eq!(
        default[0]["tools"],
        json!([
            "status",
            "start",
            "claim",
            "release",
            "done",
            "check",
            "events",
            "inbox",
            "inbox_act",
            "post",
            "dm"
        ])
    );
    let all = run_plan(&env, &["--tools", "all"], &[], json!([{"list": true}]));
    let names = all[0]["tools"].as_array().unwrap();
    assert_eq!(names.len(), 15, "{names:?}");
    for t in [
        "workflow_transition",
        "workflow_update_snapshot",
        "queue_submit",
        "queue_status",
    ] {
        assert!(names.contains(&json!(t)), "{t}");
    }
    let some = run_plan(
        &env,
        &["--tools", "claim,check"],
        &[],
        json!([{"list": true}]),
    );
    assert_eq!(some[0]["tools"], json!(["claim", "check"]));
    // A tool not offered cannot be called.
    let r = env.run(&["mcp", "--tools", "claim,nope"]);
    r.code(2);
    assert!(r.stderr.contains("unknown tool `nope`"), "{r:?}");
    // Listing registered nothing.
    assert!(!env.home_file("status.json").exists() || instances(&env).is_empty());
}

/// The property names of an object schema, in order.
fn property_names(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|r| r.iter().map(|n| n.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Every key written anywhere in a schema.
fn keys_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                out.push(k.clone());
                keys_in(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys_in(x, out)),
        _ => {}
    }
}

#[test]
fn tool_schemas_are_derived_from_the_types_the_arguments_are_parsed_into() {
    let env = TestEnv::new();
    let listed = run_plan(
        &env,
        &["--tools", "all"],
        &[],
        json!([{"list": true, "schemas": true}]),
    );
    let schemas = listed[0]["schemas"].as_object().unwrap().clone();
    assert_eq!(schemas.len(), 15);

    // `claim` takes the protocol's claim request (what `conductor op` reads), less the instance
    // (the server is the session), plus how long to wait: a field added to the request is listed.
    let op: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/op-input.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let op_fields = |name: &str, withheld: &[&str]| -> (Vec<String>, Vec<String>) {
        let branch = &op["$defs"][name];
        let keep = |n: &String| n != "operation" && !withheld.contains(&n.as_str());
        (
            property_names(branch).into_iter().filter(keep).collect(),
            required(branch).into_iter().filter(keep).collect(),
        )
    };
    let (mut fields, need) = op_fields("claim", &["instance_id"]);
    fields.push("wait_seconds".into());
    assert_eq!(property_names(&schemas["claim"]), fields);
    assert_eq!(required(&schemas["claim"]), need);
    assert_eq!(schemas["claim"]["properties"]["files"]["minItems"], 1);
    assert_eq!(
        schemas["claim"]["properties"]["wait_seconds"]["maximum"],
        600
    );
    let (fields, need) = op_fields("release", &["instance_id", "force"]);
    assert_eq!(property_names(&schemas["release"]), fields);
    assert_eq!(required(&schemas["release"]), need);
    let (fields, _) = op_fields("status", &[]);
    assert_eq!(property_names(&schemas["status"]), fields);
    // The enums list their values; what only costs the agent characters is not listed.
    assert_eq!(
        schemas["start"]["properties"]["priority"],
        json!({"enum": ["P1", "P2", "P3"]})
    );
    assert_eq!(
        schemas["done"]["properties"]["outcome"],
        json!({"enum": ["success", "abandoned", "conflict"]})
    );
    for (name, s) in &schemas {
        let mut keys = Vec::new();
        keys_in(s, &mut keys);
        for noise in [
            "$schema", "$defs", "$ref", "title", "format", "default", "anyOf", "oneOf",
        ] {
            assert!(!keys.contains(&noise.to_string()), "{name}: {noise} in {s}");
        }
        assert!(!s.to_string().contains("null"), "{name}: {s}");
    }

    // Each tool parses its arguments into the type its schema came from: a name the schema does
    // not list is refused, so is a call without a listed `required`, and neither changes anything.
    // A value of the type a property's schema names.
    fn sample(s: &Value) -> Value {
        if let Some(e) = s["enum"].as_array() {
            return e[0].clone();
        }
        match s["type"].as_str() {
            Some("string") => json!("x"),
            Some("integer") => json!(1),
            Some("boolean") => json!(false),
            Some("array") => json!([sample(&s["items"])]),
            _ => json!({}),
        }
    }
    let mut plan = Vec::new();
    for (name, s) in &schemas {
        let given = |but: Option<&str>| -> Value {
            let mut args = serde_json::Map::new();
            for r in required(s).iter().filter(|r| Some(r.as_str()) != but) {
                args.insert(r.clone(), sample(&s["properties"][r]));
            }
            Value::Object(args)
        };
        let mut unknown = given(None);
        unknown["not_listed"] = json!(1);
        plan.push(json!({"tool": name, "args": unknown}));
        for r in required(s) {
            plan.push(json!({"tool": name, "args": given(Some(&r)), "missing": r}));
        }
    }
    plan.push(json!({"tool": "claim", "args": {"files": ["a.rs"], "instance_id": "web-3f9a1c"}}));
    let answers = run_plan(&env, &["--tools", "all"], &[], json!(plan));
    for (step, a) in plan.iter().zip(&answers) {
        let text = a["text"].as_str().unwrap_or_default();
        assert_eq!(a["is_error"], true, "{step}: {a}");
        let expected = match (step["missing"].as_str(), step["args"].get("instance_id")) {
            (Some(field), _) => format!("missing field `{field}`"),
            (None, Some(_)) => "unknown field `instance_id`".to_string(),
            (None, None) => "unknown field `not_listed`".to_string(),
        };
        assert!(
            text.starts_with(&format!(
                "error: invalid {} arguments: ",
                step["tool"].as_str().unwrap()
            )) && text.contains(&expected),
            "{step}: {text}"
        );
        assert_eq!(a["structured"]["reason"], "invalid_input", "{a}");
    }
    assert!(!env.home_file("status.json").exists() || instances(&env).is_empty());
}

#[test]
fn a_claim_refused_names_the_holder_and_check_agrees_then_done_finishes() {
    let env = TestEnv::new();
    let holder = env.start("refactor the parser", "P1");
    env.run(&["claim", "--instance", &holder, "src/a.rs"])
        .code(0);
    let mut c = Client::spawn(
        &env,
        &[],
        &[],
        json!([
            {"tool": "claim", "args": {"files": ["src/a.rs", "src/b.rs"]}},
            {"tool": "check", "args": {"files": ["src/a.rs", "src/b.rs", "src/c.rs"]}},
            {"tool": "status"},
            {"sync": "claimed"},
            {"tool": "claim", "args": {"files": []}},
            {"tool": "claim", "args": {"files": ["src/x.rs"], "wait_seconds": 5000}},
            {"tool": "release", "args": {}},
            {"tool": "done", "args": {"outcome": "finished"}},
            {"sync": "refused"},
            {"tool": "done", "args": {"notes": "b is fixed"}},
        ]),
    );
    let refused = c.next();
    assert_eq!(refused["is_error"], true, "{refused}");
    let text = refused["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("{} is claimed by {holder}", env.abs("src/a.rs"))),
        "{text}"
    );
    assert!(text.contains("task \"refactor the parser\""), "{text}");
    assert!(text.contains("last seen 0 min ago"), "{text}");
    assert!(
        text.contains("wait_seconds"),
        "says what to do next: {text}"
    );
    assert!(
        text.contains(&format!("Claimed the free ones: {}", env.abs("src/b.rs"))),
        "{text}"
    );
    assert_eq!(
        refused["structured"]["conflicts"][0]["held_by"],
        holder.as_str()
    );

    let check = c.next();
    let files = check["structured"]["files"].as_array().unwrap();
    assert_eq!(files[0]["may_edit"], false);
    assert_eq!(files[0]["held_by"], holder.as_str());
    assert_eq!(files[1]["may_edit"], true);
    assert_eq!(files[1]["yours"], true);
    assert_eq!(files[2]["may_edit"], true);
    assert_eq!(files[2]["held_by"], Value::Null);

    let status = c.next();
    let me = status["structured"]["you"].as_str().unwrap().to_string();
    assert_ne!(me, holder);
    assert_eq!(c.next()["sync"], "claimed");
    // The home: the server's own instance holds b.rs, owned by the client's process.
    let mine = env
        .instance(&me)
        .expect("the server registered an instance");
    assert_eq!(mine["files_claimed"], json!([env.abs("src/b.rs")]));
    assert_eq!(mine["pid"], c.child.id());
    assert_eq!(mine["agent"], "mcp");
    assert_eq!(
        env.state()["global_claims"][env.abs("src/a.rs")],
        holder.as_str()
    );
    let before = env.snapshot();
    c.go();

    // Bad arguments: the CLI's one-line reasons and a hint, nothing changed.
    let first_line = |v: &Value| {
        let t = v["text"].as_str().unwrap_or_default().to_string();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines.len() == 2 && lines[1].starts_with("hint: "),
            "one error line and one hint: {t}"
        );
        lines[0].to_string()
    };
    let empty = c.next();
    assert_eq!(empty["is_error"], true);
    assert_eq!(
        first_line(&empty),
        "error: invalid claim input at /files: [] has less than 1 item"
    );
    let long = c.next();
    assert_eq!(first_line(&long), "error: wait_seconds is at most 600");
    assert_eq!(
        first_line(&c.next()),
        "error: give either `files` or `all: true`"
    );
    assert_eq!(
        first_line(&c.next()),
        "error: `finished` is not one of success, abandoned, conflict"
    );
    // The client waits here, so no later call can be writing while the home is compared.
    assert_eq!(c.next()["sync"], "refused");
    assert_eq!(env.snapshot(), before, "refused calls change nothing");
    c.go();

    let done = c.next();
    assert_eq!(done["is_error"], false, "{done}");
    assert_eq!(done["structured"]["released"], json!([env.abs("src/b.rs")]));
    c.finish();
    assert!(env.instance(&me).is_none());
    let h = env.history();
    assert_eq!(h.last().unwrap()["id"], me.as_str());
    assert_eq!(h.last().unwrap()["outcome"], "success");
    assert_eq!(h.last().unwrap()["notes"], "b is fixed");
    assert!(
        env.instance(&holder).is_some(),
        "the other session is untouched"
    );
}

#[test]
fn a_waiting_claim_is_woken_by_the_release() {
    let env = TestEnv::new();
    let holder = env.start("holding a.rs", "P1");
    env.run(&["claim", "--instance", &holder, "src/a.rs"])
        .code(0);
    // No polling fallback: only the notification of the release can wake the claim in time.
    let mut c = Client::spawn(
        &env,
        &[],
        &[("CONDUCTOR_WATCH_POLL", "never")],
        json!([
            {"tool": "claim", "args": {"files": ["src/a.rs"], "wait_seconds": 120}},
            {"tool": "status"},
            {"sync": "got it"},
        ]),
    );
    // The server queued for the file (first come, first served).
    assert!(
        wait_until(20.0, || instances(&env).iter().any(|i| i["waiting_for"]
            .as_array()
            .is_some_and(|w| !w.is_empty()))),
        "the claim waits in the queue: {}",
        env.state()
    );
    env.run(&["release", "--instance", &holder, "src/a.rs"])
        .code(0);
    let released_at = Instant::now();
    let got = c.next();
    let woke_after = released_at.elapsed();
    assert_eq!(got["is_error"], false, "{got}");
    assert_eq!(got["structured"]["claimed"], json!([env.abs("src/a.rs")]));
    assert!(
        woke_after < Duration::from_secs(2),
        "woken by the release's notification, not by a rescan or the 120 s bound: {woke_after:?}"
    );
    let me = c.next()["structured"]["you"].as_str().unwrap().to_string();
    assert_eq!(c.next()["sync"], "got it");
    assert_eq!(
        env.state()["global_claims"][env.abs("src/a.rs")],
        me.as_str()
    );
    c.go();
    c.finish();
    // The client went away without `done`: its instance is finished, the file is free.
    assert!(env.instance(&me).is_none());
    assert!(
        env.state()["global_claims"]
            .get(env.abs("src/a.rs"))
            .is_none()
    );
    assert_eq!(env.history().last().unwrap()["outcome"], "abandoned");
}

#[test]
fn a_killed_client_leaves_no_instance_behind() {
    let env = TestEnv::new();
    let mut c = Client::spawn(
        &env,
        &[],
        &[],
        json!([
            {"tool": "claim", "args": {"files": ["src/k.rs"]}},
            {"sync": "holding"},
        ]),
    );
    assert_eq!(c.next()["is_error"], false);
    assert_eq!(c.next()["sync"], "holding");
    assert_eq!(instances(&env).len(), 1);
    c.child.kill().unwrap(); // SIGKILL: the client cannot say goodbye
    c.child.wait().unwrap();
    assert!(
        wait_until(20.0, || instances(&env).is_empty()),
        "the server finished its instance when its client died: {}",
        env.state()
    );
    assert_eq!(env.state()["global_claims"], json!({}));
}

#[test]
fn acts_as_the_session_its_hooks_registered_or_the_named_instance() {
    let env = TestEnv::new();
    let payload = json!({"session_id": "sess-mcp-1", "hook_event_name": "SessionStart",
                         "cwd": env.project.to_str().unwrap(), "source": "startup"});
    env.run_stdin(&["hook", "claude"], &payload.to_string())
        .code(0);
    let session = instances(&env)[0]["id"].as_str().unwrap().to_string();
    let out = run_plan(
        &env,
        &[],
        &[("CLAUDE_CODE_SESSION_ID", "sess-mcp-1")],
        json!([
            {"tool": "status"},
            {"tool": "claim", "args": {"files": ["src/s.rs"]}},
        ]),
    );
    assert_eq!(out[0]["structured"]["you"], session.as_str());
    assert_eq!(out[1]["is_error"], false, "{}", out[1]);
    // The session's instance holds the file, and outlives the server (its hooks finish it).
    let all = instances(&env);
    assert_eq!(all.len(), 1, "no second instance: {all:?}");
    assert_eq!(all[0]["files_claimed"], json!([env.abs("src/s.rs")]));

    let named = env.start("named", "P1");
    let out = run_plan(
        &env,
        &[],
        &[("CONDUCTOR_INSTANCE_ID", &named)],
        json!([{"tool": "claim", "args": {"files": ["src/n.rs"]}}]),
    );
    assert_eq!(out[0]["is_error"], false, "{}", out[0]);
    assert_eq!(
        env.instance(&named).unwrap()["files_claimed"],
        json!([env.abs("src/n.rs")])
    );
    assert_eq!(instances(&env).len(), 2);

    let out = run_plan(
        &env,
        &[],
        &[("CONDUCTOR_INSTANCE_ID", "itm-000000")],
        json!([{"tool": "claim", "args": {"files": ["src/z.rs"]}}]),
    );
    assert_eq!(out[0]["is_error"], true);
    assert!(
        out[0]["text"].as_str().unwrap().contains("itm-000000"),
        "{}",
        out[0]
    );
}

#[test]
fn inbox_flow_post_dm_seen_complete() {
    let env = TestEnv::new();
    env.run(&[
        "agent", "register", "scout", "--handle", "@scout", "--watch", "ops",
    ])
    .code(0);
    env.run(&["agent", "register", "lint", "--watch", "ops"])
        .code(0);
    env.run(&[
        "post",
        "ops",
        "@scout please summarize the failures",
        "--as",
        "ana",
    ])
    .code(0);
    let listed = env.run(&["--json", "inbox", "--agent", "scout"]);
    let item = listed.json()["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run_plan(
        &env,
        &["--agent", "scout"],
        &[],
        json!([
            {"tool": "inbox"},
            {"tool": "inbox_act", "args": {"id": item, "action": "seen"}},
            {"tool": "inbox_act", "args": {"id": item, "action": "complete"}},
            {"tool": "dm", "args": {"agent": "lint", "text": "summary is in #ops"}},
            {"tool": "inbox_act", "args": {"id": item, "action": "complete", "completion_ref": {"post_id": "msg-000002"}}},
            {"tool": "inbox"},
        ]),
    );
    let items = out[0]["structured"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"], item.as_str());
    assert_eq!(out[1]["structured"]["item"]["status"], "seen");
    assert_eq!(
        out[2]["is_error"], true,
        "complete needs a completion_ref: {}",
        out[2]
    );
    assert!(
        out[2]["text"].as_str().unwrap().starts_with("error: "),
        "{}",
        out[2]
    );
    assert_eq!(out[3]["structured"]["message"]["author"], "scout");
    assert_eq!(
        out[4]["structured"]["item"]["status"], "completed",
        "{}",
        out[4]
    );
    assert_eq!(out[5]["structured"]["items"], json!([]));
    // The home agrees: the item is completed with its reference, lint got the DM.
    let done = env.run(&[
        "--json",
        "inbox",
        "--agent",
        "scout",
        "--status",
        "completed",
    ]);
    let d = &done.json()["items"][0];
    assert_eq!(d["id"], item.as_str());
    assert_eq!(d["completion_ref"]["post_id"], "msg-000002");
    let lint = env.run(&["--json", "inbox", "--agent", "lint"]).json();
    assert!(
        lint["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["author"] == "scout"),
        "{lint}"
    );
    // Inbox tools never register a protocol instance.
    assert!(!env.home_file("status.json").exists() || instances(&env).is_empty());
}

/// Every file under `dir`, with its bytes.
pub(crate) fn tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn integrate_registers_the_server_beside_others_and_uninstall_restores_every_byte() {
    let env = TestEnv::new();
    let p = &env.project;
    let exe = std::fs::canonicalize(bin()).unwrap().display().to_string();
    // Existing configurations in their own formatting, with servers of their own.
    std::fs::write(
        p.join(".mcp.json"),
        "{\"mcpServers\":{\"docs\":{\"command\":\"docs-mcp\"}}}",
    )
    .unwrap();
    std::fs::create_dir_all(p.join(".cursor")).unwrap();
    std::fs::write(p.join(".cursor/mcp.json"), "{\n\t\"mcpServers\": {}\n}").unwrap();
    std::fs::create_dir_all(p.join(".codex")).unwrap();
    std::fs::write(
        p.join(".codex/config.toml"),
        "model = \"o4\"\n[mcp_servers.docs]\ncommand = \"docs-mcp\"",
    )
    .unwrap();
    std::fs::create_dir_all(p.join(".gemini")).unwrap();
    std::fs::write(p.join(".gemini/settings.json"), "{ \"theme\": \"dark\" }").unwrap();
    let before = tree(p);
    for agent in ["claude", "cursor", "codex", "gemini"] {
        let r = env.run(&["integrate", agent]);
        r.code(0);
        assert!(
            r.stdout.contains("registered the MCP server"),
            "{agent}: {r:?}"
        );
    }
    let claude = read_json(&p.join(".mcp.json"));
    assert_eq!(
        claude["mcpServers"]["conductor"],
        json!({"command": exe, "args": ["mcp"]})
    );
    assert_eq!(claude["mcpServers"]["docs"]["command"], "docs-mcp");
    assert_eq!(
        read_json(&p.join(".cursor/mcp.json"))["mcpServers"]["conductor"]["args"],
        json!(["mcp"])
    );
    let gemini = read_json(&p.join(".gemini/settings.json"));
    assert_eq!(gemini["mcpServers"]["conductor"]["command"], exe.as_str());
    assert_eq!(gemini["theme"], "dark");
    assert!(gemini["hooks"].is_object(), "the hooks are there too");
    let toml = std::fs::read_to_string(p.join(".codex/config.toml")).unwrap();
    assert!(
        toml.starts_with("model = \"o4\"\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n"),
        "{toml}"
    );
    assert!(
        toml.contains(&format!(
            "[mcp_servers.conductor]\ncommand = {}\nargs = [\"mcp\"]\n",
            json!(exe)
        )),
        "{toml}"
    );
    // Again: nothing changes.
    let installed = tree(p);
    for agent in ["claude", "cursor", "codex", "gemini"] {
        env.run(&["integrate", agent]).code(0);
    }
    assert_eq!(tree(p), installed, "a second integrate changes nothing");
    // The registered command really is an MCP server (the client starts what .mcp.json says).
    let registered = claude["mcpServers"]["conductor"]["command"]
        .as_str()
        .unwrap();
    let listed = run_plan(
        &env,
        &[],
        &[("CONDUCTOR_BIN", registered)],
        json!([{"list": true}]),
    );
    assert_eq!(listed[0]["tools"].as_array().unwrap().len(), 11);
    // doctor checks each registration starts.
    let d = env.run(&["--json", "doctor"]).json();
    let mcp: Vec<&Value> = d["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("MCP server")
        })
        .collect();
    assert_eq!(mcp.len(), 4, "{d}");
    assert!(mcp.iter().all(|f| f["ok"] == true), "{d}");
    for agent in ["claude", "cursor", "codex", "gemini"] {
        env.run(&["integrate", agent, "--uninstall"]).code(0);
    }
    assert_eq!(
        tree(p),
        before,
        "uninstall gives every file back byte for byte"
    );
}

#[test]
fn integrate_into_a_fresh_project_and_out_again_leaves_nothing() {
    let env = TestEnv::new();
    let before = tree(&env.project);
    for agent in ["claude", "cursor", "codex", "gemini"] {
        env.run(&["integrate", agent]).code(0);
    }
    assert!(env.project.join(".mcp.json").exists());
    assert!(env.project.join(".codex/config.toml").exists());
    for agent in ["claude", "cursor", "codex", "gemini"] {
        env.run(&["integrate", agent, "--uninstall"]).code(0);
    }
    assert_eq!(tree(&env.project), before);
    assert!(!env.project.join(".codex").exists());
}

#[test]
fn integrate_refuses_a_foreign_conductor_server_and_doctor_reports_a_missing_one() {
    let env = TestEnv::new();
    let p = &env.project;
    std::fs::write(
        p.join(".mcp.json"),
        r#"{"mcpServers": {"conductor": {"command": "npx", "args": ["other"]}}}"#,
    )
    .unwrap();
    let before = tree(p);
    let r = env.run(&["integrate", "claude"]);
    r.code(2);
    assert!(r.stderr.contains("not conductor's"), "{r:?}");
    assert_eq!(tree(p), before, "nothing changed");
    std::fs::create_dir_all(p.join(".codex")).unwrap();
    std::fs::write(
        p.join(".codex/config.toml"),
        "[mcp_servers.conductor]\ncommand = \"x\"\n",
    )
    .unwrap();
    let before = tree(p);
    env.run(&["integrate", "codex"]).code(2);
    assert_eq!(tree(p), before);
    // Hooks without the server: doctor says so and how to fix it.
    std::fs::remove_file(p.join(".mcp.json")).unwrap();
    env.run(&["integrate", "claude"]).code(0);
    std::fs::write(p.join(".mcp.json"), "{}").unwrap();
    let r = env.run(&["--json", "doctor"]);
    let d = r.json();
    let f = d["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("MCP server is not registered")
        })
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(f["ok"], false);
    assert_eq!(f["repair"], "run `conductor integrate claude`");
    assert_ne!(r.code, 0, "an unregistered server is a problem: {r:?}");
}

#[test]
fn queue_and_workflow_tools_are_offered_behind_the_option() {
    let env = TestEnv::new();
    let out = run_plan(
        &env,
        &["--tools", "all"],
        &[],
        json!([
            {"tool": "queue_submit", "args": {"manifest": {"workspace": "w0", "jobs": [{"id": "ok", "prompt": "p"}]}}},
            {"tool": "queue_status", "args": {"workspace": "w0"}},
            {"tool": "queue_submit", "args": {"manifest": {"workspace": "w1", "jobs": [{"id": "a", "prompt": "p", "depends_on": ["nope"]}]}}},
            {"tool": "workflow_transition", "args": {"target": "done", "summary": "x"}},
        ]),
    );
    assert_eq!(out[0]["is_error"], false, "{}", out[0]);
    assert_eq!(out[1]["structured"]["jobs"][0]["id"], "ok", "{}", out[1]);
    assert_eq!(out[2]["is_error"], true);
    assert!(
        out[2]["text"].as_str().unwrap().contains("nope"),
        "{}",
        out[2]
    );
    assert!(
        out[3]["text"]
            .as_str()
            .unwrap()
            .starts_with("error: no workflow session"),
        "{}",
        out[3]
    );
    // The CLI sees the job the tool submitted, and not the refused one.
    let jobs = env.run(&["--json", "queue", "jobs"]).json();
    let ids: Vec<&Value> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["id"])
        .collect();
    assert_eq!(ids, [&json!("ok")], "{jobs}");
}

#[test]
fn integrate_claude_user_registers_in_claude_json_and_gives_it_back() {
    let env = TestEnv::new();
    let home = env.root.path().to_path_buf();
    let cfg = home.join(".claude.json");
    std::fs::write(&cfg, "{\"numStartups\": 3, \"projects\": {}}").unwrap();
    let before = std::fs::read(&cfg).unwrap();
    env.run(&["integrate", "claude", "--user"]).code(0);
    let v = read_json(&cfg);
    assert_eq!(v["mcpServers"]["conductor"]["args"], json!(["mcp"]));
    assert_eq!(v["numStartups"], 3);
    env.run(&["integrate", "claude", "--user", "--uninstall"])
        .code(0);
    assert_eq!(std::fs::read(&cfg).unwrap(), before);
}

/// Parse a resource's text as JSON.
#[track_caller]
fn text_json(step: &Value) -> Value {
    let t = step["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {step}"));
    serde_json::from_str(t).unwrap()
}

#[test]
fn resources_are_listed_read_and_subscribers_are_notified_from_the_journal() {
    let env = TestEnv::new();
    env.run(&["agent", "register", "scout", "--watch", "ops"])
        .code(0);
    let dir = env.project.join(".conductor/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("one.json"),
        r#"{"name":"One","initial":"a","states":{"a":{"persona":"A"}}}"#,
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "one", "Add rate limiting"]);
    r.code(0);
    let sid = r.json()["session"].as_str().unwrap().to_string();
    let holder = env.start("refactor the parser", "P1");
    let (status, inbox) = ("conductor://status", "conductor://inbox/scout");
    let snap = format!("conductor://workflow/{sid}/snapshot");
    // No polling fallback: each update below must come from a notification within 2 s.
    let mut c = Client::spawn(
        &env,
        &["--agent", "scout"],
        &[("CONDUCTOR_WATCH_POLL", "never")],
        json!([
            {"resources": true},
            {"read": status},
            {"read": "conductor://inbox/nobody"},
            {"subscribe": status},
            {"subscribe": inbox},
            {"subscribe": snap},
            {"subscribe": "conductor://nope"},
            {"sync": "subscribed"},
            {"updated": status, "within": 2},
            {"read": status},
            {"sync": "claimed"},
            {"updated": inbox, "within": 2},
            {"read": inbox},
            {"sync": "posted"},
            {"updated": snap, "within": 2},
            {"read": snap},
            {"updates_for": 1.0},
        ]),
    );
    let listed = c.next();
    let uris = listed["resources"].as_array().unwrap();
    for u in [status, inbox, snap.as_str()] {
        assert!(uris.contains(&json!(u)), "{u} listed: {listed}");
    }
    assert_eq!(
        listed["templates"],
        json!([
            "conductor://inbox/{agent}",
            "conductor://workflow/{session}/snapshot"
        ])
    );
    let first = text_json(&c.next());
    assert_eq!(first["instances"][0]["id"], holder.as_str(), "{first}");
    let nobody = c.next();
    assert!(
        nobody["error"].as_str().unwrap().contains("nobody"),
        "an unknown agent's inbox is an error naming it: {nobody}"
    );
    for u in [status, inbox, snap.as_str()] {
        assert_eq!(c.next()["subscribed"], u);
    }
    let nope = c.next();
    assert!(
        nope["error"]
            .as_str()
            .unwrap()
            .contains("unknown resource `conductor://nope`"),
        "{nope}"
    );
    assert_eq!(c.next()["sync"], "subscribed");

    // A claim made with the CLI: the status subscriber hears of it and reads it.
    env.run(&["claim", "--instance", &holder, "src/a.rs"])
        .code(0);
    let t0 = Instant::now();
    c.go();
    let up = c.next();
    assert_eq!(up["updated"], status, "{up}");
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "woken by the journal's notification: {took:?}"
    );
    let now = text_json(&c.next());
    assert_eq!(
        now["instances"][0]["files_claimed"],
        json!([env.abs("src/a.rs")]),
        "{now}"
    );
    assert_eq!(c.next()["sync"], "claimed");

    // A mention posted with the CLI lands in scout's inbox.
    env.run(&["post", "ops", "@scout look at the logs", "--as", "ana"])
        .code(0);
    c.go();
    assert_eq!(c.next()["updated"], inbox);
    let items = text_json(&c.next());
    assert_eq!(items["items"].as_array().unwrap().len(), 1, "{items}");
    assert!(
        items["items"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("look at the logs")
            || items.to_string().contains("look at the logs"),
        "{items}"
    );
    assert_eq!(c.next()["sync"], "posted");

    // A finding recorded with the CLI reaches the snapshot's subscriber.
    env.run(&[
        "workflow",
        "snapshot",
        "--session",
        &sid,
        "--finding",
        "the API port is 8081",
    ])
    .code(0);
    c.go();
    assert_eq!(c.next()["updated"], snap.as_str());
    let s = text_json(&c.next());
    assert_eq!(
        s["snapshot"]["key_findings"],
        json!(["the API port is 8081"]),
        "{s}"
    );
    // Each change notified only the resource it touched, once.
    assert_eq!(c.next()["updates"], json!([]));
    c.finish();
    // The snapshot's change is in the journal, under its own type.
    let ev = env
        .run(&["--json", "events", "--types", "workflow.snapshot.updated"])
        .json();
    assert_eq!(ev["items"].as_array().map(Vec::len), Some(1), "{ev}");
    assert_eq!(ev["items"][0]["payload"]["session"], sid.as_str(), "{ev}");
}

#[test]
fn a_cancelled_waiting_claim_leaves_the_queue_at_once_and_nothing_behind() {
    let env = TestEnv::new();
    let holder = env.start("holding a.rs", "P1");
    env.run(&["claim", "--instance", &holder, "src/a.rs"])
        .code(0);
    let mut c = Client::spawn(
        &env,
        &[],
        &[],
        json!([
            {"cancel": "claim", "args": {"files": ["src/a.rs"], "wait_seconds": 300}},
            {"tool": "status"},
            {"sync": "cancelled"},
        ]),
    );
    assert_eq!(c.next()["started"], "claim");
    let waiter = || {
        instances(&env)
            .into_iter()
            .find(|i| i["id"] != holder.as_str())
    };
    assert!(
        wait_until(20.0, || waiter().is_some_and(|w| w["waiting_for"]
            .as_array()
            .is_some_and(|q| !q.is_empty()))),
        "the claim waits in the queue: {}",
        env.state()
    );
    let me = waiter().unwrap();
    assert_eq!(me["pending_conflicts"][0]["file"], env.abs("src/a.rs"));
    let t0 = Instant::now();
    c.go();
    assert_eq!(c.next()["cancelled"], "claim");
    let left = wait_until(10.0, || {
        waiter().is_some_and(|w| {
            let none = |v: &Value| v.as_array().is_none_or(|a| a.is_empty());
            none(&w["waiting_for"]) && none(&w["pending_conflicts"])
        })
    });
    let took = t0.elapsed();
    assert!(left, "the waiter left the queue: {}", env.state());
    assert!(
        took < Duration::from_secs(5),
        "the wait ended promptly: {took:?}"
    );
    // The server still answers, and the journal says why the queue place went.
    let st = c.next();
    assert_eq!(st["is_error"], false, "{st}");
    assert_eq!(c.next()["sync"], "cancelled");
    let events = env
        .run(&["--json", "events", "--types", "claim.dequeued"])
        .json();
    assert!(
        events.to_string().contains(&env.abs("src/a.rs")),
        "{events}"
    );
    // Released now, the file goes to no one: nobody waits for it any more.
    env.run(&["release", "--instance", &holder, "src/a.rs"])
        .code(0);
    assert!(
        env.state()["global_claims"]
            .get(env.abs("src/a.rs"))
            .is_none(),
        "{}",
        env.state()
    );
    c.go();
    c.finish();
}

#[test]
fn integrate_opencode_registers_the_server_in_opencode_json_and_gives_every_byte_back() {
    let env = TestEnv::new();
    let p = &env.project;
    let exe = std::fs::canonicalize(bin()).unwrap().display().to_string();
    // OpenCode's own config, in its own formatting, with a server of its own.
    let cfg = p.join("opencode.json");
    std::fs::write(
        &cfg,
        "{\"$schema\":\"https://opencode.ai/config.json\",\"model\":\"x/y\",\"mcp\":{\"docs\":{\"type\":\"local\",\"command\":[\"docs-mcp\"]}}}",
    )
    .unwrap();
    let before = tree(p);
    let r = env.run(&["integrate", "opencode"]);
    r.code(0);
    assert!(r.stdout.contains("installed the OpenCode plugin"), "{r:?}");
    assert!(r.stdout.contains("registered the MCP server"), "{r:?}");
    let v = read_json(&cfg);
    assert_eq!(
        v["mcp"]["conductor"],
        json!({"type": "local", "command": [exe, "mcp"], "enabled": true})
    );
    assert_eq!(v["mcp"]["docs"]["command"], json!(["docs-mcp"]));
    assert_eq!(v["model"], "x/y");
    assert!(p.join(".opencode/plugins/conductor.js").is_file());
    let installed = tree(p);
    env.run(&["integrate", "opencode"]).code(0);
    assert_eq!(tree(p), installed, "a second integrate changes nothing");
    // What opencode.json names is an MCP server a real client can list.
    let listed = run_plan(
        &env,
        &[],
        &[(
            "CONDUCTOR_BIN",
            v["mcp"]["conductor"]["command"][0].as_str().unwrap(),
        )],
        json!([{"list": true}]),
    );
    assert_eq!(listed[0]["tools"].as_array().unwrap().len(), 11);
    let d = env.run(&["--json", "doctor"]).json();
    let found: Vec<&Value> = d["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("OpenCode MCP server")
        })
        .collect();
    assert_eq!(found.len(), 1, "{d}");
    assert_eq!(found[0]["ok"], true, "{d}");
    assert_eq!(found[0]["file"], cfg.display().to_string());
    env.run(&["integrate", "opencode", "--uninstall"]).code(0);
    assert_eq!(
        tree(p),
        before,
        "uninstall gives every file back byte for byte"
    );

    // doctor names a plugin whose server was taken out of opencode.json by hand.
    env.run(&["integrate", "opencode"]).code(0);
    std::fs::write(&cfg, "{\"model\":\"x/y\"}").unwrap();
    let d = env.run(&["--json", "doctor"]).json();
    let missing = d["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == cfg.display().to_string())
        .unwrap_or_else(|| panic!("{d}"))
        .clone();
    assert_eq!(missing["ok"], false, "{d}");
    assert!(
        missing["detail"]
            .as_str()
            .unwrap()
            .contains("not registered"),
        "{missing}"
    );
    assert_eq!(missing["repair"], "run `conductor integrate opencode`");
}

#[test]
fn integrate_opencode_fresh_user_and_foreign_server() {
    let env = TestEnv::new();
    let p = &env.project;
    let before = tree(p);
    env.run(&["integrate", "opencode"]).code(0);
    assert_eq!(
        read_json(&p.join("opencode.json")),
        json!({"mcp": {"conductor": {"type": "local",
            "command": [std::fs::canonicalize(bin()).unwrap(), "mcp"], "enabled": true}}})
    );
    env.run(&["integrate", "opencode", "--uninstall"]).code(0);
    assert_eq!(tree(p), before, "a fresh project is left as it was");

    // --user: ~/.config/opencode/opencode.json beside the user plugin, and back again.
    let home = env.root.path();
    env.run(&["integrate", "opencode", "--user"]).code(0);
    let user = home.join(".config/opencode/opencode.json");
    assert_eq!(read_json(&user)["mcp"]["conductor"]["command"][1], "mcp");
    assert!(home.join(".config/opencode/plugins/conductor.js").is_file());
    env.run(&["integrate", "opencode", "--user", "--uninstall"])
        .code(0);
    assert!(
        !home.join(".config").exists(),
        "nothing left under ~/.config"
    );

    // A `conductor` server someone else registered: refused, nothing written.
    let foreign = "{\"mcp\": {\"conductor\": {\"type\": \"remote\", \"url\": \"https://x\"}}}";
    std::fs::write(p.join("opencode.json"), foreign).unwrap();
    let snap = tree(p);
    let r = env.run(&["integrate", "opencode"]);
    r.code(2);
    assert!(r.stderr.contains("not conductor's"), "{r:?}");
    assert_eq!(tree(p), snap, "nothing changed");
}

/// The pinned Claude Code, or a failure saying how to install it.
fn require_claude() {
    let v = Command::new("claude")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        v.starts_with("2.1.197 "),
        "Claude Code 2.1.197 is missing (found `{}`): `bash tests/e2e/install.sh` (./test does it)",
        v.trim()
    );
}

/// The scripted model server (tests/e2e/model_server.py) on a free port.
struct ModelServer {
    child: Child,
    port: u16,
}

impl ModelServer {
    fn start(script: &std::path::Path, record: &std::path::Path) -> ModelServer {
        let server =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/model_server.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg("--script")
            .arg(script)
            .arg("--record")
            .arg(record)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the model server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the model server said `{line}`"));
        ModelServer { child, port }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn record_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The tool results in the last message of a recorded Anthropic request: (is_error, text).
fn tool_results(request: &Value) -> Vec<(bool, String)> {
    let msgs = request["body"]["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            };
            (b["is_error"] == true, text)
        })
        .collect()
}

#[test]
fn real_claude_code_claims_over_mcp_is_refused_a_held_file_and_finishes() {
    require_claude();
    let env = TestEnv::new();
    let holder = env.start("refactor held.rs", "P1");
    env.run(&["claim", "--instance", &holder, "src/held.rs"])
        .code(0);
    let dir = env.root.path();
    let gate = dir.join("gate");
    let (script, record) = (dir.join("script.json"), dir.join("record.jsonl"));
    std::fs::write(
        &script,
        json!({"steps": [
            {"tool_call": {"name": "mcp__conductor__claim", "input": {"files": ["src/mine.rs"]}}},
            {"tool_call": {"name": "mcp__conductor__claim", "input": {"files": ["src/held.rs"]}}},
            {"tool_call": {"name": "mcp__conductor__done", "input": {"notes": "mine.rs is done; held.rs is not mine"}},
             "wait_for": gate},
            {"text": "finished"},
        ]})
        .to_string(),
    )
    .unwrap();
    let mcp_config = dir.join("mcp.json");
    std::fs::write(
        &mcp_config,
        json!({"mcpServers": {"conductor": {"command": bin(), "args": ["mcp"]}}}).to_string(),
    )
    .unwrap();
    let server = ModelServer::start(&script, &record);
    let mut claude = Command::new("claude");
    claude
        .args(["-p", "Claim src/mine.rs, then src/held.rs, then finish."])
        .arg("--mcp-config")
        .arg(&mcp_config)
        .args([
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__conductor__claim mcp__conductor__done",
            "--output-format",
            "json",
        ])
        .current_dir(&env.project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", server.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = claude.spawn().expect("spawn claude");

    // The model asked for `done`: look at conductor mid-run, before it is answered.
    let asked = wait_until(120.0, || {
        record_lines(&record).iter().any(|r| r["step"] == 2)
    });
    let mid = env.state();
    std::fs::write(&gate, "").unwrap();
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        asked,
        "Claude Code never got to the third step: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "claude: {stdout}");
    let result: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(result["result"], "finished", "{result}");
    let session = result["session_id"].as_str().unwrap();

    // Mid-run: the server acted as Claude Code's session, which held mine.rs; held.rs stayed put.
    let me = mid["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] != holder.as_str())
        .unwrap_or_else(|| panic!("no instance for the Claude session: {mid}"))
        .clone();
    assert_eq!(me["agent"], "claude", "{me}");
    assert_eq!(me["session_id"], session, "{me}");
    assert_eq!(me["files_claimed"], json!([env.abs("src/mine.rs")]), "{me}");
    assert_eq!(
        mid["global_claims"][env.abs("src/held.rs")],
        holder.as_str()
    );

    // What the model received: the claim, the refusal naming the holder, the finish.
    let rec = record_lines(&record);
    let by_step = |i: u64| {
        rec.iter()
            .find(|r| r["step"] == i)
            .unwrap_or_else(|| panic!("no request for step {i}"))
    };
    let tools: Vec<&str> = by_step(0)["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__conductor__claim"), "{tools:?}");
    let granted = tool_results(by_step(1));
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(!granted[0].0, "{granted:?}");
    assert!(
        granted[0].1.contains("Files claimed") && granted[0].1.contains(&env.abs("src/mine.rs")),
        "{granted:?}"
    );
    let refused = tool_results(by_step(2));
    assert!(refused[0].0, "the refusal is a tool error: {refused:?}");
    assert!(
        refused[0].1.contains(&format!(
            "CONFLICT: {} is claimed by {holder} (task \"refactor held.rs\"",
            env.abs("src/held.rs")
        )),
        "{refused:?}"
    );
    let finished = tool_results(by_step(3));
    assert!(!finished[0].0, "{finished:?}");
    assert!(finished[0].1.contains("Task complete"), "{finished:?}");

    // After: Claude's instance is finished with its notes; the holder still holds held.rs.
    let st = env.state();
    assert_eq!(st["instances"].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(st["global_claims"], json!({env.abs("src/held.rs"): holder}));
    let last = env.history().last().unwrap().clone();
    assert_eq!(last["id"], me["id"]);
    assert_eq!(last["outcome"], "success");
    assert_eq!(last["notes"], "mine.rs is done; held.rs is not mine");
}

/// MCP's `check` and `claim` compare paths across the git worktrees of a repository, like the
/// CLI and the hooks (docs/protocol.md, "Agents in worktrees").
#[test]
fn check_and_claim_see_a_file_held_in_another_worktree_of_the_repository() {
    use crate::worktrees::{git, worktree};
    let env = TestEnv::new();
    git(&env.project, &["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join("src/a.rs"), "fn a() {}\n").unwrap();
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-q", "-m", "init"]);
    let b = worktree(&env.project, "proj-b", "feature/b");
    let holder = env.start_in(&b, "proj", "work in b", "P1");
    env.run_in(&b, &["claim", "--instance", &holder, "src/a.rs"])
        .code(0);
    let out = run_plan(
        &env,
        &[],
        &[],
        json!([
            {"tool": "check", "args": {"files": ["src/a.rs"]}},
            {"tool": "claim", "args": {"files": ["src/a.rs"]}},
        ]),
    );
    let f = &out[0]["structured"]["files"][0];
    assert_eq!(f["may_edit"], false, "{}", out[0]);
    assert_eq!(f["held_by"], holder.as_str(), "{}", out[0]);
    let note = f["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&format!(
            "in the worktree {}, branch feature/b",
            b.display()
        )),
        "{}",
        out[0]
    );
    assert_eq!(out[1]["is_error"], true, "{}", out[1]);
    let c = &out[1]["structured"]["conflicts"][0];
    assert_eq!(c["held_by"], holder.as_str(), "{}", out[1]);
    assert_eq!(c["holder_worktree"], b.to_str().unwrap(), "{}", out[1]);
    assert_eq!(c["holder_branch"], "feature/b", "{}", out[1]);
}
