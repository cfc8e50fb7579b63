#!/usr/bin/env bash
# What `tools/list` costs an agent (not a test; issue 31): for the default tool set and for
# `--tools all`, the bytes of the listed tools (compact JSON, as sent), the characters of the
# tools' descriptions and of the descriptions inside their input schemas. With BASE_BIN (e.g. a
# release build of an older commit), the same figures for it and, per tool, the schemas that
# differ between the two (BASE first).
# Usage: shell/mcp-tools-size.sh [BIN] [BASE_BIN]
#   BIN: the binary (default: target/debug/conductor, or $CARGO_TARGET_DIR's). Needs python3 only
#   (it speaks JSON-RPC over stdio itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-$PWD/target}/debug/conductor}")
base=${2:+$(realpath "$2")}
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
python3 - "$bin" "$base" "$home" <<'PY'
import json, os, subprocess, sys
bin_, base, home = sys.argv[1], sys.argv[2], sys.argv[3]

def tools(binary, sel):
    env = dict(os.environ, CONDUCTOR_HOME=home)
    for k in ("CONDUCTOR_INSTANCE_ID", "CLAUDE_CODE_SESSION_ID"):
        env.pop(k, None)
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
         "capabilities": {}, "clientInfo": {"name": "size", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    p = subprocess.Popen([binary, "mcp", "--tools", sel], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env, cwd=home)
    for m in msgs:
        p.stdin.write((json.dumps(m) + "\n").encode())
    p.stdin.flush()
    while True:
        line = p.stdout.readline()
        if not line:
            sys.exit(f"{binary}: no tools/list answer")
        m = json.loads(line)
        if m.get("id") == 2:
            break
    p.stdin.close()
    p.wait()
    return m["result"]["tools"]

def inner_descriptions(s):
    if isinstance(s, dict):
        return sum(len(v) if k == "description" and isinstance(v, str) else inner_descriptions(v)
                   for k, v in s.items())
    if isinstance(s, list):
        return sum(inner_descriptions(v) for v in s)
    return 0

def figures(ts):
    size = len(json.dumps(ts, separators=(",", ":"), ensure_ascii=False).encode())
    desc = sum(len(t.get("description", "")) for t in ts)
    inner = sum(inner_descriptions(t["inputSchema"]) for t in ts)
    return size, desc, inner

rows = [("this", bin_)] + ([("base", base)] if base else [])
print(f"{'binary':6} {'tools':8} {'n':>3} {'bytes':>6} {'tool descriptions':>18} {'schema descriptions':>20}")
got = {}
for label, b in rows:
    for sel in ("default", "all"):
        ts = tools(b, sel)
        got[(label, sel)] = ts
        size, desc, inner = figures(ts)
        print(f"{label:6} {sel:8} {len(ts):3} {size:6} {desc:18} {inner:20}")
if base:
    mine = {t["name"]: t for t in got[("this", "all")]}
    for t in got[("base", "all")]:
        m = mine.get(t["name"])
        if m is None:
            print(f"\n{t['name']}: missing in this binary")
            continue
        for k in ("description", "inputSchema"):
            if t.get(k) != m.get(k):
                print(f"\n{t['name']} {k}:\n  base {json.dumps(t.get(k))}\n  this {json.dumps(m.get(k))}")
PY
