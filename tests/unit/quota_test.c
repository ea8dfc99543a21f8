/* Unit tests for proxyd/scan/quota.c: quota-bytes= and quota-transfers=
 * as loaded, one entry per (service, partner), the refusals at a
 * transfer's start and at a byte take, the UTC day's rollover (the clock
 * in a file, PROXYD_QUOTA_CLOCK), the state file, and threads racing on random partners
 * against a per-thread tally: one entry per key whoever made it first,
 * and a day's bytes equal to the takes granted, never over the limit. */
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

#include <event2/buffer.h>
#include <libxml/parser.h>

#include "cfgread.h"
#include "quota.h"

static char clock_path[] = "/tmp/quota_test_clock.XXXXXX";

static void
set_clock(long long t)
{
	FILE *f = fopen(clock_path, "w");

	assert_non_null(f);
	fprintf(f, "%lld\n", t);
	fclose(f);
}

/* quota attributes of <user .../>: errors reported. */
static unsigned
load(const char *xml, struct px_quota_limit *l)
{
	xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "svc.xml", NULL,
	    0);
	struct px_cfgerr e = { .out = NULL, .file = "svc.xml" };

	assert_non_null(doc);
	(void)px_attr_quota(&e, xmlDocGetRootElement(doc), l);
	xmlFreeDoc(doc);
	return e.count;
}

static void
test_attrs(void **state)
{
	struct px_quota_limit l;

	(void)state;
	assert_int_equal(load("<user quota-bytes=\"10g\" "
	    "quota-transfers=\"1000\"/>", &l), 0);
	assert_true(l.bytes == 10ULL << 30);
	assert_true(l.transfers == 1000);
	assert_true(px_quota_limited(&l));
	assert_int_equal(load("<user name=\"a\"/>", &l), 0);
	assert_false(px_quota_limited(&l));
	assert_int_equal(load("<user quota-bytes=\"0\"/>", &l), 1);
	assert_int_equal(load("<user quota-bytes=\"ten\"/>", &l), 1);
	assert_int_equal(load("<user quota-transfers=\"0\"/>", &l), 1);
	assert_int_equal(load("<user quota-transfers=\"-1\"/>", &l), 1);
	assert_int_equal(load("<user quota-transfers=\"4294967296\"/>", &l), 1);
}

static void
test_entries(void **state)
{
	struct px_quota *a = px_quota_get("svc", "alice");

	(void)state;
	assert_non_null(a);
	assert_ptr_equal(px_quota_get("svc", "alice"), a);
	assert_ptr_not_equal(px_quota_get("svc2", "alice"), a);
	assert_ptr_not_equal(px_quota_get("svc", "bob"), a);
	/* The NUL between the two parts of the key matters. */
	assert_ptr_not_equal(px_quota_get("ab", "c"), px_quota_get("a", "bc"));
}

static void
test_limits_and_day(void **state)
{
	struct px_quota_limit l = { .bytes = 1000, .transfers = 3 };
	struct px_quota *q = px_quota_get("limits", "p");
	uint64_t used = 0, limit = 0, b, t;
	int i;

	(void)state;
	set_clock(86400LL * 20000 + 3600);
	for (i = 0; i < 3; i++)
		assert_int_equal(px_quota_begin(q, &l, &used, &limit),
		    PX_QUOTA_OK);
	assert_int_equal(px_quota_begin(q, &l, &used, &limit),
	    PX_QUOTA_TRANSFERS);
	assert_true(used == 3 && limit == 3);
	px_quota_usage(q, &b, &t);
	assert_true(t == 3);
	/* Bytes: a take that would cross is refused and not counted. */
	assert_true(px_quota_take(q, 1000, 600, &used) && used == 600);
	assert_false(px_quota_take(q, 1000, 401, &used));
	assert_true(used == 600);
	assert_true(px_quota_take(q, 1000, 400, &used) && used == 1000);
	l.transfers = 10;
	assert_int_equal(px_quota_begin(q, &l, &used, &limit), PX_QUOTA_BYTES);
	assert_true(used == 1000 && limit == 1000);
	/* A limit raised (a reload): the day's counts stand. */
	l.bytes = 2000;
	assert_int_equal(px_quota_begin(q, &l, &used, &limit), PX_QUOTA_OK);
	px_quota_usage(q, &b, &t);
	assert_true(b == 1000 && t == 4);
	/* 23:59:59 is the same day, 00:00 the next. */
	set_clock(86400LL * 20001 - 1);
	px_quota_usage(q, &b, &t);
	assert_true(b == 1000 && t == 4);
	set_clock(86400LL * 20001);
	px_quota_usage(q, &b, &t);
	assert_true(b == 0 && t == 0);
	assert_true(px_quota_day() == 20001);
}

static void
test_metrics(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct px_quota_limit l = { .transfers = 1 };
	uint64_t used, limit;
	char *text;
	size_t n;

	(void)state;
	(void)px_quota_begin(px_quota_get("m\"s", "x\\y"), &l, &used, &limit);
	(void)px_quota_begin(px_quota_get("m\"s", "x\\y"), &l, &used, &limit);
	px_quota_metrics(b);
	n = evbuffer_get_length(b);
	text = calloc(1, n + 1);
	assert_non_null(text);
	evbuffer_copyout(b, text, n);
	assert_non_null(strstr(text, "proxyd_quota_used_transfers{service="
	    "\"m\\\"s\",partner=\"x\\\\y\"} 1\n"));
	assert_non_null(strstr(text, "proxyd_quota_refusals_total{service="
	    "\"m\\\"s\",kind=\"transfers\"} 1\n"));
	free(text);
	evbuffer_free(b);
}

/* The state file: today's counts back under the same keys, odd bytes
 * and all; another day's lines and zero counts are not; a file that is
 * not one is refused. */
static void
test_state_file(void **state)
{
	char path[] = "/tmp/quota_test_state.XXXXXX";
	struct px_quota_limit l = { .transfers = 100 };
	struct px_quota *q, *old;
	uint64_t used, limit, b, t;
	size_t n;
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd != -1);
	close(fd);
	set_clock(86400LL * 30000 + 5);
	old = px_quota_get("st", "yesterday");
	q = px_quota_get("st svc", "p%a r\t\xc3\xa9");
	(void)px_quota_begin(q, &l, &used, &limit);
	assert_true(px_quota_take(q, 0, 777, &used));
	assert_int_equal(px_quota_save(path), 0);
	/* Wipe the counts as a restart would, by a day's roll and back. */
	set_clock(86400LL * 30001);
	px_quota_usage(q, &b, &t);
	assert_true(b == 0 && t == 0);
	assert_int_equal(px_quota_load(path, &n), 0);
	assert_true(n == 0);		/* the file's day is over */
	set_clock(86400LL * 30000 + 7);
	assert_int_equal(px_quota_load(path, &n), 0);
	assert_true(n == 1);		/* "yesterday" had no counts */
	px_quota_usage(q, &b, &t);
	assert_true(b == 777 && t == 1);
	px_quota_usage(old, &b, &t);
	assert_true(b == 0 && t == 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not a state file\n", f);
	fclose(f);
	assert_int_equal(px_quota_load(path, &n), -1);
	unlink(path);
	assert_int_equal(px_quota_load(path, &n), 0);	/* none yet */
}

/* ---- threads on random partners --------------------------------------- */

#define RACE_THREADS	4
#define RACE_PARTNERS	64
#define RACE_OPS	20000
#define RACE_LIMIT	100000

struct race {
	unsigned	 seed;
	struct px_quota	*seen[RACE_PARTNERS];
	uint64_t	 granted[RACE_PARTNERS];
};

static void *
race_run(void *arg)
{
	struct race *r = arg;
	struct px_quota *q;
	char name[32];
	uint64_t used;
	unsigned k, i, n;

	for (i = 0; i < RACE_OPS; i++) {
		k = (unsigned)rand_r(&r->seed) % RACE_PARTNERS;
		n = 1 + (unsigned)rand_r(&r->seed) % 300;
		snprintf(name, sizeof(name), "race-%u", k);
		if ((q = px_quota_get("race", name)) == NULL)
			return NULL;
		if (r->seen[k] == NULL)
			r->seen[k] = q;
		else if (r->seen[k] != q)
			return NULL;
		if (px_quota_take(q, RACE_LIMIT, n, &used))
			r->granted[k] += n;
	}
	return r;
}

static void
test_race(void **state)
{
	struct race r[RACE_THREADS];
	pthread_t th[RACE_THREADS];
	uint64_t sum, b, t;
	void *ret;
	unsigned i, k;

	(void)state;
	memset(r, 0, sizeof(r));
	for (i = 0; i < RACE_THREADS; i++) {
		r[i].seed = 7 + i;
		assert_int_equal(pthread_create(&th[i], NULL, race_run, &r[i]), 0);
	}
	for (i = 0; i < RACE_THREADS; i++) {
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_ptr_equal(ret, &r[i]);	/* no NULL, no second entry */
	}
	for (k = 0; k < RACE_PARTNERS; k++) {
		struct px_quota *q = NULL;

		for (sum = 0, i = 0; i < RACE_THREADS; i++) {
			sum += r[i].granted[k];
			if (r[i].seen[k] != NULL) {
				if (q != NULL)
					assert_ptr_equal(r[i].seen[k], q);
				q = r[i].seen[k];
			}
		}
		if (q == NULL)
			continue;
		px_quota_usage(q, &b, &t);
		assert_true(b == sum);
		assert_true(b <= RACE_LIMIT);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attrs),
		cmocka_unit_test(test_entries),
		cmocka_unit_test(test_limits_and_day),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_state_file),
		cmocka_unit_test(test_race),
	};
	int fd = mkstemp(clock_path), rc;

	if (fd == -1)
		return 1;
	close(fd);
	set_clock(86400LL * 20000);
	/* Read once, at the first look at the clock. */
	setenv("PROXYD_QUOTA_CLOCK", clock_path, 1);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(clock_path);
	return rc;
}
