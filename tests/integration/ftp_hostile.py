#!/usr/bin/env python3
"""Differential test of proxyd's FTP reply handling (ftp_hostile.sh).

A hostile but RFC 959-valid FTP server (in this process) answers every
command in a style drawn from the seed: one line, multi-line replies whose
inner lines are free text, indented, "CODE-" again or another code's
"NNN text", a bare code, lines up to 4000 bytes, replies written in small
pieces; transfers with 125 or 150 (one or many lines) before or after the
data connection is taken, 226 or 250 before or after the data ends; 227
replies in every spelling clients parse (a multi-line one's address on
any of its lines, its last one "227 OK"), a 110/120 before final replies,
refused data commands, transfers aborted halfway, a 421 that closes. A
client runs the same random session (commands pipelined or not, PASV or
EPSV, RETR (after a REST or not), LIST, NLST, MLSD, STOR, APPE, STOU,
FEAT) directly and through proxyd, and the two must agree:
  - the same reply codes and texts for every command (227/229: the code;
    FEAT: the server's lines with some feature lines left out; a refused
    data command may come as the transfer command's 425 through proxyd),
  - the same bytes on every data connection (uploads: the server's reply
    names their size and hash),
  - the same commands reaching the server (data-channel ones aside),
  - through proxyd, every 227/229 names proxyd's own address and a port
    of its data-ports range, never the server's.

usage: ftp_hostile.py SERVER_PORT PROXY_KEEP_PORT PROXY_ACTIVE_PORT
           PROXY_PATHS_PORT DATA_LO DATA_HI [SECONDS]
FTP_HOSTILE_SEED=N replays a run, FTP_HOSTILE_CASE=N one case of it.
Prints the seed; exits 1 on any disagreement (each listed).
"""
import hashlib
import os
import random
import re
import socket
import sys
import threading
import time

SEED = int(os.environ.get("FTP_HOSTILE_SEED") or random.randrange(1 << 30))
ONLY = os.environ.get("FTP_HOSTILE_CASE")
IO_TIMEOUT = 8.0
# What the server of the case under way logs (the client sets it before
# each connection; one connection at a time).
CURRENT = {"case": None, "cmds": None}

# ---------------------------------------------------------------- server


def read_all(d):
    """A data connection's bytes up to its end; closes it."""
    got = b""
    d.settimeout(IO_TIMEOUT)
    while True:
        x = d.recv(65536)
        if not x:
            break
        got += x
    d.close()
    return got


def style_rng(case, k, what):
    return random.Random("%d:%s:%d:%s" % (SEED, case, k, what))


def fmt_reply(rng, code, text, addr_text=None):
    """One reply, RFC 959 4.2: single line or multi-line. addr_text (a
    227's address) goes where the style puts it."""
    c = str(code)
    body = text if addr_text is None else text + " " + addr_text
    r = rng.random()
    if r < 0.35:
        return [c + " " + body]
    if r < 0.42 and addr_text is None:
        return [c]
    if r < 0.55:
        return [c + " " + body + " " + "x" * rng.randrange(200, 3900 - len(body))]
    # multi-line
    lines = [c + "-" + (body if addr_text is not None and rng.random() < 0.5
                        else text)]
    for _ in range(rng.randrange(0, 5)):
        kind = rng.randrange(6)
        if kind == 0:
            lines.append(" indented text")
        elif kind == 1:
            lines.append("plain text line")
        elif kind == 2:
            lines.append(c + "-dash line again")
        elif kind == 3:
            other = rng.choice([x for x in (150, 200, 226, 250, 421, 550)
                                if x != code])
            lines.append("%d not the end" % other)
        elif kind == 4:
            lines.append("")
        else:
            lines.append(" " + "y" * rng.randrange(100, 3900))
    last = c + " " + (body if addr_text is not None else "end of " + text)
    lines.append(last)
    return lines


def addr_227(rng, port):
    nums = "127,0,0,1,%d,%d" % (port >> 8, port & 255)
    return rng.choice(["Entering Passive Mode (%s)" % nums,
                       "Entering Passive Mode %s" % nums,
                       "=%s" % nums,
                       "Entering Passive Mode (%s)." % nums])


class ServerConn(threading.Thread):
    def __init__(self, sock, case, cmds):
        super().__init__(daemon=True)
        self.s, self.case, self.cmds = sock, case, cmds
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.k = 0
        self.ndata = 0
        self.rest = 0
        self.cwd = "/"
        self.pasv = None
        self.active = None

    def send(self, rng, lines):
        data = b"".join(l.encode("latin-1") + b"\r\n" for l in lines)
        if rng.random() < 0.2:
            i = 0
            while i < len(data):
                n = rng.randrange(1, 40)
                self.s.sendall(data[i:i + n])
                i += n
                time.sleep(0.001)
        else:
            self.s.sendall(data)

    def reply(self, code, text, what="r"):
        rng = style_rng(self.case, self.k, what)
        lines = fmt_reply(rng, code, text)
        if what in ("r", "port") and code >= 200 and rng.random() < 0.08:
            # A preliminary reply first (RFC 959 allows it to few
            # commands; a client must wait for the final one anyway).
            lines = fmt_reply(rng, rng.choice([110, 120]), "wait") + lines
        self.send(rng, lines)

    def run(self):
        try:
            self.serve()
        except OSError:
            pass
        finally:
            self.s.close()

    def lines(self):
        buf = b""
        self.s.settimeout(30)
        while True:
            while b"\n" not in buf:
                d = self.s.recv(65536)
                if not d:
                    return
                buf += d
            line, buf = buf.split(b"\n", 1)
            yield line.rstrip(b"\r").decode("latin-1")

    def data_sock(self, rng):
        if self.pasv is not None:
            self.pasv.settimeout(IO_TIMEOUT)
            d, _ = self.pasv.accept()
            self.pasv.close()
            self.pasv = None
            return d
        if self.active is not None:
            d = socket.create_connection(self.active, timeout=IO_TIMEOUT)
            self.active = None
            return d
        return None

    def transfer(self, verb, arg):
        rng = style_rng(self.case, self.k, "x")
        if self.pasv is None and self.active is None:
            self.reply(425, "Use PORT or PASV first", "nodata")
            return
        if arg.startswith("missing"):
            if self.pasv is not None:
                self.pasv.close()
                self.pasv = None
            self.active = None
            self.reply(550, "No such file", "missing")
            return
        if verb in ("STOR", "STOU", "APPE"):
            prelim = rng.choice([150, 125])
            text = "FILE: u%d" % self.k if verb == "STOU" else "Ok to send data"
            early_reply = rng.random() < 0.5
            if early_reply:
                self.send(rng, fmt_reply(rng, prelim, text))
            d = self.data_sock(rng)
            if not early_reply:
                self.send(rng, fmt_reply(rng, prelim, text))
            got = read_all(d)
            self.send(rng, fmt_reply(rng, rng.choice([226, 250]), "Received %d bytes %s"
                                     % (len(got), hashlib.sha256(got).hexdigest()[:16])))
            return
        if verb == "RETR":
            size = rng.choice([0, 1, 100, 4096, 65536, rng.randrange(200000)])
            payload = random.Random("%d:%s:%s" % (SEED, self.case, arg)).randbytes(size)
            payload = payload[self.rest:]
        else:
            n = rng.randrange(0, 40)
            payload = "".join("-rw-r--r-- 1 ftp ftp %d Jan 1 2020 f%d\r\n" % (i * 7, i)
                              for i in range(n)).encode()
        prelim = rng.choice([150, 125])
        early_reply = rng.random() < 0.5
        if early_reply:
            self.send(rng, fmt_reply(rng, prelim, "Opening data connection"))
        d = self.data_sock(rng)
        if not early_reply:
            self.send(rng, fmt_reply(rng, prelim, "Opening data connection"))
        final = rng.choice([226, 250])
        if rng.random() < 0.1:
            # Aborted halfway.
            d.sendall(payload[:len(payload) // 2])
            d.close()
            self.send(rng, fmt_reply(rng, rng.choice([426, 451]),
                                     "Transfer aborted"))
            return
        final_first = rng.random() < 0.15
        if final_first:
            # Some servers say "done" as the last bytes leave.
            d.sendall(payload)
            self.send(rng, fmt_reply(rng, final, "Transfer complete"))
            d.close()
            return
        d.sendall(payload)
        d.close()
        self.send(rng, fmt_reply(rng, final, "Transfer complete"))

    def serve(self):
        rng = style_rng(self.case, 0, "greet")
        lines = fmt_reply(rng, 220, "hostile FTP server ready")
        if rng.random() < 0.2:
            lines = fmt_reply(rng, 120, "Service ready in 1 minute") + lines
        self.send(rng, lines)
        for line in self.lines():
            verb, _, arg = line.partition(" ")
            verb = verb.upper()
            data_cmd = verb in ("PASV", "EPSV", "PORT", "EPRT")
            if (verb in ("RETR", "LIST", "NLST", "MLSD", "STOR", "STOU", "APPE") and
                    self.pasv is None and
                    self.active is None):
                # Only through proxyd: a transfer command it forwarded
                # before the server refused its PASV (it answered the
                # client's at once): the 425 is the same either way.
                self.reply(425, "Use PORT or PASV first", "nodata")
                continue
            if verb == "PWD":
                # Through the service with path rules proxyd asks too,
                # after the login: PWD counts for nothing here.
                rng = style_rng(self.case, self.k, "pwd")
                lines = fmt_reply(rng, 257, '"%s" is the current directory' % self.cwd)
                if lines == ["257"]:
                    lines = ['257 "%s"' % self.cwd]
                self.send(rng, lines)
                continue
            self.cmds.append(line if not data_cmd else "<data>")
            if not data_cmd:
                self.k += 1
            else:
                # The same data command of a session fails directly and
                # through proxyd (whose own PASV or PORT it then is).
                self.ndata += 1
                rng = style_rng(self.case, self.ndata, "fail")
                if rng.random() < 0.12:
                    if self.pasv is not None:
                        self.pasv.close()
                    self.pasv = self.active = None
                    self.send(rng, fmt_reply(rng, rng.choice([425, 500, 502]),
                                             "Cannot open data connection"))
                    continue
            if verb == "PASV" or verb == "EPSV":
                if self.pasv is not None:
                    self.pasv.close()
                self.pasv = socket.socket()
                self.pasv.bind(("127.0.0.1", 0))
                self.pasv.listen(1)
                port = self.pasv.getsockname()[1]
                rng = style_rng(self.case, self.k, "pasv%d" % port)
                if verb == "PASV":
                    self.send(rng, fmt_reply_227(rng, port))
                else:
                    self.send(rng, fmt_reply(rng, 229, "Entering Extended Passive Mode",
                                             "(|||%d|)" % port))
            elif verb == "PORT":
                n = [int(x) for x in arg.split(",")]
                self.active = ("%d.%d.%d.%d" % tuple(n[:4]), n[4] * 256 + n[5])
                self.reply(200, "PORT command successful", "port")
            elif verb == "EPRT":
                parts = arg.split(arg[0])
                self.active = (parts[2], int(parts[3]))
                self.reply(200, "EPRT command successful", "port")
            elif verb == "USER":
                self.reply(331, "Password required")
            elif verb == "PASS":
                self.reply(230, "Logged in")
            elif verb == "SYST":
                self.reply(215, "UNIX Type: L8")
            elif (verb in ("NOOP", "SYST", "HELP", "STAT") and
                  style_rng(self.case, self.k, "bye").random() < 0.04):
                self.reply(421, "Service not available, closing", "bye")
                return
            elif verb in ("NOOP", "TYPE", "MODE", "STRU"):
                self.reply(200, "Command okay")
            elif verb in ("CWD", "CDUP"):
                # (A server that says it moved and then names another
                # directory in its PWD leaves proxyd's path rules lost.)
                self.cwd = ((self.cwd.rsplit("/", 1)[0] or "/") if verb == "CDUP" else
                            self.cwd.rstrip("/") + "/" + arg)
                self.reply(250, "Directory changed")
            elif verb == "SIZE":
                self.reply(213, "1234")
            elif verb == "MDTM":
                self.reply(213, "20200101000000")
            elif verb == "FEAT":
                rng = style_rng(self.case, self.k, "feat")
                if rng.random() < 0.2:
                    self.send(rng, fmt_reply(rng, 211, "No features"))
                    continue
                feats = [" MDTM", " SIZE", " REST STREAM", " UTF8", " EPSV",
                         " EPRT", " PASV", " AUTH TLS", " PBSZ", " PROT",
                         " MLST type*;size*;modify*;", " TVFS", " XYZZ",
                         " LANG EN*", " " + "Z" * rng.randrange(10, 3000),
                         "211-inner line", "plain line", " mdtm", " 9ABC"]
                rng.shuffle(feats)
                self.send(rng, ["211-Features:"] + feats[:rng.randrange(len(feats))] +
                          ["211 End"])
            elif verb == "HELP":
                self.reply(214, "Help follows")
            elif verb == "STAT":
                self.reply(211, "Status follows")
            elif verb in ("RETR", "LIST", "NLST", "MLSD", "STOR", "STOU", "APPE"):
                self.transfer(verb, arg)
                self.rest = 0
            elif verb == "REST":
                self.rest = int(arg)
                self.reply(350, "Restarting at %d" % self.rest)
            elif verb == "QUIT":
                self.reply(221, "Goodbye")
                return
            else:
                self.reply(502, "Not implemented")


def fmt_reply_227(rng, port):
    a = addr_227(rng, port)
    r = rng.random()
    if rng.random() < 0.1:
        return fmt_reply(rng, 120, "wait") + ["227 " + a]
    if r < 0.5:
        return ["227 " + a]
    if r < 0.8:
        # the address on one line before the last alone, which clients
        # find there (RFC 959 4.2: all the lines are the reply's text)
        lines = ["227-" + (a if r < 0.7 else "Passive mode on its way")]
        if r >= 0.7:
            lines.append(rng.choice(["", " ", "227-"]) + a)
        for _ in range(rng.randrange(0, 3)):
            lines.append(rng.choice([" indented", "text", "227-again"]))
        lines.append(rng.choice(["227 OK", "227 Passive mode on", "227 "]))
        return lines
    lines = ["227-" + (a if r < 0.9 else "Passive mode on its way")]
    for _ in range(rng.randrange(0, 3)):
        lines.append(rng.choice([" indented", "text", "227-again", "200 other"]))
    lines.append("227 " + a)
    return lines


def server_main(lsock):
    while True:
        c, _ = lsock.accept()
        ServerConn(c, CURRENT["case"], CURRENT["cmds"]).start()

# ---------------------------------------------------------------- client


class Closed421(Exception):
    """The server's 421: it closes (and proxyd must pass that on)."""


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError("control connection closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return line.rstrip(b"\r").decode("latin-1")

    def reply(self):
        first = self.line()
        lines = [first]
        m = re.match(r"^(\d{3})([ -]?)", first)
        if not m:
            raise ValueError("bad reply line %r" % first[:80])
        if m.group(2) == "-":
            while True:
                l = self.line()
                lines.append(l)
                if l.startswith(m.group(1) + " "):
                    break
        return int(m.group(1)), lines

    def final(self):
        """Replies up to the final one (1xx ones before it): the codes,
        the lines."""
        codes, lines = [], []
        while True:
            code, l = self.reply()
            codes.append(code)
            lines += l
            if code == 421:
                raise Closed421(codes, lines)
            if code >= 200:
                return codes, lines

    def send(self, *cmds):
        self.s.sendall(b"".join(c.encode() + b"\r\n" for c in cmds))


def short(lines):
    return [l if not isinstance(l, str) or len(l) < 60 else
            "%s...(%d bytes)" % (l[:40], len(l)) for l in lines]


def short_rec(r):
    if r is None or isinstance(r, str):
        return r
    return tuple(short(x) if isinstance(x, list) else x for x in r)


def data_addr(code, lines):
    text = "\n".join(lines)
    if code == 227:
        m = re.search(r"(\d+),(\d+),(\d+),(\d+),(\d+),(\d+)", text)
        if not m:
            return None
        n = [int(x) for x in m.groups()]
        return "%d.%d.%d.%d" % tuple(n[:4]), n[4] * 256 + n[5]
    if code == 229:
        m = re.search(r"\(\|\|\|(\d+)\|\)", text)
        return ("127.0.0.1", int(m.group(1))) if m else None
    return None


def plan_of(case):
    rng = random.Random("%d:%s:plan" % (SEED, case))
    steps = []
    for _ in range(rng.randrange(2, 8)):
        if rng.random() < 0.5:
            steps.append(("cmds", rng.sample(
                ["NOOP", "PWD", "SYST", "TYPE I", "CWD dir", "SIZE f", "MDTM f",
                 "HELP", "STAT", "MODE S", "FEAT"], rng.randrange(1, 4)),
                rng.random() < 0.5))
        else:
            steps.append(("xfer", rng.choice(["PASV", "EPSV"]),
                          rng.choice(["RETR f%d" % rng.randrange(5), "LIST",
                                      "NLST", "MLSD", "RETR missing",
                                      "REST %d RETR f%d" % (rng.randrange(3000),
                                                            rng.randrange(5)),
                                      "STOR up%d" % rng.randrange(5),
                                      "APPE up%d" % rng.randrange(5), "STOU"]),
                          rng.choice([None, None, None, "NOOP", "x"])))
    return steps


def run(case, port, proxied, lo, hi, problems):
    """The session of `case` through `port`: its record (a list)."""
    cmds = []
    CURRENT["case"], CURRENT["cmds"] = case, cmds
    rec = []
    c = Client(port)
    try:
        rec.append(("greet",) + tuple(c.final()))
        c.send("USER anonymous", "PASS x@y")
        rec.append(("USER",) + tuple(c.final()))
        rec.append(("PASS",) + tuple(c.final()))
        for st in plan_of(case):
            if st[0] == "cmds":
                if st[2]:
                    c.send(*st[1])
                    for cmd in st[1]:
                        rec.append((cmd,) + tuple(c.final()))
                else:
                    for cmd in st[1]:
                        c.send(cmd)
                        rec.append((cmd,) + tuple(c.final()))
                continue
            _, pv, xcmd, pipelined = st
            if xcmd.startswith("REST "):
                # REST n RETR f: the restart first, answered 350.
                _, n, xcmd = xcmd.split(" ", 2)
                c.send("REST " + n)
                rec.append(("REST",) + tuple(c.final()))
            # pipelined: NOOP (sent with the PASV), x (the transfer command
            # sent with it, before its answer), None
            if pipelined == "NOOP":
                c.send("NOOP", pv)
                rec.append(("NOOP",) + tuple(c.final()))
            elif pipelined == "x":
                c.send(pv, xcmd)
            else:
                c.send(pv)
            codes, lines = c.final()
            code = codes[-1]
            if code not in (227, 229):
                # The server refused the data connection. Through proxyd
                # that may come as the transfer command's 425 instead,
                # when proxyd answered the client's PASV itself.
                rec.append((pv, "refused"))
                if pipelined == "x":
                    c.final()
                continue
            addr = data_addr(code, lines)
            if addr is None:
                problems.append("case %s: %s: no address in %r" % (case, pv, short(lines)))
                return rec, cmds
            if proxied and (addr[0] != "127.0.0.1" or not lo <= addr[1] <= hi):
                problems.append("case %s: %s through proxyd names %s:%d, not proxyd's "
                                "address and data ports %d-%d: %r"
                                % (case, pv, addr[0], addr[1], lo, hi, short(lines)))
            try:
                d = socket.create_connection(addr, timeout=IO_TIMEOUT)
            except OSError:
                d = None	# (refused: the transfer command says why)
            if pipelined != "x":
                c.send(xcmd)
            code, lines = c.reply()
            if proxied and code == 425:
                rec.append((pv, "refused"))
            else:
                rec.append((pv, "ok"))
                rec.append((xcmd, code, lines))
            if code >= 200 or d is None:
                if d is not None:
                    d.close()
                if d is None and code < 200:
                    rec.append((xcmd, "no data connection"))
                continue
            if xcmd.split()[0] in ("STOR", "APPE", "STOU"):
                urng = random.Random("%d:%s:%s:up" % (SEED, case, xcmd))
                d.sendall(urng.randbytes(urng.choice([0, 1, 5000, urng.randrange(300000)])))
                d.close()
                rec.append((xcmd,) + tuple(c.reply()))
                continue
            got = read_all(d)
            rec.append((xcmd, "data", len(got), hashlib.sha256(got).hexdigest()[:16]))
            rec.append((xcmd,) + tuple(c.reply()))
        c.send("QUIT")
        rec.append(("QUIT",) + tuple(c.reply()))
    except Closed421 as e:
        rec.append(("421",) + e.args)
        try:
            rec.append(("after 421", c.s.recv(1)))
        except OSError as e:
            rec.append(("after 421", type(e).__name__))
    except (OSError, EOFError, ValueError) as e:
        rec.append(("error", type(e).__name__, str(e)))
    finally:
        c.s.close()
    return rec, cmds


def feat_check(case, d_rec, p_rec, problems):
    """proxyd filters FEAT: its lines through proxyd must be the server's
    with some feature lines (" WORD...") left out, its first and last line
    kept. The records keep the codes and the line count only."""
    for d, p in zip(d_rec, p_rec):
        if d[0] != "FEAT" or p[0] != "FEAT" or len(d) != 3 or len(p) != 3:
            continue
        dl, pl = d[2], p[2]
        it = iter(dl)
        sub = all(any(x == y for y in it) for x in pl)
        dropped = [x for x in dl if x not in pl]
        if (not sub or pl[:1] != dl[:1] or pl[-1:] != dl[-1:] or
                any(not x.startswith(" ") for x in dropped)):
            problems.append("case %d: FEAT through proxyd %r is not the server's "
                            "%r with feature lines left out"
                            % (case, short(pl), short(dl)))
        i = d_rec.index(d)
        d_rec[i] = p_rec[i] = ("FEAT", d[1], "filtered")


def main():
    sport, pkeep, pactive, ppaths, lo, hi = (int(x) for x in sys.argv[1:7])
    seconds = float(sys.argv[7]) if len(sys.argv) > 7 else 15
    names = {pkeep: "server-data=keep", pactive: "server-data=active",
             ppaths: "path rules"}
    print("ftp_hostile: seed %d (FTP_HOSTILE_SEED=%d replays it)" % (SEED, SEED),
          flush=True)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", sport))
    lsock.listen(16)
    threading.Thread(target=server_main, args=(lsock,), daemon=True).start()
    problems = []
    end = time.monotonic() + seconds
    cases = [int(ONLY)] if ONLY else range(100000)
    n = 0
    for case in cases:
        if time.monotonic() > end and not ONLY:
            break
        via = (pkeep, pactive, ppaths)[case % 3]
        before = len(problems)
        t0 = time.monotonic()
        d_rec, d_cmds = run(case, sport, False, lo, hi, problems)
        t1 = time.monotonic()
        p_rec, p_cmds = run(case, via, True, lo, hi, problems)
        if os.environ.get("FTP_HOSTILE_VERBOSE"):
            print("case %d plan %r" % (case, plan_of(case)))
            for r in d_rec:
                print("  direct  %r" % (short_rec(r),))
            for r in p_rec:
                print("  proxied %r" % (short_rec(r),))
        if os.environ.get("FTP_HOSTILE_TIMES"):
            print("case %d: direct %.3f s, proxied %.3f s" % (case, t1 - t0, time.monotonic() - t1))
        n += 1
        if any(r[0] == "error" for r in d_rec):
            problems.append("case %d: the direct session failed (test bug): %r"
                            % (case, d_rec[-1]))
        feat_check(case, d_rec, p_rec, problems)
        if d_rec != p_rec:
            i = next((i for i, (a, b) in enumerate(zip(d_rec, p_rec)) if a != b),
                     min(len(d_rec), len(p_rec)))
            problems.append("case %d (via %s): first difference at step %d:\n"
                            "    direct:  %r\n    proxied: %r"
                            % (case, names[via], i,
                               short_rec(d_rec[i]) if i < len(d_rec) else "(end)",
                               short_rec(p_rec[i]) if i < len(p_rec) else "(end)"))
        if d_cmds != p_cmds:
            problems.append("case %d: the server got %r directly, %r through proxyd"
                            % (case, d_cmds, p_cmds))
        if len(problems) > before:
            print("FAIL case %d (FTP_HOSTILE_SEED=%d FTP_HOSTILE_CASE=%d)"
                  % (case, SEED, case), flush=True)
            for p in problems[before:]:
                print("  " + p, flush=True)
        if len(problems) >= 10:
            break
    print("ftp_hostile: %d cases, %d problems (seed %d)" % (n, len(problems), SEED))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
