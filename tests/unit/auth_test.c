/* Unit tests for proxyd/auth/: the LDAP filter escaping of %u (a user
 * name that is a filter of its own must stay a name), the users' cache
 * (password hash, expiry, bound, groups), group membership by DN or by
 * first RDN, the principal's user, and <authenticators> / <auth> as
 * loaded, with their file:line errors (a bad url, a missing password
 * file, a keytab that cannot be read, an unknown authenticator), and a
 * box closed while a check for it stalls on its directory (a worker
 * gone at exit): its answer never reaches the box. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include <libxml/parser.h>

#include "auth.h"
#include "cfgread.h"

static void
test_filter_escapes(void **state)
{
	char out[256];
	const char *evil = "*)(uid=*";

	(void)state;
	assert_int_equal(px_ldap_filter("(uid=%u)", "alice", 5, out,
	    sizeof(out)), 0);
	assert_string_equal(out, "(uid=alice)");
	/* The injection: it must not become "(uid=*)(uid=*)". */
	assert_int_equal(px_ldap_filter("(uid=%u)", evil, strlen(evil), out,
	    sizeof(out)), 0);
	assert_string_equal(out, "(uid=\\2a\\29\\28uid=\\2a)");
	assert_null(strchr(out + 1, '*'));
	assert_int_equal(px_ldap_filter("(&(objectClass=person)(|(uid=%u)"
	    "(mail=%u)))", "a\\b", 3, out, sizeof(out)), 0);
	assert_string_equal(out, "(&(objectClass=person)(|(uid=a\\5cb)"
	    "(mail=a\\5cb)))");
	/* An embedded NUL is escaped, not an end. */
	assert_int_equal(px_ldap_filter("(uid=%u)", "a\0b", 3, out,
	    sizeof(out)), 0);
	assert_string_equal(out, "(uid=a\\00b)");
	assert_int_equal(px_ldap_filter("(x=%%%u)", "y", 1, out, sizeof(out)),
	    0);
	assert_string_equal(out, "(x=%y)");
	/* Too long: refused, never cut into another filter. */
	assert_int_equal(px_ldap_filter("(uid=%u)", "********", 8, out, 20),
	    -1);
}

static void
test_cache(void **state)
{
	struct px_auth_cache *c = px_auth_cache_new(3);
	char groups[] = "cn=ops,dc=example,dc=test\0\0", *g;
	size_t glen;

	(void)state;
	assert_non_null(c);
	px_auth_cache_put(c, "alice", NULL, "pw1", 3, groups, sizeof(groups) - 1,
	    1000, 500);
	assert_int_equal(px_auth_cache_get(c, "alice", "pw1", 3, 1100, &g,
	    &glen, NULL, 0), 1);
	assert_int_equal(glen, sizeof(groups) - 1);
	assert_memory_equal(g, groups, glen);
	free(g);
	/* groups only (a Kerberos user's lookup) */
	assert_int_equal(px_auth_cache_get(c, "alice", NULL, 0, 1100, &g,
	    &glen, NULL, 0), 1);
	free(g);
	/* a wrong password: not taken, and the entry goes */
	assert_int_equal(px_auth_cache_get(c, "alice", "pw2", 3, 1100, &g,
	    &glen, NULL, 0), -1);
	assert_null(g);
	assert_int_equal(px_auth_cache_get(c, "alice", "pw1", 3, 1100, &g,
	    &glen, NULL, 0), 0);
	/* expiry */
	px_auth_cache_put(c, "bob", NULL, "x", 1, NULL, 0, 1000, 500);
	assert_int_equal(px_auth_cache_get(c, "bob", "x", 1, 1499, &g,
	    &glen, NULL, 0), 1);
	assert_int_equal(px_auth_cache_get(c, "bob", "x", 1, 1500, &g,
	    &glen, NULL, 0), 0);
	/* a prefix of the password is not the password */
	px_auth_cache_put(c, "carol", NULL, "secret", 6, NULL, 0, 1000, 500);
	assert_int_equal(px_auth_cache_get(c, "carol", "secre", 5, 1001, &g,
	    &glen, NULL, 0), -1);
	/* groups cached without a password do not vouch for one */
	px_auth_cache_put(c, "dave", NULL, NULL, 0, NULL, 0, 1000, 500);
	assert_int_equal(px_auth_cache_get(c, "dave", "any", 3, 1001, &g,
	    &glen, NULL, 0), 0);
	/* bounded: the entry nearest its expiry goes */
	px_auth_cache_put(c, "u1", NULL, "p", 1, NULL, 0, 2000, 100);
	px_auth_cache_put(c, "u2", NULL, "p", 1, NULL, 0, 2000, 300);
	px_auth_cache_put(c, "u3", NULL, "p", 1, NULL, 0, 2000, 200);
	px_auth_cache_put(c, "u4", NULL, "p", 1, NULL, 0, 2000, 400);
	assert_true(px_auth_cache_count(c) <= 3);
	assert_int_equal(px_auth_cache_get(c, "u1", "p", 1, 2001, &g, &glen, NULL, 0),
	    0);
	assert_int_equal(px_auth_cache_get(c, "u4", "p", 1, 2001, &g, &glen, NULL, 0),
	    1);
	/* the directory's spelling of the name comes back with a hit */
	{
		char canon[16];

		px_auth_cache_put(c, "ALICE", "alice", "pw", 2, NULL, 0, 3000,
		    100);
		assert_int_equal(px_auth_cache_get(c, "ALICE", "pw", 2, 3001,
		    &g, &glen, canon, sizeof(canon)), 1);
		assert_string_equal(canon, "alice");
	}
	/* ttl 0: nothing cached */
	px_auth_cache_put(c, "eve", NULL, "p", 1, NULL, 0, 2000, 0);
	assert_int_equal(px_auth_cache_get(c, "eve", "p", 1, 2000, &g, &glen, NULL, 0),
	    0);
	px_auth_cache_free(c);
}

static void
test_groups_and_names(void **state)
{
	struct px_auth_id id = { .user = "alice" };
	char g[] = "cn=ops,dc=example,dc=test\0cn=Web Admins,ou=g,dc=x\0";
	char u[32];

	(void)state;
	assert_false(px_auth_id_in_group(&id, "ops"));
	id.groups = malloc(sizeof(g));
	memcpy(id.groups, g, sizeof(g));
	id.groups_len = sizeof(g);
	assert_true(px_auth_id_in_group(&id, "cn=ops,dc=example,dc=test"));
	assert_true(px_auth_id_in_group(&id, "CN=OPS,DC=example,DC=test"));
	assert_true(px_auth_id_in_group(&id, "ops"));
	assert_true(px_auth_id_in_group(&id, "web admins"));
	assert_false(px_auth_id_in_group(&id, "op"));
	assert_false(px_auth_id_in_group(&id, "example"));
	assert_false(px_auth_id_in_group(&id, ""));
	px_auth_id_clear(&id);
	assert_null(id.groups);

	/* Only the keytab's own realm is stripped. */
	assert_int_equal(px_auth_principal_user("alice@EXAMPLE.TEST", 18,
	    "EXAMPLE.TEST", u, sizeof(u)), 0);
	assert_string_equal(u, "alice");
	assert_int_equal(px_auth_principal_user("alice@OTHER.REALM", 17,
	    "EXAMPLE.TEST", u, sizeof(u)), 0);
	assert_string_equal(u, "alice@OTHER.REALM");
	px_auth_principal_user("alice@EXAMPLE.TEST.EVIL", 23, "EXAMPLE.TEST",
	    u, sizeof(u));
	assert_string_equal(u, "alice@EXAMPLE.TEST.EVIL");
	px_auth_principal_user("alice@example.test", 18, "EXAMPLE.TEST", u,
	    sizeof(u));
	assert_string_equal(u, "alice@example.test");
	px_auth_principal_user("alice@EXAMPLE.TEST", 18, "", u, sizeof(u));
	assert_string_equal(u, "alice@EXAMPLE.TEST");
	px_auth_principal_user("svc/host@R", 10, "R", u, sizeof(u));
	assert_string_equal(u, "svc/host");
	px_auth_principal_user("a@b@R", 5, "R", u, sizeof(u));
	assert_string_equal(u, "a@b");
	px_auth_principal_user("noreal", 6, "R", u, sizeof(u));
	assert_string_equal(u, "noreal");
	/* Too long: refused, never cut down to a shorter (other) name. */
	assert_int_equal(px_auth_principal_user("alice@OTHER.REALM", 17,
	    "EXAMPLE.TEST", u, 8), -1);
}

static char dir[] = "/tmp/auth_test.XXXXXX";

/* Loads xml's root as <authenticators> (and, when use is not NULL, its
 * <auth> child's text as a second document); the errors printed. */
static unsigned
load(const char *xml, struct px_authns *as, const char *use,
    struct px_auth_use **u, char *errs, size_t esize)
{
	char path[256];
	struct px_cfgerr e = { 0 };
	xmlDocPtr d, d2;
	FILE *f;

	snprintf(path, sizeof(path), "%s/proxyd.xml", dir);
	f = fmemopen(errs, esize, "w");
	e.out = f;
	e.file = path;
	d = xmlReadMemory(xml, (int)strlen(xml), path, NULL, 0);
	assert_non_null(d);
	px_authns_load(as, xmlDocGetRootElement(d), path, &e);
	if (use != NULL) {
		d2 = xmlReadMemory(use, (int)strlen(use), "svc.xml", NULL, 0);
		assert_non_null(d2);
		px_auth_use_load(u, xmlDocGetRootElement(d2), as, &e);
		xmlFreeDoc(d2);
	}
	xmlFreeDoc(d);
	fclose(f);
	return e.count;
}

static void
test_load(void **state)
{
	struct px_authns as;
	struct px_auth_use *u = NULL;
	char errs[4096], pw[300];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(pw, sizeof(pw), "%s/ldap.pw", dir);
	f = fopen(pw, "w");
	fputs("s3cret\n", f);
	fclose(f);

	/* good: relative password file, defaults */
	assert_int_equal(load("<authenticators>\n"
	    "<ldap name=\"dir\" url=\"ldap://127.0.0.1:3899\" "
	    "base-dn=\"dc=example,dc=test\" bind-dn=\"cn=admin,dc=example,"
	    "dc=test\" bind-password-file=\"ldap.pw\" cache=\"5m\" "
	    "timeout=\"2s\" group-attribute=\"memberOf\"/>\n"
	    "</authenticators>", &as,
	    "<auth authenticator=\"dir\" methods=\"basic\" required=\"yes\" "
	    "basic-without-tls=\"yes\"/>", &u, errs, sizeof(errs)), 0);
	assert_int_equal(as.n, 1);
	assert_string_equal(as.a[0]->bind_pw, "s3cret");
	assert_string_equal(as.a[0]->user_filter, "(uid=%u)");
	assert_int_equal(as.a[0]->timeout_ms, 2000);
	assert_int_equal(as.a[0]->cache_ms, 300000);
	assert_non_null(u);
	assert_true(u->methods[PX_AUTH_BASIC]);
	assert_false(u->methods[PX_AUTH_NEGOTIATE]);
	assert_true(u->basic_plain);
	assert_ptr_equal(u->ldap, as.a[0]);
	px_auth_use_free(u);
	u = NULL;
	px_authns_free(&as);

	/* bad url, missing password file, unreadable keytab, filter */
	assert_int_equal(load("<authenticators>\n"
	    "<ldap name=\"a\" url=\"http://x\" base-dn=\"dc=t\"/>\n"
	    "<ldap name=\"b\" url=\"ldap://127.0.0.1\" base-dn=\"dc=t\" "
	    "bind-dn=\"cn=x\" bind-password-file=\"/nonexistent/pw\"/>\n"
	    "<kerberos name=\"k\" keytab=\"/nonexistent/http.keytab\"/>\n"
	    "<ldap name=\"c\" url=\"ldap://127.0.0.1\" base-dn=\"dc=t\" "
	    "user-filter=\"uid=alice\"/>\n"
	    "<ldap name=\"c\" url=\"ldap://127.0.0.1\" base-dn=\"dc=t\"/>\n"
	    "</authenticators>", &as, NULL, NULL, errs, sizeof(errs)), 5);
	assert_non_null(strstr(errs, "proxyd.xml:2: url=\"http://x\": "));
	assert_non_null(strstr(errs, "proxyd.xml:3: bind-password-file="
	    "\"/nonexistent/pw\": No such file"));
	assert_non_null(strstr(errs, "proxyd.xml:4: keytab=\"/nonexistent/"
	    "http.keytab\": cannot be read"));
	assert_non_null(strstr(errs, "proxyd.xml:5: user-filter="));
	assert_non_null(strstr(errs, "proxyd.xml:6: authenticator \"c\" is "
	    "defined twice"));
	px_authns_free(&as);

	/* <auth> naming what is not there, or a method without its kind */
	assert_int_equal(load("<authenticators>\n"
	    "<ldap name=\"dir\" url=\"ldap://127.0.0.1\" base-dn=\"dc=t\"/>\n"
	    "</authenticators>", &as,
	    "<auth authenticator=\"corp dir\" methods=\"negotiate basic "
	    "digest\"/>", &u, errs, sizeof(errs)), 3);
	assert_non_null(strstr(errs, "authenticator=\"corp\": no such"));
	assert_non_null(strstr(errs, "negotiate needs a kerberos"));
	assert_non_null(strstr(errs, "\"digest\": expected negotiate or "
	    "basic"));
	assert_null(u);
	px_authns_free(&as);
	unlink(pw);
	rmdir(dir);
}

static atomic_int box_wakes;

static void
box_wake(void *arg)
{
	(void)arg;
	atomic_fetch_add(&box_wakes, 1);
}

static void
box_done(struct px_auth_req *r, void *arg)
{
	(void)r;
	(void)arg;
	fail_msg("a callback ran for a closed box");
}

static void
test_box_close(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof(sin);
	struct px_auth_box *box;
	struct px_auth_req *r;
	struct px_authns as;
	struct pollfd pfd;
	char xml[512], errs[1024];
	int l, i;

	(void)state;
	/* A directory that takes the connection and never answers. */
	l = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(l != -1);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 8), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &slen), 0);
	snprintf(dir, sizeof(dir), "/tmp/auth_test.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(xml, sizeof(xml), "<authenticators>\n<ldap name=\"stall\" "
	    "url=\"ldap://127.0.0.1:%u\" base-dn=\"dc=t\" timeout=\"1s\"/>\n"
	    "</authenticators>", (unsigned)ntohs(sin.sin_port));
	assert_int_equal(load(xml, &as, NULL, NULL, errs, sizeof(errs)), 0);
	rmdir(dir);

	box = calloc(1, sizeof(*box));
	assert_non_null(box);
	box->wake = box_wake;
	r = px_auth_req_new(PX_AUTH_BASIC, as.a[0], NULL, "alice", "pw", 2);
	assert_non_null(r);
	px_auth_submit(r, box, box_done, NULL);
	/* An auth thread is on it: the directory has its connection. */
	pfd = (struct pollfd){ .fd = l, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	/* Its session ended, then its worker: the box goes. */
	px_auth_cancel(r);
	px_auth_box_close(box);
	/* The check gives up after its timeout (1 s): nothing arrives. */
	for (i = 0; i < 30; i++)
		usleep(100 * 1000);
	assert_int_equal(atomic_load(&box_wakes), 0);
	assert_null(atomic_load(&box->head));
	free(box);
	px_authns_free(&as);
	close(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_escapes),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_groups_and_names),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_box_close),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
