//! The event journal: `events.jsonl` in the home, rolled into numbered segments and pruned.
//!
//! Layout: the active file `events.jsonl`, plus rolled segments `events.<FIRST>.jsonl` where
//! `<FIRST>` is the seq of the segment's first event, zero-padded to 16 digits (so names sort by
//! seq and a reader finds the segment holding a cursor from the directory listing alone).
//!
//! Writers ([`number`]) run under the journal lock, inside a transaction's commit (see
//! `store::txn`); every domain appends here, so there is one sequence and one cursor. The next
//! `seq` comes from the journal itself: the last complete line of `events.jsonl` (or, right after
//! a roll, of the newest segment), read backwards from the end, so the cost does not grow with
//! the journal. Lines are appended through the commit record, so a crash never leaves an event
//! without the state change it describes, nor the reverse.
//!
//! Readers ([`Tail`]) never lock. They read complete lines from a byte offset and check that seqs
//! are contiguous; a roll that happens while they list the directory shows up as a gap, and they
//! re-locate from the listing.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::ledger;
use crate::error::{Error, IoContext, Result};
use crate::event::{Event, NewEvent};
use crate::time::Timestamp;

/// `journal.gap`: the journal was found cut back below seqs already given out (truncated or
/// rewritten by hand); this event takes the next seq above the highest ever given, and its
/// payload names the lost range (`lost_after`, `lost_through`). Readers move past it.
pub const JOURNAL_GAP: &str = "journal.gap";

/// The active journal file's name.
pub const ACTIVE: &str = "events.jsonl";
/// Default size past which the active file rolls.
pub const DEFAULT_SEGMENT_BYTES: u64 = 4 * 1024 * 1024;
/// Default number of rolled segments kept.
pub const DEFAULT_KEEP_SEGMENTS: u64 = 16;
/// Default age, in days, past which rolled segments are pruned.
pub const DEFAULT_KEEP_DAYS: u64 = 30;

/// Rolling and pruning settings (from `config.json`).
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    pub segment_bytes: u64,
    pub keep_segments: u64,
    pub keep_days: u64,
}

impl Retention {
    /// The settings in `config.json` at `path` (its `events_segment_bytes`,
    /// `events_keep_segments` and `events_keep_days`), with defaults; `corrupt_state` when the
    /// file is not JSON or one of them is not a count.
    pub fn read(path: &Path) -> Result<Retention> {
        #[derive(serde::Deserialize)]
        struct Keys {
            events_segment_bytes: Option<u64>,
            events_keep_segments: Option<u64>,
            events_keep_days: Option<u64>,
        }
        let c: Keys = match super::read_bytes(path)? {
            None => return Ok(Retention::from_keys(None, None, None)),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| super::corrupt(path, format!("schema violation ({e})")))?,
        };
        Ok(Retention::from_keys(
            c.events_segment_bytes,
            c.events_keep_segments,
            c.events_keep_days,
        ))
    }

    /// The settings given, with defaults for the missing ones.
    pub fn from_keys(
        segment_bytes: Option<u64>,
        keep_segments: Option<u64>,
        keep_days: Option<u64>,
    ) -> Retention {
        Retention {
            segment_bytes: segment_bytes.unwrap_or(DEFAULT_SEGMENT_BYTES).max(1),
            keep_segments: keep_segments.unwrap_or(DEFAULT_KEEP_SEGMENTS).max(1),
            keep_days: keep_days.unwrap_or(DEFAULT_KEEP_DAYS).max(1),
        }
    }
}

/// The name of the segment whose first event has seq `first`.
pub fn segment_name(first: u64) -> String {
    format!("events.{first:016}.jsonl")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("events.")?.strip_suffix(".jsonl")?;
    (digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// True for file names that belong to the journal (what a watcher should wake up for).
pub fn is_journal_file(name: &str) -> bool {
    name == ACTIVE || parse_segment_name(name).is_some()
}

/// Rolled segments, oldest first, as (first seq, path).
pub fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx("list", dir)? {
        let entry = entry.ctx("list", dir)?;
        if let Some(first) = entry.file_name().to_str().and_then(parse_segment_name) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The last complete line of a file (ignoring a torn tail), read backwards from the end.
fn last_complete_line(path: &Path) -> Result<Option<String>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = f.metadata().ctx("inspect", path)?.len();
    let mut end = len; // exclusive end of the region still to search
    let mut tail: Vec<u8> = Vec::new(); // bytes from `end` to `len`
    let mut chunk = 4096u64;
    loop {
        let start = end.saturating_sub(chunk);
        let mut buf = vec![0u8; (end - start) as usize];
        f.read_exact_at(&mut buf, start).ctx("read", path)?;
        buf.extend_from_slice(&tail);
        tail = buf;
        end = start;
        // The last newline ends the last complete line; the one before it starts it.
        if let Some(last_nl) = tail.iter().rposition(|b| *b == b'\n') {
            if let Some(prev) = tail[..last_nl].iter().rposition(|b| *b == b'\n') {
                return Ok(Some(
                    String::from_utf8_lossy(&tail[prev + 1..last_nl]).into_owned(),
                ));
            }
            if start == 0 {
                return Ok(Some(String::from_utf8_lossy(&tail[..last_nl]).into_owned()));
            }
        } else if start == 0 {
            return Ok(None);
        }
        chunk = chunk.saturating_mul(2);
    }
}

/// The first complete line of a file.
fn first_line(path: &Path) -> Result<Option<String>> {
    let mut first = None;
    ledger::for_each_line(path, |_, line| {
        if let ledger::Line::Complete(text) = line {
            first = Some(text);
        }
        Ok::<_, Error>(false)
    })?;
    Ok(first)
}

fn seq_of(line: &str, path: &Path) -> Result<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_str::<Seq>(line)
        .map(|s| s.seq)
        .map_err(|e| Error::CorruptState {
            path: path.to_path_buf(),
            detail: format!("an event line has no valid seq ({e})"),
        })
}

/// The seq of the last event written (0 for an empty journal). Reads one line.
pub fn last_seq(dir: &Path) -> Result<u64> {
    let active = dir.join(ACTIVE);
    if let Some(line) = last_complete_line(&active)? {
        return seq_of(&line, &active);
    }
    if let Some((_, newest)) = segments(dir)?.pop()
        && let Some(line) = last_complete_line(&newest)?
    {
        return seq_of(&line, &newest);
    }
    Ok(0)
}

/// Number events after the journal's last seq, as the lines to append, with the seq of the last
/// one (the journal lock is held): roll first if the active file is too big. When the journal
/// ends below the high-water mark (cut back by hand), seqs already given out are never given
/// again: a `journal.gap` event naming the lost range comes first, numbered above the mark.
pub fn number(
    dir: &Path,
    retention: Retention,
    now: Timestamp,
    events: &[NewEvent],
) -> Result<(Vec<String>, u64)> {
    let active = dir.join(ACTIVE);
    let size = match std::fs::metadata(&active) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::io("inspect", &active, e)),
    };
    if size >= retention.segment_bytes {
        roll(dir, retention)?;
    }
    let last = last_seq(dir)?;
    let mark = super::journal_mark::read(dir).seq;
    if mark > last {
        // Cut back by hand: the commit log's offsets into it are stale; make them history.
        super::redo::checkpoint(dir)?;
        let mut all = Vec::with_capacity(events.len() + 1);
        all.push(gap_event(last, mark));
        all.extend_from_slice(events);
        return Ok((encode(mark, now, &all), mark + all.len() as u64));
    }
    Ok((encode(last, now, events), last + events.len() as u64))
}

/// The event that marks seqs `lost_after + 1 ..= lost_through` as given out and lost.
fn gap_event(lost_after: u64, lost_through: u64) -> NewEvent {
    NewEvent {
        event_type: JOURNAL_GAP,
        actor: None,
        target: None,
        project: None,
        payload: serde_json::json!({
            "lost_after": lost_after,
            "lost_through": lost_through,
            "detail": format!(
                "the journal was cut back by hand: events {}..{lost_through} are gone and their seqs are never reused",
                lost_after + 1
            ),
        }),
    }
}

/// The journal lines of `events`, numbered from `seq + 1`.
pub fn encode(mut seq: u64, now: Timestamp, events: &[NewEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            seq += 1;
            let ev = Event {
                seq,
                event_id: format!(
                    "evt-{seq}-{}{}",
                    crate::host::random_hex6(),
                    crate::host::random_hex6()
                ),
                event_type: e.event_type.to_string(),
                actor: e.actor.clone(),
                target: e.target.clone(),
                project: e.project.clone(),
                payload: e.payload.clone(),
                created_at: now,
                txn_end: None,
            };
            serde_json::to_string(&ev).expect("events serialize")
        })
        .collect()
}

/// A transaction's journal lines, split so that no file grows past the segment size: no
/// segments when they fit (the lines are appended to the active file as they are). Otherwise the active file
/// is rolled first, every line but the last gets `txn_end` (the seq of the transaction's last
/// event, `last`), and the lines are cut into whole segments (`(file name, bytes)`, each under
/// the segment size unless a single line is bigger) plus the lines left for the fresh active
/// file. The commit renames the segments into place and appends the rest through its record,
/// so after a crash all of it is there or none; readers deliver the transaction only once they
/// have read its last event.
#[allow(clippy::type_complexity)]
pub fn split(
    dir: &Path,
    retention: Retention,
    mut lines: Vec<String>,
    last: u64,
) -> Result<(Vec<(String, Vec<u8>)>, Vec<String>)> {
    let total: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    if total <= retention.segment_bytes || lines.len() < 2 {
        return Ok((Vec::new(), lines));
    }
    let active = dir.join(ACTIVE);
    if std::fs::metadata(&active).is_ok_and(|m| m.len() > 0) {
        roll(dir, retention)?;
    }
    let n = lines.len();
    for l in &mut lines[..n - 1] {
        debug_assert!(l.ends_with('}'));
        l.pop();
        l.push_str(&format!(",\"txn_end\":{last}}}"));
    }
    let first_seq = last + 1 - n as u64;
    let mut segments = Vec::new();
    let mut chunk: Vec<u8> = Vec::new();
    let mut chunk_first = first_seq;
    let mut rest_from = 0;
    for (i, l) in lines.iter().enumerate() {
        if !chunk.is_empty() && (chunk.len() + l.len() + 1) as u64 > retention.segment_bytes {
            segments.push((segment_name(chunk_first), std::mem::take(&mut chunk)));
            chunk_first = first_seq + i as u64;
            rest_from = i;
        }
        chunk.extend_from_slice(l.as_bytes());
        chunk.push(b'\n');
    }
    Ok((segments, lines.split_off(rest_from)))
}

/// Rename the active file to its segment name, then prune old segments.
fn roll(dir: &Path, retention: Retention) -> Result<()> {
    let active = dir.join(ACTIVE);
    ledger::repair(&active)?;
    let Some(line) = first_line(&active)? else {
        return Ok(());
    };
    let first = seq_of(&line, &active)?;
    let target = dir.join(segment_name(first));
    // The commit log has offsets into the active file: none may be applied to its successor.
    super::redo::checkpoint(dir)?;
    std::fs::rename(&active, &target).map_err(|e| Error::io("roll", &active, e))?;
    // Before any record appends to the fresh active file at offset 0: a recovery must never find
    // the old file under the active name.
    super::atomic::sync_dir(dir)?;
    prune(dir, retention)
}

fn prune(dir: &Path, retention: Retention) -> Result<()> {
    let segs = segments(dir)?;
    let max_age = Duration::from_secs(retention.keep_days.saturating_mul(86_400));
    let excess = segs.len().saturating_sub(retention.keep_segments as usize);
    for (i, (_, path)) in segs.iter().enumerate() {
        let old = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > max_age);
        // Never prune a segment newer than one we keep (the kept range stays contiguous), and
        // never the newest: after a roll it holds the last seq, which the next seq comes from.
        let newest = i + 1 == segs.len();
        if !newest && (i < excess || (old && segs[..i].iter().all(|(_, p)| !p.exists()))) {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("prune", path, e)),
            }
        }
    }
    Ok(())
}

/// A reader positioned after some seq, reading complete lines as they are appended.
pub struct Tail {
    dir: PathBuf,
    file: Option<(File, u64)>, // (handle, inode)
    offset: u64,
    /// The last seq delivered (or skipped as before the cursor).
    pub after: u64,
    /// The last seq read: past `after` while a transaction that spans segments is read.
    read_to: u64,
    /// The events read of such a transaction, delivered once its last one is read.
    group: Vec<Event>,
    /// The seq of that transaction's last event.
    group_end: u64,
    /// Transactions that span segments and end at or before this seq are known to be wholly
    /// on disk: their events are delivered as they are read, without holding them.
    complete_through: u64,
    partial: Vec<u8>,
    /// The shared store, when the journal is its `journal/` keys instead of files.
    remote: Option<super::etcd::Etcd>,
}

/// Deliver a held transaction's events (`group`) to `f`, moving `after`; true when `f` asked
/// to stop (the rest stays held).
fn deliver(
    group: &mut Vec<Event>,
    group_end: &mut u64,
    after: &mut u64,
    f: &mut impl FnMut(Event) -> bool,
) -> bool {
    let mut held = std::mem::take(group).into_iter();
    for e in held.by_ref() {
        *after = e.seq;
        if !f(e) {
            *group = held.collect();
            if group.is_empty() {
                *group_end = 0;
            }
            return true;
        }
    }
    *group_end = 0;
    false
}

/// The `cursor_expired` error.
pub fn cursor_expired(after: u64, oldest: u64) -> Error {
    Error::refused(
        crate::error::Refusal::CursorExpired,
        format!(
            "cursor {after} is older than the oldest kept event ({oldest}); events {}..{} were pruned. \
             Resume from --after {} (and rebuild anything derived from the missed events from `status`)",
            after + 1,
            oldest - 1,
            oldest - 1
        ),
    )
}

impl Tail {
    /// Position after `after`; `None` means at the current end. Fails with `cursor_expired`
    /// when events after `after` were pruned.
    pub fn open(dir: &Path, after: Option<u64>) -> Result<Tail> {
        let after = match after {
            Some(a) => a,
            None => last_seq(dir)?,
        };
        let mut t = Tail {
            dir: dir.to_path_buf(),
            file: None,
            offset: 0,
            after,
            read_to: after,
            group: Vec::new(),
            group_end: 0,
            complete_through: 0,
            partial: Vec::new(),
            remote: None,
        };
        t.locate()?;
        Ok(t)
    }

    /// Position after `after` in the shared store's journal (`None`: at its current end).
    pub fn open_remote(r: &super::etcd::Etcd, after: Option<u64>) -> Result<Tail> {
        let after = match after {
            Some(a) => a,
            None => remote_last_seq(r)?,
        };
        if let Some(oldest) = remote_oldest(r)?
            && after + 1 < oldest
        {
            return Err(cursor_expired(after, oldest));
        }
        Ok(Tail {
            dir: PathBuf::new(),
            file: None,
            offset: 0,
            after,
            read_to: after,
            group: Vec::new(),
            group_end: 0,
            complete_through: 0,
            partial: Vec::new(),
            remote: Some(r.clone()),
        })
    }

    /// [`Tail::read`] from the shared store: the events after the cursor, a page at a time.
    fn read_remote(&mut self, f: &mut dyn FnMut(Event) -> bool) -> Result<bool> {
        let r = self.remote.clone().expect("a remote tail");
        let prefix = r.journal_prefix();
        let end = super::etcd::prefix_end(&prefix);
        // A key holds one transaction's events, numbered from its key: start at the key that
        // holds `after + 1` (the last one at or before it).
        let mut from = r
            .last_at_or_before(&prefix, &r.journal_key(self.after + 1))?
            .map(|kv| kv.key)
            .unwrap_or_else(|| r.journal_key(self.after + 1));
        loop {
            let (page, more) = r.range(&from, &end, 64)?;
            for kv in &page {
                for line in kv.value.split(|b| *b == b'\n') {
                    let Ok(event) = serde_json::from_slice::<Event>(line) else {
                        continue;
                    };
                    if event.seq <= self.after {
                        continue;
                    }
                    self.after = event.seq;
                    self.read_to = event.seq;
                    if !f(event) {
                        return Ok(true);
                    }
                }
            }
            match page.last() {
                Some(kv) if more => from = format!("{}\0", kv.key),
                _ => return Ok(false),
            }
        }
    }

    /// True when the held transaction has been read to its last event.
    fn group_complete(&self) -> bool {
        !self.group.is_empty() && self.read_to >= self.group_end
    }

    /// Deliver the held transaction; true when `f` asked to stop (the rest stays held).
    fn deliver(&mut self, f: &mut impl FnMut(Event) -> bool) -> bool {
        deliver(&mut self.group, &mut self.group_end, &mut self.after, f)
    }

    /// The seq of the oldest event still kept (`None` for an empty journal).
    pub fn oldest(dir: &Path) -> Result<Option<u64>> {
        if let Some((first, _)) = segments(dir)?.first() {
            return Ok(Some(*first));
        }
        let active = dir.join(ACTIVE);
        match first_line(&active)? {
            Some(line) => Ok(Some(seq_of(&line, &active)?)),
            None => Ok(None),
        }
    }

    /// Open the file that holds `after + 1` (the newest whose first seq is at most that).
    fn locate(&mut self) -> Result<()> {
        // The file picked can be rolled (renamed) between the listing and the open: list again.
        for _ in 0..8 {
            if !self.locate_once()? {
                break;
            }
        }
        Ok(())
    }

    /// [`Tail::locate`] once; true when the file it picked had gone by the time it opened it.
    fn locate_once(&mut self) -> Result<bool> {
        let want = self.read_to + 1;
        let segs = segments(&self.dir)?;
        let active = self.dir.join(ACTIVE);
        let active_first = match first_line(&active)? {
            Some(line) => Some(seq_of(&line, &active)?),
            None => None,
        };
        let oldest = segs.first().map(|s| s.0).or(active_first);
        if let Some(oldest) = oldest
            && want < oldest
        {
            return Err(cursor_expired(self.after, oldest));
        }
        let mut pick: Option<PathBuf> = None;
        for (first, path) in &segs {
            if *first <= want {
                pick = Some(path.clone());
            }
        }
        // An empty or missing active file (right after a roll, or a writer killed between a
        // roll and its append) holds nothing: the newest segment is where the journal ends.
        if active_first.is_some_and(|f| f <= want) || pick.is_none() {
            pick = Some(active);
        }
        self.offset = 0;
        self.partial.clear();
        self.file = None;
        if let Some(path) = pick {
            match File::open(&path) {
                Ok(f) => {
                    let meta = f.metadata().ctx("inspect", &path)?;
                    // Seek by seq: the cost follows what is read, not the file's size.
                    self.offset = super::journal_seek::start_offset(&f, meta.len(), self.read_to)
                        .ctx("read", &path)?;
                    self.file = Some((f, meta.ino()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
                Err(e) => return Err(Error::io("open", &path, e)),
            }
        }
        Ok(false)
    }

    /// Deliver every complete event after the cursor, in seq order, to `f` until it returns
    /// false. Returns true if it stopped because `f` said so.
    pub fn read(&mut self, mut f: impl FnMut(Event) -> bool) -> Result<bool> {
        if self.remote.is_some() {
            return self.read_remote(&mut f);
        }
        // Moving to another file is progress when events were read since the last move;
        // three moves in a row without progress mean we are at the end (or the journal has
        // a real gap).
        let mut stalls = 0;
        let mut last_move = self.read_to;
        // A big transaction read whole before a stop: the rest of it first.
        if self.group_complete() && self.deliver(&mut f) {
            return Ok(true);
        }
        loop {
            if self.file.is_none() {
                self.locate()?;
                if self.file.is_none() {
                    return Ok(false);
                }
            }
            let mut stopped = false;
            let mut gap = None;
            {
                let (file, _) = self.file.as_ref().expect("located");
                let mut buf = vec![0u8; 64 * 1024];
                'read: loop {
                    let n = file
                        .read_at(&mut buf, self.offset + self.partial.len() as u64)
                        .ctx("read", &self.dir.join(ACTIVE))?;
                    if n == 0 {
                        // An unterminated last line is read again next time from its start:
                        // a writer may cut a torn line and append a different one there.
                        self.partial.clear();
                        break;
                    }
                    self.partial.extend_from_slice(&buf[..n]);
                    let mut consumed = 0;
                    while let Some(nl) = self.partial[consumed..].iter().position(|b| *b == b'\n') {
                        let line = &self.partial[consumed..consumed + nl];
                        let next = consumed + nl + 1;
                        let event: Event = match serde_json::from_slice(line) {
                            Ok(e) => e,
                            Err(_) => {
                                consumed = next;
                                continue; // an unparseable line: skip, seq contiguity still guards
                            }
                        };
                        if event.seq <= self.read_to {
                            consumed = next;
                            continue;
                        }
                        // A marked gap (the journal was cut back by hand) is moved past.
                        let marked = event.event_type == JOURNAL_GAP;
                        if event.seq != self.read_to + 1 && !marked {
                            gap = Some(event.seq);
                            break 'read;
                        }
                        consumed = next;
                        self.read_to = event.seq;
                        // A transaction that spans segments is held until its last event.
                        let mut end = event.txn_end.filter(|e| *e > event.seq);
                        if let Some(e) = end
                            && self.group.is_empty()
                            && e > self.complete_through
                        {
                            // Committed whole when the journal already ends at or past its
                            // last event and no commit is in progress (checked in that order:
                            // the record is cleared only after the segments are in place).
                            let through = last_seq(&self.dir).unwrap_or(0);
                            if through >= e && !super::redo::in_flight(&self.dir) {
                                self.complete_through = through;
                            }
                        }
                        if end.is_some_and(|e| e <= self.complete_through) && self.group.is_empty()
                        {
                            end = None;
                        }
                        if end.is_some() || !self.group.is_empty() {
                            self.group_end = self.group_end.max(end.unwrap_or(0));
                            self.group.push(event);
                            if self.read_to < self.group_end {
                                continue;
                            }
                            if deliver(
                                &mut self.group,
                                &mut self.group_end,
                                &mut self.after,
                                &mut f,
                            ) {
                                stopped = true;
                                self.offset += consumed as u64;
                                self.partial.clear();
                                break 'read;
                            }
                            continue;
                        }
                        self.after = event.seq;
                        if !f(event) {
                            stopped = true;
                            self.offset += consumed as u64;
                            self.partial.clear();
                            break 'read;
                        }
                    }
                    self.offset += consumed as u64;
                    self.partial.drain(..consumed);
                }
            }
            if stopped {
                return Ok(true);
            }
            if self.read_to != last_move {
                stalls = 0;
                last_move = self.read_to;
            }
            if let Some(found) = gap {
                stalls += 1;
                if stalls > 3 {
                    return Err(Error::CorruptState {
                        path: self.dir.join(ACTIVE),
                        detail: format!(
                            "the event journal jumps from seq {} to {found}",
                            self.read_to
                        ),
                    });
                }
                self.file = None;
                continue;
            }
            // At the end of our file: if it is no longer the active file, move on.
            let (_, ino) = self.file.as_ref().expect("located");
            let current = std::fs::metadata(self.dir.join(ACTIVE))
                .map(|m| m.ino())
                .ok();
            if current == Some(*ino) {
                return Ok(false);
            }
            // Rolled (or we were reading a segment): everything in it was read above, so the
            // next event is in a newer file. Bounded: right after a roll with nothing appended
            // yet, the newest file is the one we just finished.
            stalls += 1;
            if stalls > 3 {
                return Ok(false);
            }
            self.locate()?;
            if self.file.is_none() {
                return Ok(false);
            }
        }
    }
}

/// The seq of the last event in the shared store's journal (0: none).
pub fn remote_last_seq(r: &super::etcd::Etcd) -> Result<u64> {
    match r.get(&r.meta_key())? {
        Some(kv) => Ok(parse_meta(r, &kv.value)?.0),
        None => Ok(0),
    }
}

/// The shared store's numbering record: the last event seq and ledger line number given. One
/// that does not read so is never guessed at (numbering again from 0 would overwrite events).
pub fn parse_meta(r: &super::etcd::Etcd, bytes: &[u8]) -> Result<(u64, u64)> {
    let v: Option<serde_json::Value> = serde_json::from_slice(bytes).ok();
    match v
        .as_ref()
        .map(|v| (v["event"].as_u64(), v["line"].as_u64()))
    {
        Some((Some(e), Some(l))) => Ok((e, l)),
        _ => Err(Error::CorruptState {
            path: PathBuf::from(r.meta_key()),
            detail: "the numbering record is not {\"event\":N,\"line\":M}; nothing was written"
                .into(),
        }),
    }
}

/// The seq of the oldest event kept in the shared store's journal.
pub fn remote_oldest(r: &super::etcd::Etcd) -> Result<Option<u64>> {
    let prefix = r.journal_prefix();
    let (first, _) = r.range(&prefix, &super::etcd::prefix_end(&prefix), 1)?;
    Ok(first
        .first()
        .and_then(|kv| kv.key.strip_prefix(&prefix)?.parse().ok()))
}

/// How many events the shared store keeps (`CONDUCTOR_STORE_KEEP_EVENTS`, default 100,000);
/// older ones are deleted, and a cursor before them answers `cursor_expired`.
pub fn remote_keep_events() -> u64 {
    std::env::var("CONDUCTOR_STORE_KEEP_EVENTS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(100_000)
}
