//! Where output goes: the result on stdout (text, or one JSON object with `--json`), everything
//! else (status, warnings, errors) on stderr.

use std::io::Write;

use serde::Serialize;

use crate::error::{Error, Result};

/// How to print.
#[derive(Clone, Debug)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    status: &'static str,
    reason: &'a str,
    message: String,
}

fn stdout_err(e: std::io::Error) -> Error {
    Error::io("write to", std::path::Path::new("stdout"), e)
}

impl Output {
    /// Print a result object as one JSON line.
    pub fn json_line(&self, value: &impl Serialize) -> Result<()> {
        let mut s = serde_json::to_string(value).expect("reports serialize");
        s.push('\n');
        std::io::stdout()
            .lock()
            .write_all(s.as_bytes())
            .map_err(stdout_err)
    }

    /// Print result text (a newline is added if missing).
    pub fn text(&self, text: &str) -> Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).map_err(stdout_err)?;
        if !text.ends_with('\n') {
            out.write_all(b"\n").map_err(stdout_err)?;
        }
        Ok(())
    }

    /// A status message on stderr, unless `--quiet`.
    pub fn status(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }

    /// A warning on stderr (always shown).
    pub fn warn(&self, msg: &str) {
        eprintln!("warning: {msg}");
    }

    /// Report a failed command: the JSON envelope on stdout with `--json`, and always the
    /// message (plus a hint) on stderr.
    pub fn error(&self, e: &Error) {
        let message = e.to_string();
        if self.json {
            let _ = self.json_line(&ErrorObject {
                status: "error",
                reason: e.reason(),
                message: message.clone(),
            });
        }
        eprintln!("error: {message}");
        if let Some(h) = e.hint() {
            eprintln!("hint: {h}");
        }
    }
}
