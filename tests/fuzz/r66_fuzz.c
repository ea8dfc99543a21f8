/* libFuzzer target for plugins/r66/r66_wire.c: the input is a byte stream
 * from a peer. Every frame the decoder accepts is run through every packet
 * decoder; the head-only check must agree with the full one; a prefix of
 * an accepted frame must be incomplete, never accepted or refused. Crashes,
 * overreads (ASan) and UB (UBSan) are the findings. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "r66/r66_json.h"
#include "r66/r66_wire.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
r66_fuzz_check(bool ok)
{
	if (!ok)
		abort();
}

static void
r66_fuzz_frame(const struct r66_frame *f)
{
	struct r66_authent a;
	struct r66_request r;
	struct r66_error e;
	char buf[64];
	bool str;
	uint32_t rank;
	uint8_t way;

	(void)r66_ids_plausible(f, true);
	(void)r66_ids_plausible(f, false);
	(void)r66_code_name(f->code);
	if (r66_authent_parse(f, &a) == 0) {
		r66_fuzz_check(a.host.len == f->hlen && a.key.len == f->mlen);
		(void)r66_caps_get(&a.version, "DIGESTALGO", buf, sizeof(buf));
		if (r66_caps_get(&a.version, "R66VERSION", buf, sizeof(buf)) == 1)
			(void)r66_version_ge(buf, 3, 6, 1);
	}
	if (r66_request_parse(f, &r) == 0) {
		r66_fuzz_check(memchr(r.filename, '\0', sizeof(r.filename)) != NULL);
		r66_fuzz_check(r.rule[0] != '\0');
		(void)r66_mode_name(r.mode);
	}
	(void)r66_data_rank(f, &rank);
	(void)r66_error_parse(f, &e);
	(void)r66_way(f, &way);
	(void)r66_json_get(f->h, f->hlen, "@class", buf, sizeof(buf), &str);
	if (f->mlen > 0)
		(void)r66_json_get(f->m + 1, f->mlen - 1, "filename", buf,
		    sizeof(buf), &str);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The first byte picks a cap, as max-block does in the analyser;
	 * the rest is the stream. */
	uint32_t cap;
	size_t off = 1, need;

	if (size == 0)
		return 0;
	cap = 64u + (uint32_t)data[0] * 1024u;

	while (off < size) {
		const uint8_t *p = data + off;
		size_t n = size - off;
		struct r66_frame f, g;
		enum r66_status st;
		uint8_t *copy;

		st = r66_frame_parse(p, n, cap, &f, &need);
		if (st == R66_INCOMPLETE) {
			r66_fuzz_check(need > n && need <= (size_t)cap + 4);
			break;
		}
		if (n >= R66_FRAME_MIN) {
			enum r66_status hs = r66_frame_head(p, R66_FRAME_MIN, cap, &g);

			if (st == R66_OK)
				r66_fuzz_check(hs == R66_OK && g.len == f.len &&
				    g.code == f.code && g.mlen == f.mlen);
		}
		if (st != R66_OK)
			break;
		r66_fuzz_check(f.len >= R66_FRAME_MIN && f.len <= n);
		/* an exact-size heap copy: ASan sees any overread */
		if ((copy = malloc(f.len)) == NULL)
			break;
		memcpy(copy, p, f.len);
		r66_fuzz_check(r66_frame_parse(copy, f.len, cap, &g, &need) ==
		    R66_OK);
		r66_fuzz_frame(&g);
		r66_fuzz_check(r66_frame_parse(copy, f.len - 1, cap, &g, &need) ==
		    R66_INCOMPLETE);
		free(copy);
		off += f.len;
	}
	return 0;
}
