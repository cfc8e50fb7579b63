//! Errors of starting a program that name the program and the reason.

use std::path::PathBuf;
use std::process::Command;

/// `e`, from starting `cmd`, as "`PROGRAM`: REASON" (same kind), so every "could not start"
/// message says which program it could not start.
pub fn named(cmd: &Command, e: std::io::Error) -> std::io::Error {
    let program = cmd.get_program().to_string_lossy();
    let reason = match e.kind() {
        std::io::ErrorKind::NotFound => format!("not found ({e})"),
        std::io::ErrorKind::PermissionDenied => format!("not executable ({e})"),
        _ => e.to_string(),
    };
    std::io::Error::new(e.kind(), format!("`{program}`: {reason}"))
}

/// SIGKILL a process group.
pub fn kill_group(pgid: u32) {
    if pgid > 1 && pgid <= i32::MAX as u32 {
        unsafe {
            libc::kill(-(pgid as i32), libc::SIGKILL);
        }
    }
}

/// A program name as the path `PATH` finds it at (looked up once per process), so each
/// spawn is one `execve` rather than one per `PATH` entry. Names with a `/`, and names not
/// found (the spawn then reports them), are left as they are.
pub fn resolve(program: &str) -> PathBuf {
    use std::collections::HashMap;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Mutex;
    static FOUND: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let found = found.get_or_insert_with(HashMap::new);
    if let Some(p) = found.get(program) {
        return p.clone();
    }
    let hit = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    });
    match hit {
        Some(p) => {
            found.insert(program.to_string(), p.clone());
            p
        }
        None => PathBuf::from(program),
    }
}
