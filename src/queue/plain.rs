//! Job logs as plain text: agents print ANSI escapes (colours, cursor moves) even when their
//! output is a file (OpenCode's `run` does, whatever `NO_COLOR` says), and a log full of `ESC[0m`
//! is hard to read and to search. When a job's attempt ends its log is rewritten without them
//! (atomically; a log without an escape is left alone). Each attempt after the first starts
//! with a header line.

use std::io::Write;
use std::path::Path;

/// The bytes without their ANSI escape sequences (CSI, OSC and the other ESC forms).
pub fn strip(bytes: &[u8]) -> Vec<u8> {
    anstream::adapter::strip_bytes(bytes).into_vec()
}

/// The line that begins attempt `n` in a job's log.
pub fn attempt_header(n: u32, runner: &str) -> String {
    format!(
        "\n===== conductor: attempt {n} ({runner} runner) at {} =====\n",
        crate::time::Timestamp::now()
    )
}

/// The part of a log written by its last attempt (after the last [`attempt_header`]).
pub fn last_attempt(log: &str) -> &str {
    match log.rfind("\n===== conductor: attempt ") {
        Some(i) => &log[i + 1..],
        None => log,
    }
}

/// When an attempt ended: store its log plain ([`strip_log`]) and read the usage the agent
/// printed in this attempt (see [`crate::usage`]).
pub fn finish_log(path: &Path) -> crate::usage::Usage {
    strip_log(path);
    std::fs::read(path)
        .map(|b| crate::usage::parse(last_attempt(&String::from_utf8_lossy(&b))))
        .unwrap_or_default()
}

/// Rewrite a log without escapes (kept private, replaced atomically). Best effort: a log that
/// cannot be read or replaced stays as it is.
pub fn strip_log(path: &Path) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    if !bytes.contains(&0x1b) {
        return;
    }
    let plain = strip(&bytes);
    let Some(dir) = path.parent() else { return };
    let Ok(mut tmp) = tempfile::Builder::new()
        .prefix(".log-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)
    else {
        return;
    };
    if tmp.write_all(&plain).is_ok() {
        let _ = tmp.persist(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_output_loses_its_escapes() {
        // What OpenCode 1.18.33's `run` printed into a job log.
        let raw = b"\x1b[0m\n> build \xc2\xb7 scripted\n\x1b[0m\n\x1b[0m$ \x1b[0mecho hi\nhi\n\x1b[0m\nall done\n";
        assert_eq!(
            String::from_utf8(strip(raw)).unwrap(),
            "\n> build \u{b7} scripted\n\n$ echo hi\nhi\n\nall done\n"
        );
        assert_eq!(
            strip(b"\x1b]0;title\x07text\x1b[2K\x1b[1;31mred\x1b[m"),
            b"textred"
        );
    }

    #[test]
    fn the_usage_of_the_last_attempt() {
        let step = r#"{"type":"step_finish","part":{"tokens":{"total":15},"cost":0.5}}"#;
        let log = format!("{step}\n{step}\n{}{step}\n", attempt_header(2, "local"));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j.log");
        std::fs::write(&p, log).unwrap();
        let u = finish_log(&p);
        assert_eq!((u.tokens, u.cost_usd, u.reports), (15, 0.5, 1));
    }

    #[test]
    fn a_log_is_rewritten_plain_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j.log");
        std::fs::write(&p, b"\x1b[32mok\x1b[0m\n").unwrap();
        strip_log(&p);
        assert_eq!(std::fs::read(&p).unwrap(), b"ok\n");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
