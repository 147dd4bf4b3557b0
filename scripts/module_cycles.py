#!/usr/bin/env python3
"""Check that the modules of src/ import each other without cycles, at every level.

Usage: scripts/module_cycles.py [--skip DIR]... [--report-only]

The graph is built per folder: its nodes are the folder's child modules (files and
sub-folders), and child `a` depends on child `b` when code of `a` (any file below it) names an
item of `b` (`crate::x::b::...`, `super::b::...`, `use` groups included). A parent's own
`mod.rs` (or `x.rs` beside folder `x/`) is the folder itself, not a child: children may use
what it declares and it may re-export theirs. The crate root's children are the top-level
modules. Test code is skipped (files named tests.rs, tests_*.rs, *_tests.rs, and everything
after `#[cfg(test)]` in a file).

Each cycle found is printed as `folder: a -> b -> a (a: file naming b, ...)`; the exit status is
1 when there is one (0 with --report-only), 2 on bad arguments. --skip DIR leaves out the cycles
between the children of DIR (e.g. src/crash), for folders whose owners are still untangling
them; CI runs without it.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from long_functions import strip  # noqa: E402

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_path(rel):
    """`src`-relative file -> module path (`crash/cores.rs` -> [crash, cores])."""
    parts = rel.replace(os.sep, "/")[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return []
    return parts


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]] (aliases and globs dropped)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree))
    out = []

    def walk(prefix, t):
        if not t:
            return
        if "{" not in t.split("::")[-1] and "{" not in t:
            out.append(prefix + [p for p in t.split("::") if p and p != "*"])
            return
        head, _, rest = t.partition("{")
        head_parts = [p for p in head.split("::") if p]
        inner = rest[: rest.rfind("}")]
        depth, start = 0, 0
        for i, ch in enumerate(inner + ","):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                walk(prefix + head_parts, inner[start:i])
                start = i + 1

    walk([], tree)
    return out


def references(code):
    """Every path the code names, as a list of segments starting with crate/super/self."""
    refs = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        refs += expand_use(m.group(1))
    no_use = re.sub(r"\buse\s+[^;]+;", "", code)
    for m in re.finditer(r"\b(?:crate|super|self)(?:::(?:%s))+" % IDENT, no_use):
        refs.append(m.group(0).split("::"))
    return [r for r in refs if r and r[0] in ("crate", "super", "self")]


def resolve(here, is_dir_module, ref, modules):
    """The longest module path `ref` names from module `here`, or None."""
    if ref[0] == "crate":
        base, rest = [], ref[1:]
    else:
        # In `x/mod.rs` or `x.rs` with children, `self` is `x` and `super` its parent; the same
        # holds for a plain file.
        base = list(here)
        rest = ref
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                if not base:
                    return None
                base = base[:-1]
            rest = rest[1:]
    path = base
    for seg in rest:
        if tuple(path + [seg]) in modules:
            path = path + [seg]
        else:
            break
    return path


def test_file(rel):
    name = os.path.basename(rel)
    return name == "tests.rs" or name.startswith("tests_") or name.endswith("_tests.rs") or "/tests/" in "/" + rel


def graph(src):
    files = []
    for d, dirs, fs in os.walk(src):
        dirs.sort()
        for f in sorted(fs):
            if f.endswith(".rs"):
                files.append(os.path.relpath(os.path.join(d, f), src))
    modules = {tuple(module_path(f)) for f in files}
    # Folders are modules too (a folder with only mod.rs is covered above).
    for f in files:
        parts = module_path(f)
        for k in range(1, len(parts)):
            modules.add(tuple(parts[:k]))
    edges = {}  # folder -> {a: {b: set(files)}}
    for f in files:
        if test_file(f):
            continue
        with open(os.path.join(src, f), encoding="utf-8") as fh:
            code = strip(fh.read()).split("#[cfg(test)]")[0]
        here = module_path(f)
        for ref in references(code):
            target = resolve(here, f.endswith("mod.rs"), ref, modules)
            if target is None:
                continue
            k = 0
            while k < len(here) and k < len(target) and here[k] == target[k]:
                k += 1
            if k < len(here) and k < len(target):
                folder = "/".join(["src"] + here[:k])
                edges.setdefault(folder, {}).setdefault(here[k], {}).setdefault(target[k], set()).add("src/" + f)
    return edges


def cycles(g):
    """Strongly connected components with more than one node (Tarjan), each as one cycle."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, {})):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            connect(v)
    return out


def one_cycle(g, comp):
    """A path through the component that returns to its first node."""
    comp = set(comp)
    start = min(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in g.get(path[-1], {}) if w in comp)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return path + [start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            return path + [start]
        path.append(fresh[0])
        seen.add(fresh[0])


def self_test():
    """The cycle finder on a graph with one cycle (b -> c -> d -> b) and one without."""
    g = {"a": {"b": {"a.rs"}}, "b": {"c": {"b.rs"}}, "c": {"d": {"c.rs"}}}
    assert cycles(g) == [], cycles(g)
    g["d"] = {"b": {"d.rs"}}
    assert cycles(g) == [["b", "c", "d"]], cycles(g)
    assert one_cycle(g, ["b", "c", "d"]) == ["b", "c", "d", "b"]
    assert expand_use("crate::a::{b, c::{hash, e as f}}") == [["crate", "a", "b"], ["crate", "a", "c", "hash"], ["crate", "a", "c", "e"]]
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    skips, report_only = [], False
    args = iter(argv)
    for a in args:
        if a == "--skip":
            v = next(args, None)
            if not v:
                print("--skip: expected a folder, e.g. src/crash", file=sys.stderr)
                return 2
            skips.append(v.rstrip("/"))
        elif a == "--report-only":
            report_only = True
        else:
            print(f"{a}: unknown argument; allowed: --skip DIR, --report-only", file=sys.stderr)
            return 2
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    edges = graph("src")
    found = 0
    for folder in sorted(edges):
        if folder in skips:
            continue
        g = edges[folder]
        for comp in cycles(g):
            path = one_cycle(g, comp)
            why = ", ".join(f"{a} -> {b}: {sorted(g[a][b])[0]}" for a, b in zip(path, path[1:]) if b in g.get(a, {}))
            print(f"{folder}: import cycle {' -> '.join(path)} ({why})")
            found += 1
    if found:
        print(f"{found} import cycle(s) inside src/", file=sys.stderr)
    return 1 if found and not report_only else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
