//! What conductor learns from the machine itself: a random id, the host name, whether a process
//! is alive, the current directory. Nothing here knows a conductor type.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Six lowercase hex digits from the OS random source (`openssl rand -hex 3`).
///
/// Straight from `getrandom(2)`: one system call, where `rand`'s thread generator first seeds
/// a ChaCha state and probes the CPU with `cpuid` (which traps to the hypervisor in a VM), in
/// every process that writes a journal event.
pub fn random_hex6() -> String {
    let mut b = [0u8; 3];
    let mut got = 0;
    while got < b.len() {
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if n == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            // No kernel random source (before Linux 3.17): the generator seeded by the OS.
            b = rand::random();
            break;
        }
    }
    format!("{:02x}{:02x}{:02x}", b[0], b[1], b[2])
}

/// This machine's host name, or `CONDUCTOR_HOST` when set (how a machine names itself to a
/// shared store, and how tests stand for several hosts on one machine).
pub fn hostname() -> Option<String> {
    if let Ok(h) = std::env::var("CONDUCTOR_HOST")
        && !h.is_empty()
    {
        return Some(h);
    }
    let mut buf = [0u8; 256];
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// True if no process with this pid exists (on this host).
pub fn pid_is_dead(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The current directory, with symlinks resolved where possible.
pub fn current_dir() -> Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| {
        Error::refused(
            crate::error::Refusal::NoWorkingDirectory,
            format!("the current directory is not usable ({e}); cd somewhere that exists"),
        )
    })?;
    Ok(std::fs::canonicalize(&cwd).unwrap_or(cwd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_six_hex() {
        let h = random_hex6();
        assert_eq!(h.len(), 6);
        assert!(
            h.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        // Random: 1,000 of 2^24 values collide about 0.03 times.
        let ids: std::collections::BTreeSet<String> = (0..1000).map(|_| random_hex6()).collect();
        assert!(ids.len() >= 995, "{}", ids.len());
    }
}

/// The POSIX session id of this process: every process started from one terminal (or one
/// login) shares it, unless it detached with `setsid`.
///
/// Inside a container (a pid namespace) whose session leader lives outside, `getsid` answers
/// 0. The oldest ancestor visible in the namespace (the one whose parent is 0: the container's
/// first process, or the process `docker exec` entered) then stands for the leader, so that
/// commands run from one `docker exec` or one CI job still count as one terminal.
pub fn session_id() -> Option<u32> {
    let sid = unsafe { libc::getsid(0) };
    if sid > 0 {
        return Some(sid as u32);
    }
    let mut pid = std::process::id();
    for _ in 0..64 {
        match parent_of(pid)? {
            0 => return Some(pid),
            parent => pid = parent,
        }
    }
    None
}

/// This process's ancestors, parent first, as `/proc` tells them (empty where it is missing).
pub fn ancestors() -> Vec<u32> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    while pid > 1 && out.len() < 64 {
        out.push(pid);
        match parent_of(pid) {
            Some(p) => pid = p,
            None => break,
        }
    }
    out
}

/// The parent of `pid` from `/proc/PID/stat` (the field after the parenthesized name, which
/// may itself hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The root of the git repository (or worktree) holding `dir`: the nearest directory, `dir`
/// included, with a `.git` entry (a directory, or a worktree's `.git` file). `None` outside one.
pub fn repository_root(dir: &std::path::Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .map(|d| d.to_path_buf())
}
