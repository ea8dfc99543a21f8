"""What a test client sees of proxyd from /proc, for tests that stop it
(SIGSTOP) and arrange what waits in its sockets before it runs again:
whether every thread of a process is stopped, whether a socket in a given
TCP state holds received bytes, and a bounded wait on such a condition."""
import os
import time


def stopped(pid):
    """Every thread of pid is stopped (kill returns before they are)."""
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, task)) as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "T":
                return False
    return True


def queued(state, rport=None, lport=None):
    """A socket in TCP state `state` ("01" established, "08" close-wait),
    with the given remote and local ports, holds received bytes unread."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if (p[3] == state and int(p[4].split(":")[1], 16) > 0 and
                    (rport is None or int(p[2].split(":")[1], 16) == rport) and
                    (lport is None or int(p[1].split(":")[1], 16) == lport)):
                return True
    return False


def wait(cond, what):
    """cond() true within 10 s, or the client exits saying what."""
    for _ in range(1000):
        if cond():
            return
        time.sleep(0.01)
    raise SystemExit("not within 10 s: " + what)
