/* Unit tests for proxyd/base/srclimit.c: the connection rate as a token
 * bucket (burst at once, then one per interval, full again after idling),
 * sessions per source given back at release, one log line a second per
 * source with the refusals it stands for, sources and services apart,
 * the ways of one home index full of live sessions (untracked) and the
 * least recently used idle one reused, threads racing on one source
 * never holding more sessions than the limit; the request bucket
 * (requests=) apart from the connections', its wait until a token, and
 * threads taking exactly its burst at one instant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>
#include <unistd.h>

#include "srclimit.h"

#define MS	1000000ULL
#define SEC	1000000000ULL

/* A clock far from 0 and from the other tests' sources (keys apart). */
static uint64_t t0 = 1000 * SEC;

static struct px_sl_rule
rule(uint32_t sessions, uint64_t interval_ns, uint32_t burst)
{
	struct px_sl_rule r;

	memset(&r, 0, sizeof(r));
	r.on = true;
	r.sessions = sessions;
	r.interval_ns = interval_ns;
	r.burst = burst;
	return r;
}

static uint64_t
key_of(const char *svc, uint8_t last)
{
	uint8_t a[17] = { 127, 0, 0, last };

	return px_sl_key(px_sl_hash_str(svc), 1, a, sizeof(a));
}

static enum px_sl_verdict
admit(uint64_t k, const struct px_sl_rule *r, uint64_t now,
    struct px_sl_ref *ref)
{
	struct px_sl_refusal rf;

	return px_sl_admit(k, r, now, ref, &rf);
}

static void
test_bucket(void **state)
{
	struct px_sl_rule r = rule(0, 100 * MS, 5);	/* 10/s, burst 5 */
	struct px_sl_ref ref;
	uint64_t k = key_of("bucket", 1), now = t0;
	int i, n;

	(void)state;
	for (i = 0; i < 5; i++)
		assert_int_equal(admit(k, &r, now, &ref), PX_SL_OK);
	assert_int_equal(admit(k, &r, now, &ref), PX_SL_CONNECTIONS);
	/* Nothing held without sessions=. */
	assert_int_equal(ref.idx, UINT32_MAX);
	/* 99 ms: still none; 100 ms: one. */
	assert_int_equal(admit(k, &r, now + 99 * MS, &ref), PX_SL_CONNECTIONS);
	assert_int_equal(admit(k, &r, now + 100 * MS, &ref), PX_SL_OK);
	assert_int_equal(admit(k, &r, now + 100 * MS, &ref), PX_SL_CONNECTIONS);
	/* A flood of one attempt per ms over 2 s: 10 a second get in. */
	for (n = 0, i = 1; i <= 2000; i++)
		n += admit(k, &r, now + 100 * MS + (uint64_t)i * MS, &ref) ==
		    PX_SL_OK;
	assert_int_equal(n, 20);
	/* Idle 10 s: a whole burst again, and no more. */
	now += 12 * SEC;
	for (i = 0; i < 5; i++)
		assert_int_equal(admit(k, &r, now, &ref), PX_SL_OK);
	assert_int_equal(admit(k, &r, now, &ref), PX_SL_CONNECTIONS);
}

static void
test_sessions(void **state)
{
	struct px_sl_rule r = rule(3, 0, 0);
	struct px_sl_ref ref[4];
	uint64_t k = key_of("sessions", 1), other = key_of("sessions", 2);
	int i;

	(void)state;
	for (i = 0; i < 3; i++) {
		assert_int_equal(admit(k, &r, t0, &ref[i]), PX_SL_OK);
		assert_int_not_equal(ref[i].idx, UINT32_MAX);
	}
	assert_int_equal(px_sl_sessions(k), 3);
	assert_int_equal(admit(k, &r, t0, &ref[3]), PX_SL_SESSIONS);
	/* Another source, and the same address under another service. */
	assert_int_equal(admit(other, &r, t0, &ref[3]), PX_SL_OK);
	px_sl_release(&ref[3]);
	assert_int_equal(admit(key_of("sessions2", 1), &r, t0, &ref[3]),
	    PX_SL_OK);
	px_sl_release(&ref[3]);
	px_sl_release(&ref[1]);
	assert_int_equal(ref[1].idx, UINT32_MAX);
	px_sl_release(&ref[1]);		/* twice: nothing */
	assert_int_equal(px_sl_sessions(k), 2);
	assert_int_equal(admit(k, &r, t0, &ref[1]), PX_SL_OK);
	assert_int_equal(admit(k, &r, t0, &ref[3]), PX_SL_SESSIONS);
	for (i = 0; i < 3; i++)
		px_sl_release(&ref[i]);
	assert_int_equal(px_sl_sessions(k), 0);
}

/* Refused by sessions=: the connection's interval is not spent. */
static void
test_both(void **state)
{
	struct px_sl_rule r = rule(1, 1 * SEC, 2);
	struct px_sl_ref a, b;
	uint64_t k = key_of("both", 1);

	(void)state;
	assert_int_equal(admit(k, &r, t0, &a), PX_SL_OK);
	assert_int_equal(admit(k, &r, t0, &b), PX_SL_SESSIONS);
	px_sl_release(&a);
	assert_int_equal(admit(k, &r, t0, &a), PX_SL_OK);
	px_sl_release(&a);
	assert_int_equal(admit(k, &r, t0, &a), PX_SL_CONNECTIONS);
}

static void
test_log_once_a_second(void **state)
{
	struct px_sl_rule r = rule(0, 1 * SEC, 1);
	struct px_sl_refusal rf;
	struct px_sl_ref ref;
	uint64_t k = key_of("log", 1), now = t0 + 100 * MS;
	int i;

	(void)state;
	assert_int_equal(px_sl_admit(k, &r, now, &ref, &rf), PX_SL_OK);
	assert_int_equal(px_sl_admit(k, &r, now, &ref, &rf),
	    PX_SL_CONNECTIONS);
	assert_true(rf.log);
	assert_int_equal(rf.count, 1);
	for (i = 0; i < 7; i++) {
		assert_int_equal(px_sl_admit(k, &r, now + 10 * MS, &ref, &rf),
		    PX_SL_CONNECTIONS);
		assert_false(rf.log);
	}
	/* The next second: one line for the 7 and this one. */
	assert_int_equal(px_sl_admit(k, &r, now + 900 * MS, &ref, &rf),
	    PX_SL_CONNECTIONS);
	assert_true(rf.log);
	assert_int_equal(rf.count, 8);
}

/* Keys of one home index: the ways fill; with live sessions in all of
 * them a new source is untracked; a way without sessions is reused, the
 * least recently used first. */
static void
test_ways(void **state)
{
	struct px_sl_rule held = rule(1, 0, 0), rate = rule(0, 1 * SEC, 1);
	struct px_sl_ref ref[PX_SL_WAYS + 1], none;
	uint64_t base = 0x5eed0000ULL << 20 | 0x1234, k;
	unsigned i;

	(void)state;
	for (i = 0; i < PX_SL_WAYS; i++)
		assert_int_equal(admit(base + (uint64_t)i * PX_SL_ENTRIES, &held,
		    t0, &ref[i]), PX_SL_OK);
	k = base + (uint64_t)PX_SL_WAYS * PX_SL_ENTRIES;
	assert_int_equal(admit(k, &held, t0, &ref[PX_SL_WAYS]),
	    PX_SL_UNTRACKED);
	assert_int_equal(ref[PX_SL_WAYS].idx, UINT32_MAX);
	/* Two sessions end; the newcomer takes one of their entries. */
	px_sl_release(&ref[3]);
	px_sl_release(&ref[7]);
	assert_int_equal(admit(k, &held, t0, &ref[PX_SL_WAYS]), PX_SL_OK);
	assert_int_equal(px_sl_sessions(k), 1);
	/* A rate-only source uses the last free way, then its bucket is
	 * empty: the next source reuses it (LRU), losing its state. */
	k += PX_SL_ENTRIES;
	assert_int_equal(admit(k, &rate, t0, &none), PX_SL_OK);
	assert_int_equal(admit(k, &rate, t0, &none), PX_SL_CONNECTIONS);
	assert_int_equal(admit(k + PX_SL_ENTRIES, &rate, t0, &none), PX_SL_OK);
	assert_int_equal(admit(k, &rate, t0, &none), PX_SL_OK);
	for (i = 0; i <= PX_SL_WAYS; i++)
		px_sl_release(&ref[i]);
}

static bool
request(uint64_t k, const struct px_sl_rule *r, uint64_t now,
    uint64_t *wait)
{
	struct px_sl_refusal rf;

	return px_sl_request(k, r, now, wait, &rf);
}

/* requests=: a bucket of its own beside the connections' (10/s, burst 5
 * here), the wait until a token when refused (Retry-After), one line a
 * second, and nothing limited without requests=. */
static void
test_requests(void **state)
{
	struct px_sl_rule r = rule(0, 1 * SEC, 1), none = rule(0, 1 * SEC, 1);
	struct px_sl_refusal rf;
	struct px_sl_ref ref;
	uint64_t k = key_of("requests", 1), now = t0, wait;
	int i, n;

	(void)state;
	r.req_interval_ns = 100 * MS;
	r.req_burst = 5;
	/* One connection, then its bucket is empty; requests are apart. */
	assert_int_equal(admit(k, &r, now, &ref), PX_SL_OK);
	assert_int_equal(admit(k, &r, now, &ref), PX_SL_CONNECTIONS);
	for (i = 0; i < 5; i++) {
		assert_true(request(k, &r, now, &wait));
		assert_int_equal(wait, 0);
	}
	assert_false(px_sl_request(k, &r, now, &wait, &rf));
	assert_int_equal(wait, 100 * MS);
	assert_true(rf.log);
	assert_int_equal(rf.count, 1);
	assert_false(px_sl_request(k, &r, now + 99 * MS, &wait, &rf));
	assert_int_equal(wait, 1 * MS);
	assert_false(rf.log);
	assert_true(request(k, &r, now + 100 * MS, &wait));
	assert_false(request(k, &r, now + 100 * MS, &wait));
	/* 1 s on, the bucket is full again (5); the next second's first
	 * refusal logs, standing for the 3 since the last line. */
	for (i = 0; i < 5; i++)
		assert_true(request(k, &r, now + 1 * SEC, &wait));
	assert_false(px_sl_request(k, &r, now + 1 * SEC, &wait, &rf));
	assert_true(rf.log);
	assert_int_equal(rf.count, 3);
	/* One attempt a ms for 2 s: 10 a second. */
	for (n = 0, i = 1; i <= 2000; i++)
		n += request(k, &r, now + 1 * SEC + (uint64_t)i * MS, &wait);
	assert_int_equal(n, 20);
	/* Idle: a whole burst again, and no more. */
	now += 20 * SEC;
	for (n = 0, i = 0; i < 10; i++)
		n += request(k, &r, now, &wait);
	assert_int_equal(n, 5);
	/* Requests left the connections' bucket alone: full after 1 s. */
	assert_int_equal(admit(k, &r, now, &ref), PX_SL_OK);
	/* Without requests= nothing is limited. */
	for (i = 0; i < 100; i++)
		assert_true(request(key_of("requests", 2), &none, now, &wait));
	/* A source seen first by a request gets an entry of its own. */
	k = key_of("requests", 3);
	for (n = 0, i = 0; i < 10; i++)
		n += request(k, &r, now, &wait);
	assert_int_equal(n, 5);
}

#define REQ_THREADS	6
#define REQ_ROUNDS	20000

static uint64_t req_key;

static void *
req_thread(void *arg)
{
	struct px_sl_rule r = rule(0, 0, 0);
	uint64_t wait;
	int i, *ok = arg;

	r.req_interval_ns = 1 * SEC;
	r.req_burst = 100;
	for (i = 0; i < REQ_ROUNDS; i++)
		*ok += request(req_key, &r, t0, &wait);
	return NULL;
}

/* Threads taking requests of one source at one instant: exactly the
 * burst goes through, however they interleave. */
static void
test_requests_race(void **state)
{
	pthread_t th[REQ_THREADS];
	int ok[REQ_THREADS] = { 0 }, i, sum = 0;

	(void)state;
	req_key = key_of("requests-race", 1);
	for (i = 0; i < REQ_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, req_thread,
		    &ok[i]), 0);
	for (i = 0; i < REQ_THREADS; i++) {
		pthread_join(th[i], NULL);
		sum += ok[i];
	}
	assert_int_equal(sum, 100);
}

#define RACE_LIMIT	2
#define RACE_THREADS	6
#define RACE_ROUNDS	200000

static _Atomic int race_held, race_max;
static uint64_t race_key;

static void *
race_thread(void *arg)
{
	struct px_sl_rule r = rule(RACE_LIMIT, 0, 0);
	struct px_sl_ref ref[2];
	int i, held, m, *ok = arg;

	for (i = 0; i < RACE_ROUNDS; i++) {
		if (admit(race_key, &r, t0, &ref[i & 1]) != PX_SL_OK)
			continue;
		/* What the table says, and what the threads hold. */
		held = (int)px_sl_sessions(race_key);
		m = atomic_load(&race_max);
		while (held > m && !atomic_compare_exchange_weak(&race_max,
		    &m, held))
			;
		held = atomic_fetch_add(&race_held, 1) + 1;
		m = atomic_load(&race_max);
		while (held > m && !atomic_compare_exchange_weak(&race_max,
		    &m, held))
			;
		(*ok)++;
		atomic_fetch_sub(&race_held, 1);
		px_sl_release(&ref[i & 1]);
	}
	return NULL;
}

static void
test_race(void **state)
{
	pthread_t th[RACE_THREADS];
	int ok[RACE_THREADS] = { 0 }, i, sum = 0;

	(void)state;
	race_key = key_of("race", 1);
	for (i = 0; i < RACE_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_thread,
		    &ok[i]), 0);
	for (i = 0; i < RACE_THREADS; i++) {
		pthread_join(th[i], NULL);
		sum += ok[i];
	}
	print_message("race: %d admitted, at most %d at once\n", sum,
	    atomic_load(&race_max));
	assert_true(atomic_load(&race_max) <= RACE_LIMIT);
	assert_true(sum > 0);
	assert_int_equal(px_sl_sessions(race_key), 0);
}

static long
rss_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A million sources, one connection each (connections="1/s" burst 1):
 * every one is admitted (a new source, or one whose entry was reused,
 * starts with a full bucket), the table ends full (PX_SL_ENTRIES entries
 * hold a source) and the process grew by at most the table's fixed size,
 * 4 MiB, whatever the number of sources. Last: it fills the table. */
static void
test_million(void **state)
{
	struct px_sl_rule r = rule(0, 1 * SEC, 1);
	struct px_sl_ref ref;
	uint8_t a[17] = { 10 };
	long before = rss_kb(), after;
	uint32_t i, refused = 0;

	(void)state;
	r.svc_hash = px_sl_hash_str("million");
	for (i = 0; i < 1000000; i++) {
		memcpy(a + 1, &i, sizeof(i));
		if (admit(px_sl_key(r.svc_hash, 1, a, sizeof(a)), &r,
		    t0 + 500 * SEC + i, &ref) != PX_SL_OK)
			refused++;
	}
	after = rss_kb();
	print_message("1000000 sources: %u refused, %u of %u entries in use, "
	    "RSS +%ld KiB (table %u KiB)\n", refused, px_sl_used(),
	    PX_SL_ENTRIES, after - before,
	    PX_SL_ENTRIES * PX_SL_ENTRY_BYTES / 1024);
	assert_int_equal(refused, 0);
	assert_int_equal(px_sl_used(), PX_SL_ENTRIES);
	assert_true(after - before <= (long)(PX_SL_ENTRIES *
	    PX_SL_ENTRY_BYTES / 1024) + 512);
}

/* transfers=: a bucket of its own per source, apart from the request
 * bucket (both full, both 3 a minute here): taking one leaves the other. */
static void
test_transfers(void **state)
{
	struct px_sl_rule r = rule(0, 0, 0);
	struct px_sl_refusal rf;
	uint64_t k = key_of("xfer", 1), now = t0, wait;
	int i;

	(void)state;
	r.xfer_interval_ns = 20 * SEC;
	r.xfer_burst = 3;
	r.req_interval_ns = 20 * SEC;
	r.req_burst = 3;
	for (i = 0; i < 3; i++)
		assert_true(px_sl_transfer(k, &r, now, &wait, &rf));
	assert_false(px_sl_transfer(k, &r, now, &wait, &rf));
	assert_true(rf.log);
	assert_int_equal(rf.count, 1);
	assert_int_equal(wait, 20 * SEC);
	/* The request bucket is untouched, and another source's transfers. */
	for (i = 0; i < 3; i++)
		assert_true(px_sl_request(k, &r, now, &wait, &rf));
	assert_false(px_sl_request(k, &r, now, &wait, &rf));
	assert_true(px_sl_transfer(key_of("xfer", 2), &r, now, &wait, &rf));
	/* The second refusal in the same second is not logged. */
	assert_false(px_sl_transfer(k, &r, now + 10 * MS, &wait, &rf));
	assert_false(rf.log);
	assert_true(px_sl_transfer(k, &r, now + 20 * SEC, &wait, &rf));
	/* No transfers=: never refused. */
	r.xfer_interval_ns = 0;
	for (i = 0; i < 10; i++)
		assert_true(px_sl_transfer(k, &r, now, &wait, &rf));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_both),
		cmocka_unit_test(test_log_once_a_second),
		cmocka_unit_test(test_ways),
		cmocka_unit_test(test_race),
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_requests_race),
		cmocka_unit_test(test_transfers),
		cmocka_unit_test(test_million),
	};

	if (px_sl_init() == -1)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
