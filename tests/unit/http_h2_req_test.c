/* Unit tests for plugins/http/http_h2_req.c: an HTTP/2 request's fields
 * made a head give the head, or the refusal, that the same request's
 * HTTP/1.1 text parses into: each case names its fields and that text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_h2_req.h"

static struct http_limits lim = {
	.max_line = 256, .max_header_lines = 8, .max_header_bytes = 1024,
	.max_url = 128,
};

/* The fields f (name, value pairs, NULL-ended) made a head, against the
 * parse of text (the leg's head): the same status, and when 0 the same
 * head. */
/* The Sec-WebSocket-Key same() gives an extended CONNECT's head. */
static const char *same_key = "";

static void
same(const char *const *f, bool forward, bool unsized, const char *text)
{
	static struct http_head a, b;
	struct http_h2_req r;
	const char *why1 = "", *why2 = "";
	size_t scanned = 0, i;
	ssize_t end;
	int rc1, rc2;

	end = http_head_end(text, strlen(text), lim.max_header_bytes,
	    &scanned);
	if (end > 0)
		rc1 = http_parse_head(text, (size_t)end, true, &lim, &a, &why1);
	else
		rc1 = 431, why1 = "over max-header-bytes";
	http_h2_req_init(&r);
	snprintf(r.ws_key, sizeof(r.ws_key), "%s", same_key);
	for (i = 0; f[i] != NULL; i += 2)
		assert_int_equal(http_h2_req_add(&r, f[i], strlen(f[i]),
		    f[i + 1], strlen(f[i + 1])), 0);
	rc2 = http_h2_req_head(&r, forward, unsized, &lim, &b, &why2);
	if (rc1 != rc2)
		fail_msg("%s: text %d (%s), fields %d (%s)", text, rc1, why1,
		    rc2, why2);
	if (rc1 == 0) {
		assert_int_equal(a.mlen, b.mlen);
		assert_memory_equal(a.method, b.method, a.mlen);
		assert_int_equal(a.tlen, b.tlen);
		assert_memory_equal(a.target, b.target, a.tlen);
		assert_int_equal(a.minor, b.minor);
		assert_int_equal(a.nhdr, b.nhdr);
		for (i = 0; i < a.nhdr; i++) {
			assert_int_equal(a.hdr[i].nlen, b.hdr[i].nlen);
			assert_memory_equal(a.hdr[i].name, b.hdr[i].name,
			    a.hdr[i].nlen);
			assert_int_equal(a.hdr[i].vlen, b.hdr[i].vlen);
			assert_memory_equal(a.hdr[i].val, b.hdr[i].val,
			    a.hdr[i].vlen);
			assert_int_equal(a.hdr[i].id, b.hdr[i].id);
		}
		assert_int_equal(a.content_length, b.content_length);
		assert_true(a.chunked == b.chunked && a.has_te == b.has_te);
		assert_int_equal(a.host, b.host);
	}
	http_h2_req_free(&r);
}

static void
test_heads(void **state)
{
	static const char *const get[] = { ":method", "GET", ":scheme",
	    "https", ":authority", "a.test", ":path", "/x?y", "accept", "*/*",
	    "cookie", "a=1", "cookie", "", "x-b", "2", "cookie", "b=2", NULL };
	static const char *const fwd[] = { ":method", "GET", ":scheme",
	    "http", ":authority", "h:8080", ":path", "/p", NULL };
	static const char *const star[] = { ":method", "OPTIONS", ":scheme",
	    "http", ":authority", "h", ":path", "*", NULL };
	static const char *const conn[] = { ":method", "CONNECT",
	    ":authority", "h:443", NULL };
	static const char *const host_same[] = { ":method", "GET", ":scheme",
	    "https", ":authority", "A.test", ":path", "/", "host", "a.TEST",
	    NULL };
	static const char *const host_other[] = { ":method", "GET",
	    ":scheme", "https", ":authority", "a", ":path", "/", "host", "b",
	    NULL };
	static const char *const host_only[] = { ":method", "GET", ":scheme",
	    "https", ":path", "/", "host", "h", NULL };
	static const char *const no_host[] = { ":method", "GET", ":scheme",
	    "https", ":path", "/", NULL };
	static const char *const post[] = { ":method", "POST", ":scheme",
	    "https", ":authority", "a", ":path", "/u", "content-type", "x/y",
	    NULL };
	static const char *const sized[] = { ":method", "POST", ":scheme",
	    "https", ":authority", "a", ":path", "/u", "content-length", "5",
	    NULL };
	/* RFC 8441: the HTTP/1.1 Upgrade an extended CONNECT stands for,
	 * the client's own key dropped for the one made for it. */
	static const char *const ws[] = { ":method", "CONNECT", ":protocol",
	    "websocket", ":scheme", "http", ":authority", "a", ":path",
	    "/chat", "sec-websocket-version", "13", "sec-websocket-key",
	    "client", NULL };
	static const char *const other[] = { ":method", "CONNECT",
	    ":protocol", "x-tun", ":scheme", "http", ":authority", "h:8",
	    ":path", "/t", NULL };

	(void)state;
	same(get, false, false, "GET /x?y HTTP/1.1\r\nHost: a.test\r\n"
	    "accept: */*\r\nx-b: 2\r\nCookie: a=1; b=2\r\n\r\n");
	same(fwd, true, false, "GET http://h:8080/p HTTP/1.1\r\n"
	    "Host: h:8080\r\n\r\n");
	same(fwd, false, false, "GET /p HTTP/1.1\r\nHost: h:8080\r\n\r\n");
	same(star, true, false, "OPTIONS http://h HTTP/1.1\r\nHost: h\r\n"
	    "\r\n");
	same(conn, true, false, "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n"
	    "\r\n");
	same(host_same, false, false, "GET / HTTP/1.1\r\nHost: A.test\r\n"
	    "\r\n");
	same(host_other, false, false, "GET / HTTP/1.1\r\nHost: a\r\n"
	    "Host: b\r\n\r\n");
	same(host_only, false, false, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
	same(no_host, false, false, "GET / HTTP/1.1\r\n\r\n");
	same(post, false, true, "POST /u HTTP/1.1\r\nHost: a\r\n"
	    "content-type: x/y\r\nTransfer-Encoding: chunked\r\n\r\n");
	same(sized, false, false, "POST /u HTTP/1.1\r\nHost: a\r\n"
	    "content-length: 5\r\n\r\n");
	same_key = "dGhlIHNhbXBsZSBub25jZQ==";
	same(ws, false, false, "GET /chat HTTP/1.1\r\nHost: a\r\n"
	    "sec-websocket-version: 13\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: "
	    "dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
	same(other, true, false, "GET http://h:8/t HTTP/1.1\r\nHost: h:8\r\n"
	    "Upgrade: x-tun\r\nConnection: Upgrade\r\n\r\n");
	same_key = "";
}

/* Refused as the leg's parse refuses its text: the line, line count and
 * byte limits counted on the text the head would be. */
static void
test_limits(void **state)
{
	static char longv[300], longp[200];
	const char *line[] = { ":method", "GET", ":scheme", "https",
	    ":authority", "a", ":path", "/", "x", longv, NULL };
	const char *url[] = { ":method", "GET", ":scheme", "https",
	    ":authority", "a", ":path", longp, NULL };
	const char *many[] = { ":method", "GET", ":scheme", "https",
	    ":authority", "a", ":path", "/", "a", "1", "b", "1", "c", "1",
	    "d", "1", "e", "1", "f", "1", "g", "1", "h", "1", NULL };
	char text[2048];
	struct http_h2_req r;
	struct http_head m;
	const char *why;

	(void)state;
	memset(longv, 'v', sizeof(longv) - 1);
	memset(longp, 'p', sizeof(longp) - 1);
	longp[0] = '/';
	snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nHost: a\r\nx: %s\r\n"
	    "\r\n", longv);
	same(line, false, false, text);
	snprintf(text, sizeof(text), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n",
	    longp);
	same(url, false, false, text);
	same(many, false, false, "GET / HTTP/1.1\r\nHost: a\r\na: 1\r\n"
	    "b: 1\r\nc: 1\r\nd: 1\r\ne: 1\r\nf: 1\r\ng: 1\r\nh: 1\r\n\r\n");
	/* A pseudo-header not known, or twice: no head (the stream is
	 * reset). */
	http_h2_req_init(&r);
	assert_int_equal(http_h2_req_add(&r, ":method", 7, "GET", 3), 0);
	assert_int_equal(http_h2_req_add(&r, ":status", 7, "200", 3), 0);
	assert_true(r.bad);
	assert_int_equal(http_h2_req_head(&r, false, false, &lim, &m, &why),
	    400);
	http_h2_req_free(&r);
	assert_int_equal(http_h2_req_add(&r, ":path", 5, "/", 1), 0);
	assert_int_equal(http_h2_req_add(&r, ":path", 5, "/", 1), 0);
	assert_true(r.bad);
	http_h2_req_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heads),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
