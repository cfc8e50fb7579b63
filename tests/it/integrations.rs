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

const CODEX_INSTALL: &str = "npm install -g @openai/codex@0.169.0";

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
    let mut recv = |id: u64| -> Value {
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
