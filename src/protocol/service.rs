//! The protocol's transactions over the store: read the state, run a pure operation of
//! [`super::ops`] on it under `status.lock`, and commit the state, its ledger lines and its
//! events together. Every face (the CLI, the hooks, the servers) goes through here.
//!
//! Each transaction first reconciles what other programs wrote to `status.json` since conductor
//! last committed it ([`super::foreign`]), inside the same lock, so the original plugin's jq
//! recipes and conductor agree on every claim.

use std::path::PathBuf;

use super::codec;
use super::ops::{self, Effect};
use super::{Sprint, State};
use crate::error::Result;
use crate::schema::Schema;
use crate::store::txn::LastWriter;
use crate::store::{Document, LedgerFile, Lock, Store, Tx, atomic, ledger};
use crate::time::Timestamp;

/// How many copies of status.json as other programs left it are kept.
pub const FOREIGN_COPIES_KEPT: usize = 20;

/// `history.jsonl`: finished tasks.
pub const HISTORY: LedgerFile = LedgerFile {
    name: "history.jsonl",
    lock: Lock::Status,
};
/// `conflicts.log`: conflicts, resolutions, forced takeovers, releases.
pub const CONFLICTS: LedgerFile = LedgerFile {
    name: "conflicts.log",
    lock: Lock::Status,
};

/// The protocol's append-only files in the home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ledger {
    /// `history.jsonl`
    History,
    /// `conflicts.log`
    Conflicts,
}

impl Ledger {
    fn file(self) -> LedgerFile {
        match self {
            Ledger::History => HISTORY,
            Ledger::Conflicts => CONFLICTS,
        }
    }
}

/// The protocol state, without locking. A missing file is an empty state.
pub fn read(store: &Store, now: Timestamp) -> Result<State> {
    Ok(store.read_doc(now)?)
}

/// The protocol state for a quick read-only decision (agent hooks, prompt). No lock.
pub fn read_unvalidated(store: &Store, now: Timestamp) -> Result<State> {
    read_quick(store, now, codec::decode_quick)
}

/// The protocol state as a decision over `global_claims` needs it (an agent's edit hook), without
/// each instance's own claim lists: see [`Glance`]. No lock.
pub fn glance(store: &Store, now: Timestamp) -> Result<Glance> {
    read_quick(store, now, |path, bytes| {
        super::types::de::glancing(|| codec::decode_quick(path, bytes))
    })
    .map(Glance)
}

/// A state read for one lock-free decision: who holds which path, and each instance's
/// registration, but with every instance's `files_claimed` and `claim_tokens` left empty (their
/// JSON parsed, not kept). Half the decode of `status.json` at 1,000 claims (issue 35). It can
/// only be read: every change goes through [`transact`], which reads the whole state again under
/// the lock.
pub struct Glance(State);

impl std::ops::Deref for Glance {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl Glance {
    /// Add the worktrees the decision is about ([`State::repos`], never written).
    pub fn merge_repos(&mut self, repos: &super::worktrees::Worktrees) {
        self.0.repos.merge(repos);
    }
}

fn read_quick(
    store: &Store,
    now: Timestamp,
    decode: impl FnOnce(&std::path::Path, &[u8]) -> Result<State>,
) -> Result<State> {
    let path = store.home().status();
    let mut st = if store.state_in_files() {
        match store.read_file(<State as Document>::FILE)? {
            None => return Ok(State::empty(now)),
            Some(bytes) => decode(&path, &bytes)?,
        }
    } else {
        // A shared store's state may be paged (issue 36 §2): read as the type says; only
        // conductor writes there, so no key needs interpreting.
        store.read_doc::<State>(now)?
    };
    // Keys another program wrote through a symlink are decided on where they lead. The map
    // only says how a spelling resolves, so a snapshot of it is never wrong to apply. (Read as
    // bytes: the read above already finished any commit a crashed writer left.)
    use super::aliases::KeyAliases;
    if store.other_writers()
        && let Ok(Some(bytes)) = store.read_doc_bytes(<KeyAliases as Document>::FILE)
        && let Ok(known) = <KeyAliases as Document>::decode(
            &store.home().dir().join(<KeyAliases as Document>::FILE),
            &bytes,
        )
    {
        super::aliases::to_resolved(&mut st, &known.aliases);
    }
    Ok(st)
}

/// `sprint.json`, if present (validated).
pub fn sprint(store: &Store) -> Result<Option<Sprint>> {
    crate::schema::read_doc(&store.home().sprint(), Schema::Sprint)
}

/// Run a protocol operation on the state under `status.lock` and persist what it did: the
/// state if it changed, its ledger lines and its events, in one atomic commit.
pub fn transact<T>(
    store: &Store,
    now: Timestamp,
    mut op: impl FnMut(&mut State, &mut Vec<Effect>) -> Result<T>,
) -> Result<T> {
    transact_tx(store, now, |st, fx, _| op(st, fx))
}

/// [`transact`], the operation also given the transaction, to read and write the other
/// documents `status.lock` guards (`landing.json`: [`super::landing`]) in the same commit.
pub fn transact_tx<T>(
    store: &Store,
    now: Timestamp,
    op: impl FnMut(&mut State, &mut Vec<Effect>, &mut Tx) -> Result<T>,
) -> Result<T> {
    transact_reading(store, now, true, op)
}

/// [`transact_tx`] for an operation that reads only the claims it names: where a shared store
/// keeps the state in pages, the operation gets the state without its file and directory claims
/// (globs and every registration are there) and loads those its decision reads with
/// [`super::paged::load_claims`] before deciding anything. Everywhere else the state is whole.
pub fn transact_claims<T>(
    store: &Store,
    now: Timestamp,
    op: impl FnMut(&mut State, &mut Vec<Effect>, &mut Tx) -> Result<T>,
) -> Result<T> {
    transact_reading(store, now, false, op)
}

fn transact_reading<T>(
    store: &Store,
    now: Timestamp,
    whole: bool,
    mut op: impl FnMut(&mut State, &mut Vec<Effect>, &mut Tx) -> Result<T>,
) -> Result<T> {
    store.transaction(now, &[Lock::Status], |tx| {
        use super::aliases::{self, KeyAliases};
        use super::foreign::{self, Seen};
        // Only conductor writes a shared store: nothing to compare with another program's.
        let (mut state, last_writer) = if whole || store.other_writers() {
            tx.read_tracked::<State>()?
        } else {
            (tx.read_head::<State>()?, LastWriter::Conductor)
        };
        // Keys another program wrote through a symlink: resolved for the operation, written
        // back as they were (see `protocol::aliases`). Only conductor writes a shared store's
        // keys: no other program's spellings there.
        let known: KeyAliases = if store.other_writers() {
            tx.read()?
        } else {
            KeyAliases::default()
        };
        let mut applied = Vec::new();
        let last_writer = match last_writer {
            LastWriter::Conductor if known.damaged => LastWriter::Other(None),
            LastWriter::Conductor => {
                applied = aliases::to_resolved(&mut state, &known.aliases);
                LastWriter::Conductor
            }
            LastWriter::Other(mut previous) => {
                if let Some(p) = previous.as_mut() {
                    aliases::to_resolved(p, &known.aliases);
                }
                LastWriter::Other(previous)
            }
        };
        let seen = match &last_writer {
            LastWriter::Conductor => Seen::Own,
            LastWriter::Other(previous) => Seen::Changed(previous.as_ref()),
        };
        let mut effects = Vec::new();
        let mut resolver = crate::protocol::local::PathNormalizer::new(PathBuf::from("/"));
        let rec = foreign::reconcile(&mut state, seen, now, &mut resolver, &mut effects)?;
        if matches!(seen, Seen::Changed(_)) {
            applied = aliases::applied_in(&state, &rec.aliases);
        }
        crate::protocol::local::note_waits(&mut state);
        let value = op(&mut state, &mut effects, tx)?;
        let kept = aliases::restore(&mut state, &applied);
        if kept != known.aliases || known.damaged {
            tx.write(&KeyAliases {
                aliases: kept,
                damaged: false,
            })?;
        }
        if let Some(suffix) = &rec.keep_copy {
            atomic::keep_beside(&store.home().status(), suffix)?;
            prune_foreign_copies(store);
        }
        // After another program's write, conductor commits even an unchanged state, so the
        // next transaction compares with this one and does not report the same changes again.
        if matches!(seen, Seen::Changed(_)) {
            tx.write(&state)?;
        } else {
            tx.write_if_changed(&state)?;
        }
        stage_effects(tx, now, effects)?;
        if store.is_short_lived() {
            std::mem::forget(state);
        }
        Ok(value)
    })
}

/// Keep the newest [`FOREIGN_COPIES_KEPT`] copies of status.json as another program left it
/// (`status.json.foreign-<time>`): a writer that always claims relative paths would otherwise
/// leave one per claim.
fn prune_foreign_copies(store: &Store) {
    let Ok(entries) = std::fs::read_dir(store.home().dir()) else {
        return;
    };
    let mut copies: Vec<(Option<std::time::SystemTime>, PathBuf)> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("status.json.foreign-")
        })
        .map(|e| (e.metadata().and_then(|m| m.modified()).ok(), e.path()))
        .collect();
    // Oldest first: by when the other program wrote it (a copy is a hard link), then name.
    copies.sort();
    let excess = copies.len().saturating_sub(FOREIGN_COPIES_KEPT);
    for (_, old) in &copies[..excess] {
        let _ = std::fs::remove_file(old);
    }
}

/// `conductor migrate-store`: move a shared store's `status.json`, written whole by an older
/// conductor, into the paged layout (issue 36 §2; see `store::migrate`). Safe to run twice.
pub fn migrate_store(store: &Store, now: Timestamp) -> Result<crate::store::migrate::Migration> {
    Ok(store.migrate_paged::<State>(now)?)
}

/// Keep `status.json` as `status.json.<stamp>.bak` (if it exists, parseable or not) and write
/// an empty state, under the lock. Returns the backup's path.
pub fn reset(store: &Store, now: Timestamp) -> Result<Option<PathBuf>> {
    store.transaction(now, &[Lock::Status], |tx| {
        let status = store.home().status();
        let backup = if store.state_in_files() && status.exists() {
            Some(atomic::keep_beside(
                &status,
                &format!("{}.bak", now.compact()),
            )?)
        } else {
            None
        };
        // Record what the reset removes, as cleanup would: a history line (outcome `orphaned`)
        // and the events of each instance that can still be read.
        let mut effects = Vec::new();
        if let Ok(mut st) = tx.read::<State>() {
            let ids: Vec<String> = st.instances.iter().map(|i| i.id.clone()).collect();
            for id in ids {
                ops::cleanup(&mut st, 0, Some(&id), now, &ops::AssumeAlive, &mut effects)?;
            }
            for e in &mut effects {
                if let Effect::History(h) = e {
                    h.notes = Some("removed by conductor reset".into());
                }
            }
        }
        tx.write(&State::empty(now))?;
        stage_effects(tx, now, effects)?;
        Ok(backup)
    })
}

/// Stream the lines of one of the protocol's ledgers (see [`ledger::for_each_line`]).
pub fn read_ledger(
    store: &Store,
    which: Ledger,
    f: impl FnMut(usize, ledger::Line) -> Result<bool>,
) -> Result<()> {
    store.read_ledger_file(which.file(), f)
}

/// Stage a protocol operation's effects in a transaction.
pub fn stage_effects(tx: &mut Tx, now: Timestamp, effects: Vec<Effect>) -> Result<()> {
    for e in effects {
        match e {
            Effect::History(h) => tx.append(
                HISTORY,
                serde_json::to_string(&h).expect("history entries serialize"),
            )?,
            Effect::Log { kind, text } => tx.append(
                CONFLICTS,
                super::conflicts_log::LogEntry::format(now, kind, &text),
            )?,
            Effect::Event(ev) => tx.event(ev),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{codec, types::de};

    #[test]
    fn a_glance_keeps_who_holds_what_drops_each_instance_list_and_leaves_later_decodes_whole() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/valid/status-1000-claims.json"
        ));
        let mut whole = codec::decode_quick(path, &std::fs::read(path).unwrap()).unwrap();
        for i in &mut whole.instances {
            i.claim_tokens = (1..)
                .zip(&i.files_claimed)
                .map(|(t, f)| (f.clone(), t))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into();
        }
        let bytes = codec::encode(&whole);
        let whole = codec::decode_quick(path, &bytes).unwrap();
        let glanced = de::glancing(|| codec::decode_quick(path, &bytes)).unwrap();
        assert!(whole.instances.iter().any(|i| !i.files_claimed.is_empty()));
        assert!(whole.instances.iter().any(|i| !i.claim_tokens.is_empty()));
        assert!(glanced.instances.iter().all(|i| i.files_claimed.is_empty()));
        assert!(glanced.instances.iter().all(|i| i.claim_tokens.is_empty()));
        assert_eq!(glanced.global_claims, whole.global_claims);
        let ids = |s: &super::State| s.instances.iter().map(|i| i.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&glanced), ids(&whole));
        // The flag is reset, also after a decode that fails.
        assert!(de::glancing(|| codec::decode_quick(path, b"{")).is_err());
        let again = codec::decode_quick(path, &bytes).unwrap();
        assert_eq!(again.instances, whole.instances);
        // A glance still refuses what is not JSON inside the skipped lists.
        let broken = String::from_utf8(bytes.clone()).unwrap().replacen(
            "\"files_claimed\": [",
            "\"files_claimed\": [,",
            1,
        );
        assert_ne!(broken.as_bytes(), &bytes[..]);
        assert!(de::glancing(|| codec::decode_quick(path, broken.as_bytes())).is_err());
    }
}
