#!/usr/bin/env python3
"""Records the TLS hellos that cross the loopback interface, for the JA4
tests where no relay can sit in front of proxyd (an FTPS data connection
goes to the port proxyd's PASV reply names, or comes from proxyd to the
PORT a client names): the bytes as the wire carried them, read with an
AF_PACKET socket (root: CAP_NET_RAW), independent of proxyd and of the
clients.

    hello_sniff.py DIR

For each TCP flow over IPv4, its first ClientHello and its first
ServerHello but a HelloRetryRequest (a handshake record starting a
segment's payload, the message whole in that segment: on lo a client's
one write of it is one segment) are written in hex
to DIR/NNNNNN.c.SRC.DST.hex (ClientHello) or .s. (ServerHello), SRC and
DST as ADDR:PORT, NNNNNN the order they were completed in (written to
.tmp first, then renamed: a file that exists is whole). DIR/.ready
appears once the socket listens. Exits on SIGTERM or after 300 s."""
import ctypes
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


# The kernel hands this socket only IPv4 TCP segments whose payload starts
# a TLS handshake record carrying a ClientHello (1) or a ServerHello (2):
# the bulk of what crosses lo (other tests run beside this one) is never
# copied to it, so none of what it wants is dropped for lack of room.
# (classic BPF; jumps are relative to the next instruction)
FILTER = [
    (0x28, 0, 0, 12),           # 0  ldh [12]           ethertype
    (0x15, 0, 15, 0x0800),      # 1  jne IPv4 -> drop
    (0x30, 0, 0, 23),           # 2  ldb [23]           protocol
    (0x15, 0, 13, 6),           # 3  jne TCP -> drop
    (0x28, 0, 0, 20),           # 4  ldh [20]           fragment offset
    (0x45, 11, 0, 0x1fff),      # 5  jset -> drop
    (0xb1, 0, 0, 14),           # 6  ldxb 4*([14]&0xf)  X: IP header
    (0x50, 0, 0, 26),           # 7  ldb [x+26]         TCP data offset
    (0x74, 0, 0, 4),            # 8  rsh #4
    (0x64, 0, 0, 2),            # 9  lsh #2             A: TCP header
    (0x0c, 0, 0, 0),            # 10 add x
    (0x07, 0, 0, 0),            # 11 tax                X: both headers
    (0x50, 0, 0, 14),           # 12 ldb [x+14]         payload[0]
    (0x15, 0, 3, 0x16),         # 13 jne handshake -> drop
    (0x50, 0, 0, 19),           # 14 ldb [x+19]         message type
    (0x15, 2, 0, 1),            # 15 jeq ClientHello -> accept
    (0x15, 1, 0, 2),            # 16 jeq ServerHello -> accept
    (0x06, 0, 0, 0),            # 17 drop
    (0x06, 0, 0, 0x40000),      # 18 accept
]
SO_ATTACH_FILTER = 26


def attach_filter(s):
    prog = b"".join(struct.pack("HBBI", *i) for i in FILTER)
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("HL", len(FILTER), ctypes.addressof(buf))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    return buf      # kept alive while the socket lives


def whole(buf):
    """The records of buf up to the end of the handshake message they
    carry, once whole; None before; b"" when buf is no handshake record."""
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
    keep = attach_filter(s)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind(("lo", 0))
    s.settimeout(1.0)
    open(os.path.join(d, ".ready"), "w").close()
    done = set()        # (flow, kind) written
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
        sport, dport = struct.unpack("!HH", tcp[:4])
        data = tcp[(tcp[12] >> 4) * 4:]
        if len(data) < 6 or data[0] != 0x16 or data[5] not in (1, 2):
            continue
        kind = "c" if data[5] == 1 else "s"
        flow = "%s:%d.%s:%d" % (socket.inet_ntoa(ip[12:16]), sport,
                                socket.inet_ntoa(ip[16:20]), dport)
        rec = whole(data)
        if (flow, kind) in done or not rec:
            continue
        if kind == "s" and rec[11:43] == HRR:
            continue        # the ServerHello is the one after it
        done.add((flow, kind))
        n += 1
        name = os.path.join(d, "%06d.%s.%s.hex" % (n, kind, flow))
        with open(name + ".tmp", "w") as f:
            f.write(rec.hex())
        os.rename(name + ".tmp", name)
    del keep


if __name__ == "__main__":
    main()
