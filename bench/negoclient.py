#!/usr/bin/env python3
"""bench/negoclient.py: HTTP keep-alive connections, each authenticated by
Negotiate on its first request only (bench/auth.sh's Negotiate rows).

usage: negoclient.py URL CONNECTIONS PER_CONNECTION [--every] [--unsent | --none]

For each of CONNECTIONS connections, one after the other: a GSSAPI token
for HTTP@host (python3-gssapi, the ticket cache of KRB5CCNAME) in the
first request's Authorization, then PER_CONNECTION - 1 more requests on
the same connection without it. --every: a fresh token on every request,
as curl --negotiate sends them. --unsent: the same tokens made, none
sent: the same requests against a service without <auth>, paced as
those that carry them (the proxy's CPU per request depends on how often
it is woken: a client that waits less between requests would make the
row without auth look cheaper). --none: no token made at all. Prints
"ok N" (200s with the whole body) and "connections N"; exits 1 if any
request was not a 200."""
import http.client
import sys
import urllib.parse
import base64


def main():
    url, conns, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    none = "--none" in sys.argv[4:]
    every = "--every" in sys.argv[4:]
    unsent = "--unsent" in sys.argv[4:]
    u = urllib.parse.urlsplit(url)
    name = None
    if not none:
        import gssapi
        name = gssapi.Name("HTTP@" + u.hostname,
                           gssapi.NameType.hostbased_service)
    ok = bad = 0
    for _ in range(conns):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        for i in range(per):
            headers = {}
            if (i == 0 or every) and name is not None:
                ctx = gssapi.SecurityContext(name=name, usage="initiate")
                tok = "Negotiate " + base64.b64encode(ctx.step()).decode()
                if not unsent:
                    headers["Authorization"] = tok
            c.request("GET", u.path, headers=headers)
            r = c.getresponse()
            r.read()
            if r.status == 200:
                ok += 1
            else:
                bad += 1
        c.close()
    print("ok", ok)
    print("connections", conns)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
