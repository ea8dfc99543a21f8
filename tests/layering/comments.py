#!/usr/bin/env python3
"""The opening comments of the sources, as far as a program can hold them.

usage: comments.py SOURCE_DIR

Every .c and .h file of proxyd/ and plugins/ opens with a comment saying
what it holds (a .c file whose header says it all may just name it:
"/* One socket end (see conn.h). */"). An internal header (NAME_int.h)
says who shares it: each file that includes it is named in its opening
comment (by name, or by a shell pattern such as http_h2*.c).
"""
import fnmatch
import os
import re
import sys


def opening(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    if not text.startswith("/*"):
        return None
    return text[:text.find("*/") + 2]


def main():
    root = sys.argv[1]
    files = []
    for top in ("proxyd", "plugins"):
        for d, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(d, n) for n in names
                      if n.endswith((".c", ".h"))]
    failed = False
    for f in sorted(files):
        if opening(f) is None:
            print("FAIL: %s opens without a comment saying what it holds" %
                  os.path.relpath(f, root))
            failed = True
    for h in sorted(f for f in files if f.endswith("_int.h")):
        comment = opening(h) or ""
        named = set(re.findall(r"[\w*]+\.[ch]\b", comment))
        base = os.path.basename(h)
        users = sorted(os.path.basename(f) for f in files
                       if f != h and f.endswith(".c") and
                       re.search(r'#include "%s"' % re.escape(base),
                                 open(f, errors="replace").read()))
        for u in users:
            if not any(fnmatch.fnmatch(u, n) for n in named):
                print("FAIL: %s is included by %s, which its opening "
                      "comment does not name among those sharing it" %
                      (os.path.relpath(h, root), u))
                failed = True
    if failed:
        return 1
    print("comments: %d files open with a comment" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
