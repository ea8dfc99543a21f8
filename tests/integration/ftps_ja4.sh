#!/usr/bin/env bash
# JA4 of FTPS data connections (issue 39: every ClientHello proxyd sees,
# FTPS control and data): each data connection's client JA4, and the
# server's JA4S where proxyd speaks TLS to it, are written on its
# data-transfer line (ja4=, ja4s=) and in the transfer's audit record
# (data_ja4, data_ja4s, beside the control connection's ja4 and ja4s);
# they are not judged by <fingerprint> (an allowlist of the control
# connection's JA4 lets the data connections through even where their
# resumed hello has a JA4 of its own).
#
# Checked against an independent computation: hello_sniff.py reads the
# hellos off the loopback interface (no relay can sit in front of a data
# port), ja4_ref.py (written from the published definitions) computes the
# JA4 and JA4S of those bytes, which must be what proxyd wrote. Clients:
# lftp (GnuTLS) passive and active, curl (OpenSSL) passive, uploads and
# downloads, through a service with TLS on both sides to vsftpd (which
# demands the data connections resume the control's TLS session).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_ftp
need_cmds lftp curl openssl python3
[[ $(id -u) == 0 ]] || skip "needs root: the hellos are read off lo with an AF_PACKET socket"
setup
HERE=$(cd "$(dirname "$0")" && pwd)
export HERE
PY=/usr/bin/python3

# proxyd listens on an address of its own: the hellos sent to it are
# told from those of the other tests running beside this one
PX=127.0.0.39
ftps_pki "IP:$PX"
start_vsftpd "$(vsftpd_tls_conf "$P/origin.pem" "$P/origin.key")"
D=$FTP_ROOT/pub
head -c 200k /dev/urandom >"$D/f.bin"
chmod 644 "$D/f.bin"
SHA=$(sha256_of "$D/f.bin")

FTP='<ftp><command name="*" action="accept"/></ftp>'
free_port P_BB
free_port P_AL
write_proxyd_conf "" "<audit target=\"file:$T/audit.json\"/>"
write_ftp_service bb "$P_BB" "$CTLS $STLS $FTP <audit/>" "$PX"
start_proxyd

mkdir -p "$T/hellos"
"$PY" "$HERE/hello_sniff.py" "$T/hellos" 2>"$T/sniff.err" &
track_pid $!
SNIFF_PID=$!
wait_file() { local i; for ((i = 0; i < 100; i++)); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }
wait_file "$T/hellos/.ready" || fail "hello_sniff.py did not start: $(cat "$T/sniff.err")"

# lftp_run PORT PASSIVE(yes|no) COMMANDS: lftp as anonymous, FTPS
lftp_run() {
    timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10;
        set ftp:ssl-allow yes; set ftp:ssl-force yes; set ftp:ssl-protect-data yes;
        set ftp:ssl-protect-list yes; set ssl:ca-file $P/ca.pem; set ssl:verify-certificate yes;
        set ftp:passive-mode $2; set ftp:prefer-epsv no;
        open -u anonymous,x@y ftp://$PX:$1; $3" 2>>"$T/lftp.err"
}
# transfers PORT TAG: a download and an upload each with lftp passive,
# lftp active and curl passive (curl 7.88 hangs in active mode over FTPS)
transfers() {
    local port=$1 tag=$2 pasv mode
    for pasv in yes no; do
        mode=$([[ $pasv == yes ]] && echo pasv || echo port)
        rm -f "$T/got.bin"
        lftp_run "$port" "$pasv" "get pub/f.bin -o $T/got.bin; put $D/f.bin -o pub/$tag-lftp-$mode.bin" ||
            fail "$tag: lftp $mode failed: $(tail -n 3 "$T/lftp.err")"
        assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "$tag: lftp $mode download"
        assert_eq "$(sha256_of "$D/$tag-lftp-$mode.bin")" "$SHA" "$tag: lftp $mode upload"
    done
    assert_eq "$(curl -sS --max-time 30 --ssl-reqd --cacert "$P/ca.pem" \
        "ftp://$PX:$port/pub/f.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)" "$SHA" \
        "$tag: curl download"
    assert_eq "$(curl_ftp --ssl-reqd --cacert "$P/ca.pem" -T "$D/f.bin" \
        "ftp://$PX:$port/pub/$tag-curl.bin")" 0 "$tag: curl upload"
}

info "lftp passive and active, curl passive, both ways, through bb (FTPS on both sides)"
transfers "$P_BB" bb
# 4 sessions (one per lftp or curl run), 6 transfers
wait_grep "$PROXYD_LOG" 'ftp-tls control-client=explicit' 10 || fail "no ftp-tls line"

# check SERVICE MIN: every data-transfer line of SERVICE (at least MIN)
# against the sniffed hellos (its client's JA4 and its server's JA4S),
# every session-end line's ja4= and ja4s= against its control
# connection's, every audit record against its transfer's line; prints
# one line per transfer: CLIENT_JA4 SERVER_JA4S CONTROL_JA4 WHAT
check() {
    "$PY" - "$PROXYD_LOG" "$T/hellos" "$T/audit.json" "$1" "$2" "$PX" <<'PYEOF'
import json, os, re, sys, time
sys.path.insert(0, os.environ["HERE"])
import ja4_ref
log, d, audit, svc, least, px = sys.argv[1:7]
deadline = time.time() + 10
while True:
    lines = [l for l in open(log, errors="replace")]
    sess = {}
    for l in lines:
        m = re.search(r"#(\d+) session-end service=%s " % re.escape(svc), l)
        if m:
            sess[m.group(1)] = l
    xfers = [l for l in lines if " data-transfer " in l and
             re.search(r"#(\d+) ", l).group(1) in sess]
    recs = [json.loads(l) for l in open(audit) if l.strip()] if os.path.exists(audit) else []
    recs = [r for r in recs if r["service"] == svc]
    if len(xfers) >= int(least) and len(recs) >= len(xfers):
        break
    if time.time() > deadline:
        sys.exit("%d data-transfer lines, %d audit records of %s" % (len(xfers), len(recs), svc))
    time.sleep(0.2)
used = set()
def hello(kind, src, to=""):
    """The first unused hello of kind (c, s) sent from src (ADDR:PORT) to
    an address starting with to, waited for (the sniffer may not have
    read it yet) up to 10 s."""
    deadline = time.time() + 10
    while True:
        files = sorted(f for f in os.listdir(d) if f.endswith(".hex"))
        for f in files:
            parts = f.split(".", 2)
            if parts[1] == kind and parts[2].startswith(src + "." + to) and f not in used:
                used.add(f)
                return bytes.fromhex(open(os.path.join(d, f)).read())
        if time.time() > deadline:
            sys.exit("no %s hello from %s among %s" % (kind, src, files))
        time.sleep(0.1)
def kv(l, k):
    m = re.search(r" %s=(\S+)" % k, l)
    return m.group(1) if m else "-"
ctrl = {}
for sid, l in sess.items():
    want = ja4_ref.ja4(hello("c", kv(l, "client"), px + ":"))
    assert kv(l, "ja4") == want, ("session %s: ja4=%s, the decoder %s" % (sid, kv(l, "ja4"), want))
    ctrl[sid] = want
by = {}
for l in xfers:
    sid = re.search(r"#(\d+) ", l).group(1)
    assert kv(l, "end") == "ok", l
    what = "%s %s tls-client=%s" % (re.search(r"data-transfer (\S+)", l).group(1),
                                     kv(l, "file"), kv(l, "tls-client"))
    want = ja4_ref.ja4(hello("c", kv(l, "client"), px + ":"))
    assert kv(l, "ja4") == want, "%s: ja4=%s, the decoder %s" % (what, kv(l, "ja4"), want)
    wants = ja4_ref.ja4s(hello("s", kv(l, "server")))
    assert kv(l, "ja4s") == wants, "%s: ja4s=%s, the decoder %s" % (what, kv(l, "ja4s"), wants)
    f = kv(l, "file").strip('"')
    by[(sid, re.search(r"data-transfer (\S+)", l).group(1), os.path.basename(f))] = (want, wants)
    print(want, wants, ctrl[sid], what)
for r in recs:
    key = (str(r["session"]), r["direction"], os.path.basename(r["file"]))
    assert key in by, ("a record without its line", r, sorted(by))
    assert r.get("data_ja4") == by[key][0], ("data_ja4", r, by[key])
    assert r.get("data_ja4s") == by[key][1], ("data_ja4s", r, by[key])
    assert r.get("ja4") == ctrl[key[0]], ("ja4: the control connection's", r)
PYEOF
}
out=$(check bb 6) || fail "bb: $out"
while read -r cj sj ctl what; do
    info "  $what: ja4=$cj ja4s=$sj (control ja4=$ctl)"
done <<<"$out"
# lftp and curl are told apart on their data connections too
assert_ne "$(grep -c . <<<"$(cut -d' ' -f1 <<<"$out" | sort -u)")" 1 "one data JA4 for lftp and curl"
grep -q '"data_ja4":' "$T/audit.json" || fail "no data_ja4 in the audit records"

info "<fingerprint> judges the control connection only: an allowlist of the clients' control JA4s"
ALLOW=$(sed -nE 's/.* service=bb .* ja4=([^ ]+) .*/\1/p' "$PROXYD_LOG" | sort -u | tr '\n' ' ')
[[ -n $ALLOW ]] || fail "no control JA4 of bb"
write_ftp_service al "$P_AL" "$CTLS $STLS $FTP <audit/>
  <fingerprint ja4=\"$ALLOW\" action=\"accept\"/>
  <fingerprint ja4=\"*\" action=\"deny\"/>" "$PX"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 1
wait_listen "$P_AL" 10 || fail "al did not listen"
transfers "$P_AL" al
out=$(check al 6) || fail "al: $out"
n_other=0
while read -r cj sj ctl what; do
    [[ $cj == "$ctl" ]] || n_other=$((n_other + 1))
done <<<"$out"
info "  al: $n_other of $(wc -l <<<"$out") data connections had a JA4 other than their control's, none refused"
assert_metric eq proxyd_fingerprint_denied_total 'service="al"' 0

kill "$SNIFF_PID" 2>/dev/null || true
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
