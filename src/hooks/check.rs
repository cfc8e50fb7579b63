//! May a session edit these files? The hooks' decision for each file, told before the edit
//! (the MCP server's `check` tool): who holds it, and whether another live worktree of its
//! repository changed it.

use serde::Serialize;

use crate::config::Enforce;
use crate::protocol::State;
use crate::protocol::ops::Liveness;
use crate::store::Store;
use crate::time::Timestamp;

/// Another worktree of the repository that changed the file, as `conductor overlaps` names it.
#[derive(Clone, Debug, Serialize)]
pub struct ChangedIn {
    pub path: String,
    pub branch: Option<String>,
    pub sessions: Vec<String>,
    pub changed_here: bool,
}

/// What the session may do with one file.
#[derive(Clone, Debug, Serialize)]
pub struct FileCheck {
    pub file: String,
    pub may_edit: bool,
    /// Another session's claim over it (in any worktree of its repository), else its own.
    pub held_by: Option<String>,
    pub holder_task: Option<String>,
    pub holder_last_seen_minutes: Option<u64>,
    pub yours: bool,
    pub note: Option<String>,
    pub changed_in_worktrees: Vec<ChangedIn>,
}

/// Check `given` paths for the session `me_id` of `st` (none: one not registered, working in
/// `cwd`), as its edit hook would decide them under the home's `enforce`: the session's paths
/// resolve against its own directory, the others against `cwd`.
#[allow(clippy::too_many_arguments)]
pub fn as_given(
    store: &Store,
    now: Timestamp,
    caller: &crate::protocol::sessions::Caller,
    mut st: State,
    me_id: Option<&str>,
    given: &[String],
    cwd: &dyn Fn() -> crate::error::Result<std::path::PathBuf>,
    live: &dyn Liveness,
) -> crate::error::Result<Vec<FileCheck>> {
    let enforce = crate::config::read(store)?.enforce.unwrap_or_default();
    let keys = match me_id {
        Some(id) => crate::protocol::sessions::resolve_with_paths(
            store,
            caller,
            &mut st,
            &Some(id.to_string()),
            &[given],
        )?
        .1
        .remove(0),
        None => {
            let mut norm = crate::protocol::local::PathNormalizer::new(cwd()?)
                .with_repo_keys(store.shared_by_hosts());
            let keys = given
                .iter()
                .map(|p| norm.normalize(p))
                .collect::<crate::error::Result<Vec<_>>>()?;
            st.repos.merge(norm.worktrees());
            keys
        }
    };
    let home = match me_id.and_then(|id| st.instance(id)) {
        Some(m) => m.working_directory.clone(),
        None => cwd()?.to_string_lossy().into_owned(),
    };
    Ok(files(store, now, &st, me_id, &home, &keys, enforce, live))
}

/// Check `files` (normalized keys) for the session `me_id` (none: a session not registered,
/// working in `home`), as its edit hook would decide them under `enforce`.
#[allow(clippy::too_many_arguments)]
pub fn files(
    store: &Store,
    now: Timestamp,
    st: &State,
    me_id: Option<&str>,
    home: &str,
    files: &[String],
    enforce: Enforce,
    live: &dyn Liveness,
) -> Vec<FileCheck> {
    let globs: Vec<String> = crate::protocol::claims::glob_keys(&st.global_claims)
        .into_iter()
        .map(str::to_string)
        .collect();
    let me = me_id.and_then(|id| st.instance(id));
    // Files another live worktree of their repository changed, as the edit hook tells.
    let elsewhere = super::overlap::find(store, &st.repos, files, st).unwrap_or_default();
    let mut out = Vec::new();
    for f in files {
        let in_project = super::inside(f, home);
        let d = super::decide(st, me, f, in_project, enforce, now, live);
        let holder = crate::protocol::ops::overlapping_claims(st, &globs, f)
            .iter()
            .filter_map(|(_, h, _)| st.instance(h))
            .find(|h| Some(h.id.as_str()) != me_id)
            .or_else(|| st.global_claims.get(f).and_then(|h| st.instance(h)));
        let (mut may_edit, mut note) = match d {
            super::Decision::Allow => (true, None),
            super::Decision::Claim => (
                true,
                Some("free: it is claimed for you on your first edit (or call claim)".to_string()),
            ),
            super::Decision::Deny(m) | super::Decision::Ask(m) => (false, Some(m)),
        };
        let mine: Vec<_> = elsewhere.iter().filter(|e| &e.file == f).cloned().collect();
        if may_edit && !mine.is_empty() {
            let told = if enforce == Enforce::BlockOverlap {
                may_edit = false;
                super::overlap::refusal(&mine)
            } else {
                super::overlap::notice(&mine)
            };
            note = Some(match note {
                Some(n) => format!("{n}; {told}"),
                None => told,
            });
        }
        out.push(FileCheck {
            file: f.clone(),
            may_edit,
            held_by: holder.map(|h| h.id.clone()),
            holder_task: holder.map(|h| h.task.clone()),
            holder_last_seen_minutes: holder.map(|h| h.last_heartbeat.minutes_until(now)),
            yours: holder.is_some_and(|h| Some(h.id.as_str()) == me_id),
            note,
            changed_in_worktrees: mine
                .into_iter()
                .map(|e| ChangedIn {
                    path: e.worktree,
                    branch: e.branch,
                    sessions: e.sessions,
                    changed_here: e.changed_here,
                })
                .collect(),
        });
    }
    out
}
