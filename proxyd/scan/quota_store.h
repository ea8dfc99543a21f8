/* The cluster's quota store: with cluster/@store, the per-partner daily
 * quotas (quota.h) are decided in one store that every node of a cluster
 * shares, a Redis server (Debian's redis-server), so that the partner's
 * transfers of the day never pass quota-transfers, whichever nodes they go
 * through, and a transfer starts only while the cluster's bytes of the day
 * are under quota-bytes (deploy/README.md, "Cluster-wide state").
 *
 * A transfer about to start asks the store once (px_qstore_begin, or
 * px_qstore_decide, the wait every analyser shares): one Lua script,
 * atomic in the store, refuses it when the day's bytes are used or counts
 * it as one of the day's transfers, taking it back at once when that went
 * past the limit (a reservation and its refund in one step). A transfer
 * counted but not run after all is refunded (px_qstore_refund).
 *
 * Bytes are charged before they move, in leases: with a byte quota the
 * start also charges the transfer's first lease (px_qstore_lease_size of
 * the quota, or what is left of it), and a transfer that used its lease
 * asks for the next (px_qstore_lease) before it moves more; the store
 * grants only what the day has left, so what the cluster charges never
 * passes quota-bytes, and what a transfer was charged and did not move
 * goes back when it ends (px_qstore_give_back). A transfer that started
 * without a lease (the store could not answer, on-store-error="local")
 * adds its bytes at its end instead (px_qstore_add_bytes); bytes the store
 * cannot be told then (still down, or a connect failed within the last
 * second) are kept by the worker, per partner and day, and added to that
 * day's count once the store answers again (tried every second).
 *
 * Each worker has its own connection on its own event loop (hiredis's
 * asynchronous API on libevent): a request never blocks the loop, the
 * session that asked waits for its answer (at most cluster/@store-timeout)
 * and every other session goes on. A store that cannot answer (refused,
 * down, timed out, a bad reply) answers PX_QSTORE_ERROR: the caller
 * applies cluster/@on-store-error (px_qstore_refuses). Requests, refusals
 * and errors are counted (px_qstore_metrics), and so are bytes kept. */
#ifndef PX_QUOTA_STORE_H
#define PX_QUOTA_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "quota.h"

struct event_base;
struct evbuffer;

/* At start, before the workers: the store's address (NULL: none, the
 * quotas stay per node), how long a request may take, and whether a
 * transfer is refused when the store cannot answer. */
int	px_qstore_configure(const struct sockaddr *sa, socklen_t len,
	    uint64_t timeout_ms, bool refuse);
bool	px_qstore_enabled(void);
bool	px_qstore_refuses(void);
/* "HOST:PORT" of the store, for log lines. */
const char *px_qstore_name(void);

enum px_qstore_result {
	PX_QSTORE_OK = 0,	/* counted: the transfer may start */
	PX_QSTORE_TRANSFERS,	/* the day's transfers are used */
	PX_QSTORE_BYTES,	/* the day's bytes are used */
	PX_QSTORE_ERROR,	/* no answer: why says why */
};

struct px_qstore_answer {
	enum px_qstore_result	 result;
	uint64_t		 transfers;	/* the cluster's, today */
	uint64_t		 bytes;		/* charged, this lease included */
	uint64_t		 lease;		/* PX_QSTORE_OK: bytes granted */
	const char		*why;		/* PX_QSTORE_ERROR: static text */
	uint64_t		 day;		/* the UTC day it counts in */
};

struct px_qstore_req;
typedef void	(*px_qstore_cb)(void *arg, const struct px_qstore_answer *a);

/* Asks the store whether partner of service may start a transfer under
 * limits l, with a first lease of up to `lease` bytes under a byte quota
 * (0: none); cb(arg, answer) runs later on base's loop, exactly once
 * unless cancelled. NULL when the request could not even be sent (*a
 * then holds the PX_QSTORE_ERROR answer, counted): the caller goes on at
 * once. */
struct px_qstore_req *px_qstore_begin(struct event_base *base,
	    const char *service, const char *partner,
	    const struct px_quota_limit *l, uint64_t lease, px_qstore_cb cb,
	    void *arg, struct px_qstore_answer *a);
/* A running transfer's next lease of up to want bytes under quota_bytes,
 * charged to day (its start's answer's: a transfer that runs past
 * midnight charges the day it was counted in, and gives back to it):
 * PX_QSTORE_OK with a->lease > 0, PX_QSTORE_BYTES once the day's bytes
 * are all charged; as px_qstore_begin otherwise. */
struct px_qstore_req *px_qstore_lease(struct event_base *base,
	    const char *service, const char *partner, uint64_t day,
	    uint64_t quota_bytes, uint64_t want, px_qstore_cb cb, void *arg,
	    struct px_qstore_answer *a);
/* The lease a transfer asks for at a time: a 32nd of the quota, 64 KiB
 * to 4 MiB (a store round trip per lease; the smaller, the less a
 * transfer holds that others could use). */
#define PX_QSTORE_LEASE_PARTS	32
#define PX_QSTORE_LEASE_MIN	(64 * 1024)
#define PX_QSTORE_LEASE_MAX	(4 * 1024 * 1024)
uint64_t px_qstore_lease_size(uint64_t quota_bytes);
/* Bytes a transfer was charged (leased) and did not move: back to the
 * day they were charged to (the answer's day), never to a later one; a
 * key the store no longer has is left alone (not made again, without
 * its expiry). */
void	px_qstore_give_back(struct event_base *base, const char *service,
	    const char *partner, uint64_t day, uint64_t n);
/* The asker is gone: cb will not run; a transfer or a lease the store
 * grants it meanwhile is given back. */
void	px_qstore_cancel(struct px_qstore_req *r);

/* The analysers' wait for the store's decision at a transfer's start,
 * in their state: resume(arg) runs on the answer, which the next call of
 * px_qstore_decide (the transfer judged again) then uses. */
struct px_qstore_wait {
	struct px_qstore_req	*req;		/* the question under way */
	struct px_qstore_answer	 ans;		/* the last answer */
	bool			 answered;	/* ans is for the next call */
	void			(*resume)(void *arg);
	void			*arg;
};
struct px_quota;
/* The cluster's decision on a transfer of partner under limits l (with
 * a first lease of `lease` bytes): PX_QUOTA_OK (w->ans.lease charged), a
 * refusal (*used, *limit), or -1 while the store is asked (w->resume
 * runs then: call again). A store that cannot answer (w->ans.why says
 * why, for the caller's log line): with on-store-error="refuse"
 * *store_down and PX_QUOTA_TRANSFERS, else q's own count decides. The
 * answer also raises q's count of the day's bytes to the cluster's. */
int	px_qstore_decide(struct px_qstore_wait *w, struct event_base *base,
	    const char *service, const char *partner, struct px_quota *q,
	    const struct px_quota_limit *l, uint64_t lease, uint64_t *used,
	    uint64_t *limit, bool *store_down);
/* The asker is gone: its question forgotten (px_qstore_cancel). */
void	px_qstore_wait_forget(struct px_qstore_wait *w);
/* A transfer the store counted (in day) that did not start after all. */
void	px_qstore_refund(struct event_base *base, const char *service,
	    const char *partner, uint64_t day);
/* The bytes a transfer moved, added to the cluster's count of day (the
 * day its start was counted in): now, or, when the store cannot be told
 * now, kept by this worker (with the other bytes of its key, up to
 * 4096 keys a worker: more are dropped, logged) and sent every
 * second until it takes them. Logged when kept and when all delivered. */
void	px_qstore_add_bytes(struct event_base *base, const char *service,
	    const char *partner, uint64_t day, uint64_t n);
/* The worker's connection goes (from its thread, before its loop is
 * freed). */
void	px_qstore_thread_exit(void);

/* proxyd_quota_store_requests_total{result="ok"|"refused"|"error"|
 * "timeout"}, proxyd_quota_store_pending_bytes (kept now) and
 * proxyd_quota_store_pending_bytes_total{event="kept"|"delivered"|
 * "dropped"} (with cluster/@store only). */
void	px_qstore_metrics(struct evbuffer *b);

#endif
