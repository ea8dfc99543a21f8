#!/usr/bin/env python3
"""Helpers for bench/run.sh.

  report.py parse ab|wrk FILE   print "rps complete failed non2xx sockerr max_ms"
  report.py report OUTDIR       OUTDIR/runs.tsv -> results.md, results.csv, chart.png
"""
import csv
import os
import re
import statistics
import sys

SIZES = ["10k", "100k", "1m"]
SIZE_LABEL = {"10k": "10 KB", "100k": "100 KB", "1m": "1 MB"}
TARGETS = ["direct", "kernel", "proxyd", "haproxy"]
# the unproxied baseline: "direct" (loopback: ab -> nginx) or "kernel"
# (--netns: forwarded by the fw namespace's kernel)
BASE_LABEL = {"direct": "direct", "kernel": "kernel fwd"}
STALL_MS = 1000   # a request this slow waited for a retransmission timeout (SYN: 1 s)


def _num(pattern, text, default=None, cast=float):
    m = re.search(pattern, text, re.M)
    if not m:
        return default
    return cast(m.group(1))


def parse_ab(text):
    rps = _num(r"^Requests per second:\s+([\d.]+)", text)
    complete = _num(r"^Complete requests:\s+(\d+)", text, cast=int)
    failed = _num(r"^Failed requests:\s+(\d+)", text, cast=int)
    non2xx = _num(r"^Non-2xx responses:\s+(\d+)", text, 0, int)
    # ab without a summary (aborted, timed out): count it as failed
    sockerr = 0 if rps is not None else 1
    max_ms = _num(r"^\s*100%\s+(\d+)", text, cast=int)      # "100%  123 (longest request)"
    return rps, complete, failed, non2xx, sockerr, max_ms


_WRK_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def parse_wrk(text):
    rps = _num(r"^Requests/sec:\s+([\d.]+)", text)
    m = re.search(r"^\s*(\d+) requests in", text, re.M)
    complete = int(m.group(1)) if m else None
    non2xx = _num(r"^\s*Non-2xx or 3xx responses:\s+(\d+)", text, 0, int)
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    sockerr = sum(int(x) for x in m.groups()) if m else 0
    if rps is None:
        sockerr += 1
    # "Latency   1.23ms  0.45ms  12.34ms  90.00%": avg, stdev, max
    m = re.search(r"^\s*Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s|m)\b", text, re.M)
    max_ms = None
    if m:
        max_ms = round(float(m.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3, "m": 6e4}[m.group(2)])
    return rps, complete, 0, non2xx, sockerr, max_ms


def cmd_parse(tool, path):
    with open(path, errors="replace") as f:
        text = f.read()
    rps, complete, failed, non2xx, sockerr, max_ms = (parse_ab if tool == "ab" else parse_wrk)(text)
    fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
    print(fmt(rps), fmt(complete), fmt(failed), fmt(non2xx), fmt(sockerr), fmt(max_ms))


def read_kv(path):
    d = {}
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    d[k] = v
    return d


def read_metrics(path):
    d = {}
    if not os.path.exists(path):
        return d
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split()
            if len(parts) >= 2:
                try:
                    d[parts[0]] = float(parts[1])
                except ValueError:
                    pass
    return d


def fnum(v, digits=0):
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}".replace(",", " ")


def ratio(v):
    return "n/a" if v is None else f"{v:.2f}"


def run_bad(r):
    if r["rc"] != "0" or r["rps"] == "-":
        return True
    for k in ("failed", "non2xx", "sockerr"):
        if r[k] not in ("0", "-"):
            return True
    if r["tool"] == "ab" and r["complete"] != r["n"]:
        return True
    return False


def run_problem(r):
    bits = []
    if r["rc"] != "0":
        bits.append(f"rc={r['rc']}")
    if r["rps"] == "-":
        bits.append("no result")
    for k in ("failed", "non2xx", "sockerr"):
        if r[k] not in ("0", "-"):
            bits.append(f"{k}={r[k]}")
    if r["tool"] == "ab" and r["complete"] not in (r["n"], "-"):
        bits.append(f"complete={r['complete']}/{r['n']}")
    return f"{r['target']} r{r['round']}: " + " ".join(bits)


def cmd_report(out):
    env = read_kv(os.path.join(out, "env.txt"))
    clk = int(env.get("clk_tck", "100") or 100)
    with open(os.path.join(out, "runs.tsv")) as f:
        runs = list(csv.DictReader(f, delimiter="\t"))
    targets = [t for t in TARGETS if any(r["target"] == t for r in runs)]
    netns = env.get("mode") == "netns"
    base = "kernel" if netns else "direct"
    blabel = BASE_LABEL[base]

    keys = []
    for r in runs:
        k = (r["tool"], r["size"], r["mode"])
        if k not in keys:
            keys.append(k)
    order = {("ab", "ka"): 0, ("ab", "close"): 1, ("wrk", "ka"): 2}
    keys.sort(key=lambda k: (k[0] != "ab", SIZES.index(k[1]), order.get((k[0], k[2]), 9)))

    rows = []
    for k in keys:
        rr = [r for r in runs if (r["tool"], r["size"], r["mode"]) == k]
        row = {"tool": k[0], "size": k[1], "mode": k[2], "n": rr[0]["n"], "c": rr[0]["c"]}
        problems = [run_problem(r) for r in rr if run_bad(r)]
        row["bad"] = problems
        per_round = {}
        for t in targets:
            tr = [r for r in rr if r["target"] == t and r["rps"] != "-"]
            vals = [float(r["rps"]) for r in tr]
            row[f"{t}_rps"] = statistics.median(vals) if vals else None
            row[f"{t}_min"] = min(vals) if vals else None
            row[f"{t}_max"] = max(vals) if vals else None
            row[f"{t}_runs"] = len(vals)
            hwm = [int(r["hwm_kb"]) for r in rr if r["target"] == t and r["hwm_kb"].isdigit()]
            row[f"{t}_hwm_kb"] = max(hwm) if hwm else None
            cpu = []
            for r in tr:
                done = int(r["complete"]) if r["complete"].isdigit() else 0
                if done > 0 and t != base:
                    cpu.append(int(r["cpu_ticks"]) * 1e6 / clk / done)
            row[f"{t}_cpu_us"] = statistics.median(cpu) if cpu else None
            mx = [int(r["max_ms"]) for r in rr
                  if r["target"] == t and (r.get("max_ms") or "").isdigit()]
            row[f"{t}_longest_ms"] = max(mx) if mx else None
            sy = [int(r["syn_retrans"]) for r in rr
                  if r["target"] == t and (r.get("syn_retrans") or "").isdigit()]
            row[f"{t}_syn_retrans"] = sum(sy) if sy else None
            for r in tr:
                per_round.setdefault(r["round"], {})[t] = float(r["rps"])

        # ratios: median over rounds of the ratio measured within each round
        # (peers side by side), so slow drift of the machine cancels out
        def rmed(a, b):
            vals = [d[a] / d[b] for d in per_round.values() if d.get(a) and d.get(b)]
            return statistics.median(vals) if vals else None

        row["px_base"] = rmed("proxyd", base)
        row["px_haproxy"] = rmed("proxyd", "haproxy")
        row["ha_base"] = rmed("haproxy", base)
        spreads = []
        for t in targets:
            if row[f"{t}_rps"]:
                spreads.append((row[f"{t}_max"] - row[f"{t}_min"]) / row[f"{t}_rps"])
        row["spread"] = max(spreads) if spreads else None
        oth = [int(r["other_pct"]) for r in rr if r.get("other_pct", "").isdigit()]
        row["others_max"] = max(oth) if oth else None
        row["others_med"] = statistics.median(oth) if oth else None
        st = [int(r["steal_pct"]) for r in rr if r.get("steal_pct", "").isdigit()]
        row["steal_max"] = max(st) if st else None
        rows.append(row)

    # ---------------------------------------------------------------- CSV --
    cols = ["tool", "size", "mode", "n", "c"]
    for t in targets:
        cols += [f"{t}_rps", f"{t}_min", f"{t}_max", f"{t}_runs"]
    cols += [f"px_{base}", "px_haproxy", f"ha_{base}"]
    for t in targets:
        if t != base:
            cols += [f"{t}_hwm_kb", f"{t}_cpu_us"]
    cols += [f"{t}_longest_ms" for t in targets]
    has_syn = any(row.get(f"{t}_syn_retrans") is not None for row in rows for t in targets)
    if has_syn:
        cols += [f"{t}_syn_retrans" for t in targets]
    cols += ["spread", "others_med", "others_max", "steal_max", "status"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for row in rows:
            vals = []
            for c in cols:
                if c == "status":
                    vals.append("ok" if not row["bad"] else "BAD: " + "; ".join(row["bad"]))
                    continue
                v = row.get({f"px_{base}": "px_base", f"ha_{base}": "ha_base"}.get(c, c))
                vals.append("" if v is None else (f"{v:.4f}" if isinstance(v, float) else v))
            w.writerow(vals)

    # ----------------------------------------------------------- markdown --
    def label(row):
        if row["tool"] == "ab":
            return f"{SIZE_LABEL[row['size']]} {'keep-alive' if row['mode'] == 'ka' else 'close'}"
        return f"{SIZE_LABEL[row['size']]} wrk keep-alive"

    def mib(kb):
        return "n/a" if kb is None else f"{kb / 1024:.1f} MiB"

    has_px = "proxyd" in targets
    has_ha = "haproxy" in targets
    L = []
    L.append(f"# proxyd {'netns (inline)' if netns else 'loopback'} benchmark, {env.get('date_utc', '?')}")
    L.append("")
    rounds = env.get("rounds", "?")
    L.append(f"Machine: {env.get('host', '?')}, {env.get('nproc', '?')} cores, load average "
             f"{env.get('loadavg_start', '?')} at start, {env.get('loadavg_end', '?')} at end. "
             f"proxyd {env.get('proxyd_version', 'n/a')} (git {env.get('proxyd_git', '?')}), "
             f"workers={env.get('workers', '?')}, splice={env.get('proxyd_splice', '?')}; "
             f"{env.get('haproxy_version', '?').split(' - ')[0]}, nbthread 1, mode tcp"
             f"{ {'1': ', forced splice (splice-request/response)', 'auto': ', splice-auto'}.get(env.get('haproxy_splice'), ', no splice')}; "
             f"{env.get('nginx_version', '?').replace('nginx version: ', '')} origin, "
             f"worker_processes {env.get('nginx_workers', '?')}. "
             + ("Client -> fw -> server network namespaces (see below)." if netns
                else "All on 127.0.0.1."))
    L.append("")
    if netns:
        spoof = env.get("spoof") == "1"
        srv = env.get("server_addr", "198.19.2.2")
        pk, pp, ph = "8080", "8081", "8082"
        m = re.match(r"kernel:(\d+) proxyd:(\d+)->(\d+) haproxy:(\d+)->(\d+)", env.get("ports", ""))
        if m:
            pk, pp, ph = m.group(1), m.group(2), m.group(4)
        L.append("Topology (tests/netns/topology.sh): client 198.18.1.2 -- fw 198.18.1.1 | "
                 f"198.19.2.1 -- server {srv}, veth links (MTU {env.get('mtu', '?')}). ab runs "
                 f"in the client namespace and always fetches from the server's own address "
                 f"{srv}; the destination port selects the path through the fw namespace:")
        L.append("")
        L.append(f"- **kernel fwd** `{srv}:{pk}`: not diverted, routed by the fw's kernel; "
                 "conntrack on (a conntrack FORWARD rule, plus the ruleset's "
                 "\"keep conntrack on\" rule).")
        L.append(f"- **proxyd** `{srv}:{pp}`: TPROXY (deploy/inline-tproxy.sh) to proxyd's "
                 f"transparent listener; plug analyser, "
                 f"spoof-source=\"{'yes' if spoof else 'no'}\".")
        L.append(f"- **haproxy** `{srv}:{ph}`: TPROXY to haproxy `bind ... transparent`, "
                 f"`server 0.0.0.0` (the original destination)"
                 f"{', `source 0.0.0.0 usesrc clientip`' if spoof else ''}.")
        L.append("")
        L.append("The server sees " + ("the client's address 198.18.1.2 on every path."
                 if spoof else "198.18.1.2 on the kernel path and the fw's 198.19.2.1 on "
                 "the proxied ones.") + " Both TPROXY diversions and the FORWARD rule are "
                 "in place for the whole run (`fw-rules.txt`), so every path crosses the "
                 "same ruleset. veth MTU is 1500, loopback's 65536: compare these rows "
                 "only with netns rows, never with loopback results.")
        L.append("")
    L.append(f"{rounds} round(s), targets interleaved and rotated each round; req/s is the median "
             f"over rounds; ratios are the median of the per-round ratios. "
             f"Concurrency {env.get('concurrency', '?')}." + (" QUICK MODE: smoke check only, numbers "
             "are not meaningful." if env.get("quick") == "1" else ""))
    L.append("")

    if env.get("incomplete"):
        L.append(f"**INCOMPLETE RUN ({env['incomplete']}): only the runs finished before the "
                 "stop are counted; see the run.sh message and the logs in this directory.**")
        L.append("")

    head = [r for r in rows if r["tool"] == "ab" and r["size"] == "10k"]
    if head:
        L.append("## Headline: 10 KB file, ab -c " + env.get("concurrency", "?"))
        L.append("")
        for row in head:
            ka = "-k " if row["mode"] == "ka" else ""
            s = (f"- `ab {ka}-n {row['n']} -c {row['c']}`: {blabel} {fnum(row.get(f'{base}_rps'))} req/s")
            if has_px:
                s += f", proxyd plug {fnum(row.get('proxyd_rps'))} req/s"
            if has_ha:
                s += f", haproxy tcp {fnum(row.get('haproxy_rps'))} req/s"
            if has_px:
                s += f"; proxyd/{blabel} {ratio(row['px_base'])}"
                if has_ha:
                    s += f", proxyd/haproxy {ratio(row['px_haproxy'])}"
            if has_ha:
                s += f", haproxy/{blabel} {ratio(row['ha_base'])}"
            if row["bad"]:
                s += " **BAD**"
            L.append(s)
        L.append("")

    L.append("## Results")
    L.append("")
    def longest(row):
        v = [row.get(f"{t}_longest_ms") for t in (base, "proxyd", "haproxy")]
        return " / ".join("n/a" if x is None else (f"**{x}**" if x >= STALL_MS else str(x))
                          for x in v)

    hdr = ["row", f"{blabel} req/s", "proxyd req/s", "haproxy req/s", f"proxyd/{blabel}",
           f"haproxy/{blabel}", "proxyd/haproxy", "proxyd peak RSS", "haproxy peak RSS",
           "proxyd CPU µs/req", "haproxy CPU µs/req", "longest ms"]
    if has_syn:
        hdr.append("client SYN retrans")
    hdr += ["spread", "others' CPU", "status"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 2) + ["---"]) + "|")
    for row in rows:
        cells = [label(row), fnum(row.get(f"{base}_rps")), fnum(row.get("proxyd_rps")),
                 fnum(row.get("haproxy_rps")), ratio(row["px_base"]), ratio(row["ha_base"]),
                 ratio(row["px_haproxy"]),
                 mib(row.get("proxyd_hwm_kb")), mib(row.get("haproxy_hwm_kb")),
                 fnum(row.get("proxyd_cpu_us"), 1), fnum(row.get("haproxy_cpu_us"), 1),
                 longest(row)]
        if has_syn:
            cells.append(" / ".join(fnum(row.get(f"{t}_syn_retrans"))
                                    for t in (base, "proxyd", "haproxy")))
        cells += ["n/a" if row["spread"] is None else f"{row['spread'] * 100:.0f}%",
                  "n/a" if row["others_max"] is None else
                  f"{row['others_med']:.0f}% / {row['others_max']}%",
                  "ok" if not row["bad"] else "**BAD**"]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append(f"Columns: req/s = median over rounds; proxyd/{blabel}, haproxy/{blabel} and "
             "proxyd/haproxy = median "
             "of per-round ratios (1.00 = as fast); peak RSS = VmHWM of the process during "
             "this row's runs (reset before each run via /proc/PID/clear_refs, max over rounds); "
             "CPU µs/req = utime+stime of the proxy process during a run / completed requests "
             "(median over rounds; 10 ms tick resolution); spread = largest (max-min)/median "
             "over rounds among the targets of the row, a noise indicator; others' CPU = "
             "CPU used by processes outside this bench (user+system time of the machine "
             "minus ab/wrk, nginx and the proxy), in % of the machine, median / max over "
             "the row's runs: another noise indicator (softirq time, i.e. most of the "
             f"{'veth and forwarding' if netns else 'loopback'} traffic, excluded); "
             f"longest ms = the slowest single request of the row ({blabel} / proxyd / "
             "haproxy; ab's 100% line, wrk's latency max), max over rounds; "
             f"bold = {STALL_MS} ms or more, i.e. at least one request waited for a "
             "retransmission timeout (a lost SYN is retried after 1 s)"
             + ("; client SYN retrans = SYN retransmissions counted in the client "
                f"namespace during the row's runs ({blabel} / proxyd / haproxy), sum over "
                "rounds: a connection attempt that was not answered with a SYN-ACK "
                "(see the README, netns caveats)." if has_syn else "."))
    L.append("")
    bad = [r for r in rows if r["bad"]]
    if bad:
        L.append("## Bad rows")
        L.append("")
        for row in bad:
            L.append(f"- {label(row)}: " + "; ".join(row["bad"]))
        L.append("")

    # stalls: runs with at least one request >= STALL_MS, per row and target
    stalls = []
    for row in rows:
        k = (row["tool"], row["size"], row["mode"])
        for t in targets:
            hit = [r for r in runs if (r["tool"], r["size"], r["mode"]) == k and r["target"] == t
                   and (r.get("max_ms") or "").isdigit() and int(r["max_ms"]) >= STALL_MS]
            if hit:
                stalls.append(f"- {label(row)}, {BASE_LABEL.get(t, t)}: "
                              + ", ".join(f"r{r['round']} {r['max_ms']} ms ({r['raw']})" for r in hit))
    if stalls:
        L.append(f"## Stalls (a request took {STALL_MS} ms or more)")
        L.append("")
        L.extend(stalls)
        L.append("")
        L.append("ab's percentile table in each raw file shows how many requests were that "
                 "slow" + ("; `client-nstat.txt` (TcpExtTCPSynRetrans, TcpRetransSegs) and "
                           "`fw-nstat.txt` count retransmissions per namespace." if netns else "."))
        L.append("")

    if has_px:
        mb = read_metrics(os.path.join(out, "proxyd-metrics-before.txt"))
        ma = read_metrics(os.path.join(out, "proxyd-metrics-after.txt"))
        if ma:
            L.append("## proxyd counters over the run incl. content check and warm-up (admin /metrics, after - before)")
            L.append("")
            L.append("| metric | value |")
            L.append("|---|---:|")
            for k in sorted(ma):
                if k.startswith("proxyd_") and "worker=" not in k:
                    v = ma[k] - (mb.get(k, 0) if "_total" in k else 0)
                    L.append(f"| `{k}` | {fnum(v)} |")
            L.append("")
        else:
            L.append("proxyd /metrics could not be read after the run.")
            L.append("")
    L.append("## Memory and state at the end")
    L.append("")
    for k in ("proxyd_vmhwm_kb_end", "proxyd_vmrss_kb_end", "proxyd_threads",
              "haproxy_vmhwm_kb_end", "haproxy_vmrss_kb_end", "time_wait_sockets_end",
              "fw_conntrack_count_max", "fw_nf_conntrack_max", "fw_conntrack_stats_end"):
        if k in env:
            L.append(f"- {k} = {env[k]}")
    L.append("")
    if netns:
        L.append("## Path checks (after the content check, before the runs)")
        L.append("")
        for k in sorted(env):
            if k.startswith("path_check_"):
                L.append(f"- {k[len('path_check_'):]} = {env[k]}")
        L.append("")
    L.append("## Commands")
    L.append("")
    L.append("```")
    n = {"10k": env.get("n_10k"), "100k": env.get("n_100k"), "1m": env.get("n_1m")}
    c = env.get("concurrency", "?")
    pre = "ip netns exec CLIENT_NS " if netns else ""
    host = env.get("server_addr", "198.19.2.2") if netns else "127.0.0.1"
    for s in SIZES:
        L.append(f"{pre}ab -r -s 20 -k -n {n[s]} -c {c} http://{host}:PORT/{s}.bin")
        L.append(f"{pre}ab -r -s 20    -n {n[s]} -c {c} http://{host}:PORT/{s}.bin")
    if env.get("wrk") == "1":
        L.append(f"{pre}wrk -t{env.get('wrk_threads')} -c{c} -d{env.get('wrk_duration')}s "
                 f"--timeout 20s http://{host}:PORT/SIZE.bin")
    L.append("```")
    L.append("")
    if netns:
        L.append(f"PORT is {env.get('ports', '?')} (destination port -> listener in the fw "
                 "namespace); CLIENT_NS is the client namespace. Raw outputs: `raw/`; every "
                 "run: `runs.tsv`; fw rules as installed and with counters after the run: "
                 "`fw-rules.txt`, `fw-rules-after.txt`; configs: `proxyd.xml`, "
                 "`proxyd-service.xml`, `haproxy.cfg`; machine, versions, namespaces: `env.txt`.")
    else:
        L.append("PORT is nginx (direct), proxyd or haproxy. Raw outputs: `raw/`; every run: "
                 "`runs.tsv`; configs: `proxyd.xml`, `proxyd-service.xml`, `haproxy.cfg`; "
                 "machine and versions: `env.txt`.")
    md = "\n".join(L) + "\n"
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)

    chart(out, rows, targets, label, base, netns)


def chart(out, rows, targets, label, base="direct", netns=False):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        print("(matplotlib not available: no chart.png; apt-get install python3-matplotlib)",
              file=sys.stderr)
        return
    rows = [r for r in rows if any(r.get(f"{t}_rps") for t in targets)]
    if not rows:
        return
    names = [label(r) for r in rows]
    x = range(len(rows))
    w = 0.8 / max(1, len(targets))
    colors = {"direct": "#7f7f7f", "kernel": "#7f7f7f", "proxyd": "#1f77b4", "haproxy": "#ff7f0e"}
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(rows) + 2), 8.5),
                                 sharex=True)
    for i, t in enumerate(targets):
        xs = [p + (i - (len(targets) - 1) / 2) * w for p in x]
        vals = [r.get(f"{t}_rps") or 0 for r in rows]
        a1.bar(xs, vals, w, label=BASE_LABEL.get(t, t), color=colors.get(t))
        rel = [((r.get(f"{t}_rps") or 0) / r[f"{base}_rps"]) if r.get(f"{base}_rps") else 0
               for r in rows]
        a2.bar(xs, rel, w, label=t, color=colors.get(t))
    a1.set_yscale("log")
    a1.set_ylabel("requests/s (median, log scale)")
    a1.legend()
    a1.grid(axis="y", alpha=0.3)
    a2.axhline(1.0, color="black", linewidth=0.8)
    a2.set_ylabel(f"relative to {BASE_LABEL[base]} (ratio of medians)")
    a2.grid(axis="y", alpha=0.3)
    a2.set_xticks(list(x))
    a2.set_xticklabels(names, rotation=30, ha="right")
    fig.suptitle("proxyd plug vs haproxy tcp vs kernel forwarding (netns, TPROXY)" if netns
                 else "proxyd plug vs haproxy tcp vs direct nginx (loopback)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "chart.png"), dpi=100)


def main(argv):
    if len(argv) == 4 and argv[1] == "parse" and argv[2] in ("ab", "wrk"):
        cmd_parse(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "report":
        cmd_report(argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
