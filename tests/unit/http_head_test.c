/* Unit tests for plugins/http/http_head.c: literal heads parsed by
 * http_parse.c go through the head writers with small policies, and the
 * bytes that would go on the wire are compared whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "http/http_head.h"
#include "parse.h"

static const struct http_limits lim = {
	.max_line = 1024, .max_header_lines = 32, .max_header_bytes = 4096,
	.max_url = 512,
};
static struct http_head m;
static struct sockaddr_storage client4, client6, dst4;

/* Parses s (one complete head) into m; the test fails if it does not. */
static void
parse(const char *s, bool request)
{
	size_t scanned = 0;
	ssize_t end = http_head_end(s, strlen(s), lim.max_header_bytes, &scanned);
	const char *why = NULL;
	int rc;

	assert_true(end > 0);
	rc = http_parse_head(s, (size_t)end, request, &lim, &m, &why);
	if (rc != 0)
		fail_msg("parse: %d %s", rc, why);
}

/* The policy with everything the writers read turned off: no Via, no
 * X-Forwarded-For, no rules, keep-alive to the server. */
static struct http_policy
plain(void)
{
	struct http_policy p;

	memset(&p, 0, sizeof(p));
	p.keepalive_client = p.keepalive_server = true;
	p.xff = HTTP_XFF_NO;
	return p;
}

/* Compares what out holds with want, byte for byte, and empties it. */
static void
expect(struct evbuffer *out, const char *want)
{
	size_t len = evbuffer_get_length(out);
	char *got = malloc(len + 1);

	assert_non_null(got);
	evbuffer_remove(out, got, len);
	got[len] = '\0';
	if (len != strlen(want) || memcmp(got, want, len) != 0)
		fail_msg("got:\n%s\nwanted:\n%s", got, want);
	free(got);
}

/* Writes the request head of s with p, its own target unchanged. */
static void
request(const char *s, const struct http_policy *p, const char *host,
    bool upgrade, const char *want)
{
	struct evbuffer *out = evbuffer_new();
	struct http_req_ctx r;

	assert_non_null(out);
	parse(s, true);
	memset(&r, 0, sizeof(r));
	r.target = m.target;
	r.tlen = m.tlen;
	r.host = host;
	r.dst = (struct sockaddr *)&dst4;
	r.client = (struct sockaddr *)&client4;
	r.upgrade = upgrade;
	http_head_request(out, &m, p, &r);
	expect(out, want);
	evbuffer_free(out);
}

static void
response(const char *s, const struct http_policy *p, bool dechunk,
    bool client_keep, bool client_10, const char *want)
{
	struct evbuffer *out = evbuffer_new();
	struct http_resp_ctx r = { .dechunk = dechunk,
	    .client_keep = client_keep, .client_10 = client_10 };

	assert_non_null(out);
	parse(s, false);
	http_head_response(out, &m, p, &r);
	expect(out, want);
	evbuffer_free(out);
}

static int
setup(void **state)
{
	const char *why;
	socklen_t sl;

	(void)state;
	if (px_parse_ip("10.0.0.7", 40000, &client4, &sl, &why) == -1 ||
	    px_parse_ip("2001:db8::7", 40000, &client6, &sl, &why) == -1 ||
	    px_parse_ip("192.0.2.1", 8080, &dst4, &sl, &why) == -1)
		return -1;
	return 0;
}

static void
test_hop_by_hop(void **state)
{
	struct http_policy p = plain();

	(void)state;
	/* The fixed set, in any case, and every field Connection names, in
	 * whichever of several Connection fields. */
	request("GET /a HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Foo\r\n"
	    "Keep-Alive: timeout=5\r\nX-Foo: 1\r\nTE: trailers\r\n"
	    "trailer: X-T\r\nUpgrade: h2c\r\nPROXY-CONNECTION: keep-alive\r\n"
	    "X-Bar: 2\r\nConnection: x-baz\r\nX-Baz: 3\r\nX-Foo-Not: 4\r\n\r\n",
	    &p, "a", false,
	    "GET /a HTTP/1.1\r\nHost: a\r\nX-Bar: 2\r\nX-Foo-Not: 4\r\n\r\n");
	/* A name longer than any stack copy is removed all the same. */
	request("GET /a HTTP/1.1\r\nHost: a\r\nConnection: "
	    "X-A-Very-Long-Header-Name-That-Is-Longer-Than-Sixty-Four-Bytes-In-All\r\n"
	    "X-A-Very-Long-Header-Name-That-Is-Longer-Than-Sixty-Four-Bytes-In-All: 1\r\n"
	    "X-Kept: 2\r\n\r\n", &p, "a", false,
	    "GET /a HTTP/1.1\r\nHost: a\r\nX-Kept: 2\r\n\r\n");
	/* A response too; "close" named in Connection removes nothing else. */
	response("HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"
	    "Keep-Alive: max=1\r\nContent-Length: 0\r\n\r\n", &p, false, true,
	    false, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

static void
test_request_rules(void **state)
{
	struct http_policy p = plain();
	struct http_header_rule rules[] = {
		{ .name = "X-A", .action = HTTP_DROP },
		{ .name = "X-A", .action = HTTP_CHANGE, .value = "never" },
		{ .name = "X-Ins", .action = HTTP_INSERT, .value = "one" },
		{ .name = "x-b", .action = HTTP_CHANGE, .value = "new" },
		{ .name = "X-C", .action = HTTP_ACCEPT },
		{ .name = "X-C", .action = HTTP_DROP },
		{ .name = "X-Ins", .action = HTTP_INSERT, .value = "two" },
	};

	(void)state;
	p.reqh = rules;
	p.nreqh = sizeof(rules) / sizeof(rules[0]);
	/* The first rule naming a field decides (drop before change, accept
	 * before drop), names compare without case, every instance of a
	 * field gets the rule, the fields keep their order, inserts follow
	 * in rule order (an insert never matches a field of the request). */
	request("POST /f HTTP/1.1\r\nX-B: old\r\nHost: h\r\nx-a: 1\r\n"
	    "X-C: keep\r\nX-Ins: from-client\r\nX-B: old2\r\nX-A: 2\r\n"
	    "Content-Length: 3\r\n\r\n", &p, "h", false,
	    "POST /f HTTP/1.1\r\nX-B: new\r\nHost: h\r\nX-C: keep\r\n"
	    "X-Ins: from-client\r\nX-B: new\r\nContent-Length: 3\r\n"
	    "X-Ins: one\r\nX-Ins: two\r\n\r\n");
	/* The rules never bring a hop-by-hop field back. */
	request("GET / HTTP/1.1\r\nHost: h\r\nConnection: X-C\r\nX-C: 1\r\n\r\n",
	    &p, "h", false, "GET / HTTP/1.1\r\nHost: h\r\nX-Ins: one\r\n"
	    "X-Ins: two\r\n\r\n");
	/* A field no rule names gets the list's default (the loader's is
	 * accept; the writer follows whatever it is). */
	p.reqh_dflt = HTTP_DROP;
	request("GET / HTTP/1.1\r\nHost: h\r\nX-B: 1\r\nX-C: 2\r\n\r\n",
	    &p, "h", false, "GET / HTTP/1.1\r\nX-B: new\r\nX-C: 2\r\n"
	    "X-Ins: one\r\nX-Ins: two\r\n\r\n");
}

static void
test_host(void **state)
{
	struct http_policy p = plain();

	(void)state;
	/* The client's Host passes as it is, whatever host says. */
	request("GET / HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n", &p,
	    "example.com", false,
	    "GET / HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n");
	/* An HTTP/1.0 request without one: the authority the request named,
	 * else the destination; the request line says HTTP/1.1. */
	request("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", &p, "example.com",
	    false, "GET / HTTP/1.1\r\nAccept: */*\r\nHost: example.com\r\n\r\n");
	request("GET / HTTP/1.0\r\n\r\n", &p, "", false,
	    "GET / HTTP/1.1\r\nHost: 192.0.2.1:8080\r\n\r\n");
}

static void
test_xff_via_connection(void **state)
{
	struct http_policy p = plain();
	struct evbuffer *out = evbuffer_new();
	struct http_req_ctx r;

	(void)state;
	assert_non_null(out);
	p.via = true;
	p.xff = HTTP_XFF_APPEND;
	/* Appended to the client's (its own field is dropped), after Host,
	 * before Via (the client's version) and Connection. */
	request("GET / HTTP/1.0\r\nX-Forwarded-For: 198.51.100.1\r\n"
	    "Via: 1.1 other\r\n\r\n", &p, "h", false,
	    "GET / HTTP/1.1\r\nVia: 1.1 other\r\nHost: h\r\n"
	    "X-Forwarded-For: 198.51.100.1, 10.0.0.7\r\n"
	    "Via: 1.0 proxyd\r\n\r\n");
	request("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &p, "h", false,
	    "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.7\r\n"
	    "Via: 1.1 proxyd\r\n\r\n");
	p.xff = HTTP_XFF_REPLACE;
	p.via = false;
	p.keepalive_server = false;
	request("GET / HTTP/1.1\r\nHost: h\r\nx-forwarded-for: 1.2.3.4\r\n\r\n",
	    &p, "h", false, "GET / HTTP/1.1\r\nHost: h\r\n"
	    "X-Forwarded-For: 10.0.0.7\r\nConnection: close\r\n\r\n");
	/* An IPv6 client, written without brackets or port. */
	parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true);
	memset(&r, 0, sizeof(r));
	r.target = m.target;
	r.tlen = m.tlen;
	r.host = "h";
	r.dst = (struct sockaddr *)&dst4;
	r.client = (struct sockaddr *)&client6;
	http_head_request(out, &m, &p, &r);
	expect(out, "GET / HTTP/1.1\r\nHost: h\r\n"
	    "X-Forwarded-For: 2001:db8::7\r\nConnection: close\r\n\r\n");
	evbuffer_free(out);
	/* x-forwarded-for="no": the client's field passes untouched. */
	p.xff = HTTP_XFF_NO;
	request("GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
	    &p, "h", false, "GET / HTTP/1.1\r\nHost: h\r\n"
	    "X-Forwarded-For: 1.2.3.4\r\nConnection: close\r\n\r\n");
}

static void
test_upgrade(void **state)
{
	struct http_policy p = plain();

	(void)state;
	p.keepalive_server = false;
	/* Accepted: Upgrade passes and Connection says only upgrade (not
	 * close: the connection becomes a tunnel). */
	request("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, X-H\r\n"
	    "Upgrade: websocket\r\nX-H: 1\r\nSec-WebSocket-Key: k\r\n\r\n",
	    &p, "h", true, "GET /ws HTTP/1.1\r\nHost: h\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n"
	    "Connection: upgrade\r\n\r\n");
	/* Not accepted: a plain request. */
	request("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
	    "Upgrade: websocket\r\n\r\n", &p, "h", false,
	    "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
	response("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Accept: a\r\n\r\n", &p, false,
	    false, false, "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Accept: a\r\n"
	    "Connection: upgrade\r\n\r\n");
}

static void
test_origin_form(void **state)
{
	static const struct {
		const char *in, *auth, *path;
	} ok[] = {
		{ "http://example.com:8080/a/b?c=d", "example.com:8080", "/a/b?c=d" },
		{ "HTTP://Example.com/", "Example.com", "/" },
		{ "http://example.com", "example.com", "/" },
		{ "http://[::1]:81/x", "[::1]:81", "/x" },
		{ "http://a?q", "a", "?q" },
		{ "http://a:81?q/r", "a:81", "?q/r" },
	};
	static const char *const bad[] = {
		"/a", "http://", "https://example.com/", "http:/x/y", "ftp://a/b",
		"*",
	};
	struct http_policy p = plain();
	struct evbuffer *out = evbuffer_new();
	struct http_req_ctx r;
	const char *auth, *path;
	size_t i, alen, plen;

	(void)state;
	assert_non_null(out);
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (!http_head_origin_form(ok[i].in, strlen(ok[i].in), &auth,
		    &alen, &path, &plen))
			fail_msg("%s: not taken", ok[i].in);
		assert_int_equal(alen, strlen(ok[i].auth));
		assert_memory_equal(auth, ok[i].auth, alen);
		assert_int_equal(plen, strlen(ok[i].path));
		assert_memory_equal(path, ok[i].path, plen);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (http_head_origin_form(bad[i], strlen(bad[i]), &auth, &alen,
		    &path, &plen))
			fail_msg("%s: taken", bad[i]);
	/* An absolute-form request line (any mode): the origin form goes
	 * on, and the authority, port included, becomes Host when the
	 * client sent none... */
	parse("GET http://example.com:8080/a?b HTTP/1.0\r\nAccept: x\r\n\r\n",
	    true);
	memset(&r, 0, sizeof(r));
	assert_true(http_head_origin_form(m.target, m.tlen, &auth, &alen,
	    &r.target, &r.tlen));
	r.host = "example.com";
	r.dst = (struct sockaddr *)&dst4;
	r.client = (struct sockaddr *)&client4;
	r.upgrade = false;
	r.authority = auth;
	r.alen = alen;
	http_head_request(out, &m, &p, &r);
	expect(out, "GET /a?b HTTP/1.1\r\nAccept: x\r\n"
	    "Host: example.com:8080\r\n\r\n");
	/* ...and replaces the client's, where it stood (RFC 9112 3.2.2). */
	parse("GET http://b.test/x HTTP/1.1\r\nA: 1\r\nHost: evil.test\r\n"
	    "B: 2\r\n\r\n", true);
	assert_true(http_head_origin_form(m.target, m.tlen, &auth, &alen,
	    &r.target, &r.tlen));
	r.authority = auth;
	r.alen = alen;
	http_head_request(out, &m, &p, &r);
	expect(out, "GET /x HTTP/1.1\r\nA: 1\r\nHost: b.test\r\nB: 2\r\n\r\n");
	/* A query without a path: "/?query" goes on. */
	parse("GET http://b.test:81?x=1 HTTP/1.1\r\nHost: b\r\n\r\n", true);
	assert_true(http_head_origin_form(m.target, m.tlen, &auth, &alen,
	    &r.target, &r.tlen));
	r.authority = auth;
	r.alen = alen;
	http_head_request(out, &m, &p, &r);
	expect(out, "GET /?x=1 HTTP/1.1\r\nHost: b.test:81\r\n\r\n");
	evbuffer_free(out);
}

static void
test_response(void **state)
{
	struct http_policy p = plain();
	struct http_header_rule rules[] = {
		{ .name = "Server", .action = HTTP_DROP },
		{ .name = "X-Ch", .action = HTTP_CHANGE, .value = "changed" },
		{ .name = "X-Ins", .action = HTTP_INSERT, .value = "ins" },
	};

	(void)state;
	/* The status line in HTTP/1.1 with the server's status and reason;
	 * kept HTTP/1.1 client: no Connection. */
	response("HTTP/1.0 404 Not Here\r\nContent-Length: 0\r\n\r\n", &p,
	    false, true, false,
	    "HTTP/1.1 404 Not Here\r\nContent-Length: 0\r\n\r\n");
	/* Without a reason the space stays. */
	response("HTTP/1.1 204\r\n\r\n", &p, false, true, false,
	    "HTTP/1.1 204 \r\n\r\n");
	/* Rules, Via with the server's version, the client's Connection. */
	p.resph = rules;
	p.nresph = sizeof(rules) / sizeof(rules[0]);
	p.via = true;
	response("HTTP/1.0 200 OK\r\nServer: nginx\r\nX-Ch: orig\r\n"
	    "Content-Length: 2\r\n\r\n", &p, false, false, false,
	    "HTTP/1.1 200 OK\r\nX-Ch: changed\r\nContent-Length: 2\r\n"
	    "X-Ins: ins\r\nVia: 1.0 proxyd\r\nConnection: close\r\n\r\n");
	p.resph = NULL;
	p.nresph = 0;
	p.via = false;
	/* A kept HTTP/1.0 client is told so. */
	response("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", &p, false,
	    true, true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Connection: keep-alive\r\n\r\n");
	/* Interim: no Connection of ours, the final response follows. */
	response("HTTP/1.1 100 Continue\r\n\r\n", &p, true, false, true,
	    "HTTP/1.1 100 Continue\r\n\r\n");
}

/* http_field_fn: each field as "name: value\n" in the evbuffer arg. */
static void
gather(void *arg, const char *name, size_t nlen, const char *val,
    size_t vlen)
{
	struct evbuffer *out = arg;

	assert_non_null(name);
	evbuffer_add(out, name, nlen);
	evbuffer_add(out, ": ", 2);
	evbuffer_add(out, val, vlen);
	evbuffer_add(out, "\n", 1);
}

static void
response_fields(const char *s, const struct http_policy *p,
    const char *extra, const char *want)
{
	struct evbuffer *out = evbuffer_new();
	struct http_resp_ctx r = { .client_keep = false, .extra = extra };

	assert_non_null(out);
	parse(s, false);
	http_head_response_fields(&m, p, &r, gather, out);
	expect(out, want);
	evbuffer_free(out);
}

/* The fields of a response for an HTTP/2 client: those of the HTTP/1.1
 * head, without Transfer-Encoding and Connection, <auth>'s extra lines
 * as fields, Via as the text says it. */
static void
test_response_fields(void **state)
{
	struct http_policy p = plain();
	struct http_header_rule rules[] = {
		{ .name = "Server", .action = HTTP_DROP },
		{ .name = "X-Ch", .action = HTTP_CHANGE, .value = "changed" },
		{ .name = "X-Ins", .action = HTTP_INSERT, .value = "ins" },
	};

	(void)state;
	response_fields("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\n"
	    "X-A: a\r\n\r\n", &p, NULL, "X-A: a\n");
	p.resph = rules;
	p.nresph = sizeof(rules) / sizeof(rules[0]);
	p.via = true;
	response_fields("HTTP/1.0 200 OK\r\nServer: nginx\r\nX-Ch: orig\r\n"
	    "Content-Length: 002\r\n\r\n", &p,
	    "WWW-Authenticate: Negotiate abc\r\nX-E:\tv\r\n",
	    "X-Ch: changed\nContent-Length: 2\nX-Ins: ins\n"
	    "WWW-Authenticate: Negotiate abc\nX-E: v\nVia: 1.0 proxyd\n");
	p.resph = NULL;
	p.nresph = 0;
	response_fields("HTTP/1.1 204 No\r\n\r\n", &p, NULL,
	    "Via: 1.1 proxyd\n");
	/* minor 2: an HTTP/2 server's head (no status line to parse) */
	parse("HTTP/1.1 204 No\r\n\r\n", false);
	m.minor = 2;
	{
		struct evbuffer *out = evbuffer_new();
		struct http_resp_ctx r = { .client_keep = true };

		assert_non_null(out);
		http_head_response_fields(&m, &p, &r, gather, out);
		expect(out, "Via: 2 proxyd\n");
		/* the text writer says the same */
		http_head_response(out, &m, &p, &r);
		expect(out, "HTTP/1.1 204 No\r\nVia: 2 proxyd\r\n\r\n");
		/* proxyd's own reply: its fields as they are, without those
		 * of one HTTP/1.1 connection */
		parse("HTTP/1.1 503 Busy\r\nContent-Length: 3\r\n"
		    "Connection: close\r\nRetry-After: 1\r\n\r\n", false);
		r.own = true;
		http_head_response_fields(&m, &p, &r, gather, out);
		expect(out, "Content-Length: 3\nRetry-After: 1\n");
		evbuffer_free(out);
	}
}

static void
test_dechunk(void **state)
{
	struct http_policy p = plain();

	(void)state;
	/* HTTP/1.0 client, chunked response: no Transfer-Encoding (the data
	 * goes without its chunk framing), the end is the close. */
	response("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Transfer-Encoding: chunked\r\nX-After: 1\r\n\r\n", &p, true,
	    false, true, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "X-After: 1\r\nConnection: close\r\n\r\n");
	/* Not dechunking: Transfer-Encoding passes. */
	response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &p,
	    false, true, false,
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
}

/* Framing goes on in one canonical form. */
static void
test_canonical_framing(void **state)
{
	struct http_policy p = plain();

	(void)state;
	/* Content-Length: decimal without leading zeros */
	request("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n",
	    &p, "a", false, "POST /a HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 7\r\n\r\n");
	request("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0000\r\n\r\n",
	    &p, "a", false, "POST /a HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 0\r\n\r\n");
	response("HTTP/1.1 200 OK\r\nContent-Length: 00012\r\n\r\n", &p,
	    false, true, false,
	    "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
	/* Transfer-Encoding: one field, lower case, ", " */
	request("POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n"
	    "\r\n", &p, "a", false, "POST /a HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	request("POST /a HTTP/1.1\r\nTransfer-Encoding: Gzip ,\tx-y\r\n"
	    "Host: a\r\ntransfer-encoding:chunked\r\n\r\n", &p, "a", false,
	    "POST /a HTTP/1.1\r\nTransfer-Encoding: gzip, x-y, chunked\r\n"
	    "Host: a\r\n\r\n");
}

/* Names with '_' are dropped unless underscore-headers="pass". */
static void
test_underscore(void **state)
{
	struct http_policy p = plain();

	(void)state;
	request("GET /a HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1.2.3.4\r\n"
	    "X-Ok: 1\r\nauth_user: root\r\n\r\n", &p, "a", false,
	    "GET /a HTTP/1.1\r\nHost: a\r\nX-Ok: 1\r\n\r\n");
	response("HTTP/1.1 200 OK\r\nX_Y: 1\r\nContent-Length: 0\r\n\r\n", &p,
	    false, true, false,
	    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	p.underscore_pass = true;
	request("GET /a HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1.2.3.4\r\n"
	    "\r\n", &p, "a", false,
	    "GET /a HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1.2.3.4\r\n\r\n");
}

/* The end of a chunked body: trailers dropped, or passed without the
 * fields a trailer section must not carry. */
static void
test_trailers(void **state)
{
	static const char sec[] = "X-Sum: 1\r\nContent-Length: 5\r\n"
	    "Host: b\r\nConnection: close\r\nX: 2\r\nTrailer: X\r\n"
	    "Proxy-Authorization: y\r\nX_U: 3\r\nSet-Cookie: c\r\n"
	    "Drop-Me: 4\r\n\r\n";
	struct http_header_rule rules[] = {
		{ .name = "Drop-Me", .action = HTTP_DROP },
		{ .name = "Ins", .action = HTTP_INSERT, .value = "i" },
	};
	struct http_policy p = plain();
	struct evbuffer *out = evbuffer_new();
	const char *why;

	(void)state;
	assert_non_null(out);
	assert_int_equal(http_parse_trailers(sec, strlen(sec), &lim, &m, &why),
	    (ssize_t)strlen(sec));
	http_head_trailers(out, &m, &p, true);
	expect(out, "0\r\n\r\n");
	p.trailers_pass = true;
	p.reqh = rules;
	p.nreqh = 2;
	http_head_trailers(out, &m, &p, true);
	expect(out, "0\r\nX-Sum: 1\r\nX: 2\r\n\r\n");
	/* the response rules for a response */
	http_head_trailers(out, &m, &p, false);
	expect(out, "0\r\nX-Sum: 1\r\nX: 2\r\nDrop-Me: 4\r\n\r\n");
	assert_int_equal(http_parse_trailers("\r\n", 2, &lim, &m, &why), 2);
	http_head_trailers(out, &m, &p, true);
	expect(out, "0\r\n\r\n");
	evbuffer_free(out);
}

/* proxyd's own reply (r.own): its fields as they are, whatever the rules,
 * Via and the client's Connection would make of a server's. */
static void
test_own(void **state)
{
	struct http_policy p = plain();
	struct http_header_rule rules[] = {
		{ .name = "Cache-Control", .action = HTTP_DROP },
		{ .name = "X-Ins", .action = HTTP_INSERT, .value = "ins" },
	};
	struct evbuffer *out = evbuffer_new();
	struct http_resp_ctx r = { .own = true };
	static const char head[] = "HTTP/1.1 429 Too Many Requests\r\n"
	    "Content-Type: text/html\r\nContent-Length: 5\r\n"
	    "Retry-After: 3\r\nConnection: keep-alive\r\n"
	    "Cache-Control: no-store\r\n\r\n";

	(void)state;
	assert_non_null(out);
	p.resph = rules;
	p.nresph = sizeof(rules) / sizeof(rules[0]);
	p.via = true;
	parse(head, false);
	http_head_response(out, &m, &p, &r);
	expect(out, head);
	http_head_own(out, &m);
	expect(out, head);
	evbuffer_free(out);
}

/* http_head_dup: the copy owns its bytes, the buffer parsed from may go;
 * it writes the same head. */
static void
test_dup(void **state)
{
	struct http_policy p = plain();
	struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
	struct http_req_ctx r;
	struct http_head *c;
	static const char req[] = "POST /up?x=1 HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 3\r\nX-A: one\r\nX-B:\r\n\r\n";
	char *buf = strdup(req);
	size_t scanned = 0, wlen;
	ssize_t end;
	const char *why;
	char *want;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(buf);
	end = http_head_end(buf, strlen(buf), lim.max_header_bytes, &scanned);
	assert_true(end > 0);
	assert_int_equal(http_parse_head(buf, (size_t)end, true, &lim, &m,
	    &why), 0);
	memset(&r, 0, sizeof(r));
	r.target = m.target;
	r.tlen = m.tlen;
	r.host = "h";
	r.dst = (struct sockaddr *)&dst4;
	r.client = (struct sockaddr *)&client4;
	http_head_request(a, &m, &p, &r);
	c = http_head_dup(&m);
	assert_non_null(c);
	memset(buf, 'z', strlen(req));
	free(buf);
	memset(&m, 0, sizeof(m));
	assert_int_equal(c->nhdr, 4);
	assert_int_equal(c->content_length, 3);
	assert_int_equal(c->hdr[3].vlen, 0);
	r.target = c->target;
	r.tlen = c->tlen;
	http_head_request(b, c, &p, &r);
	wlen = evbuffer_get_length(a);
	want = malloc(wlen + 1);
	assert_non_null(want);
	evbuffer_remove(a, want, wlen);
	want[wlen] = '\0';
	expect(b, want);
	assert_int_equal(strncmp(want, "POST /up?x=1 HTTP/1.1\r\n", 23), 0);
	free(want);
	free(c);
	evbuffer_free(a);
	evbuffer_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hop_by_hop),
		cmocka_unit_test(test_request_rules),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_xff_via_connection),
		cmocka_unit_test(test_upgrade),
		cmocka_unit_test(test_origin_form),
		cmocka_unit_test(test_response),
		cmocka_unit_test(test_response_fields),
		cmocka_unit_test(test_dechunk),
		cmocka_unit_test(test_canonical_framing),
		cmocka_unit_test(test_underscore),
		cmocka_unit_test(test_trailers),
		cmocka_unit_test(test_own),
		cmocka_unit_test(test_dup),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
