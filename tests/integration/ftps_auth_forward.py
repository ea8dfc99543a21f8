#!/usr/bin/env python3
"""One ftplib session through an ftp service in forward mode with FTPS
(ftps_auth_forward.sh): the client names the server in its login
(USER alice@127.0.0.1:PORT), proxyd checks the password against LDAP and
only then connects the server, with TLS towards it as well.

usage: ftps_auth_forward.py PORT CAFILE HOW USER PASSWORD PASV ACTION...
  HOW     explicit: FTP_TLS, AUTH TLS before USER (ftplib's login does it);
          implicit: TLS from the first byte (port 990 style);
          plain: ftplib.FTP, USER in plain (where TLS is required: 530)
  PASV    1: passive data connections, 0: active (PORT)
  ACTION  list DIR | get REMOTE LOCAL | put LOCAL REMOTE
prints "greet CODE", then "login REPLY" or "login-err REPLY", then one
line per action ("list N NAME..." for a listing, "get ok", "put ok"),
then "quit CODE"; the caller checks the files' sha256."""
import ftplib
import socket
import ssl
import sys


class ImplicitTLS(ftplib.FTP_TLS):
    """FTP_TLS whose control connection is TLS from its first byte: the
    greeting comes inside it, and login() sends no AUTH TLS (its socket
    is an SSLSocket already)."""

    def connect(self, host="", port=0, timeout=-999, source_address=None):
        self.host, self.port = host, port
        if timeout != -999:
            self.timeout = timeout
        sock = socket.create_connection((host, port), self.timeout)
        self.af = sock.family
        self.sock = self.context.wrap_socket(sock, server_hostname=host)
        self.file = self.sock.makefile("r", encoding=self.encoding)
        self.welcome = self.getresp()
        return self.welcome


def first(reply):
    return str(reply).split("\n")[0]


def main():
    port, cafile, how, user, password, pasv = sys.argv[1:7]
    acts = sys.argv[7:]
    ctx = ssl.create_default_context(cafile=cafile)
    if how == "explicit":
        f = ftplib.FTP_TLS(context=ctx, timeout=30)
    elif how == "implicit":
        f = ImplicitTLS(context=ctx, timeout=30)
    else:
        f = ftplib.FTP(timeout=30)
    print("greet", first(f.connect("127.0.0.1", int(port)))[:3], flush=True)
    try:
        print("login", first(f.login(user, password)), flush=True)
    except ftplib.all_errors as e:
        print("login-err", first(e), flush=True)
        f.close()
        return
    if how != "plain":
        f.prot_p()
    f.set_pasv(pasv == "1")
    i = 0
    while i < len(acts):
        if acts[i] == "list":
            names = []
            f.retrlines("LIST " + acts[i + 1], names.append)
            print("list", len(names), " ".join(n.split()[-1] for n in names),
                  flush=True)
            i += 2
        elif acts[i] == "get":
            with open(acts[i + 2], "wb") as out:
                f.retrbinary("RETR " + acts[i + 1], out.write)
            print("get ok", flush=True)
            i += 3
        elif acts[i] == "put":
            with open(acts[i + 1], "rb") as src:
                f.storbinary("STOR " + acts[i + 2], src)
            print("put ok", flush=True)
            i += 3
        else:
            raise SystemExit("unknown action " + acts[i])
    print("quit", first(f.quit())[:3], flush=True)


main()
