#!/usr/bin/env python3
"""Holds an analyser's own files to the layers docs/CORE.md gives them,
read off the built objects as check.py does for the core.

usage: plugin_layers.py PLUGIN CORE_MD KNOWN OBJECT...

The objects of plugins/PLUGIN/ are read with nm: a file calls another when
its object references a symbol the other's defines. CORE_MD names the
analyser's layers, lowest first, in a table whose header is
"| PLUGIN layer | files |" (each file, without .c, in one row), and holds
one row per file in a table "| PLUGIN file | holds |". A call from a file
into one of a later layer goes up: it fails the check unless KNOWN lists
it ("a -> b", file names without .c), and a line of KNOWN that no longer
goes up fails too, so the list only shrinks. A file in no layer, in two,
or with no row fails, as does a row or a layer entry for a file that is
not built. The files that call each other in a circle (the strongly
connected components of the call graph) are printed, not checked.
"""
import os
import sys

# The objects' symbols and the markdown tables are read as check.py reads
# them for the core.
from check import calls, md_table, names_in, nm


def components(nodes, edges):
    """The strongly connected components of the graph (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(d for (s, d) in edges if s == v):
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
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(comps, key=lambda c: (-len(c), c))


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    plugin, doc, known_path = sys.argv[1:4]
    folder = "plugins/%s/" % plugin
    objs = [o for arg in sys.argv[4:] for o in arg.split(";")
            if folder in o and o.endswith(".c.o")]
    refs, owner = {}, {}
    for obj in objs:
        name = os.path.basename(obj)[:-len(".c.o")]
        defined, undefined = nm(obj)
        for sym in defined:
            owner[sym] = name
        refs[name] = undefined
    if not refs:
        print("FAIL: no object of %s among the objects given" % folder)
        return 1
    edges = calls(refs, owner)

    failed = False

    def bad(msg):
        nonlocal failed
        print("FAIL: " + msg)
        failed = True

    try:
        lines = open(doc).read().splitlines()
    except OSError as e:
        print("FAIL: cannot read %s: %s" % (doc, e))
        return 1
    known = set()
    for line in open(known_path):
        line = line.split("#", 1)[0].strip()
        if line:
            src, _, dst = line.partition("->")
            known.add((src.strip(), dst.strip()))

    layers, where = [], {}
    table = md_table(lines, ["%s layer" % plugin, "files"])
    if not table:
        bad("%s: no table of %s's layers (a header row '| %s layer | "
            "files |')" % (doc, plugin, plugin))
        table = []
    for lineno, cells in table:
        if len(cells) != 2:
            bad("%s:%d: a layer row has 2 cells, not %d" %
                (doc, lineno, len(cells)))
            continue
        layer = cells[0].strip("` ")
        layers.append(layer)
        for f in sorted(names_in(cells[1])):
            if f in where:
                bad("%s:%d: %s is in layer %s already" %
                    (doc, lineno, f, layers[where[f]]))
            elif f not in refs:
                bad("%s:%d: layer %s lists %s, which is no object of %s "
                    "(renamed or removed? then so must it be here)" %
                    (doc, lineno, layer, f, folder))
            else:
                where[f] = len(layers) - 1
    for f in sorted(set(refs) - set(where)):
        bad("%s: %s%s.c is in no layer of %s: add it to the row of its "
            "layer in the table '| %s layer | files |'" %
            (doc, folder, f, plugin, plugin))

    rows = md_table(lines, ["%s file" % plugin, "holds"])
    if not rows:
        bad("%s: no table of %s's files (a header row '| %s file | holds "
            "|')" % (doc, plugin, plugin))
        rows = []
    seen = {}
    for lineno, cells in rows:
        f = cells[0].strip("` ")
        f = f[:-len(".c")] if f.endswith(".c") else f
        if f in seen:
            bad("%s:%d: a second row for %s (first at line %d)" %
                (doc, lineno, f, seen[f]))
        elif f not in refs:
            bad("%s:%d: a row for %s, which is no object of %s" %
                (doc, lineno, f, folder))
        seen[f] = lineno
    for f in sorted(set(refs) - set(seen)):
        bad("%s: no row for %s%s.c: add | `%s` | what it holds | to the "
            "table '| %s file | holds |'" % (doc, folder, f, f, plugin))

    print("%s's layers (lowest first; a file calls into its own layer and "
          "those listed before it):" % plugin)
    for i, layer in enumerate(layers):
        print("  %-12s %s" % (layer, " ".join(
            sorted(f for f in where if where[f] == i))))
    up = {e: syms for e, syms in edges.items()
          if e[0] in where and e[1] in where and where[e[1]] > where[e[0]]}
    print("Calls that go up a layer (%d file pairs):" % len(up))
    for (src, dst) in sorted(up):
        new = (src, dst) not in known
        print("  %-5s %s (%s) -> %s (%s): %s" % (
            "NEW" if new else "known", src, layers[where[src]], dst,
            layers[where[dst]], " ".join(sorted(up[(src, dst)])[:6])))
        if new:
            failed = True
    for src, dst in sorted(known - set(up)):
        bad("%s -> %s is listed in %s but no longer goes up: remove it "
            "from the list" % (src, dst, known_path))
    comps = components(refs, edges)
    print("Files that call each other in a circle: %s" % ("; ".join(
        "%d: %s" % (len(c), " ".join(c)) for c in comps if len(c) > 1)
        or "none"))
    if failed:
        print("FAIL: a call goes up a layer of %s (see NEW above), the "
              "list %s is stale, or %s says otherwise than the objects" %
              (plugin, known_path, doc))
        return 1
    print("%s layering: ok" % plugin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
