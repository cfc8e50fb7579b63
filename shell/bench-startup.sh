#!/usr/bin/env bash
# Benchmark for issue 26 (not a test): start-up of whole processes against a hello-world Rust
# binary built with this workspace's [profile.release] and the same toolchain (an ordinary,
# position-independent executable: cargo's default), medians of RUNS interleaved runs each,
# printed as one table with each command's ratio to hello-world (goal: --version within 1.3x).
# The row "hello non-PIE" is the same hello-world linked like conductor's release binary
# (build.rs: -no-pie), for reference.
#
# Rows (in a temp home where session A holds 1,000 files, registered through the Claude hook):
#   hello-world          the hello-world binary
#   --version            `conductor --version`
#   status               `conductor status` (2 instances, 1,001 claims)
#   claim @1k            `conductor claim FILE --instance A`: A claims a file nobody holds (a new
#                        one each round, so each round writes and syncs), released untimed after
#   hook deny @1k        `conductor hook claude`: session B's PreToolUse Edit of a file A holds
# With BEFORE=<another conductor binary> (e.g. a release build of an older commit, or the same
# commit built differently), every conductor row is also timed with BEFORE, interleaved, in a
# copy of the same home, and the table gains BEFORE's median and this/BEFORE.
# BIN=<conductor binary> skips the build (default: build the release binary; honours
# CARGO_TARGET_DIR).
#
# Figures, and what they led to, are in docs/internals.md ("Start-up").
# Earlier figures (branch startup, release build of main 223d2d5, codegen-units = 4, 2 cores
# shared): hello-world 0.772, --version 1.145, claim 2.364 ms: 1.48x. Same build re-linked
# non-PIE: --version 1.056 -> 0.807 ms, status 1.701 -> 1.527 ms; 25,293 R_X86_64_RELATIVE
# relocations -> 0 (the dynamic loader no longer relocates/dirties .data.rel.ro).
# Usage: [BEFORE=path] [BIN=path] shell/bench-startup.sh [RUNS]   (default 200; needs python3)
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
bin=${BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet --locked --bin conductor
    bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/conductor"
fi
bin=$(realpath "$bin")
before=${BEFORE:+$(realpath "$BEFORE")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/hello/src"
{
  printf '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2024"\n\n'
  sed -n '/^\[profile.release\]/,/^$/p' Cargo.toml
} > "$tmp/hello/Cargo.toml"
echo 'fn main() { println!("hello 0.1.0"); }' > "$tmp/hello/src/main.rs"
CARGO_TARGET_DIR="$tmp/hello/target" cargo build --release --quiet --manifest-path "$tmp/hello/Cargo.toml"
hello="$tmp/hello/target/release/hello"
cp "$hello" "$tmp/hello-pie"
hello="$tmp/hello-pie"
CARGO_TARGET_DIR="$tmp/hello/target" cargo rustc --release --quiet --manifest-path "$tmp/hello/Cargo.toml" -- -C link-arg=-no-pie
hello_nopie="$tmp/hello/target/release/hello"

# The seed home: sessions A and B through the hook, A holding 1,000 files.
proj=$tmp/proj
mkdir -p "$proj/src"
export CONDUCTOR_HOME=$tmp/seed NO_COLOR=1
sa=3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01
sb=9b2e4d6f-1a3c-4e5b-8d7f-0c2a4e6b8d02
for s in $sa $sb; do
    printf '{"session_id":"%s","cwd":"%s","hook_event_name":"SessionStart","source":"startup"}' "$s" "$proj" |
        (cd "$proj" && "$bin" hook claude >/dev/null)
done
ida=$("$bin" --json status | python3 -c 'import json,sys; print([i["id"] for i in json.load(sys.stdin)["instances"] if i.get("session_id")=="'$sa'"][0])')
files=()
for i in $(seq 1 1000); do files+=("$proj/src/f$i.rs"); done
"$bin" claim --instance "$ida" "${files[@]}" >/dev/null
"$bin" claim --instance "$ida" "$proj/src/held.rs" >/dev/null
cp -a "$tmp/seed" "$tmp/this"
[ -z "$before" ] || cp -a "$tmp/seed" "$tmp/before"

echo "binary: $bin ($("$bin" --version))${before:+; BEFORE: $before}"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$bin" "$hello" "${1:-200}" "$ida" "$proj" "$sb" "$tmp" "$before" "$hello_nopie" <<'PY'
import json, os, statistics, subprocess, sys, time
conductor, hello, runs, ida, proj, sb, tmp, before, hello_nopie = sys.argv[1:10]
runs = int(runs)
hook_in = json.dumps({"session_id": sb, "cwd": proj, "hook_event_name": "PreToolUse",
                      "tool_name": "Edit", "tool_input": {"file_path": f"{proj}/src/f7.rs",
                      "old_string": "a", "new_string": "b"}}).encode()
rows = [("--version", ["--version"], None, None),
        ("status", ["status"], None, None),
        ("claim @1k", ["claim", f"{proj}/src/new-{{n}}.rs", "--instance", ida], None, None),
        ("hook deny @1k", ["hook", "claude"], hook_in, b'"deny"')]
cases = [("hello-world", [hello], None, None, None),
         ("hello non-PIE", [hello_nopie], None, None, None)]
builds = [("this", conductor)] + ([("before", before)] if before else [])
for name, args, stdin, expect in rows:
    for b, path in builds:
        cases.append((f"{b} {name}", [path] + args, stdin, expect, os.path.join(tmp, b)))
times = {c[0]: [] for c in cases}
for n in range(runs):
    for key, argv, stdin, expect, home in cases:
        env = dict(os.environ, CONDUCTOR_HOME=home) if home else os.environ
        argv = [a.replace("{n}", str(n)) for a in argv]
        t = time.perf_counter()
        r = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           env=env, cwd=proj, check=expect is None)
        times[key].append(time.perf_counter() - t)
        assert expect is None or expect in r.stdout, (key, r.stdout)
        if argv[1:2] == ["claim"]:
            # Untimed: the home goes back to 1,000 claims for the next round.
            subprocess.run([argv[0], "release", argv[2], "--instance", ida], env=env, cwd=proj,
                           stdout=subprocess.DEVNULL, check=True)
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
h = med["hello-world"]
head = f"{'command':<16} {'median ms':>10} {'x hello':>8}"
if before:
    head += f" {'BEFORE ms':>10} {'x hello':>8} {'this/BEFORE':>12}"
print(f"{runs} interleaved runs each; medians of whole processes")
print(head)
print(f"{'hello-world':<16} {h:>10.3f} {1:>8.2f}")
print(f"{'hello non-PIE':<16} {med['hello non-PIE']:>10.3f} {med['hello non-PIE'] / h:>8.2f}")
for name, *_ in rows:
    t = med[f"this {name}"]
    line = f"{name:<16} {t:>10.3f} {t / h:>8.2f}"
    if before:
        b = med[f"before {name}"]
        line += f" {b:>10.3f} {b / h:>8.2f} {t / b:>12.3f}"
    print(line)
PY
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
