//! Property tests on the pure operations: random start/claim/release/done/heartbeat/cleanup
//! sequences over a few ids and files, with random clock advances. After every step the claims
//! invariants hold.

use std::collections::BTreeMap;

use conductor::protocol::claims;
use conductor::protocol::ops::{self, AssumeAlive, Effect, NewInstance, Which};
use conductor::protocol::*;
use conductor::time::Timestamp;
use proptest::prelude::*;

const HEX: [&str; 4] = ["00000a", "00000b", "00000c", "00000d"];
const FILES: [&str; 5] = ["/w/a.rs", "/w/b.rs", "/w/c.rs", "/v/a.rs", "/v/d/e.rs"];

#[derive(Clone, Debug)]
enum Step {
    Start {
        hex: usize,
    },
    Claim {
        who: usize,
        files: Vec<usize>,
        force: bool,
    },
    Release {
        who: usize,
        files: Option<Vec<usize>>,
        force: bool,
    },
    Done {
        who: usize,
    },
    Heartbeat {
        who: usize,
    },
    Cleanup {
        max_age: u64,
        only: Option<usize>,
    },
    Advance {
        minutes: u64,
    },
}

fn files() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..FILES.len(), 1..4)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..HEX.len()).prop_map(|hex| Step::Start { hex }),
        5 => (0..HEX.len(), files(), any::<bool>()).prop_map(|(who, files, force)| Step::Claim { who, files, force }),
        2 => (0..HEX.len(), prop::option::of(files()), any::<bool>()).prop_map(|(who, files, force)| Step::Release { who, files, force }),
        1 => (0..HEX.len()).prop_map(|who| Step::Done { who }),
        1 => (0..HEX.len()).prop_map(|who| Step::Heartbeat { who }),
        1 => (prop_oneof![Just(60u64), 1..120u64], prop::option::of(0..HEX.len())).prop_map(|(max_age, only)| Step::Cleanup { max_age, only }),
        2 => (0..90u64).prop_map(|minutes| Step::Advance { minutes }),
    ]
}

fn id(i: usize) -> String {
    format!("itm-{}", HEX[i])
}

fn at(minutes: u64) -> Timestamp {
    let t = chrono::DateTime::parse_from_rfc3339("2026-01-17T09:00:00Z").unwrap()
        + chrono::Duration::minutes(minutes as i64);
    Timestamp::parse(&t.to_rfc3339()).unwrap()
}

fn new_instance() -> NewInstance {
    NewInstance {
        source: Source::Itm,
        project: "p".into(),
        task: "task".into(),
        priority: Priority::P1,
        working_directory: "/w".into(),
        override_reason: None,
        pid: None,
        host: None,
        session_id: None,
    }
}

fn check_invariants(st: &State) -> Result<(), TestCaseError> {
    conductor::protocol::codec::check_consistency(st)
        .map_err(|e| TestCaseError::fail(format!("inconsistent: {e}")))?;
    let mut union = BTreeMap::new();
    for i in &st.instances {
        for f in &i.files_claimed {
            prop_assert!(
                union.insert(f.clone(), i.id.clone()).is_none(),
                "{f} held twice"
            );
        }
    }
    prop_assert_eq!(&union, &st.global_claims);
    for h in st.global_claims.values() {
        prop_assert!(st.instance(h).is_some(), "claim held by non-instance {h}");
    }
    Ok(())
}

fn no_trace_of(st: &State, gone: &str) -> Result<(), TestCaseError> {
    prop_assert!(st.instance(gone).is_none());
    prop_assert!(
        st.global_claims.values().all(|h| h != gone),
        "{gone} still holds a claim"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn claims_stay_consistent(steps in prop::collection::vec(step(), 1..50)) {
        let mut st = State::empty(at(0));
        let mut clock = 0u64;
        for s in steps {
            let now = at(clock);
            let mut fx: Vec<Effect> = Vec::new();
            match s {
                Step::Start { hex } => {
                    let mut first = Some(HEX[hex].to_string());
                    let mut n = 0u32;
                    let new_id = ops::start(&mut st, new_instance(), None, || first.take().unwrap_or_else(|| { n += 1; format!("f{n:05x}") }), now, &mut fx);
                    prop_assert_eq!(st.instances.iter().filter(|i| i.id == new_id).count(), 1);
                }
                Step::Claim { who, files, force } => {
                    let me = id(who);
                    let paths: Vec<String> = files.iter().map(|&f| FILES[f].to_string()).collect();
                    let before = st.clone();
                    let r = ops::claim(&mut st, &me, &paths, force.then_some("take over"), now, &AssumeAlive, &mut fx);
                    match r {
                        Err(e) => {
                            prop_assert!(before.instance(&me).is_none(), "claim by live {me} failed: {e}");
                            prop_assert_eq!(e.reason(), "unknown_instance");
                            prop_assert_eq!(&st, &before);
                        }
                        Ok(out) => {
                            for c in &out.conflicts {
                                prop_assert!(!force, "a forced claim reported a conflict");
                                let holder = before.global_claims.get(&c.file).cloned();
                                prop_assert_eq!(Some(c.held_by.clone()), holder.clone(), "conflict names the wrong holder");
                                prop_assert_eq!(st.global_claims.get(&c.file).cloned(), holder, "a refused file changed hands");
                                let h = before.instance(&c.held_by).unwrap();
                                prop_assert_eq!(&c.holder_task, &h.task);
                                prop_assert_eq!(c.holder_started, h.started_at);
                            }
                            for f in &paths {
                                let refused = out.conflicts.iter().any(|c| &c.file == f);
                                prop_assert_eq!(refused, !out.claimed.contains(f));
                                if !refused {
                                    prop_assert_eq!(st.global_claims.get(f), Some(&me), "{} granted but not held", f);
                                }
                            }
                            if force {
                                prop_assert!(paths.iter().all(|f| st.global_claims.get(f) == Some(&me)));
                            }
                        }
                    }
                }
                Step::Release { who, files, force } => {
                    let me = id(who);
                    let which = match &files {
                        None => Which::All,
                        Some(f) => Which::Files(f.iter().map(|&i| FILES[i].to_string()).collect()),
                    };
                    let before = st.clone();
                    match ops::release(&mut st, &me, &which, force, Some("r"), now, &mut fx) {
                        Ok(released) => {
                            for f in &released {
                                prop_assert!(!st.global_claims.contains_key(f), "{} still claimed after release", f);
                            }
                            if which == Which::All {
                                prop_assert!(st.instance(&me).unwrap().files_claimed.is_empty());
                            }
                        }
                        Err(e) => {
                            prop_assert!(["unknown_instance", "not_held"].contains(&e.reason()), "{}", e);
                            // A refused release must not have released anything the instance
                            // was not entitled to.
                            for (f, h) in &before.global_claims {
                                if h != &me {
                                    prop_assert_eq!(st.global_claims.get(f), Some(h));
                                }
                            }
                        }
                    }
                }
                Step::Done { who } => {
                    let me = id(who);
                    let live = st.instance(&me).is_some();
                    let r = ops::done(&mut st, &me, Outcome::Success, None, None, now, &mut fx);
                    prop_assert_eq!(r.is_ok(), live);
                    no_trace_of(&st, &me)?;
                    let histories = fx.iter().filter(|e| matches!(e, Effect::History(_))).count();
                    prop_assert_eq!(histories, usize::from(live));
                }
                Step::Heartbeat { who } => {
                    let me = id(who);
                    let live = st.instance(&me).is_some();
                    prop_assert_eq!(ops::heartbeat(&mut st, &me, None, now, &mut fx).is_ok(), live);
                    if live {
                        prop_assert_eq!(st.instance(&me).unwrap().last_heartbeat, now);
                    }
                }
                Step::Cleanup { max_age, only } => {
                    let before = st.clone();
                    let only_id = only.map(id);
                    match ops::cleanup(&mut st, max_age, only_id.as_deref(), now, &AssumeAlive, &mut fx) {
                        Ok(orphans) => {
                            for o in &orphans {
                                no_trace_of(&st, &o.id)?;
                                prop_assert!(fx.iter().any(|e| matches!(e, Effect::History(h) if h.id == o.id && h.outcome == Outcome::Orphaned)));
                            }
                            if only_id.is_none() {
                                for i in &before.instances {
                                    // The protocol: no heartbeat for *more than* max_age minutes.
                                    let old = i.last_heartbeat.seconds_until(now) > max_age * 60;
                                    prop_assert_eq!(orphans.iter().any(|o| o.id == i.id), old, "{} orphaned iff stale", &i.id);
                                }
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e.reason(), "unknown_instance");
                            prop_assert_eq!(&st, &before);
                        }
                    }
                }
                Step::Advance { minutes } => clock += minutes,
            }
            check_invariants(&st)?;
        }
    }
}

// ---- Directory and glob claims (issue 25): no two holders of overlapping keys. ----

const KEYS: [&str; 12] = [
    "/w/src/",
    "/w/src/a.rs",
    "/w/src/d/e.rs",
    "/w/",
    "/w/src/**/*.rs",
    "/w/src/*.rs",
    "/w/*/a.rs",
    "/w/src/d/",
    "/w/lib.rs",
    "/w/**/*.ts",
    "/w/src/d/*.ts",
    "/v/x",
];

fn key_steps() -> impl Strategy<Value = Vec<(usize, Vec<usize>, u8)>> {
    prop::collection::vec(
        (
            0..3usize,
            prop::collection::vec(0..KEYS.len(), 1..4),
            0..4u8,
        ),
        1..40,
    )
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("*".to_string()),
        Just("**".to_string()),
        Just("?".to_string()),
        Just("a*".to_string()),
        Just("*b".to_string()),
        Just("a?".to_string()),
        Just("[a]".to_string()),
    ]
}

fn glob() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..5).prop_map(|c| format!("/{}", c.join("/")))
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("ab"),
            Just("aa"),
            Just("[a]"),
            Just("ba")
        ],
        1..6,
    )
    .prop_map(|c| format!("/{}", c.join("/")))
}

proptest! {
    /// Random claims (some forced), releases and dones of files, directories and globs by three
    /// instances: never do two instances hold keys that overlap (a directory and a file inside
    /// it, two overlapping globs), and the claims stay consistent.
    #[test]
    fn no_double_grant_between_overlapping_keys(steps in key_steps()) {
        let mut st = State::empty(at(0));
        let mut fx = Vec::new();
        let ids: Vec<String> = (0..3).map(|i| ops::start(&mut st, new_instance(), None, || HEX[i].to_string(), at(0), &mut fx)).collect();
        for (who, keys, what) in steps {
            let keys: Vec<String> = keys.iter().map(|k| KEYS[*k].to_string()).collect();
            let id = &ids[who];
            match what {
                0 | 1 => { ops::claim(&mut st, id, &keys, None, at(1), &AssumeAlive, &mut fx).unwrap(); }
                2 => { ops::claim(&mut st, id, &keys, Some("why"), at(1), &AssumeAlive, &mut fx).unwrap(); }
                _ => { let _ = ops::release(&mut st, id, &Which::Files(keys), false, None, at(1), &mut fx); }
            }
            conductor::protocol::codec::check_consistency(&st).map_err(TestCaseError::fail)?;
            let held: Vec<(&String, &String)> = st.global_claims.iter().collect();
            for (i, (k1, h1)) in held.iter().enumerate() {
                for (k2, h2) in &held[i + 1..] {
                    if h1 != h2 {
                        prop_assert!(
                            !claims::overlap(k1, k2).conflicts(),
                            "{h1} holds {k1} and {h2} holds {k2}, which overlap"
                        );
                    }
                }
            }
        }
    }

    /// The overlap of two globs is sound: a path both match means they overlap.
    #[test]
    fn glob_overlap_is_sound(a in glob(), b in glob(), p in path()) {
        if claims::covers(&a, &p) && claims::covers(&b, &p) {
            prop_assert!(claims::overlap(&a, &b).conflicts(), "{a} and {b} both match {p}");
        }
        let dir = format!("{}/", p);
        let below = format!("{p}/a");
        if claims::covers(&a, &below) {
            prop_assert!(claims::overlap(&a, &dir).conflicts(), "{a} matches {below} inside {dir}");
        }
    }
}
