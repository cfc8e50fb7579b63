//! One queue, dispatchers on every host (issue 36 §3): `queue run` dispatchers as separate
//! processes with their own `CONDUCTOR_HOST` and home, on one real etcd cluster (see
//! `tests/it/etcd.rs` for the cluster and the hosts). Each dispatcher holds a lease with a
//! short time to live here (`CONDUCTOR_QUEUE_LEASE=3`).
//!
//! Jobs record what they did in one file every "host" shares (`ran`): `start JOB TIME RUN` and
//! `end JOB TIME RUN` lines, TIME in seconds since the epoch, RUN the dispatcher's token.
//!
//! Long variant: `cargo test --test it queue_multihost -- --ignored`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::Run;
use crate::etcd::{Cluster, Host, hosts};

/// The lease time to live the dispatchers run with (seconds).
const TTL: u64 = 3;

/// An agent that records its start and end in `ran`, sleeping `secs` between them (a job named
/// `slow` sleeps `slow_secs` instead).
fn agent(ran: &Path, secs: &str, slow_secs: &str) -> String {
    let ran = ran.display();
    format!(
        "sh -c 'echo \"start $CONDUCTOR_QUEUE_JOB $(date +%s.%N) $CONDUCTOR_QUEUE_RUN\" >> {ran}; \
         case $CONDUCTOR_QUEUE_JOB in slow) sleep {slow_secs};; *) sleep {secs};; esac; \
         echo \"end $CONDUCTOR_QUEUE_JOB $(date +%s.%N) $CONDUCTOR_QUEUE_RUN\" >> {ran}'"
    )
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[track_caller]
fn submit(h: &Host, manifest: &Value) {
    let mut c = h
        .cmd(&["queue", "submit", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(manifest.to_string().as_bytes())
        .unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
}

/// `queue run` on host `h` (still running), with the short lease.
fn dispatcher(h: &Host, agent_cmd: &str, extra: &[&str]) -> Child {
    let mut args = vec!["queue", "run", "--agent-cmd", agent_cmd];
    args.extend_from_slice(extra);
    h.cmd(&args)
        .env("CONDUCTOR_QUEUE_LEASE", TTL.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for a child, at most `limit`, killing it then.
#[track_caller]
fn finish(mut c: Child, limit: Duration) -> Run {
    let deadline = Instant::now() + limit;
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            let o = c.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = c.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// One line of `ran`.
#[derive(Debug, Clone)]
struct Line {
    what: String,
    job: String,
    at: f64,
    run: String,
}

fn lines(ran: &Path) -> Vec<Line> {
    std::fs::read_to_string(ran)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            Some(Line {
                what: w.next()?.to_string(),
                job: w.next()?.to_string(),
                at: w.next()?.parse().ok()?,
                run: w.next()?.to_string(),
            })
        })
        .collect()
}

/// Wait until `ran` has a line that satisfies `f`.
#[track_caller]
fn wait_for_line(ran: &Path, what: &str, f: impl Fn(&Line) -> bool) -> Line {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(l) = lines(ran).into_iter().find(|l| f(l)) {
            return l;
        }
        assert!(Instant::now() < deadline, "no {what} in {:?}", lines(ran));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every live job of the queue, by id, as host `h` sees it.
fn jobs(h: &Host) -> BTreeMap<String, Value> {
    let r = h.run(&["--json", "queue", "jobs", "--all"]);
    assert_eq!(r.code, 0, "{r:#?}");
    r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["id"].as_str().unwrap().to_string(), j.clone()))
        .collect()
}

struct Setup {
    cluster: Cluster,
    _root: tempfile::TempDir,
    hosts: Vec<Host>,
    ran: PathBuf,
}

fn setup(members: usize, n_hosts: usize) -> Setup {
    let cluster = Cluster::with_members(members);
    let root = tempfile::tempdir().unwrap();
    let hosts = hosts(root.path(), &cluster.url(), n_hosts);
    let ran = root.path().join("ran");
    Setup {
        cluster,
        ran,
        hosts,
        _root: root,
    }
}

/// `n` jobs in chains of five (each depends on the one before it), and every fifth chain's
/// head depends on the last job of the chain before: dependencies within and across chains.
fn chains(n: usize) -> Value {
    let jobs: Vec<Value> = (0..n)
        .map(|i| {
            let mut deps = Vec::new();
            if i % 5 != 0 {
                deps.push(format!("j{}", i - 1));
            } else if i >= 25 && (i / 5) % 5 == 0 {
                deps.push(format!("j{}", i - 1));
            }
            json!({"id": format!("j{i}"), "prompt": format!("job {i}"), "depends_on": deps})
        })
        .collect();
    json!({"workspace": "multi", "jobs": jobs})
}

/// Two dispatchers on two hosts run `n` jobs: each exactly once, never before its
/// dependencies ended, and both hosts take part.
fn two_hosts_run_each_job_once(n: usize) {
    let s = setup(3, 2);
    let manifest = chains(n);
    submit(&s.hosts[0], &manifest);
    let cmd = agent(&s.ran, "0.1", "0.1");
    let a = dispatcher(&s.hosts[0], &cmd, &["--parallel", "3"]);
    let b = dispatcher(&s.hosts[1], &cmd, &["--parallel", "3"]);
    let limit = Duration::from_secs(20 + n as u64 / 2);
    let (ra, rb) = (finish(a, limit), finish(b, limit));
    assert_eq!(ra.code, 0, "{ra:#?}");
    assert_eq!(rb.code, 0, "{rb:#?}");
    let all = lines(&s.ran);
    let mut starts: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    let mut ends: BTreeMap<&str, f64> = BTreeMap::new();
    for l in &all {
        match l.what.as_str() {
            "start" => starts.entry(&l.job).or_default().push(l),
            _ => {
                ends.insert(&l.job, l.at);
            }
        }
    }
    assert_eq!(starts.len(), n, "every job ran: {all:?}");
    for (job, s) in &starts {
        assert_eq!(s.len(), 1, "{job} ran once: {s:?}");
    }
    // Never before its dependencies ended (the agent's own clock, on one machine).
    for j in manifest["jobs"].as_array().unwrap() {
        let id = j["id"].as_str().unwrap();
        for d in j["depends_on"].as_array().unwrap() {
            let d = d.as_str().unwrap();
            assert!(
                starts[id][0].at >= ends[d],
                "{id} started before its dependency {d} ended"
            );
        }
    }
    let by_host = |h: &str| {
        all.iter()
            .filter(|l| l.run.contains(&format!("@{h}/")))
            .count()
    };
    assert!(
        by_host("host0") > 0 && by_host("host1") > 0,
        "both hosts ran jobs: {all:?}"
    );
    // The queue, from either host: every job completed, at its first attempt.
    for h in &s.hosts {
        let jobs = jobs(h);
        assert_eq!(jobs.len(), n);
        for (id, j) in &jobs {
            assert_eq!(j["state"]["state"], "completed", "{id}: {j}");
            assert_eq!(j["state"]["attempts"], 1, "{id}: {j}");
        }
    }
    // The dispatchers gave their leases up as they left.
    let c = s.cluster.client();
    let leases = c.lease_key("");
    let mut left = Vec::new();
    c.scan(&leases, |kv| {
        left.push(kv.key);
        Ok::<_, conductor::store::Error>(true)
    })
    .unwrap();
    assert!(left.is_empty(), "leases left behind: {left:?}");
}

#[test]
fn two_hosts_share_one_queue_and_run_each_of_40_jobs_once() {
    two_hosts_run_each_job_once(40);
}

#[test]
#[ignore]
fn long_two_hosts_share_one_queue_and_run_each_of_200_jobs_once() {
    two_hosts_run_each_job_once(200);
}

/// A dispatcher SIGKILLed while its job runs: the other host takes the job over once the dead
/// one's lease has expired, and not before (the times the job recorded say so: the lease was
/// kept alive at most a third of its time to live before the kill, so it expired at least
/// two thirds of it after).
#[test]
fn a_killed_dispatchers_job_is_retaken_only_after_its_lease_expires() {
    let s = setup(1, 2);
    submit(
        &s.hosts[0],
        &json!({"workspace": "w", "jobs": [
            {"id": "slow", "prompt": "slow"},
            {"id": "after", "prompt": "after", "depends_on": ["slow"]},
        ]}),
    );
    // On host0 the job would sleep a minute; on host1 it is quick.
    let mut a = dispatcher(&s.hosts[0], &agent(&s.ran, "0", "60"), &[]);
    let first = wait_for_line(&s.ran, "start of slow", |l| l.what == "start");
    assert!(first.run.contains("@host0/"), "{first:?}");
    let b = dispatcher(&s.hosts[1], &agent(&s.ran, "0", "0"), &[]);
    // host1's dispatcher is up (its lease taken) before host0 dies.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !holds_lease(&s.cluster, &s.hosts[1]) {
        assert!(Instant::now() < deadline, "host1's dispatcher never looked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = now_secs();
    a.kill().unwrap();
    a.wait().unwrap();
    let rb = finish(b, Duration::from_secs(30));
    assert_eq!(rb.code, 0, "{rb:#?}");
    let all = lines(&s.ran);
    let slow: Vec<&Line> = all
        .iter()
        .filter(|l| l.what == "start" && l.job == "slow")
        .collect();
    assert_eq!(slow.len(), 2, "slow ran twice, killed once: {all:?}");
    assert!(slow[1].run.contains("@host1/"), "{all:?}");
    let waited = slow[1].at - killed;
    let least = TTL as f64 * 2.0 / 3.0;
    assert!(
        waited >= least - 0.05,
        "host1 retook the job {waited:.2}s after host0 died: before its lease ({TTL}s, kept alive every {:.1}s) could expire",
        TTL as f64 / 3.0
    );
    assert!(
        waited < TTL as f64 + 10.0,
        "host1 took {waited:.2}s to retake the job"
    );
    let jobs = jobs(&s.hosts[0]);
    assert_eq!(jobs["slow"]["state"]["state"], "completed", "{jobs:?}");
    assert_eq!(jobs["slow"]["state"]["attempts"], 2, "{jobs:?}");
    assert_eq!(jobs["after"]["state"]["attempts"], 1, "{jobs:?}");
    // The hand-over is in the shared journal, with why.
    let ev = s.hosts[1].run(&["--json", "events", "--types", "queue.job.interrupted"]);
    assert!(
        ev.stdout.contains("lease on the shared store expired"),
        "{ev:#?}"
    );
}

/// True while the dispatcher of host `h` holds its lease (it has taken it before it reads the
/// queue).
fn holds_lease(cluster: &Cluster, h: &Host) -> bool {
    let c = cluster.client();
    let mut found = false;
    c.scan(&c.lease_key("queue/dispatcher/"), |kv| {
        found |= kv.key.ends_with(&format!("@{}", h.name));
        Ok::<_, conductor::store::Error>(true)
    })
    .unwrap();
    found
}

/// A dispatcher whose lease is lost (revoked on the cluster, as an expiry while it was cut
/// off would) stops its job, records why, and exits 11 with `lease_lost`; the job runs again.
#[test]
fn a_lost_lease_stops_the_job_and_says_why() {
    let s = setup(1, 1);
    submit(
        &s.hosts[0],
        &json!({"workspace": "w", "jobs": [{"id": "slow", "prompt": "slow"}]}),
    );
    let a = dispatcher(&s.hosts[0], &agent(&s.ran, "0", "60"), &["--json"]);
    wait_for_line(&s.ran, "start of slow", |l| l.what == "start");
    let c = s.cluster.client();
    let leases = c.gateway("/v3/lease/leases", &json!({})).unwrap();
    let ids: Vec<String> = leases["leases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ID"].as_str().map(str::to_string))
        .collect();
    assert!(!ids.is_empty(), "{leases}");
    for id in ids {
        c.gateway("/v3/lease/revoke", &json!({ "ID": id })).unwrap();
    }
    let r = finish(a, Duration::from_secs(20));
    // The job was stopped (no end line), and its record says why.
    assert!(
        !lines(&s.ran).iter().any(|l| l.what == "end"),
        "{:?} {r:#?}",
        lines(&s.ran)
    );
    r.reason(11, "lease_lost");
    let jobs = jobs(&s.hosts[0]);
    let st = &jobs["slow"]["state"];
    assert_eq!(st["state"], "ready", "back in line: {st}");
    assert!(
        st["reason"]
            .as_str()
            .is_some_and(|r| r.contains("lost its lease")),
        "{st}"
    );
}

/// A member of the cluster is killed while two hosts run the queue: every job still runs
/// exactly once.
#[test]
fn a_member_killed_mid_run_loses_no_job_and_runs_none_twice() {
    let mut s = setup(3, 2);
    let n = 20;
    submit(&s.hosts[0], &chains(n));
    let cmd = agent(&s.ran, "0.1", "0.1");
    let a = dispatcher(&s.hosts[0], &cmd, &["--parallel", "2"]);
    let b = dispatcher(&s.hosts[1], &cmd, &["--parallel", "2"]);
    // A few jobs in: kill a member that is not the leader (the leader's death is
    // `etcd::killing_the_leader_mid_race...`'s).
    let deadline = Instant::now() + Duration::from_secs(30);
    while lines(&s.ran).iter().filter(|l| l.what == "end").count() < 4 {
        assert!(Instant::now() < deadline, "{:?}", lines(&s.ran));
        std::thread::sleep(Duration::from_millis(20));
    }
    let leader = s.cluster.wait_for_leader();
    s.cluster.kill_member((leader + 1) % 3);
    let (ra, rb) = (
        finish(a, Duration::from_secs(60)),
        finish(b, Duration::from_secs(60)),
    );
    assert_eq!(ra.code, 0, "{ra:#?}");
    assert_eq!(rb.code, 0, "{rb:#?}");
    let all = lines(&s.ran);
    let mut starts: BTreeMap<&str, usize> = BTreeMap::new();
    for l in all.iter().filter(|l| l.what == "start") {
        *starts.entry(&l.job).or_default() += 1;
    }
    assert_eq!(starts.len(), n, "{all:?}");
    assert!(starts.values().all(|k| *k == 1), "{starts:?}");
    let jobs = jobs(&s.hosts[1]);
    assert!(
        jobs.values().all(|j| j["state"]["state"] == "completed"),
        "{jobs:?}"
    );
}

/// Outputs from any host: with the workspaces on a directory every host mounts
/// (`CONDUCTOR_QUEUE_WORKSPACES`, absolute: a relative one is refused at submit), a dependent
/// job reads its dependency's result, and host0 follows the log of a job host1 runs and reads
/// the results, though host0 never ran a job.
#[test]
fn a_job_run_on_one_host_is_followed_and_read_from_another() {
    let s = setup(1, 2);
    let shared = s._root.path().join("shared-workspaces");
    std::fs::create_dir_all(&shared).unwrap();
    let shared = shared.to_str().unwrap().to_string();
    let manifest = json!({"workspace": "out", "jobs": [
        {"id": "a", "prompt": "first"},
        {"id": "b", "prompt": "second", "depends_on": ["a"]},
    ]});
    let submit_with = |root: &str| {
        let mut c = s.hosts[0]
            .cmd(&["--json", "queue", "submit", "-"])
            .env("CONDUCTOR_QUEUE_WORKSPACES", root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(manifest.to_string().as_bytes())
            .unwrap();
        let o = c.wait_with_output().unwrap();
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    };
    submit_with("relative/workspaces").reason(2, "invalid_input");
    let r = submit_with(&shared);
    assert_eq!(r.code, 0, "{r:#?}");
    let ran = s.ran.display();
    // `a` prints a line, waits until the test has started following, prints another, and
    // leaves a result; `b` copies it into its own.
    let agent = format!(
        "sh -c 'case $CONDUCTOR_QUEUE_JOB in \
         a) echo line-one; echo started >> {ran}; \
            while ! test -e {ran}.go; do sleep 0.05; done; echo line-two; \
            mkdir -p \"$CONDUCTOR_QUEUE_OUTPUT\"; echo result-of-a > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\";; \
         b) mkdir -p \"$CONDUCTOR_QUEUE_OUTPUT\"; \
            cat \"$CONDUCTOR_QUEUE_WORKSPACE/output/a/RESULT.md\" > \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\"; \
            echo b-read-it >> \"$CONDUCTOR_QUEUE_OUTPUT/RESULT.md\";; esac'"
    );
    let d = s.hosts[1]
        .cmd(&["queue", "run", "--agent-cmd", &agent])
        .env("CONDUCTOR_QUEUE_LEASE", TTL.to_string())
        .env("CONDUCTOR_QUEUE_WORKSPACES", &shared)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&s.ran).is_ok_and(|t| t.contains("started")) {
        assert!(Instant::now() < deadline, "a never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // host0 follows `a` while it runs on host1.
    let follower = s.hosts[0]
        .cmd(&["queue", "log", "a", "--follow"])
        .env("CONDUCTOR_QUEUE_WORKSPACES", &shared)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(format!("{}.go", s.ran.display()), "").unwrap();
    let f = finish(follower, Duration::from_secs(30));
    assert_eq!(f.code, 0, "{f:#?}");
    assert!(
        f.stdout.contains("line-one") && f.stdout.contains("line-two"),
        "{f:#?}"
    );
    assert!(f.stdout.starts_with("===== conductor: attempt 1"), "{f:#?}");
    let rd = finish(d, Duration::from_secs(30));
    assert_eq!(rd.code, 0, "{rd:#?}");
    // host0 never ran a job: no log of its own, and still the log and the results.
    assert!(!s.hosts[0].home.join(".conductor/queue-logs/out").exists());
    let log = s.hosts[0].run(&["queue", "log", "a"]);
    assert!(log.stdout.contains("line-two"), "{log:#?}");
    let mut c = s.hosts[0].cmd(&["queue", "results", "out"]);
    c.env("CONDUCTOR_QUEUE_WORKSPACES", &shared);
    let o = c.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        text.contains("result-of-a") && text.contains("b-read-it"),
        "{text}"
    );
}

/// The old attempt cannot record a finish beside the new one: a dispatcher frozen (SIGSTOP)
/// while its job runs loses its lease; the other host runs the job again; when the frozen one
/// wakes, its job's exit does not land (its commits are fenced by its lost lease), it exits 11
/// with `lease_lost`, and the record holds the new attempt alone.
#[test]
fn a_frozen_dispatcher_cannot_record_a_finish_beside_the_new_attempt() {
    let s = setup(1, 2);
    submit(
        &s.hosts[0],
        &json!({"workspace": "w", "jobs": [
            {"id": "slow", "prompt": "slow"},
            {"id": "after", "prompt": "after", "depends_on": ["slow"]},
        ]}),
    );
    let a = dispatcher(&s.hosts[0], &agent(&s.ran, "0", "1"), &["--json"]);
    wait_for_line(&s.ran, "start of slow", |l| l.what == "start");
    let signal = |sig: &str| {
        let st = std::process::Command::new("kill")
            .args([sig, &a.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    signal("-STOP");
    let b = dispatcher(&s.hosts[1], &agent(&s.ran, "0", "0"), &[]);
    let rb = finish(b, Duration::from_secs(30));
    assert_eq!(rb.code, 0, "{rb:#?}");
    // The old attempt's process ended meanwhile (its dispatcher could not record it).
    wait_for_line(&s.ran, "the end of the first attempt", |l| {
        l.what == "end" && l.job == "slow" && l.run.contains("@host0/")
    });
    signal("-CONT");
    let ra = finish(a, Duration::from_secs(30));
    ra.reason(11, "lease_lost");
    let jobs = jobs(&s.hosts[1]);
    let st = &jobs["slow"]["state"];
    assert_eq!(st["state"], "completed", "{st}");
    assert_eq!(st["attempts"], 2, "{st}");
    assert!(
        st["dispatcher"]
            .as_str()
            .is_some_and(|d| d.ends_with("@host1")),
        "{st}"
    );
    let ev = s.hosts[1].run(&["--json", "events", "--types", "queue.job.completed"]);
    assert_eq!(ev.code, 0, "{ev:#?}");
    let v = ev.json();
    let events = v["items"].as_array().expect("an events page");
    let slow_done = events
        .iter()
        .filter(|e| e.to_string().contains("w/slow"))
        .count();
    assert_eq!(slow_done, 1, "one completion of slow: {v}");
    assert!(
        events.iter().any(|e| e.to_string().contains("w/after")),
        "{v}"
    );
}
