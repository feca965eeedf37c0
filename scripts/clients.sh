#!/usr/bin/env bash
# The clients the lab already uses, each driven through a labrouter on simulated machines,
# as a new user would drive them: chat, streaming, tools where the client has them,
# embeddings, and the Responses API for the OpenAI Agents SDK, litellm.responses and
# `codex exec`. Prints one PASS or FAIL line per client and check, then a count and the
# time it took; exits 1 on any FAIL.
#
# Installs, pinned and only when the pins change (a stamp file beside each):
#   target/clients-venv  (PyPI, with uv) llm + llm-ollama, langchain-openai +
#                        langchain-ollama, litellm, openai-agents
#   target/clients-npm   (npm) openai, ollama, @openai/codex (Codex CLI: its platform
#                        binary is an npm package too)
#
# The lab, all on 127.0.0.1 (nothing else is ever sent anything): `labrouter serve` on a
# temporary registry and state directory; the GPU box is a dead port (127.0.0.1:1, so
# every client also walks the fallback chain and the GPU box's breaker opens), the CPU box
# an OpenAI sim (`labrouter sim`) and `local` an Ollama sim. Clients name `code` (a chat
# route) and `embed` (an embedding route). Codex runs with a temporary CODEX_HOME whose
# config.toml names labrouter as its provider (wire_api = "responses") and switches off
# update checks, analytics, feedback, telemetry, plugins and apps. Every client runs under
# strace (Debian, installed when missing), and every connect() it made is checked to have
# gone to 127.0.0.1: one `only-loopback` line per client.
#
# Usage: scripts/clients.sh [CLIENT...]   (default: all; names as in the PASS lines)
# Environment: LABROUTER_BIN (default: target/debug/labrouter as the tests built it; built
# when missing: run scripts/test.sh first after a change).
# Needs python3 (with venv), node and npm, strace and git: from Debian when missing and
# this runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
started=$SECONDS

VENV=$ROOT/target/clients-venv
NPM_PREFIX=$ROOT/target/clients-npm
PY_PINS=(llm==0.36 llm-ollama==0.19.1 langchain-openai==1.8.1 langchain-ollama==1.1.0
  litellm==1.110.2 openai-agents==0.24.0 openai==3.60.0)
UV_PIN=uv==0.13.9
NPM_PINS=(openai@7.60.0 ollama@0.6.4 @openai/codex@0.171.0)
ALL_CLIENTS=(llm langchain-openai langchain-ollama litellm agents-sdk npm-openai npm-ollama codex)
if [ "$#" -gt 0 ]; then CLIENTS=("$@"); else CLIENTS=("${ALL_CLIENTS[@]}"); fi

say() { echo "clients.sh: $*" >&2; }

# --- install -------------------------------------------------------------------------

install_python() {
  local want="$UV_PIN ${PY_PINS[*]}"
  if [ "$(cat "$VENV/.pins" 2>/dev/null)" = "$want" ]; then return 0; fi
  say "installing ${PY_PINS[*]} into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  # uv (from PyPI, pinned) installs these in seconds where pip takes one to two minutes.
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$UV_PIN"
  "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" "${PY_PINS[@]}"
  echo "$want" >"$VENV/.pins"
}

install_npm() {
  local want="${NPM_PINS[*]}"
  if [ "$(cat "$NPM_PREFIX/.pins" 2>/dev/null)" = "$want" ]; then return 0; fi
  say "installing ${NPM_PINS[*]} into $NPM_PREFIX"
  rm -rf "$NPM_PREFIX"
  mkdir -p "$NPM_PREFIX"
  npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --silent "${NPM_PINS[@]}"
  echo "$want" >"$NPM_PREFIX/.pins"
}

# apt_install PACKAGE...: from Debian, when this runs as root; else says what to install.
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } ||
      say "could not install $*"
  else
    say "please install $* (Debian packages)"
  fi
}

command -v python3 >/dev/null || apt_install python3
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
command -v npm >/dev/null || apt_install nodejs npm
command -v strace >/dev/null || apt_install strace
command -v git >/dev/null || apt_install git
install_python
install_npm
# Without strace the only-loopback checks FAIL, saying so: they never pass unchecked.
STRACE=$(command -v strace || true)
install_done=$SECONDS

# The binary `cargo test` leaves (as scripts/check-dashboard.sh uses it): a `cargo build`
# here would build the crate again without the dev-dependencies' features, and the next
# `cargo test` again with them.
BIN=${LABROUTER_BIN:-$ROOT/target/debug/labrouter}
if [ ! -x "$BIN" ]; then
  say "building $BIN"
  cargo build --quiet
fi

# --- the lab -------------------------------------------------------------------------

WORK=$(mktemp -d "$ROOT/target/clients.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_for FILE PATTERN: the first match of PATTERN in FILE, waiting up to 10 s.
wait_for() {
  local found _
  for _ in $(seq 100); do
    found=$(grep -o "$2" "$1" 2>/dev/null | head -n 1 || true)
    if [ -n "$found" ]; then
      echo "$found"
      return 0
    fi
    sleep 0.1
  done
  say "timed out waiting for '$2' in $1:"
  sed 's/^/  | /' "$1" >&2
  return 1
}

# start_sim NAME ARGS...: a simulated machine on a free loopback port, logging to
# $WORK/NAME.log (run in this shell, not in $(...), so that cleanup knows its pid).
start_sim() {
  local name=$1
  shift
  "$BIN" sim --listen 127.0.0.1:0 --name "$name" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!")
}

start_sim ubuntu-box --models qwen3-coder:30b-q4,nomic-embed-text
start_sim local --api ollama --models qwen3:4b,nomic-embed-text:latest
CPU_URL=$(wait_for "$WORK/ubuntu-box.log" 'http://127\.0\.0\.1:[0-9]*/v1') || exit 1
LOCAL_URL=$(wait_for "$WORK/local.log" 'http://127\.0\.0\.1:[0-9]*/v1') || exit 1
mkdir -p "$WORK/state"
cat >"$WORK/registry.yaml" <<YAML
server:
  listen: 127.0.0.1:0
  state_dir: "$WORK/state"
machines:
  gpu-box: { url: "http://127.0.0.1:1/v1" }   # nothing listens there: the GPU box is away
  ubuntu-box: { url: "$CPU_URL" }
  local: { url: "$LOCAL_URL", api: ollama }
models:
  coder-gpu: { machine: gpu-box, name: "qwen3-coder:30b" }
  coder-cpu: { machine: ubuntu-box, name: "qwen3-coder:30b-q4" }
  small: { machine: local, name: "qwen3:4b" }
  embed-gpu: { machine: gpu-box, name: "nomic-embed-text", kind: embed }
  embed-cpu: { machine: ubuntu-box, name: "nomic-embed-text", kind: embed }
routes:
  - name: code
    default: true
    keywords: [code, bug]
    chain: [coder-gpu, coder-cpu, small]
  - name: embed
    chain: [embed-gpu, embed-cpu]
YAML
"$BIN" check "$WORK/registry.yaml" >/dev/null
"$BIN" serve --config "$WORK/registry.yaml" >"$WORK/router.log" 2>&1 &
PIDS+=("$!")
LISTEN=$(wait_for "$WORK/router.log" 'listen=127\.0\.0\.1:[0-9]*') || exit 1
ROUTER=http://${LISTEN#listen=}
say "labrouter at $ROUTER; CPU box $CPU_URL, local $LOCAL_URL, GPU box away"

# --- the clients ---------------------------------------------------------------------

RESULTS=$WORK/results
: >"$RESULTS"

# only_loopback NAME TRACE: PASS when every connect() in strace's TRACE went to a loopback
# address (or a local socket), else FAIL naming the others.
only_loopback() {
  local name=$1 trace=$2 others
  others=$(grep -oE 'inet_addr\("[^"]*"\)|inet_pton\(AF_INET6, "[^"]*"' "$trace" |
    grep -oE '"[^"]*"' | tr -d '"' | grep -vE '^(127\.|::1$|::ffff:127\.)' | sort -u | tr '\n' ' ' || true)
  if [ -z "$others" ]; then
    echo "PASS $name only-loopback"
  else
    echo "FAIL $name only-loopback: connected to $others"
  fi
}

# run_client NAME COMMAND...: its PASS/FAIL lines go to the results; a client that
# crashed before saying anything, or exited non-zero, is a FAIL with its last words.
# Under strace, every connection it opened is checked to stay on 127.0.0.1.
run_client() {
  local name=$1 out=$WORK/$1.out err=$WORK/$1.err trace=$WORK/$1.strace rc=0 from=$SECONDS
  shift
  if [ -n "$STRACE" ]; then
    "$STRACE" -f -qq --seccomp-bpf -e trace=connect -o "$trace" "$@" >"$out" 2>"$err" || rc=$?
    only_loopback "$name" "$trace" >>"$out"
  else
    "$@" >"$out" 2>"$err" || rc=$?
    echo "FAIL $name only-loopback: strace is missing (Debian: strace)" >>"$out"
  fi
  grep -E '^(PASS|FAIL) ' "$out" | tee -a "$RESULTS" || true
  if [ "$rc" != 0 ] || ! grep -qE '^(PASS|FAIL) ' "$out"; then
    echo "FAIL $name run: exited $rc" | tee -a "$RESULTS"
    tail -n 15 "$err" | sed 's/^/  | /'
  fi
  say "$name took $((SECONDS - from)) s"
}

python_client() {
  run_client "$1" env OPENAI_AGENTS_DISABLE_TRACING=1 LLM_USER_PATH="$WORK/llm" \
    OPENAI_API_KEY=not-a-real-key LITELLM_LOCAL_MODEL_COST_MAP=True \
    "$VENV/bin/python" scripts/clients/clients.py "$1" "$ROUTER"
}

node_client() {
  run_client "$1" env NODE_PATH="$NPM_PREFIX/node_modules" \
    node scripts/clients/clients.cjs "$1" "$ROUTER"
}

# codex_home DIR: a CODEX_HOME whose config.toml sends Codex to labrouter's Responses
# API and switches off everything that would talk to anyone else (--strict-config makes a
# key this Codex does not know an error, so none of these is silently ignored).
codex_home() {
  mkdir -p "$1"
  cat >"$1/config.toml" <<TOML
model = "code"
model_provider = "labrouter"
check_for_update_on_startup = false

[model_providers.labrouter]
name = "labrouter"
base_url = "$ROUTER/v1"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
apps = false
plugins = false
remote_plugin = false
plugin_sharing = false
in_app_updates = false
daemon_auto_start = false
tool_suggest = false
enable_request_compression = false
TOML
}

# codex_checks: `codex exec` in an empty git repository; the sim answers its first turn
# with a call to Codex's first tool (its shell, with the command "sim", which the
# read-only sandbox runs and which is not found), and its second, which carries the tool's
# output, with "tool said: ...". A last message that says so is a whole agent turn
# through labrouter.
codex_checks() {
  local home=$WORK/codex-home repo=$WORK/codex-repo last rc=0
  codex_home "$home"
  mkdir -p "$repo"
  git -C "$repo" init -q
  CODEX_HOME=$home "$NPM_PREFIX/node_modules/.bin/codex" exec --strict-config --ephemeral \
    --sandbox read-only -C "$repo" -o "$WORK/codex-last.txt" "fix this bug" \
    >"$WORK/codex-exec.out" 2>&1 || rc=$?
  last=$(head -c 200 "$WORK/codex-last.txt" 2>/dev/null || true)
  if [ "$rc" = 0 ] && [[ $last == "tool said: "* ]]; then
    echo "PASS codex exec-responses-tool"
  else
    echo "FAIL codex exec-responses-tool: exited $rc, last message '${last}'"
    tail -n 15 "$WORK/codex-exec.out" | sed 's/^/  | /' >&2
  fi
}

export ROUTER WORK NPM_PREFIX
for client in "${CLIENTS[@]}"; do
  case $client in
    llm | langchain-openai | langchain-ollama | litellm | agents-sdk) python_client "$client" ;;
    npm-openai | npm-ollama) node_client "$client" ;;
    codex) run_client codex bash -c "$(declare -f codex_home codex_checks); codex_checks" ;;
    *) echo "FAIL $client run: no such client (${ALL_CLIENTS[*]})" | tee -a "$RESULTS" ;;
  esac
done

passed=$(grep -c '^PASS ' "$RESULTS" || true)
failed=$(grep -c '^FAIL ' "$RESULTS" || true)
echo "clients: $passed passed, $failed failed in $((SECONDS - install_done)) s" \
  "(installing took $((install_done - started)) s)"
[ "$failed" = 0 ]
