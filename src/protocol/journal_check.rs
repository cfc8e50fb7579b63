//! `doctor`'s check of the journal's high-water mark (`events.seq`, see [`crate::store::journal_mark`]):
//! a journal that ends below seqs already given out, or that keeps a `journal.gap` marker, was
//! cut back by hand and events were lost. The lost events cannot be brought back; `--repair`
//! acknowledges the damage so that later checks pass (numbering never needed repairing: it
//! always continues above the mark).

use std::path::Path;

use crate::error::Result;
use crate::health::Finding;
use crate::store::event::Event;
use crate::store::journal_mark::{self, Mark};

/// The finding for `events.seq`, given the last seq of the journal as kept (0: empty) and the
/// `journal.gap` events in it. With `repair` (every lock held), the damage is acknowledged.
pub fn high_water(dir: &Path, last: u64, gaps: &[Event], repair: bool) -> Result<Finding> {
    let mark = journal_mark::read(dir);
    let name = journal_mark::FILE.to_string();
    let lost = |after: u64, through: u64| format!("events {}..{through}", after + 1);
    let unacknowledged: Vec<&Event> = gaps.iter().filter(|g| g.seq > mark.acknowledged).collect();
    // Acknowledged ahead: the gap the next event opens (at `mark.seq + 1`) is already known.
    let cut_back = mark.seq > last && mark.acknowledged <= mark.seq;
    let detail = if cut_back {
        format!(
            "the event journal ends at seq {last} but seq {} was already given out: {} were removed by hand (truncated or rewritten); the next event is numbered above {} and marks the gap",
            mark.seq,
            lost(last, mark.seq),
            mark.seq
        )
    } else if let Some(g) = unacknowledged.last() {
        let num = |k: &str| g.payload[k].as_u64().unwrap_or(0);
        format!(
            "the event journal was cut back by hand: {} were lost (marked by journal.gap at seq {})",
            lost(num("lost_after"), num("lost_through")),
            g.seq
        )
    } else {
        return Ok(Finding {
            file: name,
            ok: true,
            detail: format!(
                "seqs given out up to {}; the journal keeps them",
                mark.seq.max(last)
            ),
            repair: None,
        });
    };
    let fix = if repair {
        // The gap an event numbered above the mark will open is acknowledged too.
        let through = gaps
            .iter()
            .map(|g| g.seq)
            .max()
            .unwrap_or(0)
            .max(if mark.seq > last { mark.seq + 1 } else { 0 });
        journal_mark::write(
            dir,
            Mark {
                seq: mark.seq,
                acknowledged: through.max(mark.acknowledged),
            },
        )?;
        "acknowledged; the lost events cannot be recovered (rebuild anything derived from them from `conductor status`)"
    } else {
        "the lost events cannot be recovered; seqs are never reused; `conductor doctor --repair` acknowledges the damage"
    };
    Ok(Finding {
        file: name,
        ok: false,
        detail,
        repair: Some(fix.to_string()),
    })
}
