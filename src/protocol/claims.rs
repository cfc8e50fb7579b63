//! What a claim key covers, and whether two keys overlap. Pure: keys are the strings of
//! `global_claims`, decided by their spelling alone (docs/protocol.md, "Claiming directories and globs").
//!
//! - A **file** key is a path: `/w/app/src/main.rs`. It covers that file.
//! - A **directory** key ends with `/`: `/w/app/src/`. It covers everything below it, now and
//!   later (with a shared store, `/@github.com/acme/app:src/`, and `/@github.com/acme/app:` for
//!   the whole repository).
//! - A **glob** key contains `*` or `?`: `/w/app/src/**/*.rs`. It covers every path it matches,
//!   now and later. `?` is one character of a name, `*` any run of characters within a name and
//!   `**` (a whole component) any number of directories. `[`, `]`, `{`, `}` and `\` are literal
//!   characters (file names like `app/[id]/page.tsx` are common), so the overlap of two globs is
//!   a question about two regular languages that is always decided exactly, unless the patterns
//!   are too large to compare within [`OVERLAP_BUDGET`], when the keys are taken as overlapping.
//!
//! A glob key that cannot be compiled (another program wrote `**` inside a name) covers all of
//! the directory its wildcards start in: too much is safer than too little.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

/// The kind of a claim key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Glob,
}

/// The kind of `key`, by its spelling.
pub fn kind(key: &str) -> Kind {
    if is_glob(key) {
        Kind::Glob
    } else if key.ends_with('/') || (key.starts_with("/@") && key.ends_with(':')) {
        Kind::Dir
    } else {
        Kind::File
    }
}

/// True when `s` contains a wildcard (`*` or `?`).
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// The literal directory part of a glob key (up to and including the `/` before its first
/// wildcard component) and the pattern after it: `/w/src/**/*.rs` is `("/w/src/", "**/*.rs")`.
pub fn split_glob(key: &str) -> (&str, &str) {
    let first = key.find(['*', '?']).unwrap_or(key.len());
    let cut = key[..first].rfind('/').map_or(0, |i| i + 1);
    (&key[..cut], &key[cut..])
}

/// Check a glob's pattern part (after its literal directory) as typed by a user: `**` only as a
/// whole component, no `..`, no empty component. The one-line reason when it is refused.
pub fn check_pattern(rest: &str) -> Result<(), String> {
    for c in rest.split('/') {
        if c.is_empty() {
            return Err("it has an empty path component (`//` or a trailing `/`)".into());
        }
        if c == ".." || c == "." {
            return Err(format!(
                "`{c}` after a wildcard has no single meaning; put it before the first wildcard"
            ));
        }
        if c.contains("**") && c != "**" {
            return Err("`**` must be a whole path component, as in `src/**/*.rs`".into());
        }
    }
    Ok(())
}

/// Does one claim key overlap another?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    No,
    Yes,
    /// Too large to decide within [`OVERLAP_BUDGET`]: taken as overlapping.
    Undecided,
}

impl Overlap {
    /// True unless the keys are known not to overlap.
    pub fn conflicts(self) -> bool {
        self != Overlap::No
    }
}

/// The most pairs of pattern positions compared when deciding whether two globs overlap.
pub const OVERLAP_BUDGET: usize = 200_000;

/// Whether some path is covered by both `a` and `b`.
pub fn overlap(a: &str, b: &str) -> Overlap {
    if a == b {
        return Overlap::Yes;
    }
    match (effective(a), effective(b)) {
        (Eff::File(x), Eff::File(y)) => yes(x == y),
        (Eff::Dir(d), Eff::File(f)) | (Eff::File(f), Eff::Dir(d)) => yes(f.starts_with(d)),
        (Eff::Dir(x), Eff::Dir(y)) => yes(x.starts_with(y) || y.starts_with(x)),
        (Eff::Glob(g), Eff::File(f)) | (Eff::File(f), Eff::Glob(g)) => yes(glob_matches(g, f)),
        (Eff::Glob(g), Eff::Dir(d)) | (Eff::Dir(d), Eff::Glob(g)) => {
            intersect(&Nfa::glob(g), &Nfa::below(d))
        }
        (Eff::Glob(x), Eff::Glob(y)) => intersect(&Nfa::glob(x), &Nfa::glob(y)),
    }
}

fn yes(b: bool) -> Overlap {
    if b { Overlap::Yes } else { Overlap::No }
}

/// True when `key` covers the path `file` (a file key).
pub fn covers(key: &str, file: &str) -> bool {
    match effective(key) {
        Eff::File(k) => k == file,
        Eff::Dir(d) => file.starts_with(d) && file != d,
        Eff::Glob(g) => glob_matches(g, file),
    }
}

enum Eff<'a> {
    File(&'a str),
    Dir(&'a str),
    Glob(&'a str),
}

/// How a key is taken: a glob that is not well formed covers its literal directory.
fn effective(key: &str) -> Eff<'_> {
    match kind(key) {
        Kind::File => Eff::File(key),
        Kind::Dir => Eff::Dir(key),
        Kind::Glob => {
            let (dir, rest) = split_glob(key);
            if rest.split('/').all(|c| !c.contains("**") || c == "**") {
                Eff::Glob(key)
            } else {
                Eff::Dir(dir)
            }
        }
    }
}

/// The glob `key` in `globset`'s syntax: only `*`, `?` and `**` are special, `*` and `?` never
/// match `/`.
pub fn glob_matcher(key: &str) -> Option<globset::GlobMatcher> {
    let mut pat = String::with_capacity(key.len() + 8);
    for c in key.chars() {
        match c {
            '[' | ']' | '{' | '}' | '\\' | '!' => {
                pat.push('[');
                pat.push(c);
                pat.push(']');
            }
            _ => pat.push(c),
        }
    }
    globset::GlobBuilder::new(&pat)
        .literal_separator(true)
        .backslash_escape(false)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

fn glob_matches(key: &str, file: &str) -> bool {
    match glob_matcher(key) {
        Some(m) => m.is_match(file),
        // Not compilable: covers its literal directory.
        None => file.starts_with(split_glob(key).0),
    }
}

/// The keys of `claims` that overlap `key`, with their holders and how they overlap. Quick on
/// large maps: file and directory keys are found by prefix, only glob keys are compared one by one.
pub fn overlapping<'a>(
    claims: &'a BTreeMap<String, String>,
    globs: &[String],
    key: &str,
) -> Vec<(&'a str, &'a str, Overlap)> {
    let mut out: Vec<(&str, &str, Overlap)> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut push = |k: &'a str, h: &'a str, o: Overlap, out: &mut Vec<_>| {
        if o.conflicts() && seen.insert(k) {
            out.push((k, h, o));
        }
    };
    // The literal directory the key's paths all lie in (the key itself for a file).
    let base: &str = match kind(key) {
        Kind::Glob => split_glob(key).0,
        _ => key,
    };
    // Directory keys above it (a repository's root too: `/@<repository>:`).
    for dir in dirs_above(base) {
        if let Some((k, h)) = claims.get_key_value(dir) {
            push(k, h, overlap(k, key), &mut out);
        }
    }
    // Keys at or below it.
    if kind(key) != Kind::File {
        for (k, h) in claims.range::<str, _>((Bound::Included(base), Bound::Unbounded)) {
            if !k.starts_with(base) {
                break;
            }
            if kind(k) != Kind::Glob {
                push(k, h, overlap(k, key), &mut out);
            }
        }
    } else if let Some((k, h)) = claims.get_key_value(key) {
        push(k, h, Overlap::Yes, &mut out);
    }
    for g in globs {
        if let Some((k, h)) = claims.get_key_value(g.as_str()) {
            push(k, h, overlap(k, key), &mut out);
        }
    }
    out
}

/// The directory keys that would hold `base`: every prefix ending in `/`, and on a shared store
/// (`/@...` keys) every prefix ending in `:`, which names a repository's root (`claim .`).
pub fn dirs_above(base: &str) -> impl Iterator<Item = &str> {
    let repo = base.starts_with("/@");
    base.char_indices()
        .filter(move |(_, c)| *c == '/' || (repo && *c == ':'))
        .map(move |(i, _)| &base[..=i])
}

/// The glob keys of `claims`.
pub fn glob_keys(claims: &BTreeMap<String, String>) -> Vec<&str> {
    claims
        .keys()
        .filter(|k| is_glob(k))
        .map(String::as_str)
        .collect()
}

/// One transition label: a character class.
#[derive(Clone, Copy, Debug)]
enum Class {
    Lit(char),
    /// Any character but `/`.
    Name,
    /// Any character.
    Any,
}

fn meet(a: Class, b: Class) -> bool {
    match (a, b) {
        (Class::Lit(x), Class::Lit(y)) => x == y,
        (Class::Lit(c), Class::Name) | (Class::Name, Class::Lit(c)) => c != '/',
        _ => true,
    }
}

/// A nondeterministic automaton over characters: what a glob matches.
#[derive(Debug, Default)]
struct Nfa {
    edges: Vec<Vec<(Class, usize)>>,
    eps: Vec<Vec<usize>>,
    accept: usize,
}

impl Nfa {
    fn state(&mut self) -> usize {
        self.edges.push(Vec::new());
        self.eps.push(Vec::new());
        self.edges.len() - 1
    }

    /// The paths strictly below directory `dir` (which ends with `/`).
    fn below(dir: &str) -> Nfa {
        let mut n = Nfa::default();
        let mut s = n.state();
        for c in dir.chars() {
            let t = n.state();
            n.edges[s].push((Class::Lit(c), t));
            s = t;
        }
        let t = n.state();
        n.edges[s].push((Class::Any, t));
        n.edges[t].push((Class::Any, t));
        n.accept = t;
        n
    }

    /// The paths glob `key` matches (well formed: `**` only as a whole component), with
    /// globset's meaning: `/**/` is `/` or `/…/`, a final `/**` is `/` and anything.
    fn glob(key: &str) -> Nfa {
        let mut n = Nfa::default();
        let mut s = n.state();
        let comps: Vec<&str> = key.split('/').collect();
        let mut skip_sep = false;
        for (i, comp) in comps.iter().enumerate() {
            if i > 0 && !skip_sep {
                let t = n.state();
                n.edges[s].push((Class::Lit('/'), t));
                s = t;
            }
            skip_sep = false;
            if *comp == "**" {
                if i + 1 == comps.len() {
                    // A final `/**`: anything.
                    n.edges[s].push((Class::Any, s));
                } else {
                    // `**/`: nothing, or anything ending in `/` (which stands for the separator).
                    let mid = n.state();
                    let end = n.state();
                    n.eps[s].push(end);
                    n.eps[s].push(mid);
                    n.edges[mid].push((Class::Any, mid));
                    n.edges[mid].push((Class::Lit('/'), end));
                    s = end;
                    skip_sep = true;
                }
                continue;
            }
            for c in comp.chars() {
                match c {
                    '*' => {
                        // A fresh state, so the loop cannot be re-entered after what follows.
                        let t = n.state();
                        n.eps[s].push(t);
                        n.edges[t].push((Class::Name, t));
                        s = t;
                    }
                    '?' => {
                        let t = n.state();
                        n.edges[s].push((Class::Name, t));
                        s = t;
                    }
                    c => {
                        let t = n.state();
                        n.edges[s].push((Class::Lit(c), t));
                        s = t;
                    }
                }
            }
        }
        n.accept = s;
        n
    }

    fn closure(&self, s: usize, out: &mut Vec<usize>) {
        let mut stack = vec![s];
        while let Some(x) = stack.pop() {
            if !out.contains(&x) {
                out.push(x);
                stack.extend(&self.eps[x]);
            }
        }
    }
}

/// Whether two automata accept a common string, exploring at most [`OVERLAP_BUDGET`] pairs.
fn intersect(a: &Nfa, b: &Nfa) -> Overlap {
    let mut seen: HashSet<(usize, usize)> = HashSet::new();
    let mut todo = Vec::new();
    let pairs = |x: usize, y: usize| {
        let (mut cx, mut cy) = (Vec::new(), Vec::new());
        a.closure(x, &mut cx);
        b.closure(y, &mut cy);
        let mut v = Vec::new();
        for &p in &cx {
            for &q in &cy {
                v.push((p, q));
            }
        }
        v
    };
    for p in pairs(0, 0) {
        if seen.insert(p) {
            todo.push(p);
        }
    }
    while let Some((p, q)) = todo.pop() {
        if p == a.accept && q == b.accept {
            return Overlap::Yes;
        }
        if seen.len() > OVERLAP_BUDGET {
            return Overlap::Undecided;
        }
        for &(ca, ta) in &a.edges[p] {
            for &(cb, tb) in &b.edges[q] {
                if meet(ca, cb) {
                    for pair in pairs(ta, tb) {
                        if seen.insert(pair) {
                            todo.push(pair);
                        }
                    }
                }
            }
        }
    }
    Overlap::No
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(a: &str, b: &str) -> Overlap {
        let o = overlap(a, b);
        assert_eq!(o, overlap(b, a), "overlap is symmetric: {a} {b}");
        o
    }

    #[test]
    fn kinds_by_spelling() {
        assert_eq!(kind("/w/a.rs"), Kind::File);
        assert_eq!(kind("/w/src/"), Kind::Dir);
        assert_eq!(kind("/@github.com/acme/app:"), Kind::Dir);
        assert_eq!(kind("/@github.com/acme/app:src/"), Kind::Dir);
        assert_eq!(kind("/w/src/**/*.rs"), Kind::Glob);
        assert_eq!(kind("/w/app/[id]/page.tsx"), Kind::File);
        assert_eq!(split_glob("/w/src/**/*.rs"), ("/w/src/", "**/*.rs"));
        assert_eq!(split_glob("/w/a?.rs"), ("/w/", "a?.rs"));
    }

    #[test]
    fn directories_cover_everything_below_in_both_directions() {
        assert_eq!(ov("/w/src/", "/w/src/a.rs"), Overlap::Yes);
        assert_eq!(ov("/w/src/", "/w/src/deep/er/a.rs"), Overlap::Yes);
        assert_eq!(ov("/w/src/", "/w/src/deep/"), Overlap::Yes);
        assert_eq!(ov("/w/src/", "/w/srcx/a.rs"), Overlap::No);
        assert_eq!(ov("/w/src/", "/w/src"), Overlap::No);
        assert_eq!(ov("/w/src/", "/w/lib/"), Overlap::No);
        assert!(covers("/@r:", "/@r:src/a.rs"));
        assert!(!covers("/w/src/", "/w/src/"));
    }

    #[test]
    fn globs_cover_what_they_match() {
        assert!(covers("/w/src/**/*.rs", "/w/src/a.rs"));
        assert!(covers("/w/src/**/*.rs", "/w/src/x/y/a.rs"));
        assert!(!covers("/w/src/**/*.rs", "/w/src/a.ts"));
        assert!(!covers("/w/src/*.rs", "/w/src/x/a.rs"));
        assert!(covers("/w/a?.rs", "/w/ab.rs"));
        assert!(!covers("/w/a?.rs", "/w/a/.rs"));
        // Brackets are literal (Next.js routes).
        assert!(covers("/w/app/[id]/*.tsx", "/w/app/[id]/page.tsx"));
        assert!(!covers("/w/app/[id]/*.tsx", "/w/app/i/page.tsx"));
        assert!(covers("/w/src/**", "/w/src/a/b"));
        assert!(!covers("/w/src/**", "/w/src"));
    }

    #[test]
    fn glob_overlaps_are_decided() {
        assert_eq!(ov("/w/src/**/*.rs", "/w/src/*.rs"), Overlap::Yes);
        assert_eq!(ov("/w/src/**/*.rs", "/w/src/**/*.ts"), Overlap::No);
        assert_eq!(ov("/w/*/a.rs", "/w/src/*"), Overlap::Yes);
        assert_eq!(ov("/w/*/a.rs", "/w/*/b.rs"), Overlap::No);
        assert_eq!(ov("/w/a*", "/w/*b"), Overlap::Yes);
        assert_eq!(ov("/w/a*/x", "/w/b*/x"), Overlap::No);
        assert_eq!(ov("/w/**/x", "/w/x"), Overlap::Yes);
        assert_eq!(ov("/w/?", "/w/??"), Overlap::No);
        // With a directory: a file of the glob below it.
        assert_eq!(ov("/w/**/*.rs", "/w/src/"), Overlap::Yes);
        assert_eq!(ov("/w/*.rs", "/w/src/"), Overlap::No);
        assert_eq!(ov("/w/src/**/*.rs", "/w/"), Overlap::Yes);
        assert_eq!(ov("/v/**", "/w/"), Overlap::No);
    }

    #[test]
    fn too_large_to_compare_is_taken_as_overlapping() {
        let a = format!("/w/{}x", "*a".repeat(600));
        let b = format!("/w/{}y", "a*".repeat(600));
        assert_eq!(ov(&a, &b), Overlap::Undecided);
        assert!(Overlap::Undecided.conflicts());
    }

    #[test]
    fn an_ill_formed_foreign_glob_covers_its_directory() {
        assert!(covers("/w/src/a**b", "/w/src/zzz/q"));
        assert_eq!(ov("/w/src/a**b", "/w/src/x/"), Overlap::Yes);
    }

    #[test]
    fn patterns_typed_by_users_are_checked() {
        assert!(check_pattern("**/*.rs").is_ok());
        assert!(check_pattern("a**").is_err());
        assert!(check_pattern("*/../x").is_err());
        assert!(check_pattern("*//x").is_err());
    }

    #[test]
    fn overlapping_finds_keys_in_every_direction() {
        let mut m = BTreeMap::new();
        for (k, h) in [
            ("/w/src/", "a"),
            ("/w/lib/x.rs", "b"),
            ("/w/lib/y.rs", "c"),
            ("/w/t/**/*.rs", "d"),
            ("/w/u.rs", "e"),
        ] {
            m.insert(k.to_string(), h.to_string());
        }
        let g: Vec<String> = glob_keys(&m).into_iter().map(str::to_string).collect();
        let who = |key: &str| {
            let mut v: Vec<&str> = overlapping(&m, &g, key).iter().map(|x| x.1).collect();
            v.sort();
            v
        };
        assert_eq!(who("/w/src/main.rs"), ["a"]);
        assert_eq!(who("/w/lib/"), ["b", "c"]);
        assert_eq!(who("/w/"), ["a", "b", "c", "d", "e"]);
        assert_eq!(who("/w/t/k/z.rs"), ["d"]);
        assert_eq!(who("/w/*.rs"), ["e"]);
        assert_eq!(who("/w/**/x.rs"), ["a", "b", "d"]);
        assert!(who("/w/t/k/z.ts").is_empty());
    }

    #[test]
    fn a_repositorys_root_claim_covers_every_file_in_it() {
        let mut m = BTreeMap::new();
        m.insert("/@github.com/a/b:".to_string(), "a".to_string());
        let hit = |key: &str| !overlapping(&m, &[], key).is_empty();
        assert!(hit("/@github.com/a/b:src/x.rs"));
        assert!(hit("/@github.com/a/b:src/"));
        assert!(!hit("/@github.com/a/bc:src/x.rs"));
    }
}
