#!/usr/bin/env bash
# TCP urgent data (MSG_OOB): splice() stops at the urgent mark, so a relay
# that only splices stalls there and spins on a socket epoll keeps reporting
# readable. Every relay path must deliver the normal bytes around the urgent
# byte (which, like any reader without SO_OOBINLINE, they drop), and the
# worker must not burn CPU while the session stays open:
#   plug-splice   a plug service (splice)
#   plug-buffer   a plug service with splice="no"
#   http-connect  a CONNECT tunnel through the http analyser in forward mode
#   ftp-data      the data connection of an FTP upload (STOR, passive) through
#                 the ftp analyser to vsftpd: the stored file must hold
#                 exactly the normal bytes (needs root and vsftpd, else that
#                 case alone is skipped)
# Each case is reported on its own; the test fails at the end if any did.
# The ftp case runs last: a data channel that spins keeps spinning after its
# client gave up, which would disturb the CPU reading of a later case.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_cmds python3
setup

# urgent.py PORT HOLD_S [CONNECT_TARGET]: before- / urgent '!' / -after, hold
# the session open, half-close, print what comes back. With CONNECT_TARGET
# (host:port), first a CONNECT through an http proxy and its 200.
cat >"$T/urgent.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
answer = b""
if len(sys.argv) > 3:
    t = sys.argv[3].encode()
    s.sendall(b"CONNECT " + t + b" HTTP/1.1\r\nHost: " + t + b"\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            sys.exit("closed before the answer to CONNECT: %r" % head)
        head += d
    head, _, answer = head.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200 "):
        sys.exit("CONNECT answered %r" % head.split(b"\r\n")[0])
s.sendall(b"before-")
time.sleep(0.2)
s.send(b"!", socket.MSG_OOB)
time.sleep(0.2)
s.sendall(b"-after")
time.sleep(float(sys.argv[2]))     # hold the session open: a spin shows here
s.shutdown(socket.SHUT_WR)
while True:
    d = s.recv(100)
    if not d:
        break
    answer += d
print(answer.decode("latin1"))
PY

# ftp_urgent.py PORT HOLD_S NAME REPLY_WAIT_S: anonymous login, TYPE I, PASV,
# STOR NAME; on the data connection before- / urgent '!' / -after, hold it
# open, close it; then wait up to REPLY_WAIT_S for the reply to STOR. Prints
# "stor-reply=CODE" (or "stor-reply=none ..."); exits 1 on an error before
# the data went out. Raw sockets: ftplib cannot send MSG_OOB on the data
# connection.
cat >"$T/ftp_urgent.py" <<'PY'
import re, socket, sys, time
port, hold, name, reply_wait = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
ctl = socket.create_connection(("127.0.0.1", port), timeout=10)
buf = b""

def line():
    global buf
    while b"\n" not in buf:
        d = ctl.recv(4096)
        if not d:
            raise EOFError("control connection closed (after %r)" % buf)
        buf += d
    l, _, buf = buf.partition(b"\n")
    return l.rstrip(b"\r").decode("latin1")

def reply():
    first = line()
    code = first[:3]
    if first[3:4] == "-":
        last = line()
        while not (last[:3] == code and last[3:4] == " "):
            last = line()
    return int(code), first

def cmd(c, want):
    ctl.sendall(c.encode() + b"\r\n")
    code, text = reply()
    if code not in want:
        sys.exit("%s: got %r, expected %s" % (c.split()[0], text, want))
    return text

code, text = reply()
if code != 220:
    sys.exit("greeting: %r" % text)
cmd("USER anonymous", (331,))
cmd("PASS urgent@", (230,))
cmd("TYPE I", (200,))
text = cmd("PASV", (227,))
m = re.search(r"(\d+),(\d+),(\d+),(\d+),(\d+),(\d+)", text)
if not m:
    sys.exit("PASV reply without an address: %r" % text)
h = ".".join(m.group(i) for i in range(1, 5))
p = int(m.group(5)) * 256 + int(m.group(6))
if h != "127.0.0.1":
    sys.exit("PASV reply names %s, not 127.0.0.1: %r" % (h, text))
data = socket.create_connection((h, p), timeout=10)
cmd("STOR " + name, (125, 150))
data.sendall(b"before-")
time.sleep(0.2)
data.send(b"!", socket.MSG_OOB)
time.sleep(0.2)
data.sendall(b"-after")
time.sleep(hold)                   # hold the data connection open: a spin shows here
data.shutdown(socket.SHUT_WR)
data.close()
ctl.settimeout(reply_wait)
try:
    code, text = reply()
    print("stor-reply=%d %s" % (code, text))
except socket.timeout:
    print("stor-reply=none (no reply to STOR within %g s of closing the data connection)" % reply_wait)
    sys.exit(0)
except (EOFError, OSError) as e:
    print("stor-reply=none (%s)" % e)
    sys.exit(0)
try:
    ctl.settimeout(3)
    cmd("QUIT", (221,))
except (EOFError, OSError, SystemExit):
    pass
PY

start_py_server SINK_PORT <<'PY'
def handle(c):
    c.settimeout(20)
    data = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    c.sendall(b"got " + data)
PY

FTP_OK=""
if [[ $EUID != 0 ]]; then
    FTP_OK="vsftpd needs root"
elif ! command -v vsftpd >/dev/null 2>&1; then
    FTP_OK="vsftpd not found"
elif ! id ftp >/dev/null 2>&1; then
    FTP_OK="no 'ftp' user for vsftpd's anonymous login"
fi
[[ -z $FTP_OK ]] && start_vsftpd

free_port P_SPLICE
free_port P_BUF
free_port P_FWD
free_port P_FTP
# a short shutdown-grace: a session that spins (the bug this checks for)
# must not hold up the cleanup
write_proxyd_conf 'shutdown-grace="1s"'
write_service usplice "$P_SPLICE" "$SINK_PORT"
write_service ubuf "$P_BUF" "$SINK_PORT" '<plug splice="no"/>'
write_http_service uconnect "$P_FWD" 0 "
<http>
  <request method=\"CONNECT\" ports=\"$SINK_PORT\" action=\"accept\"/>
  <request method=\"*\" action=\"deny\" status=\"405\"/>
</http>" forward
[[ -z $FTP_OK ]] && write_ftp_service uftp "$P_FTP" '<ftp><command name="*" action="accept"/></ftp>'
start_proxyd

FAILED=()
case_fail() { # CASE MESSAGE
    echo "CASE FAILED [$TEST_NAME] $1: $2" >&2
    FAILED+=("$1: $2")
}
case_ok() { info "case $1: ok ($2)"; }
joined() { # SEPARATOR STRING...
    local sep=$1 out="" m
    shift
    for m in "$@"; do out+=${out:+$sep}$m; done
    printf '%s' "$out"
}
rc_text() { # RC TIMEOUT_S: an exit status of timeout(1) in words
    if (($1 == 124)); then echo "timed out after $2 s"; else echo "exit status $1"; fi
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PROXYD_PID/stat" 2>/dev/null || echo 0; }
# a spinning worker burns ~100 ticks a second; about 2 s of session per case
MAX_TICKS=40

# relay_case CASE PORT [CONNECT_TARGET]
relay_case() {
    local name=$1 port=$2 target=${3:-} before after got rc=0 ticks bad=()
    before=$(cpu_ticks)
    got=$(timeout 20 python3 "$T/urgent.py" "$port" 1.5 ${target:+"$target"} 2>"$T/client.$name.err") || rc=$?
    after=$(cpu_ticks)
    ticks=$((after - before))
    if ((rc != 0)); then
        bad+=("client via port $port failed ($(rc_text "$rc" 20)): $(tail -n 1 "$T/client.$name.err")")
    elif [[ $got != "got before--after" ]]; then
        bad+=("bytes around the urgent byte: expected 'got before--after', got '$got'")
    fi
    ((ticks < MAX_TICKS)) || bad+=("proxyd burnt $ticks CPU ticks (limit $MAX_TICKS) while holding the urgent-data session: it spins")
    if ((${#bad[@]})); then
        case_fail "$name" "$(joined '; ' "${bad[@]}")"
    else
        case_ok "$name" "answer '$got', $ticks CPU ticks"
    fi
}

relay_case plug-splice "$P_SPLICE"
relay_case plug-buffer "$P_BUF"
relay_case http-connect "$P_FWD" "127.0.0.1:$SINK_PORT"
wait_grep "$PROXYD_LOG" "session-end service=usplice .*to-server=13 .*end=client-closed" "$ASYNC_WAIT" ||
    case_fail plug-splice "no session-end line with to-server=13 end=client-closed"
wait_grep "$PROXYD_LOG" "session-end service=ubuf .*to-server=13 .*end=client-closed" "$ASYNC_WAIT" ||
    case_fail plug-buffer "no session-end line with to-server=13 end=client-closed"
wait_grep "$PROXYD_LOG" "http-request .* method=CONNECT host=127\\.0\\.0\\.1 .* status=200 " "$ASYNC_WAIT" ||
    case_fail http-connect "no http-request line for the CONNECT with status=200"

# ---- ftp-data (last: see the header)
if [[ -n $FTP_OK ]]; then
    info "case ftp-data: SKIPPED ($FTP_OK)"
else
    name=ftp-data bad=() rc=0
    stored=$FTP_ROOT/pub/urgent.bin
    before=$(cpu_ticks)
    got=$(timeout 20 python3 "$T/ftp_urgent.py" "$P_FTP" 1.5 pub/urgent.bin 5 2>"$T/client.$name.err") || rc=$?
    after=$(cpu_ticks)
    ticks=$((after - before))
    info "ftp client: ${got:-(no output)}"
    if ((rc != 0)); then
        bad+=("ftp client failed ($(rc_text "$rc" 20)): $(tail -n 1 "$T/client.$name.err")")
    else
        [[ $got == "stor-reply=226 "* ]] || bad+=("no 226 for the STOR: $got")
        if [[ -f $stored ]]; then
            content=$(cat "$stored")
            [[ $content == "before--after" ]] ||
                bad+=("the server stored '$content' ($(stat -c %s "$stored") bytes), expected 'before--after' (13 bytes)")
        else
            bad+=("the server stored no file pub/urgent.bin")
        fi
        if ! wait_grep "$PROXYD_LOG" 'data-transfer upload cmd=STOR file="pub/urgent\.bin" bytes=13 .* end=ok' "$ASYNC_WAIT"; then
            line=$(grep -E 'data-transfer upload cmd=STOR file="pub/urgent\.bin"' "$PROXYD_LOG" | tail -n 1 || true)
            line=${line#* info }
            bad+=("no data-transfer line with bytes=13 end=ok, got: ${line:-none}")
        fi
    fi
    ((ticks < MAX_TICKS)) || bad+=("proxyd burnt $ticks CPU ticks (limit $MAX_TICKS) during the upload with urgent data: it spins")
    if ((${#bad[@]})); then
        case_fail "$name" "$(joined '; ' "${bad[@]}")"
    else
        case_ok "$name" "stored '$content', $ticks CPU ticks"
    fi
fi

proc_alive "$PROXYD_PID" || fail "proxyd died"
((${#FAILED[@]} == 0)) || fail "${#FAILED[@]} case(s) failed: $(joined ' | ' "${FAILED[@]}")"
info "ok"
