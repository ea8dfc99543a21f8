/* HTTP/2 towards servers (server-h2="yes", see http_h2_origin.h): the
 * worker's shared connections; a transaction's stream on one is
 * http_h2_origin_stream.c's.
 *
 * The connections: per worker (thread-local), keyed by the server's
 * address, the TLS context's id, the mark, the TLS name and whether a
 * server chain that does not verify may do (keybridge); a
 * transaction opens one stream on the first connection with a free slot
 * (under the server's SETTINGS_MAX_CONCURRENT_STREAMS, none after its
 * GOAWAY), a new connection when all are full, up to server-pool per
 * address (past that, nghttp2 queues the stream until a slot frees). A
 * connection without streams closes after server-idle. Under TLS
 * (px_session_tls_originate) "yes" offers ALPN h2 alone, "auto"
 * h2,http/1.1: a server that picks http/1.1 gets the waiting requests the
 * HTTP/1.1 way (http_dispatch again), and the next ones for server-idle.
 * Each connection's events (readable, writable, its handshake) feed
 * nghttp2, then drive each transaction whose stream has news. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "conn.h"
#include "http_h2_origin.h"
#include "http_h2_origin_int.h"
#include "http_int.h"
#include "parse.h"

/* Set up on first use (a thread-local cannot be initialised with its own
 * address). */
static _Thread_local struct h2o_conn_list h2o_conns;
static _Thread_local bool h2o_conns_init;

static void h2o_conn_fail(struct h2o_conn *c, const char *why);
static void h2o_conn_maybe_free(struct h2o_conn *c);
static void h2o_conn_handshake(struct h2o_conn *c);

/* Servers that picked http/1.1 under server-h2="auto": per worker, for
 * server-idle, so their requests go the HTTP/1.1 way at once. */
#define H2O_MEMO	32
struct h2o_memo {
	struct sockaddr_storage	 dst;
	char			 name[H2O_NAME_MAX];
	struct timeval		 until;
};
static _Thread_local struct h2o_memo h2o_memo[H2O_MEMO];
static _Thread_local unsigned h2o_memo_next;

static void
h2o_name(const struct http_txn *t, char *buf, size_t size)
{
	const struct http_state *h = t->conn;
	const char *n = px_session_tls_originates(h->s) ?
	    px_session_tls_server_name(h->s) : NULL;

	snprintf(buf, size, "%s", n != NULL ? n : "");
}

static bool
h2o_memo_h1(const struct sockaddr *dst, const char *name)
{
	struct timeval now;
	unsigned i;

	gettimeofday(&now, NULL);
	for (i = 0; i < H2O_MEMO; i++) {
		struct h2o_memo *m = &h2o_memo[i];

		if (m->dst.ss_family != 0 && timercmp(&now, &m->until, <) &&
		    memcmp(&m->dst, dst, px_sockaddr_len(dst)) == 0 &&
		    strcmp(m->name, name) == 0)
			return true;
	}
	return false;
}

static void
h2o_memo_add(const struct sockaddr *dst, const char *name, uint64_t ms)
{
	struct h2o_memo *m = &h2o_memo[h2o_memo_next++ % H2O_MEMO];
	struct timeval now, d = { (time_t)(ms / 1000),
	    (suseconds_t)(ms % 1000 * 1000) };

	memset(m, 0, sizeof(*m));
	memcpy(&m->dst, dst, px_sockaddr_len(dst));
	snprintf(m->name, sizeof(m->name), "%s", name);
	gettimeofday(&now, NULL);
	timeradd(&now, &d, &m->until);
}

bool
http_h2o_wanted(const struct http_txn *t, const struct sockaddr *dst)
{
	const struct http_state *h = t->conn;
	char name[H2O_NAME_MAX];

	if (t->is_connect || t->upgrade_ok)
		return false;
	switch (h->pol->server_h2) {
	case HTTP_SERVER_H2_YES:
		return true;
	case HTTP_SERVER_H2_AUTO:
		if (!px_session_tls_originates(h->s))
			return false;
		h2o_name(t, name, sizeof(name));
		return !h2o_memo_h1(dst, name);
	default:
		return false;
	}
}

/* ---- connections ------------------------------------------------------- */

/* Runs what the callbacks marked: each transaction with news is driven. */
static void
h2o_conn_notify(struct h2o_conn *c)
{
	struct http_h2o_stream *st, *next;

	c->busy++;
	for (st = TAILQ_FIRST(&c->streams); st != NULL; st = next) {
		next = TAILQ_NEXT(st, link);
		if (!st->notify || st->t == NULL)
			continue;
		st->notify = false;
		st->t->conn->progress++;
		px_session_active(st->t->conn->s);
		http_txn_drive(st->t);
		/* An HTTP/2 client's drive runs all its streams' transactions:
		 * others of this connection's streams may have gone with
		 * theirs. Looked for again from the start (each is notified
		 * once: the flag is cleared first). */
		next = TAILQ_FIRST(&c->streams);
	}
	c->busy--;
	http_h2o_conn_flush(c);
	h2o_conn_maybe_free(c);
}

static void
h2o_conn_unlist(struct h2o_conn *c)
{
	if (c->listed)
		TAILQ_REMOVE(&h2o_conns, c, link);
	c->listed = false;
}

/* The conn's buffers and events, then its socket (px_conn_close leaves
 * it open). */
static void
h2o_conn_close_fd(struct h2o_conn *c)
{
	px_conn_close(&c->io);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static void
h2o_conn_free(struct h2o_conn *c)
{
	h2o_conn_unlist(c);
	if (c->idle != NULL)
		event_free(c->idle);
	h2o_conn_close_fd(c);
	nghttp2_session_del(c->ng);
	free(c);
}

static void
h2o_conn_maybe_free(struct h2o_conn *c)
{
	if (c->busy != 0 || c->nstreams != 0)
		return;
	if (c->dead || c->goaway) {
		h2o_conn_free(c);
		return;
	}
	if (c->idle != NULL) {
		struct timeval tv = { (time_t)(c->idle_ms / 1000),
		    (suseconds_t)(c->idle_ms % 1000 * 1000) };

		evtimer_add(c->idle, &tv);
	}
}

/* Every stream on it fails (each transaction hears of it). */
static void
h2o_conn_fail(struct h2o_conn *c, const char *why)
{
	struct http_h2o_stream *st;

	if (c->why[0] == '\0')
		snprintf(c->why, sizeof(c->why), "%s", why);
	c->dead = true;
	h2o_conn_unlist(c);
	px_conn_read_enable(&c->io, false);
	px_conn_want_writable(&c->io, false);
	TAILQ_FOREACH(st, &c->streams, link) {
		if (st->closed && st->ended)
			continue;
		st->failed = true;
		st->closed = true;
		if (st->error == 0)
			st->error = NGHTTP2_CONNECT_ERROR;
		/* Never answered: it may go again on a new connection. */
		st->refused = !st->got_bytes;
		st->notify = true;
	}
}

void
http_h2o_conn_flush(struct h2o_conn *c)
{
	const uint8_t *data;
	ssize_t n = 0;

	if (c->dead || !c->connected || !c->ready)
		return;
	for (;;) {
		while (evbuffer_get_length(c->io.out) < H2O_OUT_HIGH &&
		    (n = nghttp2_session_mem_send(c->ng, &data)) > 0)
			evbuffer_add(c->io.out, data, (size_t)n);
		if (n < 0) {
			h2o_conn_fail(c, nghttp2_strerror((int)n));
			return;
		}
		if (evbuffer_get_length(c->io.out) == 0)
			break;
		if (px_conn_write_blocked(&c->io))
			return;	/* "writable" goes on */
		if (px_conn_send(&c->io) == -1) {
			h2o_conn_fail(c, strerror(errno));
			return;
		}
		if (evbuffer_get_length(c->io.out) != 0)
			return;
		if (!nghttp2_session_want_write(c->ng))
			break;
	}
	if (!nghttp2_session_want_read(c->ng) &&
	    !nghttp2_session_want_write(c->ng))
		c->goaway = true;
}

/* The server did not pick h2 under auto: each waiting transaction goes
 * the HTTP/1.1 way, and so do the next ones to it for server-idle. */
static void
h2o_conn_fallback(struct h2o_conn *c)
{
	struct http_h2o_stream *st;
	struct http_txn *t;
	size_t n;

	h2o_memo_add((struct sockaddr *)&c->dst, c->name, c->idle_ms < 1000 ?
	    1000 : c->idle_ms);
	c->dead = true;
	h2o_conn_unlist(c);
	px_conn_read_enable(&c->io, false);
	while ((st = TAILQ_FIRST(&c->streams)) != NULL) {
		t = st->t;
		if (t == NULL) {
			http_h2o_stream_detach(st);
			continue;
		}
		http_h2o_drop(t);
		t->srv_h2 = false;
		/* Sent again, the HTTP/1.1 way: counted once, in the
		 * transaction's bytes and in the session's. */
		n = evbuffer_get_length(t->head_out);
		t->req_bytes -= n < t->req_bytes ? n : t->req_bytes;
		px_session_unsent(t->conn->s, PX_TO_SERVER, n);
		http_dispatch(t, (struct sockaddr *)&c->dst);
		if (!t->conn->gone)
			http_txn_drive(t);
	}
}

/* TLS towards the server: its handshake, then what ALPN agreed. */
static void
h2o_conn_handshake(struct h2o_conn *c)
{
	if (px_conn_handshake(&c->io) == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		h2o_conn_fail(c, px_conn_strerror(&c->io, errno));
		return;
	}
	if (px_conn_alpn_is(&c->io, "h2")) {
		struct http_h2o_stream *st;

		c->ready = true;
		/* Bodies waited in their clients' input: they go now. */
		TAILQ_FOREACH(st, &c->streams, link)
			st->notify = true;
		http_h2o_conn_flush(c);
		return;
	}
	if (c->offer_h1) {
		h2o_conn_fallback(c);
		return;
	}
	h2o_conn_fail(c, "the server did not pick h2 (ALPN)");
}

static void
h2o_conn_readable(struct px_conn *io, void *arg)
{
	struct h2o_conn *c = arg;
	ssize_t n, r;

	c->busy++;
	if (!c->ready) {
		h2o_conn_handshake(c);
		c->busy--;
		h2o_conn_notify(c);
		return;
	}
	n = px_conn_recv(io, H2O_READ_MAX);
	if (n > 0) {
		const uint8_t *p = evbuffer_pullup(io->in, -1);
		size_t len = evbuffer_get_length(io->in);

		r = nghttp2_session_mem_recv(c->ng, p, len);
		evbuffer_drain(io->in, len);
		if (r < 0)
			h2o_conn_fail(c, nghttp2_strerror((int)r));
	} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR))
		h2o_conn_fail(c, n == 0 ? "server closed" : strerror(errno));
	c->busy--;
	if (!c->dead)
		http_h2o_conn_flush(c);
	h2o_conn_notify(c);
}

static void
h2o_conn_writable(struct px_conn *io, void *arg)
{
	struct h2o_conn *c = arg;

	c->busy++;
	if (!c->connected) {
		int err = px_upstream_error(io->fd);

		if (err != 0) {
			h2o_conn_fail(c, strerror(err));
			c->busy--;
			h2o_conn_notify(c);
			return;
		}
		c->connected = true;
		px_conn_read_enable(io, true);
	}
	if (!c->ready) {
		px_conn_want_writable(io, false);
		h2o_conn_handshake(c);
		c->busy--;
		h2o_conn_notify(c);
		return;
	}
	if (px_conn_send(io) == -1)
		h2o_conn_fail(c, strerror(errno));
	c->busy--;
	http_h2o_conn_flush(c);
	h2o_conn_notify(c);
}

static void
h2o_conn_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2o_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->nstreams != 0)
		return;
	(void)nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR);
	c->goaway = true;
	http_h2o_conn_flush(c);
	h2o_conn_free(c);
}

static struct h2o_conn *
h2o_conn_new(struct http_txn *t, const struct sockaddr *dst)
{
	struct http_state *h = t->conn;

	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	struct h2o_conn *c;
	const char *stage;
	nghttp2_settings_entry iv[3];
	uint32_t win = h->buffer > 65535 ? (uint32_t)(h->buffer < (1u << 30) ?
	    h->buffer : (1u << 30)) : 65535;
	int fd, rc;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->io.fd = -1;
	c->fd = -1;
	TAILQ_INIT(&c->streams);
	memcpy(&c->dst, dst, px_sockaddr_len(dst));
	c->idle_ms = h->pol->server_idle_ms ? h->pol->server_idle_ms : 1;
	if (nghttp2_session_callbacks_new(&cb) != 0 ||
	    nghttp2_option_new(&opt) != 0)
		goto fail;
	http_h2o_callbacks(cb);
	/* What the client side took is given back, not what arrived. */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	rc = nghttp2_session_client_new2(&c->ng, cb, c, opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	cb = NULL;
	opt = NULL;
	if (rc != 0)
		goto fail;
	iv[0].settings_id = NGHTTP2_SETTINGS_ENABLE_PUSH;
	iv[0].value = 0;
	iv[1].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
	iv[1].value = win;
	iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
	iv[2].value = (uint32_t)h->pol->lim.max_header_bytes;
	if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 3) != 0)
		goto fail;
	/* The connection's window: each stream's own bounds what waits. */
	(void)nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE,
	    0, 1 << 30);
	if ((fd = px_session_upstream_socket(h->s, dst, &stage)) == -1) {
		px_session_log(h->s, LOG_NOTICE, "http-upstream %s failed: %s",
		    stage, strerror(errno));
		goto fail;
	}
	c->fd = fd;
	if (px_conn_open(&c->io, px_session_base(h->s), fd, h2o_conn_readable,
	    h2o_conn_writable, c) == -1)
		goto fail;
	c->tls = px_session_tls_originates(h->s);
	c->tls_ctx = px_session_upstream_tls(h->s);
	c->mark = px_session_upstream_mark(h->s);
	c->unverified = px_session_upstream_unverified(h->s);
	c->offer_h1 = h->pol->server_h2 == HTTP_SERVER_H2_AUTO;
	c->ready = !c->tls;
	h2o_name(t, c->name, sizeof(c->name));
	if (c->tls && px_session_tls_originate(h->s, &c->io, dst,
	    c->offer_h1 ? "h2,http/1.1" : "h2") == -1)
		goto fail;
	c->idle = evtimer_new(px_session_base(h->s), h2o_conn_idle_cb, c);
	if (c->idle == NULL)
		goto fail;
	px_conn_want_writable(&c->io, true);
	if (!h2o_conns_init) {
		TAILQ_INIT(&h2o_conns);
		h2o_conns_init = true;
	}
	TAILQ_INSERT_TAIL(&h2o_conns, c, link);
	c->listed = true;
	px_session_count(h->s, HTTP_C_H2_SERVER_CONNECTIONS, 1);
	return c;
fail:
	if (cb != NULL)
		nghttp2_session_callbacks_del(cb);
	if (opt != NULL)
		nghttp2_option_del(opt);
	if (c->idle != NULL)
		event_free(c->idle);
	h2o_conn_close_fd(c);
	if (c->ng != NULL)
		nghttp2_session_del(c->ng);
	free(c);
	return NULL;
}

static unsigned
h2o_conn_slots(const struct h2o_conn *c)
{
	uint32_t max = nghttp2_session_get_remote_settings(c->ng,
	    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);

	/* Until the server's SETTINGS say (nghttp2: unlimited), a guess. */
	return max >= NGHTTP2_INITIAL_MAX_CONCURRENT_STREAMS ?
	    H2O_DEFAULT_STREAMS : max;
}

/* Whether c's connection-level send window is spent: the server has not
 * given back what its streams were sent (one stalled stream it never
 * reads, a server that keeps the connection's window for itself). A
 * request body put on it would wait behind them, however idle the
 * other connections. */
static bool
h2o_conn_window_spent(struct h2o_conn *c)
{
	return c->ready && nghttp2_session_get_remote_window_size(c->ng) <= 0;
}

/* A connection to dst with a free stream slot; a new one (fresh: never
 * an existing one) when all are full and server-pool allows, else the
 * least loaded (nghttp2 queues the stream). A request with a body skips
 * the connections whose window is spent while server-pool allows another
 * (past it, the least loaded of all). *reused: it was open. */
struct h2o_conn *
http_h2o_conn_pick(struct http_txn *t, const struct sockaddr *dst, bool fresh,
    bool *reused)
{
	struct http_state *h = t->conn;
	struct h2o_conn *c, *least = NULL, *least_any = NULL;
	unsigned n = 0, max = h->pol->server_pool ? h->pol->server_pool : 1;
	socklen_t len = px_sockaddr_len(dst);
	bool tls = px_session_tls_originates(h->s);
	bool body = t->req_body != HTTP_BODY_NONE;
	char name[H2O_NAME_MAX];

	h2o_name(t, name, sizeof(name));
	if (!h2o_conns_init) {
		TAILQ_INIT(&h2o_conns);
		h2o_conns_init = true;
	}
	*reused = true;
	if (!fresh)
		TAILQ_FOREACH(c, &h2o_conns, link) {
			if (c->dead || c->goaway || c->tls != tls ||
			    c->tls_ctx != px_session_upstream_tls(h->s) ||
			    c->mark != px_session_upstream_mark(h->s) ||
			    c->unverified !=
			    px_session_upstream_unverified(h->s) ||
			    memcmp(&c->dst, dst, len) != 0 ||
			    strcmp(c->name, name) != 0)
				continue;
			n++;
			if (least_any == NULL ||
			    c->nstreams < least_any->nstreams)
				least_any = c;
			if (body && h2o_conn_window_spent(c))
				continue;
			if (c->nstreams < h2o_conn_slots(c))
				return c;
			if (least == NULL || c->nstreams < least->nstreams)
				least = c;
		}
	if (n >= max && (least != NULL || least_any != NULL))
		return least != NULL ? least : least_any;
	*reused = false;
	return h2o_conn_new(t, dst);
}

/* st leaves its connection: reset if still open, its unread DATA's
 * window given back. */
void
http_h2o_stream_detach(struct http_h2o_stream *st)
{
	struct h2o_conn *c = st->conn;

	if (c == NULL)
		return;
	if (!c->dead && st->id > 0) {
		size_t left = evbuffer_get_length(st->body);

		if (left != 0)
			(void)nghttp2_session_consume_connection(c->ng, left);
		if (!st->closed)
			(void)nghttp2_submit_rst_stream(c->ng,
			    NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
		(void)nghttp2_session_set_stream_user_data(c->ng, st->id,
		    NULL);
	}
	TAILQ_REMOVE(&c->streams, st, link);
	c->nstreams--;
	st->conn = NULL;
	if (c->busy == 0) {
		http_h2o_conn_flush(c);
		h2o_conn_maybe_free(c);
	}
}

void
http_h2o_worker_exit(void)
{
	struct h2o_conn *c;

	struct http_h2o_stream *st;

	if (!h2o_conns_init)
		return;
	while ((c = TAILQ_FIRST(&h2o_conns)) != NULL) {
		/* A stream still on it forgets it (its session frees it). */
		while ((st = TAILQ_FIRST(&c->streams)) != NULL) {
			TAILQ_REMOVE(&c->streams, st, link);
			st->conn = NULL;
		}
		h2o_conn_free(c);
	}
}
