#!/usr/bin/env bash
# Installs labrouter as a systemd service (README "Run it as a service"): the binary, the unit, the registry and
# the secrets file, then enables and starts it. Safe to run again: an existing
# /etc/labrouter/registry.yaml or /etc/labrouter/env is never touched, unchanged files are
# not rewritten, and a running service restarts only when its binary or unit changed.
set -euo pipefail

usage() {
  cat <<'TXT'
Usage: scripts/install-systemd.sh [--dry-run] [--binary PATH] [--prefix DIR] [--registry FILE] [--no-start]

Installs labrouter as a systemd service (run as root):
  PREFIX/bin/labrouter                   the binary (PREFIX defaults to /usr/local)
  /etc/systemd/system/labrouter.service  the unit, from systemd/labrouter.service
  /etc/labrouter/registry.yaml           only if missing: a copy of the repo's registry.yaml
                                         with server.state_dir set to /var/lib/labrouter
  /etc/labrouter/env                     only if missing: systemd/env.example, mode 600
then runs `systemctl daemon-reload`, enables labrouter and starts it (or restarts it when it
was running and its binary or unit changed).

Options:
  --dry-run        print every action and change nothing
  --binary PATH    the labrouter binary to install (default: target/release/labrouter;
                   build it first with `cargo build --release`)
  --prefix DIR     install the binary as DIR/bin/labrouter (default: /usr/local)
  --registry FILE  the registry to install when /etc/labrouter has none (default: registry.yaml)
  --no-start       install, daemon-reload and enable, but do not start or restart
  -h, --help       this text

Afterwards: edit /etc/labrouter/registry.yaml, then `systemctl reload labrouter`;
put secrets in /etc/labrouter/env, then `systemctl restart labrouter`;
logs: `journalctl -u labrouter -f`.
TXT
}

die() {
  echo "install-systemd: $*" >&2
  exit 1
}
say() { echo "install-systemd: $*"; }

repo=$(cd "$(dirname "$0")/.." && pwd)
dry_run=0
start=1
binary=$repo/target/release/labrouter
prefix=/usr/local
registry_src=$repo/registry.yaml

while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --no-start) start=0 ;;
    --binary) [ $# -ge 2 ] || die "--binary needs a path"; binary=$2; shift ;;
    --binary=*) binary=${1#*=} ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift ;;
    --prefix=*) prefix=${1#*=} ;;
    --registry) [ $# -ge 2 ] || die "--registry needs a file"; registry_src=$2; shift ;;
    --registry=*) registry_src=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

unit_src=$repo/systemd/labrouter.service
env_src=$repo/systemd/env.example
prefix=${prefix%/}
bin_dst=$prefix/bin/labrouter
etc=/etc/labrouter
registry_dst=$etc/registry.yaml
env_dst=$etc/env
unit_dst=/etc/systemd/system/labrouter.service
state_dir=/var/lib/labrouter

# === checks: all before the first change ===

[ "$(uname -s)" = Linux ] || die "systemd is Linux-only; on macOS use scripts/install-launchd.sh"
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
  die "no executable labrouter at $binary: run \`cargo build --release\` first, or pass --binary PATH"
fi
[ -f "$unit_src" ] || die "missing $unit_src"
[ -f "$env_src" ] || die "missing $env_src"
case $prefix in
  /*) ;;
  *) die "--prefix must be an absolute path, got '$prefix'" ;;
esac
case $prefix/ in
  /home/* | /root/* | /run/user/*)
    die "--prefix $prefix: the unit's ProtectHome=yes hides that directory from the service; use a system path such as /usr/local" ;;
esac
if [ "$dry_run" = 0 ]; then
  [ "$(id -u)" = 0 ] || die "must run as root to install a system service (use sudo), or pass --dry-run to see what it would do"
  [ -d /run/systemd/system ] || die "systemd is not running on this machine (no /run/systemd/system); nothing to install into"
  command -v systemctl >/dev/null || die "systemctl not found"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The unit with the binary's real path.
sed "s|/usr/local/bin/labrouter|$bin_dst|g" "$unit_src" >"$tmp/labrouter.service"

# A fresh registry: the repo's, with state_dir pointing at the unit's StateDirectory.
fresh_registry=0
if [ ! -e "$registry_dst" ]; then
  [ -f "$registry_src" ] || die "no registry to install: $registry_src is missing (pass --registry FILE)"
  fresh_registry=1
  sed "s|^\([[:space:]]*state_dir:\).*|\1 $state_dir   # the unit's StateDirectory (set by install-systemd.sh)|" \
    "$registry_src" >"$tmp/registry.yaml"
  say "the registry to install is $registry_src with this line changed:"
  grep -E "^[[:space:]]*state_dir:" "$tmp/registry.yaml" | sed 's/^/    /' ||
    say "warning: it has no server.state_dir line; labrouter will keep its state in $state_dir/state (the unit's working directory)"
  registry_to_check=$tmp/registry.yaml
else
  registry_to_check=$registry_dst
fi

# Refuse to install a binary that rejects the registry it is going to serve (read-only).
say "checking the registry with the binary to install: $binary check"
"$binary" check "$registry_to_check" ||
  die "the registry does not validate; fix it (or pass --registry FILE) and run again — nothing was installed"

# === actions ===

changed=0 # did the binary or the unit change? (a running service then restarts)

run() {
  printf '+'
  printf ' %q' "$@"
  printf '\n'
  if [ "$dry_run" = 0 ]; then "$@"; fi
}

# install_file MODE SRC DST: installs SRC as DST unless DST already has the same bytes.
install_file() {
  if [ -f "$3" ] && cmp -s "$2" "$3"; then
    say "$3 is up to date"
    return 1
  fi
  run install -m "$1" -o root -g root "$2" "$3"
}

for dir in "$prefix/bin" "$etc"; do
  [ -d "$dir" ] || run install -d -m 755 "$dir"
done

if install_file 755 "$binary" "$bin_dst"; then changed=1; fi

if [ "$fresh_registry" = 1 ]; then
  say "installing $registry_dst from $registry_src, with state_dir: $state_dir"
  run install -m 644 -o root -g root "$tmp/registry.yaml" "$registry_dst"
else
  say "keeping the existing $registry_dst (never overwritten)"
  current=$(sed -n 's/^[[:space:]]*state_dir:[[:space:]]*\([^#[:space:]]*\).*/\1/p' "$registry_dst" | head -n 1 | tr -d "\"'")
  case $current in
    "" | "$state_dir" | "$state_dir/"* | [!/]*) ;; # unset or relative: lands under the working directory
    *) say "warning: its state_dir is $current, which the unit cannot write (ProtectSystem=strict); set it to $state_dir" ;;
  esac
fi

if [ ! -e "$env_dst" ]; then
  say "creating $env_dst (mode 600) from $env_src: put secrets there"
  run install -m 600 -o root -g root "$env_src" "$env_dst"
else
  say "keeping the existing $env_dst (never overwritten)"
  mode=$(stat -c %a "$env_dst")
  case $mode in
    600 | 400) ;;
    *) say "warning: $env_dst has mode $mode; it holds secrets, consider: chmod 600 $env_dst" ;;
  esac
fi

if install_file 644 "$tmp/labrouter.service" "$unit_dst"; then changed=1; fi

if [ "$dry_run" = 1 ] && [ ! -d /run/systemd/system ]; then
  say "(systemd is not running here; a real run would do the following)"
fi
run systemctl daemon-reload
run systemctl enable labrouter
if [ "$start" = 0 ]; then
  say "not starting (--no-start): systemctl start labrouter"
  exit 0
fi

active=0
if [ -d /run/systemd/system ] && systemctl is-active --quiet labrouter; then active=1; fi

if [ "$active" = 1 ] && [ "$changed" = 0 ]; then
  say "labrouter is running and nothing changed: not restarting"
elif [ "$active" = 1 ]; then
  say "labrouter is running: restarting it (it drains in-flight requests first)"
  run systemctl restart labrouter || die "restart failed; see: journalctl -u labrouter -e"
else
  run systemctl start labrouter || die "start failed; see: journalctl -u labrouter -e"
fi

if [ "$dry_run" = 1 ]; then
  say "dry run: nothing was changed"
else
  say "done: systemctl status labrouter; journalctl -u labrouter -f"
fi
