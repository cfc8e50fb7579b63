#!/usr/bin/env bash
# The 1,000-agent simulation (issue 36 §4; a benchmark with a verdict, not a unit test): a
# three-member etcd cluster on loopback ports and N agents on H hosts (CONDUCTOR_HOST names, each
# host its own home and its own clone of one repository), each agent a conductor session run
# through the real binary against the `etcd://` store URL.
#
# Usage: shell/sim-team.sh [--agents N] [--hosts H] [--rate R] [--duration D] [--json FILE] ...
#        (defaults N=1000 H=100 R=50 D=300; `shell/sim-team.sh --help` lists every option)
#        CONDUCTOR_BIN=path/to/conductor uses that binary instead of building a release one.
#        Needs etcd (apt-get install etcd-server) and python3.
#
# The load: R claim operations a second for D seconds, given round-robin to the agents, so each
# agent acts every N/R seconds and about N sessions are live at once. When its turn comes an agent
# with a live session heartbeats it, releases what it was granted and finishes it (`done`), then
# starts a new session and claims 1-3 files, directories and globs drawn from a shared tree, a
# quarter of them from a few hot directories (deliberate contention). Each turn is one claim,
# unless its `done` failed: the agent then keeps the session and finishes it on its next turn.
# At most --workers agents act at once (64); a turn that could not start before the end is not run.
# The faults, at set times: a follower killed at 25% of D and restarted, the leader killed at 60%
# of D and restarted; a fault window runs from the kill until the restarted member is healthy.
#
# What it reports (a markdown table on stdout; everything as JSON with --json FILE):
# - p50/p95/p99 of claim latency (the whole `conductor --json claim` process, as an agent sees
#   it), outside the fault windows (claims that overlap no window), inside them and overall;
# - throughput achieved (claims and all operations a second) against the target;
# - errors by operation and `reason` (from the `--json` errors); conflicts (exit 3) apart;
# - double grants, from the shared journal (`conductor events`) replayed in order: a grant of a
#   path that overlaps one another live session holds (the same file, a file in a directory, a
#   file a glob matches), counted on the tree's files;
# - lost acknowledgements: a claim that returned success (exit 0, or 3 for the files it still
#   got), a `start` or a `done` with no matching event in the journal; and gaps in the journal.
# Exit status 1 when a double grant, a lost acknowledgement or a journal gap is found.
#
# The cluster runs with --snapshot-count 500 and periodic compaction every 10 s: while status.json
# is one etcd key rewritten by every write, a team of 1,000 writes a value of most of a megabyte
# many times a second, and etcd's defaults (100,000 entries kept in the raft log, no compaction)
# would fill the disk and the 2 GiB backend quota within minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v etcd >/dev/null || { echo "etcd is needed (apt-get install etcd-server)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }
case " $* " in *" --help "* | *" -h "*) ;; *)
  if [ -z "${CONDUCTOR_BIN:-}" ]; then
    cargo build --release --quiet --bin conductor
    CONDUCTOR_BIN=$PWD/target/release/conductor
  fi ;;
esac
exec python3 - "${CONDUCTOR_BIN:-}" "$@" <<'PY'
import argparse, bisect, collections, json, os, random, re, shutil, socket, subprocess, sys
import tempfile, threading, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser(prog="shell/sim-team.sh", description="The 1,000-agent simulation against a three-member etcd cluster on loopback.")
ap.add_argument("--agents", type=int, default=1000, help="agents (N), default 1000")
ap.add_argument("--hosts", type=int, default=100, help="hosts (H), default 100")
ap.add_argument("--rate", type=float, default=50, help="claim operations a second (R), default 50")
ap.add_argument("--duration", type=float, default=300, help="seconds of load (D), default 300")
ap.add_argument("--workers", type=int, default=64, help="agents acting at once at most, default 64")
ap.add_argument("--no-faults", action="store_true", help="kill no member")
ap.add_argument("--probe", type=int, default=20, help="claims made alone before and after the load, default 20")
ap.add_argument("--seed", type=int, default=36)
ap.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE")
ap.add_argument("--keep", metavar="DIR", help="work in DIR (created) and keep it: etcd logs, journal.json, ops.jsonl")
bin = sys.argv[1]
a = ap.parse_args(sys.argv[2:])
N, H, R, D = a.agents, a.hosts, a.rate, a.duration
assert N > 0 and H > 0 and R > 0 and D > 0, "N, H, R and D must be positive"

def cpu_seconds(pid):
    """User + system CPU seconds a live process has used."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0

def children_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

if a.keep:
    os.makedirs(a.keep, exist_ok=True); work = os.path.abspath(a.keep)
else:
    work = tempfile.mkdtemp(prefix="sim-team-")
etcd = shutil.which("etcd")

# ---- the cluster
class Cluster:
    def __init__(self, n=3):
        self.ports = [(free_port(), free_port()) for _ in range(n)]
        self.procs = [None] * n
        self.token = f"sim{os.getpid()}"
        self.reaped = []  # (pid, CPU seconds of its whole life) of each member killed
        for i in range(n):
            self.start(i)

    def start(self, i):
        c, p = self.ports[i]
        initial = ",".join(f"m{j}=http://127.0.0.1:{pp}" for j, (_, pp) in enumerate(self.ports))
        log = open(os.path.join(work, f"m{i}.log"), "ab")
        self.procs[i] = subprocess.Popen([etcd, "--name", f"m{i}", "--data-dir", os.path.join(work, f"m{i}"),
            "--listen-client-urls", f"http://127.0.0.1:{c}", "--advertise-client-urls", f"http://127.0.0.1:{c}",
            "--listen-peer-urls", f"http://127.0.0.1:{p}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
            "--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", self.token,
            "--snapshot-count", "500", "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "10s",
            "--quota-backend-bytes", str(4 << 30)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        log.close()

    def kill(self, i):
        if self.procs[i]:
            self.reaped.append((self.procs[i].pid, cpu_seconds(self.procs[i].pid)))
            self.procs[i].kill(); self.procs[i].wait(); self.procs[i] = None

    def call(self, i, path, body=None, timeout=1.0):
        url = f"http://127.0.0.1:{self.ports[i][0]}{path}"
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=timeout) as r:
            return json.loads(r.read())

    def status(self, i):
        """(this member's id, the leader's id, db size) or None."""
        try:
            s = self.call(i, "/v3/maintenance/status", {})
            return s["header"]["member_id"], s.get("leader"), int(s.get("dbSize", 0))
        except Exception:
            return None

    def leader(self):
        """The index of the member that leads, asked of each live member."""
        seen = {}
        for i in range(len(self.procs)):
            if self.procs[i] is None:
                continue
            s = self.status(i)
            if s:
                seen[s[0]] = i
                if s[1] and s[1] != "0":
                    lead = s[1]
                    if lead in seen:
                        return seen[lead]
        for i in range(len(self.procs)):
            if self.procs[i] is None:
                continue
            s = self.status(i)
            if s and s[1] in seen:
                return seen[s[1]]
        return None

    def healthy(self, i):
        try:
            return self.call(i, "/health").get("health") == "true"
        except Exception:
            return False

    def url(self, prefix):
        return "etcd://" + ",".join(f"127.0.0.1:{c}" for c, _ in self.ports) + prefix

    def stop(self):
        for i in range(len(self.procs)):
            self.kill(i)

cluster = Cluster()
try:
    deadline = time.time() + 60
    while cluster.leader() is None:
        if time.time() > deadline:
            sys.exit(f"the etcd cluster elected no leader in 60 s; logs in {work}")
        time.sleep(0.1)
    store = cluster.url("/team")

    # ---- hosts: each its own home and clone of one repository (remote spelled two ways)
    class Host:
        pass
    hosts = []
    for h in range(H):
        o = Host()
        o.name = f"host{h:03d}"
        base = os.path.join(work, "hosts", o.name)
        o.repo = os.path.join(base, "app")
        os.makedirs(o.repo, exist_ok=True)
        subprocess.run(["git", "init", "-q"], cwd=o.repo, check=True)
        remote = "git@github.com:acme/app.git" if h % 2 == 0 else "https://github.com/acme/app"
        subprocess.run(["git", "remote", "add", "origin", remote], cwd=o.repo, check=True)
        o.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": base,
                 "CONDUCTOR_HOME": os.path.join(base, ".conductor"), "CONDUCTOR_STORE": store,
                 "CONDUCTOR_HOST": o.name, "NO_COLOR": "1",
                 # keep every event of the run, so the whole journal can be replayed at the end
                 "CONDUCTOR_STORE_KEEP_EVENTS": "100000000"}
        hosts.append(o)

    # ---- the shared tree: M directories src/mK/ of 10 files (f0..f4.rs, f0_test..f4_test.rs)
    M = max(10, N)
    HOT = max(2, M // 100)
    files = sorted(f"src/m{k}/f{i}{t}.rs" for k in range(M) for i in range(5) for t in ("", "_test"))
    file_ix = {f: n for n, f in enumerate(files)}

    def draw(rng):
        """1-3 claim arguments: files, directories and globs, a quarter from the hot directories."""
        out = []
        for _ in range(rng.choices([1, 2, 3], [5, 3, 2])[0]):
            k = rng.randrange(HOT) if rng.random() < 0.25 else rng.randrange(M)
            x = rng.random()
            if x < 0.70:
                p = f"src/m{k}/f{rng.randrange(5)}{rng.choice(['', '_test'])}.rs"
            elif x < 0.80:
                p = f"src/m{k}/"
            elif x < 0.89:
                p = f"src/m{k}/*_test.rs"
            elif x < 0.98:
                p = f"src/m{k}/f?.rs"
            else:  # across directories: src/m3*/f1.rs matches m3, m30-m39, m300-m399, ...
                p = f"src/m{rng.randrange(1, 10)}*/f{rng.randrange(5)}.rs"
            if p not in out:
                out.append(p)
        return out

    # ---- the agents
    T0 = time.perf_counter() + 0.5
    now = lambda: time.perf_counter() - T0
    records = []      # one dict per operation
    acked = {"start": [], "claim": [], "done": []}

    class Agent:
        pass
    agents = []
    order = list(range(N))
    random.Random(a.seed).shuffle(order)  # neighbours in the round-robin are on different hosts
    for n in range(N):
        g = Agent()
        g.id, g.host, g.rng = n, hosts[n % H], random.Random(a.seed * 1_000_003 + n)
        g.inst, g.held, g.round, g.lock = None, [], 0, threading.Lock()
        agents.append(g)

    def op(g, kind, argv, due=None, sink=None):
        t0 = time.perf_counter()
        p = subprocess.run([bin, "--json", *argv], cwd=g.host.repo, env=g.host.env,
                           stdin=subprocess.DEVNULL, capture_output=True)
        t1 = time.perf_counter()
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = {}
        reason = None
        if p.returncode == 3 and out.get("status") == "conflict":
            reason = "conflict"
        elif p.returncode != 0:
            reason = out.get("reason") or f"exit {p.returncode}, no JSON: {p.stderr.decode(errors='replace').strip()[:120]}"
        rec = {"op": kind, "start": t0 - T0, "end": t1 - T0, "ms": (t1 - t0) * 1000,
               "rc": p.returncode, "reason": reason, "agent": g.id, "host": g.host.name}
        if due is not None:
            rec["lag_ms"] = (t0 - T0 - due) * 1000
        (records if sink is None else sink).append(rec)
        return p.returncode, out

    late = []

    def turn(g, due):
        with g.lock:
            if now() > D + 0.5:
                late.append(due)  # the run fell so far behind that this turn starts after the end
                return
            if g.inst:
                op(g, "heartbeat", ["heartbeat", "--instance", g.inst])
                if g.held:
                    rc, out = op(g, "release", ["release", "--instance", g.inst, *g.held])
                    if rc == 0:
                        g.held = []
                rc, out = op(g, "done", ["done", "--instance", g.inst])
                if rc == 0:
                    acked["done"].append(g.inst)
                elif out.get("reason") != "unknown_instance":
                    return  # still live (or may be): an agent finishes it on its next turn
                g.inst, g.held = None, []
            g.round += 1
            rc, out = op(g, "start", ["start", f"agent {g.id} round {g.round}", "--priority", "P2"])
            if rc != 0:
                return
            g.inst = out["instance_id"]
            acked["start"].append(g.inst)
            items = draw(g.rng)
            rc, out = op(g, "claim", ["claim", "--instance", g.inst, *items], due)
            if rc in (0, 3):
                got = out.get("claimed", [])
                acked["claim"].append((g.inst, got))
                g.held = [i for i in items if any(k.endswith(":" + i) for k in got)]

    # ---- faults and a monitor of the cluster
    windows, samples = [], []
    stop = threading.Event()

    def sleep_until(t):
        while not stop.is_set() and now() < t:
            time.sleep(min(0.05, max(0, t - now())))
        return not stop.is_set()

    def faults():
        down = min(20.0, max(3.0, 0.07 * D))
        for kind, at in (("follower", 0.25 * D), ("leader", 0.60 * D)):
            if not sleep_until(at):
                return
            lead = cluster.leader()
            victim = lead if kind == "leader" else ((lead if lead is not None else 0) + 1) % 3
            w = {"fault": f"{kind} m{victim} killed (SIGKILL), restarted after {down:.0f} s", "start": now()}
            cluster.kill(victim)
            if kind == "leader":
                while cluster.leader() is None and not stop.is_set():
                    time.sleep(0.02)
                w["new_leader_after_s"] = now() - w["start"]
            time.sleep(down)
            cluster.start(victim)
            back = now() + 120
            while not (cluster.healthy(victim) and cluster.leader() is not None):
                if now() > back:
                    w["fault"] += "; NOT healthy again within 120 s"
                    break
                time.sleep(0.05)
            w["end"] = now()
            windows.append(w)

    def monitor():
        while not stop.wait(2.0):
            try:
                sample()
            except Exception:  # a member killed under our feet: the next sample will do
                pass

    def sample():
        """The leader, the etcd database's size, status.json's size, live sessions."""
        import base64
        k64 = base64.b64encode(b"/team/doc/status.json").decode()
        paged64 = base64.b64encode(b"/team/split/status.json/").decode()
        paged_end64 = base64.b64encode(b"/team/split/status.json0").decode()
        s = {"t": now(), "leader": cluster.leader()}
        for i in range(3):
            if cluster.procs[i] is None:
                continue
            st = cluster.status(i)
            if st:
                s["db_bytes"] = st[2]
            try:
                # The paged layout (issue 36 §2): the head and every page; else the one key.
                r = cluster.call(i, "/v3/kv/range", {"key": paged64, "range_end": paged_end64}, timeout=2)
                if r.get("kvs"):
                    s["status_json_bytes"] = sum(len(base64.b64decode(kv.get("value", ""))) for kv in r["kvs"])
                    s["status_json_largest"] = max(len(base64.b64decode(kv.get("value", ""))) for kv in r["kvs"])
                    break
                r = cluster.call(i, "/v3/kv/range", {"key": k64}, timeout=2)
                s["status_json_bytes"] = len(base64.b64decode(r["kvs"][0]["value"])) if r.get("kvs") else 0
                s["status_json_largest"] = s["status_json_bytes"]
                break
            except Exception:
                pass
        s["live_sessions"] = sum(1 for g in agents if g.inst)
        samples.append(s)

    threads = [threading.Thread(target=monitor, daemon=True)]
    if not a.no_faults:
        threads.append(threading.Thread(target=faults, daemon=True))

    def metrics(i):
        """etcd's counters of raft proposals applied (every write transaction, failed compares
        included) on member i."""
        try:
            url = f"http://127.0.0.1:{cluster.ports[i][0]}/metrics"
            with urllib.request.urlopen(url, timeout=2) as r:
                text = r.read().decode()
            m = re.search(r"^etcd_server_proposals_applied_total (\S+)$", text, re.M)
            return float(m.group(1)) if m else None
        except Exception:
            return None

    def revision():
        for i in range(3):
            if cluster.procs[i] is not None:
                try:
                    return int(cluster.call(i, "/v3/kv/range", {"key": "AA=="}, timeout=2)["header"]["revision"])
                except Exception:
                    pass
        return None

    def quiet(label, n=a.probe):
        """n claims (each released) by one session with nothing else running: the cost of a claim
        at this size of the shared state, without contention."""
        g = Agent()
        g.id, g.host, g.lock, g.inst = -1, hosts[0], threading.Lock(), None
        mine = []
        rc, out = op(g, "start", ["start", f"probe {label}", "--priority", "P2"], sink=mine)
        if rc != 0:
            return None
        inst = out["instance_id"]
        for i in range(n):
            op(g, "claim", ["claim", "--instance", inst, f"probe/{label}{i}.rs"], sink=mine)
            op(g, "release", ["release", "--instance", inst, f"probe/{label}{i}.rs"], sink=mine)
        op(g, "done", ["done", "--instance", inst], sink=mine)
        out = {k: pct([r["ms"] for r in mine if r["op"] == k and r["rc"] == 0], .5) for k in ("claim", "release")}
        # etcd alone: read status.json and write the same bytes to a scratch key, over the
        # gateway conductor speaks, from the member that leads (no process start, no JSON).
        import base64
        lead = cluster.leader()
        if lead is not None:
            # What every write reads and rewrites: the paged layout's head, else the one key.
            head = base64.b64encode(b"/team/split/status.json/head").decode()
            key = head if cluster.call(lead, "/v3/kv/range", {"key": head}, timeout=5).get("kvs") else \
                base64.b64encode(b"/team/doc/status.json").decode()
            scratch = base64.b64encode(b"/sim-scratch").decode()
            reads, writes, size = [], [], 0
            for _ in range(n):
                t = time.perf_counter()
                r = cluster.call(lead, "/v3/kv/range", {"key": key}, timeout=5)
                reads.append((time.perf_counter() - t) * 1000)
                v = r["kvs"][0]["value"] if r.get("kvs") else ""
                size = len(v) * 3 // 4
                t = time.perf_counter()
                cluster.call(lead, "/v3/kv/put", {"key": scratch, "value": v}, timeout=5)
                writes.append((time.perf_counter() - t) * 1000)
            out.update({"etcd_read": pct(reads, .5), "etcd_write": pct(writes, .5), "status_json_bytes": size})
        return out

    def pct(v, p):
        if not v:
            return None
        v = sorted(v)
        return v[min(len(v) - 1, int(p * len(v)))]

    quiet_before = quiet("empty")
    counters_before = [metrics(i) for i in range(3)]
    rev_before = revision()
    T0 = time.perf_counter() + 0.2
    cpu0 = children_cpu()
    etcd0 = {p.pid: cpu_seconds(p.pid) for p in cluster.procs if p}
    reaped0 = len(cluster.reaped)
    for t in threads:
        t.start()
    # ---- the load: R turns a second, open loop (a turn's lag is how late its claim started)
    print(f"sim-team: {N} agents on {H} hosts, {R:g} claims/s for {D:g} s, tree of {len(files)} files "
          f"in {M} directories ({HOT} hot), {'faults at 25% and 60%' if not a.no_faults else 'no faults'}; "
          f"work in {work}", file=sys.stderr, flush=True)
    pool = ThreadPoolExecutor(max_workers=a.workers)
    futures, k = [], 0
    while True:
        due = k / R
        if due >= D:
            break
        if not sleep_until(due):
            break
        futures.append(pool.submit(turn, agents[order[k % N]], due))
        k += 1
        if k % max(1, int(R * 30)) == 0:
            print(f"sim-team: t={now():.0f}s turns {k}, claims done {sum(1 for r in records if r['op'] == 'claim')}",
                  file=sys.stderr, flush=True)
    scheduled = k
    pool.shutdown(wait=True)
    run_end = now()
    for t in threads[1:]:
        t.join()  # the faults are over (long before the end, unless D is tiny)
    # CPU of the load: the conductor processes (every child reaped, less the members killed)
    # and the etcd members (killed ones up to their death).
    killed_cpu = sum(c for _, c in cluster.reaped[reaped0:])
    conductor_cpu = children_cpu() - cpu0 - killed_cpu
    etcd_cpu = sum(c - etcd0.get(pid, 0.0) for pid, c in cluster.reaped[reaped0:])
    etcd_cpu += sum(cpu_seconds(p.pid) - etcd0.get(p.pid, 0.0) for p in cluster.procs if p)
    for f in futures:
        if f.exception():
            raise f.exception()
    stop.set()
    threads[0].join()
    rev_after = revision()
    counters_after = [metrics(i) for i in range(3)]
    quiet_after = quiet("full")  # every agent's last session still live
    live_after = sum(1 for g in agents if g.inst)
    killed = {int(w["fault"].split(" m")[1].split()[0]) for w in windows}
    kept = [i for i in range(3) if i not in killed and counters_before[i] is not None and counters_after[i] is not None]
    proposals = (counters_after[kept[0]] - counters_before[kept[0]]) if kept else None
    commits = (rev_after - rev_before) if rev_after is not None and rev_before is not None else None

    # ---- the journal, from one host
    events, after = [], 0
    while True:
        r = subprocess.run([bin, "--json", "events", "--after", str(after), "--limit", "5000"],
                           cwd=hosts[0].repo, env=hosts[0].env, capture_output=True, check=True)
        page = json.loads(r.stdout)
        events.extend(page["items"])
        after = page["next_after_seq"]
        if not page["has_more"]:
            break
    seqs = [e["seq"] for e in events]
    gaps = sum(1 for x, y in zip(seqs, seqs[1:]) if y != x + 1) + (1 if seqs and seqs[0] != 1 else 0)
    gaps += sum(1 for e in events if e["event_type"] == "journal.gap")

    # ---- double grants: replay the journal, each claim as the tree's files it covers
    starts = {}
    def glob_re(g):
        out = []
        segs = g.split("/")
        for n, s in enumerate(segs):
            if s == "**":
                out.append("(?:[^/]+/)*")
                continue
            out.append("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in s))
            if n < len(segs) - 1:
                out.append("/")
        return re.compile("".join(out) + r"\Z")
    cover_cache = {}
    def cover(key):
        if key in cover_cache:
            return cover_cache[key]
        rel = key.split(":", 1)[1] if key.startswith("/@") and ":" in key else key
        if rel.endswith("/"):
            lo = bisect.bisect_left(files, rel)
            hi = bisect.bisect_left(files, rel[:-1] + "0")  # '/' + 1
            c = set(range(lo, hi))
        elif "*" in rel or "?" in rel:
            lit = re.split(r"[*?]", rel, 1)[0]
            lit = lit[: lit.rfind("/") + 1]
            lo = bisect.bisect_left(files, lit)
            rx = glob_re(rel)
            c = set()
            for n in range(lo, len(files)):
                if not files[n].startswith(lit):
                    break
                if rx.match(files[n]):
                    c.add(n)
        else:
            c = {file_ix[rel]} if rel in file_ix else {("outside", rel)}
        cover_cache[key] = c
        return c

    def replay(events):
        """Replay the journal in order: (double grants, releases of what was not held, keys granted
        per session, sessions started, sessions finished)."""
        holders = collections.defaultdict(set)      # tree file -> sessions covering it
        held = collections.defaultdict(dict)        # session -> claim key -> its files
        granted = collections.defaultdict(set)      # session -> every key ever granted to it
        started, finished = set(), set()
        doubles, odd = [], 0

        def drop(inst, key):
            c = held[inst].pop(key, None)
            if c is None:
                return False
            for f in c:
                holders[f].discard(inst)
            return True

        for e in events:
            t, actor, pl = e["event_type"], e.get("actor"), e.get("payload") or {}
            if t == "instance.started":
                started.add(actor)
            elif t == "claim.granted":
                for key in pl.get("files", []):
                    granted[actor].add(key)
                    c = cover(key)
                    others = set()
                    for f in c:
                        others |= holders[f] - {actor}
                    for o in sorted(others):
                        doubles.append({"seq": e["seq"], "granted": key, "to": actor, "held_by": o,
                                        "held_claims": [k for k, cc in held[o].items() if cc & c]})
                    if key in held[actor]:
                        continue
                    held[actor][key] = c
                    for f in c:
                        holders[f].add(actor)
            elif t == "claim.released":
                for key in pl.get("files", []):
                    if not drop(actor, key):
                        odd += 1
            elif t == "claim.forced":
                victim = e.get("target")
                if victim:
                    for key in [pl.get("file")] + pl.get("files", []):
                        if key:
                            drop(victim, key)
            elif t in ("instance.done", "instance.orphaned"):
                inst = e.get("target") or actor
                for key in list(held[inst]):
                    drop(inst, key)
                finished.add(inst)
        return doubles, odd, granted, started, finished, held

    # The replay finds what it is meant to: a file in a held directory, a file a held glob
    # matches, the same file, a glob over a held file; and nothing once released or done.
    K = "/@github.com/acme/app:"
    def ev(seq, t, actor, files=None):
        return {"seq": seq, "event_type": t, "actor": actor, "payload": {"files": files or []}}
    probe = [ev(1, "claim.granted", "a", [K + "src/m1/"]), ev(2, "claim.granted", "b", [K + "src/m1/f0.rs"]),
             ev(3, "claim.granted", "a", [K + "src/m2/*_test.rs"]), ev(4, "claim.granted", "b", [K + "src/m2/f3_test.rs"]),
             ev(5, "claim.granted", "c", [K + "src/m3/f1.rs"]), ev(6, "claim.granted", "d", [K + "src/m3/f1.rs"]),
             ev(7, "claim.granted", "e", [K + "src/m1*/f1.rs"]),
             ev(8, "claim.released", "a", [K + "src/m1/"]), ev(9, "instance.done", "b"), ev(10, "instance.done", "c"),
             ev(11, "instance.done", "d"), ev(12, "instance.done", "e"),
             ev(13, "claim.granted", "f", [K + "src/m1/f0.rs", K + "src/m3/f1.rs", K + "src/m1*/f1.rs"])]
    found = [(d["seq"], d["to"], d["held_by"]) for d in replay(probe)[0]]
    assert found == [(2, "b", "a"), (4, "b", "a"), (6, "d", "c"), (7, "e", "a")], f"the replay is wrong: {found}"
    cover_cache.clear()

    doubles, odd, granted, started, finished, held = replay(events)

    # The state agrees with the journal: each live session holds exactly what the replay says
    # (a write that changed claims without its events, or lost a claim, shows here).
    r = subprocess.run([bin, "--json", "status"], cwd=hosts[0].repo, env=hosts[0].env, capture_output=True, check=True)
    live = {i["id"]: set(i.get("files_claimed", [])) for i in json.loads(r.stdout)["instances"]}
    replayed = {inst: set(keys) for inst, keys in held.items() if inst not in finished or keys}
    mismatch = []
    for inst in sorted(set(live) | {i for i, k in replayed.items() if k}):
        if live.get(inst, set()) != replayed.get(inst, set()):
            mismatch.append({"instance": inst, "status": sorted(live.get(inst, set())), "journal": sorted(replayed.get(inst, set()))})

    lost = []
    for inst in acked["start"]:
        if inst not in started:
            lost.append({"op": "start", "instance": inst})
    for inst, keys in acked["claim"]:
        for key in keys:
            if key not in granted[inst]:
                lost.append({"op": "claim", "instance": inst, "file": key})
    for inst in acked["done"]:
        if inst not in finished:
            lost.append({"op": "done", "instance": inst})

    # ---- the figures
    def in_window(r):
        return any(r["start"] < w["end"] and r["end"] > w["start"] for w in windows)
    claims = [r for r in records if r["op"] == "claim"]
    ok_claims = [r for r in claims if r["rc"] in (0, 3)]
    def lat(rs):
        v = [r["ms"] for r in rs]
        return {"count": len(v), "p50": pct(v, .5), "p95": pct(v, .95), "p99": pct(v, .99), "max": max(v) if v else None}
    # Latency of every claim, whatever it returned (a claim that timed out is a slow claim).
    outside = [r for r in claims if not in_window(r)]
    inside = [r for r in claims if in_window(r)]
    errors = collections.Counter((r["op"], r["reason"]) for r in records if r["reason"] and r["reason"] != "conflict")
    ops = {k: lat([r for r in records if r["op"] == k and r["rc"] == 0]) for k in ("start", "claim", "heartbeat", "release", "done")}
    load = os.getloadavg()
    summary = {
        "agents": N, "hosts": H, "target_claims_per_s": R, "duration_s": D, "workers": a.workers,
        "tree_files": len(files), "tree_dirs": M, "hot_dirs": HOT,
        "turns_scheduled": scheduled, "turns_not_run": len(late),
        "claims": len(claims), "claims_granted_in_full": sum(1 for r in claims if r["rc"] == 0),
        "claims_conflicted": sum(1 for r in claims if r["rc"] == 3),
        "claims_failed": len(claims) - len(ok_claims),
        "claim_latency_ms": {"outside_faults": lat(outside), "inside_faults": lat(inside), "overall": lat(claims)},
        "quiet_ms": {"before": quiet_before, "after": quiet_after, "live_sessions_after": live_after},
        "write_txns": {"committed": commits, "attempted": proposals},
        "op_latency_ms": ops,
        "claim_lag_ms": {"p50": pct([r["lag_ms"] for r in claims], .5), "max": max([r["lag_ms"] for r in claims], default=None)},
        "run_s": run_end,
        "claims_per_s": len(ok_claims) / run_end, "ops_per_s": len(records) / run_end,
        "errors": [{"op": o, "reason": rsn, "count": c} for (o, rsn), c in errors.most_common()],
        "fault_windows": windows,
        "journal_events": len(events), "journal_gaps": gaps, "journal_odd_releases": odd,
        "double_grants": len(doubles), "double_grant_examples": doubles[:10],
        "acknowledged": {k: len(v) for k, v in acked.items()},
        "lost": len(lost), "lost_examples": lost[:10],
        "live_sessions_end": len(live), "state_mismatches": len(mismatch), "state_mismatch_examples": mismatch[:10],
        "status_json_bytes_max": max([s.get("status_json_bytes", 0) for s in samples], default=0),
        "status_json_largest_max": max([s.get("status_json_largest", 0) for s in samples], default=0),
        "etcd_db_bytes_max": max([s.get("db_bytes", 0) for s in samples], default=0),
        "live_sessions_max": max([s["live_sessions"] for s in samples], default=0),
        "leaders_seen": sorted({s["leader"] for s in samples if s.get("leader") is not None}),
        "load_average": load, "cpus": os.cpu_count(),
        "cpu_s": {"conductor": conductor_cpu, "etcd": etcd_cpu, "available": (os.cpu_count() or 1) * run_end},
        "command": "shell/sim-team.sh " + " ".join(sys.argv[2:]),
    }
    summary["goals"] = {
        "double_grants_0": summary["double_grants"] == 0,
        "nothing_lost": summary["lost"] == 0 and gaps == 0 and not mismatch,
        "p99_outside_faults_le_100ms": (summary["claim_latency_ms"]["outside_faults"]["p99"] or 1e9) <= 100,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    if a.keep:
        with open(os.path.join(work, "journal.json"), "w") as f:
            json.dump(events, f)
        with open(os.path.join(work, "ops.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)

    f = lambda x: "–" if x is None else f"{x:.0f}"
    def row(name, l):
        return f"| {name} | {l['count']} | {f(l['p50'])} | {f(l['p95'])} | {f(l['p99'])} | {f(l['max'])} |"
    cl = summary["claim_latency_ms"]
    print(f"\n{N} agents on {H} hosts, target {R:g} claims/s for {D:g} s; {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end\n")
    print("| claim latency, ms | claims | p50 | p95 | p99 | max |\n| --- | --: | --: | --: | --: | --: |")
    print(row("outside the fault windows", cl["outside_faults"]))
    print(row("inside the fault windows", cl["inside_faults"]))
    print(row("overall", cl["overall"]))
    for k in ("start", "heartbeat", "release", "done"):
        print(row(f"(`{k}`, for comparison)", ops[k]))
    print()
    print("| | |\n| --- | --- |")
    print(f"| throughput | {summary['claims_per_s']:.1f} claims/s of {R:g} targeted ({summary['ops_per_s']:.1f} operations/s); "
          f"{summary['turns_not_run']} of {scheduled} turns never started; claim start lag p50 {f(summary['claim_lag_ms']['p50'])} ms, max {f(summary['claim_lag_ms']['max'])} ms |")
    print(f"| claims | {len(claims)}: {summary['claims_granted_in_full']} granted in full, "
          f"{summary['claims_conflicted']} conflicted (exit 3, the free paths still granted), {summary['claims_failed']} failed |")
    errs = ", ".join(f"{e['op']} `{e['reason']}` {e['count']}" for e in summary["errors"]) or "none"
    print(f"| errors by reason | {errs} |")
    print(f"| double grants (journal replay) | {summary['double_grants']} |")
    print(f"| acknowledged, not in the journal | {summary['lost']} (of {summary['acknowledged']['claim']} claims, "
          f"{summary['acknowledged']['start']} starts, {summary['acknowledged']['done']} dones); journal: "
          f"{len(events)} events, {gaps} gaps; the claims of the {len(live)} sessions live at the end agree with the journal's replay: "
          f"{'yes' if not mismatch else f'NO, {len(mismatch)} differ'} |")
    for w in windows:
        extra = f", new leader after {w['new_leader_after_s']:.2f} s" if "new_leader_after_s" in w else ""
        print(f"| fault window | {w['fault']}: {w['start']:.1f} s to {w['end']:.1f} s{extra} |")
    print(f"| status.json (all its keys; the largest) | up to {summary['status_json_bytes_max'] / 1024:.0f} KiB "
          f"({summary['status_json_largest_max'] / 1024:.0f} KiB) with up to "
          f"{summary['live_sessions_max']} live sessions; etcd db up to {summary['etcd_db_bytes_max'] / 2**20:.0f} MiB |")
    qb, qa = quiet_before or {}, quiet_after or {}
    print(f"| one claim alone (p50 of {a.probe}, claim/release) | {f(qb.get('claim'))}/{f(qb.get('release'))} ms before the load (empty store), "
          f"{f(qa.get('claim'))}/{f(qa.get('release'))} ms after it ({live_after} sessions live) |")
    if qa.get("etcd_read") is not None:
        print(f"| etcd alone, after the load | reading status.json's head or key ({qa['status_json_bytes'] / 1024:.0f} KiB) {qa['etcd_read']:.1f} ms, "
              f"writing as many bytes {qa['etcd_write']:.1f} ms (p50, over the JSON gateway, no process start) |")
    print(f"| CPU during the load | conductor processes {conductor_cpu:.0f} s ({conductor_cpu * 1000 / max(1, len(records)):.0f} ms an operation), "
          f"etcd members {etcd_cpu:.0f} s, of {(os.cpu_count() or 1) * run_end:.0f} CPU-seconds the machine has (shared with other work) |")
    if commits is not None and proposals:
        print(f"| write transactions (etcd) | {commits} committed of {proposals:.0f} attempted "
              f"({proposals / max(1, commits):.1f} attempts per commit: the others lost the compare and ran again) |")
    print(f"\ngoals: double grants 0: {'met' if summary['goals']['double_grants_0'] else 'MISSED'}; "
          f"nothing acknowledged lost: {'met' if summary['goals']['nothing_lost'] else 'MISSED'}; "
          f"p99 <= 100 ms outside the fault windows: {'met' if summary['goals']['p99_outside_faults_le_100ms'] else 'missed'}")
    sys.exit(0 if summary["goals"]["double_grants_0"] and summary["goals"]["nothing_lost"] else 1)
finally:
    cluster.stop()
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
PY
