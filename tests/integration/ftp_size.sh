#!/usr/bin/env bash
# The announced size of an ftp download against the actual one
# (<ftp size-mismatch>), behind proxyd a pyftpdlib that lies in its 150/125
# reply ("(N bytes)" for files named lie-N-*), python's ftplib as client:
#  - size-mismatch="block" (with and without <audit>): a file longer than
#    announced is cut as soon as it passes that size (the client has at
#    most the announced bytes, its data connection reset, 550 "more data
#    than the announced size" in place of the 226), a shorter one at its
#    end with its held tail never sent (550 "less data"); the right size
#    passes intact; a file that grew between the client's SIZE and its
#    RETR (no "(N bytes)" then: SIZE's 213 is the announced size) is cut
#    too; the ftp-size line says action=block, the audit record
#    reason=size-mismatch, rule=ftp/@size-mismatch;
#    a REST's transfer (part of the file) is not checked;
#  - the default (allow): the file passes whole, ftp-size line action=allow.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup
FTP_ROOT=$T/ftproot
D=$FTP_ROOT/pub
mkdir -p "$D"
for f in lie-50000-long.bin lie-200000-short.bin lie-100000-right.bin grows.bin; do
    head -c 100000 /dev/urandom >"$D/$f"
done
free_port LIAR_PORT
/usr/bin/python3 - "$FTP_ROOT" "$LIAR_PORT" >"$T/liar.log" 2>&1 <<'PY' &
import logging, os, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)

class Liar(FTPHandler):
    """Announces N bytes for a RETR of lie-N-*, whatever the file's size."""
    lie = None

    def ftp_RETR(self, file):
        base = os.path.basename(file)
        self.lie = int(base.split("-")[1]) if base.startswith("lie-") else None
        return FTPHandler.ftp_RETR(self, file)

    def respond(self, resp, *args, **kw):
        if self.lie is not None and resp[:4] in ("125 ", "150 "):
            resp = "%s (%d bytes)." % (resp.rstrip("."), self.lie)
            self.lie = None
        return FTPHandler.respond(self, resp, *args, **kw)

a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elr")
Liar.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), Liar).serve_forever(timeout=1)
PY
track_pid $!
wait_listen "$LIAR_PORT" 20 || fail "the lying pyftpdlib did not start: $(cat "$T/liar.log")"

AUDIT=$T/audit.json
write_proxyd_conf 'buffer="64k"' "<audit target=\"file:$AUDIT\"/>"
FTP_ALL='<command name="*" action="accept"/>'
svc() { # NAME FTP_ATTRS XML
    local p
    free_port p
    write_ftp_service "$1" "$p" "<ftp $2><limits timeout=\"10s\"/>$FTP_ALL</ftp>
  $3" 127.0.0.1 "$LIAR_PORT"
    eval "PORT_${1//-/_}=$p"
}
svc block 'size-mismatch="block"' '<audit/>'
svc block-bare 'size-mismatch="block"' ''
svc allow '' '<audit/>'
start_proxyd
port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }

# get SERVICE FILE [size|rest]: RETR pub/FILE into $T/got; with "size",
# SIZE first, then the file grows by 50000 bytes before the RETR; with
# "rest", REST 50000 before it. Prints
# "bytes=N reply=LINE".
get() {
    timeout 60 /usr/bin/python3 - "$(port_of "$1")" "$2" "$T/got" "$D/$2" "${3:-}" <<'PY' 2>>"$T/client.err" || echo "client failed rc=$?"
import ftplib, os, sys
port, name, local, path, mode = sys.argv[1:6]
f = ftplib.FTP()
f.connect("127.0.0.1", int(port), timeout=30)
f.login()
f.cwd("pub")
f.voidcmd("TYPE I")
if mode == "size":
    f.sendcmd("SIZE " + name)
    with open(path, "ab") as g:
        g.write(os.urandom(50000))
if mode == "rest":
    f.sendcmd("REST 50000")
n = 0
conn = f.transfercmd("RETR " + name)
with open(local, "wb") as out:
    try:
        while True:
            d = conn.recv(16384)
            if not d:
                break
            out.write(d)
            n += len(d)
    except OSError:
        pass
conn.close()
try:
    reply = f.getresp()
except ftplib.Error as e:
    reply = str(e)
print("bytes=%d reply=%s" % (n, reply.splitlines()[0]))
try:
    f.quit()
except (OSError, ftplib.Error):
    pass
PY
}
bytes_of() { sed -E 's/^bytes=([0-9]+) .*/\1/' <<<"$1"; }
last_record() { # DICT: the last record has these fields
    python3 - "$AUDIT" "$1" <<'PY' || fail "audit record: see above"
import json, sys
rec = json.loads(open(sys.argv[1]).read().splitlines()[-1])
bad = ["%s=%r (want %r)" % (k, rec.get(k, "ABSENT"), v)
       for k, v in eval(sys.argv[2]).items() if rec.get(k, "ABSENT") != v]
if bad:
    print("record %s: %s" % (bad, rec))
    sys.exit(1)
PY
}
N=0
for s in block block-bare; do
    info "$s: longer than announced"
    r=$(get "$s" lie-50000-long.bin)
    [[ $r =~ reply=550\ lie-50000-long\.bin:\ refused:\ more\ data\ than\ the\ announced\ size\ \(50000\ bytes\)$ ]] ||
        fail "$s: longer: got '$r'"
    (($(bytes_of "$r") <= 50000)) || fail "$s: longer: the client had $(bytes_of "$r") bytes, over the 50000 announced"
    assert_log "ftp-size mismatch announced=50000 size=[0-9]+\+ action=block file=\"lie-50000-long\.bin\" user=anonymous dir=download"

    info "$s: shorter than announced"
    r=$(get "$s" lie-200000-short.bin)
    [[ $r =~ reply=550\ lie-200000-short\.bin:\ refused:\ less\ data\ than\ the\ announced\ size\ \(200000\ bytes\)$ ]] ||
        fail "$s: shorter: got '$r'"
    (($(bytes_of "$r") < 100000)) || fail "$s: shorter: the client had the whole file"
    assert_log "ftp-size mismatch announced=200000 size=100000 action=block file=\"lie-200000-short\.bin\" user=anonymous dir=download"

    info "$s: the right size"
    r=$(get "$s" lie-100000-right.bin)
    assert_eq "$r" "bytes=100000 reply=226 Transfer complete." "$s: right size"
    assert_eq "$(sha256_of "$T/got")" "$(sha256_of "$D/lie-100000-right.bin")" "$s: right size: sha256"
    if [[ $s == block ]]; then
        N=$((N + 3)); wait_records "$AUDIT" $N
        last_record "{'verdict': 'accept', 'announced_size': 100000, 'size': 100000, 'complete': True}"
    fi
done
python3 - "$AUDIT" <<'PY' || fail "the refused transfers' records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
long_, short = recs[0], recs[1]
for r, ann in ((long_, 50000), (short, 200000)):
    assert r["verdict"] == "deny" and r["reason"] == "size-mismatch", r
    assert r["rule"] == "ftp/@size-mismatch" and r["complete"] is False, r
    assert r["announced_size"] == ann, r
assert short["size"] == 100000, short
PY

info "block: the file grew between SIZE and RETR"
r=$(get block grows.bin size)
[[ $r =~ reply=550\ grows\.bin:\ refused:\ more\ data\ than\ the\ announced\ size\ \(100000\ bytes\)$ ]] ||
    fail "grown file: got '$r'"
(($(bytes_of "$r") <= 100000)) || fail "grown file: the client had $(bytes_of "$r") bytes"
N=$((N + 1)); wait_records "$AUDIT" $N
last_record "{'file': '/pub/grows.bin', 'announced_size': 100000, 'verdict': 'deny', 'reason': 'size-mismatch'}"

info "block: a REST's transfer is not checked (it moves part of the file)"
r=$(get block-bare lie-100000-right.bin rest)
assert_eq "$r" "bytes=50000 reply=226 Transfer complete." "block: REST 50000 then RETR"
cmp -s "$T/got" <(tail -c 50000 "$D/lie-100000-right.bin") || fail "REST: not the file's last 50000 bytes"

info "allow (default)"
r=$(get allow lie-200000-short.bin)
assert_eq "$r" "bytes=100000 reply=226 Transfer complete." "allow: shorter"
assert_log "ftp-size mismatch announced=200000 size=100000 action=allow file=\"lie-200000-short\.bin\" user=anonymous dir=download"
r=$(get allow lie-50000-long.bin)
assert_eq "$r" "bytes=100000 reply=226 Transfer complete." "allow: longer"
assert_log "ftp-size mismatch announced=50000 size=100000 action=allow file=\"lie-50000-long\.bin\" user=anonymous dir=download"
N=$((N + 2)); wait_records "$AUDIT" $N
last_record "{'verdict': 'accept', 'announced_size': 50000, 'size': 100000, 'complete': True, 'reason': 'ABSENT'}"
n=$(grep -c "ftp-size mismatch" "$PROXYD_LOG" || true)
assert_eq "$n" 7 "ftp-size lines (one per mismatched transfer)"
info "ok"
