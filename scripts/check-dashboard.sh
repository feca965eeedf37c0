#!/usr/bin/env bash
# Renders the dashboard of a real router in headless Chromium and checks that every machine
# and its breaker state is on the page, and the tasks panel: counts by status, the oldest
# waiting task, the last failures; the history (30-day strips, today's timeline, the last
# 24 h), no console errors, and the rest of the page when /status/history fails. Loopback only: two simulated machines, one router.
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

DASHBOARD_CONSOLE="$work/console.log" scripts/dashboard-screenshot.sh --dom "http://127.0.0.1:$router/" >"$work/dom.html"
fail=0
for want in 'data-machine="gpu-box" data-state="forced_open"' 'data-machine="ubuntu-box" data-state="closed"' \
            '>gpu-box<' '>ubuntu-box<' '>forced_open<' '>closed<' \
            'data-status="succeeded" data-count="1"' 'data-status="waiting" data-count="1"' \
            'data-status="expired" data-count="1"' 'data-status="queued" data-count="0"' \
            "class=\"oldest\" data-task=\"$waiting\"" 'is held back' \
            "data-task=\"$expired\" data-status=\"expired\"" '>deadline_exceeded<' \
            'data-history="ok"' 'class="tl-open" data-machine="gpu-box"' 'class="hr-served"'; do
  if grep -qF "$want" "$work/dom.html"; then echo "PASS dashboard shows $want"; else echo "FAIL dashboard lacks $want"; fail=1; fi
done

# The history strips (SPEC §16): 30 days per machine; gpu-box, forced open today (a trip), is
# drawn unlike ubuntu-box (no trips) and comes first (flakiest first).
strips() {
  python3 - "$1" <<'PY'
import html.parser, sys
class Strips(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.row, self.rows = None, {}
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if "hrow" in cls:
            self.row = a.get("data-machine")
            self.rows[self.row] = []
        elif tag == "button" and "cell" in cls and self.row:
            self.rows[self.row].append(cls[1] if len(cls) > 1 else "")
p = Strips()
p.feed(open(sys.argv[1]).read())
ok = True
def check(good, what):
    global ok
    print(("PASS " if good else "FAIL ") + what)
    ok = ok and good
for m in ("gpu-box", "ubuntu-box"):
    n = len(p.rows.get(m, []))
    check(n == 30, f"history strip of {m} has {n} cells (30 wanted)")
gpu, cpu = p.rows.get("gpu-box", []), p.rows.get("ubuntu-box", [])
check(gpu[-1:] not in ([], ["o0"]) and set(cpu) == {"o0"},
      f"gpu-box (tripped today) is drawn unlike ubuntu-box: today {gpu[-1:]}, ubuntu-box {sorted(set(cpu))}")
check(list(p.rows)[:1] == ["gpu-box"], f"flakiest first: {list(p.rows)}")
sys.exit(0 if ok else 1)
PY
}
strips "$work/dom.html" || fail=1
if [ -s "$work/console.log" ]; then
  echo "FAIL the dashboard logged to its console:"; cat "$work/console.log"; fail=1
else
  echo "PASS no console messages or errors"
fi
if [ "${DASHBOARD_PNG:-}" ]; then
  scripts/dashboard-screenshot.sh "http://127.0.0.1:$router/" "$DASHBOARD_PNG"
fi

# /status/history made to fail (its store file replaced by a directory): it answers 500, and
# the rest of the page still updates (a breaker opened since shows), with no uncaught error.
db="$work/state/labrouter.db"
mv "$db" "$db.aside" && mkdir "$db"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$router/status/history")
if [ "$code" = 500 ]; then echo "PASS /status/history fails (500)"; else echo "FAIL /status/history answered $code, not 500"; fail=1; fi
curl -fsS -X POST "http://127.0.0.1:$router/admin/breakers/ubuntu-box/open" \
  -H 'content-type: application/json' -d '{"by":"ci","why":"history down"}' >/dev/null
DASHBOARD_CONSOLE="$work/console2.log" scripts/dashboard-screenshot.sh --dom "http://127.0.0.1:$router/" >"$work/dom2.html"
for want in 'data-history="failed"' 'History unavailable (HTTP 500)' \
            'data-machine="ubuntu-box" data-state="forced_open"' 'data-status="succeeded" data-count="1"'; do
  if grep -qF "$want" "$work/dom2.html"; then echo "PASS with /status/history failing, dashboard shows $want"; else echo "FAIL with /status/history failing, dashboard lacks $want"; fail=1; fi
done
if grep -q 'Uncaught' "$work/console2.log"; then
  echo "FAIL uncaught error with /status/history failing:"; cat "$work/console2.log"; fail=1
else
  echo "PASS no uncaught error with /status/history failing"
fi
exit "$fail"
