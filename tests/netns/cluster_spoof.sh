#!/usr/bin/env bash
# Spoofed source through the cluster lab (deploy/cluster/lab.sh up 3
# --spoof): the nodes are inline (TPROXY, transparent services with
# spoof-source) and connect to the server from the client's own address;
# the server routes its replies to the clients by ECMP over the nodes, and
# its side's routing steers them by destination port to the node that
# opened the connection (each node's source ports and FTP data ports are
# its own ranges).  Flows are counted at both ends.
#   1. `lab.sh up 3 --spoof`: server= is the server's own address.
#   2. HTTP (ab, 60 requests, no keep-alive), plug (30 connections), FTP
#      (15 passive, 9 active: PORT to vsftpd too), R66 (3 SEND, 3 RECV):
#      all served, whole (sha256, sizes). At the server, every connection
#      comes from the client's address (nginx's access log, vsftpd's log,
#      SYN counters in the server namespace: none from a node's address),
#      and nginx's lines by source port range (the node that owns the
#      port) match each node's own count; vsftpd's PORT commands name a
#      node's data port, as many per node as that node sent.
#   3. Forwarding: the server side's rule for node 1 removed: its replies
#      go by the ECMP hash, and the nodes that get them forward them to
#      node 1 (their rule's packet counter grows): 30 plug connections and
#      9 FTP downloads (passive and active) still all served, node 1
#      serving some. (Without the nodes' forwarding, some of them stall.)
#   4. IPv6 (server6= is the server's own 2001:db8:3::2; the client is
#      2001:db8:1::2): HTTP (ab, 60), plug (30), FTP (10 EPSV, 6 EPRT: to
#      vsftpd too), R66 (2 SEND, 2 RECV), all whole; at the server every
#      connection from the client's IPv6 address (nginx's log, vsftpd's,
#      ip6tables SYN counters: none from a node's), nginx's lines by
#      source port's owner match each node's count, vsftpd's EPRT commands
#      by their port's owner the nodes' own.
#   5. IPv6 forwarding: the server side's ip6tables rule for node 1 and the
#      router's ip6tables data port rule for node 1 removed: 30 plug
#      connections and 9 FTP downloads (EPSV and EPRT) over IPv6 still
#      all served, node 1 serving some, the other nodes forwarding its
#      packets (their ip6tables counters).
#   6. `lab.sh kill 3`: the server's ECMP routes to the clients (IPv4 and
#      IPv6) lose node 3's next hop, and new spoofed connections, IPv4 and
#      IPv6 at once, are all served again within 3 s of the kill (rounds
#      of 10 plug connections, 300 ms timeout, until one round is all
#      served), then 10 more of each.
#   7. `lab.sh down` leaves no namespace.
# Needs root, FRR (frr), nginx, vsftpd, curl, ab, python3, bench/r66peer; ~40 s.
set -euo pipefail
# shellcheck source=cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
cluster_setup p ab
SIZE=300000
CLIENT=198.18.1.2 CLIENT6=2001:db8:1::2

# family 4|6: what the steps below use for IPv4 or IPv6: the client's
# address (CLI), its net and the nodes' on the server side (NET_C, NET_N),
# where the client connects (SRV), the services' names (SFX: http6,
# plug6..., R66SVC), vsftpd's log (VLOG), the active mode's command (ACT)
family() {
    if [[ $1 == 4 ]]; then
        CLI=$CLIENT NET_C=198.18.1.0/24 NET_N=198.19.2.0/24 SRV=$SERVER SFX="" R66SVC=r66
        VLOG=$LAB_DIR/server/logs/vsftpd.log ACT=PORT IPT=iptables
    else
        CLI=$CLIENT6 NET_C=2001:db8:1::/64 NET_N=2001:db8:3::/64 SRV="[$SERVER6]" SFX=6 R66SVC=r66_6
        VLOG=$LAB_DIR/server/logs/vsftpd6.log ACT=EPRT IPT=ip6tables
    fi
}

# owner PORT: the node whose source or FTP data range PORT is in (lab.sh:
# 48000+270(I-1).., 40000+100(I-1)..), 0 if none
owner() {
    local p=$1
    if ((p >= 48000 && p < 48000 + 270 * 63)); then
        echo $(((p - 48000) / 270 + 1))
    elif ((p >= 40000 && p < 40000 + 100 * 63)); then
        echo $(((p - 40000) / 100 + 1))
    else
        echo 0
    fi
}

# nginx_by_node SERVER_PORT PATH: "N1 N2 N3" lines of nginx's access log
# for PATH on SERVER_PORT, status 200 and the whole body, by the owner of
# their source port (distinct source ports with DISTINCT=1); every such
# line must come from the client's address (CLI)
nginx_by_node() {
    local port=$1 path=$2 a p c=(0 0 0 0) o
    declare -A seen=()
    while read -r a p; do
        [[ $a == "$CLIENT" || $a == "$CLIENT6" ]] || fail "nginx saw $path on $port from $a, not the client"
        [[ $a == "$CLI" ]] || continue
        if [[ ${DISTINCT:-0} == 1 ]]; then
            [[ -z ${seen[$p]:-} ]] || continue
            seen[$p]=1
        fi
        o=$(owner "$p")
        ((o >= 1 && o <= 3)) || fail "nginx saw $path from source port $p, in no node's range"
        c[o]=$((c[o] + 1))
    done < <(awk -v sp="$port" -v path="\"GET $path" -v n="$SIZE" \
        '$3 == sp && $4 " " $5 == path && $7 == 200 && $8 == n { print $1, $2 }' "$LAB_DIR/server/logs/access.log")
    echo "${c[1]} ${c[2]} ${c[3]}"
}

# node_http I: responses 200 of node I's http service (http$SFX)
node_http() {
    node_metrics "$1" | awk -v svc="service=\"http$SFX\"" \
        '/^proxyd_http_responses_total\{/ && index($0, svc) && /code="200"/ { s += $NF } END { printf "%d\n", s }'
}
# node_ends I SERVICE ANALYSER: node I's session-end lines of SERVICE
# that sent the server something and were accepted
node_ends() {
    grep -Ec "node=$LAB_ID-n$1 info #[0-9]+ session-end service=$2 analyser=$3 verdict=accept .* to-server=[1-9]" \
        "$LAB_DIR/n$1/proxyd.log" || true
}
node_plug() { node_ends "$1" "plug$SFX" plug; }
node_r66() { node_ends "$1" "$R66SVC" r66; }
node_ftp() { # I: node I's whole downloads of f.bin to the client (CLI)
    grep -Ec "node=$LAB_ID-n$1 info #[0-9]+ data-transfer download cmd=RETR file=\"f\\.bin\" bytes=$SIZE .* client=\[?${CLI//./\\.}\]?:[0-9]+ .*end=ok\$" \
        "$LAB_DIR/n$1/proxyd.log" || true
}
# node_ports I: node I's PORT (EPRT) commands to the server, naming the
# client's address (server-side active)
node_ports() {
    local sent="PORT ${CLIENT//./,},"
    [[ $ACT == PORT ]] || sent="EPRT |2|$CLI|"
    grep -F "node=$LAB_ID-n$1 info #" "$LAB_DIR/n$1/proxyd.log" |
        grep -Fc " ftp-data client=active server=active sent=\"$sent" || true
}
# vsftpd_ports: the ports of the PORT (EPRT) commands vsftpd got from the
# client's address, naming it
vsftpd_ports() {
    if [[ $ACT == PORT ]]; then
        sed -nE "s/.*FTP command: Client \"${CLI//./\\.}\", \"PORT ${CLI//./,},([0-9]+),([0-9]+)\".*/\\1 \\2/p" "$VLOG" |
            awk '{ print $1 * 256 + $2 }'
    else
        sed -nE "s/.*FTP command: Client \"$CLI\", \"EPRT \\|2\\|$CLI\\|([0-9]+)\\|\".*/\\1/p" "$VLOG"
    fi
}
plug_fetch() { # N: N plug fetches of p.bin from SRV, each whole; sets OKS
    local k
    OKS=0
    for ((k = 0; k < $1; k++)); do
        if [[ $(lab client curl -sS --max-time 5 "http://$SRV:8081/p.bin" 2>>"$T/curl.err" | wc -c) == "$SIZE" ]]; then
            OKS=$((OKS + 1))
        fi
    done
}
ftp_fetch() { # N [CURL_OPTS...]: N downloads of f.bin from SRV, each whole; sets OKS
    local n=$1 k
    shift
    OKS=0
    for ((k = 0; k < n; k++)); do
        if [[ $(lab client curl -sS --max-time 10 "$@" "ftp://$SRV/f.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1) == "$WANT" ]]; then
            OKS=$((OKS + 1))
        fi
    done
}
per_node() { echo "$("$@" 1) $("$@" 2) $("$@" 3)"; } # CMD: "CMD 1, CMD 2, CMD 3"
sum3() { echo $(($1 + $2 + $3)); }

# settled CMD WANT: CMD's per-node counts add up to WANT (a node's log
# thread writes its lines within 50 ms); bounded, 5 s
settled() {
    local want=$1 got
    shift
    got=$(per_node "$@")
    # shellcheck disable=SC2086
    (($(sum3 $got) >= want))
}

# syns FROM PORT: SYNs the server got from FROM (a CIDR) to PORT
# (ip6tables' for an IPv6 CIDR)
ipt_of() { if [[ $1 == *:* ]]; then echo ip6tables; else echo iptables; fi; }
syns() {
    lab server "$(ipt_of "$1")" -w -L INPUT -v -n -x | awk -v c="syn $1 $2" 'index($0, "/* " c " */") { print $1 }'
}
count_syns() {
    local p net
    for p in 80 8081 21 6666; do
        for net in 198.18.1.0/24 198.19.2.0/24 2001:db8:1::/64 2001:db8:3::/64; do
            lab server "$(ipt_of "$net")" -w -A INPUT -p tcp --syn --dport "$p" -s "$net" -m comment --comment "syn $net $p"
        done
    done
}

# ---------------------------------------------------------------- 1. up

info "lab.sh up 3 --spoof (LAB_ID=$LAB_ID)"
lab_up 3 --spoof
assert_eq "$SERVER" 198.19.2.2 "server= with --spoof (the server's own address)"
SERVER6=$(sed -n 's/^server6=//p' "$T/up.out")
assert_eq "$SERVER6" 2001:db8:3::2 "server6= with --spoof (the server's own IPv6 address)"
for f in h p f; do head -c "$SIZE" /dev/urandom >"$ROOT/$f.bin"; done
chmod 644 "$ROOT"/*.bin
WANT=$(sha256sum <"$ROOT/f.bin" | cut -d' ' -f1)
for i in 1 2 3; do
    assert_grep "$LAB_DIR/n$i/policy/http.xml" 'spoof-source="yes"' "node $i's http service spoofs"
    assert_eq "$(lab node "$i" sysctl -n net.ipv4.ip_local_port_range | tr -s '\t ' ' ')" \
        "$((48000 + 270 * (i - 1))) $((48269 + 270 * (i - 1)))" "node $i's source ports"
done
count_syns

# ---------------------------------------------------------------- 2. every protocol

# every_protocol PASV ROUNDS: (family) HTTP (ab, 60 requests, no
# keep-alive), plug (30), FTP (10 EPSV, PASV with --disable-epsv, 9
# active: PORT or EPRT, to vsftpd too), R66 (ROUNDS of a SEND and a RECV),
# all whole, counted at both ends
every_protocol() {
    local pasv=$1 rounds=$2 nftp k p o c=(0 0 0 0) nodes_http srv_http nodes_plug srv_plug nodes_ftp nodes_port nodes_r66
    nftp=$((10 + pasv + 9))
    # HTTP: ab, no keep-alive
    lab client ab -n 60 -c 4 -s 10 "http://$SRV/h.bin" >"$T/ab.out" 2>&1 || fail "ab: $(tail -n 3 "$T/ab.out")"
    assert_eq "$(awk '/^Complete requests:/ { print $3 }' "$T/ab.out")" 60 "ab: complete requests"
    assert_eq "$(awk '/^Failed requests:/ { print $3 }' "$T/ab.out")" 0 "ab: failed requests"
    assert_eq "$(awk '/^HTML transferred:/ { print $3 }' "$T/ab.out")" "$((60 * SIZE))" "ab: body bytes"
    wait_cond 5000 settled 60 node_http || true
    nodes_http=$(per_node node_http)
    srv_http=$(nginx_by_node 80 /h.bin)
    info "HTTP, 60 requests: nodes $nodes_http; nginx by source port's owner $srv_http"
    assert_eq "$srv_http" "$nodes_http" "HTTP requests per node: nginx (by source port) vs the nodes"
    # shellcheck disable=SC2086
    assert_eq "$(sum3 $srv_http)" 60 "HTTP requests nginx served from $CLI"

    # plug: a connection each
    plug_fetch 30
    assert_eq "$OKS" 30 "plug fetches whole"
    wait_cond 5000 settled 30 node_plug || true
    nodes_plug=$(per_node node_plug)
    srv_plug=$(DISTINCT=1 nginx_by_node 8081 /p.bin)
    info "plug, 30 connections: nodes $nodes_plug; nginx by source port's owner $srv_plug"
    assert_eq "$srv_plug" "$nodes_plug" "plug connections per node: nginx (by source port) vs the nodes"

    # FTP: passive (EPSV, PASV) and active (server-data=keep: to vsftpd too)
    ftp_fetch 10
    assert_eq "$OKS" 10 "passive (EPSV) downloads whole"
    if ((pasv)); then
        ftp_fetch "$pasv" --disable-epsv
        assert_eq "$OKS" "$pasv" "passive (PASV) downloads whole"
    fi
    ftp_fetch 9 -P "$CLI"
    assert_eq "$OKS" 9 "active ($ACT) downloads whole"
    wait_cond 5000 settled "$nftp" node_ftp || true
    nodes_ftp=$(per_node node_ftp)
    info "FTP, $nftp downloads: nodes $nodes_ftp"
    # shellcheck disable=SC2086
    assert_eq "$(sum3 $nodes_ftp)" "$nftp" "FTP downloads the nodes counted whole"
    assert_eq "$(grep -c "OK DOWNLOAD: Client \"$CLI\", \"/f.bin\", $SIZE bytes" "$VLOG")" "$nftp" "vsftpd's whole downloads to $CLI"
    assert_eq "$(grep -c 'CONNECT: Client "198\.19\.\|CONNECT: Client "2001:db8:3:' "$VLOG" || true)" 0 \
        "vsftpd connections from a node's own address"
    # the PORT (EPRT) commands vsftpd got name the client's address and a
    # node's data port: as many per node as each node sent
    while read -r p; do
        o=$(owner "$p")
        ((o >= 1 && o <= 3)) || fail "vsftpd got a $ACT to $p, in no node's data ports"
        c[o]=$((c[o] + 1))
    done < <(vsftpd_ports)
    nodes_port=$(per_node node_ports)
    info "$ACT commands at vsftpd by their port's owner: ${c[1]} ${c[2]} ${c[3]}; the nodes sent $nodes_port"
    assert_eq "${c[1]} ${c[2]} ${c[3]}" "$nodes_port" "$ACT commands per node: vsftpd vs the nodes"
    # shellcheck disable=SC2086
    assert_eq "$(sum3 $nodes_port)" 9 "$ACT commands to vsftpd"

    # R66: SEND and RECV (r66_round connects to SERVER)
    for ((k = 1; k <= rounds; k++)); do SERVER=$SRV r66_round "$k"; done
    wait_cond 5000 settled "$((2 * rounds))" node_r66 || true
    nodes_r66=$(per_node node_r66)
    info "R66, $((2 * rounds)) transfers: nodes $nodes_r66"
    # shellcheck disable=SC2086
    assert_eq "$(sum3 $nodes_r66)" "$((2 * rounds))" "R66 sessions the nodes accepted"

    # at the server: every connection from the client's address, none from a node's
    for p in 80 8081 21 6666; do
        info "SYNs at the server to $p: from $CLI's net $(syns "$NET_C" "$p"), from the nodes' $(syns "$NET_N" "$p")"
        assert_eq "$(syns "$NET_N" "$p")" 0 "connections to $p from a node's own address"
    done
    assert_ge "$(syns "$NET_C" 8081)" 30 "plug connections from the client's address"
    assert_ge "$(syns "$NET_C" 21)" "$nftp" "FTP control connections from the client's address"
    assert_eq "$(syns "$NET_C" 6666)" "$((2 * rounds))" "R66 connections from the client's address"
}

# forwarding: (family) the server side's rule for node 1 and the router's
# rule for node 1's data ports go: node 1's replies follow the server's
# ECMP hash, the client's connections to its data ports the router's; the
# nodes that get them forward them to node 1
forwarding() {
    local rule drule strays0 plug1 ftp1 n
    lab server "$IPT" -w -t mangle -S OUTPUT | grep -c 'replies to node' >"$T/n.rules" || true
    assert_eq "$(cat "$T/n.rules")" 3 "the server side's rules, one per node"
    rule=$(lab server "$IPT" -w -t mangle -S OUTPUT | grep '"lab: replies to node 1"')
    drule=$(lab router "$IPT" -w -t mangle -S PREROUTING | grep '"lab: data ports of node 1"')
    eval "lab server $IPT -w -t mangle ${rule/-A /-D }"
    eval "lab router $IPT -w -t mangle ${drule/-A /-D }"
    strays0=$(strays)
    plug1=$(node_plug 1) ftp1=$(node_ftp 1)
    plug_fetch 30
    assert_eq "$OKS" 30 "plug fetches whole with node 1's packets forwarded by the others"
    ftp_fetch 6
    assert_eq "$OKS" 6 "passive downloads whole with node 1's packets forwarded by the others"
    ftp_fetch 3 -P "$CLI"
    assert_eq "$OKS" 3 "active downloads whole with node 1's packets forwarded by the others"
    wait_cond 3000 eval '(($(node_plug 1) > plug1))' || fail "node 1 served none of 30 plug connections: $(lab status)"
    n=$(($(strays) - strays0))
    info "without the server side's rule and the router's data port rule for node 1: node 1 served $(($(node_plug 1) - plug1)) plug connections and $(($(node_ftp 1) - ftp1)) downloads; nodes 2 and 3 forwarded $n packets to it"
    ((n > 0)) || fail "no node forwarded a packet to node 1"
    eval "lab server $IPT -w -t mangle $rule"
    eval "lab router $IPT -w -t mangle $drule"
}
strays() { # (family) packets the nodes forwarded to node 1
    local i s=0 c
    for i in 2 3; do
        c=$(lab node "$i" "$IPT" -w -t mangle -L PREROUTING -v -n -x |
            awk '/replies to node 1 |data ports of node 1 / { s += $1 } END { print s + 0 }')
        s=$((s + c))
    done
    echo "$s"
}

mkdir -p "$T/cli" "$T/out"
head -c "$SIZE" /dev/urandom >"$T/cli/up.bin"
head -c "$SIZE" /dev/urandom >"$R66DIR/down.bin"
family 4
every_protocol 5 3

# ---------------------------------------------------------------- 3. forwarding

forwarding

# ---------------------------------------------------------------- 4. IPv6

family 6
info "IPv6: the client $CLI to $SRV"
every_protocol 0 2

# ---------------------------------------------------------------- 5. IPv6 forwarding

forwarding

# ---------------------------------------------------------------- 6. kill 3

# hops 4|6: the next hops of the server's route to the clients
hops() {
    if [[ $1 == 4 ]]; then
        lab server ip route show 198.18.1.0/24 | grep -Eo 'via 198\.19\.2\.[0-9]+' | sort | tr '\n' ' '
    else
        lab server ip -6 route show 2001:db8:1::/64 | grep -Eo 'via 2001:db8:3::1:[0-9]+' | sort | tr '\n' ' '
    fi
}
assert_eq "$(hops 4)" "via 198.19.2.11 via 198.19.2.12 via 198.19.2.13 " "the server's route to the clients before the kill"
assert_eq "$(hops 6)" "via 2001:db8:3::1:1 via 2001:db8:3::1:2 via 2001:db8:3::1:3 " "the server's IPv6 route to the clients before the kill"
t_kill=$(now_ms)
lab kill 3 2>>"$T/lab.err"
# IPv6 and IPv4 probes at once, from the kill on
lab client python3 "$(dirname "$0")/cluster_probe.py" "$SERVER6" "$t_kill" >"$T/probe6.out" 2>&1 &
probe6=$!
track_pid "$probe6"
read -r new_ms rounds < <(lab client python3 "$(dirname "$0")/cluster_probe.py" "$SERVER" "$t_kill") || true
wait "$probe6" || true
read -r new6_ms rounds6 <"$T/probe6.out" || true
assert_eq "$(hops 4)" "via 198.19.2.11 via 198.19.2.12 " "the server's route to the clients after lab.sh kill 3"
assert_eq "$(hops 6)" "via 2001:db8:3::1:1 via 2001:db8:3::1:2 " "the server's IPv6 route to the clients after lab.sh kill 3"
[[ $new_ms =~ ^[0-9]+$ ]] || fail "no round of 10 new spoofed connections all served within 10 s of lab.sh kill 3 ($rounds rounds)"
[[ $new6_ms =~ ^[0-9]+$ ]] || fail "no round of 10 new spoofed IPv6 connections all served within 10 s of lab.sh kill 3 ($(cat "$T/probe6.out"))"
info "lab.sh kill 3: 10 new spoofed connections all served $new_ms ms after the kill (round $rounds), over IPv6 $new6_ms ms (round $rounds6); bound 3000"
((new_ms <= 3000)) || fail "new spoofed connections served again $new_ms ms after the kill, bound 3000 ms"
((new6_ms <= 3000)) || fail "new spoofed IPv6 connections served again $new6_ms ms after the kill, bound 3000 ms"
for f in 4 6; do
    family "$f"
    plug_fetch 10
    assert_eq "$OKS" 10 "plug fetches whole from $SRV after lab.sh kill 3"
done

# ---------------------------------------------------------------- 7. down

lab_down
info "PASS"
