//! The house's floor plan, kept by a test: dependencies point one way, faces → domains → store →
//! base. The compiler already keeps two walls (the faces live in the binary crate, the store and
//! the base utilities in `crates/conductor-store`); this test keeps the walls between the domains
//! inside the library: the core protocol imports no extension domain, and no extension domain
//! imports another (each may use the protocol; `app` is the one place that lists them all).

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
            let other_domain = DOMAINS.contains(&module.as_str()) && module != *domain;
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
