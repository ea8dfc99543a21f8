#!/usr/bin/env bash
# What a new client connection through the http analyser (fixed mode, one
# worker, server connections pooled) costs in system calls, counted with
# strace -c over N sequential connections (ab without -k): no epoll_ctl
# (the client's socket is never watched when its request came with the
# connection; the pooled server connection moves between the pool and
# the session with its epoll registration unchanged), a connection
# that sat quiet in the pool through a whole loop pass is taken without a
# recv(MSG_PEEK) (paced connections), and the whole stays within the
# budget below (without epoll_wait, whose count depends on timing). The
# per-call list goes to the test's output.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/syscalls_lib.sh"
syscalls_setup
write_http_service hs "$P" "$NGINX_PORT" '<http server-pool="8" server-idle="30s"/>'
start_proxyd
syscalls_warm
reused0=$(metric_value proxyd_upstream_connections_total 'kind="reused"')

# --- ab: N connections back to back
traced_ab "$T/strace.txt" "( sport = :$P )"
# every request went over a pooled connection (else the counts below
# would measure connects)
assert_metric ge proxyd_upstream_connections_total 'kind="reused"' $((reused0 + N)) 5

calls() { count_calls "$1" "$T/strace.txt"; }
per_call_list "$T/strace.txt"
total=$(calls_total "$T/strace.txt" ioctl)
info "without epoll_wait (the log thread's poll, the metrics tick's ioctl): $total calls, $((total * 100 / N))/100 per connection"

# Per connection none: the request is read as the connection is taken
# (before its socket is watched), the client is not read while its
# request (HTTP/1.0, no keep-alive) is in flight, and the pooled server
# socket changes hands without a change. A request that came after the
# accept costs an ADD and a DEL: a quarter of them are let pass. (Was 4
# per connection: the client's ADD, its DEL applied after the close by
# libevent's changelist, failing with EBADF, and the server socket's
# MODs on its way out of the pool and back.)
(($(calls epoll_ctl) <= N / 2)) || fail "epoll_ctl: $(calls epoll_ctl) for $N connections, more than one every other connection"
assert_eq "$(calls socket)" 0 "socket: every server connection came from the pool"
# accept4 (and libevent's EAGAIN), readv x3 (the request, the response,
# the client caught up with at its end: EAGAIN), writev x2, close, at most
# the pool's recv(MSG_PEEK): 9, and the quarter's epoll_ctl (was 11).
((total * 2 <= 19 * N)) || fail "$total calls for $N connections: more than 9.5 per connection"

# --- paced connections: each one's pooled server connection sat through
# whole loop passes (a curl process starts slower than libevent's cached
# clock ticks), quiet: taken without asking the kernel (recv MSG_PEEK)
M=30
strace_start "$PROXYD_PID" "$T/strace2.txt" -f -c
for ((i = 0; i < M; i++)); do
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$URL") || fail "curl $i failed"
    [[ $code == 200 ]] || fail "curl $i: HTTP $code"
done
settle "( sport = :$P )"
strace_stop
peeks=$(count_calls recvfrom "$T/strace2.txt")
info "paced: $peeks recv(MSG_PEEK) for $M reuses"
((peeks <= M / 5)) || fail "recvfrom: $peeks for $M paced connections (a MSG_PEEK per reuse of a quiet pooled connection)"
assert_metric ge proxyd_upstream_connections_total 'kind="reused"' $((reused0 + N + M)) 5
info "ok"
