/* Unit tests for plugins/http/http_parse.c: heads, framing headers and
 * chunked bodies fed whole and byte by byte (request targets made
 * canonical are http_target_test.c's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http/http_parse.h"

#include "http_parse_ref.inc"

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

/* A request head as fields (an HTTP/2 stream's) and as its HTTP/1.1
 * text: the same verdict, and when good the same head. f: name, value
 * pairs, NULL-ended. */
static void
fields_as_text(const char *method, const char *target, const char *const *f)
{
	static struct http_head t;
	char text[2048];
	const char *why1 = NULL, *why2 = NULL;
	size_t n, i;
	int rc1, rc2 = 0;

	n = (size_t)snprintf(text, sizeof(text), "%s %s HTTP/1.1\r\n", method,
	    target);
	for (i = 0; f[i] != NULL; i += 2)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s: %s\r\n",
		    f[i], f[i + 1]);
	snprintf(text + n, sizeof(text) - n, "\r\n");
	rc1 = parse(text, true, &why1);
	t = h;
	http_head_start(&h, true);
	rc2 = http_head_request_target(&h, method, strlen(method), target,
	    strlen(target), &lim, &why2);
	for (i = 0; rc2 == 0 && f[i] != NULL; i += 2)
		rc2 = http_head_add_field(&h, f[i], strlen(f[i]), f[i + 1],
		    strlen(f[i + 1]), &why2);
	if (rc2 == 0)
		rc2 = http_head_check(&h, &why2);
	if (rc1 != rc2)
		fail_msg("%s: text %d (%s), fields %d (%s)", text, rc1,
		    why1 ? why1 : "", rc2, why2 ? why2 : "");
	if (rc1 != 0)
		return;
	assert_int_equal(t.mlen, h.mlen);
	assert_memory_equal(t.method, h.method, h.mlen);
	assert_int_equal(t.tlen, h.tlen);
	assert_memory_equal(t.target, h.target, h.tlen);
	assert_int_equal(t.minor, h.minor);
	assert_int_equal(t.nhdr, h.nhdr);
	for (i = 0; i < t.nhdr; i++) {
		assert_int_equal(t.hdr[i].nlen, h.hdr[i].nlen);
		assert_memory_equal(t.hdr[i].name, h.hdr[i].name, h.hdr[i].nlen);
		assert_int_equal(t.hdr[i].vlen, h.hdr[i].vlen);
		assert_memory_equal(t.hdr[i].val, h.hdr[i].val, h.hdr[i].vlen);
		assert_int_equal(t.hdr[i].id, h.hdr[i].id);
	}
	assert_int_equal(t.content_length, h.content_length);
	assert_true(t.chunked == h.chunked && t.has_te == h.has_te &&
	    t.te_other == h.te_other && t.underscore == h.underscore &&
	    t.conn_close == h.conn_close &&
	    t.conn_keep_alive == h.conn_keep_alive &&
	    t.conn_upgrade == h.conn_upgrade &&
	    t.expect_continue == h.expect_continue);
	assert_int_equal(t.host, h.host);
	assert_int_equal(t.upgrade, h.upgrade);
}

static void
test_head_as_fields(void **state)
{
	static const char *const ok[] = { "host", "a", "content-length", "012",
	    "connection", "keep-alive, upgrade", "upgrade", "websocket",
	    "expect", "100-continue", "x_y", "1", "accept", "*/*", NULL };
	static const char *const ows[] = { "host", " a\t", "x", "  ", NULL };
	static const char *const te[] = { "host", "a", "transfer-encoding",
	    "gzip, chunked", NULL };
	static const char *const te_cl[] = { "host", "a", "transfer-encoding",
	    "chunked", "content-length", "1", NULL };
	static const char *const te_bad[] = { "host", "a", "transfer-encoding",
	    "gzip", NULL };
	static const char *const cl2[] = { "host", "a", "content-length", "1",
	    "content-length", "1", NULL };
	static const char *const cl_bad[] = { "host", "a", "content-length",
	    "-1", NULL };
	static const char *const host2[] = { "host", "a", "host", "b", NULL };
	static const char *const nohost[] = { "x", "1", NULL };
	static const char *const us_framing[] = { "host", "a",
	    "content_length", "1", NULL };
	static const char *const ctl[] = { "host", "a", "x", "a\001b", NULL };
	static const char *const badname[] = { "host", "a", "x(y", "1", NULL };
	static const char *const none[] = { NULL };
	char longt[600];

	(void)state;
	fields_as_text("GET", "/a?b", ok);
	fields_as_text("GET", "/", ows);
	fields_as_text("POST", "/", te);
	fields_as_text("POST", "/", te_cl);
	fields_as_text("POST", "/", te_bad);
	fields_as_text("POST", "/", cl2);
	fields_as_text("POST", "/", cl_bad);
	fields_as_text("GET", "/", host2);
	fields_as_text("GET", "/", nohost);
	fields_as_text("GET", "/", us_framing);
	fields_as_text("GET", "/", ctl);
	fields_as_text("GET", "/", badname);
	fields_as_text("G(T", "/", ok);
	fields_as_text("GET", "/a\001", ok);
	fields_as_text("GET", "*", none);
	memset(longt, 'a', sizeof(longt) - 1);
	longt[0] = '/';
	longt[sizeof(longt) - 1] = '\0';
	fields_as_text("GET", longt, ok);
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

/* A head judged from scratch as far as it has come. */
static int
judge(const char *buf, size_t len, bool request, const char **why)
{
	struct http_head_scan st;

	memset(&st, 0, sizeof(st));
	*why = NULL;
	return http_head_judge(buf, len, request, &lim, &st, why);
}

/* A line without its LF is refused once it is over max_line, as it
 * arrives: 414 for the request line, 431 for a header line (and the
 * status line: the caller answers 502); what can still end in time is
 * not. */
static void
test_judge_long_lines(void **state)
{
	static char buf[4096];
	const char *why;
	size_t n;

	(void)state;
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "GET /", 5);
	/* max_line 1024: 1024 bytes, then a CR, may still be a good line */
	assert_int_equal(judge(buf, 1024, true, &why), 0);
	buf[1024] = '\r';
	assert_int_equal(judge(buf, 1025, true, &why), 0);
	assert_int_equal(judge(buf, 1026, true, &why), 414);
	assert_string_equal(why, "request line too long");
	buf[1024] = 'a';
	assert_int_equal(judge(buf, 1025, true, &why), 414);
	assert_int_equal(judge(buf, sizeof(buf), true, &why), 414);
	memcpy(buf, "HTTP/1.1 200 ", 13);
	assert_int_equal(judge(buf, sizeof(buf), false, &why), 431);
	assert_string_equal(why, "status line too long");
	/* after the leading CRLF it is still the request line */
	memcpy(buf, "\r\nGET /", 7);
	assert_int_equal(judge(buf, 2000, true, &why), 414);
	/* a header line */
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX: ");
	memset(buf + n, 'a', sizeof(buf) - n);
	assert_int_equal(judge(buf, n + 100, true, &why), 0);
	assert_int_equal(judge(buf, sizeof(buf), true, &why), 431);
	assert_string_equal(why, "header line too long");
	assert_int_equal(judge("GET / HTTP/1.1\r\n", 16, true, &why), 0);
	assert_int_equal(judge("", 0, true, &why), 0);
}

/* Issue 24: each line is judged when its LF comes, before the empty line
 * (which may never come): the status and reason of the complete head. */
static void
test_judge_lines(void **state)
{
	static const struct {
		const char *in;
		size_t len;	/* 0: strlen */
		bool request;
		int st;
		const char *why;
	} c[] = {
		{ "GET / HTTP/9.9\r\n", 0, true, 505, "HTTP version not supported" },
		{ "GET / HTTP/2.0\r\n", 0, true, 505, "HTTP version not supported" },
		{ "GET / HTTP/0.9\r\n", 0, true, 505, "HTTP version not supported" },
		{ "GET / HTTP/1.2\r\nHost: a\r\n", 0, true, 0, NULL },
		{ "GET /\x01 HTTP/1.1\r\n", 0, true, 400, "malformed request target" },
		{ "GET /a\0b HTTP/1.1\r\n", 19, true, 400, "malformed request target" },
		{ "G\x01T / HTTP/1.1\r\n", 0, true, 400, "malformed method" },
		{ "GET / HTTP/1.1\r\nX-A: \x01\r\n", 0, true, 400,
		  "invalid character in header value" },
		{ "GET / HTTP/1.1\r\nX-A: a\0\r\n", 25, true, 400,
		  "invalid character in header value" },
		{ "GET / HTTP/1.1\r\nnot a field\r\n", 0, true, 400,
		  "whitespace before colon" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n", 0, true, 400,
		  "duplicate Host" },
		{ "GET / HTTP/1.1\r\nX: a\r\n b\r\n", 0, true, 400,
		  "obsolete line folding" },
		{ "GET / HTTP/1.1\r\nX: a\rb\r\n", 0, true, 400, "bare CR" },
		{ "GET / HTTP/1.1\nHost: a", 0, true, 400, "bare LF" },
		{ "THIS IS NOT HTTP\r\n", 0, false, 400, "malformed HTTP version" },
		{ "T", 0, false, 400, "malformed HTTP version" },
		{ "\x16\x03\x01\x02", 0, false, 400, "malformed HTTP version" },
		{ "HTT", 0, false, 0, NULL },
		{ "HTTP/1.1 200 OK\r\nX-A: \x01\r\n", 0, false, 400,
		  "invalid character in header value" },
		{ "HTTP/1.1 2x0 OK\r\n", 0, false, 400, "malformed status code" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n",
		  0, false, 400, "duplicate Content-Length" },
		{ "HTTP/1.2 200 OK\r\nX: y\r\n", 0, false, 0, NULL },
	};
	static char many[2048];
	const char *why;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		size_t len = c[i].len ? c[i].len : strlen(c[i].in);
		int rc = judge(c[i].in, len, c[i].request, &why);

		if (rc != c[i].st || (c[i].why != NULL && (why == NULL ||
		    strcmp(why, c[i].why) != 0)))
			fail_msg("case %zu: %d \"%s\", wanted %d \"%s\"", i, rc,
			    why ? why : "", c[i].st, c[i].why ? c[i].why : "");
	}
	/* max_header_lines (32): the 33rd field line is refused as it comes */
	n = (size_t)snprintf(many, sizeof(many), "GET / HTTP/1.1\r\n");
	for (i = 0; i < 32; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "X%zu: v\r\n", i);
	assert_int_equal(judge(many, n, true, &why), 0);
	n += (size_t)snprintf(many + n, sizeof(many) - n, "X: v\r\n");
	assert_int_equal(judge(many, n, true, &why), 431);
	assert_string_equal(why, "too many header lines");
	/* HTTP/1.2 is read as 1.1 (RFC 9110 2.5) */
	assert_int_equal(parse("GET / HTTP/1.2\r\nHost: a\r\n\r\n", true, &why), 0);
	assert_int_equal(h.minor, 1);
	assert_int_equal(parse("GET / HTTP/1.2\r\n\r\n", true, &why), 400);
	assert_string_equal(why, "missing Host");
}

/* Each call looks at the new bytes only: what was judged stays judged. */
static void
test_judge_resumes(void **state)
{
	static struct http_limits big = {
		.max_line = 1 << 20, .max_header_lines = 32,
		.max_header_bytes = 1 << 21, .max_url = 512,
	};
	static char buf[1 << 20];
	struct http_head_scan st;
	const char *why;
	size_t n, k;
	struct timespec t0, t1;
	double s;

	(void)state;
	memset(&st, 0, sizeof(st));
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 1\r\nX: ");
	assert_int_equal(http_head_judge(buf, n, true, &lim, &st, &why), 0);
	assert_int_equal(st.off, n - 3);
	assert_int_equal(st.line_no, 3);
	assert_true(st.cl_seen && st.host_seen);
	assert_int_equal(st.seen, 3);
	/* a duplicate found across calls */
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "1\r\nContent-Length: 1\r");
	assert_int_equal(http_head_judge(buf, n, true, &lim, &st, &why), 0);
	buf[n++] = '\n';
	assert_int_equal(http_head_judge(buf, n, true, &lim, &st, &why), 400);
	assert_string_equal(why, "duplicate Content-Length");
	/* a long line trickled a byte at a time stays linear: 900 000
	 * one-byte calls, well under a second (quadratic: minutes) */
	memset(&st, 0, sizeof(st));
	n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nX: ");
	memset(buf + n, 'a', sizeof(buf) - n);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (k = 1; k <= 900000; k++)
		if (http_head_judge(buf, k, true, &big, &st, &why) != 0)
			fail_msg("refused at %zu: %s", k, why);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (s > 5)
		fail_msg("900 000 one-byte calls took %.2f s", s);
}

/* xorshift64: a fixed sequence, so a failure is the same every run. */
static uint64_t rng_state = 0x2400c0ffee1234ULL;

static unsigned
rnd(unsigned n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (unsigned)(rng_state % n);
}

/* A random head: good and bad first lines and fields, random bytes
 * changed, inserted or removed, with or without its empty line. */
static size_t
random_head(char *buf, size_t size, bool request)
{
	static const char *const reqs[] = { "GET / HTTP/1.1", "GET / HTTP/1.0",
	    "POST /a?b HTTP/1.1", "GET / HTTP/1.2", "GET / HTTP/9.9",
	    "GET / HTTP/2.0", "G(T / HTTP/1.1", "GET  / HTTP/1.1",
	    "GET /\x01 HTTP/1.1", "GET", "", "OPTIONS * HTTP/1.1" };
	static const char *const stats[] = { "HTTP/1.1 200 OK",
	    "HTTP/1.0 204", "HTTP/1.1 101 Switching", "HTTP/1.2 200 OK",
	    "HTTP/2 200", "THIS IS NOT HTTP", "HTTP/1.1 2x0", "\x16\x03\x01",
	    "HTTP/1.1 099 x", "" };
	/* good: once (framing, Host), then any number of times */
	static const char *const once[] = { "Host: a\r\n",
	    "Host: a\r\nContent-Length: 5\r\n",
	    "Host: a\r\nTransfer-Encoding: chunked\r\n",
	    "Transfer-Encoding: gzip, chunked\r\n", "" };
	static const char *const good[] = { "X-A: b", "X_Y: 1",
	    "Connection: close", "Upgrade: websocket", "Expect: 100-continue",
	    "X-Empty:", "Accept: */*", "User-Agent: t/1.0 (x)",
	    "X-B:  c d \t" };
	static const char *const bad[] = { "Host: b", "Content-Length: 05",
	    "Content-Length: -1", "Transfer-Encoding: chunked, gzip",
	    "Transfer-Encoding: gzip", "X-A: \x01", "Content_Length: 1",
	    " folded", "Bad Name: x", "X : y", ": v", "X: a\rb", "" };
	size_t n = 0, i, nf = rnd(40);

#define PUT(s, l) do { size_t l_ = (l); if (n + l_ < size) { \
	memcpy(buf + n, (s), l_); n += l_; } } while (0)
	if (request && rnd(8) == 0)
		PUT("\r\n", 2);
	{
		const char *first = request ?
		    reqs[rnd(4) != 0 ? rnd(4) : rnd(sizeof(reqs) /
		    sizeof(reqs[0]))] : stats[rnd(4) != 0 ? rnd(4) :
		    rnd(sizeof(stats) / sizeof(stats[0]))];
		const char *o = once[rnd(sizeof(once) / sizeof(once[0]))];

		PUT(first, strlen(first));
		if (rnd(20) == 0)
			PUT("\n", 1);
		else
			PUT("\r\n", 2);
		PUT(o, strlen(o));
	}
	for (i = 0; i < nf; i++) {
		const char *f = rnd(40) != 0 ?
		    good[rnd(sizeof(good) / sizeof(good[0]))] :
		    bad[rnd(sizeof(bad) / sizeof(bad[0]))];

		if (rnd(60) == 0) {
			/* a long one: over max_line now and then */
			size_t k, l = 900 + rnd(300);

			PUT("X-Long: ", 8);
			for (k = 0; k < l && n + 1 < size; k++)
				buf[n++] = 'a';
		} else
			PUT(f, strlen(f));
		if (rnd(60) == 0)
			PUT("\r", 1);
		else
			PUT("\r\n", 2);
	}
	if (rnd(4) != 0)
		PUT("\r\n", 2);
	if (rnd(3) == 0)
		PUT("body", 4);
	/* mutations: any byte, CR, LF and NUL likelier */
	for (i = rnd(3) == 0 ? rnd(4) : 0; i > 0 && n > 0; i--) {
		static const char special[] = { '\r', '\n', '\0', ' ', ':', '\t' };
		size_t at = rnd((unsigned)n);
		char c = rnd(2) ? special[rnd(sizeof(special))] : (char)rnd(256);

		switch (rnd(3)) {
		case 0:
			buf[at] = c;
			break;
		case 1:
			if (n + 1 < size) {
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = c;
				n++;
			}
			break;
		default:
			memmove(buf + at, buf + at + 1, n - at - 1);
			n--;
		}
	}
#undef PUT
	return n;
}

/* What the live path decides, given the head cut into reads of the
 * sizes cut() gives: http_head_judge while the head has not ended,
 * http_parse_head once it has. 0 with *why NULL: still waiting. */
static int
verdict(const char *buf, size_t len, bool request, unsigned step,
    const char **why)
{
	static struct http_head m;
	struct http_head_scan st;
	size_t have = 0, scanned = 0;
	ssize_t end;
	int rc;

	memset(&st, 0, sizeof(st));
	*why = NULL;
	while (have < len) {
		have += step == 0 ? len : step == 1 ? 1 : 1 + rnd(step);
		if (have > len)
			have = len;
		end = http_head_end(buf, have, lim.max_header_bytes, &scanned);
		assert_true(end >= 0);
		if (end > 0)
			return http_parse_head(buf, (size_t)end, request, &lim,
			    &m, why);
		if ((rc = http_head_judge(buf, have, request, &lim, &st,
		    why)) != 0)
			return rc;
	}
	return 0;
}

/* Incremental judging says what whole-head judging says: fed byte by
 * byte, in random reads or whole, a head gets the same status and reason
 * (or is still waited for either way). */
static void
test_judge_random(void **state)
{
	static char buf[4000];
	size_t len;
	unsigned i, refused = 0, taken = 0;

	(void)state;
	for (i = 0; i < 6000; i++) {
		bool request = i % 2 == 0;
		const char *w_why, *b_why, *r_why;
		int w, b, r;

		len = random_head(buf, sizeof(buf), request);
		w = verdict(buf, len, request, 0, &w_why);
		b = verdict(buf, len, request, 1, &b_why);
		r = verdict(buf, len, request, 64, &r_why);
		if (w != b || w != r || (w_why == NULL) != (b_why == NULL) ||
		    (w_why == NULL) != (r_why == NULL) || (w_why != NULL &&
		    (strcmp(w_why, b_why) != 0 || strcmp(w_why, r_why) != 0))) {
			fprintf(stderr, "case %u (%s, %zu bytes): ", i,
			    request ? "request" : "response", len);
			fwrite(buf, 1, len, stderr);
			fail_msg("\nwhole %d \"%s\", byte by byte %d \"%s\", "
			    "random reads %d \"%s\"", w, w_why ? w_why : "", b,
			    b_why ? b_why : "", r, r_why ? r_why : "");
		}
		if (w != 0)
			refused++;
		else if (w_why == NULL && memmem(buf, len, "\r\n\r\n", 4))
			taken++;
	}
	/* the generator makes both kinds */
	fprintf(stderr, "%u of 6000 refused, %u taken\n", refused, taken);
	assert_true(refused > 1000);
	assert_true(taken > 500);
}

/* A head with one field of random bytes (controls, DEL, obs-text, HTAB,
 * SP, a CR now and then; never LF), lines otherwise good. */
static size_t
random_value_head(char *buf, size_t size, bool request)
{
	static const char odd[] = { '\t', ' ', 0x7f, 0x00, 0x01, 0x1f, 0x20,
	    0x7e, (char)0x80, (char)0xff, 'a', ':', '\r' };
	static const char tail[] = "\r\nX-W: 1\r\n\r\n";
	size_t n, k, len = rnd(40);

	n = (size_t)snprintf(buf, size, "%s\r\nHost: a\r\nX-V:",
	    request ? "GET / HTTP/1.1" : "HTTP/1.1 200 OK");
	for (k = 0; k < len && n + 8 < size; k++)
		buf[n++] = rnd(3) ? (char)(0x21 + rnd(94)) :
		    odd[rnd(sizeof(odd) - (rnd(8) ? 1 : 0))];
	memcpy(buf + n, tail, sizeof(tail) - 1);
	return n + sizeof(tail) - 1;
}

/* The parser against its frozen copy (http_parse_ref.inc): the same
 * status and reason for every head, and for a head taken the same
 * head, field by field. */
static void
test_parse_diff(void **state)
{
	static char buf[4000];
	static struct http_head a, b;
	unsigned i, k, taken = 0, refused = 0;

	(void)state;
	for (i = 0; i < 40000; i++) {
		bool request = i % 2 == 0;
		size_t len = i % 4 < 2 ? random_head(buf, sizeof(buf), request) :
		    random_value_head(buf, sizeof(buf), request);
		size_t scanned = 0;
		ssize_t end = http_head_end(buf, len, lim.max_header_bytes,
		    &scanned);
		size_t hl = end > 0 ? (size_t)end : len;
		const char *wa = NULL, *wb = NULL;
		int ra = http_parse_head(buf, hl, request, &lim, &a, &wa);
		int rb = ref_parse_head(buf, hl, request, &lim, &b, &wb);

		if (ra != rb || (wa == NULL) != (wb == NULL) ||
		    (wa != NULL && strcmp(wa, wb) != 0)) {
			fprintf(stderr, "case %u: ", i);
			fwrite(buf, 1, hl, stderr);
			fail_msg("\nlive %d \"%s\", frozen %d \"%s\"", ra,
			    wa ? wa : "", rb, wb ? wb : "");
		}
		if (ra != 0) {
			refused++;
			continue;
		}
		taken++;
		assert_true(a.request == b.request && a.method == b.method &&
		    a.mlen == b.mlen && a.target == b.target &&
		    a.tlen == b.tlen && a.status == b.status &&
		    a.reason == b.reason && a.rlen == b.rlen &&
		    a.minor == b.minor && a.nhdr == b.nhdr &&
		    a.head_len == b.head_len &&
		    a.content_length == b.content_length &&
		    a.chunked == b.chunked && a.has_te == b.has_te &&
		    a.te_other == b.te_other && a.underscore == b.underscore &&
		    a.empty_line == b.empty_line &&
		    a.conn_close == b.conn_close &&
		    a.conn_keep_alive == b.conn_keep_alive &&
		    a.conn_upgrade == b.conn_upgrade && a.host == b.host &&
		    a.upgrade == b.upgrade &&
		    a.expect_continue == b.expect_continue);
		for (k = 0; k < a.nhdr; k++)
			assert_true(a.hdr[k].name == b.hdr[k].name &&
			    a.hdr[k].nlen == b.hdr[k].nlen &&
			    a.hdr[k].val == b.hdr[k].val &&
			    a.hdr[k].vlen == b.hdr[k].vlen);
	}
	fprintf(stderr, "%u taken, %u refused\n", taken, refused);
	assert_true(taken > 4000 && refused > 8000);
}

/* http_field_id against the plain reading: each listed name in any case
 * is its field, anything else (a letter off, one more or fewer, '_' for
 * '-', a "proxy-" name) is what the list says, over random names made of
 * the listed ones' letters. */
static enum http_field
field_id_plain(const char *name, size_t len)
{
	static const struct { const char *n; enum http_field id; } known[] = {
	    { "content-length", HTTP_F_CONTENT_LENGTH },
	    { "transfer-encoding", HTTP_F_TRANSFER_ENCODING },
	    { "connection", HTTP_F_CONNECTION },
	    { "keep-alive", HTTP_F_KEEP_ALIVE },
	    { "proxy-connection", HTTP_F_PROXY_CONNECTION },
	    { "te", HTTP_F_TE }, { "trailer", HTTP_F_TRAILER },
	    { "upgrade", HTTP_F_UPGRADE }, { "host", HTTP_F_HOST },
	    { "expect", HTTP_F_EXPECT },
	    { "x-forwarded-for", HTTP_F_X_FORWARDED_FOR },
	    { "content-encoding", HTTP_F_CONTENT_ENCODING },
	    { "content-type", HTTP_F_CONTENT_TYPE },
	    { "content-range", HTTP_F_CONTENT_RANGE },
	    { "authorization", HTTP_F_AUTHORIZATION },
	    { "cookie", HTTP_F_COOKIE }, { "set-cookie", HTTP_F_SET_COOKIE },
	    { "range", HTTP_F_RANGE } };
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].n) == len &&
		    strncasecmp(known[i].n, name, len) == 0)
			return known[i].id;
	if (len > 6 && strncasecmp(name, "proxy-", 6) == 0)
		return HTTP_F_PROXY_OTHER;
	return HTTP_F_OTHER;
}

static void
test_field_id(void **state)
{
	static const char *const names[] = { "content-length",
	    "transfer-encoding", "connection", "keep-alive", "proxy-connection",
	    "te", "trailer", "upgrade", "host", "expect", "x-forwarded-for",
	    "content-encoding", "content-type", "content-range",
	    "authorization", "cookie", "set-cookie", "range", "proxy-x" };
	/* CR: its bit 0x20 set is '-', which only '-' matches */
	static const char letters[] = "-_acdeghiklnoprstuwxyzACEHKT{@[`\r";
	char buf[40];
	unsigned i, k, hits = 0;

	(void)state;
	for (i = 0; i < 200000; i++) {
		size_t len;

		if (rnd(2)) {
			/* a listed name, changed a little */
			const char *n = names[rnd(sizeof(names) / sizeof(names[0]))];

			len = strlen(n);
			memcpy(buf, n, len);
			for (k = 0; k < len; k++)
				if (rnd(3) == 0 && buf[k] >= 'a' && buf[k] <= 'z')
					buf[k] = (char)(buf[k] - 32);
			switch (rnd(6)) {
			case 0:
				buf[rnd((unsigned)len)] = letters[rnd(sizeof(letters) - 1)];
				break;
			case 1:
				if (len > 1)
					len--;
				break;
			case 2:
				buf[len++] = letters[rnd(sizeof(letters) - 1)];
				break;
			}
		} else {
			len = 1 + rnd(18);
			for (k = 0; k < len; k++)
				buf[k] = letters[rnd(sizeof(letters) - 1)];
		}
		buf[len] = '\0';
		if (http_field_id(buf, len) != field_id_plain(buf, len))
			fail_msg("\"%s\": %d, wanted %d", buf,
			    http_field_id(buf, len), field_id_plain(buf, len));
		hits += field_id_plain(buf, len) != HTTP_F_OTHER;
	}
	assert_true(hits > 20000);
}

/* http_field_is, as the credentials field is found and dropped: a field
 * (its id as the parser gives it) is the name asked for exactly when the
 * two are the same case-insensitively, whether the id stands for that one
 * name (authorization) or for many (proxy-authorization, x-other). */
static void
test_field_is(void **state)
{
	static const char *const want[] = { "authorization",
	    "proxy-authorization", "x-other", "host" };
	static const char *const names[] = { "Authorization", "AUTHORIZATION",
	    "authorizatio", "authorization_", "Authorisation",
	    "Proxy-Authorization", "proxy-authorization", "Proxy-Authenticate",
	    "proxy_authorization", "Proxy-Authorizatio", "X-Other", "x-othe",
	    "Host", "host", "hosts", "Content-Type", "proxy-x" };
	struct http_hdr f;
	unsigned i, k, hits = 0;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			bool same = strlen(names[i]) == strlen(want[k]) &&
			    strcasecmp(names[i], want[k]) == 0;

			memset(&f, 0, sizeof(f));
			f.name = names[i];
			f.nlen = strlen(names[i]);
			f.id = (unsigned char)http_field_id(f.name, f.nlen);
			if (http_field_is(&f, http_field_id(want[k],
			    strlen(want[k])), want[k]) != same)
				fail_msg("\"%s\" is \"%s\": %d", names[i],
				    want[k], !same);
			hits += same;
		}
	assert_int_equal(hits, 7);
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
		cmocka_unit_test(test_judge_long_lines),
		cmocka_unit_test(test_judge_lines),
		cmocka_unit_test(test_judge_resumes),
		cmocka_unit_test(test_judge_random),
		cmocka_unit_test(test_field_id),
		cmocka_unit_test(test_field_is),
		cmocka_unit_test(test_parse_diff),
		cmocka_unit_test(test_chunk_steps),
		cmocka_unit_test(test_chunk_leading_zeros),
		cmocka_unit_test(test_trailers),
		cmocka_unit_test(test_head_as_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
