/* ja4: FoxIO's JA4 client fingerprint of a ClientHello (see ja4.h): the
 * hello's fields read off its bytes, GREASE left out, the cipher and
 * extension lists sorted and hashed with SHA-256 cut to 12 hex digits;
 * and JA4S, the server's, of a ServerHello (its extensions in order). */
#include "ja4.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

enum {
	PX_JA4_EXT_SNI = 0x0000,
	PX_JA4_EXT_SIGALGS = 0x000d,
	PX_JA4_EXT_ALPN = 0x0010,
	PX_JA4_EXT_VERSIONS = 0x002b,
};

/* RFC 8701: 0x0a0a, 0x1a1a, ... 0xfafa. */
static bool
px_ja4_grease(unsigned v)
{
	return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

static unsigned
px_ja4_be16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static int
px_ja4_cmp(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* What the fingerprint is made of, read off the hello. The three lists
 * share one scratch array: each value took at least two bytes of msg. */
struct px_ja4_fields {
	unsigned	 version;
	bool		 sni;
	const uint8_t	*alpn;		/* the first protocol; NULL: none */
	size_t		 alpn_len;
	uint16_t	*ciphers, *exts, *sorted, *sigs;
	size_t		 nciphers, nexts, nsorted, nsigs;
	char		*text;		/* a list as hashed */
};

/* Reads the extension block at p..end; false if malformed. */
static bool
px_ja4_extensions(const uint8_t *p, const uint8_t *end,
    struct px_ja4_fields *f)
{
	unsigned type, n, i, v, max = 0;
	const uint8_t *b;

	while (p < end) {
		if (end - p < 4)
			return false;
		type = px_ja4_be16(p);
		n = px_ja4_be16(p + 2);
		b = p + 4;
		if ((size_t)(end - b) < n)
			return false;
		p = b + n;
		if (px_ja4_grease(type))
			continue;
		f->exts[f->nexts++] = (uint16_t)type;
		switch (type) {
		case PX_JA4_EXT_SNI:
			f->sni = true;
			break;
		case PX_JA4_EXT_ALPN:
			/* list length, then length-prefixed names */
			if (f->alpn == NULL && n >= 3 && b[2] > 0 &&
			    (size_t)b[2] + 3 <= n) {
				f->alpn = b + 3;
				f->alpn_len = b[2];
			}
			break;
		case PX_JA4_EXT_SIGALGS:
			if (n < 2 || px_ja4_be16(b) > n - 2 || f->nsigs > 0)
				break;
			for (i = 0; i + 1 < px_ja4_be16(b); i += 2) {
				v = px_ja4_be16(b + 2 + i);
				if (!px_ja4_grease(v))
					f->sigs[f->nsigs++] = (uint16_t)v;
			}
			break;
		case PX_JA4_EXT_VERSIONS:
			if (n < 1 || b[0] > n - 1)
				break;
			for (i = 0; i + 1 < b[0]; i += 2) {
				v = px_ja4_be16(b + 1 + i);
				if (!px_ja4_grease(v) && v > max)
					max = v;
			}
			if (max != 0)
				f->version = max;
			break;
		}
	}
	return true;
}

static const char *
px_ja4_version(unsigned v)
{
	switch (v) {
	case 0x0304: return "13";
	case 0x0303: return "12";
	case 0x0302: return "11";
	case 0x0301: return "10";
	case 0x0300: return "s3";
	case 0x0002: return "s2";
	case 0xfeff: return "d1";
	case 0xfefd: return "d2";
	case 0xfefc: return "d3";
	default: return "00";
	}
}

static bool
px_ja4_alnum(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
	    (c >= 'a' && c <= 'z');
}

/* The first ALPN protocol's first and last characters; when either is
 * not alphanumeric, the first and last digits of its hex form. */
static void
px_ja4_alpn(const struct px_ja4_fields *f, char out[3])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t a, z;

	if (f->alpn == NULL) {
		memcpy(out, "00", 3);
		return;
	}
	a = f->alpn[0];
	z = f->alpn[f->alpn_len - 1];
	if (px_ja4_alnum(a) && px_ja4_alnum(z)) {
		out[0] = (char)a;
		out[1] = (char)z;
	} else {
		out[0] = hex[a >> 4];
		out[1] = hex[z & 0x0f];
	}
	out[2] = '\0';
}

/* SHA-256, fetched once: an implicit fetch per digest (EVP_sha256() in
 * EVP_DigestInit) costs more than the digest of a hello's lists. */
static EVP_MD *px_ja4_md;
static pthread_once_t px_ja4_md_once = PTHREAD_ONCE_INIT;

static void
px_ja4_md_fetch(void)
{
	px_ja4_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* Appends the values as "%04x" joined by ",", after sep when any. */
static char *
px_ja4_list(char *p, const uint16_t *v, size_t n, char sep)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		*p++ = i > 0 ? ',' : sep;
		*p++ = hex[v[i] >> 12];
		*p++ = hex[(v[i] >> 8) & 0xf];
		*p++ = hex[(v[i] >> 4) & 0xf];
		*p++ = hex[v[i] & 0xf];
	}
	return p;
}

/* sha256 over the values as "%04x" joined by ",", then (when tail has
 * any) "_" and tail's the same way: 12 hex digits into out. text has room
 * for 5 bytes a value. */
static bool
px_ja4_hash(const uint16_t *v, size_t n, const uint16_t *tail, size_t ntail,
    char *text, char out[13])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl, i;
	char *p;

	(void)pthread_once(&px_ja4_md_once, px_ja4_md_fetch);
	if (px_ja4_md == NULL)
		return false;
	/* The first value has no separator before it. */
	p = px_ja4_list(text, v, n, ',');
	p = px_ja4_list(p, tail, ntail, '_');
	if (EVP_Digest(text + 1, (size_t)(p - text - 1), d, &dl, px_ja4_md,
	    NULL) != 1)
		return false;
	for (i = 0; i < 6; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return true;
}

static bool
px_ja4_build(const uint8_t *msg, size_t len, struct px_ja4_fields *f,
    char *out)
{
	const uint8_t *p, *end;
	size_t n, i;
	unsigned v;
	char alpn[3], ch[13], eh[13];

	if (len < 4 || msg[0] != 1)
		return false;
	n = (size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3];
	if (n != len - 4)
		return false;
	p = msg + 4;
	end = p + n;
	if (end - p < 2 + 32 + 1)
		return false;
	f->version = px_ja4_be16(p);
	p += 2 + 32;
	if ((size_t)(end - p) < 1u + p[0])		/* session_id */
		return false;
	p += 1 + p[0];
	if (end - p < 2 || (size_t)(end - p - 2) < px_ja4_be16(p) ||
	    px_ja4_be16(p) % 2 != 0)
		return false;
	for (i = 0; i < px_ja4_be16(p); i += 2) {
		v = px_ja4_be16(p + 2 + i);
		if (!px_ja4_grease(v))
			f->ciphers[f->nciphers++] = (uint16_t)v;
	}
	p += 2 + px_ja4_be16(p);
	if (end - p < 1 || (size_t)(end - p - 1) < p[0])	/* compression */
		return false;
	p += 1 + p[0];
	if (p < end) {
		if (end - p < 2 || px_ja4_be16(p) != (size_t)(end - p - 2))
			return false;
		if (!px_ja4_extensions(p + 2, end, f))
			return false;
	}
	px_ja4_alpn(f, alpn);
	qsort(f->ciphers, f->nciphers, sizeof(uint16_t), px_ja4_cmp);
	/* The extensions hashed leave SNI and ALPN out (they are in part
	 * a), sorted; the count above took them all. */
	for (i = 0; i < f->nexts; i++)
		if (f->exts[i] != PX_JA4_EXT_SNI && f->exts[i] != PX_JA4_EXT_ALPN)
			f->sorted[f->nsorted++] = f->exts[i];
	qsort(f->sorted, f->nsorted, sizeof(uint16_t), px_ja4_cmp);
	if (f->nciphers == 0)
		memcpy(ch, "000000000000", 13);
	else if (!px_ja4_hash(f->ciphers, f->nciphers, NULL, 0, f->text, ch))
		return false;
	if (f->nsorted == 0)
		memcpy(eh, "000000000000", 13);
	else if (!px_ja4_hash(f->sorted, f->nsorted, f->sigs, f->nsigs, f->text,
	    eh))
		return false;
	snprintf(out, PX_JA4_LEN + 1, "t%s%c%02zu%02zu%s_%s_%s",
	    px_ja4_version(f->version), f->sni ? 'd' : 'i',
	    f->nciphers > 99 ? (size_t)99 : f->nciphers,
	    f->nexts > 99 ? (size_t)99 : f->nexts, alpn, ch, eh);
	return true;
}

bool
px_ja4_hello(const uint8_t *msg, size_t len, char *out)
{
	struct px_ja4_fields f;
	uint16_t *scratch;
	size_t cap = len / 2 + 1;
	bool ok;

	out[0] = '\0';
	memset(&f, 0, sizeof(f));
	/* Ciphers, extensions, the extensions hashed (sorted), signature
	 * algorithms: each list has at most one entry per two bytes of msg. */
	if ((scratch = malloc(4 * cap * sizeof(uint16_t) + 10 * cap)) == NULL)
		return false;
	f.ciphers = scratch;
	f.exts = scratch + cap;
	f.sorted = scratch + 2 * cap;
	f.sigs = scratch + 3 * cap;
	f.text = (char *)(scratch + 4 * cap);	/* two lists, 5 bytes a value */
	ok = px_ja4_build(msg, len, &f, out);
	free(scratch);
	if (!ok)
		out[0] = '\0';
	return ok;
}

bool
px_ja4_records(const uint8_t *buf, size_t len, char *out)
{
	uint8_t *msg;
	size_t pos = 0, have = 0, n, need = 0;
	bool ok = false;

	out[0] = '\0';
	if ((msg = malloc(len)) == NULL)
		return false;
	while (len - pos >= 5 && buf[pos] == 0x16) {
		n = px_ja4_be16(buf + pos + 3);
		if (n > len - pos - 5)
			break;
		memcpy(msg + have, buf + pos + 5, n);
		have += n;
		pos += 5 + n;
		if (have >= 4) {
			need = 4 + ((size_t)msg[1] << 16 |
			    (size_t)msg[2] << 8 | msg[3]);
			if (have >= need) {
				ok = px_ja4_hello(msg, need, out);
				break;
			}
		}
	}
	free(msg);
	return ok;
}

bool
px_ja4_valid(const char *s)
{
	size_t i;

	if (strlen(s) != PX_JA4_LEN || s[10] != '_' || s[23] != '_')
		return false;
	for (i = 0; i < PX_JA4_LEN; i++) {
		if (i == 10 || i == 23)
			continue;
		if (i < 10 ? !px_ja4_alnum((uint8_t)s[i]) :
		    !((s[i] >= 'a' && s[i] <= 'f') ||
		    (s[i] >= '0' && s[i] <= '9')))
			return false;
	}
	return true;
}

/* RFC 8446 4.1.3: a ServerHello whose random is SHA-256 of
 * "HelloRetryRequest" is a HelloRetryRequest. */
static const uint8_t px_ja4_hrr_random[32] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02,
	0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

bool
px_ja4s_is_hrr(const uint8_t *msg, size_t len)
{
	return len >= 4 + 2 + 32 && msg[0] == 2 &&
	    memcmp(msg + 6, px_ja4_hrr_random, 32) == 0;
}

bool
px_ja4s_hello(const uint8_t *msg, size_t len, char *out)
{
	uint16_t exts[128];
	char text[128 * 5 + 1], alpn[3] = "00", eh[13];
	const uint8_t *p, *end, *b, *proto = NULL;
	unsigned version, cipher, type, n;
	size_t nexts = 0, plen = 0, i;
	struct px_ja4_fields f;

	out[0] = '\0';
	if (len < 4 || msg[0] != 2)
		return false;
	n = (unsigned)msg[1] << 16 | (unsigned)msg[2] << 8 | msg[3];
	if (n != len - 4)
		return false;
	p = msg + 4;
	end = p + n;
	if (end - p < 2 + 32 + 1)
		return false;
	version = px_ja4_be16(p);
	p += 2 + 32;
	if ((size_t)(end - p) < 1u + p[0] + 2 + 1)	/* session_id */
		return false;
	p += 1 + p[0];
	cipher = px_ja4_be16(p);
	p += 2 + 1;					/* compression */
	if (p < end) {
		if (end - p < 2 || px_ja4_be16(p) != (size_t)(end - p - 2))
			return false;
		for (p += 2; p < end; p = b + n) {
			if (end - p < 4)
				return false;
			type = px_ja4_be16(p);
			n = px_ja4_be16(p + 2);
			b = p + 4;
			if ((size_t)(end - b) < n)
				return false;
			/* As sent, in order: a server sends no GREASE. */
			if (nexts < sizeof(exts) / sizeof(exts[0]))
				exts[nexts++] = (uint16_t)type;
			if (type == PX_JA4_EXT_VERSIONS && n == 2)
				version = px_ja4_be16(b);	/* the chosen one */
			else if (type == PX_JA4_EXT_ALPN && n >= 4 &&
			    px_ja4_be16(b) == n - 2 && b[2] > 0 &&
			    (size_t)b[2] + 3 == n) {
				proto = b + 3;
				plen = b[2];
			}
		}
	}
	/* ALPN as JA4 writes it (in TLS 1.3 the server says it in
	 * EncryptedExtensions, not here: "00", as FoxIO's). */
	memset(&f, 0, sizeof(f));
	f.alpn = proto;
	f.alpn_len = plen;
	if (proto != NULL)
		px_ja4_alpn(&f, alpn);
	if (nexts == 0)
		memcpy(eh, "000000000000", 13);
	else if (!px_ja4_hash(exts, nexts, NULL, 0, text, eh))
		return false;
	i = nexts > 99 ? 99 : nexts;
	snprintf(out, PX_JA4S_LEN + 1, "t%s%02zu%s_%04x_%s",
	    px_ja4_version(version), i, alpn, cipher & 0xffffu, eh);
	return true;
}
