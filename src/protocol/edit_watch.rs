//! The watcher of edits nobody claimed (issue 33 §2): one process per home, `conductor
//! watch-edits`, which a session's start launches when none runs ([`ensure_running`]) and which
//! ends by itself once no live session of this machine is left.
//!
//! It watches the working directory of every live session on this machine with the platform
//! watcher (`notify`, one inotify watch per directory, added as directories appear), skipping
//! `.git/`, `target/`, `node_modules/`, the conductor home and whatever git ignores (`git
//! check-ignore`). It also watches the home itself, to follow `status.json` (sessions coming
//! and going) without polling. A changed file is looked up twice: in the state read as soon as
//! the change is seen (a hook claims before the edit, and a session that ends right after its
//! edit releases its claims: the first look still sees them), and, after a quiet period
//! ([`QUIET`], at most [`MOST_DELAY`] for a file changing without pause), in the state under the
//! lock when it is recorded ([`super::unclaimed::record`]: a claim made after the edit, as
//! Cursor's afterFileEdit does, counts). Only under an `enforce` mode whose hooks claim or
//! refuse ([`should_claim`]); the mode is read again at each record.
//!
//! Whether it runs, since when, and what it watches is the note in its lock file
//! ([`LOCK_FILE`], [`watching`]); `status` says so, and says when nothing watches.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};
use serde::Serialize;

use super::local::ProcessTable;
use super::ops::is_alive;
use super::unclaimed;
use crate::config::{Config, Enforce};
use crate::error::{Error, IoContext, Result};
use crate::schema::Schema;
use crate::store::Store;
use crate::time::Timestamp;

/// The watcher's lock file in the home: held exclusively while it runs, its note saying what it
/// watches.
pub const LOCK_FILE: &str = "edit-watch.lock";

/// How long a changed file must stay unchanged before it is judged.
pub const QUIET: Duration = Duration::from_millis(300);
/// The longest a change waits to be judged, however often the file changes.
pub const MOST_DELAY: Duration = Duration::from_secs(2);
/// How often the sessions' liveness is looked at again without any change (a session whose
/// process died without ending it).
pub const REFRESH: Duration = Duration::from_secs(30);
/// The least time between two looks at the sessions prompted by `status.json` changing: a
/// burst of claims (every commit replaces the file) is looked at once, not once per claim; the
/// first change after a quiet spell is looked at at once.
pub const SESSIONS_GAP: Duration = Duration::from_millis(250);
/// Directory names never watched, wherever they are.
pub const SKIPPED: &[&str] = &[".git", "target", "node_modules"];
/// The most directories watched at once.
pub const MOST_DIRECTORIES: usize = 20_000;

/// The environment variable that turns the watcher's automatic start off (`0`, `off`, `false`).
pub const ENV: &str = "CONDUCTOR_WATCH_EDITS";

/// True under the `enforce` modes whose hooks claim a free file or refuse its edit: there, an
/// edit nobody claimed means some agent's hooks did not run.
pub fn should_claim(e: Enforce) -> bool {
    match e {
        Enforce::AutoClaim
        | Enforce::RequireClaim
        | Enforce::BlockOverlap
        | Enforce::RequireVerified => true,
        Enforce::BlockForeign | Enforce::Off => false,
    }
}

/// Whether a session's start launches the watcher: not with `CONDUCTOR_WATCH_EDITS=0` (or
/// `off`, `false`), nor with `"watch_edits": false` in config.json.
pub fn enabled(config: &Config) -> bool {
    let off = std::env::var(ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        )
    });
    !off && config.watch_edits != Some(false)
}

/// The running watcher, as its note says.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Watching {
    pub pid: Option<u32>,
    pub since: Option<Timestamp>,
    /// The directories it watches (the live sessions' working directories).
    pub directories: Vec<String>,
    /// What keeps it from watching everything (too many directories, no inotify watch left).
    pub problem: Option<String>,
}

impl Watching {
    fn note(&self) -> String {
        let mut s = format!("pid {}\n", self.pid.unwrap_or_default());
        if let Some(t) = self.since {
            s.push_str(&format!("since {t}\n"));
        }
        for d in &self.directories {
            s.push_str(&format!("dir {d}\n"));
        }
        if let Some(p) = &self.problem {
            s.push_str(&format!("problem {}\n", p.replace('\n', " ")));
        }
        s
    }

    fn parse(note: &str) -> Watching {
        let mut w = Watching::default();
        for line in note.lines() {
            let (k, v) = line.split_once(' ').unwrap_or((line, ""));
            match k {
                "pid" => w.pid = v.parse().ok().filter(|p| *p != 0),
                "since" => w.since = Timestamp::parse(v),
                "dir" => w.directories.push(v.to_string()),
                "problem" => w.problem = Some(v.to_string()),
                _ => {}
            }
        }
        w
    }
}

/// The watcher running on the home `home`, if one does.
pub fn watching(home: &Path) -> Result<Option<Watching>> {
    Ok(crate::store::lock::sole_holder(&home.join(LOCK_FILE))?.map(|n| Watching::parse(&n)))
}

/// Whether `conductor watch-edits` watches a home, as status shows it.
#[derive(Clone, Debug)]
pub struct WatchStatus {
    /// The running watcher's note, if one runs.
    pub running: Option<Watching>,
    /// False when its automatic start is turned off.
    pub enabled: bool,
}

/// What the home's watcher does now (read errors: not watching; an unreadable config: on).
pub fn status(store: &crate::store::Store) -> WatchStatus {
    WatchStatus {
        running: watching(store.home().dir()).ok().flatten(),
        enabled: crate::config::read(store)
            .map(|c| enabled(&c))
            .unwrap_or(true),
    }
}

/// Launch `conductor watch-edits` for this home, in the background, unless one runs already or
/// the watcher is turned off ([`enabled`]). True when it was launched.
pub fn ensure_running(store: &Store) -> Result<bool> {
    let config = crate::config::read(store)?;
    if !enabled(&config) {
        return Ok(false);
    }
    let home = store.home().dir();
    if watching(home)?.is_some() {
        return Ok(false);
    }
    let exe = std::env::current_exe().ctx("find", Path::new("the conductor binary"))?;
    let mut cmd = Command::new(&exe);
    cmd.arg("watch-edits")
        .env("CONDUCTOR_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own session: a Ctrl-C at the terminal of the agent that started it does not end it.
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io("start", &exe, crate::spawn::named(&cmd, e)))?;
    // Reaped if this process outlives it (`conductor run`); gone with it otherwise.
    std::thread::spawn(move || child.wait());
    Ok(true)
}

/// How a watcher run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    /// Another watcher runs on this home (its pid, when known).
    AlreadyRunning(Option<u32>),
    /// No live session of this machine is left.
    NoSessions,
    /// The home is gone.
    HomeGone,
}

/// What the watcher may say as it works (the face prints it).
pub enum Said<'a> {
    /// It watches these directories now.
    Watching(&'a [String]),
    /// It recorded an unclaimed edit.
    Recorded(&'a unclaimed::UnclaimedEdit),
    /// Something keeps it from watching everything, or a record failed.
    Problem(&'a str),
}

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Keep running when no live session is left (`serve`-like use, and tests).
    pub stay: bool,
}

/// Watch until no live session of this machine is left (see the module's documentation).
pub fn run(store: &Store, opts: &Options, say: &mut dyn FnMut(Said)) -> Result<Ended> {
    let home = store.home().dir().to_path_buf();
    let lock_path = home.join(LOCK_FILE);
    let Some(sole) = crate::store::lock::try_sole(&lock_path, Duration::from_millis(500))? else {
        return Ok(Ended::AlreadyRunning(watching(&home)?.and_then(|w| w.pid)));
    };
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(move |res| {
        let _ = tx.send(res);
    })
    .map_err(|e| Error::io("watch", &home, std::io::Error::other(e.to_string())))?;
    watcher
        .watch(&home, RecursiveMode::NonRecursive)
        .map_err(|e| Error::io("watch", &home, std::io::Error::other(e.to_string())))?;
    let mut tree = Tree {
        home: home.clone(),
        watched: BTreeSet::new(),
        roots: BTreeSet::new(),
        problem: None,
    };
    let mut me = Watching {
        pid: Some(std::process::id()),
        since: Some(Timestamp::now()),
        ..Watching::default()
    };
    let mut refresh_due = true;
    let mut next_refresh = Instant::now();
    // `status.json` changed since the last look at the sessions, and when that look was.
    let mut sessions_changed = false;
    let mut last_look = Instant::now();
    let mut pending: BTreeSet<PathBuf> = BTreeSet::new();
    let mut first_pending: Option<Instant> = None;
    let mut last_change = Instant::now();
    loop {
        if sessions_changed && Instant::now() >= last_look + SESSIONS_GAP {
            refresh_due = true;
        }
        if refresh_due || Instant::now() >= next_refresh {
            refresh_due = false;
            sessions_changed = false;
            last_look = Instant::now();
            next_refresh = Instant::now() + REFRESH;
            if !home.is_dir() {
                return Ok(Ended::HomeGone);
            }
            let roots = live_roots(store);
            if roots.is_empty() && !opts.stay && pending.is_empty() {
                return Ok(Ended::NoSessions);
            }
            let before: Vec<String> = me.directories.clone();
            tree.set_roots(&mut watcher, &roots);
            me.directories = tree.roots.iter().map(|r| r.display().to_string()).collect();
            me.problem = tree.problem.clone();
            sole.note(&me.note());
            if me.directories != before {
                say(Said::Watching(&me.directories));
            }
            if let Some(p) = &tree.problem {
                say(Said::Problem(p));
            }
        }
        let now = Instant::now();
        let mut wake = match first_pending {
            Some(first) => (last_change + QUIET).min(first + MOST_DELAY),
            None => next_refresh,
        };
        if sessions_changed {
            wake = wake.min(last_look + SESSIONS_GAP);
        }
        let wait = wake.saturating_duration_since(now);
        let mut events = Vec::new();
        match rx.recv_timeout(wait) {
            Ok(ev) => {
                events.push(ev);
                events.extend(rx.try_iter());
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::io(
                    "watch",
                    &home,
                    std::io::Error::other("the file system watcher stopped"),
                ));
            }
        }
        let mut changed = Vec::new();
        for ev in events {
            let ev = match ev {
                Ok(ev) => ev,
                Err(_) => {
                    refresh_due = true;
                    continue;
                }
            };
            if ev.need_rescan() {
                refresh_due = true;
            }
            if matches!(
                ev.kind,
                EventKind::Access(_) | EventKind::Modify(notify::event::ModifyKind::Metadata(_))
            ) {
                continue;
            }
            for path in ev.paths {
                if path.starts_with(&home) {
                    if path.file_name().is_some_and(|n| n == "status.json") {
                        sessions_changed = true;
                    }
                    continue;
                }
                if tree.root_of(&path).is_none() || tree.skipped(&path) {
                    continue;
                }
                if path.is_dir() {
                    // A directory that appeared (made, moved in): watch it, and take the
                    // files already in it as changed (they may predate its watch).
                    if !tree.watched.contains(&path) {
                        changed.extend(tree.add_subtree(&mut watcher, &path));
                    }
                    continue;
                }
                if matches!(
                    ev.kind,
                    EventKind::Remove(notify::event::RemoveKind::Folder)
                ) || (matches!(ev.kind, EventKind::Remove(_)) && tree.watched.contains(&path))
                {
                    // A directory's files were changes of their own.
                    tree.forget(&mut watcher, &path);
                    continue;
                }
                changed.push(path);
            }
        }
        if !changed.is_empty() {
            // The first look: the state as the change is seen.
            let now = Timestamp::now();
            let live = liveness(store);
            // Who holds what and the holders' registrations: no instance's own lists.
            let st = super::glance(store, now).ok();
            for p in changed {
                let claimed = st
                    .as_ref()
                    .is_some_and(|st| unclaimed::claimed(st, &p.to_string_lossy(), now, &live));
                if !claimed {
                    pending.insert(p);
                    first_pending.get_or_insert_with(Instant::now);
                    last_change = Instant::now();
                }
            }
        }
        if let Some(first) = first_pending {
            let now = Instant::now();
            if now >= last_change + QUIET || now >= first + MOST_DELAY {
                let paths: Vec<PathBuf> = std::mem::take(&mut pending).into_iter().collect();
                first_pending = None;
                match judge_and_record(store, &tree, paths) {
                    Ok(found) => {
                        for e in &found {
                            say(Said::Recorded(e));
                        }
                    }
                    Err(e) => {
                        let text = format!("could not record unclaimed edits: {e}");
                        say(Said::Problem(&text));
                    }
                }
            }
        }
    }
}

/// Record the paths (after the quiet period) that are unclaimed edits: under an enforcing
/// mode, not ignored by git, unclaimed in the state under the lock.
fn judge_and_record(
    store: &Store,
    tree: &Tree,
    paths: Vec<PathBuf>,
) -> Result<Vec<unclaimed::UnclaimedEdit>> {
    let config: Config =
        crate::schema::read_doc(&store.home().config(), Schema::Config)?.unwrap_or_default();
    if !should_claim(config.enforce.unwrap_or_default()) {
        return Ok(Vec::new());
    }
    let mut by_root: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for p in paths {
        if let Some(r) = tree.root_of(&p) {
            by_root.entry(r.to_path_buf()).or_default().push(p);
        }
    }
    let mut kept = Vec::new();
    for (root, paths) in by_root {
        let ignored = git_ignored(&root, &paths, false);
        kept.extend(
            paths
                .into_iter()
                .filter(|p| !ignored.contains(p))
                .map(|p| p.to_string_lossy().into_owned()),
        );
    }
    if kept.is_empty() {
        return Ok(Vec::new());
    }
    let live = ProcessTable::new().with_max_age(config.default_max_age_minutes);
    unclaimed::record(store, Timestamp::now(), &kept, &live)
}

fn liveness(store: &Store) -> ProcessTable {
    let max_age = crate::schema::read_doc::<Config>(&store.home().config(), Schema::Config)
        .ok()
        .flatten()
        .and_then(|c| c.default_max_age_minutes);
    ProcessTable::new().with_max_age(max_age)
}

/// The working directories of the live sessions of this machine, outermost only.
fn live_roots(store: &Store) -> BTreeSet<PathBuf> {
    let now = Timestamp::now();
    let live = liveness(store);
    let Ok(st) = super::glance(store, now) else {
        return BTreeSet::new();
    };
    let me = crate::host::hostname();
    let mut dirs: Vec<PathBuf> = st
        .instances
        .iter()
        .filter(|i| i.host.is_none() || i.host == me)
        .filter(|i| is_alive(i, now, &live))
        .map(|i| PathBuf::from(&i.working_directory))
        .filter(|d| d.is_dir() && d != Path::new("/"))
        .collect();
    dirs.sort();
    dirs.dedup();
    let mut out = BTreeSet::new();
    for d in dirs {
        if !out.iter().any(|r: &PathBuf| d.starts_with(r)) {
            out.insert(d);
        }
    }
    out
}

/// The directories watched, under the roots (the sessions' working directories).
struct Tree {
    home: PathBuf,
    watched: BTreeSet<PathBuf>,
    roots: BTreeSet<PathBuf>,
    problem: Option<String>,
}

impl Tree {
    fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| path.starts_with(r))
            .map(PathBuf::as_path)
    }

    /// True for a path under `.git/`, `target/`, `node_modules/` or the home.
    fn skipped(&self, path: &Path) -> bool {
        if path.starts_with(&self.home) {
            return true;
        }
        let Some(root) = self.root_of(path) else {
            return true;
        };
        let rel = path.strip_prefix(root).unwrap_or(path);
        rel.components()
            .any(|c| c.as_os_str().to_str().is_some_and(|n| SKIPPED.contains(&n)))
    }

    fn set_roots(&mut self, w: &mut impl Watcher, roots: &BTreeSet<PathBuf>) {
        let gone: Vec<PathBuf> = self.roots.difference(roots).cloned().collect();
        let new: Vec<PathBuf> = roots.difference(&self.roots).cloned().collect();
        for r in gone {
            self.forget(w, &r);
            self.roots.remove(&r);
        }
        for r in new {
            self.roots.insert(r.clone());
            self.add_subtree(w, &r);
        }
    }

    /// Stop watching `dir` and everything below it.
    fn forget(&mut self, w: &mut impl Watcher, dir: &Path) {
        let below: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|d| d.starts_with(dir))
            .cloned()
            .collect();
        for d in below {
            let _ = w.unwatch(&d);
            self.watched.remove(&d);
        }
    }

    /// Watch `dir` and the directories below it (not skipped, not ignored by git). Returns the
    /// files found in them.
    fn add_subtree(&mut self, w: &mut impl Watcher, dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut level = vec![dir.to_path_buf()];
        while !level.is_empty() {
            let root = self.root_of(dir).map(Path::to_path_buf);
            let ignored = match &root {
                Some(r) => git_ignored(r, &level, true),
                None => BTreeSet::new(),
            };
            let mut next = Vec::new();
            for d in level {
                if ignored.contains(&d) || self.skipped(&d) || self.watched.contains(&d) {
                    continue;
                }
                if self.watched.len() >= MOST_DIRECTORIES {
                    self.problem = Some(format!(
                        "more than {MOST_DIRECTORIES} directories: the rest are not watched"
                    ));
                    return files;
                }
                if let Err(e) = w.watch(&d, RecursiveMode::NonRecursive) {
                    self.problem = Some(format!("cannot watch {}: {e}", d.display()));
                    continue;
                }
                self.watched.insert(d.clone());
                let Ok(entries) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in entries.flatten() {
                    let Ok(t) = e.file_type() else { continue };
                    if t.is_dir() {
                        next.push(e.path());
                    } else if t.is_file() {
                        files.push(e.path());
                    }
                }
            }
            level = next;
        }
        files
    }
}

/// The paths of `paths` (inside `root`; `dirs`: directories) that git ignores. Nothing outside a
/// repository, or when git cannot run.
fn git_ignored(root: &Path, paths: &[PathBuf], dirs: bool) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    if paths.is_empty() {
        return out;
    }
    let child = Command::new(crate::spawn::resolve("git"))
        .arg("-C")
        .arg(root)
        .args(["check-ignore", "-z", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return out;
    };
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_os_str().as_encoded_bytes());
        if dirs {
            // `build/` in a .gitignore matches only what git knows to be a directory.
            input.push(b'/');
        }
        input.push(0);
    }
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&input);
    }
    let Ok(output) = child.wait_with_output() else {
        return out;
    };
    for name in output.stdout.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let p = PathBuf::from(String::from_utf8_lossy(name).into_owned());
        let p = if p.is_absolute() { p } else { root.join(p) };
        out.insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_reads_back() {
        let w = Watching {
            pid: Some(42),
            since: Timestamp::parse("2026-01-17T10:00:00Z"),
            directories: vec!["/w/a b".into(), "/w/c".into()],
            problem: Some("too\nmany".into()),
        };
        let back = Watching::parse(&w.note());
        assert_eq!(back.pid, Some(42));
        assert_eq!(back.directories, w.directories);
        assert_eq!(back.problem.as_deref(), Some("too many"));
        assert_eq!(back.since, w.since);
    }

    #[test]
    fn only_modes_that_claim_or_refuse_expect_claims() {
        assert!(should_claim(Enforce::AutoClaim));
        assert!(should_claim(Enforce::RequireVerified));
        assert!(!should_claim(Enforce::BlockForeign));
        assert!(!should_claim(Enforce::Off));
    }
}
