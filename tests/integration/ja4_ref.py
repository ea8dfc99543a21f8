#!/usr/bin/env python3
"""An independent JA4 (FoxIO's TLS client fingerprint) computed from a
ClientHello, written from the published definition (technical_details/
JA4.md of FoxIO-LLC/ja4) and RFC 8446 / RFC 5246 field layouts, for the
tests to check proxyd's own computation against. Shares no code with
proxyd's C.

    ja4_ref.py HEX        the ClientHello's TLS records (or the bare
                          handshake message) in hex: prints its JA4
    import ja4_ref; ja4_ref.ja4(bytes)
    ja4_ref.ja4s(bytes)   JA4S of a ServerHello (records or message)
"""
import hashlib
import sys


def _grease(v):
    # RFC 8701: 0x0a0a, 0x1a1a, ... 0xfafa
    return (v & 0x0f0f) == 0x0a0a and (v >> 8) == (v & 0xff)


def handshake(data):
    """The first handshake message (header on: a ClientHello, a
    ServerHello) from TLS records, or data itself when it is already a
    bare handshake message."""
    if data[0] != 0x16:
        return data
    msg = b""
    o = 0
    while o + 5 <= len(data) and data[o] == 0x16:
        n = int.from_bytes(data[o + 3:o + 5], "big")
        msg += data[o + 5:o + 5 + n]
        o += 5 + n
        if len(msg) >= 4 and len(msg) >= 4 + int.from_bytes(msg[1:4], "big"):
            break
    return msg


def fields(data):
    m = handshake(data)
    assert m[0] == 1, "not a ClientHello"
    end = 4 + int.from_bytes(m[1:4], "big")
    p = 4
    legacy = int.from_bytes(m[p:p + 2], "big")
    p += 2 + 32
    p += 1 + m[p]                                       # session id
    n = int.from_bytes(m[p:p + 2], "big")
    ciphers = [int.from_bytes(m[i:i + 2], "big") for i in range(p + 2, p + 2 + n, 2)]
    p += 2 + n
    p += 1 + m[p]                                       # compression
    exts = []
    if p < end:
        p += 2
        while p < end:
            t = int.from_bytes(m[p:p + 2], "big")
            n = int.from_bytes(m[p + 2:p + 4], "big")
            exts.append((t, m[p + 4:p + 4 + n]))
            p += 4 + n
    return legacy, ciphers, exts


def ja4(data, raw=False):
    legacy, ciphers, exts = fields(data)
    ciphers = [c for c in ciphers if not _grease(c)]
    exts = [(t, b) for t, b in exts if not _grease(t)]
    types = [t for t, _ in exts]
    body = dict(exts)
    version = legacy
    if 0x2b in body:
        b = body[0x2b]
        vs = [int.from_bytes(b[i:i + 2], "big") for i in range(1, 1 + b[0], 2)]
        vs = [v for v in vs if not _grease(v)]
        if vs:
            version = max(vs)
    vname = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10",
             0x0300: "s3", 0x0002: "s2", 0xfeff: "d1", 0xfefd: "d2",
             0xfefc: "d3"}.get(version, "00")
    sni = "d" if 0 in body else "i"
    alpn = "00"
    if 0x10 in body and len(body[0x10]) > 3 and body[0x10][2] > 0:
        first = body[0x10][3:3 + body[0x10][2]]
        a, z = first[0], first[-1]

        def alnum(c):
            return chr(c).isascii() and chr(c).isalnum()
        if alnum(a) and alnum(z):
            alpn = chr(a) + chr(z)
        else:
            h = first.hex()
            alpn = h[0] + h[-1]
    sigs = []
    if 0x0d in body:
        b = body[0x0d]
        n = int.from_bytes(b[0:2], "big")
        sigs = [int.from_bytes(b[i:i + 2], "big") for i in range(2, 2 + n, 2)]
        sigs = [s for s in sigs if not _grease(s)]
    a = "t%s%s%02d%02d%s" % (vname, sni, min(len(ciphers), 99),
                             min(len(types), 99), alpn)
    cl = ",".join("%04x" % c for c in sorted(ciphers))
    el = ",".join("%04x" % t for t in sorted(types) if t not in (0, 0x10))
    if sigs:
        el += "_" + ",".join("%04x" % s for s in sigs)
    if raw:
        return "%s_%s_%s" % (a, cl, el)

    def h(s, empty):
        return "000000000000" if empty else hashlib.sha256(s.encode()).hexdigest()[:12]
    return "%s_%s_%s" % (a, h(cl, not ciphers),
                         h(el, not [t for t in types if t not in (0, 0x10)]))


def _field(b, at, n):
    return int.from_bytes(b[at:at + n], "big")


def ja4s(data):
    """JA4S (technical_details/JA4S.md) of a ServerHello, from its
    records or the bare handshake message: the version (supported_
    versions', else the legacy one), the extensions counted, the chosen
    ALPN's first and last characters, "_" the cipher in hex, "_" the
    first 12 hex of sha256 of the extensions as sent, in order."""
    m = handshake(data)
    m = m[:4 + _field(m, 1, 3)]
    assert m[0] == 2 and _field(m, 1, 3) == len(m) - 4, "not a whole ServerHello"
    version = _field(m, 4, 2)
    at = 4 + 2 + 32
    at += 1 + m[at]                      # session id
    cipher = _field(m, at, 2)
    at += 2 + 1                          # cipher, compression
    exts, alpn = [], ""
    if at < len(m):
        end = at + 2 + _field(m, at, 2)
        assert end == len(m)
        at += 2
        while at < end:
            t, n = _field(m, at, 2), _field(m, at + 2, 2)
            body = m[at + 4:at + 4 + n]
            exts.append(t)
            if t == 0x002b:
                version = _field(body, 0, 2)
            if t == 0x0010:
                alpn = body[3:3 + body[2]].decode()
            at += 4 + n
    vers = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10"}[version]
    a = alpn[0] + alpn[-1] if alpn else "00"
    text = ",".join("%04x" % e for e in exts)
    h = hashlib.sha256(text.encode()).hexdigest()[:12] if exts else "0" * 12
    return "t%s%02d%s_%04x_%s" % (vers, min(len(exts), 99), a, cipher, h)


if __name__ == "__main__":
    print(ja4(bytes.fromhex(sys.argv[1].strip())))
