# Section 3 of scripts/bench-cluster.sh (sourced; alone with BENCH_ONLY=tasks): the shared
# task queue (README "Several routers", `cluster.tasks: shared`, issue 24). One redis-server
# with `appendonly yes` and `appendfsync always`, its files in the run's temporary directory,
# and each measure on its own key prefix (its own pool):
#   3a. durable submits/s through two routers at once, their one machine held down (forced
#       open by hand, as bench.sh's section 8 does) so the tasks queue; beside it one router
#       with `tasks: local` (SQLite, synchronous=FULL) under the same load;
#   3b. from a router's SIGKILL to its running tasks running on the other router (its
#       /status shared_queue.running_here), the machine a bench_sim slow to answer;
#   3c. the Redis round trips per task: INFO commandstats around a fixed number of tasks run
#       to their end on a fast bench_sim, less the routers' idle polling over the same time.
# Uses from bench-cluster.sh: BIN, BASE, TMP, REDIS_ENV, PREFIX and bench-lib.sh's helpers.
# shellcheck shell=bash

Q_SECS=${BENCH_TASK_SECS:-5}
Q_CLIENTS=${BENCH_TASK_CLIENTS:-32}
Q_LEASE=${BENCH_TASK_LEASE:-3}
Q_FO_TASKS=${BENCH_FAILOVER_TASKS:-8}
Q_FO_ROUNDS=${BENCH_FAILOVER_ROUNDS:-3}
Q_RT_TASKS=${BENCH_RT_TASKS:-300}
P_QA=$((BASE + 5)) P_QB=$((BASE + 6)) P_QL=$((BASE + 7)) P_QFAST=$((BASE + 8))
P_QSLOW=$((BASE + 9)) P_QHELD=$((BASE + 10))
QTASK='{"request":{"model":"auto","messages":[{"role":"user","content":"refactor this function"}]}}'

# queue_registry PORT NODE PREFIX MACHINE-PORT [local] -> registry file; `cluster.tasks:
# shared` on the durable Redis unless the fifth argument is `local` (then no cluster: at all).
queue_registry() {
  local f="$TMP/queue-$1-$3.yaml"
  {
    cat <<EOF
server:
  listen: 127.0.0.1:$1
  state_dir: $TMP/queue-state-$1-$3
  shutdown_grace: 1s
EOF
    if [ "${5:-}" != local ]; then
      cat <<EOF
cluster:
  redis_url_env: $REDIS_ENV
  prefix: $3
  node: $2
  tasks: shared
  task_lease: ${Q_LEASE}s
  task_timeout: $((Q_LEASE * 250))ms
EOF
    fi
    cat <<EOF
defaults:
  timeouts: { connect: 1s, first_byte: 10m, idle: 10m, total: 10m }
tasks:
  max_queued: 10000000
  max_running: $Q_FO_TASKS
machines:
  box: { url: "http://127.0.0.1:$4/v1", max_concurrency: 256, task_slots: $Q_FO_TASKS }
models:
  box-m: { machine: box, name: sim-model }
routes:
  - { name: chat, default: true, chain: [box-m] }
EOF
  } >"$f"
  env "$REDIS_ENV=$QREDIS_URL" "$BIN/labrouter" check "$f" >/dev/null || die "generated registry $f is invalid"
  echo "$f"
}
qrouter() { # name port registry; sets LAST_PID
  start "$1" "$2" env RUST_LOG=warn "$REDIS_ENV=$QREDIS_URL" "$BIN/labrouter" serve --config "$3"
}
qstatus() { curl -s --max-time 5 "http://127.0.0.1:$1/status"; }
running_here() { qstatus "$1" | grep -o '"running_here":[0-9]*' | cut -d: -f2; }
unfinished() { qstatus "$1" | grep -o '"unfinished":[0-9]*' | cut -d: -f2; }
qhold_down() { # router port
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'content-type: application/json' \
    -d '{"by":"bench-cluster.sh","why":"shared queue benchmark: tasks queue"}' \
    "http://127.0.0.1:$1/admin/breakers/box/open")
  [ "$code" = 200 ] || die "holding the task machine down on :$1 answered $code"
}
qsubmit() { # port -> the new task's id
  curl -s --max-time 5 -H 'content-type: application/json' -d "$QTASK" \
    "http://127.0.0.1:$1/v1/tasks" | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4
}
qstop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# until SECS WHAT COMMAND...: polls COMMAND every 20 ms until it succeeds; dies after SECS.
until_ok() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq $((secs * 50))); do
    "$@" && return 0
    [ "$i" = $((secs * 50)) ] || sleep 0.02
  done
  die "$what: not within ${secs}s"
}
drained() { [ "$(unfinished "$1")" = 0 ] && runs_n "$1" 0; }
runs_n() { [ "$(running_here "$1")" = "$2" ]; }
# (shared_queue's fields in their order: last_error, pool, running_here, state)
queue_up() { qstatus "$1" | grep -q '"running_here":[0-9]*,"state":"up"'; }
# commandstats -> "SCRIPTS ALL": calls of evalsha and eval, and of every command (those inside
# scripts too) but this script's INFO.
commandstats() {
  qcli info commandstats | tr -d '\r' | awk -F'[:=,]' '
    /^cmdstat_/ { if ($1 != "cmdstat_info") all += $3; if ($1 == "cmdstat_evalsha" || $1 == "cmdstat_eval") s += $3 }
    END { print s + 0, all + 0 }'
}

queue_redis() {
  local p
  for p in "$P_QA" "$P_QB" "$P_QL" "$P_QFAST" "$P_QSLOW"; do
    port_free "$p" || die "127.0.0.1:$p is taken (set BENCH_PORT to another base)"
  done
  P_QREDIS=
  for p in $(seq $((BASE + 61)) $((BASE + 99))); do
    if port_free "$p"; then P_QREDIS=$p; break; fi
  done
  [ -n "$P_QREDIS" ] || die "no free port for Redis in 127.0.0.1:$((BASE + 61))-$((BASE + 99))"
  QREDIS_URL=redis://127.0.0.1:$P_QREDIS/0
  log "3. redis-server on 127.0.0.1:$P_QREDIS, appendonly yes, appendfsync always, in $TMP/redis-durable"
  mkdir -p "$TMP/redis-durable"
  start redis-durable "$P_QREDIS" redis-server --bind 127.0.0.1 --port "$P_QREDIS" --save "" \
    --appendonly yes --appendfsync always --dir "$TMP/redis-durable"
  for _ in $(seq 50); do [ "$(qcli ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(qcli ping 2>/dev/null)" = PONG ] || die "the durable redis-server does not answer PING"
  QREDIS_VERSION=$(qcli info server | tr -d '\r' | sed -n 's/^redis_version://p')
}
qcli() { redis-cli -h 127.0.0.1 -p "$P_QREDIS" "$@"; }

# 3a. Sets Q_SUB_A Q_SUB_B Q_SUB_LOCAL (bench_tasks SUBMIT lines).
queue_submits() {
  local ra rb rl pa pb pl
  log "3a. durable submits: two routers on the durable Redis, $Q_CLIENTS clients each for ${Q_SECS}s; then one router with tasks: local, $((2 * Q_CLIENTS)) clients"
  ra=$(queue_registry "$P_QA" sub-a "$PREFIX-sub" "$P_QHELD")
  rb=$(queue_registry "$P_QB" sub-b "$PREFIX-sub" "$P_QHELD")
  qrouter sub-a "$P_QA" "$ra"; pa=$LAST_PID
  qrouter sub-b "$P_QB" "$rb"; pb=$LAST_PID
  until_ok 10 "router sub-a's shared queue up" queue_up "$P_QA"
  until_ok 10 "router sub-b's shared queue up" queue_up "$P_QB"
  qhold_down "$P_QA"
  qhold_down "$P_QB"
  "$BIN/examples/bench_tasks" submit --url "http://127.0.0.1:$P_QA/v1/tasks" --clients "$Q_CLIENTS" \
    --secs "$Q_SECS" >"$TMP/submit-a" &
  local ja=$!
  "$BIN/examples/bench_tasks" submit --url "http://127.0.0.1:$P_QB/v1/tasks" --clients "$Q_CLIENTS" \
    --secs "$Q_SECS" >"$TMP/submit-b" || die "bench_tasks submit against router sub-b failed"
  wait "$ja" || die "bench_tasks submit against router sub-a failed"
  Q_SUB_A=$(cat "$TMP/submit-a") Q_SUB_B=$(cat "$TMP/submit-b")
  Q_SUB_KEYS=$(qcli dbsize)
  qstop "$pa"
  qstop "$pb"

  rl=$(queue_registry "$P_QL" sub-local "$PREFIX-local" "$P_QHELD" local)
  qrouter sub-local "$P_QL" "$rl"; pl=$LAST_PID
  qhold_down "$P_QL"
  Q_SUB_LOCAL=$("$BIN/examples/bench_tasks" submit --url "http://127.0.0.1:$P_QL/v1/tasks" \
    --clients $((2 * Q_CLIENTS)) --secs "$Q_SECS") || die "bench_tasks submit against the local router failed"
  qstop "$pl"
}

# 3b. One round: a fresh pool, router fo-a runs Q_FO_TASKS tasks on the slow machine, fo-b
# idles beside it; fo-a is killed; appends to Q_FO the milliseconds until fo-b runs them all.
# The rounds kill at points spread over a third of the lease (the renewal period: a lease
# renewed just before the kill lapses last).
failover_round() {
  local r=$1 ra rb pa pb i t0 t1
  ra=$(queue_registry "$P_QA" fo-a "$PREFIX-fo$r" "$P_QSLOW")
  rb=$(queue_registry "$P_QB" fo-b "$PREFIX-fo$r" "$P_QSLOW")
  qrouter "fo-a-$r" "$P_QA" "$ra"; pa=$LAST_PID
  until_ok 10 "router fo-a's shared queue up" queue_up "$P_QA"
  for i in $(seq "$Q_FO_TASKS"); do
    [ -n "$(qsubmit "$P_QA")" ] || die "submitting task $i to router fo-a failed"
  done
  until_ok 10 "router fo-a running its $Q_FO_TASKS tasks" runs_n "$P_QA" "$Q_FO_TASKS"
  qrouter "fo-b-$r" "$P_QB" "$rb"; pb=$LAST_PID
  until_ok 10 "router fo-b's shared queue up" queue_up "$P_QB"
  runs_n "$P_QB" 0 || die "router fo-b runs tasks before the kill"
  sleep "$(awk -v r="$r" -v n="$Q_FO_ROUNDS" -v l="$Q_LEASE" 'BEGIN { printf "%.3f", (r - 1) * l / 3 / n }')"
  t0=$EPOCHREALTIME
  kill -9 "$pa"
  wait "$pa" 2>/dev/null || true
  until_ok $((Q_LEASE + 10)) "router fo-b running fo-a's $Q_FO_TASKS tasks" runs_n "$P_QB" "$Q_FO_TASKS"
  t1=$EPOCHREALTIME
  qstop "$pb"
  Q_FO+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')")
}
queue_failover() {
  local ps r
  log "3b. failover: $Q_FO_ROUNDS rounds of $Q_FO_TASKS tasks running on a killed router, cluster.task_lease ${Q_LEASE}s"
  start slow-sim "$P_QSLOW" "$BIN/examples/bench_sim" --listen "127.0.0.1:$P_QSLOW" --name slow --fault slow:10m
  ps=$LAST_PID
  Q_FO=()
  for r in $(seq "$Q_FO_ROUNDS"); do failover_round "$r"; done
  Q_FO_MS=$(printf '%s\n' "${Q_FO[@]}" | sort -n | tr '\n' ' ' | sed 's/ $//')
  qstop "$ps"
}

# 3c. Sets Q_RT (key=value: tasks, window, idle rate and the counts).
queue_round_trips() {
  local rr pr ps before after idle0 idle1 i0 i1 t0 t1 i
  log "3c. Redis round trips: $Q_RT_TASKS tasks run to their end on a fast machine through one router"
  start fast-sim "$P_QFAST" "$BIN/examples/bench_sim" --listen "127.0.0.1:$P_QFAST" --name fast
  ps=$LAST_PID
  rr=$(queue_registry "$P_QA" rt "$PREFIX-rt" "$P_QFAST")
  qrouter rt "$P_QA" "$rr"; pr=$LAST_PID
  until_ok 10 "router rt's shared queue up" queue_up "$P_QA"
  [ -n "$(qsubmit "$P_QA")" ] || die "a warm-up submit to router rt failed"
  sleep 3
  idle0=$(commandstats) i0=$EPOCHREALTIME
  sleep 4
  idle1=$(commandstats) i1=$EPOCHREALTIME
  before=$(commandstats) t0=$EPOCHREALTIME
  for i in $(seq "$Q_RT_TASKS"); do echo "$i"; done |
    xargs -P 8 -I{} curl -s -o /dev/null --max-time 5 -H 'content-type: application/json' \
      -d "$QTASK" "http://127.0.0.1:$P_QA/v1/tasks"
  # The pool's counts are read every 2 s: wait for one taken after the last submit.
  sleep 2.5
  until_ok 60 "router rt running its $Q_RT_TASKS tasks to their end" drained "$P_QA"
  after=$(commandstats) t1=$EPOCHREALTIME
  Q_RT_DONE=$(qcli --scan --pattern "$PREFIX-rt:tasks:t:*" | wc -l)
  qstop "$pr"
  qstop "$ps"
  Q_RT=$(awk -v i0="${idle0% *}" -v i0a="${idle0#* }" -v i1="${idle1% *}" -v i1a="${idle1#* }" \
    -v b="${before% *}" -v ba="${before#* }" -v a="${after% *}" -v aa="${after#* }" \
    -v w0="$t0" -v w1="$t1" -v n="$Q_RT_TASKS" -v is="$(awk -v a="$i0" -v b="$i1" 'BEGIN { print b - a }')" 'BEGIN {
      idle_s = (i1 - i0) / is; idle_all = (i1a - i0a) / is; win = w1 - w0
      s = a - b; all = aa - ba
      printf "RT tasks=%d window_s=%.1f idle_scripts_per_s=%.2f idle_all_per_s=%.2f scripts=%d all=%d scripts_per_task=%.2f all_per_task=%.2f net_scripts_per_task=%.2f net_all_per_task=%.2f\n",
        n, win, idle_s, idle_all, s, all, s / n, all / n, (s - idle_s * win) / n, (all - idle_all * win) / n
    }')
}

queue_benchmarks() {
  queue_redis
  queue_submits
  queue_failover
  queue_round_trips
}

queue_table() {
  local ra rb rl sum fo_max fo_med goal_ms fo m
  ra=$(kv "$Q_SUB_A" rps) rb=$(kv "$Q_SUB_B" rps) rl=$(kv "$Q_SUB_LOCAL" rps)
  sum=$((ra + rb))
  read -r -a fo <<<"$Q_FO_MS"
  fo_max=${fo[${#fo[@]} - 1]} fo_med=${fo[$(((${#fo[@]} - 1) / 2))]}
  goal_ms=$((Q_LEASE * 1000 + 1000))
  cat <<EOF
| # | shared task queue (\`cluster.tasks: shared\`) | result | goal | verdict |
|---|---|---|---|---|
| 3a | durable submits through two routers at once on one Redis (\`appendfsync always\`), $Q_CLIENTS clients each for ${Q_SECS}s, their machine held down | **$(thousands "$sum")/s** ($(thousands "$ra") + $(thousands "$rb")); 202 after p50 $(ms "$(kv "$Q_SUB_A" p50_us)") / p99 $(ms "$(kv "$Q_SUB_A" p99_us)") ms (router a), errors $(( $(kv "$Q_SUB_A" errors) + $(kv "$Q_SUB_B" errors) )); beside it one router with \`tasks: local\` (SQLite, synchronous=FULL), $((2 * Q_CLIENTS)) clients: $(thousands "$rl")/s (p50 $(ms "$(kv "$Q_SUB_LOCAL" p50_us)") ms) | ≥ 2,000/s | $(ok "$sum >= 2000") |
| 3b | a router's SIGKILL → its $Q_FO_TASKS running tasks running on the other router (\`running_here\`), \`task_lease\` ${Q_LEASE}s, $Q_FO_ROUNDS rounds | median **$(ms "$fo_med") s**, worst $(ms "$fo_max") s (rounds: $(for m in "${fo[@]}"; do printf '%s ' "$(ms "$m")"; done | sed 's/ $//') s) | ≤ lease + 1 s ($(ms "$goal_ms" 0) s) | $(ok "$fo_max <= $goal_ms") |
| 3c | Redis round trips per task, $(kv "$Q_RT" tasks) tasks submitted and run to their end through one router (fast machine) | **$(kv "$Q_RT" net_scripts_per_task) scripts per task** ($(kv "$Q_RT" scripts_per_task) before taking off the router's idle polling, $(kv "$Q_RT" idle_scripts_per_s)/s over $(kv "$Q_RT" window_s) s); $(kv "$Q_RT" net_all_per_task) commands per task counting those inside the scripts | report | — |
EOF
}
queue_report() {
  QUEUE_TABLE=$(queue_table)
  echo
  echo "labrouter shared task queue (README \"Several routers\") — $(machine)"
  echo "Redis $QREDIS_VERSION on 127.0.0.1 with appendonly yes and appendfsync always, its files and the routers' state under /tmp ($(df -T /tmp | awk 'NR == 2 {print $2}')); routers are labrouter processes, machines examples/bench_sim; everything shares the cores with the load generator."
  echo
  echo "$QUEUE_TABLE"
  echo
  echo "raw: shared a: $Q_SUB_A"
  echo "raw: shared b: $Q_SUB_B"
  echo "raw: local: $Q_SUB_LOCAL"
  echo "raw: keys in Redis after 3a: $Q_SUB_KEYS"
  echo "raw: failover ms, sorted: $Q_FO_MS"
  echo "raw: $Q_RT (task hashes left in Redis: $Q_RT_DONE)"
}
