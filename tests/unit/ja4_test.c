/* Unit tests for proxyd/base/ja4.c: FoxIO's published JA4 test vectors
 * (ClientHellos taken from the pcaps of FoxIO-LLC/ja4, pcap/, with the
 * fingerprints its python/test/testdata/ lists for them), then the same
 * hellos cut into records, truncated, and lying about their lengths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ja4.h"
#include "tls_hello.h"

struct vector {
	const char	*ja4;
	const char	*hex;		/* the handshake message */
};

/* tls-non-ascii-alpn's first ALPN protocol is 0xba 0xad: the published
 * definition (JA4.md, "ALPN Extension Value", August 2024) prints the
 * first and last hex digits, "bd"; FoxIO's tools still print the "99"
 * of the rule before it, which their test data holds. */
static const struct vector vectors[] = {
	/* pcap/tls-alpn-h2.pcap, the first ClientHello: published */
	{ "t12d4605h2_85626a9a5f7f_aaf95bb78ec9",
	    "010000e40303858226c04fbaeddef4246093b4cfdab38f9dcfef145360e41768"
	    "6575cac49c7000005cc030c02cc028c024c014c00a009f006b0039cca9cca8cc"
	    "aaff8500c400880081009d003d003500c00084c02fc02bc027c023c013c00900"
	    "9e0067003300be0045009c003c002f00ba0041c011c00700050004c012c00800"
	    "16000a00ff0100005f0000001700150000127777772e636c6f7564666c617265"
	    "2e636f6d000b00020100000a00080006001d00170018000d001c001a06010603"
	    "efef0501050304010403eeeeeded03010303020102030010000e000c02683208"
	    "687474702f312e31" },
	/* pcap/tls12.pcap, the first ClientHello: published */
	{ "t13d1715h2_5b57614c22b0_3d5424432f57",
	    "010001fc0303ecb2691addb2bf6c599c7aaae23de5f42561cc04eb41029acc6f"
	    "c050a16ac1d22046f8617b580ac9358e2aa44e306d52466bcc989c87c8ca6430"
	    "9f5faf50ba7b4d0022130113031302c02bc02fcca9cca8c02cc030c00ac009c0"
	    "13c014009c009d002f00350100019100000021001f00001c636f6e74696c652e"
	    "73657276696365732e6d6f7a696c6c612e636f6d00170000ff01000100000a00"
	    "0e000c001d00170018001901000101000b00020100002300000010000e000c02"
	    "683208687474702f312e310005000501000000000022000a0008040305030603"
	    "02030033006b0069001d00208909858fbeb6ed2f1248ba5b9e2978bead0e8401"
	    "10192c61daed0096798b184400170041044d183d91f5eed35791fa982464e3b0"
	    "214aaa5f5d1b78616d9b9fbebc22d11f535b2f94c686143136aa795e6e5a875d"
	    "6c08064ad5b76d44caad766e2483012748002b00050403040303000d00180016"
	    "04030503060308040805080604010501060102030201002d00020101001c0002"
	    "40010015007a0000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000" },
	/* pcap/tls-non-ascii-alpn.pcapng, the first ClientHello: published t13d151699_8daaf6152771_e5627efa2ab1 under the older ALPN rule */
	{ "t13d1516bd_8daaf6152771_e5627efa2ab1",
	    "010001fc03030f9e38acb9a54a7c6e00e29a70ac2feee180ff76d7f25dca8493"
	    "2a66a42d1e5a20bc58b92f865e6b9aa4a6371cadcb0afe1da1c0f705209a11d5"
	    "2357f56d5dd9620020aaaa130113021303c02bc02fc02cc030cca9cca8c013c0"
	    "14009c009d002f0035010001939a9a0000ff010001000033002b00290a0a0001"
	    "00001d0020cf55af2603e92f59eb321779706a18fa6b96b16c16404c2264ed68"
	    "7a59401878002d00020101000500050100000000446900050003026832000d00"
	    "120010040308040401050308050501080606010010000e000c02baad08687474"
	    "702f312e3100230000001b0003020002002b0007060a0a030403030000002200"
	    "2000001d636c69656e7473657276696365732e676f6f676c65617069732e636f"
	    "6d00120000000a000a00080a0a001d0017001800170000000b000201006a6a00"
	    "0100001500ba0000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000" },
	/* pcap/tls-sni.pcapng, the first ClientHello: published */
	{ "t13d1516h2_8daaf6152771_e5627efa2ab1",
	    "010001fc03030f9e38acb9a54a7c6e00e29a70ac2feee180ff76d7f25dca8493"
	    "2a66a42d1e5a20bc58b92f865e6b9aa4a6371cadcb0afe1da1c0f705209a11d5"
	    "2357f56d5dd9620020aaaa130113021303c02bc02fc02cc030cca9cca8c013c0"
	    "14009c009d002f0035010001939a9a0000ff010001000033002b00290a0a0001"
	    "00001d0020cf55af2603e92f59eb321779706a18fa6b96b16c16404c2264ed68"
	    "7a59401878002d00020101000500050100000000446900050003026832000d00"
	    "120010040308040401050308050501080606010010000e000c02683208687474"
	    "702f312e3100230000001b0003020002002b0007060a0a030403030000002200"
	    "2000001d636c69656e7473657276696365732e676f6f676c65617069732e636f"
	    "6d00120000000a000a00080a0a001d0017001800170000000b000201006a6a00"
	    "0100001500ba0000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000" },
	/* pcap/badcurveball.pcap, the first ClientHello: published */
	{ "t13d1615h2_46e7e9700bed_45f260be83e2",
	    "010001fc0303c5b08a8a5a1a1f31e5bcd0853b6f59944dfec2900a712a2a6059"
	    "b827c58cf48020078a389ef1767da304d9e10cc7a9441a734513694d3a353ed9"
	    "522ac47f9c8aa40022aaaa130113021303c02bc02fc02cc030cca9cca8c013c0"
	    "14009c009d002f0035000a010001914a4a00000000001a00180000156261642e"
	    "637572766562616c6c746573742e636f6d00170000ff01000100000a000a0008"
	    "caca001d00170018000b00020100002300000010000e000c0268320868747470"
	    "2f312e31000500050100000000000d0014001204030804040105030805050108"
	    "0606010201001200000033002b0029caca000100001d0020ec9c731ae0f83a31"
	    "5ec38ed8cc94912502ab3ca913a29b7d037d7c0ae6a6e81a002d00020101002b"
	    "000b0a2a2a0304030303020301001b00030200027a7a000100001500c3000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000"
	    "0000000000000000000000000000000000000000000000000000000000000000" },
	/* pcap/latest.pcapng, the first ClientHello but 1: published */
	{ "t12d190800_d83cc789557e_7af1ed941c26",
	    "010000b4030364960ddb84e92e8d5a9be477e2f7112257269dc7421437937328"
	    "13c25ec65af0000026c02cc02bc030c02fc024c023c028c027c00ac009c014c0"
	    "13009d009c003d003c0035002f000a010000650000001b001900001664697363"
	    "6f766572792e63656d2e636c6f75642e7573000500050100000000000a000800"
	    "06001d00170018000b00020100000d001a001808040805080604010501020104"
	    "03050302030202060106030023000000170000ff01000100" },
};

static uint8_t *
unhex(const char *s, size_t *len)
{
	size_t n = strlen(s) / 2, i;
	uint8_t *b = malloc(n + 16);
	unsigned v;

	assert_non_null(b);
	for (i = 0; i < n; i++) {
		assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
		b[i] = (uint8_t)v;
	}
	*len = n;
	return b;
}

/* The message in records of at most frag bytes each. */
static uint8_t *
in_records(const uint8_t *msg, size_t len, size_t frag, size_t *out)
{
	uint8_t *b = malloc(len + 5 * (len / frag + 1));
	size_t pos = 0, k, o = 0;

	assert_non_null(b);
	while (pos < len) {
		k = len - pos < frag ? len - pos : frag;
		b[o] = 0x16;
		b[o + 1] = 0x03;
		b[o + 2] = 0x01;
		b[o + 3] = (uint8_t)(k >> 8);
		b[o + 4] = (uint8_t)k;
		memcpy(b + o + 5, msg + pos, k);
		o += 5 + k;
		pos += k;
	}
	*out = o;
	return b;
}

static void
test_vectors(void **state)
{
	char out[PX_JA4_LEN + 1];
	uint8_t *msg;
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		msg = unhex(vectors[i].hex, &len);
		assert_true(px_ja4_hello(msg, len, out));
		assert_string_equal(out, vectors[i].ja4);
		assert_true(px_ja4_valid(out));
		free(msg);
	}
}

/* A hello in records, whole or cut into pieces, gives the same JA4; and
 * the passthrough reader takes the same bytes. */
static void
test_records(void **state)
{
	static const size_t frags[] = { 16384, 512, 100, 7, 1 };
	struct px_hello h;
	char out[PX_JA4_LEN + 1];
	uint8_t *msg, *rec;
	size_t i, j, len, rlen;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		msg = unhex(vectors[i].hex, &len);
		for (j = 0; j < sizeof(frags) / sizeof(frags[0]); j++) {
			rec = in_records(msg, len, frags[j], &rlen);
			assert_int_equal(px_hello_parse(rec, rlen, 1 << 20, &h),
			    PX_HELLO_OK);
			assert_true(px_ja4_records(rec, rlen, out));
			assert_string_equal(out, vectors[i].ja4);
			/* cut short: no fingerprint */
			assert_false(px_ja4_records(rec, rlen - 1, out));
			assert_string_equal(out, "");
			free(rec);
		}
		free(msg);
	}
}

/* Every prefix, and every length byte off by one either way, is refused
 * or read within bounds (run under ASan in CI). */
static void
test_truncated_and_lying(void **state)
{
	char out[PX_JA4_LEN + 1];
	uint8_t *msg;
	size_t i, k, len;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		msg = unhex(vectors[i].hex, &len);
		for (k = 0; k < len; k++)
			assert_false(px_ja4_hello(msg, k, out));
		for (k = 0; k < len; k++) {
			msg[k]++;
			(void)px_ja4_hello(msg, len, out);
			assert_true(out[0] == '\0' || strlen(out) == PX_JA4_LEN);
			msg[k] -= 2;
			(void)px_ja4_hello(msg, len, out);
			assert_true(out[0] == '\0' || strlen(out) == PX_JA4_LEN);
			msg[k]++;
		}
		free(msg);
	}
}

/* Built by hand: no extensions at all (an old client), no ciphers but
 * GREASE, an ALPN of one character. */
static void
test_built(void **state)
{
	/* legacy 0x0301, empty session id, ciphers 0x0a0a 0x002f, null
	 * compression, no extension block */
	static const uint8_t old[] = {
		0x01, 0x00, 0x00, 0x2b, 0x03, 0x01,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x04, 0x0a, 0x0a, 0x00, 0x2f, 0x01, 0x00,
	};
	/* legacy 0x0303, ciphers only GREASE, ALPN "x" */
	static const uint8_t one[] = {
		0x01, 0x00, 0x00, 0x33, 0x03, 0x03,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x02, 0x1a, 0x1a, 0x01, 0x00,
		0x00, 0x08, 0x00, 0x10, 0x00, 0x04, 0x00, 0x02, 0x01, 'x',
	};
	char out[PX_JA4_LEN + 1];

	(void)state;
	assert_true(px_ja4_hello(old, sizeof(old), out));
	/* sha256("002f") = 1a7dd1...; no extensions: twelve zeros */
	assert_memory_equal(out, "t10i010000_", 11);
	assert_string_equal(out + 23, "_000000000000");
	assert_true(px_ja4_hello(one, sizeof(one), out));
	assert_string_equal(out, "t12i0001xx_000000000000_000000000000");
}

static void
test_valid(void **state)
{
	(void)state;
	assert_true(px_ja4_valid("t13d1516h2_8daaf6152771_e5627efa2ab1"));
	assert_false(px_ja4_valid("t13d1516h2_8daaf6152771_e5627efa2ab"));
	assert_false(px_ja4_valid("t13d1516h2_8daaf6152771_e5627efa2ab1 "));
	assert_false(px_ja4_valid("t13d1516h2_8DAAF6152771_e5627efa2ab1"));
	assert_false(px_ja4_valid("t13d1516h2-8daaf6152771_e5627efa2ab1"));
	assert_true(px_ja4_valid("t13d1516H2_8daaf6152771_e5627efa2ab1"));
	assert_false(px_ja4_valid("t13d1516h._8daaf6152771_e5627efa2ab1"));
	assert_false(px_ja4_valid("t13d1516h2_8daaf615277g_e5627efa2ab1"));
	assert_false(px_ja4_valid(""));
}

/* JA4S: a TLS 1.3 ServerHello (openssl s_server's, TLS_AES_256_GCM_SHA384,
 * supported_versions then key_share). FoxIO's JA4S.md gives
 * t130200_1301_a56c5b993250 for such a hello with TLS_AES_128_GCM_SHA256:
 * the same extension hash. */
static const char sh13[] =
    "020000760303338403 3d3dbb4331eeab13849740571076f46c7ab3a5043bc354"
    "d995cf50c25a20 3766db191f7a79348a3cba45c03d902c88b4299462ae14642e"
    "0527f2307af37313020000 2e002b0002030400330024001d00204749471516 25"
    "7186e8f1da648f5e197998063aebb8bedb4b9ff0426ee3a3ca45";

static void
test_ja4s(void **state)
{
	char hex[sizeof(sh13)], out[PX_JA4S_LEN + 1];
	uint8_t *msg;
	size_t len, i, k = 0;

	(void)state;
	for (i = 0; sh13[i] != '\0'; i++)
		if (sh13[i] != ' ')
			hex[k++] = sh13[i];
	hex[k] = '\0';
	msg = unhex(hex, &len);
	assert_int_equal(len, 4 + 0x76);
	assert_true(px_ja4s_hello(msg, len, out));
	assert_string_equal(out, "t130200_1302_a56c5b993250");
	assert_false(px_ja4s_is_hrr(msg, len));
	/* Cut anywhere (in a buffer of just that size, for the sanitizers),
	 * or lying about its length: refused, "" */
	for (k = 0; k < len; k++) {
		uint8_t *cut = malloc(k + 1);

		assert_non_null(cut);
		memcpy(cut, msg, k);
		assert_false(px_ja4s_hello(cut, k, out));
		assert_string_equal(out, "");
		free(cut);
	}
	msg[3]++;
	assert_false(px_ja4s_hello(msg, len, out));
	msg[3]--;
	/* A HelloRetryRequest's random (RFC 8446 4.1.3) */
	memcpy(msg + 6, "\xcf\x21\xad\x74\xe5\x9a\x61\x11\xbe\x1d\x8c\x02"
	    "\x1e\x65\xb8\x91\xc2\xa2\x11\x16\x7a\xbb\x8c\x5e\x07\x9e\x09"
	    "\xe2\xc8\xa8\x33\x9c", 32);
	assert_true(px_ja4s_is_hrr(msg, len));
	/* not a ServerHello */
	msg[0] = 1;
	assert_false(px_ja4s_hello(msg, len, out));
	free(msg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_records),
		cmocka_unit_test(test_truncated_and_lying),
		cmocka_unit_test(test_built),
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_ja4s),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
