# shellcheck shell=bash
# A virus scanner behind ICAP for the scan tests, from Debian's packages
# (/work/shared/SCANNING.md): c-icap with its virus_scan service over
# ClamAV's clamd, offline, with a signature database the test writes.
#
#   source "$(dirname "$0")/lib.sh"
#   source "$(dirname "$0")/scan_lib.sh"
#   setup
#   need_scanner           # clamd, c-icap, sigtool, the modules (else skip)
#   scan_dirs              # $W, with $W/db for signatures: sigtool --md5 F >>"$W/db/test.hdb"
#   start_scanner          # clamd, then c-icap on 127.0.0.1:$ICAP_PORT, service /avscan
#   kill_scanner           # c-icap and its server child killed (SIGKILL)
# Before start_scanner, ICAP_MAX_OBJECT (c-icap's virus_scan.MaxObjectSize,
# default 100M: bigger objects are passed unscanned) and CLAMD_EXTRA (more
# clamd.conf lines, e.g. its MaxFileSize and MaxScanSize) and ICAP_EXTRA
# (more c-icap.conf lines, e.g. an AccessLog with its own LogFormat) may be set.
# $CLAMD_PID, $ICAP_PID and $ICAP_CHILDREN are tracked (ended by the cleanup).

ICAP_MODS=/usr/lib/x86_64-linux-gnu/c_icap
W=""
ICAP_PORT=""
ICAP_PID=""
ICAP_CHILDREN=""
CLAMD_PID=""
ICAP_MAX_OBJECT=${ICAP_MAX_OBJECT:-100M}
CLAMD_EXTRA=${CLAMD_EXTRA:-}
ICAP_EXTRA=${ICAP_EXTRA:-}

need_scanner() {
    local c
    for c in clamd c-icap sigtool; do
        command -v "$c" >/dev/null 2>&1 || skip "$c not installed (scripts/deps: c-icap libc-icap-mod-virus-scan clamav-daemon clamav)"
    done
    [[ -f $ICAP_MODS/virus_scan.so && -f $ICAP_MODS/clamd_mod.so ]] ||
        skip "c-icap's virus_scan or clamd_mod module is missing (libc-icap-mod-virus-scan)"
}

scan_dirs() {
    W=$T/scan
    mkdir -p "$W/db" "$W/tmp"
    chmod 777 "$W" "$W/tmp"
}

# The EICAR test string (68 bytes) into FILE.
write_eicar() {
    printf 'X5O!P%%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*' >"$1"
}

start_scanner() {
    local i p
    cat >"$W/clamd.conf" <<EOF2
LocalSocket $W/clamd.sock
DatabaseDirectory $W/db
Foreground yes
LogFile $W/clamd.log
PidFile $W/clamd.pid
TemporaryDirectory $W/tmp
User $(id -un)
$CLAMD_EXTRA
EOF2
    clamd -c "$W/clamd.conf" >"$W/clamd.out" 2>&1 &
    CLAMD_PID=$!
    track_pid "$CLAMD_PID"
    for ((i = 0; i < 300; i++)); do
        [[ -S $W/clamd.sock ]] && break
        proc_alive "$CLAMD_PID" || break
        sleep 0.1
    done
    [[ -S $W/clamd.sock ]] || skip "clamd did not start: $(tail -n 5 "$W/clamd.out" "$W/clamd.log" 2>/dev/null | tr '\n' ' ')"

    free_port ICAP_PORT
    cat >"$W/c-icap.conf" <<EOF2
PidFile $W/c-icap.pid
CommandsSocket $W/c-icap.ctl
Port 127.0.0.1:$ICAP_PORT
StartServers 1
MaxServers 1
ThreadsPerChild 64
TmpDir $W/tmp
ModulesDir $ICAP_MODS
ServicesDir $ICAP_MODS
TemplateDir /usr/share/c_icap/templates/
LoadMagicFile /etc/c-icap/c-icap.magic
ServerLog $W/server.log
AccessLog $W/access.log
Module common clamd_mod.so
clamd_mod.ClamdSocket $W/clamd.sock
Service antivirus_module virus_scan.so
ServiceAlias avscan virus_scan?allow204=on&sizelimit=off&mode=simple
virus_scan.ScanFileTypes TEXT DATA EXECUTABLE ARCHIVE GIF JPEG MSOFFICE
virus_scan.MaxObjectSize $ICAP_MAX_OBJECT
virus_scan.DefaultEngine clamd
$ICAP_EXTRA
EOF2
    c-icap -N -D -f "$W/c-icap.conf" >"$W/c-icap.out" 2>&1 &
    ICAP_PID=$!
    track_pid "$ICAP_PID"
    wait_listen "$ICAP_PORT" 10 "$ICAP_PID" || skip "c-icap did not start: $(tail -n 5 "$W/c-icap.out" "$W/server.log" 2>/dev/null | tr '\n' ' ')"
    # c-icap -N forks its server child (one: MaxServers 1): both are
    # ended by pid.
    for ((i = 0; i < 50; i++)); do
        ICAP_CHILDREN=$(pgrep -P "$ICAP_PID" || true)
        [[ -n $ICAP_CHILDREN ]] && break
        sleep 0.1
    done
    for p in $ICAP_CHILDREN; do track_pid "$p"; done
    info "clamd pid $CLAMD_PID, c-icap pid $ICAP_PID (children $ICAP_CHILDREN) on $ICAP_PORT"
}

# Killed, not terminated: on TERM c-icap finishes the scans under way. Its
# one server child (MaxServers 1) may have been replaced since the start.
# Returns once it no longer listens.
kill_scanner() {
    local p
    ICAP_CHILDREN="$ICAP_CHILDREN $(pgrep -P "$ICAP_PID" || true)"
    for p in "$ICAP_PID" $ICAP_CHILDREN; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $ICAP_CHILDREN "$ICAP_PID"; do wait_exit "$p" 5 || true; done
    wait_not_listening "$ICAP_PORT" 5 || fail "c-icap still listening"
}
