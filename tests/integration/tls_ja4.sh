#!/usr/bin/env bash
# JA4 client fingerprints (issue 39): proxyd computes FoxIO's JA4 from
# every ClientHello, terminated, keybridged or passed through, writes it on
# the session-end line (ja4=, and in the JSON log form), and refuses the
# fingerprints a <fingerprint> rule denies (ja4= or a list file), at the
# handshake, logged with the rule and counted.
#
# Checked against an independent decoder (ja4_ref.py, written from the
# published definition; it reproduces FoxIO's own test vectors): the
# test's TCP relay (hello_relay.py) sits between each client and proxyd
# and records the ClientHello as the client sent it; the decoder's JA4 of
# those bytes must be the one proxyd logged. Clients: curl, openssl
# s_client, Python's ssl, Chromium (whose hello carries extensions OpenSSL
# does not know, such as ALPS, and GREASE).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3 chromium
setup
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3

P=$T/pki
tls_ca ca "proxyd test CA"
tls_ca kbca "proxyd keybridge CA"
tls_leaf proxy www.example.test "DNS:www.example.test" serverAuth
tls_leaf origin www.example.test "DNS:www.example.test" serverAuth
echo "ja4 test page" >"$T/www/page.html"

free_port NGX_TLS
NGINX_SERVERS="
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"

free_port P_TERM
free_port P_KB
free_port P_PASS
free_port P_HTTP
# services NAME -> extra XML for each (the fingerprint rules come later)
write_services() {
    reset_services
    write_service tterm "$P_TERM" "$NGINX_PORT" \
        "<tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>
  ${FP_TERM:-}"
    write_service tkb "$P_KB" "$NGX_TLS" \
        "<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kbca.pem\" ca-key=\"$P/kbca.key\"/>
  <tls side=\"server\" mode=\"originate\" verify=\"required\" ca=\"$P/ca.pem\" sni=\"forward\"/>
  ${FP_KB:-}"
    write_service tpass "$P_PASS" "$NGX_TLS" \
        "<tls side=\"client\" mode=\"passthrough\"><sni name=\"*\" action=\"accept\"/></tls>
  ${FP_PASS:-}"
    cat >"$T/policy/thttp.xml" <<XML
<service name="thttp" analyser="http">
  <listen address="127.0.0.1" port="$P_HTTP" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <tls side="client" mode="terminate" cert="$P/proxy.pem" key="$P/proxy.key"/>
  <audit min-size="1"/>
</service>
XML
    PROXYD_PORTS+=("$P_HTTP")
}
write_proxyd_conf "" "<audit target=\"file:$T/audit.json\"/>"
write_services
start_proxyd

# The recording relay: R_x in front of proxyd's port P_x.
free_port R_TERM
free_port R_KB
free_port R_PASS
mkdir -p "$T/hellos"
"$PY" "$HERE/hello_relay.py" "$T/hellos" "$R_TERM:$P_TERM" "$R_KB:$P_KB" \
    "$R_PASS:$P_PASS" 2>"$T/relay.err" &
track_pid $!
for p in "$R_TERM" "$R_KB" "$R_PASS"; do
    wait_listen "$p" 5 || fail "the recording relay did not listen on $p"
done

# client NAME RELAY_PORT CA: one request through the relay; prints what it
# got (or nothing)
client() {
    local who=$1 port=$2 ca=$3
    case $who in
    curl)
        curl -sS --max-time 20 --cacert "$ca" \
            --resolve "www.example.test:$port:127.0.0.1" \
            "https://www.example.test:$port/page.html" 2>>"$T/client.err" || true ;;
    openssl)
        printf 'GET /page.html HTTP/1.0\r\nHost: www.example.test\r\n\r\n' |
            timeout 20 openssl s_client -quiet -connect "127.0.0.1:$port" \
            -servername www.example.test -CAfile "$ca" \
            -verify_return_error 2>>"$T/client.err" | tail -n 1 || true ;;
    python)
        "$PY" - "$port" "$ca" 2>>"$T/client.err" <<'PYEOF' || true
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20) as s:
    with ctx.wrap_socket(s, server_hostname="www.example.test") as t:
        t.sendall(b"GET /page.html HTTP/1.0\r\nHost: www.example.test\r\n\r\n")
        data = b""
        while True:
            b = t.recv(65536)
            if not b:
                break
            data += b
print(data.decode(errors="replace").splitlines()[-1])
PYEOF
        ;;
    chromium)
        timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
            --disable-dev-shm-usage --user-data-dir="$T/chromium" \
            --ignore-certificate-errors \
            --host-resolver-rules="MAP www.example.test 127.0.0.1" \
            --dump-dom "https://www.example.test:$port/page.html" 2>>"$T/client.err" |
            grep -o 'ja4 test page' || true ;;
    esac
}

# match LPORT SVC SKIP: pairs each hello the relay recorded for LPORT (not
# yet seen) with the session-end line of SVC (past its first SKIP) for the
# same client port, waiting up to 10 s for every pair; prints one line a
# connection: DECODER_JA4 PSK(0/1: a resumption) PROXYD_JA4 VERDICT END;
# fails when a hello has no line.
match() {
    "$PY" - "$PROXYD_LOG" "$2" "$3" "$T/hellos" "$1" "$T/hellos/.seen" <<'PYEOF'
import os, re, sys, time
sys.path.insert(0, os.environ["HERE"])
import ja4_ref
log, svc, skip, d, lport, seenf = sys.argv[1:7]
seen = set(open(seenf).read().split()) if os.path.exists(seenf) else set()
deadline = time.time() + 10
while True:
    files = sorted(f for f in os.listdir(d)
                   if f.startswith(lport + ".") and f.endswith(".hex") and f not in seen)
    lines = [l for l in open(log, errors="replace")
             if re.search(r"session-end service=%s " % re.escape(svc), l)][int(skip):]
    byport = {}
    for l in lines:
        m = re.search(r" client=127\.0\.0\.1:(\d+) ", l)
        if m:
            byport[m.group(1)] = l
    ports = [f.split(".")[1] for f in files]
    if files and all(p in byport for p in ports):
        break
    if time.time() > deadline:
        sys.exit("hellos %s, session-end lines for ports %s" % (files, sorted(byport)))
    time.sleep(0.1)
for f, p in zip(files, ports):
    data = bytes.fromhex(open(os.path.join(d, f)).read())
    psk = any(t == 0x29 for t, _ in ja4_ref.fields(data)[2])
    l = byport[p]
    m = re.search(r" ja4=(\S+)", l)
    v = re.search(r" verdict=(\S+)", l).group(1)
    end = l.split(" end=", 1)[1].strip()
    print(ja4_ref.ja4(data), int(psk), m.group(1) if m else "-", v, end)
with open(seenf, "a") as s:
    s.write("".join(f + "\n" for f in files))
PYEOF
}
export HERE

declare -A JA4=() JA4_PROXYD=()
# through SERVICE RELAY_PORT CLIENT CA EXPECT(ok|deny): runs the client;
# every connection it made must have on its session-end line the JA4 the
# decoder finds in its hello, and the fresh ones (no resumption) the
# verdict expected; JA4[CLIENT] is theirs (the decoder's),
# JA4_PROXYD[CLIENT] the same as proxyd logged it.
through() {
    local svc=$1 port=$2 who=$3 ca=$4 want=$5 got skip out ref psk pj v end fresh=""
    skip=$(session_end_lines "$svc" | wc -l)
    got=$(client "$who" "$port" "$ca")
    out=$(match "$port" "$svc" "$skip") || fail "$who via $svc: $out"
    while read -r ref psk pj v end; do
        [[ $ref =~ ^t1[23][di][0-9]{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$ ]] ||
            fail "$who: the decoder gave '$ref'"
        assert_eq "$pj" "$ref" "$who via $svc: proxyd's JA4 against the decoder's"
        # (Chromium may open more connections, a preconnect or the
        # favicon's, that resume the first one's session: pre_shared_key
        # is one more extension, so a JA4 of their own.)
        ((psk)) && continue
        [[ -z $fresh || $fresh == "$ref" ]] || fail "$who via $svc: two fresh JA4s, $fresh and $ref"
        fresh=$ref
        JA4_PROXYD[$who]=$pj
        if [[ $want == ok ]]; then
            assert_eq "$v" accept "$who via $svc: verdict ($end)"
        else
            assert_eq "$v" deny "$who via $svc: verdict"
            [[ $end == "denied: tls ja4=$ref (<fingerprint> at line "* ]] ||
                fail "$who via $svc: end=$end"
        fi
    done <<<"$out"
    [[ -n $fresh ]] || fail "$who via $svc: no fresh handshake"
    if [[ $want == ok ]]; then
        [[ $got == *"ja4 test page"* ]] || fail "$who through $svc got '$got' ($(tail -3 "$T/client.err"))"
    else
        [[ $got == *"ja4 test page"* ]] && fail "$who through $svc was let through"
        assert_log "session-end service=$svc analyser=plug verdict=deny .* duration=[0-9.]+ ja4=$fresh rule=$svc\.xml:[0-9]+ by=policy phase=accept end=denied: tls ja4=$fresh \(<fingerprint> at line [0-9]+"
    fi
    info "  $who via $svc: $fresh ($want, $(wc -l <<<"$out") connection(s))"
    JA4[$who]=$fresh
}

info "each client's fingerprint, as proxyd computed it, against the decoder's"
for who in curl openssl python chromium; do
    through tterm "$R_TERM" "$who" "$P/ca.pem" ok
    T_JA4=${JA4[$who]}
    through tkb "$R_KB" "$who" "$P/kbca.pem" ok
    # (Chromium draws its extension order anew per connection, which JA4
    # sorts away: the same client, the same fingerprint.)
    assert_eq "${JA4[$who]}" "$T_JA4" "$who's JA4 under keybridge and terminate"
    through tpass "$R_PASS" "$who" "$P/ca.pem" ok
    assert_eq "${JA4[$who]}" "$T_JA4" "$who's JA4 under passthrough and terminate"
done
for a in curl openssl python chromium; do
    for b in curl openssl python chromium; do
        [[ $a < $b && ${JA4[$a]} == "${JA4[$b]}" ]] &&
            fail "$a and $b have the same JA4 ${JA4[$a]}: the deny test would prove nothing"
    done
done
info "fingerprints: curl ${JA4[curl]} openssl ${JA4[openssl]} python ${JA4[python]} chromium ${JA4[chromium]}"
# For the record: each client's fresh hello, as proxyd logged it and as
# the decoder (ja4_ref.py) computed it from the relay's bytes.
for who in curl openssl python chromium; do
    info "ja4 $who: proxyd ${JA4_PROXYD[$who]} decoder ${JA4[$who]}"
done
info "an audit record (http under TLS) carries the client's ja4"
got=$(client curl "$P_HTTP" "$P/ca.pem")
[[ $got == *"ja4 test page"* ]] || fail "curl through thttp got '$got'"
wait_grep "$T/audit.json" '"service":"thttp"' 5 || fail "no audit record for thttp"
"$PY" - "$T/audit.json" "${JA4[curl]}" <<'PYEOF' || fail "the audit record's ja4: $(cat "$T/audit.json")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x["service"] == "thttp"][-1]
assert r["ja4"] == sys.argv[2], r
PYEOF
grep -E "tls-passthrough sni=www\.example\.test alpn=[^ ]+ verdict=accept ja4=${JA4[curl]}$" "$PROXYD_LOG" >/dev/null ||
    fail "the passthrough accept line lacks curl's ja4"

info "deny rules, on reload: openssl's by ja4= (terminate), python's from a list file (keybridge), curl's by a pattern (passthrough)"
printf '# fingerprints refused by tkb\n\n%s   # python ssl\n' "${JA4[python]}" >"$T/policy/deny.list"
FP_TERM="<fingerprint ja4=\"${JA4[openssl]}\" action=\"deny\"/>"
FP_KB="<fingerprint list=\"deny.list\" action=\"deny\"/>"
FP_PASS="<fingerprint ja4=\"${JA4[chromium]}\" action=\"accept\"/>
  <fingerprint ja4=\"${JA4[curl]:0:11}*\" action=\"deny\"/>"
write_services
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 1
for who in curl openssl python chromium; do
    through tterm "$R_TERM" "$who" "$P/ca.pem" "$([[ $who == openssl ]] && echo deny || echo ok)"
    through tkb "$R_KB" "$who" "$P/kbca.pem" "$([[ $who == python ]] && echo deny || echo ok)"
    through tpass "$R_PASS" "$who" "$P/ca.pem" "$([[ $who == curl ]] && echo deny || echo ok)"
done
assert_metric eq proxyd_fingerprint_denied_total 'service="tterm"' 1
assert_metric eq proxyd_fingerprint_denied_total 'service="tkb"' 1
assert_metric eq proxyd_fingerprint_denied_total 'service="tpass"' 1
assert_metric eq proxyd_tls_failures_total 'service="tterm",analyser="plug",side="client",reason="other"' 0

info "the list file alone changed (python's fingerprint out, openssl's in), a reload reads it again"
printf '%s\n' "${JA4[openssl]}" >"$T/policy/deny.list"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 2
through tkb "$R_KB" python "$P/kbca.pem" ok
through tkb "$R_KB" openssl "$P/kbca.pem" deny
assert_metric eq proxyd_fingerprint_denied_total 'service="tkb"' 2

info "a bad line in the list file: the reload is refused with file:line, the old list stays"
printf '%s\n%s\nnot-a-fingerprint\n' "${JA4[openssl]}" "${JA4[python]}" >"$T/policy/deny.list"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="failed"' 1
assert_log "deny\.list:3: \"not-a-fingerprint\" is not a JA4 fingerprint" 5
info "log: $(grep -E 'deny\.list:3:' "$PROXYD_LOG" | head -n 1)"
# The list in force is still the previous one: python passes, openssl not.
through tkb "$R_KB" python "$P/kbca.pem" ok
through tkb "$R_KB" openssl "$P/kbca.pem" deny
assert_metric eq proxyd_fingerprint_denied_total 'service="tkb"' 3
# Put back as the deny section left it (the sections below count on it).
printf '%s\n' "${JA4[python]}" >"$T/policy/deny.list"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 3

info "the JSON log form carries ja4 too (SIGHUP to format=json)"
sed -i 's|<log target="stderr" level="info"/>|<log target="stderr" level="info" format="json"/>|' "$PROXYD_CONF"
grep -q 'format="json"' "$PROXYD_CONF" || fail "could not set format=json"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 4
got=$(client curl "$P_TERM" "$P/ca.pem")
[[ $got == *"ja4 test page"* ]] || fail "curl after the switch to json got '$got'"
wait_grep "$PROXYD_LOG" '"event":"session-end".*"ja4":"'"${JA4[curl]}"'"' 5 ||
    fail "no JSON session-end object with ja4 ${JA4[curl]}: $(tail -3 "$PROXYD_LOG")"
"$PY" - "$PROXYD_LOG" "${JA4[curl]}" <<'PYEOF' || fail "the JSON session-end object's ja4"
import json, sys
objs = []
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        objs.append(json.loads(line))
se = [o for o in objs if o.get("event") == "session-end" and o.get("service") == "tterm"]
assert se and se[-1]["ja4"] == sys.argv[2], se[-1:]
PYEOF

info "an allowlist's closing ja4=\"*\" deny refuses a hello without a JA4 (SSLv2-compatible)"
FP_TERM="<fingerprint ja4=\"${JA4[curl]}\" action=\"accept\"/>
  <fingerprint ja4=\"*\" action=\"deny\"/>"
write_services
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 5
got=$(client curl "$P_TERM" "$P/ca.pem")
[[ $got == *"ja4 test page"* ]] || fail "curl, accepted by ja4=, through tterm got '$got'"
# An SSLv2-format ClientHello (RFC 5246 E.2) offering TLS 1.2: OpenSSL
# takes it, but it reaches no message callback as a handshake message, so
# it has no JA4. Prints the server's first record's type and, for an
# alert, its description.
v2=$("$PY" - "$P_TERM" <<'PYEOF'
import os, socket, struct, sys
ciphers = b"".join(struct.pack(">I", c)[1:] for c in
                   (0x00c02f, 0x00c030, 0x00009c, 0x00002f, 0x000035))
challenge = os.urandom(16)
body = (bytes([1]) + struct.pack(">HHHH", 0x0303, len(ciphers), 0,
        len(challenge)) + ciphers + challenge)
hello = struct.pack(">H", 0x8000 | len(body)) + body
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
    s.sendall(hello)
    data = b""
    try:
        while len(data) < 7:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except OSError:
        pass
if len(data) >= 7 and data[0] == 0x15:
    print("alert", data[6])
elif data:
    print("record", data[0])
else:
    print("closed")
PYEOF
)
# 49: access_denied (a ServerHello, 22, would be the hello let through)
assert_eq "$v2" "alert 49" "the SSLv2-compatible hello's answer"
wait_grep "$PROXYD_LOG" 'SSLv2-compatible ClientHello refused' 5 ||
    fail "no session-end line for the SSLv2-compatible hello: $(tail -3 "$PROXYD_LOG")"
assert_metric eq proxyd_tls_failures_total 'service="tterm",analyser="plug",side="client",reason="protocol-version"' 1

info "--check refuses bad rules with file:line"
TLS_C="<tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>"
tls_check_bad "a ja4= that is no fingerprint" plug \
    "$TLS_C<fingerprint ja4=\"t13d1516h2_8daaf6152771\" action=\"deny\"/>" \
    "b\.xml:4: ja4=\"t13d1516h2_8daaf6152771\": not a JA4 fingerprint"
tls_check_bad "both ja4= and list=" plug \
    "<fingerprint ja4=\"${JA4[curl]}\" list=\"x\" action=\"deny\"/>" \
    "b\.xml:4: "
tls_check_bad "a missing list file" plug \
    "$TLS_C<fingerprint list=\"nonexistent.list\" action=\"deny\"/>" \
    "b\.xml:4: list=\"[^\"]*nonexistent\.list\": No such file"
printf '%s\nnot-a-fingerprint\n' "${JA4[curl]}" >"$T/bad/policy/bad.list"
tls_check_bad "a bad line in a list file" plug \
    "$TLS_C<fingerprint list=\"bad.list\" action=\"deny\"/>" \
    "bad\.list:2: \"not-a-fingerprint\" is not a JA4 fingerprint"
tls_check_bad "a fingerprint on a service without TLS from the client" plug \
    "<fingerprint ja4=\"${JA4[curl]}\" action=\"deny\"/>" \
    "b\.xml:4: <fingerprint> needs TLS from the client"
tls_check_bad "an action other than accept or deny" plug \
    "<fingerprint ja4=\"${JA4[curl]}\" action=\"abort\"/>" \
    "b\.xml:4: "

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
