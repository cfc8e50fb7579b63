//! The shared store's state in pages (issue 36 §2): a claim reads only the pages that can hold
//! what it looks at, yet decides as the whole state would, across page boundaries. A real etcd
//! cluster, the real binary on two "hosts" with clones of one repository.

use crate::etcd::{Cluster, hosts};

fn files(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("src/m/f{i:04}.rs")).collect()
}

#[test]
fn a_claim_reading_only_its_pages_sees_every_overlap_across_pages() {
    let cluster = Cluster::with_members(1);
    let root = tempfile::tempdir().unwrap();
    let hosts = hosts(root.path(), &cluster.url(), 2);
    let (a, b) = (&hosts[0], &hosts[1]);
    a.start("holds many");
    b.start("wants some");
    // 1,600 claims: several pages (256 to 512 claims each).
    for batch in [files(0..800), files(800..1600)] {
        let mut args = vec!["claim"];
        args.extend(batch.iter().map(String::as_str));
        let r = a.run(&args);
        assert_eq!(r.code, 0, "{r:#?}");
    }
    let r = a.run(&["claim", "lib/", "docs/*.md", "zz/last.rs"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let etcd = cluster.client();
    let (pages, _) = etcd
        .range(
            &etcd.split_page_prefix("status.json"),
            &conductor::store::etcd::prefix_end(&etcd.split_page_prefix("status.json")),
            0,
        )
        .unwrap();
    assert!(pages.len() >= 4, "{} pages", pages.len());
    let tomb = etcd.get(&etcd.doc_key("status.json")).unwrap().unwrap();
    assert!(conductor::store::split::is_tombstone(&tomb.value));

    // Each of these overlaps a claim of A's, held in some page B's claim must read.
    for (claim, held) in [
        ("src/m/f0000.rs", "f0000.rs"), // the first key of the first page
        ("src/m/f0811.rs", "f0811.rs"), // in the middle
        ("src/m/f1599.rs", "f1599.rs"), // the last page
        ("src/", "src/m/"),             // a directory over every page
        ("src/m/f12*.rs", "src/m/f12"), // a glob over some
        ("lib/deep/x.rs", "lib/"),      // a directory claim above
        ("docs/guide.md", "docs/*.md"), // a glob claim
        ("zz/last.rs", "zz/last.rs"),   // after every file of src/
    ] {
        let r = b.run(&["claim", claim]);
        assert!(
            r.stdout.contains("CONFLICT") && r.stdout.contains(held),
            "{claim}: {r:#?}"
        );
    }
    // Free keys between and around the pages are granted.
    for free in ["src/m/f0811x.rs", "src/a.rs", "aaa.rs", "zzz.rs"] {
        let r = b.run(&["claim", free]);
        assert!(r.stdout.contains("Safe to edit"), "{free}: {r:#?}");
    }
    // A release frees exactly what it names; the other side then gets it.
    let r = a.run(&["release", "src/m/f0811.rs"]);
    assert_eq!(r.code, 0, "{r:#?}");
    let r = b.run(&["claim", "src/m/f0811.rs"]);
    assert!(r.stdout.contains("Safe to edit"), "{r:#?}");
    let r = b.run(&["claim", "src/m/f0812.rs"]);
    assert!(r.stdout.contains("CONFLICT"), "{r:#?}");

    // The whole state, as status reads it: every claim with its holder, nothing lost or doubled.
    let st = a.run(&["--json", "status"]).json();
    let held: Vec<(String, usize)> = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["task"].as_str().unwrap().to_string(),
                i["files_claimed"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert!(
        held.contains(&("holds many".into(), 1600 - 1 + 3)),
        "{held:?}"
    );
    assert!(held.contains(&("wants some".into(), 5)), "{held:?}");
    // In the order they were granted.
    let many = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["task"] == "holds many")
        .unwrap();
    let list: Vec<&str> = many["files_claimed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        list[0].ends_with("src/m/f0000.rs") && list[list.len() - 1].ends_with("zz/last.rs"),
        "{:?}",
        &list[..3]
    );
}

/// A change to the paged state wakes what waits on it: a waiting claim on one host takes a file
/// the moment another host releases it (not at its 30 s safety rescan).
#[test]
fn a_release_on_one_host_wakes_a_waiting_claim_on_another() {
    let cluster = Cluster::with_members(1);
    let root = tempfile::tempdir().unwrap();
    let hosts = hosts(root.path(), &cluster.url(), 2);
    let (a, b) = (&hosts[0], &hosts[1]);
    a.start("holds");
    b.start("waits");
    assert_eq!(a.run(&["claim", "src/w.rs"]).code, 0);
    let waiting = b
        .cmd(&["claim", "--wait=60s", "src/w.rs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Queued first (its ticket is in the state), then the release.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !a.run(&["--json", "status"]).stdout.contains("waiting_for") {
        assert!(
            std::time::Instant::now() < deadline,
            "the claim never queued"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let released = std::time::Instant::now();
    assert_eq!(a.run(&["release", "src/w.rs"]).code, 0);
    let out = waiting.wait_with_output().unwrap();
    let took = released.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < std::time::Duration::from_secs(10),
        "the waiting claim took {took:?} after the release"
    );
}

/// `claim .` on a shared store claims the repository's root (`/@<repository>:`): a file inside
/// is refused to another host, in either order.
#[test]
fn a_claim_of_the_whole_repository_covers_every_file_in_it() {
    let cluster = Cluster::with_members(1);
    let root = tempfile::tempdir().unwrap();
    let hosts = hosts(root.path(), &cluster.url(), 2);
    let (a, b) = (&hosts[0], &hosts[1]);
    a.start("everything");
    b.start("one file");
    let r = a.run(&["claim", "."]);
    assert!(r.stdout.contains("Safe to edit"), "{r:#?}");
    let r = b.run(&["claim", "src/a.rs"]);
    assert!(r.stdout.contains("CONFLICT"), "{r:#?}");
    assert_eq!(a.run(&["release", "."]).code, 0);
    let r = b.run(&["claim", "src/a.rs"]);
    assert!(r.stdout.contains("Safe to edit"), "{r:#?}");
    let r = a.run(&["claim", "."]);
    assert!(r.stdout.contains("CONFLICT"), "{r:#?}");
}

/// A state bigger than one etcd request (12,000 claims, about 1.7 MB whole) goes out with
/// `export` and back into another prefix with `import`, paged, every claim still held.
#[test]
fn a_paged_state_bigger_than_one_request_is_exported_and_imported() {
    let cluster = Cluster::with_members(1);
    let root = tempfile::tempdir().unwrap();
    let hosts = hosts(root.path(), &cluster.url(), 1);
    let a = &hosts[0];
    a.start("many");
    for k in 0..12 {
        let batch = files(k * 1000..(k + 1) * 1000);
        let mut args = vec!["claim"];
        args.extend(batch.iter().map(String::as_str));
        assert_eq!(a.run(&args).code, 0);
    }
    let bundle = root.path().join("bundle.json");
    let r = a.run(&["export", bundle.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(std::fs::metadata(&bundle).unwrap().len() > 1_500_000);
    let other = format!("{}-copy", cluster.url());
    let r = a.run(&["--store", &other, "import", bundle.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:#?}");
    let st = a.run(&["--store", &other, "--json", "status"]).json();
    let held: usize = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["files_claimed"].as_array().unwrap().len())
        .sum();
    assert_eq!(held, 12_000);
    // Paged in the copy (an older conductor's single key would not have fitted).
    let etcd = conductor::store::etcd::Etcd::parse(&other).unwrap();
    assert!(
        etcd.get(&etcd.split_head_key("status.json"))
            .unwrap()
            .is_some()
    );
    // Importing again is refused, nothing replaced.
    let r = a.run(&["--store", &other, "import", bundle.to_str().unwrap()]);
    assert_ne!(r.code, 0, "{r:#?}");
}
