#!/usr/bin/env bash
# proxyd --check: broken configurations exit non-zero and name the offending
# element as path:line:, valid ones (and the repository's conf/proxyd.xml) exit 0.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3 realpath timeout
setup

REPO_CONF=${PROXYD_REPO_CONF:-$(cd "$(dirname "$0")/../../conf" 2>/dev/null && pwd)/proxyd.xml}
NFAIL=0
errors=()

case_fail() {
    errors+=("$1")
    echo "  FAIL: $1" >&2
    NFAIL=$((NFAIL + 1))
}

# new_case NAME: fresh directory with a valid daemon file and one valid service
new_case() {
    C=$T/cases/$1
    mkdir -p "$C/conf" "$C/policy"
    cat >"$C/conf/proxyd.xml" <<'EOF'
<proxyd>
  <workers>2</workers>
  <limits max-sessions="100" connect-timeout="5s" idle-timeout="1m" buffer="64k" shutdown-grace="5s"/>
  <log target="stderr" level="info"/>
  <policies dir="../policy"/>
</proxyd>
EOF
    cat >"$C/policy/web.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- test service: the header lines make sure reported line numbers are real -->
<service name="web" analyser="plug">
  <listen address="127.0.0.1" port="18081" mode="fixed"/>
  <target address="127.0.0.1" port="18080"/>
  <upstream connect-timeout="2s"/>
  <clients allow="127.0.0.0/8 ::1"/>
  <plug splice="auto" half-close="yes"/>
</service>
EOF
}

# set_line FILE MATCH TEXT: replace the (first) line containing MATCH by TEXT
set_line() {
    python3 - "$@" <<'EOF'
import sys
f, match, text = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(f).read().split("\n")
i = next(i for i, l in enumerate(lines) if match in l)
lines[i] = text
open(f, "w").write("\n".join(lines))
EOF
}

# at FILE FIXED_STRING: "FILE:LINE" of the first line containing the string
at() {
    echo "$1:$(grep -nF -- "$2" "$1" | head -n 1 | cut -d: -f1)"
}

# run_check NAME: proxyd --check in the case dir; sets RC and OUT
run_check() {
    RC=0
    (cd "$C" && timeout 10 "$PROXYD" --check -c conf/proxyd.xml) >"$C/out" 2>&1 || RC=$?
    OUT=$(cat "$C/out")
}

# expect_error NAME KEYWORD FILE:LINE [FILE:LINE...]: --check fails, prints one
# of the given FILE:LINE: locations (the printed path may be relative to the case
# dir or absolute, canonical or not), no location with line 0, and, when KEYWORD
# is not empty, the reason names it (the unknown element or attribute)
expect_error() {
    local name=$1 keyword=$2 ok=0 p l spec real want rel wanted=()
    shift 2
    run_check
    echo "[$name] rc=$RC: $(head -c 600 <<<"$OUT" | tr '\n' '|')"
    for spec in "$@"; do
        rel=${spec#"$C"/}
        wanted+=("$rel:")
    done
    if ((RC == 0)); then
        case_fail "$name: --check exited 0, expected an error at ${wanted[*]}"
        return
    fi
    if ((RC == 124)); then
        case_fail "$name: --check did not finish within 10 s"
        return
    fi
    if ((RC > 128)); then
        case_fail "$name: --check was killed by signal $((RC - 128))"
        return
    fi
    ((RC == 1)) || echo "  note: $name: exit status $RC (CONFIG.md says exit 1 on error)"
    while read -r p l; do
        [[ -n $p ]] || continue
        [[ $p == /* ]] || p=$C/$p
        real=$(realpath -m "$p")
        for spec in "$@"; do
            want=${spec##*:}
            [[ $real == "$(realpath -m "${spec%:*}")" && $l == "$want" ]] && ok=1
        done
    done < <(grep -oE '[^[:space:]'"'"'"`(]+\.xml:[0-9]+:' <<<"$OUT" | sed -E 's/^(.*):([0-9]+):$/\1 \2/')
    ((ok == 1)) || case_fail "$name: expected one of '${wanted[*]}' in the output, got: $(head -c 400 <<<"$OUT")"
    if grep -qE '\.xml:0:' <<<"$OUT"; then
        case_fail "$name: an error is reported at line 0: $(grep -E '\.xml:0:' <<<"$OUT" | head -n 2 | tr '\n' '|')"
    fi
    if [[ -n $keyword ]] && ! grep -qF -- "$keyword" <<<"$OUT"; then
        case_fail "$name: the error does not name '$keyword': $(head -c 400 <<<"$OUT" | tr '\n' '|')"
    fi
}

# ---- valid configuration
new_case valid
run_check
echo "[valid] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "valid configuration: --check exited $RC: $OUT"

# ---- valid: every optional element left out
new_case minimal
printf '<proxyd/>\n' >"$C/conf/proxyd.xml"
mkdir -p "$C/policy/enabled"
rm "$C/policy/web.xml"
cat >"$C/policy/enabled/web.xml" <<'EOF'
<service name="web" analyser="plug">
  <listen address="127.0.0.1" port="18081"/>
  <target address="127.0.0.1" port="18080"/>
</service>
EOF
run_check
echo "[minimal] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "minimal configuration (defaults, policies in ../policy/enabled): --check exited $RC: $OUT"

# ---- unknown element in a policy
new_case unknown_element
set_line "$C/policy/web.xml" '<upstream' '  <frobnicate/>'
expect_error unknown_element "frobnicate" "$(at "$C/policy/web.xml" frobnicate)"

# ---- unknown attribute in a policy
new_case unknown_attribute
set_line "$C/policy/web.xml" '<plug' '  <plug splice="auto" turbo="yes"/>'
expect_error unknown_attribute "turbo" "$(at "$C/policy/web.xml" turbo=)"

# ---- unknown attribute in the daemon file
new_case unknown_attribute_daemon
f=$C/conf/proxyd.xml
set_line "$f" '<log' '  <log target="stderr" level="info" colour="yes"/>'
expect_error unknown_attribute_daemon "colour" "$(at "$f" colour=)"

# ---- a required attribute missing beside an optional one: libxml2 gives
# that error no node, proxyd finds its element (a <listen> without
# address=, the second of two <zone>, the third of three <request>)
new_case missing_required_attribute
set_line "$C/policy/web.xml" '<listen' '  <listen port="18081" mode="fixed"/>'
expect_error missing_required_attribute "listen" "$(at "$C/policy/web.xml" '<listen')"
new_case missing_required_attribute_daemon
f=$C/conf/proxyd.xml
set_line "$f" '<log' '  <log target="stderr" level="info"/>
  <zones>
    <zone name="a" addresses="198.18.0.0/24"/>
    <zone addresses="198.19.0.0/24"/>
  </zones>'
expect_error missing_required_attribute_daemon "zone" "$(at "$f" '<zone addresses')"
new_case missing_required_attribute_http
cat >"$C/policy/web.xml" <<'EOF2'
<service name="web" analyser="http">
  <listen address="127.0.0.1" port="18081" mode="fixed"/>
  <target address="127.0.0.1" port="18080"/>
  <http>
    <request method="GET" action="accept"/>
    <request method="PUT" action="accept"/>
    <request action="deny" status="405"/>
  </http>
</service>
EOF2
expect_error missing_required_attribute_http "request" "$(at "$C/policy/web.xml" 'status="405"')"

# ---- bad address
new_case bad_address
set_line "$C/policy/web.xml" '<target' '  <target address="300.1.1.1" port="18080"/>'
expect_error bad_address "" "$(at "$C/policy/web.xml" 300.1.1.1)"

# ---- bad port
new_case bad_port
set_line "$C/policy/web.xml" '<listen' '  <listen address="127.0.0.1" port="70000" mode="fixed"/>'
expect_error bad_port "" "$(at "$C/policy/web.xml" 70000)"

# ---- port clash between two service files (<listen> on different lines)
new_case port_clash
rm "$C/policy/web.xml"
cat >"$C/policy/a.xml" <<'EOF'
<?xml version="1.0"?>
<service name="a" analyser="plug">
  <listen address="127.0.0.1" port="18090"/>
  <target address="127.0.0.1" port="18080"/>
</service>
EOF
cat >"$C/policy/b.xml" <<'EOF'
<?xml version="1.0"?>
<service name="b" analyser="plug">
  <!-- same port as a.xml -->
  <listen address="127.0.0.1" port="18090"/>
  <target address="127.0.0.1" port="18080"/>
</service>
EOF
# reported on the second service in name order (b.xml), or on the first (a.xml)
expect_error port_clash "" "$(at "$C/policy/b.xml" "<listen")" "$(at "$C/policy/a.xml" "<listen")"

# ---- port clash on overlapping addresses: 0.0.0.0 vs 127.0.0.1
new_case port_clash_wildcard
cat >"$C/policy/z.xml" <<'EOF'
<?xml version="1.0"?>
<service name="z" analyser="plug">
  <listen address="0.0.0.0" port="18081"/>
  <target address="127.0.0.1" port="18080"/>
</service>
EOF
expect_error port_clash_wildcard "" "$(at "$C/policy/z.xml" "<listen")" "$(at "$C/policy/web.xml" "<listen")"

# ---- a service on the admin endpoint's port
new_case admin_clash
set_line "$C/conf/proxyd.xml" '<log' '  <log target="stderr" level="info"/><admin listen="127.0.0.1:18081"/>'
expect_error admin_clash "" "$(at "$C/policy/web.xml" "<listen")" "$(at "$C/conf/proxyd.xml" "<admin")"

# ---- duplicate service name in two files
new_case duplicate_name
cat >"$C/policy/x-web.xml" <<'EOF'
<?xml version="1.0"?>
<service name="web" analyser="plug">
  <listen address="127.0.0.1" port="18082"/>
  <target address="127.0.0.1" port="18080"/>
</service>
EOF
# reported on the second file in name order (x-web.xml), or on the first
expect_error duplicate_name "" "$(at "$C/policy/x-web.xml" "<service")" "$(at "$C/policy/web.xml" "<service")"

# ---- bad size
new_case bad_size
f=$C/conf/proxyd.xml
set_line "$f" '<limits' '  <limits max-sessions="100" buffer="12q"/>'
expect_error bad_size "" "$(at "$f" 12q)"

# ---- size out of range (4k..64m)
new_case size_out_of_range
f=$C/conf/proxyd.xml
set_line "$f" '<limits' '  <limits buffer="1k"/>'
expect_error size_out_of_range "" "$(at "$f" 1k)"

# ---- bad duration (no unit)
new_case bad_duration
f=$C/conf/proxyd.xml
set_line "$f" '<limits' '  <limits max-sessions="100" idle-timeout="5"/>'
expect_error bad_duration "" "$(at "$f" 'idle-timeout="5"')"

# ---- bad duration in a policy
new_case bad_duration_policy
set_line "$C/policy/web.xml" '<upstream' '  <upstream connect-timeout="5"/>'
expect_error bad_duration_policy "" "$(at "$C/policy/web.xml" 'connect-timeout="5"')"

# ---- missing <target> in fixed mode: reported on <service> or <listen>
new_case missing_target
set_line "$C/policy/web.xml" '<target' '  <!-- no target -->'
expect_error missing_target "" "$(at "$C/policy/web.xml" "<service")" "$(at "$C/policy/web.xml" "<listen")"

# ---- malformed XML: <listen> never closed; the mismatch is detected on the same line
new_case malformed
cat >"$C/policy/web.xml" <<'EOF'
<?xml version="1.0"?>
<service name="web" analyser="plug">
  <target address="127.0.0.1" port="18080"/>
  <listen address="127.0.0.1" port="18081" mode="fixed"></service>
EOF
expect_error malformed "" "$(at "$C/policy/web.xml" "<listen")"

# ---- malformed daemon file: unclosed tag
new_case malformed_daemon
cat >"$C/conf/proxyd.xml" <<'EOF'
<proxyd>
  <workers>2</workers>
  <limits max-sessions="100"></proxyd>
EOF
expect_error malformed_daemon "" "$(at "$C/conf/proxyd.xml" "<limits")"

# ---- scanning: <scanners> in the daemon file, <scan> on a service
scan_case() { # NAME ICAP_ATTRS SCAN_ATTRS [ANALYSER=http]
    new_case "$1"
    set_line "$C/conf/proxyd.xml" '<policies' "  <scanners><icap name=\"av\" $2/></scanners><policies dir=\"../policy\"/>"
    cat >"$C/policy/web.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<service name="web" analyser="${4:-http}">
  <listen address="127.0.0.1" port="18081" mode="fixed"/>
  <target address="127.0.0.1" port="18080"/>
  <scan $3/>
</service>
EOF
}
scan_case scan_valid 'url="icap://127.0.0.1:1344/avscan" timeout="30s" max-connections="16" on-error="block" preview="no"' \
    'scanner="av" direction="both" max-size="100m" over-size="block" partial="refuse"'
run_check
echo "[scan_valid] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "valid <scanners> and <scan>: --check exited $RC: $OUT"
scan_case scan_unknown_scanner 'url="icap://127.0.0.1/avscan"' 'scanner="nope"'
expect_error scan_unknown_scanner "nope" "$(at "$C/policy/web.xml" '<scan')"
scan_case scan_on_plug 'url="icap://127.0.0.1/avscan"' 'scanner="av"' plug
expect_error scan_on_plug "<scan>" "$(at "$C/policy/web.xml" '<scan')"
scan_case scan_bad_direction 'url="icap://127.0.0.1/avscan"' 'scanner="av" direction="sideways"'
expect_error scan_bad_direction "sideways" "$(at "$C/policy/web.xml" '<scan')"
scan_case scan_bad_url 'url="http://127.0.0.1/avscan"' 'scanner="av"'
expect_error scan_bad_url "http://127.0.0.1/avscan" "$(at "$C/conf/proxyd.xml" '<icap')"
scan_case scan_no_service 'url="icap://127.0.0.1:1344"' 'scanner="av"'
expect_error scan_no_service "icap://127.0.0.1:1344" "$(at "$C/conf/proxyd.xml" '<icap')"
scan_case scan_bad_on_error 'url="icap://127.0.0.1/avscan" on-error="maybe"' 'scanner="av"'
expect_error scan_bad_on_error "maybe" "$(at "$C/conf/proxyd.xml" '<icap')"
scan_case scan_bad_preview 'url="icap://127.0.0.1/avscan" preview="some"' 'scanner="av"'
expect_error scan_bad_preview "preview=\"some\"" "$(at "$C/conf/proxyd.xml" '<icap')"
scan_case scan_bad_partial 'url="icap://127.0.0.1/avscan"' 'scanner="av" partial="pieces"'
expect_error scan_bad_partial "partial=\"pieces\"" "$(at "$C/policy/web.xml" '<scan')"

# ---- file policy by content: <content> on a service
content_case() { # NAME CONTENT_XML [ANALYSER=http]
    new_case "$1"
    cat >"$C/policy/web.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<service name="web" analyser="${3:-http}">
  <listen address="127.0.0.1" port="18081" mode="fixed"/>
  <target address="127.0.0.1" port="18080"/>
  $2
</service>
EOF
}
content_case content_valid '<content type="application/x-dosexec application/x-executable" action="deny"/>
  <content type="text/*" action="accept"/>'
run_check
echo "[content_valid] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "valid <content> rules: --check exited $RC: $OUT"
content_case content_on_ftp '<content type="application/x-executable" action="deny"/>
  <audit/>' ftp
run_check
echo "[content_on_ftp] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "<content> and <audit> on an ftp service: --check exited $RC: $OUT"
content_case content_on_plug '<content type="text/plain" action="deny"/>' plug
expect_error content_on_plug "<content>" "$(at "$C/policy/web.xml" '<content')"
content_case content_bad_type '<content type="text/plain application" action="deny"/>'
expect_error content_bad_type "application" "$(at "$C/policy/web.xml" '<content')"
content_case content_bad_action '<content type="text/plain" action="drop"/>'
expect_error content_bad_action "" "$(at "$C/policy/web.xml" '<content')"

# ---- server-h2= on <http>: no, yes, auto
content_case h2o_valid '<http server-h2="auto"/>'
run_check
echo "[h2o_valid] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "server-h2=\"auto\": --check exited $RC: $OUT"
content_case h2o_bad '<http server-h2="maybe"/>'
expect_error h2o_bad 'server-h2="maybe"' "$(at "$C/policy/web.xml" '<http')"

# ---- <source-limits>: per="user" without <auth>, requests= on a service
# that has no HTTP requests (plug), a rate without its unit, burst= without
# connections=, nothing to limit; POLICY.md's example loads on an http service
sl_case() { # NAME XML
    new_case "$1"
    set_line "$C/policy/web.xml" '<plug' "  $2"
}
sl_case sl_user '<source-limits per="user" sessions="5"/>'
expect_error sl_user 'per="user"' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_requests '<source-limits sessions="5" requests="100/s"/>'
expect_error sl_requests 'requests=' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_rate '<source-limits connections="20"/>'
expect_error sl_rate 'connections=' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_burst '<source-limits sessions="5" burst="10"/>'
expect_error sl_burst 'burst=' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_empty '<source-limits per="prefix"/>'
expect_error sl_empty 'sessions=' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_prefix '<source-limits per="prefix" prefix-v4="33" sessions="5"/>'
expect_error sl_prefix 'prefix-v4' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_zone '<source-limits per="zone" sessions="5"/>'
expect_error sl_zone 'zones' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_ja4_plain '<source-limits per="ja4" sessions="5"/>'
expect_error sl_ja4_plain 'per="ja4"' "$(at "$C/policy/web.xml" '<source-limits')"
sl_case sl_ok '<source-limits per="prefix" prefix-v4="24" prefix-v6="64" sessions="50" connections="20/s" burst="40"/>'
run_check
echo "[sl_ok] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "valid <source-limits>: --check exited $RC: $OUT"
content_case sl_http_requests '<source-limits per="address" prefix-v4="32" prefix-v6="64"
               sessions="50" connections="20/s" burst="40" requests="100/s"/>'
run_check
echo "[sl_http_requests] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "POLICY.md's <source-limits> (requests=) on an http service: --check exited $RC: $OUT"
content_case sl_requests_only '<source-limits requests="10/m"/>'
run_check
echo "[sl_requests_only] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "<source-limits requests=> alone on an http service: --check exited $RC: $OUT"
content_case sl_requests_bad '<source-limits requests="100"/>'
expect_error sl_requests_bad 'requests=' "$(at "$C/policy/web.xml" '<source-limits')"
# transfers=: ftp only (plug and http have no file transfers), a rate
sl_case sl_transfers_plug '<source-limits transfers="30/m"/>'
expect_error sl_transfers_plug 'transfers=' "$(at "$C/policy/web.xml" '<source-limits')"
content_case sl_transfers_http '<source-limits transfers="30/m"/>'
expect_error sl_transfers_http 'transfers=' "$(at "$C/policy/web.xml" '<source-limits')"
content_case sl_transfers_bad '<source-limits transfers="30"/>' ftp
expect_error sl_transfers_bad 'transfers=' "$(at "$C/policy/web.xml" '<source-limits')"
content_case sl_transfers_ftp '<source-limits sessions="5" transfers="30/m"/>' ftp
run_check
echo "[sl_transfers_ftp] rc=$RC: $(tr '\n' '|' <<<"$OUT")"
((RC == 0)) || case_fail "<source-limits transfers=> on an ftp service: --check exited $RC: $OUT"

# ---- --version / --help
for opt in --version --help; do
    RC=0
    OUT=$(timeout 5 "$PROXYD" "$opt" 2>&1) || RC=$?
    echo "[$opt] rc=$RC: $(head -n 2 <<<"$OUT" | tr '\n' '|')"
    ((RC == 0)) || case_fail "$opt exited $RC"
    [[ -n $OUT ]] || case_fail "$opt printed nothing"
done

# ---- the repository's own configuration
if [[ -f $REPO_CONF ]]; then
    RC=0
    OUT=$(cd / && timeout 10 "$PROXYD" --check -c "$REPO_CONF" 2>&1) || RC=$?
    echo "[repo conf $REPO_CONF] rc=$RC: $(head -c 600 <<<"$OUT" | tr '\n' '|')"
    ((RC == 0)) || case_fail "--check -c $REPO_CONF exited $RC: $OUT"
else
    case_fail "repository configuration $REPO_CONF does not exist"
fi

if ((NFAIL > 0)); then
    echo "---- failed cases:" >&2
    printf '  %s\n' "${errors[@]}" >&2
    fail "$NFAIL --check case(s) failed"
fi
info "PASS"
