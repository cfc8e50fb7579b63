#!/usr/bin/env bash
# Fill a home with big documents of the other domains, for shell/bench-store.sh: N queue jobs
# (one real `queue submit` of an N-job manifest) and N pending inbox items (the agent's own
# file, runtime/agents/bencher/inbox.json). The inbox items are
# made by replicating the item and mention that one real `post` created (N separate posts would
# take minutes), and the result is then read back by `conductor inbox` to prove it is a document
# conductor accepts.
# Usage: CONDUCTOR_HOME=DIR shell/fill-domains.sh BIN N
set -euo pipefail
bin=$1 n=$2
: "${CONDUCTOR_HOME:?set CONDUCTOR_HOME}"
python3 - "$n" <<'PY' | "$bin" queue submit - >/dev/null
import json, sys
n = int(sys.argv[1])
print(json.dumps({"workspace": "bench", "jobs": [
    {"id": f"job-{i}", "prompt": f"no-op job {i}", "docs": [], "secrets": [], "depends_on": [],
     "outcomes": ["nothing"]} for i in range(n)]}))
PY
"$bin" agent register bencher --handle @bencher --watch bench >/dev/null
"$bin" post bench "@bencher a task" --as someone >/dev/null
python3 - "$CONDUCTOR_HOME/runtime/agents/bencher/inbox.json" "$n" <<'PY'
import copy, json, os, sys
path, n = sys.argv[1], int(sys.argv[2])
doc = json.load(open(path))
(item,) = doc["items"].values()
(mention,) = doc["mentions"].values()
for i in range(1, n):
    it = copy.deepcopy(item); it["id"] = f"inb-b{i:07d}"; it["source_id"] = f"msg-b{i:07d}"
    it["mention_id"] = f"men-b{i:07d}"
    doc["items"][it["id"]] = it
    me = copy.deepcopy(mention); me["id"] = f"men-b{i:07d}"; me["source_id"] = f"msg-b{i:07d}"
    doc["mentions"][me["id"]] = me
tmp = path + ".fill"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
os.chmod(tmp, 0o600)
os.replace(tmp, path)
PY
items=$("$bin" --json inbox --agent bencher --status pending | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d.get("items", d) if isinstance(d, dict) else d))')
jobs=$("$bin" --json queue jobs bench | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["jobs"]))')
echo "other domains: $jobs queue jobs, $items pending inbox items"
