//! The journal's high-water mark, `events.seq`: the highest `seq` ever given out, kept apart
//! from the journal so that cutting `events.jsonl` back by hand (truncating it, deleting it,
//! rewriting it) cannot take it away. The next event is numbered above it; when the journal ends
//! below it, the lost range is marked by a `journal.gap` event (see [`super::journal::number`]),
//! readers move past that event, and `doctor` reports the damage.
//!
//! Format: one line, `<seq, 20 digits> <acknowledged, 20 digits>\n`, fixed width so a commit
//! rewrites the first 20 bytes in place (no new block, so no failure for lack of space once the
//! file exists). `acknowledged` is the newest `journal.gap` seq that `doctor --repair` was told
//! about. Written under the journal lock after each commit, not synced: the journal itself is,
//! and the next seq is the larger of the two, so a mark lost in a power cut only weakens the
//! detection, never the numbering.

use std::os::unix::fs::FileExt;
use std::path::Path;

use super::atomic;
use crate::error::{IoContext, Result};

/// The mark's file name in the home.
pub const FILE: &str = "events.seq";

const WIDTH: usize = 20;

/// What `events.seq` says; zeros when it is missing or unreadable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    pub seq: u64,
    pub acknowledged: u64,
}

/// Read the mark.
pub fn read(dir: &Path) -> Mark {
    let Ok(text) = std::fs::read_to_string(dir.join(FILE)) else {
        return Mark::default();
    };
    let mut parts = text.split_ascii_whitespace().map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(seq), ack) => Mark {
            seq,
            acknowledged: ack.unwrap_or(0),
        },
        _ => Mark::default(),
    }
}

fn line(m: Mark) -> String {
    format!("{:0w$} {:0w$}\n", m.seq, m.acknowledged, w = WIDTH)
}

/// Raise the mark to `seq` (the journal lock is held). Rewrites the seq in place when the file
/// has its full form, else writes the whole line.
pub fn raise(dir: &Path, seq: u64) -> Result<()> {
    let path = dir.join(FILE);
    let f = atomic::open_private(&path).ctx("open", &path)?;
    let len = f.metadata().ctx("inspect", &path)?.len();
    let current = read(dir);
    if current.seq >= seq {
        return Ok(());
    }
    if len == line(current).len() as u64 {
        f.write_all_at(format!("{seq:0WIDTH$}").as_bytes(), 0)
            .ctx("write", &path)
    } else {
        write(dir, Mark { seq, ..current })
    }
}

/// Replace the whole mark (doctor's acknowledgement; the journal lock is held).
pub fn write(dir: &Path, m: Mark) -> Result<()> {
    let path = dir.join(FILE);
    let f = atomic::open_private(&path).ctx("open", &path)?;
    let bytes = line(m);
    f.write_all_at(bytes.as_bytes(), 0)
        .and_then(|_| f.set_len(bytes.len() as u64))
        .ctx("write", &path)
}
