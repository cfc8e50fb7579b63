//! What a claim decision reads of a state kept in pages (a shared store, issue 36 §2): the claims
//! that can overlap the keys it is about. With these loaded, the decision is the one it would be
//! on the whole state ([`super::claims::overlapping`] looks at nothing else), and the commit
//! compares the state's head, so nothing decided on can change before it lands.

use std::collections::BTreeSet;

use super::State;
use super::claims::{self, Kind};
use crate::error::Result;
use crate::store::Tx;

/// Load into `st` every claim that can overlap one of `keys` or a key some instance waits for
/// (a release hands a freed file to its waiters): each key in every worktree of its repository,
/// the directories above it, and everything below it when it is a directory or a glob. Glob
/// claims are always there (the head holds them). Nothing to do where the state is read whole.
pub fn load_claims(tx: &mut Tx, st: &mut State, keys: &[String]) -> Result<()> {
    let (exact, under) = wanted(st, keys);
    let exact: Vec<String> = exact.into_iter().collect();
    let under: Vec<String> = under.into_iter().collect();
    let entries = tx.load_entries::<State>(&exact, &under)?;
    super::codec::absorb(st, std::path::Path::new("status.json"), entries)?;
    Ok(())
}

/// Load every claim into `st` (an operation on all of an instance's claims).
pub fn load_all_claims(tx: &mut Tx, st: &mut State) -> Result<()> {
    let entries = tx.load_entries::<State>(&[], &[String::new()])?;
    super::codec::absorb(st, std::path::Path::new("status.json"), entries)?;
    Ok(())
}

/// The keys whose pages a decision about `keys` reads, and the prefixes read whole.
fn wanted(st: &State, keys: &[String]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut exact = BTreeSet::new();
    let mut under = BTreeSet::new();
    let waited = st
        .instances
        .iter()
        .flat_map(|i| i.waiting_for.iter().map(|w| w.file.clone()));
    for key in keys.iter().cloned().chain(waited) {
        for spelling in st.repos.spellings(&key) {
            let base = match claims::kind(&spelling) {
                Kind::Glob => claims::split_glob(&spelling).0.to_string(),
                _ => spelling.clone(),
            };
            exact.extend(claims::dirs_above(&base).map(str::to_string));
            if claims::kind(&spelling) != Kind::File {
                under.insert(base);
            }
            exact.insert(spelling);
        }
    }
    (exact, under)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_reads_the_key_the_directories_above_and_below_a_directory() {
        let st = State::empty(crate::time::Timestamp::now());
        let (exact, under) = wanted(&st, &["/r/src/a.rs".into(), "/r/lib/".into()]);
        let exact: Vec<&str> = exact.iter().map(String::as_str).collect();
        assert_eq!(
            exact,
            ["/", "/r/", "/r/lib/", "/r/src/", "/r/src/a.rs"],
            "the file, its directories, the directory claim itself"
        );
        assert_eq!(under.into_iter().collect::<Vec<_>>(), ["/r/lib/"]);
        let (_, under) = wanted(&st, &["/r/src/*.rs".into()]);
        assert_eq!(under.into_iter().collect::<Vec<_>>(), ["/r/src/"]);
        // A shared store's repository key: its root (`claim .`) is above every file in it.
        let (exact, _) = wanted(&st, &["/@github.com/a/b:src/x.rs".into()]);
        assert!(exact.contains("/@github.com/a/b:"), "{exact:?}");
    }
}
