#!/usr/bin/env python3
"""What one wakeup costs the process woken, by how long it slept.

  wakecost.py [N] [CPU] [GAPS_MS...]     (defaults: 300, 1, 0 2 10)

A child pinned to CPU (as bench/run pins the proxies) blocks in recv() on a
socketpair; the parent wakes it N times per gap, sleeping GAP ms between
wakeups. Each wakeup the child does the same fixed work (20 small syscalls
and a 1-byte reply). Prints the child's CPU time (schedstat) per wakeup for
each gap, three rounds:

  gap=0ms 9.1 us/wakeup  gap=2ms 42.7 us/wakeup  gap=10ms 68.9 us/wakeup

The work is the same at every gap: whatever grows with the gap is what the
machine charges a task for waking after an idle spell (a VM's halted vCPU,
cold caches), not the task's own work. Why the 1-client FTP rows' CPU per
transfer moves with their transfer rate: see README.md.
"""
import os
import socket
import sys
import time


def cpu_ns(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def child(b, cpu):
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass
    while True:
        if not b.recv(1):
            os._exit(0)
        for _ in range(10):
            os.getppid()
            b.getsockname()
        b.send(b"y")


def run(gap_ms, n, cpu):
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        child(b, cpu)
    b.close()
    a.settimeout(5)
    a.send(b"x")            # warm-up, and the child is pinned by now
    a.recv(1)
    c0 = cpu_ns(pid)
    for _ in range(n):
        a.send(b"x")
        a.recv(1)
        if gap_ms:
            time.sleep(gap_ms / 1000)
    c1 = cpu_ns(pid)
    a.close()
    os.waitpid(pid, 0)
    return (c1 - c0) / n / 1000


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 300
    cpu = int(argv[2]) if len(argv) > 2 else 1
    gaps = [float(g) for g in argv[3:]] or [0, 2, 10]
    for _ in range(3):
        print("  ".join("gap=%gms %.1f us/wakeup" % (g, run(g, n, cpu))
                        for g in gaps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
