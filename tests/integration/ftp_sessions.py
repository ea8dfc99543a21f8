"""FTP sessions in parallel through one address, each with three transfers
(STOR of its own bytes, RETR of them back, RETR of a shared file), checked
by sha256. Prints "sessions-ok=N transfers-ok=M" and one line per failure.

usage: ftp_sessions.py PORT SESSIONS PARALLEL DIR SHARED_FILE SHARED_SHA256
       [active|passive]

DIR is the folder (relative to the login's root) uploads go to and
SHARED_FILE is read from. Every socket has a timeout: a session that hangs
fails after it instead of holding the run."""
import concurrent.futures
import ftplib
import hashlib
import io
import os
import sys

port, sessions, parallel = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
folder, shared, shared_sha = sys.argv[4], sys.argv[5], sys.argv[6]
active = (sys.argv[7] if len(sys.argv) > 7 else "active") == "active"
TIMEOUT = 10


def retr(ftp, name):
    h = hashlib.sha256()
    ftp.retrbinary("RETR " + name, h.update, blocksize=65536)
    return h.hexdigest()


def session(i, done):
    data = os.urandom(100000 + 997 * i)
    with ftplib.FTP() as ftp:
        ftp.connect("127.0.0.1", port, timeout=TIMEOUT)
        ftp.login("anonymous", "test@")
        ftp.set_pasv(not active)
        name = "%s/s%03d.bin" % (folder, i)
        ftp.storbinary("STOR " + name, io.BytesIO(data), blocksize=65536)
        done[0] += 1
        got = retr(ftp, name)
        if got != hashlib.sha256(data).hexdigest():
            raise RuntimeError("RETR %s: sha256 differs" % name)
        done[0] += 1
        got = retr(ftp, shared)
        if got != shared_sha:
            raise RuntimeError("RETR %s: sha256 differs" % shared)
        done[0] += 1
        ftp.quit()


def run(i):
    done = [0]
    try:
        session(i, done)
        return done[0], None
    except Exception as e:  # any failure is this session's, reported
        return done[0], "session %d: %r" % (i, e)


sessions_ok = transfers_ok = 0
with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
    for n, err in pool.map(run, range(sessions)):
        transfers_ok += n
        if err is None:
            sessions_ok += 1
        else:
            print(err)
print("sessions-ok=%d transfers-ok=%d" % (sessions_ok, transfers_ok))
