#!/usr/bin/env bash
# 10 000 random wrong passwords against a local slapd (auth_lib.sh),
# through an http service's <auth> (Basic, on 8 keep-alive connections at
# once, each request with another random password for alice): every one
# is answered 407 and counted as bad-password in proxyd_auth_total, no
# password (nor the Basic token) appears in the log, and a client of
# another service on the same single worker keeps its latency meanwhile
# (no request of it waits behind the checks). Then alice's right password
# still passes. Bounded: the storm must end within 45 s.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx curl python3 slapd ldapadd
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
start_ldap

write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir 'cache="5m" timeout="3s"')
  </authenticators>"
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
free_port PA
write_http_service guarded "$PA" "$NGINX_PORT" "
<auth authenticator=\"dir\" methods=\"basic\" basic-without-tls=\"yes\"/>
<http/>"
free_port PO
write_http_service other "$PO" "$NGINX_PORT" "<http/>"
start_proxyd

# other PORT SECONDS OUT: keep-alive GETs of /a.txt for SECONDS or until
# $T/stop exists, each latency (ms) a line of OUT as it comes
other() {
    python3 - "$@" "$T/stop" <<'PY'
import http.client, os, sys, time
port, secs, out, stop = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
end = time.monotonic() + secs
with open(out, "w") as f:
    while time.monotonic() < end and not os.path.exists(stop):
        t = time.monotonic()
        c.request("GET", "/a.txt")
        r = c.getresponse()
        r.read()
        if r.status != 200:
            sys.exit("status %d" % r.status)
        f.write("%.3f\n" % ((time.monotonic() - t) * 1000))
        f.flush()
        time.sleep(0.01)
PY
}
# pct FILE P: the P-th percentile of a latency file
pct() { sort -n "$1" | awk -v p="$2" '{ a[NR] = $1 } END { i = int(NR * p / 100); if (i < 1) i = 1; print a[i] }'; }

info "the other service's latency at rest"
other "$PO" 2 "$T/rest.txt"

info "10 000 wrong passwords"
other "$PO" 600 "$T/storm.txt" &
OTHER=$!
t0=$(now_ms)
timeout 60 python3 - "$PA" "$T/pw.txt" <<'PY' || fail "the storm did not finish: $(tail -n 3 "$T/storm.err" 2>/dev/null)"
import base64, http.client, os, sys, threading
port, pwfile = int(sys.argv[1]), sys.argv[2]
N, K = 10000, 8
bad = []
def run(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    for i in range(k, N, K):
        pw = "wp-" + os.urandom(8).hex()
        tok = base64.b64encode(("alice:" + pw).encode()).decode()
        c.request("GET", "http://127.0.0.1/a.txt", headers={"Authorization": "Basic " + tok})
        r = c.getresponse()
        r.read()
        if r.status != 401:
            bad.append(r.status)
        if i < 8:
            open(pwfile, "a").write(pw + " " + tok + "\n")
ts = [threading.Thread(target=run, args=(k,)) for k in range(K)]
for t in ts: t.start()
for t in ts: t.join()
if bad:
    sys.exit("unexpected statuses: %r" % sorted(set(bad)))
PY
t1=$(now_ms)
touch "$T/stop"
wait "$OTHER" || fail "the other service's client failed"
info "storm: $((t1 - t0)) ms"
assert_lt $((t1 - t0)) 45000 "10 000 wrong passwords (ms)"
assert_metric eq proxyd_auth_total 'authenticator="dir",method="basic",result="bad-password"' 10000
assert_eq "$(metric_value proxyd_auth_total 'result="busy"')" NA "no check refused busy"
assert_log 'auth authenticator=dir method=basic user=alice result=bad-password'
while read -r pw tok; do
    assert_no_grep "$PROXYD_LOG" "$pw" "a wrong password in the log"
    assert_no_grep "$PROXYD_LOG" "$tok" "a Basic token in the log"
done <"$T/pw.txt"
assert_no_grep "$PROXYD_LOG" 'wp-[0-9a-f]' "a wrong password in the log"
assert_eq "$(grep -c 'auth authenticator=dir method=basic user=alice result=bad-password' "$PROXYD_LOG")" 10000 "auth lines"

info "the other service's latency during the storm"
n=$(wc -l <"$T/storm.txt")
info "rest: median $(pct "$T/rest.txt" 50) ms, p99 $(pct "$T/rest.txt" 99) ms; storm: $n requests, median $(pct "$T/storm.txt" 50) ms, p99 $(pct "$T/storm.txt" 99) ms, max $(pct "$T/storm.txt" 100) ms"
assert_ge "$n" 20 "the other client's requests during the storm"
# No request waits behind a check (each takes ~1-3 ms of slapd): the
# worker answers it between checks, CPU shared with slapd and the storm's
# client on 2 cores.
awk '$1 > 300 { bad++ } END { exit bad > 0 }' "$T/storm.txt" ||
    fail "a request of the other service took over 300 ms during the storm"
med=$(pct "$T/storm.txt" 50)
assert_lt "${med%.*}" 30 "the other service's median latency during the storm (ms)"

info "alice's own password still passes"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -u alice:alice-ldap-pw "http://127.0.0.1:$PA/a.txt")
assert_eq "$code" 200 "alice after the storm"
info "ok"
