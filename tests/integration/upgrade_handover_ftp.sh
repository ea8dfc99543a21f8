#!/usr/bin/env bash
# proxyd -s upgrade with FTP control sessions between commands: 6 logged-in
# sessions (python ftplib, passive and active), each after a transfer and a
# CWD, are idle while the upgrade runs; the new process takes them over
# with their state (the login, the working directory the path rules use)
# and each then downloads again, whole (sha256), in passive and active
# mode; a RETR the rule for /pub/secret/* denies is denied after the
# upgrade (the working directory the new process knows is /pub: a lost
# one would let it through). Both sides log "handover sessions=6
# drained=0"; one session-end line per session, the new process's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
P=$FTP_ROOT/pub
mkdir -p "$P/secret"
head -c 300K /dev/urandom >"$P/f.bin"
head -c 1K /dev/urandom >"$P/secret/s.bin"
chmod 755 "$P/secret"
chmod 644 "$P/f.bin" "$P/secret/s.bin"
free_port PORT
write_proxyd_conf 'shutdown-grace="20s"' "<pidfile path=\"$T/run/proxyd.pid\"/>"
mkdir -p "$T/run"
write_ftp_service ftp "$PORT" '<ftp data-ports="43000-43999">
    <command name="*" action="accept"/>
    <path pattern="/pub/secret/*" action="deny"/>
  </ftp>'
start_proxyd
OLD=$PROXYD_PID
wait_grep "$PROXYD_LOG" 'proxyd .* started' 5 || fail "proxyd did not say it started"

cat >"$T/held.py" <<'PYEOF'
import ftplib, hashlib, os, sys, time
port, n, go, want = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def retr(f, name):
    h = hashlib.sha256()
    f.retrbinary("RETR " + name, h.update)
    return h.hexdigest()

sessions = []
for i in range(n):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login("anonymous", "t@")
    f.cwd("pub")
    f.set_pasv(i % 2 == 0)
    assert retr(f, "f.bin") == want, "before: sha256"
    sessions.append(f)
print("ready", flush=True)
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
ok = 0
for i, f in enumerate(sessions):
    try:
        assert f.pwd() == "/pub", "pwd"
        assert retr(f, "f.bin") == want, "after: sha256"
        f.set_pasv(i % 2 == 1)
        assert retr(f, "f.bin") == want, "after, other mode: sha256"
        try:
            retr(f, "secret/s.bin")
            print("session %d: secret/s.bin was not denied" % i, flush=True)
            continue
        except ftplib.error_perm as e:
            assert str(e).startswith("550"), str(e)
        f.quit()
        ok += 1
    except Exception as e:
        print("session %d: %r" % (i, e), flush=True)
print("ok=%d" % ok, flush=True)
PYEOF
python3 "$T/held.py" "$PORT" 6 "$T/go" "$(sha256_of "$P/f.bin")" >"$T/held.out" 2>&1 &
HELD=$!
track_pid "$HELD"
wait_grep "$T/held.out" '^ready' 20 || fail "the FTP sessions did not start: $(cat "$T/held.out")"

rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$T/run/proxyd.pid")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover sessions=6 drained=0 \(to pid $NEW\)" 5
assert_log "handover sessions=6 drained=0 \(from pid $OLD\)" 5

touch "$T/go"
wait_exit "$HELD" 60 || fail "the FTP sessions did not finish"
cat "$T/held.out"
assert_eq "$(tail -n 1 "$T/held.out")" "ok=6" "every FTP session went on after the upgrade"
assert_log 'cmd=RETR arg="secret/s.bin" verdict=deny reason=path path="/pub/secret/s.bin"'
deadline=$(($(date +%s) + 10))
while (($(grep -c 'session-end service=ftp ' "$PROXYD_LOG") < 6)); do
    (($(date +%s) < deadline)) || fail "fewer than 6 session-end lines"
    sleep 0.05
done
assert_eq "$(grep -c 'session-end service=ftp ' "$PROXYD_LOG")" 6 "one session-end line per FTP session"
assert_eq "$(grep -c 'data-transfer download cmd=RETR file="f.bin" bytes=307200 .*end=ok' "$PROXYD_LOG")" 18 \
    "18 whole downloads logged (6 before, 12 after)"
assert_no_grep "$PROXYD_LOG" 'handed over' "a handed session's end in the log"
info "OK"
