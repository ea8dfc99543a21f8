/* Unit tests for plugins/http/http_parse.c: heads, framing headers, and
 * chunked bodies fed whole and byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
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

/* RFC 9112 2.2: one CRLF before a request line is skipped, not two; a
 * response gets no such leniency. */
static void
test_leading_empty_line(void **state)
{
	const char *why;

	(void)state;
	assert_int_equal(parse("\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\n", true,
	    &why), 0);
	assert_true(h.empty_line);
	assert_memory_equal(h.target, "/a", 2);
	assert_int_equal(h.nhdr, 1);
	why = NULL;
	assert_int_equal(parse("\r\n\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\n",
	    true, &why), 400);
	assert_string_equal(why, "empty first line");
	assert_int_equal(parse("\r\nHTTP/1.1 200 OK\r\n\r\n", false, &why),
	    400);
	assert_int_equal(parse("GET /a HTTP/1.1\r\nHost: a\r\n\r\n", true,
	    &why), 0);
	assert_false(h.empty_line);
}

/* Names that read as framing or hop-by-hop fields with '_' for '-' are
 * refused; other names with '_' are flagged for the writer. */
static void
test_underscore_names(void **state)
{
	static const char *const bad[] = { "Content_Length: 5",
	    "transfer_encoding: chunked", "KEEP_ALIVE: 1", "Proxy_Connection: x",
	    "proxy_authorization: x", "Content-Length_: 5" };
	char buf[256];
	const char *why;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: a\r\n%s\r\n"
		    "\r\n", bad[i]);
		why = NULL;
		if (strcmp(bad[i], "Content-Length_: 5") == 0) {
			/* not a framing name once read: only flagged */
			assert_int_equal(parse(buf, true, &why), 0);
			assert_true(h.underscore);
			continue;
		}
		assert_int_equal(parse(buf, true, &why), 400);
		assert_string_equal(why, "'_' in a framing header name");
	}
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked"
	    "\r\n\r\n", false, &why), 400);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: b"
	    "\r\n\r\n", true, &why), 0);
	assert_true(h.underscore);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\r\n",
	    true, &why), 0);
	assert_false(h.underscore);
	assert_true(http_name_is_framing("hOsT", 4));
	assert_true(http_name_is_framing("Proxy_X", 7));
	assert_false(http_name_is_framing("Proxy-", 6));
	assert_false(http_name_is_framing("Content_Lengths", 15));
}

static void
test_te_codings(void **state)
{
	const char *why;

	(void)state;
	assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n", true, &why), 0);
	assert_true(h.chunked && !h.te_other);
	assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "gzip\r\nTransfer-Encoding: chunked\r\n\r\n", true, &why), 0);
	assert_true(h.chunked && h.te_other);
}

/* A line without its LF is refused once it is over max_line, as it
 * arrives: 414 for the request line, 431 for a header line, 502 for a
 * status line; what can still end in time is not. */
static void
test_head_partial(void **state)
{
	static char buf[4096];
	const char *why;
	size_t n;

	(void)state;
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "GET /", 5);
	/* max_line 1024: 1025 bytes and a CR may still be a good line */
	assert_int_equal(http_head_partial(buf, 1024, true, &lim, &why), 0);
	assert_int_equal(http_head_partial(buf, 1025, true, &lim, &why), 0);
	why = NULL;
	assert_int_equal(http_head_partial(buf, 1026, true, &lim, &why), 414);
	assert_string_equal(why, "request line too long");
	assert_int_equal(http_head_partial(buf, sizeof(buf), true, &lim, &why),
	    414);
	assert_int_equal(http_head_partial(buf, sizeof(buf), false, &lim, &why),
	    502);
	assert_string_equal(why, "status line too long");
	/* after the leading CRLF it is still the request line */
	memcpy(buf, "\r\nGET /", 7);
	assert_int_equal(http_head_partial(buf, 2000, true, &lim, &why), 414);
	/* a header line */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX: ");
	memset(buf + n, 'a', sizeof(buf) - n);
	assert_int_equal(http_head_partial(buf, n + 100, true, &lim, &why), 0);
	assert_int_equal(http_head_partial(buf, sizeof(buf), true, &lim, &why),
	    431);
	assert_string_equal(why, "header line too long");
	/* complete lines are http_parse_head's */
	assert_int_equal(http_head_partial("GET / HTTP/1.1\r\n", 16, true, &lim,
	    &why), 0);
	assert_int_equal(http_head_partial("", 0, true, &lim, &why), 0);
}

/* Step mode: framing and data never share a call; the framing that goes
 * on is canonical (sizes in lower-case hex without leading zeros, no
 * extensions), the last chunk is left to the caller, at the trailers. */
static void
test_chunk_steps(void **state)
{
	const char *in = "0005;ext=\"x\"\r\nhello\r\n00A\r\n0123456789\r\n"
	    "0000\r\nT: v\r\n\r\n";
	const char *want = "5\r\nhello\r\na\r\n0123456789\r\n";
	size_t n = strlen(in), step;

	(void)state;
	for (step = 1; step <= n; step++) {
		struct http_chunk c;
		char out[128];
		size_t off = 0, olen = 0;
		const char *why;

		memset(&c, 0, sizeof(c));
		c.step = true;
		while (off < n && c.state != HTTP_CHUNK_TRAILER) {
			enum http_chunk_state st = c.state;
			size_t k = n - off < step ? n - off : step;
			ssize_t r = http_chunk_feed(&c, in + off, k, &lim, &why);

			assert_true(r > 0);
			if (st == HTTP_CHUNK_DATA) {
				memcpy(out + olen, in + off, (size_t)r);
				olen += (size_t)r;
			} else {
				/* framing only: no data byte in it */
				assert_true(c.state != HTTP_CHUNK_DATA ||
				    c.left == c.size);
				memcpy(out + olen, c.out, c.outlen);
				olen += c.outlen;
			}
			off += (size_t)r;
		}
		assert_int_equal(c.state, HTTP_CHUNK_TRAILER);
		assert_int_equal(c.body, 15);
		assert_int_equal(olen, strlen(want));
		assert_memory_equal(out, want, olen);
		assert_string_equal(in + off, "T: v\r\n\r\n");
		/* nothing more in step mode until the caller is done */
		assert_int_equal(http_chunk_feed(&c, in + off, n - off, &lim,
		    &why), 0);
	}
}

static void
test_chunk_leading_zeros(void **state)
{
	uint64_t body = 0;

	(void)state;
	assert_int_equal(chunks("00000000000000000000005\r\nhello\r\n0\r\n\r\n",
	    &body) > 0, 1);
	assert_int_equal(body, 5);
	assert_int_equal(chunks("000\r\n\r\n", &body), 7);
	/* 2^60 and more: an overflow, with or without zeros before */
	assert_int_equal(chunks("1000000000000000\r\n", &body), -1);
	assert_int_equal(chunks("0001000000000000000\r\n", &body), -1);
	assert_int_equal(chunks("0FFFFFFFFFFFFFFF\r\n", &body), 18);
}

static ssize_t
trailers(const char *s, const char **why)
{
	*why = NULL;
	return http_parse_trailers(s, strlen(s), &lim, &h, why);
}

/* The trailer section, parsed as header fields are. */
static void
test_trailers(void **state)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "bad trailer\r\n\r\n", "whitespace before colon" },
		{ "bad\r\n\r\n", "invalid character in header name" },
		{ "T : v\r\n\r\n", "whitespace before colon" },
		{ "T: v\r\n w\r\n\r\n", "obsolete line folding" },
		{ ": v\r\n\r\n", "empty header name" },
		{ "T: a\x00b\r\n\r\n", "invalid character in header value" },
		{ "T: a\rb\r\n\r\n", "bare CR in trailers" },
		{ "T: v\n\r\n", "bare LF in trailers" },
		{ "\n", "bare LF in trailers" },
		{ "Content_Length: 5\r\n\r\n", "'_' in a framing header name" },
		{ "Content-Length: 5\r\nContent-Length: 5\r\n\r\n",
		  "duplicate Content-Length" },
		{ "T\xe9: v\r\n\r\n", "invalid character in header name" },
	};
	static char big[8192];
	const char *why;
	size_t i, n;

	(void)state;
	assert_int_equal(trailers("\r\nNEXT", &why), 2);
	assert_int_equal(h.nhdr, 0);
	assert_int_equal(trailers("T: v \r\nX-Sum: 1\r\n\r\nNEXT", &why), 19);
	assert_int_equal(h.nhdr, 2);
	assert_memory_equal(h.hdr[0].val, "v", h.hdr[0].vlen);
	assert_int_equal(h.hdr[0].vlen, 1);
	/* incomplete: more is needed */
	assert_int_equal(trailers("", &why), 0);
	assert_int_equal(trailers("\r", &why), 0);
	assert_int_equal(trailers("T: v\r\n", &why), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (trailers(bad[i].in, &why) != -1)
			fail_msg("%s: taken", bad[i].in);
		if (why == NULL || strcmp(why, bad[i].why) != 0)
			fail_msg("%s: %s", bad[i].in, why);
	}
	/* limits: a line (even without its LF), lines, the section */
	memset(big, 'a', sizeof(big));
	memcpy(big, "T: ", 3);
	assert_int_equal(http_parse_trailers(big, 1100, &lim, &h, &why), -1);
	assert_string_equal(why, "trailer line too long");
	for (n = 0, i = 0; i < 33; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "T%zu: v\r\n", i);
	n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
	assert_int_equal(http_parse_trailers(big, n, &lim, &h, &why), -1);
	assert_string_equal(why, "too many trailer lines");
	for (n = 0, i = 0; i < 5; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "T%zu: %01000d\r\n",
		    i, 0);
	assert_int_equal(http_parse_trailers(big, n, &lim, &h, &why), -1);
	assert_string_equal(why, "trailers over max-header-bytes");
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
		cmocka_unit_test(test_leading_empty_line),
		cmocka_unit_test(test_underscore_names),
		cmocka_unit_test(test_te_codings),
		cmocka_unit_test(test_head_partial),
		cmocka_unit_test(test_chunk_steps),
		cmocka_unit_test(test_chunk_leading_zeros),
		cmocka_unit_test(test_trailers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
