#!/usr/bin/python3
"""bench/grpcload.py: the gRPC row's server and load client (Debian's
python3-grpcio, asyncio API; run with /usr/bin/python3). No protoc: raw
bytes on a generic handler, as tests/integration/grpc_peer.py.

    grpcload.py server PORT
        /bench.Load/Echo answers each request with its bytes; prints
        "listening PORT" once ready, serves until killed.
    grpcload.py client TARGET CALLS CHANNELS INFLIGHT SIZE
        CALLS unary calls of SIZE bytes each way over CHANNELS channels
        (each its own HTTP/2 connection), INFLIGHT calls at once on each;
        every answer is checked (the same bytes back). Prints one line:
        "ok N failed F wall_s W calls_per_s R" (exit 0), the first
        failure's status on stderr.
"""
import asyncio
import os
import sys
import time

import grpc

METHOD = "/bench.Load/Echo"


async def serve(port):
    async def echo(req, ctx):
        return req

    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "bench.Load", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}),))
    if server.add_insecure_port("127.0.0.1:%d" % port) != port:
        sys.exit("cannot listen on %d" % port)
    await server.start()
    print("listening %d" % port, flush=True)
    await server.wait_for_termination()


async def load(target, calls, channels, inflight, size):
    payload = os.urandom(size)
    chans = [grpc.aio.insecure_channel(
        target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(channels)]
    stubs = [c.unary_unary(METHOD) for c in chans]
    for c in chans:
        await asyncio.wait_for(c.channel_ready(), 10)
    left = [calls]
    res = {"ok": 0, "failed": 0}
    first = []

    async def worker(stub):
        while left[0] > 0:
            left[0] -= 1
            try:
                r = await stub(payload, timeout=30)
                if r == payload:
                    res["ok"] += 1
                    continue
                why = "answer differs (%d bytes)" % len(r)
            except grpc.aio.AioRpcError as e:
                why = "%s %s" % (e.code().name, e.details())
            res["failed"] += 1
            if not first:
                first.append(why)

    t0 = time.monotonic()
    await asyncio.gather(*(worker(s) for s in stubs for _ in range(inflight)))
    wall = time.monotonic() - t0
    for c in chans:
        await c.close()
    if first:
        print("first failure: " + first[0], file=sys.stderr)
    print("ok %d failed %d wall_s %.3f calls_per_s %.0f" %
          (res["ok"], res["failed"], wall, res["ok"] / wall if wall else 0),
          flush=True)


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "server":
        asyncio.run(serve(int(a[1])))
    elif len(a) == 6 and a[0] == "client":
        asyncio.run(load(a[1], *(int(x) for x in a[2:])))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
