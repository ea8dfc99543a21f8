/* libFuzzer target for the ClientHello reader (proxyd/base/tls_hello.c), fed
 * the raw bytes a client would send. Beyond the sanitizers it checks the
 * reader's own promises and aborts when one breaks:
 *   - NEED_MORE only while fewer than max bytes are in; any other verdict
 *     stays as bytes are added (a prefix gives NEED_MORE or the same one),
 *     and a smaller max can only turn a verdict into TOO_BIG;
 *   - on OK: consumed <= len; sni is a lowercased DNS name exactly when
 *     has_sni; every alpn[] slot is NUL-terminated; the first consumed
 *     bytes give the same result, max = consumed is OK, anything less is
 *     TOO_BIG;
 *   - the same handshake bytes cut into records of another size read the
 *     same (but for consumed);
 *   - px_hello_name_match accepts the name against itself, in upper case,
 *     against "*" and against "*." and its parent, never against "*.name".
 * Build and run: tests/fuzz/run.sh tls_hello SECONDS */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_hello.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s " \
	"(%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

/* A hello's payload in 1-byte records at worst: 6 bytes each. */
static uint8_t payload[PX_HELLO_MAX];
static uint8_t refrag[6 * PX_HELLO_MAX];
static struct px_hello a, b;

static bool
same_fields(const struct px_hello *x, const struct px_hello *y)
{
	return x->record_version == y->record_version &&
	    x->client_version == y->client_version &&
	    x->has_sni == y->has_sni && strcmp(x->sni, y->sni) == 0 &&
	    x->alpn_count == y->alpn_count &&
	    memcmp(x->alpn, y->alpn, sizeof(x->alpn)) == 0 &&
	    x->has_supported_versions == y->has_supported_versions &&
	    x->offers_tls13 == y->offers_tls13;
}

static void
check_name(const struct px_hello *h)
{
	char up[PX_HELLO_SNI_MAX + 1], pat[PX_HELLO_SNI_MAX + 3];
	const char *dot;
	size_t i, n = strlen(h->sni), label = 0;

	CHECK(n <= PX_HELLO_SNI_MAX);
	CHECK(h->has_sni == (n > 0));
	for (i = 0; i < n; i++) {
		char c = h->sni[i];

		if (c == '.') {
			CHECK(label > 0);
			label = 0;
			continue;
		}
		CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-');
		CHECK(++label <= 63);
	}
	CHECK(n == 0 || label > 0);
	if (n == 0) {
		CHECK(!px_hello_name_match("*", h->sni));
		return;
	}
	for (i = 0; i <= n; i++)
		up[i] = h->sni[i] >= 'a' && h->sni[i] <= 'z' ?
		    (char)(h->sni[i] - 'a' + 'A') : h->sni[i];
	CHECK(px_hello_name_match(h->sni, h->sni));
	CHECK(px_hello_name_match(up, h->sni));
	CHECK(px_hello_name_match(h->sni, up));
	CHECK(px_hello_name_match("*", h->sni));
	snprintf(pat, sizeof(pat), "*.%s", h->sni);
	CHECK(!px_hello_name_match(pat, h->sni));
	if ((dot = strchr(h->sni, '.')) != NULL) {
		snprintf(pat, sizeof(pat), "*%s", dot);
		CHECK(px_hello_name_match(pat, h->sni));
		CHECK(!px_hello_name_match(pat, dot + 1));
	}
}

/* The hello's handshake bytes in records of frag bytes, parsed again. */
static void
check_refragmented(const uint8_t *data, size_t consumed, size_t frag)
{
	size_t pos, n = 0, rlen, out = 0, k;

	for (pos = 0; pos < consumed; pos += 5 + rlen) {
		rlen = (size_t)data[pos + 3] << 8 | data[pos + 4];
		CHECK(n + rlen <= sizeof(payload));
		memcpy(payload + n, data + pos + 5, rlen);
		n += rlen;
	}
	CHECK(pos == consumed);
	for (pos = 0; pos < n; pos += k) {
		k = n - pos < frag ? n - pos : frag;
		refrag[out++] = 0x16;
		refrag[out++] = data[1];
		refrag[out++] = data[2];
		refrag[out++] = (uint8_t)(k >> 8);
		refrag[out++] = (uint8_t)k;
		memcpy(refrag + out, payload + pos, k);
		out += k;
	}
	CHECK(px_hello_parse(refrag, out, sizeof(refrag), &b) == PX_HELLO_OK);
	CHECK(same_fields(&a, &b));
	CHECK(b.consumed == out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum px_hello_result res, r;
	size_t i, m, seed = size;
	unsigned k;

	for (i = 0; i < size && i < 64; i++)
		seed = seed * 31 + data[i];
	res = px_hello_parse(data, size, PX_HELLO_MAX, &a);
	CHECK(res >= PX_HELLO_OK && res <= PX_HELLO_TOO_BIG);
	CHECK(res != PX_HELLO_NEED_MORE || size < PX_HELLO_MAX);

	/* Prefixes: the first few bytes, and three more. */
	for (i = 0; i < size && i < 12; i++) {
		r = px_hello_parse(data, i, PX_HELLO_MAX, &b);
		CHECK(r == PX_HELLO_NEED_MORE || r == res);
	}
	if (size > 0) {
		size_t cut[3] = { size - 1, size / 2, seed % size };

		for (i = 0; i < 3; i++) {
			r = px_hello_parse(data, cut[i], PX_HELLO_MAX, &b);
			CHECK(r == PX_HELLO_NEED_MORE || r == res);
		}
	}

	/* A smaller max, with all the bytes in: never NEED_MORE. */
	m = seed % ((size < PX_HELLO_MAX ? size : PX_HELLO_MAX) + 1);
	r = px_hello_parse(data, size, m, &b);
	CHECK(r != PX_HELLO_NEED_MORE);
	CHECK(r == PX_HELLO_TOO_BIG || r == res);
	if (r == PX_HELLO_OK)
		CHECK(same_fields(&a, &b) && a.consumed == b.consumed);

	if (res != PX_HELLO_OK)
		return 0;
	CHECK(a.consumed > 0 && a.consumed <= size);
	CHECK(a.alpn_count <= size);
	for (k = 0; k < PX_HELLO_ALPN_MAX; k++) {
		CHECK(memchr(a.alpn[k], '\0', PX_HELLO_ALPN_LEN) != NULL);
		CHECK(k < a.alpn_count || a.alpn[k][0] == '\0');
	}
	CHECK(!a.offers_tls13 || a.has_supported_versions);
	check_name(&a);

	CHECK(px_hello_parse(data, a.consumed, PX_HELLO_MAX, &b) ==
	    PX_HELLO_OK);
	CHECK(same_fields(&a, &b) && b.consumed == a.consumed);
	CHECK(px_hello_parse(data, size, a.consumed, &b) == PX_HELLO_OK);
	CHECK(same_fields(&a, &b) && b.consumed == a.consumed);
	CHECK(px_hello_parse(data, size, a.consumed - 1, &b) ==
	    PX_HELLO_TOO_BIG);
	CHECK(px_hello_parse(data, a.consumed - 1, PX_HELLO_MAX, &b) ==
	    PX_HELLO_NEED_MORE);

	check_refragmented(data, a.consumed, seed % 400 + 1);
	check_refragmented(data, a.consumed, 16384);
	return 0;
}
