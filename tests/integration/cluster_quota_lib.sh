# cluster_quota_lib.sh: what the tests of quotas across a cluster share
# (cluster_quota, cluster_quota_bytes, cluster_quota_r66*), sourced after
# lib.sh (and ftp_lib.sh for qnode_ftp): the store (a Redis of the test's own, start_store, rcli),
# nodes (proxyd processes sharing it: qnode_conf, qnode_ftp, qnode_start,
# or qnode for a node with one ftp service and qretr_held through it,
# qnode_r66 with one r66 service and qr66, qsend_r66 through it)
# store_bytes, stop_store and assert_log_in.
# shellcheck shell=bash

# start_store [again]: redis-server on loopback, nothing on disk; REDIS_PORT
# (again: on the REDIS_PORT of the one stopped before, with nothing in it)
start_store() {
    [[ ${1:-} == again ]] || free_port REDIS_PORT
    mkdir -p "$T/redis"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --dir "$T/redis" --daemonize no >"$T/redis.log" 2>&1 &
    REDIS_PID=$!
    track_pid "$REDIS_PID"
    wait_listen "$REDIS_PORT" 10 "$REDIS_PID" || fail "redis-server does not listen"
}
rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
# stop_store: the store goes down (start_store again brings it back)
stop_store() {
    kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
}
# store_bytes KEY WANT: the bytes of KEY's day once they come to WANT (the
# node tells the store from a thread), or what they are after 5 s
store_bytes() {
    local b k
    for ((k = 0; k < 50; k++)); do
        b=$(rcli HGET "$1" b)
        [[ $b == "$2" ]] && break
        sleep 0.1
    done
    printf '%s\n' "$b"
}

# assert_log_in FILE REGEX: the line comes (log lines come from a thread)
assert_log_in() { wait_grep "$1" "$2" 5 || fail "no line /$2/ in $1"; }

declare -A ADMIN LOG PID FTP
# qnode_conf NAME ON_STORE_ERROR WORKERS: node NAME's daemon file (its
# folder $T/NAME, its admin port ADMIN[NAME], its log LOG[NAME])
qnode_conf() {
    local n=$1 d=$T/$1
    mkdir -p "$d/conf" "$d/policy"
    free_port "ADMIN[$n]"
    LOG[$n]=$d/proxyd.log
    cat >"$d/conf/proxyd.xml" <<XML
<proxyd>
  <workers>$3</workers>
  <node name="$n"/>
  <log target="stderr" level="info"/>
  <admin listen="127.0.0.1:${ADMIN[$n]}"/>
  <cluster store="127.0.0.1:$REDIS_PORT" store-timeout="1s" on-store-error="$2"/>
  <policies dir="../policy"/>
</proxyd>
XML
}
# qnode_ftp NAME SERVICE PORT RULE: an ftp service of node NAME on PORT
# towards vsftpd, its <ftp> holding RULE (the same service names on every
# node: the store counts per service and user)
qnode_ftp() {
    cat >"$T/$1/policy/$2.xml" <<XML
<service name="$2" analyser="ftp">
  <listen address="127.0.0.1" port="$3" mode="fixed"/>
  <target address="127.0.0.1" port="$VSFTPD_PORT"/>
  <ftp>$4</ftp>
</service>
XML
}
# qnode_start NAME PORT...: node NAME's proxyd, once it listens on PORT...
# and its admin port
qnode_start() {
    local n=$1 p
    shift
    "$PROXYD" -c "$T/$n/conf/proxyd.xml" >>"${LOG[$n]}" 2>&1 &
    PID[$n]=$!
    track_pid "${PID[$n]}"
    for p in "$@" "${ADMIN[$n]}"; do
        wait_listen "$p" 10 "${PID[$n]}" || fail "node $n does not listen on $p: $(tail -5 "${LOG[$n]}")"
    done
}
# qnode NAME ON_STORE_ERROR WORKERS RULE: a node with one ftp service,
# "ftp" on FTP[NAME]
qnode() {
    qnode_conf "$1" "$2" "$3"
    free_port "FTP[$1]"
    qnode_ftp "$1" ftp "${FTP[$1]}" "$4"
    qnode_start "$1" "${FTP[$1]}"
}
# qretr_held NAME CMD...: a RETR of pub/f.bin as anonymous through node
# NAME's ftp service; once its 150 came, CMD runs, then the client reads
# the data (the data channel cannot end before when the file is larger
# than the client's window); prints the bytes and the reply
qretr_held() {
    local n=$1
    shift
    timeout 30 python3 - 127.0.0.1 "${FTP[$n]}" "$@" <<'PY'
import ftplib, subprocess, sys
f = ftplib.FTP()
f.connect(sys.argv[1], int(sys.argv[2]), timeout=10)
f.login("anonymous", "t@example.org")
f.voidcmd("TYPE I")
c = f.transfercmd("RETR pub/f.bin")
subprocess.run(sys.argv[3:], check=True, stdout=subprocess.DEVNULL)
n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
c.close()
print(n, f.voidresp()[:3])
f.quit()
PY
}
# qnode_r66 NAME TARGET_PORT HOSTS [ON_STORE_ERROR]: a node with one r66
# service, "r66" on R66[NAME] towards TARGET_PORT, its <r66 max-block="64k">
# holding HOSTS (on-store-error: refuse unless told)
declare -A R66
qnode_r66() {
    qnode_conf "$1" "${4:-refuse}" 2
    free_port "R66[$1]"
    cat >"$T/$1/policy/r66.xml" <<XML
<service name="r66" analyser="r66">
  <listen address="127.0.0.1" port="${R66[$1]}" mode="fixed"/>
  <target address="127.0.0.1" port="$2"/>
  <r66 max-block="64k">$3</r66>
</service>
XML
    qnode_start "$1" "${R66[$1]}"
}
# qr66 NAME ID:PW OUT ARGS...: one r66peer client through node NAME's r66
# service with ARGS (the transfer); its exit status in OUT.rc
qr66() {
    local n=$1 id=$2 out=$3 rc=0
    shift 3
    "$R66PEER" client --connect "127.0.0.1:${R66[$n]}" --id "$id" \
        --partner serverb:pwB --timeout 60 "$@" >"$out.out" 2>"$out.err" || rc=$?
    echo "$rc" >"$out.rc"
}
# qsend_r66 NAME ID:PW FILE OUT: one SEND (rule "in") through node NAME
qsend_r66() { qr66 "$1" "$2" "$4" --rule in --mode 3 --send "$3"; }
