# shellcheck shell=bash
# What scan_cost.sh and content_cost.sh share: proxyd's CPU per MB for
# 10 MB SENDs (64 KiB blocks) through r66 services. After
# tests/integration/lib.sh, r66_lib.sh and setup:
#   cost_file              # $T/cli/10m.bin (random bytes), BYTES its size
#   cost_conf              # $PROXYD_CONF (written): one worker, warnings only
#   cost_sends SVC...      # RUNS SENDs through each SVC (its port in $P_SVC):
#                          # one line "SVC: Nus/MB(Mms) ..." a SVC

cost_file() {
    mkdir -p "$T/cli"
    head -c 10M /dev/urandom >"$T/cli/10m.bin"
    BYTES=$(stat -c %s "$T/cli/10m.bin")
}

cost_conf() {
    sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s|level="info"|level="warning"|' "$PROXYD_CONF"
}

cpu_ns() { # all proxyd threads
    local t s=0 v
    for t in /proc/$PROXYD_PID/task/*/schedstat; do
        read -r v _ <"$t" || continue
        s=$((s + v))
    done
    echo "$s"
}

cost_sends() {
    local svc port line i c0 c1 t0 t1
    for svc in "$@"; do
        port="P_$svc"
        line="$svc:"
        for ((i = 0; i < RUNS; i++)); do
            rm -f "$R66_SRV_DIR/10m.bin"
            c0=$(cpu_ns); t0=$(now_ms)
            r66c "${!port}" hosta:pwA --rule in --mode 1 --block 65536 --send "$T/cli/10m.bin"
            c1=$(cpu_ns); t1=$(now_ms)
            [[ $R66_RC == 0 ]] || fail "send via $svc: $(cat "$T/client.err")"
            # microseconds per 10^6 bytes
            line+=" $(( (c1 - c0) / 1000 * 1000000 / BYTES ))us/MB($((t1 - t0))ms)"
        done
        echo "$line"
    done
}
