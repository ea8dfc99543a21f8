#!/usr/bin/env bash
# A scanned ftp service judges whole files: pieces and cut transfers,
# against vsftpd, ProFTPD and Pure-FTPd, with c-icap over clamd
# (scan_lib.sh), python's ftplib as the client (ftp_scan_pieces.py).
#  - <scan> (partial="refuse", the default): FEAT offers no REST; STOR of
#    EICAR's first byte then APPE of the other 67 is refused at the APPE
#    (550, the server keeps the one byte), and so is REST 34 (502), each
#    logged by its ftp-command line (reason=scan-partial), and RANG
#    (ProFTPD's byte ranges) likewise;
#  - partial="allow": the same pieces go through, each scanned alone and
#    found clean, and the server has EICAR whole (why refuse is the
#    default); REST 34 then RETR gives the file's rest;
#  - ABOR in the middle of a scanned download of EICAR followed by 8 MB:
#    what proxyd received is judged (ftp-scan verdict=infected ...
#    complete=no), counted, and audited complete:false, scan_verdict
#    infected, verdict deny; before, the scan was dropped (verdict=none)
#    and the record said accept.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_ftp
need_ftpds
setup
need_scanner
scan_dirs
CLIENT="$LIB_DIR/ftp_scan_pieces.py"

start_vsftpd "anon_other_write_enable=YES"
# ProFTPD and Pure-FTPd: a local user of theirs, its home's pub/
add_ftp_user
mkdir -p "$FTP_HOME/pub"
chown "$FTP_USER:" "$FTP_HOME/pub"
start_proftpd "AllowStoreRestart on
AllowRetrieveRestart on"
start_pureftpd

# EICAR, and EICAR followed by 8 MB (found by a body signature: the
# md5 one knows the 68-byte file only)
write_eicar "$T/eicar.com"
{ cat "$T/eicar.com"; head -c 8M /dev/urandom; } >"$T/big-eicar.bin"
sigtool --md5 "$T/eicar.com" >"$W/db/test.hdb"
echo "EicarBody:0:*:$(od -An -tx1 "$T/eicar.com" | tr -d ' \n')" >"$W/db/test.ndb"
for root in "$FTP_ROOT" "$FTP_HOME"; do
    cp "$T/eicar.com" "$T/big-eicar.bin" "$root/pub/"
    chmod 644 "$root/pub/eicar.com" "$root/pub/big-eicar.bin"
done
start_scanner

write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
  </scanners>
  <audit target=\"file:$T/audit.json\"/>"
FTP_ALL='<ftp><limits timeout="5s"/><command name="*" action="accept"/></ftp>'
# svc NAME SERVER_PORT SCAN_ATTRS
svc() {
    local p
    free_port p
    write_ftp_service "$1" "$p" "$FTP_ALL
  <scan scanner=\"av\" $3/> <audit/>" 127.0.0.1 "$2"
    eval "PORT_${1//-/_}=$p"
}
SERVERS="vsftpd proftpd pureftpd"
svc vsftpd "$VSFTPD_PORT" ""
svc vsftpd-allow "$VSFTPD_PORT" 'partial="allow"'
svc proftpd "$PROFTPD_PORT" ""
svc proftpd-allow "$PROFTPD_PORT" 'partial="allow"'
svc pureftpd "$PUREFTPD_PORT" ""
svc pureftpd-allow "$PUREFTPD_PORT" 'partial="allow"'
start_proxyd

port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }
root_of() {
    case $1 in
    vsftpd) echo "$FTP_ROOT" ;;
    *) echo "$FTP_HOME" ;;
    esac
}
user_of() { if [[ $1 == vsftpd ]]; then echo "anonymous x@y"; else echo "$FTP_USER $FTP_PASS"; fi; }
# run SERVICE OP ARGS...: the client's line
run() {
    local svc=$1 srv=${1%-allow}
    shift
    # shellcheck disable=SC2046
    timeout 60 python3 "$CLIENT" "$(port_of "$svc")" $(user_of "$srv") "$@" 2>>"$T/client.err" ||
        echo "client failed rc=$?"
}
size_of() { if [[ -f $1 ]]; then stat -c %s "$1"; else echo absent; fi; }
wait_log() { # REGEX
    local i
    for ((i = 0; i < 200; i++)); do
        grep -Eq -- "$1" "$PROXYD_LOG" && return 0
        sleep 0.05
    done
    fail "no log line matches /$1/"
}

fails=()
check() { # ACTUAL EXPECTED(regex) MESSAGE: collects, to see every server
    if [[ ! $1 =~ ^$2$ ]]; then
        fails+=("$3: got '$1'")
        echo "  MISMATCH $3: got '$1', want /$2/" >&2
    fi
}

for s in $SERVERS; do
    root=$(root_of "$s")
    # ---- partial="refuse" (the default)
    check "$(run "$s" feat)" "rest=no rang=no" "$s: FEAT through a scanned service"
    check "$(run "$s" pieces "eicar-pieces.$s.com" "$T/eicar.com")" \
        "stor=226[ -].* appe=550 APPE: refused by the proxy: a scanned file moves whole" \
        "$s: STOR 1 byte, APPE 67"
    check "$(size_of "$root/pub/eicar-pieces.$s.com")" 1 "$s: bytes the server has after the refused APPE"
    check "$(run "$s" rest eicar.com 34 "$T/rest.$s")" \
        "rest=502 REST refused by the proxy: a scanned file moves whole retr=- bytes=0" \
        "$s: REST 34 then RETR"
    check "$(run "$s" cmd "RANG 0 33")" "502 RANG refused by the proxy: a scanned file moves whole" \
        "$s: RANG 0 33"
    # ---- partial="allow": each piece is scanned alone, and passes
    check "$(run "$s-allow" feat)" "rest=yes rang=(yes|no)" "$s: FEAT with partial=allow"
    check "$(run "$s-allow" pieces "eicar-allowed.$s.com" "$T/eicar.com")" "stor=226[ -].* appe=226[ -].*" \
        "$s: STOR 1 byte, APPE 67 with partial=allow"
    check "$(cmp "$root/pub/eicar-allowed.$s.com" "$T/eicar.com" 2>&1 && echo same)" same \
        "$s: partial=allow: the server has EICAR rebuilt"
    check "$(run "$s-allow" rest eicar.com 34 "$T/rest-allow.$s")" "rest=350 .* retr=226[ -].* bytes=34" \
        "$s: REST 34 then RETR with partial=allow"
    # ---- ABOR in the middle of an infected download
    r=$(run "$s" abort big-eicar.bin)
    info "$s: ABOR: $r"
    # (the 426 or 226 of the RETR replaced, whichever the server said)
    check "$r" "data=[A-Za-z]+ bytes=[0-9]+ replies=([^|]*\|)*550 big-eicar\.bin: blocked by content scan \(threat EicarBody\.UNOFFICIAL\)\|.*" \
        "$s: ABOR in a scanned RETR"
done
assert_log 'ftp-command user=anonymous cmd=APPE arg="eicar-pieces\.vsftpd\.com" verdict=deny reason=scan-partial rule=scan/@partial'
assert_log "ftp-command user=$FTP_USER cmd=REST arg=\"34\" verdict=deny reason=scan-partial rule=scan/@partial"

# Each cut download judged on what came: infected (its first 68 bytes)
deadline=$(($(now_ms) + 15000))
until (($(grep -Ec 'ftp-scan verdict=infected threat="[^"]+" scanner=av file="big-eicar\.bin" user=(anonymous|'"$FTP_USER"') dir=download size=[0-9]+( complete=no)? ' "$PROXYD_LOG" || true) >= 3)); do
    (($(now_ms) < deadline)) || break
    sleep 0.1
done
n=$(grep -Ec 'ftp-scan verdict=infected threat="[^"]+" scanner=av file="big-eicar\.bin" user=(anonymous|'"$FTP_USER"') dir=download size=[0-9]+( complete=no)? ' "$PROXYD_LOG" || true)
check "$n" 3 "ABORted infected downloads judged infected (of 3)"
assert_no_grep "$PROXYD_LOG" 'ftp-scan verdict=none .*file="big-eicar\.bin"' "an ABORted download left unjudged"

# their audit records: complete false, infected, denied
python3 - "$T/audit.json" "$SERVERS" <<'PY' || fails+=("audit records of the ABORted downloads")
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
bad = 0
for s in sys.argv[2].split():
    r = [x for x in recs if x.get("service") == s and x.get("file", "").endswith("/big-eicar.bin")]
    want = {"complete": False, "scan_verdict": "infected", "verdict": "deny"}
    got = {k: r[-1].get(k) for k in want} if r else None
    print("[ftp_scan_pieces] %s: audit %s" % (s, got))
    if got != want:
        print("  MISMATCH %s: audit record %r, want %r" % (s, got, want), file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY
assert_metric ge proxyd_scan_total 'service="vsftpd",scanner="av",verdict="infected"' 1

if ((${#fails[@]} > 0)); then
    printf '  %s\n' "${fails[@]}" >&2
    fail "${#fails[@]} checks failed (above)"
fi
info "ok"
