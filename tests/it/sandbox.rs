//! The sandbox runner under attack (issue 21, item 1): a job under real bubblewrap tries every
//! escape (remounting its read-only binds, writing /usr, a `--sandbox-ro` path, its docs or its
//! prompt, reading the conductor home, another workspace, another job's secret, root-only host
//! files) and each must fail; run as this user (root here and in CI) and, where the kernel lets
//! an unprivileged user create namespaces, as `nobody` through setpriv.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{Run, TestEnv, bin, missing};

/// Ok when bubblewrap can create namespaces here; otherwise why not.
fn bwrap_works(setpriv: &[String]) -> Result<(), String> {
    let o = Command::new(if setpriv.is_empty() {
        "bwrap"
    } else {
        "setpriv"
    })
    .args(setpriv.iter().skip(1))
    .args(if setpriv.is_empty() {
        vec![]
    } else {
        vec!["bwrap"]
    })
    .args([
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "true",
    ])
    .stdin(Stdio::null())
    .output()
    .map_err(|e| format!("bwrap cannot be run: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "bwrap cannot create namespaces: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Runs conductor as this user or, with `setpriv`, as another.
struct Sb {
    env: TestEnv,
    setpriv: Vec<String>,
    ctrl: PathBuf,
}

impl Sb {
    fn new(as_nobody: bool) -> Sb {
        let env = TestEnv::new();
        let ctrl = env.dir("ctrl");
        let setpriv = if as_nobody {
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ]
            .map(String::from)
            .to_vec()
        } else {
            Vec::new()
        };
        Sb { env, setpriv, ctrl }
    }

    /// Hand the temp root to the user conductor runs as.
    fn give_away(&self) {
        if !self.setpriv.is_empty() {
            let st = Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(self.env.root.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
        use std::io::Write;
        let mut child = self.command(args, env).spawn().unwrap();
        let input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            let mut input = input;
            input.write_all(s.as_bytes()).unwrap();
        }
        to_run(child.wait_with_output().unwrap())
    }

    /// conductor with `args` (as this user or through setpriv), its stdio piped.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = match self.setpriv.split_first() {
            None => Command::new(bin()),
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(bin());
                c
            }
        };
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.env.root.path())
            .env("CONDUCTOR_WATCH_EDITS", "0")
            .env("CONDUCTOR_HOME", &self.env.home)
            .env("NO_COLOR", "1")
            .env("CTRL", &self.ctrl)
            .current_dir(self.env.root.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }
}

fn to_run(o: std::process::Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A child killed (and reaped) if the test fails before it ends.
struct Reaped(Option<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The hostile job. Each attempt prints `tried NAME` first (so a missing tool cannot pass for
/// a refusal), then `ESCAPE NAME` if it worked.
fn probe_script(home: &Path, ro: &Path, other_ws: &Path) -> String {
    format!(
        r#"#!/bin/sh
o="$CONDUCTOR_QUEUE_OUTPUT"; mkdir -p "$o"; r="$o/report.txt"
# The host says go once the other job's marker exists (and that job stays alive meanwhile).
i=0; while [ ! -e "$CONDUCTOR_QUEUE_WORKSPACE/shared/go" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done
{{
[ -e "$CONDUCTOR_QUEUE_WORKSPACE/shared/go" ] && echo gate-passed
echo "id $(id -u) $(id -g)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status
echo tried remount-ro-path; mount -o remount,bind,rw {ro} && echo ESCAPE remount-ro-path
echo tried write-ro-path; echo pwned >> {ro}/target.txt && echo ESCAPE write-ro-path
echo tried new-file-ro-path; touch {ro}/new && echo ESCAPE new-file-ro-path
echo tried remount-usr; mount -o remount,bind,rw /usr && echo ESCAPE remount-usr
echo tried write-usr; touch {usr} && echo ESCAPE write-usr
echo tried write-etc; touch {etc} && echo ESCAPE write-etc
echo tried nested-userns-remount; unshare -r sh -c 'mount -o remount,bind,rw {ro} && touch {ro}/nested' && echo ESCAPE nested-userns-remount
echo tried write-prompt; echo pwned >> /run/conductor/prompt.md && echo ESCAPE write-prompt
echo tried remount-prompt; mount -o remount,bind,rw /run/conductor/prompt.md && echo ESCAPE remount-prompt
echo tried write-docs; touch "$CONDUCTOR_QUEUE_WORKSPACE/docs/slack/pwned" && echo ESCAPE write-docs
echo tried read-home; ls {home} && echo ESCAPE read-home
echo tried read-queue; cat {home}/queue.json && echo ESCAPE read-queue
echo tried read-other-workspace; cat {other}/shared/marker.txt && echo ESCAPE read-other-workspace
echo tried read-shadow; head -c 1 /etc/shadow && echo ESCAPE read-shadow
echo tried other-secret; cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -q other-secret-5150 && echo ESCAPE other-secret
env | grep -q OTHER_SECRET && echo ESCAPE other-secret-env
[ "$OWN_SECRET" = own-secret-8080 ] && echo own-secret-ok
echo "home $HOME"; echo mine > "$HOME/agent.db" && echo home-writable
case "$HOME" in "$CONDUCTOR_QUEUE_WORKSPACE"*) echo ESCAPE home-in-workspace;; esac
echo data > "$o/made-by-job.txt"
}} > "$r" 2>&1
echo done > "$o/RESULT.md"
"#,
        ro = ro.display(),
        home = home.display(),
        other = other_ws.display(),
        usr = host_target("/usr").display(),
        etc = host_target("/etc").display(),
    )
}

/// The file the probe tries to create in a host directory (unique to this test process).
fn host_target(dir: &str) -> PathBuf {
    Path::new(dir).join(format!("conductor-sandbox-pwned-{}", std::process::id()))
}

/// The other workspace's job: leaves a marker, stays alive (with its secret in its
/// environment) while the probe looks for it: until the host, having seen the probe finish,
/// writes the gate `shared/probe-done` (at most 60 s).
const OTHER: &str = r#"#!/bin/sh
o="$CONDUCTOR_QUEUE_OUTPUT"; mkdir -p "$o"
echo other-marker > "$CONDUCTOR_QUEUE_WORKSPACE/shared/marker.txt"
i=0; while [ ! -e "$CONDUCTOR_QUEUE_WORKSPACE/shared/probe-done" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done
echo done > "$o/RESULT.md"
"#;

fn escapes_fail(as_nobody: bool) {
    let sb = Sb::new(as_nobody);
    if let Err(why) = bwrap_works(&sb.setpriv) {
        let who = if as_nobody {
            "as nobody"
        } else {
            "as this user"
        };
        return missing("bwrap", &format!("{why} ({who})"));
    }
    let ro = sb.env.dir("agent-ro");
    std::fs::write(ro.join("target.txt"), "original\n").unwrap();
    let other_ws = sb.env.home.join("workspaces/w2");
    let agent = ro.join("probe.sh");
    std::fs::write(&agent, probe_script(&sb.env.home, &ro, &other_ws)).unwrap();
    std::fs::write(ro.join("other.sh"), OTHER).unwrap();
    let dispatch = ro.join("agent.sh");
    std::fs::write(
        &dispatch,
        format!(
            "#!/bin/sh\ncase \"$CONDUCTOR_QUEUE_JOB\" in probe) exec sh {ro}/probe.sh;; *) exec sh {ro}/other.sh;; esac\n",
            ro = ro.display()
        ),
    )
    .unwrap();
    for f in ["probe.sh", "other.sh", "agent.sh"] {
        std::fs::set_permissions(ro.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let docs = sb.env.root.path().join(".docpull/slack");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("index.md"), "# slack\n").unwrap();
    std::fs::write(
        sb.env.root.path().join(".docpull/manifest.json"),
        r#"{"version":"1.0","api_url":"x","collections":{"slack":{"pages":1}}}"#,
    )
    .unwrap();
    sb.give_away();
    let m1 = json!({"workspace": "w1", "jobs": [
        {"id": "probe", "prompt": "probe", "docs": ["slack"], "secrets": ["OWN_SECRET"]}]});
    let m2 = json!({"workspace": "w2", "jobs": [
        {"id": "other", "prompt": "other", "secrets": ["OTHER_SECRET"]}]});
    for m in [m1, m2] {
        sb.run(&["queue", "submit", "-"], &[], Some(&m.to_string()))
            .code(0);
    }
    let cmd = format!("sh {}", dispatch.display());
    let prompt = sb.env.home.join("queue-prompts/w1/probe.md");
    let mut run = sb.command(
        &[
            "queue",
            "run",
            "--runner",
            "sandbox",
            "--sandbox-ro",
            ro.to_str().unwrap(),
            "--agent-cmd",
            &cmd,
            // The probe's HOME is inspected below (by default it goes when the job ends).
            "--keep-home",
        ],
        &[
            ("OWN_SECRET", "own-secret-8080"),
            ("OTHER_SECRET", "other-secret-5150"),
        ],
    );
    let mut run = Reaped(Some(run.stdin(Stdio::null()).spawn().unwrap()));
    // The probe looks only once the other job's marker exists, and the other job stays alive
    // (its secret in its environment) until the probe has finished looking.
    let ws = |w: &str, rel: &str| sb.env.home.join("workspaces").join(w).join(rel);
    assert!(
        crate::common::wait_until(60.0, || ws("w2", "shared/marker.txt").is_file()),
        "the other job wrote its marker"
    );
    std::fs::write(ws("w1", "shared/go"), "").unwrap();
    assert!(
        crate::common::wait_until(60.0, || ws("w1", "output/probe/RESULT.md").is_file()),
        "the probe finished"
    );
    assert!(
        !ws("w2", "output/other/RESULT.md").exists(),
        "the other job was alive while the probe looked"
    );
    std::fs::write(ws("w2", "shared/probe-done"), "").unwrap();
    let r = to_run(run.0.take().unwrap().wait_with_output().unwrap());
    // Before any assertion: a broken sandbox must not leave debris on the host.
    let wrote: Vec<&str> = ["/usr", "/etc"]
        .into_iter()
        .filter(|d| std::fs::remove_file(host_target(d)).is_ok())
        .collect();
    r.code(0);
    assert!(wrote.is_empty(), "the job wrote into the host's {wrote:?}");
    assert!(
        r.stderr.contains("warning: --keep-home") && r.stderr.contains("secrets"),
        "--keep-home warns that the HOME may hold secrets: {r:?}"
    );
    let out = sb.env.home.join("workspaces/w1/output/probe");
    let rep = std::fs::read_to_string(out.join("report.txt")).unwrap();
    let tried = rep.lines().filter(|l| l.starts_with("tried ")).count();
    assert!(
        rep.contains("gate-passed"),
        "the probe ran after the gate:\n{rep}"
    );
    assert_eq!(tried, 15, "every attempt ran:\n{rep}");
    assert!(!rep.contains("ESCAPE"), "an escape worked:\n{rep}");
    assert!(rep.contains("own-secret-ok"), "{rep}");
    assert!(
        rep.contains("id 65534 65534"),
        "an unprivileged uid/gid:\n{rep}"
    );
    assert!(rep.contains("CapEff:\t0000000000000000"), "{rep}");
    assert!(rep.contains("CapBnd:\t0000000000000000"), "{rep}");
    assert!(rep.contains("NoNewPrivs:\t1"), "{rep}");
    assert!(
        rep.contains("home /run/conductor/home\nhome-writable"),
        "{rep}"
    );
    // On the host: nothing read-only changed, the HOME is private and outside the workspace.
    assert_eq!(
        std::fs::read_to_string(ro.join("target.txt")).unwrap(),
        "original\n"
    );
    assert!(!ro.join("new").exists() && !ro.join("nested").exists());
    assert!(!std::fs::read_to_string(&prompt).unwrap().contains("pwned"));
    let job_home = sb.env.home.join("queue-homes/w1/probe");
    assert_eq!(
        std::fs::read_to_string(job_home.join("agent.db")).unwrap(),
        "mine\n"
    );
    let m = std::fs::metadata(&job_home).unwrap();
    assert_eq!(m.mode() & 0o777, 0o700);
    let made = std::fs::metadata(out.join("made-by-job.txt")).unwrap();
    assert_eq!(made.mode() & 0o077, 0, "a file the job made is private");
    if as_nobody {
        assert_eq!(made.uid(), 65534);
    }
}

/// Issue 21: as the user the tests run as (root here and in CI).
#[test]
fn issue_21_a_sandboxed_job_cannot_escape() {
    escapes_fail(false);
}

/// Issue 21: as an unprivileged user (`nobody`), where the kernel allows it.
#[test]
fn issue_21_a_sandboxed_job_cannot_escape_as_an_unprivileged_user() {
    if unsafe { libc::geteuid() } != 0 {
        return missing(
            "root",
            "not root: setpriv cannot switch to nobody (the other test runs unprivileged)",
        );
    }
    escapes_fail(true);
}

/// `doctor` says, one line per guarantee, which hold on this machine.
#[test]
fn issue_21_doctor_reports_the_sandbox_guarantees() {
    let env = TestEnv::new();
    let r = env.run(&["--json", "doctor"]);
    let v = r.json();
    let g = v["sandbox"].as_array().unwrap_or_else(|| panic!("{r:?}"));
    if let Err(why) = bwrap_works(&[]) {
        assert_eq!(g[0]["holds"], false, "{r:?}");
        return missing("bwrap", &why);
    }
    let names: Vec<&str> = g.iter().map(|x| x["guarantee"].as_str().unwrap()).collect();
    for n in [
        "no capabilities",
        "no new privileges",
        "unprivileged user",
        "read-only stays read-only",
        "host system not writable",
        "prompt not writable",
        "conductor home hidden",
        "root-only host files hidden",
    ] {
        let x = g
            .iter()
            .find(|x| x["guarantee"] == n)
            .unwrap_or_else(|| panic!("{n}: {names:?}"));
        assert_eq!(x["holds"], true, "{x}");
    }
    let text = env.run(&["doctor"]);
    let lines: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.contains("sandbox:"))
        .collect();
    assert_eq!(lines.len(), g.len(), "{text:?}");
    assert!(
        lines.iter().any(|l| l.contains("unprivileged user")),
        "{lines:?}"
    );
}
