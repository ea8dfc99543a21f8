# shellcheck shell=bash
# Helpers for the R66 integration tests (sourced after lib.sh): an r66peer
# server behind an r66 service of proxyd in fixed mode.
#   R66PEER          path of bench/r66peer (default: <repo>/build/r66peer)
#   PROXYD_SANITIZE  set (by tests/CMakeLists.txt) in the ASan build: big
#                    transfers are made smaller there

: "${R66PEER:=$REPO_DIR/build/r66peer}"
R66_SRV_DIR=""
R66_SRV_PORT=""
R66_SRV_PID=""
R66_PORT=""

need_r66peer() {
    [[ -x $R66PEER ]] || fail "r66peer not found: $R66PEER (build target r66peer, or set R66PEER=)"
}

# start_r66_server [EXTRA_ARGS...]: r66peer server "serverb" on a free port,
# files in $R66_SRV_DIR; knows partners hosta, hostb and hostz
start_r66_server() {
    free_port R66_SRV_PORT
    R66_SRV_DIR="$T/srv"
    mkdir -p "$R66_SRV_DIR"
    "$R66PEER" server --listen "127.0.0.1:$R66_SRV_PORT" --dir "$R66_SRV_DIR" \
        --id serverb:pwB --partner hosta:pwA --partner hostb:pwb \
        --partner hostz:pwZ --block 1048576 "$@" >"$T/r66server.log" 2>&1 &
    R66_SRV_PID=$!
    track_pid "$R66_SRV_PID"
    wait_listen "$R66_SRV_PORT" 5 "$R66_SRV_PID" || fail "r66peer server did not start: $(cat "$T/r66server.log")"
}

# write_r66_service NAME PORT TARGET_PORT R66_XML
write_r66_service() {
    cat >"$T/policy/$1.xml" <<XML
<service name="$1" analyser="r66">
  <listen address="127.0.0.1" port="$2" mode="fixed"/>
  <target address="127.0.0.1" port="$3"/>
  $4
</service>
XML
    PROXYD_PORTS+=("$2")
}

# r66c PORT HOST:PW ARGS...: r66peer client to 127.0.0.1:PORT as HOST
# (checking server serverb); stdout/stderr to $T/client.out / client.err;
# sets R66_RC
r66c() {
    local port=$1 id=$2
    shift 2
    R66_RC=0
    "$R66PEER" client --connect "127.0.0.1:$port" --id "$id" \
        --partner serverb:pwB --timeout 120 "$@" >"$T/client.out" 2>"$T/client.err" || R66_RC=$?
}

# r66_event NAME: the r66 analyser counter
r66_event() { metric_value proxyd_analyser_events_total "analyser=\"r66\",event=\"$1\""; }

# r66_finish: stop proxyd (SIGTERM) and the server; neither proxyd nor the
# peers may have left a sanitizer report (ASan/UBSan build) or a crash
r66_finish() {
    kill -TERM "$PROXYD_PID" 2>/dev/null || true
    wait_exit "$PROXYD_PID" 15 || fail "proxyd did not exit within 15 s of SIGTERM"
    assert_eq "$WAIT_RC" 0 "proxyd exit status after SIGTERM"
    kill "$R66_SRV_PID" 2>/dev/null || true
    local f
    for f in "$PROXYD_LOG" "$T/r66server.log" "$T"/client.err; do
        [[ -f $f ]] || continue
        assert_no_grep "$f" "AddressSanitizer|LeakSanitizer|runtime error:" "sanitizer report in $f"
    done
}

# start_r66_server_at NAME [EXTRA_ARGS...]: one more r66peer server like
# start_r66_server (same ids and partners), files in $T/srv-NAME, output in
# $T/r66server-NAME.log; sets R66_AT_PORT, R66_AT_DIR, R66_AT_PID
R66_AT_PORT=""
R66_AT_DIR=""
R66_AT_PID=""
start_r66_server_at() {
    local name=$1
    shift
    free_port R66_AT_PORT
    R66_AT_DIR="$T/srv-$name"
    mkdir -p "$R66_AT_DIR"
    "$R66PEER" server --listen "127.0.0.1:$R66_AT_PORT" --dir "$R66_AT_DIR" \
        --id serverb:pwB --partner hosta:pwA --partner hostb:pwb \
        --partner hostz:pwZ --block 1048576 "$@" >"$T/r66server-$name.log" 2>&1 &
    R66_AT_PID=$!
    track_pid "$R66_AT_PID"
    wait_listen "$R66_AT_PORT" 5 "$R66_AT_PID" ||
        fail "r66peer server $name did not start: $(cat "$T/r66server-$name.log")"
}

# r66_pki DIR: a test CA made now with the openssl command, DIR/ca.pem and
# DIR/ca.key (EC P-256, valid 2 days)
r66_pki() {
    mkdir -p "$1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1/ca.key" -out "$1/ca.pem" -days 2 -subj "/CN=r66 test CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign" 2>"$1/err" || fail "CA: $(cat "$1/err")"
}

# r66_pki_leaf DIR NAME CN SAN EKU: DIR/NAME.pem and DIR/NAME.key, signed by
# r66_pki's CA (SAN e.g. "DNS:a.test,IP:127.0.0.1", EKU serverAuth or
# clientAuth)
r66_pki_leaf() {
    local d=$1
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$d/$2.key" -out "$d/$2.csr" -subj "/CN=$3" 2>"$d/err" || fail "key $2: $(cat "$d/err")"
    printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$4" "$5" >"$d/$2.ext"
    openssl x509 -req -in "$d/$2.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
        -CAcreateserial -days 2 -extfile "$d/$2.ext" -out "$d/$2.pem" 2>"$d/err" ||
        fail "leaf $2: $(cat "$d/err")"
}
