/* The request target as the url rules judge it and the server is sent
 * it (http_target_canon, http_parse.h): percent-encoding made canonical,
 * dot segments removed, the query decoded for the rules. Pure. */
#include "http_parse.h"

#include <string.h>

#define HTTP_FAIL(code, msg) do { *why = (msg); return (code); } while (0)

static int
http_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* RFC 3986 2.3 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". */
bool
http_is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* The percent-encoding at p (3 bytes: '%' and two hex digits) written to
 * out as canonical: the character when it is unreserved, else '%' and the
 * digits in upper case. Returns the byte it stands for. */
static int
http_pct_canon(const char *p, char *out, size_t *n)
{
	static const char hex[] = "0123456789ABCDEF";
	int hi = http_hexval((unsigned char)p[1]);
	int lo = http_hexval((unsigned char)p[2]);
	int v = hi * 16 + lo;

	if (http_is_unreserved((unsigned char)v))
		out[(*n)++] = (char)v;
	else {
		out[(*n)++] = '%';
		out[(*n)++] = hex[hi];
		out[(*n)++] = hex[lo];
	}
	return v;
}

static bool
http_is_pct(const char *p, size_t left)
{
	return left >= 3 && p[0] == '%' &&
	    http_hexval((unsigned char)p[1]) != -1 &&
	    http_hexval((unsigned char)p[2]) != -1;
}

size_t
http_pct_canon_str(const char *s, size_t len, char *out)
{
	size_t i, n = 0;

	for (i = 0; i < len; ) {
		if (http_is_pct(s + i, len - i)) {
			http_pct_canon(s + i, out, &n);
			i += 3;
		} else
			out[n++] = s[i++];
	}
	return n;
}

int
http_query_decode(const char *q, size_t len, char *out, size_t *olen,
    const char **why)
{
	size_t i, n = 0;
	int v;

	for (i = 0; i < len; ) {
		if (q[i] == '%') {
			if (!http_is_pct(q + i, len - i))
				HTTP_FAIL(400, "invalid percent-encoding in "
				    "query");
			v = http_hexval((unsigned char)q[i + 1]) * 16 +
			    http_hexval((unsigned char)q[i + 2]);
			if (v == 0)
				HTTP_FAIL(400, "NUL in query");
			out[n++] = (char)v;
			i += 3;
		} else if (q[i] == '\0')
			HTTP_FAIL(400, "NUL in query");
		else if (q[i] == '+') {
			out[n++] = ' ';
			i++;
		} else
			out[n++] = q[i++];
	}
	out[n] = '\0';
	*olen = n;
	return 0;
}

int
http_target_canon(const char *t, size_t tlen, bool merge_slashes, char *buf,
    size_t size, struct http_target *o, const char **why)
{
	size_t i, n = 0, pend, start, seg, k;
	const char *semi;
	bool last;

	memset(o, 0, sizeof(*o));
	if (size < tlen + 3)
		HTTP_FAIL(414, "URI too long");
	/* RFC 9112 3.2: a request target has no fragment. */
	if (memchr(t, '#', tlen) != NULL)
		HTTP_FAIL(400, "fragment in request target");
	if (tlen == 1 && t[0] == '*') {
		buf[0] = '*';
		buf[1] = '\0';
		o->path = buf;
		o->plen = 1;
		return 0;
	}
	if (tlen == 0 || (t[0] != '/' && t[0] != '?'))
		HTTP_FAIL(400, "request target is not in origin form");
	for (pend = 0; pend < tlen && t[pend] != '?'; pend++)
		;
	/* buf[0..n) ends with '/' before each segment (RFC 3986 5.2.4 done
	 * one segment at a time: a segment is decoded first, so "%2e" is a
	 * dot too). "?q" alone (an absolute-form target without a path) is
	 * the path "/". */
	buf[n++] = '/';
	for (i = t[0] == '/' ? 1 : pend; i < pend; i++) {
		start = n;
		while (i < pend && t[i] != '/') {
			if (t[i] == '%') {
				int v;

				if (!http_is_pct(t + i, pend - i))
					HTTP_FAIL(400, "invalid percent-encoding "
					    "in path");
				v = http_pct_canon(t + i, buf, &n);
				if (v == '/')
					HTTP_FAIL(400, "encoded slash in path");
				if (v == '\\')
					HTTP_FAIL(400, "backslash in path");
				if (v == 0)
					HTTP_FAIL(400, "NUL in path");
				i += 3;
			} else if (t[i] == '\\')
				HTTP_FAIL(400, "backslash in path");
			else
				buf[n++] = t[i++];
		}
		seg = n - start;
		last = i >= pend;
		/* "..;x" is ".." to Tomcat, Jetty and Spring, which take a
		 * segment's ";params" off before removing dot-segments, and a
		 * name to nginx: read both ways, refused. */
		if ((semi = memchr(buf + start, ';', seg)) != NULL &&
		    (k = (size_t)(semi - (buf + start))) >= 1 && k <= 2 &&
		    buf[start] == '.' && buf[start + k - 1] == '.')
			HTTP_FAIL(400, "dot-segment with parameters");
		if (seg == 1 && buf[start] == '.')
			n = start;
		else if (seg == 2 && buf[start] == '.' && buf[start + 1] == '.') {
			if (start == 1)
				HTTP_FAIL(400, "dot-segment above the root");
			/* Back over the segment before it and its '/'. */
			for (n = start - 1; buf[n - 1] != '/'; n--)
				;
		} else if (!last && (seg != 0 || !merge_slashes))
			buf[n++] = '/';
		if (last)
			break;
	}
	buf[n] = '\0';
	o->path = buf;
	o->plen = n;
	if (pend == tlen)
		return 0;
	/* The query as the client wrote it, NUL-terminated: query= reads it
	 * through http_query_decode() as applications do. Not rewritten as
	 * the path is: decoding "%61" after a stray '%' would make "%%61D"
	 * the valid "%aD" the application never sees. */
	o->sent_query = t + pend + 1;
	o->sent_qlen = tlen - pend - 1;
	o->query = buf + ++n;
	memcpy(buf + n, o->sent_query, o->sent_qlen);
	n += o->sent_qlen;
	buf[n] = '\0';
	return 0;
}
