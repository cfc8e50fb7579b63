//! The house's floor plan, kept by a test: dependencies point one way, faces → domains → store →
//! base. The compiler already keeps two walls (the faces live in the binary crate, the store and
//! the base utilities in `crates/conductor-store`); this test keeps the walls between the domains
//! inside the library: the core protocol imports no extension domain, and no extension domain
//! imports another (each may use the protocol; `app` is the one place that lists them all). It
//! also keeps the walls the compiler cannot: no domain names a face, the MCP server, the HTTP
//! server and `top` stand on the faces' shared floor (`face/`) and never on another face, and no
//! files import each other in a circle, except the CLI's own dispatch (`cli/` and `commands/`).

use std::path::{Path, PathBuf};

const DOMAINS: &[&str] = &["protocol", "agents", "queue", "workflows", "hooks"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::<module>` path written outside comments in the domain's files, as
/// (file, line number, module).
fn imports(domain: &str) -> Vec<(String, usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let dir = root.join(domain);
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    }
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let module: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                found.push((f.display().to_string(), n + 1, module));
            }
        }
    }
    found
}

#[test]
fn no_domain_reaches_into_another_except_through_the_protocol() {
    let mut wrong = Vec::new();
    for domain in DOMAINS {
        let allowed: &[&str] = match *domain {
            // The core knows no extension.
            "protocol" => &[],
            // The hooks decide over the protocol's state and apply the workflows' rules.
            "hooks" => &["protocol", "workflows"],
            // A workflow worker is a protocol session; so is an agent's run.
            _ => &["protocol"],
        };
        for (file, line, module) in imports(domain) {
            // The integrations stand on the hooks: no domain below may use them (the live
            // checks' verdicts reach a claim through `app::admission`).
            let other_domain = (DOMAINS.contains(&module.as_str()) || module == "integrations")
                && module != *domain;
            if (other_domain && !allowed.contains(&module.as_str())) || module == "app" {
                wrong.push(format!("{file}:{line} uses crate::{module}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies pointing the wrong way:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_protocol_test_above_sees_the_imports_it_checks() {
    // The scan must find the protocol's own imports, or the rule above could never fail.
    let found = imports("protocol");
    assert!(found.iter().any(|(_, _, m)| m == "store"), "{found:?}");
    assert!(imports("queue").iter().any(|(_, _, m)| m == "store"));
}

/// The faces: the CLI (`cli/`, `commands/`), the MCP server, the HTTP server and `top`, over
/// their shared floor (`face/`, `output.rs`), all in the binary crate.
const FACES: &[&str] = &["cli", "commands", "mcp", "serve", "top"];

/// Every `crate::<module>` path in the files of `dir` (a domain or a face folder).
fn imports_of(dir: &str) -> Vec<(String, usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if root.join(format!("{dir}.rs")).is_file() && !root.join(dir).is_dir() {
        let text = std::fs::read_to_string(root.join(format!("{dir}.rs"))).unwrap();
        let mut found = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let module: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                found.push((format!("{dir}.rs"), n + 1, module));
            }
        }
        return found;
    }
    imports(dir)
}

#[test]
fn no_domain_imports_a_face_and_no_face_but_the_cli_imports_another() {
    let mut wrong = Vec::new();
    // The integrations are a domain like the others: `integrate` and `doctor` call them.
    for domain in DOMAINS.iter().chain(&["integrations", "health", "app"]) {
        for (file, line, module) in imports_of(domain) {
            if FACES.contains(&module.as_str()) || module == "face" || module == "output" {
                wrong.push(format!(
                    "{file}:{line} (a domain) uses the face crate::{module}"
                ));
            }
        }
    }
    // The MCP server, the HTTP server and `top` stand on the faces' floor, never on each other
    // or on the CLI (which dispatches to them).
    for face in ["mcp", "serve", "top", "face"] {
        for (file, line, module) in imports_of(face) {
            if FACES.contains(&module.as_str()) && module != face {
                wrong.push(format!(
                    "{file}:{line} (the {face} face) uses crate::{module}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "walls crossed:\n{}", wrong.join("\n"));
}

#[test]
fn the_integrations_use_no_domain_but_the_hooks_agents() {
    let mut wrong = Vec::new();
    for (file, line, module) in imports("integrations") {
        if DOMAINS.contains(&module.as_str()) && module != "hooks" || module == "app" {
            wrong.push(format!("{file}:{line} uses crate::{module}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(imports("integrations").iter().any(|(_, _, m)| m == "hooks"));
}

/// Each source file as its module path (`queue/dispatch`; `mod.rs` is its folder, `lib.rs` and
/// `main.rs` the root), with the modules it names through `crate::`, `super::` or `conductor::`
/// (groups `{a, b::c}` expanded; test modules left out).
fn module_graph() -> std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>
{
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let module_of = |p: &Path| -> Vec<String> {
        let rel = p.strip_prefix(&root).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] {
            parts.clear();
        }
        parts
    };
    let modules: std::collections::BTreeSet<Vec<String>> =
        files.iter().map(|f| module_of(f)).collect();
    // The paths a `use` names after `prefix::`, with `{...}` groups expanded.
    fn expand(prefix: Vec<String>, rest: &str, out: &mut Vec<Vec<String>>) {
        let rest = rest.trim_start();
        if let Some(body) = rest.strip_prefix('{') {
            let (mut depth, mut item, mut items) = (1, String::new(), Vec::new());
            for ch in body.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            items.push(std::mem::take(&mut item));
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        items.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                item.push(ch);
            }
            for it in items {
                let it = it.trim();
                let mut path = prefix.clone();
                let mut s = it;
                loop {
                    let name: String = s
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if name.is_empty() {
                        break;
                    }
                    path.push(name.clone());
                    s = &s[name.len()..];
                    match s.strip_prefix("::") {
                        Some(r) if r.trim_start().starts_with('{') => {
                            expand(path.clone(), r, out);
                            path.clear();
                            break;
                        }
                        Some(r) => s = r,
                        None => break,
                    }
                }
                if !path.is_empty() {
                    out.push(path);
                }
            }
            return;
        }
        let mut path = prefix;
        let mut s = rest;
        loop {
            let name: String = s
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                break;
            }
            s = &s[name.len()..];
            if name == "super" {
                path.pop();
            } else {
                path.push(name);
            }
            match s.strip_prefix("::") {
                Some(r) if r.starts_with('{') => return expand(path, r, out),
                Some(r) => s = r,
                None => break,
            }
        }
        out.push(path);
    }
    let mut graph = std::collections::BTreeMap::new();
    for f in &files {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut named = Vec::new();
        for head in ["crate::", "super::", "conductor::"] {
            for (i, _) in code.match_indices(head) {
                let before = code[..i].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let base = if head == "super::" {
                    me[..me.len().saturating_sub(1)].to_vec()
                } else {
                    Vec::new()
                };
                expand(base, &code[i + head.len()..], &mut named);
            }
        }
        let mut to = std::collections::BTreeSet::new();
        for path in named {
            if let Some(k) = (1..=path.len())
                .rev()
                .find(|k| modules.contains(&path[..*k]))
            {
                if path[..k] != me[..] {
                    to.insert(path[..k].to_vec());
                }
            }
        }
        graph.insert(me, to);
    }
    graph
}

#[test]
fn no_files_import_each_other_in_a_circle_but_the_cli_dispatch() {
    let graph = module_graph();
    // Every file from which `from` is reachable and that `from` reaches: its circle.
    let reach = |from: &Vec<String>| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let cli = |m: &Vec<String>| m.first().is_some_and(|f| f == "cli" || f == "commands");
    let mut wrong = Vec::new();
    for m in graph.keys() {
        if cli(m) {
            continue;
        }
        let mut circle: Vec<String> = reach(m)
            .into_iter()
            .filter(|n| n != m && reach(n).contains(m))
            .map(|n| n.join("/"))
            .collect();
        if !circle.is_empty() {
            circle.sort();
            wrong.push(format!("{} <-> {}", m.join("/"), circle.join(", ")));
        }
    }
    assert!(
        wrong.is_empty(),
        "files in a circle of imports:\n{}",
        wrong.join("\n")
    );
    // The scan sees the CLI's own circle (the dispatch and the commands), or it could not fail.
    let c = vec!["commands".to_string()];
    assert!(
        reach(&c).contains(&vec!["cli".to_string()]),
        "{:?}",
        graph.get(&c)
    );
}

#[test]
fn no_face_file_is_over_400_lines() {
    // A face renders and calls one domain; a file past 400 lines is logic that belongs below.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for face in FACES.iter().chain(&["face"]) {
        let dir = root.join(face);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    assert!(
        files.len() > 50,
        "the scan sees the faces' files: {}",
        files.len()
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 400).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "face files over 400 lines:\n{}",
        long.join("\n")
    );
}
