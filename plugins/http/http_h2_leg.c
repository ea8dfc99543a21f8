/* HTTP/2 towards clients: the legs (why they exist: http_h2.c): a
 * stream's request written to its leg as HTTP/1.1 (h2_request_head), its
 * body as the client's window lets it (consumed once written), the leg's
 * response read back no faster than the stream takes it (h2_leg_room;
 * http_h2_resp.c translates it), and the legs kept between streams.
 *
 * A leg is an HTTP/1.1 keep-alive client connection to a session of the
 * service. Once a stream's request and response leave it idle in
 * keep-alive (the request had no body and was no tunnel, the response
 * said neither "Connection: close" nor ended by closing, nothing was
 * reset, the config is the one the leg started under), it is kept for
 * the connection's next stream instead of a new socketpair and session
 * per stream: the request is the same bytes on the same kind of session,
 * judged as it would be on a new one, and the session's tag (the
 * http-request line's "proto=h2 stream=N") names the stream it serves.
 *
 * Kept legs are bounded by max-concurrent-streams, closed when their
 * session ends (its request-timeout, max-requests-per-connection), with
 * the connection, and on a reload (http_h2_config). One idle for half of
 * request-timeout or idle-timeout is not taken: its session may be about
 * to close it, and a request written then would get no answer.
 *
 * A stream that ends before its leg's exchange did (a reset either way,
 * its response cut, the connection gone) ends the leg's session at once,
 * as a TCP client's reset would (h2_leg_abort): its server request stops
 * there, not when the leg would next write to a closed socketpair
 * (MadeYouReset), and the request is logged with the reset. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "conn.h"
#include "http_int.h"

#include "http_h2_int.h"

struct h2_idle_leg {
	struct http_h2		*c;
	TAILQ_ENTRY(h2_idle_leg) link;
	int			 fd;
	/* Readable: the session closed it (or sent bytes nobody asked). */
	struct event		 watch;
	struct http_state	*peer;
	uint64_t		 since;		/* ms */
};

/* Where the leg px_session_spawn is opening now should point at its
 * state, and the connection spawning it (the spawn opens it at once, on
 * this thread). */
static _Thread_local struct http_state **h2_spawning;
static _Thread_local const struct http_state *h2_spawner;

int
http_h2_leg_opened(struct http_state *h)
{
	if (h2_spawning == NULL || px_session_tag(h->s)[0] == '\0')
		return 0;
	*h2_spawning = h;
	h->h2_parent_ref = h2_spawning;
	h2_spawning = NULL;
	/* The stream belongs to its connection's client: its certificate
	 * user is the leg's too (a leg's socketpair has no TLS). */
	return http_auth_leg_cert(h, h2_spawner);
}

void
http_h2_leg_reset_code(struct http_state *h, uint32_t code)
{
	struct h2_stream *st;

	/* Under way, a leg is a stream's (h2_peer_move parks only legs
	 * whose exchange ended whole): its parent ref is &st->peer. */
	if (h->h2_parent_ref == NULL || h->tx.method[0] == '\0')
		return;
	st = (struct h2_stream *)(void *)((char *)h->h2_parent_ref -
	    offsetof(struct h2_stream, peer));
	st->leg_code = code;
}

void
h2_leg_unlink(struct http_state **ref)
{
	if (ref != NULL)
		*ref = NULL;
}

/* The h2 side's pointer at a leg's state moves from *from to *to. */
static void
h2_peer_move(struct http_state **to, struct http_state **from)
{
	*to = *from;
	*from = NULL;
	if (*to != NULL)
		(*to)->h2_parent_ref = to;
}

static void
h2_peer_drop(struct http_state **ref)
{
	if (*ref != NULL)
		(*ref)->h2_parent_ref = NULL;
	*ref = NULL;
}

static uint64_t
h2_leg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
h2_idle_free(struct h2_idle_leg *i)
{
	event_del(&i->watch);
	if (i->fd != -1)
		close(i->fd);
	h2_peer_drop(&i->peer);
	free(i);
}

static void
h2_idle_remove(struct h2_idle_leg *i)
{
	TAILQ_REMOVE(&i->c->idle, i, link);
	i->c->nidle--;
}

static void
h2_idle_readable(evutil_socket_t fd, short what, void *arg)
{
	struct h2_idle_leg *i = arg;

	(void)fd, (void)what;
	h2_idle_remove(i);
	h2_idle_free(i);
}

void
h2_legs_idle_close(struct http_h2 *c)
{
	struct h2_idle_leg *i;

	while ((i = TAILQ_FIRST(&c->idle)) != NULL) {
		h2_idle_remove(i);
		h2_idle_free(i);
	}
}

/* Whether st's leg is idle in keep-alive, its session known and alive,
 * and may serve another stream of this connection. */
static bool
h2_leg_reusable(const struct h2_stream *st)
{
	const struct http_h2 *c = st->c;

	return st->leg_open && st->peer != NULL && st->keep_leg &&
	    st->leg_keeps && !st->reset && !st->leg_aborted && !st->shut &&
	    !st->leg.eof &&
	    st->resp == H2_RESP_DONE && st->eof && st->req_ended &&
	    evbuffer_get_length(st->leg.out) == 0 &&
	    evbuffer_get_length(st->leg.in) == 0 &&
	    !c->h->gone && !c->closing && !c->fatal && c->goaway == 0 &&
	    c->nidle < c->h->pol->h2_max_streams &&
	    !px_session_config_stale(c->h->s);
}

/* Keeps st's leg for a later stream. Its socket stays in epoll: the
 * watch is added while the leg's read event still holds it, and that
 * one goes after (no epoll_ctl either way). 0, or -1. */
static int
h2_leg_park(struct h2_stream *st)
{
	struct http_h2 *c = st->c;
	struct h2_idle_leg *i;

	if ((i = calloc(1, sizeof(*i))) == NULL)
		return -1;
	i->c = c;
	i->fd = st->fd;
	i->since = h2_leg_now_ms();
	event_assign(&i->watch, px_session_base(c->h->s), i->fd,
	    EV_READ | EV_PERSIST, h2_idle_readable, i);
	if (event_add(&i->watch, NULL) == -1) {
		free(i);
		return -1;
	}
	px_conn_close(&st->leg);
	st->leg_open = false;
	st->fd = -1;
	h2_peer_move(&i->peer, &st->peer);
	TAILQ_INSERT_HEAD(&c->idle, i, link);
	c->nidle++;
	return 0;
}

void
h2_leg_abort(struct h2_stream *st, const char *code, const char *why)
{
	struct http_state *peer = st->peer;

	if (!st->leg_open || st->leg_aborted)
		return;
	st->leg_aborted = true;
	px_conn_read_enable(&st->leg, false);
	px_conn_want_writable(&st->leg, false);
	if (peer != NULL) {
		struct http_txn *t = &peer->tx;

		/* What the client got of it, not what the leg wrote. */
		snprintf(t->leg_reset, sizeof(t->leg_reset), "%s", code);
		t->status = st->sent != 0 ? st->status : 0;
		t->resp_bytes = st->sent;
	}
	/* Its server connection closes now (not pooled: the request is
	 * under way), and a leg that has not read the request yet never
	 * sends it. */
	h2_leg_reset(st, why);
}

void
h2_leg_reset(struct h2_stream *st, const char *why)
{
	/* Straight to the leg's session: peer is set as the leg opens (at
	 * once, in px_session_spawn) and cleared only as its session
	 * closes, so without it there is nothing left to reset. */
	if (st->peer != NULL)
		px_session_leg_reset(st->c->h->s, st->peer->s, why);
}

void
h2_leg_end(struct h2_stream *st)
{
	/* Its stream ended whole: the leg's line, held until now, says
	 * the request was answered (a cut one went with h2_leg_abort). */
	if (st->peer != NULL)
		http_log_held(&st->peer->tx);
	if (st->leg_open) {
		st->c->legs--;
		if (!h2_leg_reusable(st) || h2_leg_park(st) == -1) {
			px_conn_close(&st->leg);
			st->leg_open = false;
		}
	}
	if (st->fd != -1)
		close(st->fd);
	st->fd = -1;
	h2_peer_drop(&st->peer);
}

/* The most recently kept leg that may still take a request; the others
 * met on the way are closed. NULL: none. */
static struct h2_idle_leg *
h2_leg_take(struct http_h2 *c)
{
	struct http_state *h = c->h;
	uint64_t limit = h->pol->request_timeout_ms, idle, now;
	struct h2_idle_leg *i;

	if ((idle = px_session_idle_timeout(h->s)) != 0 &&
	    (limit == 0 || idle < limit))
		limit = idle;
	now = h2_leg_now_ms();
	while ((i = TAILQ_FIRST(&c->idle)) != NULL) {
		h2_idle_remove(i);
		if (i->peer != NULL && !px_session_config_stale(h->s) &&
		    (limit == 0 || now - i->since < limit / 2))
			return i;
		h2_idle_free(i);
	}
	return NULL;
}

/* The kept leg's watch goes once the stream's read event holds the
 * socket (px_conn_adopt). */
static void
h2_idle_release(void *arg)
{
	struct h2_idle_leg *i = arg;

	i->fd = -1;	/* the stream's now */
	h2_idle_free(i);
}

/* st on a kept leg: its session named after st from now on. */
static int
h2_leg_resume(struct h2_stream *st, struct h2_idle_leg *i,
    const char *tag)
{
	struct http_state *h = st->c->h;

	if (px_conn_open(&st->leg, px_session_base(h->s), i->fd,
	    h2_leg_readable, h2_leg_writable, st) == -1) {
		h2_idle_free(i);
		return -1;
	}
	st->fd = i->fd;
	h2_peer_move(&st->peer, &i->peer);
	st->leg_id = px_session_id(st->peer->s);
	px_session_set_tag(st->peer->s, tag);
	px_conn_adopt(&st->leg, h2_idle_release, i);
	return 0;
}

/* A new leg: a socketpair, one end a new session of the service. */
static int
h2_leg_spawn(struct h2_stream *st, const char *tag)
{
	struct http_state *h = st->c->h;
	uint64_t id;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == -1)
		return -1;
	st->fd = sv[0];
	if (px_conn_open(&st->leg, px_session_base(h->s), st->fd,
	    h2_leg_readable, h2_leg_writable, st) == -1) {
		close(sv[1]);
		return -1;
	}
	h2_spawning = &st->peer;
	h2_spawner = h;
	id = px_session_spawn(h->s, sv[1], tag);
	h2_spawning = NULL;
	h2_spawner = NULL;
	if (id == 0) {
		px_conn_close(&st->leg);
		h2_peer_drop(&st->peer);
		return -1;
	}
	st->leg_id = id;
	st->c->legs_spawned++;
	return 0;
}

int
h2_leg_start(struct h2_stream *st)
{
	struct http_h2 *c = st->c;
	struct h2_idle_leg *i;
	char tag[48];

	snprintf(tag, sizeof(tag), "proto=h2 stream=%d", (int)st->id);
	if ((i = h2_leg_take(c)) != NULL ? h2_leg_resume(st, i, tag) == -1 :
	    h2_leg_spawn(st, tag) == -1)
		return -1;
	st->leg_open = true;
	c->legs++;
	evbuffer_add_buffer(st->leg.out, st->early);
	px_session_count(c->h->s, HTTP_C_H2_STREAMS, 1);
	c->streams++;
	px_conn_read_enable(&st->leg, true);
	h2_leg_flush(st);
	return 0;
}

/* ---- a stream's bytes to and from its leg ------------------------------ */

/* n bytes went into the leg: as many request body bytes may come from
 * the client (WINDOW_UPDATE). Counting the head and chunk framing too
 * opens the window early by at most their size. */
static void
h2_stream_consumed(struct h2_stream *st, size_t n)
{
	if (n > st->unconsumed || st->shut)
		n = st->unconsumed;
	if (n == 0)
		return;
	nghttp2_session_consume(st->c->ng, st->id, n);
	st->unconsumed -= n;
}

/* Writes to the leg. force: the kernel said it has room. */
static void
h2_leg_send(struct h2_stream *st, bool force)
{
	size_t before = evbuffer_get_length(st->leg.out);

	if (before == 0 || (!force && px_conn_write_blocked(&st->leg)))
		return;
	if (px_conn_send(&st->leg) == -1) {
		/* The leg stopped reading (it answered early, an error or a
		 * 413): what it has not taken is dropped; its response still
		 * comes. A tunnel's relay closed it: the TCP side failed. */
		evbuffer_drain(st->leg.out, evbuffer_get_length(st->leg.out));
		st->shut = true;
		if (st->tunnel_up && !st->reset)
			h2_stream_reset(st, NGHTTP2_CONNECT_ERROR);
	}
	h2_stream_consumed(st, before - evbuffer_get_length(st->leg.out));
}

/* Writes what is queued for the leg; its FIN once the request ended. */
void
h2_leg_flush(struct h2_stream *st)
{
	if (!st->leg_open)
		return;
	h2_leg_send(st, false);
	/* A leg that may serve another stream is not shut: the request's
	 * framing says where it ends. */
	if (st->req_ended && !st->shut && !st->keep_leg &&
	    h2_tunnel_may_shut(st) &&
	    evbuffer_get_length(st->leg.out) == 0) {
		st->shut = true;
		(void)shutdown(st->fd, SHUT_WR);
	}
}

/* How many response bytes the leg may still give this stream. */
size_t
h2_leg_room(const struct h2_stream *st)
{
	size_t held = evbuffer_get_length(st->leg.in) +
	    evbuffer_get_length(st->body);

	return held < HTTP_H2_STREAM_BUF ? HTTP_H2_STREAM_BUF - held : 0;
}


/* Appends src's bytes to out, leaving src as it is. */
static int
h2_add_copy(struct evbuffer *out, struct evbuffer *src)
{
	size_t len = evbuffer_get_length(src);

	if (len == 0)
		return 0;
	return evbuffer_add(out, evbuffer_pullup(src, -1), len);
}

static bool
h2_path_is_star(struct h2_stream *st)
{
	return evbuffer_get_length(st->path) == 1 &&
	    *evbuffer_pullup(st->path, 1) == '*';
}

/* The request line, Host and fields for the leg (RFC 9113 8.3.1). A Host
 * that names another authority than :authority goes on as a second Host:
 * the leg refuses the pair (400), as it refuses two in HTTP/1.1. */
int
h2_request_head(struct h2_stream *st, struct evbuffer *out)
{
	struct http_state *h = st->c->h;
	bool forward = px_session_dst(h->s)->sa_family == 0;
	/* An extended CONNECT (RFC 8441) is an Upgrade GET on the leg. */
	bool ext = st->protocol[0] != '\0';
	bool connect = strcmp(st->method, "CONNECT") == 0 && !ext;
	const char *method = ext ? "GET" : st->method;
	size_t alen = evbuffer_get_length(st->authority);
	size_t hlen = evbuffer_get_length(st->host);
	int rc = 0;

	rc |= evbuffer_add(out, method, strlen(method)) |
	    evbuffer_add(out, " ", 1);
	if (connect)
		rc |= h2_add_copy(out, st->authority);
	else {
		if (forward && alen != 0)
			rc |= evbuffer_add(out, st->scheme,
			    strlen(st->scheme)) | evbuffer_add(out, "://", 3) |
			    h2_add_copy(out, st->authority);
		/* OPTIONS * in absolute form has no path (RFC 9112 3.2.4). */
		if (!forward || alen == 0 || !h2_path_is_star(st))
			rc |= h2_add_copy(out, st->path);
	}
	rc |= evbuffer_add(out, " HTTP/1.1\r\n", 11);
	if (alen != 0) {
		rc |= evbuffer_add(out, "Host: ", 6) |
		    h2_add_copy(out, st->authority) |
		    evbuffer_add(out, "\r\n", 2);
		if (hlen != 0 && (hlen != alen || strncasecmp((const char *)
		    evbuffer_pullup(st->host, -1), (const char *)
		    evbuffer_pullup(st->authority, -1), alen) != 0))
			rc |= evbuffer_add(out, "Host: ", 6) |
			    evbuffer_add_buffer(out, st->host) |
			    evbuffer_add(out, "\r\n", 2);
	} else if (hlen != 0)
		rc |= evbuffer_add(out, "Host: ", 6) |
		    evbuffer_add_buffer(out, st->host) |
		    evbuffer_add(out, "\r\n", 2);
	rc |= evbuffer_add_buffer(out, st->fields);
	/* Cookie crumbs are one field again (RFC 9113 8.2.3). */
	if (evbuffer_get_length(st->cookie) != 0)
		rc |= evbuffer_add(out, "Cookie: ", 8) |
		    evbuffer_add_buffer(out, st->cookie) |
		    evbuffer_add(out, "\r\n", 2);
	if (st->chunked)
		rc |= evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
	rc |= evbuffer_add(out, "\r\n", 2);
	return rc == 0 ? 0 : -1;
}


void
h2_leg_readable(struct px_conn *lc, void *arg)
{
	struct h2_stream *st = arg;
	struct http_h2 *c = st->c;
	ssize_t n;

	(void)lc;
	px_session_active(c->h->s);
	n = px_conn_recv(&st->leg, h2_leg_room(st));
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		goto out;
	/* The leg's output moves as fast as the client's window opens: a
	 * slow reader's leg is not idle, nor its response cut at its
	 * idle-timeout while the client keeps reading. */
	if (n > 0 && st->peer != NULL) {
		px_session_active(st->peer->s);
		st->peer->progress++;	/* its last reply's grace too */
	}
	if (h2_leg_input(st) == -1) {
		h2_stream_reset(st, NGHTTP2_INTERNAL_ERROR);
		goto out;
	}
	if (n <= 0 && st->tunnel_up && h2_tunnel_failed(st, n)) {
		px_conn_read_enable(&st->leg, false);
		h2_stream_reset(st, NGHTTP2_CONNECT_ERROR);
		goto out;
	}
	if (n <= 0) {
		px_conn_read_enable(&st->leg, false);
		if (st->resp == H2_RESP_BODY && st->body_kind == HTTP_BODY_CLOSE &&
		    n == 0) {
			st->resp = H2_RESP_DONE;
			st->eof = true;
		} else if (st->resp != H2_RESP_DONE) {
			/* The leg ended the stream without (all of) a
			 * response: the analyser aborted it, or the server
			 * failed inside it (with the code it asked for). */
			h2_stream_reset(st, st->leg_code != 0 ? st->leg_code :
			    NGHTTP2_INTERNAL_ERROR);
			goto out;
		}
	} else
		px_conn_read_enable(&st->leg, h2_leg_room(st) > 0);
	if (st->deferred && (st->eof || evbuffer_get_length(st->body) != 0)) {
		st->deferred = false;
		nghttp2_session_resume_data(c->ng, st->id);
	}
out:
	http_h2_drive(c);
}

void
h2_leg_writable(struct px_conn *lc, void *arg)
{
	struct h2_stream *st = arg;
	struct http_h2 *c = st->c;

	(void)lc;
	px_session_active(c->h->s);
	/* The kernel has room: write (h2_leg_flush skips a blocked conn). */
	h2_leg_send(st, true);
	h2_leg_flush(st);
	http_h2_drive(c);
}

int
h2_add_field(struct evbuffer *b, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	return evbuffer_add(b, name, nlen) | evbuffer_add(b, ": ", 2) |
	    evbuffer_add(b, value, vlen) | evbuffer_add(b, "\r\n", 2);
}

int
h2_leg_bufs(struct h2_stream *st)
{
	if (st->host != NULL)
		return 0;
	if ((st->host = evbuffer_new()) == NULL ||
	    (st->cookie = evbuffer_new()) == NULL ||
	    (st->held = evbuffer_new()) == NULL ||
	    (st->trailers = evbuffer_new()) == NULL)
		return -1;	/* h2_stream_free frees those made */
	return 0;
}

/* A request field (not a pseudo-header) in the leg's text: Host, the
 * cookie crumbs joined, the rest as they came. 0, or -1. */
int
h2_leg_field(struct h2_stream *st, const uint8_t *name, size_t nlen,
    const uint8_t *value, size_t vlen)
{
	if (h2_leg_bufs(st) == -1)
		return -1;
	if (nlen == 4 && memcmp(name, "host", 4) == 0)
		return evbuffer_add(st->host, value, vlen);
	if (nlen == 6 && memcmp(name, "cookie", 6) == 0)
		/* An empty crumb adds nothing, not a stray "; ". */
		return vlen == 0 ? 0 : (evbuffer_get_length(st->cookie) != 0 ?
		    evbuffer_add(st->cookie, "; ", 2) : 0) |
		    evbuffer_add(st->cookie, value, vlen);
	if (h2_tunnel_drops(st, name, nlen))
		return 0;
	return h2_add_field(st->fields, name, nlen, value, vlen);
}

/* A stream whose fields went to req alone that is a leg's after all
 * (never, as h2_txn_bound is decided before the first field; kept
 * true should that change): its fields for the leg, from req. */
int
h2_leg_fields_from_req(struct h2_stream *st)
{
	const struct http_h2_req *r = &st->req;
	unsigned i;

	for (i = 0; i < r->n; i++) {
		const uint8_t *nm = (const uint8_t *)r->buf + r->f[i].no;

		if (r->f[i].nl != 0 && nm[0] == ':')
			continue;
		if (h2_leg_field(st, nm, r->f[i].nl, (const uint8_t *)r->buf +
		    r->f[i].vo, r->f[i].vl) != 0)
			return -1;
	}
	st->in_req = false;
	return 0;
}

/* Whether st, its pseudo-headers in, starts as a transaction (with
 * as_txn): any request not malformed, a CONNECT or an extended one too
 * (its tunnel: http_h2_stream.c). */
bool
h2_txn_bound(const struct h2_stream *st)
{
	return !st->req.bad;
}
