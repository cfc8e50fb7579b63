//! The protocol's adapters to this machine: where a session runs, whether an instance's
//! process is alive ([`ProcessTable`], the [`super::ops::Liveness`] the operations ask), and
//! claim paths normalized against the file system ([`PathNormalizer`]).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::claims;
use super::ops::Liveness;
use super::types::{Instance, Source, State};
use super::worktrees::{Worktree, Worktrees, branch_of_head};
use crate::error::Reason;
use crate::error::{Error, Result};
use crate::host::{hostname, pid_is_dead};
use crate::text::printable;

/// Detect the session's source from the environment, in the protocol's order. Cursor comes
/// before VS Code because Cursor also sets the VS Code variables.
pub fn detect_source(var: impl Fn(&str) -> Option<String>) -> Source {
    let set = |k: &str| var(k).is_some_and(|v| !v.is_empty());
    if set("CURSOR_SESSION") {
        Source::Cur
    } else if set("VSCODE_GIT_IPC_HANDLE") {
        Source::Vsc
    } else if var("TERM_PROGRAM").as_deref() == Some("iTerm.app") {
        Source::Itm
    } else if set("CLAUDE_COWORK_SESSION") {
        Source::Cow
    } else {
        Source::Web
    }
}

/// True if the process waiting for a file on behalf of `inst` is gone. A `claim --wait` runs
/// on its instance's host; another host's pid means nothing here, so it is never judged dead.
pub fn waiter_is_dead(inst: &Instance, pid: u32) -> bool {
    match (&inst.host, hostname()) {
        (Some(theirs), Some(ours)) if *theirs != ours => false,
        _ => pid_is_dead(pid),
    }
}

/// Who the calling process descends from, to tell whether an instance found only by its
/// directory is the caller's own: started from the same terminal (POSIX session) or owned by
/// one of the caller's ancestors (an agent whose tool runs the command, a shell's `$$`).
#[derive(Clone, Debug, Default)]
pub struct Lineage {
    host: Option<String>,
    session: Option<u32>,
    ancestors: Vec<u32>,
}

impl Lineage {
    /// The calling process's lineage.
    pub fn this_process() -> Lineage {
        let mut ancestors = crate::host::ancestors();
        ancestors.push(std::process::id());
        Lineage {
            host: hostname(),
            session: crate::host::session_id(),
            ancestors,
        }
    }

    /// True when `inst` was started on this host from the caller's terminal session, or is
    /// owned by the caller or one of its ancestors.
    pub fn owns(&self, inst: &Instance) -> bool {
        if let (Some(theirs), Some(ours)) = (&inst.host, &self.host)
            && theirs != ours
        {
            return false;
        }
        inst.pid.is_some_and(|p| self.ancestors.contains(&p))
            || (inst.terminal_session.is_some() && inst.terminal_session == self.session)
    }
}

/// Liveness by pid, for instances that recorded one on this host, and by heartbeat age.
pub struct ProcessTable {
    host: Option<String>,
    max_age_minutes: u64,
}

impl ProcessTable {
    /// Look at this host's processes; orphans after the protocol's 60 minutes.
    pub fn new() -> ProcessTable {
        ProcessTable {
            host: hostname(),
            max_age_minutes: crate::protocol::ops::DEFAULT_MAX_AGE_MINUTES,
        }
    }

    /// Orphans after `minutes` without a heartbeat (config.json `default_max_age_minutes`).
    pub fn with_max_age(mut self, minutes: Option<u64>) -> ProcessTable {
        if let Some(m) = minutes {
            self.max_age_minutes = m;
        }
        self
    }
}

impl Default for ProcessTable {
    fn default() -> Self {
        Self::new()
    }
}

impl Liveness for ProcessTable {
    fn max_age_minutes(&self) -> u64 {
        self.max_age_minutes
    }

    fn process_gone(&self, inst: &Instance) -> bool {
        match (inst.pid, &inst.host, &self.host) {
            (Some(pid), Some(h), Some(me)) if h == me => pid_is_dead(pid),
            _ => false,
        }
    }
}

/// The longest a claimed path may be.
pub const MAX_PATH_LEN: usize = 4096;

/// Turns claim arguments into the absolute, normalized paths claims are keyed by: relative
/// paths are joined to `base`, `.` and `..` collapse, and symlinks in the part of the path that
/// exists are resolved, so two spellings of one file are one claim. Canonical parents are cached,
/// so 10,000 files in one directory cost one `realpath`.
pub struct PathNormalizer {
    base: PathBuf,
    floor: PathBuf,
    cache: HashMap<PathBuf, PathBuf>,
    /// Key claims by repository instead of by absolute path (a shared store: see
    /// [`PathNormalizer::with_repo_keys`]), with each directory's repository found so far.
    repos: Option<HashMap<PathBuf, Option<(PathBuf, String)>>>,
    /// The git worktrees of the paths normalized so far.
    worktrees: WorktreeFinder,
}

impl PathNormalizer {
    /// Resolve relative paths against `base` (itself absolute).
    pub fn new(base: PathBuf) -> PathNormalizer {
        PathNormalizer {
            floor: base.clone(),
            base,
            cache: HashMap::new(),
            repos: None,
            worktrees: WorktreeFinder::default(),
        }
    }

    /// With a shared store, the same file on two hosts must be one claim: key it by its
    /// repository and its path inside it (`/@github.com/acme/app:src/main.rs`, the repository
    /// being the normalized URL of its `origin` remote, else of its first remote). A file in no
    /// repository with a remote is keyed by this host and its absolute path
    /// (`/@host=build1:/srv/x/a.rs`), so it never conflicts with another host's file. Keys start
    /// with `/` like every claim key, so the protocol's path fields (waits, pending conflicts)
    /// hold them as they are.
    pub fn with_repo_keys(mut self, on: bool) -> PathNormalizer {
        self.repos = on.then(HashMap::new);
        self
    }

    /// The repository (its root and id) that holds `dir`, if any.
    fn repo_of(&mut self, dir: &Path) -> Option<(PathBuf, String)> {
        let repos = self.repos.as_mut()?;
        let mut chain = Vec::new();
        let mut found = None;
        for d in dir.ancestors() {
            if let Some(known) = repos.get(d) {
                found = known.clone();
                break;
            }
            chain.push(d.to_path_buf());
            let git = d.join(".git");
            if std::fs::symlink_metadata(&git).is_ok() {
                // A repository without a remote is one repository on this host: its worktrees
                // share its common git directory.
                found = repo_remote(&git)
                    .or_else(|| {
                        let (_, common, broken) = git_dirs(d)?;
                        if broken.is_some() {
                            return None;
                        }
                        Some(format!(
                            "host={}:{}",
                            hostname().unwrap_or_else(|| "unknown".into()),
                            common.display()
                        ))
                    })
                    .map(|id| (d.to_path_buf(), id));
                break;
            }
        }
        for d in chain {
            repos.insert(d, found.clone());
        }
        found
    }

    /// The claim key of an absolute, normalized path (itself unless repository keys are on).
    fn key(&mut self, abs: PathBuf) -> PathBuf {
        if self.repos.is_none() {
            return abs;
        }
        let dir = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
        match self.repo_of(&dir) {
            Some((root, id)) => {
                let rel = abs.strip_prefix(&root).unwrap_or(&abs);
                PathBuf::from(format!("/@{id}:{}", rel.display()))
            }
            None => PathBuf::from(format!(
                "/@host={}:{}",
                hostname().unwrap_or_else(|| "unknown".into()),
                abs.display()
            )),
        }
    }

    /// The git worktrees of the paths normalized so far, of every repository they lie in, and
    /// a warning for each path whose repository could not be followed.
    pub fn worktrees(&self) -> &Worktrees {
        &self.worktrees.found
    }

    /// Let relative `..` climb from `base` up to `floor` (an ancestor of `base`, like the
    /// instance's working directory when `base` is a subdirectory of it), but not above it.
    pub fn with_floor(mut self, floor: &Path) -> PathNormalizer {
        if self.base.starts_with(floor) {
            self.floor = floor.to_path_buf();
        }
        self
    }

    /// Normalize one path as typed by the user.
    pub fn normalize(&mut self, input: &str) -> Result<String> {
        let bad = |why: &str| {
            Error::invalid(
                Reason::InvalidPath,
                format!("invalid path `{}`: {why}", printable(input)),
            )
        };
        if input.is_empty() {
            return Err(bad("it is empty"));
        }
        if input.len() > MAX_PATH_LEN {
            return Err(bad(&format!("it is longer than {MAX_PATH_LEN} bytes")));
        }
        if input.chars().any(char::is_control) {
            return Err(bad("it contains a control character"));
        }
        let p = Path::new(input);
        // What was typed may not climb out of the project with `..` (checked on the text).
        if !p.is_absolute() && collapse_within(p, &self.base, &self.floor).is_none() {
            return Err(Error::invalid(
                Reason::PathOutsideProject,
                format!(
                    "`{}` climbs out of {} with `..`; pass an absolute path to claim outside it",
                    printable(input),
                    self.floor.display()
                ),
            ));
        }
        // A glob (`*` or `?`): its literal directory is normalized like any path, the pattern
        // after it is kept as typed (see `protocol::claims`).
        if claims::is_glob(input) {
            let (dir, rest) = claims::split_glob(input);
            claims::check_pattern(rest).map_err(|why| {
                Error::invalid(
                    Reason::InvalidGlob,
                    format!("invalid glob `{}`: {why}", printable(input)),
                )
            })?;
            let dir = if dir.is_empty() { "." } else { dir };
            let prefix = self.dir_prefix(dir, &bad)?;
            if prefix.ends_with(':') && rest.starts_with("**") {
                return Err(Error::invalid(
                    Reason::InvalidGlob,
                    format!(
                        "invalid glob `{}`: with a shared store a glob may not start with `**` at the root of a repository; \
                         name a directory first (`src/**/*.rs`) or claim the whole repository (`.`)",
                        printable(input)
                    ),
                ));
            }
            return Ok(format!("{prefix}{rest}"));
        }
        // The key is where the path physically leads: symlinks are resolved *before* `..` is
        // applied (`link/../x` is next to the link's target, not next to the link), so two
        // spellings of one file can never be two claims.
        let raw = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        };
        let resolved = self.resolve_physical(&raw);
        // A directory (written with a final `/`, or one that exists): everything below it.
        if input.ends_with('/') || resolved.is_dir() {
            return self.dir_prefix(input, &bad);
        }
        if let Some(dir) = resolved.parent() {
            self.worktrees.note(dir);
        }
        let resolved = self.key(resolved);
        resolved
            .into_os_string()
            .into_string()
            .map_err(|_| bad("it resolves to a name that is not UTF-8"))
    }

    /// The key prefix of directory `input` (normalized as a path): the directory's key with a
    /// final `/`, or `/@REPO:` for the root of a repository. Refuses `/`, which would hold
    /// every file.
    fn dir_prefix(&mut self, input: &str, bad: &dyn Fn(&str) -> Error) -> Result<String> {
        let p = Path::new(input);
        if !p.is_absolute() && collapse_within(p, &self.base, &self.floor).is_none() {
            return Err(Error::invalid(
                Reason::PathOutsideProject,
                format!(
                    "`{}` climbs out of {} with `..`; pass an absolute path to claim outside it",
                    printable(input),
                    self.floor.display()
                ),
            ));
        }
        let raw = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        };
        let abs = self.resolve_physical(&raw);
        self.worktrees.note(&abs);
        if abs == Path::new("/") {
            return Err(Error::invalid(
                Reason::ClaimTooWide,
                format!(
                    "`{}` is the root directory: a claim on it would hold every file on the machine; claim the project's directories instead",
                    printable(input)
                ),
            ));
        }
        let abs = abs
            .into_os_string()
            .into_string()
            .map_err(|_| bad("it resolves to a name that is not UTF-8"))?;
        if self.repos.is_none() {
            return Ok(format!("{abs}/"));
        }
        Ok(match self.repo_of(Path::new(&abs)) {
            Some((root, id)) => {
                let rel = Path::new(&abs).strip_prefix(&root).unwrap_or(Path::new(""));
                if rel.as_os_str().is_empty() {
                    format!("/@{id}:")
                } else {
                    format!("/@{id}:{}/", rel.display())
                }
            }
            None => format!(
                "/@host={}:{abs}/",
                hostname().unwrap_or_else(|| "unknown".into())
            ),
        })
    }

    /// Canonicalize the longest prefix of `raw` that exists (the kernel resolves its symlinks and
    /// `..`), then apply the rest lexically: a `..` after a name that does not exist yet can
    /// only mean its lexical parent.
    fn resolve_physical(&mut self, raw: &Path) -> PathBuf {
        let comps: Vec<Component> = raw.components().collect();
        for k in (1..=comps.len()).rev() {
            let prefix: PathBuf = comps[..k].iter().collect();
            let canon = match self.cache.get(&prefix) {
                Some(c) => Some(c.clone()),
                None => std::fs::canonicalize(&prefix).ok().inspect(|c| {
                    self.cache.insert(prefix.clone(), c.clone());
                }),
            };
            if let Some(mut out) = canon {
                for c in &comps[k..] {
                    match c {
                        Component::ParentDir => {
                            out.pop();
                        }
                        Component::Normal(n) => out.push(n),
                        _ => {}
                    }
                }
                return out;
            }
        }
        collapse(raw, Path::new("/")).unwrap_or_else(|| raw.to_path_buf())
    }
}

impl crate::protocol::foreign::Resolve for PathNormalizer {
    fn physical(&mut self, path: &str) -> String {
        self.resolve_physical(Path::new(path))
            .into_os_string()
            .into_string()
            .unwrap_or_else(|_| crate::protocol::foreign::lexical(path))
    }
}

/// Finds the git worktrees of paths by reading `.git` entries, never by running git: a `.git`
/// directory (a main worktree), or a `.git` file (`gitdir: ...`, a linked worktree) whose git
/// directory names the repository's common directory in its `commondir` file. The repository's
/// other worktrees are listed from `COMMON/worktrees/*/gitdir`, each one's branch from its
/// `HEAD`. Every directory is looked at once.
#[derive(Debug, Default)]
pub struct WorktreeFinder {
    /// Directory → the root of the worktree holding it (`None`: none).
    dirs: HashMap<PathBuf, Option<PathBuf>>,
    /// Common git directories whose worktrees are listed.
    listed: Vec<PathBuf>,
    pub found: Worktrees,
}

impl WorktreeFinder {
    /// Find the worktree holding directory `dir` (absolute, symlinks resolved) and every other
    /// worktree of its repository.
    pub fn note(&mut self, dir: &Path) {
        let mut chain = Vec::new();
        for d in dir.ancestors() {
            if self.dirs.contains_key(d) {
                break;
            }
            chain.push(d.to_path_buf());
            if std::fs::symlink_metadata(d.join(".git")).is_err() {
                continue;
            }
            let root = self.repository_at(d).then(|| d.to_path_buf());
            for c in chain.drain(..) {
                self.dirs.insert(c, root.clone());
            }
            return;
        }
        for c in chain {
            self.dirs.insert(c, None);
        }
    }

    /// Record the worktree whose root `d` has a `.git` entry, and its siblings. False (with a
    /// warning) when its git directory or repository cannot be followed.
    fn repository_at(&mut self, d: &Path) -> bool {
        let Some((gitdir, common, warning)) = git_dirs(d) else {
            return false;
        };
        if let Some(w) = warning {
            self.found.warnings.push(w);
            return false;
        }
        let repo = common.to_string_lossy().into_owned();
        self.found.add(Worktree {
            root: dir_key(d),
            repo: repo.clone(),
            branch: read_branch(&gitdir),
        });
        if self.listed.contains(&common) {
            return true;
        }
        self.listed.push(common.clone());
        // The main worktree, unless the repository is bare (its common directory is not a
        // `.git` directory in a worktree).
        if common.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = common.parent()
        {
            self.found.add(Worktree {
                root: dir_key(main),
                repo: repo.clone(),
                branch: read_branch(&common),
            });
        }
        let Ok(entries) = std::fs::read_dir(common.join("worktrees")) else {
            return true;
        };
        for e in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path().join("gitdir")) else {
                continue;
            };
            // The worktree's `.git` file; a worktree whose directory is gone is left out.
            let Some(root) = Path::new(text.trim())
                .parent()
                .and_then(|r| std::fs::canonicalize(r).ok())
            else {
                continue;
            };
            self.found.add(Worktree {
                root: dir_key(&root),
                repo: repo.clone(),
                branch: read_branch(&e.path()),
            });
        }
        true
    }
}

/// Find the worktrees of the keys instances wait for or were refused (few): a release hands a
/// file over to a waiter in another worktree, and `status` names a conflict there.
pub fn note_waits(st: &mut State) {
    let mut finder = WorktreeFinder::default();
    let mut any = false;
    for inst in &st.instances {
        let keys = inst
            .waiting_for
            .iter()
            .map(|w| &w.file)
            .chain(inst.pending_conflicts.iter().map(|p| &p.file));
        for dir in keys.filter_map(|k| dir_of_key(k)) {
            finder.note(dir);
            any = true;
        }
    }
    if any {
        st.repos.merge(&finder.found);
    }
}

/// Find the worktrees of every instance's working directory, and with each the other
/// worktrees of its repository: what [`super::repositories::group`] needs. Claimed paths are
/// not looked at one by one (a `status` at 10,000 claims would stat a directory per claim); a
/// claim is grouped when it lies in a worktree of a repository some session works in.
pub fn note_repositories(st: &mut State) {
    let mut finder = WorktreeFinder::default();
    for inst in &st.instances {
        if inst.working_directory.starts_with('/') {
            finder.note(Path::new(&inst.working_directory));
        }
    }
    st.repos.merge(&finder.found);
}

/// The directory a claim key is about (a glob's fixed part, a file's parent), for finding its
/// worktree; `None` for a key that is no local absolute path (a shared store's `/@...`).
fn dir_of_key(k: &str) -> Option<&Path> {
    if !k.starts_with('/') || k.starts_with("/@") {
        return None;
    }
    let dir = match claims::kind(k) {
        claims::Kind::Glob => claims::split_glob(k).0,
        claims::Kind::Dir => k,
        claims::Kind::File => k.rsplit_once('/').map_or("/", |(d, _)| d),
    };
    Some(Path::new(if dir.is_empty() { "/" } else { dir }))
}

/// `dir` with a final `/`.
fn dir_key(dir: &Path) -> String {
    let s = dir.to_string_lossy();
    if s.ends_with('/') {
        s.into_owned()
    } else {
        format!("{s}/")
    }
}

/// The branch in `gitdir/HEAD`.
fn read_branch(gitdir: &Path) -> Option<String> {
    branch_of_head(&std::fs::read_to_string(gitdir.join("HEAD")).ok()?)
}

/// The git directory and the common directory of the worktree whose root `d` holds a `.git`
/// entry (`None`: not a git entry at all), or a warning when the `.git` file points at a git
/// directory that is gone (the main repository was moved or deleted).
pub(crate) fn git_dirs(d: &Path) -> Option<(PathBuf, PathBuf, Option<String>)> {
    let git = d.join(".git");
    let meta = std::fs::symlink_metadata(&git).ok()?;
    let gitdir = if meta.is_dir() {
        git
    } else {
        let text = std::fs::read_to_string(&git).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        d.join(target)
    };
    let broken = |what: &Path| {
        format!(
            "the git worktree {} points at {}, which does not exist (was its main repository moved or deleted?): \
             its paths are claimed by their absolute path, not shared with the repository's other worktrees; \
             run `git worktree repair` in the repository to fix it",
            d.display(),
            what.display()
        )
    };
    let Ok(gitdir) = std::fs::canonicalize(&gitdir) else {
        return Some((gitdir.clone(), gitdir.clone(), Some(broken(&gitdir))));
    };
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => gitdir.join(c.trim()),
        Err(_) => gitdir.clone(),
    };
    match std::fs::canonicalize(&common) {
        Ok(common) => Some((gitdir, common, None)),
        Err(_) => Some((gitdir, common.clone(), Some(broken(&common)))),
    }
}

/// The normalized URL of a repository's `origin` remote (else its first remote), from the
/// `.git` entry at `git` (a directory, or a file pointing at a worktree's git directory).
fn repo_remote(git: &Path) -> Option<String> {
    let mut dir = git.to_path_buf();
    if git.is_file() {
        let text = std::fs::read_to_string(git).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        dir = git.parent()?.join(target);
    }
    // A linked worktree's config lives in the common directory.
    if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
        dir = dir.join(common.trim());
    }
    let config = std::fs::read_to_string(dir.join("config")).ok()?;
    let mut section = String::new();
    let mut first = None;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim() != "url" || !section.starts_with("remote ") {
            continue;
        }
        let url = normalize_remote(v.trim().trim_matches('"'));
        if section == "remote \"origin\"" {
            return Some(url);
        }
        first.get_or_insert(url);
    }
    first
}

/// One spelling for every way of writing a remote: no scheme, no user, the host in lower
/// case, `host:path` as `host/path`, no `.git` or trailing slash.
pub fn normalize_remote(url: &str) -> String {
    let (rest, had_scheme) = match url.split_once("://") {
        Some((_, r)) => (r, true),
        None => (url, false),
    };
    let rest = match rest.split_once('@') {
        Some((user, r)) if !user.contains('/') => r,
        _ => rest,
    };
    let rest = if !had_scheme && !rest.starts_with('/') {
        // scp-like `host:path`
        match rest.split_once(':') {
            Some((h, p)) => format!("{h}/{}", p.trim_start_matches('/')),
            None => rest.to_string(),
        }
    } else {
        rest.to_string()
    };
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) if !rest.starts_with('/') => (h.to_ascii_lowercase(), format!("/{p}")),
        _ => (String::new(), rest.clone()),
    };
    let path = path.trim_end_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    format!("{host}{path}")
}

/// Join `p` to `base` and collapse `.` and `..` lexically. `None` if a relative `p` climbs
/// above `base`.
fn collapse(p: &Path, base: &Path) -> Option<PathBuf> {
    collapse_within(p, base, base)
}

/// [`collapse`], letting a relative `p` climb from `base` up to `floor` (a prefix of `base`).
fn collapse_within(p: &Path, base: &Path, floor: &Path) -> Option<PathBuf> {
    let mut out = if p.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let floor = if p.is_absolute() {
        1
    } else {
        floor.components().count()
    };
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                if out.components().count() <= floor {
                    if p.is_absolute() {
                        continue;
                    }
                    return None;
                }
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

/// Where relative claim paths resolve: the current directory when it is inside the instance's
/// working directory (paths mean what the shell means), else the working directory.
pub fn claim_base(cwd: &Path, working_directory: &Path) -> PathBuf {
    if cwd.starts_with(working_directory) {
        cwd.to_path_buf()
    } else {
        working_directory.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_have_one_spelling() {
        for u in [
            "git@github.com:Acme/app.git",
            "https://github.com/Acme/app",
            "ssh://git@GitHub.com/Acme/app.git",
            "https://user@github.com/Acme/app.git/",
        ] {
            assert_eq!(normalize_remote(u), "github.com/Acme/app", "{u}");
        }
        assert_eq!(normalize_remote("/srv/git/app.git"), "/srv/git/app");
        assert_eq!(normalize_remote("file:///srv/git/app.git"), "/srv/git/app");
    }

    #[test]
    fn collapses_dots_and_refuses_escapes() {
        let base = Path::new("/w/app");
        assert_eq!(
            collapse(Path::new("src/./a/../b.rs"), base).unwrap(),
            Path::new("/w/app/src/b.rs")
        );
        assert_eq!(collapse(Path::new("../x"), base), None);
        assert_eq!(collapse(Path::new("src/../../x"), base), None);
        assert_eq!(
            collapse(Path::new("/../../etc/x"), base).unwrap(),
            Path::new("/etc/x")
        );
        let sub = Path::new("/w/app/src");
        assert_eq!(
            collapse_within(Path::new("../lib/x.rs"), sub, base).unwrap(),
            Path::new("/w/app/lib/x.rs")
        );
        assert_eq!(collapse_within(Path::new("../../x"), sub, base), None);
    }

    #[test]
    fn source_detection_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            detect_source(env(&[
                ("CURSOR_SESSION", "1"),
                ("VSCODE_GIT_IPC_HANDLE", "/x")
            ])),
            Source::Cur
        );
        assert_eq!(
            detect_source(env(&[
                ("VSCODE_GIT_IPC_HANDLE", "/x"),
                ("TERM_PROGRAM", "iTerm.app")
            ])),
            Source::Vsc
        );
        assert_eq!(
            detect_source(env(&[("TERM_PROGRAM", "iTerm.app")])),
            Source::Itm
        );
        assert_eq!(
            detect_source(env(&[("CLAUDE_COWORK_SESSION", "s")])),
            Source::Cow
        );
        assert_eq!(
            detect_source(env(&[("TERM_PROGRAM", "Apple_Terminal")])),
            Source::Web
        );
    }
}

/// For a claimed file that does not exist: an existing entry beside it whose name is one or
/// two edits away (`src/mian.rs` -> `src/main.rs`), the likely typo.
pub fn close_sibling(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let name = path.file_name()?.to_str()?;
    if name.contains(['*', '?']) || path.to_string_lossy().ends_with('/') || path.exists() {
        return None;
    }
    let parent = path.parent()?;
    let mut best: Option<(usize, std::path::PathBuf)> = None;
    for entry in std::fs::read_dir(parent).ok()?.flatten().take(10_000) {
        let other = entry.file_name();
        let Some(other) = other.to_str() else {
            continue;
        };
        let d = edit_distance(name, other);
        let limit = if name.chars().count() <= 4 { 1 } else { 2 };
        if d > 0 && d <= limit && best.as_ref().is_none_or(|(b, _)| d < *b) {
            best = Some((d, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// Damerau-Levenshtein distance (optimal string alignment): a swap of two neighbours is one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > 2 {
        return usize::MAX;
    }
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}
