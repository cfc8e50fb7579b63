#!/usr/bin/env bash
# Benchmark (not a test) of `queue run` as the queue grows (issue 26): N independent no-op jobs
# (`--agent-cmd true --parallel 4`) at several sizes, in one run on this machine, with pueue
# and task-spooler on the same 10k-job no-op queue (4 at a time).
#
# For each size: jobs/s of the run (submission not counted; the median over the rounds),
# bytes written per job (the `wchar` of /proc/PID/io: every byte handed to write(2) by the
# dispatcher, its threads and children; for pueue and task-spooler, by their daemon), the
# home's size afterwards (du) and the peak RSS (ru_maxrss of the run, what `/usr/bin/time -v`
# reports as "Maximum resident set size"; VmHWM of the daemon for pueue and task-spooler).
#
# pueue and task-spooler run the largest size. Beware: task-spooler keeps one waiting client
# process per queued job and accepts at most 1000 connections (TS_MAXCONN), so its queue cannot
# hold 10,000 jobs (its clients block at about 1000); and pueue 4.0.4 rewrites its whole
# state.json (about 2 KB per task) on every `pueue add` and state change, so filling a
# 10,000-task queue alone took over 8 minutes here. Compare them at 900 jobs:
#   shell/bench-queue-run.sh 1 900
# Usage: shell/bench-queue-run.sh [ROUNDS] [SIZES...]     (default: 3 rounds, 200 1000 10000)
# Environment:
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
#   COMPARE_ROUNDS: rounds of pueue and task-spooler (default 1: filling their queue takes one
#     client process per job).
#   TOOLS: which of `conductor pueue tsp` to run (default all three).
#   COMPARE=0: leave out pueue and task-spooler. Otherwise both must be on the PATH:
#     task-spooler: apt-get install task-spooler  (binary `tsp`)
#     pueue:        cargo install pueue --version 4.0.4 --locked --root DIR; PATH=DIR/bin:$PATH
# Homes go under the target directory (not /tmp) and are removed at the end.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
sizes=${*:-200 1000 10000}
tdir=${CARGO_TARGET_DIR:-$PWD/target}
bin=${BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet --bin conductor
    bin=$tdir/release/conductor
fi
compare=${COMPARE:-1}
if [ "$compare" != 0 ]; then
    for t in tsp pueue pueued; do
        if ! command -v "$t" >/dev/null; then
            echo "bench-queue-run: $t is not on the PATH; install it (apt-get install task-spooler;" \
                "cargo install pueue --version 4.0.4 --locked --root DIR and PATH=DIR/bin:\$PATH)" \
                "or run with COMPARE=0" >&2
            exit 2
        fi
    done
fi
mkdir -p "$tdir"
work=$(mktemp -d "$tdir/bench-queue-run.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
TOOLS=${TOOLS:-conductor pueue tsp} python3 - "$bin" "$work" "$rounds" "$compare" "${COMPARE_ROUNDS:-1}" $sizes <<'PY'
import json, os, statistics, subprocess, sys, time
bin, work, rounds, compare = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] != "0"
compare_rounds = int(sys.argv[5])
sizes = [int(s) for s in sys.argv[6:]]
PAR = 4

def du(path):
    out = subprocess.run(["du", "-sk", path], stdout=subprocess.PIPE, check=True).stdout
    return int(out.split()[0]) * 1024

def proc_io(pid):
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (l.split(":") for l in f)}

def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("VmHWM:"):
                return int(l.split()[1]) * 1024
    return 0

def conductor(n, r):
    home = os.path.join(work, f"c-{n}-{r}")
    env = dict(os.environ, CONDUCTOR_HOME=home)
    m = json.dumps({"workspace": "b", "jobs": [{"id": f"j{i}", "prompt": "no-op"} for i in range(n)]})
    subprocess.run([bin, "queue", "submit", "-"], input=m.encode(), env=env, check=True,
                   stdout=subprocess.DEVNULL)
    before = du(home)
    io_file = os.path.join(work, f"io-{n}-{r}")
    # The shell reads its own /proc/PID/io after reaping the run: a reaped child's I/O is
    # added to its parent's counters.
    script = '"$@"; s=$?; cat /proc/$$/io > "$IO_FILE"; exit $s'
    t0 = time.perf_counter()
    p = subprocess.Popen(["sh", "-c", script, "sh", bin, "-q", "queue", "run", "--parallel",
                          str(PAR), "--agent-cmd", "true"], env=dict(env, IO_FILE=io_file),
                         stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    assert status == 0, f"queue run failed: {status}"
    with open(io_file) as f:
        io = {k: int(v) for k, v in (l.split(":") for l in f)}
    return {"s": dt, "wchar": io["wchar"], "write_bytes": io["write_bytes"],
            "rss": ru.ru_maxrss * 1024, "home": du(home) - before}

def pueue(n, r):
    d = os.path.join(work, f"pueue-{n}-{r}")
    os.makedirs(d)
    cfg = os.path.join(d, "pueue.yml")
    with open(cfg, "w") as f:
        f.write(f"shared:\n  pueue_directory: {d}\n  runtime_directory: {d}\n"
                f"  use_unix_socket: true\n  unix_socket_path: {d}/pueue.socket\n"
                f"daemon:\n  callback: null\n")
    daemon = subprocess.Popen(["pueued", "-c", cfg], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    p = ["pueue", "-c", cfg]
    try:
        for _ in range(500):
            if subprocess.run(p + ["status"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.01)
        subprocess.run(p + ["parallel", str(PAR)], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(p + ["pause"], check=True, stdout=subprocess.DEVNULL)
        for _ in range(n):
            subprocess.run(p + ["add", "--", "true"], check=True, stdout=subprocess.DEVNULL)
        before_io, before_du = proc_io(daemon.pid), du(d)
        t0 = time.perf_counter()
        subprocess.run(p + ["start"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(p + ["wait"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        out = json.loads(subprocess.run(p + ["status", "--json"], check=True,
                                        stdout=subprocess.PIPE).stdout)
        done = sum(1 for t in out["tasks"].values() if "Done" in t["status"])
        assert done == n, f"pueue finished {done} of {n}"
        io = proc_io(daemon.pid)
        return {"s": dt, "wchar": io["wchar"] - before_io["wchar"],
                "write_bytes": io["write_bytes"] - before_io["write_bytes"],
                "rss": vm_hwm(daemon.pid), "home": du(d) - before_du}
    finally:
        daemon.terminate()
        daemon.wait()

def tsp(n, r):
    d = os.path.join(work, f"tsp-{n}-{r}")
    os.makedirs(d)
    sock = os.path.join(d, "socket")
    env = dict(os.environ, TS_SOCKET=sock, TS_MAXFINISHED=str(n + 10), TS_SAVELIST="", TMPDIR=d)
    gate = os.path.join(d, "go")
    # One slot, held by a job that waits for the gate: the queue fills, then runs 4 at a time.
    subprocess.run(["tsp", "-S", "1"], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["tsp", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.01; done"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    last = None
    for _ in range(n):
        last = subprocess.run(["tsp", "true"], env=env, check=True,
                              stdout=subprocess.PIPE).stdout.decode().strip()
    # The server: the `tsp` process with our socket whose parent is not one (its forks run
    # the jobs).
    tsps = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"TS_SOCKET={sock}".encode() in f.read().split(b"\0"):
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        if c.read().split(b"\0")[0].endswith(b"tsp"):
                            with open(f"/proc/{pid}/stat") as st:
                                tsps[int(pid)] = int(st.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            pass
    server = next((p for p, parent in tsps.items() if parent not in tsps and vm_hwm(p)), None)
    before_io = proc_io(server) if server else None
    before_du = du(d)
    try:
        t0 = time.perf_counter()
        subprocess.run(["tsp", "-S", str(PAR)], env=env, check=True, stdout=subprocess.DEVNULL)
        open(gate, "w").close()
        subprocess.run(["tsp", "-w", last], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        # The last job can end before others that started before it.
        while True:
            out = subprocess.run(["tsp"], env=env, stdout=subprocess.PIPE).stdout.decode()
            if " running " not in out and " queued " not in out:
                break
            time.sleep(0.005)
        dt = time.perf_counter() - t0
        finished = out.count(" finished ")
        assert finished == n + 1, f"task-spooler finished {finished} of {n + 1}"
        io = proc_io(server) if server else None
        return {"s": dt,
                "wchar": io["wchar"] - before_io["wchar"] if io else float("nan"),
                "write_bytes": io["write_bytes"] - before_io["write_bytes"] if io else float("nan"),
                "rss": vm_hwm(server) if server else 0, "home": du(d) - before_du}
    finally:
        subprocess.run(["tsp", "-K"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def med(rs, k):
    return statistics.median(r[k] for r in rs)

rows = []
def row(name, n, rs):
    s = med(rs, "s")
    rows.append((name, n, n / s, med(rs, "wchar") / n, med(rs, "write_bytes") / n,
                 med(rs, "home") / n, med(rs, "rss") / 2**20))
    print(f"  {name} {n}: {n / s:.0f} jobs/s", file=sys.stderr, flush=True)

def case(name, n, f, k=None):
    row(name, n, [f(n, r) for r in range(k or rounds)])

tools = os.environ["TOOLS"].split()
if "conductor" in tools:
    # Rounds interleaved: each round runs every size once.
    rs = {n: [] for n in sizes}
    for r in range(rounds):
        for n in sizes:
            rs[n].append(conductor(n, r))
    for n in sizes:
        row("conductor", n, rs[n])
if compare:
    n = max(sizes)
    if "pueue" in tools:
        case("pueue 4.0.4", n, pueue, compare_rounds)
    if "tsp" in tools:
        case("task-spooler", n, tsp, compare_rounds)

print(f"`queue run --agent-cmd true --parallel {PAR}`, N independent no-op jobs; medians of {rounds} round(s), interleaved"
      + (f" ({compare_rounds} for pueue and task-spooler)" if compare else ""))
print()
print("| tool | jobs | jobs/s | bytes written per job (wchar) | write_bytes per job | home growth per job | peak RSS (MB) |")
print("|---|---|---|---|---|---|---|")
for name, n, jps, w, wb, h, rss in rows:
    print(f"| {name} | {n} | {jps:.0f} | {w:.0f} | {wb:.0f} | {h:.0f} | {rss:.1f} |")
c = {n: jps for name, n, jps, *_ in rows if name == "conductor"}
if len(c) > 1:
    lo, hi = min(c), max(c)
    print()
    print(f"conductor: {c[hi]:.0f} jobs/s at {hi} jobs against {c[lo]:.0f} at {lo}: "
          f"{c[lo] / c[hi]:.2f}x slower (goal: at most 1.5x)")
PY
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
