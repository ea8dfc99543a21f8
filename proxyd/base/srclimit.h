/* Per-source limits (<source-limits>): one process-wide table of sources,
 * shared by every worker, lock-free, fixed in size, kept across reloads.
 *
 * Why one shared table rather than one per worker with the limits split:
 * a worker hands new connections to a less loaded peer (worker.c,
 * "balance"), and SO_REUSEPORT spreads one source's connections over all
 * of them, so a per-worker share (sessions/N) would refuse a source whose
 * connections happen to land on one worker while the others sit idle, and
 * would round a small limit (sessions="1" over 2 workers) to nothing. With
 * one table every worker counts against the same numbers and the limits
 * hold exactly; the cost is a compare-and-swap or two per new connection,
 * never a lock (no worker ever waits for another).
 *
 * An entry is a source (a 64-bit keyed hash of the service name, how the
 * source is keyed and the address, prefix or zone), its live sessions,
 * its connection rate and its HTTP request rate, each a GCRA (the token
 * bucket's equivalent in one word: the theoretical arrival time, TAT),
 * each with its own line a second (a source's FTP transfer rate takes a
 * second entry, under a key derived from the first, in its request
 * bucket). The table has PX_SL_ENTRIES
 * entries of 64 bytes; a source lives in one of PX_SL_WAYS entries after
 * its hash; when they are all taken the least recently used one with no
 * live session is reused (its bucket, if not full again yet, is lost: the
 * source may burst once more). A source that finds only entries with
 * sessions is not tracked (admitted, counted as untracked).
 *
 * The table is outside every configuration: a reload keeps the counts of
 * the services whose name stays (the name is part of the key). It knows
 * no configuration; the caller makes the key. */
#ifndef PX_SRCLIMIT_H
#define PX_SRCLIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define PX_SL_ENTRIES	65536u	/* a power of two: 4 MiB */
#define PX_SL_WAYS	16u
#define PX_SL_ENTRY_BYTES 64u	/* a cache line */

/* A service's <source-limits> as loaded. */
enum px_sl_per {
	PX_SL_ADDRESS = 0,
	PX_SL_PREFIX,
	PX_SL_ZONE,
	PX_SL_USER,	/* the proven user (<auth>): judged at its first
			 * proven request */
	PX_SL_JA4,	/* the client's JA4: judged once its ClientHello is read */
};

struct px_sl_rule {
	bool		 on;		/* the service has <source-limits> */
	enum px_sl_per	 per;
	uint8_t		 prefix4, prefix6;
	uint32_t	 sessions;	/* 0: no limit */
	uint64_t	 interval_ns;	/* between connections; 0: no limit */
	uint32_t	 burst;		/* connections at once, >= 1 */
	uint64_t	 req_interval_ns; /* between requests; 0: no limit */
	uint32_t	 req_burst;	/* requests at once, >= 1 */
	uint64_t	 xfer_interval_ns; /* between transfers; 0: no limit */
	uint32_t	 xfer_burst;	/* transfers at once, >= 1 */
	uint64_t	 svc_hash;	/* of the service's name */
	long		 line;		/* of <source-limits> */
};

enum px_sl_verdict {
	PX_SL_OK = 0,
	PX_SL_SESSIONS,		/* sessions= reached */
	PX_SL_CONNECTIONS,	/* connections= rate over its burst */
	PX_SL_UNTRACKED,	/* admitted: no room in the table */
};

/* What an admitted session holds, to give its slot back. */
struct px_sl_ref {
	uint32_t	 idx;		/* UINT32_MAX: none */
	uint32_t	 gen;
};

/* A refusal: whether to log it now (at most once a second per source),
 * how many refusals of the source that line stands for, and (refused by
 * connections=) the time until the source's bucket has a token again. */
struct px_sl_refusal {
	bool		 log;
	uint64_t	 count;
	uint64_t	 wait_ns;	/* 0: not known (sessions=) */
};

/* Main thread, before any worker uses it; idempotent. 0 or -1. */
int	px_sl_init(void);
bool	px_sl_ready(void);
/* FNV-1a of a string, for svc_hash and zone names. */
uint64_t px_sl_hash_str(const char *s);
/* The key of a source: the service's hash, the kind of key and the
 * address bytes (masked by the caller) or a zone's hash. */
uint64_t px_sl_key(uint64_t svc_hash, unsigned kind, const uint8_t *bytes,
	    unsigned len);
/* Judges a new connection of source key under r at now_ns (monotonic):
 * PX_SL_OK or PX_SL_UNTRACKED (admitted; *ref set, possibly to none), or
 * the limit that refused it (*rf says whether to log). */
enum px_sl_verdict px_sl_admit(uint64_t key, const struct px_sl_rule *r,
	    uint64_t now_ns, struct px_sl_ref *ref, struct px_sl_refusal *rf);
/* Judges one request (HTTP) of source key under r at now_ns: true when
 * it conforms (a token of the source's request bucket taken) or when r
 * has no requests= or the source cannot be tracked; false when over the
 * limit, *wait_ns then the time until a token comes (> 0) and *rf says
 * whether to log. */
bool	px_sl_request(uint64_t key, const struct px_sl_rule *r,
	    uint64_t now_ns, uint64_t *wait_ns, struct px_sl_refusal *rf);
/* The same for one file transfer (FTP) under r's transfers=: a bucket
 * of its own per source (an entry of the table keyed apart from the
 * source's sessions, connections and requests). */
bool	px_sl_transfer(uint64_t key, const struct px_sl_rule *r,
	    uint64_t now_ns, uint64_t *wait_ns, struct px_sl_refusal *rf);
/* An admitted session ended. */
void	px_sl_release(struct px_sl_ref *ref);
/* Live sessions of source key (tests, the admin); 0 if unknown. */
uint32_t px_sl_sessions(uint64_t key);
/* Entries that hold a source (of PX_SL_ENTRIES; the admin). */
uint32_t px_sl_used(void);
/* Monotonic nanoseconds. */
uint64_t px_sl_now_ns(void);

#endif
