//! The paged layout of a big document on the shared store (issue 36 §2).
//!
//! On etcd a document is one key, rewritten whole by every transaction: at 10,000 claims
//! `status.json` is 1.4 MB per claim, and etcd's default 1.5 MiB request limit caps a team at
//! about 9,000 live claims. A document that declares [`crate::Document::PAGED`] is kept instead
//! as a small head (the document without its big map) and the map's entries in pages of
//! [`PAGE`] entries, in key order, each page under the key of its first entry:
//!
//! - `<prefix>/split/<file>/head`: the head, the document's own bytes without the map;
//! - `<prefix>/split/<file>/page/<first key>`: a JSON object of entries (key → value);
//! - `<prefix>/doc/<file>`: a [`TOMBSTONE`], so that an older conductor, which reads the whole
//!   document from there, stops with an error instead of acting on a copy nobody updates.
//!
//! A transaction writes the head (every commit compares it, so commits stay serialized as they
//! were on the one key) and only the pages whose entries changed: a claim puts one page of a
//! few kilobytes whatever the number of claims. [`plan`] decides which pages to put and delete;
//! it is pure and knows no domain: entries are keys and JSON values.

use std::collections::BTreeMap;

use serde_json::Value;

/// Entries a page is cut down to when it grows past [`PAGE_MAX`]; adjacent pages that fit in
/// one together are merged.
pub const PAGE: usize = 256;
/// Entries a page may hold before it is cut.
pub const PAGE_MAX: usize = 512;

/// What the document's `doc/<file>` key holds once the document is paged.
pub fn tombstone(moved_to: &str) -> Vec<u8> {
    serde_json::to_vec_pretty(&serde_json::json!({
        "moved_to": moved_to,
        "note": "this prefix keeps the document in pages (conductor migrate-store); an older conductor cannot read it: upgrade conductor",
    }))
    .expect("a JSON object serializes")
}

/// True when `bytes` are a [`tombstone`].
pub fn is_tombstone(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Map<String, Value>>(bytes)
        .is_ok_and(|m| m.contains_key("moved_to") && !m.contains_key("version"))
}

/// A document cut for the paged layout: its head and the entries of its map.
#[derive(Debug, Default, PartialEq)]
pub struct Split {
    pub head: Vec<u8>,
    pub entries: BTreeMap<String, Value>,
}

/// One page: entries in key order.
pub type Page = BTreeMap<String, Value>;

/// A change to one page key (a page is named by its first key when it was made).
#[derive(Debug, PartialEq)]
pub enum PageChange {
    Put(String, Vec<u8>),
    Delete(String),
    /// Every page from the first to the last named, both included (consecutive pages of a
    /// whole read: one etcd operation however many).
    DeleteRange(String, String),
}

/// Pages merged in one plan at most: a whole read after many releases (each partial write
/// leaves small pages) tidies a few at a time, so its transaction stays under etcd's 128
/// operations.
pub const MERGES: usize = 32;

/// Decode a page's bytes.
pub fn decode_page(bytes: &[u8]) -> Result<Page, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("a page is not a JSON object: {e}"))
}

fn encode_page(page: &Page) -> Vec<u8> {
    serde_json::to_vec(page).expect("JSON values serialize")
}

/// The page changes that make `pages` (every page the store holds, by name) hold exactly
/// `entries`. Entries stay in the page whose name is the greatest at or before their key (the
/// ones before every page start a new page); a page over [`PAGE_MAX`] is cut into pages of
/// [`PAGE`]; an emptied page is deleted, and two adjacent pages that fit in [`PAGE`] together
/// are merged (when `merge`: only when `pages` are all the pages, since a page not read may lie
/// between two that were). A page whose entries did not change is not written.
///
/// With only some pages read, every entry added must have had its page read (the greatest page
/// named at or before it in the store): it is then put in that page or a new one after it.
pub fn plan(
    pages: &BTreeMap<String, Page>,
    entries: &BTreeMap<String, Value>,
    merge: bool,
) -> Vec<PageChange> {
    // Each entry to the page it falls in; `None`: before every page.
    let mut buckets: BTreeMap<Option<&str>, Page> = BTreeMap::new();
    for name in pages.keys() {
        buckets.insert(Some(name.as_str()), Page::new());
    }
    for (k, v) in entries {
        let page = pages
            .range::<str, _>((
                std::ops::Bound::Unbounded,
                std::ops::Bound::Included(k.as_str()),
            ))
            .next_back()
            .map(|(n, _)| n.as_str());
        buckets
            .entry(page)
            .or_default()
            .insert(k.clone(), v.clone());
    }
    // The pages wanted, in key order: each named by its old name, or its first key when new.
    let mut wanted: Vec<(String, Page)> = Vec::new();
    for (name, page) in buckets {
        let mut rest = page;
        let mut name = name.map(str::to_string);
        while rest.len() > PAGE_MAX {
            let cut = rest
                .keys()
                .nth(PAGE)
                .expect("more than PAGE entries")
                .clone();
            let tail = rest.split_off(&cut);
            let first = name
                .take()
                .unwrap_or_else(|| rest.keys().next().expect("not empty").clone());
            wanted.push((first, std::mem::replace(&mut rest, tail)));
        }
        if rest.is_empty() {
            continue;
        }
        let first = name.unwrap_or_else(|| rest.keys().next().expect("not empty").clone());
        wanted.push((first, rest));
    }
    // Merge small neighbours (the earlier keeps its name).
    let mut merged: Vec<(String, Page)> = Vec::new();
    let mut merges = 0;
    for (name, page) in wanted {
        match merged.last_mut() {
            Some((_, prev)) if merge && merges < MERGES && prev.len() + page.len() <= PAGE => {
                prev.extend(page);
                merges += 1;
            }
            _ => merged.push((name, page)),
        }
    }
    let mut changes = Vec::new();
    let mut kept: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for (name, page) in &merged {
        if let Some(old) = pages.get(name) {
            kept.insert(pages.get_key_value(name).expect("just found").0.as_str());
            if old == page {
                continue;
            }
        }
        changes.push(PageChange::Put(name.clone(), encode_page(page)));
    }
    // Pages gone; with every page known (`merge`), each run of consecutive ones in one range.
    let mut run: Option<(&String, &String)> = None;
    for name in pages.keys() {
        if !kept.contains(name.as_str()) {
            match &mut run {
                Some((_, last)) if merge => *last = name,
                Some(_) => {
                    end_run(&mut changes, run.take());
                    run = Some((name, name));
                }
                None => run = Some((name, name)),
            }
        } else {
            end_run(&mut changes, run.take());
        }
    }
    end_run(&mut changes, run);
    changes
}

fn end_run(changes: &mut Vec<PageChange>, run: Option<(&String, &String)>) {
    match run {
        Some((first, last)) if first == last => changes.push(PageChange::Delete(first.clone())),
        Some((first, last)) => changes.push(PageChange::DeleteRange(first.clone(), last.clone())),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries(keys: impl IntoIterator<Item = String>) -> BTreeMap<String, Value> {
        keys.into_iter()
            .map(|k| (k, json!(["abc-123456", 1])))
            .collect()
    }

    /// Apply changes to pages, as the store does.
    fn apply(pages: &mut BTreeMap<String, Page>, changes: Vec<PageChange>) {
        for c in changes {
            match c {
                PageChange::Put(n, b) => {
                    pages.insert(n, decode_page(&b).unwrap());
                }
                PageChange::Delete(n) => {
                    pages.remove(&n);
                }
                PageChange::DeleteRange(a, b) => {
                    pages.retain(|n, _| *n < a || *n > b);
                }
            }
        }
    }

    fn all(pages: &BTreeMap<String, Page>) -> BTreeMap<String, Value> {
        pages.values().flat_map(|p| p.clone()).collect()
    }

    #[test]
    fn pages_hold_exactly_the_entries_and_a_change_rewrites_one_page() {
        let keys: Vec<String> = (0..5000).map(|i| format!("/r/src/f{i:05}.rs")).collect();
        let mut pages = BTreeMap::new();
        let want = entries(keys.clone());
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        assert_eq!(all(&pages), want);
        assert!(pages.values().all(|p| p.len() <= PAGE_MAX && !p.is_empty()));
        // Every page starts at or before its first entry, and holds keys below the next page.
        let names: Vec<&String> = pages.keys().collect();
        for (i, (n, p)) in pages.iter().enumerate() {
            assert!(p.keys().next().unwrap() >= n);
            if let Some(next) = names.get(i + 1) {
                assert!(p.keys().last().unwrap() < *next);
            }
        }
        // One more entry: one page written, nothing deleted.
        let mut more = want.clone();
        more.insert("/r/src/f02500x.rs".into(), json!(["abc-123456", 9]));
        let changes = plan(&pages, &more, true);
        assert_eq!(changes.len(), 1, "{changes:?}");
        apply(&mut pages, changes);
        assert_eq!(all(&pages), more);
        // The same entries again: nothing to write.
        assert!(plan(&pages, &more, true).is_empty());
    }

    #[test]
    fn entries_before_every_page_growing_pages_and_emptied_pages() {
        let mut pages = BTreeMap::new();
        let mut want = entries((100..400).map(|i| format!("/m/{i}")));
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        // Keys sorting before the first page.
        want.extend(entries((0..50).map(|i| format!("/a/{i:03}"))));
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        assert_eq!(all(&pages), want);
        // A page grown past PAGE_MAX is cut.
        want.extend(entries((0..700).map(|i| format!("/m/1{i:04}"))));
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        assert_eq!(all(&pages), want);
        assert!(pages.values().all(|p| p.len() <= PAGE_MAX));
        // Everything released: every page deleted, in one range.
        let changes = plan(&pages, &BTreeMap::new(), true);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(matches!(changes[0], PageChange::DeleteRange(..)));
        apply(&mut pages, changes);
        assert!(pages.is_empty());
    }

    #[test]
    fn small_neighbours_are_merged() {
        let mut pages = BTreeMap::new();
        let mut want = entries((0..2000).map(|i| format!("/k/{i:05}")));
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        let before = pages.len();
        // Keep one key in ten: the pages shrink and merge, a bounded number at a time.
        want.retain(|k, _| k.ends_with('0'));
        let c = plan(&pages, &want, true);
        apply(&mut pages, c);
        assert_eq!(all(&pages), want);
        assert!(
            pages.len() < before,
            "{} pages, {before} before",
            pages.len()
        );
        // Many small pages (as partial writes leave them): one plan merges at most MERGES.
        let mut small = BTreeMap::new();
        let want = entries((0..400).map(|i| format!("/s/{i:04}")));
        for (k, v) in &want {
            small.insert(k.clone(), Page::from([(k.clone(), v.clone())]));
        }
        let c = plan(&small, &want, true);
        assert!(c.len() <= 2 * MERGES + 1, "{} changes", c.len());
        apply(&mut small, c);
        assert_eq!(all(&small), want);
        // Only some pages read: nothing merged, each emptied page deleted by name.
        let c = plan(&small, &BTreeMap::new(), false);
        assert!(c.iter().all(|c| matches!(c, PageChange::Delete(_))));
    }

    #[test]
    fn tombstones_are_told_from_documents() {
        assert!(is_tombstone(&tombstone("/team/split/status.json/")));
        assert!(!is_tombstone(br#"{"version":"1.0","instances":[]}"#));
        assert!(!is_tombstone(b"not json"));
    }
}
