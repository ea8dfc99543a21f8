#!/usr/bin/env bash
# http analyser against the llhttp test vectors (tests/data, MIT): every
# request llhttp rejects in strict mode is refused and never reaches the
# origin; every accepted one reaches it with the same method, target and
# body (a refusal only for documented strictness, e.g. a missing Host);
# responses likewise (502 or a cut connection for rejected ones). See
# http_corpus.py for the exact rules; it lists each mismatch.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

VECTORS=$REPO_DIR/tests/data/llhttp-vectors.json
[[ -f $VECTORS ]] || fail "missing $VECTORS"
ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" empty
mkdir -p "$T/raw"
start_origin RAWO "$T/raw-origin.jsonl" raw "$T/raw"
free_port PQ
free_port PR
write_proxyd_conf
# every method is allowed: the corpus is about framing, not policy
write_http_service creq "$PQ" "$ORIG" '<http><request method="*" action="accept"/></http>'
write_http_service cresp "$PR" "$RAWO" '<http><request method="*" action="accept"/></http>'
start_proxyd

rc=0
python3 "$LIB_DIR/http_corpus.py" --vectors "$VECTORS" --req-port "$PQ" --resp-port "$PR" \
    --origin-log "$ORIG_LOG" --proxyd-log "$PROXYD_LOG" --raw-dir "$T/raw" >"$T/corpus.out" 2>&1 || rc=$?
sed "s/^/[$TEST_NAME] /" "$T/corpus.out"
proc_alive "$PROXYD_PID" || fail "proxyd died during the corpus replay"
grep -q '^mismatches: ' "$T/corpus.out" || fail "corpus runner crashed (rc $rc)"
((rc == 0)) || fail "$(grep -c '^MISMATCH' "$T/corpus.out") llhttp vectors mismatch (listed above)"
info "PASS"
