#!/usr/bin/env bash
# Prometheus label values from the wire that are not UTF-8: an FTP user
# whose name is "ete" with accents in latin-1 (the bytes e9 74 e9, not
# UTF-8) logs in (pyftpdlib decodes commands as UTF-8, each bad byte
# read as U+FFFD: its user is that) and downloads a file; a <user name="*"> rule with a quota makes that name a partner of
# the quota table, a label of proxyd_quota_used_transfers. /metrics must
# carry it as the text \xE9t\xE9 (partner="\\xE9t\\xE9") and promtool check
# metrics must accept the page: a raw 0xe9 fails it ("invalid label
# value").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_cmds curl promtool
/usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null ||
    skip "python3-pyftpdlib missing (scripts/deps installs it)"
setup

mkdir -p "$T/ftp"
head -c 5000 /dev/urandom >"$T/ftp/a.bin"
free_port PYFTPD_PORT
/usr/bin/python3 - "$T/ftp" "$PYFTPD_PORT" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
a = DummyAuthorizer()
a.add_user("\ufffdt\ufffd", "pw", sys.argv[1], perm="elr")
FTPHandler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), FTPHandler).serve_forever(timeout=1)
PY
PY_PID=$!
track_pid "$PY_PID"
wait_listen "$PYFTPD_PORT" 20 "$PY_PID" || fail "pyftpdlib did not start: $(cat "$T/pyftpd.log")"

write_proxyd_conf
free_port PORT
write_ftp_service u "$PORT" '<ftp><user name="*" quota-transfers="10" action="accept"/></ftp>' \
    127.0.0.1 "$PYFTPD_PORT"
start_proxyd

got=$(/usr/bin/python3 - "$PORT" <<'PY' 2>"$T/client.err"
import ftplib, sys
f = ftplib.FTP(encoding="latin-1", timeout=10)
f.connect("127.0.0.1", int(sys.argv[1]))
f.login("\xe9t\xe9", "pw")
data = bytearray()
f.retrbinary("RETR a.bin", data.extend)
f.quit()
print(len(data))
PY
) || fail "ftp client: $(cat "$T/client.err")"
assert_eq "$got" 5000 "bytes the user e9 74 e9 downloaded through proxyd"

assert_metric eq proxyd_quota_used_transfers 'service="u"' 1
metrics_fetch >"$T/metrics.txt"
grep -F 'proxyd_quota_used_transfers{service="u",partner="\\xE9t\\xE9"} 1' "$T/metrics.txt" >/dev/null ||
    fail "no partner=\"\\\\xE9t\\\\xE9\" sample: $(grep -a '^proxyd_quota_used_transfers' "$T/metrics.txt" | od -c | head -n 5)"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$T/promtool.out")"
info "ok"
