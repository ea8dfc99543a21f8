#!/usr/bin/env bash
# FEAT through proxyd lists exactly the features whose commands the policy
# accepts. The server is pyftpdlib answering FEAT with ProFTPD 1.3.8's list
# (CLNT, CSID, HOST, MFF, RANG STREAM, SITE ..., TLS ...). For each of
# several policies, every feature of the server's list is tried through
# proxyd: one the client was shown must not be refused by proxyd, one it
# was not shown must be (TVFS names no command and stays; AUTH/PBSZ/PROT/
# CCC are proxyd's own business and never come from the server).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds curl
/usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null ||
    skip "python3-pyftpdlib missing (scripts/deps installs it)"
setup
mkdir -p "$T/root"

free_port FEAT_PORT
/usr/bin/python3 - "$T/root" "$FEAT_PORT" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
PROFTPD_FEAT = [
    "AUTH TLS", "CCC", "CLNT", "CSID", "EPRT", "EPSV", "HOST", "LANG en-US*",
    "MDTM", "MFF modify;UNIX.group;UNIX.mode;", "MFMT",
    "MLST modify*;perm*;size*;type*;unique*;UNIX.group*;UNIX.mode*;",
    "PBSZ", "PROT", "RANG STREAM", "REST STREAM", "SITE COPY", "SITE MKDIR",
    "SITE RMDIR", "SITE SYMLINK", "SITE UTIME", "SIZE", "TVFS", "UTF8",
]
class Handler(FTPHandler):
    def ftp_FEAT(self, line):
        self.push("211-Features:\r\n" +
                  "".join(" %s\r\n" % f for f in PROFTPD_FEAT) + "211 End\r\n")
a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elr")
Handler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever(timeout=1)
PY
PY_PID=$!
track_pid "$PY_PID"
wait_listen "$FEAT_PORT" 20 "$PY_PID" || {
    cat "$T/pyftpd.log" >&2
    fail "pyftpdlib did not start on 127.0.0.1:$FEAT_PORT"
}

# name -> <ftp> section
declare -A POL=(
    [default]='<ftp/>'
    [star]='<ftp><command name="*" action="accept"/></ftp>'
    [strict]='<ftp client-data="passive"><command name="REST SITE MDTM LANG" action="deny"/><command name="CLNT" action="accept"/></ftp>'
    [active]='<ftp client-data="active"><command name="OPTS MLST MLSD" action="deny"/><command name="HOST" action="accept"/></ftp>'
)
declare -A PORTS
write_proxyd_conf
for name in "${!POL[@]}"; do
    free_port P
    PORTS[$name]=$P
    cat >"$T/policy/$name.xml" <<XML
<service name="$name" analyser="ftp">
  <listen address="127.0.0.1" port="$P" mode="fixed"/>
  <target address="127.0.0.1" port="$FEAT_PORT"/>
  ${POL[$name]}
</service>
XML
    PROXYD_PORTS+=("$P")
done
start_proxyd

for name in default star strict active; do
    timeout 60 /usr/bin/python3 - "${PORTS[$name]}" >"$T/feat.$name" 2>&1 <<'PY' || true
import ftplib, sys
SERVER = ["CLNT", "CSID", "EPRT", "EPSV", "HOST", "LANG", "MDTM", "MFF",
          "MFMT", "MLST", "RANG", "REST", "SITE", "SIZE", "TVFS", "UTF8"]
# a harmless command for each feature: only whether proxyd refuses counts
TRY = {"LANG": "LANG en", "MLST": "MLST", "REST": "REST 0",
       "SITE": "SITE HELP", "UTF8": "OPTS UTF8 ON", "EPRT": "EPRT"}
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=10)
f.login("anonymous", "x@y")
resp = f.sendcmd("FEAT")
lines = resp.splitlines()[1:-1]
shown = set(l.split()[0].upper() for l in lines if l.startswith(" "))
print("shown:", " ".join(sorted(shown)))
for w in ("AUTH", "PBSZ", "PROT", "CCC"):
    if w in shown:
        print("MISMATCH %s shown: TLS is proxyd's own" % w)
for w in SERVER:
    if w == "TVFS":
        if w not in shown:
            print("MISMATCH TVFS dropped")
        continue
    try:
        r = f.sendcmd(TRY.get(w, w))
    except ftplib.Error as e:
        r = str(e)
    refused = ("proxy" in r or r.startswith("500 Unknown command")
               or "mode not allowed here" in r)
    print("%s shown=%s refused=%s reply=%r" % (w, w in shown, refused, r))
    if (w in shown) == refused:
        print("MISMATCH %s" % w)
f.quit()
print("done")
PY
    info "$name: $(grep '^shown:' "$T/feat.$name")"
    grep -q '^done$' "$T/feat.$name" || fail "$name: the FEAT check did not finish: $(tail -n 3 "$T/feat.$name")"
    if grep -q MISMATCH "$T/feat.$name"; then
        cat "$T/feat.$name" >&2
        fail "$name: FEAT lists a feature proxyd refuses, or hides one it accepts"
    fi
done
# what the issue reported: ProFTPD's extensions under the default policy
for w in CLNT CSID HOST MFF RANG; do
    grep -q "^$w shown=False refused=True" "$T/feat.default" || fail "default: $w"
done
grep -q "^CLNT shown=True refused=False" "$T/feat.strict" || fail "strict: an accepted CLNT is not listed"
info "PASS"
