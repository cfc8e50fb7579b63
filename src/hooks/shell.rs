//! The files a shell command will write, found by parsing it as bash (`brush-parser`, the parser
//! of the brush shell) and walking the syntax tree: every agent's shell tool goes through the
//! same claim checks as its edit tools.
//!
//! What is recognised: output redirections (`>`, `>>`, `>|`, `<>`, `&>`), `sed -i`, `tee`, `cp`
//! and `mv` onto a path (and `mv`'s sources, which it removes), `rm`, `unlink`, `touch`,
//! `truncate`, `git checkout … -- PATH`, `git restore PATH`, `patch` (its file argument, or the
//! files its patch names) and `git apply` (the files the patch names: read from the patch file,
//! a here-document, or `< FILE`). `cd DIR` earlier in the command moves what later relative paths
//! mean; `sh -c`/`bash -c SCRIPT` are parsed in turn; `sudo`, `env`, `command`, `nohup`, `nice`,
//! `time` and `xargs`' own options are looked through.
//!
//! What cannot be known without running the command is left out, and listed in docs/integrations.md: a
//! path built at run time (`$VAR`, `$(cmd)`, globs), a program or script that writes files
//! itself (`python gen.py`, `make`, `npm install`), `find -delete`, `xargs rm`, `eval`.

use std::path::{Path, PathBuf};

use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect,
};

/// What one command writes: paths as written (relative ones against the session's directory,
/// with any `cd` applied), in order and without duplicates.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub paths: Vec<String>,
}

/// The files `command` writes, or an error when it is not valid shell syntax. `cwd` is only used
/// to read patch files named by a relative path and to see whether a `cp`/`mv` target is a
/// directory.
pub fn written_paths(command: &str, cwd: &Path) -> Result<Writes, String> {
    let mut w = Walker {
        cwd: cwd.to_path_buf(),
        rel: PathBuf::new(),
        out: Vec::new(),
        depth: 0,
    };
    w.script(command)?;
    Ok(Writes { paths: w.out })
}

struct Walker {
    /// The session's directory.
    cwd: PathBuf,
    /// Where `cd` moved to, relative to `cwd` (or absolute).
    rel: PathBuf,
    out: Vec<String>,
    /// `sh -c` nesting.
    depth: usize,
}

/// A word's text after quote removal, or None when its value is only known at run time.
fn literal(word: &str) -> Option<String> {
    let mut out = String::new();
    let (mut single, mut double, mut escape) = (false, false, false);
    for c in word.chars() {
        if escape {
            out.push(c);
            escape = false;
            continue;
        }
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '\\' if !single => escape = true,
            '$' | '`' if !single => return None,
            '*' | '?' | '[' if !single && !double => return None,
            '~' if !single && !double && out.is_empty() => {
                out.push_str(&std::env::var("HOME").ok()?);
            }
            c => out.push(c),
        }
    }
    Some(out)
}

impl Walker {
    fn script(&mut self, text: &str) -> Result<(), String> {
        let mut parser = brush_parser::Parser::builder().build(std::io::Cursor::new(text));
        let program = parser.parse_program().map_err(|e| e.to_string())?;
        for list in &program.complete_commands {
            self.list(list);
        }
        Ok(())
    }

    fn push(&mut self, path: &str) {
        if path.is_empty() || path.starts_with("/dev/") || path.starts_with("/proc/") {
            return;
        }
        let p = self.rel.join(path);
        let s = p.to_string_lossy().into_owned();
        if !self.out.contains(&s) {
            self.out.push(s);
        }
    }

    /// The directory a relative path is read from now.
    fn here(&self) -> PathBuf {
        self.cwd.join(&self.rel)
    }

    fn list(&mut self, list: &CompoundList) {
        for item in &list.0 {
            let and_or = &item.0;
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
                }
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline) {
        for c in &p.seq {
            self.command(c);
        }
    }

    fn redirects(&mut self, list: Option<&ast::RedirectList>) {
        for r in list.into_iter().flat_map(|l| &l.0) {
            self.redirect(r);
        }
    }

    fn redirect(&mut self, r: &IoRedirect) {
        match r {
            IoRedirect::File(_, kind, IoFileRedirectTarget::Filename(w))
                if matches!(
                    kind,
                    IoFileRedirectKind::Write
                        | IoFileRedirectKind::Append
                        | IoFileRedirectKind::ReadAndWrite
                        | IoFileRedirectKind::Clobber
                ) =>
            {
                if let Some(p) = literal(&w.value) {
                    self.push(&p);
                }
            }
            IoRedirect::OutputAndError(w, _) => {
                if let Some(p) = literal(&w.value) {
                    self.push(&p);
                }
            }
            _ => {}
        }
    }

    fn compound(&mut self, c: &CompoundCommand) {
        match c {
            CompoundCommand::BraceGroup(b) => self.list(&b.list),
            CompoundCommand::Subshell(s) => {
                let saved = self.rel.clone();
                self.list(&s.list);
                self.rel = saved;
            }
            CompoundCommand::ForClause(f) => self.list(&f.body.list),
            CompoundCommand::CaseClause(c) => {
                for item in &c.cases {
                    if let Some(l) = &item.cmd {
                        self.list(l);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition);
                self.list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c);
                    }
                    self.list(&e.body);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0);
                self.list(&w.1.list);
            }
            CompoundCommand::ArithmeticForClause(a) => self.list(&a.body.list),
            CompoundCommand::Coprocess(c) => self.command(&c.body),
            CompoundCommand::Arithmetic(_) => {}
        }
    }

    fn command(&mut self, c: &Command) {
        match c {
            Command::Simple(s) => self.simple(s),
            Command::Compound(c, r) => {
                self.compound(c);
                self.redirects(r.as_ref());
            }
            // A function body runs when it is called, which this command may do: count it.
            Command::Function(f) => {
                self.compound(&f.body.0);
                self.redirects(f.body.1.as_ref());
            }
            Command::ExtendedTest(_, r) => self.redirects(r.as_ref()),
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand) {
        let mut heredoc: Option<String> = None;
        let mut stdin_file: Option<String> = None;
        let items = s
            .prefix
            .iter()
            .flat_map(|p| &p.0)
            .chain(s.suffix.iter().flat_map(|p| &p.0));
        for item in items {
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(r) => {
                    self.redirect(r);
                    match r {
                        IoRedirect::HereDocument(None | Some(0), h) => {
                            heredoc = Some(h.doc.value.clone())
                        }
                        IoRedirect::HereString(None | Some(0), w) => heredoc = literal(&w.value),
                        IoRedirect::File(
                            None | Some(0),
                            IoFileRedirectKind::Read,
                            IoFileRedirectTarget::Filename(w),
                        ) => stdin_file = literal(&w.value),
                        _ => {}
                    }
                }
                CommandPrefixOrSuffixItem::Word(_)
                | CommandPrefixOrSuffixItem::AssignmentWord(..) => {}
                CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => self.list(&sub.list),
            }
        }
        // The prefix's words come before the command name in the source; only the suffix's
        // words are arguments. Order: the name first, then the suffix words.
        let mut argv: Vec<Option<String>> = Vec::new();
        if let Some(w) = &s.word_or_name {
            argv.push(literal(&w.value));
        }
        for item in s.suffix.iter().flat_map(|p| &p.0) {
            if let CommandPrefixOrSuffixItem::Word(w) = item {
                argv.push(literal(&w.value));
            }
        }
        let stdin = match (heredoc, stdin_file) {
            (Some(doc), _) => Some(doc),
            (None, Some(f)) => std::fs::read_to_string(self.here().join(f)).ok(),
            (None, None) => None,
        };
        self.program(argv, stdin.as_deref());
    }

    /// One program with its arguments (None: known only at run time).
    fn program(&mut self, argv: Vec<Option<String>>, stdin: Option<&str>) {
        let Some(Some(name)) = argv.first() else {
            return;
        };
        let name = Path::new(name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let args: Vec<Option<String>> = argv[1..].to_vec();
        let known: Vec<String> = args.iter().flatten().cloned().collect();
        match name.as_str() {
            "sudo" | "command" | "nohup" | "time" | "exec" => {
                let rest: Vec<Option<String>> = args
                    .into_iter()
                    .skip_while(|a| a.as_deref().is_some_and(|a| a.starts_with('-')))
                    .collect();
                self.program(rest, stdin)
            }
            "env" => {
                let rest: Vec<Option<String>> = args
                    .into_iter()
                    .skip_while(|a| {
                        a.as_deref()
                            .is_some_and(|a| a.starts_with('-') || a.contains('='))
                    })
                    .collect();
                self.program(rest, stdin)
            }
            "nice" => {
                let mut rest = args.into_iter().peekable();
                while let Some(Some(a)) = rest.peek() {
                    if a == "-n" {
                        rest.next();
                        rest.next();
                    } else if a.starts_with('-') {
                        rest.next();
                    } else {
                        break;
                    }
                }
                self.program(rest.collect(), stdin)
            }
            "sh" | "bash" | "dash" | "zsh" => {
                if self.depth < 4
                    && let Some(i) = known
                        .iter()
                        .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))
                    && let Some(script) = known.get(i + 1)
                {
                    self.depth += 1;
                    let _ = self.script(script);
                    self.depth -= 1;
                }
            }
            "cd" => {
                let target = operands(&known).into_iter().next();
                match target {
                    Some(d) if d != "-" => self.rel = self.rel.join(d),
                    _ => {}
                }
            }
            "sed" => {
                let in_place = known.iter().any(|a| {
                    a == "--in-place"
                        || a.starts_with("--in-place=")
                        || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('i'))
                });
                if in_place {
                    let scripted = known.iter().any(|a| {
                        a == "-e" || a == "-f" || a.starts_with("--expression") || a == "--file"
                    });
                    let ops = sed_operands(&known);
                    let files = if scripted {
                        &ops[..]
                    } else {
                        ops.get(1..).unwrap_or(&[])
                    };
                    for f in files.to_vec() {
                        self.push(&f);
                    }
                }
            }
            "tee" | "rm" | "unlink" | "touch" | "rmdir" | "shred" => {
                for f in operands(&known) {
                    self.push(&f);
                }
            }
            "truncate" => {
                let ops = operands_skipping(&known, &["-s", "--size", "-r", "--reference"]);
                for f in ops {
                    self.push(&f);
                }
            }
            "cp" | "mv" | "install" | "ln" => self.copy(&name, &known),
            "git" => self.git(&known, stdin),
            "patch" => self.patch(&known, stdin),
            _ => {}
        }
    }

    fn copy(&mut self, name: &str, args: &[String]) {
        let mut target_dir: Option<String> = None;
        let mut no_target_dir = false;
        let mut ops = Vec::new();
        let mut it = args.iter();
        let mut end = false;
        while let Some(a) = it.next() {
            if end || !a.starts_with('-') || a == "-" {
                ops.push(a.clone());
            } else if a == "--" {
                end = true;
            } else if a == "-t" || a == "--target-directory" {
                target_dir = it.next().cloned();
            } else if let Some(d) = a.strip_prefix("--target-directory=") {
                target_dir = Some(d.to_string());
            } else if a == "-T" || a == "--no-target-directory" {
                no_target_dir = true;
            } else if matches!(
                a.as_str(),
                "-S" | "--suffix" | "-m" | "--mode" | "-o" | "-g"
            ) {
                it.next();
            }
        }
        let (sources, dest) = match target_dir {
            Some(d) => (ops, Some((d, true))),
            None => match ops.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    let is_dir =
                        !no_target_dir && (rest.len() > 1 || self.here().join(last).is_dir());
                    (rest.to_vec(), Some((last.clone(), is_dir)))
                }
                _ => (Vec::new(), None),
            },
        };
        if let Some((dest, is_dir)) = dest {
            if is_dir {
                for s in &sources {
                    if let Some(base) = Path::new(s).file_name() {
                        let p = Path::new(&dest).join(base);
                        self.push(&p.to_string_lossy());
                    }
                }
            } else {
                self.push(&dest);
            }
        }
        if name == "mv" {
            for s in sources {
                self.push(&s);
            }
        }
    }

    fn git(&mut self, args: &[String], stdin: Option<&str>) {
        // Global options before the subcommand: -C DIR moves the paths, -c K=V is skipped.
        let mut i = 0;
        let saved = self.rel.clone();
        while i < args.len() && args[i].starts_with('-') {
            match args[i].as_str() {
                "-C" => {
                    if let Some(d) = args.get(i + 1) {
                        self.rel = self.rel.join(d);
                    }
                    i += 2;
                }
                "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 2,
                _ => i += 1,
            }
        }
        let Some(sub) = args.get(i) else {
            self.rel = saved;
            return;
        };
        let rest = &args[i + 1..];
        match sub.as_str() {
            "checkout" => {
                if let Some(dd) = rest.iter().position(|a| a == "--") {
                    for f in rest[dd + 1..].to_vec() {
                        self.push(&f);
                    }
                }
            }
            "restore" => {
                let staged_only = rest.iter().any(|a| a == "--staged" || a == "-S")
                    && !rest.iter().any(|a| a == "--worktree" || a == "-W");
                if !staged_only {
                    let ops = operands_skipping(rest, &["-s", "--source"]);
                    for f in ops {
                        self.push(&f);
                    }
                }
            }
            "rm" | "mv" => {
                for f in operands(rest) {
                    self.push(&f);
                }
            }
            "apply" => {
                let cached = rest.iter().any(|a| a == "--cached" || a == "--index");
                let check_only = rest.iter().any(|a| a == "--check" || a == "--stat");
                if !check_only || cached {
                    let strip = strip_level(rest).unwrap_or(1);
                    let files =
                        operands_skipping(rest, &["-p", "--directory", "--exclude", "--include"]);
                    let texts: Vec<String> = if files.is_empty() {
                        stdin.map(str::to_string).into_iter().collect()
                    } else {
                        files
                            .iter()
                            .filter_map(|f| std::fs::read_to_string(self.here().join(f)).ok())
                            .collect()
                    };
                    for t in texts {
                        for f in diff_targets(&t, strip) {
                            self.push(&f);
                        }
                    }
                }
            }
            _ => {}
        }
        self.rel = saved;
    }

    fn patch(&mut self, args: &[String], stdin: Option<&str>) {
        let mut input: Option<String> = None;
        let mut it = args.iter();
        let mut ops = Vec::new();
        let mut dry = false;
        while let Some(a) = it.next() {
            if a == "-i" || a == "--input" {
                input = it.next().cloned();
            } else if let Some(f) = a.strip_prefix("--input=") {
                input = Some(f.to_string());
            } else if a == "--dry-run" {
                dry = true;
            } else if matches!(
                a.as_str(),
                "-p" | "-d"
                    | "--directory"
                    | "-o"
                    | "--output"
                    | "-r"
                    | "-B"
                    | "-z"
                    | "-D"
                    | "-F"
                    | "-V"
            ) {
                it.next();
            } else if !a.starts_with('-') {
                ops.push(a.clone());
            }
        }
        if dry {
            return;
        }
        // `patch FILE [PATCHFILE]`: FILE is what it writes.
        if let Some(f) = ops.first() {
            self.push(&f.clone());
            return;
        }
        let text = match input {
            Some(f) => std::fs::read_to_string(self.here().join(f)).ok(),
            None => stdin.map(str::to_string),
        };
        let strip = strip_level(args).unwrap_or(0);
        for f in text.map(|t| diff_targets(&t, strip)).unwrap_or_default() {
            self.push(&f);
        }
    }
}

/// `-pN` / `-p N` / `--strip=N`.
fn strip_level(args: &[String]) -> Option<usize> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-p" || a == "--strip" {
            return it.next().and_then(|n| n.parse().ok());
        }
        if let Some(n) = a.strip_prefix("--strip=").or_else(|| a.strip_prefix("-p")) {
            return n.parse().ok();
        }
    }
    None
}

/// The files a unified or git diff writes: its `+++` paths (and the `---` paths of deletions,
/// renames' sources), with `strip` leading components removed.
pub fn diff_targets(text: &str, strip: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut minus: Option<String> = None;
    let clean = |p: &str| -> Option<String> {
        let p = p.split('\t').next().unwrap_or(p).trim();
        let p = p.trim_matches('"');
        if p == "/dev/null" || p.is_empty() {
            return None;
        }
        let parts: Vec<&str> = p.split('/').collect();
        if parts.len() <= strip {
            return None;
        }
        Some(parts[strip..].join("/"))
    };
    let add = |p: Option<String>, out: &mut Vec<String>| {
        if let Some(p) = p
            && !out.contains(&p)
        {
            out.push(p);
        }
    };
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("--- ") {
            minus = Some(p.to_string());
        } else if let Some(p) = line.strip_prefix("+++ ") {
            let plus = clean(p);
            if plus.is_none() {
                add(minus.as_deref().and_then(clean), &mut out); // a deletion
            }
            add(plus, &mut out);
            minus = None;
        } else if let Some(p) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
        {
            // git's rename headers carry no a/ b/ prefix.
            if !out.iter().any(|o| o == p) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// The non-option arguments (everything after `--` counts).
fn operands(args: &[String]) -> Vec<String> {
    operands_skipping(args, &[])
}

/// The non-option arguments, where each option in `with_value` takes the next argument.
fn operands_skipping(args: &[String], with_value: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    let mut end = false;
    while let Some(a) = it.next() {
        if end || !a.starts_with('-') || a == "-" {
            if a != "-" {
                out.push(a.clone());
            }
        } else if a == "--" {
            end = true;
        } else if with_value.contains(&a.as_str()) {
            it.next();
        }
    }
    out
}

/// sed's operands: options `-e SCRIPT`, `-f FILE`, `-l N` take a value.
fn sed_operands(args: &[String]) -> Vec<String> {
    operands_skipping(
        args,
        &["-e", "-f", "-l", "--expression", "--file", "--line-length"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(cmd: &str) -> Vec<String> {
        written_paths(cmd, Path::new("/nonexistent-dir"))
            .unwrap()
            .paths
    }

    #[test]
    fn redirections_and_common_writers() {
        assert_eq!(w("echo hi > a.txt"), vec!["a.txt"]);
        assert_eq!(w("echo hi >> 'b c.txt' 2>/dev/null"), vec!["b c.txt"]);
        assert_eq!(w("cat <<EOF > out.rs\nfn main() {}\nEOF"), vec!["out.rs"]);
        assert_eq!(
            w("sed -i 's/a/b/' src/x.rs src/y.rs"),
            vec!["src/x.rs", "src/y.rs"]
        );
        assert_eq!(w("sed -n 's/a/b/p' src/x.rs"), Vec::<String>::new());
        assert_eq!(w("sed -i.bak -e 's/a/b/' f"), vec!["f"]);
        assert_eq!(w("ls | tee -a log.txt"), vec!["log.txt"]);
        assert_eq!(w("cp a.rs b.rs"), vec!["b.rs"]);
        assert_eq!(w("mv old.rs new.rs"), vec!["new.rs", "old.rs"]);
        assert_eq!(w("cp a b dir"), vec!["dir/a", "dir/b"]);
        assert_eq!(w("rm -rf src/keep build"), vec!["src/keep", "build"]);
        assert_eq!(w("git checkout HEAD -- src/a.rs"), vec!["src/a.rs"]);
        assert_eq!(w("git checkout main"), Vec::<String>::new());
        assert_eq!(w("cd sub && echo x > f"), vec!["sub/f"]);
        assert_eq!(w("bash -c 'echo x > inner.txt'"), vec!["inner.txt"]);
        assert_eq!(w("sudo -E tee /etc/x < /dev/null"), vec!["/etc/x"]);
        assert_eq!(
            w("echo $X > \"$OUT\""),
            Vec::<String>::new(),
            "run-time paths are unknowable"
        );
        assert_eq!(w("ls -la; cat a.rs | grep x"), Vec::<String>::new());
        assert!(written_paths("echo 'unterminated", Path::new("/")).is_err());
    }

    #[test]
    fn patches() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-x\n+y\n--- a/gone.rs\n+++ /dev/null\n";
        assert_eq!(diff_targets(diff, 1), vec!["src/a.rs", "gone.rs"]);
        assert_eq!(
            w(&format!("git apply <<'EOF'\n{diff}EOF")),
            vec!["src/a.rs", "gone.rs"]
        );
        assert_eq!(
            w(&format!("patch -p1 <<'EOF'\n{diff}EOF")),
            vec!["src/a.rs", "gone.rs"]
        );
        assert_eq!(w("patch src/a.rs fix.patch"), vec!["src/a.rs"]);
    }
}
