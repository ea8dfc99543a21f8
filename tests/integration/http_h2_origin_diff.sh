#!/usr/bin/env bash
# The HTTP/1.1 request corpus (llhttp's request vectors, h2o's HTTP/1
# seeds in H2_CORPUS_DIR, /work/shared/corpus/http1) through proxyd to an
# HTTP/1.1 server and to an HTTP/2 one: each case goes to a service with
# server-h2="no" and to one with server-h2="yes" in front of the same
# origin (http_h2_origin_diff.py's, HTTP/1.1 and h2c on one port), and
# what the origin saw (method, path, authority, fields, body) and what
# the client got (statuses, bodies) must agree, after the differences by
# design the driver lists (EXPLAINED: Host as :authority, no
# Transfer-Encoding and te: trailers over HTTP/2, Via). Bounded in time.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
/usr/bin/python3 -c 'import h2' 2>/dev/null || fail "Debian's python3-h2 is missing (scripts/deps)"
setup

VECTORS=$REPO_DIR/tests/data/llhttp-vectors.json
[[ -f $VECTORS ]] || fail "missing $VECTORS"
CORPUS=${H2_CORPUS_DIR:-/work/shared/corpus/http1}
dirs=()
[[ -d $CORPUS ]] && dirs+=(--corpus-dir "$CORPUS")
free_port ORIG
free_port PN
free_port PY
write_proxyd_conf
# Every method goes: the corpus is about what reaches the server.
OPEN='<request method="*" action="accept"/>'
write_http_service n "$PN" "$ORIG" "<http server-h2=\"no\">$OPEN</http>"
write_http_service y "$PY" "$ORIG" "<http server-h2=\"yes\">$OPEN</http>"
start_proxyd

rc=0
/usr/bin/python3 "$LIB_DIR/http_h2_origin_diff.py" --no "$PN" --yes "$PY" \
    --origin "$ORIG" --vectors "$VECTORS" "${dirs[@]}" \
    --max-seconds "${DIFF_SECONDS:-40}" >"$T/diff.out" 2>&1 || rc=$?
sed "s/^/[$TEST_NAME] /" "$T/diff.out" | grep -v '^\[[^]]*\] explained' | tail -n 40
proc_alive "$PROXYD_PID" || fail "proxyd died"
((rc == 0)) || fail "differences between server-h2=no and yes (see above)"
info "PASS"
