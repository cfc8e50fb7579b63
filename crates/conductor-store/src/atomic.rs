//! Whole-file replacement that a crash can never tear: write a uniquely named temp file in the
//! same directory (created 0600 with O_EXCL by `tempfile`, so no predictable name and no followed
//! symlink), fsync it, rename it over the target, fsync the directory.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Prefix of every temp file the store creates; anything left with it is debris of a crash.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Atomically replace `path` with `bytes`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    prepare(path, bytes)?.commit()
}

/// A replacement written and fsynced beside its target, not yet renamed into place. Dropping it
/// without [`Prepared::commit`] removes the temp file: nothing changed.
pub struct Prepared {
    tmp: tempfile::NamedTempFile,
    path: std::path::PathBuf,
}

/// Write `bytes` to a temp file beside `path` and fsync it: everything that can fail for lack of
/// space happens here, before the caller commits to anything else.
pub fn prepare(path: &Path, bytes: &[u8]) -> Result<Prepared> {
    let dir = path
        .parent()
        .expect("state files live in the home directory");
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(".tmp")
        .tempfile_in(dir)
        .ctx("create a temp file in", dir)?;
    // Dropped on error: the temp file is removed. The message names the file it replaces.
    tmp.as_file_mut()
        .write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .ctx("write", path)?;
    Ok(Prepared {
        tmp,
        path: path.to_path_buf(),
    })
}

impl Prepared {
    /// Rename the temp file over the target and fsync the directory.
    pub fn commit(self) -> Result<()> {
        let dir = self
            .path
            .parent()
            .expect("state files live in the home directory")
            .to_path_buf();
        self.tmp
            .persist(&self.path)
            .map_err(|e| Error::io("replace", &self.path, e.error))?;
        sync_dir(&dir)
    }
}

/// Open (creating 0600 if needed) a file of the home for reading and writing, never through a
/// planted symlink and never truncating it.
pub fn open_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Keep the current bytes of `path` under a new name beside it, `<name>.<suffix>` (with `-1`,
/// `-2`, ... before the suffix's end if taken), by hard link: nothing is copied or deleted, and the
/// original name can then be replaced atomically. Returns the new name.
pub fn keep_beside(path: &Path, suffix: &str) -> Result<std::path::PathBuf> {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let dir = path.parent().expect("home files have a parent");
    let (stem, ext) = match suffix.rsplit_once('.') {
        Some((stem, ext)) => (stem, format!(".{ext}")),
        None => (suffix, String::new()),
    };
    let target = (0..)
        .map(|n| {
            let tag = if n == 0 {
                String::new()
            } else {
                format!("-{n}")
            };
            dir.join(format!("{name}.{stem}{tag}{ext}"))
        })
        .find(|t| !t.exists())
        .expect("some suffix is free");
    std::fs::hard_link(path, &target).map_err(|e| Error::io("keep a copy of", path, e))?;
    Ok(target)
}

/// Directories made for a write that may still fail. Dropped without [`NewDirs::keep`], it
/// removes every directory it created, with whatever was put in them: a failed command leaves
/// no half-made directory behind.
#[derive(Default)]
pub struct NewDirs {
    made: Vec<std::path::PathBuf>,
    kept: bool,
}

impl NewDirs {
    pub fn new() -> NewDirs {
        NewDirs::default()
    }

    /// [`create_private_dirs`], remembering the topmost directory that did not exist.
    pub fn create(&mut self, dir: &Path) -> Result<()> {
        let mut top = None;
        let mut p = Some(dir);
        while let Some(d) = p.filter(|d| std::fs::symlink_metadata(d).is_err()) {
            top = Some(d.to_path_buf());
            p = d.parent();
        }
        let made = create_private_dirs(dir);
        if let Some(top) = top {
            // Registered even on failure: some of its parents may have been made.
            self.made.push(top);
        }
        made
    }

    /// The write succeeded: keep the directories.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for NewDirs {
    fn drop(&mut self) {
        if !self.kept {
            for d in self.made.iter().rev() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

/// Temp files written for a commit that may still fail: dropped without [`Temps::keep`], it
/// removes them.
pub struct Temps<'a> {
    dir: &'a Path,
    pub names: Vec<String>,
    kept: bool,
}

impl<'a> Temps<'a> {
    pub fn new(dir: &'a Path) -> Temps<'a> {
        Temps {
            dir,
            names: Vec::new(),
            kept: false,
        }
    }

    /// The commit point passed (they are renamed into place, or a pending record names them).
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Temps<'_> {
    fn drop(&mut self) {
        if !self.kept {
            for n in &self.names {
                let _ = std::fs::remove_file(self.dir.join(n));
            }
        }
    }
}

/// Create `dir` and its missing parents, each 0700 (the home's subdirectories are private).
pub fn create_private_dirs(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ctx("create directory", dir)
}

/// fsync a directory so a rename or a new file in it survives a power cut.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("sync directory", dir)
}

/// Write `bytes` to a new temp file in `dir` named `<prefix>XXXXXX.tmp`, and fsync it when `sync`
/// (a commit does not: its log holds the bytes); the file stays (it is renamed into place by the
/// commit, or removed as debris later). Returns its name.
pub fn prepare_named(dir: &Path, prefix: &str, bytes: &[u8], sync: bool) -> Result<String> {
    let mut tmp = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .ctx("create a temp file in", dir)?;
    // Until `keep`, dropping it (on an error) removes the file.
    tmp.as_file_mut()
        .write_all(bytes)
        .and_then(|_| {
            if sync {
                tmp.as_file().sync_all()
            } else {
                Ok(())
            }
        })
        .ctx("write a temp file in", dir)?;
    let (_, path) = tmp.keep().map_err(|e| Error::io("keep", dir, e.error))?;
    Ok(path
        .file_name()
        .expect("temp files have names")
        .to_string_lossy()
        .into_owned())
}

/// A second name for the temp file `tmp` (a hard link, `<prefix><its name>-link<N>.tmp`), so that the
/// version about to be committed can also be kept under another name.
pub fn link_temp(dir: &Path, prefix: &str, tmp: &str) -> Result<String> {
    // Named after `tmp` (unique: created exclusively), so no random source is set up for it.
    let stem = tmp
        .strip_prefix(prefix)
        .and_then(|t| t.strip_suffix(".tmp"))
        .unwrap_or(tmp);
    for n in 0..16 {
        let name = format!("{prefix}{stem}-link{n}.tmp");
        match std::fs::hard_link(dir.join(tmp), dir.join(&name)) {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("link", &dir.join(tmp), e)),
        }
    }
    Err(Error::io(
        "link",
        &dir.join(tmp),
        std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    ))
}

/// Remove temp files left by crashed writers whose names `owned` accepts. Only called with the
/// lock that owns those names held (and any pending commit record replayed), when no live
/// transaction can have such a file in flight.
pub fn remove_stale_temps(dir: &Path, owned: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX) && name.ends_with(".tmp") && owned(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
