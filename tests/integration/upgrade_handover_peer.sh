#!/usr/bin/env bash
# The upgrade's hand-over socket is an abstract Unix name that any local
# user may bind first or connect to: each end checks the other by
# SO_PEERCRED (core/handover.h).
# - New side: a process of user nobody binds proxyd-handover.PID first
#   (the old proxyd died leaving its pidfile, or its bind failed); proxyd
#   --takeover PID refuses it, whether it is another pid or the very pid
#   named (then by its uid), exits 1 with a line that says so, and sends
#   it nothing (no HELLO: the fake never hands an admin listener in, never
#   hears READY).
# - Old side: a daemon that dropped root to nobody refuses a successor of
#   uid nobody (it would get the admin listener and every client socket)
#   and one of root that does not run a proxyd binary; neither gets a
#   WELCOME, the log says why, and a real -s upgrade then still works.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3 setpriv
[[ -x /usr/bin/python3 ]] || skip "no /usr/bin/python3 (run as nobody)"
[[ $EUID == 0 ]] || skip "needs root (users nobody and root on the socket)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
setup

# ---- the new side: a squatter on the name
cat >"$T/squat.py" <<'PY'
# squat.py NAME_PID STATE: listens on proxyd-handover.NAME_PID (0: our own
# pid); writes "listening pid=P" to STATE, then what it hears.
import os, socket, struct, sys
name = int(sys.argv[1]) or os.getpid()
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(b"\0proxyd-handover.%d" % name)
s.listen(1)
with open(sys.argv[2], "w") as f:
    f.write("listening pid=%d uid=%d\n" % (os.getpid(), os.getuid()))
c, _ = s.accept()
c.settimeout(10)
try:
    m = c.recv(64)
except socket.timeout:
    m = None
with open(sys.argv[2], "a") as f:
    if not m:
        f.write("closed without a record\n")
    else:
        f.write("got record type %d\n" % struct.unpack("=IHH", m[:8])[2])
PY
write_proxyd_conf ""
mkdir -m 777 "$T/fk"

squat() { # TAG NAME_PID: a squatter as nobody; sets SQ_PID (its pid)
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        /usr/bin/python3 "$T/squat.py" "$2" "$T/fk/$1" 2>>"$T/fk/$1.err" &
    track_pid $!
    wait_grep "$T/fk/$1" '^listening' 10 || fail "squatter $1 did not start: $(cat "$T/fk/$1.err")"
    SQ_PID=$(sed -n 's/^listening pid=\([0-9]*\).*/\1/p' "$T/fk/$1")
}

# Another pid on the name of a dead one.
squat other 424242
rc=0; timeout 20 "$PROXYD" --takeover 424242 -c "$PROXYD_CONF" >"$T/new1.out" 2>&1 || rc=$?
cat "$T/new1.out"
assert_eq "$rc" 1 "proxyd --takeover refuses a squatter of another pid (exit 1)"
assert_grep "$T/new1.out" "upgrade: refused: the hand-over socket of pid 424242 is held by pid $SQ_PID, uid $(id -u nobody)"
wait_grep "$T/fk/other" 'closed without a record' 10 || fail "the squatter heard: $(cat "$T/fk/other")"
assert_no_grep "$T/fk/other" 'got record' "no HELLO to a squatter"

# The very pid named, but not root nor the daemon's user (none: root).
squat same 0
rc=0; timeout 20 "$PROXYD" --takeover "$SQ_PID" -c "$PROXYD_CONF" >"$T/new2.out" 2>&1 || rc=$?
cat "$T/new2.out"
assert_eq "$rc" 1 "proxyd --takeover refuses the pid named when it runs as nobody (exit 1)"
assert_grep "$T/new2.out" "held by pid $SQ_PID, uid $(id -u nobody) \(expected pid $SQ_PID, uid 0\)"
wait_grep "$T/fk/same" 'closed without a record' 10 || fail "the squatter heard: $(cat "$T/fk/same")"

# ---- the old side: who may connect to a daemon that runs as nobody
cat >"$T/hello.py" <<'PY'
# hello.py PID: HELLO to proxyd-handover.PID as the old one's successor
# would say it; prints "welcome fds=N" or "closed".
import array, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(b"\0proxyd-handover.%d" % int(sys.argv[1]))
s.settimeout(10)
try:
    # (refused at its accept: the send may find it closed already)
    s.send(struct.pack("=IHHII4Q", 0x31584850, 1, 1, 48, 0, os.getpid(), 0, 0, 0))
    m, anc, _, _ = s.recvmsg(64, socket.CMSG_SPACE(4 * 4))
except OSError:
    m, anc = b"", []
if not m:
    print("closed", flush=True)
    sys.exit(0)
fds = array.array("i")
for lvl, typ, data in anc:
    if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
        fds.frombytes(data[:len(data) - len(data) % 4])
print("record type %d welcome fds=%d" % (struct.unpack("=IHH", m[:8])[2], len(fds)), flush=True)
PY
mkdir "$T/run"
chown nobody:nogroup "$T/run"
PIDF=$T/run/proxyd.pid
free_port ECHO
python3 "$(dirname "$0")/upgrade_streams.py" echo "$ECHO" 2>>"$T/echo.log" &
track_pid $!
wait_listen "$ECHO" 5 || fail "echo server did not start"
free_port PS
write_proxyd_conf 'shutdown-grace="5s"' "<user name=\"nobody\" group=\"nogroup\"/>
  <pidfile path=\"$PIDF\"/>"
write_service plugs "$PS" "$ECHO"
start_proxyd
OLD=$PROXYD_PID
assert_log "running as user nobody" 5

out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$T/hello.py" "$OLD" 2>&1)
info "a successor of uid nobody: $out"
assert_eq "$out" closed "a successor of the daemon's own unprivileged uid gets no WELCOME"
assert_log "handover: connection refused: pid [0-9]+ runs as uid $(id -u nobody), not root" 5

out=$(python3 "$T/hello.py" "$OLD" 2>&1)
info "a successor of root that is python: $out"
assert_eq "$out" closed "a root successor that is not a proxyd gets no WELCOME"
assert_log "handover: connection refused: pid [0-9]+ runs python[^ ]*, not a proxyd" 5
assert_no_grep "$PROXYD_LOG" "handover: pid [0-9]+ connected" "no successor was taken"

# A real upgrade still passes both checks.
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$PIDF")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
info "OK"
