//! The fast decoder of status.json (`codec::decode`: one typed parse) and the published JSON
//! Schema (`schemas/status.schema.json`, run by the full validator) accept and refuse exactly the
//! same documents: every status fixture, and a large generated corpus of valid documents and of
//! mutations of them (wrong types, missing and unknown keys, near-miss ids, paths, timestamps and
//! integers).
//!
//! Outside this comparison, by design: the consistency rules the schema cannot express (every
//! claim listed by its holder, one holder per file, holders registered, canonical keys) are
//! checked on the fast side only, and never refuse a document (see `protocol::foreign`); and a
//! document repeating a key conductor knows is refused by the fast path while a generic JSON
//! value silently keeps the last one (no such document is generated here).

use std::path::Path;

use conductor::protocol::codec;
use conductor::schema::{self, Schema};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Schema verdict and fast-path verdict for one document's bytes.
fn verdicts(bytes: &[u8]) -> (Result<(), String>, Result<(), String>) {
    let v: Value = serde_json::from_slice(bytes).expect("test documents are JSON");
    let slow = schema::validate(Schema::Status, &v);
    let fast = codec::decode(Path::new("status.json"), bytes)
        .map(|_| ())
        .map_err(|e| e.to_string());
    (slow, fast)
}

#[track_caller]
fn assert_agree(what: &str, bytes: &[u8]) -> bool {
    let (slow, fast) = verdicts(bytes);
    assert_eq!(
        slow.is_ok(),
        fast.is_ok(),
        "{what}: schema says {slow:?}, fast path says {fast:?}\n{}",
        String::from_utf8_lossy(bytes)
    );
    slow.is_ok()
}

#[test]
fn every_status_fixture_gets_the_same_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut n = 0;
    for dir in ["valid", "invalid", "foreign", "inconsistent", "spec"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("status") && name.ends_with(".json") {
                assert_agree(&format!("{dir}/{name}"), &std::fs::read(e.path()).unwrap());
                n += 1;
            }
        }
    }
    assert!(n >= 35, "only {n} status fixtures");
}

/// A small deterministic generator (xorshift), seeded by proptest.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Clone>(&mut self, pool: &[T]) -> T {
        pool[self.below(pool.len())].clone()
    }
}

const GOOD_TS: &[&str] = &[
    "2026-01-17T10:30:00Z",
    "2026-01-17T10:30:00.5Z",
    "2026-01-17t10:30:00z",
    "2026-01-17T11:30:00+01:00",
    "2026-01-17T05:00:00-05:30",
    "2024-02-29T00:00:00Z",
    "2000-02-29T12:00:00Z",
    "2016-12-31T23:59:60Z",
    "2017-01-01T00:59:60+01:00",
    "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:59-23:59",
    "2026-01-17T10:30:00.123456789+00:00",
];
const BAD_TS: &[&str] = &[
    "2026-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-01-17T10:30:60Z",
    "2026-01-17T23:59:60+01:00",
    "2026-01-17 10:30:00Z",
    "2026-01-17T10:30:00",
    "2026-01-17T10:30Z",
    "2026-13-01T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-01-17T24:00:00Z",
    "2026-01-17T10:60:00Z",
    "2026-01-17T10:30:00.Z",
    "2026-01-17T10:30:00+0100",
    "2026-01-17T10:30:00+24:00",
    "2026-01-17T10:30:00+01:60",
    "20260117T103000Z",
    "2026-01-17T10:30:00Z\n",
    " 2026-01-17T10:30:00Z",
    "2026-1-17T10:30:00Z",
    "2026-01-17T10:30:00ZZ",
    "2026-01-17T10:30:00+01:00Z",
    "٢٠٢٦-01-17T10:30:00Z",
    "",
];
const GOOD_IDS: &[&str] = &[
    "itm-a1b2c3",
    "cur-0b12ee",
    "web-000000",
    "abc-123456",
    "zzz-ffffff",
];
const BAD_IDS: &[&str] = &[
    "itm-A1B2C3",
    "itm-a1b2c",
    "itm-a1b2c3\n",
    "ITM-a1b2c3",
    "it-a1b2c3d",
    "itm_a1b2c3",
    "itm-a1b2cg",
    "itmm-a1b2c3",
    "",
    "ïtm-a1b2c3",
];
const GOOD_ABS: &[&str] = &["/", "/a/b.rs", "/a b/ü.rs", "/x\ny", "/a/../b", "//a"];
const BAD_ABS: &[&str] = &["", "rel/a", "/a\u{0}b", "./a", " /a", "\u{0}/a"];
const STRINGS: &[&str] = &[
    "",
    "x",
    "\u{0}",
    "src/api/users.ts",
    "/abs/p.ts",
    "../up",
    "ünï ✓",
    "line\nbreak",
];
const SOURCES: &[&str] = &["itm", "cur", "vsc", "web", "cow"];
const BAD_SOURCES: &[&str] = &["ITM", "abc", "", "web "];
const PRIORITIES: &[&str] = &["P1", "P2", "P3"];
const BAD_PRIORITIES: &[&str] = &["p1", "P4", "P0", ""];

fn number(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

const GOOD_PIDS: &[&str] = &["1", "42", "4294967295", "7.0", "1e3"];
const BAD_PIDS: &[&str] = &[
    "0",
    "-1",
    "4294967296",
    "1.5",
    "18446744073709551616",
    "1e40",
    "-0.5",
];
const GOOD_TICKETS: &[&str] = &["1", "2", "9007199254740991", "3.0"];
const BAD_TICKETS: &[&str] = &["0", "-3", "9007199254740992", "18446744073709551615", "2.5"];

/// Any JSON value, of any type: what a careless writer may put anywhere.
fn anything(r: &mut Rng) -> Value {
    match r.below(9) {
        0 => Value::Null,
        1 => json!(r.chance(50)),
        2 => number(r.pick(&[GOOD_PIDS, BAD_PIDS].concat())),
        3 => json!(r.pick(STRINGS)),
        4 => json!(r.pick(GOOD_TS)),
        5 => json!(r.pick(GOOD_IDS)),
        6 => json!([]),
        7 => json!({}),
        _ => json!([r.pick(STRINGS)]),
    }
}

fn ts(r: &mut Rng) -> Value {
    json!(r.pick(GOOD_TS))
}

fn extra(r: &mut Rng, obj: &mut Map<String, Value>) {
    if r.chance(20) {
        let v = anything(r);
        obj.insert(
            r.pick(&["x_tool", "dashboard", "editor", "ünknown"]).into(),
            v,
        );
    }
}

fn instance(r: &mut Rng) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(r.pick(GOOD_IDS)));
    o.insert("source".into(), json!(r.pick(SOURCES)));
    o.insert("project".into(), json!(r.pick(STRINGS)));
    o.insert("task".into(), json!(r.pick(STRINGS)));
    o.insert("priority".into(), json!(r.pick(PRIORITIES)));
    if r.chance(80) {
        let files: Vec<&str> = (0..r.below(3)).map(|_| r.pick(STRINGS)).collect();
        o.insert("files_claimed".into(), json!(files));
    }
    o.insert("started_at".into(), ts(r));
    o.insert("last_heartbeat".into(), ts(r));
    o.insert("working_directory".into(), json!(r.pick(GOOD_ABS)));
    if r.chance(30) {
        o.insert("override_reason".into(), json!(r.pick(STRINGS)));
    }
    if r.chance(30) {
        o.insert("pid".into(), number(r.pick(GOOD_PIDS)));
    }
    if r.chance(20) {
        o.insert("host".into(), json!("host-1"));
    }
    if r.chance(20) {
        o.insert("session_id".into(), json!("s-1"));
    }
    if r.chance(20) {
        o.insert("agent".into(), json!(r.pick(&["claude", "codex"])));
    }
    if r.chance(25) {
        let pc: Vec<Value> = (0..1 + r.below(2))
            .map(|_| json!({"file": r.pick(GOOD_ABS), "held_by": r.pick(GOOD_IDS), "since": ts(r)}))
            .collect();
        o.insert("pending_conflicts".into(), json!(pc));
    }
    if r.chance(25) {
        let w: Vec<Value> = (0..1 + r.below(2))
            .map(|_| {
                let mut w = json!({"file": r.pick(GOOD_ABS), "ticket": number(r.pick(GOOD_TICKETS)), "since": ts(r)});
                if r.chance(50) {
                    w["pid"] = number(r.pick(GOOD_PIDS));
                }
                w
            })
            .collect();
        o.insert("waiting_for".into(), json!(w));
    }
    extra(r, &mut o);
    Value::Object(o)
}

/// A document valid under the protocol's schema (consistent or not).
fn valid_doc(r: &mut Rng) -> Value {
    let mut o = Map::new();
    o.insert("version".into(), json!("1.0"));
    o.insert("updated_at".into(), ts(r));
    let instances: Vec<Value> = (0..r.below(4)).map(|_| instance(r)).collect();
    o.insert("instances".into(), json!(instances));
    let mut claims = Map::new();
    for _ in 0..r.below(4) {
        claims.insert(r.pick(STRINGS).into(), json!(r.pick(GOOD_IDS)));
    }
    o.insert("global_claims".into(), Value::Object(claims));
    if r.chance(85) {
        let dw: Vec<Value> = (0..r.below(3))
            .map(|_| {
                let mut w = Map::new();
                w.insert("instance_id".into(), json!(r.pick(GOOD_IDS)));
                w.insert("reason".into(), json!(r.pick(STRINGS)));
                w.insert("acknowledged".into(), json!(r.chance(50)));
                if r.chance(40) {
                    w.insert("acknowledged_at".into(), ts(r));
                }
                extra(r, &mut w);
                Value::Object(w)
            })
            .collect();
        o.insert("drift_warnings".into(), json!(dw));
    }
    extra(r, &mut o);
    Value::Object(o)
}

/// Every place in `v`: the path of keys/indices to it.
fn places(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(json!(k));
                places(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(json!(i));
                places(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k {
        Value::String(s) => &mut v[s.as_str()],
        Value::Number(n) => &mut v[n.as_u64().unwrap() as usize],
        _ => unreachable!(),
    })
}

/// A value for the field named `key` that a writer might plausibly get wrong, or right.
fn near_miss(r: &mut Rng, key: &str) -> Value {
    let s = |r: &mut Rng, good: &[&str], bad: &[&str]| {
        json!(if r.chance(35) {
            r.pick(good)
        } else {
            r.pick(bad)
        })
    };
    match key {
        "updated_at" | "started_at" | "last_heartbeat" | "since" | "acknowledged_at" => {
            s(r, GOOD_TS, BAD_TS)
        }
        "id" | "instance_id" | "held_by" => s(r, GOOD_IDS, BAD_IDS),
        "working_directory" | "file" => s(r, GOOD_ABS, BAD_ABS),
        "source" => s(r, SOURCES, BAD_SOURCES),
        "priority" => s(r, PRIORITIES, BAD_PRIORITIES),
        "pid" => number(if r.chance(35) {
            r.pick(GOOD_PIDS)
        } else {
            r.pick(BAD_PIDS)
        }),
        "ticket" => number(if r.chance(35) {
            r.pick(GOOD_TICKETS)
        } else {
            r.pick(BAD_TICKETS)
        }),
        "version" => json!(r.pick(&["1.0", "1.1", "2.0", "1", ""])),
        "host" | "session_id" | "agent" => json!(r.pick(&["", "h", "\u{0}"])),
        _ => anything(r),
    }
}

/// Change `doc` in one place.
fn mutate(r: &mut Rng, doc: &mut Value) {
    let mut all = Vec::new();
    places(doc, &mut Vec::new(), &mut all);
    let path = r.pick(&all);
    let key = path
        .last()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match r.below(10) {
        // A near miss for the field there.
        0..=4 => *get_mut(doc, &path) = near_miss(r, &key),
        // Anything at all.
        5 => *get_mut(doc, &path) = anything(r),
        // A key removed.
        6 | 7 if !path.is_empty() => {
            let (last, parent) = path.split_last().unwrap();
            match (get_mut(doc, parent), last) {
                (Value::Object(m), Value::String(k)) => {
                    m.shift_remove(k);
                }
                (Value::Array(a), Value::Number(i)) => {
                    a.remove(i.as_u64().unwrap() as usize);
                }
                _ => {}
            }
        }
        // A key added to an object: unknown, or a known one in the wrong place.
        _ => {
            if let Value::Object(m) = get_mut(doc, &path) {
                let k = r.pick(&[
                    "x_tool",
                    "id",
                    "files_claimed",
                    "ticket",
                    "pid",
                    "version",
                    "extra",
                ]);
                let v = near_miss(r, k);
                m.insert(k.to_string(), v);
            }
        }
    }
}

fn corpus(seed: u64, mutations: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let mut doc = valid_doc(&mut r);
    for _ in 0..mutations {
        mutate(&mut r, &mut doc);
    }
    serde_json::to_vec_pretty(&doc).unwrap()
}

#[test]
fn generated_valid_documents_are_read_by_both() {
    for seed in 1..3000u64 {
        let bytes = corpus(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 0);
        assert!(
            assert_agree(&format!("seed {seed}"), &bytes),
            "seed {seed} is valid"
        );
    }
}

#[test]
fn a_large_mutated_corpus_gets_the_same_verdicts() {
    // Deterministic sweep first (so the accept/refuse mix is known), then proptest below.
    let (mut accepted, mut total) = (0, 0);
    for seed in 1..12_000u64 {
        let bytes = corpus(
            seed.wrapping_mul(0x2545_F491_4F6C_DD1D),
            1 + (seed % 3) as usize,
        );
        accepted += usize::from(assert_agree(&format!("seed {seed}"), &bytes));
        total += 1;
    }
    assert!(
        accepted * 10 > total && accepted * 10 < total * 9,
        "{accepted} of {total} accepted: the corpus should mix both verdicts"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn mutated_documents_get_the_same_verdicts(seed in any::<u64>(), n in 0usize..4) {
        let bytes = corpus(seed, n);
        let (slow, fast) = verdicts(&bytes);
        prop_assert_eq!(slow.is_ok(), fast.is_ok(), "schema {:?} fast {:?}\n{}", slow, fast, String::from_utf8_lossy(&bytes));
    }
}
