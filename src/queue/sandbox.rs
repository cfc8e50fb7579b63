//! What makes the `sandbox` runner isolate even when conductor runs as root (issue 21): the
//! job runs as an unprivileged uid/gid ([`JOB_UID`]) in a user namespace of its own with every
//! capability dropped and no-new-privileges (bubblewrap sets it for every sandbox), so it cannot
//! remount its read-only binds, write to `/usr`, to `--sandbox-ro` paths or to its prompt.
//! Underneath, its processes still have conductor's own uid on the host: as root, the files of
//! `/etc` that only root may read (`/etc/shadow`, host keys) are hidden from the job.
//!
//! Whether the kernel lets bubblewrap create a user namespace is found out once per process by
//! running it ([`isolation`]); `doctor` runs a real sandbox and reports which guarantees hold
//! ([`guarantees`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The uid and gid a sandboxed job runs as inside its user namespace (`nobody`).
pub const JOB_UID: u32 = 65534;

pub use super::agent_path::SANDBOX_HOME;

/// What this machine allows, found once.
#[derive(Clone, Debug)]
pub struct Isolation {
    /// bubblewrap could create a user namespace with an unprivileged uid.
    pub userns: bool,
    /// Why not, when it could not.
    pub userns_error: Option<String>,
    /// conductor runs as root.
    pub root: bool,
    /// Paths under `/etc` that only root may read, hidden from jobs when running as root
    /// (`true` for a directory).
    pub masks: Vec<(PathBuf, bool)>,
}

/// This machine's [`Isolation`] (probed on first use).
pub fn isolation() -> &'static Isolation {
    static ISO: OnceLock<Isolation> = OnceLock::new();
    ISO.get_or_init(|| {
        let root = unsafe { libc::geteuid() } == 0;
        // A refusal can be passing (a loaded machine running out of some kernel resource for a
        // moment); a job must not lose its user namespace for that, so ask three times.
        let mut probe = probe_userns();
        for _ in 0..2 {
            if probe.0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            probe = probe_userns();
        }
        let (userns, userns_error) = probe;
        let mut masks = Vec::new();
        if root {
            root_only(Path::new("/etc"), 0, &mut masks);
        }
        Isolation {
            userns,
            userns_error,
            root,
            masks,
        }
    })
}

fn probe_userns() -> (bool, Option<String>) {
    let id = JOB_UID.to_string();
    let out = Command::new("bwrap")
        .args([
            "--unshare-user",
            "--uid",
            &id,
            "--gid",
            &id,
            "--cap-drop",
            "ALL",
        ])
        .args(["--ro-bind", "/", "/", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => (true, None),
        Ok(o) => (
            false,
            Some(
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .next()
                    .unwrap_or("bwrap failed")
                    .trim()
                    .to_string(),
            ),
        ),
        Err(e) => (false, Some(format!("bwrap: {e}"))),
    }
}

/// Entries under `dir` that others may not read (never following links; a hidden directory's
/// contents need no entries of their own).
fn root_only(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, bool)>) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        let open = m.permissions().mode() & 0o004 != 0;
        if m.is_dir() {
            if !open || m.permissions().mode() & 0o001 == 0 {
                out.push((e.path(), true));
            } else if depth < 8 {
                root_only(&e.path(), depth + 1, out);
            }
        } else if m.is_file() && !open {
            out.push((e.path(), false));
        }
    }
}

/// bubblewrap's arguments for the isolation this machine allows (before the mounts).
pub fn identity_args(iso: &Isolation) -> Vec<String> {
    let mut a = Vec::new();
    if iso.userns {
        let id = JOB_UID.to_string();
        a.extend([
            "--unshare-user".to_string(),
            "--uid".into(),
            id.clone(),
            "--gid".into(),
            id,
        ]);
    }
    if iso.userns || iso.root {
        a.extend(["--cap-drop".to_string(), "ALL".into()]);
    }
    a
}

/// bubblewrap's arguments hiding root-only files (after `/etc` is bound).
pub fn mask_args(iso: &Isolation) -> Vec<String> {
    let mut a = Vec::new();
    for (p, dir) in &iso.masks {
        let p = p.to_string_lossy().into_owned();
        if *dir {
            a.extend(["--tmpfs".to_string(), p.clone(), "--remount-ro".into(), p]);
        } else {
            a.extend(["--ro-bind".to_string(), "/dev/null".into(), p]);
        }
    }
    a
}

/// One guarantee and whether it holds here.
pub struct Guarantee {
    pub name: &'static str,
    pub holds: bool,
    pub detail: String,
}

/// Run a real sandbox, as a job would be run, with a probe that tries each escape; say which
/// guarantees hold. `home` is the conductor home (it must not be visible inside).
pub fn guarantees(home: &Path) -> Vec<Guarantee> {
    let mut out = Vec::new();
    let iso = isolation();
    let bwrap = Command::new("bwrap")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(v) = bwrap else {
        out.push(Guarantee {
            name: "bubblewrap",
            holds: false,
            detail: "bwrap is not installed: `--runner sandbox` cannot run (install bubblewrap)"
                .into(),
        });
        return out;
    };
    out.push(Guarantee {
        name: "bubblewrap",
        holds: true,
        detail: String::from_utf8_lossy(&v.stdout).trim().to_string(),
    });
    let report = match run_probe(home) {
        Ok(r) => r,
        Err(e) => {
            out.push(Guarantee {
                name: "sandbox",
                holds: false,
                detail: format!("a sandbox could not be started here: {e}"),
            });
            return out;
        }
    };
    let has = |k: &str| report.lines().any(|l| l == k);
    let field = |k: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or("?")
            .trim()
            .to_string()
    };
    let mut g = |name, holds, detail: String| {
        out.push(Guarantee {
            name,
            holds,
            detail,
        })
    };
    let caps = field("CapEff:");
    g(
        "no capabilities",
        caps.trim_start_matches('0').is_empty(),
        format!("the job's effective capabilities: {caps}"),
    );
    g(
        "no new privileges",
        field("NoNewPrivs:") == "1",
        "setuid programs cannot raise the job's privileges".into(),
    );
    let uid = field("uid=");
    g(
        "unprivileged user",
        iso.userns && uid == JOB_UID.to_string(),
        match &iso.userns_error {
            None => format!("the job runs as uid {uid} in a user namespace of its own"),
            Some(e) => format!(
                "the kernel refused a user namespace ({e}); the job runs as uid {uid}{}",
                if iso.root {
                    ", with no capabilities"
                } else {
                    ""
                }
            ),
        },
    );
    g(
        "read-only stays read-only",
        !has("remount-ok") && !has("ro-write-ok"),
        "a read-only bind (--sandbox-ro, docs) can be neither remounted read-write nor written"
            .into(),
    );
    g(
        "host system not writable",
        !has("usr-write-ok") && !has("etc-write-ok"),
        "/usr and /etc are read-only".into(),
    );
    g(
        "prompt not writable",
        !has("prompt-write-ok"),
        "the job cannot change its own prompt".into(),
    );
    g(
        "conductor home hidden",
        !has("home-visible"),
        "the home, other jobs' workspaces, prompts and logs are not mounted".into(),
    );
    g(
        "root-only host files hidden",
        !has("shadow-readable"),
        if iso.root {
            format!(
                "{} root-only entries of /etc are masked (/etc/shadow, host keys)",
                iso.masks.len()
            )
        } else {
            "conductor does not run as root: root-only files stay unreadable".into()
        },
    );
    out
}

/// The probe: a sandbox like a job's, reporting what it could do.
fn run_probe(home: &Path) -> std::io::Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("conductor-sandbox-probe-")
        .tempdir()?;
    let ws = dir.path().join("ws");
    let ro = dir.path().join("ro");
    let job_home = dir.path().join("home");
    for d in [&ws, &ro, &job_home] {
        std::fs::create_dir(d)?;
    }
    let prompt = dir.path().join("prompt.md");
    std::fs::write(&prompt, "probe\n")?;
    let script = format!(
        r#"grep -E '^(CapEff|NoNewPrivs):' /proc/self/status
echo "uid=$(id -u)"
mount -o remount,bind,rw {ro} 2>/dev/null && echo remount-ok
touch {ro}/x 2>/dev/null && echo ro-write-ok
touch /usr/.conductor-probe 2>/dev/null && echo usr-write-ok && rm -f /usr/.conductor-probe
touch /etc/.conductor-probe 2>/dev/null && echo etc-write-ok && rm -f /etc/.conductor-probe
echo x >> {prompt} 2>/dev/null && echo prompt-write-ok
test -e {home} && echo home-visible
head -c1 /etc/shadow >/dev/null 2>&1 && echo shadow-readable
true"#,
        ro = crate::template::shell_quote(&ro.to_string_lossy()),
        prompt = super::SANDBOX_PROMPT,
        home = crate::template::shell_quote(&home.to_string_lossy()),
    );
    let mut c = sandbox_command(
        &ws,
        "/workspace",
        std::slice::from_ref(&ro),
        &prompt,
        &job_home,
        &[],
        &script,
    );
    let o = c.stdin(Stdio::null()).output()?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(std::io::Error::other(
            err.lines().next().unwrap_or("bwrap failed").to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The sandbox's `PATH` (after [`super::agent_path::SANDBOX_BIN`] when the agent needed links).
const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// bubblewrap running `sh -c SCRIPT` in a job's sandbox, with `links` (name, host path) in
/// [`super::agent_path::SANDBOX_BIN`] first on its PATH: `ws` read-write at `root`, `prompt`
/// read-only at [`super::SANDBOX_PROMPT`], `job_home` read-write at
/// [`super::agent_path::SANDBOX_HOME`] (its HOME), as an unprivileged user with no capabilities
/// where the kernel allows (see this module). The environment is set on bwrap itself
/// (never on its command line, which other processes can read): nothing is inherited but
/// PATH and HOME; the caller adds the rest.
pub fn sandbox_command(
    ws: &Path,
    root: &str,
    read_only: &[PathBuf],
    prompt: &Path,
    job_home: &Path,
    links: &[(String, PathBuf)],
    script: &str,
) -> Command {
    let mut c = Command::new(crate::spawn::resolve("bwrap"));
    let mut args = sandbox_args(ws, root, read_only, prompt, job_home);
    // Links to the agent's programs, before the command (bwrap's options end at `--`).
    let at = args.len() - 1;
    let bin = super::agent_path::SANDBOX_BIN;
    let linked = links.iter().flat_map(|(name, target)| {
        [
            "--symlink".to_string(),
            target.to_string_lossy().into_owned(),
            format!("{bin}/{name}"),
        ]
    });
    args.splice(at..at, linked);
    c.args(args);
    c.arg("sh").arg("-c").arg(script);
    c.env_clear();
    if links.is_empty() {
        c.env("PATH", SANDBOX_PATH);
    } else {
        c.env("PATH", format!("{bin}:{SANDBOX_PATH}"));
    }
    c.env("HOME", super::agent_path::SANDBOX_HOME);
    c
}

/// bubblewrap's arguments up to the command.
fn sandbox_args(
    ws: &Path,
    root: &str,
    read_only: &[PathBuf],
    prompt: &Path,
    job_home: &Path,
) -> Vec<String> {
    let iso = isolation();
    let mut a: Vec<String> = [
        "--unshare-all",
        "--share-net",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/etc",
        "/etc",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.splice(0..0, identity_args(iso));
    a.extend(mask_args(iso));
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let p = Path::new(top);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(t) = std::fs::read_link(p) {
                    a.extend([
                        "--symlink".into(),
                        t.to_string_lossy().into_owned(),
                        top.into(),
                    ]);
                }
            }
            Ok(m) if m.is_dir() => a.extend(["--ro-bind".into(), top.into(), top.into()]),
            _ => {}
        }
    }
    for p in read_only {
        let s = p.to_string_lossy().into_owned();
        a.extend(["--ro-bind".into(), s.clone(), s]);
    }
    let ws_s = ws.to_string_lossy().into_owned();
    a.extend(["--bind".into(), ws_s.clone(), root.to_string()]);
    // Only a real directory: a job could have replaced `docs` with a link to any host path.
    if std::fs::symlink_metadata(ws.join("docs")).is_ok_and(|m| m.is_dir()) {
        a.extend([
            "--ro-bind".into(),
            format!("{ws_s}/docs"),
            format!("{root}/docs"),
        ]);
    }
    // Its prompt, read-only, from outside the workspace.
    a.extend([
        "--ro-bind".into(),
        prompt.to_string_lossy().into_owned(),
        super::SANDBOX_PROMPT.into(),
    ]);
    // Its own HOME, private and outside the shared workspace.
    a.extend([
        "--bind".into(),
        job_home.to_string_lossy().into_owned(),
        super::agent_path::SANDBOX_HOME.into(),
    ]);
    a.extend(["--chdir".into(), root.to_string(), "--".into()]);
    a
}
