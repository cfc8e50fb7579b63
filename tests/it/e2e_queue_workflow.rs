//! The queue and the workflows driving the real agent CLIs (issue 22), against the scripted
//! model server (`tests/e2e/model_server.py`): OpenCode runs a queue of dependent jobs (local
//! runner and bubblewrap sandbox), Pi runs a three-state workflow as the default worker, and
//! Claude Code runs the same workflow with the worker command `workflow run --help` documents.
//! The agents are the pinned versions `tests/e2e/install.sh` installs; a missing one fails the
//! test saying so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{TestEnv, bin};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Fail (never skip) when an agent CLI is missing or not the pinned version.
fn need(program: &str, version: &str) {
    let out = Command::new(program).arg("--version").output();
    // Some print their version on stderr (Pi).
    let v = out
        .as_ref()
        .map(|o| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .unwrap_or_default();
    assert!(
        v.contains(version),
        "{program} {version} is needed (found: {:?}): run tests/e2e/install.sh",
        v.trim()
    );
}

/// The scripted model server, killed when dropped.
struct Model {
    child: Child,
    port: u16,
    record: PathBuf,
}

impl Model {
    fn start(dir: &Path, steps: Value) -> Model {
        std::fs::create_dir_all(dir).unwrap();
        let script = dir.join("script.json");
        std::fs::write(&script, json!({ "steps": steps }).to_string()).unwrap();
        let record = dir.join("record.jsonl");
        let mut child = Command::new("python3")
            .arg(repo("tests/e2e/model_server.py"))
            .arg("--script")
            .arg(&script)
            .arg("--record")
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is needed for tests/e2e/model_server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("model server said {line:?}"));
        Model {
            child,
            port,
            record,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The generation requests the agents made, in order (the ones that consumed a step).
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| !r["step"].is_null())
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// PATH with this conductor first (the agents' hooks and the workers call `conductor`).
fn path_with_conductor() -> String {
    format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(files_under(&p)),
            Ok(t) if t.is_file() => out.push((p.clone(), std::fs::read(&p).unwrap_or_default())),
            _ => {}
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// (a) The queue with real OpenCode.

const SECRET: &str = "e2e-secret-7f3a9c51d2";

/// Two dependent jobs (the first with a secret) and a job naming an agent OpenCode does not
/// know, run by `opencode run` with `runner`; checks what each job (and the model) saw.
fn queue_with_opencode(runner: &str) {
    need("opencode", crate::e2e_agents::set_version("opencode"));
    let env = TestEnv::new();
    let work = env.root.path().join("model");
    // first: prints its secret (the model sees it; the log gets the name), then finishes.
    // second: the same command, without the secret.
    let say = |text: &str| {
        json!({"tool_call": {"name": "bash", "input": {
            "command": format!("echo \"token:$E2E_TOKEN\" && echo {text} > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\""),
            "description": "say"}}})
    };
    let model = Model::start(
        &work,
        json!([say("first-done"), {"text": "first finished"}, say("second-done"), {"text": "second finished"}]),
    );
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
            "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "x"},
            "models": {"scripted": {"name": "Scripted", "cost": {"input": 3, "output": 15}}}}},
        "model": "local/scripted", "autoupdate": false, "share": "disabled"
    })
    .to_string();
    let manifest = json!({"workspace": "e2e-oc", "jobs": [
        {"id": "first", "prompt": "Write the first part.", "secrets": ["E2E_TOKEN"], "depends_on": []},
        {"id": "second", "prompt": "Write the second part.", "depends_on": ["first"]},
        {"id": "typo", "prompt": "Never runs.", "agent": "biuld", "depends_on": []},
    ]});
    env.run_stdin(&["queue", "submit", "-"], &manifest.to_string())
        .code(0);
    let mut args = vec!["queue", "run", "--runner", runner];
    if runner == "sandbox" {
        // OpenCode's JSON events carry its usage; the default command prints text.
        args.extend([
            "--pass-env",
            "OPENCODE_CONFIG_CONTENT",
            "--agent-cmd",
            "opencode run --format json --agent {agent} [--model {model}]",
        ]);
    }
    let path = path_with_conductor();
    let r = env.run_env(
        &args,
        &[
            ("E2E_TOKEN", SECRET),
            ("OPENCODE_CONFIG_CONTENT", &config),
            ("PATH", &path),
        ],
    );
    let show = |id: &str| {
        let r = env.run(&["--json", "queue", "show", id]);
        r.code(0);
        r.json()
    };
    let (first, second, typo) = (show("first"), show("second"), show("typo"));
    let state = |j: &Value| {
        j["job"]["state"]["state"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(state(&first), "completed", "{runner}: {first}\n{r:?}");
    assert_eq!(state(&second), "completed", "{runner}: {second}\n{r:?}");
    // The unknown agent is refused before it runs, naming it (OpenCode would fall back to build).
    assert_eq!(state(&typo), "failed", "{runner}: {typo}\n{r:?}");
    let why = typo["job"]["state"]["reason"].as_str().unwrap_or("");
    assert!(
        why.contains("unknown agent `biuld`") && why.contains("build"),
        "{runner}: {why}"
    );
    // Usage: two model responses of 15 tokens at $0.000105 per job, from OpenCode's events.
    for j in [&first, &second] {
        let st = &j["job"]["state"];
        if runner == "sandbox" {
            assert_eq!(st["tokens"], 30, "{j}");
            assert!(
                (st["cost_usd"].as_f64().unwrap() - 0.00021).abs() < 1e-9,
                "{j}"
            );
        } else {
            assert!(st["tokens"].is_null(), "text output carries no usage: {j}");
        }
    }
    // The model saw the secret in the first job's tool result only.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 4, "{runner}: {reqs:#?}");
    let body = |i: usize| reqs[i]["body"].to_string();
    assert!(
        body(1).contains(&format!("token:{SECRET}")),
        "{runner}: {}",
        body(1)
    );
    assert!(
        body(3).contains("token:") && !body(3).contains(SECRET),
        "{runner}"
    );
    // The second job's prompt holds the first one's result (prior work), never the secret.
    assert!(body(2).contains("first-done"), "{runner}: {}", body(2));
    // Logs are plain text: the first one names the secret instead of showing it.
    let log = |j: &Value| std::fs::read(j["paths"]["log"].as_str().unwrap()).unwrap();
    let (log1, log2) = (log(&first), log(&second));
    assert!(
        contains(&log1, "token:[secret E2E_TOKEN]"),
        "{}",
        String::from_utf8_lossy(&log1)
    );
    assert!(
        !contains(&log1, "\x1b[") && !contains(&log2, "\x1b["),
        "ANSI escapes in a log"
    );
    assert!(
        contains(&log2, "token:"),
        "{}",
        String::from_utf8_lossy(&log2)
    );
    // Nothing of the second job holds the secret: its log, prompt, output, and (sandbox) HOME.
    let ws = env.home.join("workspaces/e2e-oc");
    let mut second_files = vec![(PathBuf::from("log"), log2.clone())];
    second_files.push((
        PathBuf::from("prompt"),
        std::fs::read(second["paths"]["prompt"].as_str().unwrap()).unwrap_or_default(),
    ));
    second_files.extend(files_under(&ws.join("output/second")));
    second_files.extend(files_under(&env.home.join("queue-homes/e2e-oc/second")));
    for (p, bytes) in &second_files {
        assert!(
            !contains(bytes, SECRET),
            "{runner}: the secret is in {}",
            p.display()
        );
    }
    // Nor the shared workspace the jobs leave to each other.
    for (p, bytes) in files_under(&ws) {
        assert!(
            !contains(&bytes, SECRET),
            "{runner}: the secret is in {}",
            p.display()
        );
    }
    // Nor anything in conductor's home once the jobs ended: the first job's sandbox HOME, where
    // OpenCode's session database recorded the tool output with the secret, is gone with it.
    if runner == "sandbox" {
        let homes = env.home.join("queue-homes/e2e-oc");
        let left: Vec<_> = std::fs::read_dir(&homes)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "job HOMEs outlived their jobs: {left:?}");
    }
    for (p, bytes) in files_under(&env.home) {
        assert!(
            !contains(&bytes, SECRET),
            "{runner}: the secret outlived its job in {}",
            p.display()
        );
    }
}

#[test]
fn e2e_queue_of_dependent_jobs_run_by_real_opencode() {
    let local = std::thread::spawn(|| queue_with_opencode("local"));
    let sandbox = std::thread::spawn(|| queue_with_opencode("sandbox"));
    let (l, s) = (local.join(), sandbox.join());
    if let Err(e) = l {
        std::panic::resume_unwind(e);
    }
    if let Err(e) = s {
        std::panic::resume_unwind(e);
    }
}

// ---------------------------------------------------------------------------------------------
// (b), (c) A three-state workflow run by real Pi workers, and by Claude Code.

const FINDING: &str = "handover-finding-4c1e";
const PERSONA_LINE: &str = "You are Ada, the planner persona 9b2d.";
const RULE_REASON: &str = "read-only path (ledger.txt)";

/// A project with the template `three` (plan → build → review), the persona `planner` as a Pi
/// agent file, and a damage-control rule making `ledger.txt` read-only.
fn three_state_project(env: &TestEnv) -> String {
    let p = &env.project;
    std::fs::create_dir_all(p.join(".conductor/workflows")).unwrap();
    std::fs::write(
        p.join(".conductor/workflows/three.json"),
        r#"{"name": "Three", "initial": "plan", "states": {
            "plan": {"persona": "planner", "prompt": "Plan the change.", "next": ["build"]},
            "build": {"persona": "Builder", "prompt": "Build it.", "next": ["review"]},
            "review": {"persona": "Reviewer", "prompt": "Review it.", "next": []}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(p.join(".pi/agents")).unwrap();
    std::fs::write(
        p.join(".pi/agents/planner.md"),
        format!("---\nname: Ada\ndescription: plans the work\n---\n{PERSONA_LINE}\n"),
    )
    .unwrap();
    std::fs::write(
        p.join(".pi/damage-control-rules.yaml"),
        "readOnlyPaths:\n  - ledger.txt\n",
    )
    .unwrap();
    std::fs::write(p.join("ledger.txt"), "balance 100\n").unwrap();
    let r = env.run(&["--json", "workflow", "start", "three", "the e2e task"]);
    r.code(0);
    r.json()["session"].as_str().unwrap().to_string()
}

/// The system prompt and the messages of a request (Anthropic Messages or Chat Completions).
fn system_of(req: &Value) -> String {
    let b = &req["body"];
    if !b["system"].is_null() {
        return b["system"].to_string();
    }
    b["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| m.to_string())
        .collect()
}

fn messages_of(req: &Value) -> String {
    req["body"]["messages"].to_string()
}

/// What both workers' runs must show: three states done in order, the handover, the persona,
/// the rule's refusal reaching the model and the file untouched.
fn check_workflow_run(env: &TestEnv, sid: &str, model: &Model, who: &str) {
    let show = env.run(&["--json", "workflow", "show", sid]);
    show.code(0);
    let s = show.json();
    assert_eq!(s["session"]["status"], "done", "{who}: {s}");
    let reqs = model.requests();
    // State 1 (plan): the persona is in the system prompt, not only in the user's prompt.
    assert!(
        system_of(&reqs[0]).contains(PERSONA_LINE),
        "{who}: {}",
        system_of(&reqs[0])
    );
    // The starting prompt is sent once.
    assert_eq!(
        messages_of(&reqs[0]).matches("the e2e task").count(),
        1,
        "{who}: {}",
        messages_of(&reqs[0])
    );
    // State 2 (build) starts with the snapshot of state 1 in its prompt.
    let build_first = reqs
        .iter()
        .find(|r| messages_of(r).contains("state `build`"))
        .unwrap_or_else(|| panic!("{who}: no request of the build state"));
    assert!(messages_of(build_first).contains(FINDING), "{who}");
    // The rule's refusal reached the model, and the file is untouched.
    assert!(
        reqs.iter().any(|r| messages_of(r).contains(RULE_REASON)),
        "{who}: the refusal never reached the model"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("ledger.txt")).unwrap(),
        "balance 100\n",
        "{who}"
    );
}

#[test]
fn e2e_three_state_workflow_run_by_real_pi_workers() {
    need("pi", crate::e2e_agents::set_version("pi"));
    let env = TestEnv::new();
    let sid = three_state_project(&env);
    let steps = json!([
        // plan
        {"tool_call": {"name": "workflow_update_snapshot", "input": {"findings": [FINDING]}}},
        {"tool_call": {"name": "workflow_transition", "input": {"target": "build", "summary": "planned"}}},
        {"text": "planned"},
        // build: the rule blocks the write
        {"tool_call": {"name": "write", "input": {"path": "ledger.txt", "content": "balance 0\n"}}},
        {"tool_call": {"name": "workflow_transition", "input": {"target": "review", "summary": "built"}}},
        {"text": "built"},
        // review
        {"tool_call": {"name": "workflow_transition", "input": {"target": "done", "summary": "reviewed"}}},
        {"text": "reviewed"},
    ]);
    let model = Model::start(&env.root.path().join("model"), steps);
    // Pi's provider: the model server, with prices (so that usage has a cost).
    let agent_dir = env.root.path().join(".pi/agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("models.json"),
        json!({"providers": {"local": {"baseUrl": model.url(), "api": "anthropic-messages",
            "apiKey": "x", "models": [{"id": "scripted",
            "cost": {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0}}]}}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.join("settings.json"),
        json!({"defaultProvider": "local", "defaultModel": "scripted"}).to_string(),
    )
    .unwrap();
    let path = path_with_conductor();
    // Without the extension, the default worker is refused, saying what to run.
    let r = env.run_env(&["workflow", "run", &sid], &[("PATH", &path)]);
    r.code(2);
    assert!(r.stderr.contains("conductor integrate pi"), "{r:?}");
    env.run(&["integrate", "pi"]).code(0);
    let r = env.run_env(&["workflow", "run", &sid], &[("PATH", &path)]);
    r.code(0);
    check_workflow_run(&env, &sid, &model, "pi");
    // Pi's JSON events carried the usage: each of the 8 responses is 15 tokens at $0.000105.
    let s = env.run(&["--json", "workflow", "show", &sid]).json();
    let totals = &s["session"]["totals"];
    assert_eq!(totals["tokens"], 120, "{s}");
    let cost = totals["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00084).abs() < 1e-9, "{cost}");
}

#[test]
fn e2e_three_state_workflow_run_by_claude_code_as_documented() {
    need("claude", crate::e2e_agents::set_version("claude"));
    let env = TestEnv::new();
    let sid = three_state_project(&env);
    // The worker command exactly as `workflow run --help` shows it, continuation lines and
    // all, as a person pastes it.
    let help = env.run(&["workflow", "run", "--help"]);
    let cmd = help
        .stdout
        .split("--agent-cmd '")
        .find(|l| l.starts_with("claude -p"))
        .and_then(|l| l.split('\'').next())
        .unwrap_or_else(|| panic!("{}", help.stdout))
        .to_string();
    assert!(
        cmd.contains("\\\n"),
        "the documented command spans lines: {cmd}"
    );
    let bash = |c: &str| json!({"tool_call": {"name": "Bash", "input": {"command": c, "description": "workflow"}}});
    let steps = json!([
        bash(&format!("conductor workflow snapshot --finding {FINDING}")),
        bash("conductor workflow transition build --summary planned"),
        {"text": "planned"},
        // (Claude Code's Write refuses a file it has not read before any hook runs: a shell write.)
        bash("echo 'balance 0' > ledger.txt"),
        bash("conductor workflow transition review --summary built"),
        {"text": "built"},
        bash("conductor workflow transition done --summary reviewed"),
        {"text": "reviewed"},
    ]);
    let model = Model::start(&env.root.path().join("model"), steps);
    env.run(&["integrate", "claude"]).code(0);
    let path = path_with_conductor();
    let url = model.url();
    let r = env.run_env(
        &["workflow", "run", &sid, "--agent-cmd", &cmd],
        &[
            ("PATH", &path),
            ("ANTHROPIC_BASE_URL", &url),
            ("ANTHROPIC_API_KEY", "x"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
    );
    r.code(0);
    check_workflow_run(&env, &sid, &model, "claude");
}

/// The documented way to run an installed agent in the sandbox: an agent installed under the
/// home (an npm package linked from `~/.npm/bin`, run by an interpreter from another directory
/// of the home, as with nvm) runs there as it is, from the dispatcher's PATH; nothing else of the
/// home is visible to the job.
#[test]
fn the_sandbox_runs_an_agent_installed_in_the_home() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let home = env.root.path().join("userhome");
    let pkg = home.join(".npm/lib/node_modules/fake-agent");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::create_dir_all(pkg.join("lib")).unwrap();
    std::fs::create_dir_all(home.join(".npm/bin")).unwrap();
    let interp_dir = home.join(".nvm/versions/v1/bin");
    std::fs::create_dir_all(&interp_dir).unwrap();
    // The interpreter: a real binary living in the home.
    std::fs::copy("/bin/sh", interp_dir.join("fakenode")).unwrap();
    std::fs::write(
        pkg.join("lib/helper.sh"),
        "helper_says() { echo \"helper ok\"; }\n",
    )
    .unwrap();
    let script = pkg.join("bin/agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env fakenode\n\
             . \"$(dirname \"$(readlink -f \"$0\")\")/../lib/helper.sh\"\n\
             mkdir -p \"$CONDUCTOR_QUEUE_OUTPUT\"\n\
             {{ helper_says; echo \"job $1\"; test -e {priv} && echo LEAK; true; }} > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\"\n",
            priv = home.join("private.txt").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(
        "../lib/node_modules/fake-agent/bin/agent.sh",
        home.join(".npm/bin/fake-agent"),
    )
    .unwrap();
    std::fs::write(home.join("private.txt"), "not for jobs").unwrap();
    let manifest =
        json!({"workspace": "ws", "jobs": [{"id": "one", "prompt": "p", "depends_on": []}]});
    env.run_stdin(&["queue", "submit", "-"], &manifest.to_string())
        .code(0);
    let path = format!(
        "{}:{}:{}",
        home.join(".npm/bin").display(),
        interp_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = env.run_env(
        &[
            "queue",
            "run",
            "--runner",
            "sandbox",
            "--agent-cmd",
            "fake-agent {job}",
        ],
        &[("PATH", &path), ("HOME", home.to_str().unwrap())],
    );
    let show = env.run(&["--json", "queue", "show", "one"]).json();
    assert_eq!(show["job"]["state"]["state"], "completed", "{show}\n{r:?}");
    let result =
        std::fs::read_to_string(env.home.join("workspaces/ws/output/one/RESULT.md")).unwrap();
    assert_eq!(
        result, "helper ok\njob one\n",
        "the home's other files stay hidden"
    );
}

/// A job run again appends to its log after a header line; the log is stored without the ANSI
/// escapes the agent printed.
#[test]
fn a_retried_jobs_log_is_plain_and_separates_its_attempts() {
    let env = TestEnv::new();
    let manifest =
        json!({"workspace": "ws", "jobs": [{"id": "one", "prompt": "p", "depends_on": []}]});
    env.run_stdin(&["queue", "submit", "-"], &manifest.to_string())
        .code(0);
    let cmd = r#"printf '\033[1;32mbold\033[0m attempt\n'; test -e {workspace}/ok"#;
    env.run(&["queue", "run", "--agent-cmd", cmd]);
    let show = env.run(&["--json", "queue", "show", "one"]).json();
    assert_eq!(show["job"]["state"]["state"], "failed", "{show}");
    std::fs::write(env.home.join("workspaces/ws/ok"), "").unwrap();
    env.run(&["queue", "retry", "one"]).code(0);
    let show = env.run(&["--json", "queue", "show", "one"]).json();
    assert_eq!(show["job"]["state"]["state"], "completed", "{show}");
    let log = std::fs::read_to_string(show["paths"]["log"].as_str().unwrap()).unwrap();
    assert!(!log.contains('\x1b'), "{log:?}");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4, "{log:?}");
    assert_eq!(lines[0], "bold attempt");
    assert_eq!(lines[1], "");
    assert!(
        lines[2].starts_with("===== conductor: attempt 2 (local runner) at "),
        "{log:?}"
    );
    assert_eq!(lines[3], "bold attempt");
}

/// A worker's printed usage counts while it runs: once it passes the session's budget, the
/// supervisor stops it and the session ends in budget_exceeded (exit 8), with the figures.
#[test]
fn a_running_worker_over_its_budget_is_stopped() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".conductor/workflows")).unwrap();
    std::fs::write(
        env.project.join(".conductor/workflows/capped.json"),
        r#"{"name": "Capped", "initial": "work", "budget": {"max_tokens": 20},
            "states": {"work": {"persona": "Engineer", "next": []}}}"#,
    )
    .unwrap();
    let r = env.run(&["--json", "workflow", "start", "capped", "t"]);
    r.code(0);
    let sid = r.json()["session"].as_str().unwrap().to_string();
    // Pi's JSON events (two responses of 15 tokens), then it would go on for five minutes.
    let cmd = format!(
        "cat {}; exec sleep 300",
        repo("fixtures/usage/pi-0.73.1.jsonl").display()
    );
    let started = std::time::Instant::now();
    let r = env.run(&["workflow", "run", &sid, "--agent-cmd", &cmd]);
    r.code(8);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "the worker was not stopped"
    );
    let s = env.run(&["--json", "workflow", "show", &sid]).json();
    assert_eq!(s["session"]["status"], "budget_exceeded", "{s}");
    assert_eq!(s["session"]["totals"]["tokens"], 30, "{s}");
    let why = s["session"]["halt"].as_str().unwrap_or("");
    assert!(why.contains("30 tokens of its 20-token budget"), "{why}");
}

// ---------------------------------------------------------------------------------------------
// (d) Issue 32 §5: two dependent queue jobs on two branches of one repository, run by real
// OpenCode (local runner): the second job's worktree holds the first job's commit.

#[test]
fn e2e_queue_jobs_on_two_branches_run_by_real_opencode() {
    need("opencode", crate::e2e_agents::set_version("opencode"));
    let env = TestEnv::new();
    let app = crate::worktrees::repo(&env, "app");
    let work = env.root.path().join("model");
    let bash = |command: &str| json!({"tool_call": {"name": "bash", "input": {"command": command, "description": "work"}}});
    // first: commits alpha.txt itself. second: reads it (from its own worktree), and leaves
    // beta.txt uncommitted, which the job's wrapper commits when OpenCode exits 0.
    let model = Model::start(
        &work,
        json!([
            bash("echo alpha-4d1 > alpha.txt && git add alpha.txt && git -c user.email=a@example.com -c user.name=a commit -q -m 'alpha by first' && pwd"),
            {"text": "first finished"},
            bash("cat alpha.txt && echo beta-9e2 > beta.txt && pwd"),
            {"text": "second finished"},
        ]),
    );
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
            "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "x"},
            "models": {"scripted": {"name": "Scripted"}}}},
        "model": "local/scripted", "autoupdate": false, "share": "disabled"
    })
    .to_string();
    let manifest = json!({"workspace": "e2e-wt", "jobs": [
        {"id": "first", "prompt": "Write alpha.", "repo": app, "branch": "feature/first", "base": "main"},
        {"id": "second", "prompt": "Write beta.", "repo": app, "branch": "feature/second",
         "base": "main", "depends_on": ["first"]},
    ]});
    env.run_stdin(&["queue", "submit", "-"], &manifest.to_string())
        .code(0);
    let path = path_with_conductor();
    let r = env.run_env(
        &["queue", "run"],
        &[("OPENCODE_CONFIG_CONTENT", &config), ("PATH", &path)],
    );
    r.code(0);
    let wt = |b: &str| app.with_file_name("app.worktrees").join(b);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 4, "{reqs:#?}\n{r:?}");
    let body = |i: usize| reqs[i]["body"].to_string();
    // Each job's OpenCode ran in its own worktree.
    assert!(
        body(1).contains(&wt("feature-first").display().to_string()),
        "{}",
        body(1)
    );
    assert!(
        body(3).contains(&wt("feature-second").display().to_string()),
        "{}",
        body(3)
    );
    // The second job saw the first job's commit: its `cat alpha.txt` printed it.
    assert!(body(3).contains("alpha-4d1"), "{}", body(3));
    // Its branch holds both jobs' work; the first's does not hold the second's.
    let log = crate::worktrees::git(&app, &["log", "--format=%s", "feature/second"]);
    assert!(log.contains("alpha by first"), "{log}");
    assert!(log.contains("conductor queue: job e2e-wt/second"), "{log}");
    let beta = crate::worktrees::git(&app, &["show", "feature/second:beta.txt"]);
    assert_eq!(beta.trim(), "beta-9e2");
    let first = crate::worktrees::git(&app, &["log", "--format=%s", "feature/first"]);
    assert!(!first.contains("e2e-wt/second"), "{first}");
    // The main checkout is as it was.
    assert_eq!(crate::worktrees::git(&app, &["status", "--porcelain"]), "");
}
