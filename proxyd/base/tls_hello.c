/* The ClientHello reader (tls_hello.h). */
#include "tls_hello.h"

#include <string.h>

#define PX_HELLO_REC_HDR	5	/* type, version, length */
#define PX_HELLO_REC_MAX	16384	/* RFC 8446 5.1: 2^14 plaintext bytes */
#define PX_HELLO_HS_HDR		4	/* msg_type, uint24 length */

enum {
	PX_HELLO_EXT_SNI = 0,
	PX_HELLO_EXT_ALPN = 16,
	PX_HELLO_EXT_VERSIONS = 43,
};

/* A cursor over the handshake stream, the concatenated payloads of the
 * records, read in place. px_hello_frame() has checked every record header
 * the hello covers, and lim never passes the hello's end, so crossing into
 * the next record needs no check. */
struct px_hello_rd {
	const uint8_t	*buf;
	size_t		 pos;		/* next byte in buf */
	size_t		 rec_left;	/* payload bytes left in the record */
	size_t		 off;		/* handshake bytes read */
	size_t		 lim;		/* end of the structure being read */
};

static uint16_t
px_hello_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The record header at pos, as far as len goes: 0x16 0x03 0x00..0x0f. */
static bool
px_hello_rec_ok(const uint8_t *buf, size_t pos, size_t len)
{
	if (pos < len && buf[pos] != 0x16)
		return false;
	if (pos + 1 < len && buf[pos + 1] != 0x03)
		return false;
	if (pos + 2 < len && buf[pos + 2] > 0x0f)
		return false;
	return true;
}

/* Walks the records: checks each header and finds the hello's length
 * (*msg_len, with its handshake header) and the end of the record it ends
 * in (*end). Each check comes as soon as what it needs is in, in byte
 * order (a header must fit in max before its bytes are looked at, a
 * record's length before its payload), and no byte at or past len (which
 * the caller has clamped to max) is looked at: so a verdict other than
 * NEED_MORE stays the same however many bytes follow. */
static enum px_hello_result
px_hello_frame(const uint8_t *buf, size_t len, size_t max, size_t *msg_len,
    size_t *end)
{
	uint8_t hs[PX_HELLO_HS_HDR];
	size_t pos = 0, have = 0, need = 0, nhs = 0, rlen, p, rec_end;
	size_t after, least;

	for (;;) {
		if (max - pos < PX_HELLO_REC_HDR)
			return PX_HELLO_TOO_BIG;
		if (!px_hello_rec_ok(buf, pos, len))
			return pos == 0 ? PX_HELLO_NOT_TLS : PX_HELLO_MALFORMED;
		if (len - pos < PX_HELLO_REC_HDR)
			return PX_HELLO_NEED_MORE;
		rlen = px_hello_be16(buf + pos + 3);
		if (rlen == 0 || rlen > PX_HELLO_REC_MAX)
			return PX_HELLO_MALFORMED;
		if (rlen > max - pos - PX_HELLO_REC_HDR)
			return PX_HELLO_TOO_BIG;
		p = pos + PX_HELLO_REC_HDR;
		rec_end = p + rlen;
		/* The handshake header, which may itself be fragmented. */
		for (; nhs < PX_HELLO_HS_HDR && p < rec_end && p < len; p++) {
			hs[nhs++] = buf[p];
			if (nhs == 1 && hs[0] != 1)	/* client_hello */
				return PX_HELLO_NOT_TLS;
		}
		if (nhs == PX_HELLO_HS_HDR && need == 0)
			need = PX_HELLO_HS_HDR + ((size_t)hs[1] << 16 |
			    (size_t)hs[2] << 8 | hs[3]);
		/* The last record must end with the hello. */
		if (need != 0 && have + rlen > need)
			return PX_HELLO_MALFORMED;
		if (need != 0) {
			/* This record, then what is left in full records. */
			after = need - have - rlen;
			least = PX_HELLO_REC_HDR + rlen + after +
			    PX_HELLO_REC_HDR * ((after + PX_HELLO_REC_MAX - 1) /
			    PX_HELLO_REC_MAX);
			if (least > max - pos)
				return PX_HELLO_TOO_BIG;
		}
		if (need != 0 && have + rlen == need) {
			if (rec_end > len)
				return PX_HELLO_NEED_MORE;
			*msg_len = need;
			*end = rec_end;
			return PX_HELLO_OK;
		}
		if (rec_end > len)
			return PX_HELLO_NEED_MORE;
		have += rlen;
		pos = rec_end;
	}
}

/* Reads n bytes into dst (NULL: skips them); false past lim. */
static bool
px_hello_get(struct px_hello_rd *r, void *dst, size_t n)
{
	uint8_t *d = dst;
	size_t k;

	if (n > r->lim - r->off)
		return false;
	while (n > 0) {
		if (r->rec_left == 0) {
			r->rec_left = px_hello_be16(r->buf + r->pos + 3);
			r->pos += PX_HELLO_REC_HDR;
		}
		k = n < r->rec_left ? n : r->rec_left;
		if (d != NULL) {
			memcpy(d, r->buf + r->pos, k);
			d += k;
		}
		r->pos += k;
		r->rec_left -= k;
		r->off += k;
		n -= k;
	}
	return true;
}

static bool
px_hello_u8(struct px_hello_rd *r, size_t *v)
{
	uint8_t b;

	if (!px_hello_get(r, &b, 1))
		return false;
	*v = b;
	return true;
}

static bool
px_hello_u16(struct px_hello_rd *r, size_t *v)
{
	uint8_t b[2];

	if (!px_hello_get(r, b, 2))
		return false;
	*v = px_hello_be16(b);
	return true;
}

/* Narrows the cursor to the next n bytes; *outer keeps the old limit. */
static bool
px_hello_enter(struct px_hello_rd *r, size_t n, size_t *outer)
{
	if (n > r->lim - r->off)
		return false;
	*outer = r->lim;
	r->lim = r->off + n;
	return true;
}

/* Back to the outer limit; false if bytes are left over inside. */
static bool
px_hello_leave(struct px_hello_rd *r, size_t outer)
{
	if (r->off != r->lim)
		return false;
	r->lim = outer;
	return true;
}

/* A DNS name, lowercased into out: see tls_hello.h. */
static bool
px_hello_dns_name(const uint8_t *s, size_t n, char *out)
{
	size_t i, label = 0;
	uint8_t c;

	if (n == 0 || n > PX_HELLO_SNI_MAX)
		return false;
	for (i = 0; i < n; i++) {
		c = s[i];
		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else {
			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			else if (!((c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || c == '-'))
				return false;
			if (++label > 63)
				return false;
		}
		out[i] = (char)c;
	}
	if (label == 0)
		return false;
	out[n] = '\0';
	return true;
}

/* server_name: one host_name entry (RFC 6066 3). */
static bool
px_hello_sni(struct px_hello_rd *r, struct px_hello *h)
{
	uint8_t name[PX_HELLO_SNI_MAX];
	size_t n, type, outer;

	if (!px_hello_u16(r, &n) || n == 0 || !px_hello_enter(r, n, &outer))
		return false;
	while (r->off < r->lim) {
		if (!px_hello_u8(r, &type) || type != 0 || h->has_sni)
			return false;
		if (!px_hello_u16(r, &n) || n == 0 || n > sizeof(name) ||
		    !px_hello_get(r, name, n) ||
		    !px_hello_dns_name(name, n, h->sni))
			return false;
		h->has_sni = true;
	}
	return px_hello_leave(r, outer);
}

/* application_layer_protocol_negotiation (RFC 7301 3.1). */
static bool
px_hello_alpn(struct px_hello_rd *r, struct px_hello *h)
{
	uint8_t name[255];
	size_t n, outer;
	char *slot;

	if (!px_hello_u16(r, &n) || n == 0 || !px_hello_enter(r, n, &outer))
		return false;
	while (r->off < r->lim) {
		if (!px_hello_u8(r, &n) || n == 0)
			return false;
		if (h->alpn_count >= PX_HELLO_ALPN_MAX) {
			if (!px_hello_get(r, NULL, n))
				return false;
			h->alpn_count++;
			continue;
		}
		if (!px_hello_get(r, name, n))
			return false;
		slot = h->alpn[h->alpn_count++];
		if (n < PX_HELLO_ALPN_LEN && memchr(name, '\0', n) == NULL) {
			memcpy(slot, name, n);
			slot[n] = '\0';
		} else
			slot[0] = '\0';
	}
	return px_hello_leave(r, outer);
}

/* supported_versions in a ClientHello (RFC 8446 4.2.1). */
static bool
px_hello_versions(struct px_hello_rd *r, struct px_hello *h)
{
	size_t n, v, outer;

	if (!px_hello_u8(r, &n) || n < 2 || n % 2 != 0 ||
	    !px_hello_enter(r, n, &outer))
		return false;
	while (r->off < r->lim) {
		if (!px_hello_u16(r, &v))
			return false;
		if (v == 0x0304)
			h->offers_tls13 = true;
	}
	h->has_supported_versions = true;
	return px_hello_leave(r, outer);
}

static bool
px_hello_extensions(struct px_hello_rd *r, struct px_hello *h)
{
	uint64_t seen = 0;
	size_t n, type, outer;
	bool ok;

	if (!px_hello_u16(r, &n) || n != r->lim - r->off)
		return false;
	while (r->off < r->lim) {
		if (!px_hello_u16(r, &type) || !px_hello_u16(r, &n) ||
		    !px_hello_enter(r, n, &outer))
			return false;
		if (type < 64) {
			if (seen & (UINT64_C(1) << type))
				return false;
			seen |= UINT64_C(1) << type;
		}
		switch (type) {
		case PX_HELLO_EXT_SNI:
			ok = px_hello_sni(r, h);
			break;
		case PX_HELLO_EXT_ALPN:
			ok = px_hello_alpn(r, h);
			break;
		case PX_HELLO_EXT_VERSIONS:
			ok = px_hello_versions(r, h);
			break;
		default:
			ok = px_hello_get(r, NULL, n);
			break;
		}
		if (!ok || !px_hello_leave(r, outer))
			return false;
	}
	return true;
}

/* The ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2). */
static bool
px_hello_body(struct px_hello_rd *r, struct px_hello *h)
{
	size_t v, n;

	if (!px_hello_get(r, NULL, PX_HELLO_HS_HDR) || !px_hello_u16(r, &v) ||
	    v >> 8 != 0x03)
		return false;
	h->client_version = (uint16_t)v;
	if (!px_hello_get(r, NULL, 32))				/* random */
		return false;
	if (!px_hello_u8(r, &n) || n > 32 || !px_hello_get(r, NULL, n))
		return false;					/* session_id */
	if (!px_hello_u16(r, &n) || n == 0 || n % 2 != 0 ||
	    !px_hello_get(r, NULL, n))
		return false;					/* cipher_suites */
	if (!px_hello_u8(r, &n) || n == 0 || !px_hello_get(r, NULL, n))
		return false;				/* compression_methods */
	if (r->off == r->lim)
		return true;		/* no extensions: an old client */
	return px_hello_extensions(r, h);
}

enum px_hello_result
px_hello_parse(const uint8_t *buf, size_t len, size_t max,
    struct px_hello *out)
{
	struct px_hello_rd r;
	enum px_hello_result res;
	size_t msg_len = 0, end = 0;

	memset(out, 0, sizeof(*out));
	if (len > max)
		len = max;	/* nothing past max is ever looked at */
	/* NEED_MORE only with len < max: every byte the frame waits for is
	 * inside max, or it has said TOO_BIG. */
	if ((res = px_hello_frame(buf, len, max, &msg_len, &end)) !=
	    PX_HELLO_OK)
		return res;
	r.buf = buf;
	r.pos = 0;
	r.rec_left = 0;
	r.off = 0;
	r.lim = msg_len;
	if (!px_hello_body(&r, out) || r.off != msg_len) {
		memset(out, 0, sizeof(*out));
		return PX_HELLO_MALFORMED;
	}
	out->record_version = px_hello_be16(buf + 1);
	out->consumed = end;
	return PX_HELLO_OK;
}

static char
px_hello_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool
px_hello_name_eq(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++)
		if (px_hello_lower(*a) != px_hello_lower(*b))
			return false;
	return *a == *b;
}

bool
px_hello_name_match(const char *pattern, const char *name)
{
	const char *dot;

	if (name[0] == '\0')
		return false;
	if (strcmp(pattern, "*") == 0)
		return true;
	if (pattern[0] == '*' && pattern[1] == '.' && pattern[2] != '\0') {
		if ((dot = strchr(name, '.')) == NULL || dot == name)
			return false;
		return px_hello_name_eq(dot + 1, pattern + 2);
	}
	return px_hello_name_eq(pattern, name);
}
