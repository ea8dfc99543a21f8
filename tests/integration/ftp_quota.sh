#!/usr/bin/env bash
# Per-user daily quotas (<user quota-transfers= quota-bytes=>) against a
# real vsftpd, with the quotas' clock in a file (PROXYD_QUOTA_CLOCK):
#   - quota-transfers="3": the 4th RETR gets 550 and a STOR 552 from the
#     proxy (vsftpd never sees them), another user is not affected;
#   - quota-bytes: a RETR crossing it is cut (the client has less than the
#     file), the day's count is exactly the bytes that passed (the
#     data-transfer line), the next RETR is refused; a STOR crossing it on
#     another service (its own count for the same user) is cut too, the
#     server keeping less than was sent;
#     the same through the buffered relay (<content> on the service) is cut
#     within a buffer's worth past the limit;
#   - SIGHUP with a changed limit keeps the day's count (limit 3 -> 4: one
#     more transfer, not four), and so does a rule removed then put back;
#   - the next UTC day starts afresh;
#   - a restart keeps the day's counts (quotas/@state-file), not another
#     day's;
# with the ftp-quota log lines and the quota metrics.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
P=$FTP_ROOT/pub
head -c 10K /dev/urandom >"$P/a.bin"
head -c 8M /dev/urandom >"$P/big.bin"
chmod 644 "$P"/*

# Some day at 10:00 UTC.
DAY0=1796119200
echo "$DAY0" >"$T/clock"
export PROXYD_QUOTA_CLOCK=$T/clock

free_port PORT
free_port PORT2
write_ftp_service up "$PORT2" '
  <ftp><user name="anonymous" quota-bytes="1m" action="accept"/></ftp>'
# <content> has the data go through the buffered relay, not spliced
free_port PORT3
write_ftp_service insp "$PORT3" '
  <ftp><user name="anonymous" quota-bytes="1m" action="accept"/></ftp>
  <content type="application/x-dosexec" action="deny"/>'
service() { # ANONYMOUS_RULE_ATTRS | "" (no rule for anonymous)
    local anon=""
    [[ -n $1 ]] && anon="<user name=\"anonymous\" $1 action=\"accept\"/>"
    write_ftp_service q "$PORT" "
  <ftp client-data=\"keep\" server-data=\"passive\">
    $anon
    <user name=\"ftp\" quota-bytes=\"1m\" action=\"accept\"/>
  </ftp>"
}
write_proxyd_conf "" "<quotas state-file=\"$T/quotas.state\"/>"
service 'quota-transfers="3"'
start_proxyd

# ftpq USER ACTION...: one login on $FTPQ_PORT (default: service q); each
# ACTION is "get FILE" or "put NAME [SIZE]"; prints one line per action:
# "ok BYTES" or "err REPLY got=BYTES"
ftpq() {
    python3 - "${FTPQ_PORT:-$PORT}" "$T" "$@" <<'EOF'
import ftplib, io, sys
port, tmp, user, acts = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=20)
f.login(user, "x@y")
for a in acts:
    verb, name = a.split()[:2]
    size = int(a.split()[2]) if len(a.split()) > 2 else 1000
    got = [0]
    try:
        if verb == "get":
            f.retrbinary("RETR pub/" + name, lambda b: got.__setitem__(0, got[0] + len(b)))
        else:
            f.storbinary("STOR pub/" + name, io.BytesIO(b"u" * size))
            got[0] = size
        print("ok", got[0])
    except ftplib.all_errors as e:
        print("err", str(e).split("\n")[0].strip(), "got=%d" % got[0])
        # a cut transfer may leave the control connection in any state
        f.close()
        f = ftplib.FTP()
        f.connect("127.0.0.1", port, timeout=20)
        f.login(user, "x@y")
try:
    f.quit()
except ftplib.all_errors:
    pass
EOF
}

info "---- quota-transfers=3: the 4th transfer is refused, another user is not"
out=$(ftpq anonymous "get a.bin" "get a.bin" "get a.bin" "get a.bin" "put up.bin")
echo "$out"
assert_eq "$(sed -n 1,3p <<<"$out" | tr '\n' ' ')" "ok 10240 ok 10240 ok 10240 " "the first three RETRs"
assert_eq "$(sed -n 4p <<<"$out")" "err 550 RETR: daily transfer quota used up (proxy policy) got=0" "the 4th RETR"
assert_eq "$(sed -n 5p <<<"$out")" "err 552 STOR: daily transfer quota used up (proxy policy) got=0" "a STOR past the quota"
[[ ! -e $P/up.bin ]] || fail "the refused STOR reached vsftpd"
assert_log 'ftp-quota user=anonymous kind=transfers used=3 limit=3 cmd=RETR verdict=refused rule=q\.xml:[0-9]+'
assert_log 'ftp-quota user=anonymous kind=transfers used=3 limit=3 cmd=STOR verdict=refused'
assert_eq "$(grep -c 'RETR.*pub/a.bin' "$T/vsftpd.log")" 3 "RETRs vsftpd saw"
out=$(ftpq ftp "get a.bin")
assert_eq "$out" "ok 10240" "user ftp (no transfer quota) after anonymous's refusal"
assert_metric eq proxyd_quota_refusals_total 'service="q",kind="transfers"' 2
assert_metric eq proxyd_quota_used_transfers 'service="q",partner="anonymous"' 3
assert_metric eq proxyd_quota_used_bytes 'service="q",partner="ftp"' 10240

# the same, as JSON on the admin endpoint
curl -s --max-time 5 "http://127.0.0.1:$ADMIN_PORT/api/quotas" >"$T/quotas.json"
python3 - "$T/quotas.json" <<'EOF2' || fail "/api/quotas: $(cat "$T/quotas.json")"
import json, sys
d = json.load(open(sys.argv[1]))
q = {(e["service"], e["partner"]): e for e in d["quotas"]}
a, f = q[("q", "anonymous")], q[("q", "ftp")]
assert (a["transfers"], a["refused_transfers"], a["bytes"]) == (3, 2, 0), a
assert (f["transfers"], f["bytes"]) == (1, 10240), f
assert d["day"] == 1796119200 // 86400, d["day"]
EOF2

info "---- quota-bytes=1m: a RETR crossing it is cut, counted exactly"
out=$(ftpq ftp "get big.bin" "get a.bin")
echo "$out"
got=$(sed -n 1p <<<"$out")
[[ $got =~ ^err\ .*got=([0-9]+)$ ]] || fail "the 8 MB RETR was not cut: $got"
got=${BASH_REMATCH[1]}
assert_lt "$got" $((8 * 1024 * 1024)) "bytes the client got of the cut file"
assert_eq "$(sed -n 2p <<<"$out")" "err 550 RETR: daily byte quota used up (proxy policy) got=0" "RETR after the cut"
assert_log 'ftp-quota user=ftp kind=bytes used=[0-9]+ limit=1048576 verdict=cut moved=[0-9]+'
line=$(grep -E 'ftp-quota user=ftp kind=bytes .* verdict=cut' "$PROXYD_LOG" | head -n 1)
used=$(kv "$line" used)
moved=$(kv "$line" moved)
assert_eq "$used" $((10240 + moved)) "the day's bytes: a.bin and what passed of big.bin"
# spliced: the pump stops one byte past the limit
assert_eq "$used" 1048577 "the day's bytes of user ftp after the cut"
assert_log "data-transfer download cmd=RETR file=\"pub/big.bin\" bytes=$moved .* end=denied: over the byte quota"
assert_log 'ftp-quota user=ftp kind=bytes used=[0-9]+ limit=1048576 cmd=RETR verdict=refused'
assert_metric eq proxyd_quota_used_bytes 'service="q",partner="ftp"' "$used"
assert_metric eq proxyd_quota_refusals_total 'service="q",kind="cut"' 1
assert_metric eq proxyd_quota_refusals_total 'service="q",kind="bytes"' 1

info "---- quota-bytes=1m on another service: a STOR crossing it is cut"
out=$(FTPQ_PORT=$PORT2 ftpq anonymous "put up2.bin 8388608" "put up3.bin 10")
echo "$out"
[[ $(sed -n 1p <<<"$out") == err* ]] || fail "the 8 MB STOR was not cut: $out"
assert_eq "$(sed -n 2p <<<"$out")" "err 552 STOR: daily byte quota used up (proxy policy) got=0" "STOR after the cut"
assert_log 'ftp-quota user=anonymous kind=bytes used=[0-9]+ limit=1048576 verdict=cut moved=[0-9]+'
line=$(grep -E 'ftp-quota user=anonymous kind=bytes .* verdict=cut' "$PROXYD_LOG" | head -n 1)
used=$(kv "$line" used)
assert_eq "$(kv "$line" moved)" "$used" "the day's bytes on service up: what passed of the STOR"
# spliced: the pump stops one byte past the limit
assert_eq "$used" 1048577 "the day's bytes on service up after the cut"
assert_log "data-transfer upload cmd=STOR file=\"pub/up2.bin\" bytes=$used .* end=denied: over the byte quota"
kept=$(stat -c %s "$P/up2.bin" 2>/dev/null || echo 0)
(( kept <= used )) || fail "vsftpd kept $kept bytes, more than the $used that passed"
[[ ! -e $P/up3.bin ]] || fail "the refused STOR reached vsftpd"
assert_metric eq proxyd_quota_used_bytes 'service="up",partner="anonymous"' "$used"
assert_metric eq proxyd_quota_refusals_total 'service="up",kind="cut"' 1
# the same user on service q: its own count, untouched
assert_metric eq proxyd_quota_used_transfers 'service="q",partner="anonymous"' 3
assert_metric eq proxyd_quota_used_transfers 'service="up",partner="anonymous"' 1

info "---- the same through the buffered relay (<content>): cut within a buffer"
out=$(FTPQ_PORT=$PORT3 ftpq anonymous "get big.bin")
[[ $out == err* ]] || fail "the 8 MB RETR through <content> was not cut: $out"
# its line is the second of user anonymous's cuts (the first: service up)
deadline=$(($(date +%s) + ASYNC_WAIT))
until (($(grep -cE 'ftp-quota user=anonymous kind=bytes .* verdict=cut' "$PROXYD_LOG") >= 2)); do
    (($(date +%s) < deadline)) || fail "no ftp-quota cut line for service insp"
    sleep 0.05
done
line=$(grep -E 'ftp-quota user=anonymous kind=bytes .* verdict=cut' "$PROXYD_LOG" | sed -n 2p)
used=$(kv "$line" used)
assert_eq "$(kv "$line" moved)" "$used" "the day's bytes on service insp: what passed"
(( used > 1048576 && used <= 1048576 + 256 * 1024 )) || fail "buffered cut at $used bytes"
assert_metric eq proxyd_quota_used_bytes 'service="insp",partner="anonymous"' "$used"

reload() { # N: wait for the Nth "reload done"
    kill -HUP "$PROXYD_PID"
    local deadline=$(($(date +%s) + ASYNC_WAIT))
    until (($(grep -c "reload done" "$PROXYD_LOG") >= $1)); do
        (($(date +%s) < deadline)) || fail "reload $1 not done"
        sleep 0.1
    done
}

info "---- reload with the limit raised to 4: one more transfer, not four"
service 'quota-transfers="4"'
reload 1
out=$(ftpq anonymous "get a.bin" "get a.bin")
assert_eq "$(tr '\n' ' ' <<<"$out")" "ok 10240 err 550 RETR: daily transfer quota used up (proxy policy) got=0 " "after the reload"
assert_log 'ftp-quota user=anonymous kind=transfers used=4 limit=4 cmd=RETR verdict=refused'
assert_metric eq proxyd_quota_used_transfers 'service="q",partner="anonymous"' 4

info "---- the rule removed, then put back: the day's count is still there"
service ""
reload 2
python3 - "$PORT" <<'EOF2' || fail "anonymous was not refused without its rule"
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=20)
try:
    f.login("anonymous", "x@y")
    sys.exit(1)
except ftplib.error_perm as e:
    assert str(e).startswith("530"), e
EOF2
service 'quota-transfers="4"'
reload 3
out=$(ftpq anonymous "get a.bin")
assert_eq "$out" "err 550 RETR: daily transfer quota used up (proxy policy) got=0" "anonymous's rule back"

info "---- the next UTC day starts afresh"
echo $((DAY0 + 86400 - 36000)) >"$T/clock"	# 00:00 the next day
out=$(ftpq anonymous "get a.bin")
assert_eq "$out" "ok 10240" "anonymous on the next day"
assert_metric eq proxyd_quota_used_transfers 'service="q",partner="anonymous"' 1
out=$(ftpq ftp "get a.bin")
assert_eq "$out" "ok 10240" "ftp on the next day"
assert_metric eq proxyd_quota_used_bytes 'service="q",partner="ftp"' 10240

info "---- a restart keeps the day's counts (quotas/@state-file)"
restart() {
    kill -TERM "$PROXYD_PID"
    wait_exit "$PROXYD_PID" 15 || fail "proxyd did not exit"
    start_proxyd
}
restart
assert_log "quotas: today's counts of 2 partners read from $T/quotas.state"
assert_metric eq proxyd_quota_used_transfers 'service="q",partner="anonymous"' 1
assert_metric eq proxyd_quota_used_bytes 'service="q",partner="ftp"' 10240
# service up's entry had only the day before: not written, not read
assert_eq "$(metric_value proxyd_quota_used_bytes 'service="up",partner="anonymous"')" NA "service up's entry after the restart"
out=$(ftpq anonymous "get a.bin" "get a.bin" "get a.bin" "get a.bin")
assert_eq "$(tr '\n' ' ' <<<"$out")" "ok 10240 ok 10240 ok 10240 err 550 RETR: daily transfer quota used up (proxy policy) got=0 " "after the restart"
info "---- ... but not another day's"
echo $((DAY0 + 2 * 86400)) >"$T/clock"
restart
assert_log "quotas: today's counts of 0 partners read"
assert_eq "$(metric_value proxyd_quota_used_transfers 'service="q",partner="anonymous"')" NA "anonymous's entry after a restart on another day"
info "ok"
