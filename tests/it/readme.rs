//! The README and the guides in docs/ cannot go stale: every ```sh block in them runs, in order
//! per file, in one `bash -e` against a temp home and a temp project with the built binary first
//! on PATH (blocks marked ```sh no-run, such as installs, servers and agents with a model, are
//! not run); a command shown any other way is refused, so it cannot escape the test. A command
//! shown failing (`CMD || echo "exit $?"`) must exit with the code its comment gives
//! (`# CONFLICT, exit 3`, or `# exit 3` on a comment line below it). A block whose info string
//! says `file=PATH` (```json file=.conductor/workflows/feature.json) is written to PATH at that
//! point, as the text tells the reader to. The CLI reference is generated from the command
//! definitions and must match them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::bin;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The documents whose commands are run: the README, then docs/ and docs/reference/ (not
/// docs/pending/, the drafts the lead folds in).
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo("README.md")];
    for dir in ["docs", "docs/reference"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(repo(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        found.sort();
        docs.extend(found);
    }
    docs
}

/// A fenced code block: its info string, the line of its first content line (1-based) and its
/// lines.
struct Block {
    info: String,
    first_line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match current.take() {
            Some(b) if fence => out.push(b),
            Some(mut b) => {
                b.lines.push(line.to_string());
                current = Some(b);
            }
            None if fence => {
                current = Some(Block {
                    info: line.trim_start().trim_start_matches('`').trim().to_string(),
                    first_line: i + 2,
                    lines: Vec::new(),
                })
            }
            None => {}
        }
    }
    assert!(current.is_none(), "a code block is not closed");
    out
}

/// A line that shows a command someone would type.
fn is_command(line: &str) -> bool {
    let l = line.trim_start().trim_start_matches("$ ");
    l.starts_with("conductor ") || l.starts_with("CONDUCTOR_") && l.contains(" conductor ")
}

#[test]
fn commands_are_shown_only_in_sh_blocks() {
    let mut bad = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for b in blocks(&text) {
            if b.info == "sh" || b.info == "sh no-run" {
                continue;
            }
            if let Some(n) = b.lines.iter().position(|l| is_command(l)) {
                bad.push(format!(
                    "{}:{}: a command in a ```{} block: mark the block ```sh (or ```sh no-run)",
                    doc.display(),
                    b.first_line + n,
                    b.info
                ));
            }
        }
        // Indented code blocks (four spaces after a blank line) outside fences.
        let mut in_fence = false;
        let mut prev_blank = true;
        let mut in_indented = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            }
            if !in_fence {
                in_indented = line.starts_with("    ") && (prev_blank || in_indented);
                if in_indented && is_command(line) {
                    bad.push(format!(
                        "{}:{}: a command in an indented block: use a ```sh block",
                        doc.display(),
                        i + 1
                    ));
                }
            }
            prev_blank = line.trim().is_empty();
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_sh_block_of_the_readme_and_the_guides_runs() {
    let mut ran = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let runnable: Vec<Block> = blocks(&text)
            .into_iter()
            .filter(|b| b.info == "sh" || b.info.split(' ').any(|w| w.starts_with("file=")))
            .collect();
        if runnable.is_empty() {
            continue;
        }
        ran += runnable.iter().filter(|b| b.info == "sh").count();
        run_document(&doc, &runnable);
    }
    assert!(
        ran >= 10,
        "only {ran} blocks found: is the extraction broken?"
    );
}

/// Run one document's blocks in order in one bash, and fail with the file, the line and the
/// output of the block whose command failed.
fn run_document(doc: &Path, runnable: &[Block]) {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let user = root.path().join("user");
    let project = root.path().join("project");
    let tmp = root.path().join("tmp");
    for d in [&user, &project, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    // Script line → the document's line, for the ERR trap's $LINENO.
    // The guides assume a home in use: one exists (empty) before their first command. The
    // README's tour makes its own.
    let made = Command::new(bin())
        .args(["-q", "cleanup"])
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &home)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let mut script = String::from(
        "set -eo pipefail\ntrap 'echo \"@@failed $LINENO\"' ERR\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nexec 2>&1\n\
         __expect() { local n; n=$(printf '%s\\n' \"$__out\" | grep -cF -- \"$1\" || true); [ \"$n\" = \"$2\" ] || { echo \"@@expectation $n line(s) with '$1' where the document says $2\"; return 1; }; }\n",
    );
    let mut map: Vec<(usize, usize)> = Vec::new();
    for (i, b) in runnable.iter().enumerate() {
        script.push_str(&format!("echo '@@block {i}'\n"));
        if let Some(path) = b.info.split(' ').find_map(|w| w.strip_prefix("file=")) {
            script.push_str(&format!(
                "mkdir -p \"$(dirname '{path}')\"\ncat > '{path}' <<'CONDUCTOR_DOC_EOF'\n{}\nCONDUCTOR_DOC_EOF\n",
                b.lines.join("\n")
            ));
            continue;
        }
        for (k, line) in b.lines.iter().enumerate() {
            map.push((script.lines().count() + 1, b.first_line + k));
            // What the comment says the command shows: checked on its output.
            let checks: String = expected_output(doc, line)
                .unwrap_or_default()
                .iter()
                .map(|(text, n)| format!("; __expect '{}' {n}", text.replace('\'', r"'\''")))
                .collect();
            match exit_annotation(&b.lines[k..]) {
                None if checks.is_empty() => script.push_str(line),
                None => script.push_str(&format!(
                    "__out=$( {{ {} ; }} 2>&1 ); printf '%s\\n' \"$__out\"{checks}",
                    command_part(line)
                )),
                // The command's status is shown as the document shows it, and must be the one
                // it annotates.
                Some((cmd, expected)) => script.push_str(&format!(
                    "__rc=0; __out=$( {{ {cmd} ; }} 2>&1 ) || __rc=$?; printf '%s\\n' \"$__out\"; echo \"exit $__rc\"; [ \"$__rc\" = \"{}\" ] || {{ echo \"@@annotation exit $__rc where the document says {}\"; false; }}{checks}",
                    expected.unwrap_or_default(),
                    expected.map_or("no exit code".to_string(), |n| format!("exit {n}")),
                )),
            }
            script.push('\n');
        }
    }
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args(["-k", "5", "50", "bash", "-c", &script])
        .env_clear()
        .env("PATH", path)
        .env("HOME", &user)
        .env("TMPDIR", &tmp)
        .env("CONDUCTOR_WATCH_EDITS", "0")
        .env("CONDUCTOR_HOME", &home)
        .env("NO_COLOR", "1")
        .env("LANG", "C.UTF-8")
        .current_dir(&project)
        .output()
        .expect("bash and timeout (coreutils) run the documents' commands");
    if out.status.success() {
        return;
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let block: usize = text
        .lines()
        .filter_map(|l| l.strip_prefix("@@block "))
        .next_back()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let failed_line = text
        .lines()
        .filter_map(|l| l.strip_prefix("@@failed "))
        .next_back()
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| map.iter().find(|(s, _)| *s == n).map(|(_, d)| *d));
    let output = text
        .split(&format!("@@block {block}\n"))
        .nth(1)
        .unwrap_or(&text);
    let at = failed_line.unwrap_or(runnable[block].first_line);
    let command = std::fs::read_to_string(doc)
        .unwrap()
        .lines()
        .nth(at - 1)
        .unwrap_or_default()
        .to_string();
    let what = if output.contains("@@annotation") {
        "this command's exit code is not the one the document shows".to_string()
    } else if output.contains("@@expectation") {
        "this command's output is not what the document's comment says".to_string()
    } else {
        format!("this command failed ({})", out.status)
    };
    panic!(
        "{}:{at}: {what}:\n  {command}\noutput of its block:\n{output}",
        doc.display(),
    );
}

/// What the comments of the documents say commands show, checked on their output: for a line
/// of `doc` whose comment is the given text, each string must be on exactly that many lines of
/// the command's output. Each entry must name a line that exists
/// (`every_expected_output_names_a_commented_line`).
const EXPECTED: &[(&str, &str, &[(&str, usize)])] = &[
    ("README.md", "Safe to edit.", &[("Safe to edit.", 1)]),
    (
        "README.md",
        "CONFLICT, exit 3",
        &[("CONFLICT: src/api/users.rs is inside src/api/, which", 1)],
    ),
    (
        "README.md",
        "one pending item: a mention",
        &[("pending", 1), ("  mention  ", 1), ("inb-", 1)],
    ),
    (
        "README.md",
        "ana's post and scout's reply",
        &[(" ana: @scout", 1), (" scout: ", 1)],
    ),
    (
        "README.md",
        "completed (with --json, completion_ref names the reply)",
        &[("completed", 1), ("inb-", 1)],
    ),
    (
        "README.md",
        "Work [✓], done",
        &[("Work [✓]", 1), (" · Tiny · done", 1)],
    ),
    (
        "README.md",
        "both completed (and archived)",
        &[("completed", 2), ("draft", 1), ("review", 1)],
    ),
    (
        "docs/queue.md",
        "failed, blocked (with the reason)",
        &[
            ("failed   flaky/build", 1),
            ("blocked  flaky/ship", 1),
            ("dependency `build` failed", 1),
        ],
    ),
    (
        "docs/queue.md",
        "both completed",
        &[
            ("completed  flaky/build", 1),
            ("completed  flaky/ship", 1),
            ("failed", 0),
            ("blocked", 0),
        ],
    ),
    (
        "docs/workflows.md",
        "Planning [✓] -> Implementation [✓] -> Verification [✓]",
        &[("Planning [✓] -> Implementation [✓] -> Verification [✓]", 1)],
    ),
    (
        "docs/protocol.md",
        "[web-3f9a1c · 2 claimed]",
        &[(" · 2 claimed]", 1)],
    ),
    // The fixtures of `a_wrong_annotation_in_a_document_fails_the_docs_test`.
    (
        "fixtures/docs/exit-right.md",
        "free: exit 0",
        &[("Claimed: src/y.rs. Safe to edit.", 1)],
    ),
    (
        "fixtures/docs/output-wrong.md",
        "both files claimed",
        &[("Claimed: src/x.rs, src/y.rs.", 1)],
    ),
];

/// The command of a line, without its comment (`CMD   # comment`).
fn command_part(line: &str) -> &str {
    line.find("  # ").map_or(line, |at| &line[..at]).trim_end()
}

/// The comment of a line (`CMD   # comment`), if it has one.
fn comment_part(line: &str) -> Option<&str> {
    line.find("  # ").map(|at| line[at + 4..].trim())
}

/// What `doc`'s comment on `line` says the command shows ([`EXPECTED`]).
fn expected_output(doc: &Path, line: &str) -> Option<&'static [(&'static str, usize)]> {
    let comment = comment_part(line)?;
    EXPECTED
        .iter()
        .find(|(d, c, _)| doc.ends_with(d) && *c == comment)
        .map(|(_, _, e)| *e)
}

#[test]
fn every_expected_output_names_a_commented_line() {
    for (doc, comment, _) in EXPECTED {
        let text = std::fs::read_to_string(repo(doc)).unwrap();
        let found = blocks(&text)
            .iter()
            .filter(|b| b.info == "sh")
            .flat_map(|b| b.lines.iter())
            .filter(|l| comment_part(l) == Some(comment))
            .count();
        assert_eq!(found, 1, "{doc}: one sh line commented `# {comment}`");
    }
}

/// `CMD || echo "exit $?"` on the first of `lines`: the command and the exit code the document
/// annotates it with, in the line's comment (`# CONFLICT, exit 3`) or in a comment line right
/// below it (`# exit 3`); `None` for the code when neither says one (which fails: a command shown
/// failing must say how).
fn exit_annotation(lines: &[String]) -> Option<(String, Option<u32>)> {
    const SHOWN: &str = "|| echo \"exit $?\"";
    let line = &lines[0];
    let at = line.find(SHOWN)?;
    let exit_in = |comment: &str| -> Option<u32> {
        let words: Vec<&str> = comment
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .find(|w| w[0] == "exit")
            .and_then(|w| w[1].parse().ok())
    };
    let own = line[at + SHOWN.len()..]
        .trim_start()
        .strip_prefix('#')
        .and_then(exit_in);
    let below = || {
        lines[1..]
            .iter()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| {
                let words: Vec<&str> = l.trim_start_matches('#').split_whitespace().collect();
                (words.len() == 2 && words[0] == "exit")
                    .then(|| words[1].parse().ok())
                    .flatten()
            })
    };
    Some((line[..at].trim_end().to_string(), own.or_else(below)))
}

/// A wrong exit annotation fails the docs test, as does a failing command shown without one or a
/// comment on what a command shows that its output contradicts; right ones pass (the fixtures in
/// fixtures/docs/).
#[test]
fn a_wrong_annotation_in_a_document_fails_the_docs_test() {
    let run = |name: &str| {
        let doc = repo("fixtures/docs").join(name);
        let text = std::fs::read_to_string(&doc).unwrap();
        let runnable: Vec<Block> = blocks(&text)
            .into_iter()
            .filter(|b| b.info == "sh")
            .collect();
        assert!(!runnable.is_empty(), "{name} has a sh block");
        std::panic::catch_unwind(|| run_document(&doc, &runnable)).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "?".into())
        })
    };
    run("exit-right.md").expect("the right annotations pass");
    let wrong = run("exit-wrong.md").expect_err("a wrong annotation fails");
    assert!(
        wrong.contains("exit-wrong.md:7:")
            && wrong.contains("@@annotation exit 3 where the document says exit 4"),
        "{wrong}"
    );
    let below = run("exit-wrong-below.md").expect_err("a wrong annotation below fails");
    assert!(
        below.contains("exit-wrong-below.md:7:")
            && below.contains("@@annotation exit 3 where the document says exit 0"),
        "{below}"
    );
    let bare = run("exit-unannotated.md").expect_err("a failure shown without its code fails");
    assert!(
        bare.contains("@@annotation exit 3 where the document says no exit code"),
        "{bare}"
    );
    let output = run("output-wrong.md").expect_err("a comment the output contradicts fails");
    assert!(
        output.contains(
            "output-wrong.md:5: this command's output is not what the document's comment says"
        ) && output.contains(
            "@@expectation 0 line(s) with 'Claimed: src/x.rs, src/y.rs.' where the document says 1"
        ),
        "{output}"
    );
}

/// docs/reference/cli.md is what `conductor man --markdown` prints from the command
/// definitions.
#[test]
fn the_cli_reference_is_generated_from_the_command_definitions() {
    let out = Command::new(bin())
        .args(["man", "--markdown"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(generated.contains("## `conductor claim`"), "{generated}");
    let stored = std::fs::read_to_string(repo("docs/reference/cli.md")).unwrap_or_default();
    assert!(
        stored == generated,
        "docs/reference/cli.md is stale: regenerate it with\n  cargo run -q -- man --markdown > docs/reference/cli.md"
    );
}

/// The file-format reference lists every schema in schemas/ with the schema's own title.
#[test]
fn the_file_reference_lists_every_schema_with_its_title() {
    let files = std::fs::read_to_string(repo("docs/reference/files.md")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(repo("schemas")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".json") {
            continue;
        }
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let title = schema["title"].as_str().unwrap_or_default();
        let row = format!("| [`{name}`](../../schemas/{name}) | {title} |");
        if !files.lines().any(|l| l == row) {
            missing.push(row);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference/files.md lacks these rows of its schema table:\n{}",
        missing.join("\n")
    );
}

/// A heading's anchor as GitHub makes it: lower case, spaces to `-`, punctuation other than `-`
/// and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every relative link of the README and the guides names a file that exists and, with a
/// `#fragment`, a heading it has: moving a section cannot leave a dead link behind.
#[test]
fn links_between_the_documents_resolve() {
    let headings = |path: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut in_fence = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            } else if !in_fence && line.starts_with('#') {
                out.push(anchor(line.trim_start_matches('#')));
            }
        }
        out
    };
    let mut dead = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            for part in line.split("](").skip(1) {
                let Some(link) = part.split(')').next() else {
                    continue;
                };
                if link.starts_with("http") || link.contains(' ') {
                    continue;
                }
                let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
                let target = if file.is_empty() {
                    doc.clone()
                } else {
                    doc.parent().unwrap().join(file)
                };
                if !target.exists() {
                    dead.push(format!("{}:{}: {link}: no such file", doc.display(), n + 1));
                } else if !fragment.is_empty() && !headings(&target).iter().any(|h| h == fragment) {
                    dead.push(format!(
                        "{}:{}: {link}: no such heading",
                        doc.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}
