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

# ---- 1 GB through the scanner (scan_big, scan_big_r66) -----------------
#   big_setup FILE         # SIZE bytes into FILE, WANT its sha256; clamd's db,
#                          # ICAP_MAX_OBJECT and CLAMD_EXTRA set for a real scan
#   big_shrink FILE        # for the second transfer: FILE cut to 256 MB,
#                          # SIZE and WANT its own
#   sampled NAME CMD...    # CMD in the background, proxyd's RSS sampled
#   wait_clean_scan N      # clamd logged more clean scans than N
# SIZE is 1 GB, 128 MB under a sanitizer (PROXYD_SANITIZED=1 for the
# integration tests, PROXYD_SANITIZE=1 for the R66 ones), where the RSS
# bound is not asserted either (ASan keeps what is freed in quarantine).

big_sanitized() { [[ ${PROXYD_SANITIZED:-0} == 1 || -n ${PROXYD_SANITIZE:-} ]]; }

# clamd's limits above the file with AlertExceedsMax, so that a file over
# either comes back "Heuristics.Limits.Exceeded" (a clean verdict means
# clamd read all of it); LogClean: each clean scan logged; DisableCache:
# clamd would otherwise find a second transfer of the same file in its
# cache of clean files (by md5) and not scan it.
BIG_CLAMD="MaxFileSize 2000M
MaxScanSize 2000M
AlertExceedsMax yes
LogClean yes
DisableCache yes"

big_setup() {
    SIZE=1073741824
    big_sanitized && SIZE=134217728
    # Not zeros, not /dev/urandom (slow): AES-CTR of zeros under a fixed
    # key, about 1 GB/s; its sha256 is taken once here.
    openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f \
        -iv 00000000000000000000000000000000 -in /dev/zero 2>/dev/null |
        head -c "$SIZE" >"$1" || true
    assert_eq "$(stat -c %s "$1")" "$SIZE" "size of the generated file"
    WANT=$(sha256_of "$1")
    # (clamd wants a database: EICAR's)
    write_eicar "$T/eicar.com"
    sigtool --md5 "$T/eicar.com" >"$W/db/test.hdb"
    ICAP_MAX_OBJECT=2000M
    CLAMD_EXTRA=$BIG_CLAMD
}

# One 1 GB transfer per test proves the size; the second (the FTP RETR,
# the R66 RECV) goes through other code of the same streaming, which 256 MB
# proves as well: four times the RSS bound, over clamd's default
# MaxFileSize (100M) and c-icap's MaxObjectSize, and a quarter of clamd's
# 30-odd seconds of CPU. Under a sanitizer SIZE is smaller already.
big_shrink() {
    local small=268435456
    ((SIZE > small)) || return 0
    truncate -s "$small" "$1"
    SIZE=$small
    assert_eq "$(stat -c %s "$1")" "$SIZE" "size of the shrunk file"
    WANT=$(sha256_of "$1")
}

rss() { vm_kb "$PROXYD_PID" VmRSS; }
cpu_ms() { # PID...: CPU of the processes so far (utime+stime), ms
    local p s=0 st
    for p in "$@"; do
        st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        st=${st##*) }
        read -r -a f <<<"$st"
        s=$((s + f[11] + f[12]))
    done
    echo $((s * 1000 / $(getconf CLK_TCK)))
}
# proxyd, c-icap (master and server child), clamd
cpu_all() { echo "$(cpu_ms "$PROXYD_PID") $(cpu_ms "$ICAP_PID" $ICAP_CHILDREN) $(cpu_ms "$CLAMD_PID")"; }
clean_scans() { grep -c ': OK$' "$W/clamd.log" || true; }

# sampled NAME CMD...: runs CMD in the background (output in $T/NAME.out
# and .err), samples proxyd's RSS every 0.2 s until it ends (bounded:
# 300 s); sets MS (its duration), RSS0 (proxyd's RSS before), PEAK; fails
# if CMD failed, and (unless sanitized) if the RSS grew by 64 MB or more
# (the transfer is streamed: only a held tail is kept). Prints the
# duration, the RSS and the CPU of proxyd, c-icap and clamd.
sampled() {
    local name=$1 pid i r c0 c1 t0 samples=0
    shift
    RSS0=$(rss)
    PEAK=$RSS0
    read -r -a c0 <<<"$(cpu_all)"
    t0=$(now_ms)
    "$@" >"$T/$name.out" 2>"$T/$name.err" &
    pid=$!
    track_pid "$pid"
    for ((i = 0; i < 1500; i++)); do
        proc_alive "$pid" || break
        r=$(rss)
        [[ -n $r ]] && ((r > PEAK)) && PEAK=$r
        samples=$((samples + 1))
        sleep 0.2
    done
    wait_exit "$pid" 10 || fail "$name did not finish within 300 s"
    MS=$(($(now_ms) - t0))
    read -r -a c1 <<<"$(cpu_all)"
    assert_eq "$WAIT_RC" 0 "$name: exit status ($(cat "$T/$name.curl" "$T/$name.err" 2>/dev/null))"
    assert_ge "$samples" 5 "$name: RSS samples during the transfer"
    info "$name: $((SIZE >> 20)) MB in $MS ms ($(((SIZE >> 20) * 1000 / (MS > 0 ? MS : 1))) MB/s), proxyd RSS $RSS0 KB before, peak $PEAK KB ($samples samples); CPU ms: proxyd $((c1[0] - c0[0])), c-icap $((c1[1] - c0[1])), clamd $((c1[2] - c0[2]))"
    big_sanitized ||
        assert_lt "$((PEAK - RSS0))" 65536 "$name: proxyd's RSS growth during the transfer (KB)"
}

# more clean scans in clamd's log than N
wait_clean_scan() {
    local i
    for ((i = 0; i < 50; i++)); do
        (($(clean_scans) > $1)) && return 0
        sleep 0.1
    done
    fail "clamd logged no clean scan of the big file (still $(clean_scans))"
}
