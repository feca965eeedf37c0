#!/usr/bin/env bash
# Renders the dashboard of a real router in headless Chromium and checks that every machine
# and its breaker state is on the page, and the tasks panel: counts by status, the oldest
# waiting task, the last failures. Loopback only: two simulated machines, one router.
# Usage: scripts/check-dashboard.sh [path/to/labrouter]   (default: target/debug/labrouter)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-target/debug/labrouter}
[ -x "$bin" ] || { echo "no binary at $bin: run cargo build first" >&2; exit 2; }
command -v chromium >/dev/null || { echo "SKIP dashboard render: chromium is not installed"; exit 0; }

work=$(mktemp -d)
pids=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() {
  for _ in $(seq 1 250); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.04; done
  echo "nothing answered at $1" >&2; return 1
}

gpu=$(free_port); cpu=$(free_port); router=$(free_port)
"$bin" sim --listen "127.0.0.1:$gpu" --name gpu-box >"$work/gpu.log" 2>&1 & pids+=($!)
"$bin" sim --listen "127.0.0.1:$cpu" --name ubuntu-box >"$work/cpu.log" 2>&1 & pids+=($!)
cat >"$work/registry.yaml" <<YAML
server: { listen: "127.0.0.1:$router", state_dir: "$work/state" }
machines:
  gpu-box: { url: "http://127.0.0.1:$gpu/v1" }
  ubuntu-box: { url: "http://127.0.0.1:$cpu/v1" }
models:
  coder-gpu: { machine: gpu-box, name: "qwen3-coder:30b" }
  coder-cpu: { machine: ubuntu-box, name: "qwen3-coder:30b" }
routes:
  - { name: code, default: true, chain: [coder-gpu, coder-cpu] }
  - { name: gpu-only, keywords: [gpu-only], chain: [coder-gpu] }
YAML
wait_for "http://127.0.0.1:$gpu/v1/models"
wait_for "http://127.0.0.1:$cpu/v1/models"
RUST_LOG=warn "$bin" serve --config "$work/registry.yaml" >"$work/router.log" 2>&1 & pids+=($!)
wait_for "http://127.0.0.1:$router/healthz"
curl -fsS -X POST "http://127.0.0.1:$router/admin/breakers/gpu-box/open" \
  -H 'content-type: application/json' -d '{"by":"ci","why":"dashboard check"}' >/dev/null

# Tasks: one served by ubuntu-box, one waiting for gpu-box, and one queued behind it that
# expires (its deadline is 1s).
task() {
  curl -fsS -X POST "http://127.0.0.1:$router/v1/tasks" -H 'content-type: application/json' -d "$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
req='"request": {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}'
task "{$req}" >/dev/null
waiting=$(task "{$req, \"route\": \"gpu-only\"}")
expired=$(task "{$req, \"route\": \"gpu-only\", \"deadline\": \"1s\"}")
for _ in $(seq 1 100); do
  st=$(curl -fsS "http://127.0.0.1:$router/status")
  [[ $st == *'"expired_24h":1'* && $st == *'"succeeded_24h":1'* ]] && break
  sleep 0.05
done

scripts/dashboard-screenshot.sh --dom "http://127.0.0.1:$router/" >"$work/dom.html"
fail=0
for want in 'data-machine="gpu-box" data-state="forced_open"' 'data-machine="ubuntu-box" data-state="closed"' \
            '>gpu-box<' '>ubuntu-box<' '>forced_open<' '>closed<' \
            'data-status="succeeded" data-count="1"' 'data-status="waiting" data-count="1"' \
            'data-status="expired" data-count="1"' 'data-status="queued" data-count="0"' \
            "class=\"oldest\" data-task=\"$waiting\"" 'is held back' \
            "data-task=\"$expired\" data-status=\"expired\"" '>deadline_exceeded<'; do
  if grep -qF "$want" "$work/dom.html"; then echo "PASS dashboard shows $want"; else echo "FAIL dashboard lacks $want"; fail=1; fi
done
if [ "${DASHBOARD_PNG:-}" ]; then
  scripts/dashboard-screenshot.sh "http://127.0.0.1:$router/" "$DASHBOARD_PNG"
fi
exit "$fail"
