#!/usr/bin/env python3
"""check_cycles.py - no two source files call each other in a circle.

    check_cycles.py [--skip NAME] NAME=OBJ[:OBJ...] ...

Reads the symbol tables (nm) of every object, draws an edge from a file to
each other file that defines a function or variable it uses, and prints
every strongly connected set of more than one file, with the symbols of
each edge inside it; exits 1 when there is one. Floors named by --skip
(base/, whose helpers call one another by design) take no part. A circle
means neither file can be read, changed or moved without the other: the
rooms rule (docs/ARCHITECTURE.md) wants each function in the file that
owns its data.
"""
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDRBVW":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main(argv):
    skip = set()
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--skip" and i + 1 < len(argv):
            skip.add(argv[i + 1])
            i += 2
            continue
        args.append(argv[i])
        i += 1
    owner, uses = {}, {}
    for arg in args:
        floor, _, objs = arg.partition("=")
        if floor in skip:
            continue
        for obj in filter(None, objs.split(":")):
            # CMake names an object after its source: group.c.o.
            name = "%s/%s" % (floor, obj.rsplit("/", 1)[-1][:-2])
            defined, used = symbols(obj)
            for s in defined:
                owner[s] = name
            uses[name] = used
    edges = {n: {} for n in uses}
    for n, used in uses.items():
        for s in used:
            o = owner.get(s)
            if o and o != n:
                edges[n].setdefault(o, []).append(s)
    bad = [c for c in components(sorted(uses), edges) if len(c) > 1]
    for comp in bad:
        print("circle: " + ", ".join(comp))
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    print("  %s -> %s: %s" % (a, b,
                                              " ".join(sorted(edges[a][b]))))
    if not bad:
        print("no circles among %d files" % len(uses))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
