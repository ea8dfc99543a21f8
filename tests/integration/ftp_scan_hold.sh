#!/usr/bin/env bash
# ftp files held until the scanner's verdict (<scan deliver="after-verdict">,
# the default): EICAR at 1 MiB inside a 2 MiB file, through vsftpd and
# pyftpdlib (a second server, writable here), RETR and STOR:
#  - not a byte of the infected file reaches the client (0 bytes, reset,
#    550) nor the server (no file, or an empty one);
#  - clean 2 MiB files arrive byte-identical (sha256), both ways, with
#    limits/@buffer at 64k so all but the first 64 KiB went through the
#    spool file, and that directory stays empty (O_TMPFILE: no names);
#  - a spool that could not hold max-size (max-size="1000g") refuses the file
#    clearly (451 and the free space in the log), nothing delivered;
#  - deliver="tail" keeps the former streaming: the client has all but the
#    last bytes of the infected file (the signature among them), reset.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_ftp
setup
need_scanner
scan_dirs
start_vsftpd
D=$FTP_ROOT/pub
CLIENT="$LIB_DIR/ftp_scan_client.py"

# --- pyftpdlib, anonymous with write permission, its own root
PYROOT=$T/pyroot
mkdir -p "$PYROOT/pub"
chmod 777 "$PYROOT/pub"
free_port PYFTPD_PORT
/usr/bin/python3 - "$PYROOT" "$PYFTPD_PORT" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elradfmw")
FTPHandler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), FTPHandler).serve_forever(timeout=1)
PY
PYFTPD_PID=$!
track_pid "$PYFTPD_PID"
wait_listen "$PYFTPD_PORT" 20 "$PYFTPD_PID" || fail "pyftpdlib did not start: $(cat "$T/pyftpd.log")"

# --- files: EICAR at 1 MiB of 2 MiB; a clean 2 MiB one
write_eicar "$W/eicar.com"
{ head -c 1M /dev/urandom; cat "$W/eicar.com"; head -c $((1048576 - 68)) /dev/urandom; } >"$T/mid.bin"
head -c 2M /dev/urandom >"$T/clean.bin"
for r in "$D" "$PYROOT/pub"; do cp "$T/mid.bin" "$T/clean.bin" "$r/"; done
chmod 644 "$D"/* "$PYROOT/pub"/*
echo "EicarBody:0:*:$(od -An -tx1 "$W/eicar.com" | tr -d ' \n')" >"$W/db/test.ndb"
start_scanner

SPOOL=$T/spool
mkdir -p "$SPOOL"
write_proxyd_conf 'buffer="64k"' "<scanners spool=\"$SPOOL\">
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
  </scanners>"
svc() { # NAME TARGET_PORT SCAN_XML
    local p
    free_port p
    write_ftp_service "$1" "$p" "<ftp data-ports=\"44000-44999\"><limits timeout=\"10s\"/><command name=\"*\" action=\"accept\"/></ftp>
  $3" 127.0.0.1 "$2"
    eval "PORT_${1//-/_}=$p"
}
svc hold-v "$VSFTPD_PORT" '<scan scanner="av"/>'
svc hold-p "$PYFTPD_PORT" '<scan scanner="av" deliver="after-verdict"/>'
svc tail-v "$VSFTPD_PORT" '<scan scanner="av" deliver="tail"/>'
svc huge-v "$VSFTPD_PORT" '<scan scanner="av" max-size="1000g"/>'
start_proxyd

port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }
xfer() { # SERVICE get|put REMOTE LOCAL [active]
    local svc=$1
    shift
    timeout 60 python3 "$CLIENT" "$(port_of "$svc")" "$@" 2>>"$T/client.err" || echo "client failed rc=$?"
}
size_of() { if [[ -f $1 ]]; then stat -c %s "$1"; else echo absent; fi; }
same() { assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"; }
BLOCKED='reply=550 [a-z.-]+: blocked by content scan \(threat EicarBody\.UNOFFICIAL\)'

for s in hold-v hold-p; do
    root=$D
    [[ $s == hold-p ]] && root=$PYROOT/pub
    for mode in "" active; do
        m=${mode:-passive}
        # infected download: nothing before the verdict, then a reset
        r=$(xfer "$s" get mid.bin "$T/got.$s.$m" $mode)
        [[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ reply=550\ mid\.bin:\ blocked\ by\ content\ scan\ \(threat\ EicarBody\.UNOFFICIAL\)$ ]] ||
            fail "$s $m: infected RETR: got '$r'"
        assert_eq "$(size_of "$T/got.$s.$m")" 0 "$s $m: bytes of the infected file the client got"
        # infected upload: the server gets nothing of it
        r=$(xfer "$s" put "up-mid.$m" "$T/mid.bin" $mode)
        [[ $r =~ ^data=none\ bytes=2097152\ $BLOCKED$ ]] || fail "$s $m: infected STOR: got '$r'"
        got=$(size_of "$root/up-mid.$m")
        [[ $got == absent || $got == 0 ]] || fail "$s $m: the server kept $got bytes of the infected upload"
        # clean files, both ways, whole
        r=$(xfer "$s" get clean.bin "$T/clean.$s.$m" $mode)
        assert_eq "$r" "data=none bytes=2097152 reply=226 Transfer complete." "$s $m: clean RETR"
        same "$T/clean.$s.$m" "$T/clean.bin" "$s $m: clean RETR"
        r=$(xfer "$s" put "up-clean.$m" "$T/clean.bin" $mode)
        [[ $r =~ ^data=none\ bytes=2097152\ reply=226\  ]] || fail "$s $m: clean STOR: got '$r'"
        same "$root/up-clean.$m" "$T/clean.bin" "$s $m: clean STOR"
    done
done
assert_log "ftp-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av file=\"mid\.bin\" user=anonymous dir=download size=2097152"
assert_log "ftp-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av file=\"up-mid\.passive\" user=anonymous dir=upload size=2097152"
# curl too: it gives up at the reset, with nothing written
rc=$(curl_ftp -o "$T/curl.mid" "$(ftp_url "$(port_of hold-v)" pub/mid.bin)")
assert_ne "$rc" 0 "curl's rc for the infected RETR"
[[ $(size_of "$T/curl.mid") =~ ^(0|absent)$ ]] || fail "curl got $(size_of "$T/curl.mid") bytes of the infected file"
# a slow reader of a released spool: the kernel pushes back on sendfile
# (libevent says 0 for its EAGAIN), the file still arrives whole
head -c 3M /dev/urandom >"$D/3m.bin"
chmod 644 "$D/3m.bin"
r=$(xfer hold-v get 3m.bin "$T/got.3m" slow)
assert_eq "$r" "data=none bytes=3145728 reply=226 Transfer complete." "slow reader: clean RETR"
same "$T/got.3m" "$D/3m.bin" "slow reader: clean RETR"
# the spool's files had no name
assert_eq "$(find "$SPOOL" -mindepth 1 | wc -l)" 0 "names left in the spool directory"

# a spool short of room for max-size: refused, said why, nothing went
r=$(xfer huge-v get clean.bin "$T/got.huge")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ reply=451\ clean\.bin:\ not\ transferred:\ spool\ .*\ bytes\ free,\ the\ scan\'s\ max-size\ needs ]] ||
    fail "spool short of room: RETR got '$r'"
assert_log "ftp-scan verdict=error reason=\"spool ${SPOOL//\//\\/}: [0-9]+ bytes free, the scan's max-size needs [0-9]+\" scanner=av file=\"clean\.bin\""
r=$(xfer huge-v get mid.bin /dev/null)
[[ $r =~ reply=(451|550) ]] || fail "spool short of room: the infected RETR got '$r'"

# deliver="tail": the former streaming, the file up to its last 16 KiB
r=$(xfer tail-v get mid.bin "$T/got.tail")
[[ $r =~ ^data=ConnectionResetError\ bytes=([0-9]+)\ reply=550\ mid\.bin:\ blocked ]] || fail "tail: infected RETR: got '$r'"
assert_ge "$(size_of "$T/got.tail")" $((1048576 + 68)) "tail: bytes the client got (the signature among them)"
assert_lt "$(size_of "$T/got.tail")" 2097152 "tail: bytes the client got"
r=$(xfer tail-v get clean.bin "$T/clean.tail")
assert_eq "$r" "data=none bytes=2097152 reply=226 Transfer complete." "tail: clean RETR"
same "$T/clean.tail" "$T/clean.bin" "tail: clean RETR"

# the spool directory and deliver= are checked at load, with file:line
sed -e "s#spool=\"$SPOOL\"#spool=\"$T/no-such-dir\"#" "$PROXYD_CONF" >"$T/conf/bad.xml"
sed -i 's/deliver="tail"/deliver="later"/' "$T/policy/tail-v.xml"
out=$("$PROXYD" --check -c "$T/conf/bad.xml" 2>&1) && fail "--check took a missing spool directory"
assert_grep <(echo "$out") "bad\.xml:[0-9]+: spool=\"$T/no-such-dir\": No such file or directory" "spool checked"
out=$("$PROXYD" --check -c "$PROXYD_CONF" 2>&1) && fail "--check took deliver=\"later\""
assert_grep <(echo "$out") "tail-v\.xml:[0-9]+: .*deliver" "deliver= checked"

assert_metric eq proxyd_scan_total 'service="hold-v",scanner="av",verdict="infected"' 5
assert_metric eq proxyd_scan_total 'service="hold-p",scanner="av",verdict="infected"' 4
assert_metric eq proxyd_scan_total 'service="huge-v",scanner="av",verdict="error"' 2
info "ok"
