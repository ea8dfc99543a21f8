#!/usr/bin/env bash
# File policy by content, audit records and the size check on r66
# (<content>, <audit>, r66/@size-mismatch; no scanner): r66peer client ->
# proxyd (r66) -> r66peer server.
#  - an ELF file, SEND (64 KiB blocks, and 1 KiB ones: the first 4 KiB
#    held over several frames) and RECV: refused with an ErrorPacket code=a
#    "file type not allowed: application/x-executable" to both ends, the
#    server never has it, the client neither; r66-content line with the
#    rule's FILE:LINE, host, dir; proxyd_content_total counts;
#  - a text file both ways: passes, sha256 intact;
#  - one audit record (JSON, parsed) per transfer: partner, R66 rule,
#    file, direction, announced and actual size, sha256 equal to
#    sha256sum's, content type and action, verdict, policy rule, reason;
#    TLS on the server side: its certificate's subject;
#  - a sender announcing a wrong size: size-mismatch="block" cuts a longer
#    file at its first block past the announced size, and a shorter one at
#    its EndTransfer with its last block held (the server has none of it),
#    code=d to the client (a RECV's server announcing too much: the same,
#    the client never has the block); the default (allow) logs it and lets
#    it through.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum openssl
need_r66peer
setup

mkdir -p "$T/cli" "$T/out"
start_r66_server
python3 - "$T/cli" <<'PY'
import os, struct, sys
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64,
                   56, 1, 64, 0, 0))
open(os.path.join(sys.argv[1], "prog.elf"), "wb").write(elf + os.urandom(300000))
with open(os.path.join(sys.argv[1], "text.txt"), "w") as f:
    for i in range(20000):
        f.write("line %d of a plain text file and nothing to see here\n" % i)
PY
head -c 1K /dev/urandom >"$T/cli/1k.bin"
for f in prog.elf text.txt; do cp "$T/cli/$f" "$R66_SRV_DIR/dl-$f"; done
ELF_SIZE=$(stat -c %s "$T/cli/prog.elf")
TXT_SIZE=$(stat -c %s "$T/cli/text.txt")

AUDIT=$T/audit.json
write_proxyd_conf 'buffer="256k"' "<audit target=\"file:$AUDIT\"/>"
DENY='<content type="application/x-executable application/x-pie-executable" action="deny"/>'
R66X='<host id="hosta"/><rule name="in out"/><mode allow="send recv sendmd5 recvmd5"/>'
# shellcheck disable=SC2154 # PORT_NAME variables are set by svc's eval
svc() { # NAME XML [R66_ATTRS] [SERVER_PORT]
    local p
    free_port p
    write_r66_service "$1" "$p" "${4:-$R66_SRV_PORT}" "$2
  <r66 max-block=\"1m\" ${3:-}>$R66X</r66>"
    eval "PORT_${1//-/_}=$p"
}
svc content "$DENY
  <audit/>"
svc size-block '<audit/>' 'size-mismatch="block"'
svc size-allow '<audit/>' 'size-mismatch="allow"'
svc size-default ''
# a server whose RECV answers announce 2000 bytes, whatever the file
start_r66_server_at liar --announce 2000
cp "$T/cli/1k.bin" "$R66_AT_DIR/dl-1k.bin"
svc size-recv '<audit/>' 'size-mismatch="block"' "$R66_AT_PORT"
P=$T/pki
r66_pki "$P"
r66_pki_leaf "$P" front r66.test "DNS:r66.test,IP:127.0.0.1" serverAuth
r66_pki_leaf "$P" serverb serverb.test "DNS:serverb.test" serverAuth
start_r66_server_at tls --tls-cert "$P/serverb.pem" --tls-key "$P/serverb.key"
TLS_SRV_DIR=$R66_AT_DIR
svc tls "<tls side=\"client\" mode=\"terminate\" cert=\"$P/front.pem\" key=\"$P/front.key\"/>
  <tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"serverb.test\"/>
  $DENY
  <audit/>" "" "$R66_AT_PORT"
start_proxyd
RULE="$T/conf/../policy/content.xml:$(grep -n '<content' "$T/policy/content.xml" | cut -d: -f1)"
re() { sed 's/[.[\*^$/]/\\&/g' <<<"$1"; }

port_of() { local v="PORT_${1//-/_}"; echo "${!v}"; }
send() { # SERVICE FILE [EXTRA...]: SEND $T/cli/FILE as hosta
    local p
    p=$(port_of "$1")
    local f=$2
    shift 2
    r66c "$p" hosta:pwA --rule in --mode 1 --block 65536 "$@" --send "$T/cli/$f"
}
recv() { # SERVICE NAME
    r66c "$(port_of "$1")" hosta:pwA --rule out --mode 2 --block 65536 --recv "$2" --dir "$T/out"
}
same() { assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"; }
no_file() { # DIR NAME WHAT: neither the file nor a temporary one is left
    local i
    for ((i = 0; i < 100; i++)); do
        compgen -G "$1/.part.*" >/dev/null || break
        sleep 0.05
    done
    if [[ -e $1/$2 ]] || compgen -G "$1/.part.*" >/dev/null; then
        fail "$3: the server has $2 or a temporary file: $(ls -la "$1")"
    fi
}
# check SERVICE FILE DIRECTION DICT: the last record is SERVICE's for FILE
# in DIRECTION with the fields of DICT ("SHA:PATH": that file's sha256)
check() {
    python3 - "$AUDIT" "$1" "$2" "$3" "$4" <<'PY' || fail "audit record $1 $2 $3: see above"
import hashlib, json, sys
path, svc, file, direction, want = sys.argv[1:6]
rec = json.loads(open(path).read().splitlines()[-1])
bad = []
want = dict(eval(want), service=svc, file=file, direction=direction,
            analyser="r66", user="hosta")
for k, v in want.items():
    if isinstance(v, str) and v.startswith("SHA:"):
        v = hashlib.sha256(open(v[4:], "rb").read()).hexdigest()
    if rec.get(k, "ABSENT") != v:
        bad.append("%s=%r (want %r)" % (k, rec.get(k, "ABSENT"), v))
if bad:
    print("record %s: %s" % (bad, rec))
    sys.exit(1)
PY
}
N=0

# ---- ELF refused, both ways, before any of it reached the receiver
for blk in 65536 1024; do
    info "ELF SEND, $blk-byte blocks"
    send content prog.elf --block "$blk"
    [[ $R66_RC == 2 ]] || fail "ELF SEND: rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
    assert_grep "$T/client.err" "error packet from server: code=a action=3 msg=Denied by proxy: file type not allowed: application/x-executable"
    no_file "$R66_SRV_DIR" prog.elf "ELF SEND ($blk)"
    wait_grep "$T/r66server.log" "error packet from client: code=a action=3 msg=Denied by proxy: file type not allowed" 5 ||
        fail "the server was not told: $(cat "$T/r66server.log")"
    N=$((N + 1)); wait_records "$AUDIT" $N
    check content prog.elf upload "{'transfer_rule': 'in', 'announced_size': $ELF_SIZE,
      'complete': False, 'content_type': 'application/x-executable', 'content_action': 'deny',
      'verdict': 'deny', 'rule': '$RULE', 'reason': 'content-type', 'scan_verdict': None}"
done
assert_log "r66-content type=application/x-executable action=deny rule=$(re "$RULE") file=prog\.elf host=hosta r66-rule=in dir=upload sniffed=4096"
assert_log "r66-transfer host=hosta rule=in mode=send file=prog\.elf size=[0-9]+ blocks=[0-9]+ .*verdict=deny reason=content-type policy-rule=$(re "$RULE")"
# nothing of it went: the 1 KiB blocks were all held until judged
assert_no_grep "$T/r66server.log" "ok received file=prog\.elf" "the server took the ELF"

info "ELF RECV"
recv content dl-prog.elf
[[ $R66_RC == 2 ]] || fail "ELF RECV: rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
assert_grep "$T/client.err" "error packet from server: code=a action=3 msg=Denied by proxy: file type not allowed: application/x-executable"
[[ ! -e $T/out/dl-prog.elf ]] || fail "ELF RECV: the client has the file"
assert_log "r66-content type=application/x-executable action=deny rule=$(re "$RULE") file=dl-prog\.elf host=hosta r66-rule=out dir=download sniffed=4096"
N=$((N + 1)); wait_records "$AUDIT" $N
check content dl-prog.elf download "{'transfer_rule': 'out', 'announced_size': $ELF_SIZE,
  'complete': False, 'content_type': 'application/x-executable', 'verdict': 'deny'}"

# ---- text passes both ways, sha256 intact and recorded
info "text SEND and RECV"
send content text.txt
[[ $R66_RC == 0 ]] || fail "text SEND: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/text.txt" "$T/cli/text.txt" "text SEND"
N=$((N + 1)); wait_records "$AUDIT" $N
check content text.txt upload "{'transfer_rule': 'in', 'announced_size': $TXT_SIZE,
  'size': $TXT_SIZE, 'complete': True, 'sha256': 'SHA:$T/cli/text.txt',
  'content_type': 'text/plain', 'content_action': 'accept', 'verdict': 'accept',
  'rule': None, 'reason': 'ABSENT', 'tls_server_subject': None, 'tls_client_subject': None}"
recv content dl-text.txt
[[ $R66_RC == 0 ]] || fail "text RECV: rc=$R66_RC: $(cat "$T/client.err")"
same "$T/out/dl-text.txt" "$T/cli/text.txt" "text RECV"
N=$((N + 1)); wait_records "$AUDIT" $N
check content dl-text.txt download "{'announced_size': $TXT_SIZE, 'size': $TXT_SIZE,
  'complete': True, 'sha256': 'SHA:$T/cli/text.txt', 'content_type': 'text/plain',
  'verdict': 'accept'}"
assert_log "r66-content type=text/plain action=accept rule=- file=text\.txt host=hosta r66-rule=in dir=upload sniffed=4096"
assert_metric eq proxyd_content_total 'service="content",action="deny"' 3
assert_metric eq proxyd_content_total 'service="content",action="accept"' 2
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_content"' 3

# ---- TLS towards the server: its certificate's subject in the record
info "TLS"
TLSC=(--tls --tls-ca "$P/ca.pem" --tls-name r66.test)
r66c "$PORT_tls" hosta:pwA "${TLSC[@]}" --rule in --mode 3 --block 65536 --send "$T/cli/text.txt"
[[ $R66_RC == 0 ]] || fail "TLS text SEND: rc=$R66_RC: $(cat "$T/client.err")"
same "$TLS_SRV_DIR/text.txt" "$T/cli/text.txt" "TLS text SEND"
N=$((N + 1)); wait_records "$AUDIT" $N
check tls text.txt upload "{'size': $TXT_SIZE, 'sha256': 'SHA:$T/cli/text.txt',
  'tls_server_subject': 'CN=serverb.test', 'tls_client_subject': None, 'verdict': 'accept'}"

# ---- a wrong announced size
info "size-mismatch=block, longer than announced"
send size-block 1k.bin --announce 500
[[ $R66_RC == 2 ]] || fail "longer SEND: rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
assert_grep "$T/client.err" "error packet from server: code=d action=3 msg=Denied by proxy: more data than the announced size"
no_file "$R66_SRV_DIR" 1k.bin "longer SEND"
assert_log "r66-size mismatch announced=500 size=1024\+ action=block file=1k\.bin host=hosta rule=in dir=upload"
assert_log "r66-transfer host=hosta rule=in mode=send file=1k\.bin .*verdict=deny reason=size-mismatch policy-rule=r66/@size-mismatch"
N=$((N + 1)); wait_records "$AUDIT" $N
check size-block 1k.bin upload "{'announced_size': 500, 'size': 0, 'complete': False,
  'verdict': 'deny', 'reason': 'size-mismatch', 'rule': 'r66/@size-mismatch'}"

info "size-mismatch=block, shorter than announced"
send size-block 1k.bin --announce 2000
[[ $R66_RC == 2 ]] || fail "shorter SEND: rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
assert_grep "$T/client.err" "error packet from server: code=d action=3 msg=Denied by proxy: less data than the announced size"
no_file "$R66_SRV_DIR" 1k.bin "shorter SEND"
# its one block was held: the server had not a byte of it
assert_no_grep "$T/r66server.log" "size 1024 != declared 2000" "the server saw the short file's end"
assert_log "r66-size mismatch announced=2000 size=1024 action=block file=1k\.bin host=hosta rule=in dir=upload"
N=$((N + 1)); wait_records "$AUDIT" $N
check size-block 1k.bin upload "{'announced_size': 2000, 'size': 1024, 'complete': False,
  'sha256': 'SHA:$T/cli/1k.bin', 'verdict': 'deny', 'reason': 'size-mismatch'}"

info "size-mismatch=block, the right size passes"
send size-block 1k.bin
[[ $R66_RC == 0 ]] || fail "right-size SEND: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/1k.bin" "$T/cli/1k.bin" "right-size SEND"
rm -f "$R66_SRV_DIR/1k.bin"
N=$((N + 1)); wait_records "$AUDIT" $N

info "size-mismatch=block, a RECV shorter than the server announced"
r66c "$PORT_size_recv" hosta:pwA --rule out --mode 2 --block 65536 --recv dl-1k.bin --dir "$T/out"
[[ $R66_RC == 2 ]] || fail "short RECV: rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
assert_grep "$T/client.err" "error packet from server: code=d action=3 msg=Denied by proxy: less data than the announced size"
[[ ! -e $T/out/dl-1k.bin ]] || fail "short RECV: the client has the file"
# (its own check would have said "size 1024 != declared 2000": it never
# had the block nor the end)
assert_no_grep "$T/client.err" "!= declared" "the client saw the short file's end"
assert_log "r66-size mismatch announced=2000 size=1024 action=block file=dl-1k\.bin host=hosta rule=out dir=download"
N=$((N + 1)); wait_records "$AUDIT" $N
check size-recv dl-1k.bin download "{'announced_size': 2000, 'size': 1024, 'complete': False,
  'verdict': 'deny', 'reason': 'size-mismatch'}"

info "size-mismatch unset: refused where found, nothing held"
send size-default 1k.bin --announce 1999
[[ $R66_RC != 0 ]] || fail "short SEND passed on a service without size-mismatch"
# (sizes seen nowhere else in this test: the lines are this service's)
# the block went (nothing held: spliced), its EndTransfer did not
assert_grep "$T/client.err" "code=d action=3 msg=Denied by proxy: less data than the announced size"
assert_log "r66-size mismatch announced=1999 size=1024 action=block file=1k\\.bin host=hosta rule=in dir=upload"
send size-default 1k.bin --announce 499
[[ $R66_RC != 0 ]] || fail "long SEND passed on a service without size-mismatch"
assert_log "r66-size mismatch announced=499 size=1024\\+ action=block file=1k\\.bin host=hosta rule=in dir=upload"
rm -f "$R66_SRV_DIR/1k.bin"

info "size-mismatch allowed"
send size-allow 1k.bin --announce 2000
# proxyd lets it through: the server finds it short itself
wait_grep "$T/r66server.log" "size 1024 != declared 2000" 5 ||
    fail "the short file did not reach the server: $(cat "$T/r66server.log")"
assert_log "r66-size mismatch announced=2000 size=1024 action=allow file=1k\.bin host=hosta rule=in dir=upload"
N=$((N + 1)); wait_records "$AUDIT" $N
check size-allow 1k.bin upload "{'announced_size': 2000, 'size': 1024, 'complete': False,
  'sha256': 'SHA:$T/cli/1k.bin', 'verdict': 'error'}"
send size-allow 1k.bin --announce 500
assert_log "r66-size mismatch announced=500 size=1024\+ action=allow file=1k\.bin host=hosta rule=in dir=upload"
bad=$(grep -c "violation" "$PROXYD_LOG" || true)
assert_eq "$bad" 0 "protocol violations"
r66_finish
info "ok"
