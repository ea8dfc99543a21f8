/* The head writers against their frozen copy (http_head_ref.inc): random
 * requests, responses and trailer sections, parsed by http_parse.c, go
 * through both with random policies and contexts, and the bytes must be
 * the same. The writers are rewritten for speed; what they write is not
 * to move by a byte. HTTP_HEAD_DIFF_SEED=N replays another sequence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "http/http_head.h"
#include "parse.h"

#include "http_head_ref.inc"

#define ROUNDS	40000

static const struct http_limits lim = {
	.max_line = 1024, .max_header_lines = 64, .max_header_bytes = 8192,
	.max_url = 512,
};
static struct sockaddr_storage client4, client6, dst4, dst6;
static uint64_t rng_state;

static unsigned
rnd(unsigned n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (unsigned)(rng_state % n);
}

#define PICK(a) ((a)[rnd(sizeof(a) / sizeof((a)[0]))])

/* Names the writers treat apart (framing, hop-by-hop, trailer-forbidden,
 * Host, X-Forwarded-For), some that share a length or a prefix with one,
 * and plain ones. */
static const char *const names[] = { "host", "connection", "keep-alive",
    "te", "trailer", "upgrade", "proxy-connection", "proxy-authorization",
    "proxy-x", "proxy-", "transfer-encoding", "content-length",
    "x-forwarded-for", "via", "accept", "cookie", "set-cookie",
    "content-type", "content-encoding", "content-range", "expect", "range",
    "authorization", "x-foo", "x-bar", "x-baz", "x_under", "user-agent",
    "date", "server", "etag", "tf", "ts", "hosts", "hostx", "trailers",
    "upgrades", "connectioN2", "keep_alive2", "x-cookie", "x-range",
    "content-lengthx",
    ("x-a-very-long-header-name-that-is-longer-than-sixty-four-bytes-in-all"),
    "a", "x-forwarded-fox", "trailez",
    "transfer-encodinf", "proxy-connectioo", "keep-alivf", "connectioo" };

/* name with letters of random case, or a random token. */
static void
random_name(char *buf, size_t size)
{
	static const char tch[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
	    "TUVWXYZ0123456789-_!#$%&'*+.^`|~";
	size_t i, n;

	if (rnd(6) == 0) {
		n = 1 + rnd(14);
		for (i = 0; i < n && i + 1 < size; i++)
			buf[i] = tch[rnd(rnd(4) ? 27 : sizeof(tch) - 1)];
		buf[i] = '\0';
		return;
	}
	snprintf(buf, size, "%s", PICK(names));
	if (rnd(3) != 0)
		for (i = 0; buf[i] != '\0'; i++)
			if (rnd(3) == 0 || (i == 0 && rnd(2) == 0) ||
			    (i > 0 && buf[i - 1] == '-' && rnd(2) == 0))
				buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ?
				    buf[i] - 32 : buf[i]);
}

/* A Connection value: tokens, some naming fields, in a sloppy list. */
static void
random_conn(char *buf, size_t size)
{
	static const char *const seps[] = { ",", ", ", " ,", ",,", ",\t", " , " };
	char name[96];
	size_t n = 0, i, k = rnd(8) ? 1 + rnd(3) : 1 + rnd(24);

	buf[0] = '\0';
	for (i = 0; i < k; i++) {
		if (rnd(3) == 0)
			snprintf(name, sizeof(name), "%s", rnd(2) ? "close" :
			    rnd(2) ? "Keep-Alive" : "upgrade");
		else
			random_name(name, sizeof(name));
		n += (size_t)snprintf(buf + n, size - n, "%s%s",
		    i ? PICK(seps) : rnd(5) == 0 ? ", " : "", name);
		if (n >= size)
			return;
	}
}

static void
random_value(char *buf, size_t size, const char *name)
{
	static const char *const tes[] = { "chunked", "gzip, chunked",
	    "GZip ,\tChunked", "x-custom, deflate,chunked", "gzip", "Chunked" };
	static const char *const vals[] = { "", "v", "a b", "*/*",
	    "text/html; charset=utf-8", "198.51.100.1", "100-continue",
	    "websocket", "h2c", "1.1 other", "Mon, 01 Dec 2026 10:00:00 GMT",
	    "\"etag\"", "x\ty", "a,b, c" };

	if (strcasecmp(name, "connection") == 0 ||
	    strcasecmp(name, "proxy-connection") == 0)
		random_conn(buf, size);
	else if (strcasecmp(name, "transfer-encoding") == 0)
		snprintf(buf, size, "%s", PICK(tes));
	else if (strcasecmp(name, "content-length") == 0)
		snprintf(buf, size, "%s%u", rnd(4) == 0 ? "00" : "",
		    rnd(3) == 0 ? rnd(100000000) : rnd(10));
	else
		snprintf(buf, size, "%s", PICK(vals));
}

/* n fields, each "Name: value" with random optional whitespace. */
static size_t
random_fields(char *buf, size_t size, unsigned n)
{
	char name[96], val[1024];
	size_t len = 0;
	unsigned i;

	for (i = 0; i < n && len < size; i++) {
		random_name(name, sizeof(name));
		random_value(val, sizeof(val), name);
		len += (size_t)snprintf(buf + len, size - len, "%s:%s%s%s\r\n",
		    name, rnd(5) ? " " : rnd(2) ? "" : " \t", val,
		    rnd(6) ? "" : " ");
	}
	return len < size ? len : size;
}

static size_t
random_head(char *buf, size_t size, bool request)
{
	static const char *const methods[] = { "GET", "POST", "HEAD", "PUT",
	    "OPTIONS", "M-SEARCH", "get" };
	static const char *const targets[] = { "/", "/a?b", "/x/y.html",
	    "http://auth.example/p?q", "http://a.example?q",
	    "HTTP://A.example:8080", "*" };
	static const char *const stats[] = { "200 OK", "204 No Content",
	    "101 Switching Protocols", "100 Continue", "404 ", "304",
	    "103 Early Hints", "599 x\ty" };
	size_t n;

	if (request)
		n = (size_t)snprintf(buf, size, "%s %s HTTP/1.%u\r\n%s",
		    PICK(methods), PICK(targets), rnd(3) ? 1 : 0,
		    rnd(4) ? "Host: h.example\r\n" : "");
	else
		n = (size_t)snprintf(buf, size, "HTTP/1.%u %s\r\n",
		    rnd(4) ? 1 : 0, PICK(stats));
	n += random_fields(buf + n, size - n, rnd(4) ? rnd(12) : rnd(40));
	n += (size_t)snprintf(buf + n, size - n, "\r\n");
	return n < size ? n : size;
}

static void
random_policy(struct http_policy *p, struct http_header_rule *rules,
    char (*rnames)[96], size_t max)
{
	static const char *const vals[] = { "v", "new value", "", "a, b" };
	size_t i, n = rnd(3) ? rnd((unsigned)max) : 0;

	memset(p, 0, sizeof(*p));
	p->keepalive_client = true;
	p->keepalive_server = rnd(3) != 0;
	p->via = rnd(2);
	p->xff = (enum http_xff)rnd(3);
	p->underscore_pass = rnd(3) == 0;
	p->trailers_pass = rnd(4) != 0;
	for (i = 0; i < n; i++) {
		random_name(rnames[i], sizeof(rnames[i]));
		rules[i].name = rnames[i];
		rules[i].action = (enum http_header_action)rnd(4);
		rules[i].value = (char *)PICK(vals);
	}
	/* The same list for both directions: a request and a response
	 * each use theirs. */
	p->reqh = p->resph = rules;
	p->nreqh = p->nresph = n;
	p->reqh_dflt = rnd(4) ? HTTP_ACCEPT : HTTP_DROP;
	p->resph_dflt = rnd(4) ? HTTP_ACCEPT : HTTP_DROP;
}

/* Empties a and b and compares them. */
static void
same(struct evbuffer *a, struct evbuffer *b, const char *head, size_t hlen,
    unsigned round, const char *what)
{
	size_t la = evbuffer_get_length(a), lb = evbuffer_get_length(b);
	const char *pa = (const char *)evbuffer_pullup(a, -1);
	const char *pb = (const char *)evbuffer_pullup(b, -1);

	if (la != lb || (la != 0 && memcmp(pa, pb, la) != 0)) {
		fprintf(stderr, "round %u (seed %llu), %s of:\n%.*s\n---\n"
		    "live:\n%.*s\n---\nfrozen:\n%.*s\n", round,
		    (unsigned long long)rng_state, what, (int)hlen, head,
		    (int)la, pa, (int)lb, pb);
		fail_msg("the %s written differs from the frozen writer's", what);
	}
	evbuffer_drain(a, la);
	evbuffer_drain(b, lb);
}

static void
one_request(struct evbuffer *a, struct evbuffer *b, const struct http_head *m,
    const struct http_policy *p, const char *head, size_t hlen, unsigned i)
{
	struct http_req_ctx r;
	const char *auth = NULL, *path = NULL, *rauth = NULL, *rpath = NULL;
	size_t alen = 0, plen = 0, ralen = 0, rplen = 0;
	bool abs = http_head_origin_form(m->target, m->tlen, &auth, &alen,
	    &path, &plen);

	assert_int_equal(abs, ref_head_origin_form(m->target, m->tlen, &rauth,
	    &ralen, &rpath, &rplen));
	if (abs) {
		assert_true(auth == rauth && alen == ralen && plen == rplen);
		assert_memory_equal(path, rpath, plen);
	}
	memset(&r, 0, sizeof(r));
	r.target = abs ? path : m->target;
	r.tlen = abs ? plen : m->tlen;
	r.authority = abs ? auth : NULL;
	r.alen = alen;
	r.host = rnd(2) ? "h.example" : "";
	r.dst = (struct sockaddr *)(rnd(4) ? &dst4 : &dst6);
	r.client = (struct sockaddr *)(rnd(3) ? &client4 : &client6);
	r.upgrade = rnd(3) == 0;
	http_head_request(a, m, p, &r);
	ref_head_request(b, m, p, &r);
	same(a, b, head, hlen, i, "request head");
}

static void
one_response(struct evbuffer *a, struct evbuffer *b, const struct http_head *m,
    const struct http_policy *p, const char *head, size_t hlen, unsigned i)
{
	struct http_resp_ctx r = { .dechunk = rnd(3) == 0,
	    .client_keep = rnd(3) != 0, .client_10 = rnd(3) == 0 };

	http_head_response(a, m, p, &r);
	ref_head_response(b, m, p, &r);
	same(a, b, head, hlen, i, "response head");
}

static void
one_trailers(struct evbuffer *a, struct evbuffer *b, struct http_head *t,
    const struct http_policy *p, unsigned i)
{
	char buf[4096];
	const char *why;
	size_t n = random_fields(buf, sizeof(buf) - 3, rnd(8));
	bool request = rnd(2);

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
	if (http_parse_trailers(buf, n, &lim, t, &why) <= 0)
		return;
	http_head_trailers(a, t, p, request);
	ref_head_trailers(b, t, p, request);
	same(a, b, buf, n, i, "trailer section");
}

static void
test_diff_random(void **state)
{
	static struct http_head m;
	static char buf[16384];
	static struct http_header_rule rules[8];
	static char rnames[8][96];
	struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
	struct http_policy p;
	const char *seed = getenv("HTTP_HEAD_DIFF_SEED"), *why;
	unsigned i, written[2] = { 0, 0 };

	(void)state;
	assert_true(a != NULL && b != NULL);
	rng_state = seed != NULL ? strtoull(seed, NULL, 10) : 88172645463325252ULL;
	if (rng_state == 0)
		rng_state = 1;
	for (i = 0; i < ROUNDS; i++) {
		bool request = i % 2 == 0;
		size_t n = random_head(buf, sizeof(buf), request);

		random_policy(&p, rules, rnames, 8);
		if (http_parse_head(buf, n, request, &lim, &m, &why) == 0) {
			written[request]++;
			if (request)
				one_request(a, b, &m, &p, buf, n, i);
			else
				one_response(a, b, &m, &p, buf, n, i);
		}
		one_trailers(a, b, &m, &p, i);
	}
	fprintf(stderr, "%u requests, %u responses written of %u\n",
	    written[1], written[0], ROUNDS);
	/* The generator makes heads the parser takes, of both kinds. */
	assert_true(written[1] > ROUNDS / 8 && written[0] > ROUNDS / 8);
	evbuffer_free(a);
	evbuffer_free(b);
}

static int
setup(void **state)
{
	const char *why;
	socklen_t sl;

	(void)state;
	if (px_parse_ip("10.0.0.7", 40000, &client4, &sl, &why) == -1 ||
	    px_parse_ip("2001:db8::7", 40000, &client6, &sl, &why) == -1 ||
	    px_parse_ip("192.0.2.1", 8080, &dst4, &sl, &why) == -1 ||
	    px_parse_ip("2001:db8::1", 80, &dst6, &sl, &why) == -1)
		return -1;
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diff_random),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
