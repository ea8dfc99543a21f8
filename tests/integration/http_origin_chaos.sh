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
# proxyd must be alive at the end, and the retries show in the counter.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

CHAOS="$LIB_DIR/http_chaos.py"
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
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_http_service fin "$PFIN" "$OFIN" '<http/>'
write_http_service rst "$PRST" "$ORST" '<http/>'
write_http_service mix "$PMIX" "$OMIX" '<http/>'
start_proxyd

DURATION=8
http_sanitized && DURATION=10

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
# Served after all that: the sentinel.
code=$(python3 "$CHAOS" clients --port "$PFIN" --clients 1 --rounds 1 --gap-min 0 --gap-max 0 | python3 -c 'import json,sys; print(json.load(sys.stdin).get("ok", 0))')
check assert_eq "$code" 1 "a last GET after the chaos"
http_done
