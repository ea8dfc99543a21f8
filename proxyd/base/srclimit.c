/* The per-source limit table (srclimit.h). */
#include "srclimit.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* One entry, a cache line. key 0: free. state packs what must change
 * together: whether the entry is being freed, how many workers hold it
 * pinned for a moment (a pinned entry is never reused), its live sessions,
 * and a generation bumped at each reuse (a compare-and-swap that read an
 * older one fails, so no one acts on a reused entry). */
struct px_sl_ent {
	_Atomic uint64_t	 key;
	_Atomic uint64_t	 state;
	_Atomic uint64_t	 tat;		/* GCRA, monotonic ns */
	_Atomic uint64_t	 logged_s;	/* second of the last line, +1 */
	_Atomic uint64_t	 refused;	/* since that line */
	/* requests= (HTTP): its own GCRA and its own line a second. */
	_Atomic uint64_t	 rtat;
	_Atomic uint64_t	 rlogged_s;
	_Atomic uint64_t	 rrefused;
};

#define PX_SL_FREEING	1ULL
#define PX_SL_PIN	(1ULL << 1)
/* A worker pins at most one entry at a time: 9 bits for 256 workers. */
#define PX_SL_PINS(st)	(((st) >> 1) & 0x1ffu)
#define PX_SL_PINS_MAX	0x1ffu
#define PX_SL_SESS	(1ULL << 10)
#define PX_SL_SESSIONS(st) (((st) >> 10) & 0xffffffu)
#define PX_SL_GEN1	(1ULL << 34)
#define PX_SL_GEN(st)	((uint32_t)((st) >> 34))
/* A bound on retries of one compare-and-swap that others keep winning:
 * each failure is another worker's progress, so this is never reached
 * in practice; past it the connection is admitted untracked. */
#define PX_SL_TRIES	1000

_Static_assert(sizeof(struct px_sl_ent) == PX_SL_ENTRY_BYTES,
    "an entry is a cache line");

static _Atomic(struct px_sl_ent *) px_sl_tab;
static uint64_t px_sl_seed;
/* Entries that hold a source: an entry is never freed, only reused, so
 * this counts the claims of free ones. */
static _Atomic uint32_t px_sl_nused;

static uint64_t px_sl_mix(uint64_t x);

/* The table's key from getrandom: without waiting if the kernel's pool is
 * ready, else waiting for it. 0, or -1 (no getrandom). */
static int
px_sl_seed_init(void)
{
	ssize_t r;

	if (getrandom(&px_sl_seed, sizeof(px_sl_seed), GRND_NONBLOCK) ==
	    (ssize_t)sizeof(px_sl_seed))
		return 0;
	do
		r = getrandom(&px_sl_seed, sizeof(px_sl_seed), 0);
	while (r == -1 && errno == EINTR);
	return r == (ssize_t)sizeof(px_sl_seed) ? 0 : -1;
}

int
px_sl_init(void)
{
	struct px_sl_ent *t;

	if (atomic_load(&px_sl_tab) != NULL)
		return 0;
	/* calloc of 4 MiB maps zero pages: memory is only used as sources
	 * arrive, up to the table's size. */
	if ((t = calloc(PX_SL_ENTRIES, sizeof(*t))) == NULL)
		return -1;
	/* Keyed with the kernel's random bytes, so a client cannot aim
	 * addresses at one set of entries. At early boot, before the kernel's
	 * pool is ready, that waits for it (once, at startup). */
	if (px_sl_seed_init() == -1) {
		struct timespec mono, real;

		/* No getrandom at all (never on a supported kernel): the
		 * pid, both clocks' nanoseconds and where the table and this
		 * code landed (ASLR), mixed; none of them visible from the
		 * network. */
		clock_gettime(CLOCK_MONOTONIC, &mono);
		clock_gettime(CLOCK_REALTIME, &real);
		px_sl_seed = px_sl_mix((uint64_t)getpid() ^
		    px_sl_mix((uint64_t)mono.tv_sec * 1000000000ULL +
		    (uint64_t)mono.tv_nsec) ^
		    px_sl_mix((uint64_t)real.tv_sec * 1000000000ULL +
		    (uint64_t)real.tv_nsec) ^
		    px_sl_mix((uint64_t)(uintptr_t)t ^
		    (uint64_t)(uintptr_t)&px_sl_seed));
	}
	atomic_store(&px_sl_tab, t);
	return 0;
}

bool
px_sl_ready(void)
{
	return atomic_load_explicit(&px_sl_tab, memory_order_acquire) != NULL;
}

uint64_t
px_sl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t
px_sl_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static uint64_t
px_sl_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t
px_sl_key(uint64_t svc_hash, unsigned kind, const uint8_t *bytes,
    unsigned len)
{
	uint64_t h = px_sl_mix(px_sl_seed ^ svc_hash) ^ kind;
	unsigned i;

	for (i = 0; i < len; i++)
		h = px_sl_mix(h ^ ((uint64_t)bytes[i] << ((i % 8) * 8)));
	h = px_sl_mix(h ^ len);
	return h != 0 ? h : 1;
}

/* The first entry of the source's ways holding key, pinned; NULL if none.
 * Pinning validates the read: the CAS fails if the entry was reused since
 * its state was read. */
static struct px_sl_ent *
px_sl_find_pin(struct px_sl_ent *t, uint64_t key, uint32_t *idx)
{
	uint32_t i, j;
	uint64_t st;
	int tries;

	for (i = 0; i < PX_SL_WAYS; i++) {
		struct px_sl_ent *e;

		j = (uint32_t)(key + i) & (PX_SL_ENTRIES - 1);
		e = &t[j];
		for (tries = 0; tries < PX_SL_TRIES; tries++) {
			st = atomic_load_explicit(&e->state,
			    memory_order_acquire);
			if ((st & PX_SL_FREEING) != 0 ||
			    atomic_load_explicit(&e->key, memory_order_acquire)
			    != key || PX_SL_PINS(st) == PX_SL_PINS_MAX)
				break;
			if (atomic_compare_exchange_weak_explicit(&e->state,
			    &st, st + PX_SL_PIN, memory_order_acq_rel,
			    memory_order_acquire)) {
				*idx = j;
				return e;
			}
		}
	}
	return NULL;
}

/* Makes an entry of the ways hold key: a free one, else the least
 * recently used one that no session and no worker holds. 0, or -1 when
 * every way is held. The caller looks again, and every worker uses the
 * first entry of the ways that holds the key. Two workers seeing a new
 * source at the same instant both take the first free entry (the compare-
 * and-swap on the key lets one win, the other finds it), so one entry is
 * made; only when the ways are full and an entry changed between their
 * two looks may each reuse another one: each then counts its connection
 * on its own entry, and from the next one on all use the first (the other
 * ages out), a difference of one connection per worker, once. */
static int
px_sl_claim(struct px_sl_ent *t, uint64_t key)
{
	struct px_sl_ent *victim = NULL;
	uint64_t vst = 0, vtat = UINT64_MAX, st, zero;
	uint32_t i, j;

	for (i = 0; i < PX_SL_WAYS; i++) {
		struct px_sl_ent *e;
		uint64_t k, tat, rtat;

		j = (uint32_t)(key + i) & (PX_SL_ENTRIES - 1);
		e = &t[j];
		st = atomic_load_explicit(&e->state, memory_order_acquire);
		if ((st & PX_SL_FREEING) != 0)
			continue;
		k = atomic_load_explicit(&e->key, memory_order_acquire);
		if (k == key)
			return 0;	/* someone else made it */
		if (k == 0) {
			zero = 0;
			if (atomic_compare_exchange_strong_explicit(&e->key,
			    &zero, key, memory_order_acq_rel,
			    memory_order_acquire)) {
				atomic_fetch_add_explicit(&px_sl_nused, 1,
				    memory_order_relaxed);
				return 0;
			}
			if (zero == key)
				return 0;
			continue;
		}
		if (PX_SL_SESSIONS(st) != 0 || PX_SL_PINS(st) != 0)
			continue;
		/* Least recently used: by the later of its two buckets. */
		tat = atomic_load_explicit(&e->tat, memory_order_relaxed);
		rtat = atomic_load_explicit(&e->rtat, memory_order_relaxed);
		if (rtat > tat)
			tat = rtat;
		if (tat < vtat) {
			victim = e;
			vst = st;
			vtat = tat;
		}
	}
	if (victim == NULL)
		return -1;
	/* Free it: only if nothing changed since (no pin, no session). */
	if (!atomic_compare_exchange_strong_explicit(&victim->state, &vst,
	    (vst + PX_SL_GEN1) | PX_SL_FREEING, memory_order_acq_rel,
	    memory_order_acquire))
		return 0;	/* look again */
	atomic_store_explicit(&victim->tat, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->refused, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->logged_s, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->rtat, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->rrefused, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->rlogged_s, 0, memory_order_relaxed);
	atomic_store_explicit(&victim->key, key, memory_order_release);
	atomic_store_explicit(&victim->state, vst + PX_SL_GEN1,
	    memory_order_release);
	return 0;
}

static void
px_sl_unpin(struct px_sl_ent *e)
{
	atomic_fetch_sub_explicit(&e->state, PX_SL_PIN, memory_order_acq_rel);
}

/* A refusal counted in *refused; the line logged (*logged_s) at most once
 * a second. */
static void
px_sl_refused_in(_Atomic uint64_t *logged_s, _Atomic uint64_t *refused,
    uint64_t now_ns, struct px_sl_refusal *rf)
{
	uint64_t s = now_ns / 1000000000ULL + 1,
	    old = atomic_load_explicit(logged_s, memory_order_relaxed);

	if (old != s && atomic_compare_exchange_strong_explicit(logged_s,
	    &old, s, memory_order_relaxed, memory_order_relaxed)) {
		rf->log = true;
		rf->count = atomic_exchange_explicit(refused, 0,
		    memory_order_relaxed) + 1;
	} else {
		rf->log = false;
		atomic_fetch_add_explicit(refused, 1, memory_order_relaxed);
	}
}

static void
px_sl_refused(struct px_sl_ent *e, uint64_t now_ns, struct px_sl_refusal *rf)
{
	px_sl_refused_in(&e->logged_s, &e->refused, now_ns, rf);
}

/* GCRA: an arrival conforms when the TAT is at most (burst - 1)
 * intervals ahead of now; it then moves the TAT one interval on from
 * max(TAT, now). Same verdicts as a bucket of `burst` tokens refilled
 * one per interval. Refused, *wait is how long until one conforms. */
static bool
px_sl_take_in(_Atomic uint64_t *tatp, uint64_t interval, uint32_t burst,
    uint64_t now, uint64_t *wait)
{
	uint64_t tat = atomic_load_explicit(tatp, memory_order_relaxed),
	    slack = (uint64_t)(burst - 1) * interval, next;

	do {
		if (tat > now + slack) {
			*wait = tat - slack - now;
			return false;
		}
		next = (tat > now ? tat : now) + interval;
	} while (!atomic_compare_exchange_weak_explicit(tatp, &tat, next,
	    memory_order_relaxed, memory_order_relaxed));
	return true;
}

static bool
px_sl_take(struct px_sl_ent *e, const struct px_sl_rule *r, uint64_t now,
    uint64_t *wait)
{
	return px_sl_take_in(&e->tat, r->interval_ns, r->burst, now, wait);
}

enum px_sl_verdict
px_sl_admit(uint64_t key, const struct px_sl_rule *r, uint64_t now_ns,
    struct px_sl_ref *ref, struct px_sl_refusal *rf)
{
	struct px_sl_ent *t = atomic_load_explicit(&px_sl_tab,
	    memory_order_acquire), *e = NULL;
	uint64_t st, wait = 0;
	uint32_t idx = 0;
	int tries;

	ref->idx = UINT32_MAX;
	ref->gen = 0;
	rf->log = false;
	rf->count = 0;
	rf->wait_ns = 0;
	if (t == NULL)
		return PX_SL_UNTRACKED;
	for (tries = 0; tries < 4 && e == NULL; tries++)
		if ((e = px_sl_find_pin(t, key, &idx)) == NULL &&
		    px_sl_claim(t, key) == -1)
			return PX_SL_UNTRACKED;
	if (e == NULL)
		return PX_SL_UNTRACKED;
	if (r->sessions != 0) {
		st = atomic_load_explicit(&e->state, memory_order_acquire);
		if (PX_SL_SESSIONS(st) >= r->sessions) {
			px_sl_refused(e, now_ns, rf);
			px_sl_unpin(e);
			return PX_SL_SESSIONS;
		}
	}
	if (r->interval_ns != 0 && !px_sl_take(e, r, now_ns, &wait)) {
		px_sl_refused(e, now_ns, rf);
		rf->wait_ns = wait;
		px_sl_unpin(e);
		return PX_SL_CONNECTIONS;
	}
	if (r->sessions == 0) {
		px_sl_unpin(e);
		return PX_SL_OK;
	}
	/* The pin becomes a session, if the limit still allows it. */
	st = atomic_load_explicit(&e->state, memory_order_acquire);
	for (tries = 0; tries < PX_SL_TRIES; tries++) {
		if (PX_SL_SESSIONS(st) >= r->sessions ||
		    PX_SL_SESSIONS(st) == 0xffffffu) {
			/* Another worker took the last one meanwhile: give
			 * the connection's interval back. */
			if (r->interval_ns != 0)
				atomic_fetch_sub_explicit(&e->tat,
				    r->interval_ns, memory_order_relaxed);
			px_sl_refused(e, now_ns, rf);
			px_sl_unpin(e);
			return PX_SL_SESSIONS;
		}
		if (atomic_compare_exchange_weak_explicit(&e->state, &st,
		    st + PX_SL_SESS - PX_SL_PIN, memory_order_acq_rel,
		    memory_order_acquire)) {
			ref->idx = idx;
			ref->gen = PX_SL_GEN(st);
			return PX_SL_OK;
		}
	}
	px_sl_unpin(e);
	return PX_SL_UNTRACKED;
}

/* One token of the bucket (interval, burst) kept in the rtat of key's
 * entry, the entry made if the source has none yet (a request of a
 * session admitted untracked, or after the entry aged out). true when it
 * conforms or cannot be tracked. */
static bool
px_sl_bucket(uint64_t key, uint64_t interval, uint32_t burst, uint64_t now_ns,
    uint64_t *wait_ns, struct px_sl_refusal *rf)
{
	struct px_sl_ent *t = atomic_load_explicit(&px_sl_tab,
	    memory_order_acquire), *e = NULL;
	uint32_t idx;
	int tries;
	bool ok;

	*wait_ns = 0;
	rf->log = false;
	rf->count = 0;
	rf->wait_ns = 0;
	if (t == NULL || interval == 0)
		return true;
	for (tries = 0; tries < 4 && e == NULL; tries++)
		if ((e = px_sl_find_pin(t, key, &idx)) == NULL &&
		    px_sl_claim(t, key) == -1)
			return true;	/* untracked */
	if (e == NULL)
		return true;
	ok = px_sl_take_in(&e->rtat, interval, burst, now_ns, wait_ns);
	if (!ok)
		px_sl_refused_in(&e->rlogged_s, &e->rrefused, now_ns, rf);
	px_sl_unpin(e);
	return ok;
}

bool
px_sl_request(uint64_t key, const struct px_sl_rule *r, uint64_t now_ns,
    uint64_t *wait_ns, struct px_sl_refusal *rf)
{
	return px_sl_bucket(key, r->req_interval_ns, r->req_burst, now_ns,
	    wait_ns, rf);
}

bool
px_sl_transfer(uint64_t key, const struct px_sl_rule *r, uint64_t now_ns,
    uint64_t *wait_ns, struct px_sl_refusal *rf)
{
	uint64_t tkey;

	/* The source's transfers have an entry of their own, keyed apart:
	 * an entry is a cache line, full with the other two buckets. */
	tkey = px_sl_mix(key ^ 0x7472616e73666572ULL);	/* "transfer" */
	return px_sl_bucket(tkey != 0 ? tkey : 1, r->xfer_interval_ns,
	    r->xfer_burst, now_ns, wait_ns, rf);
}

void
px_sl_release(struct px_sl_ref *ref)
{
	struct px_sl_ent *t = atomic_load_explicit(&px_sl_tab,
	    memory_order_acquire), *e;
	uint64_t st;

	if (t == NULL || ref->idx == UINT32_MAX)
		return;
	e = &t[ref->idx];
	ref->idx = UINT32_MAX;
	st = atomic_load_explicit(&e->state, memory_order_acquire);
	/* An entry with a session is never reused: the generation is the
	 * one the session took; checked all the same. */
	while (PX_SL_GEN(st) == ref->gen && PX_SL_SESSIONS(st) != 0 &&
	    !atomic_compare_exchange_weak_explicit(&e->state, &st,
	    st - PX_SL_SESS, memory_order_acq_rel, memory_order_acquire))
		;
}

uint32_t
px_sl_sessions(uint64_t key)
{
	struct px_sl_ent *t = atomic_load_explicit(&px_sl_tab,
	    memory_order_acquire);
	uint32_t i, j;

	for (i = 0; t != NULL && i < PX_SL_WAYS; i++) {
		j = (uint32_t)(key + i) & (PX_SL_ENTRIES - 1);
		if (atomic_load(&t[j].key) == key)
			return (uint32_t)PX_SL_SESSIONS(atomic_load(&t[j].state));
	}
	return 0;
}

uint32_t
px_sl_used(void)
{
	return atomic_load_explicit(&px_sl_nused, memory_order_relaxed);
}
