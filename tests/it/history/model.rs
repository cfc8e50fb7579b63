//! The sequential model of the claim table, written from docs/protocol.md and the spec (not
//! from conductor's matcher): live instances, holders of files, directories (`d/`) and globs
//! (`*` within one name), the first-come, first-served wait queues, `--force`, `release`, `done`.
//!
//! Keys are relative to the partition's root (`a.rs`, `sub/`, `*.rs`, `sub/c.rs`).

use std::collections::{BTreeMap, BTreeSet};

/// What an operation asked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// `start`; the id comes back in the result.
    Start,
    /// `claim KEYS` (with `--force WHY` when `force`).
    Claim {
        id: String,
        keys: Vec<String>,
        force: bool,
    },
    /// The first half of `claim --wait KEYS`: claim the free keys, queue for the held ones.
    /// Not observable on its own; `req` ties it to its [`Call::WaitEnd`].
    WaitStart {
        id: String,
        keys: Vec<String>,
        req: u32,
    },
    /// The answer of that `claim --wait`.
    WaitEnd {
        id: String,
        keys: Vec<String>,
        req: u32,
    },
    /// `release KEYS`.
    Release { id: String, keys: Vec<String> },
    /// `done`.
    Done { id: String },
    /// `status`: who holds which key of the partition.
    Status,
    /// `cleanup --instance ID`: a person retires the instance now, whatever its heartbeat.
    Cleanup { id: String },
}

/// What it answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ret {
    /// `start` registered this id.
    Started(String),
    /// A claim's answer: keys granted now, and for each refused key the holders named.
    Claimed {
        claimed: BTreeSet<String>,
        conflicts: BTreeMap<String, BTreeSet<String>>,
    },
    /// A waiting claim's answer: keys it holds, keys still held by others (gave up), keys it
    /// was granted and then lost.
    Waited {
        held: BTreeSet<String>,
        gave_up: BTreeSet<String>,
        lost: BTreeSet<String>,
    },
    /// `release`'s keys.
    Released(BTreeSet<String>),
    /// `done` succeeded.
    Finished,
    /// `cleanup --instance ID` retired it.
    Reaped,
    /// `status`: key → holder.
    Holders(BTreeMap<String, String>),
    /// Refused as invalid with the promise that nothing changed (exit 2: a key not held, an
    /// instance not live).
    Refused,
    /// Failed with the promise that nothing changed, for a reason outside the model (exit 1, a
    /// lock timeout): allowed at any time.
    Fail,
}

/// One pending `claim --wait` request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Pending {
    id: String,
    keys: Vec<String>,
    /// Keys this request was granted (at once or handed over).
    granted: BTreeSet<String>,
}

/// The model's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    live: BTreeSet<String>,
    /// key → holder.
    holders: BTreeMap<String, String>,
    /// (ticket, instance, key).
    queue: Vec<(u64, String, String)>,
    next_ticket: u64,
    waits: BTreeMap<u32, Pending>,
}

fn is_dir(k: &str) -> bool {
    k.ends_with('/')
}

fn is_glob(k: &str) -> bool {
    k.contains('*')
}

/// `*` matches any run of characters within one name.
fn glob_match(pat: &str, path: &str) -> bool {
    let (p, s) = (pat.as_bytes(), path.as_bytes());
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'*') => (0..=s.len())
                .take_while(|&i| i == 0 || s[i - 1] != b'/')
                .any(|i| go(&p[1..], &s[i..])),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    go(p, s)
}

/// Whether two keys can name one file: equal files, a directory and anything below it, a glob
/// and a file it matches, a glob and a directory that can hold a match, two globs that can both
/// match one name (decided here by trying the names the partitions use).
pub fn overlap(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (is_dir(a), is_dir(b), is_glob(a), is_glob(b)) {
        (true, _, _, _) if b.starts_with(a) => true,
        (_, true, _, _) if a.starts_with(b) => true,
        (true, _, _, true) | (_, true, true, _) => {
            let (dir, glob) = if is_dir(a) { (a, b) } else { (b, a) };
            // A glob reaches into a directory when its literal prefix is inside it, or when
            // it can match a name there.
            glob.starts_with(dir)
                || SAMPLE_FILES
                    .iter()
                    .any(|f| f.starts_with(dir) && glob_match(glob, f))
        }
        (_, _, true, true) => SAMPLE_FILES
            .iter()
            .any(|f| glob_match(a, f) && glob_match(b, f)),
        (_, _, true, false) => glob_match(a, b),
        (_, _, false, true) => glob_match(b, a),
        _ => false,
    }
}

/// The files of a partition (every key the harness uses names some of these).
pub const SAMPLE_FILES: &[&str] = &["a.rs", "b.rs", "sub/c.rs", "sub/d.md"];

impl State {
    /// Holders other than `id` of keys that overlap `key`, each with the key it holds.
    fn others(&self, id: &str, key: &str) -> Vec<(String, String)> {
        self.holders
            .iter()
            .filter(|(k, h)| h.as_str() != id && overlap(k, key))
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect()
    }

    fn grant(&mut self, id: &str, key: &str) {
        self.holders.insert(key.to_string(), id.to_string());
        self.queue.retain(|(_, i, k)| !(i == id && k == key));
        for p in self.waits.values_mut() {
            if p.id == id && p.keys.iter().any(|k| k == key) {
                p.granted.insert(key.to_string());
            }
        }
    }

    /// A freed key goes to the waiters, lowest ticket first, that no other holder blocks.
    fn handoff(&mut self, freed: &str) {
        let mut heads: Vec<(u64, String, String)> = self
            .queue
            .iter()
            .filter(|(_, _, k)| overlap(k, freed))
            .cloned()
            .collect();
        heads.sort();
        for (_, id, key) in heads {
            if self.others(&id, &key).is_empty() {
                self.grant(&id, &key);
            }
        }
    }

    fn drop_key(&mut self, key: &str) {
        self.holders.remove(key);
    }

    /// Apply `call` answered by `ret`: the next state, or `None` when the answer is impossible
    /// here. `ret == None` is an operation whose answer is unknown (killed, timed out): any
    /// effect it could have had is allowed.
    pub fn step(&self, call: &Call, ret: Option<&Ret>) -> Vec<State> {
        let mut s = self.clone();
        match (call, ret) {
            (_, Some(Ret::Fail)) => {
                // Promised to change nothing.
                if matches!(call, Call::WaitEnd { .. } | Call::WaitStart { .. }) {
                    return vec![];
                }
                vec![s]
            }
            (Call::Release { id, keys }, Some(Ret::Refused)) => {
                let held_all = keys
                    .iter()
                    .all(|k| s.holders.get(k).map(String::as_str) == Some(id.as_str()));
                if held_all { vec![] } else { vec![s] }
            }
            (
                Call::Claim { id, .. } | Call::Done { id } | Call::Cleanup { id },
                Some(Ret::Refused),
            ) => {
                if s.live.contains(id) {
                    vec![]
                } else {
                    vec![s]
                }
            }
            (Call::Start, Some(Ret::Started(id))) => {
                if s.live.contains(id) {
                    return vec![];
                }
                s.live.insert(id.clone());
                vec![s]
            }
            (Call::Start, None) => vec![s],
            (Call::Claim { id, keys, force }, ret) => {
                if !s.live.contains(id) {
                    return if ret.is_none() { vec![s] } else { vec![] };
                }
                let mut claimed = BTreeSet::new();
                let mut conflicts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                for k in keys {
                    let others = s.others(id, k);
                    if others.is_empty() || *force {
                        for (held, _) in others {
                            s.drop_key(&held);
                        }
                        s.grant(id, k);
                        claimed.insert(k.clone());
                    } else {
                        conflicts.insert(k.clone(), others.into_iter().map(|(_, h)| h).collect());
                    }
                }
                match ret {
                    None => vec![self.clone(), s],
                    Some(Ret::Claimed {
                        claimed: c,
                        conflicts: x,
                    }) if *c == claimed && *x == conflicts => vec![s],
                    _ => vec![],
                }
            }
            (Call::WaitStart { id, keys, req }, _) => {
                if !s.live.contains(id) || s.waits.contains_key(req) {
                    return vec![];
                }
                s.waits.insert(
                    *req,
                    Pending {
                        id: id.clone(),
                        keys: keys.clone(),
                        granted: BTreeSet::new(),
                    },
                );
                for k in keys {
                    if s.others(id, k).is_empty() {
                        s.grant(id, k);
                    } else if !s.queue.iter().any(|(_, i, q)| i == id && q == k) {
                        s.next_ticket += 1;
                        s.queue.push((s.next_ticket, id.clone(), k.clone()));
                    }
                }
                vec![s]
            }
            (Call::WaitEnd { id, keys, req }, ret) => {
                // Only after its start.
                let Some(p) = s.waits.remove(req) else {
                    return vec![];
                };
                let holds = |s: &State, k: &str| s.holders.get(k).map(String::as_str) == Some(id);
                let queued: BTreeSet<String> = keys
                    .iter()
                    .filter(|k| s.queue.iter().any(|(_, i, q)| i == id && q == *k))
                    .cloned()
                    .collect();
                let lost: BTreeSet<String> = keys
                    .iter()
                    .filter(|k| p.granted.contains(*k) && !holds(&s, k))
                    .cloned()
                    .collect();
                let held: BTreeSet<String> =
                    keys.iter().filter(|k| holds(&s, k)).cloned().collect();
                // Giving up: leave the queues; a queued key that is free now is claimed as a
                // plain claim would (it was never granted: still the one request).
                let mut gave_up = BTreeSet::new();
                let mut held_now = held.clone();
                s.queue.retain(|(_, i, q)| !(i == id && queued.contains(q)));
                for k in &queued {
                    if s.others(id, k).is_empty() {
                        s.grant(id, k);
                        held_now.insert(k.clone());
                    } else {
                        gave_up.insert(k.clone());
                    }
                }
                match ret {
                    None => vec![s],
                    Some(Ret::Waited {
                        held: h,
                        gave_up: g,
                        lost: l,
                    }) if *h == held_now && *g == gave_up && *l == lost => vec![s],
                    _ => vec![],
                }
            }
            (Call::Release { id, keys }, ret) => {
                let mut released = BTreeSet::new();
                let mut ok = true;
                for k in keys {
                    if s.holders.get(k).map(String::as_str) == Some(id.as_str()) {
                        s.drop_key(k);
                        s.handoff(k);
                        released.insert(k.clone());
                    } else {
                        ok = false;
                    }
                }
                match ret {
                    // Refused when it names a key the instance does not hold: no effect.
                    None if !ok => vec![self.clone()],
                    None => vec![self.clone(), s],
                    Some(Ret::Released(r)) if ok && *r == released => vec![s],
                    _ => vec![],
                }
            }
            // `cleanup --instance` retires it as `done` does: its keys handed to their waiters,
            // its own waits dropped.
            (Call::Done { id } | Call::Cleanup { id }, ret) => {
                if !s.live.contains(id) {
                    return if ret.is_none() { vec![s] } else { vec![] };
                }
                let mine: Vec<String> = s
                    .holders
                    .iter()
                    .filter(|(_, h)| *h == id)
                    .map(|(k, _)| k.clone())
                    .collect();
                s.queue.retain(|(_, i, _)| i != id);
                s.live.remove(id);
                for k in mine {
                    s.drop_key(&k);
                    s.handoff(&k);
                }
                match (call, ret) {
                    (_, None) => vec![self.clone(), s],
                    (Call::Done { .. }, Some(Ret::Finished))
                    | (Call::Cleanup { .. }, Some(Ret::Reaped)) => vec![s],
                    _ => vec![],
                }
            }
            (Call::Status, Some(Ret::Holders(h))) => {
                if *h == s.holders {
                    vec![s]
                } else {
                    vec![]
                }
            }
            (Call::Status, None) => vec![s],
            _ => vec![],
        }
    }
}
