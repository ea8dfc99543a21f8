#!/usr/bin/env bash
# What a request costs proxyd on a keep-alive connection Basic already
# proved (issue 38's bench row: within 10 % of the same row without
# authentication), counted by callgrind: instructions and calls, the same
# however loaded the machine is, where CPU time on a shared one is not.
# One proxyd under valgrind with two http services in front of nginx, one
# with <auth methods="basic"> (an LDAP authenticator, slapd made here, its
# cache warm), one without; 200 requests (ab -k -c 2, a 10 KB file) on
# each, counters zeroed before and dumped after each run:
#   - each Basic request's credentials are compared with the proof's by
#     their SHA-256 without looking the algorithm up or making a digest
#     context again (EVP_Digest(EVP_sha256()) did both per request: 200
#     EVP_MD_fetch and 200 EVP_MD_CTX_new per 200 requests, a third of a
#     request's instructions);
#   - such a request costs at most 30 % more instructions than one without
#     auth (38 % before; most of what is left is SHA-256 in software,
#     which valgrind runs where the CPU has it in hardware, and reading
#     the Authorization field), and only the two connections were checked.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx ab python3 slapd ldapadd valgrind callgrind_control
setup

make_file 10k.bin 10K
start_nginx
start_ldap
write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir 'cache="5m" timeout="10s"')
  </authenticators>"
sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s|level="info"|level="warning"|' "$PROXYD_CONF"
free_port PN
free_port PB
write_http_service none "$PN" "$NGINX_PORT" "<http/>"
write_http_service basic "$PB" "$NGINX_PORT" \
    '<auth authenticator="dir" methods="basic" basic-without-tls="yes"/><http/>'

# proxyd under callgrind (valgrind execs it: the same pid), counting from
# the start, dumped on demand by callgrind_control
CG=$T/cg
mkdir -p "$CG"
cat >"$T/vg-proxyd" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$CG/out.%p "$PROXYD" "\$@"
EOF
chmod +x "$T/vg-proxyd"
PROXYD=$T/vg-proxyd START_TIMEOUT=60 start_proxyd

U_B=http://127.0.0.1:$PB/10k.bin
U_N=http://127.0.0.1:$PN/10k.bin
# warm: alice's password in the cache, the worker's buffers made
ab -k -n 20 -c 2 -A alice:alice-ldap-pw "$U_B" >"$T/ab-warm-b.txt" 2>&1 || fail "ab warm-up: $(tail -n 3 "$T/ab-warm-b.txt")"
ab -k -n 20 -c 2 "$U_N" >"$T/ab-warm-n.txt" 2>&1 || fail "ab warm-up: $(tail -n 3 "$T/ab-warm-n.txt")"

basic_checks() {
    metric_value proxyd_auth_total 'method="basic"'
}

# run NAME AB_ARGS...: 200 requests, counted alone; the dump's file
run() {
    local name=$1 f="" i
    shift
    callgrind_control -z "$PROXYD_PID" >/dev/null
    ab -k -n 200 -c 2 "$@" >"$T/ab-$name.txt" 2>&1 || fail "ab $name: $(tail -n 3 "$T/ab-$name.txt")"
    grep -q '^Complete requests: *200$' "$T/ab-$name.txt" || fail "ab $name: $(grep -E '^(Complete|Failed)' "$T/ab-$name.txt")"
    grep -q '^Non-2xx' "$T/ab-$name.txt" && fail "ab $name: $(grep '^Non-2xx' "$T/ab-$name.txt")"
    callgrind_control -d "$name" "$PROXYD_PID" >/dev/null
    for ((i = 0; i < 100; i++)); do  # the dump is written by the target
        f=$(grep -l "^desc: Trigger: .* $name\$" "$CG"/out.*.* 2>/dev/null | head -n 1 || true)
        [[ -n $f ]] && grep -q '^totals:' "$f" && break
        sleep 0.1
    done
    [[ -n $f ]] || fail "no callgrind dump for $name in $CG: $(ls "$CG")"
    echo "$f"
}

# count FILE FUNCTION...: calls to those functions in the dump (cfn=
# names a callee, its name given once by number, calls= follows)
count() {
    python3 - "$@" <<'EOF'
import re, sys
names, want, n, callee = {}, set(sys.argv[2:]), 0, None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        callee = names.get(m.group(1)) if line.startswith("cfn=") else None
        continue
    m = re.match(r"calls=(\d+)", line)
    if m and callee in want:
        n += int(m.group(1))
print(n)
EOF
}
total() { sed -nE 's/^(summary|totals): ([0-9]+).*/\2/p' "$1" | head -n 1; }

k0=$(basic_checks)
fb=$(run basic -A alice:alice-ldap-pw "$U_B")
k1=$(basic_checks)
fn=$(run none "$U_N")
ib=$(total "$fb")
in=$(total "$fn")
info "instructions per request: $((ib / 200)) with Basic, $((in / 200)) without"
assert_eq "$((k1 - k0))" 2 "Basic checks over 200 requests on 2 connections (one each)"

fetch=$(count "$fb" EVP_MD_fetch)
ctx=$(count "$fb" EVP_MD_CTX_new)
info "over 200 proven requests: $fetch EVP_MD_fetch, $ctx EVP_MD_CTX_new"
# the two checks (the cache's salted hash) may make a context each
assert_lt "$fetch" 10 "EVP_MD_fetch calls over 200 proven Basic requests"
assert_lt "$ctx" 10 "EVP_MD_CTX_new calls over 200 proven Basic requests"
assert_lt "$((ib * 100 / in))" 130 "a proven Basic request's instructions, % of one without auth"
info "ok"
