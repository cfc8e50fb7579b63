//! Issue 34: a Jepsen-style history checker. Concurrent clients, each a separate OS process per
//! operation, record every `start`, `claim`, `claim --force`, `claim --wait`, `release`, `done`
//! and `status` with its invocation and completion times and its answer (or none, when the
//! process was SIGKILLed mid-operation); the checker ([`wgl`]) then searches for an order, one
//! operation at a time, that the sequential model of the claim table ([`model`]) accepts.
//!
//! Each client is pinned to one partition (its own directory of files, a directory and a
//! glob), so the history splits into independent partitions, each checked on its own.
//!
//! The bounded run is in the default suite; the long one (more clients, longer, more kills) is
//! `cargo test --locked --test it -- --ignored history::long`.

mod model;
mod wgl;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::TestEnv;
use model::{Call, Ret, State};
use wgl::{Op, Verdict, check};

/// Keys a client claims, relative to its partition's directory.
const KEYS: &[&str] = &["a.rs", "b.rs", "sub/", "*.rs", "sub/c.rs"];

struct Shared {
    env: TestEnv,
    /// The shared store, when the run is on etcd.
    etcd: Option<String>,
    /// The cluster behind it (the nemesis kills and restarts its members).
    cluster: Mutex<Option<crate::etcd::Cluster>>,
    /// A nemesis kills members or fills the disk: no `claim --wait` (see [`Backend`]).
    no_waits: bool,
    t0: Instant,
    ops: Mutex<Vec<(usize, Op)>>,
    next_req: Mutex<u32>,
    /// How many processes died at each failpoint.
    failpoint_kills: Mutex<BTreeMap<&'static str, usize>>,
    /// How many operations failed for lack of space.
    out_of_space: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn now(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
}

/// A tiny deterministic generator (xorshift), seeded per client.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How an operation's process is killed.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// SIGKILL from outside after this long, if it still runs.
    After(Duration),
    /// It SIGKILLs itself at this named point of the commit, if it gets there
    /// (`conductor::store::failpoint`, debug builds).
    At(&'static str),
}

/// Run one conductor process; kill it as `kill` says (the answer is then unknown).
fn run(
    sh: &Shared,
    dir: &std::path::Path,
    args: &[&str],
    kill: Option<Kill>,
) -> Option<(i32, Value)> {
    let point = match kill {
        Some(Kill::At(p)) => Some(p),
        _ => None,
    };
    let mut child = spawn(sh, dir, args, point, "60");
    if let Some(Kill::After(d)) = kill {
        let deadline = Instant::now() + d;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if Instant::now() >= deadline {
                child.kill().ok();
                child.wait().ok();
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    finish(sh, child, args, point)
}

/// Start one conductor process (`--json`, the lock limit given).
fn spawn(
    sh: &Shared,
    dir: &std::path::Path,
    args: &[&str],
    point: Option<&'static str>,
    lock_timeout: &str,
) -> std::process::Child {
    let mut cmd = sh.env.cmd();
    if let Some(p) = point {
        cmd.env("CONDUCTOR_FAILPOINT", p);
    }
    if let Some(url) = &sh.etcd {
        cmd.env("CONDUCTOR_STORE", url)
            .env("CONDUCTOR_HOST", "history");
    }
    cmd.current_dir(dir)
        // A lock that stays busy past the default 5 s (many clients on a loaded machine) is an
        // exit 1 outside the model; a long limit keeps the history about the claim table.
        .args(["--json", "--lock-timeout", lock_timeout])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for a process started by [`spawn`]; its answer, or `None` when unknown.
fn finish(
    sh: &Shared,
    child: std::process::Child,
    args: &[&str],
    point: Option<&'static str>,
) -> Option<(i32, Value)> {
    let out = child.wait_with_output().unwrap();
    let Some(code) = out.status.code() else {
        if let Some(p) = point {
            *sh.failpoint_kills.lock().unwrap().entry(p).or_default() += 1;
        }
        return None;
    };
    let no_space = String::from_utf8_lossy(&out.stderr).contains("No space left on device");
    if code == 1 && no_space {
        sh.out_of_space
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    } else if code == 1 {
        // Outside the model (the store was busy, a server was slow): say why, for the report.
        eprintln!(
            "history: exit 1 from {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if code == 11 && v["maybe_applied"] != false {
        // The store lost its leader with the write in flight: it may or may not have landed.
        return None;
    }
    Some((code, v))
}

/// A key relative to the partition's root (on etcd keys read `/@host=NAME:/abs/...`).
fn rel(root: &str, key: &str) -> String {
    match key.find(root) {
        Some(i) => key[i + root.len()..].to_string(),
        None => key.to_string(),
    }
}

fn strings(v: &Value, root: &str) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
        .map(|s| rel(root, s))
        .collect()
}

fn conflicts(v: &Value, root: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in v.as_array().into_iter().flatten() {
        m.entry(rel(root, c["file"].as_str().unwrap_or("")))
            .or_default()
            .insert(c["held_by"].as_str().unwrap_or("").to_string());
    }
    m
}

/// The answer of a finished process, as the model reads it. Exit 2: refused, nothing changed;
/// exit 1: failed outside the model (a lock timeout), nothing changed.
fn answer(call: &Call, code: i32, v: &Value, root: &str) -> Ret {
    match (call, code) {
        (_, 2) => Ret::Refused,
        // Exit 1 (outside the model) and 11 with `maybe_applied: false` (the store was
        // unavailable): nothing changed.
        (_, 1 | 11) => Ret::Fail,
        (Call::Start, 0) => Ret::Started(v["instance_id"].as_str().unwrap().to_string()),
        (Call::Claim { .. }, 0 | 3) => Ret::Claimed {
            claimed: strings(&v["claimed"], root),
            conflicts: conflicts(&v["conflicts"], root),
        },
        (Call::WaitEnd { .. }, 0 | 3) => Ret::Waited {
            held: strings(&v["claimed"], root),
            gave_up: conflicts(&v["conflicts"], root).into_keys().collect(),
            lost: v["lost"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| rel(root, l["file"].as_str().unwrap_or("")))
                .collect(),
        },
        (Call::Release { .. }, 0) => Ret::Released(strings(&v["released"], root)),
        (Call::Done { .. }, 0) => Ret::Finished,
        (Call::Cleanup { id }, 0) => {
            assert_eq!(v["orphaned"], serde_json::json!([id]), "{v}");
            Ret::Reaped
        }
        (Call::Status, 0) => {
            let mut h = BTreeMap::new();
            for i in v["instances"].as_array().into_iter().flatten() {
                for f in i["files_claimed"].as_array().into_iter().flatten() {
                    let f = f.as_str().unwrap();
                    if f.contains(root) {
                        h.insert(rel(root, f), i["id"].as_str().unwrap().to_string());
                    }
                }
            }
            Ret::Holders(h)
        }
        _ => panic!("unexpected exit {code} for {call:?}: {v}"),
    }
}

/// One client: its own instance in partition `part`, operations one at a time for `run_for`.
fn client(sh: Arc<Shared>, n: usize, part: usize, run_for: Duration, kill_pct: u64) {
    let dir = sh.env.project.join(format!("p{part}"));
    let root = format!("{}/", dir.display());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((n as u64 + 1) * 7919));
    // The operation whose process was killed, until the client's next `done` completes.
    let unknown = std::cell::Cell::new(None::<usize>);
    let record = |call: Call, invoke: u64, res: Option<(i32, Value)>| -> Option<Ret> {
        let (ret, complete) = match res {
            Some((code, v)) => (Some(answer(&call, code, &v, &root)), Some(sh.now())),
            None => (None, None),
        };
        let is_done = matches!(call, Call::Done { .. });
        let wrote = matches!(ret, Some(Ret::Finished));
        let mut ops = sh.ops.lock().unwrap();
        ops.push((
            part,
            Op {
                client: n,
                call,
                ret: ret.clone(),
                invoke,
                complete,
            },
        ));
        if complete.is_none() {
            unknown.set(Some(ops.len() - 1));
        } else if is_done
            && wrote
            && let Some(i) = unknown.take()
        {
            // A killed operation's effect, if it had one, came before this `done` of its
            // instance completed (see `wgl::Op`): its window closes here.
            ops[i].1.complete = complete;
        }
        ret
    };
    let start = |id: &mut Option<String>| {
        let t = sh.now();
        let res = run(&sh, &dir, &["start", &format!("client {n}")], None);
        if let Some(Ret::Started(new)) = record(Call::Start, t, res) {
            *id = Some(new);
        }
    };
    let mut id: Option<String> = None;
    start(&mut id);
    let t_end = Instant::now() + run_for;
    while Instant::now() < t_end {
        let Some(me) = id.clone() else {
            start(&mut id);
            continue;
        };
        let pick = rng.below(100);
        // Half the kills come from outside at a random instant, half at a named point of the
        // commit (the file home's seven, or etcd's answer lost after the commit).
        let kill = (rng.below(100) < kill_pct).then(|| {
            if rng.below(2) == 0 {
                Kill::After(Duration::from_micros(rng.below(12_000)))
            } else if sh.etcd.is_some() {
                Kill::At("etcd.committed")
            } else {
                let file_points = &conductor::store::failpoint::POINTS[..7];
                Kill::At(file_points[rng.below(7) as usize])
            }
        });
        let key = |rng: &mut Rng| KEYS[rng.below(KEYS.len() as u64) as usize].to_string();
        let t = sh.now();
        let mut retire = false;
        if pick < 30 {
            let mut keys = vec![key(&mut rng)];
            if rng.below(3) == 0 {
                let k = key(&mut rng);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            let mut args = vec!["claim", "--instance", &me];
            args.extend(keys.iter().map(String::as_str));
            let res = run(&sh, &dir, &args, kill);
            retire = res.is_none();
            record(
                Call::Claim {
                    id: me.clone(),
                    keys,
                    force: false,
                },
                t,
                res,
            );
        } else if pick < 38 {
            let keys = vec![key(&mut rng)];
            let res = run(
                &sh,
                &dir,
                &["claim", "--instance", &me, "--force", "take it", &keys[0]],
                kill,
            );
            retire = res.is_none();
            record(
                Call::Claim {
                    id: me.clone(),
                    keys,
                    force: true,
                },
                t,
                res,
            );
        } else if pick < 52 && !sh.no_waits {
            let keys = vec![key(&mut rng)];
            let req = {
                let mut r = sh.next_req.lock().unwrap();
                *r += 1;
                *r
            };
            let res = run(
                &sh,
                &dir,
                &["claim", "--instance", &me, "--wait=1s", &keys[0]],
                None,
            );
            let complete = res.as_ref().map(|_| sh.now());
            sh.ops.lock().unwrap().push((
                part,
                Op {
                    client: n,
                    call: Call::WaitStart {
                        id: me.clone(),
                        keys: keys.clone(),
                        req,
                    },
                    ret: None,
                    invoke: t,
                    complete,
                },
            ));
            record(
                Call::WaitEnd {
                    id: me.clone(),
                    keys,
                    req,
                },
                t,
                res,
            );
        } else if pick < 80 {
            let keys = vec![key(&mut rng)];
            let mut args = vec!["release", "--instance", &me];
            args.extend(keys.iter().map(String::as_str));
            let res = run(&sh, &dir, &args, kill);
            retire = res.is_none();
            record(
                Call::Release {
                    id: me.clone(),
                    keys,
                },
                t,
                res,
            );
        } else if pick < 86 {
            let res = run(&sh, &dir, &["done", "--instance", &me], kill);
            retire = res.is_none();
            record(Call::Done { id: me.clone() }, t, res);
            id = None;
            if retire {
                // Finish what the killed `done` may have left.
                let t = sh.now();
                let res = run(&sh, &dir, &["done", "--instance", &me], None);
                record(Call::Done { id: me.clone() }, t, res);
                retire = false;
            }
        } else if pick < 89 {
            // A holder frozen (SIGSTOP) in the middle of a claim while a person retires its
            // instance (`cleanup --instance`), then thawed: the claim must not bring back what
            // the cleanup took, nor land on a retired instance.
            let keys = vec![key(&mut rng)];
            let mut args = vec!["claim", "--instance", &me];
            args.extend(keys.iter().map(String::as_str));
            let child = spawn(&sh, &dir, &args, None, "60");
            std::thread::sleep(Duration::from_micros(rng.below(8_000)));
            let pid = child.id().to_string();
            let stopped = std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status()
                .is_ok_and(|s| s.success());
            let tc = sh.now();
            // A short lock limit: the frozen claim may hold the lock (then nothing changes).
            let cleanup = spawn(&sh, &dir, &["cleanup", "--instance", &me], None, "2");
            let res_c = finish(&sh, cleanup, &["cleanup"], None);
            let reaped = matches!(res_c, Some((0, _)));
            record(Call::Cleanup { id: me.clone() }, tc, res_c);
            if stopped {
                let _ = std::process::Command::new("kill")
                    .args(["-CONT", &pid])
                    .status();
            }
            let res = finish(&sh, child, &args, None);
            record(
                Call::Claim {
                    id: me.clone(),
                    keys,
                    force: false,
                },
                t,
                res,
            );
            if reaped {
                id = None;
            }
        } else {
            let res = run(&sh, &dir, &["status"], None);
            record(Call::Status, t, res);
        }
        if retire {
            // After an unknown answer this process is retired: its instance is finished by a
            // new one, which then starts afresh.
            let t = sh.now();
            let res = run(&sh, &dir, &["done", "--instance", &me], None);
            record(Call::Done { id: me.clone() }, t, res);
            id = None;
        }
    }
}

/// What a run checked.
#[derive(Default)]
struct Checked {
    /// Times the disk was filled to the last page.
    disk_fills: usize,
    /// Operations refused for lack of space.
    out_of_space: usize,
    ops: usize,
    /// Processes that died at each failpoint.
    failpoint_kills: BTreeMap<&'static str, usize>,
    /// Times the nemesis killed an etcd member.
    member_kills: usize,
    /// Instances retired by `cleanup` while one of their claims was frozen (SIGSTOP).
    reaped_while_frozen: usize,
}

/// Where the history runs.
#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Files,
    /// A single-member etcd.
    Etcd,
    /// Three etcd members, and a nemesis that SIGKILLs one (the leader every other time) and
    /// restarts it, or every third time freezes it (SIGSTOP) and thaws it, again and again. `claim --wait` is left out of these runs: a wait cut short
    /// by the store may leave its queue entries to conductor's dead-waiter rule, which the
    /// model does not know.
    EtcdMembersKilled,
    /// The file home on a small tmpfs that a nemesis fills to the last page again and again,
    /// then frees a few pages at a time (so writes fail at every step of the commit), then
    /// empties. A write that fails for lack of space promises to have changed nothing (exit 1).
    /// `claim --wait` is left out, as with members killed.
    FilesDiskFull,
}

/// Run `clients` clients over `parts` partitions for `run_for`, then check every partition.
fn run_and_check(
    backend: Backend,
    clients: usize,
    parts: usize,
    run_for: Duration,
    kill_pct: u64,
) -> Checked {
    let mut env = TestEnv::new();
    let disk = match backend {
        Backend::FilesDiskFull => {
            let Some(fs) = crate::disk_full::Tmpfs::mount(&env.root.path().join("mnt"), "16m")
            else {
                // CONDUCTOR_TEST_SKIP=mount: skipped, and said so at the end of the run.
                return Checked::default();
            };
            env.home = fs.path.join("home");
            Some(fs)
        }
        _ => None,
    };
    let cluster = match backend {
        Backend::Files | Backend::FilesDiskFull => None,
        Backend::Etcd => Some(crate::etcd::Cluster::with_members(1)),
        Backend::EtcdMembersKilled => Some(crate::etcd::Cluster::with_members(3)),
    };
    for p in 0..parts {
        std::fs::create_dir_all(env.project.join(format!("p{p}/sub"))).unwrap();
    }
    let sh = Arc::new(Shared {
        env,
        etcd: cluster.as_ref().map(|c| c.url()),
        cluster: Mutex::new(cluster),
        no_waits: matches!(backend, Backend::EtcdMembersKilled | Backend::FilesDiskFull),
        t0: Instant::now(),
        ops: Mutex::new(Vec::new()),
        next_req: Mutex::new(0),
        failpoint_kills: Mutex::new(BTreeMap::new()),
        out_of_space: Default::default(),
    });
    let threads: Vec<_> = (0..clients)
        .map(|n| {
            let sh = sh.clone();
            std::thread::spawn(move || client(sh, n, n % parts, run_for, kill_pct))
        })
        .collect();
    let mut member_kills = 0;
    if backend == Backend::EtcdMembersKilled {
        let end = Instant::now() + run_for;
        while Instant::now() + Duration::from_secs(4) < end {
            std::thread::sleep(Duration::from_secs(2));
            let mut guard = sh.cluster.lock().unwrap();
            let c = guard.as_mut().unwrap();
            let victim = if member_kills % 2 == 0 {
                c.wait_for_leader()
            } else {
                (member_kills / 2) % 3
            };
            // Every third time the member is frozen instead of killed.
            let pause = member_kills % 3 == 2;
            if pause {
                c.pause_member(victim, true);
            } else {
                c.kill_member(victim);
            }
            drop(guard);
            member_kills += 1;
            std::thread::sleep(Duration::from_millis(1500));
            let mut guard = sh.cluster.lock().unwrap();
            let c = guard.as_mut().unwrap();
            if pause {
                c.pause_member(victim, false);
            } else {
                c.start_member(victim);
            }
            c.wait_for_leader();
        }
        eprintln!("history: the nemesis killed and restarted a member {member_kills} times");
    }
    let mut disk_fills = 0;
    if let Some(fs) = &disk {
        let end = Instant::now() + run_for;
        while Instant::now() + Duration::from_secs(3) < end {
            std::thread::sleep(Duration::from_millis(1500));
            let mut filler = fs.fill();
            disk_fills += 1;
            // A few pages back every 100 ms: each write gets a little further before it fails.
            for _ in 0..15 {
                std::thread::sleep(Duration::from_millis(100));
                for f in filler.drain(..filler.len().min(2)) {
                    let _ = std::fs::remove_file(f);
                }
            }
            for f in filler {
                let _ = std::fs::remove_file(f);
            }
        }
        eprintln!("history: the nemesis filled the disk {disk_fills} times");
    }
    for t in threads {
        t.join().unwrap();
    }
    let all = std::mem::take(&mut *sh.ops.lock().unwrap());
    let reaped_while_frozen = all
        .iter()
        .filter(|(_, o)| matches!(o.call, Call::Cleanup { .. }) && o.ret == Some(Ret::Reaped))
        .count();
    let mut total = 0;
    for p in 0..parts {
        let ops: Vec<Op> = all
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, o)| o.clone())
            .collect();
        total += ops.len();
        // The search recurses once per operation: a long history needs a deep stack.
        let verdict = {
            let ops = ops.clone();
            std::thread::Builder::new()
                .stack_size(1 << 30)
                .spawn(move || check(&ops, &State::default(), 20_000_000))
                .unwrap()
                .join()
                .unwrap()
        };
        if !matches!(verdict, Verdict::Linearizable) {
            let report = sh.env.root.path().join(format!("history-p{p}.html"));
            std::fs::write(&report, wgl::html_report(&ops, &verdict)).unwrap();
            let keep = std::env::temp_dir().join(format!("conductor-history-p{p}.html"));
            std::fs::copy(&report, &keep).ok();
            let detail = match &verdict {
                Verdict::Violation { stuck, state, .. } => format!(
                    "no operation can come next among {:?}\nmodel state before them: {state:?}",
                    stuck.iter().map(|&i| &ops[i]).collect::<Vec<_>>()
                ),
                _ => "the search ran out of its budget".into(),
            };
            panic!(
                "partition {p}: {} ops are not linearizable (timeline: {}):\n{detail}",
                ops.len(),
                keep.display()
            );
        }
    }
    let failpoint_kills = std::mem::take(&mut *sh.failpoint_kills.lock().unwrap());
    Checked {
        ops: total,
        failpoint_kills,
        member_kills,
        reaped_while_frozen,
        disk_fills,
        out_of_space: sh.out_of_space.load(std::sync::atomic::Ordering::Relaxed),
    }
}

#[test]
fn bounded_history_on_the_file_home_is_linearizable() {
    let c = run_and_check(Backend::Files, 8, 2, Duration::from_secs(20), 10);
    report("file home", &c);
    assert!(
        c.ops > 100,
        "too few operations to mean anything: {}",
        c.ops
    );
    assert!(
        c.failpoint_kills.values().sum::<usize>() > 0,
        "no process died at a failpoint: the run did not test the commit's inside"
    );
    assert!(
        c.reaped_while_frozen > 0,
        "no cleanup retired a frozen holder"
    );
}

#[test]
fn bounded_history_on_etcd_is_linearizable() {
    let c = run_and_check(Backend::Etcd, 8, 2, Duration::from_secs(20), 10);
    report("etcd", &c);
    assert!(
        c.ops > 100,
        "too few operations to mean anything: {}",
        c.ops
    );
    assert!(
        c.failpoint_kills
            .get("etcd.committed")
            .is_some_and(|k| *k > 0),
        "no commit lost its answer: {:?}",
        c.failpoint_kills
    );
    assert!(
        c.reaped_while_frozen > 0,
        "no cleanup retired a frozen holder"
    );
}

#[test]
fn bounded_history_on_etcd_losing_members_is_linearizable() {
    let c = run_and_check(
        Backend::EtcdMembersKilled,
        6,
        2,
        Duration::from_secs(20),
        10,
    );
    report("etcd, members killed", &c);
    assert!(
        c.ops > 100,
        "too few operations to mean anything: {}",
        c.ops
    );
    assert!(
        c.member_kills >= 3,
        "the nemesis killed members only {} times",
        c.member_kills
    );
}

#[test]
fn bounded_history_on_a_filling_disk_is_linearizable() {
    let c = run_and_check(Backend::FilesDiskFull, 6, 2, Duration::from_secs(20), 10);
    if c.ops == 0 {
        return; // CONDUCTOR_TEST_SKIP=mount
    }
    report("file home, disk filled", &c);
    assert!(
        c.ops > 100,
        "too few operations to mean anything: {}",
        c.ops
    );
    assert!(
        c.disk_fills >= 3,
        "the disk was filled {} times",
        c.disk_fills
    );
    assert!(c.out_of_space > 0, "no operation ran out of space");
}

#[test]
#[ignore = "long: minutes; cargo test --locked --test it -- --ignored history::long"]
fn long_history_on_a_filling_disk_is_linearizable() {
    let c = run_and_check(Backend::FilesDiskFull, 12, 3, Duration::from_secs(180), 15);
    report("file home, disk filled", &c);
}

#[test]
#[ignore = "long: minutes; cargo test --locked --test it -- --ignored history::long"]
fn long_history_on_etcd_losing_members_is_linearizable() {
    let c = run_and_check(
        Backend::EtcdMembersKilled,
        12,
        3,
        Duration::from_secs(180),
        15,
    );
    report("etcd, members killed", &c);
}

#[test]
#[ignore = "long: minutes; cargo test --locked --test it -- --ignored history::long"]
fn long_history_on_the_file_home_is_linearizable() {
    let c = run_and_check(Backend::Files, 12, 3, Duration::from_secs(180), 15);
    report("file home", &c);
    assert!(
        c.failpoint_kills.len() == 7,
        "a process died at every one of the file home's failpoints: {:?}",
        c.failpoint_kills
    );
}

#[test]
#[ignore = "long: minutes; cargo test --locked --test it -- --ignored history::long"]
fn long_history_on_etcd_is_linearizable() {
    let c = run_and_check(Backend::Etcd, 12, 3, Duration::from_secs(180), 15);
    report("etcd", &c);
}

fn report(backend: &str, c: &Checked) {
    eprintln!(
        "history ({backend}): {} operations checked, linearizable; killed at failpoints: {:?}; \
         members killed: {}; holders retired while frozen: {}; disk filled {} times, {} \
         operations out of space",
        c.ops,
        c.failpoint_kills,
        c.member_kills,
        c.reaped_while_frozen,
        c.disk_fills,
        c.out_of_space
    );
}

/// A claim frozen while a person retired its instance: answered "claimed" after the cleanup,
/// it may only have landed before it, so a later status showing the key held by the retired
/// instance is a violation; showing it free is not.
#[test]
fn checker_rejects_a_claim_resurrected_after_cleanup() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "a.rs"), claimed(&["a.rs"]), 2, 10));
    h.push(op(1, Call::Cleanup { id: "A".into() }, Ret::Reaped, 3, 4));
    let mut resurrected = h.clone();
    resurrected.push(op(2, Call::Status, holders(&[("a.rs", "A")]), 11, 12));
    assert!(!verdict(&resurrected));
    h.push(op(2, Call::Status, holders(&[]), 11, 12));
    assert!(verdict(&h));
}

// The checker's known verdicts, on hand-made histories.

fn op(client: usize, call: Call, ret: Ret, invoke: u64, complete: u64) -> Op {
    Op {
        client,
        call,
        ret: Some(ret),
        invoke,
        complete: Some(complete),
    }
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn claimed(v: &[&str]) -> Ret {
    Ret::Claimed {
        claimed: set(v),
        conflicts: BTreeMap::new(),
    }
}

fn claim(id: &str, k: &str) -> Call {
    Call::Claim {
        id: id.into(),
        keys: vec![k.into()],
        force: false,
    }
}

fn holders(v: &[(&str, &str)]) -> Ret {
    Ret::Holders(
        v.iter()
            .map(|(k, h)| (k.to_string(), h.to_string()))
            .collect(),
    )
}

fn started(a: &str, b: &str, c: &str) -> Vec<Op> {
    vec![
        op(0, Call::Start, Ret::Started(a.into()), 0, 1),
        op(1, Call::Start, Ret::Started(b.into()), 0, 1),
        op(2, Call::Start, Ret::Started(c.into()), 0, 1),
    ]
}

fn verdict(ops: &[Op]) -> bool {
    matches!(
        check(ops, &State::default(), 1_000_000),
        Verdict::Linearizable
    )
}

#[test]
fn checker_accepts_a_handover_and_concurrent_overlap() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "a.rs"), claimed(&["a.rs"]), 2, 3));
    // Two concurrent claims of one file: one wins, the other is refused naming it.
    h.push(op(1, claim("B", "b.rs"), claimed(&["b.rs"]), 4, 8));
    let refused = Ret::Claimed {
        claimed: set(&[]),
        conflicts: [("*.rs".to_string(), set(&["A", "B"]))].into(),
    };
    h.push(op(2, claim("C", "*.rs"), refused, 5, 9));
    assert!(verdict(&h));
}

#[test]
fn checker_rejects_a_double_grant() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "a.rs"), claimed(&["a.rs"]), 2, 3));
    h.push(op(1, claim("B", "a.rs"), claimed(&["a.rs"]), 4, 5));
    assert!(!verdict(&h));
    // A directory over a held file is a double grant too.
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "sub/c.rs"), claimed(&["sub/c.rs"]), 2, 3));
    h.push(op(1, claim("B", "sub/"), claimed(&["sub/"]), 4, 5));
    assert!(!verdict(&h));
}

#[test]
fn checker_rejects_a_lost_release_and_a_stale_status() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "a.rs"), claimed(&["a.rs"]), 2, 3));
    h.push(op(
        0,
        Call::Release {
            id: "A".into(),
            keys: vec!["a.rs".into()],
        },
        Ret::Released(set(&["a.rs"])),
        4,
        5,
    ));
    // A release acknowledged, then a claim refused naming A: the release was lost.
    let refused = Ret::Claimed {
        claimed: set(&[]),
        conflicts: [("a.rs".to_string(), set(&["A"]))].into(),
    };
    let mut lost = h.clone();
    lost.push(op(1, claim("B", "a.rs"), refused, 6, 7));
    assert!(!verdict(&lost));
    // A status after the release that still shows A.
    let mut stale = h.clone();
    stale.push(op(2, Call::Status, holders(&[("a.rs", "A")]), 6, 7));
    assert!(!verdict(&stale));
    // The same status overlapping the release is fine.
    let mut fine = h;
    fine.pop();
    fine.push(op(
        0,
        Call::Release {
            id: "A".into(),
            keys: vec!["a.rs".into()],
        },
        Ret::Released(set(&["a.rs"])),
        4,
        8,
    ));
    fine.push(op(2, Call::Status, holders(&[("a.rs", "A")]), 6, 7));
    assert!(verdict(&fine));
}

#[test]
fn checker_rejects_a_refusal_naming_a_non_holder_and_the_effect_of_a_refused_operation() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "a.rs"), claimed(&["a.rs"]), 2, 3));
    let wrong = Ret::Claimed {
        claimed: set(&[]),
        conflicts: [("a.rs".to_string(), set(&["C"]))].into(),
    };
    let mut bad = h.clone();
    bad.push(op(1, claim("B", "a.rs"), wrong, 4, 5));
    assert!(!verdict(&bad));
    // A refused release (exit 2) that released anyway.
    let mut eff = h;
    eff.push(op(
        0,
        Call::Release {
            id: "A".into(),
            keys: vec!["a.rs".into()],
        },
        Ret::Refused,
        4,
        5,
    ));
    eff.push(op(1, claim("B", "a.rs"), claimed(&["a.rs"]), 6, 7));
    assert!(!verdict(&eff));
}

#[test]
fn checker_allows_a_killed_operation_to_have_happened_or_not() {
    let mut h = started("A", "B", "C");
    h.push(Op {
        client: 0,
        call: claim("A", "a.rs"),
        ret: None,
        invoke: 2,
        complete: None,
    });
    let mut took = h.clone();
    took.push(op(
        1,
        claim("B", "a.rs"),
        Ret::Claimed {
            claimed: set(&[]),
            conflicts: [("a.rs".to_string(), set(&["A"]))].into(),
        },
        4,
        5,
    ));
    assert!(verdict(&took));
    let mut not = h;
    not.push(op(1, claim("B", "a.rs"), claimed(&["a.rs"]), 4, 5));
    assert!(verdict(&not));
}

/// A killed operation bounded by its client's next `done` (as the harness records it) must take
/// effect before that bound or not at all: a status after the bound that shows the key free,
/// then one showing it held by the killed claimant, is a violation; unbounded, it is not.
#[test]
fn checker_bounds_a_killed_operation_by_its_clients_next_done() {
    let mut h = started("A", "B", "C");
    let killed = |complete| Op {
        client: 0,
        call: claim("A", "a.rs"),
        ret: None,
        invoke: 2,
        complete,
    };
    let after = [
        op(1, Call::Status, holders(&[]), 12, 13),
        op(2, Call::Status, holders(&[("a.rs", "A")]), 14, 15),
    ];
    let mut bounded = h.clone();
    bounded.push(killed(Some(10)));
    bounded.extend(after.iter().cloned());
    assert!(!verdict(&bounded), "the effect cannot land after the bound");
    h.push(killed(None));
    h.extend(after.iter().cloned());
    assert!(verdict(&h), "unbounded, it may land at any time");
}

/// Issue 34's first finding as a history: B's one `claim --wait` granted twice, the second
/// time after C's `--force` and release. The status after it shows B holding the file again.
#[test]
fn checker_rejects_the_wait_regrab_that_undid_a_force() {
    let mut h = started("A", "B", "C");
    h.push(op(0, claim("A", "f.rs"), claimed(&["f.rs"]), 2, 3));
    h.push(op(
        1,
        Call::WaitStart {
            id: "B".into(),
            keys: vec!["f.rs".into()],
            req: 1,
        },
        Ret::Fail,
        4,
        30,
    ));
    h.last_mut().unwrap().ret = None;
    h.push(op(
        0,
        Call::Release {
            id: "A".into(),
            keys: vec!["f.rs".into()],
        },
        Ret::Released(set(&["f.rs"])),
        6,
        7,
    ));
    // `status` shows B holding it: the handover happened (so B's wait had started).
    h.push(op(2, Call::Status, holders(&[("f.rs", "B")]), 7, 8));
    h.push(op(
        2,
        Call::Claim {
            id: "C".into(),
            keys: vec!["f.rs".into()],
            force: true,
        },
        claimed(&["f.rs"]),
        8,
        9,
    ));
    h.push(op(
        2,
        Call::Release {
            id: "C".into(),
            keys: vec!["f.rs".into()],
        },
        Ret::Released(set(&["f.rs"])),
        10,
        11,
    ));
    let regrab = Ret::Waited {
        held: set(&["f.rs"]),
        gave_up: set(&[]),
        lost: set(&[]),
    };
    let mut bad = h.clone();
    bad.push(op(
        1,
        Call::WaitEnd {
            id: "B".into(),
            keys: vec!["f.rs".into()],
            req: 1,
        },
        regrab,
        4,
        30,
    ));
    bad.push(op(2, Call::Status, holders(&[("f.rs", "B")]), 31, 32));
    assert!(!verdict(&bad), "the regrab is a violation");
    let honest = Ret::Waited {
        held: set(&[]),
        gave_up: set(&[]),
        lost: set(&["f.rs"]),
    };
    let mut good = h;
    good.push(op(
        1,
        Call::WaitEnd {
            id: "B".into(),
            keys: vec!["f.rs".into()],
            req: 1,
        },
        honest,
        4,
        30,
    ));
    good.push(op(2, Call::Status, holders(&[]), 31, 32));
    assert!(verdict(&good), "the fixed answer is linearizable");
}
