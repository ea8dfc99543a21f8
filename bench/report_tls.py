"""The TLS rows' labels and the pending-handshake section, for report.py
(bench/run's idle and stall rows: bench/tlsidle.py, RSS before, with the
connections, and once they are closed)."""
from report_runs import fnum

SIZE_LABEL = {"1k": "1 KB", "10k": "10 KB", "100k": "100 KB", "1m": "1 MB"}
STALL_PATHS = ["proxyd-tls-plug", "haproxy-tls-tcp", "nginx-tls-tcp"]


def tls_label(k, env):
    tool, size, mode = k
    par = (env.get("tls_stime", "? ?").split() + ["?", "?"])[1]
    if tool == "ab" and mode == "ka":
        return f"TLS {SIZE_LABEL.get(size, size)} ab keep-alive"
    if tool == "wrk":
        return f"TLS {SIZE_LABEL.get(size, size)} wrk keep-alive"
    if tool == "ab" and mode == "close":
        return f"TLS new conn/s, ab close {SIZE_LABEL.get(size, size)} (full handshakes, -c {env.get('concurrency', '?')})"
    if tool == "stime" and mode == "kb":
        return (f"TLS keybridge conn/s, s_time -new x{par} (full handshakes; "
                "HAProxy: a fixed certificate)")
    if tool == "stime":
        return (f"TLS new conn/s, s_time -{mode} x{par} ("
                + ("full handshakes" if mode == "new" else "resumed") + ")")
    if tool == "idle" and mode == "stall":
        return (f"RSS per pending TLS handshake ({env.get('tls_stall_n', '?')} stalled: "
                "the server's flight read, no Finished)")
    if tool == "idle":
        return f"RSS per idle TLS conn ({env.get('tls_idle_n', '?')} open)"
    if tool == "h2load":
        h2 = (env.get("tls_h2", "? ? ?").split() + ["?"] * 3)[:3]
        return (f"TLS {SIZE_LABEL.get(size, size)} HTTP/2, h2load -c {h2[1]} -m {h2[2]} "
                "(to the origin over HTTP/1.1)")
    return f"TLS {tool} {size} {mode}"


def _mib(kb):
    return "n/a" if kb is None else fnum(kb / 1024, 1)


def stall_section(env, rows):
    """pending handshakes: KiB each for proxyd and its peers (the same
    client, certificate and key type), and what each kept once they closed"""
    by_key = {r["key"]: r for r in rows}
    row, idle = by_key.get(("idle", "stall", "stall")), by_key.get(("idle", "idle", "idle"))
    if not row:
        return []
    L = ["### Pending TLS handshakes: KB per session", "",
         f"{env.get('tls_stall_n', '?')} handshakes left pending (bench/tlsidle.py --stall: the "
         "ClientHello sent, the server's whole flight read, the client's Finished never sent), one "
         "after the other on the same path; RSS read before, with them, and once the client had "
         "closed them and the proxy held no more sockets than before. Every path terminates "
         "TLS with the same EC P-256 certificate through the same OpenSSL "
         f"({env.get('openssl_version', '?')}); proxyd's handshake-timeout is 60 s here, "
         "as nginx's ssl_handshake_timeout (HAProxy: timeout client 5m), so none is cut "
         "before the RSS is read.", "",
         "| path | KiB per pending handshake | RSS before → with them → once closed (MiB) | "
         "kept once closed (MiB) | kept from the idle row before (MiB) |",
         "|---|---:|---|---:|---:|"]
    for t in STALL_PATHS + sorted(set(row["t"]) - set(STALL_PATHS)):
        d = row["t"].get(t)
        if not d:
            continue
        i = (idle or {"t": {}})["t"].get(t) or {}
        kept = None if not d.get("rss2_kb") else d["rss2_kb"] - (d.get("rss0_kb") or 0)
        before = None if not i.get("rss2_kb") else i["rss2_kb"] - (i.get("rss0_kb") or 0)
        kib = "n/a" if d.get("kib_conn") is None else f"{d['kib_conn']:.1f}"
        L.append(f"| {t} | {kib}{' **BAD**' if d['bad'] else ''} | {_mib(d.get('rss0_kb'))} → "
                 f"{_mib(d.get('rss1_kb'))} → {_mib(d.get('rss2_kb'))} | {_mib(kept)} | {_mib(before)} |")
    kib = {t: row["t"][t]["kib_conn"] for t in STALL_PATHS
           if row["t"].get(t) and row["t"][t].get("kib_conn")}
    L.append("")
    if len(kib) >= 2 and max(kib.values()) <= 1.15 * min(kib.values()):
        L.append(f"{'All three' if len(kib) == 3 else 'Both'} pay within {100 * (max(kib.values()) / min(kib.values()) - 1):.0f} % of "
                 "each other: the cost is OpenSSL's own state while a server handshake waits for the "
                 "client's Finished (massif: its handshake message buffer, 16 KB grown to 21.8 KB and "
                 "zeroed; the SSL object, 7.6 KB; the buffering BIO of the server's flight, 2 × 4 KB; "
                 "the handshake keys' two cipher contexts, the session, key shares), which no public "
                 "API shrinks; each proxy's own part is the rest (proxyd: about 2.6 KB).")
    L += ["Memory a peer kept from the idle row is reused first and can hide up to that much of this "
          "row; kept once closed: what the process did not hand back to the system.", ""]
    return L
