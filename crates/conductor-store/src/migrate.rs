//! `conductor migrate-store`: move a paged document ([`crate::split`]) of a shared store that an
//! older conductor wrote whole (`doc/<file>`) into the paged layout, in place. Safe to run twice
//! (a paged document is left alone) and beside running commands: the switch is one etcd
//! transaction that happens only if the whole document is still the one that was cut into pages,
//! so a claim made meanwhile makes the migration start again, never lost.

use std::collections::BTreeMap;
use std::path::Path;

use super::txn::{Document, Paged, read_paged};
use super::{Store, etcd, split};
use crate::error::{Error, Result};
use crate::time::Timestamp;

/// What [`Store::migrate_paged`] found and did.
#[derive(Debug, PartialEq)]
pub enum Migration {
    /// A file home: nothing is paged there.
    NotShared,
    /// No state yet: it is written in the paged layout from the start.
    Fresh,
    /// Paged already.
    AlreadyPaged,
    /// Moved: the document's entries, in this many pages.
    Migrated { entries: usize, pages: usize },
}

/// Attempts before giving up on a prefix written faster than it can be moved.
const ATTEMPTS: usize = 20;
/// Pages put per etcd transaction (under its 128 operations).
const PAGES_PER_TXN: usize = 100;

impl Store {
    /// Move `D` into the paged layout (see the module's documentation).
    pub fn migrate_paged<D: Document>(&self, now: Timestamp) -> Result<Migration> {
        let Some(r) = self.backend.etcd() else {
            return Ok(Migration::NotShared);
        };
        for _ in 0..ATTEMPTS {
            let kv = match read_paged::<D>(r, r.read_paged(D::FILE)?, now)? {
                Paged::Paged(_, seen) if seen.head.is_some() => return Ok(Migration::AlreadyPaged),
                Paged::Paged(..) => return Ok(Migration::Fresh),
                Paged::Whole(kv) => kv,
            };
            let doc = D::decode(Path::new(&kv.key), &kv.value)?;
            let cut = doc.split();
            let entries = cut.entries.len();
            let puts = first_pages(r, D::FILE, &cut.entries);
            if moved(r, D::FILE, kv.mod_revision, cut.head, &puts)? {
                return Ok(Migration::Migrated {
                    entries,
                    pages: puts.len(),
                });
            }
        }
        Err(Error::Refused {
            reason: crate::error::Refusal::StoreRefused,
            message: format!(
                "{} changed under every one of {ATTEMPTS} attempts to move it: nothing was moved; run `conductor migrate-store` again when fewer commands run",
                D::FILE
            ),
        })
    }

    /// Write `doc` into a shared store that holds none, in the paged layout (`import`): the
    /// pages in batches, then the head, so a state bigger than one etcd request goes in. A file
    /// home is not paged: nothing to do there (`false`), the caller writes the file.
    pub fn import_paged<D: Document>(&self, doc: &D, now: Timestamp) -> Result<bool> {
        let Some(r) = self.backend.etcd() else {
            return Ok(false);
        };
        let cut = doc.split();
        let puts = first_pages(r, D::FILE, &cut.entries);
        for _ in 0..ATTEMPTS {
            match read_paged::<D>(r, r.read_paged(D::FILE)?, now)? {
                Paged::Paged(_, seen) if seen.head.is_none() => {}
                _ => {
                    return Err(Error::Refused {
                        reason: crate::error::Refusal::TargetNotEmpty,
                        message: format!(
                            "{} already holds {}: nothing was imported",
                            r.url(),
                            D::FILE
                        ),
                    });
                }
            }
            if moved(r, D::FILE, 0, cut.head.clone(), &puts)? {
                return Ok(true);
            }
        }
        Err(Error::Refused {
            reason: crate::error::Refusal::StoreRefused,
            message: format!(
                "{} was written by another command under every one of {ATTEMPTS} attempts to import it",
                D::FILE
            ),
        })
    }
}

/// The pages of `entries` written into a prefix that holds none: `(key, bytes)`.
fn first_pages(
    r: &etcd::Etcd,
    file: &str,
    entries: &BTreeMap<String, serde_json::Value>,
) -> Vec<(String, Vec<u8>)> {
    let prefix = r.split_page_prefix(file);
    split::plan(&BTreeMap::new(), entries, true)
        .into_iter()
        .filter_map(|c| match c {
            split::PageChange::Put(name, bytes) => Some((format!("{prefix}{name}"), bytes)),
            _ => None,
        })
        .collect()
}

/// One attempt: claim the migration, put the pages, then switch (head and tombstone) if the
/// whole document is still at `whole_rev` (0: there is none) and nobody else started a migration
/// since. False: something changed, try again.
fn moved(
    r: &etcd::Etcd,
    file: &str,
    whole_rev: i64,
    head: Vec<u8>,
    pages: &[(String, Vec<u8>)],
) -> Result<bool> {
    let doc_key = r.doc_key(file);
    let mark = format!("{}migrating", r.split_root(file));
    let prefix = r.split_page_prefix(file);
    // Take the migration (pages an interrupted run left are removed with it); any other run's
    // next step then fails on the mark's revision.
    let token = format!("{:016x}", rand::random::<u64>());
    if !r.txn(
        &[(doc_key.clone(), whole_rev), (r.split_head_key(file), 0)],
        &[(mark.clone(), token.clone().into_bytes())],
        &[(prefix.clone(), etcd::prefix_end(&prefix))],
    )? {
        return Ok(false);
    }
    let Some(ours) = r.get(&mark)?.filter(|kv| kv.value == token.as_bytes()) else {
        return Ok(false);
    };
    let compares = [
        (doc_key.clone(), whole_rev),
        (mark.clone(), ours.mod_revision),
    ];
    for batch in pages.chunks(PAGES_PER_TXN) {
        if !r.txn(&compares, batch, &[])? {
            return Ok(false);
        }
    }
    r.txn(
        &compares,
        &[
            (r.split_head_key(file), head),
            (doc_key, split::tombstone(&r.split_root(file))),
        ],
        &[(mark.clone(), format!("{mark}\0"))],
    )
}
