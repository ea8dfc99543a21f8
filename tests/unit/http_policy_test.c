/* Unit tests for plugins/http/http_policy.c: the defaults of an absent
 * <http>, each rule list's default (what a request no rule matches gets),
 * first match, abort, ports, url paths and queries, the Upgrade list, the
 * header actions, the fixed choices, the messages of bad values, and
 * user=/group= (with <auth>: those users, members of those groups). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "auth.h"
#include "config.h"
#include "http/http.h"
#include "rules.h"
#include "policy_load.h"

extern const struct px_analyser http_analyser;

/* Loads the root element of xml as an <http> section; NULL (with the
 * first error in *e) if the loader refuses it. */
static struct http_policy *
httpt_load(const char *xml, struct px_cfgerr *e)
{
	return px_test_policy_load(&http_analyser, xml, e);
}

/* http_policy_check for method on port with host and path. */
static int
check(const struct http_policy *p, const char *method, uint16_t port,
    const char *host, const char *path, const char **why)
{
	*why = NULL;
	return http_policy_check(p, method, strlen(method), port, host, path,
	    NULL, why, NULL);
}

/* http_policy_check of a GET with path and query (NULL: none). */
static int
pq(const struct http_policy *p, const char *path, const char *query,
    const char **why)
{
	*why = NULL;
	return http_policy_check(p, "GET", 3, 80, "h", path, query, why, NULL);
}

static bool
upgrade(const struct http_policy *p, const char *v)
{
	return http_policy_upgrade(p, v, strlen(v));
}

/* The <http> of a <service> that has an <auth> (what user= and group=
 * need), loaded as the config loader does. */
static struct http_policy *
httpt_load_in_service(const char *xml, struct px_cfgerr *e)
{
	xmlDoc *doc;
	xmlNode *n;
	void *pol = NULL;

	memset(e, 0, sizeof(*e));
	e->file = "t.xml";
	doc = xmlReadMemory(xml, (int)strlen(xml), "t.xml", NULL,
	    XML_PARSE_NONET);
	assert_non_null(doc);
	for (n = xmlDocGetRootElement(doc)->children; n != NULL; n = n->next)
		if (n->type == XML_ELEMENT_NODE &&
		    xmlStrcmp(n->name, (const xmlChar *)"http") == 0)
			break;
	assert_non_null(n);
	if (http_analyser.policy_load(n, &pol, e) == -1)
		pol = NULL;
	xmlFreeDoc(doc);
	return pol;
}

static int
check_as(const struct http_policy *p, const struct px_auth_id *id,
    const char *method, const char *path)
{
	const char *why = NULL;

	return http_policy_check_as(p, id, method, strlen(method), 80, "h",
	    path, NULL, &why, NULL);
}

/* user= and group= on <request> and <url>: only those users, members of
 * those groups; nobody matches none of them; without <auth>: refused. */
static void
test_who(void **state)
{
	struct px_cfgerr e;
	struct http_policy *p;
	char groups[] = "cn=ops,ou=groups,dc=example,dc=test\0";
	struct px_auth_id alice = { .user = "alice", .groups = groups,
	    .groups_len = sizeof(groups) };
	struct px_auth_id bob = { .user = "bob" };

	(void)state;
	p = httpt_load_in_service("<service><auth authenticator=\"d\"/><http>"
	    "<request method=\"DELETE\" user=\"alice carol\" action=\"accept\"/>"
	    "<request method=\"DELETE\" action=\"deny\" status=\"403\"/>"
	    "<request method=\"*\" user=\"*\" action=\"accept\"/>"
	    "<url path=\"/admin/*\" group=\"ops\" action=\"accept\"/>"
	    "<url path=\"/admin/*\" action=\"deny\"/>"
	    "<url path=\"/ops-dn/*\" group=\"CN=ops,ou=groups,dc=example,dc=test\" action=\"deny\" status=\"451\"/>"
	    "<url path=\"/bob/*\" user=\"bob\" action=\"deny\" status=\"410\"/>"
	    "</http></service>", &e);
	assert_non_null(p);
	assert_int_equal(check_as(p, &alice, "DELETE", "/x"), 0);
	assert_int_equal(check_as(p, &bob, "DELETE", "/x"), 403);
	assert_int_equal(check_as(p, NULL, "DELETE", "/x"), 403);
	assert_int_equal(check_as(p, &alice, "GET", "/admin/a"), 0);
	assert_int_equal(check_as(p, &bob, "GET", "/admin/a"), 403);
	assert_int_equal(check_as(p, NULL, "GET", "/admin/a"), 403);
	assert_int_equal(check_as(p, &alice, "GET", "/ops-dn/a"), 451);
	assert_int_equal(check_as(p, &bob, "GET", "/ops-dn/a"), 0);
	assert_int_equal(check_as(p, &bob, "GET", "/bob/a"), 410);
	assert_int_equal(check_as(p, &alice, "GET", "/bob/a"), 0);
	/* user="*": anyone proven, not nobody (PROPFIND: not in the
	 * built-in list, so only that rule takes it) */
	assert_int_equal(check_as(p, &bob, "PROPFIND", "/x"), 0);
	assert_int_equal(check_as(p, NULL, "PROPFIND", "/x"), 405);
	/* no identity given at all (the plain check): no such rule */
	assert_int_equal(http_policy_check(p, "DELETE", 6, 80, "h", "/x",
	    NULL, &(const char *){ NULL }, NULL), 403);
	http_policy_free(p);

	/* without <auth>: an error at the rule */
	assert_null(httpt_load("<http><url path=\"/a\" user=\"alice\" "
	    "action=\"accept\"/></http>", &e));
	assert_non_null(strstr(e.first, "user=/group=: the service has no "
	    "<auth>"));
}

static void
test_no_section(void **state)
{
	static const char *const builtin[] = { "GET", "HEAD", "POST", "PUT",
	    "DELETE", "OPTIONS", "PATCH", "get" };
	struct px_cfgerr e = { .file = "t.xml" };
	struct http_policy *p;
	const char *why;
	void *pol = NULL;
	size_t i;

	(void)state;
	assert_int_equal(http_policy_load(NULL, &pol, &e), 0);
	p = pol;
	assert_true(p->keepalive_client && p->keepalive_server && p->via &&
	    p->check_host);
	assert_int_equal(p->xff, HTTP_XFF_APPEND);
	assert_int_equal(p->server_pool, 64);
	/* Each list's default, stated by the loader. */
	assert_int_equal(p->req_dflt, PX_ACT_DENY);
	assert_int_equal(p->req_dflt_status, 405);
	assert_int_equal(p->url_dflt, PX_ACT_ACCEPT);
	assert_true(p->merge_slashes);
	assert_int_equal(p->reqh_dflt, HTTP_ACCEPT);
	assert_int_equal(p->resph_dflt, HTTP_ACCEPT);
	assert_int_equal(p->upgrade_dflt, PX_ACT_DENY);
	/* No <request>: the built-in methods pass on any port, nothing else. */
	for (i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		assert_int_equal(check(p, builtin[i], 80, "h", "/", &why), 0);
	/* CONNECT to 443 (only forward mode takes CONNECT at all). */
	assert_int_equal(check(p, "CONNECT", 443, "h", "h:443", &why), 0);
	assert_int_equal(check(p, "CONNECT", 22, "h", "h:22", &why), 405);
	assert_string_equal(why, "method not allowed by default policy");
	assert_int_equal(check(p, "TRACE", 80, "h", "/", &why), 405);
	assert_int_equal(check(p, "GETX", 80, "h", "/", &why), 405);
	/* No <upgrade>: no protocol. */
	assert_false(upgrade(p, "websocket"));
	http_policy_free(p);
}

/* h2, h2c and <h2>: off and 100/1m/32k by default; the ALPN list offered
 * to clients follows h2; out-of-range values are refused. */
static void
test_h2(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct http_policy *p;

	(void)state;
	p = httpt_load("<http/>", &e);
	assert_non_null(p);
	assert_false(p->h2 || p->h2c);
	assert_int_equal(p->h2_max_streams, 100);
	assert_int_equal(p->h2_window, 1024 * 1024);
	assert_int_equal(p->h2_max_header_list, 32768);
	assert_string_equal(http_policy_client_alpn(p), "http/1.1,http/1.0");
	http_policy_free(p);
	p = httpt_load("<http h2=\"yes\" h2c=\"yes\"><h2 "
	    "max-concurrent-streams=\"7\" initial-window=\"64k\" "
	    "max-header-list=\"4k\"/></http>", &e);
	assert_non_null(p);
	assert_true(p->h2 && p->h2c);
	assert_int_equal(p->h2_max_streams, 7);
	assert_int_equal(p->h2_window, 65536);
	assert_int_equal(p->h2_max_header_list, 4096);
	assert_string_equal(http_policy_client_alpn(p), "h2,http/1.1,http/1.0");
	http_policy_free(p);
	assert_null(httpt_load("<http><h2 max-concurrent-streams=\"0\"/></http>",
	    &e));
	assert_null(httpt_load("<http><h2 initial-window=\"4g\"/></http>", &e));
	assert_null(httpt_load("<http><h2/><h2/></http>", &e));
}

static void
test_request_url(void **state)
{
	struct px_cfgerr e;
	struct http_policy *p;
	const char *why;

	(void)state;
	p = httpt_load("<http>\n"
	    "  <request method=\"GET HEAD\" action=\"accept\"/>\n"
	    "  <request method=\"CONNECT\" ports=\"443 8443\" action=\"accept\"/>\n"
	    "  <request method=\"CONNECT\" action=\"deny\" status=\"403\"/>\n"
	    "  <request method=\"TRACE\" action=\"abort\"/>\n"
	    "  <request method=\"GET POST\" action=\"deny\"/>\n"
	    "  <url host=\"*.example.test\" path=\"/admin/*\" action=\"deny\"/>\n"
	    "  <url path=\"/admin/ok\" action=\"accept\"/>\n"
	    "  <url path=\"/admin/*\" action=\"deny\" status=\"451\"/>\n"
	    "  <url host=\"evil.test\" action=\"abort\"/>\n"
	    "</http>\n", &e);
	assert_non_null(p);
	/* First match decides: GET is accepted by the first rule, not
	 * denied by the fifth; POST only by the fifth (status 405). */
	assert_int_equal(check(p, "GET", 80, "h", "/", &why), 0);
	assert_int_equal(check(p, "POST", 80, "h", "/", &why), 405);
	assert_string_equal(why, "method denied by policy");
	/* Ports: a rule with ports matches only those. */
	assert_int_equal(check(p, "CONNECT", 8443, "h", "h:8443", &why), 0);
	assert_int_equal(check(p, "CONNECT", 22, "h", "h:22", &why), 403);
	assert_int_equal(check(p, "TRACE", 80, "h", "/", &why), -1);
	/* What the rules leave (no catch-all), the built-in list decides:
	 * PUT is accepted, PROPFIND gets the list's default, 405. */
	assert_int_equal(check(p, "PUT", 80, "h", "/", &why), 0);
	assert_int_equal(check(p, "PROPFIND", 80, "h", "/", &why), 405);
	assert_string_equal(why, "method not allowed by default policy");
	/* url: host and path both, the host without case; first match. */
	assert_int_equal(check(p, "GET", 80, "A.Example.TEST", "/admin/x",
	    &why), 403);
	assert_string_equal(why, "URL denied by policy");
	assert_int_equal(check(p, "GET", 80, "other", "/admin/ok", &why), 0);
	assert_int_equal(check(p, "GET", 80, "other", "/admin/x", &why), 451);
	assert_int_equal(check(p, "GET", 80, "evil.test", "/", &why), -1);
	/* The url list's default: accepted. */
	assert_int_equal(check(p, "GET", 80, "other", "/public", &why), 0);
	assert_null(why);
	http_policy_free(p);
}

/* url rules on canonical paths (as http_target_canon makes them): a path
 * pattern never sees the query (issue 35: "*.php" was passed by any
 * query); query= does; patterns are written as canonical paths are. */
static void
test_url_path_query(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct http_policy *p;
	const char *why;

	(void)state;
	p = httpt_load("<http>\n"
	    "  <url path=\"/search\" query=\"*debug=*\" action=\"deny\"/>\n"
	    "  <url path=\"*.php\" action=\"deny\"/>\n"
	    "  <url path=\"/%7euser/%c3%a9/*\" action=\"deny\"/>\n"
	    "  <url query=\"\" path=\"/empty\" action=\"deny\"/>\n"
	    "</http>\n", &e);
	assert_non_null(p);
	/* the path alone: a query does not carry a path past a rule */
	assert_int_equal(pq(p, "/a.php", NULL, &why), 403);
	assert_int_equal(pq(p, "/a.php", "x=1", &why), 403);
	assert_int_equal(pq(p, "/a.php", "", &why), 403);
	assert_int_equal(pq(p, "/a.html", "f=a.php", &why), 0);
	/* query=: matched on the query, decoded (http_query_decode) */
	assert_int_equal(pq(p, "/search", "q=1&debug=1", &why), 403);
	assert_int_equal(pq(p, "/search", "q=1", &why), 0);
	assert_int_equal(pq(p, "/search", NULL, &why), 0);
	/* query="": a target without one (or with an empty one) */
	assert_int_equal(pq(p, "/empty", NULL, &why), 403);
	assert_int_equal(pq(p, "/empty", "", &why), 403);
	assert_int_equal(pq(p, "/empty", "a", &why), 0);
	/* the pattern made canonical at load: ~ decoded, hex upper case */
	assert_string_equal(p->url[2].path, "/~user/%C3%A9/*");
	assert_int_equal(pq(p, "/~user/%C3%A9/x", NULL, &why), 403);
	http_policy_free(p);
	/* query= reads the query fully decoded, as the application does:
	 * a reserved character percent-encoded is the character, both in
	 * the query and in the pattern; '+' is a space */
	p = httpt_load("<http>\n"
	    "  <url path=\"/dl\" query=\"*file=../*\" action=\"deny\"/>\n"
	    "  <url path=\"/dl2\" query=\"*file=..%2F*\" action=\"deny\"/>\n"
	    "  <url path=\"/s\" query=\"*q=a b*\" action=\"deny\"/>\n"
	    "</http>\n", &e);
	assert_non_null(p);
	assert_true(p->url_query);
	assert_string_equal(p->url[1].query, "*file=../*");
	assert_int_equal(pq(p, "/dl", "file=../etc/passwd", &why), 403);
	assert_int_equal(pq(p, "/dl", "file=..%2Fetc%2Fpasswd", &why), 403);
	assert_int_equal(pq(p, "/dl", "file=%2E%2E%2Fetc", &why), 403);
	assert_int_equal(pq(p, "/dl2", "file=../etc/passwd", &why), 403);
	assert_int_equal(pq(p, "/dl2", "file=..%2Fetc", &why), 403);
	assert_int_equal(pq(p, "/dl", "file=a/b", &why), 0);
	assert_int_equal(pq(p, "/s", "q=a+b", &why), 403);
	assert_int_equal(pq(p, "/s", "q=a%20b", &why), 403);
	assert_int_equal(pq(p, "/s", "q=a%2Bb", &why), 0);
	/* a query that cannot be read as the application reads it */
	assert_int_equal(pq(p, "/x", "a=%zz", &why), 400);
	assert_string_equal(why, "invalid percent-encoding in query");
	assert_int_equal(pq(p, "/x", "a=%00", &why), 400);
	assert_string_equal(why, "NUL in query");
	/* long: decoded off the stack */
	{
		char q[3000];

		memset(q, 'a', sizeof(q) - 1);
		memcpy(q, "file=..%2F", 10);
		q[sizeof(q) - 1] = '\0';
		assert_int_equal(pq(p, "/dl", q, &why), 403);
		q[5] = 'x';
		assert_int_equal(pq(p, "/dl", q, &why), 0);
		q[20] = '%';
		q[21] = 'z';
		assert_int_equal(pq(p, "/dl", q, &why), 400);
	}
	http_policy_free(p);
	/* no query= rule: the query is not read, a bad one passes */
	p = httpt_load("<http><url path=\"/a\" action=\"deny\"/></http>", &e);
	assert_non_null(p);
	assert_false(p->url_query);
	assert_int_equal(pq(p, "/x", "a=%zz%00", &why), 0);
	http_policy_free(p);
	/* ";params": judged as nginx reads the path (params in the name)
	 * and as Tomcat does (params taken off); refused if either is */
	p = httpt_load("<http>\n"
	    "  <url path=\"/admin/*\" action=\"deny\"/>\n"
	    "  <url path=\"/files/*.txt\" action=\"accept\"/>\n"
	    "  <url path=\"*;jsessionid=*\" action=\"deny\" status=\"451\"/>\n"
	    "  <url path=\"/pub/*\" action=\"accept\"/>\n"
	    "  <url path=\"*\" action=\"deny\" status=\"404\"/>\n"
	    "</http>\n", &e);
	assert_non_null(p);
	assert_int_equal(pq(p, "/admin;x/y", NULL, &why), 403);
	assert_int_equal(pq(p, "/admin;/y", NULL, &why), 403);
	assert_int_equal(pq(p, "/admin/y;x", NULL, &why), 403);
	assert_int_equal(pq(p, "/files/a.txt", NULL, &why), 0);
	/* Tomcat's /files/secret.jsp: not a .txt */
	assert_int_equal(pq(p, "/files/secret.jsp;.txt", NULL, &why), 404);
	assert_int_equal(pq(p, "/pub/a;jsessionid=1", NULL, &why), 451);
	assert_int_equal(pq(p, "/pub/a;b", NULL, &why), 0);
	/* accepted as /pub/a, but as nginx reads it not under /pub/ */
	assert_int_equal(pq(p, "/pub;v=1/a", NULL, &why), 404);
	assert_int_equal(pq(p, "/pub;/../admin", NULL, &why), 404);
	/* long: off the stack */
	{
		char t[3000];

		memset(t, 'a', sizeof(t) - 1);
		memcpy(t, "/admin;", 7);
		t[7 + 1000] = '/';
		t[sizeof(t) - 1] = '\0';
		assert_int_equal(pq(p, t, NULL, &why), 403);
		t[1] = 'b';
		assert_int_equal(pq(p, t, NULL, &why), 404);
	}
	http_policy_free(p);
	/* merge-slashes="no": "//" may be in a pattern */
	p = httpt_load("<http merge-slashes=\"no\">"
	    "<url path=\"//admin/*\" action=\"deny\"/></http>", &e);
	assert_non_null(p);
	assert_false(p->merge_slashes);
	assert_int_equal(pq(p, "//admin/x", NULL, &why), 403);
	assert_int_equal(pq(p, "/admin/x", NULL, &why), 0);
	http_policy_free(p);
}

/* A 405's Allow (RFC 9110 15.5.6): the methods the rules accept on the
 * port, each once, in rule order then the built-in list's. */
static void
test_allow(void **state)
{
	struct px_cfgerr e = { .file = "t.xml" };
	struct http_policy *p;
	char allow[256], tiny[12];
	void *pol = NULL;

	(void)state;
	assert_int_equal(http_policy_load(NULL, &pol, &e), 0);
	http_policy_allow(pol, 80, true, allow, sizeof(allow));
	assert_string_equal(allow, "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH");
	/* CONNECT where the rules take it, and only when it can be */
	http_policy_allow(pol, 443, true, allow, sizeof(allow));
	assert_string_equal(allow, "GET, HEAD, POST, PUT, DELETE, OPTIONS, "
	    "PATCH, CONNECT");
	http_policy_allow(pol, 443, false, allow, sizeof(allow));
	assert_string_equal(allow, "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH");
	/* cut at a method's end */
	http_policy_allow(pol, 80, true, tiny, sizeof(tiny));
	assert_string_equal(tiny, "GET, HEAD");
	http_policy_free(pol);

	p = httpt_load("<http>\n"
	    "  <request method=\"DELETE PUT\" action=\"deny\"/>\n"
	    "  <request method=\"PROPFIND get\" action=\"accept\"/>\n"
	    "  <request method=\"MKCOL\" ports=\"8080\" action=\"accept\"/>\n"
	    "  <request method=\"TRACE\" action=\"abort\"/>\n"
	    "</http>\n", &e);
	assert_non_null(p);
	http_policy_allow(p, 80, false, allow, sizeof(allow));
	assert_string_equal(allow, "PROPFIND, get, HEAD, POST, OPTIONS, PATCH");
	http_policy_allow(p, 8080, false, allow, sizeof(allow));
	assert_string_equal(allow, "PROPFIND, get, MKCOL, HEAD, POST, OPTIONS, "
	    "PATCH");
	http_policy_free(p);
	/* nothing allowed: an empty Allow */
	p = httpt_load("<http><request method=\"*\" action=\"deny\"/></http>",
	    &e);
	assert_non_null(p);
	http_policy_allow(p, 80, true, allow, sizeof(allow));
	assert_string_equal(allow, "");
	http_policy_free(p);
}

static void
test_upgrade(void **state)
{
	struct px_cfgerr e;
	struct http_policy *p;

	(void)state;
	p = httpt_load("<http><upgrade protocols=\"websocket h2c\" "
	    "action=\"accept\"/></http>", &e);
	assert_non_null(p);
	assert_true(upgrade(p, "websocket"));
	assert_true(upgrade(p, "WebSocket/13"));
	assert_true(upgrade(p, "h2c, websocket"));
	/* Only the first protocol the client asks for counts. */
	assert_false(upgrade(p, "foo, websocket"));
	assert_false(upgrade(p, "websockets"));
	assert_false(upgrade(p, ""));
	/* Bounded by the field's length, not by a NUL. */
	assert_true(http_policy_upgrade(p, "h2cxyz", 3));
	http_policy_free(p);
	/* A later <upgrade> replaces the list; deny leaves none. */
	p = httpt_load("<http><upgrade protocols=\"websocket\" action=\"accept\"/>"
	    "<upgrade protocols=\"h2c\" action=\"accept\"/></http>", &e);
	assert_non_null(p);
	assert_false(upgrade(p, "websocket"));
	assert_true(upgrade(p, "h2c"));
	http_policy_free(p);
	p = httpt_load("<http><upgrade protocols=\"websocket\" action=\"deny\"/>"
	    "</http>", &e);
	assert_non_null(p);
	assert_false(upgrade(p, "websocket"));
	http_policy_free(p);
}

static void
test_headers_choices(void **state)
{
	static const struct {
		const char *v;
		enum http_xff xff;
	} xffs[] = {
		{ "no", HTTP_XFF_NO }, { "append", HTTP_XFF_APPEND },
		{ "replace", HTTP_XFF_REPLACE },
	};
	struct px_cfgerr e;
	struct http_policy *p;
	char xml[128];
	size_t i;

	(void)state;
	p = httpt_load("<http>"
	    "<request-header name=\"A\" action=\"accept\"/>"
	    "<request-header name=\"B\" action=\"drop\"/>"
	    "<request-header name=\"C\" action=\"change\" value=\"c\"/>"
	    "<response-header name=\"D\" action=\"insert\" value=\"d\"/>"
	    "</http>", &e);
	assert_non_null(p);
	assert_int_equal(p->nreqh, 3);
	assert_int_equal(p->reqh[0].action, HTTP_ACCEPT);
	assert_int_equal(p->reqh[1].action, HTTP_DROP);
	assert_int_equal(p->reqh[2].action, HTTP_CHANGE);
	assert_string_equal(p->reqh[2].value, "c");
	assert_int_equal(p->nresph, 1);
	assert_int_equal(p->resph[0].action, HTTP_INSERT);
	assert_string_equal(p->resph[0].name, "D");
	http_policy_free(p);
	for (i = 0; i < sizeof(xffs) / sizeof(xffs[0]); i++) {
		snprintf(xml, sizeof(xml), "<http x-forwarded-for=\"%s\"/>",
		    xffs[i].v);
		assert_non_null(p = httpt_load(xml, &e));
		assert_int_equal(p->xff, xffs[i].xff);
		http_policy_free(p);
	}
}

/* underscore-headers, trailers, transfer-codings: defaults, values, and
 * which Transfer-Encoding lists pass. */
static void
test_framing_choices(void **state)
{
	static const char *const codings[] = { "gzip", "x-y" };
	struct px_cfgerr e;
	struct http_policy *p;
	struct http_head m;
	size_t scanned = 0;
	ssize_t end;
	const char *why, *req = "POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: GZIP, x-y\r\nTransfer-Encoding: chunked\r\n\r\n";
	const struct http_limits lim = { .max_line = 1024,
	    .max_header_lines = 32, .max_header_bytes = 4096, .max_url = 512 };

	(void)state;
	end = http_head_end(req, strlen(req), 4096, &scanned);
	assert_true(end > 0);
	assert_int_equal(http_parse_head(req, (size_t)end, true, &lim, &m, &why),
	    0);
	assert_non_null(p = httpt_load("<http/>", &e));
	assert_false(p->underscore_pass);
	assert_false(p->trailers_pass);
	assert_int_equal(p->codings.n, 0);
	assert_false(http_policy_codings(p, &m));
	http_policy_free(p);
	assert_non_null(p = httpt_load("<http underscore-headers=\"pass\" "
	    "trailers=\"pass\" transfer-codings=\"gzip x-y\"/>", &e));
	assert_true(p->underscore_pass);
	assert_true(p->trailers_pass);
	assert_int_equal(p->codings.n, 2);
	assert_string_equal(p->codings.w[0], codings[0]);
	assert_string_equal(p->codings.w[1], codings[1]);
	assert_true(http_policy_codings(p, &m));
	http_policy_free(p);
	assert_non_null(p = httpt_load("<http transfer-codings=\"gzip\"/>", &e));
	assert_false(http_policy_codings(p, &m));
	http_policy_free(p);
	assert_non_null(p = httpt_load("<http underscore-headers=\"drop\" "
	    "trailers=\"drop\"/>", &e));
	assert_false(p->underscore_pass || p->trailers_pass);
	http_policy_free(p);
}

static void
test_errors(void **state)
{
	static const struct {
		const char *xml;
		const char *what;
	} cases[] = {
		{ "<http>\n<request method=\"GET\" action=\"maybe\"/></http>",
		  "t.xml:2: action=\"maybe\": expected accept, deny or abort" },
		{ "<http><request method=\"GET\" action=\"drop\"/></http>",
		  "action=\"drop\": expected accept, deny or abort" },
		{ "<http><request method=\"GET\"/></http>",
		  "<request> needs action= (accept, deny or abort)" },
		{ "<http><url path=\"/\" action=\"insert\"/></http>",
		  "action=\"insert\": expected accept, deny or abort" },
		{ "<http><upgrade protocols=\"websocket\" action=\"abort\"/></http>",
		  "action=\"abort\": expected accept or deny" },
		{ "<http><upgrade protocols=\"websocket\"/></http>",
		  "<upgrade> needs action= (accept or deny)" },
		{ "<http><request-header name=\"X\" action=\"deny\"/></http>",
		  "action=\"deny\": expected accept, drop, change or insert" },
		{ "<http><response-header name=\"X\"/></http>",
		  "<response-header> needs action= (accept, drop, change or "
		  "insert)" },
		{ "<http><request-header name=\"X\" action=\"change\"/></http>",
		  "action=\"change\" needs value=\"...\"" },
		{ "<http><request-header name=\"X Y\" action=\"drop\"/></http>",
		  "name=\"X Y\": not a header name" },
		{ "<http x-forwarded-for=\"maybe\"/>",
		  "x-forwarded-for=\"maybe\": expected no, append or replace" },
		{ "<http underscore-headers=\"yes\"/>",
		  "underscore-headers=\"yes\": expected drop or pass" },
		{ "<http trailers=\"keep\"/>",
		  "trailers=\"keep\": expected drop or pass" },
		{ "<http transfer-codings=\"gzip chunked\"/>",
		  "transfer-codings: \"chunked\": name the codings other than "
		  "chunked" },
		{ "<http transfer-codings=\"*\"/>",
		  "transfer-codings: \"*\": name the codings other than chunked" },
		{ "<http transfer-codings=\"g(z)\"/>",
		  "transfer-codings: \"g(z)\": not a coding name" },
		{ "<http transfer-codings=\"\"/>",
		  "transfer-codings=\"\": empty list" },
		{ "<http><request method=\"GET\" action=\"deny\" status=\"200\"/>"
		  "</http>", "status" },
		{ "<http><request method=\"GET\" ports=\"0\" action=\"accept\"/>"
		  "</http>", "ports: \"0\"" },
		{ "<http><url action=\"deny\"/></http>",
		  "<url> needs host=\"...\", path=\"...\" or query=\"...\"" },
		{ "<http merge-slashes=\"maybe\"/>", "merge-slashes" },
		{ "<http><url query=\"%41%3D=%zz\" action=\"deny\"/></http>",
		  "query=\"%41%3D=%zz\": invalid percent-encoding in query" },
		{ "<http><url query=\"a=%00\" action=\"deny\"/></http>",
		  "NUL in query" },
		/* url paths no canonical path has: the rule would never
		 * apply */
		{ "<http><url path=\"/a%2fb\" action=\"deny\"/></http>",
		  "path=\"/a%2Fb\": never matches: a path with %2F is refused "
		  "(400)" },
		{ "<http><url path=\"/a%5C*\" action=\"deny\"/></http>",
		  "never matches: a path with %5C" },
		{ "<http><url path=\"*%00\" action=\"deny\"/></http>",
		  "never matches: a path with %00" },
		{ "<http><url path=\"/a\\\\b\" action=\"deny\"/></http>",
		  "never matches: a path with '\\'" },
		{ "<http><url path=\"*/../*\" action=\"deny\"/></http>",
		  "path=\"*/../*\": never matches: paths are judged with their "
		  "dot-segments removed" },
		{ "<http><url path=\"/a/%2e\" action=\"deny\"/></http>",
		  "path=\"/a/.\": never matches" },
		{ "<http><url path=\"/x/%2e%2E;*\" action=\"deny\"/></http>",
		  "path=\"/x/..;*\": never matches: a path with a dot-segment "
		  "with parameters is refused (400)" },
		{ "<http>\n<url path=\"//admin/*\" action=\"deny\"/></http>",
		  "t.xml:2: path=\"//admin/*\": never matches: with "
		  "merge-slashes=\"yes\" paths are judged with \"//\" as \"/\"" },
	};
	struct px_cfgerr e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_null(httpt_load(cases[i].xml, &e));
		if (strstr(e.first, cases[i].what) == NULL)
			fail_msg("%s: got \"%s\", want \"%s\"", cases[i].xml,
			    e.first, cases[i].what);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_section),
		cmocka_unit_test(test_request_url),
		cmocka_unit_test(test_url_path_query),
		cmocka_unit_test(test_allow),
		cmocka_unit_test(test_upgrade),
		cmocka_unit_test(test_headers_choices),
		cmocka_unit_test(test_framing_choices),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_h2),
		cmocka_unit_test(test_who),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
