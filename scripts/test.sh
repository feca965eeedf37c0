#!/usr/bin/env bash
# The README's test command: installs what the tests need from outside cargo, then runs
# `cargo test` with any arguments given (`scripts/test.sh --test ollama_client`).
#
# - The official `ollama` and `openai` Python clients and the OpenAI Agents SDK
#   (`openai-agents`) (PyPI, pinned), in one venv at target/test-venv, for
#   tests/ollama_client.rs, tests/sim_clients.rs, tests/media_client.rs and
#   tests/openai_client.rs. The venv is
#   made again only when the pins change (target/test-venv/.pins) or an import fails.
#   python3 and its venv module come from Debian when missing and this runs as root. A test
#   whose program or package is missing fails; it never skips.
# - `redis-server` (Debian), for tests/cluster.rs and tests/shared_tasks.rs: each test starts its own on a free
#   loopback port with a temporary directory, and stops it by pid.
# - libfaketime (Debian: faketime), for the clock-skew scenario of tests/cluster.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${LABROUTER_TEST_VENV:-$PWD/target/test-venv}
OLLAMA_CLIENT=${LABROUTER_OLLAMA_CLIENT:-ollama==0.6.3}
OPENAI_CLIENT=${LABROUTER_OPENAI_CLIENT:-openai==3.60.0}
AGENTS_SDK=${LABROUTER_AGENTS_SDK:-openai-agents==0.24.0}
PINS="$OLLAMA_CLIENT $OPENAI_CLIENT $AGENTS_SDK"

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } ||
      echo "scripts/test.sh: could not install $*" >&2
  else
    echo "scripts/test.sh: please install $* (Debian packages)" >&2
  fi
}

if [ "$(cat "$VENV/.pins" 2>/dev/null)" != "$PINS" ] ||
  ! "$VENV/bin/python" -c 'import ollama, openai, agents' 2>/dev/null; then
  command -v python3 >/dev/null || apt_install python3
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$OLLAMA_CLIENT" "$OPENAI_CLIENT" "$AGENTS_SDK"
  echo "$PINS" >"$VENV/.pins"
fi
export LABROUTER_TEST_PYTHON="$VENV/bin/python"

command -v redis-server >/dev/null || apt_install redis-server
if command -v redis-server >/dev/null; then
  LABROUTER_TEST_REDIS=$(command -v redis-server)
  export LABROUTER_TEST_REDIS
fi

faketime_lib() { dpkg -L libfaketime 2>/dev/null | grep '/libfaketime\.so\.1$' | head -n 1; }
[ -n "$(faketime_lib)" ] || apt_install faketime
if [ -n "$(faketime_lib)" ]; then
  LABROUTER_TEST_FAKETIME=$(faketime_lib)
  export LABROUTER_TEST_FAKETIME
fi

exec cargo test "$@"
