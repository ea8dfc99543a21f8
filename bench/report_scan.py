"""The scanning rows of bench/run (bench/scan.sh): scan.tsv and scan-mem.tsv
rendered as a section of results.md by bench/report.py."""
import csv
import os
import statistics

MIB = 1048576.0
LABELS = {"100k": "100 KB", "10m": "10 MB"}


def _rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _num(v, digits=0):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _ratio(a, b):
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def _good(r):
    return (r["rc"] == "0" and r["complete"] == r["n"] and r["failed"] == "0"
            and r["non2xx"] == "0" and int(r["scans"]) >= int(r["n"]))


def _measured(r):
    """a run that ended and moved bytes: its figures count (per MiB that
    arrived), a few failed requests are reported beside them"""
    return r["rc"] == "0" and int(r["bytes"]) > 0 and int(r["wall_us"]) > 0


def _aggregate(runs):
    """(size, target) -> medians over rounds of MiB/s and µs of CPU per MiB
    of the proxy, of c-icap, of clamd; and whether every run was good"""
    out = {}
    for key in sorted({(r["size"], r["target"]) for r in runs}):
        rr = [r for r in runs if (r["size"], r["target"]) == key]
        ok = [r for r in rr if _measured(r)]
        d = {"bad": any(not _good(r) for r in rr), "runs": len(rr),
             "scans": sum(int(r["scans"]) for r in rr),
             "requests": sum(int(r["n"]) for r in rr),
             "failed": sum(int(r["failed"]) + int(r["non2xx"]) for r in rr)}
        if ok:
            def med(f):
                return statistics.median(f(r) for r in ok)
            mib = lambda r: int(r["bytes"]) / MIB  # noqa: E731
            d["mib_s"] = med(lambda r: mib(r) / (int(r["wall_us"]) / 1e6))
            d["proxy"] = med(lambda r: int(r["proxy_ns"]) / 1e3 / mib(r))
            d["icap"] = med(lambda r: int(r["icap_ns"]) / 1e3 / mib(r))
            d["clamd"] = med(lambda r: int(r["clamd_ns"]) / 1e3 / mib(r))
        out[key] = d
    return out


def scan_section(out_dir):
    runs = _rows(os.path.join(out_dir, "scan.tsv"))
    mem = _rows(os.path.join(out_dir, "scan-mem.tsv"))
    if not runs and not mem:
        return []
    agg = _aggregate(runs)
    L = ["## Scanning: proxyd + c-icap vs Squid + the same c-icap", "",
         "ab -k, the same nginx origin, both proxies pinned to the same CPU, both scanning "
         "every response body through the same c-icap over the same clamd (bench/scan.sh): "
         "proxyd offers 204 for any size and uses virus_scan's mode=simple (nothing back before "
         "the verdict, then 204); Squid offers 204 only up to 64 KB and stalls a bigger body "
         "against that mode, so it uses virus_scan's default mode (5 % of the body back early, "
         "then the rest echoed in a 200). CPU in µs per MiB of body relayed, from schedstat over each "
         "process tree (reaped children included), medians over rounds: the proxy's own, "
         "c-icap's and clamd's; share = the proxy's part of the path's CPU (proxy + c-icap + "
         "clamd). Scans = RESPMODs c-icap logged for the rows' requests (over all rounds); "
         "failed = ab's failed requests and non-2xx answers over all rounds (the figures "
         "count the bytes that did arrive).", "",
         "| body | path | MiB/s | proxy µs/MiB | c-icap µs/MiB | clamd µs/MiB | proxy share | scans | status |",
         "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    sizes = [s for s in ("100k", "10m") if any(k[0] == s for k in agg)]
    for s in sizes:
        first = True
        for t in ("proxyd-scan", "proxyd-scan-tail", "squid-scan"):
            d = agg.get((s, t))
            if not d:
                continue
            tot = None
            if "proxy" in d:
                tot = d["proxy"] + d["icap"] + d["clamd"]
            share = "n/a" if not tot else f"{d['proxy'] / tot * 100:.0f}%"
            L.append(f"| {LABELS[s] if first else ''} | {t} | {_num(d.get('mib_s'), 1)} | "
                     f"{_num(d.get('proxy'))} | {_num(d.get('icap'))} | {_num(d.get('clamd'))} | "
                     f"{share} | {d['scans']}/{d['requests']} | "
                     f"{(('**BAD**: %d failed' % d['failed']) if d['failed'] else '**BAD**') if d['bad'] else 'ok'} |")
            first = False
    pairs = [(s, agg.get((s, "proxyd-scan")), agg.get((s, "squid-scan"))) for s in sizes]
    pairs = [(s, p, q) for s, p, q in pairs if p and q and "proxy" in p and "proxy" in q]
    if pairs:
        L += ["", "proxyd / Squid: " + "; ".join(
            f"{LABELS[s]}: MiB/s {_ratio(p['mib_s'], q['mib_s'])}, proxy CPU per MiB "
            f"{_ratio(p['proxy'], q['proxy'])}, c-icap CPU per MiB {_ratio(p['icap'], q['icap'])}"
            for s, p, q in pairs) + " (below 1 for CPU: proxyd spends less)."]
    holds = [(s, agg.get((s, "proxyd-scan")), agg.get((s, "proxyd-scan-tail")))
             for s in sizes]
    holds = [(s, h, t) for s, h, t in holds if h and t and "proxy" in h and "proxy" in t]
    if holds:
        # µs per MiB = ms per GiB (x 1024 / 1000)
        L += ["", "Holding each body until its verdict (proxyd-scan, deliver=\"after-verdict\": "
              "memory up to limits/@buffer, then the spool file, released by sendfile) against "
              "streaming it (proxyd-scan-tail, deliver=\"tail\"), proxyd's own CPU per GiB of "
              "body: " + "; ".join(
                  f"{LABELS[s]}: {h['proxy'] * 1.024:,.0f} ms/GiB held, "
                  f"{t['proxy'] * 1.024:,.0f} ms/GiB tail "
                  f"({(h['proxy'] - t['proxy']) * 1.024:+,.0f} ms/GiB, x{_ratio(h['proxy'], t['proxy'])})"
                  for s, h, t in holds) + "."]
    if mem:
        L += ["", "Memory per scanned session: the proxy's RSS with N clients each reading a "
              "scanned 10 MB body at 1 byte/s (4 KB receive buffer, bench/slowread.py), minus "
              "its RSS before them, per client.", "",
              "| path | sessions | RSS before | RSS with them | per session |",
              "|---|---:|---:|---:|---:|"]
        for m in mem:
            n, b, w = int(m["sessions"]), int(m["rss_before_kb"]), int(m["rss_with_kb"])
            L.append(f"| {m['target']} | {n} | {b / 1024:.1f} MiB | {w / 1024:.1f} MiB | "
                     f"{(w - b) / max(n, 1):.0f} KB |")
    L.append("")
    return L
