#!/usr/bin/env bash
# A flame graph of the router's hot path: a release labrouter in front of the bench sim on
# 127.0.0.1, wrk -t2 -c32 posting one small chat completion, perf record with DWARF stacks,
# rendered by inferno; then the router's CPU per request from perf stat (scripts/cpu.sh).
#
#   scripts/flame.sh [BINARY] [OUT.svg] [TITLE]   (default: target/release/labrouter, flame.svg)
#   FOLDED=out.folded keeps the folded stacks too; FLAME_LEAN=1 profiles the lean anchor
#   (examples/lean_proxy) in the router's place instead.
#
# Needs perf and wrk (Debian: linux-perf, wrk) and inferno (cargo install inferno).
set -euo pipefail
cd "$(dirname "$0")/.."
REL=${CARGO_TARGET_DIR:-target}/release
B=${1:-$REL/labrouter}
OUT=${2:-flame.svg}
TITLE=${3:-labrouter: wrk -c32, one small chat completion}
for tool in perf wrk inferno-collapse-perf inferno-flamegraph; do
  command -v "$tool" >/dev/null || { echo "flame.sh: $tool is missing" >&2; exit 1; }
done
[ -x "$REL/examples/bench_sim" ] || cargo build --release --examples
TMP=$(mktemp -d)
P_FAST=18501 P_ROUTER=18510
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
sed -e "s#@ROUTER@#$P_ROUTER#; s#@STATE@#$TMP/state#; s#@FAST@#$P_FAST#g; s#@DRIP@#18502#g; s#@DRIP64@#18505#g" \
  -e "s#@SLOW@#18503#g; s#@HANG@#18504#g" benches/bench/registry.yaml.in >"$TMP/reg.yaml"
"$REL/examples/bench_sim" --listen "127.0.0.1:$P_FAST" --name fast >/dev/null 2>&1 &
PIDS+=($!)
if [ -n "${FLAME_LEAN:-}" ]; then
  "$REL/examples/lean_proxy" --listen "127.0.0.1:$P_ROUTER" --upstream "127.0.0.1:$P_FAST" >/dev/null 2>&1 &
else
  # Its code where the linker put it, named (src/huge_text.rs).
  LABROUTER_NO_HUGE_TEXT=1 RUST_LOG=warn "$B" serve --config "$TMP/reg.yaml" >/dev/null 2>&1 &
fi
RP=$!
PIDS+=("$RP")
sleep 1
URL=http://127.0.0.1:$P_ROUTER/v1/chat/completions
export BENCH_BODY='{"model":"code","messages":[{"role":"user","content":"hi"}]}'
# A profile of errors would say nothing: the route must answer 200 first.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'content-type: application/json' \
  -d "$BENCH_BODY" "$URL")
[ "$code" = 200 ] || { echo "flame.sh: $URL answered $code, not 200" >&2; exit 1; }
wrk -t2 -c32 -d1s -s benches/bench/post.lua "$URL" >/dev/null
perf record -F 499 --call-graph dwarf,8192 -p "$RP" -o "$TMP/perf.data" -- sleep 4 >/dev/null 2>&1 &
PP=$!
sleep 0.2
wrk -t2 -c32 -d4s -s benches/bench/post.lua "$URL" | grep -i 'requests/sec'
wait "$PP"
# shellcheck source=scripts/cpu.sh
. scripts/cpu.sh
cpu_per_request "$RP" wrk -t2 -c32 -d3s -s benches/bench/post.lua "$URL" | sed 's/^CPU //'
perf script -i "$TMP/perf.data" 2>/dev/null | inferno-collapse-perf >"$TMP/folded"
inferno-flamegraph --title "$TITLE" <"$TMP/folded" >"$OUT"
if [ -n "${FOLDED:-}" ]; then cp "$TMP/folded" "$FOLDED"; fi
echo "wrote $OUT"
