/* The ICAP response head (RFC 3507 4.3.3, 4.4.1) and the HTTP status line
 * it encapsulates, and the chunked body of a changed message: pure
 * functions, no I/O, so the unit tests can feed them anything. Only what a verdict needs is kept; every string that
 * may reach a log line or a page is cut and made printable here. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "icap.h"

/* A peer's string for the log and the page: printable ASCII only, '"'
 * and '\\' replaced, cut to size. */
static void
icap_copy(char *dst, size_t size, const char *src, size_t len)
{
	size_t i;

	while (len > 0 && (*src == ' ' || *src == '\t'))
		src++, len--;
	while (len > 0 && (src[len - 1] == ' ' || src[len - 1] == '\t'))
		len--;
	if (len >= size)
		len = size - 1;
	for (i = 0; i < len; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f && src[i] != '"' &&
		    src[i] != '\\') ? src[i] : '?';
	dst[len] = '\0';
}

/* The end of the line at p (before its CR LF or LF) and where the next
 * starts; NULL when the line is not complete in [p, end). */
static const char *
icap_line(const char *p, const char *end, const char **next)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	if (nl == NULL)
		return NULL;
	*next = nl + 1;
	return nl > p && nl[-1] == '\r' ? nl - 1 : nl;
}

static bool
icap_name_is(const char *p, size_t len, const char *name)
{
	return strlen(name) == len && strncasecmp(p, name, len) == 0;
}

/* A decimal number in [0, max] at the start of [p, end), leading blanks
 * skipped; -1 if none. */
static long
icap_number(const char *p, const char *end, long max)
{
	long v = 0;
	bool any = false;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	for (; p < end && isdigit((unsigned char)*p); p++) {
		v = v * 10 + (*p - '0');
		any = true;
		if (v > max)
			return -1;
	}
	return any ? v : -1;
}

/* "req-hdr=0, res-hdr=137, res-body=296": each offset into h. */
static int
icap_encapsulated(const char *v, const char *end, struct px_icap_head *h)
{
	while (v < end) {
		const char *eq, *comma;
		long off;
		size_t nlen;

		while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
			v++;
		if (v == end)
			break;
		if ((eq = memchr(v, '=', (size_t)(end - v))) == NULL)
			return -1;
		comma = memchr(eq, ',', (size_t)(end - eq));
		if (comma == NULL)
			comma = end;
		if ((off = icap_number(eq + 1, comma, PX_ICAP_HEAD_MAX)) < 0)
			return -1;
		nlen = (size_t)(eq - v);
		if (icap_name_is(v, nlen, "req-hdr"))
			h->req_hdr = off;
		else if (icap_name_is(v, nlen, "res-hdr"))
			h->res_hdr = off;
		else if (icap_name_is(v, nlen, "req-body") ||
		    icap_name_is(v, nlen, "res-body") ||
		    icap_name_is(v, nlen, "opt-body"))
			h->body = off;
		else if (icap_name_is(v, nlen, "null-body")) {
			h->body = off;
			h->null_body = true;
		} else
			return -1;
		v = comma;
	}
	return 0;
}

/* X-Infection-Found: "Type=0; Resolution=2; Threat=Eicar-Signature;" */
static void
icap_threat_infection(const char *v, const char *end, struct px_icap_head *h)
{
	const char *p = v, *semi;

	for (; p + 7 <= end; p++)
		if (strncasecmp(p, "Threat=", 7) == 0)
			break;
	if (p + 7 > end)
		return;
	p += 7;
	semi = memchr(p, ';', (size_t)(end - p));
	icap_copy(h->threat, sizeof(h->threat), p,
	    (size_t)((semi != NULL ? semi : end) - p));
}

/* One field line (continuations already joined as [v, end) of lines). */
static void
icap_field(const char *name, size_t nlen, const char *v, const char *end,
    const char *const *cont, size_t ncont, struct px_icap_head *h,
    int *bad)
{
	if (icap_name_is(name, nlen, "Encapsulated")) {
		if (icap_encapsulated(v, end, h) == -1)
			*bad = 1;
	} else if (icap_name_is(name, nlen, "X-Infection-Found"))
		icap_threat_infection(v, end, h);
	else if (icap_name_is(name, nlen, "X-Violations-Found")) {
		/* "count", then per violation: filename, threat, id,
		 * resolution, one a continuation line. */
		if (h->threat[0] == '\0' && ncont >= 2) {
			const char *t = cont[1], *te = strpbrk(t, "\r\n");

			icap_copy(h->threat, sizeof(h->threat), t,
			    te != NULL ? (size_t)(te - t) : strlen(t));
		}
	} else if (icap_name_is(name, nlen, "X-Virus-ID")) {
		if (h->threat[0] == '\0')
			icap_copy(h->threat, sizeof(h->threat), v,
			    (size_t)(end - v));
	} else if (icap_name_is(name, nlen, "ISTag")) {
		/* A quoted string (RFC 3507 4.7): the quotes go. */
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		if (end - v >= 2 && *v == '"' && end[-1] == '"')
			v++, end--;
		icap_copy(h->istag, sizeof(h->istag), v, (size_t)(end - v));
	}
	else if (icap_name_is(name, nlen, "Methods"))
		icap_copy(h->methods, sizeof(h->methods), v, (size_t)(end - v));
	else if (icap_name_is(name, nlen, "Transfer-Preview"))
		icap_copy(h->transfer_preview, sizeof(h->transfer_preview), v,
		    (size_t)(end - v));
	else if (icap_name_is(name, nlen, "Transfer-Complete"))
		icap_copy(h->transfer_complete, sizeof(h->transfer_complete),
		    v, (size_t)(end - v));
	else if (icap_name_is(name, nlen, "Transfer-Ignore"))
		icap_copy(h->transfer_ignore, sizeof(h->transfer_ignore), v,
		    (size_t)(end - v));
	else if (icap_name_is(name, nlen, "Preview"))
		h->preview = icap_number(v, end, 1L << 30);
	else if (icap_name_is(name, nlen, "Max-Connections")) {
		long n = icap_number(v, end, 1L << 20);

		h->max_connections = n > 0 ? n : 0;
	} else if (icap_name_is(name, nlen, "Options-TTL")) {
		long n = icap_number(v, end, 1L << 30);

		h->options_ttl = n > 0 ? n : 0;
	} else if (icap_name_is(name, nlen, "Connection")) {
		const char *p;

		for (p = v; p + 5 <= end; p++)
			if (strncasecmp(p, "close", 5) == 0)
				h->conn_close = true;
	}
}

/* "ICAP/1.0 204 Unmodified": the status. */
static int
icap_status_line(const char *p, const char *eol)
{
	long st;

	if (eol - p < 12 || strncmp(p, "ICAP/1.", 7) != 0 ||
	    !isdigit((unsigned char)p[7]) || p[8] != ' ')
		return -1;
	if (!isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
	    !isdigit((unsigned char)p[11]) || (eol - p > 12 && p[12] != ' '))
		return -1;
	st = icap_number(p + 9, p + 12, 999);
	return st >= 100 ? (int)st : -1;
}

/* "HTTP/1.1 403 Forbidden" at p: the status, or 0 when p is not an HTTP
 * status line (a request head, in a REQMOD answer). */
static int
icap_http_status(const char *p, const char *end)
{
	long st;

	if (end - p < 12 || strncmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ')
		return 0;
	st = icap_number(p + 9, p + 12, 999);
	return st >= 100 ? (int)st : 0;
}

/* Continuation lines of one field: at most this many are looked at. */
#define ICAP_CONT_MAX	8

ssize_t
px_icap_parse(const char *buf, size_t len, struct px_icap_head *h,
    const char **why)
{
	const char *end = buf + len, *p = buf, *eol, *next;
	const char *cont[ICAP_CONT_MAX];
	size_t head_len, need;
	long first;
	int bad = 0;

	memset(h, 0, sizeof(*h));
	h->req_hdr = h->res_hdr = h->body = -1;
	h->preview = -1;
	if ((eol = icap_line(p, end, &next)) == NULL) {
		*why = "ICAP status line too long";
		return len > 1024 ? -1 : 0;
	}
	if ((h->status = icap_status_line(p, eol)) == -1) {
		*why = "not an ICAP status line";
		return -1;
	}
	for (p = next;;) {
		const char *colon, *vend;
		size_t ncont = 0;

		if ((eol = icap_line(p, end, &next)) == NULL) {
			*why = "ICAP head too long";
			return len > PX_ICAP_HEAD_MAX ? -1 : 0;
		}
		if (eol == p)
			break;		/* the empty line */
		if (*p == ' ' || *p == '\t') {
			*why = "ICAP head: continuation without a field";
			return -1;
		}
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon == NULL || colon == p) {
			*why = "ICAP head: a line that is not a field";
			return -1;
		}
		vend = eol;
		/* Folded continuation lines belong to this field. */
		while (next < end && (*next == ' ' || *next == '\t')) {
			const char *cnext, *ceol = icap_line(next, end, &cnext);

			if (ceol == NULL) {
				*why = "ICAP head too long";
				return len > PX_ICAP_HEAD_MAX ? -1 : 0;
			}
			if (ncont < ICAP_CONT_MAX)
				cont[ncont++] = next;
			next = cnext;
		}
		icap_field(p, (size_t)(colon - p), colon + 1, vend, cont, ncont,
		    h, &bad);
		if (bad) {
			*why = "ICAP head: malformed Encapsulated";
			return -1;
		}
		p = next;
	}
	head_len = (size_t)(next - buf);
	if (head_len > PX_ICAP_HEAD_MAX) {
		*why = "ICAP head too long";
		return -1;
	}
	/* 100 and 204 carry no HTTP head; OPTIONS answers have none either
	 * (an opt-body is never asked for). */
	if (h->status != 200 || (h->req_hdr < 0 && h->res_hdr < 0))
		return (ssize_t)head_len;
	first = h->res_hdr >= 0 ? h->res_hdr : h->req_hdr;
	if (h->req_hdr >= 0 && h->req_hdr < first)
		first = h->req_hdr;
	if (h->body < 0 || h->body < first ||
	    (h->res_hdr >= 0 && h->res_hdr > h->body) ||
	    (h->req_hdr >= 0 && h->req_hdr > h->body)) {
		*why = "ICAP head: Encapsulated offsets out of order";
		return -1;
	}
	need = head_len + (size_t)h->body;
	if (need > PX_ICAP_HEAD_MAX) {
		*why = "encapsulated HTTP head too long";
		return -1;
	}
	if (len < need)
		return 0;
	if (h->res_hdr >= 0) {
		const char *hp = buf + head_len + h->res_hdr;

		h->http_status = icap_http_status(hp, buf + need);
		if (h->http_status == 0) {
			*why = "encapsulated response without an HTTP status line";
			return -1;
		}
	}
	return (ssize_t)need;
}

/* ---- a changed message's chunked body --------------------------------- */

/* One line (CR LF or LF) into line, taken from in: 1, 0 when it is not
 * complete yet, -1 when longer than line. */
static int
icap_chunk_line(struct evbuffer *in, char *line, size_t size)
{
	size_t eol_len;
	struct evbuffer_ptr e = evbuffer_search_eol(in, NULL, &eol_len,
	    EVBUFFER_EOL_CRLF);

	if (e.pos < 0)
		return evbuffer_get_length(in) >= size ? -1 : 0;
	if ((size_t)e.pos >= size)
		return -1;
	evbuffer_remove(in, line, (size_t)e.pos);
	line[e.pos] = '\0';
	evbuffer_drain(in, eol_len);
	return 1;
}

/* A chunk's size line ("1a2b", "1a2b;ext=1"): the size, -1 if none. */
static int
icap_chunk_size(const char *line, unsigned long long *size)
{
	char *end;

	if (!isxdigit((unsigned char)line[0]))
		return -1;
	errno = 0;
	*size = strtoull(line, &end, 16);
	if (errno != 0 || (*end != '\0' && *end != ';' && *end != ' ' &&
	    *end != '\t'))
		return -1;
	return 0;
}

int
px_icap_dechunk(struct px_icap_dechunk *d, struct evbuffer *in,
    struct evbuffer *out, size_t max, const char **why)
{
	char line[1024];
	unsigned long long size;
	int rc;

	for (;;) {
		if (d->left > 0) {
			size_t n = evbuffer_get_length(in);

			if (n == 0)
				return 0;
			if (n > d->left)
				n = (size_t)d->left;
			evbuffer_remove_buffer(in, out, n);
			if ((d->left -= n) == 0)
				d->need_crlf = true;
			continue;
		}
		if ((rc = icap_chunk_line(in, line, sizeof(line))) <= 0) {
			*why = "a chunk line too long";
			return rc;
		}
		if (d->need_crlf) {
			d->need_crlf = false;
			if (line[0] != '\0') {
				*why = "a chunk longer than its size";
				return -1;
			}
		} else if (d->last) {
			if (line[0] == '\0')
				return 1;
			if (++d->trailers > 32) {
				*why = "too many trailer lines";
				return -1;
			}
		} else if (icap_chunk_size(line, &size) == -1) {
			*why = "a bad chunk size";
			return -1;
		} else if (size > max || evbuffer_get_length(out) + size > max) {
			*why = "a changed body over the bound";
			return -1;
		} else {
			d->last = size == 0;
			d->left = size;
		}
	}
}
