# Sourced by the benchmarks (from the repository's root): sets `bin` to the conductor binary to
# measure, BIN when given (made absolute by the caller before its `cd`), else the release build,
# built first (honours CARGO_TARGET_DIR).
bin=${BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin conductor
  bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/conductor"
fi
bin=$(realpath "$bin")
