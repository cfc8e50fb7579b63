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
//! Paths: `~` is expanded; a pattern with `*`, `?`, `[` or `{` is a glob (the `globset` crate's
//! syntax: `*` and `?` stay within one path component, `**` crosses directories, `[0-9]`,
//! `[!a]` and `{a,b}` work, matching takes linear time) matched against the file's name, its
//! absolute path and its path relative to the working directory; an absolute pattern matches
//! that path and everything under it; a relative pattern without `/` matches any path component
//! (`.env`, `.git`), one with `/` is taken from the working directory. A rules file with a glob
//! or a regex that does not compile is refused when it is parsed, naming the rule.
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
        regex::Regex::new(&p.pattern).map_err(|e| {
            format!(
                "bashToolPatterns[{i}].pattern `{}` is not a valid regex: {}",
                p.pattern,
                regex_error(&e)
            )
        })?;
    }
    for (key, list) in [
        ("zeroAccessPaths", &rules.zero_access_paths),
        ("readOnlyPaths", &rules.read_only_paths),
        ("noDeletePaths", &rules.no_delete_paths),
    ] {
        for (i, p) in list.iter().enumerate() {
            if is_glob(p) {
                compile_glob(p)
                    .map_err(|e| format!("{key}[{i}] `{p}` is not a valid glob: {e}"))?;
            }
        }
    }
    Ok(rules)
}

/// A regex error on one line: the `regex` crate's syntax errors draw the pattern and a caret
/// over several lines; only the line saying what is wrong is kept.
pub fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// True when a path rule is a glob rather than a plain path.
fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

/// A glob as rules mean it: `*` and `?` never cross `/`, `**` does. The error is what is wrong
/// with it, on one line.
fn compile_glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
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

/// Glob match (see [`compile_glob`]); a pattern that does not compile matches nothing (rules
/// files are checked when parsed).
pub fn glob(pattern: &str, text: &str) -> bool {
    compile_glob(pattern).is_ok_and(|m| m.is_match(text))
}

/// True when `path` (as written by the agent) falls under the rule pattern.
pub fn path_matches(pattern: &str, path: &str, ctx: &Context) -> bool {
    let abs = ctx.absolute(path);
    let pat = ctx.expand(pattern);
    if is_glob(&pat) {
        let Ok(glob) = compile_glob(&pat) else {
            return false;
        };
        let pat_abs = if Path::new(&pat).is_absolute() {
            None
        } else {
            // The working directory is a path, not a pattern: its `[` or `*` are literal.
            let cwd = globset::escape(&ctx.cwd.to_string_lossy());
            compile_glob(&format!("{}/{pat}", cwd.trim_end_matches('/'))).ok()
        };
        let glob = |text: &str| glob.is_match(text);
        let name = abs
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let abs_s = abs.to_string_lossy();
        let rel = abs
            .strip_prefix(&ctx.cwd)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        return glob(&name)
            || glob(&abs_s)
            || (!rel.is_empty() && glob(&rel))
            || pat_abs.is_some_and(|p| p.is_match(abs_s.as_ref()))
            || abs.ancestors().skip(1).any(|a| glob(&a.to_string_lossy()));
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
        assert!(!glob("secret?.txt", "secret/.txt"));
        // Character classes, alternatives, negation.
        assert!(glob("secret[0-9].txt", "secret7.txt"));
        assert!(!glob("secret[0-9].txt", "secretx.txt"));
        assert!(glob("*.[pP][eE][mM]", "server.PeM"));
        assert!(!glob("*.[pP][eE][mM]", "server.pen"));
        assert!(glob("id_{rsa,ed25519}", "id_ed25519"));
        assert!(glob("[!.]*", "a"));
        assert!(!glob("[!.]*", ".a"));
    }

    #[test]
    fn character_classes_guard_paths() {
        let rules = parse("zeroAccessPaths: ['secret[0-9].txt', '*.[pP][eE][mM]']").unwrap();
        let read = |p: &str| check(&rules, &ToolCall::Read { path: p.into() }, &ctx());
        assert!(matches!(read("secret3.txt"), Decision::Deny(_)));
        assert!(matches!(read("deep/dir/secret3.txt"), Decision::Deny(_)));
        assert!(matches!(read("keys/server.PEM"), Decision::Deny(_)));
        assert_eq!(read("secretX.txt"), Decision::Allow);
        assert_eq!(read("server.pub"), Decision::Allow);
    }

    #[test]
    fn a_cwd_with_glob_characters_is_literal() {
        let c = Context {
            home: None,
            cwd: PathBuf::from("/w/[x]"),
        };
        assert!(path_matches("keys/*.pem", "/w/[x]/keys/a.pem", &c));
        assert!(!path_matches("keys/*.pem", "/w/x/keys/a.pem", &c));
    }

    /// The old hand-written matcher backtracked over every star: this pattern against this
    /// path took exponential time. It must answer; the bound is generous (not a benchmark).
    #[test]
    fn many_stars_do_not_hang() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pattern = format!("{}b", "*a".repeat(30));
            let path = format!("/w/{}", "a".repeat(200));
            let rules = parse(&format!(
                "zeroAccessPaths: ['{pattern}', '**/{pattern}/**']"
            ))
            .unwrap();
            let d = check(&rules, &ToolCall::Read { path }, &ctx());
            let _ = tx.send(d);
        });
        let d = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a glob with many stars answers within 10 s");
        assert_eq!(d, Decision::Allow);
    }

    #[test]
    fn bad_globs_and_regexes_are_one_line_naming_the_rule() {
        let e = parse("zeroAccessPaths: [.env, 'secret[0-9.txt']").unwrap_err();
        assert!(
            e.starts_with("zeroAccessPaths[1] `secret[0-9.txt` is not a valid glob"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        let e = parse("noDeletePaths: ['{a,b']").unwrap_err();
        assert!(e.starts_with("noDeletePaths[0]"), "{e}");
        let e = parse("bashToolPatterns:\n  - pattern: 'ok'\n    reason: r\n  - pattern: 'a(b'\n    reason: r").unwrap_err();
        assert_eq!(
            e,
            "bashToolPatterns[1].pattern `a(b` is not a valid regex: unclosed group"
        );
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
