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
