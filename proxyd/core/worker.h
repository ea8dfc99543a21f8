/* One worker = one thread with its own event_base, its own SO_REUSEPORT
 * listener per service, its sessions, pools and counters (one writer: the
 * worker). What crosses threads is atomic and named here: the live-session
 * count, each worker's load (read by the others, which may hand it an
 * accepted connection through its lock-free hand-off stack), and what the
 * main and admin threads ask of it (a reload's config, drain or stop, a
 * reset of its sessions, a snapshot for the listing, and the auth threads'
 * answers, woken by its eventfd;
 * accepts held while the admin lacks descriptors).
 * Configs are shared read-only; the quota table (quota.h) is process-wide. */
#ifndef PX_WORKER_H
#define PX_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "analyser.h"
#include "bucket.h"
#include "config.h"
#include "metrics.h"
#include "splice.h"
#include "tls.h"
#include "upstream.h"

struct event_base;
struct event;
struct evconnlistener;
struct px_session;
struct px_log_ring;
struct px_conntrack;

/* Single writer (the worker); the admin thread reads. A relaxed load+store
 * compiles to a plain add: no lock prefix on the hot path. Daemon-wide
 * counters of the worker; per-service ones are in metrics.h. */
#define PX_COUNT_ADD(w, field, n) atomic_store_explicit(&(w)->counters.field, \
	atomic_load_explicit(&(w)->counters.field, memory_order_relaxed) + (n), \
	memory_order_relaxed)
#define PX_COUNT_GET(w, field) \
	atomic_load_explicit(&(w)->counters.field, memory_order_relaxed)
/* A hand-over counter of w (struct px_worker's ho_*): one writer. */
#define PX_HO_COUNT(w, field) atomic_store_explicit(&(w)->field, \
	atomic_load_explicit(&(w)->field, memory_order_relaxed) + 1, \
	memory_order_relaxed)
/* Bytes moved in one direction (enum px_dir), into the service's totals. */
#define PX_COUNT_BYTES(s, dir, n) PX_SC_ADD((s)->m, bytes[dir], n)

struct px_counters {
	/* Connections accepted here and handed to a less loaded worker. */
	atomic_uint_fast64_t	handed_off;
	/* How late the worker's tick ran: its loop was busy that long. */
	struct px_hist		loop_lag;
};

struct px_listener {
	struct evconnlistener	*lev;
	struct px_worker	*w;
	const struct px_service	*svc;	/* in w->cfg */
	struct px_svc_counters	*m;	/* svc's on w: never freed */
	bool			 paused;	/* out of descriptors */
};

enum px_worker_cmd {
	PX_CMD_NONE = 0,
	PX_CMD_DRAIN,		/* stop accepting, exit when idle */
	PX_CMD_STOP,		/* close every session now, exit */
	/* Drain, and pass each quiet session to the new process of a
	 * rolling upgrade as it becomes quiet (handover.h). */
	PX_CMD_HANDOVER,
	/* The new process of an upgrade died: listen again, keep what is
	 * left (back to PX_CMD_NONE). */
	PX_CMD_RESUME,
};

TAILQ_HEAD(px_session_list, px_session);

struct px_snap_req;	/* snapshot.h */
struct px_ho_session;	/* handover.h */

/* Why the admin asked a worker to reset its sessions (the log's end=). */
enum px_reset_reason {
	PX_RESET_NONE = 0,
	PX_RESET_ADMIN,		/* "admin: sessions reset" */
	PX_RESET_HA,		/* "ha: left master" */
};

/* A connection one worker accepted and hands to a less loaded one. */
struct px_handoff {
	struct px_handoff	*next;
	struct px_config	*cfg;	/* one reference: svc lives in it */
	size_t			 svc_idx;	/* the listener's in cfg */
	int			 fd;
	int			 salen;
	struct sockaddr_storage	 sa;
	/* A session the old process of a rolling upgrade passed over
	 * (handover.h): its server socket and its record; NULL: a new
	 * connection. */
	int			 sfd;
	struct px_ho_session	*ho;
};

struct px_worker {
	unsigned		 id;
	/* Load for the balance: live sessions, written by the worker only
	 * (relaxed, no locked add), and connections handed to it not yet
	 * taken in (added to by others: only on a hand-off). */
	atomic_uint		 nsessions;
	atomic_uint		 incoming;
	/* Lock-free stack of hand-offs, taken whole by the worker; the
	 * PX_HANDOFF_CLOSED sentinel once it no longer takes any. */
	_Atomic(struct px_handoff *) handoffs;
	unsigned		 balance_rr;	/* which peer to compare with */
	pthread_t		 thread;
	struct event_base	*base;
	struct px_config	*cfg;		/* current; one reference */
	_Atomic(struct px_config *) pending;	/* handed over by a reload */
	_Atomic(struct px_snap_req *) snap_req;
	atomic_int		 cmd;
	atomic_int		 reset_req;	/* enum px_reset_reason */
	atomic_bool		 exited;
	int			 wake_fd;	/* eventfd: main -> worker */
	/* Answers of the auth threads for this worker's sessions (auth.h),
	 * taken at each wakeup. */
	struct px_auth_box	 auth_box;
	struct event		*wake_ev;
	struct px_listener	*listeners;
	size_t			 nlisteners;
	struct event		*accept_pause;	/* after EMFILE & co. */
	/* Out of descriptors: one held back to refuse a connection cleanly
	 * (accept, close) instead of leaving it to time out in the backlog;
	 * and the failures since the last warning, said once a second. */
	int			 reserve_fd;
	uint64_t		 accept_fail_n;
	uint64_t		 accept_fail_logged_ms;
	struct px_session_list	 sessions;
	struct px_session_list	 dead;		/* closed, freed by reap_ev */
	struct event		*reap_ev;
	uint64_t		 next_seq;
	struct px_pipe_pool	 pipes;
	struct px_pool		 pool;		/* idle server connections */
	/* Server connections closed once written out (upflush.c). */
	LIST_HEAD(, px_upflush)	 flushing;
	struct px_tls_worker	 tls;		/* sessions to resume, counters */
	/* global-bandwidth: this worker's share, by px_dir. */
	struct px_bucket	 rl_global[2];
	uint64_t		 rl_global_rate;
	struct px_log_ring	*log;
	struct px_conntrack	*ct;		/* NULL: unavailable */
	bool			 ct_tried;
	struct event		*ct_ev;		/* answers readable on ct */
	struct px_session_list	 ct_wait;	/* sessions waiting for one */
	bool			 draining;
	/* A rolling upgrade (handover.h): handing, this worker passes its
	 * quiet sessions on each ho_ev tick; the descriptors it passed are
	 * closed on the next tick, once its event base has taken them out
	 * of epoll (the new process holds the same sockets). */
	bool			 handing;
	struct event		*ho_ev;
	int			*ho_close;
	size_t			 ho_nclose, ho_cap;
	/* Written by the worker only (PX_HO_COUNT), read by the admin
	 * (proxyd_upgrade_sessions_total) and the main thread. */
	atomic_uint_fast64_t	 ho_handed;	/* sessions passed on */
	atomic_uint_fast64_t	 ho_drained;	/* ended here meanwhile */
	atomic_uint_fast64_t	 ho_adopted;	/* new process: taken in */
	struct event		*tick_ev;	/* loop lag */
	uint64_t		 tick_due_us;
	struct event		*credit_ev;	/* each second: delivered bytes */
	/* When it last ran (CLOCK_REALTIME us): the admin's rates divide
	 * by the time between two credits, not between its own samples. */
	atomic_uint_fast64_t	 credit_us;
	struct px_counters	 counters;
};

extern atomic_uint_fast64_t px_live_sessions;

/* A worker hands a new connection to a peer whose load (sessions) is
 * lower than its own by more than this: 2 plus 1/16 of its own
 * (hysteresis, so that churn at an even load does not bounce each new
 * connection between workers). */
#define PX_BALANCE_MARGIN(mine)	(2u + (mine) / 16u)

/* A session joins or leaves w->sessions (the worker's own thread). */
static inline void
px_worker_load_add(struct px_worker *w, int d)
{
	atomic_store_explicit(&w->nsessions, atomic_load_explicit(
	    &w->nsessions, memory_order_relaxed) + (unsigned)d,
	    memory_order_relaxed);
}

/* Opens every listener for every worker (errors reported on stderr before
 * any thread starts), then starts the threads. probe: first check that no
 * one else holds the addresses (not when taking over from the process
 * that does, handover.h). */
int	px_workers_start(struct px_config *cfg, bool probe);
/* The new process of a rolling upgrade: the least loaded worker takes
 * the session ho describes (cfd, sfd and ho are its, and cfg's
 * reference). false when no worker takes it (nothing taken). */
bool	px_workers_adopt(struct px_config *cfg, size_t svc_idx, int cfd,
	    int sfd, struct px_ho_session *ho);
/* Checks that every listen address of cfg that old (NULL at start) does
 * not already hold can be bound by us alone; reports each failure as
 * file:line to errout (NULL: the log). Returns the number of failures. */
unsigned px_workers_probe(const struct px_config *old,
	    const struct px_config *cfg, FILE *errout);
/* Hands a new config to every worker; they switch at their next loop. */
void	px_workers_reload(struct px_config *cfg);
void	px_workers_command(enum px_worker_cmd cmd);
/* Workers whose listeners are paused for want of descriptors keep them
 * paused for ms more, so that what frees up goes to the admin endpoint
 * (they still refuse waiting clients with their reserve descriptor). */
void	px_workers_hold_accepts(uint64_t ms);
bool	px_workers_all_exited(void);
/* The worker's conntrack handle, opened (with its answer event) at the
 * first call; NULL when conntrack is unavailable. */
struct px_conntrack *px_worker_conntrack(struct px_worker *w);
/* Asks every live worker to end all its sessions now, with resets
 * (by=shutdown, end= the reason's text); returns how many were asked.
 * The workers do it at their next loop pass, asynchronously. */
unsigned px_workers_reset_sessions(enum px_reset_reason why);
const char *px_reset_reason_text(enum px_reset_reason why);
void	px_workers_join(void);
unsigned px_workers_count(void);
struct px_worker *px_worker_get(unsigned i);

#endif
