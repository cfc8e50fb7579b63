//! Seeking in a journal file by `seq`: a binary search over byte offsets.
//!
//! Lines of a journal file are in seq order, so a reader positioned after some seq need not
//! parse the file from its start. [`start_offset`] probes the middle of a byte range, re-syncs
//! on the next newline, reads the seq of the complete line starting there and halves the range,
//! until the range is small; the cost is a few reads of one line each, whatever the file's size.
//!
//! The answer is always a line start (0 or just after a newline) at or before the first line
//! whose seq is above the cursor, so a reader starting there skips a few lines already seen and
//! misses none. Anything it cannot read as a complete line with a seq (a torn tail, a line
//! rewritten by hand) makes it look earlier, never later.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Below this many bytes left in the range, stop probing: reading them is cheaper.
const LINEAR: u64 = 64 * 1024;

/// A byte offset of `file` (of length `len`) that starts a line and comes at or before the first
/// line whose seq is above `after`.
pub fn start_offset(file: &File, len: u64, after: u64) -> std::io::Result<u64> {
    // Invariant: `lo` is 0 or starts a complete line whose seq is at most `after`, so the first
    // line above `after` starts after it. `hi` only bounds the probing (each probe halves the
    // range or moves `lo` past its middle).
    let (mut lo, mut hi) = (0u64, len);
    while hi - lo > LINEAR {
        let mid = lo + (hi - lo) / 2;
        match line_after(file, mid, len)? {
            Some((start, Some(seq))) if seq <= after && start < hi => lo = start,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// The start of the line after the first newline at or after byte `pos`, with that line's seq
/// when it is complete (newline-terminated) and has one; `None` when no newline follows `pos`.
fn line_after(file: &File, pos: u64, len: u64) -> std::io::Result<Option<(u64, Option<u64>)>> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = 4096u64;
    let mut at = pos;
    let mut start: Option<usize> = None; // index in `buf` of the line start
    loop {
        if at >= len {
            // No newline (or no end of the line) before the end of the file.
            return Ok(start.map(|s| (pos + s as u64, None)));
        }
        let n = chunk.min(len - at) as usize;
        let old = buf.len();
        buf.resize(old + n, 0);
        file.read_exact_at(&mut buf[old..], at)?;
        at += n as u64;
        chunk = chunk.saturating_mul(2);
        if start.is_none() {
            match buf.iter().position(|b| *b == b'\n') {
                Some(nl) => start = Some(nl + 1),
                None => continue,
            }
        }
        let s = start.expect("found");
        if let Some(end) = buf[s..].iter().position(|b| *b == b'\n') {
            let seq = seq_of(&buf[s..s + end]);
            return Ok(Some((pos + s as u64, seq)));
        }
    }
}

fn seq_of(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(line).ok().map(|s| s.seq)
}
