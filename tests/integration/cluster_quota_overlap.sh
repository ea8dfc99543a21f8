#!/usr/bin/env bash
# Two metered transfers of one session at once under a byte quota the
# cluster's store leases (cluster/@store): a client sends PASV and RETR
# for its next file while its download still runs (proxyd judges the
# command at once; the server answers it after the 226). Each data
# channel keeps its own leases: the running download goes on to its end
# (its next leases its own), and the store's bytes of the day are what
# moved. Before, the session had one lease state: the second RETR took
# it over, the first download's next leases went to the second channel
# and it stalled for good (the client timed out; 12 of 48 MiB moved).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli python3
setup

QUOTA=$((256 * 1024 * 1024))
BIG=$((48 * 1024 * 1024))
start_vsftpd
head -c "$BIG" /dev/urandom >"$FTP_ROOT/pub/big.bin"
echo small >"$FTP_ROOT/pub/small.txt"
chmod 644 "$FTP_ROOT/pub/big.bin" "$FTP_ROOT/pub/small.txt"
start_store
qnode a refuse 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"

# RETR pub/big.bin (passive), 3 MiB of it read slowly, then PASV and RETR
# pub/small.txt pipelined on the control connection, the rest of big.bin
# read; prints the bytes of big.bin received
got=$(timeout 60 python3 - "${FTP[a]}" <<'PY'
import re, socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
f = c.makefile("rb")
def reply():
    while True:
        l = f.readline().decode()
        if not l:
            sys.exit("the control connection closed")
        if re.match(r"^\d{3} ", l):
            return l.strip()
def cmd(s):
    c.sendall((s + "\r\n").encode())
    return reply()
reply()
cmd("USER anonymous")
cmd("PASS t@example.org")
cmd("TYPE I")
h = re.search(r"\((\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\)", cmd("PASV")).groups()
d = socket.create_connection(("127.0.0.1", int(h[4]) * 256 + int(h[5])), timeout=10)
if not cmd("RETR pub/big.bin").startswith("150"):
    sys.exit("RETR refused")
got = 0
while got < 3 * 1024 * 1024:
    b = d.recv(65536)
    if not b:
        break
    got += len(b)
    time.sleep(0.002)
c.sendall(b"PASV\r\nRETR pub/small.txt\r\n")
try:
    while True:
        b = d.recv(65536)
        if not b:
            break
        got += len(b)
except socket.timeout:
    pass
d.close()
print(got)
# the 226 of big.bin: its channel ended (the small one's never connects)
if got == 48 * 1024 * 1024:
    reply()
    time.sleep(0.3)
PY
)
info "big.bin: $got of $BIG bytes received"
assert_eq "$got" "$BIG" "the first download, with the second RETR judged while it ran"
assert_log_in "${LOG[a]}" "data-transfer download cmd=RETR file=\"pub/big.bin\" bytes=$BIG .* end=ok"
# the session's end gives back the second RETR's lease: the day is what moved
key=$(rcli --scan --pattern 'proxyd:quota:*:ftp:anonymous' | head -n 1)
b=$(store_bytes "$key" "$BIG")
assert_eq "$b" "$BIG" "the store's bytes of the day"
info "PASS"
