"""What bench/run's tools printed and what each run measured, for
report.py: the parsers of ab, wrk, h2load, curl, the FTP and R66 clients, s_time
and the idle probe (report.py parse ...), a run's counters and CPU per
unit of work, and whether a run went wrong."""
import os
import re

COUNTED = ("ab", "curl", "idle", "h2load")   # a fixed number of requests; the others run for a fixed time


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
    kib_s = _num(r"^Transfer rate:\s+([\d.]+) \[Kbytes/sec\]", text)
    return rps, complete, failed, non2xx, sockerr, max_ms, kib_s


_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


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
    m = re.search(r"^Transfer/sec:\s+([\d.]+)([KMGT]?)B", text, re.M)
    kib_s = float(m.group(1)) * _UNITS[m.group(2)] / 1024 if m else None
    return rps, complete, 0, non2xx, sockerr, max_ms, kib_s


def parse_h2load(text):
    # "finished in 248.49ms, 8048.48 req/s, 79.77MB/s"
    # "requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout"
    # "status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx"
    # "time for request:      432us     54.33ms ...": min, max, ...
    m = re.search(r"^finished in [\d.]+\w+, ([\d.]+) req/s, ([\d.]+)([KMGT]?)B/s", text, re.M)
    rps = float(m.group(1)) if m else None
    kib_s = float(m.group(2)) * _UNITS[m.group(3)] / 1024 if m else None
    m = re.search(r"^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", text, re.M)
    complete = int(m.group(1)) if m else None
    failed = sum(int(x) for x in m.groups()[1:]) if m else 0
    m = re.search(r"^status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    non2xx = sum(int(x) for x in m.groups()) if m else 0
    sockerr = 0 if rps is not None else 1
    m = re.search(r"^time for request:\s+\S+\s+([\d.]+)(us|ms|s)\b", text, re.M)
    max_ms = round(float(m.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]) if m else None
    return rps, complete, failed, non2xx, sockerr, max_ms, kib_s


def parse_curl(text, want_bytes):
    # bench/run's line: "curl: rc=R code size time speed: CODE SIZE TIME SPEED"
    m = re.search(r"^curl: rc=(\d+) code size time speed: (\d+) (\d+) ([\d.]+) ([\d.]+)",
                  text, re.M)
    if not m:
        return None, 0, 1, 0, 1, None, None
    rc, code, size, secs, speed = int(m.group(1)), int(m.group(2)), int(m.group(3)), \
        float(m.group(4)), float(m.group(5))
    ok = rc == 0 and code == 200 and size == want_bytes
    rps = 1 / secs if secs > 0 else None
    return (rps, 1 if ok else 0, 0 if ok else 1, 0 if code in (200, 0) else 1, 0,
            round(secs * 1000), speed / 1024)


def parse_ftp(text):
    # bench/ftpload.py: "transfers=N failed=F seconds=S rate=R kib_s=K max_ms=M"
    m = re.search(r"^transfers=(\d+) failed=(\d+) seconds=[\d.]+ rate=([\d.]+) "
                  r"kib_s=([\d.]+) max_ms=(\d+)", text, re.M)
    if not m:
        return None, 0, 1, 0, 1, None, None
    return (float(m.group(3)), int(m.group(1)), int(m.group(2)), 0, 0, int(m.group(5)),
            float(m.group(4)))


def parse_stime(text):
    # bench/run's tls_stime: "## s_time I" sections of openssl s_time output
    # ("N connections in T real seconds, B bytes read per connection"; one
    # character per connection: r = resumed, else a full handshake), then
    # "wall_ns=W processes=P"
    wall = _num(r"^wall_ns=(\d+)", text, cast=int)
    conns, nbytes, resumed, full, errs = 0, 0, 0, 0, 0
    parts = re.split(r"^## s_time \d+$", text, flags=re.M)
    procs = 0
    for part in parts[1:]:
        m = re.search(r"^(\d+) connections in \d+ real seconds, (\d+) bytes read per connection", part, re.M)
        if not m:
            errs += 1
            continue
        procs += 1
        conns += int(m.group(1))
        nbytes += int(m.group(1)) * int(m.group(2))
        for ln in part.splitlines():
            if ln and re.fullmatch(r"[rt3*u]+", ln):
                resumed += ln.count("r")
                full += len(ln) - ln.count("r")
    if not wall or not procs:
        return None, 0, 0, 0, 1, None, None, "-"
    secs = wall / 1e9
    return (conns / secs, conns, 0, 0, errs, None, nbytes / secs / 1024,
            f"resumed={resumed};full={full}")


def parse_idle(text):
    # bench/tlsidle.py's line (established=, or stalled= for pending
    # handshakes) and bench/run's RSS line (before, with them, once closed)
    m = re.search(r"^(?:established|stalled)=(\d+) failed=(\d+) seconds=[\d.]+ rate=([\d.]+) max_ms=(\d+)",
                  text, re.M)
    r = re.search(r"^rss_before_kb=(\d+) rss_with_kb=(\d+) conns=(\d+)(?: rss_after_kb=(\d+))?", text, re.M)
    if not m or not r:
        return None, 0, 1, 0, 1, None, None, "-"
    after = f";rss2={r.group(4)}" if r.group(4) else ""
    # the HTTP/2 memory rows (bench/h2mem.sh): Pss, Anonymous, descriptors
    h = re.search(r"^h2mem: (.*)$", text, re.M)
    more = "".join(";" + kv for kv in h.group(1).split()) if h else ""
    return (float(m.group(3)), int(m.group(1)), int(m.group(2)), 0, 0, int(m.group(4)), None,
            f"rss0={r.group(1)};rss1={r.group(2)};conns={m.group(1)}{after}{more}")


def extra_kv(r):
    d = {}
    for kv in (r.get("extra") or "").split(";"):
        k, _, v = kv.partition("=")
        if k and isnum(v):
            d[k] = float(v)
    return d


def run_metric(r, k):
    """the value a row compares: KiB of RSS per connection (idle TLS),
    MiB/s (one large transfer per run), else req/s"""
    if k[0] == "idle":
        x = extra_kv(r)
        if x.get("conns") and "rss0" in x and "rss1" in x:
            return (x["rss1"] - x["rss0"]) / x["conns"]
        return None
    if by_bytes(k) and isnum(r.get("kib_s")):
        return float(r["kib_s"])
    return float(r["rps"]) if isnum(r["rps"]) else None


def run_cpu_s(r, clk):
    """the proxy's CPU seconds in one run: schedstat's ns when bench/run
    recorded them (exact), else /proc/PID/stat's clock ticks"""
    if isnum(r.get("cpu_ns")):
        return int(r["cpu_ns"]) / 1e9
    return int(r["cpu_ticks"]) / clk if (r.get("cpu_ticks") or "").isdigit() else 0.0


def run_gb(k, env):
    """bytes of one run of a large-transfer row, in GB (10^9), else None"""
    if k[0] == "curl":
        return int(env.get("big_bytes", "0") or 0) / 1e9 or None
    if k[0] == "r66" and k[2] == "big":
        return int(env.get("r66_big_mb", "0") or 0) * (1 << 20) / 1e9 or None
    return None


def cpu_unit(k):
    """what one unit of work is on a row: (label, per-GB?)"""
    if by_bytes(k):
        return "s / GB", True
    if k[0] in ("ftp", "r66"):
        return "µs / transfer", False
    if k[0] == "stime" or (k[0] == "ab" and k[2] in ("close", "zones") and k[1] == "1k"):
        return "µs / handshake", False
    if k[0] == "idle":
        return None, False
    return "µs / request", False


def run_cpu_per_unit(r, k, env, clk):
    """one run's CPU per unit of work (see cpu_unit), or None"""
    unit, per_gb = cpu_unit(k)
    if unit is None:
        return None
    if per_gb:
        gb = run_gb(k, env)
        return run_cpu_s(r, clk) / gb if gb else None
    if not (r["complete"].isdigit() and int(r["complete"]) > 0):
        return None
    return run_cpu_s(r, clk) * 1e6 / int(r["complete"])


def cmd_parse(argv):
    tool, path = argv[0], argv[1]
    with open(path, errors="replace") as f:
        text = f.read()
    if tool == "ab":
        vals = parse_ab(text)
    elif tool == "wrk":
        vals = parse_wrk(text)
    elif tool == "h2load":
        vals = parse_h2load(text)
    elif tool == "ftp":
        vals = parse_ftp(text)
    elif tool == "stime":
        vals = parse_stime(text)
    elif tool == "idle":
        vals = parse_idle(text)
    else:
        vals = parse_curl(text, int(argv[2]))
    if len(vals) == 7:
        vals = (*vals, "-")

    def fmt(v):
        if v is None:
            return "-"
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    print(" ".join(fmt(v) for v in vals))


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


def isnum(s):
    try:
        float(s)
        return True
    except (TypeError, ValueError):
        return False


def ours(t):
    """proxyd's own paths: only their failures fail the run; a peer's
    (direct, HAProxy, vsftpd's own active mode...) is reported only"""
    return t.startswith("proxyd-") or t.startswith("base-")


def kb_problem(r):
    """the keybridge row's leaf counts (bench/run's check, repeated here)"""
    x = extra_kv(r)
    if "kb_minted" not in x:
        return None
    m, c = x["kb_minted"], x.get("kb_cached", 0)
    if r["target"] == "proxyd-tls-kb" and (m != 0 or c == 0):
        return f"warm row minted {m:.0f} leaves (cached {c:.0f})"
    if r["target"] == "proxyd-tls-kbcold" and (m == 0 or 10 * m < 9 * (m + c)):
        return f"cold row minted {m:.0f} of {m + c:.0f} leaves (under 90 %)"
    return None


def run_bad(r):
    if kb_problem(r):
        return True
    if r["rc"] != "0" or r["rps"] == "-":
        return True
    for k in ("failed", "non2xx", "sockerr"):
        if r[k] not in ("0", "-"):
            return True
    if r["tool"] in COUNTED and r["complete"] != r["n"]:
        return True
    if r["tool"] not in COUNTED and r["complete"] in ("0", "-"):
        return True
    if extra_kv(r).get("dispatch_ok") == 0:
        return True
    return False


def run_failed_requests(r):
    """requests this run did not serve cleanly (ab: failed + non-2xx + missing)"""
    n = 0
    for k in ("failed", "non2xx", "sockerr"):
        if r[k].isdigit():
            n += int(r[k])
    if r["tool"] in COUNTED and r["n"].isdigit():
        done = int(r["complete"]) if r["complete"].isdigit() else 0
        n += max(0, int(r["n"]) - done - (int(r["failed"]) if r["failed"].isdigit() else 0))
    return n


def run_problem(r):
    bits = []
    if r["rc"] != "0":
        bits.append(f"rc={r['rc']}")
    if r["rps"] == "-":
        bits.append("no result")
    for k in ("failed", "non2xx", "sockerr"):
        if r[k] not in ("0", "-"):
            bits.append(f"{k}={r[k]}")
    if r["tool"] in COUNTED and r["complete"] not in (r["n"], "-"):
        bits.append(f"complete={r['complete']}/{r['n']}")
    if r["tool"] not in COUNTED and r["complete"] in ("0", "-"):
        bits.append("no request served")
    if kb_problem(r):
        bits.append(kb_problem(r))
    x = extra_kv(r)
    if x.get("dispatch_ok") == 0:
        bits.append(f"sessions: {x.get('to_service', 0):.0f} of {x.get('sessions', 0):.0f} to the "
                    f"expected service ({x.get('with_request', 0):.0f} with a request), "
                    f"{x.get('elsewhere', 0):.0f} elsewhere, for {r['n']} requests")
    return f"{r['target']} r{r['round']}: " + " ".join(bits) + f" ({r['raw']})"


def by_bytes(k):
    """rows of one large transfer per run: compared by MiB/s, not by 1/time"""
    return k[0] == "curl" or (k[0] == "r66" and k[2] == "big")
