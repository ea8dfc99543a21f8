/* Unit tests for proxyd/scan/audit.c: the sha256 of bytes fed in any
 * split (buffers, evbuffers of many chains, parts of them) against
 * OpenSSL's one-shot digest, and the record's JSON: escaping of what a
 * peer names (quotes, backslashes, control and non-UTF-8 bytes), nulls,
 * and a line too long refused rather than cut; the min-size check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "audit.h"
#include "log.h"

/* The record's sha256 field as px_audit_end would write it. */
static void
digest_hex(struct px_audit *a, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0, i;

	assert_int_equal(EVP_DigestFinal_ex((EVP_MD_CTX *)a->sha, md, &n), 1);
	for (i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void
test_sha_splits(void **state)
{
	static unsigned char data[200000];
	unsigned seed = 28, round;
	size_t i;

	(void)state;
	/* Records are begun only with a target. */
	assert_null(px_audit_begin(-1));
	assert_int_equal(px_log_record_open(true, PX_LOG_FILE, "/dev/null"), 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)rand_r(&seed);
	for (round = 0; round < 200; round++) {
		size_t len = (size_t)rand_r(&seed) % sizeof(data), off = 0;
		struct px_audit *a = px_audit_begin((int64_t)len);
		struct evbuffer *b = evbuffer_new();
		unsigned char md[SHA256_DIGEST_LENGTH];
		char want[65], got[65];

		assert_non_null(a);
		/* The bytes arrive in chains of random sizes; each run fed
		 * is a random part of what is queued, as a pump moves it. */
		while (off < len) {
			size_t add = 1 + (size_t)rand_r(&seed) % 9000, feed;

			if (add > len - off)
				add = len - off;
			evbuffer_add(b, data + off, add);
			off += add;
			while (evbuffer_get_length(b) > (size_t)rand_r(&seed) %
			    20000) {
				feed = 1 + (size_t)rand_r(&seed) %
				    evbuffer_get_length(b);
				if (rand_r(&seed) % 4 == 0) {
					unsigned char tmp[200000];

					evbuffer_remove(b, tmp, feed);
					px_audit_feed(a, tmp, feed);
				} else {
					px_audit_feed_evbuffer(a, b, feed);
					evbuffer_drain(b, feed);
				}
			}
		}
		px_audit_feed_evbuffer(a, b, evbuffer_get_length(b));
		assert_int_equal(a->size, len);
		SHA256(data, len, md);
		for (i = 0; i < sizeof(md); i++)
			snprintf(want + 2 * i, 3, "%02x", md[i]);
		digest_hex(a, got);
		assert_string_equal(got, want);
		px_audit_cancel(a);
		evbuffer_free(b);
	}
	assert_int_equal(px_log_record_open(false, PX_LOG_STDERR, NULL), 0);
}

static void
test_format(void **state)
{
	struct px_audit a = { .size = 5, .announced = -1 };
	struct sockaddr_in c = { .sin_family = AF_INET,
		.sin_port = htons(4242) };
	struct px_audit_info in = {
		.service = "web", .analyser = "ftp", .session = 7,
		.client = (struct sockaddr *)&c, .server = NULL,
		.client_zone = "lan", .server_zone = "-",
		.user = "bob", .file = "/a\"b\\c\x01\xff\xc3\xa9",
		.direction = "upload", .verdict = "accept", .complete = true,
	};
	char buf[4096], small[200];
	size_t n;

	(void)state;
	inet_pton(AF_INET, "192.0.2.1", &c.sin_addr);
	snprintf(a.threat, sizeof(a.threat), "Eicar-Test");
	n = px_audit_format(buf, sizeof(buf), &a, "ab12", &in);
	assert_true(n > 0);
	assert_int_equal(strlen(buf), n);
	assert_non_null(strstr(buf, ",\"file\":\"/a\\\"b\\\\c\\u0001\\u00ff\xc3\xa9\","));
	assert_non_null(strstr(buf, ",\"client\":\"192.0.2.1:4242\","));
	assert_non_null(strstr(buf, ",\"server\":null,"));
	assert_non_null(strstr(buf, ",\"announced_size\":null,\"size\":5,"
	    "\"complete\":true,\"sha256\":\"ab12\","));
	assert_non_null(strstr(buf, ",\"user\":\"bob\",\"rule\":null,"));
	assert_non_null(strstr(buf, ",\"threat\":\"Eicar-Test\","));
	assert_non_null(strstr(buf, ",\"tls_server_subject\":null,"));
	/* No TLS fingerprint: no "ja4" key at all. */
	assert_null(strstr(buf, "\"ja4\""));
	assert_true(buf[0] == '{' && buf[n - 1] == '}');
	in.ja4 = "t13d1516h2_8daaf6152771_e5627efa2ab1";
	assert_true(px_audit_format(buf, sizeof(buf), &a, "ab12", &in) > 0);
	assert_non_null(strstr(buf, ",\"tls_server_subject\":null,\"ja4\":"
	    "\"t13d1516h2_8daaf6152771_e5627efa2ab1\",\"tls_client_subject\":"));
	/* An FTPS transfer's own data connection: its JA4 and JA4S after
	 * the control connection's. */
	assert_null(strstr(buf, "\"data_ja4"));
	snprintf(a.data_ja4, sizeof(a.data_ja4), "%s",
	    "t13d291400_723694b0fccc_e1567aa83b5c");
	snprintf(a.data_ja4s, sizeof(a.data_ja4s), "%s",
	    "t130300_1302_0ee26285a86f");
	assert_true(px_audit_format(buf, sizeof(buf), &a, "ab12", &in) > 0);
	assert_non_null(strstr(buf, "\"ja4\":\"t13d1516h2_8daaf6152771_"
	    "e5627efa2ab1\",\"data_ja4\":\"t13d291400_723694b0fccc_"
	    "e1567aa83b5c\",\"data_ja4s\":\"t130300_1302_0ee26285a86f\","));
	a.data_ja4[0] = a.data_ja4s[0] = '\0';
	in.ja4 = NULL;
	/* Too long: nothing rather than a cut (invalid) line. */
	assert_int_equal(px_audit_format(small, sizeof(small), &a, "ab12",
	    &in), 0);
}

/* Below the min-size only when neither the bytes passed nor the size
 * announced reach it: then the record is cancelled and the pointer
 * cleared. */
static void
test_drop_below(void **state)
{
	static const struct {
		int64_t		announced;
		uint64_t	fed, min;
		bool		drop;
	} c[] = {
		{ -1, 0, 0, false }, { -1, 9, 10, true }, { -1, 10, 10, false },
		{ 10, 0, 10, false }, { 9, 0, 10, true }, { 9, 10, 10, false },
		{ 100, 3, 10, false }, { 0, 0, 1, true },
	};
	char bytes[16] = { 0 };
	size_t i;

	(void)state;
	assert_int_equal(px_log_record_open(true, PX_LOG_FILE, "/dev/null"), 0);
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct px_audit *a = px_audit_begin(c[i].announced);

		assert_non_null(a);
		px_audit_feed(a, bytes, c[i].fed);
		assert_int_equal(px_audit_drop_below(&a, c[i].min), c[i].drop);
		if (c[i].drop)
			assert_null(a);
		else {
			assert_ptr_not_equal(a, NULL);
			px_audit_cancel(a);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha_splits),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_drop_below),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
