"""The TLS rows' labels, the pending-handshake section and the HTTP/2
memory section, for report.py (bench/run's idle and stall rows:
bench/tlsidle.py, RSS before, with the connections, and once they are
closed; the h2idle and h2stream rows: bench/h2mem.sh)."""
import statistics

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
    if tool == "idle" and mode == "h2idle":
        return (f"RSS per idle HTTP/2 conn ({(env.get('tls_h2mem', '?').split() + ['?'])[0]} open: "
                "preface and SETTINGS, then nothing)")
    if tool == "idle" and mode == "h2stream":
        hm = (env.get("tls_h2mem", "? ? ?").split() + ["?"] * 3)[:3]
        return (f"RSS per open HTTP/2 stream ({hm[1]} held over {hm[2]} conns; "
                "req/s: answers/s once released)")
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


H2MEM_PATHS = ["proxyd-tls-h2", "haproxy-tls-h2"]


def h2mem_figures(rs):
    """per unit (connection or stream) medians of the h2 memory rows' extra
    fields (bench/h2mem.sh's "h2mem:" line): Pss, Anonymous, descriptors"""
    def med(f):
        v = [f(x) for x in rs if x.get("conns")]
        v = [y for y in v if y is not None]
        return statistics.median(v) if v else None
    if not any("pss0" in x for x in rs):
        return {}
    return {
        "pss_unit": med(lambda x: (x["pss1"] - x["pss0"]) / x["conns"] if "pss1" in x else None),
        "anon_unit": med(lambda x: (x["anon1"] - x["anon0"]) / x["conns"] if "anon1" in x else None),
        "fd_unit": med(lambda x: (x["fd1"] - x["fd0"]) / x["conns"] if "fd1" in x else None),
    }


def h2mem_section(env, rows):
    """memory per idle HTTP/2 connection and per open stream, proxyd beside
    HAProxy (issue 36)"""
    by_key = {r["key"]: r for r in rows}
    idle, stream = by_key.get(("idle", "h2idle", "h2idle")), by_key.get(("idle", "h2stream", "h2stream"))
    if not idle and not stream:
        return []
    hm = (env.get("tls_h2mem", "? ? ?").split() + ["?"] * 3)[:3]
    L = ["### HTTP/2 memory: KiB per idle connection and per open stream", "",
         f"Idle: {hm[0]} TLS connections (ALPN h2) opened one by one (bench/h2mem.py idle), each with "
         "the client preface and SETTINGS sent, the server's SETTINGS acknowledged and its "
         "acknowledgement of ours read, then nothing; every one checked still open (no GOAWAY, no "
         f"EOF) after the memory was read. Streams: {hm[2]} such connections, then {hm[1]} GET streams "
         "spread over them, each forwarded over HTTP/1.1 to nginx, whose /hold/ location passes it to "
         "bench/h2mem.py origin, which holds every response until all are held (its count) and the "
         "memory was read; per stream = (with the streams − with the connections alone) / streams; "
         "each stream also holds a server connection, on both proxies. Both proxies restarted before "
         "each row and warmed up alike (one small run), one worker / nbthread 1, the same certificate, "
         "client and origin. Memory from /proc/PID/smaps_rollup: Rss, Pss (its share of shared pages), "
         "Anonymous (heap, what the process allocated); file descriptors from /proc/PID/fd. Kernel "
         "memory (socket buffers) is in none of these.", "",
         "| row | path | RSS KiB/unit | Pss KiB/unit | Anon KiB/unit | fds/unit | "
         "RSS before → with → once closed (MiB) | proxyd / HAProxy (RSS) |",
         "|---|---|---:|---:|---:|---:|---|---:|"]

    def k(v, p=1):
        return "n/a" if v is None else f"{v:.{p}f}"
    for name, row in (("idle connection", idle), ("open stream", stream)):
        if not row:
            continue
        first = True
        for t in H2MEM_PATHS + sorted(set(row["t"]) - set(H2MEM_PATHS)):
            d = row["t"].get(t)
            if not d:
                continue
            before = d.get("rss0_kb")
            ratio = ""
            if t == "proxyd-tls-h2":
                vb = row.get("vs_base", {}).get("h2", {}).get("perf")
                ratio = "n/a" if vb is None else f"{vb:.2f}"
            rss = k(d.get("kib_conn"))
            L.append(f"| {name if first else ''} | {t} | {rss}{' **BAD**' if d['bad'] else ''} | "
                     f"{k(d.get('pss_unit'))} | {k(d.get('anon_unit'))} | {k(d.get('fd_unit'), 2)} | "
                     f"{fnum((before or 0) / 1024, 1)} → {fnum((d.get('rss1_kb') or 0) / 1024, 1)} → "
                     f"{fnum((d.get('rss2_kb') or 0) / 1024, 1)} | {ratio} |")
            first = False
    L += ["", "RSS before, for the stream row: with its connections open. fds/unit: the descriptors each connection or stream holds "
          "(HAProxy: its server connection; proxyd as well as its own per-stream ones).", ""]
    return L
