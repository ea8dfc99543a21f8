#!/usr/bin/env python3
"""Relative paths on a server that does not chroot its users
(ftp_login_dir.sh): the login directory is HOME, the rules deny
HOME/secret and HOME/secret/* by absolute patterns, and the client never
sends PWD before it names a path.

Every spelling below names something under HOME/secret relative to the
login directory (read, write, delete, rename, list, after a CWD or CDUP),
each in a session of its own. Read-only ones are sent to the server
directly first: it must serve them (else the case proves nothing); through
proxyd each must be refused by the proxy. The .sh then checks that the
server's files are untouched. Allowed relative paths must still work
through proxyd, the client's own PWD must get the server's answer, and
commands pipelined behind the login must be judged against HOME.

usage: ftp_login_dir.py NAME DIRECT_PORT PROXY_PORT USER PASS HOME
prints one line per case; exits 1 on any failure (each listed)."""
import ftplib
import io
import socket
import sys
import time

name, dport, pport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
user, password, home = sys.argv[4], sys.argv[5], sys.argv[6]
DEADLINE = time.monotonic() + 50
SECRET = "the secret\n"
bad = []


def session(port):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login(user, password)
    return f


def run(f, step):
    """One step: ("cmd", LINE), ("get", PATH), ("put", PATH),
    ("list", LINE); the reply (first line) or the error."""
    verb, arg = step
    try:
        if verb == "cmd":
            return f.sendcmd(arg).split("\n")[0]
        if verb == "get":
            buf = []
            r = f.retrbinary("RETR " + arg, buf.append)
            return "%s got=%s" % (r[:3], b"".join(buf).decode())
        if verb == "put":
            return f.storbinary(arg, io.BytesIO(b"planted\n"))
        if verb == "list":
            lines = []
            f.retrlines(arg, lines.append)
            return "226 " + " ".join(lines)
    except ftplib.all_errors as e:
        return str(e).split("\n")[0]
    raise ValueError(verb)


def refused_by_proxy(reply):
    return reply[:3] in ("550", "552") and "proxy" in reply


# (what it does, steps before, the step that names the denied path,
#  read-only: True when the server directly must serve it)
CASES = [
    ("read", [], ("get", "secret/a.txt"), True),
    ("read", [], ("get", "./secret/a.txt"), True),
    ("read", [], ("get", "dl/../secret/a.txt"), True),
    ("read", [], ("get", "secret//a.txt"), True),
    ("read", [], ("cmd", "SIZE secret/a.txt"), True),
    ("read", [], ("cmd", "MDTM secret/a.txt"), True),
    ("read", [("cmd", "TYPE I")], ("cmd", "SIZE secret/sub/b.txt"), True),
    ("list", [], ("list", "NLST secret"), True),
    ("list", [], ("list", "LIST secret"), True),
    ("list", [], ("list", "NLST secret/sub"), True),
    ("list", [], ("cmd", "STAT secret"), True),
    ("cwd", [], ("cmd", "CWD secret"), True),
    ("cwd", [], ("cmd", "XCWD secret/sub"), True),
    ("cwd", [], ("cmd", "CWD ./secret/"), True),
    ("cwd+rel", [("cmd", "CWD dl")], ("get", "../secret/a.txt"), True),
    ("cwd+rel", [("cmd", "CWD dl")], ("cmd", "SIZE ../secret/a.txt"), True),
    ("cwd+rel", [("cmd", "CWD dl")], ("cmd", "CWD ../secret"), True),
    ("cdup+rel", [("cmd", "CWD dl"), ("cmd", "CDUP")],
     ("cmd", "SIZE secret/a.txt"), True),
    ("write", [], ("put", "STOR secret/new.txt"), False),
    ("write", [], ("put", "APPE secret/a.txt"), False),
    ("write", [], ("put", "STOR ./secret/../secret/new2.txt"), False),
    ("write", [], ("cmd", "MKD secret/newdir"), False),
    ("write", [], ("cmd", "XMKD secret/newdir2"), False),
    ("write", [], ("cmd", "SITE CHMOD 777 secret/a.txt"), False),
    ("delete", [], ("cmd", "DELE secret/a.txt"), False),
    ("delete", [], ("cmd", "RMD secret/empty"), False),
    ("delete", [], ("cmd", "XRMD secret/empty"), False),
    ("delete", [("cmd", "CWD dl")], ("cmd", "DELE ../secret/a.txt"), False),
    ("rename", [], ("cmd", "RNFR secret/a.txt"), False),
    ("rename", [("cmd", "RNFR a.txt")], ("cmd", "RNTO secret/moved.txt"),
     False),
]


def check_cases():
    for what, before, step, readonly in CASES:
        if readonly:
            d = session(dport)
            for b in before:
                run(d, b)
            direct = run(d, step)
            d.close()
            if direct[0] not in "12" or (step[0] == "get" and
                                         SECRET not in direct):
                bad.append("%s: %s %r: the server itself did not serve it: "
                           "%r" % (name, what, step[1], direct))
                continue
        p = session(pport)
        pre = [run(p, b) for b in before]
        r = run(p, step)
        p.close()
        ok = refused_by_proxy(r)
        print("%s\t%s\t%s\t%s\t%s" % (name, what, " ; ".join(
            b[1] for b in before) or "-", step[1],
            "refused" if ok else "PASSED: " + r))
        if not ok:
            bad.append("%s: %s %r (after %r) not refused by the proxy: %r"
                       % (name, what, step[1], pre, r))
        if time.monotonic() > DEADLINE:
            raise SystemExit("%s: over the time bound" % name)


def check_allowed():
    """Allowed relative paths, and the client's own PWD."""
    p = session(pport)
    want = [
        (("get", "dl/a.txt"), "226", "dl file\n"),
        (("cmd", "PWD"), '257 "%s"' % home, None),
        (("cmd", "CWD dl"), "250", None),
        (("get", "a.txt"), "226", "dl file\n"),
        (("cmd", "PWD"), '257 "%s/dl"' % home, None),
        (("cmd", "CDUP"), "2", None),
        (("put", "STOR up.txt"), "226", None),
        (("cmd", "SIZE up.txt"), "213 8", None),
    ]
    for step, code, data in want:
        r = run(p, step)
        if not r.startswith(code) or (data and data not in r):
            bad.append("%s: allowed %r: %r, expected %r" %
                       (name, step[1], r, code))
    p.close()


def check_pipelined():
    """The login and what follows in one write: the path is judged against
    the login directory, the client gets one reply per command, in order,
    and never the answer to the proxy's own PWD."""
    s = socket.create_connection(("127.0.0.1", pport), timeout=10)
    f = s.makefile("rb")

    def reply():
        """The last line of a reply (the only one of most)."""
        line = f.readline().decode()
        if line[3:4] == "-":
            code = line[:3] + " "
            while not line.startswith(code):
                line = f.readline().decode()
        return line.strip()
    reply()
    s.sendall(("USER %s\r\nPASS %s\r\nSIZE secret/a.txt\r\n"
               "SIZE dl/a.txt\r\nPWD\r\nNOOP\r\n" % (user, password)).encode())
    got = [reply() for _ in range(6)]
    want = ["331", "230", "550 SIZE: permission denied by the proxy",
            "213 8", '257 "%s"' % home, "200"]
    if any(not g.startswith(w) for g, w in zip(got, want)):
        bad.append("%s: pipelined login: got %r, expected %r" %
                   (name, got, want))
    s.close()


check_cases()
check_allowed()
check_pipelined()
for b in bad:
    print("FAIL " + b)
print("%s: %d cases, %d failures" % (name, len(CASES), len(bad)))
sys.exit(1 if bad else 0)
