#!/usr/bin/env bash
# Writes link/hot.ld: the functions a served request runs, then those startup runs, to be
# placed together at the start of the release binary's machine code (build.rs passes the
# script to the linker).
#
# Why: a router idles between requests, and on a host that takes back an idle guest's memory
# (or only its caches and TLBs) every distinct page a request touches costs microseconds, not
# nanoseconds. Spread over 16 MB of code, a stream's functions touched 285–306 pages of it;
# together, 209–230 (docs/perf/README.md "Pages a request touches").
#
# How: a release labrouter runs under callgrind in front of bench sims on 127.0.0.1; once it
# is ready its counters are dumped (startup), then it serves streamed and whole chat
# completions and they are dumped again; every function that served is listed, the most run
# first, from a 2 MiB boundary (src/huge_text.rs moves those huge pages onto transparent huge
# pages), and after them every other function startup ran, then those failing machines ran: the kernel maps the 64 KB around
# each page of code first touched, and startup's functions, spread over 145 such spans, had
# an idle router map 11 MB of its code; together, 6.6 MB (and the 2 MiB huge page).
# The requests are OpenAI's chat completions alone, the most common work: with Ollama's /api/chat and embeddings in the list too, their translation code
# came between the chat path's functions and a stream touched 20-40% more pages of code.
# Symbols are v0-mangled (.cargo/config.toml), which spells out a generic's arguments; what a
# rebuild may change in a name (crate disambiguators, back-references, LTO's `.llvm.N`)
# becomes a `*`, so the list stays right across edits and toolchains. Functions added later
# are simply not in it: they land in the ordinary .text, as before.
#
#   scripts/hot-code.sh [BINARY]   (default: target/release/labrouter; rerun after large changes)
#
# Needs valgrind and wrk (Debian packages), and the release examples (bench_sim, bench_load).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REL=${CARGO_TARGET_DIR:-target}/release
case "$REL" in /*) ;; *) REL=$ROOT/$REL;; esac
B=${1:-$REL/labrouter}
for tool in valgrind callgrind_control wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "hot-code.sh: $tool is missing" >&2; exit 1; }
done
for ex in bench_sim bench_load; do
  [ -x "$REL/examples/$ex" ] || { echo "hot-code.sh: run cargo build --release --examples first" >&2; exit 1; }
done
TMP=$(mktemp -d)
P=18600 PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
sed -e "s#@ROUTER@#$((P + 10))#; s#@STATE@#$TMP/state#; s#@FAST@#$((P + 1))#g; s#@DRIP@#$((P + 2))#g" \
  -e "s#@DRIP64@#$((P + 5))#g; s#@SLOW@#$((P + 3))#g; s#@HANG@#$((P + 4))#g" \
  benches/bench/registry.yaml.in >"$TMP/reg.yaml"
"$REL/examples/bench_sim" --listen "127.0.0.1:$((P + 1))" --name fast >/dev/null 2>&1 &
PIDS+=($!)
"$REL/examples/bench_sim" --listen "127.0.0.1:$((P + 4))" --name hang --fault hang >/dev/null 2>&1 &
PIDS+=($!)
"$REL/examples/bench_sim" --listen "127.0.0.1:$((P + 5))" --name drip64 --fault drip:20ms \
  --chunks 64 >/dev/null 2>&1 &
PIDS+=($!)
# Its code as the linker placed it (not moved onto a huge page: src/huge_text.rs), so that
# callgrind names every function.
LABROUTER_NO_HUGE_TEXT=1 RUST_LOG=warn valgrind --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no \
  --callgrind-out-file="$TMP/cg.out" "$B" serve --config "$TMP/reg.yaml" >"$TMP/vg.log" 2>&1 &
VG=$!
PIDS+=("$VG")
URL=http://127.0.0.1:$((P + 10))
for _ in $(seq 120); do
  curl -s -o /dev/null "$URL/health" && break
  kill -0 "$VG" 2>/dev/null || { tail "$TMP/vg.log" >&2; exit 1; }
  sleep 0.5
done
# Three dumps, each zeroing the counters: startup, the requests, failing machines.
callgrind_control -d "$VG" >/dev/null
"$REL/examples/bench_load" ttft --url "$URL/v1/chat/completions" --n 2 \
  --body '{"model":"stream64","stream":true,"messages":[{"role":"user","content":"hi"}]}' >/dev/null
CHAT='{"model":"chat","messages":[{"role":"user","content":"hello"}]}'
BENCH_BODY=$CHAT wrk -t1 -c8 -d4 -s benches/bench/post.lua "$URL/v1/chat/completions" >/dev/null
BENCH_BODY=$CHAT wrk -t1 -c1 -d2 -s benches/bench/post.lua "$URL/v1/chat/completions" >/dev/null
callgrind_control -d "$VG" >/dev/null
# Then what a router runs when machines fail: a route's machines opened by hand, its calls
# refused at once, a hung machine timed out three times and its fallback taken, /status.
for m in shut-a shut-b shut-c; do
  curl -s -o /dev/null -X POST -H 'content-type: application/json' \
    -d '{"by":"hot-code.sh","why":"profile"}' "$URL/admin/breakers/$m/open"
done
SHUT='{"model":"shut","messages":[{"role":"user","content":"hi"}]}'
BENCH_BODY=$SHUT wrk -t1 -c4 -d2 -s benches/bench/post.lua "$URL/v1/chat/completions" >/dev/null
for _ in 1 2 3 4; do
  curl -s -o /dev/null -H 'content-type: application/json' \
    -d '{"model":"hung","messages":[{"role":"user","content":"hi"}]}' "$URL/v1/chat/completions"
done
curl -s -o /dev/null "$URL/status"
callgrind_control -d "$VG" >/dev/null
sleep 1
for n in 1 2 3; do
  [ -f "$TMP/cg.out.$n" ] || { echo "hot-code.sh: callgrind wrote no dump $n" >&2; exit 1; }
done
python3 - "$B" "$TMP/cg.out.1" "$TMP/cg.out.2" "$TMP/cg.out.3" >link/hot.ld <<'PY'
import collections, re, subprocess, sys

def costs(dump):
    """Each function's own cost in a callgrind dump."""
    cost, fn, call = collections.Counter(), None, False
    for line in open(dump, errors="replace"):
        if line.startswith("fn="):
            fn, call = line[3:].strip(), False
        elif line.startswith("calls="):
            call = True  # the next cost line is the call's inclusive cost, not fn's own
        elif line[:1].isdigit() or line[:1] in "+-*":
            if call:
                call = False
            elif fn:
                cost[fn] += int(line.split()[1])
    return cost

startup, cost, failing = (costs(d) for d in sys.argv[2:5])
nm = subprocess.run(["nm", sys.argv[1]], capture_output=True, text=True, check=True).stdout
symbols = {l.split()[-1] for l in nm.splitlines() if l.strip()}

def pattern(name):
    """A v0 name with what a rebuild may change in it made a `*`: LTO's `.llvm.N` suffix,
    crate disambiguators, and back-references (offsets into the name, which move when a
    disambiguator's length does). Other names (C's; legacy Rust ones, should RUSTFLAGS
    replace .cargo/config.toml's) stay as they are."""
    if not name.startswith("_R"):
        return name
    bare = re.sub(r"\.llvm\.\d+$", "", name)
    tail = "*" if bare != name else ""
    bare = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", bare)
    return re.sub(r"B[0-9A-Za-z]*_", "B*_", bare) + tail

def beside(name):
    """Work that ran beside the requests, not for them: the state store (SQLite and its SQL
    parser) and reqwest (health probes, Telegram). A v0 name's first crate is its home."""
    home = re.search(r"C(?:s[0-9A-Za-z]+_)?(\d+)", name)
    crate = home and name[home.end() : home.end() + int(home[1])]
    return name.startswith(("sqlite3", "yy_")) or crate == "reqwest"

def listed(cost, keep):
    """The patterns of the functions that ran, the most run first, each once."""
    return dict.fromkeys(
        pattern(name)
        for name, c in cost.most_common()
        if c and name in symbols and re.fullmatch(r"[A-Za-z0-9_.$]+", name) and keep(name)
    )

hot = listed(cost, lambda name: not beside(name))
rest = list(dict.fromkeys(  # startup's, then failure's, each once, none of the serving path's
    p for c in (startup, failing) for p in listed(c, lambda name: True) if p not in hot
))
print("""/* The serving path's machine code and its jump tables, together, then startup's and
   failure's (scripts/hot-code.sh wrote it; build.rs passes it to the linker for the release
   binary). The serving path starts on a 2 MiB boundary: src/huge_text.rs moves it onto a
   huge page. */""")
for out, before in ((".text.hot", ".text"), (".rodata.hot", ".rodata")):
    kind = before[1:]
    code = kind == "text"
    print(f"SECTIONS {{\n  {out} :{' ALIGN(0x200000)' if code else ''} {{")
    if code:
        print("    __labrouter_hot_text = .;")
    for p in hot:
        print(f"    *(.{kind}.{p})")
    if code:
        print("    __labrouter_hot_text_end = .;")
    for p in rest:
        print(f"    *(.{kind}.{p})")
    print(f"  }}\n}}\nINSERT BEFORE {before};")
print("""/* Exception tables are read only when a panic unwinds: after the constants, so that the
   binary's first 2 MiB, which src/huge_text.rs moves onto a huge page, hold the constants. */
SECTIONS {
  .gcc_except_table : { *(.gcc_except_table .gcc_except_table.*) }
}
INSERT AFTER .rodata;""")
print(f"hot-code.sh: {len(hot)} serving, {len(rest)} startup and failure functions in link/hot.ld", file=sys.stderr)
PY
