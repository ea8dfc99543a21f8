#!/usr/bin/env bash
# What one 250 KB R66 SEND (mode 1, 64 KiB blocks, the bench's transfer)
# costs proxyd's worker in system calls, from an strace of N sequential
# SENDs on one connection: each block's head is read alone and its body
# spliced; head and body leave in one splice (the head goes into the pipe
# first); a pass that is through at once leaves the read event as it was
# (no epoll_ctl); and what the socket most likely holds already is read at
# once, not after another epoll turn: the next head after a pass, the rest
# of a frame whose head alone was read (the EndTransfer after the last
# block). Those two pattern checks are exact; the counts allow for a block
# that reached proxyd in two pieces. epoll_wait is shown, not checked: how
# often proxyd waits for its peers is up to them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds strace sha256sum
need_r66peer
# The counts are the production build's; a sanitizer adds calls of its own.
[[ -n ${PROXYD_SANITIZE:-} ]] && skip "syscall counts are checked on the normal build, not under sanitizers"
setup

N=30
BLOCKS=4            # 256000 bytes in 64 KiB blocks
mkdir -p "$T/cli"
head -c 256000 /dev/urandom >"$T/cli/f250k"
start_r66_server
free_port R66_PORT
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 max-block="1m"><host id="hosta"/><rule name="bench"/></r66>'
start_proxyd

send() { # COUNT
    r66c "$R66_PORT" hosta:pwA --rule bench --mode 1 --block 65536 --count "$1" \
        --quiet --send "$T/cli/f250k"
    [[ $R66_RC == 0 ]] || fail "client failed ($R66_RC): $(cat "$T/client.err")"
}
send 2    # warm-up: the pipe pool, the first session's allocations

tid=""
for f in /proc/"$PROXYD_PID"/task/*/comm; do
    if [[ $(cat "$f") == px-worker* ]]; then
        tid=$(basename "$(dirname "$f")")
        break
    fi
done
[[ -n $tid ]] || fail "no px-worker thread in proxyd (pid $PROXYD_PID)"
strace_start "$tid" "$T/strace.txt" -s 1 -e trace=readv,writev,splice,epoll_wait,epoll_ctl
send "$N"
for ((i = 0; i < 100; i++)); do
    (($(session_end_lines r66 | wc -l) >= 2)) && break
    sleep 0.1
done
(($(session_end_lines r66 | wc -l) >= 2)) || fail "the traced session did not end"
strace_stop
[[ -s $T/strace.txt ]] || fail "strace wrote nothing: $(cat "$T/strace.txt.err")"

# the transfers themselves: intact, logged, every block spliced
for k in 1 "$N"; do
    assert_eq "$(sha256_of "$R66_SRV_DIR/f250k.$k")" "$(sha256_of "$T/cli/f250k")" "f250k.$k on the server"
done
assert_eq "$(grep -c "r66-transfer .*file=f250k\.[0-9]* size=256000 blocks=$BLOCKS .*verdict=accept payload=splice" \
    "$PROXYD_LOG")" "$((N + 2))" "r66-transfer lines with payload=splice"

# The client's socket is the one whose reads are capped to a head (30
# bytes); the pipe-to-server splices are the other splices.
cfd=$(awk '/^readv\(/ && index($0, "iov_len=30}") && $NF == 30 { sub(/^readv\(/, ""); sub(/,.*/, ""); print; exit }' \
    "$T/strace.txt")
[[ -n $cfd ]] || fail "no capped head read in the trace: $(head -n 20 "$T/strace.txt")"
awk -v c="$cfd" -v n="$N" -v b="$BLOCKS" '
    { call = $0; sub(/\(.*/, "", call); fd = $0; sub(/^[a-z_]*\(/, "", fd); sub(/,.*/, "", fd) }
    call == "epoll_wait" { waits++ }
    call == "epoll_ctl" { ctls++ }
    call == "splice" && fd == c { s_in++ }
    call == "splice" && fd != c { s_out++ }
    # what comes right after a capped read that filled its cap, and after a
    # pass that wrote the last byte of its block
    prev_capped && call == "epoll_wait" { capped_then_wait++ }
    prev_out && call != "readv" { out_then_other++ }
    { prev_capped = (call == "readv" && fd == c && index($0, "iov_len=30}") && $NF == 30)
      prev_out = (call == "splice" && fd != c && ($NF == 65566 || $NF == 59422)) }
    END {
        printf "per transfer: %.2f epoll_wait, %.2f epoll_ctl, %.2f splice in, %.2f splice out\n",
            waits / n, ctls / n, s_in / n, s_out / n
        printf "capped read then epoll_wait: %d; splice out then not a read: %d\n",
            capped_then_wait, out_then_other
        printf "%d %d %d %d %d\n", s_out, ctls, capped_then_wait, out_then_other, waits > "/dev/stderr"
    }' "$T/strace.txt" 2>"$T/counts" | sed "s/^/[$TEST_NAME] /"
read -r sout ctls capped_then_wait out_then_other waits <"$T/counts"

# head and body in one splice: one splice out per block (a block that
# came in two pieces takes one more; allow that for one in four)
((sout >= N * BLOCKS)) || fail "$sout splices out for $((N * BLOCKS)) blocks: fewer than one each?"
((sout <= N * BLOCKS * 5 / 4)) || fail "$sout splices out for $((N * BLOCKS)) blocks: the head is spliced apart from its body"
# a pass through at once costs no epoll_ctl (one that waited may cost one)
((ctls <= N / 2)) || fail "$ctls epoll_ctl for $N transfers: the passes take the read event off and on"
assert_eq "$capped_then_wait" 0 "capped reads that filled their cap followed by an epoll_wait"
assert_eq "$out_then_other" 0 "passes through followed by something else than the next head's read"
r66_finish
info "ok"
