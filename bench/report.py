#!/usr/bin/env python3
"""Helpers for bench/run.

  report.py parse ab|wrk|h2load|ftp|stime|idle FILE
                                     print "rps complete failed non2xx sockerr max_ms kib_s extra"
                                     (extra: "k=v;k=v" for stime and idle, else "-")
  report.py parse curl FILE BYTES    the same for one large-file fetch of BYTES bytes
  report.py report OUTDIR            OUTDIR/runs.tsv -> results.md (also on stdout),
                                     results.csv, chart.png (gnuplot); exit 3 when a
                                     run failed or had failed requests
"""
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys

SIZES = ["10k", "100k", "1m", "big", "1k", "250k"]
SIZE_LABEL = {"1k": "1 KB", "10k": "10 KB", "100k": "100 KB", "1m": "1 MB"}
TARGETS = ["direct", "proxyd-plug", "base-plug", "proxyd-http", "base-http",
           "haproxy-tcp", "haproxy-http", "proxyd-ftp", "proftpd-ftp", "proxyd-r66"]
# the TLS rows (bench/run rows_tls): their own paths, base and peers
TLS_TARGETS = ["direct-tls", "proxyd-tls-http", "haproxy-tls-http", "proxyd-tls-plug",
               "haproxy-tls-tcp", "nginx-tls-tcp", "proxyd-tls-kb", "proxyd-tls-kbcold",
               "haproxy-tls-orig", "proxyd-tls-h2", "haproxy-tls-h2",
               "proxyd-lim-tls-http", "proxyd-lim-tls-plug"]
TLS_BASE = "direct-tls"
TLS_PAIRS = [("http", "proxyd-tls-http", "haproxy-tls-http"),
             ("plug", "proxyd-tls-plug", "haproxy-tls-tcp"),
             ("plug vs nginx", "proxyd-tls-plug", "nginx-tls-tcp"),
             # HAProxy has no keybridge: its peer terminates with a fixed
             # certificate (and verifies the server, as keybridge does)
             ("keybridge warm", "proxyd-tls-kb", "haproxy-tls-orig"),
             ("keybridge cold", "proxyd-tls-kbcold", "haproxy-tls-orig"),
             ("h2", "proxyd-tls-h2", "haproxy-tls-h2"),
             # the same proxyd paths with <source-limits> and a <fingerprint>
             # rule over those without (JA4 is computed on both)
             ("http limits+JA4", "proxyd-lim-tls-http", "proxyd-tls-http"),
             ("plug limits+JA4", "proxyd-lim-tls-plug", "proxyd-tls-plug")]
TLS_KEY_ORDER = [("ab", "10k", "ka"), ("wrk", "10k", "ka"), ("ab", "1m", "ka"), ("wrk", "1m", "ka"),
                 ("stime", "1k", "new"), ("stime", "1k", "reuse"), ("ab", "1k", "close"),
                 ("idle", "idle", "idle"), ("idle", "stall", "stall"),
                 ("idle", "h2idle", "h2idle"), ("idle", "h2stream", "h2stream"), ("h2load", "10k", "h2")]
BASE = "direct"
# the zones rows (bench/run rows_zones, mode "zones"): direct and two proxyds,
# the one with zones compared with the one without (its peer)
ZONES_TARGETS = ["direct", "proxyd-nozones", "proxyd-zones"]
ZONES_PAIRS = [("zones", "proxyd-zones", "proxyd-nozones")]
# bench/run --baseline REF: (label, current path, the same path with proxyd built from REF)
BASELINE_PAIRS = [("plug", "proxyd-plug", "base-plug"), ("http", "proxyd-http", "base-http")]
# the CPU headline: proxyd's CPU per unit of work over its peer's, same row and round
CPU_PAIRS = [("plug", "proxyd-plug", "haproxy-tcp"), ("http", "proxyd-http", "haproxy-http"),
             ("ftp", "proxyd-ftp", "proftpd-ftp")]
STALL_MS = 1000   # a request this slow waited for a retransmission timeout (SYN: 1 s)
TOOL_ORDER = {"ab": 0, "wrk": 1, "curl": 2, "ftp": 3, "r66": 4}
FTP_ORDER = ["retr-pasv-c1", "retr-pasv-c10", "retr-port-c1", "retr-port-c10",
             "stor-pasv-c1", "stor-pasv-c10", "stor-port-c1", "stor-port-c10",
             "send250k-c1", "send250k-c10", "big"]


from report_runs import (  # bench/report_runs.py, beside this file
    parse_ab, parse_wrk, parse_h2load, parse_curl, parse_ftp, parse_stime, parse_idle,
    extra_kv, run_metric, run_cpu_s, run_gb, cpu_unit, run_cpu_per_unit,
    cmd_parse, read_kv, read_metrics, fnum, ratio, isnum,
    ours, kb_problem, run_bad, run_failed_requests, run_problem,
    by_bytes, COUNTED,
)
from report_scan import scan_section  # bench/report_scan.py: the scanning rows
from report_tls import (  # bench/report_tls.py: TLS row labels, pending handshakes, h2 memory
    tls_label, stall_section, h2mem_figures, h2mem_section)


def human_bytes(n):
    n = int(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def tls_section(out, env, rows, targets, pairs, netns):
    """the TLS rows: paths, the per-core limit, proxyd vs HAProxy, the full table"""
    L = []
    if not rows:
        return L
    pin = env.get("pin", "?")
    hav = (env.get("haproxy_version", "").split(" - ")[0].replace(" version", "").split(" 20")[0]
           or "HAProxy")
    desc = {
        "direct-tls": "no proxy: the client's TLS straight to nginx https ("
                      + ("forwarded by the fw's kernel" if netns else "127.0.0.1") + "), the reference",
        "proxyd-tls-http": f"proxyd {env.get('proxyd_git', '?')}, http analyser, `<tls side=\"client\" "
                           "mode=\"terminate\">` + `<tls side=\"server\" mode=\"originate\" "
                           "verify=\"required\" ca= sni=\"origin.test\">` to nginx https "
                           "(server keep-alive pool, sessions resumed per worker)",
        "haproxy-tls-http": f"{hav}, mode http, `bind ... ssl crt` (alpn http/1.1), `server ... ssl "
                            "verify required ca-file sni str(origin.test) verifyhost origin.test` "
                            "(alpn http/1.1), option http-keep-alive, http-reuse always",
        "proxyd-tls-plug": "proxyd, plug analyser, `<tls side=\"client\" mode=\"terminate\" "
                           "handshake-timeout=\"60s\">`, to nginx plain",
        "haproxy-tls-tcp": f"{hav}, mode tcp, `bind ... ssl crt`, to nginx plain",
        "nginx-tls-tcp": "nginx, one process, `stream { server { listen ... ssl; proxy_pass ...; } }` "
                         "with the same certificate, to nginx plain (loopback only)",
        "proxyd-tls-kb": "proxyd, plug analyser, `<tls side=\"client\" mode=\"keybridge\">` + "
                         "`<tls side=\"server\" mode=\"originate\" verify=\"required\" "
                         "sni=\"origin.test\">` to the keybridge origin: an nginx https that "
                         "alternates two certificates for origin.test (two keys) by connection and "
                         "resumes no session, so every server handshake is full. Warm: after the "
                         "content check both leaves are in the worker's cache; each run must mint "
                         "none (`proxyd_tls_keybridge_leaves_total`, checked)",
        "proxyd-tls-kbcold": "the same with `cache=\"1\"`: the alternating certificates evict "
                             "each other, a leaf minted per connection (at least 90 % of them, "
                             "checked: s_time's parallel connections reach the alternation a "
                             "little out of order)",
        "haproxy-tls-orig": f"{hav}, mode tcp, `bind ... ssl crt` (a **fixed certificate**: HAProxy "
                            "has no keybridge), `server ... ssl verify required ca-file sni "
                            "str(origin.test) verifyhost origin.test` to the same keybridge origin: "
                            "the keybridge rows' peer",
        "proxyd-tls-h2": "proxyd, http analyser, `<tls side=\"client\" mode=\"terminate\">` + "
                         "`<http h2=\"yes\">` (ALPN h2 first): HTTP/2 from the client, HTTP/1.1 "
                         "to nginx plain (server keep-alive pool)",
        "haproxy-tls-h2": f"{hav}, mode http, `bind ... ssl crt alpn h2,http/1.1`, HTTP/1.1 to nginx "
                          "plain, option http-keep-alive, http-reuse always: the h2 row's peer",
        "proxyd-lim-tls-http": "proxyd-tls-http plus `<fingerprint ja4=\"t13d*\" action=\"accept\"/>` "
                               "and `<source-limits per=\"address\" sessions=\"100000\" "
                               "connections=\"100000/s\" requests=\"1000000/s\"/>` (never reached): "
                               "the cost of the limits and the fingerprint rule; its peer is proxyd-tls-http",
        "proxyd-lim-tls-plug": "proxyd-tls-plug plus the same `<fingerprint>` and `<source-limits "
                               "per=\"ja4\" sessions=\"100000\" connections=\"100000/s\"/>` (judged "
                               "at each ClientHello); its peer is proxyd-tls-plug",
    }
    L.append("## TLS")
    L.append("")
    L.append(f"Paths (each proxy a process of its own, workers/nbthread {env.get('workers', '1')}/{env.get('haproxy_threads', '1')}, pinned to CPU {pin}; "
             "certificates made for this run with the openssl command: a CA, front.test for the "
             "proxies, origin.test for nginx, all EC P-256 (ECDSA-SHA256); TLS 1.3 on every leg, "
             "checked before the runs; OpenSSL's default key exchange, X25519; "
             f"{env.get('openssl_version', 'OpenSSL ?')}):")
    L.append("")
    for t in targets:
        L.append(f"- **{t}**: {desc.get(t, t)}")
    npath = os.path.join(out, "notes.txt")
    if os.path.exists(npath):
        with open(npath) as f:
            for ln in f:
                if "TLS" in ln or "-tls" in ln or "openssl" in ln:
                    L.append(f"- {ln.strip()}")
    L.append("")
    sign = env.get("tls_speed_ecdsap256_sign_s")
    ver = env.get("tls_speed_ecdsap256_verify_s")
    x = env.get("tls_speed_x25519_op_s")
    if isnum(sign) and isnum(x):
        sign, ver, x = float(sign), float(ver) if isnum(ver) else None, float(x)
        full_us = 1e6 / sign + 1e6 / x
        res_us = 1e6 / x
        L.append(f"Per-core limit (`openssl speed -seconds {env.get('tls_speed_seconds', '?')} ecdsap256 "
                 f"ecdhx25519`, pinned to CPU {pin}): **ECDSA P-256 {fnum(sign)} sign/s**, "
                 f"{fnum(ver)} verify/s; **X25519 {fnum(x)} op/s**. A full TLS 1.3 handshake costs "
                 f"the server at least one P-256 sign and one X25519 derivation: "
                 f"{full_us:.0f} µs of crypto, at most ~{fnum(1e6 / full_us)} full handshakes/s per "
                 f"core; a resumed one (PSK with (EC)DHE) at least the X25519: {res_us:.0f} µs, "
                 f"~{fnum(1e6 / res_us)}/s per core. Compare with the CPU µs/req column (the proxy's "
                 "whole cost per connection: handshake, the request, its server connection).")
    else:
        L.append("Per-core limit: no `openssl speed` figure in this run (BENCH_TLS_SPEED=0 or it failed).")
    L.append("")

    # proxyd vs HAProxy, row by row
    if any(peer.startswith(("haproxy-", "nginx-")) for _, _, peer in pairs):
        L.append("### proxyd vs HAProxy (TLS)")
        L.append("")
        L.append("| row | direct-tls | proxyd | HAProxy | proxyd / HAProxy | CPU µs/req proxyd | "
                 "CPU µs/req HAProxy | CPU/req ratio |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            for lab, cur, peer in pairs:
                c, p = row["t"].get(cur), row["t"].get(peer)
                if not c or not p or not peer.startswith(("haproxy-", "nginx-")):
                    continue    # (the limits pairs: in the CPU headline and "vs peer")
                idle = row["key"][0] == "idle"
                b = row["t"].get(TLS_BASE)

                def val(d):
                    if d is None:
                        return "—"
                    if idle:
                        unit = "stream" if row["key"][1] == "h2stream" else "conn"
                        return "n/a" if d.get("kib_conn") is None else f"{d['kib_conn']:.1f} KiB/{unit}"
                    if by_bytes(row["key"]) or row["key"][1] == "1m":
                        return f"{fnum(d['rps'])} req/s, {fnum(d['mib_s'])} MiB/s"
                    unit = "conn/s" if row["key"][0] == "stime" or row["key"][2] == "close" else "req/s"
                    return f"{fnum(d['rps'])} {unit}"
                bad = " **BAD**" if c["bad"] or p["bad"] else ""
                vb = row["vs_base"].get(lab, {})
                cells = [row["label"], "—" if idle else val(b), f"{val(c)} ({cur})", f"{val(p)} ({peer})",
                         ratio(vb.get("perf")) + (" (lower: less memory)" if idle else "") + bad,
                         "—" if idle else fnum(c.get("cpu_us"), 1),
                         "—" if idle else fnum(p.get("cpu_us"), 1),
                         "—" if idle else ratio(vb.get("cpu"))]
                L.append("| " + " | ".join(cells) + " |")
        L.append("")
        L.append("proxyd / HAProxy = median over rounds of the ratio measured within the same round "
                 "(req/s or connections/s: above 1 proxyd is ahead; the RSS row: KiB per idle "
                 "connection, below 1 proxyd uses less). CPU/req ratio = proxyd's CPU µs per "
                 "request (connection) over HAProxy's: below 1 proxyd spends less.")
        L.append("")

    L.append("### TLS results")
    L.append("")
    hdr = ["row", "path", "req/s", "MiB/s", "spread", "failed", "CPU s", "CPU µs/req", "peak RSS",
           "ratio to direct-tls", "vs peer", "longest ms", "note", "status"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|---|---|" + "|".join(["---:"] * (len(hdr) - 5)) + "|---|---|---|")
    peer_of = {cur: peer for _, cur, peer in pairs}
    for row in rows:
        first = True
        idle = row["key"][0] == "idle"
        for t in targets:
            d = row["t"].get(t)
            if not d:
                continue
            note = ""
            if idle and d.get("kib_conn") is not None:
                note = (f"{d['kib_conn']:.1f} KiB/{'stream' if row['key'][1] == 'h2stream' else 'conn'} (RSS {fnum((d.get('rss0_kb') or 0) / 1024, 1)} → "
                        f"{fnum((d.get('rss1_kb') or 0) / 1024, 1)} MiB"
                        + (f", {fnum(d['rss2_kb'] / 1024, 1)} once closed)" if d.get("rss2_kb") else ")"))
            elif d.get("kb_minted") is not None:
                note = f"leaves minted {d['kb_minted']}, cached {d['kb_cached']} (all rounds)"
            elif d.get("resumed_pct") is not None:
                note = f"resumed {d['resumed_pct']:.0f}%"
            elif d.get("sys_req") is not None:
                note = f"{d['sys_req']:.1f} syscalls/req"
            lm = d["longest_ms"]
            cells = [row["label"] if first else "", t,
                     fnum(d["rps"]), fnum(d["mib_s"], 1),
                     "n/a" if d["spread"] is None else f"{d['spread'] * 100:.0f}%",
                     f"{d['failed']}/{d['requests']}" if d["failed"] else "0",
                     "—" if t == TLS_BASE else fnum(d.get("cpu_s"), 2),
                     "—" if t == TLS_BASE or idle else fnum(d.get("cpu_us"), 1),
                     "—" if t == TLS_BASE else ("n/a" if d.get("hwm_kb") is None
                                                else f"{d['hwm_kb'] / 1024:.1f} MiB"),
                     "1" if t == TLS_BASE else ("—" if idle else ratio(d.get("ratio"))),
                     ratio(d.get("vs_base")) + f" ({peer_of[t]})" if t in peer_of else "",
                     "n/a" if lm is None else (f"**{lm}**" if lm >= STALL_MS else str(lm)),
                     note, "**BAD**" if d["bad"] else "ok"]
            L.append("| " + " | ".join(cells) + " |")
            first = False
    L.append("")
    n = (env.get("tls_n", "? ? ?").split() + ["?"] * 3)[:3]
    dur, par = (env.get("tls_stime", "? ?").split() + ["?", "?"])[:2]
    L.append(f"TLS rows: ab -n {n[0]} (10 KB) / {n[1]} (1 MB) -c {env.get('concurrency', '?')} -k, "
             f"wrk -c{env.get('concurrency', '?')} -d{env.get('wrk_duration', '?')}s; new connections: "
             f"{par} `openssl s_time -new|-reuse -time {dur} -www /1k.bin` at once (conn/s = all "
             f"their connections / the wall time; note = the share s_time saw resumed), ab -n {n[2]} "
             f"-c {env.get('concurrency', '?')} without keep-alive (each request a new connection and "
             "a full handshake); idle: bench/tlsidle.py opens the connections one by one (handshake "
             "done, verified, then nothing sent) and the proxy's VmRSS is read without and with them: "
             "(RSS with N − RSS before) / N; its req/s is the handshakes/s while opening; h2: "
             f"`h2load -n {(env.get('tls_h2', '?').split() + ['?'])[0]} -c C -m M` over HTTP/2 "
             "(C connections, M streams at once on each). The client "
             "(ab, wrk, s_time) is not pinned and shares the 2 cores: on the handshake rows it "
             "costs more CPU per connection than the proxy, so compare CPU µs/req as well as conn/s.")
    L.append("")
    return L


def zones_section(env, rows, runs, targets, pairs):
    """the zones rows: the policy lookup's cost on new connections"""
    L = []
    if not rows:
        return L
    n, ns, an = env.get("zones_count", "?"), env.get("zones_services", "?"), env.get("zones_analyser", "?")
    svc = env.get("zones_service", "?")
    L.append("## Zones: new connections through 1 service vs through zones and a shared port")
    L.append("")
    L.append(f"Paths (transparent, {an} analyser, one process each, pinned to CPU {env.get('pin', '?')}, "
             "both logging every session at level info to a file):")
    L.append("")
    L.append("- **proxyd-nozones**: one service on its port, no `<zones>`, no `<clients>`/`<servers>`")
    L.append(f"- **proxyd-zones**: {n} zones in the daemon file (bench/zonesgen.py: nested and flat "
             f"/24s and /28s in 198.18.0.0/15, v6 in 2001:db8::/32), {ns} services sharing the port, "
             f"each selecting by `<clients allow=\"zone:...\">` and `<servers allow=\"zone:...\">`; "
             f"the bench's client is in zone `{env.get('zones_client-zone', '?')}`, its server in "
             f"`{env.get('zones_server-zone', '?')}` (7 zones deep each); services holding that pair: "
             f"{env.get('zones_matching', '?')}; **{svc}** takes it (`proxyd-zones-trace.txt`)")
    socks = [f"{t} {env[f'zones_listen_sockets_{t}']}" for t in targets if f"zones_listen_sockets_{t}" in env]
    if socks:
        L.append("")
        L.append("Listening sockets on each path's port in the fw (`ss -ltn`): " + ", ".join(socks)
                 + ". Services sharing a port that each hold a socket of their own (SO_REUSEPORT) "
                 "spread the connections over that many accept queues: more accept(2) calls that "
                 "find nothing, more wake-ups, apart from the zone lookup itself.")
    L.append("")
    clk = int(env.get("clk_tck", "100") or 100)

    def user_us(rr):
        v = [extra_kv(r)["utime"] * 1e6 / clk / int(r["complete"]) for r in rr
             if "utime" in extra_kv(r) and r["complete"].isdigit() and int(r["complete"])]
        return statistics.median(v) if v else None
    L.append("| row | path | conn/s | spread | failed | CPU µs/conn | of it user | ratio to direct | "
             "vs peer | sessions to the service | status |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    peer_of = {cur: peer for _, cur, peer in pairs}
    for row in rows:
        first = True
        for t in targets:
            d = row["t"].get(t)
            if not d:
                continue
            tr = [r for r in runs if r["target"] == t and (r["tool"], r["size"], r["mode"]) == row["key"]]
            xs = [extra_kv(r) for r in tr]
            sess = "—" if t == BASE else (
                f"{sum(x.get('to_service', 0) for x in xs):.0f}/{sum(x.get('sessions', 0) for x in xs):.0f}"
                + (" ok" if xs and all(x.get("dispatch_ok") == 1 for x in xs) else " **WRONG**"))
            cells = [row["label"] if first else "", t, fnum(d["rps"]),
                     "n/a" if d["spread"] is None else f"{d['spread'] * 100:.0f}%",
                     f"{d['failed']}/{d['requests']}" if d["failed"] else "0",
                     "—" if t == BASE else fnum(d.get("cpu_us"), 1),
                     "—" if t == BASE else fnum(user_us(tr), 1),
                     "1" if t == BASE else ratio(d.get("ratio")),
                     ratio(d.get("vs_base")) + f" ({peer_of[t]})" if t in peer_of else "",
                     sess, "**BAD**" if d["bad"] else "ok"]
            L.append("| " + " | ".join(cells) + " |")
            first = False
    L.append("")
    for row in rows:
        for lab, cur, peer in pairs:
            per, cpu, usr = {}, {}, {}
            for r in runs:
                if (r["tool"], r["size"], r["mode"]) == row["key"] and isnum(r["rps"]):
                    per.setdefault(r["round"], {})[r["target"]] = float(r["rps"])
                    if r["cpu_ticks"].isdigit() and r["complete"].isdigit() and int(r["complete"]):
                        cpu.setdefault(r["round"], {})[r["target"]] = int(r["cpu_ticks"]) / int(r["complete"])
                        if "utime" in extra_kv(r):
                            usr.setdefault(r["round"], {})[r["target"]] = extra_kv(r)["utime"] / int(r["complete"])
            rounds = sorted(per, key=lambda k: (int(re.match(r"\d*", k).group() or 0), k))
            vals = [(k, per[k][cur] / per[k][peer]) for k in rounds if per[k].get(cur) and per[k].get(peer)]
            cvals = [(k, cpu[k][cur] / cpu[k][peer]) for k in rounds
                     if cpu.get(k, {}).get(cur) and cpu.get(k, {}).get(peer)]
            uvals = [(k, usr[k][cur] / usr[k][peer]) for k in rounds
                     if usr.get(k, {}).get(cur) and usr.get(k, {}).get(peer)]
            vb = row["vs_base"].get(lab, {})
            if vals:
                rs = [v for _, v in vals]
                L.append(f"**{cur} / {peer}: {ratio(vb.get('perf'))}** conn/s (median over the "
                         "half-rounds of the ratio within each; per half "
                         + ", ".join(f"r{k} {v:.3f}" for k, v in vals)
                         + f"; range {min(rs):.3f}..{max(rs):.3f}). CPU per connection, "
                         f"{cur} / {peer}: {ratio(vb.get('cpu'))} (medians; per half "
                         + ", ".join(f"r{k} {v:.3f}" for k, v in cvals) + ")"
                         + ("; user CPU only: " + ratio(statistics.median([v for _, v in uvals]))
                            + " (per half " + ", ".join(f"r{k} {v:.3f}" for k, v in uvals) + ")"
                            if uvals else "") + ".")
                L.append("")
    L.append(f"ab -r -s 20 -n {env.get('zones_half', '?')} -c {env.get('concurrency', '?')} (no "
             "keep-alive) http://SERVER:PORT/10k.bin: a new connection per request, so conn/s is the "
             "accept rate. Each round is two mirrored halves, Ra (nozones, direct, zones) and Rb "
             "(zones, direct, nozones), so that the fw's TIME_WAIT and conntrack state, which grows "
             "over the row, weighs on both paths alike; the medians and spreads are over the "
             "halves. vs peer = median over the halves of proxyd-zones / proxyd-nozones measured in "
             "the same half (above 1: zones faster). Sessions: after each run the proxy's log must "
             "hold a session-end line per request, and every line (ab may open a few unused "
             "connections more) the service= that must take it (proxyd-nozones itself; "
             "proxyd-zones the pair's), else the run is bad. Both paths "
             "log at info (the other rows' proxyds log warnings only), so their ratio to direct "
             "is not that of proxyd-plug's close rows. \"of it user\": the user-space part of "
             f"CPU µs/conn (utime; clock ticks of 1/{clk} s), where the policy lookup runs: the "
             "rest is the kernel's TCP, netfilter and splice work on the proxy's behalf.")
    L.append("")
    return L


def slash_list(r, k):
    """the extra field's k=a/b/c as [a, b, c] (ints), or None"""
    for kv in (r.get("extra") or "").split(";"):
        name, _, v = kv.partition("=")
        if name == k and v:
            try:
                return [int(x) for x in v.split("/")]
            except ValueError:
                return None
    return None


STEAL_PCT = 10       # a run's steal from which its row's ratio is suspect


def transfer_clients(key):
    """the clients of an FTP or R66 row of transfers (each one after the
    other on its client), None for any other row"""
    tool, _, mode = key
    if tool == "ftp":
        n = (mode.split("-") + ["", "", ""])[2].lstrip("c")
    elif tool == "r66" and mode != "big":
        n = mode.rsplit("-c", 1)[-1]
    else:
        return None
    return int(n) if n.isdigit() else None


def transfer_time_section(rows, proxies):
    """FTP and R66 rows as the time one transfer takes on its client: what
    the proxy adds to each, in µs, which a ratio hides on the 1-client rows
    (a latency, not a throughput)"""
    L = []
    for row in rows:
        n = transfer_clients(row["key"])
        d0 = row["t"].get(BASE)
        if n is None or not d0 or not d0.get("rps"):
            continue
        cells = [row["label"], f"{n * 1e6 / d0['rps']:.0f}"]
        for t in proxies:
            d = row["t"].get(t)
            cells.append(f"{n * 1e6 / d['rps']:.0f} ({n * 1e6 / d['rps'] - n * 1e6 / d0['rps']:+.0f})"
                         if d and d.get("rps") else "")
        L.append("| " + " | ".join(cells) + " |")
    if not L:
        return []
    hdr = ["row", "direct µs"] + [f"{t} µs (added)" for t in proxies]
    return (["## Time per transfer", "",
             "FTP and R66 rows: the time one transfer takes on its client (clients / transfers "
             "per second, medians), and what each path adds to it.", "",
             "| " + " | ".join(hdr) + " |", "|---|" + "|".join(["---:"] * (len(hdr) - 1)) + "|"]
            + L + [""])


def r66_ends_section(runs):
    """R66 rows: proxyd's CPU per transfer beside the two r66peer ends' own
    over the same proxied transfers (the server's schedstat, the clients'
    reaped CPU in ticks: bench/run's srv_ns and cli_ns)"""
    L = []
    keys = sorted({(r["tool"], r["size"], r["mode"]) for r in runs
                   if r["tool"] == "r66" and r["target"] == "proxyd-r66"},
                  key=lambda k: (k[2] == "big", k[2]))
    for k in keys:
        px, srv, cli = [], [], []
        for r in runs:
            if (r["tool"], r["size"], r["mode"]) != k or r["target"] != "proxyd-r66":
                continue
            x = extra_kv(r)
            n = int(r["complete"]) if r["complete"].isdigit() else 0
            if n <= 0 or not isnum(r.get("cpu_ns")) or "srv_ns" not in x:
                continue
            px.append(float(r["cpu_ns"]) / 1e3 / n)
            srv.append(x["srv_ns"] / 1e3 / n)
            cli.append(x.get("cli_ns", 0) / 1e3 / n)
        if not px:
            continue
        p, sv, cl = (statistics.median(v) for v in (px, srv, cli))
        label = "R66 large SEND" if k[2] == "big" else f"R66 250 KB SENDs, {k[2].rsplit('-c', 1)[-1]} client(s)"
        L.append(f"| {label} | {fnum(p, 1)} | {fnum(sv, 1)} | {fnum(cl, 1)} | "
                 f"{ratio(p / (sv + cl) if sv + cl > 0 else None)} |")
    if not L:
        return []
    return (["## R66: CPU per transfer, proxyd and the r66peer ends", "",
             "µs of CPU per transfer during the proxied runs (medians over rounds): proxyd, the "
             "r66peer server it connects to (one process per session: the master's schedstat and "
             "its reaped sessions' CPU), the r66peer clients (their reaped CPU, 10 ms ticks); the last column is proxyd's over the two ends' together.", "",
             "| row | proxyd | r66peer server | r66peer clients | proxyd / ends |",
             "|---|---:|---:|---:|---:|"] + L + [""])


def worker_section(env, runs, keys, label):
    """per proxyd run, its sessions (and worker threads' CPU) per worker:
    how evenly the connections were spread; only with more than one worker"""
    wr = [r for r in runs if len(slash_list(r, "wsess") or []) > 1]
    if not wr:
        return []
    L = ["## Sessions per worker", "",
         f"proxyd <workers>{env.get('workers', '?')}, HAProxy nbthread {env.get('haproxy_threads', '?')}, "
         f"CPUs {env.get('pin', '?')}. Per run: the sessions each worker accepted "
         "(proxyd_worker_sessions_accepted_total, after - before), the HTTP requests each answered "
         "(proxyd_worker_requests_total) and the MiB each relayed (proxyd_worker_bytes_total) and, "
         "when the threads are named, each worker thread's CPU ticks; imbalance = the busiest "
         "worker's share / the mean (1.00 = even), of the sessions, and of the load: the requests "
         "where there are any, else the bytes.", "",
         "| row | path | round | sessions per worker | requests per worker | MiB per worker "
         "| imbalance: sessions | load | CPU ticks per worker |",
         "|---|---|---|---|---|---|---:|---:|---|"]

    def joined(v, fmt=str):
        return " / ".join(fmt(x) for x in v) if v else "-"

    def imbalance(v):
        mean = sum(v) / len(v) if v else 0
        return f"{max(v) / mean:.2f}" if mean else None

    for k in keys:
        for r in [r for r in wr if (r["tool"], r["size"], r["mode"]) == k]:
            ws = slash_list(r, "wsess")
            wq = slash_list(r, "wreq")
            wb = slash_list(r, "wbytes")
            wc = slash_list(r, "wcpu")
            load = (imbalance(wq) if wq and sum(wq) else None) or (imbalance(wb) if wb else None) or "-"
            L.append(f"| {label(k)} | {r['target']} | {r['round']} | {joined(ws)} | "
                     f"{joined(wq) if wq and sum(wq) else '-'} | "
                     f"{joined(wb, lambda x: f'{x / 1048576:.1f}')} | {imbalance(ws) or '-'} | {load} | "
                     f"{joined(wc)} |")
    L.append("")
    return L


def cpu_headline(groups):
    """the headline: each proxy's CPU per unit of work (schedstat, ns) per
    row, and proxyd's over its peer's; groups = [(rows, paths, pairs)]"""
    L = ["## CPU per unit of work", ""]
    any_rows = False
    exact = True
    def measured(row, paths):
        return tuple(t for t in paths if row["t"].get(t, {}).get("cpu_us") is not None)

    # one table per run of rows measuring the same paths (HTTP, FTP, R66,
    # TLS...), with the ratios of the pairs both of whose paths it has
    split = []
    for rows, paths, pairs in groups:
        for row in rows:
            if not cpu_unit(row["key"])[0] or not measured(row, paths):
                continue
            used = measured(row, paths)
            if split and split[-1][1] == used:
                split[-1][0].append(row)
            else:
                split.append(([row], used, [p for p in pairs if p[1] in used and p[2] in used]))
    for rows, used, pairs in split:
        any_rows = True
        hdr = ["row", "unit"] + list(used) + [f"{cur} / {peer}" for _, cur, peer in pairs]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|---|---|" + "|".join(["---:"] * (len(hdr) - 2)) + "|")
        for row in rows:
            unit, per_gb = cpu_unit(row["key"])
            cells = [row["label"], unit]
            for t in used:
                d = row["t"].get(t)
                v = None if not d else (d.get("cpu_s_gb") if per_gb else d.get("cpu_us"))
                if d and not d.get("cpu_ns_exact", True):
                    exact = False
                cells.append("" if v is None else fnum(v, 2 if per_gb else 1)
                             + (" **BAD**" if d["bad"] else ""))
            for _, cur, peer in pairs:
                cells.append(ratio(row.get("cpu_vs", {}).get((cur, peer))))
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    if not any_rows:
        return []
    L.append("The proxy process's CPU time (user + system, all its threads: the sum of the "
             "first field of /proc/PID/task/*/schedstat, ns) from before to after a run, over "
             "the work the run did: requests (ab, wrk), transfers (FTP, R66), connections with "
             "a full handshake (s_time, ab close over TLS), or GB (large files). Median over "
             "rounds; a ratio is the median over rounds of proxyd's value over the peer's in "
             "the same round: below 1 proxyd spends less CPU on the same work. Unlike req/s "
             "this hardly depends on what else the machine runs (steal slows a run, it does "
             "not add CPU time to it); softirq work done for the proxy is not in it."
             + ("" if exact else " Some runs had no schedstat figure: counted in clock ticks."))
    L.append("")
    return L


def cmd_report(out):
    env = read_kv(os.path.join(out, "env.txt"))
    clk = int(env.get("clk_tck", "100") or 100)
    with open(os.path.join(out, "runs.tsv")) as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    # the TLS rows get a section of their own (their paths, their base)
    tls_runs = [r for r in runs if r["target"] in TLS_TARGETS]
    runs = [r for r in runs if r["target"] not in TLS_TARGETS]
    # the zones rows too (their direct runs included)
    zones_runs = [r for r in runs if r["mode"] == "zones"]
    runs = [r for r in runs if r["mode"] != "zones"]
    targets = [t for t in TARGETS if any(r["target"] == t for r in runs)]
    targets += sorted({r["target"] for r in runs} - set(targets))
    proxies = [t for t in targets if t != BASE]
    netns = env.get("mode") == "netns"
    big_label = human_bytes(env.get("big_bytes", "0") or 0) + " file, curl"

    def label(k):
        tool, size, mode = k
        if tool == "ab":
            return f"{SIZE_LABEL[size]} ab {'keep-alive' if mode == 'ka' else 'close'}"
        if tool == "wrk":
            return f"{SIZE_LABEL[size]} wrk keep-alive"
        if tool == "curl":
            return big_label
        if tool == "r66":
            if mode == "big":
                return f"R66 {env.get('r66_big_mb', '?')} MiB SEND"
            n = mode.rsplit("-c", 1)[-1]
            return f"R66 250 KB SENDs, {n} client{'s' if n != '1' else ''}"
        if tool == "ftp":
            op, dm, cl = (mode.split("-") + ["", "", ""])[:3]
            n = cl.lstrip("c")
            return (f"FTP 1 KB {op.upper()} {'passive' if dm == 'pasv' else 'active'}, "
                    f"{n} client{'s' if n != '1' else ''}")
        return f"{tool} {size} {mode}"

    keys = []
    for r in runs:
        k = (r["tool"], r["size"], r["mode"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: (TOOL_ORDER.get(k[0], 9) if k[0] in ("curl", "ftp", "r66") else 0,
                             SIZES.index(k[1]) if k[1] in SIZES else 9,
                             TOOL_ORDER.get(k[0], 9), k[2] != "ka",
                             FTP_ORDER.index(k[2]) if k[2] in FTP_ORDER else 99, k[2]))

    # ------------------------------------------------------- aggregation --
    def aggregate(runs, keys, targets, base_t, pairs, cpu_pairs=()):
        """one row per key: per path medians, ratio to base_t, and per pair
        (label, cur, other) the per-round ratio cur/other ("vs_base")"""
        rows = []
        for k in keys:
            rr = [r for r in runs if (r["tool"], r["size"], r["mode"]) == k]
            row = {"key": k, "label": label(k), "n": rr[0]["n"], "c": rr[0]["c"],
                   "bad": [run_problem(r) for r in rr if run_bad(r) and ours(r["target"])],
                   "bad_peer": [run_problem(r) for r in rr if run_bad(r) and not ours(r["target"])],
                   "t": {}}
            per_round = {}
            per_round_cpu = {}
            round_steal = {}
            for t in targets:
                tr = [r for r in rr if r["target"] == t]
                if not tr:
                    continue
                ok = [r for r in tr if isnum(r["rps"])]
                rps = [float(r["rps"]) for r in ok]
                kib = [float(r["kib_s"]) for r in ok if isnum(r.get("kib_s"))]
                # the large file: one transfer per run, so compare MiB/s, not 1/time;
                # the idle TLS row: KiB of RSS per connection
                metric = [run_metric(r, k) for r in ok if run_metric(r, k) is not None]
                d = {"runs": len(tr), "ok_runs": len(ok),
                     "rps": statistics.median(rps) if rps else None,
                     "mib_s": statistics.median(kib) / 1024 if kib else None,
                     "min": min(metric) if metric else None, "max": max(metric) if metric else None,
                     "med": statistics.median(metric) if metric else None,
                     "failed": sum(run_failed_requests(r) for r in tr),
                     "requests": sum(int(r["n"]) for r in tr if r["n"].isdigit() and r["tool"] in COUNTED)
                     + sum(int(r["complete"]) for r in tr
                           if r["tool"] not in COUNTED and r["complete"].isdigit()),
                     "bad": any(run_bad(r) for r in tr)}
                if t != base_t:
                    cpu = [run_cpu_s(r, clk) for r in ok]
                    d["cpu_s"] = statistics.median(cpu) if cpu else None
                    per = [run_cpu_s(r, clk) * 1e6 / int(r["complete"]) for r in ok
                           if r["complete"].isdigit() and int(r["complete"]) > 0]
                    d["cpu_us"] = statistics.median(per) if per else None
                    gb = run_gb(k, env)
                    d["cpu_s_gb"] = (d["cpu_s"] / gb) if gb and d["cpu_s"] is not None else None
                    d["cpu_ns_exact"] = all(isnum(r.get("cpu_ns")) for r in ok)
                    # per unit, per round: the peer's ratio is taken within a round
                    for r in ok:
                        u = run_cpu_per_unit(r, k, env, clk)
                        if u is not None:
                            per_round_cpu.setdefault(r["round"], {})[t] = u
                    hwm = [int(r["hwm_kb"]) for r in tr if r["hwm_kb"].isdigit() and int(r["hwm_kb"]) > 0]
                    d["hwm_kb"] = max(hwm) if hwm else None
                mx = [int(r["max_ms"]) for r in tr if (r.get("max_ms") or "").isdigit()]
                d["longest_ms"] = max(mx) if mx else None
                sy = [int(r["syn_retrans"]) for r in tr if (r.get("syn_retrans") or "").isdigit()]
                d["syn"] = sum(sy) if sy else None
                d["spread"] = ((d["max"] - d["min"]) / d["med"]) if d["med"] else None
                for r in ok:
                    v = run_metric(r, k)
                    if v is not None:
                        per_round.setdefault(r["round"], {})[t] = v
                        if (r.get("steal_pct") or "").isdigit():
                            round_steal.setdefault(r["round"], {})[t] = int(r["steal_pct"])
                if k[0] == "idle":
                    d["kib_conn"] = d["med"]
                    rs = [extra_kv(r) for r in ok]
                    d["rss0_kb"] = statistics.median([x["rss0"] for x in rs if "rss0" in x]) if rs else None
                    d["rss1_kb"] = statistics.median([x["rss1"] for x in rs if "rss1" in x]) if rs else None
                    d["rss2_kb"] = statistics.median([x["rss2"] for x in rs if "rss2" in x] or [0]) or None
                    d.update(h2mem_figures(rs))
                if k[0] == "h2load":
                    # system calls per request (bench/run: perf stat)
                    sc = [extra_kv(r)["syscalls"] / int(r["complete"]) for r in ok
                          if "syscalls" in extra_kv(r) and r["complete"].isdigit() and int(r["complete"])]
                    d["sys_req"] = statistics.median(sc) if sc else None
                if k[0] == "stime":
                    rs = [extra_kv(r) for r in ok]
                    res = sum(x.get("resumed", 0) for x in rs)
                    tot = res + sum(x.get("full", 0) for x in rs)
                    d["resumed_pct"] = 100 * res / tot if tot else None
                    if any("kb_minted" in x for x in rs):
                        d["kb_minted"] = int(sum(x.get("kb_minted", 0) for x in rs))
                        d["kb_cached"] = int(sum(x.get("kb_cached", 0) for x in rs))
                row["t"][t] = d
            # ratio to direct: median over rounds of the ratio measured within
            # each round (peers side by side), so slow drift of the machine cancels
            for t in row["t"]:
                vals = [d[t] / d[base_t] for d in per_round.values() if d.get(t) and d.get(base_t)]
                row["t"][t]["ratio"] = statistics.median(vals) if vals else None
                # ... and over the rounds in which neither run had steal
                clean = [d[t] / d[base_t] for rn, d in per_round.items()
                         if d.get(t) and d.get(base_t)
                         and round_steal.get(rn, {}).get(t, 100) < STEAL_PCT
                         and round_steal.get(rn, {}).get(base_t, 100) < STEAL_PCT]
                row["t"][t]["ratio_clean"] = statistics.median(clean) if clean else None
                row["t"][t]["rounds_clean"] = len(clean)
            # CPU per unit of work against each peer: median over rounds of
            # the ratio within a round (both measured side by side)
            row["cpu_vs"] = {}
            for lab, cur, peer in cpu_pairs:
                vals = [d[cur] / d[peer] for d in per_round_cpu.values() if d.get(cur) and d.get(peer)]
                row["cpu_vs"][(cur, peer)] = statistics.median(vals) if vals else None
            # --baseline: current / baseline, the same way (within each round)
            row["vs_base"] = {}
            for lab, cur, bt in pairs:
                vals = [d[cur] / d[bt] for d in per_round.values() if d.get(cur) and d.get(bt)]
                c, b = row["t"].get(cur, {}), row["t"].get(bt, {})
                ck = "cpu_s" if by_bytes(k) else "cpu_us"
                cpu = (c[ck] / b[ck]) if c.get(ck) and b.get(ck) else None
                row["vs_base"][lab] = {"perf": statistics.median(vals) if vals else None, "cpu": cpu}
                if cur in row["t"]:
                    row["t"][cur]["vs_base"] = row["vs_base"][lab]["perf"]
            # the hypervisor's share (steal): a vCPU taken away while it
            # holds a socket lock stalls its peers (paravirtual spinlocks),
            # which inflates the kernel time of whatever runs then
            st = [int(r["steal_pct"]) for r in rr if (r.get("steal_pct") or "").isdigit()]
            row["steal_max"] = max(st) if st else None
            oth = [int(r["other_pct"]) for r in rr if (r.get("other_pct") or "").isdigit()]
            row["others_med"] = statistics.median(oth) if oth else None
            row["others_max"] = max(oth) if oth else None
            rows.append(row)
        return rows

    pairs = [(lab, cur, base) for lab, cur, base in BASELINE_PAIRS
             if cur in targets and base in targets]
    cpu_pairs = [(lab, cur, peer) for lab, cur, peer in CPU_PAIRS + BASELINE_PAIRS
                 if cur in targets and peer in targets]
    rows = aggregate(runs, keys, targets, BASE, pairs, cpu_pairs)
    tls_targets = [t for t in TLS_TARGETS if any(r["target"] == t for r in tls_runs)]
    tls_keys = [k for k in TLS_KEY_ORDER if any((r["tool"], r["size"], r["mode"]) == k for r in tls_runs)]
    tls_keys += sorted({(r["tool"], r["size"], r["mode"]) for r in tls_runs} - set(tls_keys))
    tls_pairs = [(lab, cur, peer) for lab, cur, peer in TLS_PAIRS
                 if cur in tls_targets and peer in tls_targets]
    tls_rows = aggregate(tls_runs, tls_keys, tls_targets, TLS_BASE, tls_pairs, tls_pairs)
    for row in tls_rows:
        row["label"] = tls_label(row["key"], env)
    zones_targets = [t for t in ZONES_TARGETS if any(r["target"] == t for r in zones_runs)]
    zones_keys = sorted({(r["tool"], r["size"], r["mode"]) for r in zones_runs})
    zones_pairs = [(lab, cur, peer) for lab, cur, peer in ZONES_PAIRS
                   if cur in zones_targets and peer in zones_targets]
    zones_rows = aggregate(zones_runs, zones_keys, zones_targets, BASE, zones_pairs, zones_pairs)
    for row in zones_rows:
        row["label"] = "10 KB ab close (zones row)"

    # ---------------------------------------------------------------- CSV --
    cols = ["row", "tool", "size", "mode", "path", "n", "c", "runs", "ok_runs", "req_s_median",
            "mib_s_median", "min", "max", "spread_pct", "failed_requests", "cpu_s_median",
            "cpu_us_per_req", "peak_rss_kib", "ratio_to_direct", "longest_ms", "syn_retrans",
            "status"] + (["ratio_to_baseline"] if pairs else []) \
        + (["ratio_to_peer", "kib_per_idle_conn", "resumed_pct"] if tls_rows or zones_rows else [])
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for row in rows + tls_rows + zones_rows:
            tls = any(row is x for x in tls_rows + zones_rows)
            for t, d in row["t"].items():
                def c(v, digits=4):
                    return "" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else v)
                w.writerow([row["label"], *row["key"], t, row["n"], row["c"], d["runs"],
                            d["ok_runs"], c(d["rps"], 2), c(d["mib_s"], 2), c(d["min"], 2),
                            c(d["max"], 2), c(None if d["spread"] is None else d["spread"] * 100, 1),
                            d["failed"], c(d.get("cpu_s"), 2), c(d.get("cpu_us"), 1),
                            c(d.get("hwm_kb")), c(d.get("ratio"), 4), c(d["longest_ms"]),
                            c(d["syn"]), "BAD" if d["bad"] else "ok"]
                           + ([c(None if tls else d.get("vs_base"), 4)] if pairs else [])
                           + ([c(d.get("vs_base") if tls else None, 4), c(d.get("kib_conn"), 2),
                               c(d.get("resumed_pct"), 1)] if tls_rows or zones_rows else []))

    # ----------------------------------------------------------- markdown --
    L = []
    quick = env.get("quick") == "1"
    L.append(f"# proxyd benchmark, {'netns (client -> fw -> server)' if netns else 'loopback'}"
             f"{' QUICK' if quick else ''}, {env.get('date_utc', '?')}")
    L.append("")
    L.append(f"Machine: {env.get('cpu_model', '?')}, {env.get('nproc', '?')} cores, "
             f"{env.get('mem_total', '?')}, {env.get('host', '?')}; load average "
             f"{env.get('loadavg_start', '?')} at start, {env.get('loadavg_end', '?')} at end "
             "(a shared machine: read the ratios, not the absolute numbers).")
    L.append("")
    hav = (env.get("haproxy_version", "").split(" - ")[0].replace(" version", "").split(" 20")[0]
           or "HAProxy")
    splice = {"1": "forced splice", "auto": "splice-auto"}.get(env.get("haproxy_splice"), "no splice")
    desc = {
        "direct": "no proxy: " + ("forwarded by the fw namespace's kernel, conntrack on"
                                  if netns else "ab -> nginx on 127.0.0.1"),
        "proxyd-plug": f"proxyd {env.get('proxyd_git', '?')}, plug analyser, "
                       f"splice={env.get('proxyd_splice', '?')}, buffer={env.get('proxyd_buffer', 'default')}",
        "proxyd-http": f"proxyd {env.get('proxyd_git', '?')}, http analyser (defaults: keep-alive both sides)",
        "base-plug": f"the baseline: proxyd {env.get('baseline_git', '?')} (--baseline "
                     f"{env.get('baseline_ref', '?')}), configured like proxyd-plug",
        "base-http": f"the baseline: proxyd {env.get('baseline_git', '?')} (--baseline "
                     f"{env.get('baseline_ref', '?')}), configured like proxyd-http",
        "haproxy-tcp": f"{hav}, mode tcp, {splice}",
        "haproxy-http": f"{hav}, mode http, option http-keep-alive, http-reuse always",
        "proxyd-ftp": "proxyd, ftp analyser, fixed mode on 127.0.0.1 in front of vsftpd, "
                      "client-data=keep server-data=passive: in the active rows proxyd "
                      "connects to the client (FTP rows only; their direct is "
                      "ftpload.py -> vsftpd on 127.0.0.1, vsftpd's own active mode)",
        "proftpd-ftp": f"{env.get('proftpd_version', 'ProFTPD')} with mod_proxy, a reverse FTP "
                       "proxy in front of vsftpd (ProxyDataTransferPolicy client; one process per "
                       "session: its CPU includes the sessions' reaped processes; netns: in the fw "
                       "namespace on its own address, not transparent)",
        "proxyd-r66": "proxyd, r66 analyser, fixed mode on 127.0.0.1 in front of an r66peer "
                      "server (R66 rows only; their direct is r66peer client -> server)",
    }
    L.append("Paths (proxies: one process each, "
             f"workers/nbthread {env.get('workers', '?')}/{env.get('haproxy_threads', '1')}, pinned to CPU {env.get('pin', '?')}"
             + (", TPROXY'd transparent listeners in the fw namespace (deploy/inline-tproxy.sh), "
                f"spoof-source={'yes' if env.get('spoof') == '1' else 'no'}" if netns else
                ", fixed target on 127.0.0.1") + "):")
    L.append("")
    for t in targets:
        L.append(f"- **{t}**: {desc.get(t, t)}")
    notes = []
    npath = os.path.join(out, "notes.txt")
    if os.path.exists(npath):
        with open(npath) as f:
            notes = [ln.strip() for ln in f if ln.strip()]
    for n in notes:
        L.append(f"- {n}")
    L.append("")
    L.append(f"{env.get('rounds', '?')} round(s); in each round every row runs its paths back to "
             "back, in an order that rotates from row to row and round to round. "
             f"ab -c {env.get('concurrency', '?')} with -n {env.get('n_10k')}/{env.get('n_100k')}/"
             f"{env.get('n_1m')} (10 KB/100 KB/1 MB); wrk -t{env.get('wrk_threads')} "
             f"-c{env.get('concurrency')} -d{env.get('wrk_duration')}s; the large file once per "
             "path and round with curl. Values are medians over rounds; ratio = median of the "
             "per-round ratios to direct (MiB/s for the large file, req/s otherwise)."
             + (" QUICK MODE: a smoke check, the numbers mean little." if quick else ""))
    L.append("")
    if env.get("incomplete"):
        L.append(f"**INCOMPLETE RUN ({env['incomplete']}): only the runs finished before the "
                 "stop are counted.**")
        L.append("")

    L.extend(cpu_headline([(rows, [t for t in targets if t != BASE], cpu_pairs),
                           (tls_rows, [t for t in tls_targets if t != TLS_BASE], tls_pairs),
                           (zones_rows, zones_targets, zones_pairs)]))
    L.extend(r66_ends_section(runs))

    # summary matrix: ratio to direct
    L.append("## Ratio to direct")
    L.append("")
    stolen = any((row.get("steal_max") or 0) > 0 for row in rows)
    hdr = ["row", "direct"] + proxies + (["steal, max %"] if stolen else [])
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|---|" + "|".join(["---:"] * (len(hdr) - 1)) + "|")
    slowest = None
    for row in rows:
        d0 = row["t"].get(BASE)
        if by_bytes(row["key"]):
            first = "n/a" if not d0 or d0["mib_s"] is None else f"{fnum(d0['mib_s'])} MiB/s"
        else:
            unit = "transfers/s" if row["key"][0] in ("ftp", "r66") else "req/s"
            first = "n/a" if not d0 else f"{fnum(d0['rps'])} {unit}"
        cells = [row["label"], first]
        for t in proxies:
            d = row["t"].get(t)
            cells.append("" if not d else ratio(d.get("ratio")) + (" **BAD**" if d["bad"] else ""))
            if d and d.get("ratio") is not None and t.startswith("proxyd"):
                if slowest is None or d["ratio"] < slowest[0]:
                    slowest = (d["ratio"], t, row["label"])
        if stolen:
            sm = row.get("steal_max")
            cells.append("" if sm is None else (f"**{sm}**" if sm >= STEAL_PCT else str(sm)))
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    if stolen:
        L.append("| row | " + " | ".join(f"{t}: ratio in rounds without steal" for t in proxies) + " |")
        L.append("|---|" + "|".join(["---:"] * len(proxies)) + "|")
        for row in rows:
            if (row.get("steal_max") or 0) < STEAL_PCT:
                continue
            cells = [row["label"]]
            for t in proxies:
                d = row["t"].get(t)
                if not d or t == BASE:
                    cells.append("")
                elif d.get("ratio_clean") is None:
                    cells.append("none")
                else:
                    n = d["rounds_clean"]
                    cells.append(f"{d['ratio_clean']:.2f} ({n} round{'s' if n != 1 else ''})")
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        L.append(f"steal = the share of the machine's CPU time the hypervisor took during a run "
                 f"(/proc/stat), the highest of the row's runs; bold from {STEAL_PCT} %: a vCPU "
                 "taken away while it holds a socket lock stalls the other (paravirtual "
                 "spinlocks), so such a row's ratio says more about the host than about the paths. "
                 f"The second table takes, for each such row, only the rounds in which both runs "
                 f"(the path's and direct's) had under {STEAL_PCT} %.")
        L.append("")
    if slowest:
        L.append(f"Slowest proxyd ratio: **{slowest[1]}, {slowest[2]}: {slowest[0]:.2f}** of direct.")
        L.append("")
    L.extend(transfer_time_section(rows, proxies))

    if pairs:
        bref = f"{env.get('baseline_ref', '?')} ({env.get('baseline_git', '?')})"
        L.append(f"## proxyd vs baseline {bref}")
        L.append("")
        hdr = ["row"]
        for lab, cur, base in pairs:
            hdr += [f"{lab}: {cur} / {base}", f"{lab}: CPU/req ratio"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|---|" + "|".join(["---:"] * (len(hdr) - 1)) + "|")
        geo = {lab: [] for lab, _, _ in pairs}
        for row in rows:
            vb = row.get("vs_base") or {}
            if not any(v.get("perf") is not None or v.get("cpu") is not None for v in vb.values()):
                continue
            cells = [row["label"]]
            for lab, cur, base in pairs:
                v = vb.get(lab, {})
                bad = any(row["t"].get(t, {}).get("bad") for t in (cur, base))
                cells += [ratio(v.get("perf")) + (" **BAD**" if bad else ""), ratio(v.get("cpu"))]
                if v.get("perf"):
                    geo[lab].append(v["perf"])
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        L.append("proxyd vs baseline (geometric mean over the rows above): " + ", ".join(
            f"{lab} {statistics.geometric_mean(geo[lab]):.2f}" if geo[lab] else f"{lab} n/a"
            for lab, _, _ in pairs) + ".")
        L.append("")
        L.append("current / baseline = median over rounds of the ratio measured within the same "
                 "round (req/s; MiB/s for the large file): above 1 the working tree is faster. "
                 "CPU/req ratio = the current path's CPU µs/req over the baseline's (CPU s for "
                 "the large file): below 1 the working tree spends less CPU per request; CPU is counted "
                 f"in clock ticks of 1/{clk} s, so a run of a few ticks (--quick) gives a coarse ratio.")
        L.append("")

    L.append("## Results")
    L.append("")
    hdr = ["row", "path", "req/s", "MiB/s", "spread", "failed", "CPU s", "CPU µs/req",
           "peak RSS", "ratio", "longest ms"]
    has_syn = any(d.get("syn") for row in rows for d in row["t"].values())
    if has_syn:
        hdr.append("SYN retrans")
    hdr.append("status")
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|---|---|" + "|".join(["---:"] * (len(hdr) - 3)) + "|---|")
    for row in rows:
        first = True
        for t in targets:
            d = row["t"].get(t)
            if not d:
                continue
            lm = d["longest_ms"]
            cells = [row["label"] if first else "", t,
                     "—" if by_bytes(row["key"]) else fnum(d["rps"]),
                     fnum(d["mib_s"], 1),
                     "n/a" if d["spread"] is None else f"{d['spread'] * 100:.0f}%",
                     f"{d['failed']}/{d['requests']}" if d["failed"] else "0",
                     "—" if t == BASE else fnum(d.get("cpu_s"), 2),
                     "—" if t == BASE or by_bytes(row["key"]) else fnum(d.get("cpu_us"), 1),
                     "—" if t == BASE else ("n/a" if d.get("hwm_kb") is None
                                            else f"{d['hwm_kb'] / 1024:.1f} MiB"),
                     "1" if t == BASE else ratio(d.get("ratio")),
                     "n/a" if lm is None else (f"**{lm}**" if lm >= STALL_MS and row["key"][0] in ("ab", "wrk")
                                               else str(lm))]
            if has_syn:
                cells.append(fnum(d.get("syn")))
            cells.append("**BAD**" if d["bad"] else "ok")
            L.append("| " + " | ".join(cells) + " |")
            first = False
    if any(r["key"][0] == "r66" for r in rows):
        L.append("")
        L.append("R66 rows: req/s = transfers/s (SENDs, mode 1, 64 KiB blocks, each client one "
                 "connection authenticated once); longest ms = the whole run of the slowest "
                 "client; the peer computes SHA-256 of every byte on both ends.")
    if any(r["key"][0] == "ftp" for r in rows):
        L.append("")
        L.append("FTP rows: req/s = transfers/s (each 1 KB file on a new data connection, "
                 "the control connection kept), over all clients.")
    L.append("")
    L.append("Columns: req/s and MiB/s = median over rounds (ab's \"Requests per second\" and "
             "\"Transfer rate\", wrk's Requests/sec and Transfer/sec, curl's speed for the large "
             "file); spread = (max - min) / median over rounds of the row's metric, a noise "
             "gauge (above ~10 % treat the ratio with suspicion); failed = requests not served "
             "cleanly over all rounds (ab failed + non-2xx + missing, wrk errors, a short or "
             "non-200 large transfer); CPU s = utime+stime of the proxy process during one run "
             "(/proc/PID/stat, median over rounds; CPU µs/req = that / requests); peak RSS = "
             "VmHWM of the proxy during the row (reset before each run through "
             "/proc/PID/clear_refs, max over rounds); ratio = median of the per-round ratios "
             "to direct; longest ms = slowest single request (ab's 100% line, wrk's latency "
             f"max; the whole transfer for the large file), bold from {STALL_MS} ms (a "
             "retransmission timeout)"
             + ("; SYN retrans = SYN retransmissions in the client namespace during the row "
                "(sum over rounds; bench/README.md, netns caveats)." if has_syn else "."))
    L.append("")
    oth = [r["others_max"] for r in rows if r["others_max"] is not None]
    if oth:
        L.append(f"Noise: CPU used by processes outside the bench during the runs, in % of the "
                 f"machine: median per row up to {max(r['others_med'] or 0 for r in rows):.0f}%, "
                 f"max {max(oth)}%.")
        L.append("")
    L.extend(zones_section(env, zones_rows, zones_runs, zones_targets, zones_pairs))
    L.extend(tls_section(out, env, tls_rows, tls_targets, tls_pairs, netns))
    L.extend(stall_section(env, tls_rows))
    L.extend(h2mem_section(env, tls_rows))
    L.extend(scan_section(out))
    bad = [r for r in rows + tls_rows + zones_rows if r["bad"]]
    bad_peer = [r for r in rows + tls_rows + zones_rows if r["bad_peer"]]
    # a proxy bench/run found stuck (busy with no client) and stopped
    stuck = [n for n in notes if n.startswith("STUCK")]
    stuck_peer = [n for n in stuck if not ours((n.split() + ["", ""])[1])]
    stuck = [n for n in stuck if n not in stuck_peer]
    if bad or stuck:
        L.append("## Bad rows")
        L.append("")
        for row in bad:
            L.append(f"- {row['label']}: " + "; ".join(row["bad"]))
        for n in stuck:
            L.append(f"- {n}")
        L.append("")
    if bad_peer or stuck_peer:
        # a peer's failure says something about the peer (or the
        # comparison), not about proxyd: reported, the run not failed
        L.append("## Peer failures (reported; they do not fail the run)")
        L.append("")
        for row in bad_peer:
            L.append(f"- {row['label']}: " + "; ".join(row["bad_peer"]))
        for n in stuck_peer:
            L.append(f"- {n}")
        L.append("")

    L.extend(worker_section(env, runs, keys, label))

    for t in ("proxyd-plug", "proxyd-http", "base-plug", "base-http", "proxyd-tls-http",
              "proxyd-tls-plug", "proxyd-nozones", "proxyd-zones", "proxyd-ftp", "proxyd-r66"):
        mb = read_metrics(os.path.join(out, f"{t}-metrics-before.txt"))
        ma = read_metrics(os.path.join(out, f"{t}-metrics-after.txt"))
        if not ma:
            continue
        keep = [k for k in sorted(ma) if k.startswith("proxyd_") and "worker=" not in k
                and "_bucket{" not in k
                and (ma[k] - mb.get(k, 0) if "_total" in k else ma[k])]
        if keep:
            L.append(f"## {t}: counters over the whole run (/metrics, after - before, non-zero)")
            L.append("")
            L.append("| metric | value |")
            L.append("|---|---:|")
            for k in keep:
                v = ma[k] - (mb.get(k, 0) if "_total" in k else 0)
                L.append(f"| `{k}` | {fnum(v)} |")
            L.append("")

    if os.path.exists(os.path.join(out, "perf-report.txt")):
        L.append(f"## Profile ({env.get('perf_run', '?')})")
        L.append("")
        L.append("`perf record -g -p PID` on the proxy during that run: samples by DSO "
                 "(kernel vs user), top symbols (self time), and system calls (time spent "
                 "in them and in what they call, softirq work included; by their libc entry point). Full lists: "
                 "`perf-report.txt`, `perf-dso.txt`, `perf-syscalls.txt`.")
        L.append("")
        L.append("```")
        for name, n, pat in (("perf-dso.txt", 6, None),
                             ("perf-report.txt", 15, r"^\s+\d+\.\d+%"),
                             ("perf-syscalls.txt", 10, None)):
            path = os.path.join(out, name)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                lines = [ln.rstrip() for ln in f if not pat or re.match(pat, ln)]
            L.append(f"# {name}")
            L.extend(lines[:n])
        L.append("```")
        L.append("")

    L.append("## Commands")
    L.append("")
    L.append("```")
    pre = "ip netns exec CLIENT_NS " if netns else ""
    host = env.get("server_addr", "127.0.0.1")
    for s in ("10k", "100k", "1m"):
        n = env.get(f"n_{s}")
        L.append(f"{pre}ab -r -s 20 -k -n {n} -c {env.get('concurrency')} http://{host}:PORT/{s}.bin")
        L.append(f"{pre}ab -r -s 20    -n {n} -c {env.get('concurrency')} http://{host}:PORT/{s}.bin")
    if env.get("wrk") == "1":
        L.append(f"{pre}wrk -t{env.get('wrk_threads')} -c{env.get('concurrency')} "
                 f"-d{env.get('wrk_duration')}s --timeout 20s http://{host}:PORT/SIZE.bin")
    if any(r["key"][0] == "ftp" for r in rows):
        L.append(f"python3 bench/ftpload.py 127.0.0.1 PORT retr|stor pasv|port 1|10 "
                 f"{env.get('ftp_duration', '?')} 1k.bin")
    if any(r["key"][0] == "r66" for r in rows):
        c1, c10 = (env.get("r66_counts", "? ?").split() + ["?", "?"])[:2]
        L.append(f"r66peer client --connect 127.0.0.1:PORT --id hosta:pwA --partner serverb:pwB "
                 f"--rule bench --mode 1 --block 65536 --count {c1}|{c10} --send f250k   "
                 f"# 1 or 10 at once; and --send big ({env.get('r66_big_mb', '?')} MiB)")
    if env.get("big_bytes", "0") != "0":
        L.append(f"{pre}curl -s -o /dev/null http://{host}:PORT/big.bin   # {human_bytes(env['big_bytes'])}")
    if tls_rows:
        n = (env.get("tls_n", "? ? ?").split() + ["?"] * 3)[:3]
        dur, par = (env.get("tls_stime", "? ?").split() + ["?", "?"])[:2]
        c = env.get("concurrency", "?")
        L.append(f"{pre}ab -r -s 20 -k -n {n[0]}|{n[1]} -c {c} https://{host}:PORT/10k.bin|1m.bin")
        L.append(f"{pre}wrk -t{env.get('wrk_threads')} -c{c} -d{env.get('wrk_duration')}s --timeout 20s https://{host}:PORT/10k.bin|1m.bin")
        L.append(f"{pre}openssl s_time -connect {host}:PORT -new|-reuse -time {dur} -www /1k.bin   # {par} at once")
        L.append(f"{pre}ab -r -s 20 -n {n[2]} -c {c} https://{host}:PORT/1k.bin")
        L.append(f"{pre}python3 bench/tlsidle.py {host} PORT {env.get('tls_idle_n', '?')} RELEASE "
                 "--servername front.test --cafile ca.pem")
        L.append(f"{pre}python3 bench/tlsidle.py {host} PORT {env.get('tls_stall_n', '?')} RELEASE --stall "
                 "--servername front.test --cafile ca.pem")
        hm = (env.get("tls_h2mem", "? ? ?").split() + ["?"] * 3)[:3]
        L.append(f"{pre}python3 bench/h2mem.py idle {host} PORT {hm[0]} RELEASE "
                 "--servername front.test --cafile ca.pem")
        L.append(f"{pre}python3 bench/h2mem.py streams {host} PORT {hm[2]} {hm[1]} GO TOKEN "
                 "--servername front.test --cafile ca.pem   # origin: bench/h2mem.py origin, behind nginx /hold/")
        h2 = (env.get("tls_h2", "? ? ?").split() + ["?"] * 3)[:3]
        L.append(f"{pre}h2load -n {h2[0]} -c {h2[1]} -m {h2[2]} https://{host}:PORT/10k.bin   # HTTP/2 (ALPN h2)")
        if env.get("tls_speed_seconds"):
            L.append(f"taskset -c {env.get('pin', '?')} openssl speed -seconds {env['tls_speed_seconds']} "
                     "ecdsap256 ecdhx25519")
    L.append("```")
    L.append("")
    L.append("PORT per path: " + ", ".join(f"{t} {env[f'port_{t}']}" for t in targets + tls_targets
                                          + [z for z in zones_targets if z not in targets]
                                          if f"port_{t}" in env)
             + (" (client port -> listener in the fw namespace)" if netns else "")
             + ". Raw outputs in `raw/`, every run in `runs.tsv`, configs, logs and `env.txt` "
             "in the run directory.")
    md = "\n".join(L) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)

    chart(out, rows, targets, netns, quick)
    return 3 if bad or stuck else 0


def chart(out, rows, targets, netns, quick):
    """chart.png with gnuplot: per row, each path's ratio to direct (the
    median of the within-round ratios, as in the table), on a linear axis
    from 0: every row is visible whatever its absolute rate (an FTP row's
    MiB/s is tiny), one colour per path; the absolute figures are in the
    table"""
    gp = shutil.which("gnuplot")
    if not gp:
        print("(gnuplot not found: no chart.png; bench/deps installs gnuplot-nox)", file=sys.stderr)
        return
    paths = [t for t in targets if t != BASE]
    rows = [r for r in rows if any(r["t"].get(t, {}).get("ratio") for t in paths)]
    if not rows or not paths:
        return
    top = max(r["t"][t]["ratio"] for r in rows for t in paths if r["t"].get(t, {}).get("ratio"))
    with open(os.path.join(out, "chart.dat"), "w") as f:
        f.write("row\t" + "\t".join(paths) + "\n")
        for r in rows:
            vals = [r["t"].get(t, {}).get("ratio") for t in paths]
            f.write(f"\"{r['label']}\"\t" + "\t".join("?" if v is None else f"{v:.4f}"
                                                    for v in vals) + "\n")
    title = ("proxyd vs HAProxy, ratio to kernel forwarding (netns, TPROXY)" if netns
             else "proxyd vs HAProxy, ratio to direct (loopback)") + (" - QUICK" if quick else "")
    width = max(900, 110 * len(rows) + 200)
    # one colour per path (blues: proxyd's HTTP paths; greens/purples:
    # its FTP and R66; oranges/reds: HAProxy)
    colors = {"proxyd-plug": "#1f77b4", "proxyd-http": "#17becf",
              "base-plug": "#aec7e8", "base-http": "#9edae5",
              "haproxy-tcp": "#ff7f0e", "haproxy-http": "#d62728",
              "proxyd-ftp": "#2ca02c", "proftpd-ftp": "#ffbb78", "proxyd-r66": "#9467bd"}
    spare = ["#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#393b79", "#637939"]
    lc = {}
    for t in paths:
        lc[t] = colors.get(t) or spare[len([x for x in lc if x not in colors]) % len(spare)]
    plots = ", ".join(f"'chart.dat' using {i + 2}{':xtic(1)' if i == 0 else ''} title columnhead({i + 2})"
                      f" lc rgb '{lc[t]}'"
                      for i, t in enumerate(paths))
    script = f"""set terminal pngcairo size {width},560 font ",10"
set output 'chart.png'
set datafile separator "\\t"
set datafile missing "?"
set title "{title}: per row (median of the within-round ratios; absolute figures in the table)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:{max(1.2, top * 1.1):.2f}]
set ylabel "ratio to {BASE} (1 = as fast)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#808080'
set xtics rotate by -25 nomirror
set grid ytics
set key top right
plot {plots}
"""
    with open(os.path.join(out, "chart.gp"), "w") as f:
        f.write(script)
    r = subprocess.run([gp, "chart.gp"], cwd=out, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"(gnuplot failed: {r.stderr.strip()[:300]})", file=sys.stderr)


def main(argv):
    if len(argv) >= 4 and argv[1] == "parse" and argv[2] in ("ab", "wrk", "h2load", "curl", "ftp", "stime", "idle"):
        if argv[2] == "curl" and len(argv) != 5:
            print(__doc__, file=sys.stderr)
            return 2
        cmd_parse(argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "report":
        return cmd_report(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
