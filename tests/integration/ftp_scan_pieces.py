#!/usr/bin/env python3
"""A file moved in pieces, or cut short, through a scanned ftp service; one
line of output per run, for ftp_scan_pieces.sh:

    ftp_scan_pieces.py PORT USER PASS feat
        rest=yes|no rang=yes|no: whether FEAT offers REST, RANG
    ftp_scan_pieces.py PORT USER PASS cmd LINE
        the reply to LINE
    ftp_scan_pieces.py PORT USER PASS pieces REMOTE LOCAL
        STOR the first byte of LOCAL as pub/REMOTE, then APPE the rest:
        stor=<reply> appe=<reply>
    ftp_scan_pieces.py PORT USER PASS rest REMOTE OFFSET LOCAL
        REST OFFSET, then RETR pub/REMOTE into LOCAL:
        rest=<reply> retr=<reply> bytes=N
    ftp_scan_pieces.py PORT USER PASS abort REMOTE
        RETR pub/REMOTE, 64 KiB read, the data connection closed, ABOR
        sent: data=<none|exception> bytes=N replies=<every reply line up
        to ABOR's, joined by |>

A reply is its first line, or the error ftplib raised for it. Passive mode,
binary; every wait is bounded (30 s a socket operation)."""
import ftplib
import socket
import sys

port, user, password, op = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
args = sys.argv[5:]

f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=30)
f.login(user, password)
f.cwd("pub")
f.voidcmd("TYPE I")


def first(reply):
    return reply.splitlines()[0] if reply else ""


def cmd(line):
    try:
        return first(f.sendcmd(line))
    except ftplib.Error as e:
        return first(str(e))


def final():
    try:
        return first(f.getresp())
    except ftplib.Error as e:
        return first(str(e))


def store(verb, remote, data):
    try:
        conn = f.transfercmd("%s %s" % (verb, remote))
    except ftplib.Error as e:
        return first(str(e))
    conn.sendall(data)
    conn.close()
    return final()


if op == "feat":
    try:
        feat = f.sendcmd("FEAT")
    except ftplib.Error:
        feat = ""
    def offers(word):
        return "yes" if any(l.strip().upper().startswith(word)
                            for l in feat.splitlines()[1:-1]) else "no"
    print("rest=%s rang=%s" % (offers("REST"), offers("RANG")))
elif op == "cmd":
    print(cmd(args[0]))
elif op == "pieces":
    remote, local = args
    data = open(local, "rb").read()
    stor = store("STOR", remote, data[:1])
    appe = store("APPE", remote, data[1:])
    print("stor=%s appe=%s" % (stor, appe))
elif op == "rest":
    remote, offset, local = args
    rest = cmd("REST " + offset)
    n = 0
    if rest.startswith("350"):
        try:
            conn = f.transfercmd("RETR " + remote)
            with open(local, "wb") as out:
                while True:
                    d = conn.recv(16384)
                    if not d:
                        break
                    out.write(d)
                    n += len(d)
            conn.close()
            retr = final()
        except ftplib.Error as e:
            retr = first(str(e))
    else:
        retr = "-"
    print("rest=%s retr=%s bytes=%d" % (rest, retr, n))
elif op == "abort":
    remote = args[0]
    conn = f.transfercmd("RETR " + remote)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    n, err = 0, "none"
    try:
        while n < 65536:
            d = conn.recv(65536 - n)
            if not d:
                break
            n += len(d)
    except OSError as e:
        # (blocked before the ABOR: the server sent it all at once)
        err = e.__class__.__name__
    conn.close()
    # (a plain ABOR: without the Telnet IP and Synch ftplib's abort()
    # sends first, as curl and most clients do)
    f.sock.sendall(b"ABOR\r\n")
    # up to ABOR's own reply (225 or 226: the RETR's is a 4xx or 5xx by
    # then, or replaced by one), 10 lines at most. The RETR's may take
    # until the data channel's own timeout (proxyd may notice the closed
    # data connection only then, when the scanner is slow to take its
    # copy): 25 s for it; then 3 s for ABOR's (Pure-FTPd answers no ABOR
    # once the transfer ended).
    f.sock.settimeout(25)
    replies = []
    try:
        while len(replies) < 10:
            line = f.getline()
            if not line:
                break
            replies.append(line)
            if line[:4] in ("225 ", "226 "):
                break
            if line[:1] in ("4", "5") and line[3:4] == " ":
                f.sock.settimeout(3)
    except (OSError, EOFError) as e:
        replies.append(e.__class__.__name__)
    print("data=%s bytes=%d replies=%s" % (err, n, "|".join(replies)))
try:
    f.quit()
except (OSError, ftplib.Error, EOFError):
    pass
