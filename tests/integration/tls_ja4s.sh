#!/usr/bin/env bash
# JA4S (FoxIO's server fingerprint) where proxyd originates TLS: the
# session-end line says ja4s= and the audit record "ja4s", the same as an
# independent computation: `openssl s_server -msg` is the server and
# prints the ServerHello it sends in hex; the tests' decoder, ja4_ref.py's
# ja4s (written from the JA4S definition: protocol, version from
# supported_versions else the legacy one, extension count, ALPN first+last
# characters, "_" the chosen cipher in hex, "_" the first 12 hex of sha256
# of the extensions as sent, in order), computes the JA4S of those bytes. Three servers:
# - TLS 1.3 (plug service): version from supported_versions, no ALPN;
# - TLS 1.2 with ALPN http/1.1 (http service, which offers it): "h1", the
#   legacy version, another cipher and extension list;
# - TLS 1.3 that only takes P-384 (plug): a HelloRetryRequest first, the
#   JA4S is the ServerHello's after it (the decoder sees both).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds openssl curl python3
setup
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
export HERE

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin origin.test "DNS:origin.test" serverAuth

# s_server NAME ARGS...: openssl s_server -msg -www on a free port (its
# port in S_<NAME>), one connection, its output in $T/s_<NAME>.out; its
# stdin a fifo held open so that it does not stop at EOF.
s_server() {
    local name=$1 port
    shift
    free_port "S_$name"
    port=$(eval echo "\$S_$name")
    mkfifo "$T/s_$name.in"
    openssl s_server -accept "127.0.0.1:$port" -cert "$P/origin.pem" -key "$P/origin.key" \
        -msg -www -naccept 1 "$@" <"$T/s_$name.in" >"$T/s_$name.out" 2>&1 &
    track_pid $!
    eval "exec {fd_$name}>\"$T/s_$name.in\""
    wait_listen "$port" 10 $! || fail "s_server $name did not listen: $(cat "$T/s_$name.out")"
}
s_server t13 -tls1_3
s_server t12 -tls1_2 -alpn http/1.1
s_server hrr -tls1_3 -groups P-384

free_port P13
free_port P12
free_port PHRR
ORIG="<tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"origin.test\"/>"
write_proxyd_conf "" "<audit target=\"file:$T/audit.json\"/>"
write_service p13 "$P13" "$S_t13" "$ORIG"
write_service phrr "$PHRR" "$S_hrr" "$ORIG"
cat >"$T/policy/h12.xml" <<EOF
<service name="h12" analyser="http">
  <listen address="127.0.0.1" port="$P12" mode="fixed"/>
  <target address="127.0.0.1" port="$S_t12"/>
  $ORIG
  <audit min-size="1"/>
</service>
EOF
PROXYD_PORTS+=("$P12")
start_proxyd

cat >"$T/ja4s_ref.py" <<'EOF'
# ja4s_ref.py S_SERVER_OUT: the JA4S of the last ServerHello that
# `openssl s_server -msg` says it sent (">>> ..., ServerHello" and its hex
# lines) by ja4_ref.py's decoder; prints it, then "hrr" if a
# HelloRetryRequest came before it.
import os, re, sys
sys.path.insert(0, os.environ["HERE"])
import ja4_ref
HRR = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
hellos, cur = [], None
for line in open(sys.argv[1], errors="replace"):
    if line.startswith((">>>", "<<<")):
        cur = None
        if line.startswith(">>>") and line.rstrip().endswith("ServerHello"):
            cur = bytearray()
            hellos.append(cur)
    elif cur is not None and re.fullmatch(r"\s+([0-9a-f]{2} ?)+\s*", line):
        cur += bytes.fromhex(line.strip())
    else:
        cur = None
assert hellos, "no ServerHello in " + sys.argv[1]
print(ja4_ref.ja4s(bytes(hellos[-1])))
if len(hellos) > 1 and bytes(hellos[0][6:38]) == HRR:
    print("hrr")
EOF

declare -A WANT GOT
for svc in p13:$P13:t13 h12:$P12:t12 phrr:$PHRR:hrr; do
    IFS=: read -r name port srv <<<"$svc"
    code=$(curl -s --max-time 10 -o "$T/$name.body" -w '%{http_code}' "http://127.0.0.1:$port/")
    assert_eq "$code" 200 "GET / through $name (s_server -www)"
    wait_grep "$PROXYD_LOG" "session-end service=$name " 10 || fail "no session-end line for $name"
    GOT[$name]=$(kv "$(session_end_lines "$name" | head -n 1)" ja4s)
    "$PY" "$T/ja4s_ref.py" "$T/s_$srv.out" >"$T/$name.ref" || fail "decoder failed on $T/s_$srv.out"
    WANT[$name]=$(head -n 1 "$T/$name.ref")
    info "$name: proxyd ja4s=${GOT[$name]} decoder ${WANT[$name]}$(sed -n 2p "$T/$name.ref" | sed 's/^/ after a /')"
    assert_eq "${GOT[$name]}" "${WANT[$name]}" "$name: proxyd's JA4S against the decoder's of s_server's ServerHello"
done
# the three are told apart, and each says what its server did
[[ ${GOT[p13]} == t1302* ]] || fail "TLS 1.3: version 13 from supported_versions, no ALPN: ${GOT[p13]}"
[[ ${GOT[h12]} == t12??h1_* ]] || fail "TLS 1.2 with ALPN http/1.1: ${GOT[h12]}"
assert_eq "$(sed -n 2p "$T/phrr.ref")" hrr "s_server -groups P-384 answered a HelloRetryRequest first"
assert_ne "${GOT[p13]}" "${GOT[h12]}" "JA4S of TLS 1.3 and TLS 1.2 servers"

info "the audit record (http) carries the server's ja4s"
wait_grep "$T/audit.json" '"service":"h12"' 5 || fail "no audit record for h12"
"$PY" - "$T/audit.json" "${WANT[h12]}" <<'PYEOF' || fail "the audit record's ja4s: $(cat "$T/audit.json")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x.get("service") == "h12"]
assert r and all(x.get("ja4s") == sys.argv[2] for x in r), r
assert "ja4" not in r[0], r[0]   # plain from the client: no client JA4
PYEOF
info "ok"
