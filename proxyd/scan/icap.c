/* The ICAP client's connections (icap.h): per worker thread, a pool per
 * scanner with its OPTIONS, its idle connections and the requests waiting
 * for a connection. Everything runs on the worker's event base; nothing
 * here is shared between threads. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "icap.h"
#include "scan.h"

/* The most of a changed body read for an empty one (to tell whether it
 * stayed empty) when the caller relays none. */
#define ICAP_EMPTY_MOD_MAX	(64 * 1024)

/* The most one write to a scanner takes. */
#define ICAP_WRITE_MAX		(256 * 1024)

struct icap_pool;

/* Where a request's body stands towards its connection (RFC 3507 4.5). */
enum icap_phase {
	ICAP_NO_CONN = 0,	/* waiting for a connection: body kept raw */
	ICAP_PREVIEW,		/* gathering the preview's bytes */
	ICAP_CONTINUE,		/* preview sent: waits for 100 Continue */
	ICAP_STREAM,		/* chunks go straight to the connection */
	ICAP_SENT,		/* the whole message went (or ieof) */
};

struct icap_conn {
	struct bufferevent	*bev;
	struct icap_pool	*pool;
	struct px_icap_req	*req;		/* NULL: idle, or OPTIONS */
	bool			 options;	/* carries the OPTIONS */
	LIST_ENTRY(icap_conn)	 idle;
	bool			 in_idle;
};

struct px_icap_req {
	struct icap_pool	*pool;
	struct event_base	*base;
	struct evbuffer		*out;		/* the encapsulated heads */
	struct evbuffer		*body;		/* raw body not yet framed */
	enum icap_phase		 phase;
	long			 preview;	/* bytes; -1: none */
	bool			 no_preview;	/* the scanner's preview="no" */
	char			 ext[16];	/* the file's extension */
	struct icap_conn	*conn;
	struct event		*timer;
	bool			 respmod;
	bool			 ended;
	bool			 failed;	/* res set: the timer delivers */
	bool			 waiting;	/* in pool->wait */
	uint64_t		 timeout_ms;
	uint64_t		 read_mark;	/* conn bytes read at last tick */
	size_t			 queued_mark;	/* px_icap_queued at last tick */
	uint64_t		 nread;
	size_t			 req_len, res_len;	/* in out */
	/* A changed message, read whole (px_icap_want_modified). */
	size_t			 mod_max;	/* 0: not wanted */
	bool			 mod_wanted;	/* by the caller */
	uint64_t		 body_bytes;	/* accepted so far */
	bool			 reading;	/* its body is coming */
	struct px_icap_dechunk	 dechunk;
	px_icap_cb		 cb;
	void			*arg;
	struct px_icap_result	 res;
	TAILQ_ENTRY(px_icap_req) link;
};

enum icap_options_state { ICAP_OPT_NONE = 0, ICAP_OPT_PENDING, ICAP_OPT_DONE };

struct icap_pool {
	struct icap_pool	*next;
	struct event_base	*base;
	char			 url[256];
	struct sockaddr_storage	 addr;
	socklen_t		 addrlen;
	char			 authority[72];
	char			 path[128];
	uint64_t		 timeout_ms;
	unsigned		 max_conns;	/* ours */
	unsigned		 server_max;	/* its Max-Connections; 0 */
	unsigned		 active;	/* connections in use */
	enum icap_options_state	 options;
	struct icap_conn	*options_conn;	/* carrying the OPTIONS */
	time_t			 options_until;	/* 0: no TTL */
	char			 methods[64];
	char			 istag[64];
	long			 preview;	/* its Preview; -1: none */
	char			 transfer_preview[64];
	char			 transfer_complete[64];
	char			 transfer_ignore[64];
	LIST_HEAD(, icap_conn)	 idle;
	TAILQ_HEAD(, px_icap_req) wait;
};

static _Thread_local struct icap_pool *icap_pools;

static void icap_dispatch(struct icap_pool *p);

/* Connections in use at most: ours, lowered to the server's. */
static unsigned
icap_pool_limit(const struct icap_pool *p)
{
	return p->server_max != 0 && p->server_max < p->max_conns ?
	    p->server_max : p->max_conns;
}

/* ---- pools ----------------------------------------------------------- */

static struct icap_pool *
icap_pool_get(struct event_base *base, const struct px_scanner *sc)
{
	struct icap_pool *p;

	for (p = icap_pools; p != NULL; p = p->next)
		if (p->base == base && strcmp(p->url, sc->url) == 0 &&
		    p->timeout_ms == sc->timeout_ms &&
		    p->max_conns == sc->max_connections)
			return p;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->base = base;
	snprintf(p->url, sizeof(p->url), "%s", sc->url);
	memcpy(&p->addr, &sc->addr, sizeof(p->addr));
	p->addrlen = sc->addrlen;
	snprintf(p->authority, sizeof(p->authority), "%s", sc->authority);
	snprintf(p->path, sizeof(p->path), "%s", sc->path);
	p->timeout_ms = sc->timeout_ms;
	p->max_conns = sc->max_connections ? sc->max_connections : 1;
	LIST_INIT(&p->idle);
	TAILQ_INIT(&p->wait);
	p->next = icap_pools;
	icap_pools = p;
	return p;
}

static void
icap_conn_free(struct icap_conn *c)
{
	if (c->in_idle)
		LIST_REMOVE(c, idle);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	free(c);
}

/* ---- requests -------------------------------------------------------- */

static void
icap_timer_arm(struct px_icap_req *r, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(r->timer, &tv);
}

static void
icap_result_free(struct px_icap_result *res)
{
	if (res->mod_head != NULL)
		evbuffer_free(res->mod_head);
	if (res->mod_body != NULL)
		evbuffer_free(res->mod_body);
	res->mod_head = res->mod_body = NULL;
}

/* The request ends: its connection goes back idle (reusable) or is
 * closed, and the next waiting request may take a connection. The
 * callback runs last; r is freed after it. */
static void
icap_req_finish(struct px_icap_req *r, bool reusable)
{
	struct icap_pool *p = r->pool;
	struct icap_conn *c = r->conn;

	if (r->waiting) {
		TAILQ_REMOVE(&p->wait, r, link);
		r->waiting = false;
	}
	if (c != NULL) {
		c->req = NULL;
		r->conn = NULL;
		p->active--;
		if (reusable && evbuffer_get_length(
		    bufferevent_get_input(c->bev)) == 0 &&
		    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
			LIST_INSERT_HEAD(&p->idle, c, idle);
			c->in_idle = true;
		} else
			icap_conn_free(c);
	}
	event_free(r->timer);
	evbuffer_free(r->out);
	evbuffer_free(r->body);
	icap_result_free(&r->res);
}

static void
icap_req_deliver(struct px_icap_req *r, bool reusable)
{
	struct icap_pool *p = r->pool;
	struct px_icap_result res = r->res;
	px_icap_cb cb = r->cb;
	void *arg = r->arg;

	if (res.verdict != PX_ICAP_MODIFIED)
		icap_result_free(&res);
	r->res.mod_head = r->res.mod_body = NULL;	/* res's now */
	icap_req_finish(r, reusable);
	free(r);
	icap_dispatch(p);
	cb(arg, &res);
	icap_result_free(&res);
}

/* A failure, reported from the request's timer so that the callback never
 * runs inside a px_icap_* call. */
static void
icap_req_fail(struct px_icap_req *r, const char *what, const char *detail)
{
	if (r->failed)
		return;
	r->failed = true;
	r->res.verdict = PX_ICAP_ERROR;
	snprintf(r->res.error, sizeof(r->res.error), "%s%s", what, detail);
	event_active(r->timer, EV_TIMEOUT, 0);
}

/* The scanner's Transfer-Ignore names the file's extension: not sent,
 * passed as the scanner asked (error says so for the log). */
static void
icap_req_skip(struct px_icap_req *r)
{
	r->failed = true;
	r->res.verdict = PX_ICAP_CLEAN;
	snprintf(r->res.error, sizeof(r->res.error), "not sent: the "
	    "scanner's Transfer-Ignore lists .%s", r->ext);
	event_active(r->timer, EV_TIMEOUT, 0);
}

/* Every tick of the scanner's timeout: the scan failed when nothing
 * moved for a whole tick while the scanner had something to do (bytes to
 * take, an answer to give). A caller that is slow to feed the body is
 * not the scanner's fault. */
static void
icap_req_timer(evutil_socket_t fd, short what, void *arg)
{
	struct px_icap_req *r = arg;
	size_t q = px_icap_queued(r);
	bool waiting_on_scanner = r->ended || r->reading || r->conn == NULL ||
	    r->phase == ICAP_CONTINUE || evbuffer_get_length(
	    bufferevent_get_output(r->conn->bev)) != 0;

	(void)fd;
	(void)what;
	if (r->failed) {
		icap_req_deliver(r, false);
		return;
	}
	if (!waiting_on_scanner || r->nread != r->read_mark ||
	    q < r->queued_mark) {
		r->read_mark = r->nread;
		r->queued_mark = q;
		icap_timer_arm(r, r->timeout_ms);
		return;
	}
	r->res.verdict = PX_ICAP_ERROR;
	if (r->conn == NULL && r->pool->options == ICAP_OPT_DONE) {
		/* Queued behind max-connections for the whole timeout: the
		 * scanner is too busy (not silent). */
		snprintf(r->res.error, sizeof(r->res.error), "scanner-busy: "
		    "no scanner connection free within %llums "
		    "(max-connections %u)", (unsigned long long)r->timeout_ms,
		    icap_pool_limit(r->pool));
		icap_req_deliver(r, false);
		return;
	}
	snprintf(r->res.error, sizeof(r->res.error), "no answer within %llums "
	    "(%s)", (unsigned long long)r->timeout_ms, r->conn == NULL ?
	    "waiting for a connection" : r->phase == ICAP_CONTINUE ?
	    "waiting for 100 Continue after the preview" : r->reading ?
	    "reading the changed message" : r->ended ?
	    "waiting for the verdict" : "the scanner does not read");
	icap_req_deliver(r, false);
}

/* ---- connections ----------------------------------------------------- */

static void icap_read_cb(struct bufferevent *bev, void *arg);
static void icap_send_head(struct px_icap_req *r);
static void icap_req_skip(struct px_icap_req *r);
static void icap_modified_start(struct icap_conn *c,
	    const struct px_icap_head *h, size_t len);
static void icap_write_cb(struct bufferevent *bev, void *arg);
static void icap_event_cb(struct bufferevent *bev, short what, void *arg);

static struct icap_conn *
icap_conn_new(struct icap_pool *p)
{
	struct icap_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->pool = p;
	c->bev = bufferevent_socket_new(p->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		free(c);
		return NULL;
	}
	/* libevent writes at most 16 KiB per call by default: a body goes
	 * out in as few writes as the socket takes. */
	(void)bufferevent_set_max_single_write(c->bev, ICAP_WRITE_MAX);
	bufferevent_setcb(c->bev, icap_read_cb, icap_write_cb, icap_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&p->addr,
	    (int)p->addrlen) == -1) {
		icap_conn_free(c);
		return NULL;
	}
	return c;
}

/* The waiting requests fail together (the OPTIONS failed). */
static void
icap_fail_waiting(struct icap_pool *p, const char *why)
{
	struct px_icap_req *r;

	TAILQ_FOREACH(r, &p->wait, link)
		icap_req_fail(r, why, "");
}

/* The OPTIONS failed: its connection goes, the next scan asks again. */
static void
icap_options_failed(struct icap_conn *c, const char *why)
{
	struct icap_pool *p = c->pool;

	p->active--;
	p->options = ICAP_OPT_NONE;
	p->options_conn = NULL;
	icap_conn_free(c);
	icap_fail_waiting(p, why);
}

static void
icap_options_start(struct icap_pool *p)
{
	struct icap_conn *c = icap_conn_new(p);
	struct timeval tv = { (time_t)(p->timeout_ms / 1000),
	    (suseconds_t)(p->timeout_ms % 1000) * 1000 };

	if (c == NULL) {
		icap_fail_waiting(p, "cannot open a connection to the scanner");
		return;
	}
	c->options = true;
	p->options = ICAP_OPT_PENDING;
	p->options_conn = c;
	p->active++;
	/* The OPTIONS answer is bounded by the timeout too. */
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
	    "OPTIONS icap://%s%s ICAP/1.0\r\nHost: %s\r\n"
	    "Encapsulated: null-body=0\r\n\r\n", p->authority, p->path,
	    p->authority);
}

static bool
icap_methods_has(const char *methods, const char *m)
{
	const char *s = methods;
	size_t n = strlen(m);

	while ((s = strstr(s, m)) != NULL) {
		if ((s == methods || s[-1] == ' ' || s[-1] == ',') &&
		    (s[n] == '\0' || s[n] == ' ' || s[n] == ','))
			return true;
		s += n;
	}
	return false;
}

/* The Transfer-* lists of OPTIONS (RFC 3507 4.10.2): which extensions
 * the scanner wants previewed, sent whole, or not at all. A name listed
 * wins; else the list holding "*"; else a preview. */
enum icap_xfer { ICAP_XFER_PREVIEW, ICAP_XFER_COMPLETE, ICAP_XFER_IGNORE };

static bool
icap_list_has(const char *list, const char *ext)
{
	return ext[0] != '\0' && icap_methods_has(list, ext);
}

static enum icap_xfer
icap_transfer_kind(const struct icap_pool *p, const char *ext)
{
	if (icap_list_has(p->transfer_ignore, ext))
		return ICAP_XFER_IGNORE;
	if (icap_list_has(p->transfer_complete, ext))
		return ICAP_XFER_COMPLETE;
	if (icap_list_has(p->transfer_preview, ext))
		return ICAP_XFER_PREVIEW;
	if (icap_methods_has(p->transfer_ignore, "*"))
		return ICAP_XFER_IGNORE;
	if (icap_methods_has(p->transfer_complete, "*"))
		return ICAP_XFER_COMPLETE;
	return ICAP_XFER_PREVIEW;
}

/* n bytes of src (taken from it) as one chunk. */
static void
icap_chunk(struct evbuffer *out, struct evbuffer *src, size_t n)
{
	if (n == 0)
		return;
	evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_remove_buffer(src, out, n);
	evbuffer_add(out, "\r\n", 2);
}

/* Moves what the phase allows of the raw body to the connection: the
 * preview once its bytes are there (or the body ended: "ieof"), the rest
 * after 100 Continue. */
static void
icap_flush(struct px_icap_req *r)
{
	struct evbuffer *out;
	size_t len = evbuffer_get_length(r->body), n;
	bool ieof;

	if (r->conn == NULL || r->failed)
		return;
	out = bufferevent_get_output(r->conn->bev);
	switch (r->phase) {
	case ICAP_PREVIEW:
		if (len < (size_t)r->preview && !r->ended)
			return;
		n = len < (size_t)r->preview ? len : (size_t)r->preview;
		ieof = r->ended && len <= (size_t)r->preview;
		icap_chunk(out, r->body, n);
		evbuffer_add_printf(out, "0%s\r\n\r\n", ieof ? "; ieof" : "");
		r->phase = ieof ? ICAP_SENT : ICAP_CONTINUE;
		break;
	case ICAP_STREAM:
		icap_chunk(out, r->body, len);
		if (r->ended) {
			evbuffer_add(out, "0\r\n\r\n", 5);
			r->phase = ICAP_SENT;
		}
		break;
	default:
		break;
	}
}

/* The request has its connection: its ICAP head (with a Preview when
 * the scanner wants one for this file), the encapsulated heads, and what
 * of the body is there. */
static void
icap_send_head(struct px_icap_req *r)
{
	struct icap_pool *p = r->pool;
	struct evbuffer *out = bufferevent_get_output(r->conn->bev);
	char preview[32] = "";

	r->preview = !r->no_preview && p->preview >= 0 &&
	    icap_transfer_kind(p, r->ext) == ICAP_XFER_PREVIEW ? p->preview :
	    -1;
	if (r->preview >= 0)
		snprintf(preview, sizeof(preview), "Preview: %ld\r\n",
		    r->preview);
	evbuffer_add_printf(out, "%s icap://%s%s ICAP/1.0\r\nHost: %s\r\n"
	    "Allow: 204\r\n%s", r->respmod ? "RESPMOD" : "REQMOD",
	    p->authority, p->path, p->authority, preview);
	if (r->respmod)
		evbuffer_add_printf(out, "Encapsulated: req-hdr=0, "
		    "res-hdr=%zu, res-body=%zu\r\n\r\n", r->req_len,
		    r->req_len + r->res_len);
	else
		evbuffer_add_printf(out, "Encapsulated: req-hdr=0, "
		    "req-body=%zu\r\n\r\n", r->req_len);
	evbuffer_add_buffer(out, r->out);
	r->phase = r->preview >= 0 ? ICAP_PREVIEW : ICAP_STREAM;
	icap_flush(r);
}

/* Gives waiting requests connections, up to the limit; starts the
 * OPTIONS first when the pool has none in force. */
static void
icap_dispatch(struct icap_pool *p)
{
	struct px_icap_req *r;
	unsigned limit;

	if (p->options == ICAP_OPT_DONE && p->options_until != 0 &&
	    time(NULL) >= p->options_until)
		p->options = ICAP_OPT_NONE;	/* its TTL passed */
	if (TAILQ_EMPTY(&p->wait) || TAILQ_FIRST(&p->wait)->failed)
		return;
	if (p->options == ICAP_OPT_NONE)
		icap_options_start(p);
	if (p->options != ICAP_OPT_DONE)
		return;
	limit = icap_pool_limit(p);
	while ((r = TAILQ_FIRST(&p->wait)) != NULL && !r->failed &&
	    p->active < limit) {
		struct icap_conn *c = LIST_FIRST(&p->idle);

		if (p->methods[0] != '\0' && !icap_methods_has(p->methods,
		    r->respmod ? "RESPMOD" : "REQMOD")) {
			icap_req_fail(r, "the scanner does not do ",
			    r->respmod ? "RESPMOD" : "REQMOD");
			TAILQ_REMOVE(&p->wait, r, link);
			r->waiting = false;
			continue;
		}
		if (icap_transfer_kind(p, r->ext) == ICAP_XFER_IGNORE) {
			icap_req_skip(r);
			TAILQ_REMOVE(&p->wait, r, link);
			r->waiting = false;
			continue;
		}
		if (c != NULL) {
			LIST_REMOVE(c, idle);
			c->in_idle = false;
		} else if ((c = icap_conn_new(p)) == NULL) {
			icap_req_fail(r, "cannot open a connection to the "
			    "scanner", "");
			TAILQ_REMOVE(&p->wait, r, link);
			r->waiting = false;
			continue;
		}
		TAILQ_REMOVE(&p->wait, r, link);
		r->waiting = false;
		r->conn = c;
		c->req = r;
		p->active++;
		/* The time it waited for the connection does not count
		 * against the scanner's answer: a full timeout from now. */
		r->read_mark = r->nread;
		r->queued_mark = px_icap_queued(r);
		icap_timer_arm(r, r->timeout_ms);
		snprintf(r->res.istag, sizeof(r->res.istag), "%s", p->istag);
		icap_send_head(r);
	}
}

/* The OPTIONS answer: what the pool goes by from now on. */
static void
icap_options_done(struct icap_conn *c, const struct px_icap_head *h,
    size_t len)
{
	struct icap_pool *p = c->pool;
	bool keep = !h->conn_close && (h->body < 0 || h->null_body);

	if (h->status != 200) {
		char why[64];

		snprintf(why, sizeof(why), "OPTIONS answered %d", h->status);
		icap_options_failed(c, why);
		return;
	}
	p->active--;
	p->options_conn = NULL;
	c->options = false;
	bufferevent_set_timeouts(c->bev, NULL, NULL);
	p->options = ICAP_OPT_DONE;
	p->server_max = (unsigned)h->max_connections;
	p->options_until = h->options_ttl ? time(NULL) + h->options_ttl : 0;
	snprintf(p->methods, sizeof(p->methods), "%s", h->methods);
	snprintf(p->istag, sizeof(p->istag), "%s", h->istag);
	p->preview = h->preview;
	snprintf(p->transfer_preview, sizeof(p->transfer_preview), "%s",
	    h->transfer_preview);
	snprintf(p->transfer_complete, sizeof(p->transfer_complete), "%s",
	    h->transfer_complete);
	snprintf(p->transfer_ignore, sizeof(p->transfer_ignore), "%s",
	    h->transfer_ignore);
	evbuffer_drain(bufferevent_get_input(c->bev), len);
	if (keep && evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) {
		LIST_INSERT_HEAD(&p->idle, c, idle);
		c->in_idle = true;
	} else
		icap_conn_free(c);
	icap_dispatch(p);
}

/* A changed message is read whole: what the caller gets. */
static void
icap_modified_done(struct px_icap_req *r, bool reusable)
{
	r->reading = false;
	if (r->body_bytes == 0 && evbuffer_get_length(r->res.mod_body) == 0) {
		/* Empty it was, empty it stays: unchanged. */
		icap_result_free(&r->res);
		r->res.verdict = PX_ICAP_CLEAN;
	} else if (!r->mod_wanted)
		icap_result_free(&r->res);
	icap_req_deliver(r, reusable);
}

/* More of a changed message's body: the verdict once it is whole. */
static void
icap_modified_read(struct icap_conn *c)
{
	struct px_icap_req *r = c->req;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	const char *why = "";
	int rc = px_icap_dechunk(&r->dechunk, in, r->res.mod_body, r->mod_max,
	    &why);

	if (rc == 0)
		return;
	if (rc < 0) {
		r->reading = false;
		icap_result_free(&r->res);
		icap_req_fail(r, "bad changed message from the scanner: ", why);
		return;
	}
	icap_modified_done(r, r->phase == ICAP_SENT &&
	    evbuffer_get_length(in) == 0);
}

/* A 200 with a changed response the caller relays: its head is kept, its
 * body read (icap_modified_read). */
static void
icap_modified_start(struct icap_conn *c, const struct px_icap_head *h,
    size_t len)
{
	struct px_icap_req *r = c->req;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t hlen = (size_t)(h->body - (h->res_hdr >= 0 ? h->res_hdr :
	    h->req_hdr));
	const char *buf = (const char *)evbuffer_pullup(in, (ssize_t)len);

	r->res.mod_head = evbuffer_new();
	r->res.mod_body = evbuffer_new();
	if (buf == NULL || r->res.mod_head == NULL || r->res.mod_body == NULL) {
		icap_result_free(&r->res);
		icap_req_fail(r, "out of memory for a changed message", "");
		return;
	}
	evbuffer_add(r->res.mod_head, buf + len - hlen, hlen);
	evbuffer_drain(in, len);
	if (h->null_body) {
		icap_modified_done(r, r->phase == ICAP_SENT &&
		    !h->conn_close && evbuffer_get_length(in) == 0);
		return;
	}
	r->reading = true;
	icap_modified_read(c);
}

/* The answer to a REQMOD or RESPMOD: the verdict. */
static void
icap_answer(struct icap_conn *c, const struct px_icap_head *h, size_t len)
{
	struct px_icap_req *r = c->req;
	bool reusable = false;

	r->res.icap_status = h->status;
	r->res.http_status = h->http_status;
	if (h->istag[0] != '\0')
		snprintf(r->res.istag, sizeof(r->res.istag), "%s", h->istag);
	switch (h->status) {
	case 204:
		r->res.verdict = PX_ICAP_CLEAN;
		/* A 204 to a preview ends a complete message; an early one
		 * in the middle of the body leaves the rest of it unread by
		 * the answer's end: the connection cannot go on. */
		reusable = (r->phase == ICAP_SENT || r->phase ==
		    ICAP_CONTINUE) && !h->conn_close;
		if (r->phase == ICAP_CONTINUE)
			snprintf(r->res.error, sizeof(r->res.error), "204 to "
			    "the preview (%ld bytes): the rest not scanned",
			    r->preview);
		evbuffer_drain(bufferevent_get_input(c->bev), len);
		break;
	case 200:
		if (h->req_hdr < 0 && h->res_hdr < 0) {
			/* A 200 says what the message became: one that
			 * carries none answers nothing we asked. */
			r->res.verdict = PX_ICAP_ERROR;
			snprintf(r->res.error, sizeof(r->res.error), "the "
			    "scanner answered 200 without a message");
			break;
		}
		/* Its body is not read (the connection is closed), unless
		 * the caller relays a changed response. */
		snprintf(r->res.threat, sizeof(r->res.threat), "%s", h->threat);
		r->res.verdict = h->threat[0] != '\0' ||
		    (h->http_status >= 400) ? PX_ICAP_INFECTED :
		    PX_ICAP_MODIFIED;
		/* c-icap answers an empty body's preview (ieof) with a
		 * 200 that returns it unchanged: read to tell. */
		if (r->res.verdict == PX_ICAP_MODIFIED &&
		    ((r->mod_wanted && h->res_hdr >= 0) ||
		    (r->ended && r->body_bytes == 0))) {
			if (!r->mod_wanted)
				r->mod_max = ICAP_EMPTY_MOD_MAX;
			icap_modified_start(c, h, len);
			return;
		}
		break;
	default:
		r->res.verdict = PX_ICAP_ERROR;
		snprintf(r->res.error, sizeof(r->res.error), "the scanner "
		    "answered ICAP %d", h->status);
		break;
	}
	icap_req_deliver(r, reusable);
}

/* 100 Continue: the scanner wants the rest of the body after its
 * preview. */
static void
icap_continue(struct icap_conn *c, size_t len)
{
	struct px_icap_req *r = c->req;

	if (r->phase != ICAP_CONTINUE) {
		icap_req_fail(r, "bad answer from the scanner: ", "100 Continue "
		    "without a preview");
		return;
	}
	evbuffer_drain(bufferevent_get_input(c->bev), len);
	r->phase = ICAP_STREAM;
	icap_flush(r);
	if (evbuffer_get_length(bufferevent_get_input(c->bev)) != 0)
		icap_read_cb(c->bev, c);
}

static void
icap_read_cb(struct bufferevent *bev, void *arg)
{
	struct icap_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	size_t want = len < PX_ICAP_HEAD_MAX + 1 ? len : PX_ICAP_HEAD_MAX + 1;
	struct px_icap_head h;
	const char *buf, *why = "";
	ssize_t n;

	if (c->req != NULL)
		c->req->nread += len;
	if (c->req == NULL && !c->options) {
		/* Bytes on an idle connection answer nothing. */
		icap_conn_free(c);
		return;
	}
	if (c->req != NULL && c->req->failed)
		return;
	if (c->req != NULL && c->req->reading) {
		icap_modified_read(c);
		return;
	}
	buf = (const char *)evbuffer_pullup(in, (ssize_t)want);
	n = buf == NULL ? -1 : px_icap_parse(buf, want, &h, &why);
	if (n == 0)
		return;
	if (n < 0) {
		if (c->options) {
			icap_options_failed(c, why);
			return;
		}
		icap_req_fail(c->req, "bad answer from the scanner: ", why);
		return;
	}
	if (c->options)
		icap_options_done(c, &h, (size_t)n);
	else if (h.status == 100)
		icap_continue(c, (size_t)n);
	else
		icap_answer(c, &h, (size_t)n);
}

static void
icap_write_cb(struct bufferevent *bev, void *arg)
{
	struct icap_conn *c = arg;
	struct px_icap_req *r = c->req;

	(void)bev;
	/* All written: the caller may feed more. */
	if (r != NULL && !r->failed && !r->ended)
		r->cb(r->arg, NULL);
}

static void
icap_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct icap_conn *c = arg;
	char why[96];

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	snprintf(why, sizeof(why), "%s", (what & BEV_EVENT_TIMEOUT) ?
	    "scanner timeout" : (what & BEV_EVENT_EOF) ?
	    "the scanner closed the connection" : evutil_socket_error_to_string(
	    EVUTIL_SOCKET_ERROR()));
	if (c->options) {
		icap_options_failed(c, why);
		return;
	}
	if (c->req == NULL) {
		icap_conn_free(c);	/* an idle one the scanner closed */
		return;
	}
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	icap_req_fail(c->req, why, "");
}

/* ---- the API --------------------------------------------------------- */

/* The extension of the file the request line names ("GET /a/b.exe?x
 * HTTP/1.1" -> "exe"), lower case; "" when none or too long. */
static void
icap_extension(const void *head, size_t len, char *ext, size_t size)
{
	const char *s = head, *end = s + len, *path, *stop, *p, *dot = NULL;
	size_t n, i;

	ext[0] = '\0';
	if ((path = memchr(s, ' ', len)) == NULL)
		return;
	for (stop = ++path; stop < end && *stop != ' ' && *stop != '?' &&
	    *stop != '#' && *stop != '\r' && *stop != '\n'; stop++)
		;
	for (p = path; p < stop; p++)
		if (*p == '/')
			dot = NULL;
		else if (*p == '.')
			dot = p;
	if (dot == NULL || (n = (size_t)(stop - dot - 1)) == 0 || n >= size)
		return;
	for (i = 0; i < n; i++)
		ext[i] = (char)tolower((unsigned char)dot[1 + i]);
	ext[n] = '\0';
}

struct px_icap_req *
px_icap_start(struct event_base *base, const struct px_scanner *sc,
    bool respmod, const void *req_hdr, size_t req_len, const void *res_hdr,
    size_t res_len, px_icap_cb cb, void *arg)
{
	struct icap_pool *p = icap_pool_get(base, sc);
	struct px_icap_req *r;

	if (p == NULL || (r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->pool = p;
	r->base = base;
	r->respmod = respmod;
	r->cb = cb;
	r->arg = arg;
	r->timeout_ms = sc->timeout_ms;
	r->out = evbuffer_new();
	r->body = evbuffer_new();
	r->timer = evtimer_new(base, icap_req_timer, r);
	if (r->out == NULL || r->body == NULL || r->timer == NULL) {
		if (r->out != NULL)
			evbuffer_free(r->out);
		if (r->body != NULL)
			evbuffer_free(r->body);
		if (r->timer != NULL)
			event_free(r->timer);
		free(r);
		return NULL;
	}
	r->preview = -1;
	r->no_preview = sc->no_preview;
	r->req_len = req_len;
	r->res_len = respmod ? res_len : 0;
	icap_extension(req_hdr, req_len, r->ext, sizeof(r->ext));
	evbuffer_add(r->out, req_hdr, req_len);
	if (respmod)
		evbuffer_add(r->out, res_hdr, res_len);
	TAILQ_INSERT_TAIL(&p->wait, r, link);
	r->waiting = true;
	icap_timer_arm(r, r->timeout_ms);
	icap_dispatch(p);
	return r;
}

/* Copies the first n bytes of src (left there) to out. */
static void
icap_copy_bytes(struct evbuffer *out, struct evbuffer *src, size_t n)
{
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr pos;
	int i, k;

	evbuffer_ptr_set(src, &pos, 0, EVBUFFER_PTR_SET);
	while (n > 0) {
		k = evbuffer_peek(src, (ev_ssize_t)n, &pos, v, 16);
		if (k <= 0)
			break;
		for (i = 0; i < k && i < 16 && n > 0; i++) {
			size_t m = v[i].iov_len < n ? v[i].iov_len : n;

			evbuffer_add(out, v[i].iov_base, m);
			n -= m;
			evbuffer_ptr_set(src, &pos, m, EVBUFFER_PTR_ADD);
		}
	}
}

void
px_icap_body(struct px_icap_req *r, struct evbuffer *src, size_t n)
{
	struct evbuffer *out;

	if (n == 0 || r->ended || r->failed)
		return;
	r->body_bytes += n;
	if (r->phase != ICAP_STREAM) {
		/* Kept raw: the preview, or a connection, comes first. */
		icap_copy_bytes(r->body, src, n);
		icap_flush(r);
		return;
	}
	out = bufferevent_get_output(r->conn->bev);
	evbuffer_add_printf(out, "%zx\r\n", n);
	icap_copy_bytes(out, src, n);
	evbuffer_add(out, "\r\n", 2);
}

void
px_icap_end(struct px_icap_req *r)
{
	if (r->ended || r->failed)
		return;
	r->ended = true;
	icap_flush(r);
}

void
px_icap_want_modified(struct px_icap_req *r, size_t max)
{
	r->mod_max = max;
	r->mod_wanted = max != 0;
}

size_t
px_icap_queued(const struct px_icap_req *r)
{
	return evbuffer_get_length(r->out) + evbuffer_get_length(r->body) +
	    (r->conn != NULL ?
	    evbuffer_get_length(bufferevent_get_output(r->conn->bev)) : 0);
}

void
px_icap_cancel(struct px_icap_req *r)
{
	struct icap_pool *p;

	if (r == NULL)
		return;
	p = r->pool;
	icap_req_finish(r, false);
	free(r);
	icap_dispatch(p);
}

void
px_icap_worker_exit(void)
{
	struct icap_pool *p, *next;

	for (p = icap_pools; p != NULL; p = next) {
		struct icap_conn *c;

		next = p->next;
		while ((c = LIST_FIRST(&p->idle)) != NULL)
			icap_conn_free(c);
		if (p->options_conn != NULL)
			icap_conn_free(p->options_conn);
		/* Requests and busy connections are their sessions'. */
		free(p);
	}
	icap_pools = NULL;
}
