#!/usr/bin/env bash
# Benchmark of the job queue (not a test), side by side in one run on this machine:
#   1. a 50-hop chain of no-op jobs (each depends on the previous one)
#   2. 200 independent no-op jobs at parallel 4
# for `conductor queue` (local runner; submit + run, every state change a durable
# transaction) and task-spooler (`tsp -S 4`, `tsp -D` for the chain) when it is installed,
# and pueue (`pueue parallel 4`, `pueue add --after` for the chain) when `pueue` and `pueued`
# are on the PATH (`cargo install pueue --version 4.0.4 --locked --root DIR`, then
# PATH=DIR/bin:$PATH; without it the issue's pueue 4.0.4 figures are quoted);
# then the sandbox runner's overhead per job (bubblewrap, if it works here).
# Usage: [BIN=path] shell/bench-queue.sh [ROUNDS]   (default 3; throwaway homes)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Rounds are interleaved: each round runs every case of every tool once.
# The homes (and task-spooler's output files, through TMPDIR) go under target/, not /tmp: on
# ext4 every file created in a block group full of inodes freed in the last 30 s costs up to
# ten times more, and /tmp is where test suites create and delete thousands of files.
# Prints the median wall time of each case over the rounds.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
rounds=${1:-3}
. shell/bench-bin.sh   # $bin: BIN, else the release build
echo "binary: $bin ($("$bin" --version))"
mkdir -p target
work=$(mktemp -d "$PWD/target/bench-queue.XXXXXX")
trap 'rm -rf "$work"; [ -n "${TS_SOCKET:-}" ] && tsp -K >/dev/null 2>&1 || true' EXIT

echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$bin" "$work" "$rounds" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
bin, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

def manifest(ws, n, chain):
    return json.dumps({"workspace": ws, "jobs": [
        {"id": f"j{i}", "prompt": "no-op", "depends_on": [f"j{i-1}"] if chain and i else []}
        for i in range(n)]})

def conductor(n, chain, parallel, runner="local", tag=""):
    home = os.path.join(work, f"home-{n}-{chain}-{runner}-{tag}-{time.time_ns()}")
    env = dict(os.environ, CONDUCTOR_HOME=home)
    t0 = time.perf_counter()
    subprocess.run([bin, "queue", "submit", "-"], input=manifest("b", n, chain).encode(),
                   env=env, check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run([bin, "-q", "queue", "run", "--parallel", str(parallel), "--runner", runner,
                        "--agent-cmd", "true"], env=env, stdout=subprocess.PIPE)
    dt = time.perf_counter() - t0
    assert r.returncode == 0, r
    # Homes are removed at the end, not here: on a file system without a journal (ext4 as
    # here), inodes freed in the last 30 s are skipped one by one by every file creation in
    # that block group, so deleting a case's home would slow the next case's files down.
    return dt

def tsp(n, chain, parallel):
    sock = os.path.join(work, f"tsp-{time.time_ns()}")
    env = dict(os.environ, TS_SOCKET=sock, TS_MAXFINISHED="1000", TS_SAVELIST="", TMPDIR=work)
    os.environ["TS_SOCKET"] = sock
    subprocess.run(["tsp", "-S", str(parallel)], env=env, check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    last = None
    for i in range(n):
        args = ["tsp"] + (["-D", last] if chain and last is not None else []) + ["true"]
        last = subprocess.run(args, env=env, check=True, stdout=subprocess.PIPE).stdout.decode().strip()
    subprocess.run(["tsp", "-w", last], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Wait for every job (tsp -w waits for one).
    while True:
        out = subprocess.run(["tsp"], env=env, stdout=subprocess.PIPE).stdout.decode()
        if "running" not in out and "queued" not in out:
            break
        time.sleep(0.005)
    dt = time.perf_counter() - t0
    subprocess.run(["tsp", "-K"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dt

def pueue(n, chain, parallel):
    d = os.path.join(work, f"pueue-{time.time_ns()}")
    os.makedirs(d)
    cfg = os.path.join(d, "pueue.yml")
    with open(cfg, "w") as f:
        f.write(f"shared:\n  pueue_directory: {d}\n  runtime_directory: {d}\n"
                f"  use_unix_socket: true\n  unix_socket_path: {d}/pueue.socket\n"
                f"daemon:\n  callback: null\n")
    daemon = subprocess.Popen(["pueued", "-c", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p = ["pueue", "-c", cfg]
    for _ in range(500):
        if subprocess.run(p + ["status"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            break
        time.sleep(0.01)
    subprocess.run(p + ["parallel", str(parallel)], check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    last = None
    for i in range(n):
        args = p + ["add", "--print-task-id"] + (["--after", last] if chain and last is not None else []) + ["--", "true"]
        last = subprocess.run(args, check=True, stdout=subprocess.PIPE).stdout.decode().strip()
    subprocess.run(p + ["wait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    subprocess.run(p + ["shutdown"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemon.wait(timeout=10)
    return dt

have_tsp = shutil.which("tsp") is not None
have_pueue = shutil.which("pueue") is not None and shutil.which("pueued") is not None
have_bwrap = shutil.which("bwrap") is not None and subprocess.run(
    ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"], stderr=subprocess.DEVNULL).returncode == 0
cases = [("50-hop chain", 50, True, 1), ("200 no-op jobs, parallel 4", 200, False, 4)]
res = {}
for r in range(rounds):
    for name, n, chain, par in cases:
        res.setdefault((name, "conductor queue"), []).append(conductor(n, chain, par))
        if have_tsp:
            res.setdefault((name, "task-spooler"), []).append(tsp(n, chain, par))
        if have_pueue:
            res.setdefault((name, "pueue"), []).append(pueue(n, chain, par))
    if have_bwrap:
        res.setdefault(("50 jobs one at a time", "local"), []).append(conductor(50, False, 1, "local", r))
        res.setdefault(("50 jobs one at a time", "sandbox"), []).append(conductor(50, False, 1, "sandbox", r))
fd = os.open(os.path.join(work, "fsync.probe"), os.O_WRONLY | os.O_CREAT, 0o600)
syncs = []
for _ in range(50):
    os.write(fd, b"x" * 200)
    t = time.perf_counter(); os.fdatasync(fd); syncs.append(time.perf_counter() - t)
syncs.sort()
creates = []
for i in range(200):
    t = time.perf_counter()
    os.close(os.open(os.path.join(work, f"create.probe.{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    creates.append(time.perf_counter() - t)
creates.sort()
print(f"this disk: fdatasync median {syncs[25]*1000:.2f} ms (a conductor transaction makes one, the commit log's; "
      f"the dispatcher groups the changes of jobs that end within 5 ms); "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
print(f"creating a file here: median {creates[100]*1e6:.0f} us (a job creates three, tsp one per job; "
      f"0.02 ms on a quiet block group, up to 0.2 ms right after many deletions nearby)")
print(f"median of {rounds} round(s), interleaved, wall seconds including submit")
for (name, who), v in res.items():
    print(f"  {name:<28} {who:<16} {statistics.median(v):7.3f} s")
if not have_tsp:
    print("  task-spooler: not installed (apt-get install task-spooler)")
if not have_pueue:
    print("  pueue: not installed here; the issue measured pueue 4.0.4 at 16.2 s (50-hop chain)"
          " and 18.2 s (200 tasks)")
if have_bwrap:
    loc = statistics.median(res[("50 jobs one at a time", "local")])
    sb = statistics.median(res[("50 jobs one at a time", "sandbox")])
    print(f"  sandbox overhead per job: {(sb - loc) / 50 * 1000:.1f} ms")
else:
    print("  sandbox: bwrap missing or cannot create namespaces here")
PY
