/* libFuzzer target for the http analyser's parser (plugins/http/
 * http_parse.c): http_head_end and http_parse_head as a request and as a
 * response, then what follows the head through http_chunk_feed. Beyond
 * the sanitizers it checks the parser's own promises and aborts when one
 * breaks:
 *   - http_head_end finds the same end whether the input arrives at once
 *     or a few bytes at a time (resumable through *scanned);
 *   - http_parse_head keeps every pointer inside the head, reports a known
 *     status on failure and sane framing on success;
 *   - http_chunk_feed gives the same result (bytes consumed, body size,
 *     error or not) fed at once, in pieces, and byte by byte, and never
 *     consumes past the end of the body;
 *   - http_target_canon, on a parsed request's target, merging slashes or
 *     not, writes no more than tlen + 2 bytes, gives a path with no dot
 *     segment (nor "//" when merging, nor "..;") that is its own canonical
 *     form, and the query as sent (which http_query_decode decodes into no
 *     more bytes, or refuses with 400), and refuses only with 400 (or 414
 *     for a buffer too small) and a why.
 * Build and run: tests/fuzz/run.sh http SECONDS */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_parse.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s " \
	"(%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

static const struct http_limits lim = {
	.max_line = 1024,
	.max_header_lines = 64,
	.max_header_bytes = 4096,
	.max_url = 512,
};

static struct http_head head;

static bool
inside(const char *p, size_t len, const char *buf, size_t blen)
{
	return p >= buf && p + len <= buf + blen;
}

/* http_target_canon on a request target. */
static void
check_canon(const char *t, size_t tlen, bool merge)
{
	static char buf[2 * 512 + 8], again[sizeof(buf)];
	struct http_target o, o2;
	const char *why = NULL;
	size_t plen;
	int rc;

	memset(buf, 0x55, sizeof(buf));
	rc = http_target_canon(t, tlen, merge, buf, tlen + 3, &o, &why);
	for (plen = tlen + 3; plen < sizeof(buf); plen++)
		CHECK((unsigned char)buf[plen] == 0x55);
	if (rc != 0) {
		CHECK(rc == 400 && why != NULL);
		CHECK(http_target_canon(t, tlen, merge, buf, tlen + 2, &o,
		    &why) == 414);
		return;
	}
	CHECK(o.path == buf && o.plen == strlen(o.path) && o.plen <= tlen + 1);
	CHECK(o.path[0] == '/' || (o.plen == 1 && o.path[0] == '*'));
	CHECK(strstr(o.path, "/./") == NULL && strstr(o.path, "/../") == NULL);
	CHECK(!merge || strstr(o.path, "//") == NULL);
	CHECK((o.query == NULL) == (o.sent_query == NULL));
	CHECK(strstr(o.path, "/.;") == NULL && strstr(o.path, "/..;") == NULL);
	if (o.query != NULL) {
		static char d[sizeof(buf)];
		const char *w = NULL;
		size_t l;
		int r;

		CHECK(o.query > o.path + o.plen && o.query + strlen(o.query) <
		    buf + tlen + 3 && inside(o.sent_query, o.sent_qlen, t, tlen));
		/* the query query= reads is the one sent */
		CHECK(strlen(o.query) == o.sent_qlen &&
		    memcmp(o.query, o.sent_query, o.sent_qlen) == 0);
		r = http_query_decode(o.query, o.sent_qlen, d, &l, &w);
		CHECK((r == 0 && l <= o.sent_qlen && strlen(d) == l) ||
		    (r == 400 && w != NULL));
	}
	plen = o.plen;
	memcpy(again, o.path, plen);
	CHECK(http_target_canon(again, plen, merge, buf, plen + 3, &o2,
	    &why) == 0);
	CHECK(o2.plen == plen && memcmp(o2.path, again, plen) == 0);
}

static void
check_head(const char *buf, size_t len, bool request)
{
	const char *why = NULL;
	unsigned i;
	int rc;

	rc = http_parse_head(buf, len, request, &lim, &head, &why);
	if (rc != 0) {
		CHECK(why != NULL);
		CHECK(rc == 400 || rc == 414 || rc == 431 || rc == 501 ||
		    rc == 502 || rc == 505);
		return;
	}
	CHECK(head.head_len == len);
	CHECK(head.nhdr <= lim.max_header_lines && head.nhdr <= HTTP_MAX_HEADERS);
	CHECK(head.minor == 0 || head.minor == 1);
	CHECK(head.content_length >= -1);
	CHECK(!(head.content_length != -1 && head.has_te));
	CHECK(!head.has_te || head.chunked);
	if (request) {
		CHECK(head.mlen > 0 && inside(head.method, head.mlen, buf, len));
		CHECK(head.tlen > 0 && head.tlen <= lim.max_url &&
		    inside(head.target, head.tlen, buf, len));
		CHECK(head.minor == 0 || head.host >= 0);
		check_canon(head.target, head.tlen, true);
		check_canon(head.target, head.tlen, false);
	} else {
		CHECK(head.status >= 100 && head.status <= 999);
		CHECK(inside(head.reason, head.rlen, buf, len));
	}
	CHECK(head.host < (int)head.nhdr && head.upgrade < (int)head.nhdr);
	for (i = 0; i < head.nhdr; i++) {
		const struct http_hdr *f = &head.hdr[i];
		size_t k;

		CHECK(f->nlen > 0 && inside(f->name, f->nlen, buf, len));
		CHECK(inside(f->val, f->vlen, buf, len));
		for (k = 0; k < f->nlen; k++)
			CHECK(http_is_tchar((unsigned char)f->name[k]));
		for (k = 0; k < f->vlen; k++)
			CHECK(f->val[k] != '\r' && f->val[k] != '\n' &&
			    f->val[k] != '\0');
	}
}

/* The head end, fed in steps of `step` bytes (0: all at once). */
static ssize_t
head_end_steps(const char *buf, size_t len, size_t step)
{
	size_t scanned = 0, have;
	ssize_t end = 0;

	if (step == 0)
		return http_head_end(buf, len, lim.max_header_bytes, &scanned);
	for (have = 0; have < len;) {
		have = have + step < len ? have + step : len;
		end = http_head_end(buf, have, lim.max_header_bytes, &scanned);
		if (end != 0)
			return end;
	}
	return end;
}

struct feed_result {
	ssize_t	consumed;	/* -1: error */
	uint64_t body;
	bool	done;
};

static struct feed_result
chunk_steps(const char *p, size_t len, size_t step)
{
	struct http_chunk c;
	struct feed_result r = { 0, 0, false };
	size_t off = 0;
	const char *why;

	memset(&c, 0, sizeof(c));
	while (off < len && c.state != HTTP_CHUNK_DONE) {
		size_t n = step == 0 || len - off < step ? len - off : step;
		ssize_t k = http_chunk_feed(&c, p + off, n, &lim, &why);

		if (k < 0) {
			CHECK(why != NULL);
			r.consumed = -1;
			return r;
		}
		CHECK((size_t)k <= n);
		CHECK((size_t)k == n || c.state == HTTP_CHUNK_DONE);
		off += (size_t)k;
	}
	r.consumed = (ssize_t)off;
	r.body = c.body;
	r.done = c.state == HTTP_CHUNK_DONE;
	return r;
}

static void
check_chunks(const char *p, size_t len, size_t step)
{
	struct feed_result a = chunk_steps(p, len, 0);
	struct feed_result b = chunk_steps(p, len, step);
	struct feed_result c = chunk_steps(p, len, 1);

	CHECK(a.consumed == b.consumed && a.consumed == c.consumed);
	if (a.consumed >= 0) {
		CHECK(a.body == b.body && a.body == c.body);
		CHECK(a.done == b.done && a.done == c.done);
		CHECK(a.body <= (uint64_t)a.consumed);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf;
	size_t len, step;
	ssize_t end, end2;

	if (size < 1)
		return 0;
	/* The first byte picks the step sizes of the resumed feeds. */
	step = (size_t)(data[0] % 17) + 1;
	buf = (const char *)data + 1;
	len = size - 1;

	end = head_end_steps(buf, len, 0);
	end2 = head_end_steps(buf, len, step);
	CHECK(end == end2 || (end == -1 && end2 == -1) ||
	    /* over max in one go, found earlier in steps: only when the
	     * whole input is over the cap */
	    (end == -1 && len > lim.max_header_bytes));
	if (end > 0) {
		CHECK((size_t)end <= len);
		check_head(buf, (size_t)end, true);
		check_head(buf, (size_t)end, false);
		check_chunks(buf + end, len - (size_t)end, step);
	} else {
		/* Whatever it is, as a chunked body. */
		check_chunks(buf, len, step);
	}
	return 0;
}
