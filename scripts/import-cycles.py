#!/usr/bin/env python3
"""Import cycles between sibling modules, for every crate under crates/.

A cycle is a ring of modules that share a parent and use each other, directly
or around the ring (a.rs uses b, b.rs uses a). A use from deep inside a module
counts for the module at the level where the two meet: gateway/start.rs using
crate::control::socket is gateway using control. Uses of a module's own ancestors (a
child reaching `super::` for a helper of its parent) are not between siblings
and do not count.

Prints each cycle as its members and the count; with --max N exits 1 when there
are more than N, so `make lint` fails on a new one. Reads source only.
"""

import argparse
import os
import re
import sys

USE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);", re.S)
INLINE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
# Strings, characters and comments, in one pass so that each hides the others
# ("//" in a string, a quote in a comment).
NOT_CODE = re.compile(
    r'\br(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\'\\])\'|//[^\n]*|/\*.*?\*/', re.S
)


def module_files(src):
    """{module path tuple: file} for every file under src (a crate's root)."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main") and len(parts) >= 1:
                parts = parts[:-1]
            if parts and parts[0] == "bin":
                continue  # separate crates of their own
            mods[tuple(parts)] = os.path.join(dirpath, f)
    return mods


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(text[start:i])
                start = i + 1
        items.append(text[start:])
        for item in items:
            if not item:
                continue
            brace = item.find("{")
            if brace >= 0 and item.endswith("}"):
                head = item[:brace].rstrip(":")
                walk(prefix + ([head] if head else []), item[brace + 1 : -1])
            else:
                out.append("::".join(prefix + [item.split(" as ")[0]]))

    walk([], tree)
    return out


def resolve(module, is_dir_module, path):
    """An absolute module path for `path` as written in `module`'s file."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = [], parts[1:]
    else:
        base = list(module)
        rest = parts
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    return tuple(base + [p for p in rest if p not in ("self", "*")])


def deepest_module(target, mods):
    for n in range(len(target), -1, -1):
        if target[:n] in mods:
            return target[:n]
    return ()


def crate_cycles(src):
    mods = module_files(src)
    edges = {}  # parent -> {child: set(child)}
    why = {}  # (parent, child, child) -> the paths that make the edge
    for module, path in mods.items():
        text = open(path, encoding="utf-8").read()
        text = NOT_CODE.sub(" ", text)
        is_dir = os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs")
        paths = []
        for m in USE.finditer(text):
            paths += expand(m.group(1))
        paths += [m.group(1) for m in INLINE.finditer(text)]
        for p in paths:
            target = deepest_module(resolve(module, is_dir, p), mods)
            n = 0
            while n < min(len(module), len(target)) and module[n] == target[n]:
                n += 1
            if n >= len(module) or n >= len(target):
                continue  # an ancestor or a descendant, not a sibling
            parent = module[:n]
            edges.setdefault(parent, {}).setdefault(module[n], set()).add(target[n])
            why.setdefault((parent, module[n], target[n]), set()).add(
                f"{os.path.relpath(path, src)}: {p}"
            )
    cycles = []
    for parent, graph in edges.items():
        for scc in strongly_connected(graph):
            if len(scc) > 1:
                inside = [
                    (a, b, sorted(why[(parent, a, b)]))
                    for a in sorted(scc)
                    for b in sorted(graph.get(a, ()))
                    if b in scc
                ]
                cycles.append((parent, sorted(scc), inside))
    return cycles


def strongly_connected(graph):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    n = stack.pop()
                    on.discard(n)
                    scc.append(n)
                    if n == node:
                        break
                out.append(scc)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "crates"))
    ap.add_argument("--max", type=int, help="exit 1 when there are more cycles than this")
    ap.add_argument("--why", action="store_true", help="print each cycle's edges and the uses behind them")
    args = ap.parse_args()
    total = 0
    for crate in sorted(os.listdir(args.root)):
        src = os.path.join(args.root, crate, "src")
        if not os.path.isdir(src):
            continue
        for parent, members, inside in crate_cycles(src):
            where = "/".join((crate, "src") + parent)
            print(f"{where}/{{{','.join(members)}}}")
            if args.why:
                for a, b, uses in inside:
                    print(f"    {a} -> {b}: " + "; ".join(uses[:4]) + (" ..." if len(uses) > 4 else ""))
            total += 1
    print(f"{total} import cycle{'s' if total != 1 else ''} between sibling modules")
    if args.max is not None and total > args.max:
        print(f"more than {args.max}: break the new one", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
