//! Safety rules for every worker, in damage-control's format (`.pi/damage-control-rules.yaml`):
//!
//! ```yaml
//! bashToolPatterns:
//!   - pattern: '\brm\s+-[a-zA-Z]*r'     # a regex searched in the Bash command
//!     reason: recursive delete
//!   - pattern: '\bgit\s+push\b.*--force'
//!     reason: force push
//!     ask: true                         # ask the person instead of denying
//! zeroAccessPaths: ["~/.ssh/", ".env", "*.pem"]   # never read, written or named in a command
//! readOnlyPaths: ["/etc/", "Cargo.lock"]          # read, never edited or written by a command
//! noDeletePaths: [".git/", "README.md"]           # never removed or moved by a command
//! ```
//!
//! Paths: `~` is expanded; a pattern with `*`, `?` or `[` is a glob matched against the file's
//! name, its absolute path and its path relative to the working directory (`**` crosses
//! directories); an absolute pattern matches that path and everything under it; a relative
//! pattern without `/` matches any path component (`.env`, `.git`), one with `/` is taken
//! from the working directory.
//!
//! [`check`] is pure: it decides one tool call. The agent hook calls it for a worker (it finds
//! the worker's session in `CONDUCTOR_WORKFLOW_SESSION`) through [`super::guard`], which also
//! logs every interception in the session's ledger.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A parsed rules file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rules {
    #[serde(default)]
    pub bash_tool_patterns: Vec<BashPattern>,
    #[serde(default)]
    pub zero_access_paths: Vec<String>,
    #[serde(default)]
    pub read_only_paths: Vec<String>,
    #[serde(default)]
    pub no_delete_paths: Vec<String>,
}

/// One Bash rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashPattern {
    pub pattern: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ask: bool,
}

/// A tool call a worker is about to make.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "tool", rename_all = "snake_case")]
pub enum ToolCall {
    /// A shell command.
    Bash { command: String },
    /// A read of a file or directory (Read, Grep, Glob, ...).
    Read { path: String },
    /// A write or edit of a file (Edit, Write, MultiEdit, NotebookEdit).
    Edit { path: String },
}

impl ToolCall {
    /// The call an agent hook sees, from Claude Code's `tool_name` and `tool_input`; `None` for
    /// tools the rules do not cover.
    pub fn from_hook(tool_name: &str, input: &serde_json::Value) -> Option<ToolCall> {
        let s = |k: &str| input.get(k).and_then(|v| v.as_str()).map(str::to_string);
        match tool_name {
            "Bash" | "bash" => s("command").map(|command| ToolCall::Bash { command }),
            "Read" | "read" | "Grep" | "Glob" | "LS" => s("file_path")
                .or_else(|| s("path"))
                .or_else(|| s("notebook_path"))
                .map(|path| ToolCall::Read { path }),
            "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "edit" | "write" => s("file_path")
                .or_else(|| s("notebook_path"))
                .or_else(|| s("path"))
                .map(|path| ToolCall::Edit { path }),
            _ => None,
        }
    }
}

/// What to do with a tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "decision", content = "reason", rename_all = "snake_case")]
pub enum Decision {
    Allow,
    /// Block it; the reason is shown to the agent.
    Deny(String),
    /// Ask the person; the reason is shown to them.
    Ask(String),
}

/// Parse a rules file's text. Unknown keys are errors (a misspelt key would otherwise disable a
/// rule silently), and so are bad regexes.
pub fn parse(text: &str) -> Result<Rules, String> {
    let rules: Rules = if text.trim().is_empty() {
        Rules::default()
    } else {
        yaml_serde::from_str(text).map_err(|e| e.to_string())?
    };
    for (i, p) in rules.bash_tool_patterns.iter().enumerate() {
        regex::Regex::new(&p.pattern)
            .map_err(|e| format!("bashToolPatterns[{i}].pattern is not a valid regex: {e}"))?;
    }
    Ok(rules)
}

/// The places a rule's paths are resolved against.
#[derive(Clone, Debug)]
pub struct Context {
    /// The user's home, for `~`.
    pub home: Option<PathBuf>,
    /// The worker's working directory, for relative paths.
    pub cwd: PathBuf,
}

impl Context {
    /// `$HOME` and the given working directory.
    pub fn new(cwd: &Path) -> Context {
        Context {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            cwd: cwd.to_path_buf(),
        }
    }

    fn expand(&self, p: &str) -> String {
        match (p.strip_prefix('~'), &self.home) {
            (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => {
                format!("{}{rest}", h.display())
            }
            _ => p.to_string(),
        }
    }

    fn absolute(&self, p: &str) -> PathBuf {
        lexical(&self.cwd.join(self.expand(p)))
    }
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Glob match: `*` and `?` within one path component, `**` across components.
pub fn glob(pattern: &str, text: &str) -> bool {
    fn m(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => {
                let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
                (0..=t.len()).any(|i| m(rest, &t[i..]))
            }
            Some(b'*') => (0..=t.len())
                .take_while(|i| *i == 0 || t[i - 1] != b'/')
                .any(|i| m(&p[1..], &t[i..])),
            Some(b'?') => t.first().is_some_and(|c| *c != b'/') && m(&p[1..], &t[1..]),
            Some(c) => t.first() == Some(c) && m(&p[1..], &t[1..]),
        }
    }
    m(pattern.as_bytes(), text.as_bytes())
}

/// True when `path` (as written by the agent) falls under the rule pattern.
pub fn path_matches(pattern: &str, path: &str, ctx: &Context) -> bool {
    let abs = ctx.absolute(path);
    let pat = ctx.expand(pattern);
    if pat.contains(['*', '?', '[']) {
        let name = abs
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let abs_s = abs.to_string_lossy();
        let rel = abs
            .strip_prefix(&ctx.cwd)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pat_abs = if Path::new(&pat).is_absolute() {
            None
        } else {
            Some(ctx.cwd.join(&pat).to_string_lossy().into_owned())
        };
        return glob(&pat, &name)
            || glob(&pat, &abs_s)
            || (!rel.is_empty() && glob(&pat, &rel))
            || pat_abs.is_some_and(|p| glob(&p, &abs_s))
            || abs
                .ancestors()
                .skip(1)
                .any(|a| glob(&pat, &a.to_string_lossy()));
    }
    let trimmed = pat.trim_end_matches('/');
    if trimmed.is_empty() {
        return pat.starts_with('/');
    }
    if Path::new(trimmed).is_absolute() || trimmed.contains('/') {
        let base = ctx.absolute(trimmed);
        return abs.starts_with(&base);
    }
    abs.components()
        .any(|c| c.as_os_str().to_string_lossy() == trimmed)
}

fn first_match<'a>(patterns: &'a [String], path: &str, ctx: &Context) -> Option<&'a String> {
    patterns.iter().find(|p| path_matches(p, path, ctx))
}

/// The words of a shell command that may be paths (split at blanks and shell punctuation,
/// quotes removed; redirections kept apart).
fn words(command: &str) -> Vec<String> {
    command
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '<' | '>' | '`')
        })
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'').to_string())
        .filter(|w| !w.is_empty() && !w.starts_with('-'))
        .collect()
}

fn has_word(command: &str, verbs: &[&str]) -> bool {
    let re_words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')'))
        .collect();
    re_words.iter().any(|w| verbs.contains(w))
}

const DELETES: &[&str] = &["rm", "rmdir", "unlink", "mv", "shred"];
const WRITES: &[&str] = &[
    "rm", "rmdir", "unlink", "mv", "cp", "tee", "truncate", "touch", "chmod", "chown", "ln",
    "install", "dd", "shred", "patch",
];

/// Decide one tool call against the rules.
pub fn check(rules: &Rules, call: &ToolCall, ctx: &Context) -> Decision {
    match call {
        ToolCall::Read { path } => match first_match(&rules.zero_access_paths, path, ctx) {
            Some(p) => Decision::Deny(format!("`{path}` is a zero-access path ({p})")),
            None => Decision::Allow,
        },
        ToolCall::Edit { path } => {
            if let Some(p) = first_match(&rules.zero_access_paths, path, ctx) {
                return Decision::Deny(format!("`{path}` is a zero-access path ({p})"));
            }
            match first_match(&rules.read_only_paths, path, ctx) {
                Some(p) => Decision::Deny(format!("`{path}` is a read-only path ({p})")),
                None => Decision::Allow,
            }
        }
        ToolCall::Bash { command } => check_bash(rules, command, ctx),
    }
}

fn check_bash(rules: &Rules, command: &str, ctx: &Context) -> Decision {
    let mut ask = None;
    for p in &rules.bash_tool_patterns {
        // Patterns were checked when the rules were parsed; one that fails now matches nothing.
        let Ok(re) = regex::Regex::new(&p.pattern) else {
            continue;
        };
        if re.is_match(command) {
            if !p.ask {
                return Decision::Deny(p.reason.clone());
            }
            ask.get_or_insert_with(|| p.reason.clone());
        }
    }
    let ws = words(command);
    for w in &ws {
        if let Some(p) = first_match(&rules.zero_access_paths, w, ctx) {
            return Decision::Deny(format!("the command names `{w}`, a zero-access path ({p})"));
        }
    }
    let writes = command.contains('>') || has_word(command, WRITES) || command.contains("sed -i");
    if writes {
        for w in &ws {
            if let Some(p) = first_match(&rules.read_only_paths, w, ctx) {
                return Decision::Deny(format!(
                    "the command may modify `{w}`, a read-only path ({p})"
                ));
            }
        }
    }
    if has_word(command, DELETES) {
        for w in &ws {
            if let Some(p) = first_match(&rules.no_delete_paths, w, ctx) {
                return Decision::Deny(format!(
                    "the command may delete `{w}`, a no-delete path ({p})"
                ));
            }
        }
    }
    match ask {
        Some(r) => Decision::Ask(r),
        None => Decision::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = r#"
bashToolPatterns:
  - pattern: '\brm\s+-[a-zA-Z]*[rRf]'
    reason: rm with recursive or force flags
  - pattern: '\bgit\s+push\b.*--force'
    reason: force push needs a person
    ask: true
zeroAccessPaths:
  - ~/.ssh/
  - .env
  - "*.pem"
readOnlyPaths:
  - /etc/
  - Cargo.lock
noDeletePaths:
  - .git/
  - README.md
"#;

    fn ctx() -> Context {
        Context {
            home: Some(PathBuf::from("/home/u")),
            cwd: PathBuf::from("/home/u/proj"),
        }
    }

    fn bash(c: &str) -> Decision {
        check(
            &parse(RULES).unwrap(),
            &ToolCall::Bash { command: c.into() },
            &ctx(),
        )
    }
    fn read(p: &str) -> Decision {
        check(
            &parse(RULES).unwrap(),
            &ToolCall::Read { path: p.into() },
            &ctx(),
        )
    }
    fn edit(p: &str) -> Decision {
        check(
            &parse(RULES).unwrap(),
            &ToolCall::Edit { path: p.into() },
            &ctx(),
        )
    }

    #[test]
    fn bash_patterns_deny_or_ask() {
        assert_eq!(
            bash("rm -rf build"),
            Decision::Deny("rm with recursive or force flags".into())
        );
        assert_eq!(
            bash("ls -la && rm -f x"),
            Decision::Deny("rm with recursive or force flags".into())
        );
        assert_eq!(
            bash("git push origin main --force"),
            Decision::Ask("force push needs a person".into())
        );
        assert_eq!(bash("cargo test"), Decision::Allow);
        assert_eq!(bash("git push origin main"), Decision::Allow);
    }

    #[test]
    fn bash_naming_protected_paths() {
        assert!(
            matches!(bash("cat ~/.ssh/id_rsa"), Decision::Deny(r) if r.contains("zero-access"))
        );
        assert!(matches!(bash("cat /home/u/proj/.env"), Decision::Deny(_)));
        assert!(matches!(
            bash("openssl x509 -in certs/server.pem"),
            Decision::Deny(_)
        ));
        assert!(
            matches!(bash("echo x > /etc/hosts"), Decision::Deny(r) if r.contains("read-only"))
        );
        assert_eq!(bash("cat /etc/hosts"), Decision::Allow);
        assert!(matches!(bash("rm README.md"), Decision::Deny(r) if r.contains("no-delete")));
        assert!(matches!(bash("mv .git/config /tmp"), Decision::Deny(_)));
        assert_eq!(bash("cat README.md"), Decision::Allow);
        assert_eq!(bash("cp README.md docs/"), Decision::Allow);
    }

    #[test]
    fn reads_and_edits() {
        assert!(matches!(read("/home/u/.ssh/config"), Decision::Deny(_)));
        assert!(matches!(read(".env"), Decision::Deny(_)));
        assert!(matches!(read("src/../.env"), Decision::Deny(_)));
        assert!(matches!(read("keys/a.pem"), Decision::Deny(_)));
        assert_eq!(read("src/main.rs"), Decision::Allow);
        assert_eq!(read("/etc/hosts"), Decision::Allow);
        assert!(matches!(edit("/etc/hosts"), Decision::Deny(r) if r.contains("read-only")));
        assert!(matches!(edit("Cargo.lock"), Decision::Deny(_)));
        assert!(matches!(edit(".env"), Decision::Deny(r) if r.contains("zero-access")));
        assert_eq!(edit("src/lib.rs"), Decision::Allow);
    }

    #[test]
    fn parse_errors_are_clear() {
        assert!(
            parse("zeroAcessPaths: [x]")
                .unwrap_err()
                .contains("unknown field")
        );
        assert!(
            parse("bashToolPatterns:\n  - pattern: '('\n    reason: r")
                .unwrap_err()
                .contains("regex")
        );
        assert!(parse("bashToolPatterns: [").is_err());
        assert_eq!(parse("").unwrap(), Rules::default());
    }

    #[test]
    fn globs() {
        assert!(glob("*.pem", "a.pem"));
        assert!(!glob("*.pem", "d/a.pem"));
        assert!(glob("**/*.pem", "d/e/a.pem"));
        assert!(glob("/home/**", "/home/u/x"));
        assert!(glob("secret?.txt", "secret1.txt"));
    }

    #[test]
    fn hook_calls() {
        let v = serde_json::json!({"file_path": "/x/.env"});
        assert_eq!(
            ToolCall::from_hook("Read", &v),
            Some(ToolCall::Read {
                path: "/x/.env".into()
            })
        );
        assert_eq!(
            ToolCall::from_hook("Write", &v),
            Some(ToolCall::Edit {
                path: "/x/.env".into()
            })
        );
        assert_eq!(ToolCall::from_hook("WebFetch", &v), None);
    }
}
