//! Living beside other writers of `status.json` (the original plugin's jq recipes, people with
//! jq): what conductor does with a state that someone else changed since its own last write.
//! Pure: the store hands in the state as read, what it knows about who wrote it, and a
//! [`Resolve`] that asks the filesystem where a path physically leads.
//!
//! The rules (docs/protocol.md, "Sharing the home with other tools"):
//! - `global_claims` is the truth: it is what the protocol's own conflict check reads. Every
//!   instance's `files_claimed` is rewritten to list exactly the files `global_claims` gives it.
//! - A claim key is resolved to conductor's canonical form: a relative key is joined to its
//!   holder's `working_directory`, `.` and `..` collapse and symlinks in the part that exists are
//!   resolved, so one file is one claim however it was spelled. When two spellings of one file
//!   have different holders, the one already in canonical form keeps it (conductor granted it
//!   against the canonical key), else the first in key order.
//! - What cannot be interpreted (an empty key, a NUL byte, a holder that is not a registered
//!   instance, a second instance with an id already used) is dropped and named.
//!
//! Every repair is logged in `conflicts.log` (`REPAIR` lines) and the store keeps the original
//! file beside the new one. When the state conductor itself last wrote is known, the changes made
//! since are also described as events marked `"external": true` ([`external_events`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use serde_json::json;

use super::State;
use super::events;
use super::ops::{Effect, LogKind};
use crate::error::Result;
use crate::store::event::NewEvent;
use crate::text::printable_max;
use crate::time::Timestamp;

/// Where a path physically leads.
pub trait Resolve {
    /// `path` is absolute but may contain `.`, `..`, repeated or trailing slashes and symlinks;
    /// return its canonical form (conductor's claim key for it).
    fn physical(&mut self, path: &str) -> String;
}

/// Collapses `.` and `..` by the text alone, resolving no symlink (pure tests; `status`).
pub struct Lexical;

impl Resolve for Lexical {
    fn physical(&mut self, path: &str) -> String {
        lexical(path)
    }
}

/// `path` (absolute) with `.`, `..` and repeated slashes collapsed by the text alone.
pub fn lexical(path: &str) -> String {
    let mut out = PathBuf::from("/");
    for c in Path::new(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out.to_string_lossy().into_owned()
}

/// What the store knows about who wrote `status.json` last.
#[derive(Clone, Copy, Debug)]
pub enum Seen<'a> {
    /// It is the file conductor committed last: canonical and consistent, nothing to do.
    Own,
    /// Another program replaced it since; `Some` is the state conductor committed last, when it
    /// is known (then the differences become external events).
    Changed(Option<&'a State>),
}

/// What [`reconcile`] asks of the store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reconciled {
    /// The state was rewritten: keep the file as read beside it under this suffix
    /// (`status.json.<suffix>`) before replacing it.
    pub keep_copy: Option<String>,
    /// Keys the other program wrote through a symlink (as written → resolved): the state now
    /// has them resolved, and the store gives them their written spelling back before writing
    /// (see [`super::aliases`]). Not a repair.
    pub aliases: BTreeMap<String, String>,
}

/// Called at the start of every protocol transaction, before the operation runs. With
/// [`Seen::Own`] it returns at once. Otherwise it rewrites `state` into conductor's canonical,
/// consistent form, logs each repair and, when `previous` is known, pushes the events that
/// describe what the other writer changed (before the operation's own events).
pub fn reconcile(
    state: &mut State,
    seen: Seen,
    now: Timestamp,
    resolve: &mut dyn Resolve,
    fx: &mut Vec<Effect>,
) -> Result<Reconciled> {
    let Seen::Changed(previous) = seen else {
        return Ok(Reconciled::default());
    };
    let mut aliases = BTreeMap::new();
    let notes = repair_with(state, previous, resolve, &mut aliases);
    if let Some(prev) = previous {
        fx.extend(external_events(prev, state).into_iter().map(Effect::Event));
    }
    if notes.is_empty() {
        return Ok(Reconciled {
            keep_copy: None,
            aliases,
        });
    }
    let suffix = format!("foreign-{}", now.compact());
    for n in &notes {
        fx.push(Effect::Log {
            kind: LogKind::Repair,
            text: n.clone(),
        });
    }
    fx.push(Effect::Log {
        kind: LogKind::Repair,
        text: format!(
            "status.json was written by another program; rewrote it in canonical form ({} repair(s)), original kept as status.json.{suffix}",
            notes.len()
        ),
    });
    Ok(Reconciled {
        keep_copy: Some(suffix),
        aliases,
    })
}

/// What is not canonical or not consistent in `state`, by the text alone (no filesystem), one
/// sentence each; empty when conductor would not change anything. For `status` and `doctor`.
pub fn inspect(state: &State) -> Vec<String> {
    if looks_canonical(state) {
        return Vec::new();
    }
    let mut copy = state.clone();
    repair(&mut copy, None, &mut Lexical)
}

/// For lock-free readers that decide on `global_claims` (hook, prompt): when some claim key is
/// not an absolute, lexically normal path, bring the state to the form the next transaction will
/// give it, without asking the filesystem (symlinks are resolved by that transaction). A scan of
/// the keys when there is nothing to do.
pub fn interpret(state: &mut State) {
    if !state.global_claims.keys().all(|k| is_lexically_normal(k)) {
        repair(state, None, &mut Lexical);
    }
}

/// Cheap test for the common case: every key absolute and lexically normal, every holder
/// registered once, and `files_claimed` exactly `global_claims`.
fn looks_canonical(st: &State) -> bool {
    let mut ids = BTreeSet::new();
    let mut listed = std::collections::HashSet::with_capacity(st.global_claims.len());
    for i in &st.instances {
        if !ids.insert(i.id.as_str()) {
            return false;
        }
        for f in &i.files_claimed {
            if st.global_claims.get(f) != Some(&i.id) || !listed.insert(f.as_str()) {
                return false;
            }
        }
    }
    listed.len() == st.global_claims.len()
        && st
            .global_claims
            .iter()
            .all(|(k, v)| ids.contains(v.as_str()) && is_lexically_normal(k))
}

/// Absolute, no `.` or `..` component, no repeated slash, no NUL; one final `/` only for a
/// directory key, `/@REPO:` only for a repository's root glob ([`super::claims`]).
fn is_lexically_normal(p: &str) -> bool {
    let body = p.strip_suffix('/').filter(|b| !b.is_empty()).unwrap_or(p);
    let Some(rest) = body.as_bytes().strip_prefix(b"/") else {
        return false;
    };
    // One pass over the bytes (every lock-free hook checks every key): each component is
    // non-empty, not `.` or `..`, and holds no NUL.
    let (mut len, mut dots) = (0usize, 0usize);
    for &c in rest.iter().chain(std::iter::once(&b'/')) {
        match c {
            b'/' => {
                if len == 0 || dots == len && len <= 2 {
                    return false;
                }
                (len, dots) = (0, 0);
            }
            0 => return false,
            b'.' => (len, dots) = (len + 1, dots + 1),
            _ => len += 1,
        }
    }
    true
}

/// Rewrite `st` into canonical, consistent form; one note per change.
fn repair(st: &mut State, previous: Option<&State>, resolve: &mut dyn Resolve) -> Vec<String> {
    repair_with(st, previous, resolve, &mut BTreeMap::new())
}

/// [`repair`], collecting in `aliases` the keys that differ from their resolved form only by
/// symlinks (absolute and lexically normal as written): resolving them is not a repair.
fn repair_with(
    st: &mut State,
    previous: Option<&State>,
    resolve: &mut dyn Resolve,
    aliases: &mut BTreeMap<String, String>,
) -> Vec<String> {
    let mut notes = Vec::new();

    // One instance per id: a second one with the same id cannot be told apart, drop it.
    let mut seen_ids = BTreeSet::new();
    st.instances.retain(|i| {
        let first = seen_ids.insert(i.id.clone());
        if !first {
            notes.push(format!(
                "a second instance {} (task \"{}\") was dropped: ids must be unique",
                i.id,
                printable_max(&i.task, 80)
            ));
        }
        first
    });
    let wd: HashMap<String, String> = st
        .instances
        .iter()
        .map(|i| (i.id.clone(), i.working_directory.clone()))
        .collect();

    // Keys conductor wrote itself need no resolving.
    let known: Option<&BTreeMap<String, String>> = previous.map(|p| &p.global_claims);
    let mut canon_cache: HashMap<(String, String), Option<String>> = HashMap::new();
    let mut canon = |key: &str, holder: &str, resolve: &mut dyn Resolve| -> Option<String> {
        if known.and_then(|k| k.get(key)).is_some_and(|h| h == holder) {
            return Some(key.to_string());
        }
        canon_cache
            .entry((key.to_string(), holder.to_string()))
            .or_insert_with(|| canonical(key, wd.get(holder).map(String::as_str), resolve))
            .clone()
    };

    // global_claims is the truth; bring every key to canonical form.
    let mut truth: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let mut rewritten: Vec<(String, String)> = Vec::new();
    let claims = std::mem::take(&mut st.global_claims);
    for (key, holder) in &claims {
        if !wd.contains_key(holder.as_str()) {
            notes.push(format!(
                "dropped the claim on {} held by {holder}, which is not a registered instance",
                printable_max(key, 200)
            ));
            continue;
        }
        let Some(c) = canon(key, holder, resolve) else {
            notes.push(format!(
                "dropped {holder}'s claim on `{}`: not a path conductor can interpret",
                printable_max(key, 200)
            ));
            continue;
        };
        let exact = c == *key;
        if !exact && is_lexically_normal(key) {
            aliases.insert(key.clone(), c.clone());
        } else if !exact {
            rewritten.push((key.clone(), c.clone()));
        }
        match truth.get_mut(&c) {
            None => {
                truth.insert(c, (holder.clone(), exact));
            }
            Some((h, e)) if h == holder => *e |= exact,
            Some((h, e)) => {
                let (winner, loser) = if exact && !*e {
                    let old = std::mem::replace(h, holder.clone());
                    *e = true;
                    (holder.clone(), old)
                } else {
                    (h.clone(), holder.clone())
                };
                notes.push(format!(
                    "{c} was claimed by both {winner} and {loser} under two spellings; {winner} keeps it, {loser}'s claim was dropped"
                ));
            }
        }
    }
    // A spelling whose claim lost to another holder's is no alias of anything held.
    aliases.retain(|written, resolved| truth.get(resolved).map(|(h, _)| h) == claims.get(written));
    if !rewritten.is_empty() {
        let examples: Vec<String> = rewritten
            .iter()
            .take(3)
            .map(|(a, b)| format!("{} -> {b}", printable_max(a, 120)))
            .collect();
        let more = rewritten.len().saturating_sub(examples.len());
        notes.push(format!(
            "rewrote {} claim key(s) in canonical form: {}{}",
            rewritten.len(),
            examples.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }

    // Every instance lists exactly what global_claims gives it (its own order first).
    let mut by_holder: HashMap<String, Vec<String>> = HashMap::new();
    for (file, (holder, _)) in &truth {
        by_holder
            .entry(holder.clone())
            .or_default()
            .push(file.clone());
    }
    for inst in &mut st.instances {
        let given: BTreeSet<String> = by_holder
            .remove(&inst.id)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut listed = Vec::with_capacity(given.len());
        let mut in_list = BTreeSet::new();
        let noted = notes.len();
        let original = std::mem::take(&mut inst.files_claimed);
        for f in &original {
            let c = canon(f, &inst.id, resolve);
            match c {
                Some(c) if given.contains(&c) => {
                    if in_list.insert(c.clone()) {
                        listed.push(c);
                    }
                }
                _ => notes.push(format!(
                    "{} listed `{}` in files_claimed but global_claims does not give it that file; removed from its list",
                    inst.id,
                    printable_max(f, 200)
                )),
            }
        }
        for f in &given {
            if !in_list.contains(f) {
                notes.push(format!(
                    "global_claims gives {f} to {}, which did not list it; added to its files_claimed",
                    inst.id
                ));
                listed.push(f.clone());
            }
        }
        let original_resolved: Vec<&String> = original
            .iter()
            .map(|f| aliases.get(f).unwrap_or(f))
            .collect();
        if notes.len() == noted && listed.iter().ne(original_resolved.iter().copied()) {
            notes.push(format!(
                "rewrote the files_claimed of {} in canonical form (one entry per file)",
                inst.id
            ));
        }
        inst.files_claimed = listed.into();
    }
    st.global_claims = truth.into_iter().map(|(f, (h, _))| (f, h)).collect();
    notes
}

/// The canonical claim key for `key` as written by the holder whose working directory is `wd`;
/// `None` when it cannot be a path (empty, NUL, relative without an absolute working directory).
fn canonical(key: &str, wd: Option<&str>, resolve: &mut dyn Resolve) -> Option<String> {
    if key.is_empty() || key.contains('\0') {
        return None;
    }
    let abs = if key.starts_with('/') {
        key.to_string()
    } else {
        let wd = wd.filter(|w| w.starts_with('/'))?;
        format!("{}/{key}", wd.trim_end_matches('/'))
    };
    // A glob keeps its pattern, a directory its final `/` ([`super::claims`]); the path part
    // is resolved like a file's.
    let (path, tail) = match super::claims::kind(&abs) {
        super::claims::Kind::File => (abs.as_str(), ""),
        super::claims::Kind::Dir => (abs.as_str(), "/"),
        // A repository's directory or glob: nothing of it is a path on this machine.
        _ if abs.starts_with("/@") && abs.contains(':') => return Some(abs.clone()),
        super::claims::Kind::Glob => super::claims::split_glob(&abs),
    };
    let mut out = resolve.physical(path);
    if !tail.is_empty() && !out.ends_with('/') {
        out.push('/');
    }
    if tail != "/" {
        out.push_str(tail);
    }
    Some(out)
}

/// The events that describe how `current` differs from `previous` (the state conductor last
/// committed), all marked `"external": true`: claims released, instances gone, instances
/// started, claims granted, in that order. Both states are taken as canonical.
pub fn external_events(previous: &State, current: &State) -> Vec<NewEvent> {
    let held = |st: &State| -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (f, h) in &st.global_claims {
            m.entry(h.clone()).or_default().insert(f.clone());
        }
        m
    };
    let (before, after) = (held(previous), held(current));
    let empty = BTreeSet::new();
    let project = |id: &str| {
        current
            .instance(id)
            .or_else(|| previous.instance(id))
            .map(|i| i.project.clone())
    };
    let ev = |event_type, id: &str, payload| NewEvent {
        event_type,
        actor: Some(id.to_string()),
        target: None,
        project: project(id),
        payload,
    };
    let mut out = Vec::new();
    for (id, files) in &before {
        let now_held = after.get(id).unwrap_or(&empty);
        let gone: Vec<&String> = files.difference(now_held).collect();
        if !gone.is_empty() {
            out.push(ev(
                events::CLAIM_RELEASED,
                id,
                json!({"files": gone, "external": true}),
            ));
        }
    }
    for i in &previous.instances {
        if current.instance(&i.id).is_none() {
            out.push(ev(events::INSTANCE_DONE, &i.id, json!({"external": true})));
        }
    }
    for i in &current.instances {
        if previous.instance(&i.id).is_none() {
            out.push(ev(
                events::INSTANCE_STARTED,
                &i.id,
                json!({"task": i.task, "priority": i.priority, "working_directory": i.working_directory, "external": true}),
            ));
        }
    }
    for (id, files) in &after {
        let was = before.get(id).unwrap_or(&empty);
        let new: Vec<&String> = files.difference(was).collect();
        if !new.is_empty() {
            out.push(ev(
                events::CLAIM_GRANTED,
                id,
                json!({"files": new, "external": true}),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ops::{self, AssumeAlive, NewInstance};
    use crate::protocol::{Priority, Source};

    fn now() -> Timestamp {
        Timestamp::parse("2026-01-17T10:00:00Z").unwrap()
    }

    #[test]
    fn lexically_normal_keys_are_absolute_without_dot_components_or_empty_ones() {
        for ok in [
            "/a",
            "/a/b.rs",
            "/src/",
            "/a/.hidden",
            "/a/...",
            "/a/..b",
            "/a/b./c",
            "/@app:src/**",
            "/a b/c",
        ] {
            assert!(is_lexically_normal(ok), "{ok}");
        }
        for bad in [
            "", "/", "//", "a/b", "./a", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/.",
            "/..", "/a/b//", "/a\0b", "/a/\0/", "/./", "/../",
        ] {
            assert!(!is_lexically_normal(bad), "{bad:?}");
        }
    }

    fn with_two() -> (State, String, String) {
        let mut st = State::empty(now());
        let mut fx = Vec::new();
        let mut n = 0;
        let mut hex = || {
            n += 1;
            format!("{n:06x}")
        };
        let new = |task: &str, wd: &str| NewInstance {
            source: Source::Web,
            project: "p".into(),
            task: task.into(),
            priority: Priority::P1,
            working_directory: wd.into(),
            override_reason: None,
            pid: None,
            host: None,
            session_id: None,
        };
        let a = ops::start(&mut st, new("a", "/w"), None, &mut hex, now(), &mut fx);
        let b = ops::start(&mut st, new("b", "/v"), None, &mut hex, now(), &mut fx);
        ops::claim(
            &mut st,
            &a,
            &["/w/x".into()],
            None,
            now(),
            &AssumeAlive,
            &mut fx,
        )
        .unwrap();
        (st, a, b)
    }

    fn run(st: &mut State, seen: Seen) -> (Reconciled, Vec<Effect>) {
        let mut fx = Vec::new();
        let r = reconcile(st, seen, now(), &mut Lexical, &mut fx).unwrap();
        (r, fx)
    }

    #[test]
    fn conductors_own_file_is_left_alone() {
        let (mut st, ..) = with_two();
        st.global_claims.insert("rel".into(), "web-999999".into());
        let before = st.clone();
        let (r, fx) = run(&mut st, Seen::Own);
        assert_eq!((st, r, fx.len()), (before, Reconciled::default(), 0));
    }

    #[test]
    fn relative_keys_are_resolved_against_the_holders_directory() {
        let (mut st, a, b) = with_two();
        st.global_claims.insert("src/../y.rs".into(), b.clone());
        st.instance_mut(&b)
            .unwrap()
            .files_claimed
            .push("./src/../y.rs".into());
        let (r, fx) = run(&mut st, Seen::Changed(None));
        assert_eq!(st.global_claims["/v/y.rs"], b);
        assert_eq!(st.global_claims["/w/x"], a);
        assert_eq!(st.instance(&b).unwrap().files_claimed, ["/v/y.rs"]);
        assert!(r.keep_copy.is_some());
        assert!(fx.iter().any(|e| matches!(
            e,
            Effect::Log {
                kind: LogKind::Repair,
                ..
            }
        )));
        crate::protocol::codec::check_consistency(&st).unwrap();
        assert!(inspect(&st).is_empty());
    }

    #[test]
    fn a_file_listed_twice_is_noticed() {
        let (mut st, a, _) = with_two();
        st.global_claims.insert("/w/y".into(), a.clone());
        st.instance_mut(&a).unwrap().files_claimed =
            vec!["/w/x".to_string(), "/w/x".to_string()].into();
        assert!(!inspect(&st).is_empty());
        run(&mut st, Seen::Changed(None));
        assert_eq!(st.instance(&a).unwrap().files_claimed, ["/w/x", "/w/y"]);
    }

    #[test]
    fn lock_free_readers_see_relative_keys_as_the_paths_they_mean() {
        let (mut st, a, b) = with_two();
        st.global_claims.insert("y.rs".into(), b.clone());
        st.instance_mut(&b)
            .unwrap()
            .files_claimed
            .push("y.rs".into());
        interpret(&mut st);
        assert_eq!(st.global_claims["/v/y.rs"], b);
        assert_eq!(st.global_claims["/w/x"], a);
        let before = st.clone();
        interpret(&mut st);
        assert_eq!(st, before);
    }

    #[test]
    fn global_claims_decide_and_the_canonical_spelling_wins() {
        let (mut st, a, b) = with_two();
        // b lists a's file; global_claims also has a second spelling of it for b.
        st.instance_mut(&b)
            .unwrap()
            .files_claimed
            .push("/w/x".into());
        st.global_claims.insert("/w/./x".into(), b.clone());
        assert!(!inspect(&st).is_empty());
        run(&mut st, Seen::Changed(None));
        assert_eq!(st.global_claims.len(), 1);
        assert_eq!(st.global_claims["/w/x"], a);
        assert!(st.instance(&b).unwrap().files_claimed.is_empty());
        crate::protocol::codec::check_consistency(&st).unwrap();
    }

    #[test]
    fn changes_since_conductors_last_write_become_external_events() {
        let (prev, a, b) = with_two();
        let mut st = prev.clone();
        st.global_claims.remove("/w/x");
        st.instance_mut(&a).unwrap().files_claimed.clear();
        st.global_claims.insert("/v/z".into(), b.clone());
        st.instance_mut(&b)
            .unwrap()
            .files_claimed
            .push("/v/z".into());
        st.instances.retain(|i| i.id != a);
        let (r, fx) = run(&mut st, Seen::Changed(Some(&prev)));
        assert_eq!(r.keep_copy, None, "nothing to repair");
        let evs: Vec<(&str, String)> = fx
            .iter()
            .filter_map(|e| match e {
                Effect::Event(ev) => {
                    assert_eq!(ev.payload["external"], true);
                    Some((ev.event_type, ev.actor.clone().unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            evs,
            [
                (events::CLAIM_RELEASED, a.clone()),
                (events::INSTANCE_DONE, a),
                (events::CLAIM_GRANTED, b)
            ]
        );
    }
}
