#!/usr/bin/env bash
# Checks the service files (README "Run it as a service") as far as this machine can: the systemd unit verifies,
# the launchd plist parses before and after the installer fills it in, the scripts pass the
# linter (shellcheck), and both installers' --dry-run work. A check whose tool is missing
# prints SKIP, except the python3 plist parse, which is required. Exits 1 if any check failed.
set -euo pipefail

usage() {
  cat <<'TXT'
Usage: scripts/check-service-files.sh [-h | --help]

Checks, each printing PASS, FAIL or SKIP (tool not installed):
  systemd-analyze verify        systemd/labrouter.service (a copy whose binary is a stub)
  systemd-analyze security      the unit's exposure stays at or below 2.0
  bash -n, shellcheck           scripts/*.sh
  plist (python3 plistlib)      the template, and the plists install-launchd.sh fills in
                                for --agent and --daemon (required: FAIL without python3)
  plutil -lint                  the same plists (macOS)
  install-systemd.sh --dry-run  with a stub binary (Linux)
  install-launchd.sh --dry-run  --agent and --daemon, with a stub binary and a scratch HOME
Changes nothing outside a temporary directory.
TXT
}
case ${1:-} in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
failed=0
pass() { echo "PASS $*"; }
skip() { echo "SKIP $*"; }
fail() {
  echo "FAIL $*"
  failed=1
}
# show FILE: a failed check's output, indented.
show() { sed 's/^/     | /' "$1"; }
has() { command -v "$1" >/dev/null 2>&1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A stub labrouter: the installers run `labrouter check FILE`; systemd-analyze wants an
# executable ExecStart.
stub=$tmp/bin/labrouter
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nexit 0\n' >"$stub"
chmod 755 "$stub"

# === systemd unit ===

unit=systemd/labrouter.service
if has systemd-analyze; then
  # verify insists that ExecStart's binary exists: check a copy that points at the stub.
  mkdir -p "$tmp/unit"
  sed "s|/usr/local/bin/labrouter|$stub|g" "$unit" >"$tmp/unit/labrouter.service"
  # It exits 0 on unknown or misspelt keys, so any word about our unit is a failure too.
  if systemd-analyze verify "$tmp/unit/labrouter.service" >"$tmp/verify.out" 2>&1 &&
    ! grep -q 'labrouter\.service' "$tmp/verify.out"; then
    pass "systemd-analyze verify $unit"
  else
    fail "systemd-analyze verify $unit"
    show "$tmp/verify.out"
  fi
  if systemd-analyze security --offline=yes "$tmp/unit/labrouter.service" >"$tmp/security.out" 2>&1; then
    level=$(grep -o 'exposure level for labrouter.service: .*' "$tmp/security.out" || true)
    if systemd-analyze security --offline=yes --threshold=20 "$tmp/unit/labrouter.service" >/dev/null 2>&1; then
      pass "systemd-analyze security $unit ($level)"
    else
      fail "systemd-analyze security $unit: exposure above 2.0 ($level)"
    fi
  else
    skip "systemd-analyze security (needs systemd >= 250 for --offline)"
  fi
else
  skip "systemd-analyze verify $unit (systemd-analyze not installed)"
fi

# === scripts ===

for script in scripts/*.sh; do
  if bash -n "$script" 2>"$tmp/bash-n.out"; then
    pass "bash -n $script"
  else
    fail "bash -n $script"
    show "$tmp/bash-n.out"
  fi
done
if has shellcheck; then
  if shellcheck scripts/*.sh >"$tmp/shellcheck.out" 2>&1; then
    pass "shellcheck scripts/*.sh"
  else
    fail "shellcheck scripts/*.sh"
    show "$tmp/shellcheck.out"
  fi
else
  skip "shellcheck scripts/*.sh (shellcheck not installed)"
fi

# === launchd plist ===

template=launchd/com.labrouter.plist
# A scratch HOME and prefix, and an env file whose values need XML escaping.
home=$tmp/home
prefix=$tmp/prefix
secret="tok&en<1>\"q'|\\z"
mkdir -p "$home/Library/Application Support/labrouter" "$prefix/etc/labrouter"
for dir in "$home/Library/Application Support/labrouter" "$prefix/etc/labrouter"; do
  printf '# a comment\nTELEGRAM_BOT_TOKEN=%s\nLABROUTER_API_KEYS = "a,b"\n' "$secret" >"$dir/env"
  chmod 600 "$dir/env"
done
for mode in agent daemon; do
  if HOME=$home scripts/install-launchd.sh --"$mode" --binary "$stub" --prefix "$prefix" \
    --print-plist >"$tmp/$mode.plist" 2>"$tmp/$mode.err"; then
    pass "install-launchd.sh --$mode --print-plist"
  else
    fail "install-launchd.sh --$mode --print-plist"
    show "$tmp/$mode.err"
  fi
done

if has python3; then
  if python3 - "$template" "$tmp/agent.plist" "$tmp/daemon.plist" "$prefix" "$home" "$secret" \
    >"$tmp/plist.out" 2>&1 <<'PY'; then
import plistlib, sys

template, agent, daemon, prefix, home, secret = sys.argv[1:]
raw = plistlib.load(open(template, "rb"))
assert raw["Label"] == "com.labrouter", raw["Label"]
assert raw["ProgramArguments"][0] == "@@BINARY@@"
for path, mode in ((agent, "agent"), (daemon, "daemon")):
    p = plistlib.load(open(path, "rb"))
    args = p["ProgramArguments"]
    assert args[0] == prefix + "/bin/labrouter", args
    assert args[1:3] == ["serve", "--config"], args
    if mode == "agent":
        support = home + "/Library/Application Support/labrouter"
        assert args[3] == support + "/registry.yaml", args
        assert p["WorkingDirectory"] == support + "/state", p["WorkingDirectory"]
        assert p["StandardErrorPath"] == home + "/Library/Logs/labrouter/labrouter.log"
        assert "UserName" not in p, "an agent must not name a user"
    else:
        assert args[3] == prefix + "/etc/labrouter/registry.yaml", args
        assert p["WorkingDirectory"] == prefix + "/var/labrouter", p["WorkingDirectory"]
        assert p["StandardErrorPath"] == prefix + "/var/log/labrouter/labrouter.log"
        assert p["UserName"] == "nobody", p.get("UserName")
    env = p["EnvironmentVariables"]
    assert env["TELEGRAM_BOT_TOKEN"] == secret, "secret not carried over intact"
    assert env["LABROUTER_API_KEYS"] == "a,b", env["LABROUTER_API_KEYS"]
    assert p["RunAtLoad"] is True
    assert p["KeepAlive"] == {"SuccessfulExit": False}, p["KeepAlive"]
    assert p["ExitTimeOut"] > 30, "ExitTimeOut must outlast the 30 s drain"
    assert p["ThrottleInterval"] >= 1
PY
    pass "plist parses (python3 plistlib): template, --agent and --daemon filled in"
  else
    fail "plist parses (python3 plistlib)"
    show "$tmp/plist.out"
  fi
else
  fail "plist parses: python3 is required for this check"
fi

if has plutil; then
  for file in "$template" "$tmp/agent.plist" "$tmp/daemon.plist"; do
    if plutil -lint "$file" >"$tmp/plutil.out" 2>&1; then
      pass "plutil -lint $(basename "$file")"
    else
      fail "plutil -lint $(basename "$file")"
      show "$tmp/plutil.out"
    fi
  done
else
  skip "plutil -lint (macOS only)"
fi

# === dry runs ===

# dry_run NAME ARGS...: the installer exits 0 and says nothing on stderr but notes of what
# a real run (say, as another user) would refuse.
dry_run() {
  local name=$1
  shift
  if HOME=$home "$@" >"$tmp/dry.out" 2>"$tmp/dry.err" && ! grep -qv 'note: a real run would refuse' "$tmp/dry.err"; then
    pass "$name"
  else
    fail "$name"
    show "$tmp/dry.out"
    show "$tmp/dry.err"
  fi
}

if [ "$(uname -s)" = Linux ]; then
  dry_run "install-systemd.sh --dry-run" scripts/install-systemd.sh --dry-run --binary "$stub"
  if [ ! -e /etc/labrouter/registry.yaml ] && ! grep -q 'state_dir: /var/lib/labrouter ' "$tmp/dry.out"; then
    fail "install-systemd.sh --dry-run: the registry it would install does not set state_dir: /var/lib/labrouter"
  fi
else
  skip "install-systemd.sh --dry-run (Linux only)"
fi
dry_run "install-launchd.sh --agent --dry-run" scripts/install-launchd.sh --agent --dry-run --binary "$stub" --prefix "$prefix"
dry_run "install-launchd.sh --daemon --dry-run" scripts/install-launchd.sh --daemon --dry-run --binary "$stub" --prefix "$prefix"
for script in scripts/install-systemd.sh scripts/install-launchd.sh; do
  if "$script" --help | grep -q '^Usage:'; then
    pass "$script --help"
  else
    fail "$script --help"
  fi
done

if [ "$failed" = 1 ]; then
  echo "service files: some checks FAILED"
  exit 1
fi
echo "service files: all checks passed (or skipped)"
