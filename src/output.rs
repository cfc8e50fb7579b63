//! Where output goes: the result on stdout (text, or one JSON object with `--json`), everything
//! else (status, warnings, errors) on stderr.

use std::io::Write;

use serde::Serialize;

use conductor::error::{Error, Result};

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
    /// `store_unavailable` only: whether the change may have been applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    maybe_applied: Option<bool>,
}

fn stdout_err(e: std::io::Error) -> Error {
    Error::io("write to", std::path::Path::new("stdout"), e)
}

impl Output {
    /// Print a result object as one JSON line.
    pub fn json_line(&self, value: &impl Serialize) -> Result<()> {
        self.json_text(serde_json::to_string(value).expect("reports serialize"))
    }

    /// Print one JSON object already serialized, then a newline.
    pub fn json_text(&self, mut s: String) -> Result<()> {
        s.push('\n');
        std::io::stdout()
            .lock()
            .write_all(s.as_bytes())
            .map_err(stdout_err)
    }

    /// Print result text (a newline is added if missing). On a terminal, and unless `NO_COLOR`
    /// is set, the words CONFLICT and BLOCKED are coloured.
    pub fn text(&self, text: &str) -> Result<()> {
        let text = if color_stdout() {
            paint(text)
        } else {
            text.to_string()
        };
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
                maybe_applied: e.maybe_applied(),
            });
        }
        eprintln!("error: {message}");
        if let Some(h) = e.hint() {
            eprintln!("hint: {h}");
        }
    }
}

/// True when stdout is a terminal and `NO_COLOR` is not set (https://no-color.org).
pub fn color_stdout() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// Colour the alarm words of human output: CONFLICT and BLOCKED in bold red.
pub fn paint(text: &str) -> String {
    text.replace("CONFLICT", "\x1b[1;31mCONFLICT\x1b[0m")
        .replace("BLOCKED", "\x1b[1;31mBLOCKED\x1b[0m")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_conflict_is_painted_red_on_a_terminal() {
        assert_eq!(super::paint("CONFLICT: x"), "\x1b[1;31mCONFLICT\x1b[0m: x");
    }
}
