#!/usr/bin/env bash
# http analyser: the Host of each request on one keep-alive connection is
# its own, whatever the previous one named (the last parsed Host is kept
# per worker and taken again only when the bytes are the same): pipelined
# requests alternating Hosts of the same length, longer, with a port, an
# IPv6 literal, then a malformed one after a good one (400, closed).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx python3
setup

for i in $(seq 1 10); do printf 'body %s\n' "$i" >"$T/www/$i.txt"; done
start_nginx
free_port P
write_proxyd_conf
write_http_service web "$P" "$NGINX_PORT" '<http/>'
start_proxyd

hosts=("a.example" "a.example" "a.examplf" "a.example.b" "a.example:80"
    "a.examp:8080" "127.0.0.1" "[::1]:81" "[::1]:81" "a.example")
want=("a.example" "a.example" "a.examplf" "a.example.b" "a.example"
    "a.examp" "127.0.0.1" "[::1]" "[::1]" "a.example")
data=""
for i in "${!hosts[@]}"; do
    data+="GET /$((i + 1)).txt HTTP/1.1\r\nHost: ${hosts[$i]}\r\n\r\n"
done
data+="GET /bad HTTP/1.1\r\nHost: a.example:99999\r\n\r\n"
r=$(raw_send "$P" "$data" --out "$T/pipe")
info "pipelined: $r"
assert_eq "$(grep -c '^HTTP/1.1 200 ' "$T/pipe" || true)" "${#hosts[@]}" "200 responses"
assert_grep "$T/pipe" '^HTTP/1.1 400 ' "the malformed Host is refused"
wait_log_count 'http-request .* path=/bad status=400' 1
for i in "${!hosts[@]}"; do
    re=${want[$i]//./\\.}
    re=${re//\[/\\[}
    re=${re//]/\\]}
    assert_log "http-request client=[^ ]+ method=GET host=$re path=/$((i + 1))\.txt status=200 "
done
assert_log 'http-request client=[^ ]+ method=GET host=- path=/bad status=400 '
http_done
