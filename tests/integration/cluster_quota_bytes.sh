#!/usr/bin/env bash
# A byte quota across a cluster (cluster/@store) holds while the partner's
# transfers run on several nodes at once: two proxyd processes, nodes a
# and b, share one Redis store and an ftp service with quota-bytes=QUOTA
# in front of one vsftpd; PER_NODE downloads of a FILE-sized file start
# together through each node, read slowly so that they all run at once.
# The store charges bytes before they move, in leases (a 32nd of the
# quota, at least 64 KiB), and grants only what the day has left: the
# bytes the nodes moved together (their data-transfer lines) may pass
# QUOTA by one byte per transfer (the byte that shows a transfer goes on
# at its lease's end), never more; the clients got no more than that.
# Some transfers are cut (reset), each logged on its node (verdict=cut),
# or refused at their start (550) once the day's bytes are all charged;
# the store's count of the day ends with what moved (leases not used
# given back), never above QUOTA. Before leases, each node let its
# transfers move up to QUOTA on its own count: together about twice QUOTA.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli
setup

QUOTA=$((2 * 1024 * 1024))
FILE=$((1024 * 1024))
PER_NODE=4
N=$((2 * PER_NODE))
start_vsftpd
head -c "$FILE" /dev/urandom >"$FTP_ROOT/pub/big.bin"
chmod 644 "$FTP_ROOT/pub/big.bin"
start_store
for n in a b; do
    qnode "$n" refuse 2 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"
done

# N downloads at once, PER_NODE through each node, each read in 32 KiB
# blocks 15 ms apart (about 2 MB/s: they overlap); prints the bytes each
# received and its end (226, or the error's code)
timeout 60 python3 "$(dirname "$0")/ftp_parallel.py" 127.0.0.1 "${FTP[a]},${FTP[b]}" pub/big.bin "$N" 0.015 >"$T/got.txt"
info "downloads (bytes received, end): $(tr '\n' ' ' <"$T/got.txt")"
assert_eq "$(wc -l <"$T/got.txt")" "$N" "downloads that reported"
received=$(awk '{ s += $1 } END { print s + 0 }' "$T/got.txt")
# what the nodes moved: their data-transfer lines (one per download that
# got a data connection; a log thread writes them within 50 ms)
transfers() { cat "${LOG[a]}" "${LOG[b]}" | grep -c 'data-transfer download cmd=RETR file="pub/big.bin"' || true; }
refused() { cat "${LOG[a]}" "${LOG[b]}" | grep -c 'ftp-quota user=anonymous kind=bytes .* cmd=RETR verdict=refused by=cluster' || true; }
for ((k = 0; k < 100; k++)); do (($(transfers) + $(refused) >= N)) && break; sleep 0.05; done
assert_eq "$(($(transfers) + $(refused)))" "$N" "downloads the nodes ran or refused"
total=$(cat "${LOG[a]}" "${LOG[b]}" | sed -nE 's/.* data-transfer download cmd=RETR file="pub\/big\.bin" bytes=([0-9]+) .*/\1/p' |
    awk '{ s += $1 } END { print s + 0 }')
whole=$(awk -v f="$FILE" '$1 == f && $2 == 226' "$T/got.txt" | wc -l)
cuts=$(cat "${LOG[a]}" "${LOG[b]}" | grep -c 'ftp-quota user=anonymous kind=bytes .* verdict=cut' || true)
info "the nodes moved $total bytes in all, the clients received $received (quota $QUOTA, bound $((QUOTA + N))): $whole whole, $cuts cut, $(refused) refused at the start"
((total <= QUOTA + N)) || fail "the cluster moved $total bytes, past quota-bytes=$QUOTA by $((total - QUOTA)) (bound: $N, a byte per transfer)"
((received <= total)) || fail "the clients received $received bytes, the nodes say they moved $total"
# the quota was used, not refused early: leases not used came back
((total >= QUOTA - 64 * 1024 * N)) || fail "only $total bytes moved of a $QUOTA quota: leases not given back?"
# Transfers that overlap end cut at the quota; on a loaded machine the
# first ones may end whole before the others start (then those others are
# refused at their start): either way the quota was filled, by whole
# transfers only in the second case.
((cuts >= 1 || whole * FILE == total)) || fail "no download was cut at the quota and the whole ones do not add up to what moved ($whole x $FILE != $total)"
# the store's count of the day: what moved, never above the quota
key=$(rcli --scan --pattern 'proxyd:quota:*:ftp:anonymous' | head -n 1)
[[ -n $key ]] || fail "no key for the partner in the store"
for ((k = 0; k < 50; k++)); do
    b=$(rcli HGET "$key" b)
    ((b <= total + N && b + N >= total)) && break
    sleep 0.1
done
info "the store's bytes of the day: $b"
((b <= QUOTA)) || fail "the store counts $b bytes, past the quota $QUOTA"
((b + N >= total && b <= total + N)) || fail "the store counts $b bytes, the clients received $total"
info "PASS"
