/* Unit tests for proxyd/policy/zone.c: the zone tree (v4, v6, nesting, most
 * specific match), address lists with zone:NAME and ports=, the dispatch
 * choice among services sharing a listener (by ports= too), the ambiguity
 * check, and the trees
 * against a plain scan of the lists on random addresses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libxml/parser.h>

#include "config.h"
#include "zone.h"

static char dir[64], conf[128];
static char *errors;
static size_t errlen;

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int
setup(void **state)
{
	char p[160];

	(void)state;
	strcpy(dir, "/tmp/proxyd-zone-test-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/proxyd.xml", dir);
	snprintf(p, sizeof(p), "%s/policy", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[200];

	(void)state;
	free(errors);
	errors = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void
put_policy(const char *name, const char *text)
{
	char path[200];

	snprintf(path, sizeof(path), "%s/policy/%s", dir, name);
	write_file(path, text);
}

static const char zones_conf[] =
    "<proxyd>\n"
    "  <zones>\n"
    "    <zone name=\"lan\" addresses=\"198.18.0.0/24 2001:db8:1::/64\">\n"
    "      <zone name=\"printers\" addresses=\"198.18.0.128/28\"/>\n"
    "    </zone>\n"
    "    <zone name=\"dmz\" addresses=\"198.19.2.0/24 2001:db8:2::/64\">\n"
    "      <zone name=\"web\" addresses=\"198.19.2.0/28 2001:db8:2::/120\"/>\n"
    "    </zone>\n"
    "    <zone name=\"guests\" addresses=\"198.18.0.64/27\"/>\n"
    "    <zone name=\"internal\">\n"
    "      <zone name=\"ops\" addresses=\"198.18.1.0/24\"/>\n"
    "    </zone>\n"
    "    <zone name=\"internet\" addresses=\"0.0.0.0/0 ::/0\"/>\n"
    "  </zones>\n"
    "  <policies dir=\"policy\"/>\n"
    "</proxyd>\n";

static struct px_config *
load(void)
{
	struct px_cfgerr err = { 0 };
	struct px_config *c;

	free(errors);
	errors = NULL;
	err.out = open_memstream(&errors, &errlen);
	c = px_config_load(conf, &err);
	fclose(err.out);
	return c;
}

static void
key(struct px_key *k, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *why;

	assert_int_equal(px_parse_ip(addr, 1, &ss, &len, &why), 0);
	px_key_from_sockaddr(k, (struct sockaddr *)&ss);
}

static const char *
zone_of(const struct px_config *c, const char *addr)
{
	struct px_key k;
	struct px_zone_path zp;

	key(&k, addr);
	px_zones_path(&c->zones, &k, &zp);
	return px_zone_name(&c->zones, px_zone_path_zone(&zp));
}

static void
test_zone_tree(void **state)
{
	struct px_config *c;

	(void)state;
	write_file(conf, zones_conf);
	put_policy("a.xml", "<service name=\"a\" analyser=\"plug\">"
	    "<listen address=\"127.0.0.1\" port=\"9\"/>"
	    "<target address=\"127.0.0.1\" port=\"10\"/></service>\n");
	c = load();
	assert_non_null(c);
	assert_int_equal(c->zones.n, 8);
	assert_string_equal(zone_of(c, "198.18.0.1"), "lan");
	assert_string_equal(zone_of(c, "198.18.0.130"), "printers");
	assert_string_equal(zone_of(c, "198.18.0.95"), "guests");
	assert_string_equal(zone_of(c, "198.18.0.96"), "lan");
	assert_string_equal(zone_of(c, "198.18.0.64"), "guests");
	assert_string_equal(zone_of(c, "198.18.0.63"), "lan");
	assert_string_equal(zone_of(c, "198.19.2.15"), "web");
	assert_string_equal(zone_of(c, "198.19.2.16"), "dmz");
	assert_string_equal(zone_of(c, "198.18.1.200"), "ops");
	assert_string_equal(zone_of(c, "203.0.113.9"), "internet");
	assert_string_equal(zone_of(c, "2001:db8:1::42"), "lan");
	assert_string_equal(zone_of(c, "2001:db8:2::ff"), "web");
	assert_string_equal(zone_of(c, "2001:db8:2::1:0"), "dmz");
	assert_string_equal(zone_of(c, "2001:db8:3::1"), "internet");
	assert_string_equal(zone_of(c, "::ffff:198.19.2.3"), "web");
	assert_int_equal(px_zones_find(&c->zones, "ops"),
	    px_zones_find(&c->zones, "ops"));
	assert_int_equal(c->zones.z[px_zones_find(&c->zones, "ops")].parent,
	    px_zones_find(&c->zones, "internal"));
	px_config_unref(c);
}

static void
expect_error(const char *what, const char *file_line)
{
	struct px_config *c = load();

	if (c != NULL) {
		px_config_unref(c);
		fail_msg("expected error '%s', config loaded", what);
	}
	if (strstr(errors, what) == NULL || strstr(errors, file_line) == NULL)
		fail_msg("expected '%s' at '%s', got:\n%s", what, file_line,
		    errors);
}

static void
test_zone_errors(void **state)
{
	char at[200];

	(void)state;
	put_policy("a.xml", "<service name=\"a\" analyser=\"plug\">"
	    "<listen address=\"127.0.0.1\" port=\"9\"/>"
	    "<target address=\"127.0.0.1\" port=\"10\"/></service>\n");
	snprintf(at, sizeof(at), "%s:3: ", conf);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a\" addresses="
	    "\"198.18.0.0/24\"><zone name=\"b\" addresses=\"198.19.0.0/24\"/>"
	    "</zone>\n</zones><policies dir=\"policy\"/></proxyd>\n");
	expect_error("outside the zone it is nested in", at);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a\" addresses="
	    "\"198.18.0.0/24\"/><zone name=\"a\" addresses=\"198.19.0.0/24\"/>"
	    "\n</zones><policies dir=\"policy\"/></proxyd>\n");
	expect_error("zone \"a\" is also declared at line 3", at);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a\" addresses="
	    "\"198.18.0.0/24\"/><zone name=\"b\" addresses=\"198.18.0.0/24\"/>"
	    "\n</zones><policies dir=\"policy\"/></proxyd>\n");
	expect_error("198.18.0.0/24 is also in zone \"a\"", at);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a\" addresses="
	    "\"198.18.0.0/33\"/>\n</zones><policies dir=\"policy\"/></proxyd>\n");
	expect_error("zone \"a\": address \"198.18.0.0/33\"", at);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a\"/>\n</zones>"
	    "<policies dir=\"policy\"/></proxyd>\n");
	expect_error("holds no addresses", at);
	write_file(conf, "<proxyd>\n<zones>\n<zone name=\"a b\" addresses="
	    "\"198.18.0.0/24\"/>\n</zones><policies dir=\"policy\"/></proxyd>\n");
	expect_error("zone name=\"a b\"", at);

	/* A list naming an unknown zone; <servers> in fixed mode. */
	write_file(conf, zones_conf);
	put_policy("a.xml", "<service name=\"a\" analyser=\"plug\">\n"
	    "<listen address=\"127.0.0.1\" port=\"9\"/>\n"
	    "<target address=\"127.0.0.1\" port=\"10\"/>\n"
	    "<clients allow=\"zone:lan zone:nowhere\"/>\n"
	    "<servers allow=\"zone:dmz\"/>\n</service>\n");
	snprintf(at, sizeof(at), "%s/policy/a.xml:4: ", dir);
	expect_error("\"zone:nowhere\": no such zone", at);
	snprintf(at, sizeof(at), "%s/policy/a.xml:5: ", dir);
	expect_error("<servers> is for modes where the client picks", at);
}

/* Four transparent services on one port. */
static void
put_shared(void)
{
	static const char *const svcs[][3] = {
		{ "lan-dmz", "zone:lan", "zone:dmz" },
		{ "lan-web", "zone:lan", "zone:web" },
		{ "lan-any", "zone:lan zone:internal", NULL },
		{ "ops-one", "198.18.1.7", "zone:internet" },
	};
	size_t i;

	for (i = 0; i < sizeof(svcs) / sizeof(svcs[0]); i++) {
		char text[600], name[64];

		snprintf(text, sizeof(text), "<service name=\"%s\" analyser="
		    "\"plug\">\n<listen address=\"0.0.0.0\" port=\"50080\" "
		    "mode=\"transparent\"/>\n<clients allow=\"%s\"/>\n%s%s%s"
		    "</service>\n", svcs[i][0], svcs[i][1],
		    svcs[i][2] ? "<servers allow=\"" : "",
		    svcs[i][2] ? svcs[i][2] : "", svcs[i][2] ? "\"/>\n" : "");
		snprintf(name, sizeof(name), "%s.xml", svcs[i][0]);
		put_policy(name, text);
	}
}

/* The service of the first listener that takes client -> dst:port (as
 * the worker chooses: px_session_choose). */
static const char *
choose_port(const struct px_config *c, const char *client, const char *dst,
    uint16_t port)
{
	const struct px_group *g = &c->groups[0];
	int16_t cs[PX_GROUP_MAX], ss[PX_GROUP_MAX];
	struct px_zone_path czp, szp;
	struct px_key ck, sk;
	int pick;

	key(&ck, client);
	key(&sk, dst);
	px_zones_path(&c->zones, &ck, &czp);
	px_zones_path(&c->zones, &sk, &szp);
	px_group_specs(g, &c->zones, PX_DIM_CLIENT, &ck, &czp, cs);
	px_group_specs(g, &c->zones, PX_DIM_SERVER, &sk, &szp, ss);
	px_group_ports(g, port, ss);
	pick = px_group_choose(g, cs, ss, NULL);
	return pick >= 0 ? g->svc[pick]->name : pick == -1 ? "none" : "tie";
}

static const char *
choose(const struct px_config *c, const char *client, const char *dst)
{
	return choose_port(c, client, dst, 80);
}

static void
test_dispatch(void **state)
{
	struct px_config *c;

	(void)state;
	write_file(conf, zones_conf);
	put_shared();
	c = load();
	if (c == NULL)
		fail_msg("%s", errors);
	assert_int_equal(c->ngroups, 1);
	assert_int_equal(c->groups[0].n, 4);
	assert_string_equal(choose(c, "198.18.0.5", "198.19.2.100"), "lan-dmz");
	assert_string_equal(choose(c, "198.18.0.5", "198.19.2.3"), "lan-web");
	assert_string_equal(choose(c, "198.18.0.5", "203.0.113.1"), "lan-any");
	/* A nested zone is in its parent's zone:NAME... */
	assert_string_equal(choose(c, "198.18.0.130", "198.19.2.3"), "lan-web");
	/* ...a zone that only lies inside another's prefix is not. */
	assert_string_equal(choose(c, "198.18.0.70", "198.19.2.3"), "none");
	assert_string_equal(choose(c, "198.18.1.9", "198.19.2.3"), "lan-any");
	/* /32 client beats zone:internal's /24 and internet is /0 but both
	 * of ops-one's ends are at least as specific as lan-any's. */
	assert_string_equal(choose(c, "198.18.1.7", "203.0.113.1"), "ops-one");
	assert_string_equal(choose(c, "2001:db8:1::9", "2001:db8:2::5"),
	    "lan-web");
	assert_string_equal(choose(c, "2001:db8:9::9", "2001:db8:2::5"), "none");
	px_config_unref(c);
}

static void
test_ambiguous(void **state)
{
	struct px_config *c;
	char at[200];

	(void)state;
	write_file(conf, zones_conf);
	put_shared();
	/* ops-one's client is more specific, its server less than lan-web's
	 * for 198.18.1.7 -> web: neither wins on both ends. */
	put_policy("ops-one.xml", "<service name=\"ops-one\" analyser=\"plug\">\n"
	    "<listen address=\"0.0.0.0\" port=\"50080\" mode=\"transparent\"/>\n"
	    "<clients allow=\"198.18.0.7\"/>\n</service>\n");
	snprintf(at, sizeof(at), "%s/policy/ops-one.xml:1: ", dir);
	expect_error("both select connections from 198.18.0.7/32 to", at);
	assert_non_null(strstr(errors, "policy/lan-dmz.xml:1)"));
	/* The same lists on two ports are no conflict. */
	put_policy("ops-one.xml", "<service name=\"ops-one\" analyser=\"plug\">\n"
	    "<listen address=\"0.0.0.0\" port=\"50081\" mode=\"transparent\"/>\n"
	    "<clients allow=\"198.18.0.7\"/>\n</service>\n");
	c = load();
	if (c == NULL)
		fail_msg("%s", errors);
	assert_int_equal(c->ngroups, 2);
	px_config_unref(c);
	/* Sharing needs the same mode; fixed mode never shares. */
	put_policy("ops-one.xml", "<service name=\"ops-one\" analyser=\"plug\">\n"
	    "<listen address=\"0.0.0.0\" port=\"50080\" mode=\"redirect\"/>\n"
	    "</service>\n");
	snprintf(at, sizeof(at), "%s/policy/ops-one.xml:2: ", dir);
	expect_error("clashes with service", at);
}

/* A transparent plug service NAME on 0.0.0.0:50080 whose third line on is
 * body (at policy/NAME.xml). */
static void
put_svc(const char *name, const char *body)
{
	char text[600], file[64];

	snprintf(text, sizeof(text), "<service name=\"%s\" analyser=\"plug\">\n"
	    "<listen address=\"0.0.0.0\" port=\"50080\" mode=\"transparent\"/>\n"
	    "%s\n</service>\n", name, body);
	snprintf(file, sizeof(file), "%s.xml", name);
	put_policy(file, text);
}

/* <servers ports=>: the list as loaded (sorted, overlapping and adjacent
 * ranges joined), the lookup at each range's edges, ports= alone (any
 * address), and every malformed list refused at its file:line. */
static void
test_ports(void **state)
{
	static const struct {
		const char *ports, *error;
	} bad[] = {
		{ "0", "ports: \"0\": " },
		{ "21 70000", "ports: \"70000\": " },
		{ "2199-2100", "ports: \"2199-2100\": the range ends below" },
		{ "21-", "ports: \"21-\": " },
		{ "-21", "ports: \"-21\": " },
		{ "ftp", "ports: \"ftp\": " },
		{ "21-22-23", "ports: \"21-22-23\": " },
		{ "1234567890", "ports: \"1234567890\": not a port" },
		{ "", "ports=\"\": list at least one port" },
		{ " , ", "ports=\"\": list at least one port" },
	};
	static const struct {
		uint16_t port;
		bool in;
	} look[] = {
		{ 1, false }, { 20, false }, { 21, true }, { 22, false },
		{ 989, false }, { 990, true }, { 991, false }, { 2099, false },
		{ 2100, true }, { 2155, true }, { 2199, true }, { 2200, true },
		{ 2201, false }, { 65534, false }, { 65535, true },
	};
	const struct px_addrlist *l;
	struct px_config *c;
	char text[400], at[200];
	size_t i;

	(void)state;
	write_file(conf, zones_conf);
	put_svc("a", "<servers allow=\"zone:dmz\" ports=\"2150-2160 990,21 "
	    "2100-2199 2200 65535 2160\"/>");
	c = load();
	if (c == NULL)
		fail_msg("%s", errors);
	l = &c->services[0].servers;
	assert_int_equal(l->nports, 4);
	assert_int_equal(l->ports[0].lo, 21);
	assert_int_equal(l->ports[0].hi, 21);
	assert_int_equal(l->ports[1].lo, 990);
	assert_int_equal(l->ports[2].lo, 2100);
	assert_int_equal(l->ports[2].hi, 2200);
	assert_int_equal(l->ports[3].lo, 65535);
	for (i = 0; i < sizeof(look) / sizeof(look[0]); i++)
		if (px_addrlist_port_ok(l, look[i].port) != look[i].in)
			fail_msg("port %u: expected %s", look[i].port,
			    look[i].in ? "in" : "out");
	/* No ports= (or no list): any port. */
	assert_true(px_addrlist_port_ok(&c->services[0].clients, 7));
	px_config_unref(c);

	/* ports= alone: any address, those ports. */
	put_svc("a", "<servers ports=\"21\"/>");
	c = load();
	if (c == NULL)
		fail_msg("%s", errors);
	assert_string_equal(choose_port(c, "198.18.0.5", "203.0.113.1", 21), "a");
	assert_string_equal(choose_port(c, "198.18.0.5", "2001:db8:9::1", 21),
	    "a");
	assert_string_equal(choose_port(c, "198.18.0.5", "203.0.113.1", 25),
	    "none");
	px_config_unref(c);

	snprintf(at, sizeof(at), "%s/policy/a.xml:3: ", dir);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "<servers allow=\"zone:dmz\" "
		    "ports=\"%s\"/>", bad[i].ports);
		put_svc("a", text);
		expect_error(bad[i].error, at);
	}
	/* <clients> has no ports=; <servers> needs allow= or ports=. */
	put_svc("a", "<clients allow=\"zone:lan\" ports=\"21\"/>");
	expect_error("ports", at);
	put_svc("a", "<servers/>");
	expect_error("servers", at);
}

/* Services sharing a listener told apart by ports=: a service whose
 * ports= leaves the destination port out does not select the connection
 * (a less specific one may then take it); the same lists with disjoint
 * ports are no conflict, with overlapping ones they are, and --check
 * names a port where they tie. */
static void
test_dispatch_ports(void **state)
{
	static const struct {
		const char *client, *dst;
		uint16_t port;
		const char *want;
	} cases[] = {
		{ "198.18.0.5", "198.19.2.100", 80, "lan-dmz" },
		{ "198.18.0.5", "198.19.2.100", 8089, "lan-dmz" },
		{ "198.18.0.5", "198.19.2.100", 21, "dmz-ftp" },
		{ "198.18.0.5", "198.19.2.100", 8090, "dmz-ftp" },
		/* Neither: lan-any (any server, any port) takes it. */
		{ "198.18.0.5", "198.19.2.100", 25, "lan-any" },
		/* web is inside dmz: 443 goes to lan-web, 80 to lan-dmz. */
		{ "198.18.0.5", "198.19.2.3", 443, "lan-web" },
		{ "198.18.0.5", "198.19.2.3", 80, "lan-dmz" },
		/* No service for the guests, whatever the port. */
		{ "198.18.0.70", "198.19.2.3", 443, "none" },
	};
	struct px_config *c;
	char at[200];
	size_t i;

	(void)state;
	write_file(conf, zones_conf);
	put_shared();
	put_svc("lan-dmz", "<clients allow=\"zone:lan\"/>\n"
	    "<servers allow=\"zone:dmz\" ports=\"80 8080-8089\"/>");
	put_svc("lan-web", "<clients allow=\"zone:lan\"/>\n"
	    "<servers allow=\"zone:web\" ports=\"443\"/>");
	/* dmz-ftp: the same lists as lan-dmz, other ports. */
	put_svc("dmz-ftp", "<clients allow=\"zone:lan\"/>\n"
	    "<servers allow=\"zone:dmz\" ports=\"21 8090\"/>");
	c = load();
	if (c == NULL)
		fail_msg("%s", errors);
	assert_int_equal(c->groups[0].n, 5);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = choose_port(c, cases[i].client, cases[i].dst,
		    cases[i].port);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("%s -> %s:%u: %s, expected %s", cases[i].client,
			    cases[i].dst, cases[i].port, got, cases[i].want);
	}
	px_config_unref(c);

	/* dmz-ftp overlapping lan-dmz on 8085-8089: a tie there. */
	put_svc("dmz-ftp", "<clients allow=\"zone:lan\"/>\n"
	    "<servers allow=\"zone:dmz\" ports=\"21 8085-8099\"/>");
	snprintf(at, sizeof(at), "%s/policy/lan-dmz.xml:1: ", dir);
	expect_error("service \"lan-dmz\" and service \"dmz-ftp\"", at);
	if (strstr(errors, "to 198.19.2.0/24 port 8085 without") == NULL)
		fail_msg("no port in the message: %s", errors);
	/* ...and without ports= on dmz-ftp, a tie on lan-dmz's ports. */
	put_svc("dmz-ftp", "<clients allow=\"zone:lan\"/>\n"
	    "<servers allow=\"zone:dmz\"/>");
	expect_error("share their listen address and both select", at);
	if (strstr(errors, "to 198.19.2.0/24 port 80 without") == NULL)
		fail_msg("no port in the message: %s", errors);
}

/* The trees against the plain scan, on addresses drawn around every
 * prefix of the config. */
static void
test_trees_match_scan(void **state)
{
	struct px_config *c;
	const struct px_group *g;
	unsigned seed = 1, i, j;

	(void)state;
	write_file(conf, zones_conf);
	put_shared();
	c = load();
	assert_non_null(c);
	g = &c->groups[0];
	for (i = 0; i < 20000; i++) {
		struct px_key k;
		struct px_zone_path zp;
		int16_t spec[PX_GROUP_MAX];
		unsigned d = i & 1;

		memset(&k, 0, sizeof(k));
		k.v6 = (i >> 1) % 4 == 0;
		k.len = k.v6 ? 128 : 32;
		/* Near the test's prefixes most of the time. */
		if (k.v6) {
			k.addr[0] = 0x20; k.addr[1] = 0x01; k.addr[2] = 0x0d;
			k.addr[3] = 0xb8; k.addr[5] = (uint8_t)(rand_r(&seed) % 3);
			for (j = 12; j < 16; j++)
				k.addr[j] = (uint8_t)rand_r(&seed);
			if (rand_r(&seed) % 3 == 0)
				k.addr[15] &= 0x0f, k.addr[12] = k.addr[13] =
				    k.addr[14] = 0;
		} else {
			k.addr[0] = 198;
			k.addr[1] = (uint8_t)(18 + rand_r(&seed) % 2);
			k.addr[2] = (uint8_t)(rand_r(&seed) % 4);
			k.addr[3] = (uint8_t)rand_r(&seed);
			if (rand_r(&seed) % 8 == 0)
				k.addr[0] = (uint8_t)rand_r(&seed);
		}
		px_zones_path(&c->zones, &k, &zp);
		px_group_specs(g, &c->zones, d, &k, &zp, spec);
		for (j = 0; j < g->n; j++) {
			const struct px_addrlist *l = d == PX_DIM_CLIENT ?
			    &g->svc[j]->clients : &g->svc[j]->servers;

			assert_int_equal(spec[j], px_addrlist_spec(l, &c->zones,
			    &k, &zp, NULL, 0));
		}
	}
	px_config_unref(c);
}

/* 100 000 zones (the most a daemon file may hold): every name found at
 * its index, names not declared and near misses not found, a duplicate
 * name refused with the line of the first; and the names are indexed
 * (a table at most half full), not scanned: the scan made loading
 * quadratic (24 s for this many). */
static void
test_many_zones_by_name(void **state)
{
	enum { N = 100000 };
	size_t cap = (size_t)N * 64 + 64, len = 0, i;
	char *xml = malloc(cap), name[32];
	struct px_cfgerr err = { 0 };
	struct px_zones zs;
	xmlDoc *doc;

	(void)state;
	assert_non_null(xml);
	len += (size_t)snprintf(xml + len, cap - len, "<zones>\n");
	for (i = 0; i < N; i++)
		len += (size_t)snprintf(xml + len, cap - len,
		    "<zone name=\"z%zu\" addresses=\"10.%zu.%zu.%zu/32\"/>\n",
		    i, i >> 16, (i >> 8) & 255, i & 255);
	snprintf(xml + len, cap - len, "</zones>\n");
	doc = xmlReadMemory(xml, (int)strlen(xml), "zones.xml", NULL, 0);
	assert_non_null(doc);
	err.file = "zones.xml";
	assert_int_equal(px_zones_load(&zs, xmlDocGetRootElement(doc), &err), 0);
	assert_int_equal(zs.n, N);
	assert_true(zs.byname_cap >= 2 * zs.n);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "z%zu", i);
		assert_int_equal(px_zones_find(&zs, name), (int32_t)i);
	}
	assert_int_equal(px_zones_find(&zs, "z100000"), -1);
	assert_int_equal(px_zones_find(&zs, "z"), -1);
	assert_int_equal(px_zones_find(&zs, "Z1"), -1);
	assert_int_equal(px_zones_find(&zs, ""), -1);
	px_zones_free(&zs);
	assert_int_equal(px_zones_find(&zs, "z1"), -1);
	xmlFreeDoc(doc);

	/* the same name twice, far apart: refused, naming the first line */
	len = (size_t)snprintf(xml, cap, "<zones>\n");
	for (i = 0; i < 1000; i++)
		len += (size_t)snprintf(xml + len, cap - len,
		    "<zone name=\"z%zu\" addresses=\"10.0.%zu.%zu/32\"/>\n",
		    i, i >> 8, i & 255);
	snprintf(xml + len, cap - len,
	    "<zone name=\"z7\" addresses=\"10.9.9.9/32\"/>\n</zones>\n");
	doc = xmlReadMemory(xml, (int)strlen(xml), "zones.xml", NULL, 0);
	assert_non_null(doc);
	free(errors);
	errors = NULL;
	err = (struct px_cfgerr){ .file = "zones.xml" };
	err.out = open_memstream(&errors, &errlen);
	assert_int_equal(px_zones_load(&zs, xmlDocGetRootElement(doc), &err), -1);
	fclose(err.out);
	if (strstr(errors, "zone \"z7\" is also declared at line 9") == NULL)
		fail_msg("got: %s", errors);
	px_zones_free(&zs);
	xmlFreeDoc(doc);
	free(xml);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_zone_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zone_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dispatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ambiguous, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dispatch_ports, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_trees_match_scan, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_many_zones_by_name, setup,
		    teardown),
	};
	int rc;

	xmlInitParser();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	xmlCleanupParser();
	return rc;
}
