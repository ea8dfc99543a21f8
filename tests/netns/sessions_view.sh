#!/usr/bin/env bash
# Admin GET /sessions during a live transparent session: the client fetches a
# 5 MB file at 100 KB/s through the fw; while it runs,
# proxyd's /sessions (asked inside F) lists it with dst=198.19.2.2:80, the
# client's address, the fw-side local address, growing byte counts and its
# conntrack flows (client side ESTABLISHED); `conntrack -L` in F shows the same
# two connections.  Once the client goes away the session leaves the list and
# gets its session-end line; what the client got is the start of the file.
#
# The slow client is a small python reader (100 KB/s, 64 KB receive buffer),
# not curl --limit-rate: curl 7.88's limiter does not hold here (5 MB through
# proxyd arrived in 10 ms; through kernel forwarding one run took 49 s, the
# next 15 s), and a transfer that ends early leaves nothing to look at.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file big 5M
start_origin 80
deploy tproxy --port 80 --proxy-port 50080
write_conf_ns
write_inline_service tp transparent 0.0.0.0 50080
start_proxyd_ns

# session_of DST: from GET /sessions, the first session whose dst is DST, as
# tab-separated fields: id service client dst server local to_server to_client
# client_flow_state client_flow_tuple server_flow_state server_flow_tuple nflows age
# (missing flows print "-"); nothing if there is no such session
session_of() {
    admin_get /sessions >"$T/sessions.json" 2>>"$T/curl.err" || return 0
    python3 - "$1" "$T/sessions.json" <<'EOF'
import json, sys
dst, path = sys.argv[1], sys.argv[2]
try:
    doc = json.load(open(path))
except ValueError as e:
    print("BADJSON", e, file=sys.stderr)
    sys.exit(0)
for s in doc.get("sessions", []):
    if s.get("dst") != dst:
        continue
    flows = {f.get("side"): f for f in s.get("flows") or []}
    c, v = flows.get("client", {}), flows.get("server", {})
    print("\t".join(str(x) for x in (
        s.get("id"), s.get("service"), s.get("client"), s.get("dst"), s.get("server"), s.get("local"),
        s.get("to_server"), s.get("to_client"),
        c.get("state", "-"), c.get("tuple", "-"), v.get("state", "-"), v.get("tuple", "-"),
        len(s.get("flows") or []), s.get("age"))))
    break
EOF
}

# slowget.py HOST PORT PATH OUT RATE: HTTP/1.1 GET, body (after the headers)
# to OUT at RATE bytes/s; exits 0 at EOF or on SIGTERM (after flushing)
cat >"$T/slowget.py" <<'EOF'
import signal, socket, sys, time
host, port, path, out, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
stop = False
def term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, term)
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.settimeout(30)
s.connect((host, port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
chunk, buf, body = rate // 10, b"", False
with open(out, "wb") as f:
    while not stop:
        t = time.monotonic()
        data = s.recv(chunk)
        if not data:
            break
        if body:
            f.write(data)
        else:
            buf += data
            if b"\r\n\r\n" in buf:
                body = True
                f.write(buf.split(b"\r\n\r\n", 1)[1])
        f.flush()
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t)))
s.close()
EOF

URL="http://$TOPO_S4/big"
ip netns exec "$C" "$PYTHON" "$T/slowget.py" "$TOPO_S4" 80 /big "$T/out.big" 102400 2>>"$T/curl.err" &
CURL_PID=$!
track_pid "$CURL_PID"
info "client: GET $URL at 100 KB/s in the background (pid $CURL_PID)"

# wait (10 s) for the session with an ESTABLISHED flow and the first bytes
# of the response relayed (listed at once, it may not have them yet)
row=""
deadline=$(($(date +%s) + 10))
while (($(date +%s) < deadline)); do
    proc_alive "$CURL_PID" || fail "the slow transfer ended early: $(tail -n 2 "$T/curl.err")"
    row=$(session_of 198.19.2.2:80)
    IFS=$'\t' read -r _ _ _ _ _ _ _ tc _ <<<"$row"
    [[ -n $row && $row == *ESTABLISHED* && ${tc:-0} =~ ^[1-9] ]] && break
    sleep 0.1
done
info "GET /sessions: $(cat "$T/sessions.json")"
[[ -n $row ]] || fail "GET /sessions (in F) lists no session with dst 198.19.2.2:80 after 10 s"
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("conntrack") is True else 1)' "$T/sessions.json" ||
    fail "GET /sessions does not say \"conntrack\":true (conntrack is on in F)"
IFS=$'\t' read -r sid svc client dst server local ts tc cstate ctuple sstate stuple nflows age <<<"$row"
info "session id=$sid service=$svc client=$client dst=$dst server=$server local=$local to_server=$ts to_client=$tc flows=$nflows"
info "  client flow: $cstate $ctuple; server flow: $sstate $stuple"
assert_eq "$svc" tp "service of the session"
[[ $client =~ ^198\.18\.1\.2:([0-9]+)$ ]] || fail "session client '$client' is not 198.18.1.2:PORT"
cport=${BASH_REMATCH[1]}
assert_eq "$server" "198.19.2.2:80" "session server"
[[ $local =~ ^198\.19\.2\.1:([0-9]+)$ ]] || fail "session local '$local' is not the fw's 198.19.2.1:PORT (spoof-source off)"
lport=${BASH_REMATCH[1]}
assert_ge "$ts" 1 "session to_server (the request)"
assert_ge "$tc" 1 "session to_client"
assert_ge "$nflows" 1 "flows listed for the session"
assert_eq "$cstate" ESTABLISHED "state of the client-side flow"
assert_eq "$ctuple" "tcp 198.18.1.2:$cport -> 198.19.2.2:80" "tuple of the client-side flow"
# the server side may already be closing (nginx has sent everything and
# closed; proxyd holds the rest): its state is whatever conntrack says
if [[ $sstate != - ]]; then
    [[ $sstate =~ ^[A-Z_]+$ ]] || fail "state of the server-side flow: '$sstate'"
    assert_eq "$stuple" "tcp 198.19.2.1:$lport -> 198.19.2.2:80" "tuple of the server-side flow"
fi

# conntrack in F knows both connections, with the same ports
nsF conntrack -L -p tcp 2>/dev/null >"$T/conntrack.txt" || true
info "conntrack -L (fw): $(cat "$T/conntrack.txt")"
grep -Eq "ESTABLISHED src=198\.18\.1\.2 dst=198\.19\.2\.2 sport=$cport dport=80 " "$T/conntrack.txt" ||
    fail "conntrack -L in F has no ESTABLISHED client->198.19.2.2:80 entry with sport $cport"
grep -Eq " src=198\.19\.2\.1 dst=198\.19\.2\.2 sport=$lport dport=80 " "$T/conntrack.txt" ||
    fail "conntrack -L in F has no 198.19.2.1:$lport->198.19.2.2:80 entry (proxyd's upstream)"

# the same session is still listed while the client keeps reading; its age
# grows.  (to_client need not grow: proxyd may already have handed the whole
# file to the kernel, whose socket buffers hold megabytes.)
sleep 1.5
proc_alive "$CURL_PID" || fail "the slow transfer ended early"
row=$(session_of 198.19.2.2:80)
[[ -n $row ]] || fail "the session left /sessions while the transfer was running: $(cat "$T/sessions.json")"
IFS=$'\t' read -r sid2 _ _ _ _ _ _ tc2 _ _ _ _ _ age2 <<<"$row"
info "after 1.5 s: to_client $tc -> $tc2, age $age -> $age2"
assert_eq "$sid2" "$sid" "session id between two GET /sessions"
assert_ge "$tc2" "$tc" "to_client (never decreases)"
assert_lt "$tc2" $((5 * 1024 * 1024 + 4096)) "to_client (the file plus headers at most)"
python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b >= a + 1.0 else 1)' "$age" "$age2" ||
    fail "session age did not grow by >= 1 s in 1.5 s: $age -> $age2"

# the client goes away: the session ends and leaves the list
kill -TERM "$CURL_PID"
wait_exit "$CURL_PID" 5 || fail "curl did not exit"
assert_log "session-end service=tp .*client=198\.18\.1\.2:$cport dst=198\.19\.2\.2:80 .* end=client-(closed|error)" 10
got=$(stat -c %s "$T/out.big")
info "client received $got bytes of the body before it went away"
assert_ge "$got" 1 "body bytes the slow client received"
cmp -s -n "$got" "$T/out.big" "$T/www/big" || fail "the $got bytes the client received are not the start of the file"
gone=0
for ((i = 0; i < 50; i++)); do
    [[ -z $(session_of 198.19.2.2:80) ]] && { gone=1; break; }
    sleep 0.1
done
((gone)) || fail "session still listed by /sessions 5 s after its end: $(cat "$T/sessions.json")"
proc_alive "$PROXYD_PID" || fail "proxyd died"

# spoof-source: the upstream flow carries the client's address and, by the
# deploy script's rules, lives in conntrack zone 1 (keyed on the mark);
# with ct-zone="1" /sessions finds it there
info "phase 2: spoof-source with mark and ct-zone"
stop_proxyd_ns
reset_services_ns
write_inline_service tp transparent 0.0.0.0 50080 'spoof-source="yes" mark="0x40000000" ct-zone="1"'
start_proxyd_ns
ip netns exec "$C" "$PYTHON" "$T/slowget.py" "$TOPO_S4" 80 /big "$T/out.big2" 102400 2>>"$T/curl.err" &
CURL_PID=$!
track_pid "$CURL_PID"
row=""
deadline=$(($(date +%s) + 10))
while (($(date +%s) < deadline)); do
    row=$(session_of 198.19.2.2:80)
    [[ -n $row && $(cut -f11 <<<"$row") != - ]] && break
    sleep 0.1
done
info "GET /sessions: $(cat "$T/sessions.json")"
[[ -n $row ]] || fail "no spoofed session listed by /sessions"
IFS=$'\t' read -r sid svc client dst server local ts tc cstate ctuple sstate stuple nflows age <<<"$row"
[[ $client =~ ^198\.18\.1\.2:([0-9]+)$ ]] || fail "session client '$client' is not 198.18.1.2:PORT"
[[ $local =~ ^198\.18\.1\.2:([0-9]+)$ ]] || fail "session local '$local' is not the client's address (spoof-source on)"
lport=${BASH_REMATCH[1]}
[[ $sstate != - ]] || fail "the spoofed upstream flow (conntrack zone 1) is not in /sessions"
assert_eq "$stuple" "tcp 198.18.1.2:$lport -> 198.19.2.2:80" "tuple of the spoofed server-side flow"
nsF conntrack -L -p tcp -w 1 2>/dev/null | grep -Eq "src=198\.18\.1\.2 dst=198\.19\.2\.2 sport=$lport dport=80 .*zone=1" ||
    fail "conntrack -L -w 1 in F has no zone-1 entry for the upstream 198.18.1.2:$lport"
kill -TERM "$CURL_PID"
wait_exit "$CURL_PID" 5 || fail "slow client did not exit"
info "PASS"
