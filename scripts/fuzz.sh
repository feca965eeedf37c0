#!/usr/bin/env bash
# labrouter fuzzing on stable Rust: runs every target of tests/fuzz.rs for SECONDS each,
# in release mode, one after the other, on a fresh seed, then prints one line per target
# with how many inputs it ran and how fast.
#
#   scripts/fuzz.sh 120              # two minutes per target, six targets: ~12 minutes
#   scripts/fuzz.sh 30 registry      # only the targets whose test name contains 'registry'
#
# Targets: registry, request, sse_tail, parsers, replay, ollama. A panic stops the run and
# names its seed and case; replay just that input with
#   LABROUTER_FUZZ_SEED=S LABROUTER_FUZZ_CASE=I cargo test --test fuzz TARGET -- --nocapture
# Environment: LABROUTER_FUZZ_SEED fixes the seed (default: a new one each run);
# FUZZ_LOG [target/fuzz.log] keeps the full test output.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 SECONDS [FILTER]   (SECONDS: whole seconds per target, 1 to 9999999)" >&2
  exit 2
}
if [ "$#" -lt 1 ] || [ "$#" -gt 2 ] || ! [[ "$1" =~ ^[1-9][0-9]{0,6}$ ]]; then
  usage
fi
seconds=$1
filter=${2:-fuzz_}
log=${FUZZ_LOG:-target/fuzz.log}
mkdir -p "$(dirname "$log")"

echo "== building the fuzz targets (release)"
cargo test --release --test fuzz --no-run

echo "== fuzzing each target for ${seconds}s (full output: $log)"
status=0
LABROUTER_FUZZ_SECONDS=$seconds cargo test --release --test fuzz "$filter" -- \
  --nocapture --test-threads=1 >"$log" 2>&1 || status=$?

# The harness prints, per target:
#   fuzz NAME: COUNT inputs, no panic (RATE inputs/s, SECS s, ACCEPTED accepted, seed SEED)
echo "== summary"
printf '%-10s %12s %12s %10s  %s\n' target inputs inputs/s accepted seed
# (with --nocapture it may share its line with the test runner's 'test NAME ... ').
awk 'match($0, /fuzz [a-z_]+: [0-9]+ inputs, no panic \([^)]*\)/) {
  $0 = substr($0, RSTART, RLENGTH)
  name = $2; sub(":", "", name)
  rate = $7; sub(/^\(/, "", rate)
  seed = $NF; sub(/\)$/, "", seed)
  printf "%-10s %12s %12s %10s  %s\n", name, $3, rate, $11, seed
}' "$log"
if [ "$status" -ne 0 ]; then
  echo "== FAILED (exit $status):"
  grep -E "PANIC|panicked at|^error" "$log" || tail -n 40 "$log"
  exit "$status"
fi
grep -E "^test result:" "$log"
