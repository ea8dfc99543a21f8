# shellcheck shell=bash
# bench/auth.sh: the authentication rows of bench/run (sourced by it, run
# after the other row families; BENCH_AUTH=1). Issue 38's target: CPU per
# request on a 10 KB keep-alive row with Negotiate on the first request of
# each connection, and with Basic and a warm cache, within 10 % of the
# same row without authentication. Three proxyd, http analyser, in front
# of the bench's nginx, pinned like the other proxies (BENCH_PIN):
#   proxyd-auth-none       no <auth>
#   proxyd-auth-basic      <auth methods="basic">, an LDAP authenticator
#                          (cache="5m": warm after the warm-up)
#   proxyd-auth-negotiate  <auth methods="negotiate">, a Kerberos keytab
# with an MIT KDC (realm EXAMPLE.TEST) and a slapd made in $TMP/auth by
# tests/integration/auth_lib.sh (the integration tests' own), on loopback. Rows, BENCH_AUTH_ROUNDS... as the others' rounds:
#   basic   ab -k -A alice:PW (Basic on every request: proxyd checks the
#           first of each connection, against the cache, and compares the
#           others with it), against proxyd-auth-basic and -none
#   negotiate  bench/negoclient.py: connections one after the other,
#           BENCH_AUTH_PER_CONN requests each (by default the plain 10 KB
#           keep-alive row's: BENCH_N_10K / BENCH_C), a fresh GSSAPI token
#           on the first only, against proxyd-auth-negotiate and -none (the same
#           requests, the same tokens made but not sent: --unsent, so that
#           both runs' requests come as fast).
#   negotiate-every  the same with a fresh token on every request, as
#           curl --negotiate sends them: the connection Negotiate proved is
#           not verified again (RFC 4559), so one check per connection too.
# each with the proxy's CPU (schedstat of its threads) per request, and
# how often its threads were put on a CPU per request (schedstat's third
# field: most of a request's CPU here is being woken, how often depends on
# how the client paces the requests and on the machine's load), and its
# system calls per request (perf stat, as the h2 and gRPC rows; "-"
# without perf): the work done, which load hardly moves, where on a
# shared machine the CPU per request moves by more than the target from
# run to run. In each round a row runs with
# and without auth back to back, the first of the two alternating from
# round to round (a machine whose load drifts favours neither); the
# ratio is the median of the rounds' ratios. The
# counters of proxyd_auth_total say how many checks ran: one per
# connection. Results in auth.tsv, rendered into auth.md. Loopback only
# (in netns mode the rows are skipped). BENCH_AUTH_PERF=ROW: perf record
# -g on both proxyd during that row's first round (perf-auth-ROW-*.txt).

AUTH_D=""
declare -A AUTH_PORT AUTH_ADM AUTH_PID

# auth_runs_on_cpu PID: how many times PID's threads were put on a CPU
auth_runs_on_cpu() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $3 } END { printf "%.0f\n", s }'
}

auth_ready() {
	local c
	if [ "$NETNS" = 1 ]; then
		note "SKIP auth rows: loopback only"
		return 1
	fi
	for c in krb5kdc kdb5_util kadmin.local kinit slapd ldapadd ab curl; do
		command -v "$c" >/dev/null 2>&1 && continue
		note "SKIP auth rows: $c not installed (scripts/deps: krb5-kdc krb5-admin-server krb5-user slapd ldap-utils)"
		return 1
	done
	if ! /usr/bin/python3 -c 'import gssapi' 2>/dev/null; then
		note "SKIP auth rows: python3-gssapi not installed (bench/deps)"
		return 1
	fi
	if ! analyser_built http; then
		note "SKIP auth rows: this proxyd has no http analyser"
		return 1
	fi
	return 0
}

auth_wait_port() {          # PORT PID WHAT
	local i
	for i in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	note "SKIP $3: nothing listens on 127.0.0.1:$1"
	return 1
}

# The realm and the directory are the integration tests' own
# (tests/integration/auth_lib.sh: start_kdc makes HTTP/localhost's keytab
# in $K for proxyd and kinits alice into $KRB5CCNAME; start_ldap makes a
# slapd with alice and her password), run here with the few helpers of
# tests/integration/lib.sh they use, made of the bench's own: a failure
# is a SKIP note, not the end of the bench.
auth_lib_start() {
	T=$AUTH_D
	mkdir -p "$T/conf"
	AUTH_LIB_FAILED=""
	free_port() { printf -v "$1" '%s' "$(scan_free_ports 1)"; }
	track_pid() { PIDS+=("$1"); }
	wait_listen() { auth_wait_port "$1" "${3:-$$}" "127.0.0.1:$1"; }
	fail() { [ -n "$AUTH_LIB_FAILED" ] || note "SKIP auth rows: $*"; AUTH_LIB_FAILED=1; return 1; }
	# shellcheck source=../tests/integration/auth_lib.sh
	source "$ROOT/tests/integration/auth_lib.sh"
	start_kdc || true
	[ -z "$AUTH_LIB_FAILED" ] || return 1
	start_ldap || true
	[ -z "$AUTH_LIB_FAILED" ] || return 1
	AUTH_KDC_PORT=$KDC_PORT
	AUTH_LDAP_PORT=$LDAP_PORT
}

# auth_start_proxyd TARGET PORT ADMIN_PORT AUTH_XML
auth_start_proxyd() {
	local t=$1 d=$AUTH_D/$1
	mkdir -p "$d/conf" "$d/policy"
	cat >"$d/conf/proxyd.xml" <<EOF
<proxyd>
  <workers>$WORKERS</workers>
  <limits max-sessions="$MAXCONN" connect-timeout="10s" idle-timeout="5m"
          shutdown-grace="1s"$PX_BUFFER_ATTR/>
  <log target="stderr" level="$PX_LOGLEVEL"/>
  <admin listen="127.0.0.1:$3"/>
  <policies dir="../policy"/>
  <authenticators>
    <kerberos name="corp" keytab="$AUTH_D/krb/http.keytab" service="HTTP"/>
    <ldap name="dir" url="ldap://127.0.0.1:$AUTH_LDAP_PORT" base-dn="dc=example,dc=test"
          bind-dn="cn=admin,dc=example,dc=test" bind-password-file="$AUTH_D/conf/ldap.pw"
          cache="5m" timeout="3s"/>
  </authenticators>
</proxyd>
EOF
	cat >"$d/policy/bench.xml" <<EOF
<service name="$t" analyser="http">
  <listen address="127.0.0.1" port="$2" mode="fixed"/>
  <target address="$SERVER_ADDR" port="$P_NGINX"/>
  $4
</service>
EOF
	cp "$d/conf/proxyd.xml" "$OUT/$t.xml"
	cp "$d/policy/bench.xml" "$OUT/$t-service.xml"
	if ! "$PROXYD" --check -c "$d/conf/proxyd.xml" >"$OUT/$t-check.txt" 2>&1; then
		note "SKIP $t: proxyd --check: $(head -n 1 "$OUT/$t-check.txt")"
		return 1
	fi
	"${PINCMD[@]}" "$PROXYD" -c "$d/conf/proxyd.xml" >"$OUT/$t.stderr" 2>&1 &
	AUTH_PID[$t]=$!
	PIDS+=("${AUTH_PID[$t]}")
	auth_wait_port "$2" "${AUTH_PID[$t]}" "$t" || return 1
	AUTH_PORT[$t]=$2
	AUTH_ADM[$t]=$3
	log "$t: proxyd pid ${AUTH_PID[$t]} on 127.0.0.1:$2"
}

# auth_checks TARGET METHOD: proxyd_auth_total of that method, all results
auth_checks() {
	curl -s -m 5 "http://127.0.0.1:${AUTH_ADM[$1]}/metrics" |
		awk -v m="method=\"$2\"" '/^proxyd_auth_total\{/ && index($0, m) { s += $NF } END { printf "%d\n", s }'
}

# auth_run ROW TARGET ROUND: one run, a line of auth.tsv
auth_run() {
	local row=$1 t=$2 r=$3 u="http://127.0.0.1:${AUTH_PORT[$2]}/10k.bin" raw px0 px1 t0 t1 ok=0 rc=0
	local n=$AUTH_N c=$AUTH_C conns k0 k1 method urls i j perf_pid="" w0 w1 sys
	local flags=()
	raw="raw/auth-r$r-$row-$t.txt"
	if [ "$row" = "$AUTH_PERF" ] && [ "$r" = 1 ]; then
		perf record -g -p "${AUTH_PID[$t]}" -o "$OUT/perf-auth-$row-$t.data" \
			>"$OUT/perf-auth-$row-$t.record" 2>&1 &
		perf_pid=$!
		sleep 0.5           # perf attaches
	fi
	syscalls_start "${AUTH_PID[$t]}" "$OUT/${raw%.txt}.perf"
	px0=$(tree_ns "${AUTH_PID[$t]}")
	w0=$(auth_runs_on_cpu "${AUTH_PID[$t]}")
	case "$row" in
	basic)
		method=basic
		k0=$(auth_checks "$t" basic)
		t0=$(date +%s%N)
		timeout -k 5 "$RUN_TIMEOUT" ab -r -s 60 -k -n "$n" -c "$c" -A alice:alice-ldap-pw "$u" \
			>"$OUT/$raw" 2>&1 || rc=$?
		t1=$(date +%s%N)
		ok=$(awk '/^Complete requests:/ { c = $3 } /^Non-2xx responses:/ { b = $3 } /^Failed requests:/ { f = $3 }
			END { print (f + b > 0) ? 0 : c + 0 }' "$OUT/$raw")
		conns=$c ;;
	negotiate | negotiate-every)
		method=negotiate
		[ "$row" = negotiate-every ] && flags+=(--every)
		[ "$t" = proxyd-auth-none ] && flags+=(--unsent)
		k0=$(auth_checks "$t" negotiate)
		conns=$((n / AUTH_PER_CONN))
		# the ticket is for HTTP/localhost: the URL names localhost
		echo "# /usr/bin/python3 bench/negoclient.py http://localhost:PORT/10k.bin $conns $AUTH_PER_CONN ${flags[*]}" >"$OUT/$raw"
		t0=$(date +%s%N)
		timeout -k 5 "$RUN_TIMEOUT" /usr/bin/python3 "$BENCH_DIR/negoclient.py" \
			"http://localhost:${AUTH_PORT[$t]}/10k.bin" "$conns" "$AUTH_PER_CONN" \
			"${flags[@]}" >>"$OUT/$raw" 2>&1 || rc=$?
		t1=$(date +%s%N)
		ok=$(awk '$1 == "ok" { print $2 }' "$OUT/$raw"); ok=${ok:-0}
		n=$((conns * AUTH_PER_CONN)) ;;
	esac
	px1=$(tree_ns "${AUTH_PID[$t]}")
	w1=$(auth_runs_on_cpu "${AUTH_PID[$t]}")
	syscalls_stop
	sys=$(syscalls_of "$OUT/${raw%.txt}.perf")
	k1=$(auth_checks "$t" "$method")
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid" 2>/dev/null || true
		wait "$perf_pid" 2>/dev/null || true
		perf report -i "$OUT/perf-auth-$row-$t.data" --no-children --sort symbol \
			--stdio -g none >"$OUT/perf-auth-$row-$t.txt" 2>/dev/null || true
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$row" "$t" "$n" "$conns" "$ok" \
		"$(((t1 - t0) / 1000))" "$((px1 - px0))" "$((w1 - w0))" "$sys" "$((k1 - k0))" "$raw" >>"$AUTH_TSV"
	log "[auth] $row $t round $r: $ok/$n ok, $(((px1 - px0) / (n > 0 ? n : 1))) ns of proxyd CPU per request, $((w1 - w0)) runs on a CPU, $((k1 - k0)) checks"
	if [ "$rc" != 0 ] || [ "$ok" != "$n" ]; then
		note "BAD auth row: $row $t round $r: rc=$rc ok=$ok/$n ($OUT/$raw)"
		BAD_RUNS=$((BAD_RUNS + 1))
	fi
}

rows_auth() {
	local ports r t ord_b ord_n
	AUTH_D=$TMP/auth
	mkdir -p "$AUTH_D" "$OUT/raw"
	read -r p1 p2 p3 a1 a2 a3 <<<"$(scan_free_ports 6)"
	auth_lib_start || return 0
	auth_start_proxyd proxyd-auth-none "$p1" "$a1" "<http/>" || return 0
	auth_start_proxyd proxyd-auth-basic "$p2" "$a2" \
		'<auth authenticator="dir" methods="basic" basic-without-tls="yes"/><http/>' || return 0
	auth_start_proxyd proxyd-auth-negotiate "$p3" "$a3" \
		'<auth authenticator="corp" methods="negotiate"/><http/>' || return 0
	# warm-up: the cache holds alice's password, connections and buffers made
	ab -k -n 200 -c 4 -A alice:alice-ldap-pw "http://127.0.0.1:$p2/10k.bin" >/dev/null 2>&1 || true
	ab -k -n 200 -c 4 "http://127.0.0.1:$p1/10k.bin" >/dev/null 2>&1 || true
	/usr/bin/python3 "$BENCH_DIR/negoclient.py" "http://localhost:$p3/10k.bin" 4 5 >/dev/null 2>&1 || true
	AUTH_TSV=$OUT/auth.tsv
	printf 'round\trow\ttarget\tn\tconnections\tok\twall_us\tproxy_ns\truns_on_cpu\tsyscalls\tchecks\traw\n' >"$AUTH_TSV"
	echo "auth_n=$AUTH_N auth_c=$AUTH_C auth_per_conn=$AUTH_PER_CONN" >>"$OUT/env.txt"
	for ((r = 1; r <= ROUNDS; r++)); do
		if ((r % 2)); then ord_b=(basic none) ord_n=(negotiate none)
		else ord_b=(none basic) ord_n=(none negotiate); fi
		for t in "${ord_b[@]}"; do auth_run basic "proxyd-auth-$t" "$r"; done
		for t in "${ord_n[@]}"; do auth_run negotiate "proxyd-auth-$t" "$r"; done
		for t in "${ord_n[@]}"; do auth_run negotiate-every "proxyd-auth-$t" "$r"; done
	done
	python3 - "$AUTH_TSV" >"$OUT/auth.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def per(row, t, col="proxy_ns"):
    return {x["round"]: int(x[col]) / max(int(x["n"]), 1) for x in rows
            if x["row"] == row and x["target"] == t and x[col] != "-"}
def pair(row, t, col, fmt):
    a, b = med(per(row, t, col)), med(per(row, "proxyd-auth-none", col))
    return "-" if a is None or b is None else (fmt + "/" + fmt) % (a, b)
def med(d):
    return statistics.median(d.values()) if d else None
print("## Authentication (issue 38): proxyd CPU per 10 KB keep-alive request\n")
print("| row | with auth, us/req | without, us/req | ratio | rounds' ratios | syscalls per req, with/without | runs on a CPU per req, with/without | checks per run |")
print("|---|---|---|---|---|---|---|---|")
for row, t in (("basic", "proxyd-auth-basic"), ("negotiate", "proxyd-auth-negotiate"),
               ("negotiate-every", "proxyd-auth-negotiate")):
    a, b = per(row, t), per(row, "proxyd-auth-none")
    checks = [x["checks"] + "/" + x["connections"] for x in rows if x["row"] == row and x["target"] == t]
    ratios = [a[r] / b[r] for r in sorted(a, key=int) if r in b and b[r] > 0]
    if not ratios:
        continue
    print("| %s | %.1f | %.1f | %.2f | %s | %s | %s | %s |" % (row, med(a) / 1000, med(b) / 1000,
          statistics.median(ratios), " ".join("%.2f" % x for x in ratios),
          pair(row, t, "syscalls", "%.2f"), pair(row, t, "runs_on_cpu", "%.2f"), " ".join(checks)))
PY
	log "auth rows: $OUT/auth.md"
	cat "$OUT/auth.md" >&2
}
