/* The cluster's quota store: with cluster/@store, the per-partner daily
 * quotas (quota.h) are decided in one store that every node of a cluster
 * shares, a Redis server (Debian's redis-server), so that the partner's
 * transfers of the day never pass quota-transfers, whichever nodes they go
 * through, and a transfer starts only while the cluster's bytes of the day
 * are under quota-bytes (deploy/README.md, "Cluster-wide state").
 *
 * A transfer about to start asks the store once (px_qstore_begin): one
 * Lua script, atomic in the store, refuses it when the day's bytes are
 * used or counts it as one of the day's transfers, taking it back at once
 * when that went past the limit (a reservation and its refund in one
 * step). A transfer counted but not run after all is refunded
 * (px_qstore_refund); the bytes a transfer moved are added when it ends
 * (px_qstore_add_bytes).
 *
 * Each worker has its own connection on its own event loop (hiredis's
 * asynchronous API on libevent): a request never blocks the loop, the
 * session that asked waits for its answer (at most cluster/@store-timeout)
 * and every other session goes on. A store that cannot answer (refused,
 * down, timed out, a bad reply) answers PX_QSTORE_ERROR: the caller
 * applies cluster/@on-store-error (px_qstore_refuses). Requests, refusals
 * and errors are counted (px_qstore_metrics). */
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
	uint64_t		 bytes;
	const char		*why;		/* PX_QSTORE_ERROR: static text */
};

struct px_qstore_req;
typedef void	(*px_qstore_cb)(void *arg, const struct px_qstore_answer *a);

/* Asks the store whether partner of service may start a transfer under
 * limits l; cb(arg, answer) runs later on base's loop, exactly once
 * unless cancelled. NULL when the request could not even be sent (*a
 * then holds the PX_QSTORE_ERROR answer, counted): the caller goes on at
 * once. */
struct px_qstore_req *px_qstore_begin(struct event_base *base,
	    const char *service, const char *partner,
	    const struct px_quota_limit *l, px_qstore_cb cb, void *arg,
	    struct px_qstore_answer *a);
/* The asker is gone: cb will not run; a transfer the store counts for it
 * meanwhile is refunded. */
void	px_qstore_cancel(struct px_qstore_req *r);
/* A transfer the store counted that did not start after all. */
void	px_qstore_refund(struct event_base *base, const char *service,
	    const char *partner);
/* The bytes a transfer moved, added to the cluster's day. */
void	px_qstore_add_bytes(struct event_base *base, const char *service,
	    const char *partner, uint64_t n);
/* The worker's connection goes (from its thread, before its loop is
 * freed). */
void	px_qstore_thread_exit(void);

/* proxyd_quota_store_requests_total{result="ok"|"refused"|"error"|
 * "timeout"} (with cluster/@store only). */
void	px_qstore_metrics(struct evbuffer *b);

#endif
