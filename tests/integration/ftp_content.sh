#!/usr/bin/env bash
# File policy by content and audit records on ftp (<content> and <audit>
# on an ftp service, no scanner), vsftpd behind proxyd, python's ftplib
# (ftp_scan_client.py) and curl as clients:
#  - an ELF file, RETR and STOR, passive and active on both sides: the
#    client's "550 FILE: file type not allowed (application/x-executable)"
#    in place of the server's 226, none of its bytes delivered (the first
#    4 KiB are held until judged), the ftp-content line with the rule's
#    FILE:LINE, user and dir; proxyd_content_total counts them;
#  - a text file passes both ways in each mode with sha256 intact;
#  - audit records (JSON, parsed with python3): one per RETR/STOR/APPE,
#    none for LIST/NLST; user, canonical file, direction, announced size
#    (the 150 reply's "(N bytes)", or SIZE's 213 before a RETR of the
#    same file, against pyftpdlib), actual size, sha256 equal to
#    sha256sum's, content type and action, verdict and rule; an
#    audit-only service (no <content>) records its files unsniffed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_ftp
setup
start_vsftpd
D=$FTP_ROOT/pub
CLIENT="$LIB_DIR/ftp_scan_client.py"

python3 - "$D" <<'PY'
import os, struct, sys
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64,
                   56, 1, 64, 0, 0))
open(os.path.join(sys.argv[1], "prog.elf"), "wb").write(elf + os.urandom(300000))
with open(os.path.join(sys.argv[1], "text.txt"), "w") as f:
    for i in range(20000):
        f.write("line %d of a plain text file and nothing to see here\n" % i)
PY
chmod 644 "$D"/*
mkdir -p "$T/up"
cp "$D/prog.elf" "$D/text.txt" "$T/up/"
head -c 10M /dev/urandom >"$D/10m.bin"
chmod 644 "$D/10m.bin"
ELF_SIZE=$(stat -c %s "$D/prog.elf")
TXT_SIZE=$(stat -c %s "$D/text.txt")

AUDIT=$T/audit.json
write_proxyd_conf 'buffer="64k"' "<audit target=\"file:$AUDIT\"/>"
FTP_ALL='<command name="*" action="accept"/>'
DENY='<content type="application/x-executable application/x-pie-executable" action="deny"/>'
svc() { # NAME XML [FTP_ATTRS]
    local p
    free_port p
    write_ftp_service "$1" "$p" "<ftp ${3:-} data-ports=\"45000-45999\"><limits timeout=\"10s\"/>$FTP_ALL</ftp>
  $2"
    eval "PORT_${1//-/_}=$p"
}
svc content "$DENY
  <audit/>"
svc content-pa "$DENY
  <audit/>" 'client-data="passive" server-data="active"'
svc content-ap "$DENY
  <audit/>" 'client-data="active" server-data="passive"'
svc audit '<audit/>'
svc plain ''
start_pyftpd
free_port PORT_audit_py
write_ftp_service audit-py "$PORT_audit_py" "<ftp><limits timeout=\"10s\"/>$FTP_ALL</ftp>
  <audit/>" 127.0.0.1 "$PYFTPD_PORT"
start_proxyd
RULE="$T/conf/../policy/content.xml:$(grep -n '<content' "$T/policy/content.xml" | cut -d: -f1)"
re() { sed 's/[.[\*^$/]/\\&/g' <<<"$1"; }

port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }
xfer() { # SERVICE get|put REMOTE LOCAL [active]: the client's line
    local svc=$1
    shift
    timeout 60 python3 "$CLIENT" "$(port_of "$svc")" "$@" 2>>"$T/client.err" || echo "client failed rc=$?"
}
same() { assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"; }
size_of() { if [[ -f $1 ]]; then stat -c %s "$1"; else echo absent; fi; }
wait_log_n() { # REGEX N
    local i
    for ((i = 0; i < 100; i++)); do
        (($(grep -Ec -- "$1" "$PROXYD_LOG" || true) >= $2)) && return 0
        sleep 0.05
    done
    fail "fewer than $2 log lines match /$1/"
}
# check SERVICE FILE DIRECTION DICT: the last record (each transfer's is
# waited for before the next) is SERVICE's for FILE in DIRECTION, with the
# fields of DICT ("SHA:PATH": that file's sha256)
check() {
    python3 - "$AUDIT" "$1" "$2" "$3" "$4" <<'PY' || fail "audit record $1 $2 $3: see above"
import hashlib, json, sys
path, svc, file, direction, want = sys.argv[1:6]
rec = json.loads(open(path).read().splitlines()[-1])
bad = []
want = dict(eval(want), service=svc, file=file, direction=direction)
for k, v in want.items():
    if isinstance(v, str) and v.startswith("SHA:"):
        v = hashlib.sha256(open(v[4:], "rb").read()).hexdigest()
    if rec.get(k) != v:
        bad.append("%s=%r (want %r)" % (k, rec.get(k), v))
if bad:
    print("record %s: %s" % (bad, rec))
    sys.exit(1)
PY
}
N=0

# ---- ELF denied, text passed, each data mode on both sides ("content"
# keeps the client's mode towards the server)
i=0
for combo in content: content:active content-pa: content-ap:active; do
    s=${combo%%:*} mode=${combo#*:} m=${mode:-passive}
    i=$((i + 1))
    r=$(xfer "$s" get prog.elf "$T/got.$s.$m" $mode)
    [[ $r =~ ^data=(none|ConnectionResetError)\ bytes=0\ reply=550\ prog\.elf:\ file\ type\ not\ allowed\ \(application/x-executable\)$ ]] ||
        fail "$s $m: ELF RETR: got '$r'"
    assert_eq "$(size_of "$T/got.$s.$m")" 0 "$s $m: ELF bytes the client kept"
    wait_log_n "ftp-content type=application/x-executable action=deny rule=[^ ]+/${s//./\\.}\.xml:[0-9]+ file=\"prog\.elf\" user=anonymous dir=download sniffed=4096" 1
    N=$((N + 1)); wait_records "$AUDIT" $N
    check "$s" /pub/prog.elf download "{'analyser': 'ftp', 'user': 'anonymous',
      'announced_size': $ELF_SIZE, 'complete': False, 'content_type': 'application/x-executable',
      'content_action': 'deny', 'verdict': 'deny', 'scan_verdict': None}"

    up=up-prog.$s.$m
    r=$(xfer "$s" put "$up" "$T/up/prog.elf" $mode)
    [[ $r =~ ^data=(none|ConnectionResetError|BrokenPipeError)\ bytes=[0-9]+\ reply=550\ ${up//./\\.}:\ file\ type\ not\ allowed\ \(application/x-executable\)$ ]] ||
        fail "$s $m: ELF STOR: got '$r'"
    got=$(size_of "$D/$up")
    [[ $got == absent || $got == 0 ]] || fail "$s $m: the server has $got bytes of the ELF upload"
    assert_log "ftp-content type=application/x-executable action=deny rule=[^ ]+:[0-9]+ file=\"${up//./\\.}\" user=anonymous dir=upload"
    N=$((N + 1)); wait_records "$AUDIT" $N
    check "$s" "/pub/$up" upload "{'user': 'anonymous', 'announced_size': None,
      'complete': False, 'content_type': 'application/x-executable',
      'content_action': 'deny', 'verdict': 'deny'}"

    r=$(xfer "$s" get text.txt "$T/txt.$s.$m" $mode)
    assert_eq "$r" "data=none bytes=$TXT_SIZE reply=226 Transfer complete." "$s $m: text RETR"
    same "$T/txt.$s.$m" "$D/text.txt" "$s $m: text RETR"
    N=$((N + 1)); wait_records "$AUDIT" $N
    check "$s" /pub/text.txt download "{'user': 'anonymous', 'announced_size': $TXT_SIZE,
      'size': $TXT_SIZE, 'complete': True, 'sha256': 'SHA:$D/text.txt',
      'content_type': 'text/plain', 'content_action': 'accept', 'verdict': 'accept', 'rule': None}"

    r=$(xfer "$s" put "up-text.$s.$m" "$T/up/text.txt" $mode)
    assert_eq "$r" "data=none bytes=$TXT_SIZE reply=226 Transfer complete." "$s $m: text STOR"
    same "$D/up-text.$s.$m" "$T/up/text.txt" "$s $m: text STOR"
    N=$((N + 1)); wait_records "$AUDIT" $N
    check "$s" "/pub/up-text.$s.$m" upload "{'size': $TXT_SIZE, 'complete': True,
      'sha256': 'SHA:$T/up/text.txt', 'content_type': 'text/plain', 'verdict': 'accept'}"
done
assert_log "ftp-content type=application/x-executable action=deny rule=$(re "$RULE") file=\"prog\.elf\" user=anonymous dir=download"
assert_log "ftp-content type=text/plain action=accept rule=- file=\"text\.txt\" user=anonymous dir=download sniffed=4096"
assert_log "ftp-reply code=550 cmd=RETR by=proxy \(content scan; the server said 226\)"
# (content: passive and active, two each)
assert_metric eq proxyd_content_total 'service="content",action="deny"' 4
assert_metric eq proxyd_content_total 'service="content",action="accept"' 4
assert_metric eq proxyd_content_total 'service="content-ap",action="deny"' 2

# ---- an audit-only service: files recorded unsniffed; listings not
rc=$(curl_ftp -o "$T/c.elf" "$(ftp_url "$(port_of audit)" pub/prog.elf)")
assert_eq "$rc" 0 "curl RETR prog.elf, no <content>"
same "$T/c.elf" "$D/prog.elf" "RETR prog.elf, no <content>"
N=$((N + 1)); wait_records "$AUDIT" $N
check audit /pub/prog.elf download "{'user': 'anonymous', 'announced_size': $ELF_SIZE,
  'size': $ELF_SIZE, 'complete': True, 'sha256': 'SHA:$D/prog.elf',
  'content_type': None, 'content_action': None, 'verdict': 'accept'}"
rc=$(curl_ftp -o "$T/list" "$(ftp_url "$(port_of audit)" pub/)")
assert_eq "$rc" 0 "curl LIST"
grep -q text.txt "$T/list" || fail "LIST through the audit service: $(cat "$T/list")"
rc=$(curl_ftp -l -o "$T/nlst" "$(ftp_url "$(port_of audit)" pub/)")
assert_eq "$rc" 0 "curl NLST"
rc=$(curl_ftp -T "$T/up/text.txt" "$(ftp_url "$(port_of audit)" pub/audit-up.txt)")
assert_eq "$rc" 0 "curl STOR, no <content>"
rc=$(curl_ftp -a -T "$T/up/text.txt" "$(ftp_url "$(port_of audit)" pub/audit-up.txt)")
assert_eq "$rc" 0 "curl APPE, no <content>"
assert_eq "$(size_of "$D/audit-up.txt")" $((2 * TXT_SIZE)) "the file after STOR and APPE"
# (the STOR and the APPE: the listings before them left no record)
N=$((N + 2)); wait_records "$AUDIT" $N
python3 - "$AUDIT" "$TXT_SIZE" "$(sha256_of "$T/up/text.txt")" <<'PY' || fail "STOR and APPE records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
mine = [r for r in recs if r["service"] == "audit" and r["file"] == "/pub/audit-up.txt"]
assert len(mine) == 2, mine
for r in mine:
    assert r["direction"] == "upload" and r["size"] == int(sys.argv[2]), r
    assert r["sha256"] == sys.argv[3] and r["complete"] is True, r
lists = [r for r in recs if r["file"] in ("/pub", "/pub/", None)]
assert not lists, lists
PY
assert_metric eq proxyd_audit_records_total 'service="audit",verdict="accept"' 3

# STOU: the record names the file the server made (its 150 "FILE: name")
timeout 30 python3 - "$PORT_audit" "$T/up/text.txt" <<'PY' 2>>"$T/client.err" || fail "STOU through the audit service"
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=20)
f.login()
f.cwd("pub")
f.voidcmd("TYPE I")
conn, _ = f.ntransfercmd("STOU")
conn.sendall(open(sys.argv[2], "rb").read())
conn.close()
f.voidresp()
f.quit()
PY
stou=$(ls -t "$D" | head -1)
assert_eq "$(sha256_of "$D/$stou")" "$(sha256_of "$T/up/text.txt")" "the file STOU made ($stou)"
N=$((N + 1)); wait_records "$AUDIT" $N
check audit "/pub/$stou" upload "{'size': $TXT_SIZE, 'complete': True, 'sha256': 'SHA:$T/up/text.txt'}"

# ---- the announced size from SIZE's 213 when the 150 says none
# (pyftpdlib's does not): curl asks SIZE before its RETR, ftplib does not
rc=$(curl_ftp -o "$T/py.txt" "$(ftp_url "$PORT_audit_py" pub/text.txt)")
assert_eq "$rc" 0 "curl RETR through pyftpdlib"
same "$T/py.txt" "$D/text.txt" "curl RETR through pyftpdlib"
assert_log "ftp-command user=anonymous cmd=SIZE arg=\"text\.txt\""
N=$((N + 1)); wait_records "$AUDIT" $N
check audit-py /pub/text.txt download "{'announced_size': $TXT_SIZE, 'size': $TXT_SIZE,
  'complete': True, 'sha256': 'SHA:$D/text.txt'}"
r=$(xfer audit-py get prog.elf "$T/py.elf")
[[ $r =~ ^data=none\ bytes=$ELF_SIZE\ reply=226 ]] || fail "ftplib RETR through pyftpdlib: got '$r'"
N=$((N + 1)); wait_records "$AUDIT" $N
check audit-py /pub/prog.elf download "{'announced_size': None, 'size': $ELF_SIZE,
  'complete': True, 'sha256': 'SHA:$D/prog.elf'}"
assert_metric eq proxyd_audit_records_total 'service="content",verdict="deny"' 4

# ---- (info) proxyd's CPU per MB for a 10 MB RETR: spliced (no <content>,
# no <audit>), with <audit> (buffered relay and sha256) and with
# <content> and <audit> (the same, and libmagic once)
if http_sanitized; then
    info "CPU: not measured under a sanitizer"
else
    info "proxyd CPU per MB, 10 MB RETR: $(ftp_cpu_per_mb "$PORT_plain") us spliced, $(ftp_cpu_per_mb "$PORT_audit") us with <audit>, $(ftp_cpu_per_mb "$PORT_content") us with <content> and <audit>"
fi
info "ok"
