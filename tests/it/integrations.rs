//! Issue 22: integrations that the real agents run. Codex CLI runs a project's hooks only when
//! the project and each hook are trusted in its config.toml: `integrate codex` records that trust,
//! checked against the real Codex CLI's own hook listing (its app-server's `hooks/list`, which
//! needs no model), and `doctor` names the hooks Codex skips. OpenCode's plugin and Pi's extension
//! run under the real `node`, loaded by a small harness that calls their hooks with the events the
//! agents send, spawning the real binary.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::TestEnv;

const CODEX_INSTALL: &str = "./test installs it (or npm install -g @openai/codex@0.169.0)";

/// The Codex CLI binary, or a failure that says how to install it.
fn codex() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("codex"))
            .find(|c| c.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "the Codex CLI is not installed; these tests check hooks against it: {CODEX_INSTALL}"
        )
    })
}

/// Codex's view of the hooks for `cwd`: each hook's key and trust status, from `codex
/// app-server`'s `hooks/list` (JSON-RPC over stdio, no model, no network).
fn codex_hooks(codex_home: &Path, home: &Path, cwd: &Path) -> Vec<(String, String)> {
    let mut child = Command::new(codex())
        .arg("app-server")
        .env("CODEX_HOME", codex_home)
        .env("HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start codex app-server");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let recv = |id: u64| -> Value {
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("codex app-server answers within 60 s");
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == json!(id) {
                return v;
            }
        }
    };
    let mut send = |v: Value| writeln!(stdin, "{v}").expect("write to codex app-server");
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "conductor-tests", "version": "0"}}}));
    recv(1);
    send(json!({"jsonrpc": "2.0", "method": "initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                "params": {"cwds": [cwd.display().to_string()]}}));
    let answer = recv(2);
    let _ = child.kill();
    let _ = child.wait();
    let data = &answer["result"]["data"][0];
    assert_eq!(data["errors"], json!([]), "{answer}");
    data["hooks"]
        .as_array()
        .unwrap_or_else(|| panic!("no hook list: {answer}"))
        .iter()
        .map(|h| {
            (
                h["key"].as_str().unwrap_or("").to_string(),
                h["trustStatus"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A project that is a git repository, and a Codex home with a config.toml of the user's own.
fn codex_env() -> (TestEnv, PathBuf, Vec<u8>) {
    let env = TestEnv::new();
    let st = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.project)
        .status()
        .expect("git");
    assert!(st.success());
    let codex_home = env.root.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let original = b"# my settings\nmodel = \"o3\"   # inline comment\n\n[projects.\"/elsewhere\"]\ntrust_level = \"trusted\"\n\n[mcp_servers.docs]\ncommand = \"docs-server\"\nenv = { TOKEN = \"secret-token\" }\n".to_vec();
    std::fs::write(codex_home.join("config.toml"), &original).unwrap();
    (env, codex_home, original)
}

fn with_codex_home(env: &TestEnv, codex_home: &Path, args: &[&str]) -> crate::common::Run {
    env.run_env(args, &[("CODEX_HOME", codex_home.to_str().unwrap())])
}

#[test]
fn integrate_codex_leaves_hooks_the_real_codex_runs_and_uninstall_restores_config_toml() {
    let (env, codex_home, original) = codex_env();
    let home = env.root.path().to_path_buf();
    // Before: the hooks exist but Codex would skip every one (the finding of issue 22).
    let out = with_codex_home(&env, &codex_home, &["integrate", "codex"]);
    out.code(0);
    assert!(out.stdout.contains("trusted 5 conductor hooks"), "{out:?}");
    assert!(out.stdout.contains("a trusted project"), "{out:?}");
    let hooks = codex_hooks(&codex_home, &home, &env.project);
    assert_eq!(hooks.len(), 5, "{hooks:?}");
    for (key, status) in &hooks {
        assert!(key.starts_with(&format!("{}/.codex/hooks.json:", env.project.display())));
        assert_eq!(status, "trusted", "Codex does not trust {key}: {hooks:?}");
    }
    let text = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    // The user's lines keep their bytes and their order (conductor's tables go in between).
    let mut lines = text.lines();
    for want in std::str::from_utf8(&original).unwrap().lines() {
        assert!(lines.any(|l| l == want), "lost or moved {want:?}:\n{text}");
    }
    // The manifest holds trust hashes, never the rest of config.toml.
    let manifest =
        std::fs::read_to_string(env.project.join(".codex/conductor-integration.json")).unwrap();
    assert!(!manifest.contains("secret-token"), "{manifest}");
    // Installing again changes nothing.
    let again = with_codex_home(&env, &codex_home, &["integrate", "codex"]);
    assert!(again.stdout.contains("Nothing to change"), "{again:?}");
    with_codex_home(&env, &codex_home, &["integrate", "codex", "--uninstall"]).code(0);
    assert_eq!(
        std::fs::read(codex_home.join("config.toml")).unwrap(),
        original
    );
    assert!(!env.project.join(".codex").exists());
    assert!(codex_hooks(&codex_home, &home, &env.project).is_empty());
}

#[test]
fn integrate_codex_user_hooks_are_trusted_in_codex_home() {
    let (env, codex_home, original) = codex_env();
    with_codex_home(&env, &codex_home, &["integrate", "codex", "--user"]).code(0);
    assert!(codex_home.join("hooks.json").is_file());
    let hooks = codex_hooks(&codex_home, env.root.path(), &env.project);
    assert_eq!(hooks.len(), 5, "{hooks:?}");
    assert!(hooks.iter().all(|(_, s)| s == "trusted"), "{hooks:?}");
    with_codex_home(
        &env,
        &codex_home,
        &["integrate", "codex", "--user", "--uninstall"],
    )
    .code(0);
    assert_eq!(
        std::fs::read(codex_home.join("config.toml")).unwrap(),
        original
    );
    assert!(!codex_home.join("hooks.json").exists());
}

#[test]
fn doctor_names_codex_hooks_that_codex_would_skip_and_the_command_that_fixes_them() {
    let (env, codex_home, _) = codex_env();
    with_codex_home(&env, &codex_home, &["integrate", "codex"]).code(0);
    let ok = with_codex_home(&env, &codex_home, &["doctor"]);
    assert!(!ok.stdout.contains("Codex skips"), "{ok:?}");
    // Someone edits the trust entry of one hook (or Codex's hash no longer matches the command).
    let path = codex_home.join("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find("trusted_hash = \"sha256:").unwrap() + "trusted_hash = \"sha256:".len();
    let tampered = format!("{}0000{}", &text[..at], &text[at + 4..]);
    std::fs::write(&path, &tampered).unwrap();
    let bad = with_codex_home(&env, &codex_home, &["doctor"]);
    assert_ne!(bad.code, 0, "{bad:?}");
    assert!(
        bad.stdout.contains("Codex skips 1 of conductor's 5 hooks"),
        "{bad:?}"
    );
    assert!(
        bad.stdout.contains("fix: run `conductor integrate codex`"),
        "{bad:?}"
    );
    let hooks = codex_hooks(&codex_home, env.root.path(), &env.project);
    assert_eq!(
        hooks.iter().filter(|(_, s)| s != "trusted").count(),
        1,
        "{hooks:?}"
    );
    with_codex_home(&env, &codex_home, &["integrate", "codex"]).code(0);
    let fixed = with_codex_home(&env, &codex_home, &["doctor"]);
    assert!(!fixed.stdout.contains("BAD"), "{fixed:?}");
    // A project the user marked untrusted is not trusted behind their back: doctor says so.
    let text = std::fs::read_to_string(&path).unwrap();
    let marked = text.replace(
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"",
            env.project.display()
        ),
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"untrusted\"",
            env.project.display()
        ),
    );
    assert_ne!(marked, text);
    std::fs::write(&path, &marked).unwrap();
    let out = with_codex_home(&env, &codex_home, &["integrate", "codex"]);
    assert!(out.stdout.contains("--trust-project"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), marked);
    let bad = with_codex_home(&env, &codex_home, &["doctor"]);
    assert!(
        bad.stdout.contains("until the project is trusted"),
        "{bad:?}"
    );
    assert!(
        bad.stdout
            .contains("conductor integrate codex --trust-project"),
        "{bad:?}"
    );
    assert!(codex_hooks(&codex_home, env.root.path(), &env.project).is_empty());
    with_codex_home(
        &env,
        &codex_home,
        &["integrate", "codex", "--trust-project"],
    )
    .code(0);
    let hooks = codex_hooks(&codex_home, env.root.path(), &env.project);
    assert!(
        hooks.len() == 5 && hooks.iter().all(|(_, s)| s == "trusted"),
        "{hooks:?}"
    );
}

// ------------------------------------------------------------------ OpenCode's plugin, Pi's extension

/// Loads OpenCode's plugin module as OpenCode does (its exported plugin function, called with the
/// plugin context), then drives a session: created, an edit of a held file, an edit of a free
/// file (before and after), a shell write of the held file, idle, deleted. Prints what happened.
const OPENCODE_HARNESS: &str = r#"
import { readFileSync } from "node:fs";
const [plugin, dir, held, free] = process.argv.slice(2);
const mod = await import(plugin);
const hooks = await mod.ConductorPlugin({ directory: dir, worktree: dir, project: {}, client: {}, $: null });
const out = { exports: Object.keys(mod) };
const sid = "ses_oc1";
const attempt = async (tool, args, callID) => {
  try { await hooks["tool.execute.before"]({ tool, sessionID: sid, callID }, { args }); return null; }
  catch (e) { return e.message; }
};
const state = () => JSON.parse(readFileSync(process.env.CONDUCTOR_HOME + "/status.json", "utf8"));
await hooks.event({ event: { type: "session.created", properties: { info: { id: sid, directory: dir, title: "t" } } } });
out.registered = state().instances.filter((i) => i.session_id === sid).map((i) => i.agent);
out.held = await attempt("edit", { filePath: held, oldString: "a", newString: "b" }, "call_1");
out.free = await attempt("write", { filePath: free, content: "x" }, "call_2");
const result = { title: "write", output: "Wrote file successfully.", metadata: {} };
await hooks["tool.execute.after"]({ tool: "write", sessionID: sid, callID: "call_2", args: {} }, result);
out.after = result.output;
out.claimed = state().instances.filter((i) => i.session_id === sid).flatMap((i) => i.files_claimed);
out.shell = await attempt("bash", { command: `sed -i s/a/b/ ${held}`, description: "edit" }, "call_3");
await hooks.event({ event: { type: "session.idle", properties: { sessionID: sid } } });
await hooks.event({ event: { type: "session.deleted", properties: { info: { id: sid } } } });
out.left = state().instances.filter((i) => i.session_id === sid).length;
console.log(JSON.stringify(out));
"#;

/// Loads Pi's extension as Pi does (its default export called with the extension API), then
/// drives a session through the handlers it registered. Prints what happened.
const PI_HARNESS: &str = r#"
import { readFileSync } from "node:fs";
const [ext, dir, held, free] = process.argv.slice(2);
const mod = await import(ext);
const handlers = {};
const tools = [];
mod.default({ on: (name, fn) => (handlers[name] ||= []).push(fn), registerTool: (t) => tools.push(t) });
const ctx = { cwd: dir, hasUI: false, sessionManager: { getSessionId: () => "pi-session-1" } };
const emit = async (name, event) => {
  let last;
  for (const fn of handlers[name] || []) last = await fn(event, ctx);
  return last ?? null;
};
const state = () => JSON.parse(readFileSync(process.env.CONDUCTOR_HOME + "/status.json", "utf8"));
const mine = () => state().instances.filter((i) => i.session_id === "pi-session-1");
const out = { events: Object.keys(handlers).sort(), tools: tools.map((t) => t.name) };
out.start = await emit("session_start", { type: "session_start", reason: "startup" });
out.registered = mine().map((i) => i.agent);
out.held = await emit("tool_call", { type: "tool_call", toolCallId: "t1", toolName: "edit", input: { path: held, edits: [] } });
out.free = await emit("tool_call", { type: "tool_call", toolCallId: "t2", toolName: "write", input: { path: free, content: "x" } });
out.after = await emit("tool_result", { type: "tool_result", toolCallId: "t2", toolName: "write", input: {}, content: [{ type: "text", text: "Wrote." }], isError: false });
out.claimed = mine().flatMap((i) => i.files_claimed);
out.shell = await emit("tool_call", { type: "tool_call", toolCallId: "t3", toolName: "bash", input: { command: `rm -f ${held}` } });
if (tools.length) {
  const snap = tools.find((t) => t.name === "workflow_update_snapshot");
  try { out.snapshot = (await snap.execute("t4", { findings: ["found it"] })).content[0].text; }
  catch (e) { out.snapshot_error = e.message; }
}
await emit("session_shutdown", { type: "session_shutdown", reason: "quit" });
out.left = mine().length;
console.log(JSON.stringify(out));
"#;

/// `node`, or a failure that says how to install it.
fn node() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("node"))
            .find(|c| c.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "node is not installed; these tests load the plugins with it: apt-get install nodejs"
        )
    })
}

/// Install `agent`'s plugin in a project where another session holds `src/held.rs`, and run
/// `harness` on the installed file (copied to an .mjs, since node does not load .ts).
fn drive_plugin(
    agent: &str,
    installed: &str,
    harness: &str,
    extra_env: &[(&str, &str)],
) -> (TestEnv, Value) {
    let env = TestEnv::new();
    std::fs::write(env.project.join("src/held.rs"), "a\n").unwrap();
    let other = env.start("Refactor held", "P1");
    env.run(&["claim", "--instance", &other, "src/held.rs"])
        .code(0);
    let before = std::fs::read_dir(&env.project).unwrap().count();
    let out = env.run(&["integrate", agent]);
    out.code(0);
    // Pi's extension is user-level (~/.pi/agent/extensions/, HOME being the test's root).
    let file = if installed.starts_with("~/") {
        env.root.path().join(&installed[2..])
    } else {
        env.project.join(installed)
    };
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(&format!(
            "const CONDUCTOR = {};",
            serde_json::to_string(&std::fs::canonicalize(crate::common::bin()).unwrap()).unwrap()
        )),
        "{text}"
    );
    let work = env.root.path().join("harness");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("plugin.mjs"), &text).unwrap();
    std::fs::write(work.join("harness.mjs"), harness).unwrap();
    let mut c = Command::new(node());
    c.arg(work.join("harness.mjs"))
        .arg(work.join("plugin.mjs"))
        .arg(&env.project)
        .arg(env.abs("src/held.rs"))
        .arg(env.abs("src/free.rs"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .current_dir(&env.project);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let o = c.output().expect("run node");
    assert!(
        o.status.success(),
        "harness failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    // Uninstall leaves the project as it was.
    env.run(&["integrate", agent, "--uninstall"]).code(0);
    assert!(!file.exists());
    assert_eq!(
        std::fs::read_dir(&env.project).unwrap().count(),
        before,
        "{agent}: directories left behind"
    );
    (env, v)
}

#[test]
fn opencode_plugin_refuses_held_files_claims_free_ones_and_releases_at_session_end() {
    let (env, v) = drive_plugin(
        "opencode",
        ".opencode/plugins/conductor.js",
        OPENCODE_HARNESS,
        &[],
    );
    assert_eq!(v["exports"], json!(["ConductorPlugin"]), "{v}");
    assert_eq!(v["registered"], json!(["opencode"]), "{v}");
    let held = v["held"]
        .as_str()
        .unwrap_or_else(|| panic!("the held edit went through: {v}"));
    assert!(
        held.contains("is claimed by") && held.contains("Refactor held"),
        "{held}"
    );
    assert_eq!(v["free"], Value::Null, "{v}");
    assert!(
        v["after"]
            .as_str()
            .unwrap()
            .contains("now claimed for this session"),
        "{v}"
    );
    assert_eq!(v["claimed"], json!([env.abs("src/free.rs")]), "{v}");
    let shell = v["shell"]
        .as_str()
        .unwrap_or_else(|| panic!("the shell write went through: {v}"));
    assert!(shell.contains("src/held.rs"), "{shell}");
    assert_eq!(v["left"], json!(0), "released at session.deleted: {v}");
}

#[test]
fn pi_extension_blocks_held_files_claims_free_ones_and_releases_at_shutdown() {
    let (env, v) = drive_plugin("pi", "~/.pi/agent/extensions/conductor.ts", PI_HARNESS, &[]);
    assert_eq!(
        v["events"],
        json!([
            "session_shutdown",
            "session_start",
            "tool_call",
            "tool_result"
        ]),
        "{v}"
    );
    assert_eq!(
        v["tools"],
        json!([]),
        "no workflow tools outside a worker: {v}"
    );
    assert_eq!(v["registered"], json!(["pi"]), "{v}");
    assert!(
        v["start"]["systemPromptAppend"]
            .as_str()
            .unwrap_or("")
            .contains("registered as"),
        "{v}"
    );
    assert_eq!(v["held"]["block"], json!(true), "{v}");
    let reason = v["held"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("is claimed by") && reason.contains("Refactor held"),
        "{reason}"
    );
    assert_eq!(v["free"], Value::Null, "{v}");
    let note = v["after"]["content"][1]["text"].as_str().unwrap_or("");
    assert!(note.contains("now claimed for this session"), "{v}");
    assert_eq!(v["claimed"], json!([env.abs("src/free.rs")]), "{v}");
    assert_eq!(v["shell"]["block"], json!(true), "{v}");
    assert_eq!(v["left"], json!(0), "released at session_shutdown: {v}");
}

#[test]
fn pi_extension_in_a_workflow_worker_has_the_workflow_tools() {
    let (_, v) = drive_plugin(
        "pi",
        "~/.pi/agent/extensions/conductor.ts",
        PI_HARNESS,
        &[("CONDUCTOR_WORKFLOW_SESSION", "wfs-nonexistent")],
    );
    assert_eq!(
        v["tools"],
        json!(["workflow_transition", "workflow_update_snapshot"]),
        "{v}"
    );
    // The tool runs the real `conductor workflow snapshot` for the worker's session; this one
    // does not exist, and conductor's error reaches the model as the tool's error.
    let err = v["snapshot_error"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"));
    assert!(err.contains("wfs-nonexistent"), "{err}");
}

/// Runs Pi's installed extension under node with `env`, in `dir`: what its tool_call handler
/// answered for an edit of the held file, and its stderr.
fn pi_tool_call(env: &TestEnv, dir: &Path, extra: &[(&str, &str)]) -> (Value, String) {
    let text =
        std::fs::read_to_string(env.root.path().join(".pi/agent/extensions/conductor.ts")).unwrap();
    let work = env.root.path().join("harness");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("ext.mjs"), &text).unwrap();
    std::fs::write(work.join("h.mjs"), r#"
const [ext, dir, held] = process.argv.slice(2);
const mod = await import(ext);
const handlers = {};
mod.default({ on: (name, fn) => (handlers[name] ||= []).push(fn), registerTool: () => {} });
const ctx = { cwd: dir, hasUI: false, sessionManager: { getSessionId: () => "pi-s" } };
const emit = async (name, event) => { let last; for (const fn of handlers[name] || []) last = await fn(event, ctx); return last ?? null; };
await emit("session_start", { type: "session_start", reason: "startup" });
const out = await emit("tool_call", { type: "tool_call", toolCallId: "t1", toolName: "edit", input: { path: held } });
console.log(JSON.stringify({ answer: out }));
"#).unwrap();
    let mut c = Command::new(node());
    c.arg(work.join("h.mjs"))
        .arg(work.join("ext.mjs"))
        .arg(dir)
        .arg(env.abs("src/held.rs"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .current_dir(dir);
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().expect("run node");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        v["answer"].clone(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Issue 33: Pi 1.x loads a project's `.pi/extensions/` only in a trusted project, so the
/// extension is user-level and acts only in the projects `integrate pi` listed. When conductor
/// cannot run, it lets the call through with a warning on stderr (fail open), or refuses it with
/// the reason (CONDUCTOR_FAIL_CLOSED=1, or a blocking `enforce`).
#[test]
fn pi_extension_acts_only_in_integrated_projects_and_fails_closed_on_request() {
    let env = TestEnv::new();
    std::fs::write(env.project.join("src/held.rs"), "a\n").unwrap();
    let other = env.start("Refactor held", "P1");
    env.run(&["claim", "--instance", &other, "src/held.rs"])
        .code(0);
    let r = env.run(&["integrate", "pi"]);
    r.code(0);
    assert!(r.stdout.contains("Pi loads it here"), "{r:?}");
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    assert!(
        !env.project.join(".pi/extensions").exists(),
        "nothing that needs Pi's project trust"
    );
    let (a, _) = pi_tool_call(&env, &env.project, &[]);
    assert_eq!(a["block"], json!(true), "{a}");
    // Another directory was never integrated: the extension stays out of it.
    let elsewhere = env.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (a, _) = pi_tool_call(&env, &elsewhere, &[]);
    assert_eq!(a, Value::Null, "{a}");
    // conductor cannot run (the binary the extension names is gone): fail open, visibly.
    let ext = env.root.path().join(".pi/agent/extensions/conductor.ts");
    let text = std::fs::read_to_string(&ext).unwrap();
    let moved = env.root.path().join("moved/conductor");
    let line = text
        .lines()
        .find(|l| l.starts_with("const CONDUCTOR = "))
        .unwrap();
    std::fs::write(
        &ext,
        text.replace(
            line,
            &format!("const CONDUCTOR = {:?};", moved.display().to_string()),
        ),
    )
    .unwrap();
    let (a, err) = pi_tool_call(&env, &env.project, &[]);
    assert_eq!(a, Value::Null, "fails open: {a}");
    assert!(
        err.contains("edits are NOT checked"),
        "a visible warning: {err}"
    );
    let (a, err) = pi_tool_call(&env, &env.project, &[("CONDUCTOR_FAIL_CLOSED", "1")]);
    assert_eq!(a["block"], json!(true), "{a}");
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("conductor could not run") && reason.contains("CONDUCTOR_FAIL_CLOSED=1"),
        "{reason}"
    );
    assert!(err.contains("every tool call is refused"), "{err}");
    for mode in ["require-claim", "require-verified"] {
        std::fs::write(
            env.home.join("config.json"),
            format!(r#"{{"enforce": "{mode}"}}"#),
        )
        .unwrap();
        let (a, _) = pi_tool_call(&env, &env.project, &[]);
        assert!(
            a["reason"]
                .as_str()
                .unwrap_or("")
                .contains(&format!(r#"enforce = "{mode}""#)),
            "{a}"
        );
    }
    std::fs::remove_file(env.home.join("config.json")).unwrap();
    // integrate's and doctor's live check name the moved binary.
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout.contains("live check: NOT enforced: binary moved"),
        "{d:?}"
    );
    let r = env.run(&["integrate", "pi"]);
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    // --uninstall takes the project off the list, and the extension with the last one.
    env.run(&["integrate", "pi", "--uninstall"]).code(0);
    assert!(!ext.exists());
}

/// Issue 33: an extension in the project's `.pi/extensions/` (where an earlier conductor put it)
/// is not loaded by Pi 1.x in an untrusted project: doctor says so; `integrate pi` moves it to
/// the user level, and doctor's live check then passes. A trusted project (Pi's trust.json) loads it.
#[test]
fn doctor_says_pi_will_not_load_a_project_extension_in_an_untrusted_project() {
    let env = TestEnv::new();
    let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
    let text = include_str!("../../shell/pi/conductor.ts").replacen(
        "const CONDUCTOR = \"conductor\";",
        &format!("const CONDUCTOR = {:?};", bin.display().to_string()),
        1,
    );
    std::fs::create_dir_all(env.project.join(".pi/extensions")).unwrap();
    std::fs::write(env.project.join(".pi/extensions/conductor.ts"), &text).unwrap();
    // Pi 0.x loads project extensions as they are; Pi 1.x only in a trusted project. The Pi on
    // PATH is the selected set's (CONDUCTOR_AGENTS=newest runs this against Pi 1.6).
    let v1 = !crate::e2e_agents::set_version("pi").starts_with("0.");
    let d = env.run(&["doctor"]);
    if v1 {
        d.code(1);
        assert!(
            d.stdout
                .contains("does NOT load the extension here: untrusted project"),
            "{d:?}"
        );
    } else {
        d.code(0);
        assert!(
            d.stdout.contains("Pi 0.73.1 loads the extension here"),
            "{d:?}"
        );
    }
    // Trusted the way Pi records it: the extension loads, and the live check runs it.
    let agent = env.root.path().join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    let canon = std::fs::canonicalize(&env.project).unwrap();
    std::fs::write(
        agent.join("trust.json"),
        json!({ canon.display().to_string(): true }).to_string(),
    )
    .unwrap();
    let d = env.run(&["doctor"]);
    assert!(d.stdout.contains("loads the extension here"), "{d:?}");
    assert!(d.stdout.contains("live check: enforced"), "{d:?}");
    std::fs::remove_file(agent.join("trust.json")).unwrap();
    let r = env.run(&["integrate", "pi"]);
    r.code(0);
    assert!(
        r.stdout
            .contains("removed (an earlier conductor's project extension"),
        "{r:?}"
    );
    assert!(!env.project.join(".pi/extensions/conductor.ts").exists());
    let d = env.run(&["doctor"]);
    assert!(d.stdout.contains("live check: enforced"), "{d:?}");
    assert!(!d.stdout.contains("untrusted"), "{d:?}");
}

/// Issue 33: `integrate` ends with a live check that runs the very command the settings file
/// names with the agent's payload, in a throwaway home (the user's state is untouched); a
/// moved binary is named.
#[test]
fn integrate_ends_with_a_live_check_of_the_installed_hook_command() {
    for agent in ["claude", "gemini", "qwen", "cursor"] {
        let env = TestEnv::new();
        let r = env.run(&["integrate", agent]);
        r.code(0);
        assert!(r.stdout.contains("live check: enforced"), "{agent}: {r:?}");
        assert!(
            !env.home.join("status.json").exists(),
            "{agent}: the user's home was used"
        );
        let j = env.run(&["--json", "integrate", agent]);
        assert_eq!(
            j.json()["live_check"]["enforced"],
            json!(true),
            "{agent}: {j:?}"
        );
        let d = env.run(&["doctor"]);
        assert!(d.stdout.contains("live check: enforced"), "{agent}: {d:?}");
    }
    // The settings name a binary that is gone.
    let env = TestEnv::new();
    env.run(&["integrate", "claude"]).code(0);
    let settings = env.project.join(".claude/settings.json");
    let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
    let text = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(
        &settings,
        text.replace(&bin.display().to_string(), "/nonexistent/conductor"),
    )
    .unwrap();
    let d = env.run(&["doctor"]);
    assert!(d.stdout.contains("live check: NOT enforced: binary moved: the Claude Code hook runs /nonexistent/conductor"), "{d:?}");
}

/// Issue 33: each session a hook registers names its agent's version, and status shows whether
/// that version's hooks were proven to bite here: enforced after a passing live check,
/// unverified for a version no live check saw (an upgrade), unenforced after a failed one.
#[test]
fn sessions_show_their_agent_version_and_whether_its_hooks_were_proven() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    // A `claude` 3.0.0 on PATH, laid out as npm installs it.
    let npm = env.root.path().join("npm");
    let pkg = npm.join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name": "@anthropic-ai/claude-code", "version": "3.0.0"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("bin/claude.exe"), "#!/bin/sh\necho 3.0.0\n").unwrap();
    std::fs::set_permissions(
        pkg.join("bin/claude.exe"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(npm.join("bin")).unwrap();
    std::os::unix::fs::symlink(pkg.join("bin/claude.exe"), npm.join("bin/claude")).unwrap();
    let path = format!(
        "{}:{}",
        npm.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = env.run_env(&["integrate", "claude"], &[("PATH", &path)]);
    r.code(0);
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");

    // Two sessions start through the hook: one at the checked version, one upgraded.
    let session = |sid: &str, version: &str| crate::require_verified::session(&env, sid, version);
    let checked = session("11111111-aaaa-4bbb-8ccc-000000000001", "3.0.0");
    let upgraded = session("11111111-aaaa-4bbb-8ccc-000000000002", "3.1.0");
    assert_eq!(env.instance(&checked).unwrap()["agent_version"], "3.0.0");
    let status = env.run(&["--json", "status"]).json();
    assert_eq!(
        status["enforcement"][&checked]["state"], "enforced",
        "{status}"
    );
    assert_eq!(
        status["enforcement"][&upgraded]["state"], "unverified",
        "{status}"
    );
    let text = env.run(&["status"]).stdout;
    assert!(text.contains("claude 3.0.0 · enforced"), "{text}");
    assert!(
        text.contains("claude 3.1.0 · unverified") && text.contains("conductor integrate claude"),
        "{text}"
    );
    let top = env.run(&["top", "--once"]).stdout;
    assert!(
        top.contains("claude 3.0.0 - enforced") || top.contains("claude 3.0.0 · enforced"),
        "{top}"
    );

    // A `conductor` on PATH that lets everything through: the hooks name it, the live check
    // fails, and the session shows as unenforced with the reason.
    let stub = env.root.path().join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(
        stub.join("conductor"),
        "#!/bin/sh\ncat >/dev/null\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(
        stub.join("conductor"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let broken = format!("{}:{path}", stub.display());
    let r = env.run_env(&["integrate", "claude"], &[("PATH", &broken)]);
    assert!(r.stdout.contains("live check: NOT enforced"), "{r:?}");
    let status = env.run(&["--json", "status"]).json();
    assert_eq!(
        status["enforcement"][&checked]["state"], "unenforced",
        "{status}"
    );
    assert!(
        status["enforcement"][&checked]["detail"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{status}"
    );
    assert!(
        env.run(&["status"])
            .stdout
            .contains("claude 3.0.0 · UNENFORCED: ")
    );
}

/// Qwen Code runs a project's hooks only in a trusted folder once folder trust is turned on
/// (`security.folderTrust.enabled` in ~/.qwen/settings.json): `integrate qwen` and `doctor` then
/// say the project is untrusted, and enforced once ~/.qwen/trustedFolders.json trusts it.
#[test]
fn qwen_code_with_folder_trust_on_an_untrusted_project_is_not_enforced() {
    let env = TestEnv::new();
    let qwen = env.root.path().join(".qwen");
    std::fs::create_dir_all(&qwen).unwrap();
    std::fs::write(
        qwen.join("settings.json"),
        r#"{"security": {"folderTrust": {"enabled": true}}}"#,
    )
    .unwrap();
    let r = env.run(&["integrate", "qwen"]);
    r.code(0);
    assert!(
        r.stdout.contains(&format!(
            "live check: NOT enforced: untrusted project: folder trust is on (~/.qwen/settings.json) and {} is not a trusted folder",
            env.project.display()
        )),
        "{r:?}"
    );
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout.contains("Qwen Code skips this project's hooks"),
        "{d:?}"
    );
    std::fs::write(
        qwen.join("trustedFolders.json"),
        json!({ env.project.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    let r = env.run(&["integrate", "qwen"]);
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    let d = env.run(&["doctor"]);
    assert!(!d.stdout.contains("Qwen Code skips"), "{d:?}");
    assert!(d.stdout.contains("live check: enforced"), "{d:?}");
}

/// GitHub Copilot CLI loads `.github/hooks/*.json` only in a folder trusted for good
/// (`trustedFolders` in ~/.copilot/config.json): `integrate copilot` writes conductor's own hooks
/// file and its live check says the project is untrusted until it is; `doctor` says the same. A
/// hooks file of someone else's is never overwritten, and uninstall leaves nothing behind.
#[test]
fn copilot_cli_hooks_file_trust_and_uninstall() {
    let env = TestEnv::new();
    let before = std::fs::read_dir(&env.project).unwrap().count();
    let r = env.run(&["integrate", "copilot"]);
    r.code(0);
    let file = env.project.join(".github/hooks/conductor.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        json!(format!("{} hook copilot", bin.display()))
    );
    assert!(
        r.stdout.contains(&format!(
            "live check: NOT enforced: untrusted project: {} is not a trusted folder",
            env.project.display()
        )),
        "{r:?}"
    );
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout
            .contains("Copilot CLI skips this repository's hooks"),
        "{d:?}"
    );
    let copilot = env.root.path().join(".copilot");
    std::fs::create_dir_all(&copilot).unwrap();
    std::fs::write(
        copilot.join("config.json"),
        format!(
            "// This file is managed automatically.\n{}\n",
            json!({"trustedFolders": [env.project.display().to_string()]})
        ),
    )
    .unwrap();
    let r = env.run(&["integrate", "copilot"]);
    r.code(0);
    assert!(r.stdout.starts_with("Nothing to change"), "{r:?}");
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    let d = env.run(&["doctor"]);
    assert!(!d.stdout.contains("Copilot CLI skips"), "{d:?}");
    env.run(&["integrate", "copilot", "--uninstall"]).code(0);
    assert!(!env.project.join(".github").exists());
    assert_eq!(std::fs::read_dir(&env.project).unwrap().count(), before);
    // Someone else's conductor.json is left alone.
    std::fs::create_dir_all(env.project.join(".github/hooks")).unwrap();
    std::fs::write(&file, r#"{"version": 1, "hooks": {}}"#).unwrap();
    let r = env.run(&["integrate", "copilot"]);
    r.code(2);
    assert!(
        r.stderr
            .contains("exists and was not installed by conductor"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"version": 1, "hooks": {}}"#
    );
}
