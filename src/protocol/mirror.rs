//! Grep-able copies of the protocol's ledgers (`conductor mirror DIR`): with a shared store
//! `history.jsonl` and `conflicts.log` live in etcd, and people still want `grep` and `tail -f`.

use std::path::Path;

use super::{CONFLICTS, HISTORY};
use crate::error::{Error, Result};
use crate::store::LedgerFile;

/// The ledgers copied.
pub const MIRRORED: [LedgerFile; 2] = [HISTORY, CONFLICTS];

/// Copy each of [`MIRRORED`] to `dir/<its name>` (replaced atomically, so a reader never sees
/// half a file) when its number of lines differs from `copied` (which is updated; start with
/// `usize::MAX` to copy all).
pub fn copy(store: &crate::store::Store, dir: &Path, copied: &mut [usize; 2]) -> Result<()> {
    for (i, ledger) in MIRRORED.iter().enumerate() {
        let mut text = String::new();
        let mut n = 0;
        store.read_ledger_file(*ledger, |_, line| {
            if let crate::store::ledger::Line::Complete(t) = line {
                text.push_str(&t);
                text.push('\n');
                n += 1;
            }
            Ok::<_, Error>(true)
        })?;
        if n != copied[i] {
            crate::store::atomic::write_atomic(&dir.join(ledger.name), text.as_bytes())?;
            copied[i] = n;
        }
    }
    Ok(())
}
