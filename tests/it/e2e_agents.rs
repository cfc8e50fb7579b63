//! Issue 22: the real agent CLIs, end to end. Each test runs one agent's real CLI (the pinned
//! versions `tests/e2e/install.sh` installs) non-interactively in a temp project where `conductor
//! integrate AGENT` was applied, against the scripted model server `tests/e2e/model_server.py`.
//! The agent and the server share a private network namespace (bubblewrap `--unshare-net`): the
//! only network there is loopback. The script makes the model:
//!   1. edit `held.txt`, which another session holds: refused, the refusal reason is in the
//!      tool result the model gets next, and the file stays byte-identical;
//!   2. write `free.txt`: auto-claimed for the agent's session (status shows the claim) and the
//!      model is told so in a later request;
//!   3. run shell writes to `held.txt` (`echo x > held.txt`, `sed -i`): each refused the same way;
//!   4. finish: the session registered at its start, heartbeats (its heartbeat is set ten minutes
//!      back before step 2 and must be fresh again after it) and releases its claims at its end.
//!
//! Steps 2 and 3 wait on gate files (`wait_for`), so the test looks at the home at known points.
//!
//! Two agent sets (tests/e2e/agents.txt): `pinned`, what CI runs, and `newest`, each agent's
//! newest release (Pi 1.6 from `@earendil-works/pi-coding-agent`, on Node 22), selected with
//! CONDUCTOR_AGENTS=newest (`CONDUCTOR_AGENTS=newest ./test --test it e2e_agents::`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::TestEnv;
use conductor::time::Timestamp;

const INSTALL: &str = "run ./test, or tests/e2e/install.sh (npm -g, the agent CLIs of tests/e2e/agents.txt; CONDUCTOR_AGENTS=newest for the newest set)";
/// The model server's port inside each run's private network namespace.
const PORT: u16 = 18080;
/// How long one agent run may take, all steps included.
const RUN_LIMIT: Duration = Duration::from_secs(240);

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The agent set the suite runs: CONDUCTOR_AGENTS (`pinned`, the default, or `newest`).
pub fn agent_set() -> String {
    let set = std::env::var("CONDUCTOR_AGENTS").unwrap_or_default();
    let set = if set.is_empty() { "pinned".into() } else { set };
    assert!(
        set == "pinned" || set == "newest",
        "CONDUCTOR_AGENTS={set}: the sets are pinned and newest"
    );
    set
}

/// The version of `program` in the selected set of tests/e2e/agents.txt.
pub fn set_version(program: &str) -> &'static str {
    let set = agent_set();
    include_str!("../e2e/agents.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() == 3 && w[0] == set && w[2] == program)
        .and_then(|w| w[1].rsplit('@').next())
        .unwrap_or_else(|| panic!("tests/e2e/agents.txt names no {program} in the {set} set"))
}

/// The agent CLI `name` on PATH at exactly `version`, or a failure that says how to install it.
pub fn pinned(name: &str, version: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    });
    let Some(path) = found else {
        panic!("the agent CLI `{name}` is not installed: {INSTALL}");
    };
    let out = Command::new(&path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("`{name} --version` failed ({e}): {INSTALL}"));
    // Pi prints its version on stderr.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(version),
        "`{name} --version` says {text:?}, not {version}: {INSTALL}"
    );
    path
}

fn bwrap() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("bwrap"))
            .find(|c| c.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("bubblewrap is not installed (the agents run without network in it): apt-get install bubblewrap")
    })
}

/// One agent: how to set it up and run it, and its tool calls for the four steps.
struct Agent {
    name: &'static str,
    cli: &'static str,
    version: &'static str,
    /// Tool calls made before the held edit (a Read some agents require before an Edit).
    before: Vec<Value>,
    held_edit: Value,
    free_write: Value,
    shell_write: Value,
    /// Arguments to the CLI.
    args: Vec<String>,
    /// Environment for the CLI.
    env: Vec<(String, String)>,
}

fn call(name: &str, input: Value) -> Value {
    json!({"tool_call": {"name": name, "input": input}})
}

fn agent(name: &str, e: &Run) -> Agent {
    let held = e.env.abs("held.txt");
    let free = e.env.abs("free.txt");
    let base = format!("http://127.0.0.1:{PORT}");
    let prompt = "Do the work.".to_string();
    let home = e.home();
    match name {
        "claude" => Agent {
            name: "claude",
            cli: "claude",
            version: set_version("claude"),
            before: vec![call("Read", json!({"file_path": held}))],
            held_edit: call(
                "Edit",
                json!({"file_path": held, "old_string": "held", "new_string": "changed"}),
            ),
            free_write: call("Write", json!({"file_path": free, "content": "free\n"})),
            shell_write: call(
                "Bash",
                json!({"command": "echo x > held.txt", "description": "write"}),
            ),
            args: vec![
                "-p".into(),
                prompt,
                "--permission-mode".into(),
                "acceptEdits".into(),
                "--allowedTools".into(),
                "Bash,Edit,Write,Read".into(),
            ],
            env: vec![
                ("ANTHROPIC_BASE_URL".into(), base),
                ("ANTHROPIC_API_KEY".into(), "sk-scripted".into()),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
            ],
        },
        "codex" => {
            let codex_home = e.codex_home();
            std::fs::create_dir_all(&codex_home).unwrap();
            // gpt-5.5 is in Codex's own model catalog, so Codex offers it the apply_patch tool.
            std::fs::write(
                codex_home.join("config.toml"),
                format!(
                    "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n\
                     [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{base}/v1\"\n\
                     wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n"
                ),
            )
            .unwrap();
            let patch = |body: &str| format!("*** Begin Patch\n{body}*** End Patch\n");
            Agent {
                name: "codex",
                cli: "codex",
                version: set_version("codex"),
                before: vec![],
                held_edit: call(
                    "apply_patch",
                    json!(patch("*** Update File: held.txt\n@@\n-held\n+changed\n")),
                ),
                free_write: call(
                    "apply_patch",
                    json!(patch("*** Add File: free.txt\n+free\n")),
                ),
                shell_write: call("exec_command", json!({"cmd": "echo x > held.txt"})),
                args: vec![
                    "exec".into(),
                    "--skip-git-repo-check".into(),
                    "--dangerously-bypass-approvals-and-sandbox".into(),
                    prompt,
                ],
                env: vec![
                    ("CODEX_HOME".into(), codex_home.display().to_string()),
                    ("SCRIPTED_API_KEY".into(), "sk-scripted".into()),
                ],
            }
        }
        "gemini" => {
            let dir = home.join(".gemini");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("settings.json"),
                json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "telemetry": {"enabled": false},
                       "privacy": {"usageStatisticsEnabled": false}})
                .to_string(),
            )
            .unwrap();
            // Gemini CLI runs project hooks only in a trusted folder.
            std::fs::write(
                dir.join("trustedFolders.json"),
                json!({ e.env.project.display().to_string(): "TRUST_FOLDER" }).to_string(),
            )
            .unwrap();
            Agent {
                name: "gemini",
                cli: "gemini",
                version: set_version("gemini"),
                before: vec![],
                held_edit: call(
                    "replace",
                    json!({"file_path": held, "old_string": "held", "new_string": "changed",
                           "instruction": "change it"}),
                ),
                free_write: call(
                    "write_file",
                    json!({"file_path": free, "content": "free\n"}),
                ),
                shell_write: call(
                    "run_shell_command",
                    json!({"command": "echo x > held.txt", "description": "write"}),
                ),
                args: vec!["-p".into(), prompt, "--yolo".into()],
                env: vec![
                    ("GEMINI_API_KEY".into(), "scripted".into()),
                    ("GOOGLE_GEMINI_BASE_URL".into(), base),
                ],
            }
        }
        "qwen" => Agent {
            name: "qwen",
            cli: "qwen",
            version: set_version("qwen"),
            // Qwen Code edits only a file read in the session (its hook runs before that check).
            before: vec![call("read_file", json!({"file_path": held}))],
            held_edit: call(
                "edit",
                json!({"file_path": held, "old_string": "held", "new_string": "changed"}),
            ),
            free_write: call(
                "write_file",
                json!({"file_path": free, "content": "free\n"}),
            ),
            shell_write: call(
                "run_shell_command",
                json!({"command": "echo x > held.txt", "description": "write"}),
            ),
            // Headless: the prompt on the command line, every tool allowed (--yolo).
            args: vec![
                "--auth-type".into(),
                "openai".into(),
                "--openai-base-url".into(),
                format!("{base}/v1"),
                "--openai-api-key".into(),
                "sk-scripted".into(),
                "--model".into(),
                "scripted-model".into(),
                "--yolo".into(),
                prompt,
            ],
            env: vec![("QWEN_CODE_SUPPRESS_YOLO_WARNING".into(), "1".into())],
        },
        "copilot" => {
            // Copilot CLI runs a repository's hooks only in a folder trusted for good.
            let dir = home.join(".copilot");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("config.json"),
                json!({"trustedFolders": [e.env.project.display().to_string()]}).to_string(),
            )
            .unwrap();
            Agent {
                name: "copilot",
                cli: "copilot",
                version: set_version("copilot"),
                before: vec![],
                held_edit: call(
                    "edit",
                    json!({"path": held, "old_str": "held", "new_str": "changed"}),
                ),
                free_write: call("create", json!({"path": free, "file_text": "free\n"})),
                shell_write: call(
                    "bash",
                    json!({"command": "echo x > held.txt", "description": "write"}),
                ),
                args: vec!["-p".into(), prompt, "--allow-all-tools".into()],
                // A BYOK provider: no GitHub login, no network but the model server.
                env: vec![
                    ("COPILOT_OFFLINE".into(), "true".into()),
                    ("COPILOT_PROVIDER_BASE_URL".into(), format!("{base}/v1")),
                    ("COPILOT_PROVIDER_API_KEY".into(), "sk-scripted".into()),
                    ("COPILOT_MODEL".into(), "scripted-model".into()),
                    ("COPILOT_AUTO_UPDATE".into(), "false".into()),
                ],
            }
        }
        "opencode" => {
            // OpenCode installs @opencode-ai/plugin into each config directory at its first
            // start (~80 s of npm retries offline): seed them from install.sh's copy.
            let seed = std::env::var_os("CONDUCTOR_E2E_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/conductor-e2e")
                })
                .join(format!("opencode-plugin-{}", set_version("opencode")));
            assert!(
                seed.join("node_modules/@opencode-ai/plugin/package.json")
                    .is_file(),
                "OpenCode's plugin package is not in {}: {INSTALL}",
                seed.display()
            );
            for dir in [
                e.env.project.join(".opencode"),
                home.join(".config/opencode"),
            ] {
                std::fs::create_dir_all(&dir).unwrap();
                for f in ["package.json", "package-lock.json"] {
                    std::fs::copy(seed.join(f), dir.join(f)).unwrap();
                }
                std::os::unix::fs::symlink(seed.join("node_modules"), dir.join("node_modules"))
                    .unwrap();
            }
            std::fs::write(
                e.env.project.join("opencode.json"),
                json!({
                    "$schema": "https://opencode.ai/config.json",
                    "provider": {"scripted": {
                        "npm": "@ai-sdk/openai-compatible", "name": "scripted",
                        "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-scripted"},
                        "models": {"scripted-model": {"name": "scripted"}}}},
                    "model": "scripted/scripted-model",
                    "permission": {"edit": "allow", "bash": "allow"},
                    "autoupdate": false, "share": "disabled"})
                .to_string(),
            )
            .unwrap();
            Agent {
                name: "opencode",
                cli: "opencode",
                version: set_version("opencode"),
                before: vec![call("read", json!({"filePath": held}))],
                held_edit: call(
                    "edit",
                    json!({"filePath": held, "oldString": "held", "newString": "changed"}),
                ),
                free_write: call("write", json!({"filePath": free, "content": "free\n"})),
                shell_write: call(
                    "bash",
                    json!({"command": "echo x > held.txt", "description": "write"}),
                ),
                args: vec!["run".into(), prompt],
                env: vec![],
            }
        }
        "pi" => {
            let dir = home.join(".pi/agent");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("models.json"),
                json!({"providers": {"scripted": {
                    "baseUrl": format!("{base}/v1"), "api": "openai-completions",
                    "apiKey": "sk-scripted",
                    "models": [{"id": "scripted-model", "name": "scripted", "reasoning": false,
                                "input": ["text"], "contextWindow": 100000, "maxTokens": 4000,
                                "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                         "cacheWrite": 0}}]}}})
                .to_string(),
            )
            .unwrap();
            Agent {
                name: "pi",
                cli: "pi",
                version: set_version("pi"),
                before: vec![],
                held_edit: call(
                    "edit",
                    json!({"path": held, "oldText": "held", "newText": "changed"}),
                ),
                free_write: call("write", json!({"path": free, "content": "free\n"})),
                shell_write: call("bash", json!({"command": "echo x > held.txt"})),
                args: vec![
                    "-p".into(),
                    prompt,
                    "--provider".into(),
                    "scripted".into(),
                    "--model".into(),
                    "scripted-model".into(),
                ],
                env: vec![],
            }
        }
        other => panic!("no such agent {other}"),
    }
}

/// One run's world: the conductor home and project (TestEnv), the script, the record, the gates.
struct Run {
    env: TestEnv,
}

impl Run {
    fn home(&self) -> PathBuf {
        self.env.root.path().to_path_buf()
    }
    fn codex_home(&self) -> PathBuf {
        self.home().join(".codex-home")
    }
    fn file(&self, name: &str) -> PathBuf {
        self.env.root.path().join(name)
    }
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.file("record.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
    /// The body of the request that consumed step `i`, as JSON text.
    fn request(&self, i: usize) -> Option<String> {
        self.records()
            .into_iter()
            .find(|r| r["step"] == json!(i))
            .map(|r| r["body"].to_string())
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts the agent `a` (its CLI at `cli`) on the script `steps`, beside the model server, in a
/// private network namespace with only loopback in it.
fn launch(run: &Run, a: &Agent, cli: &Path, steps: Vec<Value>) -> Child {
    let env = &run.env;
    std::fs::write(
        run.file("script.json"),
        json!({ "steps": steps }).to_string(),
    )
    .unwrap();

    // The server and the agent share a network namespace with only loopback in it.
    let driver = "python3 \"$1\" --script \"$2\" --record \"$3\" --port \"$4\" --exit-with-parent > \"$5\" 2>&1 &\n\
                  server=$!\n\
                  n=0; until grep -q '^PORT' \"$5\"; do n=$((n+1)); [ $n -gt 600 ] && exit 97; sleep 0.05; done\n\
                  shift 5\n\"$@\"\ncode=$?\nkill $server\nexit $code";
    let mut cmd = Command::new(bwrap());
    cmd.args([
        "--dev-bind",
        "/",
        "/",
        "--unshare-net",
        "--die-with-parent",
        "--",
    ])
    .args(["sh", "-c", driver, "driver"])
    .arg(repo_file("tests/e2e/model_server.py"))
    .arg(run.file("script.json"))
    .arg(run.file("record.jsonl"))
    .arg(PORT.to_string())
    .arg(run.file("server.log"))
    .arg(&cli)
    .args(&a.args)
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("HOME", run.home())
    .env("CONDUCTOR_WATCH_EDITS", "0")
    .env("CONDUCTOR_HOME", &env.home)
    .env("NO_COLOR", "1")
    .env("TERM", "dumb")
    .current_dir(&env.project)
    .stdin(Stdio::null())
    .stdout(Stdio::from(
        std::fs::File::create(run.file("agent.out")).unwrap(),
    ))
    .stderr(Stdio::from(
        std::fs::File::create(run.file("agent.err")).unwrap(),
    ));
    for (k, v) in &a.env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("start bwrap")
}

/// Runs one agent through the script and checks everything the module doc lists.
fn e2e(name: &str) {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent(name, &run);
    let cli = pinned(a.cli, a.version);
    let held = env.project.join("held.txt");
    std::fs::write(&held, "held\n").unwrap();
    let other = env.start("other-task", "P2");
    env.run(&["claim", "--instance", &other, "held.txt"])
        .code(0);
    env.run_env(
        &["integrate", a.name],
        &[("CODEX_HOME", &run.codex_home().display().to_string())],
    )
    .code(0);

    let gate_free = run.file("gate-free");
    let gate_shell = run.file("gate-shell");
    let h = a.before.len();
    let (f, s, sed, t) = (h + 1, h + 2, h + 3, h + 4);
    let mut steps = a.before.clone();
    steps.push(a.held_edit.clone());
    let mut free_step = a.free_write.clone();
    free_step["wait_for"] = json!(gate_free.display().to_string());
    steps.push(free_step);
    let mut shell_step = a.shell_write.clone();
    shell_step["wait_for"] = json!(gate_shell.display().to_string());
    steps.push(shell_step);
    // A second shell write, in place: `sed -i`.
    let mut sed_step = a.shell_write.clone();
    for key in ["command", "cmd"] {
        if let Some(c) = sed_step["tool_call"]["input"].get_mut(key) {
            *c = json!("sed -i s/held/sed/ held.txt");
        }
    }
    steps.push(sed_step);
    steps.push(json!({"text": "finished"}));
    let mut child = launch(&run, &a, &cli, steps);
    let log = |what: &str| -> String {
        let read = |n: &str| {
            let mut s = String::new();
            if let Ok(mut f) = std::fs::File::open(run.file(n)) {
                f.read_to_string(&mut s).ok();
            }
            let mut cut = s.len().saturating_sub(3000);
            while !s.is_char_boundary(cut) {
                cut += 1;
            }
            s[cut..].to_string()
        };
        format!(
            "{name}: {what}\n--- agent stdout\n{}\n--- agent stderr\n{}\n--- server\n{}\n--- requests: {}",
            read("agent.out"),
            read("agent.err"),
            read("server.log"),
            run.records().len()
        )
    };
    let started = Instant::now();
    let deadline = started + RUN_LIMIT;
    let wait_step = |child: &mut Child, i: usize| -> String {
        loop {
            if let Some(body) = run.request(i) {
                eprintln!("{name}: step {i} requested after {:?}", started.elapsed());
                return body;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{}", log(&format!("exited ({status}) before step {i}")));
            }
            if Instant::now() > deadline {
                kill(child);
                panic!(
                    "{}",
                    log(&format!("no request for step {i} in {RUN_LIMIT:?}"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // (a) the held edit was refused, and the model got the reason.
    let refusal = format!("{} is claimed by {other}", env.abs("held.txt"));
    let body_f = wait_step(&mut child, f);
    let refused_before = body_f.matches(&refusal).count();
    assert!(
        refused_before >= 1,
        "{}",
        log(&format!(
            "the refusal ({refusal}) is not in the tool result: {body_f}"
        ))
    );
    // (d) the session registered at its start.
    let state = env.state();
    let mine: Vec<&Value> = state["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["id"] != json!(other))
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "{}",
        log(&format!("one session registered: {state}"))
    );
    let id = mine[0]["id"].as_str().unwrap().to_string();
    // It names its agent and the version at work (an upgrade is seen), and status says whether
    // that version's hooks were proven to bite here: `integrate` ran the live check (OpenCode's
    // plugin has none, so its session is unverified).
    assert_eq!(
        mine[0]["agent"],
        a.name,
        "{}",
        log("the session names its agent")
    );
    assert_eq!(
        mine[0]["agent_version"],
        a.version,
        "{}",
        log(&format!(
            "the session names its agent's version: {}",
            mine[0]
        ))
    );
    let status = env.run(&["--json", "status"]);
    let expected = if a.name == "opencode" {
        "unverified"
    } else {
        "enforced"
    };
    assert_eq!(
        status.json()["enforcement"][&id]["state"],
        expected,
        "{}",
        log(&format!(
            "status shows the session's enforcement: {}",
            status.stdout
        ))
    );
    let text = env.run(&["status"]).stdout;
    assert!(
        text.contains(&format!("{} {} · {expected}", a.name, a.version)),
        "{}",
        log(&format!(
            "status names the agent, its version and {expected}: {text}"
        ))
    );
    // The model was told at the session's start who else holds which files (where the agent
    // passes SessionStart's context on).
    if matches!(name, "claude" | "copilot" | "qwen") {
        let first = run.request(0).unwrap_or_default();
        assert!(
            first.contains(&other) && first.contains(&id),
            "{}",
            log(&format!(
                "the session's start context reached the model: {first}"
            ))
        );
    }
    // Its heartbeat goes ten minutes back; the next tool call must bring it forward again.
    let back = Timestamp::now().minus_minutes(10);
    env.run_env(
        &["heartbeat", "--instance", &id],
        &[("CONDUCTOR_NOW", &back.to_string())],
    )
    .code(0);
    std::fs::write(&gate_free, "").unwrap();

    // (b) the free file is claimed for the session, and the model is told.
    let body_s = wait_step(&mut child, s);
    let state = env.state();
    assert_eq!(
        state["global_claims"][env.abs("free.txt")],
        json!(id),
        "{}",
        log(&format!("free.txt is claimed by the session: {state}"))
    );
    assert!(
        body_s.contains(&format!("now claimed for this session ({id})")),
        "{}",
        log(&format!("the model is told of the claim: {body_s}"))
    );
    let me = env.instance(&id).expect("the session is live");
    let beat = Timestamp::parse(me["last_heartbeat"].as_str().unwrap()).unwrap();
    assert!(
        beat.seconds_until(Timestamp::now()) < 300 && back < beat,
        "{}",
        log(&format!(
            "the session heartbeats (set back to {back}): {me}"
        ))
    );
    std::fs::write(&gate_shell, "").unwrap();

    // (c) the shell writes of the held file (`>`, then `sed -i`) were refused, and the model got
    // the reason each time.
    let body_sed = wait_step(&mut child, sed);
    let refused_echo = body_sed.matches(&refusal).count();
    assert!(
        refused_echo > refused_before,
        "{}",
        log(&format!(
            "the `>` write's refusal is not in the tool result: {body_sed}"
        ))
    );
    let body_t = wait_step(&mut child, t);
    assert!(
        body_t.matches(&refusal).count() > refused_echo,
        "{}",
        log(&format!(
            "the `sed -i` write's refusal is not in the tool result: {body_t}"
        ))
    );
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!("{name}: exited after {:?}", started.elapsed());
            assert!(status.success(), "{}", log(&format!("exit {status}")));
            break;
        }
        if Instant::now() > deadline {
            kill(&mut child);
            panic!("{}", log("did not exit after its last answer"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read(&held).unwrap(),
        b"held\n",
        "{}",
        log("held.txt changed")
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("free.txt")).unwrap(),
        "free\n"
    );

    // (d) the session released its claims at its end: gone from status, in history, journaled.
    // A headless Qwen Code run fires no SessionEnd; the watcher its SessionStart left behind
    // ends the session once the process is gone (it looks twice a second).
    if name == "qwen" {
        crate::common::wait_until(5.0, || env.instance(&id).is_none());
    }
    let state = env.state();
    assert!(
        env.instance(&id).is_none(),
        "{}",
        log(&format!("the session ended but is still live: {state}"))
    );
    assert!(
        state["global_claims"][env.abs("free.txt")].is_null(),
        "{state}"
    );
    assert_eq!(state["global_claims"][env.abs("held.txt")], json!(other));
    let history = env.history();
    assert!(
        history.iter().any(|h| h["id"] == json!(id)),
        "{}",
        log(&format!("history has the session: {history:?}"))
    );
    let events = env.run(&["events", "--limit", "1000"]);
    let items = events.json()["items"].clone();
    let kinds: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["actor"] == json!(id))
        .filter_map(|e| e["event_type"].as_str())
        .collect();
    for kind in [
        "instance.started",
        "claim.granted",
        "claim.released",
        "instance.done",
    ] {
        assert!(
            kinds.contains(&kind),
            "{}",
            log(&format!("events of {id}: {kinds:?}"))
        );
    }
}

#[test]
fn claude_code_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("claude");
}

#[test]
fn codex_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("codex");
}

#[test]
fn gemini_cli_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("gemini");
}

#[test]
fn qwen_code_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("qwen");
}

#[test]
fn copilot_cli_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("copilot");
}

#[test]
fn opencode_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("opencode");
}

#[test]
fn pi_is_refused_held_files_claims_free_ones_and_releases_at_its_end() {
    e2e("pi");
}

/// One HTTP/1.1 request to the model server; the whole answer (head and body) as text.
fn http_post(port: u16, path: &str, body: &Value) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let body = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
}

#[test]
fn the_model_server_speaks_each_wire_format_and_records_each_request() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let record = dir.path().join("record.jsonl");
    let edit = json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"});
    let steps: Vec<Value> = (0..4).map(|_| call("Edit", edit.clone())).collect();
    std::fs::write(&script, json!({ "steps": steps }).to_string()).unwrap();
    let mut server = Command::new("python3")
        .arg(repo_file("tests/e2e/model_server.py"))
        .arg("--script")
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the model server");
    let mut first = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = first.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    let tools = json!([{"name": "Edit"}]);
    let a = http_post(
        port,
        "/v1/messages",
        &json!({"stream": true, "tools": tools}),
    );
    let r = http_post(
        port,
        "/v1/responses",
        &json!({"stream": true, "tools": tools}),
    );
    let c = http_post(
        port,
        "/v1/chat/completions",
        &json!({"stream": true, "tools": tools}),
    );
    let g = http_post(
        port,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        &json!({"tools": [{"functionDeclarations": [{"name": "Edit"}]}]}),
    );
    // The steps are used up: the final answer; a request without tools takes no step.
    let done = http_post(port, "/v1/messages", &json!({"tools": tools}));
    let side = http_post(port, "/v1/messages", &json!({"messages": []}));
    kill(&mut server);
    let args = r#"{\"file_path\": \"a.txt\", \"old_string\": \"x\", \"new_string\": \"y\"}"#;
    assert!(
        a.contains("event: content_block_start") && a.contains(r#""name": "Edit""#),
        "{a}"
    );
    assert!(
        a.contains(args) && a.contains(r#""stop_reason": "tool_use""#),
        "{a}"
    );
    assert!(r.contains("event: response.completed") && r.contains(r#""type": "function_call""#));
    assert!(r.contains(args), "{r}");
    assert!(
        c.contains(r#""tool_calls": [{"index": 0"#) && c.contains("data: [DONE]"),
        "{c}"
    );
    assert!(c.contains(args), "{c}");
    assert!(g.contains(r#"data: {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "Edit", "args": {"file_path": "a.txt""#), "{g}");
    assert!(
        done.contains(r#""text": "done""#) && done.contains("end_turn"),
        "{done}"
    );
    assert!(side.contains(r#""text": "ok""#), "{side}");
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let steps: Vec<Value> = lines.iter().map(|l| l["step"].clone()).collect();
    assert_eq!(
        steps,
        vec![
            json!(0),
            json!(1),
            json!(2),
            json!(3),
            json!(4),
            Value::Null
        ]
    );
    assert_eq!(lines[2]["path"], "/v1/chat/completions");
    assert_eq!(lines[2]["body"]["stream"], true);
}

/// Runs the agent on `steps` to its end; the body of the request after the first step (the
/// first tool call's result) as text.
fn run_to_end(run: &Run, a: &Agent, cli: &Path, steps: Vec<Value>) -> String {
    let _ = std::fs::remove_file(run.file("record.jsonl"));
    let mut child = launch(run, a, cli, steps);
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(
                status.success(),
                "{}: exit {status}: {}",
                a.name,
                std::fs::read_to_string(run.file("agent.err")).unwrap_or_default()
            );
            break;
        }
        if Instant::now() > deadline {
            kill(&mut child);
            panic!("{}: did not finish in {RUN_LIMIT:?}", a.name);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    run.request(1).unwrap_or_else(|| {
        panic!(
            "{}: no request after the first step: {}",
            a.name,
            std::fs::read_to_string(run.file("agent.err")).unwrap_or_default()
        )
    })
}

/// Issue 33: Pi 1.x loads a project's `.pi/extensions/` only in a trusted project, and `pi -p`
/// never asks, so an extension there (where an earlier conductor installed it) protects nothing.
/// `doctor` says so before the real Pi shows it; `integrate pi` puts the extension at user level,
/// its live check passes, and the real Pi is refused. With Pi 0.x (the pinned set) the project
/// extension loads, and doctor says that.
#[test]
fn pi_in_an_untrusted_project_is_reported_and_integrate_makes_it_enforced() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("pi", &run);
    let cli = pinned(a.cli, a.version);
    let v1 = !a.version.starts_with("0.");
    let held = env.project.join("held.txt");
    std::fs::write(&held, "held\n").unwrap();
    let other = env.start("other-task", "P2");
    env.run(&["claim", "--instance", &other, "held.txt"])
        .code(0);
    let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
    let ext = include_str!("../../shell/pi/conductor.ts").replacen(
        "const CONDUCTOR = \"conductor\";",
        &format!("const CONDUCTOR = {:?};", bin.display().to_string()),
        1,
    );
    std::fs::create_dir_all(env.project.join(".pi/extensions")).unwrap();
    std::fs::write(env.project.join(".pi/extensions/conductor.ts"), ext).unwrap();
    let refusal = format!("{} is claimed by {other}", env.abs("held.txt"));
    let steps = vec![a.held_edit.clone(), json!({"text": "finished"})];

    let d = env.run(&["doctor"]);
    let body = run_to_end(&run, &a, &cli, steps.clone());
    if v1 {
        d.code(1);
        assert!(
            d.stdout
                .contains("does NOT load the extension here: untrusted project"),
            "{d:?}"
        );
        // What doctor said: the real Pi did not load it, and the held file was edited.
        assert!(!body.contains(&refusal), "{body}");
        assert_eq!(std::fs::read_to_string(&held).unwrap(), "changed\n");
        std::fs::write(&held, "held\n").unwrap();
    } else {
        d.code(0);
        assert!(d.stdout.contains("loads the extension here"), "{d:?}");
        assert!(body.contains(&refusal), "{body}");
    }

    let r = env.run(&["integrate", "pi"]);
    r.code(0);
    assert!(r.stdout.contains("Pi loads it here"), "{r:?}");
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    let body = run_to_end(&run, &a, &cli, steps);
    assert!(body.contains(&refusal), "{body}");
    assert_eq!(std::fs::read_to_string(&held).unwrap(), "held\n");
}

/// Issue 32: Claude Code started in a worktree of its own (`claude -p --worktree NAME`; `-p`
/// skips the workspace trust dialog that an interactive `--worktree` needs). conductor's
/// WorktreeCreate hook makes the worktree with git and prints its path; Claude Code starts the
/// session there with the settings conductor copied into it (the project's integration is not
/// committed, so git alone would not bring it), and the session is registered with that
/// worktree while it runs. Its edit of `held.txt`, which a session in the main checkout holds,
/// is refused, with the holder, its worktree and its branch in the tool result the model gets.
#[test]
fn claude_code_in_its_own_worktree_is_registered_there_and_refused_a_file_held_in_another() {
    use crate::worktrees::git;
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let mut a = agent("claude", &run);
    let cli = pinned(a.cli, a.version);
    let project = env.project.clone();
    std::fs::write(project.join("held.txt"), "held\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "held.txt"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let other = env.start("other-task", "P2");
    let held = env.abs("held.txt");
    env.run(&["claim", "--instance", &other, &held]).code(0);
    env.run(&["integrate", "claude"]).code(0);

    let wt = project.join(".claude/worktrees/feat");
    let wt_held = wt.join("held.txt").display().to_string();
    let gate = run.file("gate-end");
    let mut end = json!({"text": "finished"});
    end["wait_for"] = json!(gate.display().to_string());
    let steps = vec![
        call("Read", json!({"file_path": wt_held})),
        call(
            "Edit",
            json!({"file_path": wt_held, "old_string": "held", "new_string": "changed"}),
        ),
        end,
    ];
    a.args.extend(["--worktree".into(), "feat".into()]);
    let mut child = launch(&run, &a, &cli, steps);
    let log = |what: &str| {
        format!(
            "{what}\n--- agent stdout\n{}\n--- agent stderr\n{}\n--- server\n{}",
            std::fs::read_to_string(run.file("agent.out")).unwrap_or_default(),
            std::fs::read_to_string(run.file("agent.err")).unwrap_or_default(),
            std::fs::read_to_string(run.file("server.log")).unwrap_or_default(),
        )
    };
    let deadline = Instant::now() + RUN_LIMIT;
    // The request after the edit: the model has the edit's result.
    let body = loop {
        if let Some(b) = run.request(2) {
            break b;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{}",
                log(&format!("exited ({status}) before the edit's result"))
            );
        }
        if Instant::now() > deadline {
            kill(&mut child);
            panic!("{}", log("no request after the edit"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        body.contains(&format!("{wt_held} (as {held} in the worktree"))
            && body.contains(&format!("is claimed by {other}")),
        "{}",
        log(&format!(
            "the refusal, with the holder's worktree, is not in the tool result: {body}"
        ))
    );
    // The model was told at the session's start where it works.
    let first = run.request(0).unwrap_or_default();
    assert!(
        first.contains(&format!(
            "This session works in the git worktree {} (branch worktree-feat)",
            wt.display()
        )),
        "{}",
        log(&format!(
            "the session's context names its worktree: {first}"
        ))
    );
    // The worktree is git's, on Claude Code's branch, and the live session is registered there.
    assert!(
        git(&project, &["worktree", "list"]).contains(&format!("{} ", wt.display())),
        "{}",
        log("the worktree is listed by git")
    );
    assert_eq!(
        git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "worktree-feat"
    );
    let state = env.state();
    let mine: Vec<&Value> = state["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["id"] != json!(other))
        .collect();
    assert_eq!(mine.len(), 1, "{}", log(&format!("one session: {state}")));
    assert_eq!(
        mine[0]["working_directory"],
        json!(wt.display().to_string()),
        "{}",
        log(&format!(
            "the session is registered with its worktree: {state}"
        ))
    );
    assert_eq!(mine[0]["agent"], "claude");
    let status = env.run(&["status"]);
    assert!(
        status.stdout.contains(&format!("in {}", wt.display())),
        "{status:?}"
    );
    std::fs::write(&gate, "").unwrap();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(status.success(), "{}", log(&format!("exit {status}")));
            break;
        }
        if Instant::now() > deadline {
            kill(&mut child);
            panic!("{}", log("did not exit after its last answer"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(wt.join("held.txt")).unwrap(),
        "held\n"
    );
    assert_eq!(std::fs::read_to_string(&held).unwrap(), "held\n");
    // `claude -p` leaves its worktree (no WorktreeRemove), and its session ended.
    assert!(wt.join("held.txt").is_file());
    let ended = env.state();
    assert!(
        ended["instances"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"] == json!(other)),
        "{}",
        log(&format!("the session ended: {ended}"))
    );
}

/// Issue 33 §2, edits nobody claimed: a person's session is live in the project (its start
/// launched the watcher), then the real agent `a`, whose hooks do not run, writes `free.txt`.
/// The write is an `edit.unclaimed` event naming that session, shown by `status`.
fn unclaimed_edit_of_an_agent_without_hooks(run: &Run, a: &Agent, cli: &Path) {
    let env = &run.env;
    let on = [("CONDUCTOR_WATCH_EDITS", "1")];
    let r = env.run_env(&["start", "by hand", "--priority", "P1", "--json"], &on);
    r.code(0);
    let person = r.json()["instance_id"].as_str().unwrap().to_string();
    let project = env.project.to_string_lossy().into_owned();
    assert!(
        crate::common::wait_until(20.0, || {
            let v = env.run(&["status", "--json"]).json();
            v["edit_watch"]["directories"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d == project.as_str()))
        }),
        "no watcher: {}",
        env.run(&["status", "--json"]).stdout
    );

    let steps = vec![a.free_write.clone(), json!({"text": "finished"})];
    run_to_end(run, a, cli, steps);
    let free = env.abs("free.txt");
    assert_eq!(std::fs::read_to_string(&free).unwrap(), "free\n");
    let unclaimed = || -> Vec<Value> {
        let r = env.run(&["events", "--types", "edit.unclaimed", "--json"]);
        r.json()["items"].as_array().cloned().unwrap_or_default()
    };
    assert!(
        crate::common::wait_until(20.0, || unclaimed()
            .iter()
            .any(|e| e["payload"]["path"] == free.as_str())),
        "{}'s write of {free} was not recorded: {:?}",
        a.name,
        unclaimed()
    );
    let e = unclaimed()
        .into_iter()
        .find(|e| e["payload"]["path"] == free.as_str())
        .unwrap();
    assert_eq!(e["payload"]["sessions"], json!([person]));
    assert!(
        env.state()["global_claims"].get(&free).is_none(),
        "no hook claimed it"
    );
    let text = env.run(&["status"]).stdout;
    assert!(
        text.contains(&format!(
            "free.txt · 0m ago · claimed by no session; live there: {person}"
        )),
        "{text}"
    );
    env.run(&["done", "--instance", &person]).code(0);
}

/// The real Pi without its hooks: no extension with Pi 0.x; with Pi 1.x, conductor's extension
/// in the `.pi/extensions/` of an untrusted project, which Pi does not load.
#[test]
fn pi_without_its_hooks_edits_are_recorded_as_unclaimed() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("pi", &run);
    let cli = pinned(a.cli, a.version);
    if !a.version.starts_with("0.") {
        let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
        let ext = include_str!("../../shell/pi/conductor.ts").replacen(
            "const CONDUCTOR = \"conductor\";",
            &format!("const CONDUCTOR = {:?};", bin.display().to_string()),
            1,
        );
        std::fs::create_dir_all(env.project.join(".pi/extensions")).unwrap();
        std::fs::write(env.project.join(".pi/extensions/conductor.ts"), ext).unwrap();
    }
    unclaimed_edit_of_an_agent_without_hooks(&run, &a, &cli);
}

/// The real Codex with an untrusted hook, broken on purpose: `integrate codex` records each
/// hook's trust in `$CODEX_HOME/config.toml`; with those `trusted_hash` lines gone, Codex skips
/// every hook silently, its apply_patch writes unchecked, and `doctor` says so.
#[test]
fn codex_with_untrusted_hooks_edits_are_recorded_as_unclaimed() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("codex", &run);
    let cli = pinned(a.cli, a.version);
    let codex_home = [("CODEX_HOME", run.codex_home().display().to_string())];
    let codex_home: Vec<(&str, &str)> = codex_home.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.run_env(&["integrate", "codex"], &codex_home).code(0);
    let config = run.codex_home().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("trusted_hash"), "{text}");
    let untrusted: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("trusted_hash"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, untrusted).unwrap();
    let d = env.run_env(&["doctor"], &codex_home);
    assert!(d.stdout.contains("Codex skips"), "{d:?}");
    unclaimed_edit_of_an_agent_without_hooks(&run, &a, &cli);
}

/// The real Copilot CLI in a folder it does not trust, broken on purpose: `copilot -p` never asks,
/// so it runs no repository hook, and its write is unchecked. `integrate copilot` and `doctor` say
/// so before, and the write is an `edit.unclaimed` event.
#[test]
fn copilot_cli_in_an_untrusted_folder_is_reported_and_its_edits_are_recorded_as_unclaimed() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("copilot", &run);
    let cli = pinned(a.cli, a.version);
    std::fs::remove_file(run.home().join(".copilot/config.json")).unwrap();
    let r = env.run(&["integrate", "copilot"]);
    r.code(0);
    assert!(
        r.stdout
            .contains("live check: NOT enforced: untrusted project"),
        "{r:?}"
    );
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout
            .contains("Copilot CLI skips this repository's hooks"),
        "{d:?}"
    );
    unclaimed_edit_of_an_agent_without_hooks(&run, &a, &cli);
}

/// The real Qwen Code with folder trust turned on and the project not trusted, broken on
/// purpose: Qwen Code runs none of the project's hooks there (and turns `--yolo` off, so a headless
/// run writes nothing either). `integrate qwen` and `doctor` say so before; the real run shows it:
/// no session was registered, and the write was stopped by Qwen Code, not by conductor.
#[test]
fn qwen_code_in_an_untrusted_folder_is_reported_and_runs_no_hook() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("qwen", &run);
    let cli = pinned(a.cli, a.version);
    let dir = run.home().join(".qwen");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        json!({"security": {"folderTrust": {"enabled": true}}}).to_string(),
    )
    .unwrap();
    let r = env.run(&["integrate", "qwen"]);
    r.code(0);
    assert!(
        r.stdout
            .contains("live check: NOT enforced: untrusted project"),
        "{r:?}"
    );
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout.contains("Qwen Code skips this project's hooks"),
        "{d:?}"
    );
    let steps = vec![a.free_write.clone(), json!({"text": "finished"})];
    let body = run_to_end(&run, &a, &cli, steps);
    assert!(
        !body.contains("claimed for this session"),
        "no hook answered: {body}"
    );
    assert!(!env.project.join("free.txt").exists());
    // No SessionStart hook registered a session (no hook wrote the home at all).
    assert!(
        !env.home.join("status.json").exists() || env.state()["instances"] == json!([]),
        "{}",
        env.state()
    );
}

/// The real Copilot CLI loads the user's `~/.copilot/hooks/` in any folder, trusted or not:
/// `integrate copilot --user` is enforced in a folder Copilot CLI does not trust, and its live
/// check says so.
#[test]
fn copilot_cli_integrated_for_the_user_is_enforced_in_an_untrusted_folder() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("copilot", &run);
    let cli = pinned(a.cli, a.version);
    std::fs::remove_file(run.home().join(".copilot/config.json")).unwrap();
    let held = env.project.join("held.txt");
    std::fs::write(&held, "held\n").unwrap();
    let other = env.start("other-task", "P2");
    env.run(&["claim", "--instance", &other, "held.txt"])
        .code(0);
    let r = env.run(&["integrate", "copilot", "--user"]);
    r.code(0);
    assert!(r.stdout.contains("live check: enforced"), "{r:?}");
    assert!(run.home().join(".copilot/hooks/conductor.json").is_file());
    let steps = vec![a.held_edit.clone(), json!({"text": "finished"})];
    let body = run_to_end(&run, &a, &cli, steps);
    let refusal = format!("{} is claimed by {other}", env.abs("held.txt"));
    assert!(body.contains(&refusal), "{body}");
    assert_eq!(std::fs::read_to_string(&held).unwrap(), "held\n");
}

/// When the conductor its hooks name cannot run (the binary moved), the real Copilot CLI denies
/// every tool call the hooks match ("hook errored"): it fails closed on its own, unlike the other
/// agents. `doctor` names the moved binary.
#[test]
fn copilot_cli_denies_every_edit_when_its_hook_cannot_run() {
    let run = Run {
        env: TestEnv::new(),
    };
    let env = &run.env;
    let a = agent("copilot", &run);
    let cli = pinned(a.cli, a.version);
    env.run(&["integrate", "copilot"]).code(0);
    let file = env.project.join(".github/hooks/conductor.json");
    let bin = std::fs::canonicalize(crate::common::bin()).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(&bin.display().to_string(), "/nonexistent/conductor"),
    )
    .unwrap();
    let d = env.run(&["doctor"]);
    assert!(
        d.stdout
            .contains("live check: NOT enforced: binary moved: the Copilot CLI hook runs /nonexistent/conductor"),
        "{d:?}"
    );
    let steps = vec![a.free_write.clone(), json!({"text": "finished"})];
    let body = run_to_end(&run, &a, &cli, steps);
    assert!(
        body.contains("Denied by preToolUse hook") && body.contains("hook errored"),
        "{body}"
    );
    assert!(!env.project.join("free.txt").exists());
}
