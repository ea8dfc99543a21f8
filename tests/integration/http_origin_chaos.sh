#!/usr/bin/env bash
# http analyser against origins that close idle keep-alive connections the
# way real servers do, and worse (http_chaos.py):
# - the race: the origin half-closes (FIN) an idle connection 0.5 s after
#   its last answer and closes 0.3 s later, or resets it (RST); clients
#   ask again 0.4-0.6 s after each answer, 2 and 10 at once, through a
#   default <http/> service on 2 workers. Every GET gets its own 200 and
#   exact body: a request that went out on a connection that died before
#   answering is retried on a fresh one (never a 502, never a silent close,
#   never a crash).
# - chaos: idle closes at random moments with FIN or RST, trickled,
#   chunked, last-then-FIN, garbage and cut responses, 6 clients: every
#   answer is right or a clear error (502 for garbage, a cut for a cut).
# - early responses (issue 35): uploads to an nginx that answers before
#   reading the body ("return 200"), with and without Expect: 100-continue,
#   small (held whole for the scan) and 10^6 bytes, Content-Length and chunked,
#   HTTP/1.1 and h2c, through a service with <scan> (a scanner slower on
#   uploads than on downloads: the upload's body is all in, held, when the
#   response's verdict lets the response end) and one without. Each is
#   followed by a GET on the same connection (h2c: a new stream, a new leg
#   on the same worker): it gets its own 200, never nginx's 400. The
#   smuggling case: then a POST whose body ends with "GET /admin", sized
#   so that a server still waiting for the upload's body reads that as a
#   request: the <url path="/admin*" action="deny"/> rule must judge every
#   request nginx gets (its access log never has /admin). The audit
#   records say what happened: an upload answered early whose held body
#   never went is complete:false, reason:early-response, not scanned.
# proxyd must be alive at the end, and the retries show in the counter.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3 nginx curl
setup

CHAOS="$LIB_DIR/http_chaos.py"
# h2c clients: Debian's python3 has python3-h2; a pyenv python3 first on
# PATH may not.
H2PY=""
for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import h2' 2>/dev/null; then
        H2PY=$py
        break
    fi
done
[[ -n $H2PY ]] || skip "no python3 with h2 (Debian python3-h2)"
start_chaos_origin() { # VAR CLOSE [extra args]
    local var=$1 close=$2 port pid
    shift 2
    free_port "$var"
    port=${!var}
    python3 "$CHAOS" origin --port "$port" --close "$close" "$@" \
        2>>"$T/origin-$port.err" &
    pid=$!
    track_pid "$pid"
    wait_listen "$port" 5 "$pid" || fail "chaos origin on port $port did not start"
}

start_chaos_origin OFIN fin
start_chaos_origin ORST rst
start_chaos_origin OMIX mix --idle 0.3
free_port PFIN
free_port PRST
free_port PMIX
# Early responses: nginx, and the scanner.
printf 'ok\n' >"$T/www/ok.txt"
NGINX_EXTRA='location = /early { return 200 "early\n"; }
        location /admin { return 200 "ADMIN\n"; }'
start_nginx
free_port ICAP
python3 "$CHAOS" icap --port "$ICAP" --log "$T/icap.log" 2>>"$T/icap.err" &
track_pid $!
wait_listen "$ICAP" 5 || fail "the scanner did not start"
AUDIT=$T/audit.json
free_port PSCAN
free_port PPLAIN
write_proxyd_conf '' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP/av\"/>
  </scanners>
  <audit target=\"file:$AUDIT\"/>"
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_http_service fin "$PFIN" "$OFIN" '<http/>'
write_http_service rst "$PRST" "$ORST" '<http/>'
write_http_service mix "$PMIX" "$OMIX" '<http/>'
EARLY_HTTP='<http h2c="yes"><url path="/admin*" action="deny"/></http>'
write_http_service early-scan "$PSCAN" "$NGINX_PORT" "<scan scanner=\"av\"/>
  <audit/>
  $EARLY_HTTP"
write_http_service early-plain "$PPLAIN" "$NGINX_PORT" "<audit/>
  $EARLY_HTTP"
start_proxyd

# Seconds per client run (five runs). At a request every 0.4-0.6 s against
# an origin closing 0.5 s after its last answer, 5 s give each race run
# 20 (2 clients) to 100 (10) requests, about half of them near a close:
# the race is met many times over (the retried counter); 8 s each cost
# CI 15 s more in a test that runs alone (PROCESSORS 2).
DURATION=5
http_sanitized && DURATION=6

run_clients() { # NAME PORT CLIENTS [extra args]
    local name=$1 port=$2 n=$3 out
    shift 3
    out=$T/clients-$name.json
    python3 "$CHAOS" clients --port "$port" --clients "$n" \
        --duration "$DURATION" "$@" >"$out" 2>"$out.err" || true
    info "$name: $(cat "$out")"
    [[ -s $out ]] || fail "$name: the clients printed nothing: $(tail -5 "$out.err")"
    proc_alive "$PROXYD_PID" || fail "proxyd died during $name"
}

retried_before=$(http_counter retried)
for variant in fin rst; do
    port=PFIN
    [[ $variant == rst ]] && port=PRST
    for n in 2 10; do
        run_clients "$variant-$n" "${!port}" "$n"
        out=$T/clients-$variant-$n.json
        check python3 - "$out" <<'EOF' "$variant with $n clients: every GET answered 200 with its own body"
import json, sys
s = json.load(open(sys.argv[1]))
bad = s.get("BAD", 0)
if bad or s.get("ok", 0) < 10:
    print("ok=%d BAD=%d first: %s" % (s.get("ok", 0), bad, s["bad"][:3]), file=sys.stderr)
    sys.exit(1)
EOF
    done
done
retried=$(($(http_counter retried) - retried_before))
info "retried: $retried"
# The race is real only if some requests met a dying connection.
check assert_ge "$retried" 1 "some requests were retried on a fresh connection"

run_clients chaos "$PMIX" 6 --behaviours ok,ok,ok,chunked,trickle,last,garbage,cut \
    --gap-min 0 --gap-max 0.5 --seed 7
check python3 - "$T/clients-chaos.json" <<'EOF' "chaos: every answer right or a clear error"
import json, sys
s = json.load(open(sys.argv[1]))
if s.get("BAD", 0) or s.get("ok", 0) < 10 or s.get("error", 0) < 1:
    print("stats: %s" % s, file=sys.stderr)
    sys.exit(1)
EOF
assert_log 'http-bad-response'

# ---- early responses
# early_case NAME PORT h1|h2 ARGS...: one upload answered early (and what
# follows it), the client's JSON in $T/early-NAME.json. Each case's body
# has its own size (the audit record's announced_size tells them apart).
early_case() {
    local name=$1 port=$2 py=python3 cmd=early
    shift 2
    [[ $1 == h2 ]] && py=$H2PY cmd=early-h2
    shift
    "$py" "$CHAOS" "$cmd" --port "$port" --then /ok.txt "$@" \
        >"$T/early-$name.json" 2>>"$T/early.err" ||
        fail "$name: the client failed: $(tail -3 "$T/early.err")"
    info "$name: $(cut -c1-300 "$T/early-$name.json")"
    proc_alive "$PROXYD_PID" || fail "proxyd died during $name"
}
for svc in scan plain; do
    port=PSCAN
    [[ $svc == plain ]] && port=PPLAIN
    i=0
    for proto in h1 h2; do
        for expect in expect noexpect; do
            x=()
            [[ $expect == expect ]] && x=(--expect)
            i=$((i + 1))
            early_case "$svc-$proto-$expect-small" "${!port}" "$proto" \
                "${x[@]}" --size $((20 + i))
            early_case "$svc-$proto-$expect-1m" "${!port}" "$proto" \
                "${x[@]}" --size $((1000000 + i))
        done
    done
    early_case "$svc-h1-chunked" "${!port}" h1 --chunked --size 30
    early_case "$svc-h1-smuggle" "${!port}" h1 --expect --smuggle
done
check python3 - "$T" <<'EOF' "early responses: each upload got its 200, the request after it its own 200"
import glob, json, os, sys
bad = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "early-*.json"))):
    name = os.path.basename(f)[6:-5]
    r = json.load(open(f))
    if r.get("status") != 200 or r.get("status_body") != "early\n":
        bad.append("%s: upload %s %r" % (name, r.get("status"), r.get("status_body", "")[:40]))
    if r.get("then") != 200 or r.get("then_body") != "ok\n":
        bad.append("%s: next request %s %r" % (name, r.get("then"), r.get("then_body", "")[:60]))
    # The POST after the upload: its own answer, or none (the connection
    # was closed after the upload's), never what /admin serves.
    if "smuggle" in name and r.get("status2") is not None and \
            r.get("status2_body") != "early\n":
        bad.append("%s: the POST got %s %r" % (name, r.get("status2"), r.get("status2_body", "")[:60]))
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
# Other clients of the workers: their own answers.
for port in PSCAN PPLAIN; do
    for i in 1 2 3 4; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:${!port}/ok.txt" || true)
        check assert_eq "$code" 200 "a GET /ok.txt after the early responses ($port)"
    done
done
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PSCAN/admin" || true)
check assert_eq "$code" 403 "GET /admin is judged by the url rule"
NGX_LOG=$T/nginx/logs/access.log
absent() { # FILE REGEX: no line matches (those that do go to stderr)
    ! grep -E -- "$2" "$1" >&2
}
check absent "$NGX_LOG" '/admin' "nginx never got a request for /admin"
check absent "$NGX_LOG" '" 400 ' "nginx answered no request 400"
# Records come through the log thread: all 20 uploads' (and the POSTs').
for ((i = 0; i < 100; i++)); do
    (($(grep -c '"file":"/early","direction":"upload"' "$AUDIT" 2>/dev/null || true) >= 20)) && break
    sleep 0.1
done
check python3 - "$AUDIT" <<'EOF' "early responses: the audit records say what happened"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ups = [r for r in recs if r["file"] == "/early" and r["direction"] == "upload"]
bad = []
def one(service, size):
    got = [r for r in ups if r["service"] == service and r["announced_size"] == size]
    if len(got) != 1:
        bad.append("%s size %d: %d records" % (service, size, len(got)))
        return None
    return got[0]
# Held whole for the scan (h1 and h2c, with Expect: the body came after
# the 100): when the response came first, never sent and never scanned;
# when the upload's verdict won the race (a loaded scanner), sent whole
# and scanned clean. Either way the record says which; and at least one
# of the scanned service's uploads lost the race (its log line is
# asserted below), so the early path was taken.
for size in (21, 23):
    r = one("early-scan", size)
    if r is None:
        continue
    if r["complete"]:
        if r.get("reason") is not None or r["scan_verdict"] != "clean":
            bad.append("early-scan size %d sent whole: %s" % (size, r))
    elif (r.get("reason") != "early-response" or r["scan_verdict"] is not None
          or r["verdict"] != "accept"):
        bad.append("early-scan size %d: %s" % (size, r))
if not any(r["service"] == "early-scan" and r.get("reason") == "early-response"
           and r["scan_verdict"] is None for r in ups):
    bad.append("no scanned upload recorded as answered early and never sent")
# Every upload record on either service: complete, or said why not; a
# scanned one complete only when scanned clean.
for r in ups:
    if r["complete"] == (r.get("reason") == "early-response"):
        bad.append("complete and reason disagree: %s" % r)
    if r["service"] == "early-scan" and r["complete"] and r["scan_verdict"] != "clean":
        bad.append("complete but not scanned: %s" % r)
# Every answer went whole to its client, over HTTP/2 too (whose leg's
# record waits for its stream's end): complete.
downs = [r for r in recs if r["direction"] == "download"
         and r["service"] in ("early-scan", "early-plain")]
if not downs:
    bad.append("no download records")
for r in downs:
    if not r["complete"] or r.get("reason") is not None:
        bad.append("a whole download not complete: %s" % r)
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

check assert_log 'http-early-response status=200 unsent=[0-9]+ scan=cancelled \(the server answered before the request.s end: its connection closed\)' \
    "$ASYNC_WAIT" "the early responses to held uploads are logged"

# Served after all that: the sentinel.
code=$(python3 "$CHAOS" clients --port "$PFIN" --clients 1 --rounds 1 --gap-min 0 --gap-max 0 | python3 -c 'import json,sys; print(json.load(sys.stdin).get("ok", 0))')
check assert_eq "$code" 1 "a last GET after the chaos"
http_done
