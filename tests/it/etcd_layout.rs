//! The shared store's paged layout (issue 36 §2): `status.json` kept as a small head plus the
//! claim map cut into pages, so tens of thousands of live claims fit etcd's default request limit;
//! `migrate-store` moving a prefix written by an older conductor (the whole state in one key) in
//! place; and an older conductor's write after the move refused loudly. The real binary against
//! a real three-member etcd cluster started with etcd's default limits (see [`crate::etcd`]).
//!
//! Long variant: `cargo test --test it etcd_layout -- --ignored`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::Run;
use crate::etcd::{Cluster, Host, hosts};

/// A command's outcome for a failure message, with stdout cut short (a status of 20,000 claims
/// would bury the reason).
fn brief(r: &Run) -> String {
    let cut: String = r.stdout.chars().take(2000).collect();
    format!("exit {}\nstderr: {}\nstdout: {cut}", r.code, r.stderr)
}

/// `status --json` seen from `h`: instance id → (task, claimed paths). A path listed by two
/// instances fails the test.
fn claims_by_instance(h: &Host) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let r = h.run(&["--json", "status"]);
    assert_eq!(r.code, 0, "{}", brief(&r));
    let v = r.json();
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for i in v["instances"].as_array().unwrap() {
        let files: BTreeSet<String> = i["files_claimed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        for f in &files {
            assert!(seen.insert(f.clone()), "{f} is listed by two instances");
        }
        out.insert(
            i["id"].as_str().unwrap().to_string(),
            (i["task"].as_str().unwrap_or_default().to_string(), files),
        );
    }
    out
}

/// The holder of every claimed path, from `status --json` on `h`.
fn holders(h: &Host) -> BTreeMap<String, String> {
    claims_by_instance(h)
        .into_iter()
        .flat_map(|(id, (_, files))| files.into_iter().map(move |f| (f, id.clone())))
        .collect()
}

/// `args` run by `h` as the instance `id`.
fn run_as(h: &Host, id: &str, args: &[&str]) -> Run {
    let mut all = vec!["--json", args[0], "--instance", id];
    all.extend(&args[1..]);
    h.run(&all)
}

/// Fill one instance with `n` claims (calls of 1,000 files), on a cluster with etcd's default
/// request limit: `status --json` lists them all, another host's claim of one of them (or of a
/// directory above some) is a conflict, and the holder's release frees the file.
fn hold_many_claims(n: usize) {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let hs = hosts(root.path(), &cluster.url(), 2);
    let holder = hs[0].start("holder");
    let other = hs[1].start("other");
    let files: Vec<String> = (0..n)
        .map(|i| format!("src/d{}/f{i}.rs", i / 100))
        .collect();
    for (k, chunk) in files.chunks(1000).enumerate() {
        let mut args = vec!["claim"];
        args.extend(chunk.iter().map(String::as_str));
        let r = run_as(&hs[0], &holder, &args);
        assert_eq!(
            r.code,
            0,
            "claim of {} files with {} already held: {}",
            chunk.len(),
            k * 1000,
            brief(&r)
        );
    }
    // Every claim is listed, held by the holder, seen from the other host.
    let held = holders(&hs[1]);
    assert_eq!(held.len(), n, "status --json lists every claim");
    assert!(held.values().all(|h| *h == holder));
    let paths: BTreeSet<&str> = held
        .keys()
        .map(|k| k.rsplit_once(':').map_or(k.as_str(), |(_, p)| p))
        .collect();
    assert_eq!(paths, files.iter().map(String::as_str).collect());
    // Another instance cannot take one of them, nor a directory above some of them.
    let contested = &files[n / 2];
    let r = run_as(&hs[1], &other, &["claim", contested]);
    assert_eq!(r.code, 3, "a held file is a conflict: {}", brief(&r));
    assert_eq!(
        r.json()["conflicts"][0]["held_by"],
        holder.as_str(),
        "{}",
        brief(&r)
    );
    let dir = format!("src/d{}/", n / 200);
    let r = run_as(&hs[1], &other, &["claim", &dir]);
    assert_eq!(r.code, 3, "{dir} covers held files: {}", brief(&r));
    // The holder's release frees it for the other instance.
    let r = run_as(&hs[0], &holder, &["release", contested]);
    assert_eq!(r.code, 0, "{}", brief(&r));
    let r = run_as(&hs[1], &other, &["claim", contested]);
    assert_eq!(r.code, 0, "the released file is free: {}", brief(&r));
    let held = holders(&hs[0]);
    assert_eq!(held.len(), n);
    let key = held
        .keys()
        .find(|k| k.ends_with(&format!(":{contested}")))
        .unwrap();
    assert_eq!(held[key], other);
    assert_eq!(held.values().filter(|h| **h == holder).count(), n - 1);
}

/// 20,000 live claims on a cluster with etcd's default 1.5 MiB request limit (the old layout,
/// one key for the whole `status.json`, stopped at about 7,000 to 9,000).
#[test]
fn twenty_thousand_claims_are_held_on_a_default_configured_cluster() {
    hold_many_claims(20_000);
}

#[test]
#[ignore = "long: 50,000 claims"]
fn fifty_thousand_claims_are_held_on_a_default_configured_cluster() {
    hold_many_claims(50_000);
}

/// The spelling of claim keys in `h`'s repository on a shared store (`/@github.com/acme/x:`),
/// learned from a claim in a scratch prefix of the cluster.
fn repository_key(cluster: &Cluster, h: &Host) -> String {
    let scratch = format!("{}-scratch", cluster.url());
    let run = |args: &[&str]| {
        let mut c = h.cmd(args);
        c.env("CONDUCTOR_STORE", &scratch);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        o
    };
    run(&["start", "scratch", "--priority", "P2"]);
    run(&["claim", "src/probe.rs"]);
    let o = run(&["--json", "status"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let key = v["instances"][0]["files_claimed"][0].as_str().unwrap();
    key.strip_suffix("src/probe.rs")
        .unwrap_or_else(|| panic!("a repository key: {key}"))
        .to_string()
}

/// What an older conductor kept in `<prefix>/doc/status.json`: a real `status.json`, written by
/// the binary in a file home on `h`'s clone (two instances: one holding `src/` and `src/a.rs`,
/// one holding `lib/c.rs` and `docs/guide.md`), its paths rewritten to the repository keys a
/// shared store uses. Returns the bytes and the two instances' ids.
fn old_layout_state(cluster: &Cluster, root: &Path, h: &Host) -> (Vec<u8>, String, String) {
    let home = root.join("file-home");
    let file_home = |args: &[&str]| {
        let mut c: Command = h.cmd(args);
        c.env_remove("CONDUCTOR_STORE").env("CONDUCTOR_HOME", &home);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let a = file_home(&["--json", "start", "dirs", "--priority", "P1"])["instance_id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = file_home(&["--json", "start", "files", "--priority", "P2"])["instance_id"]
        .as_str()
        .unwrap()
        .to_string();
    file_home(&["--json", "claim", "--instance", &a, "src/", "src/a.rs"]);
    file_home(&[
        "--json",
        "claim",
        "--instance",
        &b,
        "lib/c.rs",
        "docs/guide.md",
    ]);
    let text = std::fs::read_to_string(home.join("status.json")).unwrap();
    let from = format!("\"{}/", h.clone.display());
    let to = format!("\"{}", repository_key(cluster, h));
    assert!(
        text.contains(&from),
        "claims keyed by absolute path: {text}"
    );
    (text.replace(&from, &to).into_bytes(), a, b)
}

/// Write `bytes` into the key an older conductor kept its whole state in.
fn put_old_document(cluster: &Cluster, bytes: &[u8]) {
    let c = cluster.client();
    assert!(
        c.txn(&[], &[(c.doc_key("status.json"), bytes.to_vec())], &[])
            .unwrap()
    );
}

fn text(r: &Run) -> String {
    format!("{}{}", r.stdout, r.stderr)
}

/// `migrate-store` moves a prefix an older conductor wrote (the whole state in one key) into the
/// paged layout: the new binary reads the old layout before the move and the same state after it,
/// a second run has nothing to do, directory claims still cover the files below them, writes go
/// on, and the old key is left holding a tombstone that says where the state went.
#[test]
fn migrate_store_moves_an_old_layout_prefix_and_is_safe_to_run_twice() {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let hs = hosts(root.path(), &cluster.url(), 2);
    let (old, a, b) = old_layout_state(&cluster, root.path(), &hs[0]);
    put_old_document(&cluster, &old);
    // Before the move the old layout works as it did: read, and written (a new instance).
    let late = hs[1].start("late");
    let r = run_as(&hs[1], &late, &["claim", "src/deep/x.rs"]);
    assert_eq!(r.code, 3, "src/ covers src/deep/x.rs: {r:#?}");
    let before = claims_by_instance(&hs[1]);
    assert_eq!(
        before.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([a.clone(), b.clone(), late.clone()]),
        "{before:?}"
    );
    assert!(before[&late].1.is_empty(), "{before:?}");
    let suffixes = |id: &str| -> BTreeSet<String> {
        before[id]
            .1
            .iter()
            .map(|k| k.rsplit_once(':').unwrap().1.to_string())
            .collect()
    };
    assert_eq!(
        suffixes(&a),
        BTreeSet::from(["src/".into(), "src/a.rs".into()])
    );
    assert_eq!(
        suffixes(&b),
        BTreeSet::from(["lib/c.rs".into(), "docs/guide.md".into()])
    );
    // The move.
    let r = hs[1].run(&["migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let said = text(&r);
    assert!(
        said.contains("Migrated status.json at ") && said.contains(": 4 claims in "),
        "{r:#?}"
    );
    assert_eq!(
        claims_by_instance(&hs[1]),
        before,
        "the same instances and claims"
    );
    assert_eq!(claims_by_instance(&hs[0]), before, "on every host");
    // Safe to run twice.
    let r = hs[0].run(&["migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        text(&r).contains("Already in the paged layout: nothing to do."),
        "{r:#?}"
    );
    let r = hs[1].run(&["--json", "migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["migrated"], false, "{v}");
    assert_eq!(claims_by_instance(&hs[1]), before);
    // The claims still hold: the directory claim covers a file below it, a file claim its file.
    let r = run_as(&hs[1], &late, &["claim", "src/deep/x.rs"]);
    assert_eq!(r.code, 3, "src/ covers src/deep/x.rs: {r:#?}");
    assert_eq!(r.json()["conflicts"][0]["held_by"], a.as_str(), "{r:#?}");
    let r = run_as(&hs[1], &late, &["claim", "lib/c.rs"]);
    assert_eq!(r.code, 3, "{r:#?}");
    assert_eq!(r.json()["conflicts"][0]["held_by"], b.as_str(), "{r:#?}");
    // And writes go on: a release and a new claim.
    let r = run_as(&hs[0], &b, &["release", "lib/c.rs"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let r = run_as(&hs[1], &late, &["claim", "lib/c.rs"]);
    assert_eq!(r.code, 0, "released, so free: {r:#?}");
    let held = holders(&hs[0]);
    let key = held.keys().find(|k| k.ends_with(":lib/c.rs")).unwrap();
    assert_eq!(held[key], late);
    // The old key holds a tombstone naming where the state went.
    let c = cluster.client();
    let doc = c
        .get(&c.doc_key("status.json"))
        .unwrap()
        .expect("the old key is kept, as a tombstone")
        .value;
    let tomb: Value = serde_json::from_slice(&doc)
        .unwrap_or_else(|e| panic!("a JSON tombstone ({e}): {}", String::from_utf8_lossy(&doc)));
    assert!(tomb.get("moved_to").is_some(), "{tomb}");
    assert!(
        tomb.get("global_claims").is_none() && tomb.get("instances").is_none(),
        "no stale copy of the state is left in the old key: {tomb}"
    );
}

/// `migrate-store` with nothing to move: a prefix nobody wrote, a prefix already in the paged
/// layout (exit 0 both), and a file home (exit 2, one line).
#[test]
fn migrate_store_with_nothing_to_move() {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let hs = hosts(root.path(), &cluster.url(), 1);
    let h = &hs[0];
    let r = h.run(&["migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(text(&r).contains("Nothing to migrate"), "{r:#?}");
    let id = h.start("new");
    assert_eq!(run_as(h, &id, &["claim", "src/n.rs"]).code, 0);
    let before = cluster.dump();
    let r = h.run(&["--json", "migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let v = r.json();
    assert_eq!(v["migrated"], false, "a new prefix is written paged: {v}");
    assert_eq!(
        v["message"], "Already in the paged layout: nothing to do.",
        "{v}"
    );
    assert_eq!(cluster.dump(), before, "nothing to do, nothing written");
    let mut c = h.cmd(&["migrate-store"]);
    c.env_remove("CONDUCTOR_STORE")
        .env("CONDUCTOR_HOME", root.path().join("file-home"));
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{err}"
    );
}

/// An older conductor that rewrites the old key after the move (it read the state before the
/// tombstone, or was never told) is not silently ignored: every command of the new binary on
/// that prefix stops with one `error:` line naming the older conductor, and changes nothing.
#[test]
fn an_older_conductors_write_after_migration_is_refused_loudly() {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let hs = hosts(root.path(), &cluster.url(), 2);
    let (old, a, _) = old_layout_state(&cluster, root.path(), &hs[0]);
    put_old_document(&cluster, &old);
    let r = hs[1].run(&["migrate-store"]);
    assert_eq!(r.code, 0, "{r:#?}");
    // An older conductor writes its whole state back into the old key.
    put_old_document(&cluster, &old);
    let before = cluster.dump();
    let r = hs[1].run(&["status"]);
    assert_eq!(r.code, 1, "{r:#?}");
    let errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{r:#?}");
    assert!(errors[0].contains("older conductor"), "{r:#?}");
    assert!(r.error_and_hint(), "{r:#?}");
    // A write is refused too, and nothing changes.
    let r = run_as(&hs[0], &a, &["claim", "src/later.rs"]);
    assert_ne!(r.code, 0, "{r:#?}");
    assert!(text(&r).contains("older conductor"), "{r:#?}");
    let late = hs[1].run(&["--json", "start", "late", "--priority", "P2"]);
    assert_ne!(late.code, 0, "{late:#?}");
    assert_eq!(cluster.dump(), before, "nothing was written");
}
