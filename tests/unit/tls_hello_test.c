/* Unit tests for proxyd/base/tls_hello.c: a real ClientHello, hellos built here
 * field by field, every prefix, every fragmentation, every length that
 * lies, and the name patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tls_hello.h"

/* `openssl s_client -connect 127.0.0.1:PORT -servername www.example.test
 * -alpn h2,http/1.1` (OpenSSL 3.0.19), as a listener on PORT read it: one
 * record, TLS 1.3 and 1.2 offered, an X25519 key share (public; the
 * client's private half was never stored). Also tests/fuzz/corpus/
 * tls_hello/openssl-sni-alpn. */
static const uint8_t captured[] = {
	0x16, 0x03, 0x01, 0x01, 0x4f, 0x01, 0x00, 0x01, 0x4b, 0x03, 0x03, 0x8e,
	0xe8, 0x97, 0x4a, 0xb2, 0x8e, 0xd0, 0x52, 0xeb, 0x7d, 0x8e, 0x7e, 0xcd,
	0x27, 0xc8, 0xaf, 0xd4, 0x82, 0x53, 0xe7, 0xc3, 0xa3, 0x6c, 0x5e, 0x70,
	0x55, 0xaf, 0x84, 0x32, 0x50, 0xbe, 0x15, 0x20, 0x2e, 0x75, 0x19, 0x57,
	0x72, 0x7e, 0xf9, 0x38, 0x84, 0xf9, 0xa7, 0x48, 0x96, 0x8d, 0x37, 0x84,
	0x5b, 0xed, 0x2e, 0x4e, 0xcf, 0x1d, 0x82, 0x71, 0xee, 0xce, 0x13, 0x9d,
	0x07, 0x68, 0xea, 0x4e, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xc4,
	0x00, 0x00, 0x00, 0x15, 0x00, 0x13, 0x00, 0x00, 0x10, 0x77, 0x77, 0x77,
	0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x74, 0x65, 0x73,
	0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00,
	0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00,
	0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00,
	0x23, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x0c, 0x02, 0x68, 0x32,
	0x08, 0x68, 0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e, 0x31, 0x00, 0x16, 0x00,
	0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04,
	0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08,
	0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05,
	0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05,
	0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03,
	0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33,
	0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0xf6, 0x89, 0x9b, 0xbf,
	0x80, 0x93, 0x67, 0xf4, 0x0f, 0x5c, 0xeb, 0xb3, 0xb1, 0x10, 0x97, 0xfc,
	0xe5, 0x15, 0xfb, 0x1c, 0x68, 0xec, 0xf7, 0x72, 0x3c, 0xcd, 0xd6, 0x81,
	0x12, 0xd2, 0x2f, 0x36,
};

#define BUF_MAX	(128 * 1024)

struct buf {
	uint8_t	b[BUF_MAX];
	size_t	n;
};

/* Single-threaded tests: one set of scratch buffers. */
static struct buf ext, msg, rec;
static struct px_hello h;

static void
put(struct buf *o, const void *p, size_t n)
{
	assert_true(n <= sizeof(o->b) - o->n);
	if (p != NULL)
		memcpy(o->b + o->n, p, n);
	else
		memset(o->b + o->n, 0, n);
	o->n += n;
}

static void
put8(struct buf *o, size_t v)
{
	uint8_t b = (uint8_t)v;

	put(o, &b, 1);
}

static void
put16(struct buf *o, size_t v)
{
	put8(o, v >> 8 & 0xff);
	put8(o, v & 0xff);
}

static void
put24(struct buf *o, size_t v)
{
	put8(o, v >> 16 & 0xff);
	put16(o, v & 0xffff);
}

/* One extension: type, length, data. */
static void
add_ext(struct buf *e, unsigned type, const void *data, size_t n)
{
	put16(e, type);
	put16(e, n);
	put(e, data, n);
}

/* server_name with one host_name of n bytes. */
static void
add_sni_n(struct buf *e, const char *name, size_t n)
{
	put16(e, 0);
	put16(e, n + 5);
	put16(e, n + 3);
	put8(e, 0);
	put16(e, n);
	put(e, name, n);
}

static void
add_sni(struct buf *e, const char *name)
{
	add_sni_n(e, name, strlen(name));
}

/* ALPN from a NULL-terminated list. */
static void
add_alpn(struct buf *e, const char *const *names)
{
	uint8_t d[4096];
	size_t n = 2, k, i;

	for (i = 0; names[i] != NULL; i++) {
		k = strlen(names[i]);
		assert_true(k < 256 && n + 1 + k <= sizeof(d));
		d[n++] = (uint8_t)k;
		memcpy(d + n, names[i], k);
		n += k;
	}
	d[0] = (uint8_t)((n - 2) >> 8);
	d[1] = (uint8_t)(n - 2);
	add_ext(e, 16, d, n);
}

/* supported_versions: TLS 1.3 and 1.2, or 1.2 only. */
static void
add_versions(struct buf *e, bool tls13)
{
	static const uint8_t both[] = { 4, 0x03, 0x04, 0x03, 0x03 };
	static const uint8_t v12[] = { 2, 0x03, 0x03 };

	if (tls13)
		add_ext(e, 43, both, sizeof(both));
	else
		add_ext(e, 43, v12, sizeof(v12));
}

struct body {
	unsigned	version;	/* legacy_version */
	size_t		sid;		/* session_id bytes */
	size_t		suites;		/* cipher_suites bytes */
	size_t		comp;		/* compression methods */
};

static const struct body std_body = { 0x0303, 32, 4, 1 };

/* A ClientHello handshake message (header included) into m, with the
 * extension block e (NULL: no block at all). */
static void
hello_body(struct buf *m, const struct body *b, const struct buf *e)
{
	size_t len = 2 + 32 + 1 + b->sid + 2 + b->suites + 1 + b->comp, i;

	if (e != NULL)
		len += 2 + e->n;
	m->n = 0;
	put8(m, 1);
	put24(m, len);
	put16(m, b->version);
	for (i = 0; i < 32; i++)
		put8(m, i);
	put8(m, b->sid);
	for (i = 0; i < b->sid; i++)
		put8(m, 0xa0 + i);
	put16(m, b->suites);
	for (i = 0; i < b->suites; i++)
		put8(m, i % 2 == 0 ? 0x13 : 0x01);
	put8(m, b->comp);
	for (i = 0; i < b->comp; i++)
		put8(m, 0);
	if (e != NULL) {
		put16(m, e->n);
		put(m, e->b, e->n);
	}
}

static void
hello(struct buf *m, const struct buf *e)
{
	hello_body(m, &std_body, e);
}

/* The handshake bytes n in records of at most frag bytes. */
static void
records(struct buf *r, const uint8_t *p, size_t n, size_t frag)
{
	size_t off, k;

	r->n = 0;
	for (off = 0; off < n; off += k) {
		k = n - off < frag ? n - off : frag;
		put8(r, 0x16);
		put16(r, 0x0301);
		put16(r, k);
		put(r, p + off, k);
	}
}

static enum px_hello_result
parse(const struct buf *b)
{
	return px_hello_parse(b->b, b->n, PX_HELLO_MAX, &h);
}

/* The hello around the extension block ext, in one record. */
static enum px_hello_result
parse_ext(void)
{
	hello(&msg, &ext);
	records(&rec, msg.b, msg.n, 16384);
	return parse(&rec);
}

/* A hello whose only extension is (type, data). */
static enum px_hello_result
parse_one(unsigned type, const void *data, size_t n)
{
	ext.n = 0;
	add_ext(&ext, type, data, n);
	return parse_ext();
}

static void
assert_prefixes_need_more(const uint8_t *b, size_t n)
{
	struct px_hello x;
	size_t i;

	for (i = 0; i < n; i++)
		assert_int_equal(px_hello_parse(b, i, PX_HELLO_MAX, &x),
		    PX_HELLO_NEED_MORE);
}

static void
assert_captured_fields(void)
{
	assert_int_equal(h.record_version, 0x0301);
	assert_int_equal(h.client_version, 0x0303);
	assert_true(h.has_sni);
	assert_string_equal(h.sni, "www.example.test");
	assert_int_equal(h.alpn_count, 2);
	assert_string_equal(h.alpn[0], "h2");
	assert_string_equal(h.alpn[1], "http/1.1");
	assert_string_equal(h.alpn[2], "");
	assert_true(h.has_supported_versions);
	assert_true(h.offers_tls13);
}

static void
test_captured(void **state)
{
	static const uint8_t ccs[] = { 0x14, 0x03, 0x03, 0x00, 0x01, 0x01 };
	struct buf *b = &rec;

	(void)state;
	assert_int_equal(sizeof(captured), 340);
	assert_int_equal(px_hello_parse(captured, sizeof(captured),
	    PX_HELLO_MAX, &h), PX_HELLO_OK);
	assert_captured_fields();
	assert_int_equal(h.consumed, 340);
	assert_prefixes_need_more(captured, sizeof(captured));

	/* What follows the hello's records is not the hello's. */
	b->n = 0;
	put(b, captured, sizeof(captured));
	put(b, ccs, sizeof(ccs));
	assert_int_equal(parse(b), PX_HELLO_OK);
	assert_int_equal(h.consumed, 340);
	assert_string_equal(h.sni, "www.example.test");
	/* nor looked at when it is past max */
	b->b[340] = 'G';
	assert_int_equal(px_hello_parse(b->b, b->n, 340, &h), PX_HELLO_OK);
	assert_int_equal(h.consumed, 340);
}

/* The captured hello, cut into records of every size from 1 byte up. */
static void
test_fragmented_every_size(void **state)
{
	const uint8_t *hs = captured + 5;
	size_t n = sizeof(captured) - 5, frag, nrec;

	(void)state;
	for (frag = 1; frag <= n; frag++) {
		records(&rec, hs, n, frag);
		nrec = (n + frag - 1) / frag;
		assert_int_equal(rec.n, n + 5 * nrec);
		assert_int_equal(parse(&rec), PX_HELLO_OK);
		assert_captured_fields();
		assert_int_equal(h.consumed, rec.n);
	}
}

static void
test_two_records(void **state)
{
	static const char *const alpn[] = { "h2", NULL };

	(void)state;
	ext.n = 0;
	add_sni(&ext, "two.example.test");
	add_alpn(&ext, alpn);
	hello(&msg, &ext);
	records(&rec, msg.b, msg.n, 60);
	assert_int_equal(rec.n, msg.n + 10);	/* two records */
	assert_int_equal(parse(&rec), PX_HELLO_OK);
	assert_string_equal(h.sni, "two.example.test");
	assert_int_equal(h.alpn_count, 1);
	assert_string_equal(h.alpn[0], "h2");
	assert_false(h.has_supported_versions);
	assert_false(h.offers_tls13);
	assert_int_equal(h.consumed, rec.n);
	assert_prefixes_need_more(rec.b, rec.n);

	/* Another record type between the fragments. */
	rec.b[65] = 0x17;
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	assert_int_equal(px_hello_parse(rec.b, 66, PX_HELLO_MAX, &h),
	    PX_HELLO_MALFORMED);
	rec.b[65] = 0x16;
	rec.b[66] = 0x02;
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	rec.b[66] = 0x03;
	/* An empty record. */
	rec.b[68] = 0;
	rec.b[69] = 0;
	assert_int_equal(px_hello_parse(rec.b, 70, PX_HELLO_MAX, &h),
	    PX_HELLO_MALFORMED);
}

static void
test_no_sni(void **state)
{
	(void)state;
	ext.n = 0;
	add_versions(&ext, true);
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_false(h.has_sni);
	assert_string_equal(h.sni, "");
	assert_int_equal(h.alpn_count, 0);
	assert_true(h.has_supported_versions);
	assert_true(h.offers_tls13);
	assert_int_equal(h.consumed, rec.n);

	ext.n = 0;
	add_versions(&ext, false);
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_true(h.has_supported_versions);
	assert_false(h.offers_tls13);

	/* No extension block at all: an old client. */
	hello(&msg, NULL);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_OK);
	assert_false(h.has_sni);
	assert_false(h.has_supported_versions);
	assert_int_equal(h.consumed, rec.n);
	assert_prefixes_need_more(rec.b, rec.n);
}

static void
test_sni_names(void **state)
{
	char name[300];

	(void)state;
	ext.n = 0;
	add_sni(&ext, "WWW.Example.TEST");
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_string_equal(h.sni, "www.example.test");

	ext.n = 0;
	add_sni(&ext, "a-1.0-b.x9");
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_string_equal(h.sni, "a-1.0-b.x9");

	/* 63-byte labels, 253 bytes in all */
	memset(name, 'a', 253);
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	ext.n = 0;
	add_sni(&ext, name);
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_int_equal(strlen(h.sni), 253);
	assert_string_equal(h.sni, name);

	/* 254 bytes */
	memset(name, 'a', 254);
	name[63] = name[127] = name[191] = '.';
	name[254] = '\0';
	ext.n = 0;
	add_sni(&ext, name);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	/* a 64-byte label */
	memset(name, 'a', 66);
	name[64] = '.';
	name[66] = '\0';
	ext.n = 0;
	add_sni(&ext, name);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	name[63] = '.';
	name[64] = 'a';
	ext.n = 0;
	add_sni(&ext, name);
	assert_int_equal(parse_ext(), PX_HELLO_OK);

	ext.n = 0;
	add_sni(&ext, "a_b.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, "a b.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, "a..test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, ".a.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, "a.test.");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, "*.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni(&ext, "caf\xc3\xa9.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni_n(&ext, "good.test\0evil.test", 19);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_sni_n(&ext, "", 0);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
}

static void
test_sni_structure(void **state)
{
	/* list 16: host_name "a.test", host_name "b.test" */
	static const uint8_t two[] = { 0, 18, 0, 0, 6, 'a', '.', 't', 'e',
	    's', 't', 0, 0, 6, 'b', '.', 't', 'e', 's', 't' };
	static const uint8_t type1[] = { 0, 9, 1, 0, 6, 'a', '.', 't', 'e',
	    's', 't' };
	static const uint8_t name_long[] = { 0, 9, 0, 0, 7, 'a', '.', 't',
	    'e', 's', 't' };
	static const uint8_t name_short[] = { 0, 9, 0, 0, 5, 'a', '.', 't',
	    'e', 's', 't' };
	static const uint8_t list_long[] = { 0, 10, 0, 0, 6, 'a', '.', 't',
	    'e', 's', 't' };
	static const uint8_t trailing[] = { 0, 9, 0, 0, 6, 'a', '.', 't',
	    'e', 's', 't', 0 };
	static const uint8_t empty_list[] = { 0, 0 };
	static const uint8_t ok[] = { 0, 9, 0, 0, 6, 'a', '.', 't', 'e', 's',
	    't' };

	(void)state;
	assert_int_equal(parse_one(0, ok, sizeof(ok)), PX_HELLO_OK);
	assert_string_equal(h.sni, "a.test");
	assert_int_equal(parse_one(0, two, sizeof(two)), PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, type1, sizeof(type1)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, name_long, sizeof(name_long)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, name_short, sizeof(name_short)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, list_long, sizeof(list_long)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, trailing, sizeof(trailing)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, empty_list, sizeof(empty_list)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(0, NULL, 0), PX_HELLO_MALFORMED);
	/* trailing bytes that would read as one more extension */
	ext.n = 0;
	put16(&ext, 0);
	put16(&ext, sizeof(ok) + 4);
	put(&ext, ok, sizeof(ok));
	put(&ext, "\x00\x17\x00\x00", 4);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n -= 4;
	ext.b[3] -= 4;
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_int_equal(parse_one(0, ok, 1), PX_HELLO_MALFORMED);

	/* The extension twice, even with the same name. */
	ext.n = 0;
	add_sni(&ext, "a.test");
	add_versions(&ext, true);
	add_sni(&ext, "a.test");
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
}

static void
test_alpn(void **state)
{
	static const char *const ten[] = { "p0", "p1", "p2", "p3", "p4",
	    "p5", "p6", "p7", "p8", "p9", NULL };
	static const char *const lens[] = {
	    "0123456789012345678901234567890",		/* 31 */
	    "01234567890123456789012345678901",	/* 32 */
	    "h2", NULL };
	static const uint8_t nul[] = { 0, 6, 5, 'h', '2', 0, 'x', 'y' };
	static const uint8_t empty_name[] = { 0, 3, 0, 1, 'a' };
	static const uint8_t name_long[] = { 0, 3, 3, 'h', '2' };
	static const uint8_t list_long[] = { 0, 4, 2, 'h', '2' };
	static const uint8_t trailing[] = { 0, 3, 2, 'h', '2', 0 };
	static const uint8_t empty_list[] = { 0, 0 };
	unsigned i;

	(void)state;
	ext.n = 0;
	add_alpn(&ext, ten);
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_int_equal(h.alpn_count, 10);
	for (i = 0; i < PX_HELLO_ALPN_MAX; i++) {
		assert_int_equal(h.alpn[i][0], 'p');
		assert_int_equal(h.alpn[i][1], '0' + i);
		assert_int_equal(h.alpn[i][2], '\0');
	}

	ext.n = 0;
	add_alpn(&ext, lens);
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_int_equal(h.alpn_count, 3);
	assert_string_equal(h.alpn[0], lens[0]);
	assert_string_equal(h.alpn[1], "");
	assert_string_equal(h.alpn[2], "h2");

	/* "h2\0xy" must not read as "h2" */
	assert_int_equal(parse_one(16, nul, sizeof(nul)), PX_HELLO_OK);
	assert_int_equal(h.alpn_count, 1);
	assert_string_equal(h.alpn[0], "");

	assert_int_equal(parse_one(16, empty_name, sizeof(empty_name)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(16, name_long, sizeof(name_long)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(16, list_long, sizeof(list_long)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(16, trailing, sizeof(trailing)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(16, empty_list, sizeof(empty_list)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(16, NULL, 0), PX_HELLO_MALFORMED);

	ext.n = 0;
	add_alpn(&ext, ten);
	add_alpn(&ext, ten);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
}

static void
test_versions(void **state)
{
	static const uint8_t odd[] = { 3, 0x03, 0x04, 0x03 };
	static const uint8_t empty[] = { 0 };
	static const uint8_t list_long[] = { 4, 0x03, 0x04 };
	static const uint8_t trailing[] = { 2, 0x03, 0x04, 0 };
	static const uint8_t only13[] = { 2, 0x03, 0x04 };

	(void)state;
	assert_int_equal(parse_one(43, only13, sizeof(only13)), PX_HELLO_OK);
	assert_true(h.has_supported_versions);
	assert_true(h.offers_tls13);
	assert_int_equal(parse_one(43, odd, sizeof(odd)), PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(43, empty, sizeof(empty)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(43, list_long, sizeof(list_long)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(43, trailing, sizeof(trailing)),
	    PX_HELLO_MALFORMED);
	assert_int_equal(parse_one(43, NULL, 0), PX_HELLO_MALFORMED);
}

static void
test_extension_block(void **state)
{
	static const uint8_t reneg[] = { 0 };

	(void)state;
	/* An unknown extension is skipped, an empty one too. */
	ext.n = 0;
	add_ext(&ext, 0x1234, "xyz", 3);
	add_ext(&ext, 23, NULL, 0);
	add_sni(&ext, "a.test");
	assert_int_equal(parse_ext(), PX_HELLO_OK);
	assert_string_equal(h.sni, "a.test");

	/* Any type below 64 twice; above, not checked (GREASE, 0xff01). */
	ext.n = 0;
	add_ext(&ext, 23, NULL, 0);
	add_ext(&ext, 23, NULL, 0);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	ext.n = 0;
	add_ext(&ext, 0xff01, reneg, 1);
	add_ext(&ext, 0xff01, reneg, 1);
	assert_int_equal(parse_ext(), PX_HELLO_OK);

	/* An extension longer than the block. */
	ext.n = 0;
	add_sni(&ext, "a.test");
	put16(&ext, 23);
	put16(&ext, 1);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);
	/* half an extension header */
	ext.n = 0;
	add_sni(&ext, "a.test");
	put8(&ext, 0);
	assert_int_equal(parse_ext(), PX_HELLO_MALFORMED);

	/* The block's length one short of the hello, then one past. */
	ext.n = 0;
	add_sni(&ext, "a.test");
	hello(&msg, &ext);
	msg.b[48 + 32]--;
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	msg.b[48 + 32] += 2;
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
}

static void
test_body(void **state)
{
	struct body b;

	(void)state;
	ext.n = 0;
	add_sni(&ext, "a.test");

	b = std_body;
	b.sid = 0;
	b.comp = 2;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_OK);
	assert_string_equal(h.sni, "a.test");

	b = std_body;
	b.version = 0x0301;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_OK);
	assert_int_equal(h.client_version, 0x0301);

	b = std_body;
	b.version = 0x0200;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	b = std_body;
	b.sid = 33;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	b = std_body;
	b.suites = 3;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	b = std_body;
	b.suites = 0;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	b = std_body;
	b.comp = 0;
	hello_body(&msg, &b, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	/* cipher_suites longer than the hello */
	hello(&msg, NULL);
	msg.b[4 + 2 + 32 + 1 + 32] = 0x7f;
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	/* one byte after the compression methods: no room for a block */
	hello(&msg, NULL);
	put8(&msg, 0);
	msg.b[3]++;
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);

	/* a hello too short for its fixed fields */
	hello(&msg, NULL);
	records(&rec, msg.b, 20, 16384);
	rec.b[5 + 3] = 16;
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	/* and an empty one */
	records(&rec, msg.b, 4, 16384);
	rec.b[5 + 3] = 0;
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
}

static void
test_record_lengths(void **state)
{
	static const uint8_t empty[] = { 0x16, 0x03, 0x01, 0x00, 0x00 };
	static const uint8_t over[] = { 0x16, 0x03, 0x01, 0x40, 0x01, 0x01 };

	(void)state;
	assert_int_equal(px_hello_parse(empty, sizeof(empty), PX_HELLO_MAX,
	    &h), PX_HELLO_MALFORMED);
	assert_int_equal(px_hello_parse(over, sizeof(over), 65536, &h),
	    PX_HELLO_MALFORMED);

	/* The record holds a byte more than the hello: trailing garbage. */
	ext.n = 0;
	add_sni(&ext, "a.test");
	hello(&msg, &ext);
	put8(&msg, 0);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	/* decided from the lengths, before the bytes are there */
	assert_int_equal(px_hello_parse(rec.b, 9, PX_HELLO_MAX, &h),
	    PX_HELLO_MALFORMED);
	assert_int_equal(px_hello_parse(rec.b, 8, PX_HELLO_MAX, &h),
	    PX_HELLO_NEED_MORE);

	/* The hello says one byte more than its records: waits for the next
	 * record, which must be a handshake. */
	hello(&msg, &ext);
	msg.b[3]++;
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(parse(&rec), PX_HELLO_NEED_MORE);
	put8(&rec, 0x15);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);
	rec.n--;
	put(&rec, "\x16\x03\x01\x00\x01\x00", 6);
	assert_int_equal(parse(&rec), PX_HELLO_MALFORMED);	/* in the block */
}

static void
test_not_tls(void **state)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	/* SSLv2-compatible CLIENT-HELLO: 2-byte header with the top bit */
	static const uint8_t v2[] = { 0x80, 0x2e, 0x01, 0x03, 0x01, 0x00,
	    0x15, 0x00, 0x00, 0x00, 0x10 };
	static const uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x30,
	    0x02, 0x00, 0x00, 0x2c };
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02 };
	static const uint8_t major2[] = { 0x16, 0x02, 0x00 };
	static const uint8_t minor16[] = { 0x16, 0x03, 0x10 };
	size_t i;

	(void)state;
	for (i = 1; i < sizeof(get); i++)
		assert_int_equal(px_hello_parse((const uint8_t *)get, i,
		    PX_HELLO_MAX, &h), PX_HELLO_NOT_TLS);
	for (i = 1; i <= sizeof(v2); i++)
		assert_int_equal(px_hello_parse(v2, i, PX_HELLO_MAX, &h),
		    PX_HELLO_NOT_TLS);
	for (i = 1; i <= 5; i++)
		assert_int_equal(px_hello_parse(server_hello, i, PX_HELLO_MAX,
		    &h), PX_HELLO_NEED_MORE);
	for (; i <= sizeof(server_hello); i++)
		assert_int_equal(px_hello_parse(server_hello, i, PX_HELLO_MAX,
		    &h), PX_HELLO_NOT_TLS);
	assert_int_equal(px_hello_parse(alert, 1, PX_HELLO_MAX, &h),
	    PX_HELLO_NOT_TLS);
	assert_int_equal(px_hello_parse(major2, 1, PX_HELLO_MAX, &h),
	    PX_HELLO_NEED_MORE);
	assert_int_equal(px_hello_parse(major2, 2, PX_HELLO_MAX, &h),
	    PX_HELLO_NOT_TLS);
	assert_int_equal(px_hello_parse(minor16, 2, PX_HELLO_MAX, &h),
	    PX_HELLO_NEED_MORE);
	assert_int_equal(px_hello_parse(minor16, 3, PX_HELLO_MAX, &h),
	    PX_HELLO_NOT_TLS);
	assert_int_equal(px_hello_parse(NULL, 0, PX_HELLO_MAX, &h),
	    PX_HELLO_NEED_MORE);
}

static void
test_too_big(void **state)
{
	static const char *const alpn[] = { "h2", NULL };
	size_t i;

	(void)state;
	/* The captured hello is 340 bytes. */
	assert_int_equal(px_hello_parse(captured, sizeof(captured), 340, &h),
	    PX_HELLO_OK);
	assert_int_equal(px_hello_parse(captured, sizeof(captured), 339, &h),
	    PX_HELLO_TOO_BIG);
	/* known from the record header */
	assert_int_equal(px_hello_parse(captured, 4, 339, &h),
	    PX_HELLO_NEED_MORE);
	assert_int_equal(px_hello_parse(captured, 5, 339, &h),
	    PX_HELLO_TOO_BIG);

	/* In small records: known from the handshake length. */
	ext.n = 0;
	add_ext(&ext, 21, NULL, 1000);	/* padding */
	hello(&msg, &ext);
	records(&rec, msg.b, msg.n, 100);
	assert_int_equal(parse(&rec), PX_HELLO_OK);
	assert_int_equal(px_hello_parse(rec.b, rec.n, rec.n, &h), PX_HELLO_OK);
	assert_int_equal(px_hello_parse(rec.b, rec.n, rec.n - 1, &h),
	    PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse(rec.b, 8, 500, &h),
	    PX_HELLO_NEED_MORE);
	assert_int_equal(px_hello_parse(rec.b, 9, 500, &h), PX_HELLO_TOO_BIG);
	/* Every prefix, against a max one short: TOO_BIG from the header of
	 * the last record but one, when the rest could at best come in one
	 * more record, which does not fit; NEED_MORE before. */
	assert_int_equal(msg.n, 1085);		/* 11 records */
	for (i = 0; i < rec.n; i++)
		assert_int_equal(px_hello_parse(rec.b, i, rec.n - 1, &h),
		    i < 9 * 105 + 5 ? PX_HELLO_NEED_MORE : PX_HELLO_TOO_BIG);

	/* Past one record: 16384-byte records, the hello ~20 KiB. */
	ext.n = 0;
	add_sni(&ext, "big.example.test");
	add_alpn(&ext, alpn);
	add_ext(&ext, 21, NULL, 20000);
	hello(&msg, &ext);
	records(&rec, msg.b, msg.n, 16384);
	assert_int_equal(rec.n, msg.n + 10);
	assert_int_equal(parse(&rec), PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse(rec.b, 9, PX_HELLO_MAX, &h),
	    PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse(rec.b, rec.n, 65536, &h), PX_HELLO_OK);
	assert_string_equal(h.sni, "big.example.test");
	assert_string_equal(h.alpn[0], "h2");
	assert_int_equal(h.consumed, rec.n);
	for (i = 0; i < rec.n; i++)
		assert_int_equal(px_hello_parse(rec.b, i, 65536, &h),
		    PX_HELLO_NEED_MORE);

	/* A header that cannot fit is TOO_BIG before its bytes are looked
	 * at: in 1-byte records the second header (6..10) does not fit in max
	 * 8, whatever its version byte (8, here MALFORMED) says. */
	records(&rec, captured + 5, sizeof(captured) - 5, 1);
	rec.b[8] = 0x20;
	assert_int_equal(px_hello_parse(rec.b, rec.n, PX_HELLO_MAX, &h),
	    PX_HELLO_MALFORMED);
	assert_int_equal(px_hello_parse(rec.b, rec.n, 8, &h), PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse(rec.b, 8, 8, &h), PX_HELLO_TOO_BIG);

	/* Incomplete at max, with nothing said yet about the length. */
	assert_int_equal(px_hello_parse(captured, 3, 3, &h), PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse(captured, 0, 0, &h), PX_HELLO_TOO_BIG);
	/* Not even a record header fits in max: TOO_BIG whatever the bytes,
	 * else what is plainly not TLS says so. */
	assert_int_equal(px_hello_parse((const uint8_t *)"GET", 1, 4, &h),
	    PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse((const uint8_t *)"GET", 3, 4, &h),
	    PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse((const uint8_t *)"GET", 1, 5, &h),
	    PX_HELLO_NOT_TLS);
	/* A record too long for max: TOO_BIG before its first byte is read
	 * (the verdict must not depend on whether that byte is in yet). */
	assert_int_equal(px_hello_parse((const uint8_t *)"\x16\x03\x01\x40"
	    "\x00\x02", 6, PX_HELLO_MAX, &h), PX_HELLO_TOO_BIG);
	assert_int_equal(px_hello_parse((const uint8_t *)"\x16\x03\x01\x40"
	    "\x00\x02", 5, PX_HELLO_MAX, &h), PX_HELLO_TOO_BIG);
}

static void
test_name_match(void **state)
{
	(void)state;
	assert_true(px_hello_name_match("www.example.test",
	    "www.example.test"));
	assert_true(px_hello_name_match("WWW.Example.Test",
	    "www.example.TEST"));
	assert_false(px_hello_name_match("www.example.test", "example.test"));
	assert_false(px_hello_name_match("example.test", "www.example.test"));
	assert_false(px_hello_name_match("www.example.test",
	    "www.example.test."));
	assert_false(px_hello_name_match("www.example.test",
	    "www.example.tes"));

	assert_true(px_hello_name_match("*.example.test", "a.example.test"));
	assert_true(px_hello_name_match("*.Example.test", "A-1.EXAMPLE.test"));
	assert_false(px_hello_name_match("*.example.test", "example.test"));
	assert_false(px_hello_name_match("*.example.test",
	    "a.b.example.test"));
	assert_false(px_hello_name_match("*.example.test", ".example.test"));
	assert_false(px_hello_name_match("*.example.test", "aexample.test"));
	assert_false(px_hello_name_match("*.example.test",
	    "a.example.test.evil"));
	assert_false(px_hello_name_match("*.example.test", "a"));
	assert_true(px_hello_name_match("*.test", "a.test"));

	assert_true(px_hello_name_match("*", "a.example.test"));
	assert_true(px_hello_name_match("*", "x"));
	assert_false(px_hello_name_match("*", ""));
	assert_false(px_hello_name_match("*.example.test", ""));
	assert_false(px_hello_name_match("", ""));
	assert_false(px_hello_name_match("", "a"));

	/* '*' anywhere else is literal */
	assert_false(px_hello_name_match("w*.example.test",
	    "www.example.test"));
	assert_false(px_hello_name_match("a.*.test", "a.b.test"));
	assert_false(px_hello_name_match("**.example.test", "a.example.test"));
	assert_false(px_hello_name_match("*.", "a."));
	assert_true(px_hello_name_match("a.*.test", "a.*.test"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_captured),
		cmocka_unit_test(test_fragmented_every_size),
		cmocka_unit_test(test_two_records),
		cmocka_unit_test(test_no_sni),
		cmocka_unit_test(test_sni_names),
		cmocka_unit_test(test_sni_structure),
		cmocka_unit_test(test_alpn),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_extension_block),
		cmocka_unit_test(test_body),
		cmocka_unit_test(test_record_lengths),
		cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_name_match),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
