/* The cluster's quota store (quota_store.h): a Redis client per worker,
 * hiredis's asynchronous API on the worker's own libevent loop. */
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "log.h"
#include "quota_store.h"

/* A refused connection is not tried again before this: meanwhile
 * requests get PX_QSTORE_ERROR at once rather than a connect each. */
#define PX_QSTORE_RETRY_MS	1000
/* A day's keys outlive it a day, for whoever looks. */
#define PX_QSTORE_TTL		"172800"
#define PX_QSTORE_KEY_MAX	700
/* Keys (a partner's day) whose bytes a worker keeps for the store at
 * most, waiting or on their way (some 100 bytes each): bytes of a key
 * past these are dropped, logged and counted. */
#define PX_QSTORE_PENDING_MAX	4096

static char px_qs_host[NI_MAXHOST];
static int px_qs_port;
static char px_qs_name[NI_MAXHOST + 16];
static bool px_qs_on, px_qs_refuse = true;
static struct timeval px_qs_timeout;

enum { PX_QS_OK, PX_QS_REFUSED, PX_QS_ERROR, PX_QS_TIMEOUT, PX_QS_N };
static _Atomic uint64_t px_qs_count[PX_QS_N];
/* Bytes kept for the store (px_qs_keep): all workers' now, and in total
 * those kept, added to it later, and lost. */
enum { PX_QS_KEPT, PX_QS_DELIVERED, PX_QS_DROPPED, PX_QS_PENDING_N };
static _Atomic uint64_t px_qs_pending_now, px_qs_pending[PX_QS_PENDING_N];

/* The day's hash of a partner: fields t (transfers) and b (bytes charged:
 * moved, or leased to a running transfer). KEYS[1]; ARGV: quota-transfers,
 * quota-bytes (0: none), the lease wanted (0: none). Returns {verdict,
 * transfers, bytes, lease}: 0 counted (and the lease, as far as the quota
 * leaves, charged), 1 transfers used, 2 bytes used. */
static const char px_qs_script[] =
	"local b = tonumber(redis.call('HGET', KEYS[1], 'b') or '0') "
	"local t = tonumber(redis.call('HGET', KEYS[1], 't') or '0') "
	"local q = tonumber(ARGV[2]) "
	"if q > 0 and b >= q then return {2, t, b, 0} end "
	"if tonumber(ARGV[1]) > 0 and t >= tonumber(ARGV[1]) then "
	"return {1, t, b, 0} end "
	"t = redis.call('HINCRBY', KEYS[1], 't', 1) "
	"local g = tonumber(ARGV[3]) "
	"if q > 0 and g > q - b then g = q - b end "
	"if g > 0 then b = redis.call('HINCRBY', KEYS[1], 'b', g) end "
	"redis.call('EXPIRE', KEYS[1], " PX_QSTORE_TTL ") "
	"return {0, t, b, g}";

/* A running transfer's next lease: ARGV: quota-bytes, the lease wanted.
 * {0, transfers, bytes, lease} (lease > 0), or {2, ...} once the day's
 * bytes are all charged. */
static const char px_qs_lease_script[] =
	"local b = tonumber(redis.call('HGET', KEYS[1], 'b') or '0') "
	"local t = tonumber(redis.call('HGET', KEYS[1], 't') or '0') "
	"local q = tonumber(ARGV[1]) "
	"if b >= q then return {2, t, b, 0} end "
	"local g = tonumber(ARGV[2]) "
	"if g > q - b then g = q - b end "
	"b = redis.call('HINCRBY', KEYS[1], 'b', g) "
	"redis.call('EXPIRE', KEYS[1], " PX_QSTORE_TTL ") "
	"return {0, t, b, g}";

/* What a transfer was charged and did not move goes back, ARGV[1] a
 * field (b: bytes, t: a transfer counted that did not start), ARGV[2]
 * how much: never below 0, and a key the store lost meanwhile (or that
 * expired) is not made again, with no expiry, by taking from it. */
static const char px_qs_back_script[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end "
	"local v = redis.call('HINCRBY', KEYS[1], ARGV[1], "
	"-tonumber(ARGV[2])) "
	"if v < 0 then redis.call('HSET', KEYS[1], ARGV[1], 0) end return v";

/* The bytes a transfer moved outside any lease, ARGV[1], added to its
 * day's key, made again if the store lost it (a restart), and then with
 * its expiry; a key that has one keeps it (a day gone by still goes when
 * it would have). */
static const char px_qs_add_script[] =
	"local v = redis.call('HINCRBY', KEYS[1], 'b', tonumber(ARGV[1])) "
	"if redis.call('TTL', KEYS[1]) < 0 then "
	"redis.call('EXPIRE', KEYS[1], " PX_QSTORE_TTL ") end return v";

/* Bytes of one key for the store: waiting in the worker's list, or on
 * their way (the reply's privdata). */
struct px_qs_bytes {
	struct px_qs_bytes	*next;
	uint64_t		 n;
	bool			 kept;	/* counted in px_qs_pending_now */
	char			 key[];
};

struct px_qstore_conn {
	redisAsyncContext	*ac;		/* NULL: none now */
	struct event_base	*base;
	struct timespec		 failed;	/* the last connect that failed */
	bool			 has_failed;
	/* Bytes the store could not be told yet, tried again every
	 * PX_QSTORE_RETRY_MS (retry) until it takes them. */
	struct px_qs_bytes	*waiting;
	unsigned		 nbytes;	/* entries, waiting or sent */
	unsigned		 nsent;		/* kept ones on their way */
	struct event		*retry;
	bool			 exiting;	/* no more tries */
	bool			 told;		/* "kept" logged, not "delivered" */
	bool			 full_told;	/* a drop for the bound logged */
	uint64_t		 delivered;	/* since "kept" was logged */
};

static _Thread_local struct px_qstore_conn px_qs_conn;

struct px_qstore_req {
	px_qstore_cb		 cb;		/* NULL: cancelled */
	void			*arg;
	struct event		*timer;
	struct event_base	*base;
	bool			 done;		/* cb ran, or will not */
	bool			 counts;	/* a transfer (begin), not a lease */
	uint64_t		 day;		/* key's */
	char			 key[PX_QSTORE_KEY_MAX];
};

int
px_qstore_configure(const struct sockaddr *sa, socklen_t len,
    uint64_t timeout_ms, bool refuse)
{
	char port[16];

	px_qs_on = false;
	px_qs_refuse = refuse;
	px_qs_timeout.tv_sec = (time_t)(timeout_ms / 1000);
	px_qs_timeout.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	if (sa == NULL || len == 0)
		return 0;
	if (getnameinfo(sa, len, px_qs_host, sizeof(px_qs_host), port,
	    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return -1;
	px_qs_port = atoi(port);
	snprintf(px_qs_name, sizeof(px_qs_name), sa->sa_family == AF_INET6 ?
	    "[%s]:%d" : "%s:%d", px_qs_host, px_qs_port);
	px_qs_on = true;
	return 0;
}

bool
px_qstore_enabled(void)
{
	return px_qs_on;
}

bool
px_qstore_refuses(void)
{
	return px_qs_refuse;
}

const char *
px_qstore_name(void)
{
	return px_qs_name;
}

/* ---- the connection ---------------------------------------------------- */

static void
px_qs_connected(const redisAsyncContext *ac, int status)
{
	struct px_qstore_conn *c = ac->data;

	if (status == REDIS_OK)
		return;
	/* hiredis frees the context after this; pending requests get NULL. */
	c->ac = NULL;
	c->has_failed = true;
	clock_gettime(CLOCK_MONOTONIC, &c->failed);
}

static void
px_qs_disconnected(const redisAsyncContext *ac, int status)
{
	struct px_qstore_conn *c = ac->data;

	c->ac = NULL;
	if (status != REDIS_OK) {
		c->has_failed = true;
		clock_gettime(CLOCK_MONOTONIC, &c->failed);
	}
}

/* The worker's connection, made if none (connecting goes on in the
 * background: commands queue meanwhile); NULL: none to be had now. */
static redisAsyncContext *
px_qs_get(struct event_base *base)
{
	struct px_qstore_conn *c = &px_qs_conn;
	struct timespec now;
	redisAsyncContext *ac;
	long long ms;

	if (c->ac != NULL)
		return c->ac;
	if (c->has_failed) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (long long)(now.tv_sec - c->failed.tv_sec) * 1000 +
		    (now.tv_nsec - c->failed.tv_nsec) / 1000000;
		if (ms >= 0 && ms < PX_QSTORE_RETRY_MS)
			return NULL;
	}
	ac = redisAsyncConnect(px_qs_host, px_qs_port);
	if (ac == NULL || ac->err != 0) {
		if (ac != NULL)
			redisAsyncFree(ac);
		c->has_failed = true;
		clock_gettime(CLOCK_MONOTONIC, &c->failed);
		return NULL;
	}
	c->base = base;
	ac->data = c;
	if (redisLibeventAttach(ac, base) != REDIS_OK) {
		redisAsyncFree(ac);
		return NULL;
	}
	redisAsyncSetConnectCallback(ac, px_qs_connected);
	redisAsyncSetDisconnectCallback(ac, px_qs_disconnected);
	c->ac = ac;
	return ac;
}

static void	px_qs_drop(struct px_qstore_conn *c, struct px_qs_bytes *b);

void
px_qstore_thread_exit(void)
{
	struct px_qstore_conn *c = &px_qs_conn;
	redisAsyncContext *ac = c->ac;
	struct px_qs_bytes *b;
	uint64_t lost = 0;
	unsigned keys = 0;

	c->exiting = true;
	if (ac != NULL) {
		/* Pending requests' callbacks run now, with no reply: bytes
		 * on their way come back to the list. */
		c->ac = NULL;
		redisAsyncFree(ac);
	}
	while ((b = c->waiting) != NULL) {
		c->waiting = b->next;
		lost += b->n;
		keys++;
		px_qs_drop(c, b);
	}
	if (lost != 0)
		px_log(LOG_WARNING, 0, "quota-store pending bytes=%llu keys=%u "
		    "verdict=dropped (the worker exits before the store at %s "
		    "could be told)", (unsigned long long)lost, keys,
		    px_qs_name);
	if (c->retry != NULL) {
		event_free(c->retry);
		c->retry = NULL;
	}
}

/* ---- requests ----------------------------------------------------------- */

/* The key of partner's counts of day. */
static int
px_qs_key(char *buf, size_t size, const char *service, const char *partner,
    uint64_t day)
{
	int n = snprintf(buf, size, "proxyd:quota:%llu:%s:%s",
	    (unsigned long long)day, service, partner);

	return n < 0 || (size_t)n >= size ? -1 : 0;
}

static void
px_qs_error(struct px_qstore_answer *a, const char *why)
{
	memset(a, 0, sizeof(*a));
	a->result = PX_QSTORE_ERROR;
	a->why = why;
}

/* The scripts' {verdict, transfers, bytes, lease}, or an error. */
static void
px_qs_parse(const redisReply *r, struct px_qstore_answer *a)
{
	size_t i;

	if (r == NULL) {
		px_qs_error(a, "no connection to the store");
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		px_qs_error(a, "the store answered an error");
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) {
		px_qs_error(a, "an unexpected reply from the store");
		return;
	}
	for (i = 0; i < 4; i++)
		if (r->element[i]->type != REDIS_REPLY_INTEGER ||
		    r->element[i]->integer < 0) {
			px_qs_error(a, "an unexpected reply from the store");
			return;
		}
	memset(a, 0, sizeof(*a));
	a->transfers = (uint64_t)r->element[1]->integer;
	a->bytes = (uint64_t)r->element[2]->integer;
	a->lease = (uint64_t)r->element[3]->integer;
	switch (r->element[0]->integer) {
	case 0:
		a->result = PX_QSTORE_OK;
		break;
	case 1:
		a->result = PX_QSTORE_TRANSFERS;
		break;
	case 2:
		a->result = PX_QSTORE_BYTES;
		break;
	default:
		px_qs_error(a, "an unexpected reply from the store");
	}
}

/* n of key's field ("b" or "t") back. */
static void
px_qs_back_key(redisAsyncContext *ac, const char *key, const char *field,
    uint64_t n)
{
	(void)redisAsyncCommand(ac, NULL, NULL, "EVAL %s 1 %s %s %llu",
	    px_qs_back_script, key, field, (unsigned long long)n);
}

/* hiredis's callback: once per command, with NULL when the connection
 * went. The request is freed here, whatever happened before. */
static void
px_qs_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct px_qstore_req *r = privdata;
	struct px_qstore_answer a;

	px_qs_parse(reply, &a);
	a.day = r->day;
	if (r->done) {
		/* Timed out or cancelled: what the store counted goes back. */
		if (a.result == PX_QSTORE_OK && reply != NULL &&
		    ac->c.fd != -1 && !(ac->c.flags & REDIS_DISCONNECTING)) {
			if (r->counts)
				px_qs_back_key(ac, r->key, "t", 1);
			if (a.lease != 0)
				px_qs_back_key(ac, r->key, "b", a.lease);
		}
	} else {
		r->done = true;
		evtimer_del(r->timer);
		atomic_fetch_add(&px_qs_count[a.result == PX_QSTORE_OK ?
		    PX_QS_OK : a.result == PX_QSTORE_ERROR ? PX_QS_ERROR :
		    PX_QS_REFUSED], 1);
		if (r->cb != NULL)
			r->cb(r->arg, &a);
	}
	event_free(r->timer);
	free(r);
}

static void
px_qs_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_qstore_req *r = arg;
	struct px_qstore_answer a;

	(void)fd;
	(void)what;
	if (r->done)
		return;
	r->done = true;
	atomic_fetch_add(&px_qs_count[PX_QS_TIMEOUT], 1);
	px_qs_error(&a, "the store did not answer in time");
	a.day = r->day;
	if (r->cb != NULL)
		r->cb(r->arg, &a);
}

/* Sends script (its ARGV: the n numbers of v) for partner's counts of
 * day; the request, or NULL with *a the error (counted). */
static struct px_qstore_req *
px_qs_send(struct event_base *base, const char *service, const char *partner,
    uint64_t day, const char *script, const uint64_t *v, int n, bool counts,
    px_qstore_cb cb, void *arg, struct px_qstore_answer *a)
{
	struct px_qstore_req *r;
	redisAsyncContext *ac;
	char num[3][24];
	int i, rc;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		px_qs_error(a, "out of memory");
		goto fail;
	}
	if (px_qs_key(r->key, sizeof(r->key), service, partner, day) == -1) {
		px_qs_error(a, "the partner's key is too long");
		goto fail;
	}
	if ((ac = px_qs_get(base)) == NULL) {
		px_qs_error(a, "cannot connect to the store");
		goto fail;
	}
	if ((r->timer = evtimer_new(base, px_qs_timeout_cb, r)) == NULL) {
		px_qs_error(a, "out of memory");
		goto fail;
	}
	r->cb = cb;
	r->arg = arg;
	r->base = base;
	r->counts = counts;
	r->day = day;
	for (i = 0; i < n && i < 3; i++)
		snprintf(num[i], sizeof(num[i]), "%llu", (unsigned long long)v[i]);
	rc = n == 3 ? redisAsyncCommand(ac, px_qs_reply, r,
	    "EVAL %s 1 %s %s %s %s", script, r->key, num[0], num[1], num[2]) :
	    redisAsyncCommand(ac, px_qs_reply, r, "EVAL %s 1 %s %s %s",
	    script, r->key, num[0], num[1]);
	if (rc != REDIS_OK) {
		px_qs_error(a, "cannot send to the store");
		goto fail;
	}
	evtimer_add(r->timer, &px_qs_timeout);
	return r;
fail:
	if (r != NULL && r->timer != NULL)
		event_free(r->timer);
	free(r);
	a->day = day;
	atomic_fetch_add(&px_qs_count[PX_QS_ERROR], 1);
	return NULL;
}

struct px_qstore_req *
px_qstore_begin(struct event_base *base, const char *service,
    const char *partner, const struct px_quota_limit *l, uint64_t lease,
    px_qstore_cb cb, void *arg, struct px_qstore_answer *a)
{
	const uint64_t v[3] = { l->transfers, l->bytes, l->bytes != 0 ?
	    lease : 0 };

	return px_qs_send(base, service, partner, px_quota_day(), px_qs_script,
	    v, 3, true, cb, arg, a);
}

struct px_qstore_req *
px_qstore_lease(struct event_base *base, const char *service,
    const char *partner, uint64_t day, uint64_t quota_bytes, uint64_t want,
    px_qstore_cb cb, void *arg, struct px_qstore_answer *a)
{
	const uint64_t v[2] = { quota_bytes, want };

	return px_qs_send(base, service, partner, day, px_qs_lease_script, v,
	    2, false, cb, arg, a);
}

uint64_t
px_qstore_lease_size(uint64_t quota_bytes)
{
	uint64_t n = quota_bytes / PX_QSTORE_LEASE_PARTS;

	if (n < PX_QSTORE_LEASE_MIN)
		n = PX_QSTORE_LEASE_MIN;
	return n > PX_QSTORE_LEASE_MAX ? PX_QSTORE_LEASE_MAX : n;
}

void
px_qstore_give_back(struct event_base *base, const char *service,
    const char *partner, uint64_t day, uint64_t n)
{
	char key[PX_QSTORE_KEY_MAX];
	redisAsyncContext *ac;

	if (n != 0 && px_qs_key(key, sizeof(key), service, partner, day) == 0 &&
	    (ac = px_qs_get(base)) != NULL)
		px_qs_back_key(ac, key, "b", n);
}

/* ---- one wait for the store's decision, for every analyser ------------- */

static void
px_qs_waited(void *arg, const struct px_qstore_answer *a)
{
	struct px_qstore_wait *w = arg;

	w->req = NULL;
	w->ans = *a;
	w->answered = true;
	w->resume(w->arg);
}

int
px_qstore_decide(struct px_qstore_wait *w, struct event_base *base,
    const char *service, const char *partner, struct px_quota *q,
    const struct px_quota_limit *l, uint64_t lease, uint64_t *used,
    uint64_t *limit, bool *store_down)
{
	struct px_qstore_answer *a = &w->ans;

	*store_down = false;
	if (w->answered)
		w->answered = false;
	else {
		w->req = px_qstore_begin(base, service, partner, l, lease,
		    px_qs_waited, w, a);
		if (w->req != NULL)
			return -1;
	}
	switch (a->result) {
	case PX_QSTORE_OK:
		px_quota_admit(q, a->bytes);
		return PX_QUOTA_OK;
	case PX_QSTORE_TRANSFERS:
		px_quota_refused(q, PX_QUOTA_TRANSFERS);
		*used = a->transfers;
		*limit = l->transfers;
		return PX_QUOTA_TRANSFERS;
	case PX_QSTORE_BYTES:
		px_quota_refused(q, PX_QUOTA_BYTES);
		*used = a->bytes;
		*limit = l->bytes;
		return PX_QUOTA_BYTES;
	case PX_QSTORE_ERROR:
		break;
	}
	if (px_qstore_refuses()) {
		*store_down = true;
		return PX_QUOTA_TRANSFERS;
	}
	return (int)px_quota_begin(q, l, used, limit);
}

void
px_qstore_wait_forget(struct px_qstore_wait *w)
{
	px_qstore_cancel(w->req);
	w->req = NULL;
	w->answered = false;
}

void
px_qstore_cancel(struct px_qstore_req *r)
{
	if (r == NULL || r->done)
		return;
	r->done = true;
	r->cb = NULL;
	evtimer_del(r->timer);
}

void
px_qstore_refund(struct event_base *base, const char *service,
    const char *partner, uint64_t day)
{
	char key[PX_QSTORE_KEY_MAX];
	redisAsyncContext *ac;

	if (px_qs_key(key, sizeof(key), service, partner, day) == 0 &&
	    (ac = px_qs_get(base)) != NULL)
		px_qs_back_key(ac, key, "t", 1);
}

/* ---- bytes kept for the store ------------------------------------------- */

/* Bytes a transfer moved outside any lease that the store cannot be told
 * now (down, or a connect failed less than PX_QSTORE_RETRY_MS ago, or the
 * connection went before the reply): kept in the worker's list, one entry
 * per key (a partner's day), and sent again every PX_QSTORE_RETRY_MS until
 * the store takes them, to the key of the day they were moved in, however
 * late. Per worker, as the connection is: nothing shared, no lock. */

static void	px_qs_flush(struct px_qstore_conn *c);

static void
px_qs_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	px_qs_flush(arg);
}

/* The next try in PX_QSTORE_RETRY_MS, unless one is set already. */
static void
px_qs_arm(struct px_qstore_conn *c)
{
	const struct timeval tv = { PX_QSTORE_RETRY_MS / 1000,
	    (PX_QSTORE_RETRY_MS % 1000) * 1000 };

	if (c->exiting || c->base == NULL)
		return;
	if (c->retry == NULL &&
	    (c->retry = evtimer_new(c->base, px_qs_retry_cb, c)) == NULL)
		return;		/* (then at the next bytes kept) */
	if (!evtimer_pending(c->retry, NULL))
		evtimer_add(c->retry, &tv);
}

static struct px_qs_bytes *
px_qs_find(struct px_qstore_conn *c, const char *key)
{
	struct px_qs_bytes *w;

	for (w = c->waiting; w != NULL; w = w->next)
		if (strcmp(w->key, key) == 0)
			return w;
	return NULL;
}

/* Every byte kept since "kept" was logged is in the store: said once. */
static void
px_qs_all_told(struct px_qstore_conn *c)
{
	if (!c->told || c->waiting != NULL || c->nsent != 0)
		return;
	px_log(LOG_NOTICE, 0, "quota-store pending bytes=%llu verdict=delivered "
	    "(the store at %s has every byte kept for it)",
	    (unsigned long long)c->delivered, px_qs_name);
	c->told = c->full_told = false;
	c->delivered = 0;
}

static void
px_qs_drop(struct px_qstore_conn *c, struct px_qs_bytes *b)
{
	atomic_fetch_add(&px_qs_pending[PX_QS_DROPPED], b->n);
	if (b->kept)
		atomic_fetch_sub(&px_qs_pending_now, b->n);
	c->nbytes--;
	free(b);
}

/* b's bytes wait in the list (with its key's, if some wait already). */
static void
px_qs_keep(struct px_qstore_conn *c, struct px_qs_bytes *b)
{
	struct px_qs_bytes *w;

	if (!b->kept) {
		b->kept = true;
		atomic_fetch_add(&px_qs_pending_now, b->n);
		atomic_fetch_add(&px_qs_pending[PX_QS_KEPT], b->n);
		if (!c->told && !c->exiting) {
			c->told = true;
			px_log(LOG_NOTICE, 0, "quota-store pending key=%s "
			    "bytes=%llu verdict=kept (the store at %s cannot be "
			    "told now: added when it answers)", b->key,
			    (unsigned long long)b->n, px_qs_name);
		}
	}
	if ((w = px_qs_find(c, b->key)) != NULL) {
		w->n += b->n;
		c->nbytes--;
		free(b);
	} else {
		b->next = c->waiting;
		c->waiting = b;
	}
	px_qs_arm(c);
}

/* hiredis's callback for bytes sent: added, or kept again when the
 * connection went without a reply. */
static void
px_qs_added(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct px_qstore_conn *c = ac->data;
	struct px_qs_bytes *b = privdata;
	const redisReply *r = reply;

	if (b->kept)
		c->nsent--;
	if (r == NULL) {
		px_qs_keep(c, b);
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		px_log(LOG_WARNING, 0, "quota-store pending key=%s bytes=%llu "
		    "verdict=dropped (the store answered: %.*s)", b->key,
		    (unsigned long long)b->n, r->len > 200 ? 200 : (int)r->len,
		    r->str);
		px_qs_drop(c, b);
	} else {
		if (b->kept) {
			atomic_fetch_sub(&px_qs_pending_now, b->n);
			atomic_fetch_add(&px_qs_pending[PX_QS_DELIVERED], b->n);
			c->delivered += b->n;
		}
		c->nbytes--;
		free(b);
	}
	px_qs_all_told(c);
}

/* b's bytes to the store on ac; false: not sent (b untouched). */
static bool
px_qs_send_bytes(struct px_qstore_conn *c, redisAsyncContext *ac,
    struct px_qs_bytes *b)
{
	if (redisAsyncCommand(ac, px_qs_added, b, "EVAL %s 1 %s %llu",
	    px_qs_add_script, b->key, (unsigned long long)b->n) != REDIS_OK)
		return false;
	if (b->kept)
		c->nsent++;
	return true;
}

/* What waits, to the store if one is to be had now, else at the next
 * try. */
static void
px_qs_flush(struct px_qstore_conn *c)
{
	struct px_qs_bytes *b, *next;
	redisAsyncContext *ac;

	if (c->waiting == NULL || c->exiting)
		return;
	if ((ac = px_qs_get(c->base)) == NULL) {
		px_qs_arm(c);
		return;
	}
	b = c->waiting;
	c->waiting = NULL;
	for (; b != NULL; b = next) {
		next = b->next;
		if (!px_qs_send_bytes(c, ac, b)) {
			b->next = c->waiting;
			c->waiting = b;
		}
	}
	if (c->waiting != NULL)
		px_qs_arm(c);
}

void
px_qstore_add_bytes(struct event_base *base, const char *service,
    const char *partner, uint64_t day, uint64_t n)
{
	struct px_qstore_conn *c = &px_qs_conn;
	char key[PX_QSTORE_KEY_MAX];
	redisAsyncContext *ac = NULL;
	struct px_qs_bytes *b, *w;
	size_t len;

	if (n == 0 ||
	    px_qs_key(key, sizeof(key), service, partner, day) == -1)
		return;
	if (c->base == NULL)
		c->base = base;
	/* Behind bytes that wait already: with them, at the next try. */
	if (c->waiting == NULL)
		ac = px_qs_get(base);
	if (c->nbytes >= PX_QSTORE_PENDING_MAX ||
	    (b = calloc(1, sizeof(*b) + (len = strlen(key) + 1))) == NULL) {
		if (ac != NULL)
			(void)redisAsyncCommand(ac, NULL, NULL,
			    "EVAL %s 1 %s %llu", px_qs_add_script, key,
			    (unsigned long long)n);
		else if ((w = px_qs_find(c, key)) != NULL) {
			w->n += n;
			atomic_fetch_add(&px_qs_pending_now, n);
			atomic_fetch_add(&px_qs_pending[PX_QS_KEPT], n);
		} else {
			atomic_fetch_add(&px_qs_pending[PX_QS_DROPPED], n);
			if (!c->full_told)
				px_log(LOG_WARNING, 0, "quota-store pending "
				    "key=%s bytes=%llu verdict=dropped (%u keys "
				    "wait for the store already)", key,
				    (unsigned long long)n, c->nbytes);
			c->full_told = true;
		}
		return;
	}
	memcpy(b->key, key, len);
	b->n = n;
	c->nbytes++;
	if (ac == NULL || !px_qs_send_bytes(c, ac, b))
		px_qs_keep(c, b);
}

/* ---- metrics -------------------------------------------------------------- */

void
px_qstore_metrics(struct evbuffer *b)
{
	static const char *const names[PX_QS_N] = {
		"ok", "refused", "error", "timeout",
	};
	static const char *const events[PX_QS_PENDING_N] = {
		"kept", "delivered", "dropped",
	};
	unsigned i;

	if (!px_qs_on)
		return;
	evbuffer_add_printf(b, "# HELP proxyd_quota_store_requests_total "
	    "Transfers asked of the cluster's quota store (cluster/@store): "
	    "counted (ok), refused by a quota, or no answer (error, timeout: "
	    "cluster/@on-store-error decided).\n"
	    "# TYPE proxyd_quota_store_requests_total counter\n");
	for (i = 0; i < PX_QS_N; i++)
		evbuffer_add_printf(b, "proxyd_quota_store_requests_total{"
		    "result=\"%s\"} %llu\n", names[i],
		    (unsigned long long)atomic_load(&px_qs_count[i]));
	evbuffer_add_printf(b, "# HELP proxyd_quota_store_pending_bytes Bytes "
	    "transfers moved outside a lease that the quota store could not be "
	    "told yet: kept, added when it answers.\n"
	    "# TYPE proxyd_quota_store_pending_bytes gauge\n"
	    "proxyd_quota_store_pending_bytes %llu\n"
	    "# HELP proxyd_quota_store_pending_bytes_total Bytes kept for the "
	    "quota store (kept), added to it later (delivered), or lost "
	    "(dropped: too many keys waiting, an error reply, a worker's "
	    "exit).\n"
	    "# TYPE proxyd_quota_store_pending_bytes_total counter\n",
	    (unsigned long long)atomic_load(&px_qs_pending_now));
	for (i = 0; i < PX_QS_PENDING_N; i++)
		evbuffer_add_printf(b, "proxyd_quota_store_pending_bytes_total{"
		    "event=\"%s\"} %llu\n", events[i],
		    (unsigned long long)atomic_load(&px_qs_pending[i]));
}
