#!/usr/bin/env python3
"""Zones and shared-port services for bench/run's zones rows.

  zonesgen.py DIR --zones N --services S --port P --client ADDR --server ADDR
              [--analyser plug] [--section XML] [--upstream XML] [--prefix NAME]

Writes DIR/zones.xml (a <zones> element of exactly N zones for the daemon
file) and DIR/policy/<name>.xml (S transparent services, all listening on
0.0.0.0:P, each with <clients allow="zone:..."> and <servers
allow="zone:...">), and prints four lines:

  service=NAME        the one service that takes CLIENT -> SERVER
  client-zone=NAME    CLIENT's most specific zone
  server-zone=NAME    SERVER's most specific zone
  matching=A,B,C      every service whose lists hold both ends (NAME wins:
                      it is the most specific on both)

The zones (all in 198.18.0.0/15 and 2001:db8::/32, plus "internet"):
  inside                 no addresses: groups the two v4 trees
    c  198.18.0.0/16     /18 x4, /20 x4 each, /22 x4 each, /24 x4 under the
                         first /18's /22s, /26 x4 and /28 x4 under the
                         first /22's (CLIENT's /28 is 7 zones deep)
    s  198.19.0.0/17     the same shape from /18 (SERVER's /28 likewise)
  c6 2001:db8:1::/48, s6 2001:db8:2::/48: /52 x4, /56 x4, /60 x4, /64 x4
  internet 0.0.0.0/0 ::/0
  flat (top level, the rest of N): /24s in 198.19.128.0/18, /28s in
  198.19.192.0/18, then /64s in 2001:db8:ff00::/40

The services (all selecting by zone; their client zones are pairwise
disjoint except the first three, which nest, so `proxyd --check` finds no
ambiguous overlap):
  PREFIX-pair     CLIENT's /28 -> SERVER's /28: takes the pair
  PREFIX-lan-dmz  CLIENT's /24 -> SERVER's /24: holds the pair, less specific
  PREFIX-broad    c, c6 -> s, s6: holds the pair, less specific still
  PREFIX-inet     c, c6 -> internet (SERVER is in s, not in internet)
  PREFIX-NN       a /22 of c (none holding CLIENT) and a /60 of c6 -> a zone
                  of s, a flat /24, a zone of s6 (some also a plain CIDR)
With --services below 4, the first ones of that list (1: the pair's alone).
"""
import argparse
import ipaddress
import os
import sys


class Zone:
    def __init__(self, name, nets, parent=None):
        self.name, self.nets, self.kids = name, nets, []
        if parent is not None:
            parent.kids.append(self)


def count(z):
    return 1 + sum(count(k) for k in z.kids)


def tree(name, net, levels, parent, target):
    """A zone for net, and under it levels [(prefixlen, fanout, parents)]:
    at each level the first `parents` zones of the level above (the one
    holding target first) get `fanout` children each."""
    root = Zone(name, [net], parent)
    layer = [root]
    for plen, fan, width in levels:
        # the zone on target's path first, so that it always gets children
        layer.sort(key=lambda z: 0 if target in z.nets[0] else 1)
        nxt = []
        for z in layer[:width]:
            subs = list(z.nets[0].subnets(new_prefix=plen))
            pick = subs[:fan]
            hold = [s for s in subs if target in s]
            if hold and hold[0] not in pick:
                pick = [hold[0]] + pick[:fan - 1]
            for i, s in enumerate(pick):
                nxt.append(Zone(f"{z.name}.{i}", [s], z))
        layer = nxt
    return root


def walk(z):
    yield z
    for k in z.kids:
        yield from walk(k)


def deepest(zones, addr):
    best = None
    for z in zones:
        for n in z.nets:
            if n.version == addr.version and addr in n and (best is None or n.prefixlen > best[1]):
                best = (z, n.prefixlen)
    return best[0]


def xml_zone(z, ind):
    a = f' addresses="{" ".join(str(n) for n in z.nets)}"' if z.nets else ""
    if not z.kids:
        return f'{ind}<zone name="{z.name}"{a}/>\n'
    return (f'{ind}<zone name="{z.name}"{a}>\n' + "".join(xml_zone(k, ind + "  ") for k in z.kids)
            + f"{ind}</zone>\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--zones", type=int, default=1000)
    ap.add_argument("--services", type=int, default=50)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--analyser", default="plug")
    ap.add_argument("--section", default="")
    ap.add_argument("--upstream", default="")
    ap.add_argument("--prefix", default="z")
    a = ap.parse_args()
    cli, srv = ipaddress.ip_address(a.client), ipaddress.ip_address(a.server)
    c6t, s6t = ipaddress.ip_address("2001:db8:1::2"), ipaddress.ip_address("2001:db8:2::2")
    net = ipaddress.ip_network

    top = []
    inside = Zone("inside", [])
    top.append(inside)
    lv4 = [(18, 4, 99), (20, 4, 99), (22, 4, 99), (24, 4, 16), (26, 4, 4), (28, 4, 16)]
    c = tree("c", net("198.18.0.0/16"), lv4, inside, cli)
    s = tree("s", net("198.19.0.0/17"), [(18, 2, 99)] + lv4[1:], inside, srv)
    lv6 = [(52, 4, 99), (56, 4, 99), (60, 4, 99), (64, 4, 4)]
    c6 = tree("c6", net("2001:db8:1::/48"), lv6, None, c6t)
    s6 = tree("s6", net("2001:db8:2::/48"), lv6, None, s6t)
    top += [c6, s6]
    top.append(Zone("internet", [net("0.0.0.0/0"), net("::/0")]))
    fixed = sum(count(z) for z in top)
    nflat = a.zones - fixed
    if nflat < 64 or a.zones > 100000:
        sys.exit(f"zonesgen: --zones must be {fixed + 64}..100000 (got {a.zones})")
    flat24 = list(net("198.19.128.0/18").subnets(new_prefix=24))
    flat28 = list(net("198.19.192.0/18").subnets(new_prefix=28))
    flat = []
    for i in range(nflat):
        if i < len(flat24):
            flat.append(Zone(f"f24.{i}", [flat24[i]]))
        elif i - len(flat24) < len(flat28):
            flat.append(Zone(f"f28.{i - len(flat24)}", [flat28[i - len(flat24)]]))
        else:
            j = i - len(flat24) - len(flat28)
            flat.append(Zone(f"f64.{j}", [net(f"2001:db8:ff{j >> 16 & 0xff:02x}:{j & 0xffff:x}::/64")]))
    top += flat
    allz = [z for t in top for z in walk(t)]
    assert len(allz) == a.zones, (len(allz), a.zones)
    zc, zs = deepest(allz, cli), deepest(allz, srv)
    zc24 = next(z for z in allz if z.nets and z.nets[0].prefixlen == 24 and cli in z.nets[0])
    zs24 = next(z for z in allz if z.nets and z.nets[0].prefixlen == 24 and srv in z.nets[0])
    if zc.nets[0].prefixlen != 28 or zs.nets[0].prefixlen != 28:
        sys.exit("zonesgen: the client and the server must lie in the trees' /28s "
                 "(198.18.0.0/22 and 198.19.0.0/22)")

    P = a.prefix
    # name -> (clients, servers), in file order
    svcs = [(f"{P}-pair", [f"zone:{zc.name}"], [f"zone:{zs.name}"]),
            (f"{P}-lan-dmz", [f"zone:{zc24.name}"], [f"zone:{zs24.name}"]),
            (f"{P}-broad", ["zone:c", "zone:c6"], ["zone:s", "zone:s6"]),
            (f"{P}-inet", ["zone:c", "zone:c6"], ["zone:internet"])]
    if a.services < 1:
        sys.exit("zonesgen: --services must be >= 1")
    svcs = svcs[:a.services]    # 1: the pair's service alone (the lookup without port sharing)
    n_other = a.services - len(svcs)
    # disjoint client zones: the /22s of c that do not hold the client,
    # and the /60s of c6 that do not hold c6t
    c22 = [z for z in walk(c) if z.nets[0].prefixlen == 22 and cli not in z.nets[0]]
    c60 = [z for z in walk(c6) if z.nets[0].prefixlen == 60 and c6t not in z.nets[0]]
    sz = [z for z in walk(s) if z.nets[0].prefixlen >= 20]
    s6z = [z for z in walk(s6) if z.nets[0].prefixlen >= 56]
    f24 = [z for z in flat if z.name.startswith("f24.")]
    if n_other > len(c22):
        sys.exit(f"zonesgen: at most {len(c22) + len(svcs)} services")
    for i in range(n_other):
        cl = [f"zone:{c22[i].name}"] + ([f"zone:{c60[i].name}"] if i < len(c60) else [])
        sv = [f"zone:{sz[(7 * i) % len(sz)].name}", f"zone:{f24[i % len(f24)].name}",
              f"zone:{s6z[(5 * i) % len(s6z)].name}"]
        if i % 5 == 0:
            sv.append(f"198.19.{64 + i}.0/24")      # a plain CIDR in s, outside the pair's zones
        svcs.append((f"{P}-{i:02d}", cl, sv))

    os.makedirs(os.path.join(a.dir, "policy"), exist_ok=True)
    with open(os.path.join(a.dir, "zones.xml"), "w") as f:
        f.write("<zones>\n" + "".join(xml_zone(z, "    ") for z in top) + "  </zones>")
    for name, cl, sv in svcs:
        with open(os.path.join(a.dir, "policy", f"{name}.xml"), "w") as f:
            f.write(f'<service name="{name}" analyser="{a.analyser}">\n'
                    f'  <listen address="0.0.0.0" port="{a.port}" mode="transparent"/>\n'
                    + (f"  {a.upstream}\n" if a.upstream else "")
                    + f'  <clients allow="{" ".join(cl)}"/>\n'
                    f'  <servers allow="{" ".join(sv)}"/>\n'
                    + (f"  {a.section}\n" if a.section else "")
                    + "</service>\n")

    # who holds both ends (the same rule as proxyd's: a zone holds its
    # nested zones' addresses; a CIDR holds what it holds)
    parent = {}
    for t in top:
        for z in walk(t):
            for k in z.kids:
                parent[k.name] = z.name

    def holds(entries, zone, addr):
        chain, z = set(), zone.name
        while z:
            chain.add(z)
            z = parent.get(z)
        return any((e[5:] in chain) if e.startswith("zone:") else (addr in net(e)) for e in entries)
    matching = [n for n, cl, sv in svcs if holds(cl, zc, cli) and holds(sv, zs, srv)]
    print(f"service={svcs[0][0]}")
    print(f"client-zone={zc.name}")
    print(f"server-zone={zs.name}")
    print("matching=" + ",".join(matching))


if __name__ == "__main__":
    main()
