# shellcheck shell=bash
# FTP helpers on top of lib.sh: a vsftpd of our own and ftp services.
#
#   source "$(dirname "$0")/lib.sh"
#   source "$(dirname "$0")/ftp_lib.sh"
#   need_ftp               # root, vsftpd, curl, python3 (else skip)
#   setup
#   start_vsftpd           # $VSFTPD_PORT, root $FTP_ROOT, writable $FTP_ROOT/pub
#   write_ftp_service NAME PORT '<ftp .../>'

VSFTPD_PORT=""
FTP_ROOT=""

need_ftp() {
    [[ $EUID == 0 ]] || skip "vsftpd needs root (it drops to the ftp user itself)"
    need_cmds vsftpd curl python3 sha256sum
    id ftp >/dev/null 2>&1 || skip "no 'ftp' user for vsftpd's anonymous login"
    /usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null ||
        skip "python3-pyftpdlib missing (scripts/deps installs it)"
}

# start_vsftpd [EXTRA_CONF_LINES]: standalone vsftpd on 127.0.0.1:$VSFTPD_PORT,
# anonymous login, uploads into pub/, active and passive both allowed.
start_vsftpd() {
    local conf=$T/vsftpd.conf pid
    free_port VSFTPD_PORT
    FTP_ROOT=$T/ftproot
    mkdir -p "$FTP_ROOT/pub" /var/run/vsftpd/empty
    chmod 755 "$FTP_ROOT"
    chown ftp:ftp "$FTP_ROOT/pub"
    chmod 755 "$FTP_ROOT/pub"
    cat >"$conf" <<EOF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$VSFTPD_PORT
background=NO
anonymous_enable=YES
local_enable=NO
no_anon_password=NO
anon_root=$FTP_ROOT
write_enable=YES
anon_upload_enable=YES
anon_mkdir_write_enable=YES
anon_other_write_enable=YES
anon_world_readable_only=NO
anon_umask=022
pasv_enable=YES
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
vsftpd_log_file=$T/vsftpd.log
xferlog_std_format=NO
log_ftp_protocol=YES
secure_chroot_dir=/var/run/vsftpd/empty
${1:-}
EOF
    vsftpd "$conf" >"$T/vsftpd.out" 2>&1 &
    pid=$!
    track_pid "$pid"
    wait_listen "$VSFTPD_PORT" 5 "$pid" || {
        cat "$T/vsftpd.out" >&2
        fail "vsftpd did not start on 127.0.0.1:$VSFTPD_PORT"
    }
    info "vsftpd on 127.0.0.1:$VSFTPD_PORT, root $FTP_ROOT (pid $pid)"
}

# start_vsftpd6: a second vsftpd, IPv6 only, on [::1]:$VSFTPD6_PORT, same
# root (start_vsftpd first).
VSFTPD6_PORT=""
start_vsftpd6() {
    local conf=$T/vsftpd6.conf pid
    free_port VSFTPD6_PORT
    sed -e 's/^listen=YES$/listen=NO/' -e 's/^listen_ipv6=NO$/listen_ipv6=YES/' \
        -e 's/^listen_address=.*$/listen_address6=::1/' \
        -e "s/^listen_port=.*\$/listen_port=$VSFTPD6_PORT/" \
        -e "s|^vsftpd_log_file=.*\$|vsftpd_log_file=$T/vsftpd6.log|" \
        "$T/vsftpd.conf" >"$conf"
    vsftpd "$conf" >"$T/vsftpd6.out" 2>&1 &
    pid=$!
    track_pid "$pid"
    wait_listen "$VSFTPD6_PORT" 5 "$pid" || {
        cat "$T/vsftpd6.out" >&2
        fail "vsftpd did not start on [::1]:$VSFTPD6_PORT"
    }
}

# start_pyftpd: pyftpdlib (it has MLSD/MLST, vsftpd does not) serving
# $FTP_ROOT read-only to anonymous on 127.0.0.1:$PYFTPD_PORT.
PYFTPD_PORT=""
start_pyftpd() {
    local pid
    free_port PYFTPD_PORT
    /usr/bin/python3 - "$FTP_ROOT" "$PYFTPD_PORT" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elr")
FTPHandler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), FTPHandler).serve_forever(timeout=1)
PY
    pid=$!
    track_pid "$pid"
    # python3 and pyftpdlib take a few seconds to import on a busy machine
    wait_listen "$PYFTPD_PORT" 20 "$pid" || {
        cat "$T/pyftpd.log" >&2
        fail "pyftpdlib did not start on 127.0.0.1:$PYFTPD_PORT"
    }
}

# start_pyftpd_recorder LOGFILE USER:PASSWORD...: pyftpdlib serving
# $FTP_ROOT (all permissions) to those users on 127.0.0.1:$PYFTPD_PORT,
# writing to LOGFILE "connect" for each connection and "USER PASSWORD"
# for each login it is offered (the inband authentication tests: what
# reached the server).
start_pyftpd_recorder() {
    local log=$1 pid
    shift
    free_port PYFTPD_PORT
    : >>"$log"
    /usr/bin/python3 - "$FTP_ROOT" "$PYFTPD_PORT" "$log" "$@" >"$T/pyftpd.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
def note(line):
    with open(sys.argv[3], "a") as f:
        f.write(line + "\n")
class Recorder(DummyAuthorizer):
    def validate_authentication(self, user, password, handler):
        note("%s %s" % (user, password))
        return DummyAuthorizer.validate_authentication(self, user, password, handler)
class Handler(FTPHandler):
    def on_connect(self):
        note("connect")
a = Recorder()
for up in sys.argv[4:]:
    u, p = up.split(":", 1)
    a.add_user(u, p, sys.argv[1], perm="elradfmw")
Handler.authorizer = a
FTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever(timeout=1)
PY
    pid=$!
    track_pid "$pid"
    wait_listen "$PYFTPD_PORT" 20 "$pid" || fail "pyftpdlib did not start: $(cat "$T/pyftpd.log")"
}

# write_ftp_service NAME LISTEN_PORT FTP_XML [LISTEN_ADDR] [TARGET_PORT]
# [TARGET_ADDR]: an ftp service in fixed mode in front of our vsftpd (or
# TARGET_ADDR:TARGET_PORT).
write_ftp_service() {
    local name=$1 lport=$2 ftp=$3 laddr=${4:-127.0.0.1} tport=${5:-$VSFTPD_PORT}
    local taddr=${6:-127.0.0.1}
    cat >"$T/policy/$name.xml" <<EOF
<service name="$name" analyser="ftp">
  <listen address="$laddr" port="$lport" mode="fixed"/>
  <target address="$taddr" port="$tport"/>
  $ftp
</service>
EOF
    PROXYD_PORTS+=("$lport")
}

# ftp_cpu_per_mb PORT: us of proxyd's CPU per MB over 5 RETRs of
# pub/10m.bin (10 MB) through PORT
ftp_cpu_per_mb() {
    local t0 t1 i rc
    t0=$(proxyd_cpu_ns)
    for i in 1 2 3 4 5; do
        rc=$(curl_ftp -o /dev/null "$(ftp_url "$1" pub/10m.bin)")
        assert_eq "$rc" 0 "cpu run $i through port $1"
    done
    t1=$(proxyd_cpu_ns)
    echo $(((t1 - t0) / 1000 / 50))
}

# ftp_url PORT PATH
ftp_url() { echo "ftp://127.0.0.1:$1/$2"; }

# curl_ftp ARGS...: curl with bounded time, errors to $T/curl.err; prints rc
curl_ftp() {
    local rc=0
    curl -sS --max-time 120 "$@" 2>>"$T/curl.err" || rc=$?
    echo "$rc"
}

# listening_in LO HI: ports in [LO, HI] with a socket in LISTEN, one a line
listening_in() {
    local lo=$1 hi=$2 sl local rem st rest port
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r sl local rem st rest; do
        [[ $st == 0A ]] || continue
        port=$((16#${local##*:}))
        ((port >= lo && port <= hi)) && echo "$port"
    done
    return 0
}

# proxyd_listening_in LO HI: ports in [LO, HI] that proxyd itself listens on,
# one a line (other programs on the host may use ports of the range)
proxyd_listening_in() {
    local lo=$1 hi=$2 fd inodes=" " laddr st inode port
    for fd in /proc/"$PROXYD_PID"/fd/*; do
        fd=$(readlink "$fd" 2>/dev/null) || continue
        if [[ $fd =~ ^socket:\[([0-9]+)\]$ ]]; then inodes+="${BASH_REMATCH[1]} "; fi
    done
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        while read -r _ laddr _ st _ _ _ _ _ inode _; do
            [[ $st == 0A && $inodes == *" $inode "* ]] || continue
            port=$((16#${laddr##*:}))
            ((port >= lo && port <= hi)) && echo "$port"
        done
    return 0
}


# vsftpd_tls_conf CERT KEY: vsftpd.conf lines for explicit FTPS (AUTH TLS)
# that insist on TLS for the login and the data, and on data channels that
# resume the control connection's TLS session (require_ssl_reuse)
vsftpd_tls_conf() {
    cat <<EOF2
ssl_enable=YES
rsa_cert_file=$1
rsa_private_key_file=$2
allow_anon_ssl=YES
force_anon_logins_ssl=YES
force_anon_data_ssl=YES
require_ssl_reuse=YES
ssl_ciphers=HIGH
debug_ssl=YES
EOF2
}

# ftps_pki [SAN]: (tls_lib.sh) a CA and two leaves for localhost and
# 127.0.0.1 in $P=$T/pki, proxy (the certificate proxyd shows clients,
# SAN added to its names) and origin (the server's); CTLS and STLS: a
# service's <tls> towards the client (terminate, with proxy's) and towards
# the server (originate, checked against the CA).
ftps_pki() {
    P=$T/pki
    tls_ca ca "proxyd test CA"
    tls_leaf proxy localhost "DNS:localhost,IP:127.0.0.1${1:+,$1}" serverAuth
    tls_leaf origin localhost "DNS:localhost,IP:127.0.0.1" serverAuth
    CTLS="<tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>"
    STLS="<tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\"/>"
}

# ---- servers beside vsftpd: Pure-FTPd and ProFTPD, unpacked (not
# installed: Debian has them conflict with vsftpd) by scripts/deps into
# $FTPD_DIR.
FTPD_DIR=${PROXYD_FTPD_DIR:-/opt/proxyd-test/ftpd}
PUREFTPD_PORT=""
PROFTPD_PORT=""

# need_ftpds: Pure-FTPd and ProFTPD unpacked (else skip)
need_ftpds() {
    [[ -x $FTPD_DIR/usr/sbin/pure-ftpd && -x $FTPD_DIR/usr/sbin/proftpd ]] ||
        skip "pure-ftpd and proftpd not in $FTPD_DIR (scripts/deps unpacks them)"
}

# add_ftp_user: a local system user for the servers' own logins (no
# chroot), removed on exit: $FTP_USER, $FTP_PASS, $FTP_HOME (under $T,
# not /, owned by the user)
FTP_USER=""
FTP_PASS=""
FTP_HOME=""
add_ftp_user() {
    FTP_USER=pxftp$$
    FTP_PASS=Px-$RANDOM-$RANDOM
    FTP_HOME=$T/home/$FTP_USER
    mkdir -p "$T/home"
    chmod 755 "$T/home"
    useradd -M -d "$FTP_HOME" -s /bin/sh "$FTP_USER" ||
        fail "useradd $FTP_USER"
    at_exit "userdel -f $FTP_USER 2>/dev/null"
    echo "$FTP_USER:$FTP_PASS" | chpasswd || fail "chpasswd $FTP_USER"
    mkdir -p "$FTP_HOME"
    chown "$FTP_USER:" "$FTP_HOME"
    chmod 755 "$FTP_HOME"
}

# start_vsftpd_local: start_vsftpd, and $FTP_USER logs in too, not
# chrooted (its PWD is $FTP_HOME), with write access
start_vsftpd_local() {
    start_vsftpd "local_enable=YES
chroot_local_user=NO
pam_service_name=vsftpd
local_umask=022
${1:-}"
}

# start_pureftpd [OPTIONS...]: Pure-FTPd on 127.0.0.1:$PUREFTPD_PORT, the
# system's users (add_ftp_user), none chrooted, no anonymous login
start_pureftpd() {
    local pid
    free_port PUREFTPD_PORT
    "$FTPD_DIR/usr/sbin/pure-ftpd" -S "127.0.0.1,$PUREFTPD_PORT" -l unix -E \
        -H -4 -U 022:022 "$@" >"$T/pureftpd.out" 2>&1 &
    pid=$!
    track_pid "$pid"
    wait_listen "$PUREFTPD_PORT" 10 "$pid" || {
        cat "$T/pureftpd.out" >&2
        fail "pure-ftpd did not start on 127.0.0.1:$PUREFTPD_PORT"
    }
}

# start_proftpd [CONF_LINES]: ProFTPD on 127.0.0.1:$PROFTPD_PORT, the
# system's users, none chrooted
start_proftpd() {
    local pid
    free_port PROFTPD_PORT
    cat >"$T/proftpd.conf" <<EOF2
ServerType standalone
ServerName "proxyd-test"
ServerIdent off
DefaultServer on
UseIPv6 off
DefaultAddress 127.0.0.1
SocketBindTight on
Port $PROFTPD_PORT
User nobody
Group nogroup
MaxInstances 100
UseReverseDNS off
WtmpLog off
TransferLog $T/proftpd.xfer
ScoreboardFile $T/proftpd.scoreboard
PidFile $T/proftpd.pid
SystemLog $T/proftpd.log
DelayEngine off
ControlsEngine off
AuthOrder mod_auth_unix.c
AllowOverwrite on
Umask 022
${1:-}
EOF2
    "$FTPD_DIR/usr/sbin/proftpd" -n -c "$T/proftpd.conf" >"$T/proftpd.out" 2>&1 &
    pid=$!
    track_pid "$pid"
    wait_listen "$PROFTPD_PORT" 10 "$pid" || {
        cat "$T/proftpd.out" "$T/proftpd.log" >&2
        fail "proftpd did not start on 127.0.0.1:$PROFTPD_PORT"
    }
}
