#!/usr/bin/env bash
# Installs labrouter under launchd on macOS (README "Run it as a service"): the binary, the registry, the env file
# and launchd/com.labrouter.plist filled in, then (re)loads it with launchctl. Safe to run
# again: an existing registry.yaml or env file is never touched, unchanged files are not
# rewritten, and a loaded service is reloaded only when its binary or plist changed.
# Written for the bash 3.2 that macOS ships.
set -euo pipefail

usage() {
  cat <<'TXT'
Usage: scripts/install-launchd.sh [--agent | --daemon] [--dry-run] [--binary PATH] [--prefix DIR]
                                  [--registry FILE] [--user NAME] [--print-plist]

Installs labrouter as a launchd service on macOS.

  --agent   (default) a LaunchAgent for you: runs while you are logged in. Run as yourself,
            not root.
              binary    ~/.local/bin/labrouter              (--prefix, default ~/.local)
              registry  ~/Library/Application Support/labrouter/registry.yaml
              env       ~/Library/Application Support/labrouter/env
              state     ~/Library/Application Support/labrouter/state
              logs      ~/Library/Logs/labrouter/labrouter.log
              plist     ~/Library/LaunchAgents/com.labrouter.plist    (domain gui/UID)
  --daemon  a LaunchDaemon: runs from boot without anyone logged in (a headless Mac mini),
            as --user (default: nobody). Run with sudo.
              binary    /usr/local/bin/labrouter            (--prefix, default /usr/local)
              registry  /usr/local/etc/labrouter/registry.yaml
              env       /usr/local/etc/labrouter/env
              state     /usr/local/var/labrouter
              logs      /usr/local/var/log/labrouter/labrouter.log
              plist     /Library/LaunchDaemons/com.labrouter.plist    (domain system)

The registry is installed only if missing: a copy of --registry FILE (default: the repo's
registry.yaml) with server.state_dir set to the state directory. The env file is created
only if missing, from systemd/env.example, mode 600.

Secrets: launchd has no environment files, so the installer copies the env file's KEY=VALUE
lines into the plist's EnvironmentVariables; the plist is installed mode 600. Edit the env
file and run the installer again (edits made to the installed plist itself are replaced).

Then it runs `launchctl bootout` (if loaded), `launchctl enable` and `launchctl bootstrap`.
KeepAlive restarts labrouter after a crash, not after a clean stop.

Options:
  --dry-run       print every action and change nothing (works on Linux too)
  --binary PATH   the labrouter binary to install (default: target/release/labrouter;
                  build it first with `cargo build --release`)
  --prefix DIR    install the binary as DIR/bin/labrouter; for --daemon also the etc/ and
                  var/ directories above
  --registry FILE the registry to install when none is installed yet
  --user NAME     --daemon only: the user labrouter runs as (default: nobody)
  --print-plist   print the filled-in plist, secrets included, and change nothing
  -h, --help      this text

Afterwards: edit the registry, then `launchctl kickstart -k DOMAIN/com.labrouter` (or send
SIGHUP: `launchctl kill HUP DOMAIN/com.labrouter`); logs: `tail -f LOGFILE`. launchd does not
rotate the log; for a daemon, an /etc/newsyslog.d entry can.
Remove: `launchctl bootout DOMAIN/com.labrouter` and delete the plist.
TXT
}

die() {
  echo "install-launchd: $*" >&2
  exit 1
}
say() { echo "install-launchd: $*"; }

repo=$(cd "$(dirname "$0")/.." && pwd)
label=com.labrouter
mode=agent
dry_run=0
print_plist=0
binary=$repo/target/release/labrouter
prefix=
registry_src=$repo/registry.yaml
run_user=nobody

while [ $# -gt 0 ]; do
  case $1 in
    --agent) mode=agent ;;
    --daemon) mode=daemon ;;
    --dry-run) dry_run=1 ;;
    --print-plist) print_plist=1 ;;
    --binary) [ $# -ge 2 ] || die "--binary needs a path"; binary=$2; shift ;;
    --binary=*) binary=${1#*=} ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift ;;
    --prefix=*) prefix=${1#*=} ;;
    --registry) [ $# -ge 2 ] || die "--registry needs a file"; registry_src=$2; shift ;;
    --registry=*) registry_src=${1#*=} ;;
    --user) [ $# -ge 2 ] || die "--user needs a name"; run_user=$2; shift ;;
    --user=*) run_user=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

template=$repo/launchd/com.labrouter.plist
env_src=$repo/systemd/env.example
uid=$(id -u)

if [ "$mode" = agent ]; then
  [ -n "$prefix" ] || prefix=$HOME/.local
  support="$HOME/Library/Application Support/labrouter"
  config_dir=$support
  state_dir=$support/state
  log_dir=$HOME/Library/Logs/labrouter
  plist_dst=$HOME/Library/LaunchAgents/$label.plist
  domain=gui/$uid
else
  [ -n "$prefix" ] || prefix=/usr/local
  config_dir=${prefix%/}/etc/labrouter
  state_dir=${prefix%/}/var/labrouter
  log_dir=${prefix%/}/var/log/labrouter
  plist_dst=/Library/LaunchDaemons/$label.plist
  domain=system
fi
prefix=${prefix%/}
bin_dst=$prefix/bin/labrouter
registry_dst=$config_dir/registry.yaml
env_dst=$config_dir/env

# === checks: all before the first change ===

if [ "$dry_run" = 0 ] && [ "$print_plist" = 0 ]; then
  [ "$(uname -s)" = Darwin ] ||
    die "launchd is macOS-only (this is $(uname -s)); on Linux use scripts/install-systemd.sh, or pass --dry-run to see what this would do"
fi
# would_refuse MESSAGE: a dry run reports what a real run would refuse; a real run refuses.
would_refuse() {
  if [ "$dry_run" = 1 ] || [ "$print_plist" = 1 ]; then
    say "note: a real run would refuse: $*" >&2
  else
    die "$*"
  fi
}
if [ "$mode" = agent ] && [ "$uid" = 0 ]; then
  would_refuse "a LaunchAgent is installed as the user it runs for; run without sudo (or use --daemon)"
fi
if [ "$mode" = daemon ] && [ "$uid" != 0 ]; then
  would_refuse "--daemon installs into /Library/LaunchDaemons: run with sudo"
fi
if [ "$mode" = daemon ] && ! id "$run_user" >/dev/null 2>&1; then
  would_refuse "no such user: $run_user (pass --user NAME)"
fi
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
  die "no executable labrouter at $binary: run \`cargo build --release\` first, or pass --binary PATH"
fi
[ -f "$template" ] || die "missing $template"
[ -f "$env_src" ] || die "missing $env_src"
case $prefix in
  /*) ;;
  *) die "--prefix must be an absolute path, got '$prefix'" ;;
esac
for path in "$bin_dst" "$registry_dst" "$state_dir" "$log_dir"; do
  case $path in
    *'
'*) die "a path with a newline in it: $path" ;;
  esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# sed_escape TEXT: TEXT made safe as the replacement of an s|...|...| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }
# xml_escape TEXT: TEXT made safe as plist <string> content.
xml_escape() { printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }

# env_entries FILE REDACT: the FILE's KEY=VALUE lines as plist <key>/<string> pairs
# (systemd EnvironmentFile syntax: # and ; start comments, a value may be quoted).
# With REDACT=1 the values are left out, for printing.
env_entries() {
  local n=0 line key value q
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    line=${line#"${line%%[![:space:]]*}"}
    case $line in '' | '#'* | ';'*) continue ;; esac
    key=${line%%=*}
    [ "$key" != "$line" ] || die "$1:$n: expected KEY=VALUE"
    key=${key%"${key##*[![:space:]]}"}
    [[ $key =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "$1:$n: '$key' is not a variable name"
    value=${line#*=}
    value=${value#"${value%%[![:space:]]*}"}
    q=${value:0:1}
    if [ ${#value} -ge 2 ] && { [ "$q" = '"' ] || [ "$q" = "'" ]; } && [ "${value: -1}" = "$q" ]; then
      value=${value:1:${#value}-2}
    fi
    [ "$2" = 0 ] || value="(from $1)"
    printf '\t\t<key>%s</key>\n\t\t<string>%s</string>\n' "$key" "$(xml_escape "$value")"
  done <"$1"
}

# The env file the plist takes its variables from: the installed one, or the example that
# is about to become it.
env_for_plist=$env_src
[ ! -e "$env_dst" ] || env_for_plist=$env_dst
[ -r "$env_for_plist" ] || die "cannot read $env_for_plist"
env_entries "$env_for_plist" 0 >"$tmp/env.xml"
env_entries "$env_for_plist" 1 >"$tmp/env-redacted.xml"

# render_plist ENV_XML: the template with every placeholder filled in.
render_plist() {
  local keep line
  if [ "$mode" = daemon ]; then
    keep=(-e '/@@DAEMON_ONLY_BEGIN@@/d' -e '/@@DAEMON_ONLY_END@@/d')
  else
    keep=(-e '/@@DAEMON_ONLY_BEGIN@@/,/@@DAEMON_ONLY_END@@/d')
  fi
  sed "${keep[@]}" \
    -e "s|@@BINARY@@|$(sed_escape "$(xml_escape "$bin_dst")")|g" \
    -e "s|@@CONFIG@@|$(sed_escape "$(xml_escape "$registry_dst")")|g" \
    -e "s|@@STATE_DIR@@|$(sed_escape "$(xml_escape "$state_dir")")|g" \
    -e "s|@@LOG_DIR@@|$(sed_escape "$(xml_escape "$log_dir")")|g" \
    -e "s|@@USER@@|$(sed_escape "$(xml_escape "$run_user")")|g" \
    "$template" >"$tmp/filled.plist"
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
      *'<!--@@ENVIRONMENT@@-->'*) cat "$1" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done <"$tmp/filled.plist"
}

render_plist "$tmp/env.xml" >"$tmp/$label.plist"
if grep -q '@@' "$tmp/$label.plist"; then
  die "a placeholder was left unfilled in $template"
fi
if [ "$print_plist" = 1 ]; then
  cat "$tmp/$label.plist"
  exit 0
fi
if command -v plutil >/dev/null; then
  plutil -lint -s "$tmp/$label.plist" || die "the filled-in plist does not parse (see above)"
fi

# A fresh registry: the repo's, with state_dir pointing at the state directory.
fresh_registry=0
if [ ! -e "$registry_dst" ]; then
  [ -f "$registry_src" ] || die "no registry to install: $registry_src is missing (pass --registry FILE)"
  fresh_registry=1
  yaml_state=$(printf '%s' "$state_dir" | sed -e 's/[\\"]/\\&/g')
  sed "s|^\([[:space:]]*state_dir:\).*|\1 \"$(sed_escape "$yaml_state")\"   # set by install-launchd.sh|" \
    "$registry_src" >"$tmp/registry.yaml"
  say "the registry to install is $registry_src with this line changed:"
  grep -E "^[[:space:]]*state_dir:" "$tmp/registry.yaml" | sed 's/^/    /' ||
    say "warning: it has no server.state_dir line; labrouter will keep its state in $state_dir/state (the working directory)"
  registry_to_check=$tmp/registry.yaml
else
  registry_to_check=$registry_dst
fi

# Refuse to install a binary that rejects the registry it is going to serve (read-only).
say "checking the registry with the binary to install: $binary check"
"$binary" check "$registry_to_check" ||
  die "the registry does not validate; fix it (or pass --registry FILE) and run again — nothing was installed"

# === actions ===

changed=0 # did the binary or the plist change? (a loaded service is then reloaded)

run() {
  printf '+'
  printf ' %q' "$@"
  printf '\n'
  if [ "$dry_run" = 0 ]; then "$@"; fi
}

# Owner flags for what the daemon's user must write (state, logs) and for root's files.
if [ "$mode" = daemon ]; then
  as_root=(-o root -g wheel)
  as_user=(-o "$run_user")
else
  as_root=()
  as_user=()
fi

# mkdir_p MODE DIR [OWNER FLAGS...]: creates DIR if missing; never changes an existing one.
mkdir_p() {
  local m=$1 d=$2
  shift 2
  [ -d "$d" ] || run install -d -m "$m" ${1+"$@"} "$d"
}
# The empty-array form keeps bash 3.2 with `set -u` happy.
mkdir_p 755 "$prefix/bin" ${as_root[@]+"${as_root[@]}"}
mkdir_p 755 "$config_dir" ${as_root[@]+"${as_root[@]}"}
mkdir_p 700 "$state_dir" ${as_user[@]+"${as_user[@]}"}
mkdir_p 755 "$log_dir" ${as_user[@]+"${as_user[@]}"}
mkdir_p 755 "$(dirname "$plist_dst")"

# The binary goes in as a new file renamed over the old: overwriting a signed binary in
# place can get it killed by macOS's code-signing cache on its next start.
if [ -f "$bin_dst" ] && cmp -s "$binary" "$bin_dst"; then
  say "$bin_dst is up to date"
else
  run install -m 755 ${as_root[@]+"${as_root[@]}"} "$binary" "$bin_dst.new"
  run mv -f "$bin_dst.new" "$bin_dst"
  changed=1
fi

if [ "$fresh_registry" = 1 ]; then
  say "installing $registry_dst"
  run install -m 644 ${as_root[@]+"${as_root[@]}"} "$tmp/registry.yaml" "$registry_dst"
else
  say "keeping the existing $registry_dst (never overwritten)"
fi

if [ ! -e "$env_dst" ]; then
  say "creating $env_dst (mode 600) from $env_src: put secrets there, then run this again"
  run install -m 600 ${as_root[@]+"${as_root[@]}"} "$env_src" "$env_dst"
else
  say "keeping the existing $env_dst (never overwritten); its variables go into the plist"
fi

if [ -f "$plist_dst" ] && cmp -s "$tmp/$label.plist" "$plist_dst"; then
  say "$plist_dst is up to date"
else
  if [ "$dry_run" = 1 ]; then
    say "the plist to install (values from $env_for_plist left out):"
    render_plist "$tmp/env-redacted.xml" | sed -n -e '/^<plist/,$s/^/    /p'
  fi
  run install -m 600 ${as_root[@]+"${as_root[@]}"} "$tmp/$label.plist" "$plist_dst"
  changed=1
fi

loaded=0
if command -v launchctl >/dev/null && launchctl print "$domain/$label" >/dev/null 2>&1; then
  loaded=1
fi
if [ "$dry_run" = 1 ] && ! command -v launchctl >/dev/null; then
  say "(no launchctl here; a real run would do the following)"
fi

if [ "$loaded" = 1 ] && [ "$changed" = 0 ]; then
  run launchctl enable "$domain/$label"
  if launchctl print "$domain/$label" 2>/dev/null | grep -q 'state = running'; then
    say "$label is running and nothing changed: leaving it be"
  else
    say "$label is loaded, not running, and nothing changed: starting it"
    run launchctl kickstart "$domain/$label"
  fi
else
  # bootout fails when it is not loaded: that is fine. It stops labrouter with SIGTERM, which
  # drains first; bootstrap fails while the old one is still there, so wait for it to go.
  run launchctl bootout "$domain/$label" || true
  if [ "$dry_run" = 0 ]; then
    waited=0
    while launchctl print "$domain/$label" >/dev/null 2>&1; do
      [ "$waited" -lt 60 ] || die "$label is still loaded 60 s after bootout; try again later"
      sleep 1
      waited=$((waited + 1))
    done
  fi
  # A disabled service cannot be bootstrapped: enable it first.
  run launchctl enable "$domain/$label"
  run launchctl bootstrap "$domain" "$plist_dst" ||
    die "bootstrap failed; see: launchctl print $domain/$label, and $log_dir/labrouter.log (an agent needs you logged in at the Mac itself; on a headless Mac use --daemon)"
fi

if [ "$dry_run" = 1 ]; then
  say "dry run: nothing was changed"
else
  say "done: launchctl print $domain/$label; tail -f \"$log_dir/labrouter.log\""
fi
