/* A token bucket in bytes, for session- and global-bandwidth. Not
 * libevent's: its rate limits are a feature of bufferevents, which the
 * conn layer does not use (see conn.h). One writer (its worker); the
 * clock is the caller's (px_now_ms). */
#ifndef PX_BUCKET_H
#define PX_BUCKET_H

#include <stdint.h>
#include <time.h>

/* Monotonic (a clock step must not fire or stall timers) and coarse (a
 * vDSO read of the tick, cheap enough for every relay pass). */
static inline uint64_t
px_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct px_bucket {
	uint64_t	rate;		/* bytes per second; 0: unlimited */
	uint64_t	burst;		/* at most this many at once */
	uint64_t	tokens;
	uint64_t	last_ms;	/* refilled up to here */
	uint64_t	frac;		/* a partial token, in 1/1000 */
};

/* A tenth of a second's worth at once, as the 100 ms tick before. */
static inline void
px_bucket_init(struct px_bucket *b, uint64_t rate, uint64_t now_ms)
{
	b->rate = rate;
	b->burst = rate / 10 != 0 ? rate / 10 : 1;
	b->tokens = b->burst;
	b->last_ms = now_ms;
	b->frac = 0;
}

/* Bytes that may move now (UINT64_MAX when unlimited). */
static inline uint64_t
px_bucket_avail(struct px_bucket *b, uint64_t now_ms)
{
	uint64_t add;

	if (b->rate == 0)
		return UINT64_MAX;
	if (now_ms > b->last_ms) {
		/* A full bucket after a second idle: no overflow below. */
		uint64_t ms = now_ms - b->last_ms > 1000 ? 1000 :
		    now_ms - b->last_ms;

		add = ms * b->rate + b->frac;
		b->frac = add % 1000;
		add /= 1000;
		b->last_ms = now_ms;
		b->tokens = b->tokens + add > b->burst ? b->burst :
		    b->tokens + add;
	}
	return b->tokens;
}

static inline void
px_bucket_take(struct px_bucket *b, uint64_t n)
{
	if (b->rate != 0)
		b->tokens = n > b->tokens ? 0 : b->tokens - n;
}

/* How long until a useful amount (a quarter of the burst) is back. */
static inline uint64_t
px_bucket_wait_ms(const struct px_bucket *b)
{
	uint64_t ms = b->rate != 0 ? (b->burst / 4 + 1) * 1000 / b->rate : 0;

	return ms < 1 ? 1 : ms > 100 ? 100 : ms;
}

#endif
