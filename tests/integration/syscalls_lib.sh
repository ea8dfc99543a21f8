# shellcheck shell=bash
# The strace -c harness of the system-calls-per-connection tests
# (syscalls_per_conn, http_syscalls_per_conn), on top of lib.sh: proxyd
# with one worker before nginx, N sequential ab connections (no
# keep-alive) counted over all of proxyd's threads.
#
#   syscalls_setup             # skip under a sanitizer; setup, N=200, nginx
#                              # with 10k.bin, port P, proxyd.conf (one
#                              # worker, warnings only) to add a service to
#   syscalls_warm              # (proxyd started) URL, 20 connections first
#   traced_ab FILE FILTER      # strace -c of the N connections into FILE,
#                              # ended once ss FILTER lists no socket
#   settle FILTER              # ss FILTER (established, close-wait) empty
#   count_calls NAME FILE      # how many NAME calls FILE counted
#   per_call_list FILE         # each call's count per connection (info)
#   calls_total FILE [NAME...] # all calls but epoll_wait, the log thread's
#                              # poll, restart_syscall and the NAMEs

syscalls_setup() {
    need_cmds nginx curl ab strace ss
    # The counts are the production build's; a sanitizer adds calls of its own.
    [[ ${PROXYD_SANITIZED:-0} == 1 ]] && skip "syscall counts are checked on the normal build, not under sanitizers"
    setup
    N=200
    make_file 10k.bin 10K
    start_nginx
    free_port P
    write_proxyd_conf
    sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s|level="info"|level="warning"|' "$PROXYD_CONF"
}

syscalls_warm() {
    URL="http://127.0.0.1:$P/10k.bin"
    timeout 60 ab -n 20 -c 1 "$URL" >"$T/warm.txt" 2>&1 || fail "warm-up ab failed: $(tail -3 "$T/warm.txt")"
}

# The last session is closed once no socket ss FILTER names is left (asked
# of the kernel, not of the admin endpoint: its calls would count).
settle() {
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -z $(ss -Htn "$1" state established state close-wait 2>/dev/null) ]] && return 0
        sleep 0.1
    done
}

traced_ab() {
    strace_start "$PROXYD_PID" "$1" -f -c
    timeout 60 ab -n "$N" -c 1 "$URL" >"$T/ab.txt" 2>&1 || fail "ab failed: $(tail -3 "$T/ab.txt")"
    assert_grep "$T/ab.txt" "^Complete requests:[[:space:]]+$N\$"
    assert_grep "$T/ab.txt" '^Failed requests:[[:space:]]+0$'
    settle "$2"
    strace_stop
    [[ -s $1 ]] || fail "strace wrote nothing: $(cat "$1.err")"
}

count_calls() {
    awk -v n="$1" '$NF == n && $1 ~ /^[0-9.]+$/ { print $4; f = 1 } END { if (!f) print 0 }' "$2"
}

per_call_list() {
    info "system calls per connection over $N connections:"
    awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "    %-16s %6.2f%s\n", $NF, $4 / n, (NF == 6 ? sprintf("  (%d failed)", $5) : "") }' \
        "$1" | sort -k2 -nr
}

calls_total() {
    local f=$1
    shift
    awk -v skip="epoll_wait poll restart_syscall $*" '
        BEGIN { split(skip, s, " "); for (k in s) no[s[k]] = 1 }
        $1 ~ /^[0-9.]+$/ && $NF != "total" && !($NF in no) { t += $4 }
        END { print t + 0 }' "$f"
}
