//! Errors of starting a program that name the program and the reason.

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
