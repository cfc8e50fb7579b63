//! Shell and editor integration (issue 5): shell-init wrappers, the prompt segment, completions,
//! the man page, source detection per editor, colour rules and the 80-column status.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// PATH with the binary under test first, as `conductor`.
fn path_with_conductor() -> String {
    format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Run `shell` with `args` (the script last) in the project, with `conductor` on PATH and the
/// test's home, in a clean environment.
fn in_shell(env: &TestEnv, shell: &str, args: &[&str]) -> Run {
    let mut c = Command::new(shell);
    c.args(args)
        .env_clear()
        .env("PATH", path_with_conductor())
        .env("HOME", env.root.path())
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(&env.project);
    env.run_cmd(&mut c)
}

/// Run a bash script in the project with `conductor` on PATH and the test's home.
fn bash(env: &TestEnv, script: &str) -> Run {
    in_shell(env, "bash", &["-c", script])
}

#[test]
fn bash_wrappers_export_and_unset_the_instance_id() {
    let env = TestEnv::new();
    // docs/protocol.md: "Use it from your shell"
    let r = bash(
        &env,
        r#"eval "$(conductor shell-init bash)"
conductor start "Fix auth bug" --priority P1 >/dev/null || exit 9
echo "id=$CONDUCTOR_INSTANCE_ID"
conductor claim src/a.rs src/b.rs >/dev/null
echo "prompt=$(conductor_prompt)"
conductor done >/dev/null
echo "after=${CONDUCTOR_INSTANCE_ID-unset}"
echo "prompt=$(conductor_prompt)""#,
    );
    r.code(0);
    let id = r
        .stdout
        .lines()
        .next()
        .unwrap()
        .strip_prefix("id=")
        .unwrap()
        .to_string();
    assert!(id.starts_with("web-") && id.len() == 10, "{r:?}");
    assert!(
        r.stdout.contains(&format!("prompt=[{id} · 2 claimed]")),
        "{r:?}"
    );
    assert!(r.stdout.contains("after=unset"), "{r:?}");
    assert!(
        r.stdout.trim_end().ends_with("prompt="),
        "no segment without an instance: {r:?}"
    );
    // The shell's pid was recorded, so cleanup can reap the instance once the shell is gone.
    let history = std::fs::read_to_string(env.home_file("history.jsonl")).unwrap();
    assert!(history.contains(&id));
}

#[test]
fn bash_wrapper_keeps_failures_and_other_commands() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home_file("sprint.json"),
        r#"{"sprint_name": "W03", "focus": "P1"}"#,
    )
    .unwrap();
    let r = bash(
        &env,
        r#"eval "$(conductor shell-init bash)"
conductor start "Polish docs" --priority P3; echo "rc=$? id=${CONDUCTOR_INSTANCE_ID-unset}"
conductor status >/dev/null; echo "status=$?""#,
    );
    assert!(r.stdout.contains("BLOCKED by the priority gate"), "{r:?}");
    assert!(r.stdout.contains("rc=4 id=unset"), "{r:?}");
    assert!(r.stdout.contains("status=0"), "{r:?}");
}

/// The generated fish functions, run by real fish: `start` exports the id (and the prompt shows
/// it), a claim acts on it, `done` unsets it and remembers it, and a repeated `done` names the
/// session it already finished instead of ending another.
#[test]
fn fish_wrappers_work_in_fish() {
    let env = TestEnv::new();
    if let Err(e) = Command::new("fish").arg("-c").arg("true").output() {
        return missing("fish", &format!("fish cannot be run: {e}"));
    }
    let script = r#"conductor shell-init fish | source
conductor start "fish task" --priority P1 >/dev/null
echo "id=$CONDUCTOR_INSTANCE_ID"
echo "prompt="(conductor_prompt)
conductor claim src/f.rs >/dev/null; and echo claimed
conductor done >/dev/null
set -q CONDUCTOR_INSTANCE_ID; and echo "after=$CONDUCTOR_INSTANCE_ID"; or echo after=unset
echo "finished=$CONDUCTOR_FINISHED_ID"
conductor done 2>&1 >/dev/null | head -1
echo "again=$status"
"#;
    let r = in_shell(&env, "fish", &["--no-config", "-c", script]);
    r.code(0);
    let line = |key: &str| {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no `{key}` line: {r:?}"))
            .to_string()
    };
    let id = line("id=");
    assert!(id.starts_with("web-") && id.len() == 10, "{r:?}");
    assert!(line("prompt=").contains(&id), "the prompt names it: {r:?}");
    assert!(r.stdout.contains("claimed\n"), "{r:?}");
    assert_eq!(line("after="), "unset", "{r:?}");
    assert_eq!(line("finished="), id, "{r:?}");
    let again = r
        .stdout
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("a repeated done is an error: {r:?}"));
    assert!(again.contains(&id) && again.contains("already"), "{r:?}");
    let h = env.history();
    assert_eq!(h.len(), 1, "one session ended, once: {h:?}");
    assert_eq!(h[0]["id"], id.as_str());
    assert_eq!(
        h[0]["files_modified"],
        serde_json::json!([env.abs("src/f.rs")]),
        "{h:?}"
    );
}

#[test]
fn zsh_wrappers_work_in_zsh() {
    let env = TestEnv::new();
    if let Err(e) = Command::new("zsh").arg("-c").arg("true").output() {
        return missing("zsh", &format!("zsh cannot be run: {e}"));
    }
    let r = in_shell(
        &env,
        "zsh",
        &[
            "-fc",
            r#"eval "$(conductor shell-init zsh)"; conductor start "T" --priority P1 >/dev/null; echo "id=$CONDUCTOR_INSTANCE_ID"; conductor done >/dev/null; echo "after=${CONDUCTOR_INSTANCE_ID-unset}""#,
        ],
    );
    r.code(0);
    assert!(
        r.stdout.contains("id=web-") && r.stdout.contains("after=unset"),
        "{r:?}"
    );
}

#[test]
fn checked_in_shell_scripts_equal_the_command_output() {
    let env = TestEnv::new();
    for (shell, file) in [
        ("bash", "shell/conductor.bash"),
        ("zsh", "shell/conductor.zsh"),
        ("fish", "shell/conductor.fish"),
    ] {
        let r = env.run(&["shell-init", shell]);
        r.code(0);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        if std::env::var_os("CONDUCTOR_WRITE_SHELL").is_some() {
            std::fs::write(&path, &r.stdout).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            checked_in, r.stdout,
            "{file} drifted; regenerate with CONDUCTOR_WRITE_SHELL=1 cargo test shell"
        );
    }
}

#[test]
fn completions_and_man_page_come_from_the_cli() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish"] {
        let r = env.run(&["completions", shell]);
        r.code(0);
        assert!(
            r.stdout.contains("shell-init") && r.stdout.contains("integrate"),
            "{shell}"
        );
    }
    let bash_completion = env.root.path().join("conductor.bash");
    std::fs::write(&bash_completion, env.run(&["completions", "bash"]).stdout).unwrap();
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&bash_completion)
        .status()
        .unwrap();
    assert!(syntax.success());
    let man = env.run(&["man"]);
    man.code(0);
    assert!(man.stdout.contains(".TH conductor") && man.stdout.contains("integrate"));
}

#[test]
fn source_detection_per_editor() {
    let env = TestEnv::new();
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("CURSOR_SESSION", "1"),
                ("VSCODE_GIT_IPC_HANDLE", "/tmp/vscode-git.sock"),
            ],
            "cur",
        ),
        (
            &[
                ("VSCODE_GIT_IPC_HANDLE", "/tmp/vscode-git.sock"),
                ("TERM_PROGRAM", "vscode"),
            ],
            "vsc",
        ),
        (&[("TERM_PROGRAM", "iTerm.app")], "itm"),
        (&[("CLAUDE_COWORK_SESSION", "abc")], "cow"),
        (&[("TERM_PROGRAM", "Apple_Terminal")], "web"),
        (&[], "web"),
    ];
    for (vars, code) in cases {
        let r = env.run_env(&["--json", "start", "T", "--priority", "P1"], vars);
        r.code(0);
        let id = r.json()["instance_id"].as_str().unwrap().to_string();
        assert!(id.starts_with(&format!("{code}-")), "{vars:?} gave {id}");
    }
}

#[test]
fn no_colour_when_piped_or_with_no_color() {
    let env = TestEnv::new();
    let a = env.start("Holder", "P1");
    env.run(&["claim", "--instance", &a, "src/a.rs"]).code(0);
    let b = env.start("Other", "P1");
    let mut c = env.cmd();
    c.env_remove("NO_COLOR")
        .args(["claim", "--instance", &b, "src/a.rs"]);
    let r = env.run_cmd(&mut c);
    r.code(3);
    assert!(
        r.stdout.contains("CONFLICT") && !r.stdout.contains('\x1b'),
        "piped output is never coloured: {r:?}"
    );
}

#[test]
fn status_fits_eighty_columns() {
    let env = TestEnv::new();
    let long = "Refactor the whole authentication subsystem including tokens, sessions, refresh and the admin UI";
    let id = env.start(long, "P1");
    let deep = "src/".to_string() + &"very_long_directory_name/".repeat(5) + "file.rs";
    env.run(&["claim", "--instance", &id, &deep]).code(0);
    let r = env.run(&["status"]);
    r.code(0);
    for line in r.stdout.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn prompt_segment_is_quiet_without_an_instance() {
    let env = TestEnv::new();
    env.run(&["prompt"]).code(0);
    let r = env.run_env(&["prompt"], &[("CONDUCTOR_INSTANCE_ID", "web-000000")]);
    r.code(0);
    assert_eq!(r.stdout, "");
}

/// The first ```sh block after a heading of a guide in docs/.
fn readme_block(doc: &str, heading: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let section = readme
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has {heading}"));
    section
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn readme_shell_section_runs() {
    let env = TestEnv::new();
    let r = bash(
        &env,
        &format!(
            "set -e\n{}",
            readme_block("docs/protocol.md", "## Use it from your shell")
        ),
    );
    r.code(0);
    assert!(
        r.stdout.contains("Registered as web-") && r.stdout.contains(" · 2 claimed]"),
        "{r:?}"
    );
    assert!(r.stdout.contains("Task complete"), "{r:?}");
}

/// Each agent's section of docs/integrations.md: its one command sets the agent up in the project, and
/// `--uninstall` takes it out again.
#[test]
fn readme_agent_sections_run() {
    for (heading, agent, file) in [
        ("### Claude Code", "claude", ".claude/settings.json"),
        ("### Cursor", "cursor", ".cursor/hooks.json"),
        ("### Codex CLI", "codex", ".codex/hooks.json"),
        ("### Gemini CLI", "gemini", ".gemini/settings.json"),
    ] {
        let env = TestEnv::new();
        let block = readme_block("docs/integrations.md", heading);
        assert!(
            block.contains(&format!("conductor integrate {agent}")),
            "{heading}: {block}"
        );
        let r = bash(&env, &format!("set -e\n{block}"));
        r.code(0);
        assert!(r.stdout.contains("added"), "{heading}: {r:?}");
        assert!(env.project.join(file).exists(), "{heading}");
        let r = bash(&env, &format!("conductor integrate {agent} --uninstall"));
        r.code(0);
        let dir = Path::new(file).parent().unwrap();
        assert!(
            !env.project.join(dir).exists(),
            "{heading}: --uninstall removed it all"
        );
    }
}

/// `conductor start ... --worktree NAME` through the wrappers moves the shell into the new
/// worktree and says so; a plain `start` leaves the shell where it is. Real bash, zsh and fish,
/// and a real git repository.
#[test]
fn wrappers_move_the_shell_into_a_new_worktree() {
    let env = TestEnv::new();
    let main = crate::worktrees::repo(&env, "app");
    // Each shell: its flags, how it loads the wrappers, its exit status and its command
    // substitution.
    let cases: [(&str, &[&str], &str, &str, &str); 3] = [
        (
            "bash",
            &["-c"],
            r#"eval "$(conductor shell-init bash)""#,
            "$?",
            "$(git branch --show-current)",
        ),
        (
            "zsh",
            &["-fc"],
            r#"eval "$(conductor shell-init zsh)""#,
            "$?",
            "$(git branch --show-current)",
        ),
        (
            "fish",
            &["--no-config", "-c"],
            "conductor shell-init fish | source",
            "$status",
            "(git branch --show-current)",
        ),
    ];
    for (shell, flags, load, rc, branch) in cases {
        if let Err(e) = Command::new(shell).arg("-c").arg("true").output() {
            missing(shell, &format!("{shell} cannot be run: {e}"));
            continue;
        }
        let script = format!(
            "cd '{main}'\n{load}\n\
             conductor start 'plain {shell}' --priority P1 >/dev/null\n\
             echo \"plain=$PWD\"\n\
             conductor done >/dev/null\n\
             conductor start 'wt {shell}' --priority P1 --worktree feat-{shell}\n\
             echo \"rc={rc}\"\n\
             echo \"pwd=$PWD\"\n\
             echo \"branch=\"{branch}\n",
            main = main.display()
        );
        let mut args: Vec<&str> = flags.to_vec();
        args.push(&script);
        let r = in_shell(&env, shell, &args);
        r.code(0);
        let line = |key: &str| {
            r.stdout
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("{shell}: no `{key}` line: {r:?}"))
                .to_string()
        };
        assert_eq!(line("plain="), main.display().to_string(), "{shell}: {r:?}");
        assert_eq!(line("rc="), "0", "{shell}: {r:?}");
        let wt = main
            .parent()
            .unwrap()
            .join(format!("app.worktrees/feat-{shell}"));
        assert_eq!(line("pwd="), wt.display().to_string(), "{shell}: {r:?}");
        assert_eq!(line("branch="), format!("feat-{shell}"), "{shell}: {r:?}");
        assert!(
            r.stdout.contains(&format!(
                "conductor: this shell is now in the worktree {}\n",
                wt.display()
            )),
            "{shell}: {r:?}"
        );
    }
}
