#!/usr/bin/env python3
"""List the Rust functions longer than a limit (default 80 lines) outside tests.

Usage: scripts/long_functions.py [--max N] [--skip DIR]... [--report-only] [ROOT...]

ROOT defaults to src/ and crates/ of the repository. A function's length is counted from the
line of its `fn` keyword to the line of its closing brace, both included (attributes and doc
comments above it are not counted). Test code is skipped: files named tests.rs, tests_*.rs or
*_tests.rs, files under a tests/ or benches/ folder, a `#[cfg(test)]` module's body and a
`#[test]` function. Each function found is printed as `path:line: name (N lines)`, longest
first; the exit status is 1 when there is one (0 with --report-only), 2 on bad arguments.

--skip DIR leaves out the files under DIR (a path relative to the repository, e.g. src/crash):
for folders whose owners are still splitting their functions; CI runs without it.
"""

import os
import re
import sys

# Functions allowed to stay longer than the limit, each with the reason it is one step.
# Keep it empty unless a function truly cannot be split where a step has a name.
ALLOWED = {}


def strip(text):
    """The text with comments, strings and character literals blanked (newlines kept), so that
    braces and keywords are only code's."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = len(re.match(r'r(#*)"', text[i:]).group(1))
            end = '"' + "#" * hashes
            j = text.find(end, i + 2 + hashes)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_file(path):
    parts = path.replace(os.sep, "/").split("/")
    name = parts[-1]
    return (
        name == "tests.rs"
        or name.startswith("tests_")
        or name.endswith("_tests.rs")
        or "tests" in parts[:-1]
        or "benches" in parts[:-1]
    )


def matching(code, open_at):
    """Index of the brace closing the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")
TEST_FN = re.compile(r"#\[(test|cfg\(test\))\]")


def long_functions(path, limit):
    with open(path, encoding="utf-8") as f:
        code = strip(f.read())
    line_of = lambda k: code.count("\n", 0, k) + 1
    # Spans of test code: `#[cfg(test)] mod x { ... }` bodies.
    skip = []
    for m in TEST_MOD.finditer(code):
        skip.append((m.start(), matching(code, m.end() - 1)))
    found = []
    for m in FN.finditer(code):
        start = m.start()
        if any(a <= start <= b for a, b in skip):
            continue
        # The body: the first `{` after the signature, unless a `;` ends it first (a trait
        # method without a body, an extern declaration).
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        # `#[test]` or `#[cfg(test)]` among the attributes above (since the previous item's end).
        head = code[max(code.rfind("}", 0, start), code.rfind(";", 0, start)) + 1 : start]
        if TEST_FN.search(head):
            continue
        end = matching(code, brace)
        lines = line_of(end) - line_of(start) + 1
        if lines > limit:
            found.append((lines, path, line_of(start), m.group(1)))
    return found


def main(argv):
    limit, skips, report_only, roots = 80, [], False, []
    args = iter(argv)
    for a in args:
        if a == "--max":
            v = next(args, "")
            if not v.isdigit() or int(v) < 1:
                print(f"--max {v}: expected a number of lines, 1 or more", file=sys.stderr)
                return 2
            limit = int(v)
        elif a == "--skip":
            v = next(args, None)
            if not v:
                print("--skip: expected a folder, e.g. src/crash", file=sys.stderr)
                return 2
            skips.append(v.rstrip("/"))
        elif a == "--report-only":
            report_only = True
        elif a.startswith("-"):
            print(f"{a}: unknown option; allowed: --max N, --skip DIR, --report-only", file=sys.stderr)
            return 2
        else:
            roots.append(a)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(repo)
    roots = roots or ["src", "crates"]
    for r in roots:
        if not os.path.isdir(r):
            print(f"{r}: no such folder in the repository", file=sys.stderr)
            return 2
    found = []
    for r in roots:
        for d, dirs, files in os.walk(r):
            dirs[:] = sorted(x for x in dirs if x not in ("target", ".git"))
            for f in sorted(files):
                p = os.path.join(d, f)
                if not f.endswith(".rs") or test_file(p):
                    continue
                if any(p == s or p.startswith(s + "/") for s in skips):
                    continue
                found += [x for x in long_functions(p, limit) if (x[1], x[3]) not in ALLOWED]
    found.sort(key=lambda x: (-x[0], x[1], x[2]))
    for lines, p, line, name in found:
        print(f"{p}:{line}: {name} ({lines} lines)")
    if found:
        print(f"{len(found)} function(s) over {limit} lines outside tests", file=sys.stderr)
    return 1 if found and not report_only else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
