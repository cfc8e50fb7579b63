//! Append-only ledgers (`history.jsonl`, `conflicts.log`, the event journal and every domain's
//! own): one line per record. conductor appends only through a transaction's commit record (see
//! `redo`), which puts whole lines at a known offset; another program (the original plugin's jq
//! recipes) may still leave a torn last line. Readers skip an unterminated last line (with a
//! warning); the next commit first cuts the file back to its last newline, so a torn line never
//! ends up in the middle.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Cut a torn last line off the ledger at `path`, if any (a missing file is fine).
pub fn repair(path: &Path) -> Result<()> {
    let mut f = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    repair_torn_tail(&mut f).ctx("repair the torn last line of", path)
}

/// True for a line that is a complete JSON record: an unterminated last line like that lacks
/// only its newline, it is not a torn write. (A conflicts.log line cut short still looks like a
/// line, its text being free, so there an unterminated last line always counts as torn.)
fn is_whole_record(text: &str) -> bool {
    text.starts_with('{')
        && serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object())
}

/// If the file does not end with a newline, truncate it after its last newline.
fn repair_torn_tail(f: &mut File) -> std::io::Result<()> {
    let len = f.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    let mut end = len;
    let mut chunk = vec![0u8; 4096];
    let mut cut = 0;
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..n])?;
        if let Some(p) = chunk[..n].iter().rposition(|b| *b == b'\n') {
            cut = start + p as u64 + 1;
            break;
        }
        end = start;
    }
    // A last line that is a whole record but lacks its newline (written by hand or by another
    // tool) is kept: it only needs the newline. Anything else is an interrupted write.
    let mut tail = Vec::with_capacity((len - cut) as usize);
    f.seek(SeekFrom::Start(cut))?;
    f.take(len - cut).read_to_end(&mut tail)?;
    if is_whole_record(&String::from_utf8_lossy(&tail)) {
        return f.write_all(b"\n");
    }
    f.set_len(cut)
}

/// A ledger line as a reader sees it.
pub enum Line {
    /// A complete line (without its newline).
    Complete(String),
    /// The unterminated last line a crash left behind.
    Torn(String),
}

/// Stream the lines of a ledger, never loading the whole file. A missing file has no lines.
pub fn for_each_line<E: From<Error>>(
    path: &Path,
    mut f: impl FnMut(usize, Line) -> Result<bool, E>,
) -> Result<(), E> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path, e).into()),
    };
    let mut r = BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        let read = r.read_until(b'\n', &mut buf).ctx("read", path)?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        let unterminated = buf.last() != Some(&b'\n');
        if !unterminated {
            buf.pop();
        }
        let text = String::from_utf8_lossy(&buf).into_owned();
        let torn = unterminated && !is_whole_record(&text);
        let keep_going = f(
            n,
            if torn {
                Line::Torn(text)
            } else {
                Line::Complete(text)
            },
        )?;
        if !keep_going {
            return Ok(());
        }
    }
}
