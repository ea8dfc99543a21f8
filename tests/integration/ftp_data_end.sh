#!/usr/bin/env bash
# The end of a passive 1 KB transfer costs proxyd no wait the transfer does
# not need. vsftpd closes a data connection with SO_LINGER and sends its 226
# only once that close returns, i.e. once our FIN acknowledges its own: the
# proxy sends it as soon as the data's end is passed on, not after the
# receiving client closed (a client that waits for the 226 before closing,
# as this one does, waited for the kernel's delayed ACK, 40 ms). And with
# the file delivered the channel ends there: no wakeup for the client's
# close, no shutdown(2) per side, no epoll registration of the receiver's
# socket, no getsockopt(SO_ERROR) for a connect that completed (counted
# with strace -c over N sequential transfers; not under sanitizers, whose
# calls would count).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

N=100
start_vsftpd
head -c 1024 /dev/urandom >"$FTP_ROOT/1k.bin"
chmod 644 "$FTP_ROOT/1k.bin"
SHA=$(sha256_of "$FTP_ROOT/1k.bin")
free_port PORT
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
# as bench/run's FTP rows: the client's mode kept, the server passive
write_ftp_service b "$PORT" '<ftp client-data="keep" server-data="passive"><command name="*" action="accept"/></ftp>'
start_proxyd

# ---- the 226 of a client that keeps its data connection open
cat >"$T/late.py" <<'EOF'
import ftplib, hashlib, socket, sys, time
port, want = int(sys.argv[1]), sys.argv[2]
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
f.login("anonymous", "test@proxyd.invalid")
f.voidcmd("TYPE I")
ts = []
for i in range(20):
    r = f.sendcmd("EPSV")
    d = socket.create_connection(("127.0.0.1", int(r.split("|||")[1].split("|")[0])), timeout=10)
    f.sendcmd("RETR 1k.bin")
    h = hashlib.sha256()
    while True:
        b = d.recv(65536)
        if not b:
            break
        h.update(b)
    t0 = time.monotonic()
    f.voidresp()        # the data connection is still open
    ts.append((time.monotonic() - t0) * 1000)
    d.close()
    if h.hexdigest() != want:
        sys.exit("RETR %d: wrong bytes" % i)
f.quit()
ts.sort()
print("%.2f %.2f" % (ts[len(ts) // 2], ts[-1]))
EOF
read -r med max < <(timeout 60 python3 "$T/late.py" "$PORT" "$SHA") || fail "the RETRs through proxyd failed"
read -r dmed dmax < <(timeout 60 python3 "$T/late.py" "$VSFTPD_PORT" "$SHA") || fail "the RETRs to vsftpd failed"
info "226 after the data's end, data connection left open: through proxyd median $med ms (max $max), direct $dmed ms (max $dmax)"
# the delayed ACK is 40 ms at least: a median under 25 ms is the early FIN
awk -v m="$med" 'BEGIN { exit !(m < 25) }' ||
    fail "the 226 waited $med ms (median) after the data's end: proxyd did not send the server its FIN"

# ---- system calls per transfer
if [[ ${PROXYD_SANITIZED:-0} == 1 ]]; then
    info "ok (system calls are counted on the normal build, not under sanitizers)"
    exit 0
fi
command -v strace >/dev/null || { info "ok (no strace: system calls not counted)"; exit 0; }
cat >"$T/seq.py" <<'EOF'
import ftplib, io, os, sys
port, n, go, data = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], open(sys.argv[4], "rb").read()
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
f.login("anonymous", "test@proxyd.invalid")
f.set_pasv(True)
def both():
    f.storbinary("STOR pub/up.bin", io.BytesIO(data))
    b = io.BytesIO()
    f.retrbinary("RETR 1k.bin", b.write, blocksize=65536)
    if b.getvalue() != data:
        sys.exit("RETR: wrong bytes")
both()
print("ready", flush=True)
sys.stdin.readline()        # strace is attached
for i in range(n):
    both()
f.quit()
EOF
before=$(grep -c 'data-transfer .* end=ok' "$PROXYD_LOG" || true)
coproc SEQ { timeout 120 python3 "$T/seq.py" "$PORT" "$N" x "$FTP_ROOT/1k.bin"; }
track_pid "$SEQ_PID"
read -r -t 30 line <&"${SEQ[0]}" || fail "the FTP client did not log in"
[[ $line == ready ]] || fail "the FTP client said: $line"
strace_start "$PROXYD_PID" "$T/strace.txt" -f -c
sleep 0.3   # the other threads
echo go >&"${SEQ[1]}"
wait "$SEQ_PID" || fail "the $N STOR and RETR through proxyd failed"
# the session's end and every transfer's line (from the log thread, which
# strace slows too): a bounded wait, the counts are asserted below
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
until (($(grep -c 'session-end' "$PROXYD_LOG" || true) >= 3 &&
    $(grep -c 'data-transfer .* end=ok' "$PROXYD_LOG" || true) - before >= 2 * N + 2)); do
    (($(now_ms) < deadline)) || break
    sleep 0.05
done
strace_stop
[[ -s $T/strace.txt ]] || fail "strace wrote nothing: $(cat "$T/strace.txt.err")"
assert_eq "$(sha256_of "$FTP_ROOT/pub/up.bin")" "$SHA" "the uploaded file"
after=$(grep -c 'data-transfer .* end=ok' "$PROXYD_LOG" || true)
assert_eq "$((after - before))" "$((2 * N + 2))" "one data-transfer line with end=ok per transfer (and the warm-up pair)"
assert_grep "$PROXYD_LOG" 'data-transfer upload cmd=STOR file="pub/up.bin" bytes=1024 to-server=1024 to-client=0 .* end=ok'
assert_grep "$PROXYD_LOG" 'data-transfer download cmd=RETR file="1k.bin" bytes=1024 to-server=0 to-client=1024 .* end=ok'

calls() {
    awk -v n="$1" '$NF == n && $1 ~ /^[0-9.]+$/ { print $4; f = 1 } END { if (!f) print 0 }' "$T/strace.txt"
}
X=$((2 * N))
info "system calls per transfer over $N STOR + $N RETR (passive, 1 KB):"
awk -v n="$X" '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "    %-16s %6.2f%s\n", $NF, $4 / n, (NF == 6 ? sprintf("  (%d failed)", $5) : "") }' \
    "$T/strace.txt" | sort -k2 -nr
# a RETR's connect may be seen with the file's first bytes (then asked)
(($(calls getsockopt) <= N)) || fail "$(calls getsockopt) getsockopt(SO_ERROR) for $X transfers: a connect seen writable alone completed"
# each side got its FIN with the close (delivered files; a slow ACK can
# leave one waiting: a tenth of slack)
(($(calls shutdown) <= X / 5)) || fail "$(calls shutdown) shutdown(2) for $X transfers: the channel waited for the receiver's close"
# in, out, EOF: no read for the receiver's close
(($(calls splice) <= 3 * X + X / 10)) || fail "$(calls splice) splice(2) for $X transfers: more than 3 per transfer"
# the receiver's socket is not watched when the channel ends with the data
# (RETR 3: the connect, its move to reading, its removal; STOR 4)
(($(calls epoll_ctl) <= 4 * X)) || fail "$(calls epoll_ctl) epoll_ctl for $X transfers: more than 4 per transfer"
info "ok"
