//! A byte delta between two versions of a document: the few hunks that turn the old bytes into
//! the new ones, so that the commit log can record a small change to a large document (a claim
//! in a 1.3 MB `status.json`) in a few hundred bytes instead of the whole document.
//!
//! [`diff`] is built for pretty-printed JSON that changed in a few places, and is correct for any
//! bytes: `apply(old, &diff(old, new)?) == Some(new)`, always. It takes the common prefix and
//! suffix by bytes, then walks both versions with two cursors: equal bytes are skipped by block
//! comparison; at a difference it backs up to the start of the line and looks for the nearest
//! point where both versions agree again for several lines (a lone common line such as `      ],`
//! is not enough), first within 64 lines of each cursor, then further ahead for a
//! long insertion or removal; without one it replaces everything up to the common suffix. It
//! gives up ([`None`]) as soon as the hunks would no longer be much smaller than the new
//! version, and its work is linear in the size of the documents.

/// One change: the bytes `old[start..end]` are replaced by `with` (an insert has start == end,
/// a removal has an empty `with`). A diff's hunks are sorted, non-overlapping (each start >= the
/// previous end), and everything outside them is copied from `old`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub start: u64,
    pub end: u64,
    pub with: Vec<u8>,
}

/// What a hunk is reckoned to cost in the log beyond its `with` bytes.
const HUNK_OVERHEAD: usize = 24;

/// How many lines past a difference, in each version, the nearest resynchronisation is looked for.
const NEAR_LINES: usize = 64;
/// What resynchronises near a difference: this many equal lines ...
const NEAR_SYNC_LINES: usize = 3;
/// ... holding at least this many bytes (or four times as many lines).
const NEAR_SYNC_BYTES: usize = 32;
/// So many equal lines resynchronise for sure near a difference (see [`near_sync`]).
const NEAR_SYNC_SURE: usize = 4 * NEAR_SYNC_LINES;
/// How many lines after a difference, in each version, may anchor a long insertion or removal.
const FAR_ANCHORS: usize = 8;
/// What resynchronises far from a difference: this many equal lines ...
const FAR_SYNC_LINES: usize = 4;
/// ... holding at least this many bytes (or four times as many lines).
const FAR_SYNC_BYTES: usize = 128;

/// The hunks that turn `old` into `new`, or None when they would not be much smaller than `new`
/// (their `with` bytes plus 24 bytes per hunk exceed `new.len() / 4`), so the caller logs `new` whole.
pub fn diff(old: &[u8], new: &[u8]) -> Option<Vec<Hunk>> {
    let prefix = common_prefix(old, new);
    if prefix == old.len() && prefix == new.len() {
        return Some(Vec::new());
    }
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    let mut hunks = Hunks {
        old,
        list: Vec::new(),
        cost: 0,
        limit: new.len() / 4,
    };
    let mut old_lines = Lines::new(old);
    let mut new_lines = Lines::new(new);
    // Hashing, candidate comparisons and scans are counted; past this the diff gives up.
    let mut work = 0usize;
    let work_cap = 8 * (old.len() + new.len()) + (1 << 20);

    let (mut i, mut j) = (line_start(old, prefix), line_start(new, prefix));
    loop {
        let rest = old.len() - i;
        if rest == new.len() - j && rest <= suffix {
            break;
        }
        let same = common_prefix(&old[i..], &new[j..]);
        if i + same == old.len() && j + same == new.len() {
            break;
        }
        let back = line_start(&old[i..], same);
        i += back;
        j += back;
        old_lines.reset(i);
        new_lines.reset(j);
        let (to_i, to_j) =
            if let Some((a, b)) = near_sync(&mut old_lines, &mut new_lines, &mut work) {
                (old_lines.pos(a), new_lines.pos(b))
            } else if let Some((a, b)) = far_sync(
                &mut old_lines,
                &mut new_lines,
                hunks.limit.saturating_sub(hunks.cost),
                work_cap,
                &mut work,
            ) {
                (old_lines.pos(a), new_lines.pos(b))
            } else {
                let tail = suffix.min(old.len() - i).min(new.len() - j);
                (old.len() - tail, new.len() - tail)
            };
        hunks.push(i, to_i, &new[j..to_j])?;
        i = to_i;
        j = to_j;
        if work > work_cap {
            return None;
        }
    }
    Some(hunks.list)
}

/// The size of `old` with `hunks` applied; None if the hunks are out of range or not
/// sorted/non-overlapping.
fn applied_size(old: &[u8], hunks: &[Hunk]) -> Option<usize> {
    let mut size = old.len();
    let mut previous_end = 0usize;
    for hunk in hunks {
        let start = usize::try_from(hunk.start).ok()?;
        let end = usize::try_from(hunk.end).ok()?;
        if start < previous_end || end < start || end > old.len() {
            return None;
        }
        size = (size - (end - start)).checked_add(hunk.with.len())?;
        previous_end = end;
    }
    Some(size)
}

/// `old` with `hunks` applied; None if the hunks are out of range or not sorted/non-overlapping.
pub fn apply(old: &[u8], hunks: &[Hunk]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(applied_size(old, hunks)?);
    let mut copied = 0usize;
    for hunk in hunks {
        // Checked above: in range, sorted and non-overlapping.
        let (start, end) = (hunk.start as usize, hunk.end as usize);
        out.extend_from_slice(&old[copied..start]);
        out.extend_from_slice(&hunk.with);
        copied = end;
    }
    out.extend_from_slice(&old[copied..]);
    Some(out)
}

/// Whether `hunks` applied to `old` give exactly `new` (`apply(old, hunks) == Some(new)`),
/// compared piece by piece: no copy of the document is made.
pub fn rebuilds(old: &[u8], hunks: &[Hunk], new: &[u8]) -> bool {
    if applied_size(old, hunks) != Some(new.len()) {
        return false;
    }
    let (mut copied, mut at) = (0usize, 0usize);
    let matches = |piece: &[u8], at: &mut usize| {
        let same = new[*at..*at + piece.len()] == *piece;
        *at += piece.len();
        same
    };
    for hunk in hunks {
        let (start, end) = (hunk.start as usize, hunk.end as usize);
        if !matches(&old[copied..start], &mut at) || !matches(&hunk.with, &mut at) {
            return false;
        }
        copied = end;
    }
    matches(&old[copied..], &mut at)
}

/// The hunks found so far and what they cost, against the most they may cost.
struct Hunks<'a> {
    old: &'a [u8],
    list: Vec<Hunk>,
    cost: usize,
    limit: usize,
}

impl Hunks<'_> {
    /// Adds the hunk replacing `old[start..end]` by `with`, without the bytes both sides begin
    /// or end with, merged into the previous hunk when the gap between them costs no more than a
    /// hunk. None once the hunks cost more than the limit.
    fn push(&mut self, start: usize, end: usize, with: &[u8]) -> Option<()> {
        let removed = &self.old[start..end];
        let head = common_prefix(removed, with);
        let tail = common_suffix(&removed[head..], &with[head..]);
        let (start, end, with) = (start + head, end - tail, &with[head..with.len() - tail]);
        if start == end && with.is_empty() {
            return Some(());
        }
        match self.list.last_mut() {
            Some(last) if start - last.end as usize <= HUNK_OVERHEAD => {
                let gap = &self.old[last.end as usize..start];
                last.with.extend_from_slice(gap);
                last.with.extend_from_slice(with);
                last.end = end as u64;
                self.cost += gap.len() + with.len();
            }
            _ => {
                self.list.push(Hunk {
                    start: start as u64,
                    end: end as u64,
                    with: with.to_vec(),
                });
                self.cost += HUNK_OVERHEAD + with.len();
            }
        }
        (self.cost <= self.limit).then_some(())
    }
}

/// The lines of one version from a cursor on, split and hashed as far as they were needed.
/// A line ends after its `\n`, or at the end of the text.
struct Lines<'a> {
    text: &'a [u8],
    /// `bounds[k]` is where line `k` starts, and `bounds[k + 1]` where it ends.
    bounds: Vec<usize>,
    hashes: Vec<u64>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8]) -> Self {
        Lines {
            text,
            bounds: vec![0],
            hashes: Vec::new(),
        }
    }

    fn reset(&mut self, at: usize) {
        self.bounds.clear();
        self.bounds.push(at);
        self.hashes.clear();
    }

    /// Splits up to `n` lines, fewer at the end of the text; how many there are.
    fn extend(&mut self, n: usize, work: &mut usize) -> usize {
        while self.hashes.len() < n {
            let from = self.bounds[self.bounds.len() - 1];
            if from == self.text.len() {
                break;
            }
            let end = match self.text[from..].iter().position(|&b| b == b'\n') {
                Some(at) => from + at + 1,
                None => self.text.len(),
            };
            self.hashes.push(hash(&self.text[from..end]));
            self.bounds.push(end);
            *work += end - from;
        }
        self.hashes.len()
    }

    /// Where line `k` starts (or the text ends, for `k` == the number of lines).
    fn pos(&self, k: usize) -> usize {
        self.bounds[k]
    }

    fn line(&self, k: usize) -> &'a [u8] {
        &self.text[self.bounds[k]..self.bounds[k + 1]]
    }
}

/// How far the old version from its line `a` and the new one from its line `b` agree.
struct Run {
    /// Equal lines, counted up to the cap asked for.
    lines: usize,
    /// Their bytes.
    bytes: usize,
    /// Whether both versions end together after them (so all the rest agrees).
    to_end: bool,
}

impl Run {
    /// Whether the run resynchronises: `min_lines` lines holding `min_bytes` (or four times as
    /// many lines), or the rest of both versions.
    fn syncs(&self, (min_lines, min_bytes): (usize, usize)) -> bool {
        self.to_end
            || (self.lines >= min_lines && (self.bytes >= min_bytes || self.lines >= 4 * min_lines))
    }
}

/// The equal lines from line `a` of the old version and line `b` of the new one, at most `cap`.
fn run(old: &mut Lines, a: usize, new: &mut Lines, b: usize, cap: usize, work: &mut usize) -> Run {
    let mut run = Run {
        lines: 0,
        bytes: 0,
        to_end: false,
    };
    while run.lines < cap {
        let t = run.lines;
        let has_old = old.extend(a + t + 1, work) > a + t;
        let has_new = new.extend(b + t + 1, work) > b + t;
        match (has_old, has_new) {
            (false, false) => {
                run.to_end = true;
                break;
            }
            (true, true) => {
                *work += 1;
                let line = old.line(a + t);
                if old.hashes[a + t] != new.hashes[b + t] || line != new.line(b + t) {
                    break;
                }
                run.bytes += line.len();
                run.lines += 1;
            }
            _ => break,
        }
    }
    run
}

/// The nearest lines `(a, b)` (fewest lines skipped in both, then fewest new lines) within
/// [`NEAR_LINES`] of both cursors where the versions agree again. A long agreement
/// ([`NEAR_SYNC_SURE`] lines) is taken at once; a short one only if no long one is found a little
/// further: in a list of similar objects, the closing lines of one object and the opening of the
/// next (`      ],` `    },` `    {`) agree with those of any other, and taking them when an object
/// was inserted would pair every later object with its neighbour.
fn near_sync(old: &mut Lines, new: &mut Lines, work: &mut usize) -> Option<(usize, usize)> {
    let mut short: Option<(usize, usize, usize)> = None;
    for distance in 1..=2 * NEAR_LINES {
        if let Some((a, b, found_at)) = short
            && distance > 2 * found_at + 4
        {
            return Some((a, b));
        }
        let old_count = old.extend(distance.min(NEAR_LINES), work);
        let new_count = new.extend(distance.min(NEAR_LINES), work);
        for b in distance.saturating_sub(NEAR_LINES)..=distance.min(NEAR_LINES) {
            let a = distance - b;
            if a > old_count || b > new_count {
                continue;
            }
            *work += 1;
            let agreed = run(old, a, new, b, NEAR_SYNC_SURE, work);
            if agreed.to_end || agreed.lines >= NEAR_SYNC_SURE {
                return Some((a, b));
            }
            if short.is_none() && agreed.syncs((NEAR_SYNC_LINES, NEAR_SYNC_BYTES)) {
                short = Some((a, b, distance));
            }
        }
        if distance > old_count + new_count {
            break;
        }
    }
    short.map(|(a, b, _)| (a, b))
}

/// For a long insertion or removal: the first line `b` of the new version (or `a` of the old)
/// where one of the first [`FAR_ANCHORS`] lines of the other version resynchronises, scanning
/// both versions a line at a time. An insertion is not looked for past `budget` bytes.
fn far_sync(
    old: &mut Lines,
    new: &mut Lines,
    budget: usize,
    work_cap: usize,
    work: &mut usize,
) -> Option<(usize, usize)> {
    let old_anchors = old.extend(FAR_ANCHORS, work);
    let new_anchors = new.extend(FAR_ANCHORS, work);
    let (mut inserting, mut removing) = (true, true);
    let mut t = 0;
    loop {
        if inserting {
            inserting = new.extend(t + 1, work) > t && new.pos(t) - new.pos(0) <= budget;
            if inserting {
                for a in 0..old_anchors {
                    *work += 1;
                    if old.hashes[a] == new.hashes[t]
                        && run(old, a, new, t, 4 * FAR_SYNC_LINES, work)
                            .syncs((FAR_SYNC_LINES, FAR_SYNC_BYTES))
                    {
                        return Some((a, t));
                    }
                }
            }
        }
        if removing {
            removing = old.extend(t + 1, work) > t;
            if removing {
                for b in 0..new_anchors {
                    *work += 1;
                    if old.hashes[t] == new.hashes[b]
                        && run(old, t, new, b, 4 * FAR_SYNC_LINES, work)
                            .syncs((FAR_SYNC_LINES, FAR_SYNC_BYTES))
                    {
                        return Some((t, b));
                    }
                }
            }
        }
        if !(inserting || removing) || *work > work_cap {
            return None;
        }
        t += 1;
    }
}

/// Where the line holding `text[at]` starts: just after the last `\n` before `at`.
fn line_start(text: &[u8], at: usize) -> usize {
    text[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |newline| newline + 1)
}

/// How many bytes `a` and `b` begin with in common.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    while at + 8 <= n {
        let differ = word(&a[at..]) ^ word(&b[at..]);
        if differ != 0 {
            return at + differ.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    while at < n && a[at] == b[at] {
        at += 1;
    }
    at
}

/// How many bytes `a` and `b` end with in common.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut at = 0;
    while at + BLOCK <= n && a[n - at - BLOCK..n - at] == b[n - at - BLOCK..n - at] {
        at += BLOCK;
    }
    while at + 8 <= n {
        let differ = word(&a[n - at - 8..]) ^ word(&b[n - at - 8..]);
        if differ != 0 {
            return at + differ.leading_zeros() as usize / 8;
        }
        at += 8;
    }
    while at < n && a[n - at - 1] == b[n - at - 1] {
        at += 1;
    }
    at
}

/// The first 8 bytes of `bytes` (which has at least 8), little-endian.
fn word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// A line's hash, to compare lines with one comparison before comparing their bytes.
fn hash(line: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (line.len() as u64).wrapping_mul(K);
    let mut words = line.chunks_exact(8);
    for w in &mut words {
        h = (h ^ word(w)).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    (h ^ u64::from_le_bytes(last)).wrapping_mul(K)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so every run checks the same cases.
    struct Xorshift(u64);

    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }

        /// Fewer than `max` bytes drawn from `alphabet`.
        fn bytes(&mut self, max: usize, alphabet: &[u8]) -> Vec<u8> {
            let n = self.below(max);
            self.exactly(n, alphabet)
        }

        /// `n` bytes drawn from `alphabet`.
        fn exactly(&mut self, n: usize, alphabet: &[u8]) -> Vec<u8> {
            (0..n)
                .map(|_| alphabet[self.below(alphabet.len())])
                .collect()
        }
    }

    fn path(service: usize, module: usize) -> String {
        format!("/Users/someone/Developer/monorepo/service-{service:02}/src/module_{module:03}.rs")
    }

    /// A pretty-printed status-like document, one line per element: instances with lists of
    /// claimed paths, then a sorted map of every path to its owner, then a counter.
    fn status_lines(instances: usize, files_each: usize) -> Vec<String> {
        let mut lines = vec![
            "{".to_string(),
            "  \"version\": \"1.0\",".to_string(),
            "  \"updated_at\": \"2026-01-17T14:00:00Z\",".to_string(),
            "  \"instances\": [".to_string(),
        ];
        for i in 0..instances {
            lines.push("    {".into());
            lines.push(format!("      \"id\": \"itm-a{i:05}\","));
            lines.push(format!(
                "      \"task\": \"Port service-{:02} to the new storage layer\",",
                i % 100
            ));
            lines.push("      \"files_claimed\": [".into());
            for f in 0..files_each {
                let comma = if f + 1 < files_each { "," } else { "" };
                lines.push(format!("        \"{}\"{comma}", path(i % 100, f)));
            }
            lines.push("      ],".into());
            lines.push("      \"waiting\": [".into());
            lines.push("      ]".into());
            lines.push(if i + 1 < instances {
                "    },".into()
            } else {
                "    }".into()
            });
        }
        lines.push("  ],".into());
        lines.push("  \"global_claims\": {".into());
        for i in 0..instances {
            for f in 0..files_each {
                lines.push(format!("    \"{}\": \"itm-a{i:05}\",", path(i % 100, f)));
            }
        }
        lines.push("  },".into());
        lines.push("  \"claims\": 17".into());
        lines.push("}".into());
        lines
    }

    fn join(lines: &[String]) -> Vec<u8> {
        let mut text = lines.join("\n");
        text.push('\n');
        text.into_bytes()
    }

    /// One random line edit: insert, remove or change a line, somewhere.
    fn edit_lines(rng: &mut Xorshift, lines: &mut Vec<String>) {
        let at = rng.below(lines.len() + 1);
        match rng.below(6) {
            0 if at < lines.len() => {
                lines.remove(at);
            }
            1 if at < lines.len() => {
                let mut line = lines[at].clone().into_bytes();
                let k = rng.below(line.len() + 1);
                line.insert(k, b'x');
                lines[at] = String::from_utf8(line).unwrap();
            }
            2 => {
                let structural = ["      ],", "    },", "    {", "      ]", "  },", ""];
                lines.insert(at, structural[rng.below(structural.len())].to_string());
            }
            3 if at < lines.len() => {
                let copy = lines[rng.below(lines.len())].clone();
                lines.insert(at, copy);
            }
            _ => lines.insert(
                at,
                format!("        \"{}\",", path(rng.below(100), 900 + rng.below(99))),
            ),
        }
    }

    /// Checks the invariant and the diff's own promises: sorted, non-overlapping, non-empty
    /// hunks within the budget. Whether there was a diff.
    fn check(old: &[u8], new: &[u8]) -> bool {
        let Some(hunks) = diff(old, new) else {
            return false;
        };
        assert_eq!(
            apply(old, &hunks).as_deref(),
            Some(new),
            "old {:?}\nnew {:?}\nhunks {hunks:?}",
            text(old),
            text(new)
        );
        // The check that needs no copy agrees, and tells any other bytes apart.
        assert!(rebuilds(old, &hunks, new), "{hunks:?}");
        let mut other = new.to_vec();
        match other.len() {
            0 => other.push(b'x'),
            n => other[n / 2] ^= 1,
        }
        assert!(!rebuilds(old, &hunks, &other), "{hunks:?}");
        assert!(!rebuilds(old, &hunks, &new[..new.len().saturating_sub(1)]) || new.is_empty());
        let mut previous_end = 0;
        for h in &hunks {
            assert!(
                h.start >= previous_end && h.end >= h.start && h.end <= old.len() as u64,
                "{hunks:?}"
            );
            assert!(
                h.end > h.start || !h.with.is_empty(),
                "an empty hunk: {hunks:?}"
            );
            previous_end = h.end;
        }
        assert!(
            cost(&hunks) <= new.len() / 4,
            "over budget: {} > {}",
            cost(&hunks),
            new.len() / 4
        );
        true
    }

    fn text(bytes: &[u8]) -> String {
        let s = String::from_utf8_lossy(bytes);
        if s.len() > 400 {
            format!("{}...", &s[..s.floor_char_boundary(400)])
        } else {
            s.into_owned()
        }
    }

    fn cost(hunks: &[Hunk]) -> usize {
        hunks.iter().map(|h| h.with.len() + HUNK_OVERHEAD).sum()
    }

    #[test]
    fn a_few_line_edits_to_a_document_round_trip_as_a_small_diff() {
        let mut rng = Xorshift(0x5EED_0001);
        for case in 0..300 {
            let mut lines = status_lines(1 + rng.below(40), 1 + rng.below(30));
            let old = join(&lines);
            let edits = 1 + rng.below(8);
            for _ in 0..edits {
                edit_lines(&mut rng, &mut lines);
            }
            let new = join(&lines);
            let small = new.len() > 40_000 && edits <= 4;
            assert!(
                check(&old, &new) || !small,
                "case {case}: {edits} edits to {} bytes gave no diff",
                old.len()
            );
        }
    }

    #[test]
    fn any_bytes_round_trip() {
        let mut rng = Xorshift(0x5EED_0002);
        let mut diffs = 0;
        for case in 0..3000 {
            let (old, new) = match case % 9 {
                // byte edits to a document
                0 => {
                    let old = join(&status_lines(1 + rng.below(10), 1 + rng.below(10)));
                    let mut new = old.clone();
                    for _ in 0..1 + rng.below(6) {
                        let at = rng.below(new.len() + 1);
                        match rng.below(3) {
                            0 if at < new.len() => new[at] = b"x\n {}"[rng.below(5)],
                            1 if at < new.len() => {
                                drop(new.drain(at..(at + rng.below(30)).min(new.len())))
                            }
                            _ => new.splice(at..at, rng.bytes(20, b"ab\n ")).for_each(drop),
                        }
                    }
                    (old, new)
                }
                1 => (Vec::new(), join(&status_lines(1 + rng.below(5), 3))),
                2 => (join(&status_lines(1 + rng.below(5), 3)), Vec::new()),
                3 => {
                    let same = join(&status_lines(1 + rng.below(5), rng.below(20)));
                    (same.clone(), same)
                }
                // binary noise without newlines, then with a few bytes changed
                4 => {
                    let old: Vec<u8> = (0..rng.below(5000))
                        .map(|_| (rng.next() as u8) | 1)
                        .filter(|&b| b != b'\n')
                        .collect();
                    let mut new = old.clone();
                    for _ in 0..rng.below(4) {
                        if !new.is_empty() {
                            let at = rng.below(new.len());
                            new[at] = new[at].wrapping_add(2);
                        }
                    }
                    (old, new)
                }
                // completely different documents
                5 => (
                    join(&status_lines(1 + rng.below(20), 5)),
                    rng.bytes(4000, b"{}[],\n \"abc"),
                ),
                // all-identical lines, some added or removed
                6 => {
                    let line = ["      ],\n", "\n", "x"][rng.below(3)];
                    (
                        line.repeat(rng.below(300)).into_bytes(),
                        line.repeat(rng.below(300)).into_bytes(),
                    )
                }
                // few distinct short lines: resynchronisation points everywhere
                7 => {
                    let old = rng.bytes(3000, b"ab\n\n");
                    let mut new = old.clone();
                    for _ in 0..1 + rng.below(10) {
                        let at = rng.below(new.len() + 1);
                        let insert = rng.bytes(8, b"ab\n");
                        new.splice(at..(at + rng.below(8)).min(new.len()), insert)
                            .for_each(drop);
                    }
                    (old, new)
                }
                // tiny texts
                _ => (rng.bytes(12, b"a\n"), rng.bytes(12, b"a\n")),
            };
            diffs += usize::from(check(&old, &new));
        }
        assert!(diffs > 1000, "only {diffs} of 3000 cases had a diff");
    }

    #[test]
    fn identical_and_empty_versions() {
        let doc = join(&status_lines(3, 3));
        assert_eq!(diff(&doc, &doc), Some(Vec::new()));
        assert_eq!(diff(b"", b""), Some(Vec::new()));
        assert_eq!(diff(b"", &doc), None, "a new document is logged whole");
        assert_eq!(diff(&doc, b""), None, "an emptied document is logged whole");
    }

    #[test]
    fn five_small_edits_to_ten_thousand_lines_take_under_two_kilobytes() {
        let mut lines = status_lines(300, 16);
        assert!(lines.len() > 10_000, "{} lines", lines.len());
        let old = join(&lines);
        lines[2] = "  \"updated_at\": \"2026-01-17T14:05:09Z\",".into();
        lines.insert(2000, format!("        \"{}\",", path(7, 999)));
        lines.remove(4000);
        lines.insert(7000, format!("    \"{}\": \"itm-a00042\",", path(42, 998)));
        let last = lines.len() - 2;
        lines[last] = "  \"claims\": 18".into();
        let new = join(&lines);
        let hunks = diff(&old, &new).expect("a diff");
        assert_eq!(apply(&old, &hunks), Some(new));
        assert!(
            cost(&hunks) < 2048,
            "{} bytes in {} hunks",
            cost(&hunks),
            hunks.len()
        );
    }

    #[test]
    fn a_claim_in_the_real_status_fixture_is_a_small_diff() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/valid/status-1000-claims.json"
        );
        let old = std::fs::read_to_string(fixture).unwrap();
        let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
        let line_of =
            |lines: &[String], needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
        let updated = line_of(&lines, "\"updated_at\"");
        lines[updated] = "  \"updated_at\": \"2026-01-17T14:00:01Z\",".into();
        let claimed = line_of(&lines, "service-03/src/module_017.rs");
        lines.insert(
            claimed + 1,
            "        \"/Users/mariogiancini/Developer/monorepo/service-03/src/module_017b.rs\","
                .into(),
        );
        let owned = line_of(
            &lines,
            "\"/Users/mariogiancini/Developer/monorepo/service-03/src/module_017.rs\":",
        );
        lines.insert(owned + 1, "    \"/Users/mariogiancini/Developer/monorepo/service-03/src/module_017b.rs\": \"itm-a03333\",".into());
        let mut new = lines.join("\n");
        new.push('\n');
        let hunks = diff(old.as_bytes(), new.as_bytes()).expect("a diff");
        assert_eq!(
            apply(old.as_bytes(), &hunks).as_deref(),
            Some(new.as_bytes())
        );
        assert!(
            cost(&hunks) < 512,
            "{} bytes in {} hunks: {hunks:?}",
            cost(&hunks),
            hunks.len()
        );
    }

    #[test]
    fn a_long_insertion_and_a_long_removal_resynchronise() {
        let mut lines = status_lines(100, 20);
        let old = join(&lines);
        let block: Vec<String> = (0..150)
            .map(|k| format!("        \"{}\",", path(5, 500 + k)))
            .collect();
        lines.splice(500..500, block);
        lines.drain(3000..3200);
        lines[3500] = "changed".into();
        let new = join(&lines);
        let hunks = diff(&old, &new).expect("a diff");
        assert_eq!(apply(&old, &hunks), Some(new));
        assert_eq!(hunks.len(), 3, "{hunks:?}");
        assert!(cost(&hunks) < 150 * 80, "{} bytes", cost(&hunks));
    }

    #[test]
    fn an_instance_added_or_finished_in_the_middle_costs_about_its_own_lines() {
        let mut rng = Xorshift(0x5EED_0004);
        for _ in 0..50 {
            let old_lines = status_lines(40, 1 + rng.below(20));
            let old = join(&old_lines);
            // The lines of the instance starting at `start`, through its closing "    },".
            let start = 4 + 8 * rng.below(38);
            let start = start
                + old_lines[start..]
                    .iter()
                    .position(|l| l == "    {")
                    .unwrap();
            let end = start
                + old_lines[start..]
                    .iter()
                    .position(|l| l == "    },")
                    .unwrap()
                + 1;
            let block: Vec<String> = old_lines[start..end]
                .iter()
                .map(|l| l.replace("itm-a", "web-b"))
                .collect();
            let block_bytes: usize = block.iter().map(|l| l.len() + 1).sum();

            let mut added = old_lines.clone();
            let at = start + (end - start) * (1 + rng.below(3));
            let at = at + added[at..].iter().position(|l| l == "    {").unwrap();
            added.splice(at..at, block);
            let new = join(&added);
            let hunks = diff(&old, &new).expect("a diff");
            assert_eq!(apply(&old, &hunks).as_deref(), Some(&new[..]));
            assert!(
                cost(&hunks) <= block_bytes + 2 * HUNK_OVERHEAD,
                "{} > {block_bytes}: {hunks:?}",
                cost(&hunks)
            );

            let mut finished = old_lines.clone();
            finished.drain(start..end);
            let new = join(&finished);
            let hunks = diff(&old, &new).expect("a diff");
            assert_eq!(apply(&old, &hunks).as_deref(), Some(&new[..]));
            assert!(cost(&hunks) <= 2 * HUNK_OVERHEAD, "{hunks:?}");
        }
    }

    #[test]
    fn apply_refuses_hunks_out_of_range_overlapping_or_unsorted() {
        let old = b"0123456789";
        let h = |start, end, with: &str| Hunk {
            start,
            end,
            with: with.as_bytes().to_vec(),
        };
        assert_eq!(
            apply(old, &[h(2, 4, "ab"), h(4, 4, "c"), h(10, 10, "!")]),
            Some(b"01abc456789!".to_vec())
        );
        assert_eq!(apply(old, &[]), Some(old.to_vec()));
        assert_eq!(apply(old, &[h(0, 10, "")]), Some(Vec::new()));
        for bad in [
            vec![h(0, 11, "")],
            vec![h(11, 11, "x")],
            vec![h(5, 4, "x")],
            vec![h(u64::MAX, u64::MAX, "x")],
            vec![h(0, u64::MAX, "")],
            vec![h(2, 6, "x"), h(5, 7, "y")],
            vec![h(6, 7, "x"), h(2, 3, "y")],
            vec![h(3, 3, "x"), h(2, 2, "y")],
        ] {
            assert_eq!(apply(old, &bad), None, "{bad:?}");
            assert!(!rebuilds(old, &bad, old), "{bad:?}");
        }
        assert!(rebuilds(
            old,
            &[h(2, 4, "ab"), h(4, 4, "c"), h(10, 10, "!")],
            b"01abc456789!"
        ));
        assert!(!rebuilds(
            old,
            &[h(2, 4, "ab"), h(4, 4, "c"), h(10, 10, "!")],
            b"01abc456789?"
        ));
    }

    /// How long `diff(old, new)` takes at best and on average over `runs` runs, and its hunks.
    fn time_diff(
        old: &[u8],
        new: &[u8],
        runs: u32,
    ) -> (std::time::Duration, std::time::Duration, Option<Vec<Hunk>>) {
        let mut best = std::time::Duration::MAX;
        let started = std::time::Instant::now();
        let mut hunks = None;
        for _ in 0..runs {
            let one = std::time::Instant::now();
            hunks =
                std::hint::black_box(diff(std::hint::black_box(old), std::hint::black_box(new)));
            best = best.min(one.elapsed());
        }
        (best, started.elapsed() / runs, hunks)
    }

    /// Not a test of speed (no bound is asserted): prints how long diffing a 1.3 MB document
    /// with 6 edits takes, and how long the worst inputs take to give up.
    /// `cargo test --locked --release -p conductor-store --lib delta -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn print_the_time_to_diff_a_large_document() {
        let mut lines = status_lines(435, 18);
        let old = join(&lines);
        lines[2] = "  \"updated_at\": \"2026-01-17T14:05:09Z\",".into();
        lines.insert(3000, format!("        \"{}\",", path(7, 999)));
        lines[6000].insert(10, 'y');
        lines.insert(
            12_000,
            format!("    \"{}\": \"itm-a00042\",", path(42, 998)),
        );
        lines.remove(14_000);
        let last = lines.len() - 2;
        lines[last] = "  \"claims\": 18".into();
        let new = join(&lines);
        let (best, mean, hunks) = time_diff(&old, &new, 200);
        let hunks = hunks.expect("a diff");
        assert_eq!(apply(&old, &hunks), Some(new.clone()));
        println!(
            "diff of {} bytes ({} lines) with 6 edits: {} hunks, {} bytes; best {best:?}, mean {mean:?} over 200 runs",
            old.len(),
            lines.len(),
            hunks.len(),
            cost(&hunks),
        );

        let mut rng = Xorshift(0x5EED_0003);
        let mut every_tenth = status_lines(435, 18);
        for k in (0..every_tenth.len()).step_by(10) {
            every_tenth[k].push('x');
        }
        let short_lines = rng.exactly(1 << 20, b"ab\n");
        let mut short_lines_edited = short_lines.clone();
        for _ in 0..20_000 {
            let at = rng.below(short_lines_edited.len());
            short_lines_edited[at] = b"ab\n"[rng.below(3)];
        }
        let worst: [(&str, &[u8], &[u8]); 4] = [
            (
                "completely different",
                &old,
                &rng.exactly(1 << 20, b"{}[],\n \"abc"),
            ),
            ("every tenth line changed", &old, &join(&every_tenth)),
            (
                "a 1 MB document of random short lines, 20,000 bytes changed",
                &short_lines,
                &short_lines_edited,
            ),
            (
                "lines in reverse order",
                &old,
                &join(&lines.iter().rev().cloned().collect::<Vec<_>>()),
            ),
        ];
        for (what, old, new) in worst {
            let (best, mean, hunks) = time_diff(old, new, 10);
            let outcome = match hunks {
                Some(h) => format!("{} hunks, {} bytes", h.len(), cost(&h)),
                None => "none".to_string(),
            };
            println!(
                "{what} ({} -> {} bytes): {outcome}; best {best:?}, mean {mean:?} over 10 runs",
                old.len(),
                new.len()
            );
        }
    }
}
