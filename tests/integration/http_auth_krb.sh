#!/usr/bin/env bash
# Negotiate's accept as proxyd runs it (auth_krb.c), with auth_lib.sh's MIT
# KDC and curl --proxy-negotiate through a forward-mode service:
#   - each auth thread acquires the keytab's acceptor credential once and
#     keeps it: over 30 checks (30 connections, one after the other),
#     strace -f of every thread counts the keytab's opens: one per accept
#     (GSSAPI reads the keys there), plus one per thread's first check;
#     acquiring per check read it three times a check (and the profile
#     and a library context each time: some 200 us of CPU of the 240 a
#     check cost);
#   - a check wakes the auth thread that takes it, not the idle others:
#     over 30 checks the auth threads (the tasks proxyd started at its
#     first check) go to sleep fewer than 3 times a check (voluntary
#     context switches); a broadcast after each check woke all four,
#     some 8 switches a check, each thread going back to sleep at once;
#   - replay protection is kept: a token curl sent, sent again on another
#     connection, is refused (407, result=bad-token, "replay");
#   - a keytab replaced under the same path (a new key version, kadmin
#     ktadd) counts at once: a ticket for the new key passes, without a
#     reload.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx curl strace krb5kdc kdb5_util kadmin.local kinit kvno
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
start_kdc

write_proxyd_conf "" "<authenticators>
    <kerberos name=\"corp\" keytab=\"$K/http.keytab\" service=\"HTTP\"/>
  </authenticators>"
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
free_port PF
write_http_service fwd "$PF" 0 "
<auth authenticator=\"corp\" methods=\"negotiate\"/>
<http/>" forward
start_proxyd
tasks0=$(ls "/proc/$PROXYD_PID/task")
PX=http://localhost:$PF
U=http://127.0.0.1:$NGINX_PORT/a.txt

neg() { # one connection, a fresh token: prints the status
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$@" "$U"
}

info "replay: a token sent twice"
curl -sS --max-time 10 -v -o /dev/null --proxy-negotiate -U : -x "$PX" "$U" 2>"$T/v.txt"
tok=$(sed -nE 's/^> Proxy-Authorization: Negotiate ([A-Za-z0-9+\/=]+).*/\1/p' "$T/v.txt" | tr -d '\r' | head -n 1)
[[ -n $tok ]] || fail "no token in curl -v's output: $(grep -i proxy-auth "$T/v.txt")"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "Proxy-Authorization: Negotiate $tok" -x "$PX" "$U")
assert_eq "$code" 407 "a replayed token"
wait_grep "$PROXYD_LOG" 'auth authenticator=corp method=negotiate user=- result=bad-token reason="[^"]*Request is a replay"' "$ASYNC_WAIT" ||
    fail "no bad-token line naming the replay: $(grep 'auth authenticator' "$PROXYD_LOG" | tail -n 2)"

info "the keytab read once a check, not three times"
# every auth thread has started (the first check above started them)
strace_start "$PROXYD_PID" "$T/strace.txt" -f -e trace=openat
for ((i = 0; i < 30; i++)); do
    code=$(neg)
    [[ $code == 200 ]] || fail "Negotiate check $i: $code"
done
strace_stop
checks=$(grep -c 'auth authenticator=corp method=negotiate user=alice result=ok' "$PROXYD_LOG")
opens=$(grep -c "openat(.*http\.keytab\"" "$T/strace.txt" || true)
info "$checks checks in all; 30 traced, $opens opens of the keytab"
assert_ge "$opens" 30 "the keytab's opens (GSSAPI reads the keys at each accept)"
assert_lt "$opens" 60 "the keytab's opens over 30 checks (one each, one per auth thread's acquisition; 3 a check when acquired per check)"

info "a check wakes one auth thread, not all of them"
auth_tasks=$(comm -13 <(sort <<<"$tasks0") <(ls "/proc/$PROXYD_PID/task" | sort))
assert_ge "$(wc -w <<<"$auth_tasks")" 2 "auth threads started by the checks"
asleep() { # voluntary context switches of the auth threads so far
    local t s=0
    for t in $auth_tasks; do
        s=$((s + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$PROXYD_PID/task/$t/status")))
    done
    echo "$s"
}
s0=$(asleep)
for ((i = 0; i < 30; i++)); do
    code=$(neg)
    [[ $code == 200 ]] || fail "Negotiate check $i: $code"
done
s1=$(asleep)
info "the auth threads went to sleep $((s1 - s0)) times over 30 checks"
assert_lt "$((s1 - s0))" 90 "the auth threads' sleeps over 30 checks (one a check, and its mutex; every idle thread woken after each check: some 8 a check)"

info "a keytab replaced under its path counts without a reload"
kvno HTTP/localhost >"$T/kvno0.txt" 2>&1 || fail "kvno: $(cat "$T/kvno0.txt")"
kadmin.local -r EXAMPLE.TEST -q "ktadd -k $K/http.keytab.new HTTP/localhost" >>"$K/create.out" 2>&1
mv "$K/http.keytab.new" "$K/http.keytab"
kdestroy
echo alice-krb-pw | kinit alice >/dev/null 2>&1 || fail "kinit alice again"
kvno HTTP/localhost >"$T/kvno.txt" 2>&1 || fail "kvno: $(cat "$T/kvno.txt")"
old=$(sed -nE 's/.*kvno = ([0-9]+).*/\1/p' "$T/kvno0.txt")
new=$(sed -nE 's/.*kvno = ([0-9]+).*/\1/p' "$T/kvno.txt")
assert_eq "$new" "$((old + 1))" "the new ticket's key version"
for ((i = 0; i < 6; i++)); do  # every auth thread sees it
    code=$(neg)
    assert_eq "$code" 200 "Negotiate with a ticket for the new key ($i)"
done
info "ok"
