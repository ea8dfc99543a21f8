/* HTTP/2 client streams as transactions of their connection's session
 * (issue 36): a request (with <auth> or not: a stream's credentials are
 * checked as the connection's, http_auth.c) is made a parsed head from
 * its fields (http_h2_req.c) and runs through the same engine as an
 * HTTP/1.1 client's request (http_request_start, judged in
 * http_judge.c, the steps in http.c and http_upstream.c), its body read
 * from the stream's input (its DATA, framed as chunks when it came
 * without content-length, its trailers after them, as the engine reads
 * an HTTP/1.1 client's; the window opened as the bytes move on), its
 * response written by the stream's writer (http_h2_txn.c) as HEADERS,
 * DATA and trailers: no socketpair, no second session, no second parse
 * of its head. Its bodies are scanned, sniffed for <content> and audited
 * by the transaction's own scan (http_scan.c), as an HTTP/1.1 client's
 * are: a response held until its verdict keeps its HEADERS and its
 * END_STREAM behind it. A stream whose request is malformed is reset
 * before it starts (http_h2.c).
 *
 * A CONNECT (RFC 9113 8.5) and an extended CONNECT (RFC 8441: the
 * HTTP/1.1 Upgrade it stands for, http_h2_req.c) are such transactions
 * too, their tunnel in the engine once the server's 2xx (101) is out
 * (http_h2s_tunnel): no socketpair, no core relay. Until then the
 * client's DATA wait in the stream's input, bounded by its window (a
 * refused CONNECT's are dropped unread). Then they go to the server
 * connection's output while that holds less than `buffer` (the window
 * opens as they reach that output, not as the server takes them: up to
 * `buffer` wait there, which bounds it), and the server is read while
 * the stream holds less than `buffer` (its bytes out as DATA as the
 * client's window lets them): flow control end to end. END_STREAM and
 * FIN cross both ways; a stream that closes with the client's last DATA
 * (the server's FIN came first) leaves its server connection to the
 * worker until those are written (h2s_tunnel_last), and one whose
 * server's last bytes wait for the client's window ends once they went
 * out (or is reset at idle-timeout, h2_reset_held);
 * the server's reset or error is RST_STREAM(CONNECT_ERROR) after what it
 * sent; a tunnel cut from the client's side (its RST_STREAM, the
 * connection gone, idle-timeout) is passed on as a TCP RST.
 *
 * A transaction ends (http_h2s_done, a refusal, a cut) before its stream
 * does: its server connection goes back to the pool (or is closed) at
 * once, and its http-request line waits for the stream's end, to say
 * what the client got (to-client: the HEADERS and DATA bytes sent) and
 * whether it was reset. Its timers (response-timeout, grpc-timeout) and
 * its idle-timeout are looked at on the connection's tick
 * (HTTP_H2_TICK_MS) while any transaction is open.
 *
 * Also the connection's checks on streams whose client's window holds
 * them, and the streams it answers itself (a header list too big to
 * judge: 431, no transaction). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <nghttp2/nghttp2.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "bucket.h"	/* px_clock_ms() */
#include "conn.h"
#include "http_h2_txn.h"
#include "http_int.h"

#include "http_h2_int.h"

struct h2_txn {
	struct http_txn		 t;
	struct http_h2w		 w;
	struct h2_stream	*st;
	/* The transaction is over (t.ended): completed, its response all
	 * given to the writer; else it was cut. */
	bool			 completed;
	uint64_t		 deadline_ms;	/* its timer; 0 none */
	uint64_t		 active_ms;	/* when it last moved */
	uint64_t		 seen;		/* its bytes then */
	/* A tunnel: the client's END_STREAM passed on as the server
	 * connection's FIN. */
	bool			 fin_sent;
};

static void	h2s_tunnel_last(struct h2_txn *x);

/* The stream transaction t is (its writer's owner: http_h2_txn.h). */
static struct h2_txn *
h2s_of(struct http_txn *t)
{
	return t->h2w->owner;
}

/* n request bytes left the stream's input: as many more may come
 * (WINDOW_UPDATE). Chunk framing counted too opens the window early by
 * at most its size. */
static void
h2s_consume(struct h2_stream *st, size_t n)
{
	if (n > st->unconsumed)
		n = st->unconsumed;
	if (n == 0)
		return;
	st->unconsumed -= n;
	(void)nghttp2_session_consume(st->c->ng, st->id, n);
}

/* The engine took request bytes from the stream's input, wherever it
 * did (a step, the transaction's start with the DATA that came with its
 * HEADERS, its server found after a DNS answer): they are given back. */
static void
h2s_in_taken(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)b;
	if (info->n_deleted != 0)
		h2s_consume(arg, info->n_deleted);
}

/* An extended CONNECT's Sec-WebSocket-Key for its HTTP/1.1 server (RFC
 * 6455 4.1: a fresh nonce; its Accept goes back to nobody). 0, or -1. */
static int
h2s_ws_key(struct h2_stream *st)
{
	unsigned char nonce[16];

	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return -1;
	EVP_EncodeBlock((unsigned char *)st->req.ws_key, nonce,
	    sizeof(nonce));
	return 0;
}

int
h2_txn_start(struct h2_stream *st)
{
	struct http_h2 *c = st->c;
	struct http_state *h = c->h;
	static _Thread_local struct http_head m;
	struct h2_txn *x;
	const char *why = NULL;
	int rc;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return -1;
	if (st->req.protocol != -1 && h2s_ws_key(st) == -1) {
		free(x);
		return -1;
	}
	if (http_txn_init(&x->t, h, &http_engine_h2) == -1 ||
	    http_h2w_init(&x->w, c->ng, st->id, st->is_head, st->tunnel ||
	    st->req.protocol != -1) == -1 ||
	    evbuffer_add_cb(x->w.in, h2s_in_taken, st) == NULL) {
		http_h2w_free(&x->w);
		http_txn_free(&x->t, false);
		free(x);
		return -1;
	}
	x->st = st;
	x->w.ext = st->req.protocol != -1;
	x->t.h2w = &x->w;
	x->w.owner = x;
	x->active_ms = px_clock_ms();
	st->tx = x;
	c->ntxn++;
	c->streams++;
	px_session_count(h->s, HTTP_C_H2_STREAMS, 1);
	/* DATA that came with the HEADERS. */
	evbuffer_add_buffer(x->w.in, st->early);
	rc = http_h2_req_head(&st->req, px_session_dst(h->s)->sa_family == 0,
	    st->chunked, &h->pol->lim, &m, &why);
	http_request_start(&x->t, rc == 0 ? &m : NULL, rc, why);
	/* The head is judged and sent on (or refused): its fields go. */
	http_h2_req_free(&st->req);
	return 0;
}

void
h2_txn_step_all(struct http_h2 *c)
{
	struct h2_stream *st;

	TAILQ_FOREACH(st, &c->list, link) {
		if (st->tx == NULL || st->tx->t.ended)
			continue;
		/* A tunnel's step is the engine's own. */
		if (st->tx->t.tunnel)
			http_h2s_tunnel_step(&st->tx->t);
		else
			http_txn_step(&st->tx->t);
		if (c->h->gone)
			return;
	}
}

struct evbuffer *
h2_txn_in(struct h2_stream *st)
{
	return st->tx->w.in;
}

bool
h2_txn_ended(const struct h2_stream *st)
{
	return st->tx != NULL && st->tx->t.ended;
}

size_t
h2_txn_queued(const struct h2_stream *st)
{
	return st->tx != NULL && st->tx->w.buf != NULL ?
	    evbuffer_get_length(st->tx->w.buf) : 0;
}

/* x's transaction is over: nothing more of the engine's runs on it. */
static void
h2s_ended(struct h2_txn *x, bool completed, bool keep_server)
{
	struct http_txn *t = &x->t;

	t->ended = true;
	x->completed = completed;
	/* A check it waits for stops (unless other streams wait for it). */
	http_auth_txn_gone(t);
	/* A tunnel cut (the client's RST_STREAM, its connection gone, an
	 * idle-timeout) is no clean end: its server gets a TCP RST, not a
	 * FIN (RFC 9113 8.5). */
	if (!completed && (t->is_connect || t->tunnel) && t->srv.io != NULL &&
	    t->srv.io->fd >= 0) {
		struct linger lg = { 1, 0 };

		(void)setsockopt(t->srv.io->fd, SOL_SOCKET, SO_LINGER, &lg,
		    sizeof(lg));
	}
	/* Its audit records wait for the stream's end, with its line:
	 * whether each body went whole is known now, before req and resp
	 * say it is over. */
	t->scan[PX_TO_SERVER].went = t->req == HTTP_REQ_DONE;
	t->scan[PX_TO_CLIENT].went = t->resp == HTTP_RESP_DONE;
	/* The request's rest is dropped, its window opened again. */
	if (x->w.in != NULL) {
		evbuffer_drain(x->w.in, evbuffer_get_length(x->w.in));
		h2s_consume(x->st, x->st->unconsumed);
	}
	if (!completed && t->verdict == NULL)
		t->verdict = "error";
	/* Cut: its scans stop (a verdict to come must not release what
	 * they hold onto a stream that is being reset), their records
	 * written, as an HTTP/1.1 session's close does. */
	if (!completed)
		http_scan_close(t);
	/* A server name still being resolved (forward mode) is not, so
	 * that its answer sends nothing for a transaction that is over. */
	if (t->dns != NULL)
		evdns_getaddrinfo_cancel(t->dns);
	t->dns = NULL;
	http_server_drop(t, keep_server);
	t->req = HTTP_REQ_DONE;
	t->resp = HTTP_RESP_NONE;
	x->deadline_ms = 0;
}

void
http_h2s_done(struct http_txn *t, bool keep_server)
{
	struct h2_txn *x = h2s_of(t);

	if (t->ended)
		return;
	/* A body that ended by its server's close (or one whose trailers
	 * never came) ends its stream here. */
	if (x->w.streaming && !x->w.eof)
		(void)http_h2w_end(&x->w, NULL, t->conn->pol);
	h2s_ended(x, true, keep_server);
	/* Nothing ends the stream, or the writer failed: it is reset. */
	if (x->w.failed || (!x->w.submitted && !x->w.done))
		h2_stream_reset(x->st, NGHTTP2_INTERNAL_ERROR);
}

void
http_h2s_abort(struct http_txn *t, uint32_t code, const char *why)
{
	struct h2_txn *x = h2s_of(t);

	(void)why;
	if (x == NULL) {
		http_h2w_reset(t->h2w, code != 0 ? code :
		    NGHTTP2_INTERNAL_ERROR);
		return;
	}
	/* A tunnel's end other than both FINs: its TCP side failed. */
	if (code == 0)
		code = t->tunnel ? NGHTTP2_CONNECT_ERROR :
		    NGHTTP2_INTERNAL_ERROR;
	if (!t->ended)
		h2s_ended(x, false, false);
	if (x->st->reset)
		return;
	if (x->w.streaming && !x->w.done) {
		/* What the server sent goes before the reset; the stream counts as reset from now. */
		x->st->reset = true;
		http_h2w_reset_after(&x->w, code);
	} else
		h2_stream_reset(x->st, code);
}

/* ---- tunnels (CONNECT, extended CONNECT) ------------------------------- */

/* The client's bytes and end as the stream closes (h2_txn_end): all of
 * what came goes to the server connection's output, its FIN behind it.
 * What the kernel does not take at once is not lost with the stream: the
 * connection goes to the worker (px_session_upstream_flush), written out
 * as the server reads, then closed (reset after idle-timeout without
 * progress), past the client connection's own end and holding none of
 * its other streams. (The to-server bytes count as they reach the
 * output, as the step's do.) */
static void
h2s_tunnel_last(struct h2_txn *x)
{
	struct http_txn *t = &x->t;
	struct px_conn *io = t->srv.io;
	size_t n;

	if (io == NULL || !t->srv.connected)
		return;
	n = evbuffer_get_length(x->w.in);
	t->req_bytes += n;
	px_session_account(t->conn->s, PX_TO_SERVER, n);
	evbuffer_add_buffer(io->out, x->w.in);
	x->fin_sent = true;
	if (px_conn_shutdown(io) == 0 && px_conn_send(io) == 0 &&
	    (evbuffer_get_length(io->out) != 0 || !io->shut)) {
		px_session_upstream_flush(t->conn->s, io,
		    px_session_idle_timeout(t->conn->s));
		t->srv.io = NULL;
		t->srv.connected = false;
	}
	h2s_ended(x, true, false);
}

void
http_h2s_tunnel(struct http_txn *t)
{
	struct h2_txn *x = h2s_of(t);
	struct http_state *h = t->conn;

	/* Its HEADERS were refused (an extended CONNECT answered 2xx
	 * rather than 101): the stream is reset, nothing moves. */
	if (x->w.done || x->w.failed || !x->w.tunnel) {
		http_h2s_abort(t, NGHTTP2_INTERNAL_ERROR, "no tunnel");
		return;
	}
	t->tunnel = true;
	x->st->tunnel_up = true;
	t->req = HTTP_REQ_DONE;
	t->resp = HTTP_RESP_BODY;
	t->resp_body = HTTP_BODY_CLOSE;
	http_txn_timer(t, 0);
	px_session_count(h->s, HTTP_C_TUNNELS, 1);
	h->progress++;
}

void
http_h2s_tunnel_step(struct http_txn *t)
{
	struct h2_txn *x = h2s_of(t);
	struct http_state *h = t->conn;
	struct px_conn *io = t->srv.io;
	size_t n, q;

	if (t->ended || io == NULL)
		return;
	/* The client's DATA, as far as the server's output has room under
	 * `buffer`: the window opens only as they leave the stream's
	 * input (h2s_in_taken), so a server that does not read stops the
	 * client. */
	n = evbuffer_get_length(x->w.in);
	q = evbuffer_get_length(io->out);
	if (n != 0 && q < h->buffer) {
		if (n > h->buffer - q)
			n = h->buffer - q;
		evbuffer_remove_buffer(x->w.in, io->out, n);
		t->req_bytes += n;
		px_session_account(h->s, PX_TO_SERVER, n);
		h->progress++;
	}
	/* END_STREAM: the server's FIN, behind every byte. */
	if (x->st->req_ended && !x->fin_sent &&
	    evbuffer_get_length(x->w.in) == 0) {
		x->fin_sent = true;
		if (px_conn_shutdown(io) == -1) {
			http_h2s_tunnel_gone(t, errno != 0 ? errno : EIO);
			return;
		}
	}
	if (evbuffer_get_length(io->out) != 0 && !px_conn_write_blocked(io) &&
	    px_conn_send(io) == -1) {
		http_h2s_tunnel_gone(t, errno);
		return;
	}
	/* The server's bytes, as DATA (the writer takes them from buf as
	 * the client's window lets it); their end, END_STREAM. */
	if ((n = evbuffer_get_length(io->in)) != 0) {
		evbuffer_add_buffer(x->w.buf, io->in);
		t->resp_bytes += n;
		px_session_account(h->s, PX_TO_CLIENT, n);
		h->progress++;
	}
	if (io->eof && !x->w.eof && http_h2w_end(&x->w, NULL, h->pol) == -1) {
		http_h2s_abort(t, NGHTTP2_INTERNAL_ERROR, "error: HTTP/2");
		return;
	}
	/* Both ends passed on: the transaction is over, its stream ends
	 * as the writer's buffer empties. */
	if (x->w.eof && x->fin_sent && evbuffer_get_length(io->out) == 0) {
		http_h2s_done(t, false);
		return;
	}
	/* The server is read while the stream holds less than `buffer`. */
	px_conn_read_enable(io, !io->eof &&
	    http_txn_room(t, PX_TO_CLIENT) > 0);
}

void
http_h2s_tunnel_gone(struct http_txn *t, int err)
{
	struct h2_txn *x = h2s_of(t);
	struct px_conn *io = t->srv.io;

	if (t->ended)
		return;
	if (err == 0) {
		/* Its FIN: the step passes it on behind its bytes. */
		if (io != NULL)
			io->eof = true;
		return;
	}
	/* Reset or failed: what it sent goes first, then
	 * RST_STREAM(CONNECT_ERROR) (RFC 9113 8.5). */
	if (io != NULL && evbuffer_get_length(io->in) != 0)
		evbuffer_add_buffer(x->w.buf, io->in);
	px_session_log(t->conn->s, LOG_NOTICE, "http-error reason=\"tunnel: "
	    "server-error: %s\" proto=h2 stream=%d", strerror(err),
	    (int)x->st->id);
	http_h2s_abort(t, NGHTTP2_CONNECT_ERROR, "server-error");
}

void
h2_txn_cut(struct h2_stream *st, uint32_t code)
{
	struct h2_txn *x = st->tx;

	/* Reset under its request (the client's window held it, the client
	 * closed, nghttp2 refused a frame): its line says so. */
	if (!x->t.ended) {
		snprintf(x->t.rst_code, sizeof(x->t.rst_code), "%s",
		    nghttp2_http2_strerror(code));
		h2s_ended(x, false, false);
	}
}

void
http_h2s_timer(struct http_txn *t, uint64_t ms)
{
	h2s_of(t)->deadline_ms = ms != 0 ? px_clock_ms() + ms : 0;
}

/* ---- the engine of a stream's transaction ------------------------------ */

static void
h2e_cut(struct http_txn *t, enum px_end_by by, uint32_t code,
    const char *reason)
{
	(void)by;	/* the stream ends, not the connection */
	http_h2s_abort(t, code, reason);
}

/* A refusal or proxyd's own answer ends the stream; the connection goes
 * on. */
static void
h2e_refused(struct http_txn *t, bool keep, const char *reason)
{
	(void)keep;
	(void)reason;
	http_h2s_done(t, false);
}

static void
h2e_answered(struct http_txn *t, enum px_end_by by, const char *reason)
{
	(void)by;
	(void)reason;
	http_h2s_done(t, false);
}

const struct http_engine_ops http_engine_h2 = {
	.name = "h2",
	.drive = http_drive,
	.timer = http_h2s_timer,
	.cut = h2e_cut,
	.done = http_transaction_done,
	.refused = h2e_refused,
	.answered = h2e_answered,
	.tunnel = http_h2s_tunnel,
	.tunnel_gone = http_h2s_tunnel_gone,
};

void
h2_txn_tick(struct http_h2 *c)
{
	struct http_state *h = c->h;
	uint64_t now = px_clock_ms(), idle = px_session_idle_timeout(h->s);
	struct h2_stream *st;

	TAILQ_FOREACH(st, &c->list, link) {
		struct h2_txn *x = st->tx;
		struct http_txn *t;
		uint64_t seen;

		if (x == NULL || x->t.ended)
			continue;
		t = &x->t;
		seen = t->req_bytes + t->resp_bytes + st->sent;
		if (seen != x->seen) {
			x->seen = seen;
			x->active_ms = now;
		}
		if (x->deadline_ms != 0 && now >= x->deadline_ms) {
			x->deadline_ms = 0;
			(void)http_txn_timeout(t);
		} else if (idle != 0 && now - x->active_ms >= idle &&
		    h2_txn_queued(st) == 0) {
			/* Nothing moved for idle-timeout, and not for the
			 * client's window (h2_reset_held's): as an HTTP/1.1
			 * client's session would, it ends. */
			px_session_count(h->s, HTTP_C_TIMEOUTS, 1);
			http_txn_abort(t, PX_END_TIMEOUT,
			    "error: idle-timeout");
		}
		if (h->gone)
			return;
	}
}

void
h2_txn_end(struct h2_stream *st, uint32_t code, bool closed)
{
	struct http_h2 *c = st->c;
	struct h2_txn *x = st->tx;
	struct http_txn *t = &x->t;
	char tag[48];

	/* A tunnel whose stream closed cleanly (the server's end went out,
	 * then the client's END_STREAM came): the client's last bytes and
	 * its FIN go to the server before it closes. */
	if (!t->ended && t->tunnel && !closed && code == NGHTTP2_NO_ERROR)
		h2s_tunnel_last(x);
	/* Answered whole before its request's end (an early response, its
	 * END_STREAM sent), then reset by its client, which had all of it
	 * and stops its upload: its bodies' records say how each went,
	 * written before its line says reset. */
	if (x->completed && st->answered) {
		http_audit_end(t, PX_TO_SERVER);
		http_audit_end(t, PX_TO_CLIENT);
	}
	/* The client got all of it only from a stream closed whole; one
	 * reset under its request or its response says so (reset=). One proxyd cut itself (its server failed) was
	 * said when it was cut. The RST_STREAM(NO_ERROR) that stops a
	 * client's request after its whole answer (RFC 9113 8.1: a refused
	 * CONNECT's DATA, an early 413's body) cuts nothing. */
	if ((!t->ended || x->completed) && (closed || (st->reset &&
	    !(st->answered && code == NGHTTP2_NO_ERROR)) ||
	    code != NGHTTP2_NO_ERROR) && t->rst_code[0] == '\0')
		snprintf(t->rst_code, sizeof(t->rst_code), "%s", closed ?
		    "connection-closed" : nghttp2_http2_strerror(code));
	if (!t->ended)
		h2s_ended(x, false, false);
	if (t->rst_code[0] != '\0')
		t->verdict = "reset";
	/* Reset before its HEADERS went: the client got no status. */
	if (st->sent == 0 && t->rst_code[0] != '\0')
		t->status = 0;
	t->resp_bytes = st->sent;
	snprintf(tag, sizeof(tag), "proto=h2 stream=%d", (int)st->id);
	http_log_request_as(t, tag);
	http_auth_txn_gone(t);
	http_txn_free(t, false);
	/* The stream is closed (or its session goes): nothing more to
	 * nghttp2 from its writer. */
	http_h2w_closed(&x->w);
	http_h2w_free(&x->w);
	free(x);
	st->tx = NULL;
	c->ntxn--;
}

/* ---- streams whose client's window holds them ------------------------- */

/* Whether st has response bytes to send that its client's window does
 * not let go. */
static bool
h2_stream_held(struct http_h2 *c, const struct h2_stream *st)
{
	if (st->tx == NULL || h2_txn_queued(st) == 0)
		return false;
	/* A reset queued behind the response's bytes (its server failed,
	 * its deadline ran out: http_h2w_reset_after) waits for the same
	 * window: that stream is held too. */
	if (st->reset && (st->tx->w.rst_after == 0 || st->tx->w.done))
		return false;
	return nghttp2_session_get_stream_remote_window_size(c->ng,
	    st->id) <= 0 || nghttp2_session_get_remote_window_size(c->ng) <= 0;
}

/* A stream whose client keeps its window shut holds its server
 * request and up to `buffer` here; PINGs or other streams keep the
 * connection from being idle. Such a stream is reset once held for
 * idle-timeout without a DATA frame going out (nginx: send_timeout,
 * between two writes; a slow reader is not held), and the connection's
 * HTTP_H2_HELD_MAX-th one ends it. Looked for whenever the connection
 * does something: with nothing at all, the idle timer ends it anyway. */
void
h2_reset_held(struct http_h2 *c)
{
	uint64_t idle = px_session_idle_timeout(c->h->s), now;
	struct h2_stream *st;

	if (idle == 0 || c->closing || c->ended_by_us || c->goaway != 0 ||
	    (now = px_clock_ms()) < c->next_held_check)
		return;
	c->next_held_check = now + HTTP_H2_HELD_CHECK_MS;
	TAILQ_FOREACH(st, &c->list, link) {
		if (!h2_stream_held(c, st)) {
			st->held_since = 0;
			continue;
		}
		if (st->held_since == 0)
			st->held_since = now;
		if (now - st->held_since < idle)
			continue;
		h2_event(c, HTTP_H2_FLOW_CONTROL, st->id, "send window shut "
		    "for longer than idle-timeout");
		h2_stream_reset(st, NGHTTP2_CANCEL);
		if (++c->held_resets < HTTP_H2_HELD_MAX)
			continue;
		/* The others go with the connection. */
		(void)h2_end_connection(c, HTTP_H2_FLOW_CONTROL, 0,
		    NGHTTP2_ENHANCE_YOUR_CALM, "too many streams held with a "
		    "shut send window");
		break;
	}
}

/* ---- streams the connection answers itself ----------------------------- */

/* A response proxyd makes itself, without a transaction (no request to judge:
 * the client's head could not be read whole). */
void
h2_reply_bare(struct h2_stream *st, const char *status)
{
	nghttp2_nv nv = { (uint8_t *)":status", (uint8_t *)status, 7, 3,
	    NGHTTP2_NV_FLAG_NONE };

	nghttp2_submit_response(st->c->ng, st->id, &nv, 1, NULL);
	st->eof = true;
}

/* The http-request line (and counters) of a stream the connection
 * answered itself, its head never having been made a request. */
void
h2_log_refused(struct h2_stream *st, int status, const char *rule)
{
	struct http_state *h = st->c->h;
	struct http_txn *t = &h->tx;
	char tag[48];
	size_t alen = evbuffer_get_length(st->authority);
	size_t plen = evbuffer_get_length(st->path);

	gettimeofday(&t->t_start, NULL);
	http_copy(t->method, sizeof(t->method), st->method[0] != '\0' ?
	    st->method : "-", st->method[0] != '\0' ? strlen(st->method) : 1);
	http_copy(t->host, sizeof(t->host), alen != 0 ? (const char *)
	    evbuffer_pullup(st->authority, -1) : "", alen);
	http_copy(t->path, sizeof(t->path), plen != 0 ? (const char *)
	    evbuffer_pullup(st->path, -1) : "-", plen != 0 ? plen : 1);
	t->status = status;
	t->verdict = "deny";
	snprintf(t->rule, sizeof(t->rule), "%s", rule);
	t->req_bytes = t->resp_bytes = 0;
	px_session_count(h->s, HTTP_C_REQUESTS, 1);
	px_session_count(h->s, HTTP_C_DENIED, 1);
	snprintf(tag, sizeof(tag), "proto=h2 stream=%d", (int)st->id);
	http_log_request_as(t, tag);
}
