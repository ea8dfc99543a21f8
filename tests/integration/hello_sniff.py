#!/usr/bin/env python3
"""Records the TLS hellos that cross the loopback interface, for the JA4
tests where no relay can sit in front of proxyd (an FTPS data connection
goes to the port proxyd's PASV reply names, or comes from proxyd to the
PORT a client names): the bytes as the wire carried them, read with an
AF_PACKET socket (root: CAP_NET_RAW), independent of proxyd and of the
clients.

    hello_sniff.py DIR

For each TCP flow over IPv4, its first ClientHello and its first
ServerHello but a HelloRetryRequest (a handshake record starting a segment's payload, the
message reassembled over the segments that follow it) are written in hex
to DIR/NNNNNN.c.SRC.DST.hex (ClientHello) or .s. (ServerHello), SRC and
DST as ADDR:PORT, NNNNNN the order they were completed in (written to
.tmp first, then renamed: a file that exists is whole). DIR/.ready
appears once the socket listens. Exits on SIGTERM or after 300 s."""
import os
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
# A HelloRetryRequest is a ServerHello with this random (RFC 8446 4.1.3).
HRR = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


def whole(buf):
    """The handshake message the records in buf carry, once whole; None
    before, b"" when buf is no handshake record."""
    o, msg = 0, b""
    while len(buf) - o >= 5:
        if buf[o] != 0x16:
            return b"" if o == 0 else None
        n = int.from_bytes(buf[o + 3:o + 5], "big")
        if len(buf) - o - 5 < n:
            return None
        msg += buf[o + 5:o + 5 + n]
        o += 5 + n
        if len(msg) >= 4 and len(msg) >= 4 + int.from_bytes(msg[1:4], "big"):
            return buf[:o]
    return None


def main():
    d = sys.argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind(("lo", 0))
    s.settimeout(1.0)
    open(os.path.join(d, ".ready"), "w").close()
    done = set()        # (flow, kind) written
    partial = {}        # (flow, kind) -> [next seq, bytes]
    n = 0
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            frame, addr = s.recvfrom(1 << 17)
        except socket.timeout:
            continue
        if addr[2] == PACKET_OUTGOING or len(frame) < 34:
            continue
        if struct.unpack("!H", frame[12:14])[0] != 0x0800:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0f) * 4
        if ip[9] != 6:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        data = tcp[(tcp[12] >> 4) * 4:]
        if not data:
            continue
        flow = "%s:%d.%s:%d" % (socket.inet_ntoa(ip[12:16]), sport,
                                socket.inet_ntoa(ip[16:20]), dport)
        for kind, mtype in (("c", 1), ("s", 2)):
            key = (flow, kind)
            if key in done:
                continue
            if key in partial:
                nxt, buf = partial[key]
                if seq != nxt:
                    continue
                buf += data
            elif len(data) >= 6 and data[0] == 0x16 and data[5] == mtype:
                buf = data
            else:
                continue
            rec = whole(buf)
            if rec is None:
                partial[key] = [(seq + len(data)) & 0xffffffff, buf]
                continue
            partial.pop(key, None)
            if not rec:
                done.add(key)
                continue
            if kind == "s" and rec[11:43] == HRR:
                continue        # the ServerHello is the one after it
            done.add(key)
            n += 1
            name = os.path.join(d, "%06d.%s.%s.hex" % (n, kind, flow))
            with open(name + ".tmp", "w") as f:
                f.write(rec.hex())
            os.rename(name + ".tmp", name)


if __name__ == "__main__":
    main()
