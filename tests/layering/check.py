#!/usr/bin/env python3
"""Holds the core to its layers and docs/CORE.md to the core, both read off
the built objects.

usage: check.py LAYERS KNOWN CORE_MD OBJECT...

Each object's undefined symbols are matched with the object that defines
them (nm), which gives the calls (and data references) between source
files. A file of proxyd/FOLDER/ is in layer FOLDER, one of proxyd/ itself
in layer top; LAYERS orders the layers and places the files outside
proxyd/ (the registry, the analysers). A reference from a file to one in
a later layer goes up, and one from an analyser to another goes across:
either fails the check, an upward one unless KNOWN lists it (a listed edge
that no longer exists fails too, so the list only shrinks).

Then CORE_MD (docs/CORE.md) must say what the objects say:
  - its module table (| module | holds | uses |) has one row per module of
    the core (a .c file of proxyd/, and the registry), and each row's
    "uses" lists exactly the core modules that module references
    (comma-separated; "(...)" remarks ignored; "-" for none); a row whose
    module is a header (`bucket.h`) describes a header alone: not checked;
  - its layer table (| layer | files |) lists each core layer's modules;
  - its sentence "The modules that call each other: a <-> b, ..." names
    every pair of core modules that reference each other.
A difference fails the check with the row to add or the cell to change.
"""
import fnmatch
import os
import re
import subprocess
import sys


def read_layers(path):
    layers = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, files = line.partition(":")
        layers.append((name.strip(), files.split()))
    return layers


def source_path(obj):
    """build/CMakeFiles/px_net.dir/proxyd/net/conn.c.o -> proxyd/net/conn.c"""
    path = obj.split("CMakeFiles/", 1)[-1]
    path = path.split("/", 1)[1] if "/" in path else path
    return path[:-len(".o")] if path.endswith(".o") else path


def source_folder(path):
    """The layer a core file's folder names: proxyd/net/conn.c -> net,
    proxyd/main.c -> top; None outside proxyd/."""
    if not path.startswith("proxyd/"):
        return None
    parts = path.split("/")
    return parts[1] if len(parts) == 3 else "top"


def source_name(path):
    """plugins/http/http.c -> plugins/http/http; proxyd/net/conn.c -> conn;
    the generated registry.c -> registry"""
    path = path[:-len(".c")] if path.endswith(".c") else path
    if path.startswith("proxyd/") or "/" not in path:
        path = os.path.basename(path)
    return path


def is_core(name):
    return not name.startswith("plugins/")


def layer_of(name, folder, layers):
    for i, (_, patterns) in enumerate(layers):
        if any(fnmatch.fnmatch(name, p) for p in patterns):
            return i
    for i, (layer, _) in enumerate(layers):
        if layer == folder:
            return i
    return None


def nm(obj):
    out = subprocess.run(["nm", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVWG":
            defined.add(parts[2])
    return defined, undefined


def calls(refs, owner):
    """{(a, b): the symbols a references that b defines}, from each file's
    undefined symbols (REFS) and the file that defines each (OWNER)."""
    edges = {}
    for src, undefined in refs.items():
        for sym in undefined:
            dst = owner.get(sym)
            if dst is not None and dst != src:
                edges.setdefault((src, dst), set()).add(sym)
    return edges


def md_cells(line):
    """| a | b \\| c | -> [a, b | c] (an escaped bar is text)"""
    return [c.strip().replace("\\|", "|") for c in
            re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def md_table(lines, header):
    """The rows (lists of cells) of the markdown table whose header row's
    cells are HEADER, with the line number of each."""
    rows = []
    for i, line in enumerate(lines):
        if line.startswith("|") and md_cells(line) == header:
            for j in range(i + 2, len(lines)):
                if not lines[j].startswith("|"):
                    break
                rows.append((j + 1, md_cells(lines[j])))
            break
    return rows


def names_in(cell):
    """`cfgread`, parse (the readers) -> {cfgread, parse}; "-" -> {}"""
    prev = None
    while prev != cell:
        prev, cell = cell, re.sub(r"\([^()]*\)", "", cell)
    words = [w.strip("` ") for w in re.split(r"[,\s]+", cell)]
    return {w for w in words if w and w not in ("-", "–")}


def check_doc(doc, core, uses, layer_name, paths):
    """Fails (returns False) on each difference between DOC and the objects."""
    ok = True
    try:
        lines = open(doc).read().splitlines()
    except OSError as e:
        print("FAIL: cannot read %s: %s" % (doc, e))
        return False

    def bad(msg):
        nonlocal ok
        print("FAIL: %s: %s" % (doc, msg))
        ok = False

    rows = md_table(lines, ["module", "holds", "uses"])
    if not rows:
        bad("no module table (a header row '| module | holds | uses |')")
    seen = {}
    for lineno, cells in rows:
        if len(cells) != 3:
            bad("line %d: a module row has 3 cells, not %d" %
                (lineno, len(cells)))
            continue
        mod = cells[0].strip("` ")
        if mod.endswith(".h"):
            continue
        if mod in seen:
            bad("line %d: a second row for `%s` (first at line %d)" %
                (lineno, mod, seen[mod]))
            continue
        seen[mod] = lineno
        if mod not in core:
            bad("line %d: a row for `%s`, which no object of the core is "
                "(renamed or removed? then so must its row be)" %
                (lineno, mod))
            continue
        said, real = names_in(cells[2]), uses[mod]
        if said != real:
            bad("line %d: the row of `%s` says it uses %s; its object "
                "references %s (%s): set its \"uses\" cell to: %s" % (
                    lineno, mod, ", ".join(sorted(said)) or "nothing",
                    ", ".join(sorted(real)) or "nothing",
                    "; ".join(x for x in (
                        "add " + ", ".join(sorted(real - said))
                        if real - said else "",
                        "remove " + ", ".join(sorted(said - real))
                        if said - real else "") if x),
                    ", ".join(sorted(real)) or "-"))
    for mod in sorted(core - set(seen)):
        bad("no row for module `%s` (%s, layer %s) in the module table: "
            "add | `%s` | what it holds | %s |" % (
                mod, paths[mod], layer_name[mod], mod,
                ", ".join(sorted(uses[mod])) or "-"))

    table = md_table(lines, ["layer", "files"])
    if not table:
        bad("no layer table (a header row '| layer | files |')")
    said_layer = {}
    for lineno, cells in table:
        if len(cells) != 2 or "plugins/" in cells[1]:
            continue
        for mod in names_in(cells[1]):
            said_layer[mod] = cells[0].strip("` ")
    for mod in sorted(core | set(said_layer)):
        if mod not in core:
            bad("the layer table lists `%s` (layer %s), which no object of "
                "the core is" % (mod, said_layer[mod]))
        elif mod not in said_layer:
            bad("the layer table has no `%s` (%s): add it to the row of "
                "layer %s" % (mod, paths[mod], layer_name[mod]))
        elif said_layer[mod] != layer_name[mod]:
            bad("the layer table puts `%s` in layer %s; it is in %s (%s)" %
                (mod, said_layer[mod], layer_name[mod], paths[mod]))

    real = {(a, b) for a in core for b in uses[a]
            if a < b and a in uses.get(b, ())}
    text = " ".join(lines)
    m = re.search(r"The modules that call each other:(.*?)\.(\s|$)", text)
    if m is None:
        bad("no sentence 'The modules that call each other: a <-> b, ...'")
    else:
        said = {tuple(sorted(p)) for p in
                re.findall(r"`?(\w+)`?\s*<->\s*`?(\w+)`?", m.group(1))}
        if said != real:
            bad("'The modules that call each other' names %s; the objects: "
                "%s" % (
                    ", ".join("%s <-> %s" % p for p in sorted(said)),
                    ", ".join("%s <-> %s" % p for p in sorted(real))))
    return ok


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    layers = read_layers(sys.argv[1])
    known = set()
    for line in open(sys.argv[2]):
        line = line.split("#", 1)[0].strip()
        if line:
            src, _, dst = line.partition("->")
            known.add((src.strip(), dst.strip()))
    doc = sys.argv[3]
    # CMake passes $<TARGET_OBJECTS:...> lists as one ;-separated argument
    objs = [o for arg in sys.argv[4:] for o in arg.split(";")
            if o and os.path.basename(o) != "schemas.c.o"]
    owner, refs, folder, paths = {}, {}, {}, {}
    for obj in objs:
        path = source_path(obj)
        name = source_name(path)
        folder[name] = source_folder(path)
        paths[name] = path if "/" in path else "generated " + path
        defined, undefined = nm(obj)
        for sym in defined:
            owner[sym] = name
        refs[name] = undefined
    where = {n: layer_of(n, folder[n], layers) for n in refs}
    unplaced = sorted(n for n in refs if where[n] is None)
    edges = calls(refs, owner)
    print("Layers (lowest first; a file calls into its own layer and those "
          "listed before it):")
    for i, (name, _) in enumerate(layers):
        files = sorted(n for n in refs if where[n] == i)
        print("  %-8s %s" % (name, " ".join(files)))
    failed = False
    up = {}
    for (src, dst), syms in edges.items():
        ls, ld = where[src], where[dst]
        if ls is not None and ld is not None and ld > ls:
            up[(src, dst)] = syms
    for name, f in sorted(folder.items()):
        i = where[name]
        if f is not None and i is not None and layers[i][0] != f:
            print("FAIL: %s is in proxyd/%s/ but %s puts it in %s" %
                  (name, f, sys.argv[1], layers[i][0]))
            failed = True
    if unplaced:
        print("FAIL: files in no layer of %s (a new folder of proxyd/ is a "
              "new layer: add it there): %s" % (sys.argv[1],
                                                " ".join(unplaced)))
        failed = True
    print("Calls that go up a layer (%d file pairs):" % len(up))
    for (src, dst) in sorted(up):
        mark = "known" if (src, dst) in known else "NEW"
        print("  %-5s %s (%s) -> %s (%s): %s" % (
            mark, src, layers[where[src]][0], dst, layers[where[dst]][0],
            " ".join(sorted(up[(src, dst)])[:6])))
        if (src, dst) not in known:
            failed = True
    across = sorted((a, b) for (a, b) in edges
                    if a.startswith("plugins/") and b.startswith("plugins/")
                    and a.split("/")[1] != b.split("/")[1])
    for src, dst in across:
        print("FAIL: analyser %s calls another analyser's %s: %s" % (
            src, dst, " ".join(sorted(edges[(src, dst)])[:6])))
        failed = True
    gone = sorted(known - set(up))
    for src, dst in gone:
        print("FAIL: %s -> %s is listed in %s but no longer goes up: "
              "remove it from the list" % (src, dst, sys.argv[2]))
        failed = True
    pairs = sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)
    print("Files that call each other (%d pairs): %s" % (
        len(pairs), ", ".join("%s<->%s" % p for p in pairs)))
    core = {n for n in refs if is_core(n) and where[n] is not None}
    uses = {n: {d for (s, d) in edges if s == n and d in core} for n in core}
    layer_name = {n: layers[where[n]][0] for n in core}
    print("The core's modules and the core modules each uses:")
    for n in sorted(core, key=lambda n: (where[n], n)):
        print("  %-8s %-14s %s" % (layer_name[n], n,
                                   ", ".join(sorted(uses[n])) or "-"))
    if not check_doc(doc, core, uses, layer_name, paths):
        failed = True
    if failed:
        print("FAIL: a call goes up a layer (see NEW above), the lists are "
              "stale, or %s says otherwise than the objects" % doc)
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
