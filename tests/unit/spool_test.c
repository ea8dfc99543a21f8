/* Unit tests for proxyd/scan/spool.c: a body added in pieces of every
 * size comes back whole and in order, from memory alone and from memory
 * then the unnamed file, written to a socket (sendfile, to_fd) and copied
 * out (mapped a MiB at a time, as a TLS transform reads it, the spool and
 * its descriptor gone by then); max-size is a hard bound; a
 * directory without room for max-size, or none at all, refuses at the
 * first byte past memory and says why; the directory check of the
 * configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "spool.h"

static unsigned char *
pattern(size_t n)
{
	unsigned char *p = malloc(n);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + i / 251);
	return p;
}

/* Adds body to a spool in pieces of `step`, then releases it into an
 * evbuffer and compares what comes out: through a socket (to_fd) or by
 * copying out (mapped). */
static void
round_trip(size_t mem, size_t len, size_t step, bool to_fd)
{
	unsigned char *body = pattern(len), *got = malloc(len + 1);
	struct px_spool *sp = px_spool_new("/tmp", mem, len + 1);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	const char *why = NULL;
	size_t off, n, k = 0;
	int sv[2];

	assert_non_null(sp);
	assert_non_null(got);
	for (off = 0; off < len; off += n) {
		n = len - off < step ? len - off : step;
		evbuffer_add(in, body + off, n);
		assert_int_equal(px_spool_add(sp, in, n, &why), 0);
		assert_int_equal(evbuffer_get_length(in), 0);
	}
	assert_int_equal(px_spool_length(sp), len);
	assert_int_equal(px_spool_on_disk(sp), len > mem ? len - mem : 0);
	evbuffer_add(out, "H", 1);	/* what was queued before stays first */
	assert_int_equal(px_spool_release(sp, out, to_fd, &why), 0);
	px_spool_free(sp);	/* out keeps the file open */
	assert_int_equal(evbuffer_get_length(out), len + 1);
	if (to_fd) {
		/* non-blocking both ways: one thread writes and reads */
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM |
		    SOCK_NONBLOCK, 0, sv), 0);
		while (evbuffer_get_length(out) > 0 || k < len + 1) {
			ssize_t r;

			if (evbuffer_get_length(out) > 0)
				assert_true(evbuffer_write(out, sv[0]) >= 0 ||
				    errno == EAGAIN);
			r = read(sv[1], got + k, len + 1 - k);
			assert_true(r > 0 || (r == -1 && errno == EAGAIN));
			if (r > 0)
				k += (size_t)r;
		}
		close(sv[0]);
		close(sv[1]);
	} else
		assert_int_equal(evbuffer_remove(out, got, len + 1),
		    (int)(len + 1));
	assert_int_equal(got[0], 'H');
	assert_memory_equal(got + 1, body, len);
	evbuffer_free(in);
	evbuffer_free(out);
	free(body);
	free(got);
}

static void
test_round_trips(void **state)
{
	static const size_t steps[] = { 1, 100, 4095, 4096, 65536, 300000 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		round_trip(1 << 20, 200000, steps[i], false);	/* memory */
		round_trip(4096, 200000, steps[i], false);	/* spilled */
		round_trip(4096, 200000, steps[i], true);
		round_trip(0, 70000, steps[i], true);	/* all on disk */
	}
	/* mapped a segment at a time: several of them, the last short */
	round_trip(4096, (3 << 20) + 4101, 65536, false);
	round_trip(4096, (3 << 20) + 4101, 65536, true);
}

static void
test_bounds(void **state)
{
	struct evbuffer *in = evbuffer_new();
	struct px_spool *sp;
	const char *why = NULL;
	char buf[5000];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	/* max-size is a hard bound, whatever is in memory or on disk */
	sp = px_spool_new("/tmp", 1000, 4000);
	evbuffer_add(in, buf, 4000);
	assert_int_equal(px_spool_add(sp, in, 4000, &why), 0);
	evbuffer_add(in, buf, 1);
	assert_int_equal(px_spool_add(sp, in, 1, &why), -1);
	assert_non_null(strstr(why, "max-size"));
	px_spool_free(sp);
	evbuffer_drain(in, evbuffer_get_length(in));

	/* no room for max-size: refused at the first byte past memory */
	sp = px_spool_new("/tmp", 1000, 1ULL << 60);
	evbuffer_add(in, buf, 1000);
	assert_int_equal(px_spool_add(sp, in, 1000, &why), 0);
	evbuffer_add(in, buf, 1);
	assert_int_equal(px_spool_add(sp, in, 1, &why), -1);
	assert_non_null(strstr(why, "bytes free, the scan's max-size needs"));
	px_spool_free(sp);
	evbuffer_drain(in, evbuffer_get_length(in));

	/* a directory that went away */
	sp = px_spool_new("/nonexistent-spool-dir", 10, 1000);
	evbuffer_add(in, buf, 100);
	assert_int_equal(px_spool_add(sp, in, 100, &why), -1);
	assert_non_null(strstr(why, "/nonexistent-spool-dir"));
	px_spool_free(sp);
	px_spool_free(NULL);
	evbuffer_free(in);
}

static void
test_dir_ok(void **state)
{
	const char *why = NULL;

	(void)state;
	assert_true(px_spool_dir_ok("/tmp", &why));
	assert_false(px_spool_dir_ok("tmp", &why));
	assert_string_equal(why, "not an absolute path");
	assert_false(px_spool_dir_ok("/dev/null", &why));
	assert_string_equal(why, "not a directory");
	assert_false(px_spool_dir_ok("/nonexistent-spool-dir", &why));
	assert_string_equal(why, strerror(ENOENT));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_dir_ok),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
