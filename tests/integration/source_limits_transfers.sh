#!/usr/bin/env bash
# <source-limits transfers="3/m"> on an ftp service (vsftpd behind it):
# - ftplib from 127.0.0.1 downloads 3 files in one session; the 4th RETR
#   gets "450 RETR: too many transfers from your address (source limit:
#   transfers, rule ftpt.xml:4), try again in N s" (ftplib's error_temp),
#   so does a STOR (uploads count too) and the file never reaches vsftpd;
#   the session goes on (PWD answered) and the data connections the
#   client opened for the refused commands are closed;
# - a second session of the same source is refused too (the bucket is the
#   source's, not the session's), while 127.0.0.2 downloads freely;
# - every refusal counted in proxyd_limited_total{limit="transfers"}, and
#   logged at most once a second per source: 17 refusals in a burst give
#   one or two "limited ... limit=transfers" lines (more only if the burst
#   took longer than a second), one 1.1 s later another, and their
#   refused= add up to the count;
# - per="prefix": the 450 says "from your network";
# - transfers= with a wrong rate or on a non-ftp service: bad_config.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
need_cmds python3
setup

start_vsftpd
for i in 1 2 3 4 5; do printf 'file %s\n' "$i" >"$FTP_ROOT/pub/f$i.txt"; done
free_port FT
write_proxyd_conf
write_ftp_service ftpt "$FT" '<source-limits transfers="3/m"/>'
free_port FN
write_ftp_service ftpn "$FN" '<source-limits per="prefix" prefix-v4="24" transfers="1/m"/>'
start_proxyd

cat >"$T/xfer.py" <<'EOF'
# xfer.py PORT SRC N [STOR] [SPIN]: one session from SRC; N RETRs (then a
# STOR when asked), printing each reply and how long they took (BURST s);
# SPIN: then RETR again 1.1 s later (a refusal in a later second).
import ftplib, io, sys, time
port, src, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stor = "STOR" in sys.argv[4:]
spin = "SPIN" in sys.argv[4:]
f = ftplib.FTP(source_address=(src, 0))
f.connect("127.0.0.1", port, timeout=10)
f.login()
t0 = time.monotonic()
def retr(i):
    buf = io.BytesIO()
    try:
        f.retrbinary("RETR pub/f%d.txt" % (i % 5 + 1), buf.write)
        print("RETR OK", buf.getvalue().decode().strip(), flush=True)
    except ftplib.error_temp as e:
        print("RETR", str(e), flush=True)
for i in range(n):
    retr(i)
if stor:
    try:
        f.storbinary("STOR pub/up.txt", io.BytesIO(b"up\n"))
        print("STOR OK", flush=True)
    except ftplib.error_temp as e:
        print("STOR", str(e), flush=True)
print("BURST %.3f" % (time.monotonic() - t0), flush=True)
if spin:
    # Past the second of the lines so far (what is tested is time).
    time.sleep(1.1)
    retr(0)
print("PWD", f.pwd(), flush=True)
f.quit()
EOF

info "127.0.0.1: 3 downloads pass, the 4th and a STOR get 450 with the rule"
out=$(timeout 30 python3 "$T/xfer.py" "$FT" 127.0.0.1 4 STOR)
info "$out"
assert_eq "$(grep -c '^RETR OK file [0-9]$' <<<"$out")" 3 "downloads before the limit"
re='450 %s: too many transfers from your address \(source limit: transfers, rule ftpt\.xml:4\), try again in ([0-9]+) s'
assert_grep <(echo "$out") "^RETR $(printf "$re" RETR)\$" "the 4th RETR refused with 450"
assert_grep <(echo "$out") "^STOR $(printf "$re" STOR)\$" "the STOR refused with 450"
assert_grep <(echo "$out") '^PWD /$' "the session went on after the refusals"
secs=$(sed -n 's/^RETR 450 .*try again in \([0-9]*\) s$/\1/p' <<<"$out")
assert_ge "$secs" 1 "the wait a 3/m bucket gives (s)"
assert_lt "$secs" 21 "the wait a 3/m bucket gives (s)"
[[ ! -e $FTP_ROOT/pub/up.txt ]] || fail "the refused STOR reached vsftpd"
wait_grep "$PROXYD_LOG" 'cmd=STOR .*verdict=deny reason=source-limit rule=ftpt\.xml:4' 5 ||
    fail "the STOR's command line does not name the rule"

info "a second session of the source is refused too (the source's bucket): 15 RETRs, one more 1.1 s later"
out=$(timeout 30 python3 "$T/xfer.py" "$FT" 127.0.0.1 15 SPIN)
info "$out"
assert_eq "$(grep -c '^RETR 450 RETR: too many transfers' <<<"$out")" 16 "every RETR of the second session refused"
burst=$(sed -n 's/^BURST //p' <<<"$out")

info "127.0.0.2 is another source: its 3 downloads pass"
out=$(timeout 30 python3 "$T/xfer.py" "$FT" 127.0.0.2 3)
info "$out"
assert_eq "$(grep -c '^RETR OK file [0-9]$' <<<"$out")" 3 "127.0.0.2's downloads"

info "per=\"prefix\": the second RETR of the /24 gets a 450 naming the network"
out=$(timeout 30 python3 "$T/xfer.py" "$FN" 127.0.0.3 2)
info "$out"
assert_grep <(echo "$out") '^RETR OK file 1$' "the /24's first download"
assert_grep <(echo "$out") '^RETR 450 RETR: too many transfers from your network \(source limit: transfers, rule ftpn\.xml:4\), try again in [0-9]+ s$' \
    "the /24's second RETR refused with 450 naming the network"

assert_metric eq proxyd_limited_total 'service="ftpt",analyser="ftp",limit="transfers"' 18
# At most one line a second per source (the 17 refusals of the first two
# sessions' burst span at most 1 + its length in seconds, the late one
# another), and together they stand for every refusal.
python3 - "$PROXYD_LOG" "$burst" <<'EOF' || fail "limited lines: $(grep 'limit=transfers' "$PROXYD_LOG")"
import re, sys, time
# The log is written by its own thread: wait (5 s at most) for the lines.
for _ in range(50):
    lines = [l for l in open(sys.argv[1]) if " limited service=ftpt " in l]
    if sum(int(l.rsplit("refused=", 1)[1]) for l in lines) >= 18:
        break
    time.sleep(0.1)
assert lines, "no limited line"
total = 0
for l in lines:
    m = re.match(r"\S+Z (?:node=\S+ )?info limited service=ftpt client=127\.0\.0\.1:\d+ "
                 r"source=127\.0\.0\.1 limit=transfers rule=ftpt\.xml:4 refused=(\d+)$", l.strip())
    assert m, l
    total += int(m.group(1))
assert 2 <= len(lines) <= 3 + int(float(sys.argv[2])), (len(lines), sys.argv[2])
assert total == 18, total
print("limited lines:", len(lines), "refusals:", total)
EOF
info "ok"
