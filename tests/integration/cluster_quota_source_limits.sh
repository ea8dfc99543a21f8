#!/usr/bin/env bash
# <source-limits transfers="3/m"> beside a quota the cluster's store
# decides (cluster/@store): a transfer command waits for the store's
# answer, then runs again; it is one transfer of the source's 3 a minute,
# counted once. Before, the command's second run counted it again: the
# second RETR of a session was refused (450, too many transfers).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli python3
setup

start_vsftpd
for i in 1 2 3 4; do printf 'file %s\n' "$i" >"$FTP_ROOT/pub/f$i.txt"; done
start_store
qnode_conf a refuse 1
free_port "FTP[a]"
cat >"$T/a/policy/ftp.xml" <<XML
<service name="ftp" analyser="ftp">
  <listen address="127.0.0.1" port="${FTP[a]}" mode="fixed"/>
  <target address="127.0.0.1" port="$VSFTPD_PORT"/>
  <source-limits transfers="3/m"/>
  <ftp><user name="anonymous" quota-transfers="100" action="accept"/></ftp>
</service>
XML
qnode_start a "${FTP[a]}"

out=$(timeout 30 python3 - "${FTP[a]}" <<'PY'
import ftplib, io, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=10)
f.login()
for i in range(1, 5):
    buf = io.BytesIO()
    try:
        f.retrbinary("RETR pub/f%d.txt" % i, buf.write)
        print("OK", flush=True)
    except ftplib.error_temp as e:
        print(str(e)[:3], flush=True)
f.quit()
PY
)
info "four RETRs: $(echo $out)"
assert_eq "$(echo $out)" "OK OK OK 450" "RETRs under transfers=3/m, each also asked of the store"
key=$(rcli --scan --pattern 'proxyd:quota:*:ftp:anonymous' | head -n 1)
assert_eq "$(rcli HGET "$key" t)" 3 "the store's transfers of the day"
info "PASS"
