#!/usr/bin/env python3
"""Holds the core to its layers, read off the built objects.

usage: check.py LAYERS KNOWN OBJECT...

Each object's undefined symbols are matched with the object that defines
them (nm), which gives the calls (and data references) between source
files. A reference from a file to a file in a later layer of LAYERS goes
up, and one from an analyser to another goes across: either fails the
check, an upward one unless KNOWN lists it (the knots being untied under
issue 25; a listed edge that no longer exists fails too, so the list only
shrinks). Prints the layer table, the edges that go up, and the pairs of
files that call each other.
"""
import fnmatch
import os
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


def source_folder(obj):
    """The layer a core file's folder names: proxyd/net/conn.c.o -> net,
    proxyd/main.c.o -> top; None outside proxyd/."""
    path = obj.split("CMakeFiles/", 1)[-1]
    path = path.split("/", 1)[1] if "/" in path else path
    if not path.startswith("proxyd/"):
        return None
    parts = path.split("/")
    return parts[1] if len(parts) == 3 else "top"


def source_name(obj):
    """plugins/http/http.c.o -> plugins/http/http; proxyd/net/conn.c.o -> conn"""
    path = obj.split("CMakeFiles/", 1)[-1]
    path = path.split("/", 1)[1] if "/" in path else path
    path = path[:-len(".c.o")] if path.endswith(".c.o") else path
    if path.startswith("proxyd/"):
        path = os.path.basename(path)
    if path.startswith("plugins/registry"):
        path = "registry"
    return path


def layer_of(name, layers):
    for i, (_, patterns) in enumerate(layers):
        if any(fnmatch.fnmatch(name, p) for p in patterns):
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


def main():
    layers = read_layers(sys.argv[1])
    known = set()
    for line in open(sys.argv[2]):
        line = line.split("#", 1)[0].strip()
        if line:
            src, _, dst = line.partition("->")
            known.add((src.strip(), dst.strip()))
    # CMake passes $<TARGET_OBJECTS:...> lists as one ;-separated argument
    objs = [o for arg in sys.argv[3:] for o in arg.split(";")
            if o and os.path.basename(o) != "schemas.c.o"]
    owner, refs, folder = {}, {}, {}
    for obj in objs:
        name = source_name(obj)
        folder[name] = source_folder(obj)
        defined, undefined = nm(obj)
        for sym in defined:
            owner[sym] = name
        refs[name] = undefined
    unplaced = sorted(n for n in refs if layer_of(n, layers) is None)
    edges = {}
    for src, undefined in refs.items():
        for sym in undefined:
            dst = owner.get(sym)
            if dst is not None and dst != src:
                edges.setdefault((src, dst), set()).add(sym)
    print("Layers (lowest first; a file calls into its own layer and those "
          "listed before it):")
    for i, (name, _) in enumerate(layers):
        files = sorted(n for n in refs if layer_of(n, layers) == i)
        print("  %-8s %s" % (name, " ".join(files)))
    failed = False
    up = {}
    for (src, dst), syms in edges.items():
        ls, ld = layer_of(src, layers), layer_of(dst, layers)
        if ls is not None and ld is not None and ld > ls:
            up[(src, dst)] = syms
    for name, f in sorted(folder.items()):
        i = layer_of(name, layers)
        if f is not None and i is not None and layers[i][0] != f:
            print("FAIL: %s is in proxyd/%s/ but the table puts it in %s" %
                  (name, f, layers[i][0]))
            failed = True
    if unplaced:
        print("FAIL: files in no layer of %s: %s" % (sys.argv[1],
                                                     " ".join(unplaced)))
        failed = True
    print("Calls that go up a layer (%d file pairs):" % len(up))
    for (src, dst) in sorted(up):
        mark = "known" if (src, dst) in known else "NEW"
        print("  %-5s %s (%s) -> %s (%s): %s" % (
            mark, src, layers[layer_of(src, layers)][0], dst,
            layers[layer_of(dst, layers)][0],
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
    if failed:
        print("FAIL: a call goes up a layer (see NEW above), or the lists "
              "are stale")
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
