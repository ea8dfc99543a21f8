/* Per-service counters and histograms, per worker, summed by the admin
 * thread at scrape time (admin.c prints them in Prometheus text format).
 *
 * Why a slot table keyed by (service name, analyser) rather than counters
 * in struct px_service: a service lives in one config, and a reload frees
 * the old config once its last session ends, while the admin must keep
 * reading a counter that only ever grows. So every (name, analyser) pair
 * the daemon has ever loaded gets a slot number for life, and each worker
 * has one block of counters per slot in chunks that the main thread
 * allocates before it hands a config over and never frees while the daemon
 * runs. Nothing is ever freed or moved under a reader: the worker keeps a
 * pointer to its block in the listener and the session, the admin walks
 * the chunks on the main thread (which is also the only allocator). Each
 * block has one writer, its worker (relaxed load+store, no lock prefix);
 * the admin reads with relaxed loads and no lock. A service renamed or
 * given another analyser is a new slot; one removed stays frozen and is
 * exported only while it still has live sessions. */
#ifndef PX_METRICS_H
#define PX_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "analyser.h"
#include "tls.h"

struct px_config;
struct px_service;
struct px_session;
struct px_listener;

/* Upper bounds in microseconds; one shared set, 0.5 ms to 1 h, +Inf last. */
#define PX_HIST_BOUNDS	18
struct px_hist {
	atomic_uint_fast64_t	bucket[PX_HIST_BOUNDS + 1];	/* not cumulative */
	atomic_uint_fast64_t	sum_us;
};

enum px_denial {
	PX_DENY_ACL = 0,
	PX_DENY_MAX_SESSIONS,
	PX_DENY_DIRECT,
	PX_DENY_SERVER,		/* <servers> refused the destination */
	PX_DENY_NO_SERVICE,	/* no service of a shared port took it */
	PX_DENIALS,
	/* Only by zone pair: an analyser's denied* events. */
	PX_DENY_ANALYSER = PX_DENIALS,
};

enum px_origdst {
	PX_ORIGDST_CONNTRACK = 0,
	PX_ORIGDST_SOCKOPT,
	PX_ORIGDST_FAILED,
	PX_ORIGDSTS,
};

/* The limit of <source-limits> that refused (proxyd_limited_total). */
enum px_limited {
	PX_LIMITED_SESSIONS = 0,
	PX_LIMITED_CONNECTIONS,
	PX_LIMITED_REQUESTS,	/* an HTTP request, answered 429 */
	PX_LIMITED_TRANSFERS,	/* an FTP transfer command, answered 450 */
	PX_LIMITED_KINDS,
};

/* One service's counters on one worker. */
struct px_svc_counters {
	atomic_uint_fast64_t	accepted;
	atomic_uint_fast64_t	active;		/* gauge: +1, -1 */
	atomic_uint_fast64_t	denied[PX_DENIALS];
	atomic_uint_fast64_t	bytes[2];	/* by enum px_dir */
	/* bytes less what proxyd's queues and the kernel still held for the
	 * peer (unacknowledged), credited each second (px_metrics_credit):
	 * what the rates are made of. Counted at write time, a slow peer's
	 * bytes arrive a socket buffer at a time (1.4 MB steps). */
	atomic_uint_fast64_t	delivered[2];
	atomic_uint_fast64_t	splice_sessions;
	atomic_uint_fast64_t	idle_timeouts;
	atomic_uint_fast64_t	upstream_connects;	/* new connects started */
	atomic_uint_fast64_t	connect_failures;
	atomic_uint_fast64_t	upstream_new;	/* driver analysers (http) */
	atomic_uint_fast64_t	upstream_reused;	/* = pool hits */
	atomic_uint_fast64_t	pool_misses;	/* pooling allowed, none idle */
	atomic_uint_fast64_t	pool_stale;	/* parked by this service */
	atomic_uint_fast64_t	origdst[PX_ORIGDSTS];
	atomic_uint_fast64_t	accept_failures;
	atomic_uint_fast64_t	refused_no_fd;
	/* <source-limits>: refused by each limit (enum px_limited), and
	 * connections admitted untracked (no room in the table). */
	atomic_uint_fast64_t	limited[PX_LIMITED_KINDS];
	atomic_uint_fast64_t	limit_untracked;
	atomic_uint_fast64_t	analyser[PX_AN_COUNTERS_MAX];
	struct px_tls_counters	tls;
	struct px_hist		session_duration;
	struct px_hist		connect_duration;
	/* The series the service's analyser declares (struct px_series),
	 * one after the other (px_series_offset); a histogram value is laid
	 * out as a struct px_hist. */
	atomic_uint_fast64_t	series[PX_AN_SERIES_SLOTS];
};
_Static_assert(PX_SERIES_HIST_BOUNDS == PX_HIST_BOUNDS &&
    sizeof(struct px_hist) == PX_SERIES_HIST_SLOTS *
    sizeof(atomic_uint_fast64_t), "a histogram series value is a px_hist");

/* Value v of series i of the block's analyser a, as a histogram. */
struct px_hist *px_series_hist(struct px_svc_counters *m,
	    const struct px_analyser *a, size_t i, unsigned v);

/* One writer per block: a relaxed load+store compiles to a plain add. */
#define PX_SC_ADD(m, field, n) atomic_store_explicit(&(m)->field,	\
	atomic_load_explicit(&(m)->field, memory_order_relaxed) + (n),	\
	memory_order_relaxed)

/* Main thread, before cfg reaches any worker (start and each reload):
 * gives each of its services a slot and every worker its block for it. */
void	px_metrics_register(const struct px_config *cfg, unsigned nworkers);
/* The block of svc (registered) on worker w; never NULL (services past
 * the table's capacity share one block that is not exported). */
struct px_svc_counters *px_metrics_block(unsigned w, const struct px_service *svc);

struct timeval;
/* The session's block (s->m) and its sessions_accepted/active/duration:
 * at accept, when the dispatch of a shared port changed s->svc, and at
 * its end. On its worker. */
void	px_metrics_session_start(struct px_session *s,
	    const struct px_listener *l);
void	px_metrics_session_rebind(struct px_session *s);
void	px_metrics_session_end(struct px_session *s);
/* Credits s->m->delivered with what of s->bytes reached the peers by
 * now (one SIOCOUTQ per direction that moved bytes since the last
 * credit); final: all of it (the session ended). On its worker. */
void	px_metrics_credit(struct px_session *s, bool final);
uint64_t px_metrics_now_us(void);
/* Wall-clock microseconds since start (gettimeofday), 0 if negative. */
uint64_t px_metrics_since_us(const struct timeval *start);
void	px_hist_observe(struct px_hist *h, uint64_t us);
/* A stream analyser's connect to its server is done (ok) or failed:
 * the connect-time histogram (from s->connect_start_us) or the failure
 * counter. */
void	px_session_upstream_connected(struct px_session *s, bool ok);

/* Counts a refusal of s (reason: enum px_denial, PX_DENY_ANALYSER for
 * an analyser's denied* events): its service's denied[] and the count by
 * (service, client zone, server zone, reason), whose zones are those the
 * admission looked up so far ("-": not looked up, or in no zone). */
void	px_metrics_denied(struct px_session *s, unsigned reason, uint64_t n);

/* Denials by zone pair, for the admin thread: worker w's entry k (below
 * PX_ZD_CAP), false when unused. */
#define PX_ZD_CAP	1024
struct px_zone_denial {
	unsigned	 slot;
	unsigned	 reason;
	const char	*client_zone, *server_zone;
	uint64_t	 n;
};
bool	px_metrics_zone_denial(unsigned w, unsigned k, struct px_zone_denial *out);
extern const char *const px_denial_names[PX_DENIALS + 1];

/* For the admin thread. */
unsigned px_metrics_slots(void);
/* Slot i's names; false when it is neither in the current config nor has
 * live sessions (not exported). */
bool	px_metrics_slot(unsigned i, const char **service, const char **analyser,
	    unsigned *analyser_index);
/* Slot i (below px_metrics_slots()) as the last config that had it said;
 * current: in the running config. */
void	px_metrics_slot_info(unsigned i, const char **mode, const char **listen,
	    const char **target, bool *current);
/* Whether a config gave slot i TLS (its TLS series are exported). */
bool	px_metrics_slot_tls(unsigned i);
/* Slot i's block on worker w (NULL: none yet). */
const struct px_svc_counters *px_metrics_get(unsigned w, unsigned i);
extern const uint64_t px_hist_bounds_us[PX_HIST_BOUNDS];

#endif
