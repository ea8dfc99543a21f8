#!/usr/bin/env bash
# Active mode through the default <ftp/> (server-data="keep": proxyd sends
# the server PORT) towards two servers that answer PORT differently:
# vsftpd says 200 at once, pyftpdlib only once its data connection to
# proxyd is up, which can be after it answered the transfer command with
# 150. proxyd must hold the transfer command until PORT's reply so that
# each reply goes with its command. 40 sessions x 3 transfers (STOR, RETR
# of it, RETR of a shared file), 8 at a time, checked by sha256 against
# each server, and the proxy's own count of transfers.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

SESSIONS=40
start_vsftpd
mkdir -p "$FTP_ROOT/pub/py"
head -c 300000 /dev/urandom >"$FTP_ROOT/pub/shared.bin"
chmod 644 "$FTP_ROOT/pub/shared.bin"
SHA=$(sha256_of "$FTP_ROOT/pub/shared.bin")

# pyftpdlib, anonymous with write permission, on the same root. Its
# handler forgets its PORT connector once connected: pyftpdlib 1.5.7 keeps
# it and closes it again at the next PORT, unregistering from its poller
# whatever socket has that fd number by then (another session's connector,
# which then waits for ever): 7 of 40 sessions hang so even without proxyd.
free_port PYW_PORT
/usr/bin/python3 - "$FTP_ROOT" "$PYW_PORT" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
class Handler(FTPHandler):
    def _on_dtp_connection(self):
        self._dtp_connector = None
        return super()._on_dtp_connection()
a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elradfmw")
Handler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever(timeout=1)
PY
PYW_PID=$!
track_pid "$PYW_PID"
wait_listen "$PYW_PORT" 20 "$PYW_PID" || {
    cat "$T/pyftpd.log" >&2
    fail "pyftpdlib did not start on 127.0.0.1:$PYW_PORT"
}

write_proxyd_conf
free_port PORT_V
free_port PORT_P
write_ftp_service ftpv "$PORT_V" '<ftp/>'
write_ftp_service ftpp "$PORT_P" '<ftp/>' 127.0.0.1 "$PYW_PORT"
start_proxyd

# run NAME PORT FOLDER
run() {
    local out=$T/sessions.$1
    info "$1: $SESSIONS active sessions x 3 transfers"
    timeout 200 /usr/bin/python3 "$LIB_DIR/ftp_sessions.py" "$2" "$SESSIONS" 8 \
        "$3" pub/shared.bin "$SHA" active >"$out" 2>&1 || true
    info "$1: $(tail -n 1 "$out")"
    grep -q "^sessions-ok=$SESSIONS transfers-ok=$((SESSIONS * 3))\$" "$out" ||
        fail "$1: not every active session and transfer went through: $(head -n 5 "$out")"
}
run vsftpd "$PORT_V" pub
run pyftpdlib "$PORT_P" pub/py

deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
until (($(grep -cE 'session-end service=ftp[vp] ' "$PROXYD_LOG" || true) >= 2 * SESSIONS)); do
    (($(now_ms) < deadline)) || fail "not all $((2 * SESSIONS)) sessions logged their end"
    sleep 0.05
done
# the server was spoken to in active mode, as the default policy keeps it
assert_log 'ftp-data client=active server=active sent="PORT 127,0,0,1,'
assert_no_grep "$PROXYD_LOG" 'data-transfer .* end=[^o]' "a data transfer failed"
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="data_failed"' 0
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="transfers"' $((2 * SESSIONS * 3))
info "PASS"
