#!/usr/bin/env python3
"""file_graph.py — the files of one folder of C code as rooms, calls as arrows.

An arrow A -> B means a function defined in B is named in A (called, or taken as a
pointer). Files are then layered: a circle (strongly connected files, found with Tarjan's
algorithm) is one room of the condensed graph, and a room's level is 0 when it calls no
other room of the folder, else 1 + the highest level it calls. Arrows inside a circle are
the ones "running back up": no layering can put both ends of them in order.

  python3 tools/file_graph.py hlojit_impl/emitters [--also backends/cuda] [--dot]

prints the levels, every circle with its files, and the arrows inside circles; --also
adds another folder's files (arrows into and out of it count too); --dot writes Graphviz
text instead. Read from the source text (comments stripped), no compiler needed: a name
defined in two files (static helpers of the same name) links to neither."""
import argparse
import collections
import pathlib
import re
import sys

DEF = re.compile(r"^(?:static\s+|inline\s+|extern\s+)*[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def definitions(code):
    """Names of the functions |code| defines (a '{' comes before any ';' after the name)."""
    out = set()
    for m in DEF.finditer(code):
        rest = code[m.end():]
        semi, brace = rest.find(";"), rest.find("{")
        if brace >= 0 and (semi < 0 or brace < semi) and m.group(1) not in ("if", "for", "while", "switch", "return"):
            out.add(m.group(1))
    return out


def graph(files):
    code = {f: strip(f.read_text()) for f in files}
    owner = collections.defaultdict(set)
    for f, c in code.items():
        for name in definitions(c):
            owner[name].add(f)
    edges = collections.defaultdict(set)
    for f, c in code.items():
        for name in set(IDENT.findall(c)):
            fs = owner.get(name)
            if fs and len(fs) == 1:
                (g,) = fs
                if g != f:
                    edges[f].add(g)
    return edges


def tarjan(nodes, edges):
    index, low, on, stack, comps, n = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
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
            comps.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--also", action="append", default=[])
    ap.add_argument("--dot", action="store_true")
    a = ap.parse_args()
    files = sorted(pathlib.Path(a.folder).glob("*.c"))
    for extra in a.also:
        files += sorted(pathlib.Path(extra).glob("*.c"))
    edges = graph(files)
    comps = tarjan(files, edges)
    comp_of = {f: i for i, c in enumerate(comps) for f in c}
    level = {}
    for i, c in enumerate(comps):   # Tarjan emits callees' rooms before their callers'
        outs = {comp_of[g] for f in c for g in edges.get(f, ()) if comp_of[g] != i}
        level[i] = 1 + max((level[j] for j in outs), default=-1)
    name = lambda f: f.as_posix()
    if a.dot:
        print("digraph files {")
        for f in files:
            for g in sorted(edges.get(f, ())):
                print(f'  "{name(f)}" -> "{name(g)}";')
        print("}")
        return
    circles = [c for c in comps if len(c) > 1]
    inside = [(f, g) for f in files for g in sorted(edges.get(f, ())) if comp_of[f] == comp_of[g]]
    nlevels = 1 + max(level.values(), default=-1)
    print(f"{len(files)} files, {sum(len(v) for v in edges.values())} arrows, {nlevels} levels, "
          f"{len(circles)} circle(s) of {sum(len(c) for c in circles)} files, {len(inside)} arrows inside circles")
    for lv in range(nlevels):
        print(f"  level {lv}: " + " ".join(sorted(name(f).split("/")[-1] for i, c in enumerate(comps)
                                                 if level[i] == lv for f in c)))
    for c in circles:
        print("  circle: " + " ".join(sorted(name(f).split("/")[-1] for f in c)))
    for f, g in inside:
        print(f"  arrow inside a circle: {name(f)} -> {name(g)}")


if __name__ == "__main__":
    main()
