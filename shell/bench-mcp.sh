#!/usr/bin/env bash
# Benchmark of `conductor mcp` (not a test; issue 23), whole processes, one run, medians:
#   1. server start-up: spawn `conductor mcp`, send `initialize`, read the answer (median of 21);
#   2. `claim` latency, p50 and p95, of N claims (each of a new file) by one session: through MCP
#      (one server, N tools/call requests from the official Python client) against the CLI
#      (N `conductor claim` processes), each in a fresh home, interleaved: CLI claim i, then MCP
#      claim i, so both see the same machine;
#   3. `conductor --version` start-up (median of 51, interleaved) of BIN and, when given, of
#      BASE_BIN.
# Usage: shell/bench-mcp.sh [N] [BIN] [BASE_BIN]
#   N: claims (default 1000). BIN: the binary (or the variable BIN; default: build the release
#   binary; honours CARGO_TARGET_DIR). BASE_BIN: a binary without `mcp` to compare size and
#   --version with.
# Needs python3 with the `mcp` package (`python3 -m pip install mcp==2.3.0`).
set -euo pipefail
bin=${2:-${BIN:-}}
bin=${bin:+$(realpath "$bin")}   # before the cd: relative paths are the caller's
base=${3:+$(realpath "$3")}
cd "$(dirname "$0")/.."
n=${1:-1000}
tdir=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "$bin" ]; then
  cargo build --release --locked -q
  bin=$tdir/release/conductor
fi
bin=$(realpath "$bin")
echo "binary: $bin ($("$bin" --version))"
mkdir -p "$tdir"
work=$(mktemp -d "$tdir/bench-mcp.XXXXXX")
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
trap 'rm -rf "$work"' EXIT
python3 - "$n" "$bin" "$base" "$work" "$PWD/tests/mcp" <<'PY'
import asyncio, json, os, statistics, subprocess, sys, time
n, bin_, base, work, _ = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

def fresh(name):
    home, proj = os.path.join(work, name, "home"), os.path.join(work, name, "proj")
    os.makedirs(proj)
    env = dict(os.environ, CONDUCTOR_HOME=home)
    env.pop("CONDUCTOR_INSTANCE_ID", None)
    env.pop("CLAUDE_CODE_SESSION_ID", None)
    return env, proj

# 1. start-up to the initialize answer
env, proj = fresh("startup")
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}) + "\n"
starts = []
for _ in range(21):
    t0 = time.perf_counter()
    p = subprocess.Popen([bin_, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=proj, env=env)
    p.stdin.write(init.encode()); p.stdin.flush()
    line = p.stdout.readline()
    starts.append((time.perf_counter() - t0) * 1000)
    assert b"serverInfo" in line, line
    p.stdin.close(); p.wait()
print(f"mcp start-up to the initialize answer: median {statistics.median(starts):.1f} ms (of {len(starts)})")

# 2. claims through the CLI (one process each) and through MCP (one server), interleaved
cenv, cproj = fresh("cli")
out = subprocess.run([bin_, "--json", "start", "bench", "--priority", "P1"], cwd=cproj, env=cenv, capture_output=True, check=True)
iid = json.loads(out.stdout)["instance_id"]
cli = []
menv, mproj = fresh("mcp")
async def both():
    params = StdioServerParameters(command=bin_, args=["mcp"], env=menv, cwd=mproj)
    times = []
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for i in range(n):
                t0 = time.perf_counter()
                subprocess.run([bin_, "claim", "--instance", iid, f"f{i}.rs"], cwd=cproj, env=cenv, stdout=subprocess.DEVNULL, check=True)
                cli.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                res = await s.call_tool("claim", {"files": [f"f{i}.rs"]})
                times.append((time.perf_counter() - t0) * 1000)
                assert not res.is_error, res
    return times
mcp_t = asyncio.run(both())
print(f"claim x{n}: CLI p50 {pct(cli, 50):.2f} ms p95 {pct(cli, 95):.2f} ms | MCP p50 {pct(mcp_t, 50):.2f} ms p95 {pct(mcp_t, 95):.2f} ms (ratio p50 {pct(mcp_t, 50) / pct(cli, 50):.2f})")

# 3. --version and size, BIN and BASE_BIN interleaved
ts = {b: [] for b in [bin_] + ([base] if base else [])}
for _ in range(51):
    for b in ts:
        t0 = time.perf_counter()
        subprocess.run([b, "--version"], stdout=subprocess.DEVNULL, check=True)
        ts[b].append((time.perf_counter() - t0) * 1000)
line = f"--version (51 interleaved runs): {statistics.median(ts[bin_]):.2f} ms, size {os.path.getsize(bin_)} bytes"
if base:
    line += f" | base: {statistics.median(ts[base]):.2f} ms, size {os.path.getsize(base)} bytes"
print(line)
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
PY
