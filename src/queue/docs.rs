//! Documentation collections: docpull's local cache (`~/.docpull/<collection>/`, listed in
//! `~/.docpull/manifest.json`, `HOME` honoured) or a directory given with `--docs-dir` whose
//! subdirectories are the collections. Jobs get read-only copies in their workspace's `docs/`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::Reason;
use crate::error::{Error, IoContext, Result};

/// Where collections come from and which exist.
#[derive(Clone, Debug)]
pub struct DocSource {
    pub root: PathBuf,
    pub available: Vec<String>,
}

/// The source: `--docs-dir`, else `$HOME/.docpull`.
pub fn locate(docs_dir: Option<&Path>) -> Result<DocSource> {
    let root = match docs_dir {
        Some(d) => d.to_path_buf(),
        None => match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => PathBuf::from(h).join(".docpull"),
            _ => PathBuf::from("/nonexistent/.docpull"),
        },
    };
    let mut available = Vec::new();
    let listed: Option<Vec<String>> = std::fs::read(root.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v.get("collections")
                .and_then(|c| c.as_object())
                .map(|o| o.keys().cloned().collect())
        });
    match (docs_dir, listed) {
        (None, Some(names)) => {
            for n in names {
                if valid_name(&n) && root.join(&n).is_dir() {
                    available.push(n);
                }
            }
        }
        _ => {
            if let Ok(rd) = std::fs::read_dir(&root) {
                for e in rd.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if valid_name(&n) && e.file_type().is_ok_and(|t| t.is_dir()) {
                        available.push(n);
                    }
                }
            }
        }
    }
    available.sort();
    Ok(DocSource { root, available })
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl DocSource {
    /// Refuse a collection that does not exist, naming the ones that do.
    pub fn check(&self, job: &str, name: &str) -> Result<()> {
        if self.available.iter().any(|a| a == name) {
            return Ok(());
        }
        let have = if self.available.is_empty() {
            "none".to_string()
        } else {
            self.available.join(", ")
        };
        Err(Error::invalid(
            Reason::UnknownDocs,
            format!(
                "job `{job}` needs doc collection `{name}`, which is not in {}; available: {have}",
                self.root.display()
            ),
        ))
    }

    /// Copy `name` into `docs_dir/<name>` (read-only), unless it is already there. The copy is
    /// made beside it and renamed into place, so a half copy is never mistaken for a whole one.
    pub fn copy_into(&self, name: &str, docs_dir: &Path) -> Result<()> {
        let dest = docs_dir.join(name);
        if dest.exists() {
            return Ok(());
        }
        super::private_dir(docs_dir)?;
        let tmp = docs_dir.join(format!(".partial-{name}-{}", std::process::id()));
        if tmp.exists() {
            make_writable(&tmp);
            let _ = std::fs::remove_dir_all(&tmp);
        }
        copy_tree(&self.root.join(name), &tmp)?;
        #[allow(clippy::disallowed_methods)] // a directory, not a store file
        std::fs::rename(&tmp, &dest).ctx("move into place", &dest)?;
        Ok(())
    }
}

/// Copy regular files and directories (symlinks are skipped: they could point anywhere), files
/// 0400 and directories 0500 once filled.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    super::private_dir(to)?;
    for e in std::fs::read_dir(from).ctx("read", from)? {
        let e = e.ctx("read", from)?;
        let t = e.file_type().ctx("inspect", &e.path())?;
        let target = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else if t.is_file() {
            std::fs::copy(e.path(), &target).ctx("copy", &e.path())?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o400))
                .ctx("protect", &target)?;
        }
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o500)).ctx("protect", to)
}

/// Give the owner write access again throughout a tree (to remove a stale partial copy).
pub fn make_writable(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&e.path());
            }
        }
    }
}
