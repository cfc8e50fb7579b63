//! The conductor home directory and the names of the files in it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// A conductor home that exists and is private to this user.
#[derive(Clone, Debug)]
pub struct Home {
    dir: PathBuf,
}

impl Home {
    /// The default home: `$HOME/.conductor`.
    pub fn default_dir() -> Result<PathBuf> {
        match std::env::var_os("HOME") {
            Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".conductor")),
            _ => Err(Error::refused(
                crate::error::Refusal::NoHome,
                "HOME is not set; pass --home DIR or set CONDUCTOR_HOME",
            )),
        }
    }

    /// Use `dir` as the home, creating it 0700 if needed. Refuses a home that is not a
    /// directory or belongs to another user, and tightens a group/world-accessible one.
    pub fn ensure(dir: PathBuf) -> Result<Home> {
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()
                .ctx("read", Path::new("."))?
                .join(dir)
        };
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir)
                    .ctx("create the conductor home", &dir)?;
            }
            Err(e) => return Err(Error::io("inspect", &dir, e)),
            Ok(_) => {}
        }
        let meta = std::fs::metadata(&dir).ctx("inspect", &dir)?;
        if !meta.is_dir() {
            return Err(Error::UnsafeHome {
                path: dir,
                detail: "it is not a directory".into(),
            });
        }
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(Error::UnsafeHome {
                path: dir,
                detail: format!("it belongs to uid {} and you are uid {me}", meta.uid()),
            });
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .ctx("make private", &dir)?;
        }
        Ok(Home { dir })
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `status.json`: the coordination state.
    pub fn status(&self) -> PathBuf {
        self.dir.join("status.json")
    }
    /// `status.lock`: the lock sentinel.
    pub fn lock(&self) -> PathBuf {
        self.dir.join("status.lock")
    }
    /// `history.jsonl`: finished tasks.
    pub fn history(&self) -> PathBuf {
        self.dir.join("history.jsonl")
    }
    /// `conflicts.log`: conflicts, resolutions, forced takeovers, releases.
    pub fn conflicts_log(&self) -> PathBuf {
        self.dir.join("conflicts.log")
    }
    /// `sprint.json`: the optional sprint focus.
    pub fn sprint(&self) -> PathBuf {
        self.dir.join("sprint.json")
    }
    /// `config.json`: conductor's own settings.
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.json")
    }
}
