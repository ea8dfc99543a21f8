#!/usr/bin/env bash
# plug_random: random streams both ways through plug, splice="auto" and
# "no". Each connection's client
# and server write random-sized chunks (1 byte to 300 KB, up to 1.5 MB in all) with random
# pauses, sometimes read slowly or with a small receive buffer
# (proxyd's sends then come back short: backpressure), and half-close when their stream
# is done, in whichever order the dice give. Both ends hash what they sent
# and what they got: the hashes must match at the other end, and the
# session-end byte counters must add up to what was sent. The seed is
# printed (PLUG_RANDOM_SEED=N reruns one): each connection's streams come
# from the seed, the service and the connection's index alone, and each
# run prints a digest of its plan (what each end sent), checked against
# the plan drawn from the seed without a socket: the same seed, the same
# bytes (timing, and so the pieces proxyd reads them in, still vary).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

SEED=${PLUG_RANDOM_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
info "seed $SEED"

# Shared by both ends: one side of a connection.
cat >"$T/side.py" <<'EOF'
import hashlib, random, socket, threading, time

def chunks(rng, total, trickle=False):
    left = total
    while left > 0:
        k = rng.random()
        if trickle or k < 0.4:
            n = rng.randint(1, 200)
        elif k < 0.8:
            n = rng.randint(200, 20000)
        else:
            n = rng.randint(20000, 300000)
        n = min(n, left)
        left -= n
        yield n

def pause(rng, trickle=False, sleep=time.sleep):
    if trickle:
        if rng.random() < 0.02:
            sleep(0.001)
        return
    k = rng.random()
    if k < 0.6:
        return
    sleep(0.03 if k > 0.97 else rng.random() * 0.004)

def stream(wrng, total, trickle, sleep=time.sleep):
    """What one end writes: blocks of bytes, paused between. The draws
    are wrng's alone, so that the bytes depend on the seed only."""
    # A trickle of small writes, megabytes of them (a loopback socket's
    # send buffer starts at 1-2 MB): into a stalled reader, proxyd's small
    # reads meet a full destination.
    forced = trickle is True
    if trickle is None:
        trickle = wrng.random() < 0.15
    big = wrng.randint(3000000, 4500000) if forced else \
        wrng.randint(500000, 1500000)
    for c in chunks(wrng, big if trickle else total, trickle):
        yield wrng.randbytes(c)
        pause(wrng, trickle, sleep)

def plan(rng, total, trickle=None):
    """(n, sha256) of what run() would send, drawn as run() draws them,
    without a socket or a pause: the seed's plan."""
    wrng = random.Random(rng.random())
    h = hashlib.sha256()
    n = 0
    for b in stream(wrng, total, trickle, sleep=lambda t: None):
        h.update(b)
        n += len(b)
    return n, h.hexdigest()

def run(sock, rng, total, head=b"", trickle=None, stall=None):
    """Sends head + total random bytes then SHUT_WR, reads to EOF at the
    same time. Returns (sent_n, sent_sha, got_n, got_sha), head not
    counted."""
    out = {}
    wrng = random.Random(rng.random())
    rrng = random.Random(rng.random())

    def writer():
        h = hashlib.sha256()
        sock.sendall(head)
        n = 0
        for b in stream(wrng, total, trickle):
            h.update(b)
            sock.sendall(b)
            n += len(b)
        sock.shutdown(socket.SHUT_WR)
        out["sent"] = (n, h.hexdigest())

    # A small receive buffer: proxyd's sends to this end come back short.
    # A forced stall has one, so that megabytes fill proxyd's send buffer.
    if stall or rrng.random() < 0.5:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                        rrng.choice((8192, 16384, 32768)))
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    h = hashlib.sha256()
    n = 0
    k = rrng.random()
    slow = k < 0.2 and stall is None
    if stall is None:
        stall = k > 0.5
    since, wait = 0, 1.0
    while True:
        if stall and since >= 0:
            time.sleep(wait)
            if wait == 1.0:
                # Stalled enough: a window of 8 KB would make the rest slow.
                # The bigger buffer alone leaves the window clamped to what
                # the small one allowed (Linux: 4 KB, an MSS of 2 KB, zero
                # window probes backing off): megabytes then took 10 to 50
                # s, with proxyd idle. Unclamped they take a second.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP,
                                1 << 21)
            since, wait = -1000000, 0.3
        d = sock.recv(rrng.choice((4096, 65536)) if slow else 262144)
        if not d:
            break
        h.update(d)
        n += len(d)
        since += len(d)
        if slow and rrng.random() < 0.05:
            time.sleep(rrng.choice((0.005, 0.02, 0.1)))
    t.join(60)
    if t.is_alive():
        raise RuntimeError("writer stuck")
    return out["sent"] + (n, h.hexdigest())
EOF

cat >"$T/server.py" <<'EOF'
import os, random, socket, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[0]))
import side
port, resdir = int(sys.argv[1]), sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
srv.settimeout(90)

def handle(c):
    c.settimeout(60)
    try:
        # The client's first 16 bytes name the connection and seed this end.
        tok = b""
        while len(tok) < 16:
            d = c.recv(16 - len(tok))
            if not d:
                raise RuntimeError("no token")
            tok += d
        rng = random.Random(tok)
        total = rng.choice((0, rng.randint(1, 3000), rng.randint(1, 1500000)))
        # Connections 0 and 1 of four: a trickle into a stalled reader, one
        # way each (see the client).
        kind = int(tok[:2]) % 4
        res = "%d %s %d %s\n" % side.run(c, rng, total,
            trickle=(kind == 1) if kind < 2 else None,
            stall=(kind == 0) if kind < 2 else None)
        path = os.path.join(resdir, tok.decode())
        with open(path + ".tmp", "w") as f:
            f.write(res)
        os.replace(path + ".tmp", path)
    except Exception as e:
        sys.stderr.write("server: %r\n" % (e,))
    finally:
        c.close()

for _ in range(200):
    try:
        c, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=handle, args=(c,), daemon=True).start()
EOF

cat >"$T/client.py" <<'EOF'
import hashlib, os, random, socket, sys, threading, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
import side
name, port, conns, seed, resdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
errors = []
totals = [0, 0]
sent = {}
lock = threading.Lock()

def start(i):
    """Connection i's random stream, its token (which seeds the server's
    end) and its size: from the seed, the service and i alone."""
    rng = random.Random("%d-%s-%d" % (seed, name, i))
    tok = ("%02d%014x" % (i % 100, rng.getrandbits(56))).encode()
    total = rng.choice((0, rng.randint(1, 3000), rng.randint(1, 1500000)))
    return rng, tok, total

def digest():
    """The plan: what each end of each connection sends."""
    return hashlib.sha256("".join("%d %s\n" % (i, sent[i])
        for i in sorted(sent)).encode()).hexdigest()[:16]

if port == 0:
    # The plan alone, as the server and the client below draw it.
    for i in range(conns):
        rng, tok, total = start(i)
        kind = i % 4
        c = side.plan(rng, total, trickle=(kind == 0) if kind < 2 else None)
        srng = random.Random(tok)
        stotal = srng.choice((0, srng.randint(1, 3000),
                              srng.randint(1, 1500000)))
        sv = side.plan(srng, stotal, trickle=(kind == 1) if kind < 2 else None)
        sent[i] = "%s %d %s %d %s" % ((tok.decode(),) + c + sv)
    print("PLAN " + digest())
    sys.exit(0)

def one(i):
    rng, tok, total = start(i)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        kind = i % 4
        sn, ss, gn, gs = side.run(s, rng, total, head=tok,
            trickle=(kind == 0) if kind < 2 else None,
            stall=(kind == 1) if kind < 2 else None)
        s.close()
    except Exception as e:
        errors.append("conn %d: %r" % (i, e))
        return
    path = os.path.join(resdir, tok.decode())
    deadline = time.time() + 60
    res = None
    while res is None and time.time() < deadline:
        try:
            with open(path) as f:
                res = f.read()
            if not res.endswith("\n"):
                res = None
        except FileNotFoundError:
            pass
        if res is None:
            time.sleep(0.05)
    if res is None:
        errors.append("conn %d: no server result" % i)
        return
    ssn, sss, sgn, sgs = res.split()
    if (int(sgn), sgs) != (sn, ss):
        errors.append("conn %d: client sent %d %s, server got %s %s" % (i, sn, ss, sgn, sgs))
    if (int(ssn), sss) != (gn, gs):
        errors.append("conn %d: server sent %s %s, client got %d %s" % (i, ssn, sss, gn, gs))
    with lock:
        totals[0] += sn + len(tok)
        totals[1] += gn
        sent[i] = "%s %d %s %s %s" % (tok.decode(), sn, ss, ssn, sss)

ts = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
for t in ts:
    t.start()
for t in ts:
    t.join(120)
for e in errors:
    print("ERROR " + e)
print("TOTALS %d %d" % tuple(totals))
print("PLAN " + digest())
sys.exit(1 if errors else 0)
EOF

free_port SRV_PORT
mkdir -p "$T/res"
python3 "$T/server.py" "$SRV_PORT" "$T/res" 2>"$T/server.log" &
track_pid $!
wait_listen "$SRV_PORT" 5 $! || fail "python server did not start"

CONNS=8
free_port P_AUTO
free_port P_NO
write_proxyd_conf
write_service rauto "$P_AUTO" "$SRV_PORT" '<plug splice="auto" half-close="yes"/>'
write_service rno "$P_NO" "$SRV_PORT" '<plug splice="no" half-close="yes"/>'
start_proxyd

for svc in rauto:$P_AUTO rno:$P_NO; do
    name=${svc%%:*} port=${svc#*:}
    info "$name: $CONNS connections of random streams both ways"
    t0=$(now_ms)
    # The seed's plan, drawn meanwhile without sockets (port 0): the run
    # must have sent just that, or the seed would not replay it.
    timeout 60 python3 "$T/client.py" "$name" 0 "$CONNS" "$SEED" - >"$T/plan-$name" &
    plan_pid=$!
    rc=0
    out=$(timeout 150 python3 "$T/client.py" "$name" "$port" "$CONNS" "$SEED" "$T/res") || rc=$?
    printf '%s\n' "$out" | grep ERROR >&2 || true
    [[ $rc == 0 ]] || fail "$name: streams differ or failed (rc $rc, seed $SEED); server: $(tail -n 5 "$T/server.log")"
    read -r _ up down <<<"$(grep '^TOTALS' <<<"$out")"
    wait "$plan_pid" || fail "$name: the plan of seed $SEED could not be drawn"
    read -r _ planned <"$T/plan-$name"
    read -r _ ran <<<"$(grep '^PLAN' <<<"$out")"
    info "$name: plan $ran (seed $SEED)"
    assert_eq "$ran" "$planned" "$name: what was sent, against the seed's plan"
    info "$name: $up bytes to the server, $down to the client, hashes match ($(($(now_ms) - t0)) ms)"
    # Every session has ended and its counters add up to what was sent.
    deadline=$(($(date +%s) + 10))
    until (($(session_end_lines "$name" | wc -l) >= CONNS)); do
        (($(date +%s) < deadline)) || fail "$name: $(session_end_lines "$name" | wc -l) of $CONNS session-end lines"
        sleep 0.1
    done
    sum_up=0 sum_down=0
    while read -r line; do
        sum_up=$((sum_up + $(kv "$line" to-server)))
        sum_down=$((sum_down + $(kv "$line" to-client)))
    done < <(session_end_lines "$name")
    assert_eq "$sum_up" "$up" "$name: the to-server counters' sum"
    assert_eq "$sum_down" "$down" "$name: the to-client counters' sum"
done
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS (seed $SEED)"
