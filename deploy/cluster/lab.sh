#!/usr/bin/env bash
# lab.sh: an active-active cluster of proxyd nodes on one machine, in network
# namespaces, routed by the kernel's ECMP with FRR's bgpd (deploy/README.md,
# "Active-active: a cluster of nodes behind ECMP routing").  It is also the
# test: tests/netns/cluster_lab.sh drives it.
#
#   lab.sh up N [--spoof]  build the lab with N nodes; prints server=ADDR,
#                          server6=ADDR (IPv6), root=DIR, r66dir=DIR.
#                          --spoof: the nodes are inline (transparent mode,
#                          spoof-source): clients reach the server's own
#                          address (server= and server6=), which the nodes
#                          announce, and the server sees the client's address
#                          (below, "Spoofed source"), over IPv4 and IPv6
#   lab.sh client CMD...   run CMD in the client namespace
#   lab.sh server CMD...   run CMD in the server namespace
#   lab.sh router CMD...   run CMD in the router namespace
#   lab.sh node I CMD...   run CMD in node I's namespace (1..N)
#   lab.sh status          one line per node: name, state, live sessions, accepted,
#                          and node=NAME, the name its proxyd gives (<node name>)
#   lab.sh members         the cluster's members as the router's FRR knows them
#                          (what every node's proxyd shows: <cluster members-file>)
#   lab.sh add             one more node (the next number); prints its name
#   lab.sh kill I          node I dies: every process in its namespace, kill -9
#                          (--spoof: out of the server's route to the clients,
#                          as with drain)
#   lab.sh drain I [S]     node I stops taking new flows (withdraws its route),
#                          serves its own until they end or S seconds (default
#                          60) pass, then its proxyd stops
#   lab.sh upgrade I [S [handover|drain]]
#                          node I's proxyd replaced by a new process (PROXYD:
#                          the new binary). handover (the default): proxyd -s
#                          upgrade in the node, which stays announced; the new
#                          process takes every session over at a quiet point
#                          (plug; FTP between commands; idle HTTP keep-alive;
#                          R66 between transfers), the rest drain in the old
#                          one (up to S s, default 60: its shutdown-grace,
#                          1 s otherwise, is S for the upgrade, by a reload).
#                          drain: withdrawn, its sessions served until they end
#                          or S seconds pass, stopped, started again and
#                          announced once it listens
#   lab.sh down            stop everything the lab started, delete its namespaces
#
#   client  c0 198.18.1.2/24 -- r0 198.18.1.1  router  rI 198.18.2.(4I-3)/30 -- eth0 198.18.2.(4I-2)  node I
#   node I  eth1 198.19.2.(10+I)/24 -- br0 198.19.2.2/24  server (nginx,
#           vsftpd, r66peer)
#   service address 198.18.0.80/32: on every node's lo, announced by its bgpd
#   (AS 65001) to the router's (AS 65000), which installs one multipath route.
#   The router pins each flow to the node its first packet went to
#   (conntrack mark I, policy routing table 100+I): a route withdrawn or
#   added moves no established flow.  FTP: node I owns the data ports
#   40000+100(I-1) .. +99 (its ftp service's data-ports=); the router
#   sends a new connection to one of them to node I (mark I), and pins the
#   connections a node opens from the service address (active mode) to it;
#   a node that gets another node's data port flow anyway forwards it there.
#   Spoofed source (up --spoof): the nodes announce the server's address
#   198.19.2.2 instead, divert connections to it (TPROXY) into transparent
#   services with spoof-source, and connect to the server from the client's
#   own address: the server routes its replies to 198.18.1.0/24 by ECMP
#   over the nodes' server-side addresses, which would hash a reply to any
#   node.  So node I takes the source ports of its server-side connections
#   from its own range, 48000+270(I-1) .. +269 (its namespace's
#   ip_local_port_range: proxyd binds the client's address and lets
#   connect() pick the port), and the server-side routing (the server's
#   namespace stands in for a router there: mangle OUTPUT marks, policy
#   routing) sends a packet to 198.18.1.0/24 whose destination port is in
#   node I's source or FTP data range to node I.  A reply that reaches
#   another node anyway (no such rule, a hash) is forwarded by it to the
#   owner over the server segment, never answered.  The same over IPv6
#   (server6= is the server's 2001:db8:3::2, the clients 2001:db8:1::/64):
#   ip6tables TPROXY into transparent services on [::] (http6, plug6,
#   ftp6, r66_6), the same source and data port ranges (the kernel's
#   ip_local_port_range is both families'), the server side's ip6tables
#   marks and IPv6 policy routing, the nodes' IPv6 forwarding of strays.
#   IPv6, beside IPv4 on every link, in 2001:db8::/32:
#   client 2001:db8:1::2/64 -- r0 2001:db8:1::1; rI 2001:db8:2:I::1/64 --
#   eth0 2001:db8:2:I::2 node I; node I eth1 2001:db8:3::1:I/64 -- br0
#   2001:db8:3::2 server (nginx, a second vsftpd and r66peer on IPv6);
#   service address 2001:db8:0:80::80/128 on every node's lo (--spoof: the
#   server's 2001:db8:3::2, not on lo), announced over an IPv6 BGP
#   session of its own (one ECMP route on the router); services http6,
#   plug6, ftp6 (the same data ports) and r66_6 to the server's IPv6 address;
#   the same pinning and FTP rules as IPv4, in ip6tables.
#   Cluster-wide state: the nodes count the quotas in one redis-server on
#   the router (198.18.3.1:6379, its lo; <cluster store>), and read the
#   members from LAB_DIR/members, which a poller of the router's bgpd
#   rewrites every half second (<cluster members-file>): a node whose BGP
#   session is up and announces the service address is up; up but
#   announcing nothing (drained, withdrawn) draining; no session gone.
#
# Environment:
#   PROXYD      the proxyd binary (default: build/proxyd of this tree)
#   LAB_ID      name of this lab (default lab): namespaces pxcl-ID-{c,r,s,nI}
#   LAB_DIR     where configs, logs and the served folder go
#               (default /run/proxyd-lab/ID; up refuses a non-empty folder
#               it did not make; down removes it, unless LAB_KEEP=1)
#   LAB_PIN     0: no flow pinning on the router (ECMP alone: a withdrawal
#               moves some established flows of the other nodes too; FTP
#               active mode then fails at times: the client's answers to a
#               node's data connection follow the hash)
#   R66PEER     bench/r66peer (default: build/r66peer of this tree)
# Needs root, iproute2, FRR (Debian package frr: /usr/lib/frr/{zebra,bgpd},
# vtysh), nginx, vsftpd (and its user ftp), curl, redis-server, python3,
# bench/r66peer built.

set -euo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LAB_ID=${LAB_ID:-lab}
LAB_DIR=${LAB_DIR:-/run/proxyd-lab/$LAB_ID}
PROXYD=${PROXYD:-$REPO/build/proxyd}
R66PEER=${R66PEER:-$REPO/build/r66peer}
FRR=${FRR_DIR:-/usr/lib/frr}
PFX=pxcl-$LAB_ID
NS_C=$PFX-c NS_R=$PFX-r NS_S=$PFX-s
VIP=198.18.0.80          # the service address clients use
SERVER=198.19.2.2        # the server's own address (nodes connect to it)
ROUTER_AS=65000 NODE_AS=65001
ADMIN=127.0.0.1:9180     # each node's admin endpoint, inside its namespace
STORE=198.18.3.1         # the quota store (redis-server), on the router's lo
PORTS="80 8081 21 6666"  # http, plug, ftp, r66
GRACE=1s                 # each node's shutdown-grace (upgrade I S: S meanwhile)
DATA_BASE=40000 DATA_SPAN=100   # node I's FTP data ports: data_lo I .. data_hi I
VIP6=2001:db8:0:80::80           # the service address, IPv6
SERVER6=2001:db8:3::2            # the server's own IPv6 address
CLIENT_NET=198.18.1.0/24         # the clients (spoofed sources)
CLIENT_NET6=2001:db8:1::/64      # the clients, IPv6
SRC_BASE=48000 SRC_SPAN=270      # --spoof: node I's source ports: src_lo I .. src_hi I
DIVERT_MARK=0x100 DIVERT_TABLE=99   # --spoof: TPROXY'd packets, routed locally
# the address clients use: the service address, or with --spoof the
# server's own (set again by cmd_up)
SVC=$VIP SVC6=$VIP6
[[ ! -f $LAB_DIR/spoof ]] || SVC=$SERVER SVC6=$SERVER6
spoofing() { [[ -f $LAB_DIR/spoof ]]; }

die() { echo "$PROG: $*" >&2; exit 1; }
msg() { echo "$PROG: $*" >&2; }
usage() {
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0" | sed '$d' >&2
    exit 2
}

ns_node() { echo "$PFX-n$1"; }
node_name() { echo "$LAB_ID-n$1"; }                   # node I's proxyd <node name>
node_addr() { echo "198.18.2.$((4 * $1 - 2))"; }     # node I, router side
router_addr() { echo "198.18.2.$((4 * $1 - 3))"; }   # the router, on node I's link
data_lo() { echo $((DATA_BASE + DATA_SPAN * ($1 - 1))); }
data_hi() { echo $((DATA_BASE + DATA_SPAN * $1 - 1)); }
node_out() { echo "198.19.2.$((10 + $1))"; }          # node I, server side
node_addr6() { echo "2001:db8:2:$1::2"; }             # node I, router side (IPv6)
router_addr6() { echo "2001:db8:2:$1::1"; }           # the router, on node I's link (IPv6)
node_out6() { echo "2001:db8:3::1:$1"; }              # node I, server side (IPv6)
# ipt 4|6 NS ARGS...: iptables or ip6tables in NS
ipt() {
    local f=$1 ns=$2
    shift 2
    if [[ $f == 6 ]]; then ip netns exec "$ns" ip6tables -w "$@"; else ip netns exec "$ns" iptables -w "$@"; fi
}
src_lo() { echo $((SRC_BASE + SRC_SPAN * ($1 - 1))); }
src_hi() { echo $((SRC_BASE + SRC_SPAN * $1 - 1)); }

lab_namespaces() { ip netns list 2>/dev/null | awk -v p="$PFX-" 'index($1, p) == 1 { print $1 }'; }

nodes() { # the node numbers of this lab, in order
    ip netns list 2>/dev/null | awk -v p="$PFX-n" 'index($1, p) == 1 { print substr($1, length(p) + 1) }' | sort -n
}

# wait_until TIMEOUT_S CMD...: run CMD every 50 ms until it succeeds
wait_until() {
    local t=$1 deadline
    shift
    deadline=$(($(date +%s%N) + t * 1000000000))
    until "$@" >/dev/null 2>&1; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

listening() { # NS PORT
    [[ -n $(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null) ]]
}
listening_on() { # NS ADDR PORT (ADDR: IPv6 in brackets)
    [[ -n $(ip netns exec "$1" ss -Hltn "src $2 and sport = :$3" 2>/dev/null) ]]
}

vtysh_in() { # NS DIR ARGS...: vtysh of the FRR daemons whose sockets are in DIR
    local ns=$1 d=$2
    shift 2
    ip netns exec "$ns" vtysh --vty_socket "$d" "$@"
}

# ---------------------------------------------------------------- up

write_nginx() {
    local d=$LAB_DIR/server
    mkdir -p "$d/logs" "$d/tmp" "$LAB_DIR/www"
    cat >"$d/nginx.conf" <<EOF
user root;
worker_processes 1;
worker_rlimit_nofile 8192;
daemon on;
pid $d/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 65;
    log_format lab '\$remote_addr \$remote_port \$server_port "\$request" \$status \$body_bytes_sent';
    access_log $d/logs/access.log lab;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    server {
        listen 80;
        listen 8081;
        listen [$SERVER6]:80;
        listen [$SERVER6]:8081;
        root $LAB_DIR/www;
        location / { }
    }
}
EOF
}

# the same policy on every node: http on VIP:80, plug on VIP:8081, ftp on
# VIP:21, r66 on VIP:6666, all to the server; only ftp's data-ports differ
# (node I's own range: write_node_conf)
# (--spoof: transparent services on the wildcard address, where TPROXY
# hands them the connections to the server, connecting from the client's
# address: listen_to PORT); listen_to PORT 6: the IPv6 service's
listen_to() {
    local any=0.0.0.0 vip=$VIP server=$SERVER
    [[ ${2:-4} != 6 ]] || any=:: vip=$VIP6 server=$SERVER6
    if spoofing; then
        printf '  <listen address="%s" port="%s" mode="transparent"/>\n  <upstream spoof-source="yes"/>' "$any" "$1"
    else
        printf '  <listen address="%s" port="%s" mode="fixed"/>\n  <target address="%s" port="%s"/>' "$vip" "$1" "$server" "$1"
    fi
}
write_policy() {
    local d=$LAB_DIR/policy
    mkdir -p "$d"
    cat >"$d/http.xml" <<EOF
<service name="http" analyser="http">
$(listen_to 80)
</service>
EOF
    cat >"$d/plug.xml" <<EOF
<service name="plug" analyser="plug">
$(listen_to 8081)
</service>
EOF
    cat >"$d/http6.xml" <<EOF
<service name="http6" analyser="http">
$(listen_to 80 6)
</service>
EOF
    cat >"$d/plug6.xml" <<EOF
<service name="plug6" analyser="plug">
$(listen_to 8081 6)
</service>
EOF
    local name f
    for f in 4 6; do
        name=r66
        [[ $f == 4 ]] || name=r66_6
        cat >"$d/$name.xml" <<EOF
<service name="$name" analyser="r66">
$(listen_to 6666 "$f")
  <r66><host id="hosta hostb"/><rule name="in out"/>
    <mode allow="send recv sendmd5 recvmd5"/>
    <file pattern="*" max-size="1g"/></r66>
</service>
EOF
    done
}

# node I's ftp service: the shared policy's, with the data ports it owns.
# server-data="keep": towards vsftpd the client's mode, so a client's
# active-mode transfer is one on the server's side too (vsftpd connects to
# the node's own address, which only that node has)
write_ftp_policy() { # I DIR
    cat >"$2/ftp.xml" <<EOF
<service name="ftp" analyser="ftp">
$(listen_to 21)
  <ftp client-data="keep" server-data="keep" data-ports="$(data_lo "$1")-$(data_hi "$1")"/>
</service>
EOF
    cat >"$2/ftp6.xml" <<EOF
<service name="ftp6" analyser="ftp">
$(listen_to 21 6)
  <ftp client-data="keep" server-data="keep" data-ports="$(data_lo "$1")-$(data_hi "$1")"/>
</service>
EOF
}

write_vsftpd() {
    local d=$LAB_DIR/server
    mkdir -p "$d/logs" /var/run/vsftpd/empty
    cat >"$d/vsftpd.conf" <<EOF
listen=YES
listen_ipv6=NO
listen_address=$SERVER
listen_port=21
background=NO
anonymous_enable=YES
local_enable=NO
no_anon_password=YES
anon_root=$LAB_DIR/www
write_enable=NO
anon_world_readable_only=NO
pasv_enable=YES
pasv_min_port=30000
pasv_max_port=30999
port_enable=YES
connect_from_port_20=NO
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
max_clients=0
max_per_ip=0
delay_failed_login=0
delay_successful_login=0
xferlog_enable=YES
vsftpd_log_file=$d/logs/vsftpd.log
xferlog_std_format=NO
log_ftp_protocol=YES
secure_chroot_dir=/var/run/vsftpd/empty
EOF
}

write_node_conf() { # I
    local d=$LAB_DIR/n$1
    mkdir -p "$d"
    cat >"$d/proxyd.xml" <<EOF
<proxyd>
  <node name="$(node_name "$1")"/>
  <workers>1</workers>
  <limits shutdown-grace="$GRACE" connect-timeout="5s"/>
  <log target="stderr" level="info"/>
  <admin listen="$ADMIN"/>
  <pidfile path="$d/proxyd.pid"/>
  <cluster store="$STORE:6379" members-file="$LAB_DIR/members"/>
  <policies dir="policy"/>
</proxyd>
EOF
    mkdir -p "$d/policy"
    cp "$LAB_DIR"/policy/*.xml "$d/policy/"
    write_ftp_policy "$1" "$d/policy"
    # the node announces nothing until its proxyd listens (_supervise);
    # IPv6: a session of its own (an IPv6 next hop), the same policy
    local r6
    r6=$(router_addr6 "$1")
    cat >"$d/bgpd.conf" <<EOF
hostname n$1
log file $d/bgpd.log
ip prefix-list SERVICE seq 5 permit $SVC/32
ipv6 prefix-list SERVICE6 seq 5 permit $SVC6/128
route-map ANNOUNCE permit 10
 match ip address prefix-list SERVICE
route-map ANNOUNCE permit 20
 match ipv6 address prefix-list SERVICE6
route-map NOTHING deny 10
router bgp $NODE_AS
 bgp router-id $(node_addr "$1")
 no bgp network import-check
 neighbor $(router_addr "$1") remote-as $ROUTER_AS
 neighbor $(router_addr "$1") timers 1 3
 neighbor $(router_addr "$1") timers connect 1
 address-family ipv4 unicast
  neighbor $(router_addr "$1") route-map ANNOUNCE out
  neighbor $(router_addr "$1") route-map NOTHING in
 exit-address-family
 neighbor $r6 remote-as $ROUTER_AS
 neighbor $r6 timers 1 3
 neighbor $r6 timers connect 1
 address-family ipv4 unicast
  no neighbor $r6 activate
 exit-address-family
 address-family ipv6 unicast
  neighbor $r6 activate
  neighbor $r6 route-map ANNOUNCE out
  neighbor $r6 route-map NOTHING in
 exit-address-family
EOF
}

write_router_conf() {
    local d=$LAB_DIR/router
    mkdir -p "$d"
    cat >"$d/zebra.conf" <<EOF
hostname router
log file $d/zebra.log
EOF
    # any node on 198.18.2.0/24 may peer (bgp listen range: adding a node
    # changes nothing here); only the service address is taken from them
    cat >"$d/bgpd.conf" <<EOF
hostname router
log file $d/bgpd.log
ip prefix-list SERVICE seq 5 permit $VIP/32
ip prefix-list SERVICE seq 10 permit $SERVER/32
ipv6 prefix-list SERVICE6 seq 5 permit $VIP6/128
ipv6 prefix-list SERVICE6 seq 10 permit $SERVER6/128
route-map FROM-NODES permit 10
 match ip address prefix-list SERVICE
route-map FROM-NODES permit 20
 match ipv6 address prefix-list SERVICE6
route-map NOTHING deny 10
router bgp $ROUTER_AS
 bgp router-id 198.18.1.1
 neighbor NODES peer-group
 neighbor NODES remote-as $NODE_AS
 neighbor NODES timers 1 3
 bgp listen range 198.18.2.0/24 peer-group NODES
 neighbor NODES6 peer-group
 neighbor NODES6 remote-as $NODE_AS
 neighbor NODES6 timers 1 3
 bgp listen range 2001:db8:2::/48 peer-group NODES6
 address-family ipv4 unicast
  maximum-paths 64
  neighbor NODES route-map FROM-NODES in
  neighbor NODES route-map NOTHING out
  no neighbor NODES6 activate
 exit-address-family
 address-family ipv6 unicast
  maximum-paths 64
  neighbor NODES6 activate
  neighbor NODES6 route-map FROM-NODES in
  neighbor NODES6 route-map NOTHING out
 exit-address-family
EOF
}

# frr_start NS DIR DAEMON [ARGS...]: one FRR daemon, its sockets and pid in DIR
frr_start() {
    local ns=$1 d=$2 daemon=$3
    shift 3
    # FRR drops to its own user (frr, vty group frrvty): it owns DIR
    chown frr:frr "$d"
    ip netns exec "$ns" "$FRR/$daemon" -d -u frr -g frr -P 0 \
        --vty_socket "$d" -i "$d/$daemon.pid" -f "$d/$daemon.conf" "$@" \
        </dev/null >>"$d/$daemon.out" 2>&1 ||
        die "$daemon did not start in $ns: $(tail -n 5 "$d/$daemon.out")"
}

v6_sysctls() { # NS: IPv6 on, no autoconfiguration
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=0
    ip netns exec "$1" sysctl -qw net.ipv6.conf.default.accept_ra=0
    ip netns exec "$1" sysctl -qw net.ipv6.conf.default.accept_dad=0
}

link_up() { # NS IF...
    local n=$1 i
    shift
    for i in "$@"; do ip -n "$n" link set "$i" up; done
}

cmd_up() {
    local n=${1:-} spoof=${2:-} i ns
    [[ $n =~ ^[1-9][0-9]?$ ]] || die "up N [--spoof]: N nodes, 1..63"
    [[ -z $spoof || $spoof == --spoof ]] || die "up N [--spoof]: unknown option $spoof"
    [[ $EUID == 0 ]] || die "needs root"
    [[ -x $PROXYD ]] || die "proxyd binary not found: $PROXYD (set PROXYD)"
    [[ -x $FRR/bgpd && -x $FRR/zebra ]] || die "FRR not found in $FRR (Debian package frr)"
    for i in vtysh nginx vsftpd curl ip iptables redis-server python3; do command -v "$i" >/dev/null || die "$i not found"; done
    [[ -x $R66PEER ]] || die "r66peer not found: $R66PEER (build target r66peer, or set R66PEER)"
    id ftp >/dev/null 2>&1 || die "no user ftp (vsftpd's anonymous login)"
    [[ -z $(lab_namespaces) ]] || die "lab $LAB_ID is already up (lab.sh down first)"
    # LAB_DIR is ours only if an earlier lab.sh up marked it: never remove
    # a folder someone else named by mistake
    if [[ -e $LAB_DIR && ! -f $LAB_DIR/.proxyd-lab ]] &&
        [[ -n $(ls -A "$LAB_DIR" 2>/dev/null) ]]; then
        die "LAB_DIR $LAB_DIR exists, is not empty and was not made by lab.sh: choose another"
    fi
    rm -rf "$LAB_DIR"
    mkdir -p "$LAB_DIR"
    : >"$LAB_DIR/.proxyd-lab"
    chmod 755 "$LAB_DIR"
    echo "${LAB_PIN:-1}" >"$LAB_DIR/pin"
    SVC=$VIP SVC6=$VIP6
    if [[ -n $spoof ]]; then
        : >"$LAB_DIR/spoof"
        SVC=$SERVER SVC6=$SERVER6
    fi
    write_nginx
    write_vsftpd
    # the IPv6 vsftpd: the same but its address and log
    sed -e 's/^listen=YES/listen=NO/' -e 's/^listen_ipv6=NO/listen_ipv6=YES/' \
        -e "s|^listen_address=.*|listen_address6=$SERVER6|" -e 's|vsftpd\.log$|vsftpd6.log|' \
        "$LAB_DIR/server/vsftpd.conf" >"$LAB_DIR/server/vsftpd6.conf"
    write_policy
    write_router_conf

    for ns in "$NS_C" "$NS_R" "$NS_S"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        v6_sysctls "$ns"
    done
    # client -- router
    ip link add c0 netns "$NS_C" type veth peer name r0 netns "$NS_R"
    ip -n "$NS_C" addr add 198.18.1.2/24 dev c0
    ip -n "$NS_R" addr add 198.18.1.1/24 dev r0
    ip -n "$NS_C" addr add 2001:db8:1::2/64 dev c0 nodad
    ip -n "$NS_R" addr add 2001:db8:1::1/64 dev r0 nodad
    link_up "$NS_C" c0
    link_up "$NS_R" r0
    ip -n "$NS_C" route add default via 198.18.1.1
    ip -n "$NS_C" -6 route add default via 2001:db8:1::1
    ip netns exec "$NS_R" sysctl -qw net.ipv6.conf.all.forwarding=1
    ip netns exec "$NS_R" sysctl -qw net.ipv6.fib_multipath_hash_policy=1
    # the router hashes each flow on its addresses and ports (L4) over the
    # nodes that announce the service address
    ip netns exec "$NS_R" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$NS_R" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
    if [[ $(cat "$LAB_DIR/pin") != 0 ]]; then
        # a flow's later packets from the client follow its conntrack mark
        # (the node its first packet was routed to), not the current ECMP set
        ip netns exec "$NS_R" iptables -w -t mangle -A PREROUTING -i r0 -d "$SVC" \
            -m conntrack --ctstate ESTABLISHED,RELATED -j CONNMARK --restore-mark
        ip netns exec "$NS_R" ip6tables -w -t mangle -A PREROUTING -i r0 -d "$SVC6" \
            -m conntrack --ctstate ESTABLISHED,RELATED -j CONNMARK --restore-mark
    fi
    # server: one segment (a bridge) that every node joins
    # a fixed MAC address: a bridge that has none takes its lowest port's,
    # so a node added later could change it under the others' ARP caches
    # (their connections to the server stall until the caches expire)
    ip -n "$NS_S" link add br0 address 02:00:c6:13:02:02 type bridge
    ip -n "$NS_S" addr add "$SERVER/24" dev br0
    ip -n "$NS_S" addr add "$SERVER6/64" dev br0 nodad
    link_up "$NS_S" br0
    if spoofing; then
        # the clients' replies go by ECMP over the nodes (server_route),
        # hashed on addresses and ports; the nodes' ICMP redirects (a node
        # forwarding a stray back over the segment) would move every flow
        # to the client's address at once: not taken
        ip netns exec "$NS_S" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
        ip netns exec "$NS_S" sysctl -qw net.ipv4.conf.all.accept_redirects=0
        ip netns exec "$NS_S" sysctl -qw net.ipv4.conf.br0.accept_redirects=0
        ip netns exec "$NS_S" sysctl -qw net.ipv6.fib_multipath_hash_policy=1
        ip netns exec "$NS_S" sysctl -qw net.ipv6.conf.all.accept_redirects=0
        ip netns exec "$NS_S" sysctl -qw net.ipv6.conf.br0.accept_redirects=0
    fi

    for ((i = 1; i <= n; i++)); do
        make_node "$i"
    done

    ip netns exec "$NS_S" nginx -p "$LAB_DIR/server" -c "$LAB_DIR/server/nginx.conf" \
        </dev/null >"$LAB_DIR/server/logs/stdout.log" 2>&1 || die "nginx did not start"
    ip netns exec "$NS_S" setsid vsftpd "$LAB_DIR/server/vsftpd.conf" \
        </dev/null >"$LAB_DIR/server/logs/vsftpd.out" 2>&1 &
    # vsftpd listens on one family: a second one for IPv6
    ip netns exec "$NS_S" setsid vsftpd "$LAB_DIR/server/vsftpd6.conf" \
        </dev/null >"$LAB_DIR/server/logs/vsftpd6.out" 2>&1 &
    mkdir -p "$LAB_DIR/r66"
    # r66peer: one per family too (r66peer6.log), the same folder
    local a log
    for a in "$SERVER" "$SERVER6"; do
        log=r66peer
        [[ $a == "$SERVER" ]] || log=r66peer6
        ip netns exec "$NS_S" setsid "$R66PEER" server --listen "$a:6666" \
            --dir "$LAB_DIR/r66" --id serverb:pwB --partner hosta:pwA \
            --partner hostb:pwb --block 1048576 \
            </dev/null >"$LAB_DIR/server/logs/$log.log" 2>&1 &
    done
    for i in $PORTS; do
        wait_until 5 listening "$NS_S" "$i" || die "nothing listening on $i in $NS_S (nginx, vsftpd, r66peer)"
        wait_until 5 listening_on "$NS_S" "[$SERVER6]" "$i" ||
            die "nothing listening on [$SERVER6]:$i in $NS_S (nginx, vsftpd, r66peer)"
    done
    echo "lab ok" >"$LAB_DIR/www/index.html"

    frr_start "$NS_R" "$LAB_DIR/router" zebra -z "$LAB_DIR/router/zserv.api"
    frr_start "$NS_R" "$LAB_DIR/router" bgpd -z "$LAB_DIR/router/zserv.api"
    start_store
    ip netns exec "$NS_R" setsid "$HERE/lab.sh" _members </dev/null >>"$LAB_DIR/router/members.log" 2>&1 &
    for ((i = 1; i <= n; i++)); do
        start_node "$i"
    done
    for ((i = 1; i <= n; i++)); do
        wait_until 20 node_in_route "$i" ||
            die "node $i's announcement did not reach the router's routing table within 20 s"
    done
    for ((i = 1; i <= n; i++)); do
        wait_until 20 node_in_route6 "$i" ||
            die "node $i's IPv6 announcement did not reach the router's routing table within 20 s"
    done
    echo "server=$SVC"
    echo "server6=$SVC6"
    echo "root=$LAB_DIR/www"
    echo "r66dir=$LAB_DIR/r66"
}

# start_store: the nodes' quota store, a redis-server on the router's lo
# (the nodes reach it by their default route; the client's side may not):
# nothing on disk, the lab's day only
start_store() {
    ip -n "$NS_R" addr add "$STORE/32" dev lo
    ip netns exec "$NS_R" iptables -w -A INPUT -i r0 -p tcp --dport 6379 -j DROP
    ip netns exec "$NS_R" setsid redis-server --bind "$STORE" --port 6379 \
        --save "" --appendonly no --protected-mode no --dir "$LAB_DIR/router" \
        --daemonize no </dev/null >>"$LAB_DIR/router/redis.log" 2>&1 &
    wait_until 5 listening "$NS_R" 6379 || die "redis-server did not start: $(tail -n 5 "$LAB_DIR/router/redis.log")"
}

# make_node I: node I's namespace, its links to the router and the server
# segment, the service address on lo, and on the router its pinning rule
# and table
make_node() {
    local i=$1 ns
    ns=$(ns_node "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    v6_sysctls "$ns"
    ip link add "r$i" netns "$NS_R" type veth peer name eth0 netns "$ns"
    ip -n "$NS_R" addr add "$(router_addr "$i")/30" dev "r$i"
    ip -n "$ns" addr add "$(node_addr "$i")/30" dev eth0
    ip link add "s$i" netns "$NS_S" type veth peer name eth1 netns "$ns"
    ip -n "$NS_S" link set "s$i" master br0
    ip -n "$ns" addr add "$(node_out "$i")/24" dev eth1
    ip -n "$NS_R" addr add "$(router_addr6 "$i")/64" dev "r$i" nodad
    ip -n "$ns" addr add "$(node_addr6 "$i")/64" dev eth0 nodad
    ip -n "$ns" addr add "$(node_out6 "$i")/64" dev eth1 nodad
    if ! spoofing; then
        ip -n "$ns" addr add "$VIP/32" dev lo
        ip -n "$ns" addr add "$VIP6/128" dev lo nodad
    fi
    link_up "$NS_R" "r$i"
    link_up "$NS_S" "s$i"
    link_up "$ns" eth0 eth1
    ip -n "$ns" route add default via "$(router_addr "$i")"
    ip -n "$ns" -6 route add default via "$(router_addr6 "$i")"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.forwarding=1
    ip -n "$ns" -6 rule add pref 50 lookup local
    ip -n "$ns" -6 rule del pref 0 lookup local
    # strays: a packet for another node's data ports that reaches this one
    # anyway (a router without the rules below, a hash change) is forwarded
    # to its owner over the server segment, never answered here. The
    # owner's own table goes before the local one (the service address is
    # local on every node); this node's own connections never use a data
    # port (ephemeral ports above them), so a port says whose flow it is
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.default.rp_filter=0
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.eth1.rp_filter=0
    if spoofing; then
        # the source ports of its server-side connections: node I's own
        # (the range is IPv6's too)
        ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="$(src_lo "$i") $(src_hi "$i")"
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.send_redirects=0
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.eth1.send_redirects=0
    else
        ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="50000 60999"
    fi
    ip -n "$ns" rule add pref 50 lookup local
    ip -n "$ns" rule del pref 0 lookup local
    local j
    for j in $(nodes); do
        [[ $j == "$i" ]] && continue
        stray_rules "$i" "$j"
        stray_rules "$j" "$i"
    done
    # table 100+I: the service address is node I (pinned flows, node I's
    # FTP data ports); the same for IPv6
    local f svc naddr
    for f in 4 6; do
        if [[ $f == 4 ]]; then
            svc=$SVC naddr=$(node_addr "$i")
        else
            svc=$SVC6 naddr=$(node_addr6 "$i")
        fi
        ip -n "$NS_R" -"$f" rule add fwmark "$i" lookup "$((100 + i))"
        ip -n "$NS_R" -"$f" route add "$svc" via "$naddr" dev "r$i" table "$((100 + i))"
        # a new connection to one of node I's FTP data ports goes to node I,
        # whatever the hash says (a passive data connection reaches the node
        # whose ftp session listens for it)
        ipt "$f" "$NS_R" -t mangle -A PREROUTING -i r0 -d "$svc" -p tcp \
            --dport "$(data_lo "$i"):$(data_hi "$i")" -m conntrack --ctstate NEW \
            -m comment --comment "lab: data ports of node $i" -j MARK --set-mark "$i"
        if [[ $(cat "$LAB_DIR/pin") != 0 ]]; then
            ipt "$f" "$NS_R" -t mangle -A POSTROUTING -o "r$i" -d "$svc" \
                -m conntrack --ctstate NEW -j CONNMARK --set-mark "$i"
            # connections node I opens from the service address (FTP active
            # mode towards the client): the client's answers follow mark I
            ipt "$f" "$NS_R" -t mangle -A PREROUTING -i "r$i" -s "$svc" \
                -m conntrack --ctstate NEW -j CONNMARK --set-mark "$i"
        fi
    done
    if spoofing; then
        divert_rules "$i"
        server_steer "$i"
    fi
    write_node_conf "$i"
}

# divert_rules I (--spoof): node I's proxyd is inline.  Connections to the
# server's ports from the client's side, and to node I's own FTP data ports
# from either side (a passive data connection of a client; the server's
# active-mode one to the client's address), go to its transparent
# listeners (TPROXY, the port kept); every other packet of a connection a
# transparent socket of it has (the rest of those, the server's replies to
# its spoofed connections) is delivered to that socket, not forwarded.
# Nothing else crosses the node from the client's side: a packet for the
# server that no service took is dropped (a stray for another node, marked
# with its number, is forwarded).  The same in ip6tables, to the server's
# IPv6 address.
divert_rules() {
    local i=$1 ns f server any
    ns=$(ns_node "$i")
    for f in 4 6; do
        server=$SERVER any=0.0.0.0/0
        [[ $f == 4 ]] || server=$SERVER6 any=::/0
        ip -n "$ns" -"$f" rule add pref 5 fwmark "$DIVERT_MARK/$DIVERT_MARK" lookup "$DIVERT_TABLE"
        ip -n "$ns" -"$f" route add local "$any" dev lo table "$DIVERT_TABLE"
        ipt "$f" "$ns" -t mangle -A PREROUTING -p tcp ! --syn -m socket --transparent \
            -m comment --comment "lab: transparent sockets" -j MARK --set-xmark "$DIVERT_MARK/$DIVERT_MARK"
        ipt "$f" "$ns" -t mangle -A PREROUTING -i eth0 -d "$server" -p tcp --syn \
            -m multiport --dports "${PORTS// /,}" -m comment --comment "lab: services" \
            -j TPROXY --on-port 0 --tproxy-mark "$DIVERT_MARK/$DIVERT_MARK"
        ipt "$f" "$ns" -t mangle -A PREROUTING -p tcp --syn \
            --dport "$(data_lo "$i"):$(data_hi "$i")" -m comment --comment "lab: own data ports" \
            -j TPROXY --on-port 0 --tproxy-mark "$DIVERT_MARK/$DIVERT_MARK"
        ipt "$f" "$ns" -A FORWARD -i eth0 -m mark --mark 0 \
            -m comment --comment "lab: nothing bypasses proxyd" -j DROP
    done
}

# server_steer I (--spoof): the server side's routing sends what goes to
# the clients' addresses on node I's source or data ports to node I (one
# mark rule, "lab: replies to node I", and table 100+I); the rest by the
# ECMP route over every node (server_route).  The same for IPv6 (ip6tables,
# the clients' 2001:db8:1::/64, node I's IPv6 address)
server_steer() {
    local i=$1 f net out
    for f in 4 6; do
        net=$CLIENT_NET out=$(node_out "$i")
        [[ $f == 4 ]] || net=$CLIENT_NET6 out=$(node_out6 "$i")
        ipt "$f" "$NS_S" -t mangle -A OUTPUT -d "$net" -p tcp \
            -m multiport --dports "$(src_lo "$i"):$(src_hi "$i"),$(data_lo "$i"):$(data_hi "$i")" \
            -m comment --comment "lab: replies to node $i" -j MARK --set-mark "$i"
        ip -n "$NS_S" -"$f" rule add fwmark "$i" lookup "$((100 + i))"
        ip -n "$NS_S" -"$f" route add "$net" via "$out" dev br0 table "$((100 + i))"
    done
    server_route
}

# server_route: the server's ECMP route to the clients, over every node
# but those drained or killed (their file "left"; --spoof only)
server_route() {
    local j hops=() hops6=()
    spoofing || return 0
    for j in $(nodes); do
        [[ -f $LAB_DIR/n$j/left ]] && continue
        hops+=(nexthop via "$(node_out "$j")" dev br0)
        hops6+=(nexthop via "$(node_out6 "$j")" dev br0)
    done
    if ((${#hops[@]})); then
        ip -n "$NS_S" route replace "$CLIENT_NET" "${hops[@]}"
        ip -n "$NS_S" -6 route replace "$CLIENT_NET6" "${hops6[@]}"
    else
        ip -n "$NS_S" route del "$CLIENT_NET" 2>/dev/null || true
        ip -n "$NS_S" -6 route del "$CLIENT_NET6" 2>/dev/null || true
    fi
}
# node_left I: node I takes no new flow: out of the server's ECMP route
node_left() {
    touch "$LAB_DIR/n$1/left"
    server_route
}

# stray_rules I J: node I forwards what reaches it for node J's data ports
# to node J (its server-side address): every packet of such a flow, so
# that a flow whose first packet the router sent here keeps coming here
# and going on to J
stray_rules() {
    local ns
    ns=$(ns_node "$1")
    ip netns exec "$ns" iptables -w -t mangle -A PREROUTING -i eth0 -d "$SVC" -p tcp \
        --dport "$(data_lo "$2"):$(data_hi "$2")" \
        -m comment --comment "lab: data ports of node $2" -j MARK --set-mark "$2"
    ip -n "$ns" rule add pref 10 fwmark "$2" lookup "$((100 + $2))"
    ip -n "$ns" route add "$SVC/32" via "$(node_out "$2")" dev eth1 table "$((100 + $2))"
    ip netns exec "$ns" ip6tables -w -t mangle -A PREROUTING -i eth0 -d "$SVC6" -p tcp \
        --dport "$(data_lo "$2"):$(data_hi "$2")" \
        -m comment --comment "lab: data ports of node $2" -j MARK --set-mark "$2"
    ip -n "$ns" -6 rule add pref 10 fwmark "$2" lookup "$((100 + $2))"
    ip -n "$ns" -6 route add "$SVC6/128" via "$(node_out6 "$2")" dev eth1 table "$((100 + $2))"
    spoofing || return 0
    # --spoof: the server's packets to a client's address on node J's
    # source or data ports (a reply the server side sent here) go to J;
    # IPv6 the same
    local f net out
    for f in 4 6; do
        net=$CLIENT_NET out=$(node_out "$2")
        [[ $f == 4 ]] || net=$CLIENT_NET6 out=$(node_out6 "$2")
        ipt "$f" "$ns" -t mangle -A PREROUTING -i eth1 -d "$net" -p tcp \
            -m multiport --dports "$(src_lo "$2"):$(src_hi "$2"),$(data_lo "$2"):$(data_hi "$2")" \
            -m comment --comment "lab: replies to node $2" -j MARK --set-mark "$2"
        ip -n "$ns" -"$f" route add "$net" via "$out" dev eth1 table "$((100 + $2))"
    done
}

# add: one more node, numbered after the last one; prints its name.  The
# router's configuration does not change: it takes any peer of 198.18.2.0/24
cmd_add() {
    local i last
    [[ -n $(lab_namespaces) ]] || die "lab $LAB_ID is not up"
    last=$(nodes | tail -n 1)
    i=$((${last:-0} + 1))
    ((i <= 63)) || die "no room for node $i (63 at most)"
    make_node "$i"
    start_node "$i"
    wait_until 20 node_in_route "$i" ||
        die "node $i's announcement did not reach the router's routing table within 20 s"
    wait_until 20 node_in_route6 "$i" ||
        die "node $i's IPv6 announcement did not reach the router's routing table within 20 s"
    echo "n$i"
}

# start_node I: the node's bgpd (no zebra: it only announces), then proxyd
# under its supervisor, which announces the service address once proxyd
# listens and withdraws it when proxyd exits
start_node() {
    local i=$1 ns d
    ns=$(ns_node "$i")
    d=$LAB_DIR/n$i
    frr_start "$ns" "$d" bgpd --no_zebra
    start_supervisor "$i"
}

# start_supervisor I: node I's proxyd under its supervisor; returns once
# the node announces the service address
start_supervisor() {
    local i=$1 ns d
    ns=$(ns_node "$i")
    d=$LAB_DIR/n$i
    ip netns exec "$ns" setsid "$HERE/lab.sh" _supervise "$i" </dev/null >>"$d/supervise.log" 2>&1 &
    echo $! >"$d/supervise.pid"
    wait_until 10 test -s "$d/announced" ||
        die "node $i: proxyd did not come up (log: $(tail -n 5 "$d/proxyd.log" 2>/dev/null))"
}

announce() { # I yes|no
    local d=$LAB_DIR/n$1 no=""
    [[ $2 == yes ]] || no="no "
    vtysh_in "$(ns_node "$1")" "$d" -c "configure terminal" -c "router bgp $NODE_AS" \
        -c "address-family ipv4 unicast" -c "${no}network $SVC/32" \
        -c "exit-address-family" -c "address-family ipv6 unicast" -c "${no}network $SVC6/128"
}

# health I (beside proxyd, in the supervisor): a proxyd that is there but
# does not answer its admin endpoint (hung, stopped, out of descriptors) is
# withdrawn after HEALTH_FALL failed checks in a row, and announced again
# after HEALTH_RISE good ones; a check every second, HEALTH_TIMEOUT each.
# Not while the node drains (its withdrawal stands).
HEALTH_FALL=2 HEALTH_RISE=2 HEALTH_TIMEOUT=2
health() {
    local i=$1 d=$LAB_DIR/n$1 fails=0 oks=0 up=1
    while :; do
        sleep 1
        [[ ! -f $d/draining ]] || continue
        if curl -s -o /dev/null --max-time "$HEALTH_TIMEOUT" "http://$ADMIN/metrics"; then
            fails=0 oks=$((oks + 1))
            if ((!up && oks >= HEALTH_RISE)); then
                announce "$i" yes && up=1 && date +%s >"$d/announced" &&
                    msg "node $i: proxyd answers again: $SVC announced"
            fi
        else
            oks=0 fails=$((fails + 1))
            if ((up && fails >= HEALTH_FALL)); then
                announce "$i" no && up=0 && rm -f "$d/announced" &&
                    msg "node $i: proxyd does not answer ($fails checks): $SVC withdrawn"
            fi
        fi
    done
}

# _supervise I (internal, runs in node I's namespace): proxyd's health is
# what the node announces
cmd__supervise() {
    local i=$1 d pid p hpid kids rc=0
    d=$LAB_DIR/n$i
    "$PROXYD" -c "$d/proxyd.xml" </dev/null >>"$d/proxyd.log" 2>&1 &
    pid=$!
    echo "$pid" >"$d/proxyd.pid"
    for p in $PORTS 9180; do
        if ! wait_until 10 listening "$(ns_node "$i")" "$p"; then
            msg "node $i: proxyd not listening on $p"
            kill -TERM "$pid" 2>/dev/null
            exit 1
        fi
    done
    announce "$i" yes
    date +%s >"$d/announced"
    msg "node $i: proxyd pid $pid up, $SVC announced"
    health "$i" &
    hpid=$!
    wait "$pid" || rc=$?
    # lab.sh upgrade I S handover: the process that took over (not our
    # child, its pid in the pidfile) is the node's proxyd now
    while [[ -f $d/handover ]] && [[ $(cat "$d/proxyd.pid" 2>/dev/null) != "$pid" ]]; do
        rm -f "$d/handover"
        pid=$(cat "$d/proxyd.pid")
        msg "node $i: proxyd pid $pid took the sessions over"
        while alive "$pid"; do sleep 0.5; done
        rc=0
    done
    # the checker and whatever it runs (a vtysh in flight) go first, so
    # that nothing announces after the withdrawal below
    kids=$(pgrep -P "$hpid" | tr '\n' ' ') || true
    kill -KILL "$hpid" 2>/dev/null || true
    # shellcheck disable=SC2086
    [[ -z ${kids// /} ]] || kill -KILL $kids 2>/dev/null || true
    wait "$hpid" 2>/dev/null || true
    rm -f "$d/announced"
    if [[ -f $d/draining ]]; then
        msg "node $i: proxyd exited (status $rc) after its drain"
        exit 0
    fi
    msg "node $i: proxyd exited (status $rc): withdrawing $SVC"
    announce "$i" no || msg "node $i: withdrawal failed (bgpd gone too?)"
}

# ---------------------------------------------------------------- members

# _members (internal, in the router's namespace): every half second, the
# router's bgpd's view of the nodes into LAB_DIR/members ("NAME STATE" per
# node, renamed over the old file), the <cluster members-file> of every
# node: up (BGP session established, the service address announced),
# draining (established, nothing announced: drained or withdrawn, it
# takes no new flow), gone (no session: killed, or its bgpd stopped)
cmd__members() {
    exec python3 - "$LAB_DIR" "$LAB_ID" "$PFX" <<'PY'
import json, os, subprocess, sys, time
lab_dir, lab_id, pfx = sys.argv[1:4]
sock = os.path.join(lab_dir, "router")
while True:
    try:
        out = subprocess.run(["vtysh", "--vty_socket", sock, "-c",
                              "show bgp ipv4 unicast summary json"],
                             capture_output=True, timeout=5).stdout
        d = json.loads(out or b"{}")
        peers = d.get("peers") or d.get("ipv4Unicast", {}).get("peers", {})
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            timeout=5).stdout.decode().split()
        nodes = sorted(int(n[len(pfx) + 2:]) for n in ns
                       if n.startswith(pfx + "-n") and n[len(pfx) + 2:].isdigit())
        lines = ["# the router's bgpd, %s" % time.strftime("%H:%M:%S")]
        for i in nodes:
            p = peers.get("198.18.2.%d" % (4 * i - 2), {})
            if p.get("state") != "Established":
                state = "gone"
            elif p.get("pfxRcd", 0) > 0:
                state = "up"
            else:
                state = "draining"
            lines.append("%s-n%d %s" % (lab_id, i, state))
        tmp = os.path.join(lab_dir, "members.new")
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(tmp, os.path.join(lab_dir, "members"))
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        print("members:", e, file=sys.stderr, flush=True)
    time.sleep(0.5)
PY
}

cmd_members() {
    [[ -n $(lab_namespaces) ]] || die "lab $LAB_ID is not up"
    grep -v '^#' "$LAB_DIR/members"
}

# ---------------------------------------------------------------- status

route_nexthops() { # the router's kernel next hops for the service address
    ip -n "$NS_R" route show "$SVC/32" 2>/dev/null | grep -Eo 'via [0-9.]+' | awk '{print $2}'
}
node_in_route() {
    route_nexthops | grep -qx "$(node_addr "$1")"
}
node_in_route6() { # I: node I is a next hop of the router's IPv6 route
    ip -n "$NS_R" -6 route show "$SVC6/128" 2>/dev/null | grep -q "via $(node_addr6 "$1") "
}

node_of() { # < metrics text: the node= of proxyd_node_info, - if none
    awk -F'"' '/^proxyd_node_info\{node="/ { n = $2 } END { print (n == "" ? "-" : n) }'
}

metric_sum() { # NAME < metrics text: the sum of the series of NAME
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%d\n", s }'
}

cmd_status() {
    local i ns m state live acc name
    [[ -n $(lab_namespaces) ]] || die "lab $LAB_ID is not up"
    for i in $(nodes); do
        ns=$(ns_node "$i")
        if m=$(ip netns exec "$ns" curl -s --max-time 2 "http://$ADMIN/metrics" 2>/dev/null); then
            live=$(metric_sum proxyd_sessions_active <<<"$m")
            acc=$(metric_sum proxyd_sessions_accepted_total <<<"$m")
            name=$(node_of <<<"$m")
            if node_in_route "$i"; then
                state=active
            elif [[ -f $LAB_DIR/n$i/draining ]]; then
                state=draining
            else
                state=withdrawn
            fi
        else
            live=- acc=- name=-
            if node_in_route "$i"; then
                state=unreachable
            elif [[ -f $LAB_DIR/n$i/draining ]]; then
                state=drained
            else
                state=down
            fi
        fi
        echo "n$i $state sessions=$live accepted=$acc node=$name"
    done
}

# ---------------------------------------------------------------- drain

node_live() { # I: live sessions of node I's proxyd, empty if it does not answer
    ip netns exec "$(ns_node "$1")" curl -s --max-time 2 "http://$ADMIN/metrics" 2>/dev/null |
        metric_sum proxyd_sessions_active
}

cmd_drain() {
    local i=${1:-} limit=${2:-60} d pid live deadline
    [[ $i =~ ^[0-9]+$ && $limit =~ ^[0-9]+$ ]] || die "drain I [SECONDS]"
    d=$LAB_DIR/n$i
    [[ -f $d/proxyd.pid ]] || die "no node $i in lab $LAB_ID"
    pid=$(cat "$d/proxyd.pid")
    touch "$d/draining"
    # no new flow comes: the router keeps sending the node's own (pinned)
    # flows, the server side its replies (by their ports, server_steer)
    node_left "$i"
    announce "$i" no
    wait_until 10 eval '! node_in_route '"$i" || die "node $i still in the router's route"
    msg "node $i: withdrawn; waiting up to $limit s for its sessions to end"
    deadline=$(($(date +%s) + limit))
    while live=$(node_live "$i") && ((live > 0)) && (($(date +%s) < deadline)); do
        sleep 0.2
    done
    msg "node $i: ${live:-?} live session(s) left: stopping proxyd"
    kill -TERM "$pid" 2>/dev/null || true
    wait_until 10 eval '! alive '"$pid" || kill -KILL "$pid" 2>/dev/null || true
    echo "n$i drained live_at_stop=${live:-?}"
}

# ---------------------------------------------------------------- upgrade

# upgrade I [S]: a drain (withdrawn; the router keeps sending node I its
# own pinned flows, FTP data connections to its ports included, until they
# end or S seconds pass), then a new proxyd process (the binary PROXYD
# names now) under a new supervisor, announced once it listens. Sessions
# that outlive the deadline end with the old process: handing them over
# to the new one (SCM_RIGHTS) is not done.
# set_grace I DURATION: node I's shutdown-grace, by a reload of its proxyd
set_grace() {
    local d=$LAB_DIR/n$1 n0
    sed -i "s/shutdown-grace=\"[^\"]*\"/shutdown-grace=\"$2\"/" "$d/proxyd.xml"
    n0=$(grep -c ' reload done: ' "$d/proxyd.log" || true)
    ip netns exec "$(ns_node "$1")" "$PROXYD" -c "$d/proxyd.xml" -s reload >/dev/null 2>&1 || return 1
    wait_until 10 eval '(($(grep -c " reload done: " "'"$d/proxyd.log"'" || true) > '"$n0"'))'
}

cmd_upgrade() {
    local i=${1:-} limit=${2:-60} how=${3:-handover} d spid out old
    [[ $i =~ ^[0-9]+$ && $limit =~ ^[0-9]+$ && $how =~ ^(drain|handover)$ ]] ||
        die "upgrade I [SECONDS [drain|handover]]"
    d=$LAB_DIR/n$i
    [[ -f $d/proxyd.pid && -f $d/announced ]] || die "node $i of lab $LAB_ID is not up and announced"
    [[ -x $PROXYD ]] || die "proxyd binary not found: $PROXYD (set PROXYD)"
    if [[ $how == handover ]]; then
        # the node stays in the route: the new process listens beside the
        # old one (SO_REUSEPORT) and answers on the admin address it passed
        old=$(cat "$d/proxyd.pid")
        # what is not quiet (a response, a file in the middle) drains in the
        # old process for its shutdown-grace: S for this upgrade (a reload
        # first), back to the lab's 1 s afterwards (drain's stop)
        set_grace "$i" "${limit}s" || die "node $i: reload to shutdown-grace=${limit}s failed"
        touch "$d/handover"
        if ! out=$(ip netns exec "$(ns_node "$i")" "$PROXYD" -c "$d/proxyd.xml" -s upgrade 2>&1); then
            rm -f "$d/handover"
            set_grace "$i" "$GRACE" || true
            die "node $i: upgrade failed, pid $old serves on: $out"
        fi
        wait_until "$((limit + 10))" eval '! alive '"$old" || die "node $i: the old proxyd $old still runs"
        set_grace "$i" "$GRACE" || die "node $i: reload to shutdown-grace=$GRACE failed"
        echo "n$i upgraded pid=$(cat "$d/proxyd.pid") $(grep -Eo 'handover sessions=[0-9]+ drained=[0-9]+ \(to' "$d/proxyd.log" | tail -n 1 | sed 's/ (to$//')"
        return
    fi
    spid=$(cat "$d/supervise.pid" 2>/dev/null || true)
    out=$(cmd_drain "$i" "$limit")
    # the old supervisor is gone once its proxyd is (it exits after a drain)
    [[ -z $spid ]] || wait_until 10 eval '! alive '"$spid" || die "node $i: the old supervisor did not exit"
    rm -f "$d/draining" "$d/left"
    start_supervisor "$i"
    wait_until 20 node_in_route "$i" ||
        die "node $i's announcement did not reach the router's routing table within 20 s"
    server_route
    echo "n$i upgraded ${out#n"$i" drained } pid=$(cat "$d/proxyd.pid")"
}

# ---------------------------------------------------------------- kill / down

alive() { # PID: running (not gone, not a zombie)
    local st
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# kill_pids [-9] PID...: TERM (or KILL), then KILL what is left after 3 s
kill_pids() {
    local sig=TERM pid k left
    if [[ ${1:-} == -9 ]]; then sig=KILL; shift; fi
    (($#)) || return 0
    kill -"$sig" "$@" 2>/dev/null || true
    for ((k = 0; k < 60; k++)); do
        left=0
        for pid in "$@"; do if alive "$pid"; then left=1; fi; done
        ((left)) || return 0
        sleep 0.05
    done
    kill -KILL "$@" 2>/dev/null || true
}

ns_pids() { ip netns pids "$1" 2>/dev/null | tr '\n' ' '; }

cmd_kill() {
    local i=${1:-} ns pids
    [[ $i =~ ^[0-9]+$ ]] || die "kill I"
    ns=$(ns_node "$i")
    [[ " $(lab_namespaces | tr '\n' ' ')" == *" $ns "* ]] || die "no node $i in lab $LAB_ID"
    pids=$(ns_pids "$ns")
    # the node dies as a machine would: nothing gets to say goodbye; the
    # router's bgpd sees the TCP session close (the kernel closes a dead
    # process's sockets) and withdraws the node's route at once
    # shellcheck disable=SC2086
    kill_pids -9 $pids
    rm -f "$LAB_DIR/n$i/announced"
    node_left "$i"
    msg "node $i killed (pids $pids)"
}

cmd_down() {
    local ns pids
    for ns in $(lab_namespaces); do
        pids=$(ns_pids "$ns")
        # shellcheck disable=SC2086
        [[ -z ${pids// /} ]] || kill_pids $pids
        ip netns del "$ns"
    done
    if [[ ${LAB_KEEP:-0} != 1 && -f $LAB_DIR/.proxyd-lab ]]; then
        rm -rf "$LAB_DIR"
    fi
}

# ---------------------------------------------------------------- main

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
case $cmd in
    up) cmd_up "$@" ;;
    client) ip netns exec "$NS_C" "$@" ;;
    server) ip netns exec "$NS_S" "$@" ;;
    router) ip netns exec "$NS_R" "$@" ;;
    node)
        [[ ${1:-} =~ ^[0-9]+$ ]] || die "node I CMD..."
        i=$1
        shift
        ip netns exec "$(ns_node "$i")" "$@"
        ;;
    status) cmd_status ;;
    members) cmd_members ;;
    _members) cmd__members ;;
    add) cmd_add ;;
    kill) cmd_kill "$@" ;;
    drain) cmd_drain "$@" ;;
    upgrade) cmd_upgrade "$@" ;;
    down) cmd_down ;;
    _supervise) cmd__supervise "$@" ;;
    -h | --help | help) usage ;;
    *) die "unknown command $cmd (lab.sh help)" ;;
esac
