/* Per-partner daily quotas: bytes and transfers per UTC day for one
 * partner (an FTP user name, an R66 host id) of one service, set by the
 * quota-bytes= and quota-transfers= of the <user> (ftp) or <host> (r66)
 * rule that accepts it.
 *
 * The counters live in one process-wide table keyed by service name and
 * partner id, outside any configuration: a reload builds new policies
 * (new limits) but finds the same entries, so a partner's usage of the
 * day survives it, a changed limit included, and so does a partner whose
 * rule went and came back. Entries are made on a partner's first limited
 * transfer and never freed (at most PX_QUOTA_MAX of them). Every worker
 * shares them: lookups walk lock-free lists (entries are only ever
 * prepended with a compare-and-swap), and counting is one atomic add. */
#ifndef PX_QUOTA_H
#define PX_QUOTA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct _xmlNode;
struct px_cfgerr;
struct evbuffer;

#define PX_QUOTA_MAX	65536	/* partners of all services together */

/* A rule's limits, per UTC day; 0: none. */
struct px_quota_limit {
	uint64_t	bytes;
	uint64_t	transfers;
};

/* quota-bytes= (a size above 0) and quota-transfers= (1 and up) of n into
 * *l (absent: 0). 0, or -1 after reporting file:line. */
int	px_attr_quota(struct px_cfgerr *e, const struct _xmlNode *n,
	    struct px_quota_limit *l);
bool	px_quota_limited(const struct px_quota_limit *l);

struct px_quota;

/* The entry of partner in service, made if new. NULL when the table is
 * full (PX_QUOTA_MAX) or out of memory: the caller refuses, and
 * px_quota_refuse_full() counts it. */
struct px_quota *px_quota_get(const char *service, const char *partner);

enum px_quota_kind {
	PX_QUOTA_OK = 0,
	PX_QUOTA_TRANSFERS,	/* the day's transfers are used */
	PX_QUOTA_BYTES,		/* the day's bytes are used */
};

/* A transfer about to start under limits l: the day rolled over first if
 * it changed; refused when the bytes are used up or the transfers would
 * go past their limit (counted as a refusal, *used and *limit say of
 * what), else counted as one of the day's transfers. */
enum px_quota_kind px_quota_begin(struct px_quota *q,
	    const struct px_quota_limit *l, uint64_t *used, uint64_t *limit);
/* The cluster's store (quota_store.h) decided instead: a transfer it
 * counted is counted here too, the day's bytes raised to the cluster's
 * (bytes) when those are more, so that the data channel's meter cuts at
 * the cluster's count as this node last heard it. */
void	px_quota_admit(struct px_quota *q, uint64_t bytes);
/* ... and one it refused (a refusal of kind k). */
void	px_quota_refused(struct px_quota *q, enum px_quota_kind k);
/* The day's bytes, for a counter that charges them itself (a data
 * channel's meter, px_channel_meter: before they pass when spliced). */
_Atomic uint64_t *px_quota_bytes(struct px_quota *q);
/* n more bytes unless they take the day's bytes over limit (0: none):
 * false then, nothing added, *used: the bytes before. */
bool	px_quota_take(struct px_quota *q, uint64_t limit, uint64_t n,
	    uint64_t *used);
/* A transfer charged `charged` bytes ahead (px_quota_take, or raised by
 * px_quota_admit to a count with its lease in it) moved `moved`: the
 * day's bytes corrected to what it moved (never below 0). */
void	px_quota_settle(struct px_quota *q, uint64_t charged, uint64_t moved);
/* A transfer cut (or a block refused) for crossing the byte limit. */
void	px_quota_cut(struct px_quota *q);
/* The day's counts now (after a rollover check). */
void	px_quota_usage(struct px_quota *q, uint64_t *bytes,
	    uint64_t *transfers);
/* A refusal because the table is full. */
void	px_quota_refuse_full(void);

/* The day's usage per partner (proxyd_quota_used_bytes{service,partner},
 * proxyd_quota_used_transfers), proxyd_quota_refusals_total{service,kind}
 * (kind: transfers, bytes, cut) and proxyd_quota_table_full_total. */
void	px_quota_metrics(struct evbuffer *b);

/* GET /api/quotas: {"day":DAYS_SINCE_EPOCH,"quotas":[{"service",
 * "partner","bytes","transfers" (today), "refused_transfers",
 * "refused_bytes","cuts" (since start)}, ...]}. */
void	px_quota_json(struct evbuffer *b);

/* quotas/@state-file: today's counts written to path (a new file
 * renamed over it), or read from it (another day's lines skipped; a
 * missing file is none; *n: entries read). 0, or -1 with errno (EINVAL:
 * not a state file, or a bad line: those before it are kept). */
int	px_quota_save(const char *path);
int	px_quota_load(const char *path, size_t *n);

/* The UTC day now: days since the epoch. The clock is time(NULL), or,
 * when PROXYD_QUOTA_CLOCK names a file at start, the Unix time written
 * in that file (read at each look: for tests of the day's rollover). */
uint64_t px_quota_day(void);

#endif
