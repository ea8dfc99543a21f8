#!/usr/bin/env bash
# Transparent mode after the privilege drop, in the client -- fw -- server
# namespaces of tests/netns.
#   1. A TPROXY service with spoof-source="yes" and mark=, proxyd started as
#      root with <user name="nobody" group="nogroup"/>: /proc/PID/status
#      shows uid nobody and CapEff 0x3400; the client's address reaches the
#      server (spoofed, IP_TRANSPARENT on the upstream socket) and the
#      server-side packets carry the mark (SO_MARK).
#   2. Every inline test of tests/netns (transparent v4/v6, redirect with
#      SO_ORIGINAL_DST and conntrack lookups, the conntrack session view,
#      FTP, HTTP, TLS) passes with the same <user> added to every config
#      they write: a wrapper inserts it, gives the TLS keys the policies
#      name the documented mode (root:nogroup 0640) and execs proxyd (same
#      pid); each test's log must show the drop on every start.
set -euo pipefail
source "$(dirname "$0")/../netns/lib.sh"
netns_setup
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
    skip "needs the user nobody and the group nogroup"
USER_XML='<user name="nobody" group="nogroup"/>'

info "---- 1. TPROXY, spoof-source and mark as nobody"
make_file file 1M
start_origin 80
deploy tproxy --port 80 --proxy-port 50080
nsF iptables -w -t mangle -A OUTPUT -p tcp -d "$TOPO_S4" --dport 80 -m mark --mark 0x40000000 \
    -m comment --comment netns-mark-server
write_conf_ns "$USER_XML"
write_inline_service tp transparent 0.0.0.0 50080 'spoof-source="yes" mark="0x40000000"'
start_proxyd_ns
grep -E '^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "/proc/$PROXYD_PID/status" | tee "$T/status"
assert_eq "$(awk '$1 == "Uid:" { print $2 }' "$T/status")" "$(id -u nobody)" "uid of proxyd in transparent mode"
assert_eq "$(awk '$1 == "CapEff:" { print $2 }' "$T/status")" 0000000000003400 "CapEff"
assert_eq "$(awk '$1 == "CapBnd:" { print $2 }' "$T/status")" 0000000000003400 "CapBnd"
fetch_ok "http://$TOPO_S4/file?phase=dropped" file
wait_grep "$ACCESS_LOG" 'phase=dropped' 3 || fail "nginx did not log the request"
assert_eq "$(nginx_peers 'phase=dropped')" "$TOPO_C4" "address nginx saw (the client's, spoofed by an unprivileged proxyd)"
assert_ge "$(rule_pkts 4 mangle OUTPUT '/* netns-mark-server */')" 1 "marked packets to the server"
assert_ge "$(rule_pkts 4 mangle PROXYD 'TPROXY')" 1 "packets through the TPROXY rule"
stop_proxyd_ns

info "---- 2. the inline tests with $USER_XML"
cat >"$T/proxyd-as-nobody" <<EOF
#!/bin/sh
# add <user> to the daemon config given with -c, give the TLS keys its
# policies name the mode docs/CONFIG.md asks for (root:GROUP 0640), then
# become proxyd
prev=
for a in "\$@"; do
    if [ "\$prev" = -c ]; then
        grep -q '<user ' "\$a" ||
            sed -i 's|^<proxyd>\$|<proxyd>\\n  $USER_XML|' "\$a"
        dir=\$(sed -n 's|.*<policies dir="\\([^"]*\\)".*|\\1|p' "\$a")
        case \$dir in /*) ;; *) dir=\$(dirname "\$a")/\${dir:-../policy/enabled} ;; esac
        for k in \$(cat "\$dir"/*.xml 2>/dev/null | grep -o 'key="/[^"]*"' | cut -d'"' -f2 | sort -u); do
            [ -f "\$k" ] && chgrp nogroup "\$k" && chmod 0640 "\$k"
        done
    fi
    prev=\$a
done
exec "$PROXYD" "\$@"
EOF
chmod 755 "$T/proxyd-as-nobody"
# every inline test registered in tests/netns/CMakeLists.txt
NETNS_TESTS=$(sed -n '/^set(PROXYD_NETNS_TESTS/,/^)/p' "$REPO_DIR/tests/netns/CMakeLists.txt" | sed '1d;$d' | tr -d ' ')
[[ -n $NETNS_TESTS ]] || fail "no test list in tests/netns/CMakeLists.txt"
for t in $NETNS_TESTS; do
    rc=0
    KEEP_TMP=1 PROXYD="$T/proxyd-as-nobody" bash "$REPO_DIR/tests/netns/$t.sh" >"$T/$t.out" 2>&1 || rc=$?
    dir=$(sed -nE "s/^\\[$t\\] temp dir ([^,]+),.*/\\1/p" "$T/$t.out" | head -n 1)
    if ((rc != 0)); then
        tail -n 30 "$T/$t.out" >&2
        [[ -n $dir ]] && rm -rf "$dir"
        fail "tests/netns/$t.sh failed (rc $rc) with proxyd running as nobody"
    fi
    [[ -n $dir && -f $dir/proxyd.log ]] || fail "$t: no proxyd log kept"
    n=$(grep -Ec 'running as user nobody .*cap_net_bind_service,cap_net_admin,cap_net_raw=ep' "$dir/proxyd.log" || true)
    starts=$(grep -Ec 'proxyd [0-9.]+ started' "$dir/proxyd.log" || true)
    rm -rf "$dir"
    assert_ge "$starts" 1 "$t: proxyd starts"
    assert_eq "$n" "$starts" "$t: starts that ran as nobody with the three capabilities"
    info "  $t: PASS as nobody ($starts start(s))"
done
info "PASS"
