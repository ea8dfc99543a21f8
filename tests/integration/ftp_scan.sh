#!/usr/bin/env bash
# ftp files through an ICAP scanner (<scan> on an ftp service): c-icap with
# its virus_scan service over ClamAV's clamd (scan_lib.sh), vsftpd behind
# proxyd, curl and python's ftplib (ftp_scan_client.py) as clients.
#  - EICAR RETR and STOR, passive and active on both sides: blocked, the
#    threat named in the ftp-scan line, the client's "550 FILE: blocked by
#    content scan (threat NAME)" in place of the server's 226, the client
#    without the file (download) or the server without it whole (upload);
#    an infected 1 MB file likewise, its data connection reset before its
#    last bytes;
#  - clean files of 0 B, 1 KB and 10 MB pass both ways with sha256 intact,
#    the 226 after the verdict; direction="download" leaves STOR alone;
#  - upload bytes sent before the STOR: the STOR refused (425);
#  - FTPS towards the client (the data channel's TLS relay): EICAR blocked
#    both ways, 10 MB whole both ways;
#  - max-size with over-size="block" (550, reset) and "allow" (passed);
#  - c-icap killed in the middle of 10 MB RETRs and STORs: on-error="block"
#    resets the receiver's data connection and answers 451, "allow" passes
#    the file whole;
#    with c-icap down, block refuses and allow passes, both ways;
#  - with <content> and <audit> too: the type judged before the scanner
#    (an ELF refused with its 550, never scanned), the audit record with
#    the scanner's verdict and threat, the type, sha256 and sizes;
#  - proxyd_scan_total counts the verdicts;
#  - (info) proxyd's CPU per MB for a 10 MB RETR scanned and not, and the
#    memory a stalled scanned download holds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_ftp
need_cmds ss openssl
setup
P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf proxy localhost "DNS:localhost,IP:127.0.0.1" serverAuth
need_scanner
scan_dirs
start_vsftpd
D=$FTP_ROOT/pub
CLIENT="$LIB_DIR/ftp_scan_client.py"

# --- files, and the signatures that make some of them "infected"
write_eicar "$D/eicar.com"
head -c 1M /dev/urandom >"$D/bad-1m.bin"
# (a fixed start: random bytes are now and then a zlib header, a TGA or
# a fax to libmagic, and the audit record below asserts
# application/octet-stream; with this one 1000 of 1000 are)
{ printf '\xde\xad\xbe\xef\0\0\0\0'; head -c 1016 /dev/urandom; } >"$D/1k.bin"
head -c 10K /dev/urandom >"$D/10k.bin"
head -c 10M /dev/urandom >"$D/10m.bin"
{ printf '%%PDF-1.4\n'; head -c 1M /dev/urandom; } >"$D/doc.pdf"
: >"$D/empty.bin"
chmod 644 "$D"/*
mkdir -p "$T/up"
cp "$D/eicar.com" "$D/bad-1m.bin" "$D/1k.bin" "$D/10k.bin" "$D/10m.bin" "$D/empty.bin" "$T/up/"
(cd "$D" && sigtool --md5 eicar.com && sigtool --md5 bad-1m.bin) >"$W/db/test.hdb"
start_scanner

# --- proxyd: services that differ in their <scan> and data modes
write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
    <icap name=\"av-open\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" on-error=\"allow\"/>
  </scanners>
  <audit target=\"file:$T/audit.json\"/>"
FTP_ALL='<command name="*" action="accept"/>'
svc() { # NAME SCAN_XML [FTP_ATTRS]
    local p
    free_port p
    write_ftp_service "$1" "$p" "<ftp ${3:-} data-ports=\"44000-44999\"><limits timeout=\"10s\"/>$FTP_ALL</ftp>
  $2"
    eval "PORT_${1//-/_}=$p"
}
svc scan '<scan scanner="av"/>'
svc scan-pa '<scan scanner="av"/>' 'client-data="passive" server-data="active"'
svc scan-ap '<scan scanner="av"/>' 'client-data="active" server-data="passive"'
svc plain ''
svc scan-audit '<scan scanner="av"/> <audit/>
  <content type="application/x-executable" action="deny"/>'
svc open '<scan scanner="av-open"/>'
# (the former streaming: a download under way reaches the client before
# its verdict, so the scanner can be killed in its middle)
svc scan-tail '<scan scanner="av" deliver="tail"/>'
svc open-tail '<scan scanner="av-open" deliver="tail"/>'
svc down '<scan scanner="av" direction="download"/>'
svc small '<scan scanner="av" max-size="4k"/>'
svc small-open '<scan scanner="av" max-size="4k" over-size="allow"/>'
svc tls "<scan scanner=\"av\"/> <tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>"
start_proxyd

port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }
# xfer SERVICE get|put REMOTE LOCAL [active] [slow] ...: the client's line
xfer() {
    local svc=$1
    shift
    timeout 90 python3 "$CLIENT" "$(port_of "$svc")" "$@" 2>>"$T/client.err" || echo "client failed rc=$?"
}
same() { # FILE ORIG MESSAGE
    assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"
}
wait_log_n() { # REGEX N
    local i
    for ((i = 0; i < 100; i++)); do
        (($(grep -Ec -- "$1" "$PROXYD_LOG" || true) >= $2)) && return 0
        sleep 0.05
    done
    fail "fewer than $2 log lines match /$1/"
}
size_of() { if [[ -f $1 ]]; then stat -c %s "$1"; else echo absent; fi; }
ISTAG='istag="CI0001-[A-Za-z0-9+/=-]+"'
BLOCKED_EICAR='reply=550 eicar.com: blocked by content scan \(threat eicar\.com\.UNOFFICIAL\)'

# ---- infected downloads and uploads: each data mode on both sides
# ("scan" keeps the client's mode towards the server; client-data forces
# the client's)
n=0
for combo in scan: scan:active scan-pa: scan-ap:active; do
    s=${combo%%:*} mode=${combo#*:}
    n=$((n + 1))
    r=$(xfer "$s" get eicar.com "$T/got.$s.$mode" $mode)
    [[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ $BLOCKED_EICAR$ ]] ||
        fail "$s ${mode:-passive}: EICAR RETR: got '$r'"
    assert_eq "$(size_of "$T/got.$s.$mode")" 0 "$s ${mode:-passive}: EICAR bytes the client kept"
    wait_log_n "ftp-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=\"eicar\.com\" user=anonymous dir=download size=68 $ISTAG" "$n"

    up=up-eicar.$s.${mode:-passive}
    r=$(xfer "$s" put "$up" "$T/up/eicar.com" $mode)
    assert_eq "$r" "data=none bytes=68 reply=550 $up: blocked by content scan (threat eicar.com.UNOFFICIAL)" "$s ${mode:-passive}: EICAR STOR"
    # (vsftpd creates the file at STOR: none of its bytes reached it)
    got=$(size_of "$D/$up")
    [[ $got == absent || $got == 0 ]] || fail "$s ${mode:-passive}: the server has $got bytes of the infected upload"
    assert_log "ftp-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=\"${up//./\\.}\" user=anonymous dir=upload size=68 $ISTAG"
done
assert_log "ftp-reply code=550 cmd=RETR by=proxy \(content scan; the server said 226\)"

# An infected 1 MB file: held until the verdict (ftp_scan_hold.sh has
# more), the client gets none of it; its data connection is reset, never
# closed as a whole file.
r=$(xfer scan get bad-1m.bin "$T/got.bad")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ reply=550\ bad-1m\.bin:\ blocked\ by\ content\ scan\ \(threat\ bad-1m\.bin\.UNOFFICIAL\)$ ]] ||
    fail "infected 1 MB RETR: got '$r'"
assert_eq "$(size_of "$T/got.bad")" 0 "infected 1 MB RETR: bytes the client got"
assert_log "ftp-scan verdict=infected threat=\"bad-1m\.bin\.UNOFFICIAL\" scanner=av file=\"bad-1m\.bin\" user=anonymous dir=download size=1048576"
rc=$(curl_ftp -o "$T/curl.bad" "$(ftp_url "$(port_of scan)" pub/bad-1m.bin)")
assert_ne "$rc" 0 "curl's rc for an infected RETR"
[[ $(size_of "$T/curl.bad") =~ ^(0|absent)$ ]] || fail "infected 1 MB RETR by curl: it got $(size_of "$T/curl.bad") bytes"
# (curl gives up at the reset, before it reads the 550)
rc=$(curl_ftp -P - -o "$T/curl.eicar" "$(ftp_url "$(port_of scan-ap)" pub/eicar.com)")
assert_ne "$rc" 0 "curl's rc for EICAR RETR, active"
[[ $(size_of "$T/curl.eicar") =~ ^(0|absent)$ ]] || fail "EICAR RETR by curl, active: it got $(size_of "$T/curl.eicar") bytes"

r=$(xfer scan put up-bad.bin "$T/up/bad-1m.bin")
assert_eq "$r" "data=none bytes=1048576 reply=550 up-bad.bin: blocked by content scan (threat bad-1m.bin.UNOFFICIAL)" "infected 1 MB STOR"
got=$(size_of "$D/up-bad.bin")
[[ $got == absent ]] || assert_lt "$got" 1048576 "infected 1 MB STOR: bytes the server kept"
assert_log "ftp-scan verdict=infected threat=\"bad-1m\.bin\.UNOFFICIAL\" scanner=av file=\"up-bad\.bin\" user=anonymous dir=upload size=1048576"

# ---- clean files pass whole, both ways, in each mode
for combo in scan: scan-pa: scan-ap:active; do
    s=${combo%%:*} mode=${combo#*:} curlmode=()
    [[ -n $mode ]] && curlmode=(-P -)
    for f in empty.bin 1k.bin 10m.bin; do
        rc=$(curl_ftp "${curlmode[@]}" -o "$T/c.$f" "$(ftp_url "$(port_of "$s")" "pub/$f")")
        assert_eq "$rc" 0 "$s: curl RETR $f"
        same "$T/c.$f" "$D/$f" "$s: RETR $f"
        rc=$(curl_ftp "${curlmode[@]}" -T "$T/up/$f" "$(ftp_url "$(port_of "$s")" "pub/up-$s-$f")")
        assert_eq "$rc" 0 "$s: curl STOR $f"
        same "$D/up-$s-$f" "$T/up/$f" "$s: STOR $f"
    done
    r=$(xfer "$s" get 10m.bin "$T/py.10m" $mode)
    assert_eq "$r" "data=none bytes=10485760 reply=226 Transfer complete." "$s: RETR 10m.bin by ftplib"
    same "$T/py.10m" "$D/10m.bin" "$s: RETR 10m.bin by ftplib"
    r=$(xfer "$s" put "py-$s.10m" "$T/up/10m.bin" $mode)
    assert_eq "$r" "data=none bytes=10485760 reply=226 Transfer complete." "$s: STOR 10m.bin by ftplib"
    same "$D/py-$s.10m" "$T/up/10m.bin" "$s: STOR 10m.bin by ftplib"
done
assert_log "ftp-scan verdict=clean scanner=av file=\"10m\.bin\" user=anonymous dir=download size=10485760 $ISTAG"
assert_log "ftp-scan verdict=clean scanner=av file=\"py-scan\.10m\" user=anonymous dir=upload size=10485760 $ISTAG"
assert_no_grep "$PROXYD_LOG" "ftp-scan .*file=\"(up-scan-)?empty\.bin\"" "an empty file went to the scanner"
# A type c-icap does not scan: its 204 to the preview passes the file (a
# 200 returning it unchanged, without a preview, used to refuse it).
r=$(xfer scan get doc.pdf "$T/py.pdf")
assert_eq "$r" "data=none bytes=$(stat -c %s "$D/doc.pdf") reply=226 Transfer complete." "RETR of a PDF c-icap does not scan"
same "$T/py.pdf" "$D/doc.pdf" "RETR doc.pdf"
assert_log "ftp-scan verdict=clean scanner=av file=\"doc\.pdf\" user=anonymous dir=download size=[0-9]+ $ISTAG note=\"204 to the preview \(1024 bytes\): the rest not scanned\""

# ---- <content> and <audit> with the scanner: the type is judged first
# (an ELF never reaches the scanner), the record has both verdicts
python3 -c '
import os, struct, sys
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64, 56, 1, 64, 0, 0))
open(sys.argv[1], "wb").write(elf + os.urandom(20000))' "$D/prog.elf"
chmod 644 "$D/prog.elf"
last_record() { # DICT: the last audit record has these fields
    local i
    for ((i = 0; i < 100; i++)); do
        (($(wc -l <"$T/audit.json" 2>/dev/null || echo 0) >= NREC)) && break
        sleep 0.05
    done
    python3 - "$T/audit.json" "$NREC" "$1" <<'PY' || fail "audit record $NREC: see above"
import hashlib, json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == int(sys.argv[2]), "%d records, want %s" % (len(lines), sys.argv[2])
rec, bad = json.loads(lines[-1]), []
for k, v in eval(sys.argv[3]).items():
    if isinstance(v, str) and v.startswith("SHA:"):
        v = hashlib.sha256(open(v[4:], "rb").read()).hexdigest()
    if rec.get(k) != v:
        bad.append("%s=%r (want %r)" % (k, rec.get(k), v))
if bad:
    print(bad, rec)
    sys.exit(1)
PY
}
NREC=0
r=$(xfer scan-audit get eicar.com "$T/got.sa")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ $BLOCKED_EICAR$ ]] || fail "scan-audit: EICAR RETR: got '$r'"
NREC=$((NREC + 1))
last_record "{'service': 'scan-audit', 'file': '/pub/eicar.com', 'direction': 'download',
  'user': 'anonymous', 'announced_size': 68, 'complete': False, 'scan_verdict': 'infected',
  'threat': 'eicar.com.UNOFFICIAL', 'content_type': 'text/plain', 'content_action': 'accept',
  'verdict': 'deny'}"
r=$(xfer scan-audit get 1k.bin "$T/got.sa1k")
assert_eq "$r" "data=none bytes=1024 reply=226 Transfer complete." "scan-audit: clean RETR"
NREC=$((NREC + 1))
last_record "{'file': '/pub/1k.bin', 'size': 1024, 'announced_size': 1024, 'complete': True,
  'sha256': 'SHA:$D/1k.bin', 'scan_verdict': 'clean', 'threat': None,
  'content_type': 'application/octet-stream', 'verdict': 'accept'}"
r=$(xfer scan-audit put sa-prog.elf "$D/prog.elf")
[[ $r =~ ^data=(none|ConnectionResetError|BrokenPipeError)\ bytes=[0-9]+\ reply=550\ sa-prog\.elf:\ file\ type\ not\ allowed\ \(application/x-executable\)$ ]] ||
    fail "scan-audit: ELF STOR: got '$r'"
NREC=$((NREC + 1))
last_record "{'file': '/pub/sa-prog.elf', 'direction': 'upload', 'complete': False,
  'scan_verdict': None, 'content_type': 'application/x-executable',
  'content_action': 'deny', 'verdict': 'deny'}"
assert_no_grep "$PROXYD_LOG" "ftp-scan .*file=\"sa-prog\.elf\"" "a file denied by type went to the scanner"

# direction="download": uploads are not scanned, downloads are.
r=$(xfer down put down-eicar.com "$T/up/eicar.com")
assert_eq "$r" "data=none bytes=68 reply=226 Transfer complete." "STOR through a download-only scan"
same "$D/down-eicar.com" "$T/up/eicar.com" "STOR through a download-only scan"
assert_no_grep "$PROXYD_LOG" "ftp-scan .*file=\"down-eicar\.com\"" "a download-only scan scanned an upload"
r=$(xfer down get eicar.com "$T/got.down")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ $BLOCKED_EICAR$ ]] || fail "download-only: RETR EICAR: got '$r'"

# A RETR the server refuses: its reply needs no verdict (none waits for
# one), and the next transfer is scanned as before.
r=$(xfer scan get no-such-file "$T/got.none")
assert_eq "$r" "data=none bytes=0 reply=refused: 550 Failed to open file." "RETR of a missing file"
r=$(xfer scan get 1k.bin "$T/got.after")
assert_eq "$r" "data=none bytes=1024 reply=226 Transfer complete." "RETR after a refused one"

# A client that sends its upload before the STOR (the data connection is
# spliced until then): refused, not passed unscanned.
r=$(xfer scan put early.com "$T/up/eicar.com" early)
assert_eq "$r" "data=none bytes=68 reply=refused: 425 Cannot open data connection" "upload data before its STOR"
assert_log "ftp-scan upload cmd=STOR file=\"early\.com\" cannot be scanned"
[[ ! -f $D/early.com ]] || fail "the server has early.com ($(size_of "$D/early.com") bytes)"

# ---- FTPS towards the client: the data channel's TLS relay is scanned
# as the plain one (curl: AUTH TLS, PROT P, passive)
ftps() { curl_ftp --ssl-reqd --cacert "$P/ca.pem" "$@"; }
rc=$(ftps -o "$T/tls.eicar" "$(ftp_url "$(port_of tls)" pub/eicar.com)")
assert_ne "$rc" 0 "curl's rc for EICAR RETR over FTPS"
[[ $(size_of "$T/tls.eicar") =~ ^(0|absent)$ ]] || fail "EICAR RETR over FTPS: curl got $(size_of "$T/tls.eicar") bytes"
assert_log "ftp-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=\"eicar\.com\" user=anonymous dir=download size=68"
rc=$(ftps -T "$T/up/eicar.com" "$(ftp_url "$(port_of tls)" pub/tls-eicar.com)")
assert_ne "$rc" 0 "curl's rc for EICAR STOR over FTPS"
got=$(size_of "$D/tls-eicar.com")
[[ $got == absent || $got == 0 ]] || fail "EICAR STOR over FTPS: the server has $got bytes"
rc=$(ftps -o "$T/tls.10m" "$(ftp_url "$(port_of tls)" pub/10m.bin)")
assert_eq "$rc" 0 "curl RETR 10m.bin over FTPS"
same "$T/tls.10m" "$D/10m.bin" "RETR 10m.bin over FTPS"
rc=$(ftps -T "$T/up/10m.bin" "$(ftp_url "$(port_of tls)" pub/tls-10m.bin)")
assert_eq "$rc" 0 "curl STOR 10m.bin over FTPS"
same "$D/tls-10m.bin" "$T/up/10m.bin" "STOR 10m.bin over FTPS"
assert_log "data-transfer download cmd=RETR file=\"10m\.bin\" bytes=10485760 .* tls-client=(yes|resumed) tls-server=no .* end=ok"
assert_log "ftp-scan verdict=clean scanner=av file=\"tls-10m\.bin\" user=anonymous dir=upload size=10485760"

# ---- max-size
r=$(xfer small get 10k.bin "$T/got.small")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=([0-9]+)\ reply=550\ 10k\.bin:\ refused:\ over\ the\ content\ scanner\'s\ max-size\ \(4096\ bytes\)$ ]] ||
    fail "over max-size, block: RETR got '$r'"
assert_lt "$(size_of "$T/got.small")" 10240 "over max-size, block: bytes the client got"
assert_log "ftp-scan verdict=over-size size=[0-9]+\+ max-size=4096 scanner=av file=\"10k\.bin\" user=anonymous dir=download over-size=block"
r=$(xfer small put small-up.bin "$T/up/10k.bin")
[[ $r =~ ^data=(none|ConnectionResetError|BrokenPipeError)\ bytes=[0-9]+\ reply=550\ small-up\.bin:\ refused ]] ||
    fail "over max-size, block: STOR got '$r'"
got=$(size_of "$D/small-up.bin")
[[ $got == absent ]] || assert_lt "$got" 10240 "over max-size, block: bytes the server kept"
r=$(xfer small get 1k.bin "$T/got.small1k")
assert_eq "$r" "data=none bytes=1024 reply=226 Transfer complete." "under max-size"
r=$(xfer small-open get 10k.bin "$T/got.smallopen")
assert_eq "$r" "data=none bytes=10240 reply=226 Transfer complete." "over max-size, allow: RETR"
same "$T/got.smallopen" "$D/10k.bin" "over max-size, allow: RETR"
r=$(xfer small-open put small-open-up.bin "$T/up/10k.bin")
assert_eq "$r" "data=none bytes=10240 reply=226 Transfer complete." "over max-size, allow: STOR"
same "$D/small-open-up.bin" "$T/up/10k.bin" "over max-size, allow: STOR"

# ---- (info) proxyd's CPU per MB for a 10 MB RETR, scanned and not, and
# the memory a stalled scanned download holds
if http_sanitized; then
    info "CPU and RSS: not measured under a sanitizer"
else
    info "proxyd CPU per MB, 10 MB RETR: $(ftp_cpu_per_mb "$(port_of plain)") us unscanned (spliced), $(ftp_cpu_per_mb "$(port_of scan)") us scanned"
    cat >"$T/stall.py" <<'PY'
import ftplib, os, socket, sys, time
port, n, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for i in range(n):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=30)
    f.login()
    f.cwd("pub")
    f.voidcmd("TYPE I")
    c = f.transfercmd("RETR 10m.bin")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    held.append((f, c))
print("connected", flush=True)
deadline = time.time() + 90
while not os.path.exists(stop) and time.time() < deadline:
    for _, c in held:
        c.recv(1)
    time.sleep(1)
PY
    rss_stalled() { # SERVICE: KB of proxyd RSS per stalled RETR
        local base after pid stop=$T/stall-$1.stop out=$T/stall-$1.out
        base=$(settle_rss)
        python3 "$T/stall.py" "$(port_of "$1")" 20 "$stop" >"$out" 2>&1 &
        pid=$!
        track_pid "$pid"
        wait_grep "$out" connected 30 || fail "stalled readers did not connect: $(cat "$out")"
        after=$(settle_rss)
        touch "$stop"
        wait_exit "$pid" 10 || true
        echo $(((after - base) / 20))
    }
    per_plain=$(rss_stalled plain)
    per_scan=$(rss_stalled scan)
    info "RSS per stalled 10 MB RETR with buffer=64k: $per_plain KB unscanned, $per_scan KB scanned"
    assert_lt "$per_scan" $((per_plain + 400)) "KB per stalled scanned RETR (buffer 64k; unscanned: $per_plain)"
fi

# ---- c-icap killed in the middle of slow transfers (two RETRs, two
# STORs), then down
mid() { # NAME SERVICE get|put REMOTE LOCAL: in the background, pid in MID_PID
    xfer "$2" "$3" "$4" "$5" slow "started=$T/mid-$1.started" >"$T/mid-$1.result" &
    MID_PID=$!
    track_pid "$MID_PID"
}
mid block scan-tail get 10m.bin "$T/mid-block"
MB=$MID_PID
mid allow open-tail get 10m.bin "$T/mid-allow"
MA=$MID_PID
mid upblock scan put mid-up-block.bin "$T/up/10m.bin"
MUB=$MID_PID
mid upallow open put mid-up-allow.bin "$T/up/10m.bin"
MUA=$MID_PID
for ((i = 0; i < 100; i++)); do
    [[ -f $T/mid-block.started && -f $T/mid-allow.started &&
       -f $T/mid-upblock.started && -f $T/mid-upallow.started ]] && break
    sleep 0.1
done
[[ -f $T/mid-block.started && -f $T/mid-allow.started &&
   -f $T/mid-upblock.started && -f $T/mid-upallow.started ]] || fail "the slow transfers did not start"
kill_scanner
for p in "$MB" "$MA" "$MUB" "$MUA"; do
    wait_exit "$p" 60 || fail "a slow transfer (pid $p) did not end"
done
r=$(cat "$T/mid-block.result")
[[ $r =~ ^data=ConnectionResetError\ bytes=([0-9]+)\ reply=451\ 10m\.bin:\ not\ transferred:\ the\ content\ scanner\ failed ]] ||
    fail "scanner killed mid-RETR, on-error block: got '$r'"
assert_lt "${BASH_REMATCH[1]}" 10485760 "on-error block: bytes the client got"
assert_eq "$(cat "$T/mid-allow.result")" "data=none bytes=10485760 reply=226 Transfer complete." "scanner killed mid-RETR, on-error allow"
same "$T/mid-allow" "$D/10m.bin" "scanner killed mid-RETR, on-error allow"
assert_log "ftp-scan verdict=error reason=\"[^\"]+\" scanner=av file=\"10m\.bin\" user=anonymous dir=download on-error=block"
assert_log "ftp-scan verdict=error reason=\"[^\"]+\" scanner=av-open file=\"10m\.bin\" user=anonymous dir=download on-error=allow"
r=$(cat "$T/mid-upblock.result")
[[ $r =~ ^data=[A-Za-z]+\ bytes=[0-9]+\ reply=451\ mid-up-block\.bin:\ not\ transferred:\ the\ content\ scanner\ failed ]] ||
    fail "scanner killed mid-STOR, on-error block: got '$r'"
got=$(size_of "$D/mid-up-block.bin")
[[ $got == absent ]] || assert_lt "$got" 10485760 "scanner killed mid-STOR, on-error block: bytes the server kept"
assert_eq "$(cat "$T/mid-upallow.result")" "data=none bytes=10485760 reply=226 Transfer complete." "scanner killed mid-STOR, on-error allow"
same "$D/mid-up-allow.bin" "$T/up/10m.bin" "scanner killed mid-STOR, on-error allow"

r=$(xfer scan get 1k.bin "$T/got.down1")
[[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ reply=451\ 1k\.bin:\ not\ transferred ]] || fail "scanner down, block: RETR got '$r'"
r=$(xfer scan put down-block.bin "$T/up/1k.bin")
[[ $r =~ ^data=none\ bytes=1024\ reply=451\ down-block\.bin:\ not\ transferred ]] || fail "scanner down, block: STOR got '$r'"
got=$(size_of "$D/down-block.bin")
[[ $got == absent ]] || assert_lt "$got" 1024 "scanner down, block: bytes the server kept"
r=$(xfer open get 1k.bin "$T/got.open1")
assert_eq "$r" "data=none bytes=1024 reply=226 Transfer complete." "scanner down, allow: RETR"
same "$T/got.open1" "$D/1k.bin" "scanner down, allow: RETR"
r=$(xfer open put down-allow.bin "$T/up/1k.bin")
assert_eq "$r" "data=none bytes=1024 reply=226 Transfer complete." "scanner down, allow: STOR"
same "$D/down-allow.bin" "$T/up/1k.bin" "scanner down, allow: STOR"

# ---- counters
# (4 EICAR, the 1 MB file down twice and up once)
assert_metric eq proxyd_scan_total 'service="scan",scanner="av",verdict="infected"' 7
assert_metric eq proxyd_scan_total 'service="scan-ap",scanner="av",verdict="infected"' 3
assert_metric ge proxyd_scan_total 'service="scan",scanner="av",verdict="clean"' 4
assert_metric eq proxyd_scan_total 'service="scan",scanner="av",verdict="error"' 3
assert_metric eq proxyd_scan_total 'service="scan-tail",scanner="av",verdict="error"' 1
assert_metric eq proxyd_scan_total 'service="open",scanner="av-open",verdict="error-allowed"' 3
assert_metric eq proxyd_scan_total 'service="open-tail",scanner="av-open",verdict="error-allowed"' 1
assert_metric eq proxyd_scan_total 'service="small",scanner="av",verdict="over-size"' 2
assert_metric eq proxyd_scan_total 'service="small-open",scanner="av",verdict="over-size-allowed"' 2
assert_metric eq proxyd_scan_total 'service="tls",scanner="av",verdict="infected"' 2
info "ok"
