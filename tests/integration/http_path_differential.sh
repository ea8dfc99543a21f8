#!/usr/bin/env bash
# url rules against real servers, differentially (issue 35): random
# spellings of allowed and denied files and directories (percent-encoded
# characters in either hex case, dot segments plain and encoded, "x/..",
# repeated slashes, ";params", queries, some spelling query="*file=../*"
# with reserved characters encoded; now and then an encoded '/', '\', %00,
# a bad percent-encoding, a ".." above the root, a "..;x", a #fragment;
# http_path_differential.py) go to nginx and to Python's http.server,
# directly and through proxyd (HTTP/1.1, and every fourth over h2c). What
# the server serves directly decides: proxyd never serves a denied file,
# serves an allowed one identically, and refuses (400) only the unsafe
# spellings it documents. HTTP_PATH_TABLE=FILE keeps the table.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
/usr/bin/python3 -c 'import h2' 2>/dev/null || skip "python3-h2 is not installed"
setup

DIFF="$(dirname "$0")/http_path_differential.py"
/usr/bin/python3 "$DIFF" --make-tree "$T/www"
start_nginx
free_port PYHTTP_PORT
/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PYHTTP_PORT" \
    >"$T/pyhttp.log" 2>&1 &
track_pid $!
wait_listen "$PYHTTP_PORT" 5 $! || fail "python http.server did not start"

# the rules of http_path_differential.py (DENY)
POLICY='<http h2c="yes">
  <url path="/admin/*" action="deny"/>
  <url path="*.php" action="deny"/>
  <url query="*file=../*" action="deny"/>
</http>'
free_port PN
free_port PP
write_proxyd_conf
write_http_service ngx "$PN" "$NGINX_PORT" "$POLICY"
write_http_service pyh "$PP" "$PYHTTP_PORT" "$POLICY"
start_proxyd

: >"$T/paths.tsv"
rc=0
/usr/bin/python3 "$DIFF" nginx "$NGINX_PORT" "$PN" "$PN" "$T/paths.tsv" 15 || rc=1
/usr/bin/python3 "$DIFF" http.server "$PYHTTP_PORT" "$PP" "$PP" "$T/paths.tsv" 15 || rc=1
[[ -z ${HTTP_PATH_TABLE:-} ]] || cp "$T/paths.tsv" "$HTTP_PATH_TABLE"
((rc == 0)) || fail "proxyd's url decisions differ from what the servers serve (above)"

# Both servers served denied files directly (which proxyd refused) and
# allowed ones (which it served), by many spellings, both ways.
for srv in nginx http.server; do
    for kind in deny allow unsafe; do
        for proto in h1 h2; do
            n=$(grep -c "^$srv	$proto	.*	$kind	ok\$" "$T/paths.tsv" || true)
            assert_ge "$n" $([[ $proto == h1 ]] && echo 100 || echo 25) \
                "$srv over $proto: $kind spellings judged"
        done
    done
done
# and the query rule held against the application's reading of the query
for srv in nginx http.server; do
    n=$(grep -c "^$srv	h1	.*	qdeny	ok\$" "$T/paths.tsv" || true)
    assert_ge "$n" 50 "$srv: denied queries judged"
    n=$(grep -c "^$srv	h1	[^	]*;[^	]*	.*	ok\$" "$T/paths.tsv" || true)
    assert_ge "$n" 50 "$srv: spellings with ;params judged"
done
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS ($(wc -l <"$T/paths.tsv") answers compared)"
