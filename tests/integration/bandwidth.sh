#!/usr/bin/env bash
# Bandwidth limits (proxyd/base/bucket.h token buckets): session-bandwidth caps each
# session per direction, global-bandwidth caps all sessions together per
# direction. Mostly lower bounds on time (a loaded machine only makes a
# transfer slower); the one upper bound leaves 2 s of slack over a 3 s
# transfer that a halved rate would stretch to 6 s. Unlimited, the same
# bytes take milliseconds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file f3m.bin $((3 * 1024 * 1024))
make_file f8m.bin $((8 * 1024 * 1024))
SHA=$(sha256_of "$T/www/f3m.bin")
start_nginx
free_port P1

fetch_secs() { # PORT OUT -> seconds, checks status and bytes
    local t0 t1 r
    t0=$(now_ms)
    r=$(http_get "http://127.0.0.1:$1/f3m.bin" "$2")
    t1=$(now_ms)
    assert_eq "$r" "0 200" "download via port $1"
    assert_eq "$(sha256_of "$2")" "$SHA" "bytes via port $1"
    echo $(((t1 - t0) / 1000))
}

info "session-bandwidth=1m: 3 MB takes about 3 s"
write_proxyd_conf 'session-bandwidth="1m"'
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_service web "$P1" "$NGINX_PORT"
start_proxyd
s=$(fetch_secs "$P1" "$T/o1")
assert_ge "$s" 2 "seconds for 3 MB at session-bandwidth 1m"

info "global-bandwidth=2m, session limit off: two parallel 3 MB downloads share it (about 3 s)"
sed -i 's|session-bandwidth="1m"|global-bandwidth="2m"|' "$PROXYD_CONF"
kill -HUP "$PROXYD_PID"
assert_log "reload done" 5
t0=$(now_ms)
fetch_secs "$P1" "$T/o2" >/dev/null &
A=$!
fetch_secs "$P1" "$T/o3" >/dev/null &
B=$!
wait "$A" || fail "first parallel download failed"
wait "$B" || fail "second parallel download failed"
t1=$(now_ms)
assert_ge "$(((t1 - t0) / 1000))" 2 "seconds for 2 x 3 MB at global-bandwidth 2m"
assert_lt "$(((t1 - t0) / 1000))" 5 "seconds for 2 x 3 MB at global-bandwidth 2m (each direction gets all of it)"

info "reload to unlimited: the next download is not limited"
sed -i 's|global-bandwidth="2m"|global-bandwidth="0"|' "$PROXYD_CONF"
kill -HUP "$PROXYD_PID"
deadline=$(($(date +%s) + 5))
until (($(grep -c "reload done" "$PROXYD_LOG") >= 2)); do
    (($(date +%s) < deadline)) || fail "second reload not done"
    sleep 0.1
done
t0=$(now_ms)
r=$(http_get "http://127.0.0.1:$P1/f8m.bin" "$T/o4")
t1=$(now_ms)
assert_eq "$r" "0 200" "download after the reload"
assert_lt "$(((t1 - t0) / 1000))" 2 "seconds for 8 MB with no limit left after the reload (4 s if still limited)"
info "ok"
