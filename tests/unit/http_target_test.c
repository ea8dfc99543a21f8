/* Unit tests for plugins/http/http_parse.c's request targets:
 * http_target_canon (paths made canonical as an origin reads them, a table,
 * then random targets against a plain reading of RFC 3986) and
 * http_query_decode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_parse.h"

/* http_target_canon on s; *path and *query (NULL: none) point into a
 * static buffer. */
static int
canon(const char *s, bool merge, const char **path, const char **query,
    const char **why)
{
	static char buf[4096];
	struct http_target t;
	int rc;

	*why = NULL;
	rc = http_target_canon(s, strlen(s), merge, buf, sizeof(buf), &t, why);
	*path = t.path;
	*query = t.query;
	if (rc == 0) {
		/* what is sent on: the query as sent */
		const char *q = strchr(s, '?');

		assert_non_null(t.path);
		assert_int_equal(t.plen, strlen(t.path));
		if (q == NULL)
			assert_null(t.sent_query);
		else {
			assert_ptr_equal(t.sent_query, q + 1);
			assert_int_equal(t.sent_qlen, strlen(q + 1));
		}
	}
	return rc;
}

/* Paths as an origin like nginx reads them: unreserved characters
 * decoded, other percent-encodings in upper case, dot segments (encoded
 * too) removed, "//" merged (or not); what no server reads one way is
 * refused. */
static void
test_target_canon(void **state)
{
	static const struct {
		const char *in;
		bool merge;
		const char *path, *query, *why;
	} c[] = {
		{ "/", true, "/", NULL, NULL },
		{ "*", true, "*", NULL, NULL },
		{ "/admin/", true, "/admin/", NULL, NULL },
		/* the three spellings of issue 35 */
		{ "/%61dmin/", true, "/admin/", NULL, NULL },
		{ "/x/../admin/", true, "/admin/", NULL, NULL },
		{ "//admin/", true, "/admin/", NULL, NULL },
		{ "//admin/", false, "//admin/", NULL, NULL },
		{ "/%7e%7Euser/%41%5a%30-%2D._%5f", true, "/~~user/AZ0--.__",
		    NULL, NULL },
		/* reserved and other bytes stay encoded, in upper case */
		{ "/a%3fb%3Bc%c3%a9%20%25", true, "/a%3Fb%3Bc%C3%A9%20%25", NULL,
		    NULL },
		{ "/a/./b/../c", true, "/a/c", NULL, NULL },
		{ "/a/b/..", true, "/a/", NULL, NULL },
		{ "/a/b/.", true, "/a/b/", NULL, NULL },
		{ "/.", true, "/", NULL, NULL },
		{ "/a/..", true, "/", NULL, NULL },
		{ "/a/%2e%2E/b", true, "/b", NULL, NULL },
		{ "/a/.%2e/b", true, "/b", NULL, NULL },
		{ "/a/%2e/b", true, "/a/b", NULL, NULL },
		{ "/a/.../b", true, "/a/.../b", NULL, NULL },
		{ "/a/..b/.c", true, "/a/..b/.c", NULL, NULL },
		{ "/a//../b", true, "/b", NULL, NULL },
		{ "/a//../b", false, "/a/b", NULL, NULL },
		{ "/a///b//", true, "/a/b/", NULL, NULL },
		{ "/a///b//", false, "/a///b//", NULL, NULL },
		{ "//..", false, "/", NULL, NULL },
		{ "/a/b/../../c/", true, "/c/", NULL, NULL },
		/* the query: apart, kept as sent (query= decodes it) */
		{ "/a.php?x=1", true, "/a.php", "x=1", NULL },
		{ "/a?", true, "/a", "", NULL },
		{ "/a/../b?c=/../%2f%61%zz%", true, "/b", "c=/../%2f%61%zz%",
		    NULL },
		/* not rewritten: "%%61D" made "%aD" would decode */
		{ "/?a=%%61D%7e", true, "/", "a=%%61D%7e", NULL },
		{ "/a?b?c", true, "/a", "b?c", NULL },
		{ "?q=1", true, "/", "q=1", NULL },
		/* refused */
		{ "/a#f", true, NULL, NULL, "fragment in request target" },
		{ "/a?x#f", true, NULL, NULL, "fragment in request target" },
		{ "/a%2fb", true, NULL, NULL, "encoded slash in path" },
		{ "/a%2Fb", false, NULL, NULL, "encoded slash in path" },
		{ "/a\\b", true, NULL, NULL, "backslash in path" },
		{ "/a%5cb", true, NULL, NULL, "backslash in path" },
		{ "/a%00", true, NULL, NULL, "NUL in path" },
		{ "/a%", true, NULL, NULL, "invalid percent-encoding in path" },
		{ "/a%4", true, NULL, NULL, "invalid percent-encoding in path" },
		{ "/a%4?g", true, NULL, NULL, "invalid percent-encoding in path" },
		{ "/a%g1", true, NULL, NULL, "invalid percent-encoding in path" },
		{ "/..", true, NULL, NULL, "dot-segment above the root" },
		{ "/../a", true, NULL, NULL, "dot-segment above the root" },
		{ "/a/../../b", true, NULL, NULL, "dot-segment above the root" },
		{ "/%2e%2e/admin/", true, NULL, NULL,
		    "dot-segment above the root" },
		{ "//..", true, NULL, NULL, "dot-segment above the root" },
		/* ";params": a dot-segment to Tomcat, Jetty, Spring */
		{ "/x/..;/admin/y", true, NULL, NULL,
		    "dot-segment with parameters" },
		{ "/x/.;a=b/y", true, NULL, NULL, "dot-segment with parameters" },
		{ "/x/%2e%2E;/admin", true, NULL, NULL,
		    "dot-segment with parameters" },
		{ "/x/.%2e;j=1", true, NULL, NULL,
		    "dot-segment with parameters" },
		{ "/x/..;", true, NULL, NULL, "dot-segment with parameters" },
		{ "/x/...;/y", true, "/x/...;/y", NULL, NULL },
		{ "/x/a..;/y", true, "/x/a..;/y", NULL, NULL },
		{ "/x/;../y", true, "/x/;../y", NULL, NULL },
		{ "/x/..%3B/y", true, "/x/..%3B/y", NULL, NULL },
		{ "/admin;x/y", true, "/admin;x/y", NULL, NULL },
		{ "a/b", true, NULL, NULL, "request target is not in origin form" },
		{ "", true, NULL, NULL, "request target is not in origin form" },
	};
	const char *path, *query, *why;
	size_t i;
	int rc;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		rc = canon(c[i].in, c[i].merge, &path, &query, &why);
		if (c[i].why != NULL) {
			if (rc != 400 || why == NULL || strcmp(why, c[i].why) != 0)
				fail_msg("\"%s\": %d \"%s\", not 400 \"%s\"",
				    c[i].in, rc, why ? why : "", c[i].why);
			continue;
		}
		if (rc != 0)
			fail_msg("\"%s\": refused %d \"%s\"", c[i].in, rc, why);
		if (strcmp(path, c[i].path) != 0)
			fail_msg("\"%s\": path \"%s\", not \"%s\"", c[i].in, path,
			    c[i].path);
		if ((query == NULL) != (c[i].query == NULL) || (query != NULL &&
		    strcmp(query, c[i].query) != 0))
			fail_msg("\"%s\": query \"%s\", not \"%s\"", c[i].in,
			    query ? query : "(none)", c[i].query ? c[i].query :
			    "(none)");
	}
	/* buf too small for what it may have to hold (tlen + 3): refused,
	 * never written past */
	{
		char small[7];
		struct http_target t;

		assert_int_equal(http_target_canon("/abcd", 5, true, small,
		    sizeof(small), &t, &why), 414);
		assert_int_equal(http_target_canon("/abc?", 5, true, small,
		    sizeof(small), &t, &why), 414);
		assert_int_equal(http_target_canon("?abc", 4, true, small,
		    sizeof(small), &t, &why), 0);
		assert_string_equal(t.path, "/");
		assert_string_equal(t.query, "abc");
	}
}

/* The query as applications read it: every %XX decoded (reserved
 * characters too: "%2F" is the '/' the application sees), '+' a space;
 * what cannot be read so refused. */
static void
test_query_decode(void **state)
{
	static const struct {
		const char *in, *out, *why;
	} c[] = {
		{ "", "", NULL },
		{ "file=../etc", "file=../etc", NULL },
		{ "file=..%2Fetc%2fpasswd", "file=../etc/passwd", NULL },
		{ "q=%3Cscript%3E%27%22", "q=<script>'\"", NULL },
		{ "a+b=%2B%20", "a b=+ ", NULL },
		{ "%25%32%46", "%2F", NULL },
		{ "%c3%A9", "\xc3\xa9", NULL },
		{ "a=%", NULL, "invalid percent-encoding in query" },
		{ "a=%4", NULL, "invalid percent-encoding in query" },
		{ "a=%g1&b", NULL, "invalid percent-encoding in query" },
		{ "a=%00", NULL, "NUL in query" },
		/* a stray '%' before "%61": never read as "%a..." */
		{ "a=%%61D", NULL, "invalid percent-encoding in query" },
	};
	char buf[64], inplace[64];
	const char *why;
	size_t i, len;
	int rc;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		why = NULL;
		rc = http_query_decode(c[i].in, strlen(c[i].in), buf, &len,
		    &why);
		if (c[i].why != NULL) {
			if (rc != 400 || why == NULL || strcmp(why, c[i].why) != 0)
				fail_msg("\"%s\": %d \"%s\", not 400 \"%s\"",
				    c[i].in, rc, why ? why : "", c[i].why);
			continue;
		}
		if (rc != 0 || strcmp(buf, c[i].out) != 0 ||
		    len != strlen(c[i].out))
			fail_msg("\"%s\": %d \"%s\", not \"%s\"", c[i].in, rc,
			    rc == 0 ? buf : why, c[i].out);
		/* decoded in place */
		snprintf(inplace, sizeof(inplace), "%s", c[i].in);
		assert_int_equal(http_query_decode(inplace, strlen(inplace),
		    inplace, &len, &why), 0);
		assert_string_equal(inplace, c[i].out);
	}
}

/* A second reading of the rules, the plain way RFC 3986 writes them:
 * decode, merge, then 5.2.4's remove_dot_segments on strings, where a
 * ".." with nothing left to remove is above the root. 0 or 400. */
static int
ref_canon(const char *t, bool merge, char *path, char *query)
{
	static const char hex[] = "0123456789ABCDEF";
	char dec[1024], in[1024], out[1024];
	const char *q = strchr(t, '?');
	size_t plen = q != NULL ? (size_t)(q - t) : strlen(t), i, n = 0, o;

	if (strchr(t, '#') != NULL)
		return 400;
	if (strcmp(t, "*") == 0) {
		strcpy(path, "*");
		return 0;
	}
	if (t[0] != '/' && t[0] != '?')
		return 400;
	if (t[0] == '?')
		dec[n++] = '/';
	for (i = 0; i < plen; i++) {
		unsigned v;

		if (t[i] == '\\')
			return 400;
		if (t[i] != '%') {
			dec[n++] = t[i];
			continue;
		}
		if (i + 2 >= plen || !isxdigit((unsigned char)t[i + 1]) ||
		    !isxdigit((unsigned char)t[i + 2]) ||
		    sscanf(t + i + 1, "%2x", &v) != 1)
			return 400;
		if (v == '/' || v == '\\' || v == 0)
			return 400;
		if (isalnum((int)v) || (v != 0 &&
		    strchr("-._~", (int)v) != NULL))
			dec[n++] = (char)v;
		else {
			dec[n++] = '%';
			dec[n++] = hex[v >> 4];
			dec[n++] = hex[v & 15];
		}
		i += 2;
	}
	dec[n] = '\0';
	for (i = 0, n = 0; dec[i] != '\0'; i++)
		if (!merge || dec[i] != '/' || n == 0 || in[n - 1] != '/')
			in[n++] = dec[i];
	in[n] = '\0';
	/* a "." or ".." segment with ";params" */
	for (i = 0; in[i] != '\0'; i++)
		if (in[i] == '/' && (strncmp(in + i, "/.;", 3) == 0 ||
		    strncmp(in + i, "/..;", 4) == 0))
			return 400;
	/* RFC 3986 5.2.4 (A and D never apply: in starts with '/') */
	o = 0;
	i = 0;
	while (in[i] != '\0') {
		const char *p = in + i;

		if (strncmp(p, "/./", 3) == 0)
			i += 2;
		else if (strcmp(p, "/.") == 0) {
			i += 1;
			in[i] = '/';
		} else if (strncmp(p, "/../", 4) == 0 || strcmp(p, "/..") == 0) {
			if (o == 0)
				return 400;
			while (o > 0 && out[--o] != '/')
				;
			if (p[3] == '/')
				i += 3;
			else {
				i += 2;
				in[i] = '/';
			}
		} else {
			do
				out[o++] = in[i++];
			while (in[i] != '\0' && in[i] != '/');
		}
	}
	out[o] = '\0';
	strcpy(path, o == 0 ? "/" : out);
	if (q != NULL)
		strcpy(query, q + 1);
	return 0;
}

/* Random targets of the pieces that matter (dots, slashes, encodings of
 * both kinds and cases, bad ones, '?', '#'): the canonicaliser and the
 * plain reading agree on every one, merged or not; a canonical path is
 * its own canonical form and has no "//" (merged), no dot segment, no
 * encoded unreserved character and no lower-case hex. */
static void
test_target_canon_random(void **state)
{
	static const char *const piece[] = {
		"/", "/", "/", ".", "..", "a", "b", "%2e", "%2E", "%61", "%7e",
		"%41", "%2f", "%5C", "%00", "%", "%z1", "%c3%a9", "%3F", "\\",
		"?", "#", "=", "x", "..", ".", "/", "%2e%2e", ".%2e", "~",
		";", ";x=1", "..;", "%3B",
	};
	char t[512], ref_path[1024], ref_query[1024], again[1024];
	unsigned i, k, ok = 0, refused = 0;

	(void)state;
	srand(35);
	for (i = 0; i < 20000; i++) {
		bool merge = i % 2 == 0;
		const char *path, *query, *why;
		size_t n = 0;
		int rc, ref;

		t[n++] = i % 17 == 0 ? '?' : '/';
		for (k = (unsigned)rand() % 12; k > 0; k--) {
			const char *p = piece[(unsigned)rand() %
			    (sizeof(piece) / sizeof(piece[0]))];

			n += (size_t)snprintf(t + n, sizeof(t) - n, "%s", p);
		}
		t[n] = '\0';
		ref_query[0] = '\0';
		ref = ref_canon(t, merge, ref_path, ref_query);
		rc = canon(t, merge, &path, &query, &why);
		if (rc != ref)
			fail_msg("\"%s\" (merge %d): %d \"%s\", reference %d", t,
			    merge, rc, why ? why : "", ref);
		if (rc != 0) {
			refused++;
			continue;
		}
		ok++;
		if (strcmp(path, ref_path) != 0 || (query != NULL &&
		    strcmp(query, ref_query) != 0))
			fail_msg("\"%s\" (merge %d): \"%s\" ? \"%s\", reference "
			    "\"%s\" ? \"%s\"", t, merge, path, query ? query : "",
			    ref_path, ref_query);
		if ((merge && strstr(path, "//") != NULL) ||
		    strstr(path, "/./") != NULL || strstr(path, "/../") != NULL)
			fail_msg("\"%s\": \"%s\" is not canonical", t, path);
		for (k = 0; path[k] != '\0'; k++)
			if (path[k] == '%' && (islower((unsigned char)path[k + 1]) ||
			    islower((unsigned char)path[k + 2]) ||
			    http_is_unreserved((unsigned char)strtoul((char[]){
			    path[k + 1], path[k + 2], '\0' }, NULL, 16))))
				fail_msg("\"%s\": \"%s\" has a needless or "
				    "lower-case %%", t, path);
		snprintf(again, sizeof(again), "%s", path);
		if (canon(again, merge, &path, &query, &why) != 0 ||
		    strcmp(path, again) != 0)
			fail_msg("\"%s\": \"%s\" canonical again is \"%s\"", t,
			    again, path);
	}
	fprintf(stderr, "%u of 20000 canonical, %u refused\n", ok, refused);
	assert_true(ok > 2000);
	assert_true(refused > 2000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target_canon),
		cmocka_unit_test(test_query_decode),
		cmocka_unit_test(test_target_canon_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
