#!/usr/bin/env python3
"""Differential test of proxyd's FTP path rules (ftp_path_differential.sh).

Every spelling (generated: ., .., //, absolute, after a CWD, mixed case,
trailing /, globs, ~, \\, spaces) goes to the server directly and through
proxyd. The direct answer says which file (by its size: every file has its
own) or directory (PWD after CWD) the server would use; the policy decides
on that real path (the oracle, independent of the spelling). Then:
  - the server would use a denied file: proxyd must refuse;
  - the server would use an allowed one: proxyd must give the same one,
    or refuse for one of its documented strict reasons (.. above the root,
    globs, ...), never by a rule;
  - proxyd never gives what the server directly would not.

usage: ftp_path_differential.py --make-tree ROOT
       ftp_path_differential.py NAME DIRECT_PORT PROXY_PORT TABLE_TSV [SECONDS
           [HOME]]
prints a summary; exits 1 on any mismatch (each listed).
"""
import fnmatch
import ftplib
import itertools
import random
import re
import sys
import time

# The tree (ftp_path_differential.sh makes it): every file a size of its own.
FILES = {
    "/a.txt": 11, "/dl/a.txt": 22, "/dl/sub/a.txt": 33, "/secret/a.txt": 44,
    "/secret/sub/a.txt": 55, "/TOOL.EXE": 66, "/dl/tool.exe": 77,
    "/dl/secret/a.txt": 88, "/sub/a.txt": 99, "/secret/dl/a.txt": 110,
}
BY_SIZE = {v: k for k, v in FILES.items()}
# The policy of both services (case="insensitive").
DENY = ["secret", "secret/*", "*.exe"]
# Refusals that are documented strictness, not rules.
STRICT = {"above-root", "glob", "backslash", "tilde", "edge-space",
          "no-directory",
          "control-byte", "options-and-path"}
DEADLINE = time.monotonic() + float(sys.argv[5] if len(sys.argv) > 5 else 50)
# A server that does not chroot: the tree is at HOME in its name space, the
# login directory (PWD says so; every session asks, as most clients do).
# "": a chrooted server, the tree at "/".
HOME = sys.argv[6] if len(sys.argv) > 6 else ""


def denied(path):
    """path: in the tree ("/dl/a.txt"), or "^/x" outside it."""
    rel = path[2:] if path.startswith("^") else path[1:]
    return any(fnmatch.fnmatchcase(rel.lower(), p.lower()) for p in DENY)


def in_tree(d):
    """A directory the server names, as a path in the tree."""
    if not HOME:
        return d
    if d == HOME:
        return "/"
    if d.startswith(HOME + "/"):
        return d[len(HOME):]
    return "^" + d


def cmd(f, line):
    try:
        return f.sendcmd(line)
    except ftplib.all_errors as e:
        return str(e)


def session(port):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login("anonymous", "x@y")
    cmd(f, "TYPE I")
    if HOME:
        cmd(f, "PWD")
    return f


def proxy_refusal(reply):
    """'rule', a strict reason, or None when proxyd did not refuse."""
    if not reply.startswith("550") or "proxy" not in reply:
        return None
    m = re.search(r"path refused by the proxy \(([a-z-]+)\)", reply)
    return m.group(1) if m else "rule"


def size_outcome(reply):
    ref = proxy_refusal(reply)
    if ref is not None:
        return "refused:" + ref
    m = re.match(r"213 (\d+)", reply)
    if m and int(m.group(1)) in BY_SIZE:
        return BY_SIZE[int(m.group(1))]
    return "fail"


def pwd(f):
    m = re.match(r'257 "(.*)"', cmd(f, "PWD"))
    return m.group(1) if m else "?"


def cwd_outcome(f, spelling):
    r = cmd(f, "CWD " + spelling)
    ref = proxy_refusal(r)
    if ref is not None:
        return "refused:" + ref
    if not r.startswith("2"):
        return "fail"
    d = in_tree(pwd(f))
    back = cmd(f, "CWD " + (HOME or "/"))
    if not back.startswith("2"):
        raise SystemExit("CWD / after %r: %r" % (spelling, back))
    return "dir:" + d


class Judge:
    def __init__(self, name, table):
        self.name, self.table, self.bad = name, table, []
        self.count = {}

    def __call__(self, where, verb, spelling, direct, proxied):
        target = direct.split(":", 1)[1] if direct.startswith("dir:") \
            else direct
        served = direct != "fail"
        if served and denied(target):
            ok = proxied.startswith("refused:")
            kind = "deny" if ok else "BYPASS"
        elif served:
            if proxied == direct:
                ok, kind = True, "allow"
            elif proxied.split(":", 1)[-1] in STRICT:
                ok, kind = True, "strict"
            else:
                ok, kind = False, "OVERBLOCK"
        else:
            ok = proxied == "fail" or proxied.startswith("refused:")
            kind = "nofile" if ok else "DIVERGE"
        self.count[kind] = self.count.get(kind, 0) + 1
        row = "\t".join([self.name, where or "/", verb, repr(spelling),
                         direct, proxied, kind])
        self.table.write(row + "\n")
        if not ok:
            self.bad.append(row)
        if time.monotonic() > DEADLINE:
            raise SystemExit("%s: over the time bound" % self.name)


COMPS = [".", "..", "", "dl", "secret", "sub"]
EXTRA_FILES = [
    "secret/a.txt", "./secret/a.txt", "dl/../secret/a.txt",
    "dl//..//secret//a.txt", "/secret/a.txt", "secret/a.txt/",
    "//secret/a.txt", "/../secret/a.txt", "/../dl/a.txt", "../secret/a.txt",
    "SECRET/a.txt", "Secret/A.TXT", "TOOL.EXE", "tool.exe", "/TOOL.EXE",
    "dl/../TOOL.EXE", "./tool.EXE", "dl/tool.exe", "dl/TOOL.exe",
    "secre?/a.txt", "s*/a.txt", "secret/*.txt", "[s]ecret/a.txt",
    "{secret,dl}/a.txt", "dl\\..\\secret\\a.txt", "~/secret/a.txt",
    "~ftp/secret/a.txt", " secret/a.txt", "secret/a.txt ",
    "dl/secret/a.txt", "secret/sub/a.txt", "secret/./sub/../a.txt",
    "a.txt", "./a.txt", "dl/a.txt", "/dl/sub/a.txt", "sub/a.txt",
]
EXTRA_DIRS = [
    "secret", "/secret", "secret/", "./secret", "dl/../secret", "SECRET",
    "Secret/", "secre?", "~/secret", "dl\\..\\secret", " secret",
    "secret ", "/../secret", "/..", "..", "dl/secret", "secret/sub",
    "/secret/./sub/", "dl", "dl/sub", "/",
]


def file_spellings(depth):
    out = []
    for n in range(depth + 1):
        for mid in itertools.product(COMPS, repeat=n):
            for lead in ("", "/"):
                s = lead + "/".join(list(mid) + ["a.txt"])
                out.append(s)
    # a trailing "/" on every 5th
    out += [s + "/" for s in out[::5]]
    if HOME:
        base = HOME.rsplit("/", 1)[1]
        out += [HOME + s for s in out if s.startswith("/")]
        out += ["../%s/secret/a.txt" % base,
                "dl/../../%s/secret/a.txt" % base,
                "%s/../%s/secret/a.txt" % (HOME, base)]
    return out + EXTRA_FILES


def dir_spellings(depth):
    out = []
    for n in range(1, depth + 1):
        for mid in itertools.product(COMPS, repeat=n):
            for lead in ("", "/"):
                out.append(lead + "/".join(mid))
    if HOME:
        out += [HOME + s for s in out if s.startswith("/")]
    return out + EXTRA_DIRS


def run(name, dport, pport, table):
    judge = Judge(name, table)
    # Files, from each starting directory (allowed ones: a refused CWD
    # would leave the two sessions in different places).
    for where in ["", "dl", HOME + "/dl", "dl/sub", "./dl//sub/",
                  "dl/sub/..", HOME or "/", "dl/secret"]:
        d, p = session(dport), session(pport)
        if where:
            rd, rp = cmd(d, "CWD " + where), cmd(p, "CWD " + where)
            if not rd.startswith("250") or not rp.startswith("250"):
                raise SystemExit("%s: CWD %r: direct %r, proxied %r" %
                                 (name, where, rd, rp))
        for s in file_spellings(3 if where == "" else 2):
            judge(where, "SIZE", s, size_outcome(cmd(d, "SIZE " + s)),
                  size_outcome(cmd(p, "SIZE " + s)))
        d.close()
        p.close()
    # Directories: CWD then PWD (XCWD on a few).
    d, p = session(dport), session(pport)
    for s in dir_spellings(3):
        judge("", "CWD", s, cwd_outcome(d, s), cwd_outcome(p, s))
    for s in ["secret", "dl/../secret", "dl"]:
        rd, rp = cmd(d, "XCWD " + s), cmd(p, "XCWD " + s)
        dd = "dir:" + in_tree(pwd(d)) if rd.startswith("2") else "fail"
        ref = proxy_refusal(rp)
        pp = "refused:" + ref if ref else (
            "dir:" + in_tree(pwd(p)) if rp.startswith("2") else "fail")
        cmd(d, "CWD " + (HOME or "/"))
        cmd(p, "CWD " + (HOME or "/"))
        judge("", "XCWD", s, dd, pp)
    # A refused CWD leaves proxyd where the server still is.
    for s in ["/secret", "secret", "./secret/"] + (
            [HOME + "/secret"] if HOME else []):
        r = cmd(p, "CWD " + s)
        if proxy_refusal(r) != "rule":
            judge.bad.append("%s: CWD %r not refused: %r" % (name, s, r))
        judge("(CWD %s refused)" % s, "SIZE", "a.txt", "/a.txt",
              size_outcome(cmd(p, "SIZE a.txt")))
    # CDUP from /dl/sub twice, then once more (above the root).
    for f in (d, p):
        cmd(f, "CWD " + HOME + "/dl/sub")
    for i in range(3):
        rd, rp = cmd(d, "CDUP"), cmd(p, "CDUP")
        dd = "dir:" + in_tree(pwd(d)) if rd.startswith("2") else "fail"
        ref = proxy_refusal(rp)
        pp = "refused:" + ref if ref else (
            "dir:" + in_tree(pwd(p)) if rp.startswith("2") else "fail")
        judge("/dl/sub + CDUP x%d" % (i + 1), "CDUP", "", dd, pp)
    d.close()
    p.close()
    # RETR: the bytes themselves, for the spellings and a sample.
    rnd = random.Random(24)
    sample = EXTRA_FILES[:10] + rnd.sample(file_spellings(3), 20)
    d, p = session(dport), session(pport)
    for s in sample:
        outs = []
        for f in (d, p):
            buf = []
            try:
                f.retrbinary("RETR " + s, buf.append)
                data = b"".join(buf)
                outs.append(BY_SIZE.get(len(data), "?")
                            if data == content(BY_SIZE.get(len(data), ""))
                            else "corrupt")
            except ftplib.all_errors as e:
                ref = proxy_refusal(str(e))
                outs.append("refused:" + ref if ref else "fail")
        judge("", "RETR", s, outs[0], outs[1])
    # Listings on a denied path, and a CWD after an unknown one.
    for line in ["NLST secret", "LIST -la secret", "NLST s*",
                 "LIST /secret", "STAT secret", "NLST ./secret/"]:
        r = cmd(p, line)
        if proxy_refusal(r) is None:
            judge.bad.append("%s: %r not refused: %r" % (name, line, r))
    d.close()
    p.close()
    pipelined(name, pport, judge)
    # A control byte: proxyd takes the line for malformed, ends the
    # session (the server would have looked for "secret\t/a.txt").
    p = session(pport)
    r = cmd(p, "SIZE secret\t/a.txt")
    if not r.startswith("500"):
        judge.bad.append("%s: SIZE with a TAB: %r" % (name, r))
    p.close()
    return judge


def pipelined(name, pport, judge):
    """Commands sent behind a CWD before its answer: judged against the
    directory before and after it (both must be allowed); a second
    directory change meanwhile is refused."""
    import socket
    s = socket.create_connection(("127.0.0.1", pport), timeout=10)
    f = s.makefile("rb")

    def reply():
        line = f.readline().decode()
        while line[3:4] == "-":
            line = f.readline().decode()
            while line[:4] != line[:3] + " ":
                line = f.readline().decode()
        return line.strip()
    reply()
    s.sendall(b"USER anonymous\r\n")
    reply()
    s.sendall(b"PASS x@y\r\n")
    reply()
    s.sendall(b"TYPE I\r\n")
    reply()
    if HOME:
        s.sendall(b"PWD\r\n")
        reply()
    s.sendall(b"CWD dl\r\nSIZE a.txt\r\nSIZE secret/a.txt\r\n"
              b"CWD sub\r\nSIZE ../secret/a.txt\r\nCWD nowhere\r\n"
              b"SIZE a.txt\r\nPWD\r\n")
    got = [reply() for _ in range(8)]
    want = [("250", None), ("213 22", None),
            ("550", "permission denied by the proxy"),
            ("550", "(cwd-pending)"), ("550", "by the proxy"),
            ("550", None), ("213 22", None), ('257 "%s/dl"' % HOME, None)]
    for g, (code, text) in zip(got, want):
        if not g.startswith(code) or (text and text not in g):
            judge.bad.append("%s: pipelined: got %r, expected %r %r" %
                             (name, got, code, text))
            break
    # Sent through proxyd only: the .sh checks the server never saw it.
    s.sendall(b"SIZE ../secret//a.txt//\r\n")
    r = reply()
    if not r.startswith("550 SIZE: permission denied by the proxy"):
        judge.bad.append("%s: proxy-only spelling: %r" % (name, r))
    # The server refuses a CWD: the directory stays where it was.
    s.sendall(b"CWD nowhere\r\n")
    r1 = reply()
    s.sendall(b"SIZE a.txt\r\n")
    r2 = reply()
    if not r1.startswith("550") or "proxy" in r1 or r2 != "213 22":
        judge.bad.append("%s: after a refused CWD: %r, %r" % (name, r1, r2))
    s.close()


def content(path):
    if not path:
        return None
    unit = (path + "\n").encode()
    return (unit * (FILES[path] // len(unit) + 1))[:FILES[path]]


def main():
    name, dport, pport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(sys.argv[4], "a") as table:
        judge = run(name, dport, pport, table)
    print("%s: %s" % (name, " ".join("%s=%d" % kv for kv in
                                     sorted(judge.count.items()))))
    for row in judge.bad:
        print("MISMATCH " + row)
    sys.exit(1 if judge.bad else 0)


def make_tree(root):
    import os
    for path in FILES:
        full = root + path
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        with open(full, "wb") as f:
            f.write(content(path))
        os.chmod(full, 0o644)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--make-tree":
        make_tree(sys.argv[2])
    else:
        main()
