/* An HTTP/2 request's decoded fields made a parsed head (http_h2_req.h):
 * pure, the message layer's struct http_head without HTTP/1.1 text. */
#include "http_h2_req.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_FAIL(code, msg) do { *why = (msg); return (code); } while (0)

void
http_h2_req_init(struct http_h2_req *r)
{
	memset(r, 0, sizeof(*r));
	r->method = r->scheme = r->authority = r->path = r->protocol =
	    r->host = -1;
}

void
http_h2_req_free(struct http_h2_req *r)
{
	free(r->buf);
	free(r->f);
	http_h2_req_init(r);
}

/* len more bytes at the end of buf: their offset, or -1. */
static int64_t
http_h2_req_room(struct http_h2_req *r, size_t len)
{
	size_t cap = r->cap != 0 ? r->cap : 256;
	char *nb;

	if (len > UINT32_MAX - r->len)
		return -1;
	while (cap < r->len + len)
		cap *= 2;
	if (cap != r->cap) {
		if ((nb = realloc(r->buf, cap)) == NULL)
			return -1;
		r->buf = nb;
		r->cap = cap;
	}
	r->len += len;
	return (int64_t)(r->len - len);
}

/* A field (name, value) kept in r: its index, or -1. */
static int
http_h2_req_keep(struct http_h2_req *r, const char *name, size_t nlen,
    const char *val, size_t vlen)
{
	struct http_h2_field *nf;
	int64_t o;

	if (r->n == r->fcap) {
		unsigned fcap = r->fcap != 0 ? r->fcap * 2 : 16;

		if ((nf = realloc(r->f, fcap * sizeof(*nf))) == NULL)
			return -1;
		r->f = nf;
		r->fcap = fcap;
	}
	if ((o = http_h2_req_room(r, nlen + vlen)) == -1)
		return -1;
	memcpy(r->buf + o, name, nlen);
	memcpy(r->buf + o + (int64_t)nlen, val, vlen);
	r->f[r->n] = (struct http_h2_field){ (uint32_t)o, (uint32_t)nlen,
	    (uint32_t)(o + (int64_t)nlen), (uint32_t)vlen };
	return (int)r->n++;
}

static bool
http_h2_is(const char *name, size_t nlen, const char *lit)
{
	return nlen == strlen(lit) && memcmp(name, lit, nlen) == 0;
}

int
http_h2_req_add(struct http_h2_req *r, const char *name, size_t nlen,
    const char *val, size_t vlen)
{
	int *pseudo = NULL, i;

	if (r->failed)
		return -1;
	if (nlen != 0 && name[0] == ':') {
		if (http_h2_is(name, nlen, ":method"))
			pseudo = &r->method;
		else if (http_h2_is(name, nlen, ":scheme"))
			pseudo = &r->scheme;
		else if (http_h2_is(name, nlen, ":authority"))
			pseudo = &r->authority;
		else if (http_h2_is(name, nlen, ":path"))
			pseudo = &r->path;
		else if (http_h2_is(name, nlen, ":protocol"))
			pseudo = &r->protocol;
		if (pseudo == NULL || *pseudo != -1) {
			r->bad = true;
			return 0;
		}
	}
	if ((i = http_h2_req_keep(r, name, nlen, val, vlen)) == -1) {
		r->failed = true;
		return -1;
	}
	if (pseudo != NULL)
		*pseudo = i;
	else if (http_h2_is(name, nlen, "host") && r->host == -1)
		r->host = i;
	return 0;
}

/* The value of field i ("" when i is -1). */
static const char *
http_h2_val(const struct http_h2_req *r, int i, size_t *len)
{
	*len = i == -1 ? 0 : r->f[i].vl;
	return i == -1 ? "" : r->buf + r->f[i].vo;
}

/* Appends the cookie crumbs joined by "; " (empty ones add nothing) and
 * the absolute target of forward mode to buf: their offsets in *co, *to
 * and lengths in *cl, *tl (0: none). 0, or -1 out of memory. */
static int
http_h2_req_join(struct http_h2_req *r, bool forward, bool connect,
    uint32_t *co, size_t *cl, uint32_t *to, size_t *tl)
{
	size_t need = 0, alen, plen, slen, n;
	const char *v;
	unsigned i;
	int64_t o;
	char *d;

	for (i = 0; i < r->n; i++)
		if (http_h2_is(r->buf + r->f[i].no, r->f[i].nl, "cookie") &&
		    r->f[i].vl != 0)
			need += r->f[i].vl + 2;
	(void)http_h2_val(r, r->authority, &alen);
	(void)http_h2_val(r, r->path, &plen);
	(void)http_h2_val(r, r->scheme, &slen);
	*tl = 0;
	if (forward && !connect && alen != 0)
		*tl = slen + 3 + alen + (plen == 1 &&
		    r->buf[r->f[r->path].vo] == '*' ? 0 : plen);
	if ((o = http_h2_req_room(r, need + *tl)) == -1)
		return -1;
	d = r->buf + o;
	*co = (uint32_t)o;
	for (i = 0, n = 0; i < r->n; i++) {
		if (!http_h2_is(r->buf + r->f[i].no, r->f[i].nl, "cookie") ||
		    r->f[i].vl == 0)
			continue;
		if (n != 0) {
			memcpy(d + n, "; ", 2);
			n += 2;
		}
		memcpy(d + n, r->buf + r->f[i].vo, r->f[i].vl);
		n += r->f[i].vl;
	}
	*cl = n;
	*to = (uint32_t)(o + (int64_t)n);
	if (*tl == 0)
		return 0;
	d += n;
	v = http_h2_val(r, r->scheme, &slen);
	memcpy(d, v, slen);
	memcpy(d + slen, "://", 3);
	v = http_h2_val(r, r->authority, &alen);
	memcpy(d + slen + 3, v, alen);
	v = http_h2_val(r, r->path, &plen);
	if (*tl > slen + 3 + alen)
		memcpy(d + slen + 3 + alen, v, plen);
	return 0;
}

/* One field line of the text the head would be: counted against the
 * limits (*lines, *bytes) as the HTTP/1.1 parser counts them, then added. */
static int
http_h2_line(struct http_head *m, const char *name, size_t nlen,
    const char *val, size_t vlen, const struct http_limits *lim,
    size_t *lines, size_t *bytes, const char **why)
{
	if (nlen + 2 + vlen > lim->max_line)
		HTTP_FAIL(431, "header line too long");
	if (++*lines > lim->max_header_lines)
		HTTP_FAIL(431, "too many header lines");
	*bytes += nlen + 2 + vlen + 2;
	return http_head_add_field(m, name, nlen, val, vlen, why);
}

int
http_h2_req_head(struct http_h2_req *r, bool forward, bool unsized,
    const struct http_limits *lim, struct http_head *m, const char **why)
{
	const char *method, *target, *auth, *host, *proto;
	size_t mlen, tlen, alen, hlen, plen, cl, tl, lines = 0, bytes;
	uint32_t co, to;
	bool connect, ws;
	unsigned i;
	int rc;

	if (r->failed)
		HTTP_FAIL(500, "out of memory");
	if (r->bad || r->method == -1)
		HTTP_FAIL(400, "malformed pseudo-headers");
	method = http_h2_val(r, r->method, &mlen);
	/* An extended CONNECT is a GET with Upgrade (RFC 8441 5). */
	connect = mlen == 7 && memcmp(method, "CONNECT", 7) == 0 &&
	    r->protocol == -1;
	if (http_h2_req_join(r, forward, connect, &co, &cl, &to, &tl) == -1)
		HTTP_FAIL(500, "out of memory");
	/* Pointers into buf only now: the join may have moved it. */
	method = http_h2_val(r, r->method, &mlen);
	auth = http_h2_val(r, r->authority, &alen);
	host = http_h2_val(r, r->host, &hlen);
	proto = http_h2_val(r, r->protocol, &plen);
	ws = plen == 9 && strncasecmp(proto, "websocket", 9) == 0;
	if (r->protocol != -1)
		method = "GET", mlen = 3;
	if (connect)
		target = auth, tlen = alen;
	else if (tl != 0)
		target = r->buf + to, tlen = tl;
	else
		target = http_h2_val(r, r->path, &tlen);
	http_head_start(m, true);
	/* "METHOD TARGET HTTP/1.1" */
	if (mlen + 1 + tlen + 9 > lim->max_line)
		HTTP_FAIL(414, "request line too long");
	if ((rc = http_head_request_target(m, method, mlen, target, tlen, lim,
	    why)) != 0)
		return rc;
	bytes = mlen + 1 + tlen + 11;
	/* Host: the authority, and a host field naming another after it
	 * (two Hosts: refused as in HTTP/1.1); or the host field alone. */
	if (alen != 0 && (rc = http_h2_line(m, "Host", 4, auth, alen, lim,
	    &lines, &bytes, why)) != 0)
		return rc;
	if (hlen != 0 && (alen == 0 || hlen != alen ||
	    strncasecmp(host, auth, alen) != 0) &&
	    (rc = http_h2_line(m, "Host", 4, host, hlen, lim, &lines, &bytes,
	    why)) != 0)
		return rc;
	for (i = 0; i < r->n; i++) {
		const char *name = r->buf + r->f[i].no;
		size_t nlen = r->f[i].nl;

		if (nlen == 0 || name[0] == ':' || (int)i == r->host ||
		    http_h2_is(name, nlen, "cookie") ||
		    (ws && http_h2_is(name, nlen, "sec-websocket-key")))
			continue;
		/* A second host field: two Hosts, refused. */
		if (http_h2_is(name, nlen, "host"))
			name = "Host";
		if ((rc = http_h2_line(m, name, nlen, r->buf + r->f[i].vo,
		    r->f[i].vl, lim, &lines, &bytes, why)) != 0)
			return rc;
	}
	if (cl != 0 && (rc = http_h2_line(m, "Cookie", 6, r->buf + co, cl,
	    lim, &lines, &bytes, why)) != 0)
		return rc;
	if (r->protocol != -1 && ((rc = http_h2_line(m, "Upgrade", 7, proto,
	    plen, lim, &lines, &bytes, why)) != 0 || (rc = http_h2_line(m,
	    "Connection", 10, "Upgrade", 7, lim, &lines, &bytes, why)) != 0))
		return rc;
	if (ws && r->ws_key[0] != '\0' && (rc = http_h2_line(m,
	    "Sec-WebSocket-Key", 17, r->ws_key, strlen(r->ws_key), lim, &lines,
	    &bytes, why)) != 0)
		return rc;
	if (unsized && (rc = http_h2_line(m, "Transfer-Encoding", 17,
	    "chunked", 7, lim, &lines, &bytes, why)) != 0)
		return rc;
	if (bytes + 2 > lim->max_header_bytes)
		HTTP_FAIL(431, "request head over max-header-bytes");
	m->head_len = 0;	/* none of it in the client's input */
	return http_head_check(m, why);
}
