#!/usr/bin/env bash
# Installs the agent CLIs that tests/it/e2e_agents.rs and integrations.rs run, at pinned
# versions, with `npm install -g`: into npm's global prefix, or into $NPM_CONFIG_PREFIX when set
# (./test sets it to a prefix of its own and puts its bin/ first on PATH). A CLI already on PATH
# at its pinned version is left alone, so a second run does nothing.
#   --dry-run   print what is missing and the npm command that would install it
set -euo pipefail
dry=false
[ "${1:-}" = --dry-run ] && dry=true
# package@version and the program it installs.
pins=(
  "@anthropic-ai/claude-code@2.1.197 claude"
  "@openai/codex@0.169.0 codex"
  "@google/gemini-cli@0.61.0 gemini"
  "opencode-ai@1.18.33 opencode"
  "@mariozechner/pi-coding-agent@0.73.1 pi"
)
need=()
for entry in "${pins[@]}"; do
  read -r pin prog <<<"$entry"
  version=${pin##*@}
  # Pi prints its version on stderr; the tests accept it anywhere in the output (as here).
  out=""
  if command -v "$prog" >/dev/null; then
    out=$(timeout 60 "$prog" --version </dev/null 2>&1 || true)
  fi
  grep -qF -- "$version" <<<"$out" || need+=("$pin")
done
# OpenCode installs @opencode-ai/plugin into every config directory it loads (.opencode/,
# ~/.config/opencode/) at its first start; offline that waits ~80 s for npm to give up. The suite
# runs offline, so it seeds those directories from this copy (tests/it/e2e_agents.rs).
seed="${CONDUCTOR_E2E_CACHE:-$HOME/.cache/conductor-e2e}/opencode-plugin-1.18.33"
seeded=true
[ -f "$seed/node_modules/@opencode-ai/plugin/package.json" ] || seeded=false
where="npm -g"
[ -n "${NPM_CONFIG_PREFIX:-}" ] && where="npm -g, prefix $NPM_CONFIG_PREFIX"
if $dry; then
  [ ${#need[@]} -eq 0 ] ||
    echo "would run ($where): npm install -g --no-fund --no-audit ${need[*]}"
  $seeded ||
    echo "would run: (cd $seed && npm install @opencode-ai/plugin@1.18.33)"
  exit 0
fi
if ! command -v npm >/dev/null && { [ ${#need[@]} -gt 0 ] || ! $seeded; }; then
  echo "tests/e2e/install.sh: npm is missing (install Node.js 20+ and npm: apt-get install nodejs npm)" >&2
  exit 1
fi
if ! $seeded; then
  echo "installing (npm, into $seed): @opencode-ai/plugin@1.18.33"
  mkdir -p "$seed"
  printf '{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}\n' > "$seed/package.json"
  # In the background, beside the global install below (the two take about as long).
  (cd "$seed" && npm install --no-fund --no-audit --loglevel=error >/dev/null) &
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ($where): ${need[*]}"
  npm install -g --no-fund --no-audit --loglevel=error "${need[@]}" >/dev/null
fi
wait_all() { local rc=0; for job in $(jobs -p); do wait "$job" || rc=$?; done; return $rc; }
wait_all
