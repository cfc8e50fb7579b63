//! One launch of a job: its files (made ahead for the jobs that may start next, then the
//! prompt written), its process, and the reaper that waits for every child of the dispatcher.

use std::collections::BTreeSet;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::exec::{self, Launch, Runner};
use super::{Job, Layout, prompt};

/// A job to launch: marked running in the main loop's view (launched before its start is
/// committed) or by a commit (launched after it).
pub(super) struct ToLaunch {
    pub(super) job: Job,
    pub(super) secrets: Vec<(String, String)>,
    pub(super) scrub: BTreeSet<String>,
    pub(super) prior: Vec<String>,
}

/// Start the thread that reaps every child of the dispatcher (its jobs; the dispatcher starts
/// no other processes) and reports each exit. It sleeps in `waitpid` while children exist and
/// on the returned channel, told after each spawn, while none do. Each exit goes to `out` as
/// `exited(pid, status)`.
pub(super) fn reaper<M: Send + 'static>(
    out: mpsc::Sender<M>,
    exited: fn(u32, std::process::ExitStatus) -> M,
) -> mpsc::Sender<()> {
    use std::os::unix::process::ExitStatusExt;
    let (spawned, told) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        loop {
            let mut raw = 0;
            let pid = unsafe { libc::waitpid(-1, &mut raw, 0) };
            if pid > 0 {
                let status = std::process::ExitStatus::from_raw(raw);
                if out.send(exited(pid as u32, status)).is_err() {
                    return;
                }
                continue;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                // No child yet: wait to be told of one.
                _ => {
                    if told.recv().is_err() {
                        return;
                    }
                    while told.try_recv().is_ok() {}
                }
            }
        }
    });
    spawned
}

/// The path of the RESULT.md a job left, when it is a regular file (not a link).
pub(super) fn result_path(ws_dir: &Path, id: &str) -> Option<String> {
    let p = ws_dir.join("output").join(id).join("RESULT.md");
    std::fs::symlink_metadata(&p)
        .is_ok_and(|m| m.is_file())
        .then(|| p.to_string_lossy().into_owned())
}

/// Make a job's directories, write its prompt file and create its log: everything a launch
/// needs on disk. The main loop does it right before a launch; the committer does it for the
/// jobs its commit started, before handing them to the main loop. The files of jobs that may
/// start next are usually there already (see [`ahead_maker`]).
pub(super) fn prepare(
    layout: &Layout,
    l: &ToLaunch,
    runner: &Runner,
    made: &mut BTreeSet<PathBuf>,
) -> std::io::Result<()> {
    match prepare_once(layout, l, runner, made) {
        // A directory made earlier was removed by someone: make them all again.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !made.is_empty() => {
            made.clear();
            prepare_once(layout, l, runner, made)
        }
        r => r,
    }
}

fn prepare_once(
    layout: &Layout,
    l: &ToLaunch,
    runner: &Runner,
    made: &mut BTreeSet<PathBuf>,
) -> std::io::Result<()> {
    let job = &l.job;
    let ws_dir = layout.workspace(&job.workspace);
    let out = layout.output(&job.workspace, &job.id);
    let log = layout.log(&job.workspace, &job.id);
    let prompt_file = layout.prompt(&job.workspace, &job.id);
    for d in [
        out.as_path(),
        log.parent().expect("log has a parent"),
        prompt_file.parent().expect("prompt has a parent"),
    ] {
        if !made.contains(d) {
            super::private_dir(d).map_err(|e| std::io::Error::other(e.to_string()))?;
            made.insert(d.to_path_buf());
        }
    }
    let root = match runner {
        Runner::Sandbox { .. } => {
            let home = layout.job_home(&job.workspace, &job.id);
            if !made.contains(&home) {
                // Each attempt starts from an empty HOME: one left by an attempt whose
                // dispatcher died (or by `--keep-home`) goes first.
                dispose_job_home(&home);
                super::private_dir(&home).map_err(|e| std::io::Error::other(e.to_string()))?;
                made.insert(home);
            }
            job.workdir.clone()
        }
        _ => ws_dir.to_string_lossy().into_owned(),
    };
    let prior: Vec<prompt::Prior> = l
        .prior
        .iter()
        .map(|d| prompt::Prior {
            id: d.clone(),
            result: layout.read_in_workspace(&job.workspace, &format!("output/{d}/RESULT.md")),
        })
        .collect();
    let text = prompt::augmented(job, &root, &prior);
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&prompt_file)?
        .write_all(text.as_bytes())?;
    exec::create_log(&log)?;
    // A job run again appends to its log: a header line says where this attempt begins.
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
        let header = super::plain::attempt_header(job.state.attempts, runner.name());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)?
            .write_all(header.as_bytes())?;
    }
    Ok(())
}

/// Start the thread that makes a job's directories, prompt file (empty) and log ahead of its
/// launch, for jobs that may start soon: creating files can be the dearest part of a launch
/// (on ext4, a block group full of recently freed inodes makes each new one cost up to 0.2 ms),
/// and this takes it off the path from one job's exit to the next one's start. The launch
/// then writes the prompt into the file that is already there.
pub(super) fn ahead_maker(layout: Layout) -> mpsc::Sender<(String, String)> {
    let (tx, rx) = mpsc::channel::<(String, String)>();
    std::thread::spawn(move || {
        let mut made: BTreeSet<PathBuf> = BTreeSet::new();
        for (ws, id) in rx {
            let out = layout.output(&ws, &id);
            let log = layout.log(&ws, &id);
            let prompt = layout.prompt(&ws, &id);
            let dirs = [
                out.as_path(),
                log.parent().expect("log has a parent"),
                prompt.parent().expect("prompt has a parent"),
            ];
            let ok = dirs.iter().all(|d| {
                made.contains(*d) || (super::private_dir(d).is_ok() && made.insert(d.to_path_buf()))
            });
            if ok {
                let _ = exec::create_log(&prompt);
                let _ = exec::create_log(&log);
            }
        }
    });
    tx
}

/// A started job: its process, its log copier, its workspace dir and its worktree.
pub(super) type Launched = (
    std::process::Child,
    Option<std::thread::JoinHandle<()>>,
    PathBuf,
    Option<PathBuf>,
);

/// Start a prepared job's process. Returns the child, the log copier, the workspace dir and
/// the job's worktree (a repository job's, where it runs).
pub(super) fn launch(
    layout: &Layout,
    l: &ToLaunch,
    runner: &Runner,
    agent_cmd: &str,
) -> std::io::Result<Launched> {
    let job = &l.job;
    let ws_dir = layout.workspace(&job.workspace);
    let log = layout.log(&job.workspace, &job.id);
    let prompt_file = layout.prompt(&job.workspace, &job.id);
    let job_home = layout.job_home(&job.workspace, &job.id);
    // A repository job runs in its worktree, which its own process makes (see
    // [`super::worktree::job_main`]): the dispatcher runs no git (its reaper waits for every
    // child).
    let worktree = match &job.repo {
        None => None,
        Some(_) => {
            if matches!(runner, Runner::Sandbox { .. }) {
                return Err(std::io::Error::other(
                    "a job in a repository's worktree runs with the local or a template runner, not in the sandbox",
                ));
            }
            super::worktree::path_of(job)
        }
    };
    let launch = Launch {
        job,
        workspace_dir: &ws_dir,
        prompt_file: &prompt_file,
        job_home: &job_home,
        log: &log,
        secrets: l.secrets.clone(),
        scrub: &l.scrub,
        run_token: exec::run_token(
            job.state.dispatcher.as_deref().unwrap_or(""),
            job,
            job.state.attempts,
        ),
        agent_cmd,
    };
    let (child, copier) = exec::spawn(&launch, runner)?;
    Ok((child, copier, ws_dir, worktree))
}

/// Remove a sandboxed job's private HOME and everything in it. A HOME that cannot be removed
/// is named on stderr: it may hold what the agent saw, secrets included.
pub fn dispose_job_home(home: &Path) {
    match std::fs::remove_dir_all(home) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => eprintln!(
            "warning: could not remove the job's HOME {} ({e}); it may hold secrets the job saw: delete it",
            home.display()
        ),
    }
}
