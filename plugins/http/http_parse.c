/* The strict HTTP/1.x head and chunked-body parsers (http_parse.h), and
 * the same rules for a head that comes as fields (an HTTP/2 request's). */
#include "http_parse.h"

#include <string.h>

/* RFC 9110 5.6.2 tchar, as a table: one load per byte. '_' is 2, so a
 * name's scan also says whether it has one. */
static const unsigned char http_tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
	['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 2,
	['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1,
	['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
	['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1,
	['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
	['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
	['Y'] = 1, ['Z'] = 1,
	['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
	['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1,
	['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
	['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
	['y'] = 1, ['z'] = 1,
};

bool
http_is_tchar(unsigned char c)
{
	return http_tchar[c] != 0;
}

/* field-vchar, SP or HTAB: no CTL (NUL, bare CR, LF, DEL). */
static bool
http_is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

#define HTTP_BYTES(b)	(UINT64_C(0x0101010101010101) * (b))

/* Whether every byte of p[0..n) is http_is_value_char, 8 bytes at a
 * time: a word with no byte below 0x20 and none 0x7f is good as a whole
 * (the tests are exact for that: Hacker's Delight 6-1, "hasless"), the
 * rare word with one (an HTAB, or a bad byte) is looked at byte by byte. */
static bool
http_value_ok(const char *p, size_t n)
{
	size_t i = 0, k;

	if (n < 8) {
		for (; i < n; i++)
			if (!http_is_value_char((unsigned char)p[i]))
				return false;
		return true;
	}
	/* The last word overlaps the one before it when n is not a
	 * multiple of 8: no byte-by-byte tail. */
	for (;;) {
		uint64_t x, del;

		if (i + 8 > n)
			i = n - 8;
		memcpy(&x, p + i, 8);
		del = x ^ HTTP_BYTES(0x7f);
		if ((((x - HTTP_BYTES(0x20)) & ~x) |
		    ((del - HTTP_BYTES(0x01)) & ~del)) & HTTP_BYTES(0x80)) {
			for (k = i; k < i + 8; k++)
				if (!http_is_value_char((unsigned char)p[k]))
					return false;
		}
		if ((i += 8) >= n)
			return true;
	}
}

static int
http_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

bool
http_token_eq(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen; i++)
		if (b[i] == '\0' || http_lower((unsigned char)a[i]) !=
		    http_lower((unsigned char)b[i]))
			return false;
	return b[i] == '\0';
}

bool
http_field_is(const struct http_hdr *f, enum http_field id, const char *name)
{
	if (f->id != id)
		return false;
	return (id != HTTP_F_OTHER && id != HTTP_F_PROXY_OTHER) ||
	    http_token_eq(f->name, f->nlen, name);
}

/* As http_lc_eq, for 8 bytes: each letter of b (bit 0x40 set; '-' has
 * it clear) lends a its bit 0x20. */
static bool
http_lc_eq8(const char *a, const char *b)
{
	uint64_t x, y;

	memcpy(&x, a, 8);
	memcpy(&y, b, 8);
	return (x | ((y & HTTP_BYTES(0x40)) >> 1)) == y;
}

/* a is b, both n bytes, reading a's letters without case; b is lower
 * case, of letters and '-' only (the names below). */
static bool
http_lc_eq(const char *a, const char *b, size_t n)
{
	size_t i;

	/* Words: a field name's compare is per header line. The last word
	 * overlaps the one before when n is not a multiple of 8. */
	if (n >= 8) {
		for (i = 0; i + 8 < n; i += 8)
			if (!http_lc_eq8(a + i, b + i))
				return false;
		return http_lc_eq8(a + n - 8, b + n - 8);
	}
	/* b holds lowercase letters and '-': a letter matches either case
	 * (bit 0x20 set), anything else only itself. */
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)a[i];

		if ((c | 0x20) != (unsigned char)b[i] ||
		    (c != (unsigned char)b[i] && b[i] < 'a'))
			return false;
	}
	return true;
}

enum http_field
http_field_id(const char *name, size_t len)
{
	/* By length, then by the first letter: at most one compare for
	 * most names, none for a name of no length listed. */
#define HTTP_IS(lit, id) do { if (http_lc_eq(name, lit, len)) \
	return (id); } while (0)
	switch (len) {
	case 2:
		HTTP_IS("te", HTTP_F_TE);
		break;
	case 4:
		HTTP_IS("host", HTTP_F_HOST);
		break;
	case 5:
		HTTP_IS("range", HTTP_F_RANGE);
		break;
	case 6:
		if (http_lower((unsigned char)name[0]) == 'c')
			HTTP_IS("cookie", HTTP_F_COOKIE);
		else
			HTTP_IS("expect", HTTP_F_EXPECT);
		break;
	case 7:
		if (http_lower((unsigned char)name[0]) == 't')
			HTTP_IS("trailer", HTTP_F_TRAILER);
		else
			HTTP_IS("upgrade", HTTP_F_UPGRADE);
		break;
	case 8:
		HTTP_IS("if-range", HTTP_F_IF_RANGE);
		break;
	case 10:
		switch (http_lower((unsigned char)name[0])) {
		case 'c': HTTP_IS("connection", HTTP_F_CONNECTION); break;
		case 'k': HTTP_IS("keep-alive", HTTP_F_KEEP_ALIVE); break;
		case 's': HTTP_IS("set-cookie", HTTP_F_SET_COOKIE); break;
		}
		break;
	case 12:
		HTTP_IS("content-type", HTTP_F_CONTENT_TYPE);
		break;
	case 13:
		if (http_lower((unsigned char)name[0]) == 'a')
			HTTP_IS("authorization", HTTP_F_AUTHORIZATION);
		else
			HTTP_IS("content-range", HTTP_F_CONTENT_RANGE);
		break;
	case 14:
		HTTP_IS("content-length", HTTP_F_CONTENT_LENGTH);
		break;
	case 15:
		HTTP_IS("x-forwarded-for", HTTP_F_X_FORWARDED_FOR);
		break;
	case 16:
		if (http_lower((unsigned char)name[0]) == 'c')
			HTTP_IS("content-encoding", HTTP_F_CONTENT_ENCODING);
		else
			HTTP_IS("proxy-connection", HTTP_F_PROXY_CONNECTION);
		break;
	case 17:
		HTTP_IS("transfer-encoding", HTTP_F_TRANSFER_ENCODING);
		break;
	}
#undef HTTP_IS
	if (len > 6 && http_lc_eq(name, "proxy-", 6))
		return HTTP_F_PROXY_OTHER;
	return HTTP_F_OTHER;
}

/* a (of alen bytes) is b, lowercase and with '-', reading a's letters
 * case-insensitively and its '_' as '-'. */
static bool
http_name_eq_norm(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen; i++) {
		int c = http_lower((unsigned char)a[i]);

		if (c == '_')
			c = '-';
		if (b[i] == '\0' || c != b[i])
			return false;
	}
	return b[i] == '\0';
}

bool
http_name_is_framing(const char *name, size_t len)
{
	static const char *const names[] = { "content-length",
	    "transfer-encoding", "connection", "keep-alive", "te", "trailer",
	    "upgrade", "host", NULL };
	size_t i;

	for (i = 0; names[i] != NULL; i++)
		if (http_name_eq_norm(name, len, names[i]))
			return true;
	return len > 6 && http_name_eq_norm(name, 6, "proxy-");
}

bool
http_list_has(const char *v, size_t len, const char *t)
{
	size_t i = 0, s, e;

	while (http_list_next(v, len, &i, &s, &e)) {
		if (http_token_eq(v + s, e - s, t))
			return true;
	}
	return false;
}

ssize_t
http_head_end(const char *buf, size_t len, size_t max, size_t *scanned)
{
	size_t i = *scanned;
	const char *nl;

	/* One CRLF before a request line is skipped by http_parse_head()
	 * (RFC 9112 2.2); it cannot end a head here: the LF at 1 has no LF
	 * before it. */
	while (i < len && (nl = memchr(buf + i, '\n', len - i)) != NULL) {
		size_t at = (size_t)(nl - buf);

		/* "\r\n\r\n" ending here, or "\n\r\n"/"\n\n" (refused later). */
		if ((at >= 1 && buf[at - 1] == '\n') ||
		    (at >= 2 && buf[at - 1] == '\r' && buf[at - 2] == '\n')) {
			*scanned = at + 1;
			if (at + 1 > max)
				return -1;
			return (ssize_t)(at + 1);
		}
		i = at + 1;
	}
	/* Keep the last 3 bytes in view: a CRLF CRLF may straddle reads. */
	*scanned = len > 3 ? len - 3 : 0;
	if (*scanned < i && i <= len)
		*scanned = i;
	if (len > max)
		return -1;
	return 0;
}

#define HTTP_FAIL(code, msg) do { *why = (msg); return (code); } while (0)

/* "HTTP/1.x" at p (8 bytes available). 0, or the status for a bad one. */
static int
http_parse_version(const char *p, size_t len, int *minor, const char **why)
{
	if (len < 8 || memcmp(p, "HTTP/", 5) != 0)
		HTTP_FAIL(400, "malformed HTTP version");
	if (p[5] < '0' || p[5] > '9' || p[6] != '.' || p[7] < '0' || p[7] > '9')
		HTTP_FAIL(400, "malformed HTTP version");
	if (p[5] != '1')
		HTTP_FAIL(505, "HTTP version not supported");
	/* A higher minor version of HTTP/1 is read as the highest we
	 * speak, 1.1 (RFC 9110 2.5): it only adds what we may ignore. */
	*minor = p[7] > '1' ? 1 : p[7] - '0';
	return 0;
}

int
http_head_request_target(struct http_head *h, const char *method,
    size_t mlen, const char *target, size_t tlen,
    const struct http_limits *lim, const char **why)
{
	size_t i;

	for (i = 0; i < mlen; i++)
		if (!http_tchar[(unsigned char)method[i]])
			break;
	if (mlen == 0 || i != mlen)
		HTTP_FAIL(400, "malformed method");
	if (tlen == 0)
		HTTP_FAIL(400, "empty request target");
	for (i = 0; i < tlen; i++)
		if (target[i] <= 0x20 || target[i] >= 0x7f)
			break;
	if (i > lim->max_url)
		HTTP_FAIL(414, "URI too long");
	if (i != tlen)
		HTTP_FAIL(400, "malformed request target");
	h->method = method;
	h->mlen = mlen;
	h->target = target;
	h->tlen = tlen;
	h->minor = 1;
	return 0;
}

static int
http_parse_request_line(const char *p, size_t len, const struct http_limits *lim,
    struct http_head *h, const char **why)
{
	size_t i = 0, t;

	while (i < len && http_tchar[(unsigned char)p[i]])
		i++;
	if (i == 0 || i == len || p[i] != ' ')
		HTTP_FAIL(400, "malformed method");
	h->method = p;
	h->mlen = i++;
	t = i;
	while (i < len && p[i] > 0x20 && p[i] < 0x7f)
		i++;
	if (i == t)
		HTTP_FAIL(400, "empty request target");
	if (i - t > lim->max_url)
		HTTP_FAIL(414, "URI too long");
	if (i == len || p[i] != ' ')
		HTTP_FAIL(400, "malformed request target");
	h->target = p + t;
	h->tlen = i - t;
	i++;
	if (len - i != 8)
		HTTP_FAIL(400, "malformed request line");
	return http_parse_version(p + i, len - i, &h->minor, why);
}

static int
http_parse_status_line(const char *p, size_t len, struct http_head *h,
    const char **why)
{
	size_t i;
	int rc;

	if ((rc = http_parse_version(p, len, &h->minor, why)) != 0)
		return rc;
	if (len < 12 || p[8] != ' ')
		HTTP_FAIL(400, "malformed status line");
	for (i = 9; i < 12; i++)
		if (p[i] < '0' || p[i] > '9')
			HTTP_FAIL(400, "malformed status code");
	h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (h->status < 100)
		HTTP_FAIL(400, "malformed status code");
	h->reason = p + len;
	h->rlen = 0;
	if (len > 12) {
		if (p[12] != ' ')
			HTTP_FAIL(400, "malformed status line");
		for (i = 13; i < len; i++)
			if (!http_is_value_char((unsigned char)p[i]))
				HTTP_FAIL(400, "control character in reason");
		h->reason = p + 13;
		h->rlen = len - 13;
	}
	return 0;
}

/* Content-Length: 1*DIGIT, nothing else (no sign, no list). */
static int
http_parse_length(const char *v, size_t len, int64_t *out, const char **why)
{
	int64_t n = 0;
	size_t i;

	if (len == 0)
		HTTP_FAIL(400, "empty Content-Length");
	for (i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			HTTP_FAIL(400, "malformed Content-Length");
		if (n > (INT64_MAX - 9) / 10)
			HTTP_FAIL(400, "Content-Length overflow");
		n = n * 10 + (v[i] - '0');
	}
	*out = n;
	return 0;
}

/* Transfer-Encoding values, in order: chunked must be last and once. */
static int
http_parse_te(struct http_head *h, const char *v, size_t len, const char **why)
{
	size_t i = 0, s, e;

	while (i < len) {
		while (i < len && (v[i] == ' ' || v[i] == '\t'))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (i < len)
			i++;	/* the comma */
		if (e == s)
			HTTP_FAIL(400, "empty Transfer-Encoding element");
		if (h->chunked)
			HTTP_FAIL(400, "Transfer-Encoding after chunked");
		if (http_token_eq(v + s, e - s, "chunked"))
			h->chunked = true;
		else {
			size_t k;

			for (k = s; k < e; k++)
				if (!http_tchar[(unsigned char)v[k]])
					HTTP_FAIL(400, "malformed Transfer-Encoding");
			h->te_other = true;
		}
	}
	return 0;
}

/* The options of a Connection field that the framing reads, in one pass
 * over its elements (split as http_list_has splits them). */
static void
http_connection_options(struct http_head *h, const char *v, size_t len)
{
	size_t i = 0, s, e;

	while (http_list_next(v, len, &i, &s, &e)) {
		switch (e - s) {
		case 5:
			if (http_lc_eq(v + s, "close", 5))
				h->conn_close = true;
			break;
		case 7:
			if (http_lc_eq(v + s, "upgrade", 7))
				h->conn_upgrade = true;
			break;
		case 10:
			if (http_lc_eq(v + s, "keep-alive", 10))
				h->conn_keep_alive = true;
			break;
		}
	}
}

static int http_head_field_id(struct http_head *h, struct http_hdr *f,
    const char **why);

/* A field of h whose name (seen: the tchar kinds in it) and value (OWS
 * trimmed) were split from their line, or came apart: judged, added. */
static int
http_head_field_at(struct http_head *h, const char *name, size_t nlen,
    unsigned char seen, const char *val, size_t vlen, const char **why)
{
	struct http_hdr *f;

	if (seen & 2) {
		h->underscore = true;
		if (http_name_is_framing(name, nlen))
			HTTP_FAIL(400, "'_' in a framing header name");
	}
	if (h->nhdr == HTTP_MAX_HEADERS)
		HTTP_FAIL(431, "too many header lines");
	f = &h->hdr[h->nhdr];
	f->name = name;
	f->nlen = nlen;
	if (!http_value_ok(val, vlen))
		HTTP_FAIL(400, "invalid character in header value");
	f->val = val;
	f->vlen = vlen;
	return http_head_field_id(h, f, why);
}

int
http_head_add_field(struct http_head *h, const char *name, size_t nlen,
    const char *val, size_t vlen, const char **why)
{
	unsigned char t, seen = 0;
	size_t i;

	if (nlen == 0)
		HTTP_FAIL(400, "empty header name");
	for (i = 0; i < nlen; i++) {
		if ((t = http_tchar[(unsigned char)name[i]]) == 0)
			HTTP_FAIL(400, "invalid character in header name");
		seen |= t;
	}
	while (vlen > 0 && (val[0] == ' ' || val[0] == '\t'))
		val++, vlen--;
	while (vlen > 0 && (val[vlen - 1] == ' ' || val[vlen - 1] == '\t'))
		vlen--;
	return http_head_field_at(h, name, nlen, seen, val, vlen, why);
}

static int
http_parse_field(const char *p, size_t len, struct http_head *h,
    const char **why)
{
	size_t i = 0, vs, ve;
	unsigned char t, seen = 0;

	if (p[0] == ' ' || p[0] == '\t')
		HTTP_FAIL(400, "obsolete line folding");
	while (i < len && (t = http_tchar[(unsigned char)p[i]]) != 0) {
		seen |= t;
		i++;
	}
	if (i == len || p[i] != ':') {
		if (i < len && (p[i] == ' ' || p[i] == '\t'))
			HTTP_FAIL(400, "whitespace before colon");
		HTTP_FAIL(400, "invalid character in header name");
	}
	if (i == 0)
		HTTP_FAIL(400, "empty header name");
	vs = i + 1;
	while (vs < len && (p[vs] == ' ' || p[vs] == '\t'))
		vs++;
	ve = len;
	while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
		ve--;
	return http_head_field_at(h, p, i, seen, p + vs, ve - vs, why);
}

/* f, the next field of h (name and value set), gets its id and says
 * what it means for the framing, Host, Upgrade and Expect. */
static int
http_head_field_id(struct http_head *h, struct http_hdr *f, const char **why)
{
	f->id = (unsigned char)http_field_id(f->name, f->nlen);
	switch ((enum http_field)f->id) {
	case HTTP_F_CONTENT_LENGTH: {
		int64_t n;
		int rc;

		if (h->content_length != -1)
			HTTP_FAIL(400, "duplicate Content-Length");
		if ((rc = http_parse_length(f->val, f->vlen, &n, why)) != 0)
			return rc;
		h->content_length = n;
		break;
	}
	case HTTP_F_TRANSFER_ENCODING: {
		int rc;

		h->has_te = true;
		if ((rc = http_parse_te(h, f->val, f->vlen, why)) != 0)
			return rc;
		break;
	}
	case HTTP_F_CONNECTION:
		http_connection_options(h, f->val, f->vlen);
		break;
	case HTTP_F_HOST:
		if (h->host != -1)
			HTTP_FAIL(400, "duplicate Host");
		h->host = (int)h->nhdr;
		break;
	case HTTP_F_UPGRADE:
		h->upgrade = (int)h->nhdr;
		break;
	case HTTP_F_EXPECT:
		if (http_token_eq(f->val, f->vlen, "100-continue"))
			h->expect_continue = true;
		break;
	default:
		break;
	}
	h->nhdr++;
	return 0;
}

/* The first bytes of a status line must be "HTTP/": whatever else a
 * server sends (another protocol, binary) is refused as soon as it comes,
 * before the rest of the line is looked at. n: bytes of the line, its
 * final CR excluded. */
static bool
http_status_prefix_bad(const char *p, size_t n)
{
	static const char v[] = "HTTP/";
	size_t i;

	for (i = 0; i < n && i < 5; i++)
		if (p[i] != v[i])
			return true;
	return false;
}

/* Why a line over max_line is refused: 414 for the request line. */
static int
http_line_too_long(bool request, unsigned line_no, const char **why)
{
	if (line_no != 0)
		HTTP_FAIL(431, "header line too long");
	if (request)
		HTTP_FAIL(414, "request line too long");
	HTTP_FAIL(431, "status line too long");
}

/* One line of a head: n bytes before its LF, starting at pos in the head.
 * h holds what the lines before said (the fields, for the duplicates);
 * *line_no counts the lines judged (the one skipped empty line before a
 * request line not included). 0 when good (*end: it was the empty line
 * that ends the head), else the status. The checks that can be made on a
 * line still arriving come first (http_head_judge makes them on one): the
 * status line's "HTTP/", then the length; so a line is refused for the
 * same reason whether it is judged whole or as it comes. */
static int
http_head_line(const char *p, size_t n, size_t pos,
    const struct http_limits *lim, struct http_head *h, unsigned *line_no,
    bool *end, const char **why)
{
	size_t len = n > 0 && p[n - 1] == '\r' ? n - 1 : n;
	int rc;

	*end = false;
	if (*line_no == 0 && !h->request && http_status_prefix_bad(p, len))
		HTTP_FAIL(400, "malformed HTTP version");
	if (len > lim->max_line)
		return http_line_too_long(h->request, *line_no, why);
	if (len == n)
		HTTP_FAIL(400, "bare LF");
	if (*line_no == 0) {
		if (memchr(p, '\r', len) != NULL)
			HTTP_FAIL(400, "bare CR");
		if (len == 0 && h->request && pos == 0) {
			/* RFC 9112 2.2: one empty line before the request
			 * line is ignored. */
			h->empty_line = true;
			return 0;
		}
		if (len == 0)
			HTTP_FAIL(400, "empty first line");
		rc = h->request ? http_parse_request_line(p, len, lim, h, why) :
		    http_parse_status_line(p, len, h, why);
		if (rc != 0)
			return rc;
	} else if (len == 0) {
		*end = true;
		return 0;
	} else {
		/* A field line that parses has no CR in it (each of its bytes
		 * was taken as name, ':', whitespace or value): a CR is only
		 * looked for to say why a line was refused, and it says so
		 * first, as for the request line. */
		if (*line_no > lim->max_header_lines) {
			*why = "too many header lines";
			rc = 431;
		} else
			rc = http_parse_field(p, len, h, why);
		if (rc != 0) {
			if (memchr(p, '\r', len) != NULL)
				HTTP_FAIL(400, "bare CR");
			return rc;
		}
	}
	(*line_no)++;
	return 0;
}

void
http_head_start(struct http_head *h, bool request)
{
	memset(h, 0, offsetof(struct http_head, hdr));
	h->nhdr = 0;
	h->request = request;
	h->content_length = -1;
	h->host = h->upgrade = -1;
}

int
http_parse_head(const char *buf, size_t head_len, bool request,
    const struct http_limits *lim, struct http_head *h, const char **why)
{
	size_t pos = 0;
	unsigned line_no = 0;
	bool end = false;
	int rc;

	http_head_start(h, request);
	h->head_len = head_len;
	while (!end) {
		const char *p = buf + pos, *nl;
		size_t n;

		if (pos >= head_len ||
		    (nl = memchr(p, '\n', head_len - pos)) == NULL)
			HTTP_FAIL(400, "incomplete head");
		n = (size_t)(nl - p);
		if ((rc = http_head_line(p, n, pos, lim, h, &line_no, &end,
		    why)) != 0)
			return rc;
		pos += n + 1;
	}
	if (pos != head_len)
		HTTP_FAIL(400, "bytes after the head end");
	return http_head_check(h, why);
}

int
http_head_check(const struct http_head *h, const char **why)
{
	bool request = h->request;

	if (h->has_te && h->content_length != -1)
		HTTP_FAIL(400, "both Content-Length and Transfer-Encoding");
	if (h->has_te && !h->chunked)
		HTTP_FAIL(request ? 400 : 502,
		    "Transfer-Encoding does not end in chunked");
	if (request) {
		if (h->has_te && h->minor == 0)
			HTTP_FAIL(400, "Transfer-Encoding in an HTTP/1.0 request");
		if (h->minor == 1 && h->host == -1)
			HTTP_FAIL(400, "missing Host");
	}
	return 0;
}

int
http_head_judge(const char *buf, size_t len, bool request,
    const struct http_limits *lim, struct http_head_scan *st,
    const char **why)
{
	/* The fields only for the duplicate checks: what they said is
	 * carried in st between calls (the buffer may have moved). */
	static _Thread_local struct http_head t;
	const char *p, *nl;
	size_t from, rest, clen;
	bool end = false;
	int rc = 0;

	if (st->done)
		return 0;
	http_head_start(&t, request);
	t.content_length = st->cl_seen ? 0 : -1;
	t.host = st->host_seen ? 0 : -1;
	t.chunked = st->chunked;
	t.nhdr = st->nhdr;
	/* The LF search resumes where the last call left it. */
	from = st->off + st->seen;
	while (st->off < len && from < len) {
		p = buf + st->off;
		if ((nl = memchr(buf + from, '\n', len - from)) == NULL)
			break;
		rc = http_head_line(p, (size_t)(nl - p), st->off, lim, &t,
		    &st->line_no, &end, why);
		if (rc != 0)
			break;
		st->off = (size_t)(nl - buf) + 1;
		from = st->off;
		if (end) {
			st->done = true;
			break;
		}
	}
	st->seen = len > st->off ? len - st->off : 0;
	st->nhdr = t.nhdr;
	st->cl_seen = t.content_length != -1;
	st->host_seen = t.host != -1;
	st->chunked = t.chunked;
	if (rc != 0 || end || st->off >= len)
		return rc;
	/* The line still arriving: what can be refused already. */
	p = buf + st->off;
	rest = len - st->off;
	clen = p[rest - 1] == '\r' ? rest - 1 : rest;
	if (st->line_no == 0 && !request && http_status_prefix_bad(p, clen))
		HTTP_FAIL(400, "malformed HTTP version");
	if (clen > lim->max_line)
		return http_line_too_long(request, st->line_no, why);
	return 0;
}

ssize_t
http_parse_trailers(const char *buf, size_t len, const struct http_limits *lim,
    struct http_head *t, const char **why)
{
	size_t pos = 0, lines = 0;

	memset(t, 0, offsetof(struct http_head, hdr));
	t->content_length = -1;
	t->host = t->upgrade = -1;
	for (;;) {
		const char *p = buf + pos, *nl;
		size_t n;

		nl = memchr(p, '\n', len - pos);
		if (nl == NULL) {
			if (len - pos > lim->max_line + 1)
				HTTP_FAIL(-1, "trailer line too long");
			if (len > lim->max_header_bytes)
				HTTP_FAIL(-1, "trailers over max-header-bytes");
			return 0;
		}
		n = (size_t)(nl - p);
		if (n == 0 || p[n - 1] != '\r')
			HTTP_FAIL(-1, "bare LF in trailers");
		n--;
		pos += n + 2;
		if (n > lim->max_line)
			HTTP_FAIL(-1, "trailer line too long");
		if (pos > lim->max_header_bytes)
			HTTP_FAIL(-1, "trailers over max-header-bytes");
		if (memchr(p, '\r', n) != NULL)
			HTTP_FAIL(-1, "bare CR in trailers");
		if (n == 0)
			break;
		if (++lines > lim->max_header_lines)
			HTTP_FAIL(-1, "too many trailer lines");
		if (http_parse_field(p, n, t, why) != 0)
			return -1;
	}
	t->head_len = pos;
	return (ssize_t)pos;
}

/* Step mode: the canonical size line, hex without leading zeros. */
static void
http_chunk_out_size(struct http_chunk *c)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16];
	size_t n = 0;
	uint64_t v = c->size;

	do {
		tmp[n++] = hex[v & 15];
		v >>= 4;
	} while (v != 0);
	while (n > 0)
		c->out[c->outlen++] = tmp[--n];
	c->out[c->outlen++] = '\r';
	c->out[c->outlen++] = '\n';
}

static bool
http_hex(unsigned char c, unsigned *v)
{
	if (c >= '0' && c <= '9')
		*v = c - '0';
	else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		*v = (c | 0x20) - 'a' + 10;
	else
		return false;
	return true;
}

#define HTTP_CHUNK_FAIL(msg) do { *why = (msg); return -1; } while (0)

ssize_t
http_chunk_feed(struct http_chunk *c, const char *p, size_t len,
    const struct http_limits *lim, const char **why)
{
	size_t i = 0;
	unsigned d;

	c->outlen = 0;
	while (i < len && c->state != HTTP_CHUNK_DONE) {
		unsigned char ch = (unsigned char)p[i];

		if (c->state == HTTP_CHUNK_DATA) {
			size_t n = len - i;

			/* Step mode: data never shares a call with framing. */
			if (c->step && i > 0)
				break;
			if (n > c->left)
				n = (size_t)c->left;
			c->left -= n;
			c->body += n;
			i += n;
			if (c->left == 0)
				c->state = HTTP_CHUNK_DATA_CR;
			if (c->step)
				break;
			continue;
		}
		if (c->step && c->state == HTTP_CHUNK_TRAILER)
			break;	/* the caller's: http_parse_trailers() */
		i++;
		if (++c->line > lim->max_line)
			HTTP_CHUNK_FAIL("chunk framing line too long");
		switch (c->state) {
		case HTTP_CHUNK_SIZE:
			if (http_hex(ch, &d)) {
				/* Leading zeros are allowed (RFC 9112 7.1):
				 * only the value is bounded, below 2^60. */
				if (c->size >= UINT64_C(1) << 56)
					HTTP_CHUNK_FAIL("chunk size overflow");
				c->size = c->size * 16 + d;
				c->digits++;
			} else if (c->digits == 0) {
				HTTP_CHUNK_FAIL("malformed chunk size");
			} else if (ch == ';') {
				c->state = HTTP_CHUNK_EXT;
			} else if (ch == '\r') {
				c->state = HTTP_CHUNK_SIZE_LF;
			} else {
				HTTP_CHUNK_FAIL("junk after chunk size");
			}
			break;
		/* chunk-ext = *( ";" token [ "=" ( token / quoted-string ) ] )
		 * (RFC 9112 7.1.1), without BWS: anything else is refused,
		 * as llhttp does in strict mode. */
		case HTTP_CHUNK_EXT:
			if (!http_tchar[ch])
				HTTP_CHUNK_FAIL("malformed chunk extension");
			c->state = HTTP_CHUNK_EXT_NAME;
			break;
		case HTTP_CHUNK_EXT_NAME:
		case HTTP_CHUNK_EXT_TOKEN:
			if (http_tchar[ch])
				break;
			if (ch == ';')
				c->state = HTTP_CHUNK_EXT;
			else if (ch == '\r')
				c->state = HTTP_CHUNK_SIZE_LF;
			else if (ch == '=' && c->state == HTTP_CHUNK_EXT_NAME)
				c->state = HTTP_CHUNK_EXT_VAL0;
			else
				HTTP_CHUNK_FAIL("malformed chunk extension");
			break;
		case HTTP_CHUNK_EXT_VAL0:
			if (ch == '"')
				c->state = HTTP_CHUNK_EXT_QUOTED;
			else if (http_tchar[ch])
				c->state = HTTP_CHUNK_EXT_TOKEN;
			else
				HTTP_CHUNK_FAIL("malformed chunk extension value");
			break;
		case HTTP_CHUNK_EXT_QUOTED:
			/* qdtext: HTAB SP ! #-[ ]-~ obs-text */
			if (ch == '"')
				c->state = HTTP_CHUNK_EXT_QEND;
			else if (ch == '\\')
				c->state = HTTP_CHUNK_EXT_QPAIR;
			else if (!http_is_value_char(ch))
				HTTP_CHUNK_FAIL("invalid character in chunk extension");
			break;
		case HTTP_CHUNK_EXT_QPAIR:
			if (!http_is_value_char(ch))
				HTTP_CHUNK_FAIL("invalid character in chunk extension");
			c->state = HTTP_CHUNK_EXT_QUOTED;
			break;
		case HTTP_CHUNK_EXT_QEND:
			if (ch == ';')
				c->state = HTTP_CHUNK_EXT;
			else if (ch == '\r')
				c->state = HTTP_CHUNK_SIZE_LF;
			else
				HTTP_CHUNK_FAIL("junk after chunk extension");
			break;
		case HTTP_CHUNK_SIZE_LF:
			if (ch != '\n')
				HTTP_CHUNK_FAIL("bare CR after chunk size");
			c->line = 0;
			/* The last chunk is written with the trailers
			 * (http_head_trailers), once they are good. */
			if (c->step && c->size != 0)
				http_chunk_out_size(c);
			if (c->size == 0) {
				c->state = HTTP_CHUNK_TRAILER;
			} else {
				c->left = c->size;
				c->state = HTTP_CHUNK_DATA;
			}
			break;
		case HTTP_CHUNK_DATA_CR:
			if (ch != '\r')
				HTTP_CHUNK_FAIL("chunk data longer than its size");
			c->state = HTTP_CHUNK_DATA_LF;
			break;
		case HTTP_CHUNK_DATA_LF:
			if (ch != '\n')
				HTTP_CHUNK_FAIL("bare CR after chunk data");
			if (c->step) {
				c->out[c->outlen++] = '\r';
				c->out[c->outlen++] = '\n';
			}
			c->line = 0;
			c->size = 0;
			c->digits = 0;
			c->state = HTTP_CHUNK_SIZE;
			break;
		case HTTP_CHUNK_TRAILER:
			if (ch == '\r') {
				c->state = HTTP_CHUNK_FINAL_LF;
				break;
			}
			c->name_seen = false;
			c->colon = false;
			c->state = HTTP_CHUNK_TRAILER_LINE;
			/* FALLTHROUGH */
		case HTTP_CHUNK_TRAILER_LINE:
			if (++c->trailer_bytes > lim->max_header_bytes)
				HTTP_CHUNK_FAIL("trailers too large");
			if (ch == '\r') {
				if (!c->colon)
					HTTP_CHUNK_FAIL("malformed trailer field");
				c->state = HTTP_CHUNK_TRAILER_LF;
			} else if (!c->colon) {
				if (ch == ':' && c->name_seen)
					c->colon = true;
				else if (http_tchar[ch])
					c->name_seen = true;
				else
					HTTP_CHUNK_FAIL("invalid character in trailer name");
			} else if (!http_is_value_char(ch)) {
				HTTP_CHUNK_FAIL("invalid character in trailer value");
			}
			break;
		case HTTP_CHUNK_TRAILER_LF:
			if (ch != '\n')
				HTTP_CHUNK_FAIL("bare CR in trailer");
			c->line = 0;
			c->state = HTTP_CHUNK_TRAILER;
			break;
		case HTTP_CHUNK_FINAL_LF:
			if (ch != '\n')
				HTTP_CHUNK_FAIL("bare CR at body end");
			c->state = HTTP_CHUNK_DONE;
			break;
		default:
			HTTP_CHUNK_FAIL("chunk parser state");
		}
	}
	return (ssize_t)i;
}
