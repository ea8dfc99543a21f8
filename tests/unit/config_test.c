/* Unit tests for proxyd/config/config.c: every loader error path reports
 * file:line: reason and yields no config; valid files give the right values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <libxml/parser.h>

#include "analyser.h"
#include "config.h"

struct fixture {
	char	 dir[64];
	char	 conf[128];
	char	*errors;
	size_t	 errlen;
};

static struct fixture fx;

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
	char pdir[160];

	(void)state;
	memset(&fx, 0, sizeof(fx));
	strcpy(fx.dir, "/tmp/proxyd-config-test-XXXXXX");
	assert_non_null(mkdtemp(fx.dir));
	snprintf(fx.conf, sizeof(fx.conf), "%s/proxyd.xml", fx.dir);
	snprintf(pdir, sizeof(pdir), "%s/policy", fx.dir);
	assert_int_equal(mkdir(pdir, 0700), 0);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[200];

	(void)state;
	free(fx.errors);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx.dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void
put_policy(const char *name, const char *text)
{
	char path[200];

	snprintf(path, sizeof(path), "%s/policy/%s", fx.dir, name);
	write_file(path, text);
}

static void
put_conf(const char *text)
{
	write_file(fx.conf, text);
}

static struct px_config *
load(void)
{
	struct px_cfgerr err = { 0 };
	struct px_config *c;

	free(fx.errors);
	fx.errors = NULL;
	err.out = open_memstream(&fx.errors, &fx.errlen);
	c = px_config_load(fx.conf, &err);
	fclose(err.out);
	if (c == NULL)
		assert_true(err.count > 0);
	return c;
}

/* The load fails and the report holds "<file>:<line>: ...<what>...". */
static void
expect_error(const char *file, int line, const char *what)
{
	struct px_config *c = load();
	char prefix[256];
	const char *p;
	bool found = false;

	if (c != NULL) {
		px_config_unref(c);
		fail_msg("expected an error '%s' at %s:%d, config loaded", what,
		    file, line);
	}
	snprintf(prefix, sizeof(prefix), "%s/%s:%d: ", fx.dir, file, line);
	for (p = fx.errors; p != NULL && (p = strstr(p, prefix)) != NULL; p++) {
		const char *eol = strchr(p, '\n');

		if (eol != NULL && memmem(p, (size_t)(eol - p), what,
		    strlen(what)) != NULL)
			found = true;
	}
	if (!found)
		fail_msg("expected '%s...%s' in:\n%s", prefix, what, fx.errors);
}

static const char *const good_conf =
    "<proxyd>\n"
    "  <policies dir=\"policy\"/>\n"
    "</proxyd>\n";

static const char *const good_service =
    "<service name=\"web\" analyser=\"plug\">\n"
    "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
    "</service>\n";

static void
test_defaults(void **state)
{
	struct px_config *c;
	const struct px_service *s;

	(void)state;
	put_conf(good_conf);
	put_policy("web.xml", good_service);
	c = load();
	assert_non_null(c);
	assert_true(c->workers >= 1);
	assert_int_equal(c->max_sessions, 10000);
	assert_int_equal(c->connect_timeout_ms, 10000);
	assert_int_equal(c->idle_timeout_ms, 300000);
	assert_int_equal(c->buffer, 256 * 1024);
	assert_int_equal(c->shutdown_grace_ms, 30000);
	assert_int_equal(c->log_target, PX_LOG_STDERR);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_false(c->admin_enabled);
	assert_int_equal(c->nservices, 1);
	s = &c->services[0];
	assert_string_equal(s->name, "web");
	assert_string_equal(s->analyser->name, "plug");
	assert_int_equal(s->mode, PX_MODE_FIXED);
	assert_true(s->has_target);
	assert_int_equal(s->connect_timeout_ms, 10000);
	assert_false(s->clients.set);
	assert_int_equal(s->backlog, 1024);
	assert_non_null(s->analyser_policy);	/* plug defaults */
	px_config_unref(c);
}

static void
test_values(void **state)
{
	struct px_config *c;
	const struct px_service *s;

	(void)state;
	put_conf("<proxyd>\n"
	    "  <workers>3</workers>\n"
	    "  <limits max-sessions=\"7\" connect-timeout=\"250ms\" idle-timeout=\"0\"\n"
	    "          buffer=\"64k\" session-bandwidth=\"1m\" global-bandwidth=\"0\"\n"
	    "          shutdown-grace=\"2s\"/>\n"
	    "  <log target=\"file:proxyd.log\" level=\"debug\"/>\n"
	    "  <admin listen=\"[::1]:19180\"/>\n"
	    "  <policies dir=\"policy\"/>\n"
	    "</proxyd>\n");
	put_policy("b.xml",
	    "<service name=\"b\" analyser=\"plug\">\n"
	    "  <listen address=\"::1\" port=\"2222\" backlog=\"16\"/>\n"
	    "  <target address=\"2001:db8::2\" port=\"22\"/>\n"
	    "  <upstream connect-timeout=\"5s\"/>\n"
	    "  <clients allow=\"127.0.0.0/8, ::1\n 10.0.0.0/8\"/>\n"
	    "  <plug splice=\"no\" half-close=\"no\"/>\n"
	    "</service>\n");
	put_policy("a.xml", good_service);
	put_policy("notes.txt", "not a policy");
	c = load();
	assert_non_null(c);
	assert_int_equal(c->workers, 3);
	assert_int_equal(c->max_sessions, 7);
	assert_int_equal(c->connect_timeout_ms, 250);
	assert_int_equal(c->idle_timeout_ms, 0);
	assert_int_equal(c->buffer, 65536);
	assert_int_equal(c->session_bandwidth, 1 << 20);
	assert_int_equal(c->shutdown_grace_ms, 2000);
	assert_int_equal(c->log_target, PX_LOG_FILE);
	assert_non_null(strstr(c->log_file, "/proxyd.log"));
	assert_int_equal(c->log_level, LOG_DEBUG);
	assert_true(c->admin_enabled);
	assert_int_equal(c->nservices, 2);
	/* sorted by name, whatever the file order: b.xml's "b" < a.xml's "web" */
	assert_string_equal(c->services[1].name, "web");
	s = &c->services[0];
	assert_string_equal(s->name, "b");
	assert_int_equal(s->backlog, 16);
	assert_int_equal(s->connect_timeout_ms, 5000);
	assert_int_equal(s->clients.ncidrs, 3);
	assert_int_equal(s->listen.ss_family, AF_INET6);
	px_config_unref(c);
}

static void
test_daemon_errors(void **state)
{
	static const struct {
		const char *limits;
		const char *what;
	} cases[] = {
		{ "buffer=\"12q\"", "buffer=\"12q\": unknown size unit" },
		{ "buffer=\"1k\"", "buffer=\"1k\": must be between" },
		{ "idle-timeout=\"5\"", "idle-timeout=\"5\": duration needs a unit" },
		{ "connect-timeout=\"0\"", "connect-timeout=\"0\"" },
		{ "connect-timeout=\"2h\"", "must be between" },
		{ "max-sessions=\"0\"", "max-sessions=\"0\"" },
		{ "max-sessions=\"ten\"", "not a decimal number" },
		{ "session-bandwidth=\"3g\"", "session-bandwidth=\"3g\"" },
		{ "shutdown-grace=\"-1s\"", "shutdown-grace" },
		{ "colour=\"red\"", "Invalid attribute colour for element limits" },
	};
	char text[512];
	size_t i;

	(void)state;
	put_policy("web.xml", good_service);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "<proxyd>\n  <policies dir=\"policy\"/>\n"
		    "  <limits %s/>\n</proxyd>\n", cases[i].limits);
		put_conf(text);
		expect_error("proxyd.xml", 3, cases[i].what);
	}

	put_conf("<proxyd>\n<workers>0</workers>\n<policies dir=\"policy\"/></proxyd>\n");
	expect_error("proxyd.xml", 2, "workers \"0\"");
	put_conf("<proxyd>\n<workers>many</workers>\n<policies dir=\"policy\"/></proxyd>\n");
	expect_error("proxyd.xml", 2, "expected auto");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<log target=\"printer\"/></proxyd>\n");
	expect_error("proxyd.xml", 3, "target=\"printer\"");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<log level=\"loud\"/></proxyd>\n");
	expect_error("proxyd.xml", 3, "level=\"loud\"");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<admin listen=\"0.0.0.0:9180\"/></proxyd>\n");
	expect_error("proxyd.xml", 3, "must be on a loopback address");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<admin listen=\"localhost:9180\"/></proxyd>\n");
	expect_error("proxyd.xml", 3, "not a numeric");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<admin listen=\"127.0.0.1\"/></proxyd>\n");
	expect_error("proxyd.xml", 3, "expected ADDRESS:PORT");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<firewall/>\n</proxyd>\n");
	expect_error("proxyd.xml", 3, "Did not expect element firewall there");
	put_conf("<proxyd>\n<policies dir=\"policy\"/>\n<limits/>\n<limits/>\n</proxyd>\n");
	expect_error("proxyd.xml", 4, "<limits> given twice (first at line 3)");
	put_conf("<proxyd>\n<policies dir=\"policy\">\n</proxyd>\n");
	expect_error("proxyd.xml", 3, "mismatch");
	put_conf("<proxyd>\n<policies dir=\"nowhere\"/>\n</proxyd>\n");
	expect_error("proxyd.xml", 0, "No such file or directory");
	put_conf("<?xml version=\"1.0\"?>\n<!DOCTYPE proxyd [\n<!ENTITY a \"aaaa\">\n]>\n"
	    "<proxyd><policies dir=\"&a;\"/></proxyd>\n");
	expect_error("proxyd.xml", 2, "DOCTYPE declarations are not allowed");
	/* One clear line for what is not XML at all, before libxml2. */
	put_conf("");
	expect_error("proxyd.xml", 0, "empty file: expected XML");
	write_file(fx.conf, "<proxyd>\n\177ELF\001\001");
	{
		FILE *f = fopen(fx.conf, "ab");

		assert_non_null(f);
		fputc('\0', f);
		fclose(f);
	}
	expect_error("proxyd.xml", 0, "not a text file (a NUL byte at offset 15)");
	unlink(fx.conf);
	expect_error("proxyd.xml", 0, "cannot read: No such file or directory");
	/* Over the size cap: refused before parsing. */
	{
		FILE *f = fopen(fx.conf, "w");

		assert_non_null(f);
		fputs("<proxyd>\n", f);
		assert_int_equal(ftruncate(fileno(f), (16 << 20) + 1), 0);
		fclose(f);
	}
	expect_error("proxyd.xml", 0, "16777217 bytes: over the 16 MiB");
	/* libxml2 meets an entity loop in several places: said once. */
	put_conf("<?xml version=\"1.0\"?>\n<!DOCTYPE p [\n<!ENTITY a \"&b;\">"
	    "<!ENTITY b \"&a;\">\n]>\n<proxyd>&a;&a;&a;</proxyd>\n");
	{
		struct px_config *c = load();
		const char *p = fx.errors;
		unsigned n = 0;

		assert_null(c);
		while ((p = strstr(p, "entity reference loop")) != NULL) {
			n++;
			p++;
		}
		if (n > 2)
			fail_msg("the entity loop said %u times:\n%s", n, fx.errors);
	}
}

/* Lines past 65535 are reported as they are (XML_PARSE_BIG_LINES). */
static void
test_big_line_numbers(void **state)
{
	char path[200];
	FILE *f;
	int i;

	(void)state;
	put_conf("<proxyd>\n  <policies dir=\"policy\"/>\n</proxyd>\n");
	snprintf(path, sizeof(path), "%s/policy/big.xml", fx.dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("<service name=\"big\" analyser=\"plug\">\n", f);
	for (i = 0; i < 70000; i++)
		fputs("<!-- padding -->\n", f);
	fputs("<listen address=\"127.0.0.1\" port=\"1\"/>\n"
	    "<target address=\"127.0.0.1\" port=\"2\"/>\n"
	    "<upstream connect-timeout=\"5q\"/>\n</service>\n", f);
	fclose(f);
	expect_error("policy/big.xml", 70004, "connect-timeout=\"5q\"");
	/* a schema error on an element past the limit */
	assert_non_null(f = fopen(path, "w"));
	fputs("<service name=\"big\" analyser=\"plug\">\n", f);
	for (i = 0; i < 70000; i++)
		fputs("<!-- padding -->\n", f);
	fputs("<listen address=\"127.0.0.1\" port=\"1\"/>\n<bogus/>\n"
	    "</service>\n", f);
	fclose(f);
	expect_error("policy/big.xml", 70003, "bogus");
}

static void
test_service_errors(void **state)
{
	static const struct {
		const char *text;
		int line;
		const char *what;
	} cases[] = {
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <cache size=\"1m\"/>\n"
		  "</service>\n", 4, "Did not expect element cache there" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18082\"/>\n"
		  "</service>\n", 4, "<target> given twice" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\" colour=\"red\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "Invalid attribute colour for element listen" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"300.1.1.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "address=\"300.1.1.1\": not a numeric" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"db.example.test\" port=\"18080\"/>\n"
		  "</service>\n", 3, "not a numeric" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"70000\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "port=\"70000\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"0\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "port=\"0\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "</service>\n", 1, "fixed mode needs a <target" },
		{ "<service name=\"w\" analyser=\"smtp\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 1, "analyser=\"smtp\": not built into this proxyd" },
		{ "<service name=\"w w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 1, "name=\"w w\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\" mode=\"forward\"/>\n"
		  "</service>\n", 2, "cannot take its destination from the request" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"0.0.0.0\" port=\"50080\" mode=\"transparent\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 3, "<target> is only used in fixed mode" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"0.0.0.0\" port=\"50080\" mode=\"redirect\"/>\n"
		  "  <upstream ct-zone=\"70000\"/>\n"
		  "</service>\n", 3, "ct-zone=\"70000\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"0.0.0.0\" port=\"50080\" mode=\"redirect\"/>\n"
		  "  <upstream mark=\"0x1ffffffff\"/>\n"
		  "</service>\n", 3, "mark=\"0x1ffffffff\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\" mode=\"sideways\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "mode=\"sideways\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <upstream spoof-source=\"yes\"/>\n"
		  "</service>\n", 4, "needs mode=\"transparent\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <upstream connect-timeout=\"soon\"/>\n"
		  "</service>\n", 4, "connect-timeout=\"soon\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <clients allow=\"10.0.0.0/8 10.0.0.0/40\"/>\n"
		  "</service>\n", 4, "\"10.0.0.0/40\": not a CIDR" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <clients allow=\" \"/>\n"
		  "</service>\n", 4, "list at least one address" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\" origdst=\"conntrack\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 2, "origdst=\"conntrack\" is for mode=\"redirect\"" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"0.0.0.0\" port=\"18081\" mode=\"redirect\" origdst=\"netlink\"/>\n"
		  "</service>\n", 2, "origdst=\"netlink\": expected auto or conntrack" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <plug splice=\"maybe\"/>\n"
		  "</service>\n", 4, "splice=\"maybe\": expected auto or no" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "  <plug half-close=\"1\"/>\n"
		  "</service>\n", 4, "half-close=\"1\": expected yes or no" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service\n", 5, "expected '>'" },
		{ "<service name=\"w\" analyser=\"plug\">\n"
		  "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
		  "</service>\n", 1, "service needs a <listen" },
	};
	size_t i;

	(void)state;
	put_conf(good_conf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		put_policy("w.xml", cases[i].text);
		expect_error("policy/w.xml", cases[i].line, cases[i].what);
	}
}

/* <r66>: each bad value is reported at its own line. */
static void
test_r66_section(void **state)
{
	static const char head[] =
	    "<service name=\"w\" analyser=\"r66\">\n"
	    "  <listen address=\"127.0.0.1\" port=\"18081\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n";
	static const struct {
		const char *body;
		int line;
		const char *what;
	} cases[] = {
		{ "  <r66 require-digest=\"maybe\"/>\n", 4,
		  "require-digest=\"maybe\": expected yes, no, block or global" },
		{ "  <r66 max-block=\"64\"/>\n", 4,
		  "max-block=\"64\": must be between 100 and 16m" },
		{ "  <r66 max-block=\"1t\"/>\n", 4, "max-block=\"1t\"" },
		{ "  <r66 max-block=\"32m\"/>\n", 4, "between 100 and 16m" },
		{ "  <r66 information=\"1\"/>\n", 4,
		  "information=\"1\": expected yes or no" },
		{ "  <r66>\n    <host id=\"a\" action=\"maybe\"/>\n  </r66>\n", 5,
		  "action=\"maybe\": expected accept, deny or abort" },
		{ "  <r66>\n    <rule name=\" \"/>\n  </r66>\n", 5,
		  "name=\"\": expected at least one item" },
		{ "  <r66>\n    <mode allow=\"send push\"/>\n  </r66>\n", 5,
		  "unknown mode \"push\"" },
		{ "  <r66>\n    <mode allow=\"send\"/>\n"
		  "    <mode allow=\"recv\"/>\n  </r66>\n", 6,
		  "<mode> given twice" },
		{ "  <r66>\n    <file pattern=\"*\" max-size=\"0\"/>\n  </r66>\n",
		  5, "max-size=\"0\": must be above 0" },
		{ "  <r66>\n    <file pattern=\"*\" max-size=\"big\"/>\n"
		  "  </r66>\n", 5, "max-size=\"big\"" },
		{ "  <r66>\n    <admin allow=\"all\"/>\n  </r66>\n", 5,
		  "Did not expect element admin there" },
		{ "  <plug splice=\"no\"/>\n", 4,
		  "<plug> does not belong to a service with analyser=\"r66\"" },
	};
	char text[1024];
	struct px_config *c;
	size_t i;

	(void)state;
	put_conf(good_conf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "%s%s</service>\n", head,
		    cases[i].body);
		put_policy("w.xml", text);
		expect_error("policy/w.xml", cases[i].line, cases[i].what);
	}
	/* every knob at once loads */
	snprintf(text, sizeof(text), "%s%s</service>\n", head,
	    "  <r66 require-digest=\"global\" max-block=\"1m\" "
	    "information=\"no\" test=\"yes\">\n"
	    "    <host id=\"a b\" action=\"accept\"/>\n"
	    "    <host id=\"*\" action=\"abort\"/>\n"
	    "    <rule name=\"r\"/>\n"
	    "    <mode allow=\"sendmd5 recvmd5through\"/>\n"
	    "    <file pattern=\"*.xml\" max-size=\"10g\" action=\"accept\"/>\n"
	    "  </r66>\n");
	put_policy("w.xml", text);
	c = load();
	if (c == NULL)
		fail_msg("valid <r66> refused:\n%s", fx.errors);
	px_config_unref(c);
}

static void
test_cross_file_errors(void **state)
{
	(void)state;
	put_conf(good_conf);
	put_policy("a.xml", good_service);
	/* same name */
	put_policy("b.xml",
	    "<service name=\"web\" analyser=\"plug\">\n"
	    "  <listen address=\"127.0.0.1\" port=\"18082\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
	    "</service>\n");
	expect_error("policy/b.xml", 1, "service name \"web\" is also used by");
	/* same port, wildcard against a specific address */
	put_policy("b.xml",
	    "<service name=\"other\" analyser=\"plug\">\n"
	    "  <listen address=\"0.0.0.0\" port=\"18081\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
	    "</service>\n");
	expect_error("policy/b.xml", 2, "clashes with service \"web\"");
	/* same port on another v4 address, or on v6, is fine */
	put_policy("b.xml",
	    "<service name=\"other\" analyser=\"plug\">\n"
	    "  <listen address=\"127.0.0.2\" port=\"18081\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
	    "</service>\n");
	put_policy("c.xml",
	    "<service name=\"six\" analyser=\"plug\">\n"
	    "  <listen address=\"::\" port=\"18081\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18080\"/>\n"
	    "</service>\n");
	{
		struct px_config *c = load();

		if (c == NULL)
			fail_msg("unexpected errors:\n%s", fx.errors);
		assert_int_equal(c->nservices, 3);
		px_config_unref(c);
	}
	/* the admin port is taken too */
	put_conf("<proxyd>\n  <policies dir=\"policy\"/>\n"
	    "  <admin listen=\"127.0.0.1:18081\"/>\n</proxyd>\n");
	expect_error("policy/a.xml", 2, "clashes with the admin endpoint");
}

static void
test_inline_modes(void **state)
{
	struct px_config *c;

	(void)state;
	put_conf(good_conf);
	put_policy("tp.xml",
	    "<service name=\"tp\" analyser=\"plug\">\n"
	    "  <listen address=\"0.0.0.0\" port=\"50080\" mode=\"transparent\"/>\n"
	    "  <upstream spoof-source=\"yes\" mark=\"0x40000000\" ct-zone=\"1\"/>\n"
	    "</service>\n");
	put_policy("rd.xml",
	    "<service name=\"rd\" analyser=\"plug\">\n"
	    "  <listen address=\"::\" port=\"50081\" mode=\"redirect\"/>\n"
	    "  <upstream mark=\"7\"/>\n"
	    "</service>\n");
	c = load();
	if (c == NULL)
		fail_msg("unexpected errors:\n%s", fx.errors);
	assert_int_equal(c->nservices, 2);
	assert_string_equal(c->services[0].name, "rd");
	assert_int_equal(c->services[0].mode, PX_MODE_REDIRECT);
	assert_true(c->services[0].has_mark);
	assert_int_equal(c->services[0].mark, 7);
	assert_false(c->services[0].has_target);
	assert_int_equal(c->services[1].mode, PX_MODE_TRANSPARENT);
	assert_true(c->services[1].spoof_source);
	assert_int_equal(c->services[1].mark, 0x40000000u);
	assert_int_equal(c->services[1].ct_zone, 1);
	assert_int_equal(c->services[0].ct_zone, 0);
	px_config_unref(c);
}

/* <ftp>: every value checked with file:line, a valid section loads. */
static void
test_ftp_policy(void **state)
{
	static const struct {
		const char *ftp;
		const char *what;
	} cases[] = {
		{ "<ftp client-data=\"sideways\"/>", "client-data=\"sideways\": expected keep, active or passive" },
		{ "<ftp server-data=\"\"/>", "server-data=\"\": expected keep" },
		{ "<ftp data-ports=\"41000-40000\"/>", "data-ports=\"41000-40000\": the low port is above" },
		{ "<ftp data-ports=\"80-90\"/>", "data-ports=\"80-90\"" },
		{ "<ftp data-ports=\"40000\"/>", "expected LOW-HIGH" },
		{ "<ftp strict-port-check=\"maybe\"/>", "strict-port-check=\"maybe\": expected yes or no" },
		{ "<ftp><limits max-line=\"10\"/></ftp>", "max-line=\"10\"" },
		{ "<ftp><limits max-line=\"99999\"/></ftp>", "max-line=\"99999\"" },
		{ "<ftp><limits max-username=\"x\"/></ftp>", "max-username=\"x\"" },
		{ "<ftp><limits timeout=\"5\"/></ftp>", "timeout=\"5\"" },
		{ "<ftp><limits timeout=\"2d\"/></ftp>", "must be between 100ms and 3600000ms" },
		{ "<ftp><command name=\"RETR\" action=\"maybe\"/></ftp>", "action=\"maybe\": expected accept or deny" },
		{ "<ftp><command name=\"RE-R\" action=\"deny\"/></ftp>", "command \"RE-R\": expected 1 to 8 letters and digits" },
		{ "<ftp><command name=\"RETR retr\" action=\"deny\"/></ftp>", "command RETR has a rule already" },
		{ "<ftp><command name=\" \" action=\"deny\"/></ftp>", "needs name=" },
		{ "<ftp><command name=\"*\" action=\"deny\"/><command name=\"*\" action=\"accept\"/></ftp>", "command \"*\" given twice" },
		{ "<ftp><user name=\"\" action=\"deny\"/></ftp>", "<user> needs a non-empty name" },
		{ "<ftp><limits/><limits/></ftp>", "<limits> given twice" },
	};
	char text[1024];
	struct px_config *c;
	const struct px_analyser *a = px_analyser_find("ftp");
	size_t i;

	(void)state;
	assert_non_null(a);
	put_conf(good_conf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text),
		    "<service name=\"f\" analyser=\"ftp\">\n"
		    "  <listen address=\"127.0.0.1\" port=\"18021\"/>\n"
		    "  <target address=\"127.0.0.1\" port=\"18020\"/>\n"
		    "  %s\n"
		    "</service>\n", cases[i].ftp);
		put_policy("f.xml", text);
		expect_error("policy/f.xml", 4, cases[i].what);
	}
	put_policy("f.xml",
	    "<service name=\"f\" analyser=\"ftp\">\n"
	    "  <listen address=\"127.0.0.1\" port=\"18021\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18020\"/>\n"
	    "  <ftp client-data=\"passive\" server-data=\"active\"\n"
	    "       data-ports=\"40000-40010\" strict-port-check=\"no\">\n"
	    "    <limits max-line=\"256\" max-username=\"32\" max-password=\"64\" timeout=\"10s\"/>\n"
	    "    <command name=\"USER PASS RETR\" action=\"accept\"/>\n"
	    "    <command name=\"*\" action=\"deny\"/>\n"
	    "    <user name=\"anonymous ftp\" action=\"accept\"/>\n"
	    "    <path pattern=\"*.exe\" action=\"deny\"/>\n"
	    "  </ftp>\n"
	    "</service>\n");
	c = load();
	if (c == NULL)
		fail_msg("unexpected errors:\n%s", fx.errors);
	assert_ptr_equal(c->services[0].analyser, a);
	assert_non_null(c->services[0].analyser_policy);
	px_config_unref(c);
	/* no <ftp> at all: defaults */
	put_policy("f.xml",
	    "<service name=\"f\" analyser=\"ftp\">\n"
	    "  <listen address=\"127.0.0.1\" port=\"18021\"/>\n"
	    "  <target address=\"127.0.0.1\" port=\"18020\"/>\n"
	    "</service>\n");
	c = load();
	if (c == NULL)
		fail_msg("unexpected errors:\n%s", fx.errors);
	px_config_unref(c);
}

/* The files we ship must load: they are the users' starting point. */
static void
test_shipped_files(void **state)
{
	const char *src = getenv("PROXYD_SOURCE_DIR");
	struct px_cfgerr err = { .out = stderr };
	struct px_config *c;
	char path[512];
	glob_t g;

	(void)state;
	if (src == NULL)
		skip();
	snprintf(path, sizeof(path), "%s/conf/proxyd.xml", src);
	c = px_config_load(path, &err);
	assert_non_null(c);
	assert_true(c->nservices >= 1);
	assert_true(c->admin_enabled);
	px_config_unref(c);

	/* every example policy, through a daemon file that points at them */
	snprintf(path, sizeof(path), "<proxyd>\n  <policies dir=\"%s/policy/examples\"/>\n</proxyd>\n",
	    src);
	put_conf(path);
	c = load();
	if (c == NULL)
		fail_msg("policy/examples does not load:\n%s", fx.errors);
	/* one service per file: none skipped */
	snprintf(path, sizeof(path), "%s/policy/examples/*.xml", src);
	assert_int_equal(glob(path, 0, NULL, &g), 0);
	assert_int_equal(c->nservices, g.gl_pathc);
	globfree(&g);
	px_config_unref(c);

	/* the gateway example has its own daemon file, with zones */
	snprintf(path, sizeof(path), "%s/policy/examples/gateway/proxyd.xml", src);
	c = px_config_load(path, &err);
	assert_non_null(c);
	assert_int_equal(c->nservices, 3);
	assert_int_equal(c->ngroups, 1);
	assert_true(c->zones.n >= 5);
	px_config_unref(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_service_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_r66_section, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cross_file_errors, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_inline_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ftp_policy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shipped_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_line_numbers, setup,
		    teardown),
	};
	int rc;

	xmlInitParser();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	xmlCleanupParser();
	return rc;
}
