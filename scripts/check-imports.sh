#!/usr/bin/env bash
# Finds import circles between the library's source files, and exits 1 when there is one.
#
# Usage: scripts/check-imports.sh [--src DIR] [--edges] [PATH...]
#   --src DIR  the crate's source directory (default: src); DIR/lib.rs is the root.
#   --edges    also print every import between files that the check counts.
#   PATH...    report only the circles that pass through a file under one of these paths
#              (`scripts/check-imports.sh src/registry src/route`); default: all of them.
#
# What is read: every file reachable from lib.rs through `mod name;` declarations (a file
# declared under `#[cfg(test)]`, and everything inside a `#[cfg(test)]` item, is left out:
# tests may import anything). Module paths map to files as the compiler does without
# mod.rs: `src/a.rs` is `crate::a`, `src/a/b.rs` is `crate::a::b`. A file imports another
# when it names an item there: in a `use` declaration (`use crate::a::b::X`, `use
# super::x::{self, Y}`, `use child::Z`) or in a path in code (`crate::a::f()`,
# `super::x::Y`, `child::f()`, `alias::f()` after `use crate::a as alias`). A path leads to
# the deepest module file it names; a re-export counts as an import of the re-exporting
# file. A `mod child;` declaration alone is not an import.
#
# The rule: a module and its own submodules are one unit. At every level of the module tree
# (the crate's top-level modules; the children of one module), the units side by side must
# not import each other in a circle. An import from file X to file Y counts between the two
# units under their nearest common module that hold X and Y: `src/a/b/c.rs` naming
# `crate::a::d` is `a::b -> a::d`, and `src/a/b.rs` naming `crate::e::f` is `a -> e`. An
# import between a file and its own ancestor or descendant (a child using its parent's types
# through `super::`, a parent calling or re-exporting its child) stays inside one unit and
# never counts. A circle is a strongly connected component of more than one unit at one
# level; each is printed with the imports that make it, file and line.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os
import re
import sys

args = sys.argv[1:]
src, show_edges, only = "src", False, []
while args:
    a = args.pop(0)
    if a == "--src" and args:
        src = args.pop(0)
    elif a == "--edges":
        show_edges = True
    elif a.startswith("-"):
        sys.exit(f"check-imports: unknown option {a}")
    else:
        only.append(a.rstrip("/"))
src = src.rstrip("/")


def blank(text):
    """The text with comments, strings and char literals replaced by spaces (lines kept)."""
    out, i, n = [], 0, len(text)
    keep = lambda s: "".join(c if c == "\n" else " " for c in s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(keep(text[i:j])); i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j): depth, j = depth + 1, j + 2
                elif text.startswith("*/", j): depth, j = depth - 1, j + 2
                else: j += 1
            out.append(keep(text[i:j])); i = j
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(keep(text[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(keep(text[i:j + 1])); i = j + 1
        elif c == "'" and (m := re.compile(r"'(\\.[^']*|[^\\'])'").match(text, i)):
            out.append(keep(m.group(0))); i = m.end()
        else:
            out.append(c); i += 1
    return "".join(out)


def item_end(text, i):
    """Where the item starting at i ends: after its `;` or its balanced `{...}`."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "{": depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0: return i + 1
        elif c == ";" and depth == 0: return i + 1
        i += 1
    return i


def use_end(text, i):
    """Where the use declaration whose tree starts at i ends: after its `;`."""
    depth = 0
    while i < len(text):
        depth += text[i] == "{"
        depth -= text[i] == "}"
        if text[i] == ";" and depth == 0:
            return i + 1
        i += 1
    return i


CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ATTR = re.compile(r"\s*#\[[^\]]*\]")
MOD_DECL = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
USE = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?use\s+")
PATH = re.compile(r"(?<![\w:])([A-Za-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)+)")


def without_tests(text):
    """The text with every `#[cfg(test)]` item blanked; the names of test-only child mods."""
    tests = set()
    while (m := CFG_TEST.search(text)):
        i = m.end()
        while (a := ATTR.match(text, i)):
            i = a.end()
        if (d := re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").match(text, i)):
            tests.add(d.group(1))
        j = item_end(text, i)
        text = text[:m.start()] + "".join(c if c == "\n" else " " for c in text[m.start():j]) + text[j:]
    return text, tests


def parse_use(raw):
    """The use tree of one declaration, with `as` aliases kept: [(segments, bound name)]."""
    raw = re.sub(r"\s+as\s+", " as ", raw.strip())
    out = []

    def walk(s, prefix):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur); cur = ""; continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for p in (x.strip() for x in parts):
            if not p:
                continue
            if "{" in p:
                head, rest = p.split("{", 1)
                inner = rest.strip()[:-1] if rest.strip().endswith("}") else rest
                walk(inner, prefix + [x.strip() for x in head.split("::") if x.strip()])
                continue
            name, _, alias = p.partition(" as ")
            segs = prefix + [x.strip() for x in name.split("::") if x.strip()]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            bound = alias.strip() or (segs[-1] if segs else "")
            out.append((segs, bound))
    walk(raw, [])
    return out


# === the module tree, from lib.rs down ===
files = {}  # module path (tuple) -> file
texts = {}  # file -> code text (comments, strings and test items blanked)
children = {}  # file -> names of its non-test child mods


def file_of(mod):
    if not mod:
        return f"{src}/lib.rs"
    for cand in (f"{src}/{'/'.join(mod)}.rs", f"{src}/{'/'.join(mod)}/mod.rs"):
        if os.path.isfile(cand):
            return cand
    return None


todo = [()]
while todo:
    mod = todo.pop()
    path = file_of(mod)
    if path is None:
        continue
    with open(path, encoding="utf-8") as f:
        text, tests = without_tests(blank(f.read()))
    files[mod], texts[path] = path, text
    kids = [k for k in MOD_DECL.findall(text) if k not in tests]
    children[path] = set(kids)
    todo.extend(mod + (k,) for k in kids)
module_of = {f: m for m, f in files.items()}


def resolve(mod, segs, aliases, kids):
    """The file a path written in module `mod` leads to, or None (outside the crate)."""
    if not segs:
        return None
    head, rest = segs[0], list(segs[1:])
    if head == "crate":
        base = ()
    elif head in ("self", "super"):
        base = mod
        while head in ("self", "super"):
            if head == "super":
                base = base[:-1]
            if not rest:
                break
            head = rest.pop(0) if rest[0] in ("self", "super") else None
            if head is None:
                break
    elif head in kids:
        base, rest = mod + (head,), rest
    elif head in aliases:
        base = aliases[head]
    else:
        return None
    full = base + tuple(r for r in rest if r not in ("self", "super", "*"))
    for n in range(len(full), -1, -1):
        if full[:n] in files:
            return files[full[:n]]
    return None


# === imports between files ===
edges = {}  # (from file, to file) -> (line, path as written)
for path, text in texts.items():
    mod, kids, aliases = module_of[path], children[path], {}
    line_of = lambda at: text.count("\n", 0, at) + 1
    code = text
    uses = []
    for m in USE.finditer(text):
        end = use_end(text, m.end())
        uses.append((m.start(), m.end(), end))
    for start, body, end in uses:
        for segs, bound in parse_use(text[body:end - 1]):
            target = resolve(mod, segs, aliases, kids)
            if target is None:
                continue
            full_mod = module_of[target]
            if bound and bound != "*" and segs and segs[-1] != "*":
                # `use crate::a::b;` binds `b` to a module when the path ends at one.
                tail = resolve(mod, segs, {}, kids)
                if tail and len(module_of[tail]) and module_of[tail][-1] == segs[-1]:
                    aliases[bound] = module_of[tail]
            if target != path:
                edges.setdefault((path, target), (line_of(start), "::".join(segs)))
    for start, _, end in uses:
        code = code[:start] + " " * (end - start) + code[end:]
    for m in PATH.finditer(code):
        segs = [m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()]
        target = resolve(mod, segs, aliases, kids)
        if target is not None and target != path:
            edges.setdefault((path, target), (line_of(m.start()), "::".join(segs)))

if show_edges:
    for (a, b), (line, written) in sorted(edges.items()):
        print(f"{a}:{line} -> {b}   ({written})")

# === units side by side at each level, and their circles ===
levels = {}  # level -> {unit: {unit: [(file, line, to file, path)]}}
for (a, b), (line, written) in edges.items():
    ma, mb = module_of[a], module_of[b]
    n = 0
    while n < min(len(ma), len(mb)) and ma[n] == mb[n]:
        n += 1
    if n == len(ma) or n == len(mb):
        continue  # a file and its own ancestor: one unit
    level, ua, ub = ma[:n], ma[: n + 1], mb[: n + 1]
    levels.setdefault(level, {}).setdefault(ua, {}).setdefault(ub, []).append((a, line, b, written))


def sccs(graph):
    """Tarjan's strongly connected components of a {node: {node: ...}} graph."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    nodes = set(graph) | {w for v in graph.values() for w in v}

    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


name = lambda m: "crate::" + "::".join(m) if m else "crate"
found = 0
for level in sorted(levels):
    graph = levels[level]
    for comp in sccs(graph):
        if len(comp) < 2:
            continue
        inside = set(comp)
        witnesses = [w for u in comp for v, ws in sorted(graph.get(u, {}).items()) if v in inside for w in ws]
        if only and not any(f.startswith(p + "/") or f == p or f.startswith(p + ".") for w in witnesses for f in (w[0], w[2]) for p in only):
            continue
        found += 1
        print(f"circle in {name(level)}: " + " <-> ".join(m[-1] for m in comp))
        for a, line, b, written in sorted(witnesses):
            print(f"  {a}:{line} -> {b}   ({written})")
if found:
    print(f"check-imports: {found} circle(s) between files", file=sys.stderr)
    sys.exit(1)
print(f"check-imports: no circles between the {len(files)} files read")
PY
