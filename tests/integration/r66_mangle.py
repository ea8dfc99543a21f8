#!/usr/bin/env python3
"""R66 frames mangled on their way into proxyd, from the client or from the
server, by a man in the middle on each side of an r66 service.

usage: r66_mangle.py R66PEER PROXY_PORT MITM_C_PORT MITM_S_PORT SERVER_PORT
                     CLIDIR SRVDIR SECONDS SEED

The service's target is MITM_S_PORT (which relays to the r66peer server on
SERVER_PORT); each round runs one r66peer client transfer (a random mode,
size and block) to MITM_C_PORT, which relays to PROXY_PORT. A round is
either clean (the bytes cut at random offsets into TCP writes: the
transfer must succeed and the file arrive intact) or has one frame of one
side mangled (R66-WIRE.md 1.2 and 2):
  - framing the spec forbids (net_len under 22 or past any cap, parts
    that do not add up to it, type not the code): proxyd must answer the
    client a ConnectionError [NOCHANNEL, NOCHANNEL] and close it;
  - anything else (another code, other ids, a byte flipped, a frame
    repeated, dropped or made up, the connection cut mid-frame): any
    outcome, in bounded time.
Every round ends within its bound, proxyd stays up (the caller checks its
log for sanitizer reports and its sessions for leftovers). Prints the seed;
R66_MANGLE_SEED replays a run."""
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

(PEER, PROXY, MC, MS, SRV, CLIDIR, SRVDIR, SECONDS, SEED) = sys.argv[1:10]
PROXY, MC, MS, SRV = int(PROXY), int(MC), int(MS), int(SRV)
SECONDS, SEED = float(SECONDS), int(SEED)
NOCHANNEL = 0x80000000
rnd = random.Random(SEED)
STRICT = ("netlen-small", "netlen-huge", "parts", "type")
LOOSE = ("code", "ids", "flip", "dup", "drop", "cut", "forge")


def log(msg):
    print("[r66_mangle] %s" % msg, flush=True)


class Plan:
    """What the current round does; one round at a time."""
    side = None		# "client", "server" or None (clean)
    kind = None
    frame = 0		# which frame of that side (0: the first)
    rng = None
    seen_connerror = False	# proxyd -> client carried a ConnectionError
    mangled = False
    round = 0		# a connection of an earlier round is left alone


plan = Plan()


def frames(buf):
    """Whole frames at the head of buf, and what is left."""
    out = []
    while len(buf) >= 4:
        n = struct.unpack(">I", buf[:4])[0]
        if n > 64 << 20 or len(buf) < 4 + n:
            break
        out.append(buf[:4 + n])
        buf = buf[4 + n:]
    return out, buf


def mangle(f, r):
    """The frame(s) to send instead of frame f (bytes)."""
    k = plan.kind
    b = bytearray(f)
    if k == "netlen-small":
        b[0:4] = struct.pack(">I", r.randrange(0, 22))
        return [bytes(b)]
    if k == "netlen-huge":
        b[0:4] = struct.pack(">I", r.choice((0x7fffffff, 0xffffffff,
                                             1 << 30, 200 << 20)))
        return [bytes(b)]
    if k == "parts" and len(b) >= 26:
        i = r.choice((13, 17, 21))
        v = struct.unpack(">I", b[i:i + 4])[0]
        b[i:i + 4] = struct.pack(">I", (v + r.choice((1, -1, 1000, 1 << 31)))
                                 & 0xffffffff)
        return [bytes(b)]
    if k == "type" and len(b) >= 26:
        b[25] = (b[12] + r.randrange(1, 255)) & 0xff
        return [bytes(b)]
    if k == "code" and len(b) >= 26:
        b[12] = b[25] = r.choice((0, 2, 4, 5, 6, 8, 9, 13, 18, 20, 21, 22,
                                  23, 24, 25, 26, 99, 255))
        return [bytes(b)]
    if k == "ids":
        i = r.choice((4, 8))
        b[i:i + 4] = struct.pack(">I", r.choice((0, NOCHANNEL, 0xffffffff,
                                                 r.randrange(1 << 32))))
        return [bytes(b)]
    if k == "flip" and len(b) > 26:
        i = r.randrange(26, min(len(b), 300))
        b[i] ^= 1 << r.randrange(8)
        return [bytes(b)]
    if k == "dup":
        return [f, f]
    if k == "drop":
        return []
    if k == "cut":
        return [f[:r.randrange(1, len(f))], None]
    if k == "forge":
        code = r.choice((1, 3, 4, 5, 6, 7, 13, 14, 18, 20, 22, 24, 25))
        parts = [bytes(r.randrange(256) for _ in range(r.choice((0, 1, 4, 30))))
                 for _ in range(3)]
        body = struct.pack(">IIIB", 9 + len(parts[0]), len(parts[1]),
                           len(parts[2]), code) + b"".join(parts)
        ids = b[4:12] if r.random() < 0.7 else struct.pack(
            ">II", NOCHANNEL, r.randrange(1 << 32))
        forged = struct.pack(">I", 9 + len(body)) + ids + bytes([code]) + body
        return [forged, f] if r.random() < 0.5 else [f, forged]
    return [f]


def send_cut(dst, data, r):
    """data in TCP writes of random sizes."""
    i = 0
    while i < len(data):
        n = r.choice((1, 3, 13, 26, 100, 1500, 65536))
        dst.sendall(data[i:i + n])
        i += n


def pump(src, dst, side, mangled_dir):
    """Relays src to dst; when mangled_dir and the plan's side is side,
    frame by frame with the plan's mangling."""
    r = random.Random(plan.rng.random())
    buf = b""
    nframe = 0
    mine = plan.round
    try:
        while True:
            d = src.recv(65536)
            if not d:
                break
            if not mangled_dir:
                if side == "client" and mine == plan.round:
                    # proxyd -> client: look for its ConnectionError
                    buf += d
                    fs, buf = frames(buf)
                    for f in fs:
                        if len(f) >= 13 and f[12] == 6 and \
                                f[4:12] == struct.pack(">II", NOCHANNEL,
                                                       NOCHANNEL):
                            plan.seen_connerror = True
                dst.sendall(d)
                continue
            buf += d
            fs, buf = frames(buf)
            out = []
            for f in fs:
                if plan.side == side and nframe == plan.frame and \
                        mine == plan.round and not plan.mangled:
                    plan.mangled = True
                    out.extend(mangle(f, r))
                else:
                    out.append(f)
                nframe += 1
            for o in out:
                if o is None:
                    raise ConnectionAbortedError
                send_cut(dst, o, r)
        if buf:
            dst.sendall(buf)
        # src ended: half-close, so that what the other way still carries
        # (proxyd's ConnectionError after a client's last frame) is read
        how = socket.SHUT_WR
    except OSError:
        how = socket.SHUT_RDWR
    for s in (dst,) if how == socket.SHUT_WR else (src, dst):
        try:
            s.shutdown(how)
        except OSError:
            pass


def mitm(listen_port, up_port, side):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen_port))
    srv.listen(16)

    def loop():
        while True:
            c, _ = srv.accept()
            try:
                u = socket.create_connection(("127.0.0.1", up_port), 5)
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # the side's frames go into proxyd: the client's from c, the
            # server's from u
            into, out_of = (c, u) if side == "client" else (u, c)
            threading.Thread(target=pump, args=(into, out_of, side, True),
                             daemon=True).start()
            threading.Thread(target=pump, args=(out_of, into, side, False),
                             daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def sha(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def main():
    log("seed %d (replay: R66_MANGLE_SEED=%d), %g s" % (SEED, SEED, SECONDS))
    mitm(MC, PROXY, "client")
    mitm(MS, SRV, "server")
    problems = []
    counts = {}
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < SECONDS:
        n += 1
        plan.rng = random.Random(rnd.random())
        plan.seen_connerror = plan.mangled = False
        plan.round = n
        clean = rnd.random() < 0.3
        plan.side = None if clean else rnd.choice(("client", "server"))
        plan.kind = None if clean else rnd.choice(STRICT + LOOSE)
        plan.frame = rnd.randrange(0, 6)
        mode = rnd.choice((1, 2, 3, 4))
        size = rnd.choice((1, 100, 4096, 65536, 65537, 300000))
        block = rnd.choice((512, 4096, 65536))
        name = "f%d.bin" % n
        send = mode in (1, 3)
        src = os.path.join(CLIDIR if send else SRVDIR, name)
        with open(src, "wb") as f:
            f.write(rnd.randbytes(size))
        got = os.path.join(SRVDIR if send else CLIDIR + "/got", name)
        os.makedirs(CLIDIR + "/got", exist_ok=True)
        args = [PEER, "client", "--connect", "127.0.0.1:%d" % MC, "--id",
                "hosta:pwA", "--partner", "serverb:pwB", "--rule", "in",
                "--mode", str(mode), "--block", str(block), "--timeout",
                "10" if clean else "3", "--quiet", "--dir", CLIDIR + "/got"]
        args += ["--send", src] if send else ["--recv", name]
        what = "round %d: %s mode=%d size=%d block=%d" % (
            n, "clean" if clean else "%s %s frame %d" % (
                plan.side, plan.kind, plan.frame), mode, size, block)
        t0 = time.monotonic()
        try:
            p = subprocess.run(args, capture_output=True, text=True, errors="replace",
                               timeout=20)
            rc, err = p.returncode, p.stderr.strip()
        except subprocess.TimeoutExpired:
            rc, err = -1, "client still running after 20 s"
        took = time.monotonic() - t0
        key = "clean" if clean else plan.kind
        counts[key] = counts.get(key, 0) + 1
        bad = None
        if rc == -1:
            bad = err
        elif clean:
            if rc != 0:
                bad = "a clean transfer failed (rc %d): %s" % (rc, err[:300])
            elif not os.path.exists(got) or sha(got) != sha(src):
                bad = "a clean transfer's file differs"
        elif plan.kind in STRICT and plan.mangled:
            # its ConnectionError may still be on its way to the MITM
            deadline = time.monotonic() + 3
            while not plan.seen_connerror and time.monotonic() < deadline:
                time.sleep(0.01)
            if not plan.seen_connerror:
                bad = ("proxyd did not answer a ConnectionError to "
                       "forbidden framing (client rc %d: %s)" % (
                           rc, err[:200]))
        if bad:
            problems.append(what)
            log("PROBLEM %s (%.1f s): %s" % (what, took, bad))
        for path in (src, got):
            try:
                os.unlink(path)
            except OSError:
                pass
    log("%d rounds in %.1f s: %s; seed %d" % (
        n, time.monotonic() - start,
        " ".join("%s=%d" % kv for kv in sorted(counts.items())), SEED))
    if problems:
        log("FAIL: %d problem(s); replay with R66_MANGLE_SEED=%d" % (
            len(problems), SEED))
        sys.exit(1)
    log("PASS")


main()
