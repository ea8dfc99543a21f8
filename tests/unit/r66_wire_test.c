/* Unit tests for plugins/r66/r66_wire.c, r66_json.c and r66_encode.c: the
 * worked examples of R66-WIRE.md section 10 byte for byte (decode and
 * encode), then every malformed variant we can derive from them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r66/r66_json.h"
#include "r66/r66_encode.h"
#include "r66/r66_wire.h"

#define C_ID	0x1a2b3c4du
#define S_ID	0x00c0ffeeu
#define NC	R66_NOCHANNEL
#define MAXLEN	(65536 + R66_DATA_OVERHEAD)

/* "00 01 ff" -> bytes; returns the count. */
static size_t
hex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;
	unsigned v;

	while (*s != '\0') {
		if (*s == ' ' || *s == '\n' || *s == '|') {
			s++;
			continue;
		}
		assert_int_equal(sscanf(s, "%2x", &v), 1);
		assert_true(n < cap);
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

static const char ex_authent[] =
    "00 00 00 35 80 00 00 00 1a 2b 3c 4d 01 00 00 00"
    "0e 00 00 00 10 00 00 00 0a 01 68 6f 73 74 61 54"
    "1a 67 62 7a 56 54 50 7e 32 ed 8c 4c 6a 49 0e 1a"
    "2b 3c 4d 00 33 2e 31 2e 30";

static const char ex_data[] =
    "00 00 00 36 00 c0 ff ee 1a 2b 3c 4d 03 00 00 00"
    "0d 00 00 00 0c 00 00 00 10 03 00 00 00 00 48 65"
    "6c 6c 6f 2c 20 52 36 36 21 0a 2d f4 5e 10 86 4b"
    "1e 59 d7 30 62 e5 b5 41 f7 72";

static const char ex_endtransfer[] =
    "00 00 00 38 00 c0 ff ee 1a 2b 3c 4d 0e 00 00 00"
    "0a 00 00 00 01 00 00 00 20 0e 07 00 32 64 66 34"
    "35 65 31 30 38 36 34 62 31 65 35 39 64 37 33 30"
    "36 32 65 35 62 35 34 31 66 37 37 32";

static const char ex_endrequest[] =
    "00 00 00 1b | 00 c0 ff ee | 1a 2b 3c 4d | 14 | 00 00 00 0d |"
    "00 00 00 01 | 00 00 00 00 | 14 | 00 00 00 04 | 00";

static const char ex_keepalive[] =
    "00 00 00 17 | 80 00 00 00 | 80 00 00 00 | 15 | 00 00 00 09 |"
    "00 00 00 01 | 00 00 00 00 | 15 | 00";

static const char caps_json[] = "3.1.0.{\"HOSTID\":\"hosta\",\"VERSION\":"
    "\"3.1.0\",\"FILESIZE\":true,\"FINALHASH\":true,\"DIGESTALGO\":\"MD5\","
    "\"PROXIFIED\":false,\"SEPARATOR\":\";\",\"R66VERSION\":\"3.6.2\","
    "\"COMPRESSION\":false}";

static const char req_h[] = "{\"rule\":\"send-rule\",\"mode\":3}";
static const char req_m[] = "{\"filename\":\"data/report.csv\",\"block\":65536,"
    "\"rank\":0,\"id\":1700000000001,\"code\":105,\"length\":12,\"limit\":0}";

static void
parse_ok(const uint8_t *p, size_t n, struct r66_frame *f)
{
	size_t need;

	assert_int_equal(r66_frame_parse(p, n, MAXLEN, f, &need), R66_OK);
	assert_int_equal(f->len, n);
}

static enum r66_status
parse_st(const uint8_t *p, size_t n)
{
	struct r66_frame f;
	size_t need;

	return r66_frame_parse(p, n, MAXLEN, &f, &need);
}

static void
test_authent(void **state)
{
	uint8_t b[600], key[16], enc[600];
	struct r66_frame f;
	struct r66_authent a;
	size_t n, m;

	(void)state;
	n = hex(ex_authent, b, sizeof(b));
	assert_int_equal(n, 57);
	parse_ok(b, n, &f);
	assert_int_equal(f.dst, NC);
	assert_int_equal(f.src, C_ID);
	assert_int_equal(f.code, R66_AUTHENT);
	assert_int_equal(r66_authent_parse(&f, &a), 0);
	assert_int_equal(a.host.len, 5);
	assert_memory_equal(a.host.p, "hosta", 5);
	assert_int_equal(a.local_id, C_ID);
	assert_int_equal(a.way, 0);
	assert_int_equal(a.version.len, 5);
	assert_memory_equal(a.version.p, "3.1.0", 5);
	assert_int_equal(r66_key_hash("s3cret", key), 0);
	assert_int_equal(a.key.len, 16);
	assert_memory_equal(a.key.p, key, 16);
	assert_true(r66_ids_plausible(&f, true));
	assert_false(r66_ids_plausible(&f, false));	/* server can't open */

	m = r66_encode_authent(enc, sizeof(enc), NC, C_ID, "hosta", key, C_ID,
	    0, "3.1.0");
	assert_int_equal(m, n);
	assert_memory_equal(enc, b, n);
	/* too small a buffer: 0, never a partial frame */
	assert_int_equal(r66_encode_authent(enc, n - 1, NC, C_ID, "hosta", key,
	    C_ID, 0, "3.1.0"), 0);
}

static void
test_authent_caps(void **state)
{
	uint8_t b[600], key[16], head[64];
	struct r66_frame f;
	struct r66_authent a;
	char v[32];
	size_t n;

	(void)state;
	assert_int_equal(strlen(caps_json), 169);
	assert_int_equal(r66_key_hash("s3cret", key), 0);
	n = r66_encode_authent(b, sizeof(b), NC, C_ID, "hosta", key, C_ID, 0,
	    caps_json);
	assert_int_equal(n, 221);
	hex(ex_authent, head, sizeof(head));
	/* same bytes but the length fields */
	assert_memory_equal(b, "\x00\x00\x00\xd9", 4);
	assert_memory_equal(b + 4, head + 4, 0x15 - 4);
	assert_memory_equal(b + 0x15, "\x00\x00\x00\xae", 4);
	assert_memory_equal(b + 0x19, head + 0x19, 0x34 - 0x19);
	assert_memory_equal(b + 0x34, caps_json, 169);
	assert_memory_equal(b + 0xd0, "SSION\":false}", 13);
	parse_ok(b, n, &f);
	assert_int_equal(r66_authent_parse(&f, &a), 0);
	assert_int_equal(r66_caps_get(&a.version, "DIGESTALGO", v, sizeof(v)), 1);
	assert_string_equal(v, "MD5");
	assert_int_equal(r66_caps_get(&a.version, "R66VERSION", v, sizeof(v)), 1);
	assert_string_equal(v, "3.6.2");
	assert_true(r66_version_ge(v, 3, 6, 1));
	assert_false(r66_version_ge("3.5.0", 3, 6, 1));
	assert_true(r66_version_ge("3.6.1-jre11", 3, 6, 1));
	assert_true(r66_version_ge("4.0.0", 3, 6, 1));
	assert_false(r66_version_ge("3.6", 3, 6, 1));
	assert_false(r66_version_ge("x.6.1", 3, 6, 1));
	assert_int_equal(r66_caps_get(&a.version, "NOPE", v, sizeof(v)), 0);
	/* no JSON at all ("3.1.0"): absent */
	a.version.p = (const uint8_t *)"3.1.0";
	a.version.len = 5;
	assert_int_equal(r66_caps_get(&a.version, "DIGESTALGO", v, sizeof(v)), 0);
	assert_int_equal(r66_digest_len("MD5"), 16);
	assert_int_equal(r66_digest_len("SHA-256"), 32);
	assert_int_equal(r66_digest_len("SHA-512"), 64);
	assert_int_equal(r66_digest_len("CRC32"), 0);
}

static void
test_data(void **state)
{
	uint8_t b[100], enc[100];
	struct r66_frame f;
	uint32_t rank = 99;
	size_t n, h;

	(void)state;
	n = hex(ex_data, b, sizeof(b));
	assert_int_equal(n, 58);
	parse_ok(b, n, &f);
	assert_int_equal(f.dst, S_ID);
	assert_int_equal(f.src, C_ID);
	assert_int_equal(r66_data_rank(&f, &rank), 0);
	assert_int_equal(rank, 0);
	assert_int_equal(f.mlen, 12);
	assert_memory_equal(f.m, "Hello, R66!\n", 12);
	assert_int_equal(f.elen, 16);
	assert_memory_equal(f.e, "\x2d\xf4\x5e\x10\x86\x4b\x1e\x59\xd7\x30"
	    "\x62\xe5\xb5\x41\xf7\x72", 16);
	h = r66_encode_data_hdr(enc, sizeof(enc), S_ID, C_ID, 0, 12, 16);
	assert_int_equal(h, 30);
	memcpy(enc + h, "Hello, R66!\n", 12);
	memcpy(enc + h + 12, f.e, 16);
	assert_memory_equal(enc, b, n);
	/* the head alone tells the same, from 26 bytes */
	{
		struct r66_frame g;

		assert_int_equal(r66_frame_head(b, 25, MAXLEN, &g), R66_INCOMPLETE);
		assert_int_equal(r66_frame_head(b, 26, MAXLEN, &g), R66_OK);
		assert_int_equal(g.len, 58);
		assert_int_equal(g.mlen, 12);
		assert_int_equal(g.elen, 16);
		assert_null(g.m);
		assert_int_equal(r66_frame_head(b, 26, 40, &g), R66_E_TOOBIG);
	}
	/* non-MD5 mode: end_len 0, 16 bytes shorter, still valid */
	h = r66_encode_data_hdr(enc, sizeof(enc), S_ID, C_ID, 7, 12, 0);
	memcpy(enc + h, "Hello, R66!\n", 12);
	parse_ok(enc, 42, &f);
	assert_int_equal(f.elen, 0);
	assert_int_equal(r66_data_rank(&f, &rank), 0);
	assert_int_equal(rank, 7);
}

static void
test_request_json(void **state)
{
	uint8_t b[400], exp[400];
	struct r66_request r, q;
	struct r66_frame f;
	size_t n, o;

	(void)state;
	memset(&r, 0, sizeof(r));
	strcpy(r.rule, "send-rule");
	r.mode = 3;
	strcpy(r.filename, "data/report.csv");
	r.block = 65536;
	r.id = 1700000000001LL;
	r.code = 'i';
	r.length = 12;
	r.info.p = (const uint8_t *)"my info";
	r.info.len = 7;
	n = r66_encode_request(b, sizeof(b), S_ID, C_ID, &r);
	assert_int_equal(n, 168);
	/* the expected frame, from the document's parts */
	o = hex("00 00 00 a4 00 c0 ff ee 1a 2b 3c 4d 07 00 00 00"
	    "26 00 00 00 6a 00 00 00 07 07", exp, sizeof(exp));
	memcpy(exp + o, req_h, 29);
	o += 29;
	exp[o++] = 0;
	assert_int_equal(strlen(req_m), 105);
	memcpy(exp + o, req_m, 105);
	o += 105;
	memcpy(exp + o, "my info", 7);
	o += 7;
	assert_int_equal(o, 168);
	assert_memory_equal(b, exp, 168);
	assert_memory_equal(b + 0xa0, "}my info", 8);

	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), 0);
	assert_true(q.json);
	assert_int_equal(q.way, 0);
	assert_string_equal(q.rule, "send-rule");
	assert_int_equal(q.mode, 3);
	assert_string_equal(q.filename, "data/report.csv");
	assert_int_equal(q.block, 65536);
	assert_int_equal(q.rank, 0);
	assert_int_equal(q.id, 1700000000001LL);
	assert_int_equal(q.code, 'i');
	assert_int_equal(q.length, 12);
	assert_int_equal(q.limit, 0);
	assert_int_equal(q.info.len, 7);
}

static size_t
mk_request(uint8_t *b, size_t cap, const char *h, uint8_t way, const char *m,
    const char *e)
{
	uint8_t mid[1400];
	size_t ml = strlen(m);

	assert_true(ml + 1 <= sizeof(mid));
	mid[0] = way;
	memcpy(mid + 1, m, ml);
	return r66_encode(b, cap, S_ID, C_ID, R66_REQUEST, h, strlen(h), mid,
	    ml + 1, e, strlen(e));
}

static void
test_request_legacy(void **state)
{
	uint8_t b[400];
	struct r66_request q;
	struct r66_frame f;
	size_t n;

	(void)state;
	n = mk_request(b, sizeof(b), "send-rule 3", 0,
	    "data/report.csv;65536;0;1700000000001;i;12", "my info");
	assert_int_equal(n, 87);
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), 0);
	assert_false(q.json);
	assert_string_equal(q.rule, "send-rule");
	assert_int_equal(q.mode, 3);
	assert_string_equal(q.filename, "data/report.csv");
	assert_int_equal(q.block, 65536);
	assert_int_equal(q.id, 1700000000001LL);
	assert_int_equal(q.code, 'i');
	assert_int_equal(q.length, 12);
	/* old space separator, no length */
	n = mk_request(b, sizeof(b), "r 2", 1, "f 100 0 5 i", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), 0);
	assert_int_equal(q.way, 1);
	assert_string_equal(q.filename, "f");
	assert_int_equal(q.length, -1);
	/* malformed legacy forms */
	n = mk_request(b, sizeof(b), "send-rule", 0, "f;1;0;5;i", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);	/* no mode */
	n = mk_request(b, sizeof(b), "r x", 0, "f;1;0;5;i", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);
	n = mk_request(b, sizeof(b), "r 1", 0, "f;1;0;5", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);	/* 4 fields */
	n = mk_request(b, sizeof(b), "r 1", 0, "f;1x;0;5;i", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);
	n = mk_request(b, sizeof(b), "r 1", 2, "f;1;0;5;i", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);	/* way 2 */
}

static void
test_request_json_variants(void **state)
{
	uint8_t b[1600];
	struct r66_request q;
	struct r66_frame f;
	char big[1200];
	size_t n;

	(void)state;
	/* key order and whitespace do not matter; escapes are decoded */
	n = mk_request(b, sizeof(b), " { \"mode\" : 2 , \"rule\":\"r\\u00e9\" } ",
	    1, "{\"limit\":5,\"length\":-1,\"code\":105,\"id\":-9223372036854775808,"
	    "\"rank\":3,\"block\":100,\"filename\":\"a\\/b\\\"c\"}", "");
	parse_ok(b, n, &f);
	/* H starts with a space: not JSON, and not legacy either */
	assert_int_equal(r66_request_parse(&f, &q), -1);
	n = mk_request(b, sizeof(b), "{ \"mode\" : 2 , \"rule\":\"r\\u00e9\" }",
	    1, "{\"limit\":5,\"length\":-1,\"code\":105,\"id\":-9223372036854775808,"
	    "\"rank\":3,\"block\":100,\"filename\":\"a\\/b\\\"c\",\"x\":{\"y\":[1,2]}}",
	    "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), 0);
	assert_string_equal(q.rule, "r\xc3\xa9");
	assert_int_equal(q.mode, 2);
	assert_string_equal(q.filename, "a/b\"c");
	assert_int_equal(q.rank, 3);
	assert_int_equal(q.limit, 5);
	assert_int_equal(q.length, -1);
	assert_true(q.id == INT64_MIN);
	/* an empty filename is omitted by Jackson */
	n = mk_request(b, sizeof(b), "{\"rule\":\"r\",\"mode\":1}", 0,
	    "{\"block\":1,\"rank\":0,\"id\":1,\"code\":105}", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), 0);
	assert_string_equal(q.filename, "");
	assert_int_equal(q.length, -1);
	/* refused: duplicate key (two parsers would disagree) */
	n = mk_request(b, sizeof(b), "{\"rule\":\"a\",\"rule\":\"b\",\"mode\":1}",
	    0, "{\"block\":1,\"rank\":0,\"id\":1,\"code\":105}", "");
	parse_ok(b, n, &f);
	assert_int_equal(r66_request_parse(&f, &q), -1);
	/* refused: NUL in a name, raw control char, bad escape, overflow,
	 * string where a number belongs, trailing garbage, missing field */
	const char *bad_m[] = {
		"{\"filename\":\"a\\u0000b\",\"block\":1,\"rank\":0,\"id\":1,\"code\":105}",
		"{\"filename\":\"a\nb\",\"block\":1,\"rank\":0,\"id\":1,\"code\":105}",
		"{\"filename\":\"a\\qb\",\"block\":1,\"rank\":0,\"id\":1,\"code\":105}",
		"{\"filename\":\"\\ud800\",\"block\":1,\"rank\":0,\"id\":1,\"code\":105}",
		"{\"block\":1,\"rank\":0,\"id\":92233720368547758070,\"code\":105}",
		"{\"block\":\"1\",\"rank\":0,\"id\":1,\"code\":105}",
		"{\"block\":1,\"rank\":0,\"id\":1,\"code\":105}x",
		"{\"block\":1,\"rank\":0,\"code\":105}",
		"{\"block\":1,\"rank\":0,\"id\":1,\"code\":105",
		"{\"block\":1,,\"rank\":0,\"id\":1,\"code\":105}",
		"{\"block\":1,\"rank\":0,\"id\":1,\"code\":1050}",
		"{\"block\":{\"a\":1},\"rank\":0,\"id\":1,\"code\":105}",
		"{}",
		"[]",
		"x",
	};
	for (size_t k = 0; k < sizeof(bad_m) / sizeof(bad_m[0]); k++) {
		n = mk_request(b, sizeof(b), "{\"rule\":\"r\",\"mode\":1}", 0,
		    bad_m[k], "");
		parse_ok(b, n, &f);
		if (r66_request_parse(&f, &q) != -1)
			fail_msg("accepted bad request middle #%zu: %s", k,
			    bad_m[k]);
	}
	/* the way byte alone: too short for a request */
	n = mk_request(b, sizeof(b), "{\"rule\":\"r\",\"mode\":1}", 0, "", "");
	assert_int_equal(parse_st(b, n), R66_E_SHAPE);
	/* a file name longer than R66_NAME_MAX */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	{
		char m[1300];

		snprintf(m, sizeof(m), "{\"filename\":\"%s\",\"block\":1,"
		    "\"rank\":0,\"id\":1,\"code\":105}", big);
		n = mk_request(b, sizeof(b), "{\"rule\":\"r\",\"mode\":1}", 0, m,
		    "");
		parse_ok(b, n, &f);
		assert_int_equal(r66_request_parse(&f, &q), -1);
	}
	/* deep nesting is bounded, not recursed without limit */
	{
		char m[600];
		size_t k, o = 0;

		o += (size_t)snprintf(m, sizeof(m), "{\"x\":");
		for (k = 0; k < 200; k++)
			m[o++] = '[';
		for (k = 0; k < 200; k++)
			m[o++] = ']';
		o += (size_t)snprintf(m + o, sizeof(m) - o,
		    ",\"block\":1,\"rank\":0,\"id\":1,\"code\":105}");
		n = mk_request(b, sizeof(b), "{\"rule\":\"r\",\"mode\":1}", 0, m,
		    "");
		parse_ok(b, n, &f);
		assert_int_equal(r66_request_parse(&f, &q), -1);
	}
}

static void
test_control_frames(void **state)
{
	uint8_t b[100], enc[100];
	struct r66_frame f;
	struct r66_error e;
	uint8_t way;
	size_t n;

	(void)state;
	n = hex(ex_endtransfer, b, sizeof(b));
	assert_int_equal(n, 60);
	parse_ok(b, n, &f);
	assert_int_equal(f.code, R66_ENDTRANSFER);
	assert_int_equal(r66_way(&f, &way), 0);
	assert_int_equal(way, 0);
	assert_int_equal(f.elen, 32);
	assert_memory_equal(f.e, "2df45e10864b1e59d73062e5b541f772", 32);
	assert_int_equal(r66_encode_endtransfer(enc, sizeof(enc), S_ID, C_ID, 0,
	    "2df45e10864b1e59d73062e5b541f772"), 60);
	assert_memory_equal(enc, b, 60);

	n = hex(ex_endrequest, b, sizeof(b));
	assert_int_equal(n, 31);
	parse_ok(b, n, &f);
	assert_int_equal(f.code, R66_ENDREQUEST);
	assert_int_equal(r66_be32(f.h), 4);
	assert_int_equal(r66_encode_endrequest(enc, sizeof(enc), S_ID, C_ID, 0),
	    31);
	assert_memory_equal(enc, b, 31);

	n = hex(ex_keepalive, b, sizeof(b));
	assert_int_equal(n, 27);
	parse_ok(b, n, &f);
	assert_true(r66_ids_plausible(&f, false));
	assert_int_equal(r66_encode_keepalive(enc, sizeof(enc), 0), 27);
	assert_memory_equal(enc, b, 27);

	n = r66_encode_error(enc, sizeof(enc), C_ID, S_ID,
	    "Key is not valid for this HostId", 'A', 3);
	assert_int_equal(n, 63);
	assert_memory_equal(enc, "\x00\x00\x00\x3b\x1a\x2b\x3c\x4d\x00\xc0\xff"
	    "\xee\x05\x00\x00\x00\x29\x00\x00\x00\x01\x00\x00\x00\x04\x05", 26);
	assert_memory_equal(enc + 26, "Key is not valid for this HostId", 32);
	assert_memory_equal(enc + 58, "A\x00\x00\x00\x03", 5);
	parse_ok(enc, n, &f);
	assert_int_equal(r66_error_parse(&f, &e), 0);
	assert_int_equal(e.msg.len, 32);
	assert_int_equal(e.code.len, 1);
	assert_int_equal(e.code.p[0], 'A');
	assert_int_equal(e.action, 3);

	n = r66_encode_connerror(enc, sizeof(enc), NC, NC, "bad frame", NULL);
	parse_ok(enc, n, &f);
	assert_int_equal(f.code, R66_CONNERROR);
	assert_true(r66_ids_plausible(&f, false));

	n = r66_encode(enc, sizeof(enc), 1, 2, R66_NOOP, NULL, 0, NULL, 0, NULL, 0);
	assert_int_equal(n, 26);
	parse_ok(enc, n, &f);
}

/* Every prefix of a valid frame is incomplete, with the right need. */
static void
test_truncated(void **state)
{
	const char *const ex[] = { ex_authent, ex_data, ex_endtransfer,
	    ex_endrequest, ex_keepalive };
	uint8_t b[100];
	struct r66_frame f;
	size_t n, k, e, need;

	(void)state;
	for (e = 0; e < sizeof(ex) / sizeof(ex[0]); e++) {
		n = hex(ex[e], b, sizeof(b));
		for (k = 0; k < n; k++) {
			/* heap copy of exactly k bytes: ASan catches overreads */
			uint8_t *p = malloc(k + 1);

			memcpy(p, b, k);
			assert_int_equal(r66_frame_parse(p, k, MAXLEN, &f, &need),
			    R66_INCOMPLETE);
			assert_int_equal(need, k < 4 ? 4 : n);
			free(p);
		}
	}
}

/* A stream of frames split at every offset decodes to the same frames. */
static void
test_split_stream(void **state)
{
	const char *const ex[] = { ex_authent, ex_data, ex_endtransfer,
	    ex_endrequest, ex_keepalive, ex_data };
	uint8_t stream[400], acc[400];
	size_t sizes[6], total = 0, cut, e;

	(void)state;
	for (e = 0; e < 6; e++) {
		sizes[e] = hex(ex[e], stream + total, sizeof(stream) - total);
		total += sizes[e];
	}
	for (cut = 0; cut <= total; cut++) {
		size_t have = 0, fed = 0, nframes = 0, need, round;
		struct r66_frame f;

		/* two chunks: [0, cut) then [cut, total) */
		for (round = 0; round < 2; round++) {
			size_t chunk = round == 0 ? cut : total - cut;
			enum r66_status st;

			memcpy(acc + have, stream + fed, chunk);
			have += chunk;
			fed += chunk;
			while ((st = r66_frame_parse(acc, have, MAXLEN, &f,
			    &need)) == R66_OK) {
				assert_int_equal(f.len, sizes[nframes]);
				nframes++;
				memmove(acc, acc + f.len, have - f.len);
				have -= f.len;
			}
			assert_int_equal(st, R66_INCOMPLETE);
		}
		assert_int_equal(nframes, 6);
		assert_int_equal(have, 0);
	}
}

static void
test_malformed(void **state)
{
	uint8_t b[100], t[100];
	struct r66_frame f;
	size_t n, need;
	unsigned code;

	(void)state;
	n = hex(ex_endrequest, b, sizeof(b));

	/* net_len below 22, 0, and with the sign bit set */
	memcpy(t, b, n);
	r66_put32(t, 21);
	assert_int_equal(parse_st(t, n), R66_E_LEN);
	r66_put32(t, 0);
	assert_int_equal(parse_st(t, 4), R66_E_LEN);
	r66_put32(t, 0x80000000u);
	assert_int_equal(parse_st(t, 4), R66_E_LEN);
	r66_put32(t, 0xffffffffu);
	assert_int_equal(parse_st(t, 4), R66_E_LEN);
	/* over the cap: refused from the 4 length bytes alone */
	r66_put32(t, MAXLEN + 1);
	assert_int_equal(parse_st(t, 4), R66_E_TOOBIG);
	assert_int_equal(r66_frame_parse(t, 4, 1000, &f, &need), R66_E_TOOBIG);
	/* a control frame over 16k + header, even under the data cap */
	r66_put32(t, R66_CTRL_MAX + R66_FRAME_MIN + 1);
	t[12] = R66_REQUEST;
	assert_int_equal(parse_st(t, 13), R66_E_TOOBIG);
	t[12] = R66_DATA;	/* a data frame that size is just incomplete */
	assert_int_equal(parse_st(t, 13), R66_INCOMPLETE);

	/* part lengths that do not fill the frame exactly */
	memcpy(t, b, n);
	r66_put32(t + 13, 8);			/* hdr_len < 9 */
	assert_int_equal(parse_st(t, n), R66_E_PARTS);
	memcpy(t, b, n);
	r66_put32(t + 13, 0x0e);		/* one too many */
	assert_int_equal(parse_st(t, n), R66_E_PARTS);
	memcpy(t, b, n);
	r66_put32(t + 17, 0);			/* one too few */
	assert_int_equal(parse_st(t, n), R66_E_PARTS);
	memcpy(t, b, n);
	r66_put32(t + 17, 0xfffffffeu);		/* wraps in 32 bits */
	r66_put32(t + 21, 3);
	assert_int_equal(parse_st(t, n), R66_E_PARTS);
	memcpy(t, b, n);
	r66_put32(t + 13, 0xffffffffu);
	assert_int_equal(parse_st(t, n), R66_E_PARTS);

	/* type byte != code */
	memcpy(t, b, n);
	t[25] = R66_ENDTRANSFER;
	assert_int_equal(parse_st(t, n), R66_E_TYPE);
	memcpy(t, b, n);
	t[12] = R66_ENDTRANSFER;
	assert_int_equal(parse_st(t, n), R66_E_TYPE);

	/* code 2 and every unknown / sub-type-only code */
	for (code = 0; code < 256; code++) {
		enum r66_status st;

		memcpy(t, b, n);
		t[12] = t[25] = (uint8_t)code;
		st = parse_st(t, n);
		if (code == R66_STARTUP)
			assert_int_equal(st, R66_E_STARTUP);
		else if (!r66_code_on_wire(code))
			assert_int_equal(st, R66_E_CODE);
		else
			assert_true(st == R66_OK || st == R66_E_SHAPE);
		if (code == 0 || (code >= 9 && code <= 12) ||
		    (code >= 15 && code <= 17) || code == 19 || code > 25)
			assert_false(r66_code_on_wire(code));
	}

	/* wrong part sizes for the code */
	n = r66_encode(t, sizeof(t), 1, 2, R66_ENDTRANSFER, "\x07\x07", 2, "\0",
	    1, NULL, 0);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), 1, 2, R66_ERROR, "m", 1, "A", 1, "\0\0\0",
	    3);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), NC, NC, R66_KEEPALIVE, NULL, 0, "\0\0", 2,
	    NULL, 0);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), 1, 2, R66_DATA, "\0\0\0", 3, "x", 1, NULL,
	    0);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), 1, 2, R66_DATA, "\0\0\0\0", 4, NULL, 0,
	    NULL, 0);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);	/* empty block */
	n = r66_encode(t, sizeof(t), 1, 2, R66_AUTHENT, "h", 1, "k", 1, "\0\0\0\0",
	    4);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), 1, 2, R66_NOOP, "x", 1, NULL, 0, NULL, 0);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
	n = r66_encode(t, sizeof(t), 1, 2, R66_BUSINESS, "x", 1, "\0\0\0", 3,
	    "\0", 1);
	assert_int_equal(parse_st(t, n), R66_E_SHAPE);
}

static void
test_ids(void **state)
{
	uint8_t b[100], t[100];
	struct r66_frame f;
	struct r66_authent a;
	size_t n;

	(void)state;
	/* Authent with its ids swapped: [c, NC] */
	n = hex(ex_authent, b, sizeof(b));
	memcpy(t, b, n);
	r66_put32(t + 4, C_ID);
	r66_put32(t + 8, NC);
	parse_ok(t, n, &f);
	assert_false(r66_ids_plausible(&f, true));
	/* E.localId differs from src: decodes (Java ignores it) */
	memcpy(t, b, n);
	r66_put32(t + 0x2f, 7);
	parse_ok(t, n, &f);
	assert_int_equal(r66_authent_parse(&f, &a), 0);
	assert_int_equal(a.local_id, 7);
	/* way 2 in Authent */
	memcpy(t, b, n);
	t[0x33] = 2;
	parse_ok(t, n, &f);
	assert_int_equal(r66_authent_parse(&f, &a), -1);
	/* KeepAlive with a channel id */
	n = hex(ex_keepalive, b, sizeof(b));
	memcpy(t, b, n);
	r66_put32(t + 4, S_ID);
	parse_ok(t, n, &f);
	assert_false(r66_ids_plausible(&f, true));
	/* Data with src NC */
	n = hex(ex_data, b, sizeof(b));
	memcpy(t, b, n);
	r66_put32(t + 8, NC);
	parse_ok(t, n, &f);
	assert_false(r66_ids_plausible(&f, true));
	/* Data swapped: fine statelessly, the analyser's channel table
	 * catches it (unknown pair) */
	memcpy(t, b, n);
	r66_put32(t + 4, C_ID);
	r66_put32(t + 8, S_ID);
	parse_ok(t, n, &f);
	assert_true(r66_ids_plausible(&f, true));
	/* Error answering a channel that could not be created: [c, NC] */
	n = r66_encode_error(t, sizeof(t), C_ID, NC, "no", 'C', 3);
	parse_ok(t, n, &f);
	assert_true(r66_ids_plausible(&f, false));
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(r66_code_name(R66_JSONCMD), "jsoncommand");
	assert_string_equal(r66_code_name(200), "unknown");
	assert_string_equal(r66_mode_name(4), "recvmd5");
	assert_string_equal(r66_mode_name(9), "unknown");
	assert_true(r66_mode_is_send(3));
	assert_false(r66_mode_is_send(4));
	assert_true(r66_mode_has_digest(4));
	assert_false(r66_mode_has_digest(2));
	assert_string_equal(r66_status_str(R66_E_TYPE),
	    "type byte differs from frame code");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_authent),
		cmocka_unit_test(test_authent_caps),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_request_json),
		cmocka_unit_test(test_request_legacy),
		cmocka_unit_test(test_request_json_variants),
		cmocka_unit_test(test_control_frames),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_split_stream),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
