#!/usr/bin/env bash
# A reload whose new service cannot have its port (another process holds
# it, even with SO_REUSEPORT) is refused as a whole: file:line in the log,
# the failed-reload counter, the running services untouched, and no port
# silently shared with a stranger.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file index.html 1024
start_nginx
free_port P1
free_port P_TAKEN
write_proxyd_conf
write_service web "$P1" "$NGINX_PORT"
start_proxyd

# a stranger holds P_TAKEN with SO_REUSEPORT, as another daemon might
python3 - "$P_TAKEN" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
time.sleep(30)
PY
track_pid $!
wait_listen "$P_TAKEN" 5 $! || fail "stranger did not listen"

write_service web2 "$P_TAKEN" "$NGINX_PORT"
line=$(grep -n "<listen" "$T/policy/web2.xml" | cut -d: -f1)
kill -HUP "$PROXYD_PID"
assert_log "reload: .*web2\\.xml:$line: cannot listen on 127\\.0\\.0\\.1:$P_TAKEN: Address already in use" 5
assert_log "reload failed; the running configuration stays" 3
assert_metric ge proxyd_config_reloads_total 'result="failed"' 1
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "the running service after the refused reload"
n=$(ss -Hltn "sport = :$P_TAKEN" | wc -l)
assert_eq "$n" 1 "listening sockets on the stranger's port (proxyd must not join it)"
info "ok"
