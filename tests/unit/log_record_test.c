/* Unit tests for the record stream of proxyd/base/log.c (px_log_record,
 * the audit's lines): from a worker-like thread through its ring and the
 * log thread, or straight from a thread without a ring, every record
 * arrives whole, in order, newline-ended, or is counted as dropped; a
 * line too long is refused; no target, no record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define NREC	3000

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Record i: "seq=i " then a filler of a length drawn from i, up to the
 * longest line allowed. */
static size_t
make_record(char *buf, unsigned i)
{
	size_t len = (size_t)(i * 7919u) % (PX_LOG_RECORD_MAX - 1) + 16;
	int k;

	if (len > PX_LOG_RECORD_MAX - 1)
		len = PX_LOG_RECORD_MAX - 1;
	if (i % 500 == 0)
		len = PX_LOG_RECORD_MAX - 1;
	k = snprintf(buf, 32, "seq=%u ", i);
	memset(buf + k, 'a' + (char)(i % 26), len - (size_t)k);
	return len;
}

static unsigned pushed_ok;

static void *
producer(void *arg)
{
	static char buf[PX_LOG_RECORD_MAX + 8];
	struct px_log_ring *r = px_log_ring_attach();
	unsigned i;

	(void)arg;
	assert_non_null(r);
	for (i = 0; i < NREC; i++) {
		size_t len = make_record(buf, i);

		if (px_log_record(buf, len))
			pushed_ok++;
		if (i % 64 == 0)
			usleep(2000);	/* let the log thread keep up, mostly */
	}
	/* One byte too long: refused, counted. */
	memset(buf, 'x', PX_LOG_RECORD_MAX);
	assert_false(px_log_record(buf, PX_LOG_RECORD_MAX));
	px_log_ring_detach(r);
	return NULL;
}

static void
test_records(void **state)
{
	char path[] = "/tmp/px-log-record-XXXXXX";
	char want[PX_LOG_RECORD_MAX + 8];
	int fd = mkstemp(path);
	pthread_t t;
	char *data, *p, *nl;
	size_t len, got = 0;
	unsigned last = 0;
	bool first = true;
	uint64_t dropped0 = px_log_records_dropped();

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	/* No target: nothing taken. */
	assert_false(px_log_record_on());
	assert_false(px_log_record("x", 1));
	assert_int_equal(px_log_record_open(true, PX_LOG_FILE, path), 0);
	assert_true(px_log_record_on());
	/* Before the log thread, and from a thread without a ring: written
	 * at once. */
	assert_true(px_log_record("seq=direct", 10));
	assert_int_equal(px_log_start(), 0);
	assert_int_equal(pthread_create(&t, NULL, producer, NULL), 0);
	pthread_join(t, NULL);
	px_log_stop();
	assert_int_equal(px_log_record_open(false, PX_LOG_STDERR, NULL), 0);

	data = slurp(path, &len);
	assert_true(len > 0 && data[len - 1] == '\n');
	assert_memory_equal(data, "seq=direct\n", 11);
	for (p = data + 11; p < data + len; p = nl + 1) {
		unsigned i;
		size_t wlen;

		nl = memchr(p, '\n', (size_t)(data + len - p));
		assert_non_null(nl);
		assert_int_equal(sscanf(p, "seq=%u ", &i), 1);
		assert_true(first || i > last);
		first = false;
		last = i;
		wlen = make_record(want, i);
		assert_int_equal((size_t)(nl - p), wlen);
		assert_memory_equal(p, want, wlen);
		got++;
	}
	assert_int_equal(got, pushed_ok);
	/* What was not written was counted, the long one too. */
	assert_int_equal(px_log_records_dropped() - dropped0,
	    NREC - pushed_ok + 1);
	assert_true(pushed_ok > NREC / 2);
	free(data);
	unlink(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
