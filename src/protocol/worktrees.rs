//! One repository, many worktrees: the same relative path in two git worktrees of one
//! repository is one file for claims (docs/protocol.md, "Agents in worktrees").
//!
//! Claim keys stay absolute (`status.json` is read and written by the original plugin too), so
//! worktrees are applied when keys are COMPARED, like symlinked spellings ([`super::aliases`]):
//! a key inside a worktree is looked up under each of its [`Worktrees::spellings`], the same
//! path below the root of every worktree of its repository. A held key matches if it overlaps
//! any of them, so a claim of `/w/app/src/x.rs` is refused while `/w/app-b/src/x.rs` is held in
//! a linked worktree `/w/app-b` of the same repository, and the holder keeps its own spelling.
//!
//! Pure: [`super::local`] finds the worktrees of the paths an operation is about (reading the
//! `.git` files, never running git) and hands them over in [`super::State::repos`].

/// One worktree of a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    /// Its root directory: absolute, symlinks resolved, with a final `/`.
    pub root: String,
    /// Its repository: the common git directory (absolute).
    pub repo: String,
    /// Its branch (`refs/heads/X` as `X`); a detached HEAD is its short commit; `None` when
    /// HEAD could not be read.
    pub branch: Option<String>,
}

/// The worktrees known for an operation, of every repository it touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Worktrees {
    trees: Vec<Worktree>,
    /// Paths whose repository could not be followed (a worktree whose main repository was
    /// moved or deleted): keyed by their absolute path alone. One line each, for the person.
    pub warnings: Vec<String>,
}

impl Worktrees {
    /// Record a worktree (once per root).
    pub fn add(&mut self, w: Worktree) {
        if !self.trees.iter().any(|t| t.root == w.root) {
            self.trees.push(w);
        }
    }

    /// Record everything `other` knows.
    pub fn merge(&mut self, other: &Worktrees) {
        for t in &other.trees {
            self.add(t.clone());
        }
        for w in &other.warnings {
            if !self.warnings.contains(w) {
                self.warnings.push(w.clone());
            }
        }
    }

    /// True when no worktree is known.
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }

    /// Every known worktree.
    pub fn all(&self) -> &[Worktree] {
        &self.trees
    }

    /// The worktree `key` lies in (the innermost, when one worktree is nested in another), and
    /// the key relative to its root. A path under the worktree's `.git` is in none: git's own
    /// files are not shared between worktrees.
    pub fn of<'a, 'k>(&'a self, key: &'k str) -> Option<(&'a Worktree, &'k str)> {
        let w = self
            .trees
            .iter()
            .filter(|t| key.starts_with(t.root.as_str()))
            .max_by_key(|t| t.root.len())?;
        let rel = &key[w.root.len()..];
        if rel == ".git" || rel.starts_with(".git/") {
            return None;
        }
        Some((w, rel))
    }

    /// The worktrees of `key`'s repository other than its own.
    pub fn siblings(&self, key: &str) -> Vec<&Worktree> {
        match self.of(key) {
            Some((w, _)) => self
                .trees
                .iter()
                .filter(|t| t.repo == w.repo && t.root != w.root)
                .collect(),
            None => Vec::new(),
        }
    }

    /// `key` itself, then the same path in every other worktree of its repository.
    pub fn spellings(&self, key: &str) -> Vec<String> {
        let mut out = vec![key.to_string()];
        if let Some((w, rel)) = self.of(key) {
            for t in &self.trees {
                if t.repo == w.repo && t.root != w.root {
                    out.push(format!("{}{rel}", t.root));
                }
            }
        }
        out
    }

    /// True when `a` and `b` are the same path in two worktrees of one repository, or one of
    /// them covers the other there (see [`super::claims::overlap`]).
    pub fn overlap(&self, a: &str, b: &str) -> super::claims::Overlap {
        use super::claims::{Overlap, overlap};
        let mut best = Overlap::No;
        for s in self.spellings(a) {
            match overlap(&s, b) {
                Overlap::Yes => return Overlap::Yes,
                Overlap::Undecided => best = Overlap::Undecided,
                Overlap::No => {}
            }
        }
        best
    }

    /// The worktree of held key `held` when it is another worktree than `wanted`'s: what a
    /// conflict names besides the holder.
    pub fn other_worktree(&self, held: &str, wanted: &str) -> Option<&Worktree> {
        let (h, _) = self.of(held)?;
        match self.of(wanted) {
            Some((w, _)) if w.root == h.root => None,
            _ => Some(h),
        }
    }
}

/// The branch a worktree's `HEAD` file names: `ref: refs/heads/X` is `X`, another ref is shown
/// whole, a detached HEAD (a commit id) is its first 7 characters.
pub fn branch_of_head(head: &str) -> Option<String> {
    let head = head.trim();
    if let Some(r) = head.strip_prefix("ref:") {
        let r = r.trim();
        return Some(r.strip_prefix("refs/heads/").unwrap_or(r).to_string());
    }
    if head.len() >= 7 && head.chars().all(|c| c.is_ascii_hexdigit()) {
        return Some(head[..7].to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees() -> Worktrees {
        let mut w = Worktrees::default();
        for (root, repo) in [
            ("/w/app/", "/w/app/.git"),
            ("/w/app-b/", "/w/app/.git"),
            ("/w/app/.wt/c/", "/w/app/.git"),
            ("/w/other/", "/w/other/.git"),
        ] {
            w.add(Worktree {
                root: root.into(),
                repo: repo.into(),
                branch: Some("main".into()),
            });
        }
        w
    }

    #[test]
    fn a_path_is_spelled_in_every_worktree_of_its_repository() {
        let w = trees();
        assert_eq!(
            w.spellings("/w/app-b/src/x.rs"),
            [
                "/w/app-b/src/x.rs",
                "/w/app/src/x.rs",
                "/w/app/.wt/c/src/x.rs"
            ]
        );
        // The innermost worktree holds a nested path.
        assert_eq!(
            w.spellings("/w/app/.wt/c/src/")[1..],
            ["/w/app/src/", "/w/app-b/src/"]
        );
        assert_eq!(w.spellings("/w/other/a.rs"), ["/w/other/a.rs"]);
        assert_eq!(w.spellings("/elsewhere/a.rs"), ["/elsewhere/a.rs"]);
        // git's own files are not shared.
        assert_eq!(w.spellings("/w/app/.git/index"), ["/w/app/.git/index"]);
    }

    #[test]
    fn overlaps_cross_worktrees_but_not_repositories() {
        use crate::protocol::claims::Overlap;
        let w = trees();
        assert_eq!(
            w.overlap("/w/app-b/src/x.rs", "/w/app/src/x.rs"),
            Overlap::Yes
        );
        assert_eq!(w.overlap("/w/app-b/src/x.rs", "/w/app/src/"), Overlap::Yes);
        assert_eq!(w.overlap("/w/app/src/", "/w/app-b/src/x.rs"), Overlap::Yes);
        assert_eq!(
            w.overlap("/w/app-b/src/**/*.rs", "/w/app/src/k/x.rs"),
            Overlap::Yes
        );
        assert_eq!(
            w.overlap("/w/other/src/x.rs", "/w/app/src/x.rs"),
            Overlap::No
        );
        assert_eq!(
            w.overlap("/w/app-b/src/y.rs", "/w/app/src/x.rs"),
            Overlap::No
        );
    }

    #[test]
    fn heads_name_branches_or_commits() {
        assert_eq!(
            branch_of_head("ref: refs/heads/feature/x\n").as_deref(),
            Some("feature/x")
        );
        assert_eq!(
            branch_of_head("0123456789abcdef0123456789abcdef01234567\n").as_deref(),
            Some("0123456")
        );
        assert_eq!(branch_of_head("garbage"), None);
    }
}
