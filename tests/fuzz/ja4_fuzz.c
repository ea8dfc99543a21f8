/* libFuzzer target for the JA4 fingerprint (proxyd/base/ja4.c), fed a
 * ClientHello handshake message as OpenSSL's message callback hands it
 * over, and for JA4S, the same bytes taken as a ServerHello. Beyond the
 * sanitizers it checks:
 *   - a fingerprint is "" (refused) or has the form px_ja4_valid knows;
 *   - a JA4S is "" (refused) or PX_JA4S_LEN characters, and refused when
 *     the message is cut short by one byte;
 *   - the same message in records of 1, 7 and 16384 bytes gives the same
 *     fingerprint through px_ja4_records;
 *   - a message cut short by one byte is refused.
 * Build and run: tests/fuzz/run.sh ja4 SECONDS */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ja4.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s " \
	"(%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

#define MAX_MSG	65536

static uint8_t rec[MAX_MSG * 6 + 16];

static size_t
records(const uint8_t *msg, size_t len, size_t frag)
{
	size_t pos = 0, k, o = 0;

	while (pos < len) {
		k = len - pos < frag ? len - pos : frag;
		rec[o] = 0x16;
		rec[o + 1] = 0x03;
		rec[o + 2] = 0x01;
		rec[o + 3] = (uint8_t)(k >> 8);
		rec[o + 4] = (uint8_t)k;
		memcpy(rec + o + 5, msg + pos, k);
		o += 5 + k;
		pos += k;
	}
	return o;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t frags[] = { 1, 7, 16384 };
	char a[PX_JA4_LEN + 1], b[PX_JA4_LEN + 1];
	bool ok;
	size_t i, n;

	if (size > MAX_MSG)
		return 0;
	ok = px_ja4s_hello(data, size, a);
	CHECK(ok == (a[0] != '\0'));
	CHECK(!ok || strlen(a) == PX_JA4S_LEN);
	CHECK(!ok || (!px_ja4s_hello(data, size - 1, b) && b[0] == '\0'));
	ok = px_ja4_hello(data, size, a);
	CHECK(ok == (a[0] != '\0'));
	if (!ok)
		return 0;
	CHECK(px_ja4_valid(a));
	CHECK(!px_ja4_hello(data, size - 1, b) && b[0] == '\0');
	for (i = 0; i < sizeof(frags) / sizeof(frags[0]); i++) {
		n = records(data, size, frags[i]);
		CHECK(px_ja4_records(rec, n, b));
		CHECK(strcmp(a, b) == 0);
	}
	return 0;
}
