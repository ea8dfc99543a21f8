/* http: an HTTP/1.x analyser (a client that chooses HTTP/2, by ALPN or
 * h2c's preface, is handed to http_h2.c, whose streams are transactions of
 * the same engine). It owns both sides' I/O (the client socket and one server
 * connection at a time, or with server-h2="yes" a stream on one of the
 * worker's shared HTTP/2 server connections, http_h2_origin.c: the
 * response comes back from either as a parsed head, judged by
 * http_judge_response in http_judge.c), parses every head strictly, enforces the <http>
 * policy, streams bodies without copying them (evbuffer chains move from
 * one side to the other), and keeps server connections in the worker's
 * pool between requests, so many client connections share few server
 * connections: only those at a message boundary both ways (a server that
 * answered before it had the whole request still waits for the rest: such
 * a connection is closed).
 *
 * One request is in flight per client connection (its transaction,
 * struct http_txn, is the connection's tx): pipelined requests
 * wait, unread past `buffer`, in the client input and are answered in
 * order. A response cut off ends the connection with a reset, after
 * what was queued for the client before the cut (http_abort). CONNECT and
 * accepted Upgrades end inspection: both sockets go to the core's relay
 * (splice); an HTTP/2 stream's tunnel has no socket of its own to give,
 * and stays a transaction (http_h2_stream.c).
 *
 * This file is the state machine: the transaction flow, tunnels and the
 * px_driver callbacks; heads are judged in http_judge.c, bodies stream
 * in http_body.c, a transaction's line is written by http_txn.c (the
 * other files: see http_int.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <syslog.h>

#include <event2/buffer.h>
#include <event2/dns.h>

#include "bucket.h"	/* px_clock_ms() */
#include "conn.h"
#include "http_h2_origin.h"
#include "http_head.h"
#include "auth.h"
#include "http_int.h"
#include "log.h"
#include "parse.h"

static const char *const http_counter_names[] = {
	"requests", "denied", "bad_request", "bad_response", "retried",
	"tunnels", "timeouts", "h2_connections", "h2_streams",
	"h2_server_connections", "h2_server_streams", NULL,
};

static void http_next_request(struct http_state *h);

/* ---- small helpers ----------------------------------------------------- */

static void
http_timer_set(struct http_state *h, uint64_t ms)
{
	px_session_timer(h->s, ms);
}

/* ---- the engine of an HTTP/1.1 client's transaction ------------------- */

static void http_refusal_linger(struct http_txn *t);

static void
http_h1e_timer(struct http_txn *t, uint64_t ms)
{
	http_timer_set(t->conn, ms);
}

/* The connection is the response's framing: it ends, reset (code is an
 * HTTP/2 stream's, none here). */
static void
http_h1e_cut(struct http_txn *t, enum px_end_by by, uint32_t code,
    const char *reason)
{
	(void)code;
	http_abort(t->conn, by, reason);
}

static void
http_h1e_answered(struct http_txn *t, enum px_end_by by, const char *reason)
{
	http_refusal_linger(t);
	http_close_when_flushed(t->conn, by, reason);
}

static void
http_h1e_refused(struct http_txn *t, bool keep, const char *reason)
{
	struct http_state *h = t->conn;

	if (!keep) {
		px_session_set_rule(h->s, t->rule);
		http_log_request(t);
		http_refusal_linger(t);
		http_close_when_flushed(h, PX_END_POLICY, reason);
		return;
	}
	evbuffer_drain(h->c->in, t->head_len);
	t->head_len = 0;
	h->client_keep = true;
	t->req = HTTP_REQ_DONE;
	t->resp = HTTP_RESP_NONE;
	h->progress++;
	http_transaction_done(t);
}

/* ---- ending ------------------------------------------------------------ */

/* RFC 9112 9.6: closing with the client's bytes unread sends a reset,
 * that may destroy the response it has not read yet (it is still sending
 * the body an early answer did not wait for). So once the response is
 * written our side ends (a FIN), and what the client still sends is read
 * and dropped until its end, PX_FINISH_GRACE_MS at most (http_timer_cb). */
static void
http_linger(struct http_state *h)
{
	evbuffer_drain(h->c->in, evbuffer_get_length(h->c->in));
	if (!h->c->shut_pending) {
		if (px_conn_shutdown(h->c) == -1) {
			px_session_finish(h->s, h->end_by, h->end_reason);
			return;
		}
		http_timer_set(h, PX_FINISH_GRACE_MS);
	}
	px_conn_read_enable(h->c, true);
}

/* proxyd refuses a request whose body the client may still be sending (a
 * 413 over max-body, a 502, a 401 to an upload): its close lingers as
 * after a server's early answer. */
static void
http_refusal_linger(struct http_txn *t)
{
	struct http_state *h = t->conn;

	h->linger = t->body_said && !h->client_eof;
}

/* http_drive finishes the session once the client output drains. */
void
http_close_when_flushed(struct http_state *h, enum px_end_by by,
    const char *reason)
{
	if (h->cut)
		return;		/* a cut's end and flush stand */
	h->closing = true;
	h->end_by = by;
	snprintf(h->end_reason, sizeof(h->end_reason), "%s", reason);
	px_conn_read_enable(h->c, false);
	http_server_drop(&h->tx, false);
	http_timer_set(h, PX_FINISH_GRACE_MS);
	h->progress++;
	h->grace_progress = h->progress;
}

/* A cut's flush looks this often at what the kernel still holds for the
 * client: no event says what the client acknowledged. */
#define HTTP_CUT_POLL_MS	20

/* A cut (http_abort) whose client is still owed bytes: the responses
 * before, whole, and what came of the cut one. They are written, and
 * the reset waits until the client has acknowledged them all (a reset
 * drops what the kernel still holds); PX_FINISH_GRACE_MS at most while
 * they do not shrink (a client that stopped reading). Either way the
 * session ends as the cut said. Looked at after every write and every
 * HTTP_CUT_POLL_MS. */
static void
http_cut_wait(struct http_state *h)
{
	size_t pending = evbuffer_get_length(h->c->out) +
	    px_conn_unacked(h->c);
	uint64_t now = px_clock_ms();

	if (pending < h->cut_pending)
		h->cut_since = now;
	h->cut_pending = pending;
	if (pending == 0 || now - h->cut_since >= PX_FINISH_GRACE_MS) {
		px_session_end(h->s, h->end_by, h->end_reason);
		return;
	}
	http_timer_set(h, HTTP_CUT_POLL_MS);
}

void
http_abort(struct http_state *h, enum px_end_by by, const char *reason)
{
	struct http_txn *t = &h->tx;

	http_log_request(t);
	if (h->cut)
		return;		/* the first cut's end stands */
	/* An HTTP/2 connection (its streams are cut one by one) and a
	 * tunnel's handoff end at once, as does a client owed nothing. */
	if (h->h2 == NULL && !h->tunnel &&
	    h->c != NULL && (evbuffer_get_length(h->c->out) != 0 ||
	    px_conn_unacked(h->c) != 0)) {
		http_txn_stop(t, false);
		http_close_when_flushed(h, by, reason);
		h->cut = true;
		h->cut_pending = SIZE_MAX;
		http_cut_wait(h);
		return;
	}
	http_server_drop(t, false);
	px_session_end(h->s, by, reason);
}

static void http_client_failed(struct http_state *h, int err);

/* The request went to the server whole: all of it read from the client,
 * nothing held back for a verdict or a type, nothing left to write. */
static bool
http_request_sent(const struct http_txn *t)
{
	return t->req == HTTP_REQ_DONE &&
	    !http_scan_holding(t, PX_TO_SERVER) && (t->srv.io == NULL ||
	    evbuffer_get_length(t->srv.io->out) == 0) &&
	    http_h2o_request_sent(t);
}

/* The response ended before the request was all sent: the server
 * answered early (an error, a redirect, nginx's "return 200", which
 * never read the body) and still waits for the rest of the body, which
 * would never come: the next request on its connection would be read
 * as that body, and what follows it as a request no rule judged. So
 * the connection is closed, never pooled. A body held for its verdict
 * or its type is dropped unsent and unjudged (its scan cancelled: its
 * verdict must not fall on the next body), and its record says so. */
static void
http_request_unsent(struct http_txn *t)
{
	struct http_state *h = t->conn;
	struct evbuffer *out = http_server_out(t);
	uint64_t unsent = out != NULL ? evbuffer_get_length(out) : 0;
	bool scanned = t->scan[PX_TO_SERVER].on;

	unsent += http_scan_unsent(t, PX_TO_SERVER, "early-response");
	/* to-server: what the server was sent. */
	t->req_bytes -= unsent < t->req_bytes ? unsent : t->req_bytes;
	if (t->req == HTTP_REQ_BODY && t->req_body == HTTP_BODY_LENGTH)
		unsent += t->req_left;
	t->srv.keep = false;
	t->srv.boundary = false;
	px_session_log(h->s, LOG_INFO, "http-early-response status=%d "
	    "unsent=%llu%s%s (the server answered before the request's end: "
	    "its %s)", t->status, (unsigned long long)unsent,
	    t->req == HTTP_REQ_BODY && t->req_body != HTTP_BODY_LENGTH ?
	    "+" : "", scanned ? " scan=cancelled" : "",
	    t->h2o != NULL ? "stream cancelled" : "connection closed");
}

/* The response is complete (and so is the request, unless the server
 * answered early). */
void
http_transaction_done(struct http_txn *t)
{
	struct http_state *h = t->conn;
	bool sent = http_request_sent(t);
	bool keep_server;
	size_t room;
	ssize_t n;

	if (!sent)
		http_request_unsent(t);
	else if (t->srv.io != NULL)
		t->srv.boundary = true;
	keep_server = t->srv.keep && sent;
	if (t->h2w != NULL) {
		http_h2s_done(t, keep_server);
		return;
	}
	room = http_txn_room(t, PX_TO_SERVER);

	/* A client not read while its last request was in flight: what it
	 * did meanwhile (an end, a reset, bytes), as reading it would have
	 * found. (A small read: no big buffer reserved for an EAGAIN.) */
	if (!h->client_keep && !h->client_eof && !h->c->rd_on && (n =
	    px_conn_recv(h->c, room < 512 ? room : 512)) <= 0) {
		if (n == 0)
			h->client_eof = true;
		else if (errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
			http_client_failed(h, errno);
			return;
		}
	}
	/* Answered before its body was all sent (an early 413, say): where
	 * the next request would start is unknown, so none is read, and
	 * the close lingers while the rest of the body comes. */
	if (t->req != HTTP_REQ_DONE || px_session_config_stale(h->s))
		h->client_keep = false;
	h->linger = t->req != HTTP_REQ_DONE && !h->client_eof;
	http_log_request(t);
	if (keep_server && h->client_keep && !h->client_eof) {
		/* Stays with this client while it keeps asking the same
		 * server: no pool round trip, no event churn. It goes to the
		 * pool when the client leaves. */
		t->srv.got_bytes = false;
	} else
		http_server_drop(t, keep_server);
	if (t->req_kept)
		evbuffer_drain(t->head_out, evbuffer_get_length(t->head_out));
	t->req_kept = false;
	t->resp = HTTP_RESP_NONE;
	t->req = HTTP_REQ_HEAD;
	/* Not the next request's: one refused before it is judged (a bad
	 * head, 408, 431) gets its error page's body. */
	t->is_head = t->body_said = false;
	if (!h->client_keep || (h->client_eof &&
	    evbuffer_get_length(h->c->in) == 0)) {
		/* Everything is sent once the output drains. */
		http_close_when_flushed(h, h->client_eof ? PX_END_CLIENT :
		    PX_END_SERVER, h->client_eof ? "client-closed" :
		    "server-closed");
		return;
	}
	http_timer_set(h, h->pol->request_timeout_ms);
	h->grace_progress = h->progress;
	http_next_request(h);
}

/* ---- tunnels (CONNECT, Upgrade) --------------------------------------- */

/* Both outputs are in the kernel and both inputs moved across: the rest
 * is a plain stream for the core's relay (splice). */
static void
http_tunnel_handoff(struct http_state *h)
{
	struct http_txn *t = &h->tx;
	struct px_conn *io;

	http_timer_set(h, 0);
	http_log_request(t);
	px_session_count(h->s, HTTP_C_TUNNELS, 1);
	/* The core takes both sockets over. */
	io = t->srv.io;
	t->srv.io = NULL;
	h->c = NULL;
	if (px_session_tunnel(h->s, io) == -1)
		px_session_end(h->s, PX_END_PROXY,
		    "error: cannot start the tunnel relay");
}

void
http_start_tunnel(struct http_txn *t)
{
	struct http_state *h = t->conn;
	size_t n;

	/* An HTTP/2 stream's tunnel stays in the engine: its DATA to the
	 * server connection, the server's bytes out as DATA. */
	if (t->h2w != NULL) {
		http_h2s_tunnel(t);
		return;
	}
	h->tunnel = true;
	h->progress++;
	px_conn_read_enable(h->c, false);
	px_conn_read_enable(t->srv.io, false);
	n = evbuffer_get_length(h->c->in);
	evbuffer_add_buffer(t->srv.io->out, h->c->in);
	px_session_account(h->s, PX_TO_SERVER, n);
	n = evbuffer_get_length(t->srv.io->in);
	evbuffer_add_buffer(h->c->out, t->srv.io->in);
	px_session_account(h->s, PX_TO_CLIENT, n);
}

const struct http_engine_ops http_engine_h1 = {
	.name = "http/1.1",
	.drive = http_drive,
	.timer = http_h1e_timer,
	.cut = http_h1e_cut,
	.done = http_transaction_done,
	.refused = http_h1e_refused,
	.answered = http_h1e_answered,
	.tunnel = http_start_tunnel,
};

/* ---- driving ----------------------------------------------------------- */

/* The client closed its side between requests: the responses it is owed
 * (the last one may still be in its output) go out whole, then the
 * session ends. A head it began and cannot finish now is only logged. */
static void
http_client_closed_idle(struct http_state *h)
{
	struct http_txn *t = &h->tx;

	if (evbuffer_get_length(h->c->in) != 0)
		px_session_log(h->s, LOG_NOTICE, "http-error reason="
		    "\"client closed inside a request head\"");
	/* Its idle server connection outlives it in the pool. */
	http_server_drop(t, t->srv.keep);
	http_close_when_flushed(h, PX_END_CLIENT, "client-closed");
}

/* Parses and handles the next request head, if one is there. */
static void
http_next_request(struct http_state *h)
{
	struct http_txn *t = &h->tx;
	struct evbuffer *cin = h->c->in;
	size_t len = evbuffer_get_length(cin), want;
	const char *buf, *why;
	ssize_t end;
	int rc;

	if (h->closing || h->tunnel || t->req != HTTP_REQ_HEAD ||
	    t->resp != HTTP_RESP_NONE || len == 0)
		return;
	/* h2c with prior knowledge (RFC 9113 3.3): the preface is not an
	 * HTTP/1.1 head, though its first 18 bytes would parse as one. */
	if (http_h2_preface(h) != 0)
		return;
	want = len < h->pol->lim.max_header_bytes + 4 ? len :
	    h->pol->lim.max_header_bytes + 4;
	buf = (const char *)evbuffer_pullup(cin, (ssize_t)want);
	if (buf == NULL) {
		http_abort(h, PX_END_PROXY, "error: out of memory");
		return;
	}
	end = http_head_end(buf, want, h->pol->lim.max_header_bytes,
	    &h->head_scan);
	if (end <= 0 && (rc = http_head_judge(buf, want, true, &h->pol->lim,
	    &h->req_judge, &why)) != 0) {
		/* A bad line is refused as it arrives, not when (if ever)
		 * the empty line comes (and before max-header-bytes, which
		 * says less). */
		http_head_restart(&h->head_scan, &h->req_judge);
		h->progress++;
		http_copy(t->method, sizeof(t->method), "-", 1);
		http_copy(t->path, sizeof(t->path), "-", 1);
		gettimeofday(&t->t_start, NULL);
		px_session_count(h->s, HTTP_C_REQUESTS, 1);
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, rc, why);
		return;
	}
	if (end == 0) {
		if (h->client_eof)	/* nothing more comes to complete it */
			http_client_closed_idle(h);
		return;
	}
	http_head_restart(&h->head_scan, &h->req_judge);
	h->progress++;
	if (end < 0) {
		http_copy(t->method, sizeof(t->method), "-", 1);
		http_copy(t->path, sizeof(t->path), "-", 1);
		gettimeofday(&t->t_start, NULL);
		px_session_count(h->s, HTTP_C_BAD_REQUEST, 1);
		http_error(t, 431, "request head over max-header-bytes");
		return;
	}
	http_handle_request(t, buf, (size_t)end);
}

/* The client closed its side. */
static void
http_client_eof(struct http_state *h)
{
	struct http_txn *t = &h->tx;

	h->client_eof = true;
	h->progress++;
	px_conn_read_enable(h->c, false);
	if (h->closing || h->tunnel)
		return;
	if (t->req == HTTP_REQ_HEAD && t->resp == HTTP_RESP_NONE) {
		http_client_closed_idle(h);
		return;
	}
	if (t->req == HTTP_REQ_BODY || (t->req == HTTP_REQ_WAIT &&
	    t->req_body != HTTP_BODY_NONE)) {
		t->verdict = "error";
		http_abort(h, PX_END_CLIENT_FAIL,
		    "client-closed: inside a request body");
		return;
	}
	/* The request is complete: its response still goes out, and so do
	 * those of requests pipelined before the FIN (http_next_request
	 * ends the session when no complete one is left). */
}

static void
http_client_failed(struct http_state *h, int err)
{
	struct http_txn *t = &h->tx;

	t->verdict = t->verdict ? t->verdict : "error";
	http_log_request(t);
	http_server_drop(t, false);
	if (h->cut) {
		/* It left while a cut was written to it: the cut's end. */
		px_session_end(h->s, h->end_by, h->end_reason);
		return;
	}
	px_session_endf(h->s, PX_END_CLIENT_FAIL, "client-error: %s",
	    h->c != NULL ? px_conn_strerror(h->c, err) : strerror(err));
}

/* Runs every step that can make progress, writes what is queued, and sets
 * which sockets to read. Called at the end of every event. */
void
http_drive(struct http_state *h)
{
	struct http_txn *t = &h->tx;
	int rounds;

	/* An HTTP/2 connection drives its streams' transactions. */
	if (h->h2 != NULL) {
		http_h2_drive_conn(h);
		return;
	}
	for (rounds = 0; rounds < 16 && !h->gone; rounds++) {
		uint64_t before = h->progress;

		if (!h->closing && !h->tunnel) {
			if (t->req == HTTP_REQ_HEAD)
				http_next_request(h);
			/* h2c took over: http_h2.c drives from now on. */
			if (h->h2 != NULL)
				return;
			else if (t->req == HTTP_REQ_BODY)
				http_pump_request(t);
			if (h->gone)
				return;
			if (t->srv.io != NULL && t->srv.connected) {
				http_server_input(t);
				if (h->gone)
					return;
			} else if (t->h2o != NULL) {
				http_h2o_input(t);
				if (h->gone)
					return;
			}
		}
		if (evbuffer_get_length(h->c->out) != 0 && !px_conn_write_blocked(h->c) &&
		    px_conn_send(h->c) == -1) {
			http_client_failed(h, errno);
			return;
		}
		if (t->srv.io != NULL && t->srv.connected &&
		    evbuffer_get_length(t->srv.io->out) != 0 && !px_conn_write_blocked(t->srv.io) &&
		    px_conn_send(t->srv.io) == -1) {
			http_server_gone(t, errno);
			continue;
		}
		if (h->closing && h->cut) {
			http_cut_wait(h);
			return;
		}
		if (h->closing) {
			if (evbuffer_get_length(h->c->out) != 0)
				return;
			if (h->linger && !h->client_eof)
				http_linger(h);
			else
				px_session_finish(h->s, h->end_by,
				    h->end_reason);
			return;
		}
		if (h->tunnel) {
			if (evbuffer_get_length(h->c->out) == 0 &&
			    evbuffer_get_length(t->srv.io->out) == 0)
				http_tunnel_handoff(h);
			return;
		}
		if (h->progress == before)
			break;
	}
	if (h->gone)
		return;
	/* Read a side only while its unprocessed input is under `buffer`;
	 * not a client whose request is in and that said it closes after
	 * it (caught up with at the response's end: no epoll_ctl). */
	px_conn_read_enable(h->c, !h->client_eof &&
	    http_txn_room(t, PX_TO_SERVER) > 0 && (h->client_keep ||
	    t->req != HTTP_REQ_DONE || t->is_connect || t->upgrade_ok));
	if (t->srv.io != NULL && t->srv.connected)
		px_conn_read_enable(t->srv.io, !t->srv.io->eof &&
		    http_txn_room(t, PX_TO_CLIENT) > 0);
}

/* ---- events ------------------------------------------------------------ */

static void
http_client_rd_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;
	ssize_t n;

	(void)c;
	px_session_active(h->s);
	n = px_conn_recv(h->c, http_txn_room(&h->tx, PX_TO_SERVER));
	if (n > 0)
		h->progress++;
	else if (n == 0)
		http_client_eof(h);
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		http_client_failed(h, errno);
		return;
	}
	if (!h->gone)
		http_drive(h);
}

static void
http_client_wr_cb(struct px_conn *c, void *arg)
{
	struct http_state *h = arg;

	(void)c;
	px_session_active(h->s);
	if (px_conn_send(h->c) == -1) {
		http_client_failed(h, errno);
		return;
	}
	h->progress++;
	http_drive(h);
}

static void
http_timer_cb(struct px_session *s, void *st)
{
	struct http_state *h = st;
	struct http_txn *t = &h->tx;

	(void)s;
	if (h->h2 != NULL) {
		http_h2_timer(h);
		return;
	}
	if (h->closing && h->cut) {
		http_cut_wait(h);
		return;
	}
	if (t->req == HTTP_REQ_AUTH) {
		/* The check is bounded by its authenticator's timeout: its
		 * answer (503 if it ran out) ends the wait. */
		http_timer_set(h, h->pol->request_timeout_ms);
		return;
	}
	if (h->closing && h->linger && h->c->shut_pending) {
		/* Lingered long enough: the reply had its time. */
		px_session_finish(h->s, h->end_by, h->end_reason);
		return;
	}
	if (h->closing) {
		/* A client that reads the last reply, however slowly,
		 * gets all of it: the grace is for one that stopped. */
		if (h->progress != h->grace_progress) {
			h->grace_progress = h->progress;
			http_timer_set(h, PX_FINISH_GRACE_MS);
			return;
		}
		px_session_end(h->s, PX_END_TIMEOUT,
		    "error: client does not read the reply");
		return;
	}
	/* The last response still going out to a client that reads it,
	 * however slowly: the wait for the next request starts once it is
	 * written. One that read nothing for as long is closed. */
	if (t->req == HTTP_REQ_HEAD && t->resp == HTTP_RESP_NONE &&
	    evbuffer_get_length(h->c->out) != 0 &&
	    h->progress != h->grace_progress) {
		h->grace_progress = h->progress;
		http_timer_set(h, h->pol->request_timeout_ms);
		return;
	}
	/* What the transaction waited for (its response, its verdict, its
	 * h2 server's window, its grpc-timeout); else the wait for the
	 * next request head. */
	if (http_txn_timeout(t)) {
		if (!h->gone && h->h2 == NULL)
			http_drive(h);
		return;
	}
	if (t->req == HTTP_REQ_HEAD && t->resp == HTTP_RESP_NONE) {
		if (evbuffer_get_length(h->c->in) == 0) {
			/* An idle keep-alive connection: just close it. */
			px_session_finish(h->s, PX_END_TIMEOUT,
			    "client-idle: request-timeout");
			return;
		}
		gettimeofday(&t->t_start, NULL);
		http_copy(t->method, sizeof(t->method), "-", 1);
		http_copy(t->path, sizeof(t->path), "-", 1);
		http_error(t, 408, "no complete request head within request-timeout");
	}
	if (!h->gone)
		http_drive(h);
}

/* ---- analyser ---------------------------------------------------------- */

static int
http_on_open(struct px_session *s, void *st)
{
	struct http_state *h = st;
	struct http_txn *t = &h->tx;

	h->s = s;
	h->pol = px_session_policy(s);
	h->c = px_session_client_conn(s);
	h->buffer = px_session_buffer(s);
	h->transparent = px_session_is_transparent(s);
	if (http_txn_init(t, h, &http_engine_h1) == -1 || h->c == NULL)
		return -1;
	http_timer_set(h, h->pol->request_timeout_ms);
	/* ALPN chose HTTP/2: the preface comes next. */
	if (h->pol->h2 && px_session_client_alpn_is(s, "h2"))
		return http_h2_start(h);
	px_conn_read_first(h->c);
	return 0;
}

/* A rolling upgrade's hand-over (core/handover.h): an HTTP/1 client
 * idle in keep-alive (no request under way, nothing read of the next,
 * nothing to log, no scan, no <auth> state: a connection's proven
 * identity, Negotiate's, is not passed) changes processes; the new one reads its next
 * request as on a new connection. Its server connection is let go here
 * (to the pool, which a draining process closes): the new process opens
 * its own. */
#define HTTP_HO_VERSION	1

struct http_ho {
	uint32_t	version;
	unsigned	nreq;
};

static ssize_t
http_handover_save(struct px_session *s, void *st, void *buf, size_t len)
{
	struct http_state *h = st;
	struct http_txn *t = &h->tx;
	struct http_ho *o = buf;
	int d;

	(void)s;
	if (len < sizeof(*o) || h->gone || h->h2 != NULL ||
	    t->req != HTTP_REQ_HEAD ||
	    t->resp != HTTP_RESP_NONE || h->closing || h->tunnel ||
	    h->client_eof || t->connecting || t->dns != NULL ||
	    h->head_scan != 0 || t->method[0] != '\0' ||
	    h->auth != NULL ||
	    h->c == NULL || evbuffer_get_length(h->c->in) != 0)
		return -1;
	for (d = 0; d < 2; d++)
		if (t->scan[d].icap != NULL || t->scan[d].on ||
		    t->scan[d].spool != NULL)
			return -1;
	if (t->srv.io != NULL)
		http_server_drop(t, t->srv.keep && t->srv.boundary);
	memset(o, 0, sizeof(*o));
	o->version = HTTP_HO_VERSION;
	o->nreq = h->nreq;
	return (ssize_t)sizeof(*o);
}

static int
http_handover_load(struct px_session *s, void *st, const void *buf,
    size_t len)
{
	struct http_state *h = st;
	const struct http_ho *o = buf;

	if (len != sizeof(*o) || o->version != HTTP_HO_VERSION ||
	    http_on_open(s, st) == -1)
		return -1;
	h->nreq = o->nreq;
	return 0;
}

static void
http_on_close(struct px_session *s, void *st)
{
	struct http_state *h = st;
	struct http_txn *t = &h->tx;

	(void)s;
	h->gone = true;
	http_h2_close(h);
	/* An idle server connection outlives its client in the pool. */
	http_txn_free(t, t->resp == HTTP_RESP_NONE && t->srv.keep &&
	    !h->tunnel);
	http_auth_close(h);	/* after the records that name its user */
	h->c = NULL;	/* the core's */
}

/* The client's conn; the server's come to http_server_rd_cb and
 * http_server_wr_cb directly (http_server_open). */
static void
http_readable(struct px_session *s, void *st)
{
	struct http_state *h = st;

	(void)s;
	if (h->h2 != NULL)
		http_h2_readable(h);
	else
		http_client_rd_cb(h->c, h);
}

static void
http_writable(struct px_session *s, void *st)
{
	struct http_state *h = st;

	(void)s;
	if (h->h2 != NULL)
		http_h2_writable(h);
	else
		http_client_wr_cb(h->c, h);
}

/* Bytes the client sent that the loop has not read yet (a request written
 * just before the reload), in the socket or decrypted already (TLS):
 * true also when that cannot be told. */
static bool
http_client_pending(const struct http_state *h)
{
	return evbuffer_get_length(h->c->in) != 0 || px_conn_unread(h->c);
}

/* A reload: the session keeps the policy it was accepted under (its own
 * reference), so it serves no request after the one under way, if any
 * (http_judge answers that one with Connection: close). An idle
 * keep-alive connection, that served requests and has no other under
 * way, closes now (RFC 9112 9.6: the client retries a request that
 * crossed the close). Not one that served none yet (just accepted, or
 * its first request not read yet): the client could not tell that close
 * from a failure, so its first request is served, under the policy it
 * was accepted with, and ends it; request-timeout bounds one that sends
 * nothing. Nor one whose next request is in the socket: closing with
 * unread bytes would send a reset; that request is served the same way. */
static void
http_on_config(struct px_session *s, void *st)
{
	struct http_state *h = st;
	struct http_txn *t = &h->tx;

	if (h->gone || h->closing || h->tunnel || h->c == NULL)
		return;
	if (h->h2 != NULL) {
		http_h2_config(h);
		return;
	}
	if (h->nreq != 0 && t->req == HTTP_REQ_HEAD &&
	    t->resp == HTTP_RESP_NONE && !http_client_pending(h))
		px_session_finish(s, PX_END_SHUTDOWN,
		    "reload: idle keep-alive connection closed");
}

static const struct px_driver http_driver = {
	.on_readable = http_readable,
	.on_writable = http_writable,
	.on_timer = http_timer_cb,
	.on_config = http_on_config,
};

/* The admin's session list: the request in flight, or how many came. */
static void
http_describe(const struct px_session *s, const void *st, char *buf,
    size_t len)
{
	const struct http_state *h = st;
	const struct http_txn *t = &h->tx;

	(void)s;
	if (h->h2 != NULL)
		http_h2_describe(h, buf, len);
	else if (t->method[0] != '\0' && t->status != 0)
		snprintf(buf, len, "%s %s%s -> %d (request %u)", t->method,
		    t->host, t->path, t->status, h->nreq);
	else if (t->method[0] != '\0')
		snprintf(buf, len, "%s %s%s (request %u)", t->method, t->host,
		    t->path, h->nreq);
	else
		snprintf(buf, len, "idle after %u request%s", h->nreq,
		    h->nreq == 1 ? "" : "s");
}

static void
http_code_name(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "%u", i + 100);
}

static void
http_proto_name(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "%s", i == 0 ? "http/1.1" : "h2");
}

static void
http_class_name(unsigned i, char *buf, size_t size)
{
	snprintf(buf, size, "%uxx", i + 1);
}

/* Indexed by enum http_series. */
static const struct px_series http_series[] = {
	{ "proxyd_http_responses_total", "HTTP responses by status code.",
	    PX_SERIES_COUNTER, "code", 500, http_code_name, false },
	{ "proxyd_http_request_duration_seconds", "HTTP requests by the time "
	    "from their first byte to the end of the response, by status "
	    "class.", PX_SERIES_HISTOGRAM, "code", 5, http_class_name, true },
	{ "proxyd_http2_errors_total", "HTTP/2 protocol errors and "
	    "defences by kind (client_reset: RST_STREAM frames received).",
	    PX_SERIES_COUNTER, "kind", HTTP_H2_KINDS, http_h2_kind_name,
	    false },
	{ "proxyd_http_requests_total", "HTTP requests by the protocol the "
	    "client spoke (http/1.1 includes 1.0).", PX_SERIES_COUNTER,
	    "proto", 2, http_proto_name, false },
};

const struct px_analyser http_analyser = {
	.name = "http",
	.state_size = sizeof(struct http_state),
	.policy_load = http_policy_load,
	.policy_free = http_policy_free,
	.on_open = http_on_open,
	.on_data = NULL,
	.on_close = http_on_close,
	.counters = http_counter_names,
	.series = http_series,
	.nseries = sizeof(http_series) / sizeof(http_series[0]),
	.describe = http_describe,
	.driver = &http_driver,
	.forward_mode = true,
	.alpn = "http/1.1,http/1.0",
	.client_alpn = http_policy_client_alpn,
	.on_worker_exit = http_worker_exit,
	.scan = true,
	.auth = true,
	.who = http_auth_who,
	.content = true,
	.audit = true,
	.requests = true,
	.user_limits = true,
	.limit_refusal = http_limit_refusal,
	.handover = true,
	.handover_save = http_handover_save,
	.handover_load = http_handover_load,
};
