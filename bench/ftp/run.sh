#!/usr/bin/env bash
# 1 KB RETR and STOR transfers/s, 1 and 10 parallel clients, passive and
# active, direct to vsftpd and through proxyd, from one run (root: vsftpd).
#   bench/ftp/run.sh [SECONDS_PER_CELL=5]
# Through proxyd the client side keeps the client's mode and the server side
# is passive ("keep"/"passive"): in active cells it is proxyd, not vsftpd,
# that connects out to the client, so those cells compare the two active
# implementations under the same load. A last row runs active on both sides.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TEST_NAME=ftp_bench
source "$HERE/../../tests/integration/lib.sh"
source "$HERE/../../tests/integration/ftp_lib.sh"
SECS=${1:-5}
need_ftp
setup
start_vsftpd
head -c 1K /dev/urandom >"$FTP_ROOT/pub/1k.bin"
chmod 644 "$FTP_ROOT/pub/1k.bin"
free_port PKP
free_port PAA
write_proxyd_conf
sed -i 's/level="info"/level="warning"/' "$PROXYD_CONF"
write_ftp_service keep_passive "$PKP" '<ftp client-data="keep" server-data="passive" data-ports="47000-48999"><command name="*" action="accept"/></ftp>'
write_ftp_service active_active "$PAA" '<ftp client-data="active" server-data="active" data-ports="47000-48999"><command name="*" action="accept"/></ftp>'
start_proxyd
tw() { ss -Htan state time-wait 2>/dev/null | wc -l; }
printf '%-8s %-5s %-7s %7s %14s %14s\n' mode op clients direct proxyd "(fails d/p)"
for mode in passive active; do
    for op in retr stor; do
        for c in 1 10; do
            read -r d dn df < <(python3 "$HERE/bench.py" 127.0.0.1 "$VSFTPD_PORT" "$op" "$mode" "$c" "$SECS")
            read -r p pn pf < <(python3 "$HERE/bench.py" 127.0.0.1 "$PKP" "$op" "$mode" "$c" "$SECS")
            printf '%-8s %-5s %-7s %7s %14s %14s   time-wait=%s\n' "$mode" "$op" "$c" "$d" "$p" "$df/$pf" "$(tw)"
        done
    done
done
for op in retr stor; do
    read -r p pn pf < <(python3 "$HERE/bench.py" 127.0.0.1 "$PAA" "$op" active 10 "$SECS")
    printf '%-8s %-5s %-7s %7s %14s %14s   (active on both sides)\n' active "$op" 10 - "$p" "-/$pf"
done
