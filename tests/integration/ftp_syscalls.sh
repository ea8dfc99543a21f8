#!/usr/bin/env bash
# What FTP transfers through proxyd (one worker, vsftpd behind it) cost in
# system calls, counted with strace -c over N passive RETRs of 1 KB (one
# control and one data connection each), within budgets. epoll_ctl fails
# only as the DEL libevent's changelist (EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST,
# worker.c) applies at the next loop pass to a socket proxyd took off the
# loop and then closed in the same pass: EBADF, four per transfer (the two
# data sockets, the data listener, the client's control socket). The code
# does event_del before close; the DEL is deferred, and the close already
# took the socket out of epoll. The per-call list goes to the output.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/syscalls_lib.sh"
need_ftp
need_cmds strace ss
[[ ${PROXYD_SANITIZED:-0} == 1 ]] && skip "syscall counts are checked on the normal build, not under sanitizers"
setup
N=30
start_vsftpd
head -c 1K /dev/urandom >"$FTP_ROOT/pub/1k.bin"
chmod 644 "$FTP_ROOT/pub/1k.bin"
free_port PORT
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_ftp_service ftp "$PORT" '<ftp data-ports="42000-42999"><command name="*" action="accept"/></ftp>'
start_proxyd
URL=$(ftp_url "$PORT" pub/1k.bin)
want=$(sha256_of "$FTP_ROOT/pub/1k.bin")
rc=$(curl_ftp -o /dev/null "$URL")
assert_eq "$rc" 0 "warm-up RETR"

# failed calls of NAME in an strace -c FILE (the errors column, when any)
count_errors() {
    awk -v n="$1" '$NF == n && $1 ~ /^[0-9.]+$/ { print (NF == 6 ? $5 : 0); f = 1 } END { if (!f) print 0 }' "$2"
}

strace_start "$PROXYD_PID" "$T/strace.txt" -f -c
for ((i = 0; i < N; i++)); do
    got=$(curl -sS --max-time 20 "$URL" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$want" "sha256 of RETR $i through proxyd"
done
# every session ended (its data channel with it) before the count stops
for ((i = 0; i < 100; i++)); do
    (($(grep -c 'session-end service=ftp ' "$PROXYD_LOG" || true) >= N + 1)) && break
    sleep 0.1
done
assert_ge "$(grep -c 'session-end service=ftp ' "$PROXYD_LOG" || true)" $((N + 1)) "session-end lines"
settle "( sport = :$PORT )"
strace_stop
[[ -s $T/strace.txt ]] || fail "strace wrote nothing: $(cat "$T/strace.txt.err")"
per_call_list "$T/strace.txt"
total=$(calls_total "$T/strace.txt")
info "without epoll_wait and the log thread's poll: $total calls, $((total * 100 / N))/100 per transfer"
info "epoll_ctl: $(count_calls epoll_ctl "$T/strace.txt") calls, $(count_errors epoll_ctl "$T/strace.txt") failed"
ctl=$(count_calls epoll_ctl "$T/strace.txt")
failed=$(count_errors epoll_ctl "$T/strace.txt")
((ctl <= 13 * N)) || fail "epoll_ctl: $ctl calls for $N transfers, more than 13 per transfer"
((failed <= 5 * N)) || fail "epoll_ctl: $failed failed for $N transfers, more than 5 (the 4 closed sockets' deferred DEL) per transfer"
((total <= 90 * N)) || fail "$total calls for $N transfers: more than 90 per transfer"
info "ok"
