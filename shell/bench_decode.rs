//! Benchmark (not a test): what reading and writing status.json costs in-process, at 1,000 and
//! 10,000 claims: the generic path (a JSON value, the JSON Schema validator, a second parse into
//! the typed state) against the typed parse `codec::decode`, and `codec::encode`.
//! Run: cargo run --release --example bench_decode [ROUNDS]

use std::path::Path;
use std::time::Instant;

use conductor::protocol::{State, codec};
use conductor::schema::{self, Schema};
use serde_json::Value;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time(rounds: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect(),
    )
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/valid/status-1000-claims.json");
    let base = codec::decode(&path, &std::fs::read(&path).unwrap()).unwrap();
    let mut big = base.clone();
    let id = big.instances[0].id.clone();
    for i in 0..9000 {
        let f = format!("/Users/dev/Developer/big/src/module{}/file{i}.rs", i / 100);
        big.instances[0].files_claimed.push(f.clone());
        big.global_claims.insert(f, id.clone());
    }
    println!("{rounds} rounds, median ms per call");
    for (name, st) in [("1,000 claims", &base), ("10,000 claims", &big)] {
        let bytes = codec::encode(st);
        let generic = time(rounds, || {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            schema::validate(Schema::Status, &v).unwrap();
            let _: State = serde_json::from_value(v).unwrap();
        });
        let typed = time(rounds, || {
            codec::decode(&path, &bytes).unwrap();
        });
        let scan = time(rounds, || {
            serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).unwrap();
        });
        let value = time(rounds, || {
            serde_json::from_slice::<Value>(&bytes).unwrap();
        });
        println!("{name}: JSON scan only {scan:.3} | generic value only {value:.3}");
        let encode = time(rounds, || {
            codec::encode(st);
        });
        let compact = time(rounds, || {
            serde_json::to_vec(st).unwrap();
        });
        println!(
            "{name} ({} KB): generic read {generic:.3} | typed decode {typed:.3} ({:.1}x) | encode (pretty) {encode:.3} | compact {compact:.3}",
            bytes.len() / 1024,
            generic / typed
        );
    }
}
