#!/usr/bin/env bash
# A scanned ftp download (vsftpd behind proxyd, icap_fake.py "slower":
# 204 three seconds after the body's end) whose client closes its data
# connection once the scanner has the whole file, while the verdict is
# still awaited:
#   1. then waits for the 226: the verdict line is the whole file's
#      (size=1000, no complete=no), the audit record complete:false (the
#      end held for the verdict never reached the client);
#   2. sends QUIT at once: vsftpd answers 226 and 221 and closes. The
#      session used to end right there, the held 226 and the 221 lost,
#      no verdict, no data-transfer line, the record without its verdict.
#      Now the server's end waits with the replies for the verdict: it is
#      logged, the client gets 226 and 221, the session ends.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
need_cmds python3
setup
start_vsftpd
for f in small1 small2; do
    head -c 1000 /dev/urandom >"$FTP_ROOT/pub/$f.bin"
    chmod 644 "$FTP_ROOT/pub/$f.bin"
done

FAKE_LOG=$T/fake.log
: >"$FAKE_LOG"
free_port FAKE_PORT
python3 "$LIB_DIR/icap_fake.py" "$FAKE_PORT" "$FAKE_LOG" 2>>"$T/fake.err" &
track_pid $!
wait_listen "$FAKE_PORT" 5 || fail "icap_fake.py did not start"

write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"fake\" url=\"icap://127.0.0.1:$FAKE_PORT/slower\" timeout=\"20s\"/>
  </scanners>
  <audit target=\"file:$T/audit.json\"/>"
free_port PORT
write_ftp_service scan "$PORT" '<ftp><command name="*" action="accept"/></ftp>
  <scan scanner="fake" direction="download"/> <audit/>'
start_proxyd

# RETR; once the scanner has the file's end (the n-th body it logged),
# close the data connection; then QUIT at once, or not.
client() {
    python3 - "$PORT" "$FAKE_LOG" "$1" "$2" <<'PY'
import ftplib, sys, time
port, flog, name, quit = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "quit"
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=15)
f.login("anonymous", "x@y")
f.voidcmd("TYPE I")
before = open(flog).read().count("slower RESPMOD preview=- bytes=1000")
conn = f.transfercmd("RETR pub/%s" % name)
deadline = time.time() + 10
seen = False
while time.time() < deadline and not seen:
    seen = open(flog).read().count("slower RESPMOD preview=- bytes=1000") > before
    time.sleep(0.02)
conn.close()
if quit:
    f.sock.sendall(b"QUIT\r\n")
replies = []
for _ in range(2 if quit else 1):
    try:
        replies.append(f.getline())
    except (EOFError, OSError):
        break
print("seen=%s reply=%s" % ("yes" if seen else "no", "|".join(r[:3] for r in replies)))
PY
}

audit_of() {
    local deadline=$(($(now_ms) + 5000))
    until grep -q "$1" "$T/audit.json" 2>/dev/null; do
        (($(now_ms) < deadline)) || fail "no audit record for $1"
        sleep 0.05
    done
    python3 - "$T/audit.json" "$1" <<'PY' || fail "audit record of $1"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in r if x.get("file", "").endswith(sys.argv[2])]
got = {k: r[-1].get(k) for k in ("complete", "scan_verdict", "size")}
print("[ftp_scan_gone] audit %s %r" % (sys.argv[2], got))
sys.exit(0 if got == {"complete": False, "scan_verdict": "clean", "size": 1000} else 1)
PY
}

# 1: the client waits for the 226.
res=$(client small1.bin wait)
info "client (wait): $res"
[[ $res == "seen=yes reply=226" ]] || fail "download 1: $res"
assert_log 'ftp-scan verdict=clean scanner=fake file="pub/small1\.bin" user=anonymous dir=download size=1000 '
audit_of small1.bin

# 2: QUIT at once; the server closes behind its 226 and 221.
res=$(client small2.bin quit)
info "client (quit): $res"
[[ $res == "seen=yes reply=226|221" ]] || fail "download 2: the client's replies: $res"
assert_log 'ftp-scan verdict=clean scanner=fake file="pub/small2\.bin" user=anonymous dir=download size=1000 '
assert_log 'data-transfer download cmd=RETR file="pub/small2\.bin" bytes=1000 '
assert_log '#2 ftp-reply code=221 cmd=QUIT'
assert_log '#2 session-end '
assert_no_grep "$PROXYD_LOG" 'ftp-scan verdict=clean .* complete=no' \
    "a file the scanner had whole logged complete=no"
audit_of small2.bin
info "ok"
