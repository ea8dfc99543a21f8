#!/usr/bin/env python3
"""Randomised FTP command shapes, differentially (ftp_policy.sh): the same
random command lines go to a server directly and through proxyd (a service
whose policy takes every command, so that nothing but proxyd's parsing and
relaying can differ), one at a time, and every reply code must be the same.
Verbs: RFC 959 ones, extensions, unknown ones, digits after the first
letter (XSHA256), lower case; arguments: empty, blanks, numbers too big for
any integer, paths, UTF-8, long ones (within limits/@max-line). Commands
that open data connections or change the login are left out: proxyd
answers those itself by design.

usage: ftp_command_differential.py DIRECT_PORT PROXY_PORT SECONDS [SEED]
prints a summary and each differing line; exits 1 on any difference.
"""
import random
import socket
import sys
import time

VERBS = ["NOOP", "SYST", "TYPE", "MODE", "STRU", "PWD", "XPWD", "CWD", "XCWD",
         "CDUP", "SIZE", "MDTM", "HELP", "STAT", "OPTS", "ALLO", "REST",
         "ACCT", "SMNT", "FEAT", "SITE", "MLST", "LANG", "MFMT", "AVBL",
         "CLNT", "HOST", "RNTO", "XYZZY", "NLSTX", "NOOPX", "XSHA1",
         "XSHA256", "XMD5", "A1", "Q"]
ARGS = ["", " ", "  pub", "A", "I", "E", "L 8", "A N", "F", "S", "B", "C",
        "R", "P", "0", "1", "-1", "99999999999999999999",
        "18446744073709551616", "pub", "/pub", "pub/", "./pub", "pub//x.bin",
        "pub/x.bin", "nonexist", "UTF8 ON", "a b c", "HELP", "CHMOD 777 x",
        "%s%n", "\u00e9", "20200101000000 pub/x.bin", "*", "-la",
        "x" * 200, "x" * 480]


def read(f):
    """One reply's code ("EOF" when the connection ended)."""
    line = f.readline()
    if not line:
        return "EOF"
    code = line[:3]
    if line[3:4] == b"-":
        while True:
            more = f.readline()
            if not more or (more[:3] == code and more[3:4] == b" "):
                break
    return code.decode("latin-1")


class Session:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.file = self.sock.makefile("rb")
        read(self.file)
        self.cmd(b"USER anonymous")
        self.cmd(b"PASS x@example.test")

    def cmd(self, line):
        try:
            self.sock.sendall(line + b"\r\n")
            return read(self.file)
        except OSError as e:
            return "ERR %s" % e.__class__.__name__


def main():
    direct, proxy, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 30)
    rnd = random.Random(seed)
    d, p = Session(direct), Session(proxy)
    diffs = {}
    last = b""
    n = 0
    end = time.monotonic() + secs
    while time.monotonic() < end and n < 50000:
        verb = rnd.choice(VERBS)
        if rnd.random() < 0.2:
            verb = verb.lower()
        arg = rnd.choice(ARGS)
        line = verb if not arg and rnd.random() < 0.7 else verb + " " + arg
        raw = line.encode("utf-8")
        rd, rp = d.cmd(raw), p.cmd(raw)
        n += 1
        if rd != rp:
            # (a connection that ended: the line before may be the cause)
            diffs.setdefault(raw[:60], (rd, rp, last[:40]))
        last = raw
        if rd in ("EOF",) or rd.startswith("ERR") or rp == "EOF" or \
                rp.startswith("ERR"):
            break
    print("seed %d: %d command lines, %d differing" % (seed, n, len(diffs)))
    for raw, (rd, rp, before) in sorted(diffs.items()):
        print("  %-64r direct=%s proxy=%s (after %r)" % (raw, rd, rp, before))
    sys.exit(1 if diffs or n < 100 else 0)


main()
