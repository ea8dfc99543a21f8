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

#include "quota_store.h"

/* A refused connection is not tried again before this: meanwhile
 * requests get PX_QSTORE_ERROR at once rather than a connect each. */
#define PX_QSTORE_RETRY_MS	1000
/* A day's keys outlive it a day, for whoever looks. */
#define PX_QSTORE_TTL		"172800"
#define PX_QSTORE_KEY_MAX	700

static char px_qs_host[NI_MAXHOST];
static int px_qs_port;
static char px_qs_name[NI_MAXHOST + 16];
static bool px_qs_on, px_qs_refuse = true;
static struct timeval px_qs_timeout;

enum { PX_QS_OK, PX_QS_REFUSED, PX_QS_ERROR, PX_QS_TIMEOUT, PX_QS_N };
static _Atomic uint64_t px_qs_count[PX_QS_N];

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

struct px_qstore_conn {
	redisAsyncContext	*ac;		/* NULL: none now */
	struct event_base	*base;
	struct timespec		 failed;	/* the last connect that failed */
	bool			 has_failed;
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

void
px_qstore_thread_exit(void)
{
	redisAsyncContext *ac = px_qs_conn.ac;

	if (ac == NULL)
		return;
	/* Pending requests' callbacks run now, with no reply. */
	px_qs_conn.ac = NULL;
	redisAsyncFree(ac);
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

void
px_qstore_add_bytes(struct event_base *base, const char *service,
    const char *partner, uint64_t day, uint64_t n)
{
	char key[PX_QSTORE_KEY_MAX];
	redisAsyncContext *ac;

	if (n == 0 ||
	    px_qs_key(key, sizeof(key), service, partner, day) == -1 ||
	    (ac = px_qs_get(base)) == NULL)
		return;
	(void)redisAsyncCommand(ac, NULL, NULL, "HINCRBY %s b %llu", key,
	    (unsigned long long)n);
	(void)redisAsyncCommand(ac, NULL, NULL, "EXPIRE %s " PX_QSTORE_TTL,
	    key);
}

/* ---- metrics -------------------------------------------------------------- */

void
px_qstore_metrics(struct evbuffer *b)
{
	static const char *const names[PX_QS_N] = {
		"ok", "refused", "error", "timeout",
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
}
