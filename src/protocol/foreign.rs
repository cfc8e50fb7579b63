//! Living beside other writers of `status.json` (the original plugin's jq recipes, people with
//! jq): what conductor does with a state that someone else changed since its own last write.
//! Pure: the store hands in the state as read and, when it can tell, the state conductor itself
//! last wrote.

use super::State;
use super::ops::Effect;
use crate::error::Result;
use crate::time::Timestamp;

/// Called at the start of every protocol transaction, before the operation runs. `previous` is
/// the state conductor last committed when the file has since been replaced by another writer
/// (`None` when nobody else wrote it, or when that is unknown). May rewrite `state` into
/// conductor's canonical form and push the effects (events, log lines) that describe what it
/// found.
pub fn reconcile(
    _state: &mut State,
    _previous: Option<&State>,
    _now: Timestamp,
    _fx: &mut Vec<Effect>,
) -> Result<()> {
    Ok(())
}
