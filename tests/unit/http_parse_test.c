/* Unit tests for plugins/http/http_parse.c: heads, framing headers, and
 * chunked bodies fed whole and byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "http/http_parse.h"

static const struct http_limits lim = {
	.max_line = 1024, .max_header_lines = 32, .max_header_bytes = 4096,
	.max_url = 512,
};
static struct http_head h;

static int
parse(const char *s, bool request, const char **why)
{
	size_t scanned = 0;
	ssize_t end = http_head_end(s, strlen(s), lim.max_header_bytes, &scanned);

	assert_true(end > 0);
	return http_parse_head(s, (size_t)end, request, &lim, &h, why);
}

static void
test_request_head(void **state)
{
	const char *why;

	(void)state;
	assert_int_equal(parse("POST /x?y HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 12\r\nConnection: keep-alive, Upgrade\r\n\r\n",
	    true, &why), 0);
	assert_int_equal(h.mlen, 4);
	assert_memory_equal(h.target, "/x?y", 4);
	assert_int_equal(h.content_length, 12);
	assert_true(h.conn_keep_alive && h.conn_upgrade && !h.conn_close);
	assert_int_equal(h.nhdr, 3);
	assert_int_equal(h.host, 0);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "gzip, chunked\r\n\r\n", true, &why), 0);
	assert_true(h.chunked && h.has_te);
	assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", true, &why), 0);
	assert_int_equal(h.minor, 0);
}

static void
test_request_refused(void **state)
{
	static const struct { const char *in; int st; const char *why; } c[] = {
		{ "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n", 400, "both" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
		  "Content-Length: 1\r\n\r\n", 400, "duplicate Content-Length" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400,
		  "malformed Content-Length" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip"
		  "\r\n\r\n", 400, "after chunked" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
		  400, "does not end in chunked" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400, "folding" },
		{ "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "before colon" },
		{ "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400, "bare CR" },
		{ "GET / HTTP/1.1\nHost: a\r\n\r\n", 400, "bare LF" },
		{ "GET / HTTP/1.1\r\n\r\n", 400, "missing Host" },
		{ "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "not supported" },
		{ "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
		  "HTTP/1.0" },
	};
	size_t i;
	const char *why;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		why = NULL;
		assert_int_equal(parse(c[i].in, true, &why), c[i].st);
		assert_non_null(why);
		assert_non_null(strstr(why, c[i].why));
	}
}

static void
test_response_head(void **state)
{
	const char *why;

	(void)state;
	assert_int_equal(parse("HTTP/1.1 204 No Content\r\nX: y\r\n\r\n", false,
	    &why), 0);
	assert_int_equal(h.status, 204);
	assert_int_equal(h.rlen, 10);
	assert_int_equal(parse("HTTP/1.1 200\r\n\r\n", false, &why), 0);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n"
	    "\r\n", false, &why), 502);
	assert_int_equal(parse("HTTP/1.1 2x0 OK\r\n\r\n", false, &why), 400);
}

static void
test_head_end_resumes(void **state)
{
	const char *s = "GET / HTTP/1.1\r\nHost: a\r\n\r\nrest";
	size_t n = strlen(s), have, scanned = 0;
	ssize_t end = 0;

	(void)state;
	for (have = 1; have <= n && end == 0; have++)
		end = http_head_end(s, have, 4096, &scanned);
	assert_int_equal(end, (ssize_t)(n - 4));
	scanned = 0;
	assert_int_equal(http_head_end(s, 10, 8, &scanned), -1);
}

/* Feeds s whole and byte by byte: both must agree. Returns consumed or -1. */
static ssize_t
chunks(const char *s, uint64_t *body)
{
	struct http_chunk a, b;
	const char *why;
	size_t n = strlen(s), i;
	ssize_t ka, kb = 0;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ka = http_chunk_feed(&a, s, n, &lim, &why);
	for (i = 0; i < n && b.state != HTTP_CHUNK_DONE; i++) {
		ssize_t k = http_chunk_feed(&b, s + i, 1, &lim, &why);

		if (k < 0) {
			kb = -1;
			break;
		}
		kb += k;
	}
	assert_int_equal(ka, kb);
	if (ka >= 0) {
		assert_int_equal(a.body, b.body);
		assert_int_equal(a.state, b.state);
		*body = a.body;
	}
	return ka;
}

static void
test_chunked(void **state)
{
	uint64_t body = 0;
	const char *ok = "5\r\nhello\r\n0\r\n\r\nNEXT";

	(void)state;
	assert_int_equal(chunks(ok, &body), (ssize_t)strlen(ok) - 4);
	assert_int_equal(body, 5);
	assert_int_equal(chunks("a;foo=bar\r\n0123456789\r\n0\r\nT: v\r\n\r\n",
	    &body), 34);
	assert_int_equal(chunks("5;a=\"q \\\"x\\\"; y\";b;c=d\r\nhello\r\n0\r\n\r\n",
	    &body) > 0, 1);
	assert_int_equal(chunks("FFFFFFFFFFFFFFF\r\n", &body), 17);
	assert_int_equal(chunks("1FFFFFFFFFFFFFFF\r\n", &body), -1);
	assert_int_equal(chunks("5x\r\nhello\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("5 \r\nhello\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("3\r\nhello\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("5\nhello\r\n0\r\n\r\n", &body), -1);
	/* extensions: a name must follow ';', a quoted string must close */
	assert_int_equal(chunks("2;\r\naa\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("2;a=\r\naa\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("2;a=\"b\r\naa\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("2;a=\"b\"c\r\naa\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("2;a b\r\naa\r\n0\r\n\r\n", &body), -1);
	assert_int_equal(chunks("0\r\nbad trailer\r\n\r\n", &body), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_head),
		cmocka_unit_test(test_request_refused),
		cmocka_unit_test(test_response_head),
		cmocka_unit_test(test_head_end_resumes),
		cmocka_unit_test(test_chunked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
