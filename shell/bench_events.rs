//! Benchmark for issue 4 (not a test): run by `shell/bench-events.sh`, which builds --release.
//!
//! Measures, against a temp home:
//! 1. claim -> watch: from a `conductor claim` process returning to the matching line printed by
//!    a running `conductor watch --json` (p50/p95 over N events);
//! 2. the same with a consumer polling `conductor events` every second (the ratio);
//! 3. release -> claim --wait: from `conductor release` returning to the waiting
//!    `claim --wait` process exiting with success (p50/p95);
//! 4. the CPU a quiet `watch` uses over 10 s (/proc/<pid>/stat utime+stime).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Env {
    bin: PathBuf,
    home: PathBuf,
    proj: PathBuf,
}

impl Env {
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("CONDUCTOR_HOME", &self.home)
            .env_remove("CONDUCTOR_NOW")
            .current_dir(&self.proj)
            .stdin(Stdio::null());
        c
    }
    fn run(&self, args: &[&str]) -> String {
        let o = self.cmd().args(args).output().expect("run conductor");
        assert!(
            o.status.success() || o.status.code() == Some(3),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    fn start(&self, task: &str) -> String {
        let out = self.run(&["--json", "start", task, "--priority", "P1"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["instance_id"].as_str().unwrap().to_string()
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((p / 100.0) * (v.len() as f64 - 1.0)).round() as usize;
    v[i.min(v.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Spawn `watch --json --after AFTER` and a thread that timestamps each line as (seq, when).
/// `--after` makes the watcher print every event past AFTER however late it starts watching.
fn watcher(
    env: &Env,
    types: &str,
    after: u64,
) -> (std::process::Child, mpsc::Receiver<(u64, Instant)>) {
    let mut child = env
        .cmd()
        .args([
            "--json",
            "watch",
            "--types",
            types,
            "--after",
            &after.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            let when = Instant::now();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if tx.send((v["seq"].as_u64().unwrap(), when)).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn last_seq(env: &Env) -> u64 {
    // The newest event's seq: page to the end.
    let mut after = 0;
    loop {
        let v: serde_json::Value = serde_json::from_str(&env.run(&[
            "events",
            "--after",
            &after.to_string(),
            "--limit",
            "100000",
        ]))
        .unwrap();
        after = v["next_after_seq"].as_u64().unwrap();
        if !v["has_more"].as_bool().unwrap() {
            return after;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let bin = std::fs::canonicalize(args.next().expect("usage: bench_events CONDUCTOR_BIN [N]"))
        .expect("conductor binary");
    let n: usize = args.next().map(|s| s.parse().unwrap()).unwrap_or(200);
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let env = Env {
        bin,
        home: root.join("home"),
        proj: root.join("proj"),
    };
    std::fs::create_dir_all(&env.proj).unwrap();
    let id = env.start("bench");
    println!(
        "cores: {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );

    // 1. claim -> watch.
    let (mut w, rx) = watcher(&env, "claim.granted", last_seq(&env));
    // Make sure the watcher is up: claim once and wait for its line.
    env.run(&["claim", "--instance", &id, "warmup.rs"]);
    rx.recv_timeout(Duration::from_secs(10))
        .expect("watch is running");
    let (mut lat, mut signed, mut cmd) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let f = format!("f{i}.rs");
        let spawned = Instant::now();
        let o = env
            .cmd()
            .args(["claim", "--instance", &id, &f])
            .output()
            .unwrap();
        let returned = Instant::now();
        assert!(o.status.success());
        let (_, seen) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("watch printed the event");
        // The event is appended before status.json is replaced and before claim exits, so the
        // line usually arrives first: return->line is then negative.
        signed.push(
            ms(seen.saturating_duration_since(returned))
                - ms(returned.saturating_duration_since(seen)),
        );
        lat.push(ms(seen.saturating_duration_since(spawned)));
        cmd.push(ms(returned - spawned));
    }
    let _ = w.kill();
    let _ = w.wait();
    let (w50, w95) = (pct(&mut lat, 50.0), pct(&mut lat, 95.0));
    println!(
        "claim returned -> watch line ({n} events): p50 {:+.2} ms, p95 {:+.2} ms, max {:+.2} ms (negative: the line came before claim exited)",
        pct(&mut signed, 50.0),
        pct(&mut signed, 95.0),
        pct(&mut signed, 100.0)
    );
    println!(
        "claim spawned -> watch line: p50 {w50:.2} ms, p95 {w95:.2} ms (the claim process itself: p50 {:.2} ms, p95 {:.2} ms)",
        pct(&mut cmd, 50.0),
        pct(&mut cmd, 95.0)
    );

    // 2. The same with a consumer polling every second.
    let samples = 20;
    let (ptx, prx) = mpsc::channel::<(u64, Instant)>();
    let poll_env = Env {
        bin: env.bin.clone(),
        home: env.home.clone(),
        proj: env.proj.clone(),
    };
    let mut after = last_seq(&env);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let poller = std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(1));
            let v: serde_json::Value = serde_json::from_str(&poll_env.run(&[
                "events",
                "--after",
                &after.to_string(),
                "--types",
                "claim.granted",
            ]))
            .unwrap();
            let now = Instant::now();
            for item in v["items"].as_array().unwrap() {
                let _ = ptx.send((item["seq"].as_u64().unwrap(), now));
            }
            after = v["next_after_seq"].as_u64().unwrap();
        }
    });
    let mut plat = Vec::new();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..samples {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(rng % 1000));
        let f = format!("p{i}.rs");
        let spawned = Instant::now();
        env.run(&["claim", "--instance", &id, &f]);
        let (_, seen) = prx
            .recv_timeout(Duration::from_secs(10))
            .expect("poller saw it");
        plat.push(ms(seen.saturating_duration_since(spawned)));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = poller.join();
    let (p50, p95) = (pct(&mut plat, 50.0), pct(&mut plat, 95.0));
    println!(
        "claim spawned -> 1 s polling consumer saw it ({samples} events): p50 {p50:.1} ms, p95 {p95:.1} ms"
    );
    println!(
        "ratio polling/watch (spawn -> seen): p50 {:.0}x, p95 {:.0}x",
        p50 / w50.max(0.001),
        p95 / w95.max(0.001)
    );

    // 3. release -> claim --wait success.
    let a = env.start("holder");
    let b = env.start("waiter");
    env.run(&["claim", "--instance", &a, "hot.rs"]);
    let (mut holder, mut waiter) = (a, b);
    let mut wlat = Vec::new();
    let rounds = 50;
    let status = env.home.join("status.json");
    for _ in 0..rounds {
        let child = env
            .cmd()
            .args(["claim", "--instance", &waiter, "--wait=30s", "hot.rs"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&status)
            .unwrap_or_default()
            .contains("\"waiting_for\"")
        {
            assert!(Instant::now() < deadline, "waiter queued");
            std::thread::sleep(Duration::from_millis(2));
        }
        env.run(&["release", "--instance", &holder, "hot.rs"]);
        let released = Instant::now();
        let out = child.wait_with_output().unwrap();
        let done = Instant::now();
        assert!(out.status.success());
        wlat.push(ms(done - released));
        std::mem::swap(&mut holder, &mut waiter);
    }
    println!(
        "release -> claim --wait success ({rounds} handovers): p50 {:.2} ms, p95 {:.2} ms",
        pct(&mut wlat, 50.0),
        pct(&mut wlat, 95.0)
    );

    // 4. A quiet watcher's CPU over 10 s.
    let (mut w, _rx) = watcher(&env, "claim.granted", last_seq(&env));
    std::thread::sleep(Duration::from_millis(500));
    let ticks = |pid: u32| -> u64 {
        let stat =
            std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after_comm.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap() // utime + stime
    };
    let t0 = ticks(w.id());
    std::thread::sleep(Duration::from_secs(10));
    let t1 = ticks(w.id());
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    println!(
        "quiet watch over 10 s: {} clock ticks of CPU (1 tick = {} ms)",
        t1 - t0,
        1000 / hz.max(1)
    );
    let _ = w.kill();
    let _ = w.wait();
}
