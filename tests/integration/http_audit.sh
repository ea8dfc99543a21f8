#!/usr/bin/env bash
# Audit records on http (<audit target="file:..."/> in the daemon file,
# <audit min-size="1m"/> on a service): one JSON line per body of at
# least min-size, none under it, each parsed with python3's json:
#  - downloads from nginx (Content-Length) and chunked ones from a python
#    origin, uploads (Content-Length and chunked): every field there and
#    right (service, addresses, zones, file = the URL path without its
#    query, direction, announced and actual size, complete, verdict),
#    sha256 equal to sha256sum of the file;
#  - an upload <content> denies: verdict deny, the type and action, the
#    rule's FILE:LINE, complete false;
#  - small bodies (10 KB, the origin's 3-byte answers): no record;
#  - proxyd_audit_records_total{service,verdict} counts them;
#  - through TLS originated to an nginx TLS origin: the server's
#    certificate subject (RFC 2253);
#  - an HTTP/2 client's download and upload (its streams transactions of
#    the connection's session): recorded the same;
#  - SIGHUP reopens the file (logrotate's move).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds curl nginx python3 sha256sum openssl
setup

# (a fixed start: random bytes are now and then an MZ header, zlib or a
# TGA to libmagic, and the records below assert application/octet-stream)
{ printf '\xde\xad\xbe\xef\0\0\0\0'; head -c $((2 * 1024 * 1024 - 8)) /dev/urandom; } >"$T/www/big.bin"
make_file edge.bin 1M		# exactly min-size: recorded
head -c 1048575 /dev/urandom >"$T/www/under.bin"	# one byte under: not
make_file small.bin 10K
python3 - "$T/www" <<'PY'
import os, struct, sys
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64,
                   56, 1, 64, 0, 0))
open(os.path.join(sys.argv[1], "prog.bin"), "wb").write(elf + os.urandom(3 << 19))
PY

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin "/O=proxyd test/CN=origin.test" "DNS:origin.test,IP:127.0.0.1" serverAuth
free_port NGX_TLS
NGINX_SERVERS="
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"
start_scan_origin

AUDIT=$T/audit.json
write_proxyd_conf '' "<audit target=\"file:$AUDIT\"/>
  <zones><zone name=\"loop\" addresses=\"127.0.0.0/8\"/></zones>"
svc() { # NAME ORIGIN_PORT XML
    local p
    free_port p
    write_http_service "$1" "$p" "$2" "$3"
    eval "PORT_$1=$p"
}
svc web "$NGINX_PORT" '<audit min-size="1m"/>'
svc up "$ORIGIN" '<audit min-size="1m"/>
  <content type="application/x-executable" action="deny"/>'
svc quiet "$NGINX_PORT" ''
svc h2 "$ORIGIN" '<http h2c="yes"/><audit min-size="1m"/>'
svc tls "$NGX_TLS" "<audit min-size=\"1m\"/>
  <tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"origin.test\"/>"
start_proxyd
RULE_UP="$T/conf/../policy/up.xml:$(grep -n '<content' "$T/policy/up.xml" | cut -d: -f1)"

get() { # SERVICE PATH OUT: "curl-rc http-code bytes"
    local port="PORT_$1" rc=0 r
    r=$(curl -sS --max-time 20 -o "$3" -w '%{http_code} %{size_download}' \
        "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
post() { # SERVICE PATH FILE [chunked]: "curl-rc http-code"
    local port="PORT_$1" rc=0 r te=()
    [[ ${4:-} == chunked ]] && te=(-H 'Transfer-Encoding: chunked')
    r=$(curl -sS --max-time 20 -o "$T/post.out" -w '%{http_code}' "${te[@]}" \
        --data-binary @"$3" "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
# check N JSON: record N (1-based) of $AUDIT has the fields of JSON (a
# python dict literal; "SHA:FILE" compares sha256 with the file's)
check() {
    python3 - "$AUDIT" "$1" "$2" <<'PY' || fail "audit record $1: see above"
import hashlib, json, sys
lines = open(sys.argv[1]).read().splitlines()
rec = json.loads(lines[int(sys.argv[2]) - 1])
want = eval(sys.argv[3])
keys = ["ts", "service", "analyser", "session", "client", "server",
        "client_zone", "server_zone", "user", "rule", "file", "direction",
        "announced_size", "size", "complete", "sha256",
        "tls_server_subject", "tls_client_subject", "scan_verdict",
        "threat", "content_type", "content_action", "verdict"]
bad = [k for k in keys if k not in rec]
for k, v in want.items():
    if isinstance(v, str) and v.startswith("SHA:"):
        v = hashlib.sha256(open(v[4:], "rb").read()).hexdigest()
    if rec.get(k) != v:
        bad.append("%s=%r (want %r)" % (k, rec.get(k), v))
if bad:
    print("record %s: %s\n%s" % (sys.argv[2], bad, lines[int(sys.argv[2]) - 1]))
    sys.exit(1)
PY
}
N=0
CLIENT_RE='^127\.0\.0\.1:[0-9]+$'

# ---- downloads: 2 MB and exactly 1 MB recorded, one byte under not
r=$(get web /big.bin "$T/o")
assert_eq "$r" "0 200 2097152" "big.bin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'web', 'analyser': 'http', 'server': '127.0.0.1:$NGINX_PORT',
  'client_zone': 'loop', 'server_zone': 'loop', 'user': None, 'rule': None,
  'file': '/big.bin', 'direction': 'download', 'announced_size': 2097152,
  'size': 2097152, 'complete': True, 'sha256': 'SHA:$T/www/big.bin',
  'tls_server_subject': None, 'scan_verdict': None, 'content_type': None,
  'verdict': 'accept'}"
python3 -c "
import json, re, sys
r = json.loads(open('$AUDIT').readline())
assert re.match(r'$CLIENT_RE', r['client']), r['client']
assert re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$', r['ts']), r['ts']
assert isinstance(r['session'], int) and r['session'] > 0
" || fail "client, ts or session of the first record"
r=$(get web "/edge.bin?x=1" "$T/o")
assert_eq "$r" "0 200 1048576" "edge.bin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'file': '/edge.bin', 'size': 1048576, 'sha256': 'SHA:$T/www/edge.bin'}"
for f in under.bin small.bin; do
    r=$(get web "/$f" "$T/o")
    assert_eq "$r" "0 200 $(stat -c %s "$T/www/$f")" "$f"
done
r=$(get quiet /big.bin "$T/o")
assert_eq "$r" "0 200 2097152" "big.bin through a service without <audit>"
# Sentinel: one more recorded body; the ones before it left none.
r=$(get web /big.bin "$T/o")
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'file': '/big.bin', 'service': 'web'}"

# ---- chunked download: no announced size
r=$(get up /chunked/big.bin "$T/o")
assert_eq "$r" "0 200 2097152" "chunked big.bin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'up', 'server': '127.0.0.1:$ORIGIN', 'file': '/chunked/big.bin',
  'direction': 'download', 'announced_size': None, 'size': 2097152,
  'complete': True, 'sha256': 'SHA:$T/www/big.bin', 'content_type': 'application/octet-stream',
  'content_action': 'accept', 'verdict': 'accept'}"

# ---- uploads (the origin's 3-byte answers leave no record)
for mode in "" chunked; do
    r=$(post up "/up-$mode" "$T/www/big.bin" $mode)
    assert_eq "$r" "0 200" "upload $mode"
    N=$((N + 1)); wait_records "$AUDIT" $N
    if [[ $mode == chunked ]]; then ann=None; else ann=2097152; fi
    check $N "{'file': '/up-$mode', 'direction': 'upload', 'announced_size': $ann,
      'size': 2097152, 'complete': True, 'sha256': 'SHA:$T/www/big.bin', 'verdict': 'accept'}"
done

# ---- a denied upload is recorded as such
r=$(post up /up-prog "$T/www/prog.bin")
assert_eq "$r" "0 403" "ELF upload"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'file': '/up-prog', 'direction': 'upload', 'announced_size': $(stat -c %s "$T/www/prog.bin"),
  'complete': False, 'content_type': 'application/x-executable',
  'content_action': 'deny', 'rule': '$RULE_UP', 'verdict': 'deny'}"

# ---- TLS to the server: its certificate's subject
r=$(get tls /big.bin "$T/o")
assert_eq "$r" "0 200 2097152" "big.bin over TLS to the origin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'tls', 'tls_server_subject': 'CN=origin.test,O=proxyd test',
  'tls_client_subject': None, 'sha256': 'SHA:$T/www/big.bin', 'complete': True}"
# An upload (nginx refuses a POST to a file, 405): the subject too,
# though the request came before the server's handshake.
r=$(post tls /edge.bin "$T/www/edge.bin")
assert_eq "$r" "0 405" "upload over TLS to the origin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'tls', 'direction': 'upload', 'announced_size': 1048576,
  'tls_server_subject': 'CN=origin.test,O=proxyd test'}"

# ---- an HTTP/2 client: its streams are transactions of the connection's
# session, recorded as an HTTP/1.1 client's bodies are (both ways)
r=$(curl -sS --max-time 20 --http2-prior-knowledge -o "$T/o" -w '%{http_code} %{size_download}' \
    "http://127.0.0.1:$PORT_h2/big.bin" 2>>"$T/curl.err") || true
assert_eq "$r" "200 2097152" "h2: big.bin"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'h2', 'server': '127.0.0.1:$ORIGIN', 'file': '/big.bin',
  'direction': 'download', 'announced_size': 2097152, 'size': 2097152,
  'complete': True, 'sha256': 'SHA:$T/www/big.bin', 'verdict': 'accept'}"
r=$(curl -sS --max-time 20 --http2-prior-knowledge -o "$T/post.out" -w '%{http_code}' \
    --data-binary @"$T/www/big.bin" "http://127.0.0.1:$PORT_h2/h2-up" 2>>"$T/curl.err") || true
assert_eq "$r" "200" "h2: upload"
N=$((N + 1)); wait_records "$AUDIT" $N
check $N "{'service': 'h2', 'file': '/h2-up', 'direction': 'upload',
  'announced_size': 2097152, 'size': 2097152, 'complete': True,
  'sha256': 'SHA:$T/www/big.bin', 'verdict': 'accept'}"
assert_log "http-request .* path=/h2-up status=200 .* proto=h2 stream=1$"

# ---- counters
assert_metric eq proxyd_audit_records_total 'service="web",verdict="accept"' 3
assert_metric eq proxyd_audit_records_total 'service="up",verdict="accept"' 3
assert_metric eq proxyd_audit_records_total 'service="up",verdict="deny"' 1
assert_metric eq proxyd_audit_records_total 'service="h2",verdict="accept"' 2
assert_metric eq proxyd_audit_dropped_total '' 0

# ---- SIGHUP reopens the file moved away
mv "$AUDIT" "$AUDIT.1"
kill -HUP "$PROXYD_PID"
assert_log "SIGHUP: audit file .*audit\.json reopened"
assert_log "reload done"
r=$(get web /big.bin "$T/o")
assert_eq "$r" "0 200 2097152" "big.bin after SIGHUP"
wait_records "$AUDIT" 1
check 1 "{'file': '/big.bin', 'sha256': 'SHA:$T/www/big.bin'}"
wait_records "$AUDIT.1" $N
info "ok"
