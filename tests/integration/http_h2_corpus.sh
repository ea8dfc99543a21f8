#!/usr/bin/env bash
# The HTTP/1.1 request corpus through HTTP/2 (issue 29): every llhttp
# request vector, http fuzz seed (tests/fuzz/corpus/http) and h2o HTTP/1
# seed (H2_CORPUS_DIR, /work/shared/corpus/http1) HTTP/2 can express goes to proxyd as
# an h2c stream and, as HTTP/1.1, to an identical service; the outcome
# (status, RST_STREAM as 400), what reached the origin and the
# http-request line must agree, after the differences by design that
# http_h2_corpus.py lists (TRANSLATION, BY_DESIGN). Cases HTTP/2 cannot
# express are skipped and counted by reason. Then a seeded random part
# (methods, paths, field names and values, bodies) through a pair of
# services with header rules, limits and a URL rule.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
/usr/bin/python3 -c 'import h2' 2>/dev/null || skip "python3-h2 not installed"
setup

VECTORS=$REPO_DIR/tests/data/llhttp-vectors.json
[[ -f $VECTORS ]] || fail "missing $VECTORS"
CORPUS=${H2_CORPUS_DIR:-/work/shared/corpus/http1}
ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" empty
free_port PC
free_port PR
write_proxyd_conf
# One service takes both sides (h2c prior knowledge or HTTP/1.1 on the
# same port): the same policy by construction, the same rule names in
# the log. The corpus is about framing, not policy: every method goes.
OPEN='<request method="*" action="accept"/>'
write_http_service c "$PC" "$ORIG" "<http h2c=\"yes\">$OPEN</http>"
# Policy for the random part: its rules must judge both sides alike.
RPOL='<http h2c="yes" x-forwarded-for="append" trailers="pass">
  <limits max-line="300" max-url="64" max-header-bytes="600" max-body="200"/>
  <request method="GET HEAD POST PUT OPTIONS get" action="accept"/>
  <request method="*" action="deny" status="405"/>
  <url path="/a*" action="deny" status="403"/>
  <request-header name="X-Drop-Me" action="drop"/>
  <request-header name="Accept" action="change" value="changed"/>
  <request-header name="X-Inserted" action="insert" value="ins"/>
</http>'
write_http_service r "$PR" "$ORIG" "$RPOL"
free_port PF
write_http_service f "$PF" 0 "$RPOL" forward
# Responses: the llhttp response vectors from a raw origin.
mkdir -p "$T/raw"
start_origin RAWO "$T/raw-origin.jsonl" raw "$T/raw"
free_port PS
free_port PT
write_http_service s "$PS" "$RAWO" '<http h2c="yes"/>'
write_http_service st "$PT" "$RAWO" '<http h2c="yes" trailers="pass"/>'
start_proxyd

run_driver() {
    local out=$1 rc=0
    shift
    /usr/bin/python3 "$LIB_DIR/http_h2_corpus.py" --origin-log "$ORIG_LOG" \
        --proxyd-log "$PROXYD_LOG" "$@" >"$out" 2>&1 || rc=$?
    sed "s/^/[$TEST_NAME] /" "$out"
    proc_alive "$PROXYD_PID" || fail "proxyd died during $out"
    grep '^counts: ' "$out" >/dev/null || fail "the driver crashed (rc $rc)"
    return "$rc"
}

failed=()
corpus_args=(--vectors "$VECTORS" --corpus-dir "$REPO_DIR/tests/fuzz/corpus/http")
if [[ -d $CORPUS ]]; then
    corpus_args+=(--corpus-dir "$CORPUS")
else
    info "no h2o corpus at $CORPUS: the llhttp vectors and fuzz seeds only"
fi
run_driver "$T/corpus.out" --h1-port "$PC" --h2-port "$PC" "${corpus_args[@]}" ||
    failed+=("corpus: $(grep -c '^DIFFER' "$T/corpus.out") cases differ")
run_driver "$T/random.out" --h1-port "$PR" --h2-port "$PR" \
    --random "${H2_RANDOM:-800}" --seed "${H2_SEED:-29}" ||
    failed+=("random: $(grep -c '^DIFFER' "$T/random.out") requests differ")
# The llhttp response vectors, hand-made ones and random ones, with
# trailers dropped (the default) and passed.
for port in "$PS" "$PT"; do
    rc=0
    /usr/bin/python3 "$LIB_DIR/http_h2_corpus_resp.py" --vectors "$VECTORS" --port "$port" \
        --raw-dir "$T/raw" --proxyd-log "$PROXYD_LOG" --random "${H2_RANDOM_RESP:-300}" \
        --seed "${H2_SEED:-29}" >"$T/resp.out" 2>&1 || rc=$?
    sed "s/^/[$TEST_NAME] /" "$T/resp.out"
    grep '^counts: ' "$T/resp.out" >/dev/null || fail "the response driver crashed (rc $rc)"
    ((rc == 0)) || failed+=("responses: $(grep -c '^DIFFER' "$T/resp.out") differ")
done
# The random requests again, but up to 20 streams in a row on one h2
# connection (HPACK's dynamic table carried over, the policy's
# per-connection state).
run_driver "$T/streams.out" --h1-port "$PR" --h2-port "$PR" \
    --random "${H2_RANDOM:-800}" --seed "$((${H2_SEED:-29} + 1))" --streams 20 ||
    failed+=("streams: $(grep -c '^DIFFER' "$T/streams.out") requests differ")
# Forward mode: absolute-form targets; :scheme and :authority over h2.
run_driver "$T/forward.out" --h1-port "$PF" --h2-port "$PF" \
    --random "${H2_RANDOM_FWD:-300}" --seed "${H2_SEED:-29}" --forward "127.0.0.1:$ORIG" ||
    failed+=("forward: $(grep -c '^DIFFER' "$T/forward.out") requests differ")
# Sanity: the comparison saw requests reach the origin through both sides.
n=$(grep -c '"method"' "$ORIG_LOG" || true)
assert_ge "$n" 200 "requests at the origin"
((${#failed[@]} == 0)) || fail "$(printf '%s; ' "${failed[@]}")(listed above)"
info "PASS"
